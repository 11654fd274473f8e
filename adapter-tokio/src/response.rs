//! The response a call returns: reqwest's response plus the call's report. Its body is read
//! by the caller, after the call: a failure then is a body error naming the endpoint.

use std::future::Future;
use std::time::Instant;

use baton_core::Report;
use bytes::Bytes;
use http::{HeaderMap, StatusCode, Version};

use crate::error::{BoxError, Error};

/// The response of a call: status, headers and body as reqwest gives them, plus the call's
/// [`Report`] (attempts, request id, stop reason, `may_have_executed`) and the endpoint that
/// answered.
///
/// The head arrived before the call returned (the commit point); the body is read here. A
/// failure while reading it is an [`Error::Body`] that names the endpoint, never a short
/// body passed off as complete.
///
/// ```no_run
/// # async fn demo(client: baton_tokio::Client) -> Result<(), baton_tokio::Error> {
/// let resp = client.get("/status").send().await?;
/// println!("{} from {} after {} attempt(s)", resp.status(), resp.endpoint(), resp.report().attempts.len());
/// let text = resp.text().await?;
/// # let _ = text; Ok(()) }
/// ```
pub struct Response {
    inner: reqwest::Response,
    /// Boxed: the response moves several times on its way to the caller and into a body
    /// read, and the report is two thirds of it (328 of 512 bytes).
    report: Box<Report>,
    endpoint: baton_core::EndpointId,
    /// When reading the body through this response must end: the policy's `body_timeout`
    /// from the headers, never past the call's deadline.
    deadline: Option<Instant>,
}

/// The body timeout or the call's deadline passed while the body was being read: the
/// source of an [`Error::Body`].
///
/// ```
/// fn cut_by_time(e: &baton_tokio::Error) -> bool {
///     std::error::Error::source(e).is_some_and(|s| s.is::<baton_tokio::BodyDeadline>())
/// }
/// # let _ = cut_by_time;
/// assert!(baton_tokio::BodyDeadline.to_string().contains("deadline"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyDeadline;

impl std::fmt::Display for BodyDeadline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the body timeout or the call's deadline passed while the body was being read")
    }
}

impl std::error::Error for BodyDeadline {}

impl std::fmt::Debug for Response {
    // reqwest's `Debug` shows the URL (keys, ids): status, endpoint and report only.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Response")
            .field("status", &self.inner.status())
            .field("endpoint", &self.endpoint)
            .field("report", &self.report)
            .finish()
    }
}

impl Response {
    pub(crate) fn new(
        inner: reqwest::Response,
        report: Box<Report>,
        endpoint: baton_core::EndpointId,
        deadline: Option<Instant>,
    ) -> Self {
        Response {
            inner,
            report,
            endpoint,
            deadline,
        }
    }

    /// Reads the body with `read`, held to the body timeout and the call's deadline
    /// (SPEC 2.6): past it, a body error (the report's `may_have_executed` unchanged).
    ///
    /// Not an `async fn`, and the read is made inside the future rather than passed in:
    /// the future then holds reqwest's response and one read, not a copy of each (each
    /// copy is cold memory the call writes).
    fn read_by_deadline<T, F>(
        self,
        read: impl FnOnce(reqwest::Response) -> F,
    ) -> impl Future<Output = Result<T, Error>>
    where
        F: Future<Output = reqwest::Result<T>>,
    {
        let Response {
            inner,
            report,
            endpoint,
            deadline,
        } = self;
        async move {
            let result = match deadline {
                None => read(inner).await.map_err(read_failed),
                Some(d) => in_time(tokio::time::timeout_at(d.into(), read(inner)).await),
            };
            result.map_err(|source| Error::Body {
                endpoint,
                report,
                source,
            })
        }
    }

    /// The status.
    pub fn status(&self) -> StatusCode {
        self.inner.status()
    }

    /// The HTTP version.
    pub fn version(&self) -> Version {
        self.inner.version()
    }

    /// The headers.
    pub fn headers(&self) -> &HeaderMap {
        self.inner.headers()
    }

    /// The body length, when the server announced it.
    pub fn content_length(&self) -> Option<u64> {
        self.inner.content_length()
    }

    /// The final URL (the endpoint's URL, or where its redirects led). Its path and query
    /// may hold secrets: show it with [`baton_core::Origin`].
    pub fn url(&self) -> &reqwest::Url {
        self.inner.url()
    }

    /// The id of the endpoint that answered.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    baton_core::response_report_methods!(report);

    /// Reads the whole body.
    pub fn bytes(self) -> impl Future<Output = Result<Bytes, Error>> {
        self.read_by_deadline(reqwest::Response::bytes)
    }

    /// Reads the whole body as text (decoded as reqwest does).
    pub fn text(self) -> impl Future<Output = Result<String, Error>> {
        self.read_by_deadline(reqwest::Response::text)
    }

    /// Reads the whole body as JSON.
    #[cfg(feature = "json")]
    pub fn json<T: serde::de::DeserializeOwned>(self) -> impl Future<Output = Result<T, Error>> {
        self.read_by_deadline(reqwest::Response::json::<T>)
    }

    /// Reads the next chunk of the body (`None` at the end).
    ///
    /// Held to the same time as [`bytes`](Self::bytes); the report is copied into the
    /// error only when a read fails (not for every chunk).
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, Error> {
        let read = self.inner.chunk();
        let result = match self.deadline {
            None => read.await.map_err(read_failed),
            Some(d) => in_time(tokio::time::timeout_at(d.into(), read).await),
        };
        result.map_err(|source| Error::Body {
            endpoint: self.endpoint.clone(),
            report: self.report.clone(),
            source,
        })
    }

    /// The reqwest response (its body errors are then plain reqwest errors).
    pub fn into_reqwest(self) -> reqwest::Response {
        self.inner
    }

    /// The reqwest response and the report.
    pub fn into_parts(self) -> (reqwest::Response, Report) {
        (self.inner, *self.report)
    }
}

/// A failed body read as a body error's source (reqwest's error without the URL, which may
/// carry keys).
fn read_failed(e: reqwest::Error) -> BoxError {
    Box::new(e.without_url())
}

/// A body read held to a time: its result, or [`BodyDeadline`] when the time passed.
fn in_time<T>(r: Result<reqwest::Result<T>, tokio::time::error::Elapsed>) -> Result<T, BoxError> {
    match r {
        Ok(r) => r.map_err(read_failed),
        Err(_) => Err(Box::new(BodyDeadline)),
    }
}
