//! The engine's source of randomness: a tiny deterministic PRNG.
//!
//! The engine never reads OS randomness. Each call gets its own generator, seeded from the
//! policy's `seed` and the call's sequence number, so the same inputs always give the same
//! jitter and the same generated request ids (SPEC 6, invariant 9). Adapters seed the policy
//! from the OS so that clients that failed together do not back off in lock-step.

/// SplitMix64: small, fast, and good enough for jitter and request ids (not for secrets).
#[derive(Debug, Clone)]
pub(crate) struct Rng {
    state: u64,
}

impl Rng {
    /// A generator whose whole output is decided by `seed`.
    #[inline]
    pub(crate) fn new(seed: u64) -> Self {
        Rng { state: seed }
    }

    /// The next 64 random bits.
    #[inline]
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform value in `[0, 1)`.
    pub(crate) fn next_f64(&mut self) -> f64 {
        // 53 random bits give every representable value in [0, 1) with equal spacing.
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Mixes two words into one seed (used to derive a call's seed from the policy's).
#[inline]
pub(crate) fn mix(a: u64, b: u64) -> u64 {
    let mut r = Rng::new(a ^ b.rotate_left(32) ^ 0xD6E8_FEB8_6659_FD93);
    r.next_u64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_gives_same_sequence() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
    }

    #[test]
    fn unit_interval_values_stay_below_one() {
        let mut r = Rng::new(1);
        for _ in 0..10_000 {
            let x = r.next_f64();
            assert!((0.0..1.0).contains(&x));
        }
    }
}
