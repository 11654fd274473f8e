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
    /// Over the limit: the bytes read so far in front of the rest of the stream, to be
    /// sent once.
    OverLimit(reqwest::Body),
    /// The stream failed while it was being read: the request cannot be sent (the call is
    /// rejected locally, as on every adapter). Sent, its body would have broken partway,
    /// an ambiguous failure of a request that never left whole.
    Failed(BoxError),
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
                        let read = Prefixed::new(buf.freeze(), body);
                        return Buffered::OverLimit(reqwest::Body::wrap(read));
                    }
                }
                // Trailers are dropped: reqwest sends none for HTTP/1.1 bodies either.
            }
            Some(Err(e)) => return Buffered::Failed(e.into()),
        }
    }
}

/// Bytes already read, then the rest of the stream: a
/// request body buffered past its limit, or a response body read ahead for the
/// classifier ([`peek`](crate::peek)).
pub(crate) struct Prefixed {
    prefix: Option<Bytes>,
    rest: reqwest::Body,
}

impl Prefixed {
    /// `prefix`, then `rest`.
    pub(crate) fn new(prefix: Bytes, rest: reqwest::Body) -> Self {
        Prefixed {
            prefix: Some(prefix),
            rest,
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
        Pin::new(&mut self.rest)
            .poll_frame(cx)
            .map(|o| o.map(|r| r.map_err(Into::into)))
    }

    fn is_end_stream(&self) -> bool {
        self.prefix.as_ref().is_none_or(Bytes::is_empty) && self.rest.is_end_stream()
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

/// A request body that records what became of the request: hyper looked at it to write
/// the request head, or it was dropped before anything looked at it.
///
/// hyper's HTTP/1 and HTTP/2 clients call `is_end_stream` on the body in the same poll
/// as, and before, they write the request head; before that, nothing looks at the body
/// (reqwest's redirect layer and hyper's HTTP/2 client only ask its `size_hint`, which
/// writes nothing and so does not count as a look). So a body dropped without being
/// looked at proves that no byte of its request was written: the send was dropped while
/// connecting, or waiting for a connection (baton's first-connection turn, the pool, a
/// connection's queue), or a connection task found the request cancelled and discarded
/// it. An attempt timer that fired then fired before the connection was ready for the
/// request, which is read as the connect phase: the attempt is *undelivered* (SPEC 2.6:
/// the attempt timeout starts when the connection is ready).
///
/// Neither having happened proves nothing: the request may sit in a connection's queue,
/// or a connection task may be between taking it and looking at its body. See
/// [`Handoff::unsent`].
pub(crate) struct Tracked {
    inner: reqwest::Body,
    handoff: Handoff,
}

/// What became of a [`Tracked`] body, shared between the body and the attempt's driver.
#[derive(Clone)]
pub(crate) struct Handoff(std::sync::Arc<std::sync::atomic::AtomicU8>);

impl Handoff {
    /// Nothing has looked at the body, and it is alive.
    const WAITING: u8 = 0;
    /// hyper looked at the body to write the request head: bytes may have been sent.
    const LOOKED: u8 = 1;
    /// The body was dropped before anything looked at it: nothing of the request was
    /// written.
    const DROPPED: u8 = 2;

    fn state(&self) -> u8 {
        self.0.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Whether the request is proven never written: `Some(true)` when its body was dropped
    /// unlooked, `Some(false)` when hyper looked at it, `None` while neither happened (the
    /// request is, or may be, on its way to a connection).
    pub(crate) fn unsent(&self) -> Option<bool> {
        match self.state() {
            Self::DROPPED => Some(true),
            Self::LOOKED => Some(false),
            _ => None,
        }
    }
}

impl Tracked {
    /// Wraps `inner` (no body: an empty one), and the handle that tells what became of it.
    pub(crate) fn wrap(inner: Option<reqwest::Body>) -> (reqwest::Body, Handoff) {
        let handoff = Handoff(std::sync::Arc::new(std::sync::atomic::AtomicU8::new(
            Handoff::WAITING,
        )));
        let body = Tracked {
            inner: inner.unwrap_or_else(|| reqwest::Body::from(Bytes::new())),
            handoff: handoff.clone(),
        };
        (reqwest::Body::wrap(body), handoff)
    }

    fn mark(&self) {
        // Read first: `poll_frame` marks on every frame, and the line is shared.
        if self.handoff.state() != Handoff::LOOKED {
            (self.handoff.0).store(Handoff::LOOKED, std::sync::atomic::Ordering::Release);
        }
    }
}

impl Drop for Tracked {
    /// Dropped unlooked: the proof that nothing was written. A body hyper looked at stays
    /// looked at.
    fn drop(&mut self) {
        use std::sync::atomic::Ordering;
        let _ = (self.handoff.0).compare_exchange(
            Handoff::WAITING,
            Handoff::DROPPED,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
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

    /// Not a look: reqwest's redirect layer asks it as soon as the request is sent, before
    /// any connection exists, so marking here would leave no proof ever.
    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
