//! Backoff between attempts at the same endpoint and between rounds (SPEC 2.6).
//!
//! `initial x multiplier^n`, capped, where `n` counts the call's waits so far; then jitter
//! from the call's random source. This module computes durations; it never sleeps.

use std::time::Duration;

use crate::rng::Rng;

/// How a computed backoff delay `d` is randomised.
///
/// In TOML (feature `serde`): `jitter = "full"`, `"none"`, `"proportional"` (the spec's
/// factor, [`Jitter::PROPORTIONAL`]) or `{ proportional = 0.1 }`.
///
/// ```
/// use baton_core::Jitter;
/// assert_eq!(Jitter::default(), Jitter::Full);
/// let j = Jitter::Proportional(0.25); // d shifted by up to ±25 %
/// assert_eq!(j, Jitter::PROPORTIONAL);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Jitter {
    /// Uniform in `[0, d)`: de-correlates clients that failed together (the default).
    #[default]
    Full,
    /// `d` shifted by a uniform amount in `[-f·d, +f·d)`; `f` in `[0, 1]`.
    Proportional(f64),
    /// Exactly `d` (useful in tests and simulations).
    None,
}

impl Jitter {
    /// Proportional jitter with the factor SPEC 8 gives when it is chosen without one:
    /// `d` shifted by up to ±25 %.
    pub const PROPORTIONAL: Jitter = Jitter::Proportional(0.25);
}

/// Reads `"full"`, `"none"`, `"proportional"` ([`Jitter::PROPORTIONAL`]) or a table
/// `{ proportional = f }`; anything else is an error that names the value and the forms.
#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for Jitter {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        const FORMS: &[&str] = &["full", "none", "proportional"];
        struct Form;
        impl<'de> serde::de::Visitor<'de> for Form {
            type Value = Jitter;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(r#""full", "none", "proportional" or { proportional = <factor> }"#)
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Jitter, E> {
                match v {
                    "full" => Ok(Jitter::Full),
                    "none" => Ok(Jitter::None),
                    "proportional" => Ok(Jitter::PROPORTIONAL),
                    other => Err(E::unknown_variant(other, FORMS)),
                }
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Jitter, A::Error> {
                use serde::de::Error;
                let Some(key) = map.next_key::<String>()? else {
                    return Err(A::Error::invalid_length(0, &self));
                };
                if key != "proportional" {
                    return Err(A::Error::unknown_variant(&key, &["proportional"]));
                }
                let f: f64 = map.next_value()?;
                if let Some(more) = map.next_key::<String>()? {
                    return Err(A::Error::unknown_field(&more, &["proportional"]));
                }
                Ok(Jitter::Proportional(f))
            }
        }
        d.deserialize_any(Form)
    }
}

/// The backoff schedule.
///
/// ```
/// use std::time::Duration;
/// use baton_core::{Backoff, Jitter};
/// let b = Backoff { jitter: Jitter::None, ..Backoff::default() };
/// assert_eq!(b.base_delay(0), Duration::from_millis(200));
/// assert_eq!(b.base_delay(1), Duration::from_millis(400));
/// assert_eq!(b.base_delay(10), Duration::from_secs(5)); // capped
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct Backoff {
    /// First delay (default 200 ms).
    #[cfg_attr(feature = "serde", serde(with = "crate::policy::serde_duration"))]
    pub initial: Duration,
    /// Growth per wait (default 2).
    pub multiplier: f64,
    /// Largest delay before jitter (default 5 s).
    #[cfg_attr(feature = "serde", serde(with = "crate::policy::serde_duration"))]
    pub max: Duration,
    /// Randomisation (default full jitter).
    pub jitter: Jitter,
}

/// An endpoint's own backoff settings: each one set replaces the policy's, each one unset
/// inherits it (`[endpoint.backoff]` in TOML).
///
/// ```
/// use std::time::Duration;
/// use baton_core::{Backoff, BackoffOverride};
/// let slow = BackoffOverride { initial: Some(Duration::from_secs(1)), ..BackoffOverride::default() };
/// let b = slow.over(&Backoff::default());
/// assert_eq!(b.initial, Duration::from_secs(1));
/// assert_eq!(b.max, Backoff::default().max);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct BackoffOverride {
    /// The first delay.
    #[cfg_attr(feature = "serde", serde(with = "crate::policy::serde_opt_duration"))]
    pub initial: Option<Duration>,
    /// Growth per wait.
    pub multiplier: Option<f64>,
    /// The largest delay.
    #[cfg_attr(feature = "serde", serde(with = "crate::policy::serde_opt_duration"))]
    pub max: Option<Duration>,
    /// Jitter.
    pub jitter: Option<Jitter>,
}

impl BackoffOverride {
    /// `base` with the settings this override sets.
    pub fn over(&self, base: &Backoff) -> Backoff {
        Backoff {
            initial: self.initial.unwrap_or(base.initial),
            multiplier: self.multiplier.unwrap_or(base.multiplier),
            max: self.max.unwrap_or(base.max),
            jitter: self.jitter.unwrap_or(base.jitter),
        }
    }
}

impl From<Backoff> for BackoffOverride {
    fn from(b: Backoff) -> Self {
        BackoffOverride {
            initial: Some(b.initial),
            multiplier: Some(b.multiplier),
            max: Some(b.max),
            jitter: Some(b.jitter),
        }
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            initial: Duration::from_millis(200),
            multiplier: 2.0,
            max: Duration::from_secs(5),
            jitter: Jitter::Full,
        }
    }
}

impl Backoff {
    /// The delay before jitter for the call's `waits`-th wait (0-based).
    pub fn base_delay(&self, waits: u32) -> Duration {
        let cap = self.max.as_secs_f64();
        let mut d = self.initial.as_secs_f64();
        for _ in 0..waits.min(64) {
            d *= self.multiplier;
            if d >= cap {
                break;
            }
        }
        if !d.is_finite() || d >= cap {
            return self.max;
        }
        Duration::from_secs_f64(d.max(0.0))
    }

    /// The jittered delay for the call's `waits`-th wait.
    pub(crate) fn delay(&self, waits: u32, rng: &mut Rng) -> Duration {
        let d = self.base_delay(waits);
        let secs = d.as_secs_f64();
        let out = match self.jitter {
            Jitter::None => secs,
            Jitter::Full => secs * rng.next_f64(),
            Jitter::Proportional(f) => {
                let f = if f.is_finite() {
                    f.clamp(0.0, 1.0)
                } else {
                    0.0
                };
                secs * (1.0 + f * (2.0 * rng.next_f64() - 1.0))
            }
        };
        if out.is_finite() && out > 0.0 {
            Duration::try_from_secs_f64(out).unwrap_or(self.max)
        } else {
            Duration::ZERO
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_by_multiplier_and_stops_at_cap() {
        let b = Backoff {
            initial: Duration::from_millis(100),
            multiplier: 3.0,
            max: Duration::from_secs(1),
            jitter: Jitter::None,
        };
        assert_eq!(b.base_delay(0), Duration::from_millis(100));
        assert_eq!(b.base_delay(1), Duration::from_millis(300));
        assert_eq!(b.base_delay(2), Duration::from_millis(900));
        assert_eq!(b.base_delay(3), Duration::from_secs(1));
        assert_eq!(b.base_delay(u32::MAX), Duration::from_secs(1));
    }

    #[test]
    fn full_jitter_stays_below_the_base_delay() {
        let b = Backoff::default();
        let mut rng = Rng::new(3);
        for n in 0..20 {
            let d = b.delay(n, &mut rng);
            assert!(d < b.base_delay(n) || b.base_delay(n).is_zero());
        }
    }

    #[test]
    fn proportional_jitter_stays_within_the_fraction() {
        let b = Backoff {
            jitter: Jitter::Proportional(0.25),
            ..Backoff::default()
        };
        let mut rng = Rng::new(9);
        for _ in 0..1000 {
            let d = b.delay(0, &mut rng).as_secs_f64();
            assert!((0.15..=0.25).contains(&d), "{d}");
        }
    }

    #[test]
    fn same_random_source_gives_same_delays() {
        let b = Backoff::default();
        let (mut r1, mut r2) = (Rng::new(5), Rng::new(5));
        for n in 0..10 {
            assert_eq!(b.delay(n, &mut r1), b.delay(n, &mut r2));
        }
    }
}
