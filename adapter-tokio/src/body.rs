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

/// Bytes already read, then the rest of the stream (or the error that stopped it).
struct Prefixed {
    prefix: Option<Bytes>,
    rest: reqwest::Body,
    error: Option<BoxError>,
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
