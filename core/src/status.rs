//! Sets of HTTP status codes (trigger sets, `not_processed`), stored as a fixed bitset so the
//! healthy path checks membership without allocating or hashing.

use std::fmt;

use http::StatusCode;

/// A set of HTTP status codes (100 to 999).
///
/// ```
/// use baton_core::StatusSet;
/// let mut set = StatusSet::from_codes(&[502, 503, 504]);
/// set.insert(500);
/// assert!(set.contains(http::StatusCode::INTERNAL_SERVER_ERROR));
/// assert!(!set.contains(http::StatusCode::OK));
/// assert_eq!(set.codes().collect::<Vec<_>>(), vec![500, 502, 503, 504]);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub struct StatusSet {
    bits: [u64; 15],
}

impl StatusSet {
    /// The empty set.
    pub const fn new() -> Self {
        StatusSet { bits: [0; 15] }
    }

    /// A set holding `codes`; codes outside 100..=999 are ignored (validation of user input
    /// happens where the policy is built, which names the bad value).
    pub fn from_codes(codes: &[u16]) -> Self {
        let mut s = StatusSet::new();
        for &c in codes {
            s.insert(c);
        }
        s
    }

    /// Adds `code`; returns false when it is not a valid status code (100..=999).
    pub fn insert(&mut self, code: u16) -> bool {
        if !(100..=999).contains(&code) {
            return false;
        }
        let i = (code - 100) as usize;
        self.bits[i / 64] |= 1 << (i % 64);
        true
    }

    /// Removes `code`.
    pub fn remove(&mut self, code: u16) {
        if (100..=999).contains(&code) {
            let i = (code - 100) as usize;
            self.bits[i / 64] &= !(1 << (i % 64));
        }
    }

    /// Adds every code of `other`.
    pub fn extend(&mut self, other: &StatusSet) {
        for (a, b) in self.bits.iter_mut().zip(other.bits.iter()) {
            *a |= *b;
        }
    }

    /// Whether `status` is in the set.
    #[inline]
    pub fn contains(&self, status: StatusCode) -> bool {
        self.contains_code(status.as_u16())
    }

    /// Whether the numeric `code` is in the set.
    #[inline]
    pub fn contains_code(&self, code: u16) -> bool {
        if !(100..=999).contains(&code) {
            return false;
        }
        let i = (code - 100) as usize;
        self.bits[i / 64] & (1 << (i % 64)) != 0
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.bits.iter().all(|b| *b == 0)
    }

    /// The codes in ascending order.
    pub fn codes(&self) -> impl Iterator<Item = u16> + '_ {
        (100u16..=999).filter(|c| self.contains_code(*c))
    }
}

impl fmt::Debug for StatusSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.codes()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_set_ignores_codes_outside_the_valid_range() {
        let mut s = StatusSet::new();
        assert!(!s.insert(99));
        assert!(!s.insert(1000));
        assert!(s.insert(999));
        assert!(s.insert(100));
        assert_eq!(s.codes().collect::<Vec<_>>(), vec![100, 999]);
        s.remove(999);
        assert!(!s.contains_code(999));
    }
}
