//! Parsing `Retry-After` (SPEC 2.6): delta-seconds or an HTTP-date.
//!
//! An HTTP-date is compared with the response's `Date` header when it has a valid one, else
//! with the wall time the adapter supplies. A date in the past means zero; an unparseable
//! value counts as absent; huge values saturate; with several headers the first valid one
//! counts. This module only reads header values; it never reads a clock.

use std::time::{Duration, SystemTime};

use http::header::{HeaderMap, DATE, RETRY_AFTER};

/// Longest delay this module reports; larger requests saturate here (about 136 years).
pub const MAX_RETRY_AFTER_VALUE: Duration = Duration::from_secs(u32::MAX as u64);

/// The delay one `Retry-After` value asks for, or `None` when it is not valid.
///
/// `reference` is the time the date form is measured from: the response's `Date` header,
/// or the adapter's wall clock when there is none.
///
/// ```
/// use std::time::{Duration, SystemTime, UNIX_EPOCH};
/// use baton_core::parse_retry_after;
/// let now = UNIX_EPOCH + Duration::from_secs(1_445_412_480);
/// assert_eq!(parse_retry_after(b"120", Some(now)), Some(Duration::from_secs(120)));
/// assert_eq!(
///     parse_retry_after(b"Wed, 21 Oct 2015 07:30:00 GMT", Some(now)),
///     Some(Duration::from_secs(120)),
/// );
/// assert_eq!(parse_retry_after(b"soon", Some(now)), None);
/// ```
pub fn parse_retry_after(value: &[u8], reference: Option<SystemTime>) -> Option<Duration> {
    // Only SP and HTAB surround a field value (RFC 9110 5.5): a no-break space before the
    // digits makes it no delta-seconds.
    let text = std::str::from_utf8(value).ok()?.trim_matches([' ', '\t']);
    if text.is_empty() {
        return None;
    }
    if text.bytes().all(|b| b.is_ascii_digit()) {
        // delta-seconds; any number of digits, saturating.
        let mut secs: u64 = 0;
        for b in text.bytes() {
            secs = secs.saturating_mul(10).saturating_add(u64::from(b - b'0'));
        }
        return Some(Duration::from_secs(secs).min(MAX_RETRY_AFTER_VALUE));
    }
    let when = httpdate::parse_http_date(text).ok()?;
    let reference = reference?;
    Some(
        when.duration_since(reference)
            .unwrap_or(Duration::ZERO)
            .min(MAX_RETRY_AFTER_VALUE),
    )
}

/// The delay a response asks for: the first valid `Retry-After` header, with an HTTP-date
/// measured from the response's `Date` (first valid one) or else from `wall`.
///
/// ```
/// use std::time::Duration;
/// use baton_core::retry_after_from_headers;
/// let mut headers = http::HeaderMap::new();
/// headers.append("retry-after", "later".parse().unwrap());
/// headers.append("retry-after", "3".parse().unwrap());
/// assert_eq!(retry_after_from_headers(&headers, None), Some(Duration::from_secs(3)));
/// ```
pub fn retry_after_from_headers(headers: &HeaderMap, wall: Option<SystemTime>) -> Option<Duration> {
    let mut values = headers.get_all(RETRY_AFTER).iter().peekable();
    values.peek()?;
    let date = headers.get_all(DATE).iter().find_map(|v| {
        v.to_str()
            .ok()
            .and_then(|s| httpdate::parse_http_date(s.trim()).ok())
    });
    let reference = date.or(wall);
    values.find_map(|v| parse_retry_after(v.as_bytes(), reference))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn retry_after_delta_seconds_is_read_exactly() {
        assert_eq!(parse_retry_after(b"0", None), Some(Duration::ZERO));
        assert_eq!(
            parse_retry_after(b" 7 ", None),
            Some(Duration::from_secs(7))
        );
    }

    #[test]
    fn retry_after_huge_delta_saturates_instead_of_overflowing() {
        let v = parse_retry_after(b"99999999999999999999999999999", None);
        assert_eq!(v, Some(MAX_RETRY_AFTER_VALUE));
    }

    #[test]
    fn retry_after_negative_or_fractional_or_garbage_counts_as_absent() {
        assert_eq!(parse_retry_after(b"-5", None), None);
        assert_eq!(parse_retry_after(b"1.5", None), None);
        assert_eq!(parse_retry_after(b"", None), None);
        assert_eq!(parse_retry_after(&[0xff, 0xfe], None), None);
        assert_eq!(parse_retry_after(b"\xc2\xa0120", None), None);
        assert_eq!(parse_retry_after(b"120\xc2\x85", None), None);
        assert_eq!(
            parse_retry_after(b" \t120\t ", None),
            Some(Duration::from_secs(120))
        );
    }

    #[test]
    fn retry_after_date_in_the_past_means_zero() {
        let now = at(1_445_420_000);
        assert_eq!(
            parse_retry_after(b"Wed, 21 Oct 2015 07:28:00 GMT", Some(now)),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn retry_after_date_without_reference_time_counts_as_absent() {
        assert_eq!(
            parse_retry_after(b"Wed, 21 Oct 2015 07:28:00 GMT", None),
            None
        );
    }

    #[test]
    fn retry_after_date_is_measured_from_the_response_date_header() {
        let mut h = HeaderMap::new();
        h.insert(
            RETRY_AFTER,
            "Wed, 21 Oct 2015 07:28:30 GMT".parse().unwrap(),
        );
        h.insert(DATE, "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap());
        // The wall clock is far off; the Date header wins.
        assert_eq!(
            retry_after_from_headers(&h, Some(at(0))),
            Some(Duration::from_secs(30))
        );
    }

    #[test]
    fn retry_after_date_falls_back_to_wall_time_without_date_header() {
        let mut h = HeaderMap::new();
        h.insert(
            RETRY_AFTER,
            "Wed, 21 Oct 2015 07:28:30 GMT".parse().unwrap(),
        );
        let wall = httpdate::parse_http_date("Wed, 21 Oct 2015 07:28:20 GMT").unwrap();
        assert_eq!(
            retry_after_from_headers(&h, Some(wall)),
            Some(Duration::from_secs(10))
        );
    }

    #[test]
    fn retry_after_first_valid_header_counts() {
        let mut h = HeaderMap::new();
        h.append(RETRY_AFTER, "x".parse().unwrap());
        h.append(RETRY_AFTER, "4".parse().unwrap());
        h.append(RETRY_AFTER, "9".parse().unwrap());
        assert_eq!(
            retry_after_from_headers(&h, None),
            Some(Duration::from_secs(4))
        );
        assert_eq!(retry_after_from_headers(&HeaderMap::new(), None), None);
    }
}
