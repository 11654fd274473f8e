//! Request identity (SPEC 3): the request id sent unchanged on every attempt.
//!
//! A caller-chosen id is validated (8 to 128 characters of `A-Z a-z 0-9 . _ : -`); a
//! generated one is 26 characters drawn from the supplied random source. Ids of up to 30
//! bytes (every generated one) are stored inline, so creating a call allocates nothing for
//! its id; a longer caller-chosen id is kept in one shared allocation made when it is parsed.

use std::fmt;

use crate::rng::Rng;

/// Shortest accepted caller-chosen request id.
pub const REQUEST_ID_MIN_LEN: usize = 8;
/// Longest accepted caller-chosen request id.
pub const REQUEST_ID_MAX_LEN: usize = 128;
/// Length of a generated request id.
pub const GENERATED_ID_LEN: usize = 26;

/// Alphabet of generated ids (Crockford base32: no look-alike letters).
const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// The id of one call, sent in the request-id header on every attempt and carried by every
/// event and error of the call.
///
/// ```
/// use baton_core::RequestId;
/// let id = RequestId::parse("order-1234:retry").unwrap();
/// assert_eq!(id.as_str(), "order-1234:retry");
/// assert!(RequestId::parse("short").is_err());
/// assert!(RequestId::parse("has space in it").is_err());
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct RequestId(Text);

/// Why a caller-chosen request id was rejected.
///
/// ```
/// use baton_core::{RequestId, RequestIdError};
///
/// let e = RequestId::parse("short").unwrap_err();
/// assert!(matches!(e, RequestIdError::Length { len: 5, .. }));
/// assert_eq!(e.to_string(), r#"request id "short" has 5 characters; it needs 8 to 128"#);
///
/// let e = RequestId::parse("order/1234").unwrap_err();
/// assert!(matches!(e, RequestIdError::Character { found: '/', .. }));
/// assert!(e.to_string().contains(r#""order/1234" contains '/'"#));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RequestIdError {
    /// Fewer than 8 or more than 128 characters.
    #[error("request id {value:?} has {len} characters; it needs 8 to 128")]
    Length {
        /// The rejected value (cut to 160 characters).
        value: String,
        /// Its length in bytes.
        len: usize,
    },
    /// A character outside `A-Z a-z 0-9 . _ : -`.
    #[error("request id {value:?} contains {found:?}; only A-Z a-z 0-9 . _ : - are allowed")]
    Character {
        /// The rejected value (cut to 160 characters).
        value: String,
        /// The first character that is not allowed.
        found: char,
    },
    /// Given twice with different values (a call option and the header, or the header
    /// twice): which one the caller meant cannot be known, and one would be lost.
    #[error(
        "request id given twice with different values ({first:?} and {second:?}); give it once"
    )]
    Twice {
        /// The call option's value, or the header's first (cut to 160 characters).
        first: String,
        /// The other value (cut to 160 characters).
        second: String,
    },
}

fn shown(value: &str) -> String {
    value.chars().take(160).collect()
}

impl RequestId {
    /// Validates a caller-chosen id.
    pub fn parse(value: &str) -> Result<Self, RequestIdError> {
        let len = value.len();
        if let Some(found) = value
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')))
        {
            return Err(RequestIdError::Character {
                value: shown(value),
                found,
            });
        }
        if !(REQUEST_ID_MIN_LEN..=REQUEST_ID_MAX_LEN).contains(&len) {
            return Err(RequestIdError::Length {
                value: shown(value),
                len,
            });
        }
        Ok(RequestId(Text::from(value)))
    }

    /// Generates a 26-character id from the call's random source.
    #[inline]
    pub(crate) fn generate(rng: &mut Rng) -> Self {
        let mut buf = [0u8; TEXT_INLINE];
        // 26 characters of 5 bits: 12 from each of two random words (60 bits each), the
        // last 2 from their remaining high bits mixed together. One character per look-up
        // in the 32-byte alphabet: a table of every pair (2 KB) took half as many look-ups
        // but touched about 13 of its 32 cache lines a call, each a miss when the call runs
        // cold between network reads.
        let (a, b) = (rng.next_u64(), rng.next_u64());
        let tail = (a >> 60) | ((b >> 60) << 4) | ((a ^ b.rotate_left(29)) & 0b11) << 8;
        for (k, word) in [a, b].into_iter().enumerate() {
            for m in 0..12 {
                buf[k * 12 + m] = ALPHABET[((word >> (5 * m)) & 31) as usize];
            }
        }
        buf[24] = ALPHABET[(tail & 31) as usize];
        buf[25] = ALPHABET[((tail >> 5) & 31) as usize];
        RequestId(Text::Inline {
            len: GENERATED_ID_LEN as u8,
            buf,
        })
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// The id's bytes (ASCII), without checking them as text again.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }

    /// An empty id, left behind when a finished call's id moves into its report.
    pub(crate) fn taken() -> Self {
        RequestId(Text::Inline {
            len: 0,
            buf: [0; TEXT_INLINE],
        })
    }
}

impl fmt::Debug for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An endpoint's id as a report carries it: ids of up to 30 bytes are stored inline, so
/// recording an attempt copies bytes and touches no reference count that other threads'
/// calls write; longer ids share one allocation with the policy.
///
/// ```
/// use baton_core::EndpointId;
/// let id = EndpointId::from("primary");
/// assert_eq!(&*id, "primary");
/// assert_eq!(id, "primary");
/// assert_eq!(EndpointId::from("x".repeat(40).as_str()).len(), 40);
/// ```
pub struct EndpointId(Text);

impl Clone for EndpointId {
    fn clone(&self) -> Self {
        EndpointId(self.0.clone())
    }

    /// Copies an inline id over an inline id in place: a report's record is filled
    /// where it lies, and a copy of a clone built aside would wait on the stores that
    /// built it.
    #[inline]
    fn clone_from(&mut self, source: &Self) {
        match (&mut self.0, &source.0) {
            (Text::Inline { len, buf }, Text::Inline { len: l, buf: b }) => {
                *len = *l;
                *buf = *b;
            }
            (me, source) => *me = source.clone(),
        }
    }
}

/// Short text stored inline (32 bytes in all), longer text in one shared allocation: the
/// representation of both ids.
#[derive(Clone)]
enum Text {
    Inline { len: u8, buf: [u8; TEXT_INLINE] },
    Shared(std::sync::Arc<str>),
}

/// Longest text stored inline.
const TEXT_INLINE: usize = 30;

impl Text {
    fn as_bytes(&self) -> &[u8] {
        match self {
            Text::Inline { len, buf } => &buf[..*len as usize],
            Text::Shared(s) => s.as_bytes(),
        }
    }

    fn as_str(&self) -> &str {
        match self {
            // Only whole `str`s (or ASCII drawn from ALPHABET) are ever copied in.
            Text::Inline { len, buf } => std::str::from_utf8(&buf[..*len as usize]).unwrap_or(""),
            Text::Shared(s) => s,
        }
    }
}

impl From<&str> for Text {
    fn from(text: &str) -> Self {
        if text.len() <= TEXT_INLINE {
            let mut buf = [0u8; TEXT_INLINE];
            buf[..text.len()].copy_from_slice(text.as_bytes());
            Text::Inline {
                len: text.len() as u8,
                buf,
            }
        } else {
            Text::Shared(text.into())
        }
    }
}

impl PartialEq for Text {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Text {}

impl std::hash::Hash for Text {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl EndpointId {
    /// An empty id, for a record slot that holds no record.
    pub(crate) fn none() -> Self {
        EndpointId(Text::Inline {
            len: 0,
            buf: [0; TEXT_INLINE],
        })
    }
}

impl From<&str> for EndpointId {
    fn from(id: &str) -> Self {
        EndpointId(Text::from(id))
    }
}

impl From<String> for EndpointId {
    fn from(id: String) -> Self {
        EndpointId(Text::from(id.as_str()))
    }
}

/// A long id keeps the shared text it is given (no copy); a short one is stored inline.
impl From<std::sync::Arc<str>> for EndpointId {
    fn from(id: std::sync::Arc<str>) -> Self {
        if id.len() <= TEXT_INLINE {
            return EndpointId(Text::from(&*id));
        }
        EndpointId(Text::Shared(id))
    }
}

impl std::ops::Deref for EndpointId {
    type Target = str;
    fn deref(&self) -> &str {
        self.0.as_str()
    }
}

impl AsRef<str> for EndpointId {
    fn as_ref(&self) -> &str {
        self
    }
}

impl std::borrow::Borrow<str> for EndpointId {
    fn borrow(&self) -> &str {
        self
    }
}

impl PartialEq for EndpointId {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl Eq for EndpointId {}

impl std::hash::Hash for EndpointId {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.hash(state)
    }
}

impl PartialEq<str> for EndpointId {
    fn eq(&self, other: &str) -> bool {
        &**self == other
    }
}

impl PartialEq<&str> for EndpointId {
    fn eq(&self, other: &&str) -> bool {
        &**self == *other
    }
}

impl fmt::Debug for EndpointId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl fmt::Display for EndpointId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_id_cloned_over_another_equals_its_source_in_every_form() {
        let long = "x".repeat(40);
        let forms = ["a", "primary-eu-west", long.as_str(), ""];
        for over in forms {
            for from in forms {
                let mut id = EndpointId::from(over);
                id.clone_from(&EndpointId::from(from));
                assert_eq!(&*id, from, "{from:?} cloned over {over:?}");
            }
        }
        assert_eq!(&*EndpointId::none(), "");
    }

    #[test]
    fn an_endpoint_id_from_a_string_or_shared_text_equals_the_one_from_str() {
        let long = "an-endpoint-id-longer-than-thirty-bytes";
        for text in ["primary", long] {
            let shared: std::sync::Arc<str> = text.into();
            assert_eq!(EndpointId::from(text.to_string()), EndpointId::from(text));
            assert_eq!(EndpointId::from(shared.clone()), EndpointId::from(text));
            assert_eq!(&*EndpointId::from(shared), text);
        }
        let shared: std::sync::Arc<str> = long.into();
        let EndpointId(Text::Shared(kept)) = EndpointId::from(shared.clone()) else {
            panic!("a long id is shared text");
        };
        assert!(
            std::sync::Arc::ptr_eq(&kept, &shared),
            "the text was copied"
        );
    }

    #[test]
    fn request_id_accepts_allowed_characters_at_both_length_limits() {
        assert!(RequestId::parse("abcdefgh").is_ok());
        let long = RequestId::parse(&"a".repeat(128)).unwrap();
        assert_eq!(long.as_str(), "a".repeat(128));
        assert_eq!(long, RequestId::parse(&"a".repeat(128)).unwrap());
        assert!(RequestId::parse("A-Z.a_z:0-9").is_ok());
    }

    #[test]
    fn request_id_rejects_bad_length_and_characters_with_the_value() {
        let e = RequestId::parse("1234567").unwrap_err();
        assert!(e.to_string().contains("\"1234567\""), "{e}");
        assert!(RequestId::parse(&"a".repeat(129)).is_err());
        let e = RequestId::parse("abcdefgh/").unwrap_err();
        assert!(matches!(e, RequestIdError::Character { found: '/', .. }));
        assert!(RequestId::parse("abcdéfgh").is_err());
        assert!(RequestId::parse("").is_err());
    }

    #[test]
    fn generated_request_id_is_the_5_bit_groups_of_two_random_words() {
        for seed in 0..200 {
            let mut rng = Rng::new(seed);
            let (a, b) = (rng.next_u64(), rng.next_u64());
            let tail = (a >> 60) | ((b >> 60) << 4) | ((a ^ b.rotate_left(29)) & 0b11) << 8;
            let mut want = String::new();
            for (word, n) in [(a, 12), (b, 12), (tail, 2)] {
                for j in 0..n {
                    want.push(ALPHABET[((word >> (5 * j)) & 31) as usize] as char);
                }
            }
            assert_eq!(RequestId::generate(&mut Rng::new(seed)).as_str(), want);
        }
    }

    #[test]
    fn generated_request_id_has_26_valid_characters_and_depends_on_seed() {
        let a = RequestId::generate(&mut Rng::new(1));
        let b = RequestId::generate(&mut Rng::new(1));
        let c = RequestId::generate(&mut Rng::new(2));
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(a.as_str().len(), 26);
        assert!(RequestId::parse(a.as_str()).is_ok());
    }
}
