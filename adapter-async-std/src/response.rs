//! The response a call returns: its head, the report of the call, and a body read on
//! demand from the connection it arrived on.
//!
//! Reading the body drives that connection; when the body has been read to its end, the
//! connection goes back to the pool. A response dropped before its body was read closes
//! its connection. A body that ends early (the connection closed before `Content-Length`
//! bytes, a reset) is an [`Error::Body`] naming the endpoint and attempt, never a short
//! body passed off as complete.

use std::fmt;
use std::future::poll_fn;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use baton_core::Report;
use bytes::{Bytes, BytesMut};
use http::{HeaderMap, StatusCode, Version};
use http_body::Body as _;
use hyper::body::Incoming;

use crate::attempt::{timeout_at, Exchange};
use crate::error::{BodyError, Error};
use crate::pool::Lease;

/// A response: status, headers, the call's report, and the body.
///
/// ```no_run
/// # async fn demo(client: baton_async_std::Client) -> Result<(), baton_async_std::Error> {
/// let resp = client.get("/health").send().await?;
/// assert!(resp.status().is_success());
/// println!("answered by {} after {} attempt(s)", resp.endpoint(), resp.report().attempts.len());
/// let text = resp.text().await?;
/// # let _ = text; Ok(()) }
/// ```
pub struct Response {
    head: http::response::Parts,
    body: BodyState,
    lease: Option<Lease>,
    endpoint: Arc<str>,
    attempt: u32,
    report: Box<Report>,
    /// When reading the body must end: the policy's `body_timeout` from the headers,
    /// never past the call's deadline.
    read_by: Option<Instant>,
}

/// Where reading a response's body is.
enum BodyState {
    /// Bytes may still come.
    Open(Incoming),
    /// Read to its end.
    Ended,
    /// Failed, or past its time (`timed_out`): every later read fails again.
    Cut { timed_out: bool },
}

impl Response {
    pub(crate) fn new(
        ex: Exchange,
        endpoint: Arc<str>,
        attempt: u32,
        report: Box<Report>,
        read_by: Option<Instant>,
    ) -> Self {
        let Exchange { head, body, lease } = ex;
        let mut r = Response {
            head,
            body: BodyState::Open(body),
            lease,
            endpoint,
            attempt,
            report,
            read_by,
        };
        if matches!(&r.body, BodyState::Open(b) if b.is_end_stream()) {
            r.body = BodyState::Ended;
            if let Some(l) = r.lease.take() {
                l.release();
            }
        }
        r
    }

    /// The status.
    pub fn status(&self) -> StatusCode {
        self.head.status
    }

    /// The HTTP version of the response (HTTP/1.0 or HTTP/1.1).
    pub fn version(&self) -> Version {
        self.head.version
    }

    /// The headers.
    pub fn headers(&self) -> &HeaderMap {
        &self.head.headers
    }

    /// The id of the endpoint that answered.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The number of the attempt that got this response.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    baton_core::response_report_methods!(report);

    fn body_error(&self, timed_out: bool, source: Option<hyper::Error>) -> Error {
        Error::Body(Box::new(BodyError {
            endpoint: self.endpoint.clone(),
            attempt: self.attempt,
            report: self.report.clone(),
            timed_out,
            source,
        }))
    }

    fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Bytes>, Error>> {
        loop {
            let body = match &mut self.body {
                BodyState::Open(body) => body,
                BodyState::Ended => return Poll::Ready(Ok(None)),
                // A cut body is never passed off as complete by a later read (SPEC 1).
                BodyState::Cut { timed_out } => {
                    let timed_out = *timed_out;
                    return Poll::Ready(Err(self.body_error(timed_out, None)));
                }
            };
            // What hyper already parsed is taken first; the connection is driven (a read
            // system call) only when the body has nothing ready.
            let mut polled = Pin::new(&mut *body).poll_frame(cx);
            if polled.is_pending() {
                if let Some(l) = self.lease.as_mut() {
                    l.conn.drive(cx);
                }
                polled = Pin::new(body).poll_frame(cx);
            }
            match polled {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => {
                    self.body = BodyState::Ended;
                    if let Some(l) = self.lease.take() {
                        l.release();
                    }
                    return Poll::Ready(Ok(None));
                }
                Poll::Ready(Some(Err(e))) => {
                    self.body = BodyState::Cut { timed_out: false };
                    self.lease = None;
                    return Poll::Ready(Err(self.body_error(false, Some(e))));
                }
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(d) if !d.is_empty() => return Poll::Ready(Ok(Some(d))),
                    _ => continue, // trailers, empty chunks
                },
            }
        }
    }

    /// The next chunk of the body; `None` at its end. The body timeout, when set, applies
    /// to each chunk.
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, Error> {
        match self.read_by() {
            None => poll_fn(|cx| self.poll_chunk(cx)).await,
            Some(at) => match timeout_at(at, poll_fn(|cx| self.poll_chunk(cx))).await {
                Some(r) => r,
                None => {
                    self.body = BodyState::Cut { timed_out: true };
                    self.lease = None;
                    Err(self.body_error(true, None))
                }
            },
        }
    }

    /// The body without a total read limit (an event stream's: its idle timeout watches
    /// it instead).
    pub(crate) fn endless(mut self) -> Self {
        self.read_by = None;
        self
    }

    fn read_by(&self) -> Option<Instant> {
        self.read_by
    }

    async fn read_all(&mut self) -> Result<Bytes, Error> {
        let mut first: Option<Bytes> = None;
        let mut buf: Option<BytesMut> = None;
        while let Some(c) = poll_fn(|cx| self.poll_chunk(cx)).await? {
            match (&mut first, &mut buf) {
                (None, None) => first = Some(c),
                (Some(f), None) => {
                    let mut b = BytesMut::with_capacity(f.len() + c.len());
                    b.extend_from_slice(f);
                    b.extend_from_slice(&c);
                    first = None;
                    buf = Some(b);
                }
                (_, Some(b)) => b.extend_from_slice(&c),
            }
        }
        Ok(match (first, buf) {
            (_, Some(b)) => b.freeze(),
            (Some(f), None) => f,
            (None, None) => Bytes::new(),
        })
    }

    /// The whole body. The body timeout, when set, bounds the whole read.
    pub async fn bytes(mut self) -> Result<Bytes, Error> {
        self.collect().await
    }

    /// Reads the whole body, within the body timeout.
    async fn collect(&mut self) -> Result<Bytes, Error> {
        match self.read_by() {
            None => self.read_all().await,
            Some(at) => match timeout_at(at, self.read_all()).await {
                Some(r) => r,
                None => Err(self.body_error(true, None)),
            },
        }
    }

    /// The whole body as text (invalid UTF-8 replaced).
    pub async fn text(self) -> Result<String, Error> {
        let b = self.bytes().await?;
        Ok(String::from_utf8_lossy(&b).into_owned())
    }

    /// The whole body, parsed as JSON.
    #[cfg(feature = "json")]
    pub async fn json<T: serde::de::DeserializeOwned>(mut self) -> Result<T, Error> {
        let b = self.collect().await?;
        serde_json::from_slice(&b).map_err(|source| {
            Error::Decode(Box::new(crate::error::DecodeError {
                endpoint: self.endpoint,
                report: self.report,
                source,
            }))
        })
    }
}

impl fmt::Debug for Response {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Response")
            .field("status", &self.head.status)
            .field("endpoint", &self.endpoint)
            .field("attempt", &self.attempt)
            .field("request_id", &self.report.request_id)
            .field("headers", &self.head.headers)
            .finish()
    }
}
