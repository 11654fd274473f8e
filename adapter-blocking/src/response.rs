//! The response a call returns: a plain ureq `http::Response<ureq::Body>` that carries the
//! call's [`Report`] in its extensions, with a body whose read errors name the endpoint.
//!
//! The response head is the commit point (SPEC 1): once it arrived the call is decided.
//! A failure while the caller reads the body afterwards is a [`BodyError`] (inside the
//! `io::Error`, or inside `ureq::Error::Io` for ureq's `read_to_*` helpers) that names the
//! endpoint, the attempt and the request id; it is never passed off as a complete body.

use std::fmt;
use std::io::{self, Read};

use baton_core::{EndpointId, Report, RequestId};
use ureq::http::Response;
use ureq::Body;

/// A failure while reading a response body, after the call returned the response.
///
/// It is the inner error of the `io::Error` the body reader returns (its kind is kept).
/// It names the endpoint, the attempt and the call, keeps the call's `may_have_executed`
/// (SPEC 2.6), and says whether a timeout (the body timeout or the call's deadline)
/// ended the read; its `source()` says what failed.
///
/// ```
/// use std::io;
/// use baton_blocking::{BodyError, RequestId};
/// let id = RequestId::parse("req-12345678").unwrap();
/// let e = BodyError::new("backup", 2, id,
///     io::Error::new(io::ErrorKind::UnexpectedEof, "peer closed"));
/// assert!(e.to_string().contains("\"backup\""));
/// assert_eq!(std::error::Error::source(&e).unwrap().to_string(), "peer closed");
/// assert_eq!(e.endpoint(), "backup");
/// assert!(e.may_have_executed() && !e.is_timeout());
/// ```
#[derive(Debug)]
pub struct BodyError {
    endpoint_id: EndpointId,
    attempt: u32,
    request_id: RequestId,
    may_have_executed: bool,
    source: io::Error,
}

impl BodyError {
    /// A body error for `endpoint_id`'s attempt `attempt` of call `request_id`, which may
    /// have executed (an answered call did, unless its status promised otherwise).
    pub fn new(
        endpoint_id: impl Into<EndpointId>,
        attempt: u32,
        request_id: RequestId,
        source: io::Error,
    ) -> Self {
        BodyError {
            endpoint_id: endpoint_id.into(),
            attempt,
            request_id,
            may_have_executed: true,
            source,
        }
    }

    /// The call's `may_have_executed`, as its report says (SPEC 2.6: a body error keeps
    /// it).
    pub fn may_have_executed(&self) -> bool {
        self.may_have_executed
    }

    /// Whether the read ended because a timeout fired: the body timeout, or the call's
    /// deadline.
    pub fn is_timeout(&self) -> bool {
        let ureq = self
            .source
            .get_ref()
            .and_then(|e| e.downcast_ref::<ureq::Error>());
        self.source.kind() == io::ErrorKind::TimedOut
            || matches!(ureq, Some(ureq::Error::Timeout(_)))
    }

    /// The endpoint whose response body failed.
    pub fn endpoint(&self) -> &str {
        &self.endpoint_id
    }

    /// The attempt number whose response this is.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The call's request id.
    pub fn request_id(&self) -> &str {
        self.request_id.as_str()
    }
}

impl fmt::Display for BodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "reading the response body from endpoint {:?} (attempt {}, request id {}) {}",
            self.endpoint_id,
            self.attempt,
            self.request_id,
            if self.is_timeout() {
                "timed out"
            } else {
                "failed"
            }
        )?;
        if f.alternate() {
            baton_core::write_causes(f, self)?;
        }
        Ok(())
    }
}

impl std::error::Error for BodyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// Reads the original body, wrapping every error in a [`BodyError`].
struct NamedReader<R> {
    inner: R,
    endpoint_id: EndpointId,
    attempt: u32,
    request_id: RequestId,
    may_have_executed: bool,
}

impl<R: Read> Read for NamedReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read(buf).map_err(|e| {
            // A cut connection's own kind (`ConnectionReset`, `UnexpectedEof`), hidden from
            // ureq as `Other`.
            let cut = e
                .get_ref()
                .and_then(|i| i.downcast_ref::<crate::classify::CutShort>());
            io::Error::new(
                cut.map_or(e.kind(), |c| c.0.kind()),
                BodyError {
                    endpoint_id: self.endpoint_id.clone(),
                    attempt: self.attempt,
                    request_id: self.request_id.clone(),
                    may_have_executed: self.may_have_executed,
                    source: e,
                },
            )
        })
    }
}

/// Replaces the body with one whose errors name the endpoint and stores the report.
///
/// The rebuilt body keeps the MIME type, not the charset: its reader is read through
/// ureq's once already (which, with ureq's `charset` feature switched on anywhere in the
/// application, converts the text to UTF-8), and a charset on the rebuilt body would have
/// it converted a second time. With that feature on, a text body reads as UTF-8 whatever
/// charset its `Content-Type` header names, and its `Content-Length` header counts the
/// bytes before the conversion. Its `content_length()` is `None` (read the
/// `Content-Length` header instead).
pub(crate) fn finish(response: Response<Body>, report: Report, attempt: u32) -> Response<Body> {
    let (mut parts, body) = response.into_parts();
    // An id clones without allocating (short ids are stored inline).
    let endpoint_id = report
        .attempts
        .iter()
        .find(|a| a.number == attempt)
        .map_or_else(|| EndpointId::from(""), |a| a.endpoint_id.clone());
    let mut builder = Body::builder();
    if let Some(m) = body.mime_type() {
        builder = builder.mime_type(m);
    }
    let reader = NamedReader {
        inner: body.into_reader(),
        endpoint_id,
        attempt,
        request_id: report.request_id.clone(),
        may_have_executed: report.may_have_executed,
    };
    parts.extensions.insert(CallReport(report));
    Response::from_parts(parts, builder.reader(reader))
}

/// The call's report, stored in the returned response's extensions.
#[derive(Debug, Clone)]
pub(crate) struct CallReport(pub(crate) Report);

/// Reads the call's [`Report`] from a response returned by a baton client.
///
/// ```no_run
/// use baton_blocking::{Client, Endpoint, Policy, ResponseExt};
/// let client = Client::new(Policy::builder().endpoint(Endpoint::new("a", "http://127.0.0.1:8080/")))?;
/// let response = client.get("/").call()?;
/// let report = response.report().expect("returned by baton");
/// println!("{} attempt(s), answered by {:?}", report.attempts.len(), report.endpoint_id());
/// # Ok::<_, Box<dyn std::error::Error>>(())
/// ```
pub trait ResponseExt {
    /// The report of the call that returned this response (`None` for a response that
    /// did not come from a baton client: `http::Response` is not baton's own type).
    fn report(&self) -> Option<&Report>;

    /// The id of the endpoint that answered.
    fn endpoint(&self) -> Option<&str> {
        self.report().and_then(Report::result_endpoint)
    }

    /// The call's request id.
    fn request_id(&self) -> Option<&str> {
        self.report().map(|r| r.request_id.as_str())
    }

    /// Whether any attempt may have done the work (SPEC 2.10).
    fn may_have_executed(&self) -> Option<bool> {
        self.report().map(|r| r.may_have_executed)
    }
}

impl<B> ResponseExt for Response<B> {
    fn report(&self) -> Option<&Report> {
        self.extensions().get::<CallReport>().map(|r| &r.0)
    }
}
