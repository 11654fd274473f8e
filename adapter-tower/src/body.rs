//! Request bodies: copied for every attempt when they are in memory, sent once when they
//! stream (SPEC 2.4).
//!
//! `http::Request<B>` is not `Clone`, and a body is a stream of frames. Before the first
//! attempt the layer polls the body's frames without waiting (a no-op waker): a body whose
//! frames are all ready at once (`Full`, `String`, `Bytes`, empty) is in memory already,
//! so its bytes are kept and every attempt gets a cheap copy. A body that would have to
//! wait is a stream: it is sent once, by the first attempt, unless the service opts into
//! buffering it ([`BatonBuilder::buffer_body`](crate::BatonBuilder::buffer_body)), up to
//! a limit; past the limit it is sent once and an event says why.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use bytes::{Bytes, BytesMut};
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};

use crate::BoxError;

/// The body of one attempt's request: a copy of an in-memory (or buffered) body, or the
/// caller's stream, sent once.
///
/// ```
/// use http_body::Body;
/// let b: baton_tower::ReplayBody<String> = baton_tower::ReplayBody::from_bytes("hi".into());
/// assert_eq!(b.size_hint().exact(), Some(2));
/// ```
pub struct ReplayBody<B> {
    inner: Inner<B>,
}

enum Inner<B> {
    /// Copied bytes and trailers, as frames still to yield.
    Copy {
        data: Option<Bytes>,
        trailers: Option<HeaderMap>,
    },
    /// The caller's stream, after the frames already taken from it.
    Stream {
        taken: VecDeque<Frame<Bytes>>,
        rest: Pin<Box<B>>,
    },
}

impl<B> ReplayBody<B> {
    /// A body of these bytes.
    pub fn from_bytes(data: Bytes) -> Self {
        ReplayBody {
            inner: Inner::Copy {
                data: Some(data).filter(|d| !d.is_empty()),
                trailers: None,
            },
        }
    }
}

impl<B> std::fmt::Debug for ReplayBody<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.inner {
            Inner::Copy { data, .. } => f
                .debug_struct("ReplayBody::Copy")
                .field("len", &data.as_ref().map_or(0, Bytes::len))
                .finish(),
            Inner::Stream { .. } => f.write_str("ReplayBody::Stream"),
        }
    }
}

/// An error of the caller's request body stream, as the inner service sees it: the body's
/// own source failed (a download rejected on its certificate, an upstream connection
/// refused), not the attempt's connection. The classifier reads no proof below it: the
/// head had gone.
#[derive(Debug)]
pub(crate) struct BodySource(pub(crate) BoxError);

impl std::fmt::Display for BodySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the request body's source failed")
    }
}

impl std::error::Error for BodySource {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.0)
    }
}

impl<B> Body for ReplayBody<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match &mut self.get_mut().inner {
            Inner::Copy { data, trailers } => {
                if let Some(d) = data.take() {
                    return Poll::Ready(Some(Ok(Frame::data(d))));
                }
                Poll::Ready(trailers.take().map(|t| Ok(Frame::trailers(t))))
            }
            Inner::Stream { taken, rest } => {
                if let Some(frame) = taken.pop_front() {
                    return Poll::Ready(Some(Ok(frame)));
                }
                let frame = rest.as_mut().poll_frame(cx);
                frame.map_err(|e| Box::new(BodySource(e.into())) as BoxError)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.inner {
            Inner::Copy { data, trailers } => data.is_none() && trailers.is_none(),
            Inner::Stream { taken, rest } => taken.is_empty() && rest.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.inner {
            Inner::Copy { data, .. } => {
                SizeHint::with_exact(data.as_ref().map_or(0, |d| d.len() as u64))
            }
            Inner::Stream { taken, rest } => {
                let before: u64 = taken
                    .iter()
                    .filter_map(|f| f.data_ref().map(|d| d.len() as u64))
                    .sum();
                // Built from scratch: `set_lower` and `set_upper` each check the pair, so
                // the upper bound goes in first.
                let rest = rest.size_hint();
                let mut hint = SizeHint::new();
                if let Some(upper) = rest.upper() {
                    hint.set_upper(upper.saturating_add(before));
                }
                hint.set_lower(rest.lower().saturating_add(before));
                hint
            }
        }
    }
}

/// The call's body as the driver keeps it.
pub(crate) enum Kept<B> {
    /// Bytes (and trailers) every attempt copies.
    Copy {
        data: Bytes,
        trailers: Option<HeaderMap>,
    },
    /// A stream for the first attempt; `None` once taken.
    Once(Option<ReplayBody<B>>),
}

impl<B> Kept<B> {
    /// What the engine needs to know about it.
    pub(crate) fn kind(&self) -> baton_core::BodyKind {
        match self {
            Kept::Copy { data, trailers } if data.is_empty() && trailers.is_none() => {
                baton_core::BodyKind::Empty
            }
            Kept::Copy { .. } => baton_core::BodyKind::Replayable,
            Kept::Once(_) => baton_core::BodyKind::OneShot,
        }
    }

    /// The body for the next attempt: a copy, or the stream once; `None` when the stream
    /// is gone (no replay).
    pub(crate) fn next(&mut self) -> Option<ReplayBody<B>> {
        match self {
            Kept::Once(b) => b.take(),
            Kept::Copy { .. } => self.copy(),
        }
    }

    /// A copy for a redirect hop (only of a copied body).
    pub(crate) fn copy(&self) -> Option<ReplayBody<B>> {
        let Kept::Copy { data, trailers } = self else {
            return None;
        };
        Some(ReplayBody {
            inner: Inner::Copy {
                data: Some(data.clone()).filter(|d| !d.is_empty()),
                trailers: trailers.clone(),
            },
        })
    }
}

/// What preparing a body found.
pub(crate) struct Prepared<B> {
    pub(crate) body: Kept<B>,
    /// Set when buffering was asked for and the body was larger: the limit.
    pub(crate) over_limit: Option<usize>,
    /// A body error met while copying or buffering (the call is rejected locally).
    pub(crate) error: Option<BoxError>,
}

/// How many frames, at most, are taken without waiting from a body that is not buffered:
/// an in-memory body has one or a few; an always-ready stream stops here and is sent once.
const READY_FRAMES: usize = 64;

/// Takes the body's frames: those ready at once (at most [`READY_FRAMES`]) always, and,
/// with `buffer` set, waits for more up to that many bytes. A body that ends within what
/// was taken is kept as bytes. Whether a body that arrives from the network (a proxied
/// `Incoming`) is all ready at once depends on timing: such a body is copied when it is,
/// and sent once when it is not; opt into buffering to make it replayable for sure.
pub(crate) async fn prepare<B>(body: B, buffer: Option<usize>) -> Prepared<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    // An empty body (a GET's) is known without polling: nothing to box or take.
    if body.is_end_stream() {
        return Prepared {
            body: Kept::Copy {
                data: Bytes::new(),
                trailers: None,
            },
            over_limit: None,
            error: None,
        };
    }
    let mut rest = Box::pin(body);
    let mut taken: VecDeque<Frame<Bytes>> = VecDeque::new();
    let mut size = 0usize;
    let limit = buffer.unwrap_or(usize::MAX);
    let mut error = None;
    let ended = loop {
        if rest.is_end_stream() {
            break true;
        }
        let polled = match buffer {
            Some(_) => Some(poll_fn(|cx| rest.as_mut().poll_frame(cx)).await),
            None => match rest
                .as_mut()
                .poll_frame(&mut Context::from_waker(Waker::noop()))
            {
                Poll::Ready(frame) => Some(frame),
                Poll::Pending => None,
            },
        };
        match polled {
            None => break false,
            Some(None) => break true,
            Some(Some(Err(e))) => {
                error = Some(e.into());
                break true;
            }
            Some(Some(Ok(frame))) => {
                size = size.saturating_add(frame.data_ref().map_or(0, Bytes::len));
                taken.push_back(frame);
                if size > limit || (buffer.is_none() && taken.len() >= READY_FRAMES) {
                    break false;
                }
            }
        }
    };
    if ended {
        let (data, trailers) = join(taken);
        return Prepared {
            body: Kept::Copy { data, trailers },
            over_limit: None,
            error,
        };
    }
    Prepared {
        over_limit: buffer.filter(|l| size > *l),
        body: Kept::Once(Some(ReplayBody {
            inner: Inner::Stream { taken, rest },
        })),
        error: None,
    }
}

/// The data of `frames` as one `Bytes` (no copy for a single frame), and their trailers.
fn join(frames: VecDeque<Frame<Bytes>>) -> (Bytes, Option<HeaderMap>) {
    let mut trailers = None;
    let mut parts: Vec<Bytes> = Vec::with_capacity(frames.len());
    for f in frames {
        match f.into_data() {
            Ok(d) => parts.push(d),
            Err(f) => trailers = f.into_trailers().ok(),
        }
    }
    let data = match parts.len() {
        0 => Bytes::new(),
        1 => parts.pop().unwrap_or_default(),
        _ => {
            let mut all = BytesMut::with_capacity(parts.iter().map(Bytes::len).sum());
            parts.iter().for_each(|p| all.extend_from_slice(p));
            all.freeze()
        }
    };
    (data, trailers)
}
