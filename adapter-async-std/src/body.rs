//! Request bodies and the replay rules of SPEC 2.4.
//!
//! - Bytes (and everything that converts into them) are replayable: every attempt sends
//!   the same buffer (a reference-counted clone, no copy).
//! - A stream is one-shot: it can feed the first attempt only, so the engine allows no
//!   later attempt. Nothing buffers it behind your back.
//! - Buffering a stream is an explicit opt-in with a size limit
//!   ([`RequestBuilder::buffer_body`](crate::RequestBuilder::buffer_body)): a stream that
//!   fits becomes replayable bytes; a larger one is sent once, unreplayable (the engine's
//!   `NotReplayable` event says so when a later attempt would have been wanted).
//! - A body made by a function ([`Body::from_fn`]) is replayable by calling the function
//!   again for every attempt (say, re-reading a file); when that fails for a later attempt,
//!   the engine is told the replay failed and the call ends with what it has.

use std::fmt;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use baton_core::BodyKind;
use bytes::{Bytes, BytesMut};
use futures_core::Stream;
use http_body::{Frame, SizeHint};
use sync_wrapper::SyncWrapper;

type ByteStream = Pin<Box<dyn Stream<Item = io::Result<Bytes>> + Send>>;
type MakeBody = Arc<dyn Fn() -> io::Result<Bytes> + Send + Sync>;

/// A request body.
///
/// ```
/// use baton_async_std::Body;
/// use baton_core::BodyKind;
/// assert_eq!(Body::empty().kind(), BodyKind::Empty);
/// assert_eq!(Body::from("{\"jsonrpc\":\"2.0\"}").kind(), BodyKind::Replayable);
/// let chunks = futures_lite::stream::iter(vec![Ok(bytes::Bytes::from_static(b"a"))]);
/// assert_eq!(Body::stream(chunks).kind(), BodyKind::OneShot);
/// ```
pub struct Body {
    inner: Inner,
}

enum Inner {
    Empty,
    Bytes(Bytes),
    Stream {
        prefix: Option<Bytes>,
        rest: ByteStream,
    },
    Fn(MakeBody),
}

impl Body {
    /// No body.
    pub fn empty() -> Self {
        Body {
            inner: Inner::Empty,
        }
    }

    /// A one-shot body from a stream of chunks (sent on the first attempt only).
    pub fn stream(stream: impl Stream<Item = io::Result<Bytes>> + Send + 'static) -> Self {
        Body {
            inner: Inner::Stream {
                prefix: None,
                rest: Box::pin(stream),
            },
        }
    }

    /// A replayable body made by `make` for every attempt. If `make` fails for the first
    /// attempt the call ends as rejected locally (nothing sent); if it fails for a later
    /// attempt, the engine hears that the replay failed and the call ends with what it has.
    pub fn from_fn(make: impl Fn() -> io::Result<Bytes> + Send + Sync + 'static) -> Self {
        Body {
            inner: Inner::Fn(Arc::new(make)),
        }
    }

    /// What the engine is told about this body.
    pub fn kind(&self) -> BodyKind {
        match &self.inner {
            Inner::Empty => BodyKind::Empty,
            Inner::Bytes(_) | Inner::Fn(_) => BodyKind::Replayable,
            Inner::Stream { .. } => BodyKind::OneShot,
        }
    }

    /// Reads a stream body into memory when it fits in `limit` bytes (it becomes
    /// replayable); a larger one keeps what was read as a prefix and stays one-shot. Other
    /// bodies are returned unchanged. A stream error while buffering is returned.
    pub(crate) async fn buffer(self, limit: usize) -> io::Result<Body> {
        let Inner::Stream { prefix, mut rest } = self.inner else {
            return Ok(self);
        };
        let mut buf = BytesMut::new();
        if let Some(p) = prefix {
            buf.extend_from_slice(&p);
        }
        loop {
            if buf.len() > limit {
                return Ok(Body {
                    inner: Inner::Stream {
                        prefix: Some(buf.freeze()),
                        rest,
                    },
                });
            }
            match std::future::poll_fn(|cx| rest.as_mut().poll_next(cx)).await {
                Some(Ok(chunk)) => buf.extend_from_slice(&chunk),
                Some(Err(e)) => return Err(e),
                None => {
                    return Ok(Body {
                        inner: Inner::Bytes(buf.freeze()),
                    })
                }
            }
        }
    }

    /// A copy for another call (an event stream's next connection), unless the body is a
    /// one-shot stream.
    pub(crate) fn try_clone(&self) -> Option<Body> {
        let inner = match &self.inner {
            Inner::Empty => Inner::Empty,
            Inner::Bytes(b) => Inner::Bytes(b.clone()),
            Inner::Fn(f) => Inner::Fn(f.clone()),
            Inner::Stream { .. } => return None,
        };
        Some(Body { inner })
    }

    /// The body of a stream not yet taken by an attempt, to buffer it before the call.
    pub(crate) fn of_stream(prefix: Option<Bytes>, rest: ByteStream) -> Body {
        Body {
            inner: Inner::Stream { prefix, rest },
        }
    }

    /// Splits the body into what the first attempt sends and the source of later copies.
    pub(crate) fn into_source(self) -> Source {
        match self.inner {
            Inner::Empty => Source::Empty,
            Inner::Bytes(b) => Source::Bytes(b),
            Inner::Fn(f) => Source::Fn(f),
            Inner::Stream { prefix, rest } => Source::Stream(Some((prefix, rest))),
        }
    }
}

impl Default for Body {
    fn default() -> Self {
        Body::empty()
    }
}

impl fmt::Debug for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.inner {
            Inner::Empty => f.write_str("Body::Empty"),
            Inner::Bytes(b) => write!(f, "Body::Bytes({} bytes)", b.len()),
            Inner::Stream { .. } => f.write_str("Body::Stream"),
            Inner::Fn(_) => f.write_str("Body::Fn"),
        }
    }
}

impl From<Bytes> for Body {
    fn from(b: Bytes) -> Self {
        Body {
            inner: Inner::Bytes(b),
        }
    }
}

impl From<Vec<u8>> for Body {
    fn from(v: Vec<u8>) -> Self {
        Bytes::from(v).into()
    }
}

impl From<String> for Body {
    fn from(s: String) -> Self {
        Bytes::from(s).into()
    }
}

impl From<&'static str> for Body {
    fn from(s: &'static str) -> Self {
        Bytes::from_static(s.as_bytes()).into()
    }
}

impl From<&'static [u8]> for Body {
    fn from(s: &'static [u8]) -> Self {
        Bytes::from_static(s).into()
    }
}

/// Where each attempt's body comes from.
pub(crate) enum Source {
    Empty,
    Bytes(Bytes),
    Fn(MakeBody),
    /// The stream, until the first attempt takes it.
    Stream(Option<(Option<Bytes>, ByteStream)>),
}

impl Source {
    /// The body for one attempt (`fresh`: a later attempt that needs a copy).
    pub(crate) fn body_for(&mut self, fresh: bool) -> io::Result<OutBody> {
        match self {
            Source::Empty => Ok(OutBody::Empty),
            Source::Bytes(b) => Ok(OutBody::full(b.clone())),
            Source::Fn(f) => f().map(OutBody::full),
            Source::Stream(s) => match (fresh, s.take()) {
                (false, Some((prefix, rest))) => Ok(OutBody::Stream {
                    prefix,
                    rest: SyncWrapper::new(rest),
                }),
                _ => Err(io::Error::other("a streamed body cannot be sent twice")),
            },
        }
    }
}

/// The body type hyper sends. The stream sits in a `SyncWrapper` (only ever used through
/// `&mut`), so that a connection, and so a [`Response`](crate::Response) and an
/// [`Error`](crate::Error) carrying one, are `Sync` even though user streams need not be.
pub(crate) enum OutBody {
    Empty,
    Full(Option<Bytes>),
    Stream {
        prefix: Option<Bytes>,
        rest: SyncWrapper<ByteStream>,
    },
}

impl OutBody {
    /// A copy, before it was sent: an empty body or one of bytes (a stream has none).
    pub(crate) fn try_clone(&self) -> Option<OutBody> {
        match self {
            OutBody::Empty => Some(OutBody::Empty),
            OutBody::Full(b) => Some(OutBody::Full(b.clone())),
            OutBody::Stream { .. } => None,
        }
    }

    fn full(b: Bytes) -> Self {
        if b.is_empty() {
            OutBody::Full(None)
        } else {
            OutBody::Full(Some(b))
        }
    }
}

impl http_body::Body for OutBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        match self.get_mut() {
            OutBody::Empty => Poll::Ready(None),
            OutBody::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            OutBody::Stream { prefix, rest } => {
                if let Some(p) = prefix.take() {
                    return Poll::Ready(Some(Ok(Frame::data(p))));
                }
                rest.get_mut()
                    .as_mut()
                    .poll_next(cx)
                    .map(|c| c.map(|r| r.map(Frame::data)))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            OutBody::Empty => true,
            OutBody::Full(b) => b.is_none(),
            OutBody::Stream { .. } => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            OutBody::Empty => SizeHint::with_exact(0),
            OutBody::Full(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            OutBody::Stream { .. } => SizeHint::default(),
        }
    }
}
