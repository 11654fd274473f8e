//! Limits on what goes out and what comes back, the same on every adapter (SPEC 5).
//!
//! HTTP clients differ at their edges: hyper refuses more than 100 response headers where
//! ureq takes them, ureq refuses a 64 KiB response head where hyper takes it, and the
//! `http` crate's header map panics past 32,768 entries. baton sets one table and every
//! adapter enforces it the same way: request limits before anything is sent (the call is
//! rejected locally, naming the limit), response limits on the response head (an
//! over-limit head is a protocol failure of that attempt: ambiguous, since the request was
//! sent).
//!
//! | what | limit | checked |
//! |---|---|---|
//! | request headers (caller's, per call) | [`MAX_REQUEST_HEADERS`] | when added, before any send |
//! | request header section (names + values) | [`MAX_REQUEST_HEADER_BYTES`] | before any send |
//! | per-endpoint headers | [`MAX_ENDPOINT_HEADERS`] | when the policy is built |
//! | method | [`MAX_METHOD_LEN`] bytes, an HTTP token | before any send |
//! | response headers | [`MAX_RESPONSE_HEADERS`] | on the response head |
//! | response header section | [`MAX_RESPONSE_HEADER_BYTES`] | on the response head |
//!
//! Framing headers (`content-length`, `transfer-encoding`, `connection`, `te` other than
//! `te: trailers`, `upgrade`)
//! belong to the HTTP client, which frames the body it actually sends: a caller's or an
//! endpoint's value could cut the body short or smuggle a second request, so they are
//! rejected from callers, endpoint headers and header-name settings; `host` is rejected as
//! an endpoint header (the Host rule of SPEC 3 decides it).

use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::Method;

/// Most headers a caller may give one call.
pub const MAX_REQUEST_HEADERS: usize = 256;
/// Most bytes of header names and values a caller may give one call.
pub const MAX_REQUEST_HEADER_BYTES: usize = 64 * 1024;
/// Most headers one endpoint may carry.
pub const MAX_ENDPOINT_HEADERS: usize = 64;
/// Longest method name.
pub const MAX_METHOD_LEN: usize = 32;
/// Most headers a response head may have.
pub const MAX_RESPONSE_HEADERS: usize = 100;
/// Most bytes of header names and values a response head may have.
pub const MAX_RESPONSE_HEADER_BYTES: usize = 64 * 1024;

/// Headers that frame the message: the HTTP client's alone.
pub const FRAMING_HEADERS: [&str; 5] = [
    "content-length",
    "transfer-encoding",
    "connection",
    "te",
    "upgrade",
];

/// What a request or response head broke.
///
/// ```
/// use baton_core::LimitError;
/// let e = LimitError::Framing("content-length".into());
/// assert!(e.to_string().contains("content-length"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LimitError {
    /// A framing header from a caller or in the configuration.
    #[error("header {0:?} frames the message and is set by the HTTP client only")]
    Framing(String),
    /// Too many headers.
    #[error("{count} headers; at most {max} are accepted")]
    TooManyHeaders {
        /// How many there were (or would be).
        count: usize,
        /// The limit.
        max: usize,
    },
    /// The header section is too large.
    #[error("headers of {bytes} bytes; at most {max} are accepted")]
    HeadersTooLarge {
        /// Its size (names and values).
        bytes: usize,
        /// The limit.
        max: usize,
    },
    /// The method is too long or not an HTTP token.
    #[error("method of {len} bytes; at most {max} are accepted")]
    Method {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
}

/// Whether a caller's header frames the message: one of the [`FRAMING_HEADERS`], except
/// `te: trailers`. That one value is what HTTP/2 allows of `te` (RFC 9113 8.2.2) and what
/// gRPC requires on every request; it announces that the client accepts trailers and
/// frames nothing. Any other `te` is refused.
///
/// ```
/// let v = |s: &'static str| http::HeaderValue::from_static(s);
/// assert!(!baton_core::frames_message("te", &v("trailers")));
/// assert!(baton_core::frames_message("TE", &v("gzip")));
/// assert!(baton_core::frames_message("content-length", &v("8")));
/// assert!(!baton_core::frames_message("x-api-key", &v("k")));
/// ```
pub fn frames_message(name: &str, value: &HeaderValue) -> bool {
    is_framing_header(name)
        && !(name.eq_ignore_ascii_case("te")
            && value
                .to_str()
                .is_ok_and(|v| v.trim().eq_ignore_ascii_case("trailers")))
}

/// Whether `name` is one of the [`FRAMING_HEADERS`].
///
/// ```
/// assert!(baton_core::is_framing_header("Transfer-Encoding"));
/// assert!(!baton_core::is_framing_header("x-api-key"));
/// ```
pub fn is_framing_header(name: &str) -> bool {
    FRAMING_HEADERS.iter().any(|f| f.eq_ignore_ascii_case(name))
}

fn size(headers: &HeaderMap) -> usize {
    headers
        .iter()
        .map(|(n, v)| n.as_str().len() + v.len())
        .sum()
}

/// Appends a caller's header to `headers` within the request limits: adapters' request
/// builders add every header through this, so no input can make the header map panic.
///
/// ```
/// use baton_core::append_request_header;
/// let mut h = http::HeaderMap::new();
/// append_request_header(&mut h, "x-a".parse().unwrap(), "1".parse().unwrap()).unwrap();
/// assert!(append_request_header(&mut h, "content-length".parse().unwrap(), "8".parse().unwrap()).is_err());
/// ```
pub fn append_request_header(
    headers: &mut HeaderMap,
    name: HeaderName,
    value: HeaderValue,
) -> Result<(), LimitError> {
    if frames_message(name.as_str(), &value) {
        return Err(LimitError::Framing(name.as_str().to_string()));
    }
    if headers.len() >= MAX_REQUEST_HEADERS {
        return Err(LimitError::TooManyHeaders {
            count: headers.len() + 1,
            max: MAX_REQUEST_HEADERS,
        });
    }
    headers
        .try_append(name, value)
        .map(|_| ())
        .map_err(|_| LimitError::TooManyHeaders {
            count: headers.len() + 1,
            max: MAX_REQUEST_HEADERS,
        })
}

/// Checks a call's method and headers against the request limits (before any send).
#[inline]
pub fn check_request(method: &Method, headers: &HeaderMap) -> Result<(), LimitError> {
    if headers.is_empty() && method.as_str().len() <= MAX_METHOD_LEN {
        return Ok(());
    }
    check_request_headers(method, headers)
}

/// [`check_request`] for a request with headers.
#[inline(never)]
fn check_request_headers(method: &Method, headers: &HeaderMap) -> Result<(), LimitError> {
    let len = method.as_str().len();
    if len > MAX_METHOD_LEN {
        return Err(LimitError::Method {
            len,
            max: MAX_METHOD_LEN,
        });
    }
    if let Some((name, _)) = headers.iter().find(|(n, v)| frames_message(n.as_str(), v)) {
        return Err(LimitError::Framing(name.as_str().to_string()));
    }
    if headers.len() > MAX_REQUEST_HEADERS {
        return Err(LimitError::TooManyHeaders {
            count: headers.len(),
            max: MAX_REQUEST_HEADERS,
        });
    }
    let bytes = size(headers);
    if bytes > MAX_REQUEST_HEADER_BYTES {
        return Err(LimitError::HeadersTooLarge {
            bytes,
            max: MAX_REQUEST_HEADER_BYTES,
        });
    }
    Ok(())
}

/// Checks a response head against the response limits.
///
/// ```
/// let mut h = http::HeaderMap::new();
/// h.insert("x-a", "1".parse().unwrap());
/// assert!(baton_core::check_response_head(&h).is_ok());
/// ```
pub fn check_response_head(headers: &HeaderMap) -> Result<(), LimitError> {
    if headers.len() > MAX_RESPONSE_HEADERS {
        return Err(LimitError::TooManyHeaders {
            count: headers.len(),
            max: MAX_RESPONSE_HEADERS,
        });
    }
    let bytes = size(headers);
    if bytes > MAX_RESPONSE_HEADER_BYTES {
        return Err(LimitError::HeadersTooLarge {
            bytes,
            max: MAX_RESPONSE_HEADER_BYTES,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thirty_thousand_headers_never_panic_and_stop_at_the_limit() {
        let mut h = HeaderMap::new();
        let mut first_error = None;
        for i in 0..30_000 {
            let name = HeaderName::try_from(format!("x-h{i}")).unwrap();
            if let Err(e) = append_request_header(&mut h, name, HeaderValue::from_static("v")) {
                first_error.get_or_insert(e);
            }
        }
        assert_eq!(h.len(), MAX_REQUEST_HEADERS);
        assert_eq!(
            first_error,
            Some(LimitError::TooManyHeaders {
                count: MAX_REQUEST_HEADERS + 1,
                max: MAX_REQUEST_HEADERS
            })
        );
    }

    #[test]
    fn framing_headers_are_refused_in_any_case() {
        for name in FRAMING_HEADERS {
            let mut h = HeaderMap::new();
            let upper = HeaderName::try_from(name.to_ascii_uppercase()).unwrap();
            assert!(append_request_header(&mut h, upper, HeaderValue::from_static("1")).is_err());
            h.insert(
                HeaderName::try_from(name).unwrap(),
                HeaderValue::from_static("1"),
            );
            assert_eq!(
                check_request(&Method::POST, &h),
                Err(LimitError::Framing(name.to_string()))
            );
        }
    }

    #[test]
    fn te_trailers_is_the_one_framing_value_a_caller_may_send() {
        let mut h = HeaderMap::new();
        let te = HeaderName::from_static("te");
        append_request_header(&mut h, te.clone(), HeaderValue::from_static("trailers")).unwrap();
        assert_eq!(check_request(&Method::POST, &h), Ok(()));
        assert!(
            append_request_header(&mut h, te.clone(), HeaderValue::from_static("gzip")).is_err()
        );
        h.append(te, HeaderValue::from_static("trailers, deflate"));
        assert_eq!(
            check_request(&Method::POST, &h),
            Err(LimitError::Framing("te".to_string()))
        );
    }

    #[test]
    fn long_methods_and_large_heads_are_refused() {
        let m = Method::from_bytes(&[b'X'; 33]).unwrap();
        assert!(check_request(&m, &HeaderMap::new()).is_err());
        let mut h = HeaderMap::new();
        h.insert("x-big", HeaderValue::from_str(&"a".repeat(70_000)).unwrap());
        assert!(check_request(&Method::GET, &h).is_err());
        assert!(check_response_head(&h).is_err());
        let mut h = HeaderMap::new();
        for i in 0..101 {
            h.insert(
                HeaderName::try_from(format!("x-{i}")).unwrap(),
                HeaderValue::from_static("v"),
            );
        }
        assert!(check_response_head(&h).is_err());
    }
}
