//! Opt-in buffering of a streaming request body (SPEC 2.4): read up to a stated size so the
//! body can be replayed; a body over the limit is sent once, unreplayable, with what was
//! already read put back in front of the rest of the stream. The engine never buffers on
//! its own, and neither does this crate unless asked.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body as HttpBody, Frame, SizeHint};
use http_body_util::BodyExt;

use crate::error::BoxError;

/// What buffering a stream gave.
pub(crate) enum Buffered {
    /// The whole body, within the limit: replayable.
    Complete(Bytes),
    /// Over the limit (or the stream failed while buffering): the bytes read so far in
    /// front of the rest of the stream, to be sent once.
    OverLimit(reqwest::Body),
}

/// Reads `body` up to `limit` bytes.
pub(crate) async fn buffer(mut body: reqwest::Body, limit: usize) -> Buffered {
    let mut buf = BytesMut::new();
    loop {
        match body.frame().await {
            None => return Buffered::Complete(buf.freeze()),
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    buf.extend_from_slice(&data);
                    if buf.len() > limit {
                        return Buffered::OverLimit(reqwest::Body::wrap(Prefixed {
                            prefix: Some(buf.freeze()),
                            rest: body,
                            error: None,
                        }));
                    }
                }
                // Trailers are dropped: reqwest sends none for HTTP/1.1 bodies either.
            }
            Some(Err(e)) => {
                // Keep the failure for the send, so it surfaces as a body error there.
                return Buffered::OverLimit(reqwest::Body::wrap(Prefixed {
                    prefix: Some(buf.freeze()),
                    rest: reqwest::Body::from(Bytes::new()),
                    error: Some(e.into()),
                }));
            }
        }
    }
}

/// Bytes already read, then the rest of the stream (or the error that stopped it): a
/// request body buffered past its limit, or a response body read ahead for the
/// classifier ([`peek`](crate::peek)).
pub(crate) struct Prefixed {
    prefix: Option<Bytes>,
    rest: reqwest::Body,
    error: Option<BoxError>,
}

impl Prefixed {
    /// `prefix`, then `rest`.
    pub(crate) fn new(prefix: Bytes, rest: reqwest::Body) -> Self {
        Prefixed {
            prefix: Some(prefix),
            rest,
            error: None,
        }
    }
}

impl HttpBody for Prefixed {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if let Some(p) = self.prefix.take() {
            if !p.is_empty() {
                return Poll::Ready(Some(Ok(Frame::data(p))));
            }
        }
        if let Some(e) = self.error.take() {
            return Poll::Ready(Some(Err(e)));
        }
        Pin::new(&mut self.rest)
            .poll_frame(cx)
            .map(|o| o.map(|r| r.map_err(Into::into)))
    }

    fn is_end_stream(&self) -> bool {
        self.prefix.as_ref().is_none_or(Bytes::is_empty)
            && self.error.is_none()
            && self.rest.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let h = self.rest.size_hint();
        let p = self.prefix.as_ref().map_or(0, |p| p.len() as u64);
        let mut out = SizeHint::new();
        if let Some(u) = h.upper() {
            out.set_upper(u.saturating_add(p));
        }
        out.set_lower(h.lower().saturating_add(p));
        out
    }
}

/// A request body that records when hyper first looks at it to write the request (the
/// connection was ready and the head is being encoded): until then no byte of the request
/// can have been written, so an attempt timer firing before it fired in the connect phase
/// (or while waiting for a pooled connection), and the attempt is *undelivered* (SPEC 2.6:
/// the attempt timeout starts when the connection is ready).
///
/// hyper's HTTP/1 and HTTP/2 clients call `is_end_stream` on the body right before they
/// write the request head; reqwest and hyper-util do not touch the body before that.
pub(crate) struct Tracked {
    inner: reqwest::Body,
    written: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Tracked {
    /// Wraps `inner` (no body: an empty one); the flag turns true once it is being sent.
    pub(crate) fn wrap(
        inner: Option<reqwest::Body>,
    ) -> (reqwest::Body, std::sync::Arc<std::sync::atomic::AtomicBool>) {
        let written = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let body = Tracked {
            inner: inner.unwrap_or_else(|| reqwest::Body::from(Bytes::new())),
            written: written.clone(),
        };
        (reqwest::Body::wrap(body), written)
    }

    fn mark(&self) {
        self.written
            .store(true, std::sync::atomic::Ordering::Release);
    }
}

impl HttpBody for Tracked {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.mark();
        Pin::new(&mut self.inner)
            .poll_frame(cx)
            .map(|o| o.map(|r| r.map_err(Into::into)))
    }

    fn is_end_stream(&self) -> bool {
        self.mark();
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
