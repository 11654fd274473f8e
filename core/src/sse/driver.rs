//! The one loop that drives an [`EventStream`] over a transport, written once for every
//! adapter: [`AsyncDriver`] for the async adapters (tokio, async-std, smol), [`drive_blocking`]
//! for the blocking one. An adapter supplies only its I/O: open a connection through its
//! client, read a chunk within the idle deadline, sleep.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Instant, SystemTime};

use http::{HeaderMap, StatusCode};

use super::{Connect, EventStream, EventsError, Notice, StreamAction, StreamInput, StreamItem};
use crate::id::EndpointId;

/// How one connection's call ended, as the adapter tells it.
///
/// ```
/// use baton_core::sse::{Opened, StreamInput};
/// use baton_core::ErrorKind;
///
/// // How an adapter hands a connection's call to the driver.
/// fn opened(call: Result<(&str, u16), ErrorKind>) -> Opened<&'static [u8], ErrorKind> {
///     match call {
///         Ok((endpoint, status)) => Opened::Answer {
///             endpoint: endpoint.into(),
///             status: status.try_into().unwrap(),
///             headers: http::HeaderMap::new(),
///             may_have_executed: true,
///             body: b"data: hi\n\n",
///         },
///         // Failed (the stream reconnects) or Rejected (no reconnection can mend it).
///         Err(kind) => Opened::failed(StreamInput::call_failed(&kind, false), kind),
///     }
/// }
/// assert!(matches!(opened(Ok(("a", 200))), Opened::Answer { status, .. } if status == 200));
/// assert!(matches!(opened(Err(ErrorKind::NoUsableEndpoint)), Opened::Failed { .. }));
/// assert!(matches!(opened(Err(ErrorKind::UnknownEndpoint("x".into()))), Opened::Rejected(_)));
/// ```
#[derive(Debug)]
pub enum Opened<B, E> {
    /// A response: `body` is read only when the answer opens the stream.
    Answer {
        /// The endpoint that answered.
        endpoint: EndpointId,
        /// Its status.
        status: StatusCode,
        /// Its headers.
        headers: HeaderMap,
        /// Whether an attempt of the call may have executed the request (its report's
        /// `may_have_executed`): an earlier attempt may have, whatever this answer says.
        may_have_executed: bool,
        /// Its body.
        body: B,
    },
    /// The call failed: [`StreamInput::call_failed`] of its error, and the error (the
    /// cause of the stream's end, if the stream ends on it).
    Failed {
        /// What the stream's machine is told.
        input: StreamInput<'static>,
        /// The call's error.
        error: E,
    },
    /// The call was rejected before anything was sent: the stream ends with it.
    Rejected(E),
}

impl<B, E> Opened<B, E> {
    /// A failed call: [`Opened::Failed`] with `input` ([`StreamInput::call_failed`] of the
    /// error), [`Opened::Rejected`] when there is none.
    pub fn failed(input: Option<StreamInput<'static>>, error: E) -> Self {
        match input {
            Some(input) => Opened::Failed { input, error },
            None => Opened::Rejected(error),
        }
    }
}

/// One read of an open body.
///
/// ```
/// use std::io::{ErrorKind, Read};
/// use baton_core::sse::Chunk;
///
/// // A blocking adapter's read: a timeout is the idle deadline passing.
/// fn read(body: &mut impl Read, buf: &mut [u8]) -> Chunk<usize> {
///     match body.read(buf) {
///         Ok(0) => Chunk::End,
///         Ok(n) => Chunk::Bytes(n),
///         Err(e) if e.kind() == ErrorKind::TimedOut => Chunk::Idle,
///         Err(_) => Chunk::Broken,
///     }
/// }
/// let (mut body, mut buf) = (&b"data: hi\n\n"[..], [0u8; 64]);
/// assert!(matches!(read(&mut body, &mut buf), Chunk::Bytes(10)));
/// assert!(matches!(read(&mut body, &mut buf), Chunk::End));
/// ```
#[derive(Debug)]
pub enum Chunk<C> {
    /// Bytes.
    Bytes(C),
    /// The body ended.
    End,
    /// Reading failed.
    Broken,
    /// Nothing arrived by the idle deadline.
    Idle,
}

/// An async adapter's I/O for event streams.
///
/// A transport whose one endpoint streams one event, its futures all ready at once, so
/// one poll of an [`AsyncDriver`] gives the event:
///
/// ```
/// use std::future::{ready, Future};
/// use std::time::{Instant, SystemTime};
/// use baton_core::sse::{
///     AsyncDriver, Chunk, Connect, EventStream, EventsError, Opened, StreamItem, StreamSettings,
///     Transport,
/// };
/// use baton_core::{Endpoint, Policy};
///
/// struct OneEvent;
/// impl Transport for OneEvent {
///     type Body = Option<Vec<u8>>;
///     type Chunk = Vec<u8>;
///     type Error = String;
///     fn open(&mut self, _: Connect) -> impl Future<Output = Opened<Self::Body, String>> + Send {
///         let mut headers = http::HeaderMap::new();
///         headers.insert("content-type", "text/event-stream".parse().unwrap());
///         let body = Some(b"data: hi\n\n".to_vec());
///         ready(Opened::Answer { endpoint: "a".into(), status: http::StatusCode::OK, headers, may_have_executed: true, body })
///     }
///     fn read(body: &mut Self::Body, _: Option<Instant>) -> impl Future<Output = Chunk<Vec<u8>>> + Send {
///         ready(body.take().map_or(Chunk::End, Chunk::Bytes))
///     }
///     fn sleep_until(_: Instant) -> impl Future<Output = ()> + Send { ready(()) }
///     fn now() -> Instant { Instant::now() }
///     fn wall() -> SystemTime { SystemTime::now() }
/// }
///
/// let policy = Policy::builder().endpoint(Endpoint::new("a", "http://a.example/")).build().unwrap();
/// let stream = EventStream::new(&policy, &http::Method::GET, StreamSettings::default(), 1);
/// let mut driver = AsyncDriver::new(stream.map_err(EventsError::Settings), OneEvent);
/// let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
/// let item = driver.poll_next(&mut cx);
/// let std::task::Poll::Ready(Some(Ok(StreamItem::Event { event, .. }))) = item else { panic!() };
/// assert_eq!(event.data, "hi");
/// ```
pub trait Transport: Send + 'static {
    /// An open response body.
    type Body: Send + 'static;
    /// A chunk of it.
    type Chunk: AsRef<[u8]> + Send;
    /// The adapter's call error.
    type Error: Send + 'static;
    /// Runs one connection's call: the stream's request with [`Connect::apply`] applied.
    fn open(
        &mut self,
        connect: Connect,
    ) -> impl Future<Output = Opened<Self::Body, Self::Error>> + Send;
    /// The next chunk of `body`, or [`Chunk::Idle`] once `idle` passes.
    fn read(
        body: &mut Self::Body,
        idle: Option<Instant>,
    ) -> impl Future<Output = Chunk<Self::Chunk>> + Send;
    /// Waits until `at`.
    fn sleep_until(at: Instant) -> impl Future<Output = ()> + Send;
    /// The monotonic clock the stream's deadlines are read against (core reads none).
    fn now() -> Instant;
    /// The wall clock, for a `Retry-After` given as a date.
    fn wall() -> SystemTime;
}

/// A blocking adapter's I/O for event streams.
///
/// ```
/// use std::time::{Instant, SystemTime};
/// use baton_core::sse::{drive_blocking, BlockingTransport, Chunk, Connect, Connection, EventStream,
///     EventsError, Opened, StreamItem, StreamSettings};
/// use baton_core::{Endpoint, Policy};
///
/// /// One endpoint whose body is one event.
/// struct OneEvent;
/// impl BlockingTransport for OneEvent {
///     type Body = &'static [u8];
///     type Error = String;
///     fn open(&mut self, _: Connect) -> Opened<&'static [u8], String> {
///         let mut headers = http::HeaderMap::new();
///         headers.insert("content-type", "text/event-stream".parse().unwrap());
///         let body = b"id: 1\ndata: hi\n\n";
///         Opened::Answer { endpoint: "a".into(), status: http::StatusCode::OK, headers, may_have_executed: true, body }
///     }
///     fn read(body: &mut &'static [u8], buf: &mut [u8], _: Option<Instant>) -> Chunk<usize> {
///         let n = body.len().min(buf.len());
///         buf[..n].copy_from_slice(&body[..n]);
///         *body = &body[n..];
///         Chunk::Bytes(n) // 0 at the end
///     }
///     fn sleep_until(_: Instant) {}
///     fn now() -> Instant { Instant::now() }
///     fn wall() -> SystemTime { SystemTime::now() }
/// }
///
/// let policy = Policy::builder().endpoint(Endpoint::new("a", "http://a.example/")).build().unwrap();
/// let stream = EventStream::new(&policy, &http::Method::GET, StreamSettings::default(), 1);
/// let mut machine = stream.map_err(|e| Some(EventsError::Settings(e)));
/// let (mut connection, mut buf) = (Connection::default(), [0u8; 256]);
/// let item = drive_blocking(&mut machine, &mut OneEvent, &mut connection, &mut buf, None);
/// let Some(Ok(StreamItem::Event { endpoint, event })) = item else { panic!("{item:?}") };
/// assert_eq!((&*endpoint, event.id.as_deref(), &*event.data), ("a", Some("1"), "hi"));
/// ```
pub trait BlockingTransport {
    /// An open response body.
    type Body;
    /// The adapter's call error.
    type Error;
    /// Runs one connection's call.
    fn open(&mut self, connect: Connect) -> Opened<Self::Body, Self::Error>;
    /// Reads into `buf` (`Ok(0)` at the end), giving up at `idle`.
    fn read(body: &mut Self::Body, buf: &mut [u8], idle: Option<Instant>) -> Chunk<usize>;
    /// Blocks the calling thread until `at`.
    fn sleep_until(at: Instant);
    /// The monotonic clock the stream's deadlines are read against (core reads none).
    fn now() -> Instant;
    /// The wall clock, for a `Retry-After` given as a date.
    fn wall() -> SystemTime;
}

type OnNotice = Arc<dyn Fn(&Notice) + Send + Sync>;
type Item<E> = Option<Result<StreamItem, EventsError<E>>>;

/// What a driver holds of the stream's current connection between items: the body it
/// reads, or, when the stream ended on the connection's failed call, that call's error
/// until the end is reported (its cause). A blocking adapter keeps one beside its stream
/// for [`drive_blocking`].
///
/// ```
/// let connection: baton_core::sse::Connection<Vec<u8>, std::io::Error> = Default::default();
/// assert!(format!("{connection:?}").contains("Closed"));
/// ```
pub struct Connection<B, E>(Conn<B, E>);

enum Conn<B, E> {
    Closed,
    Open(B),
    Failed(E),
}

impl<B, E> Default for Connection<B, E> {
    fn default() -> Self {
        Connection(Conn::Closed)
    }
}

impl<B, E> std::fmt::Debug for Connection<B, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.0 {
            Conn::Closed => "Connection::Closed",
            Conn::Open(_) => "Connection::Open",
            Conn::Failed(_) => "Connection::Failed",
        })
    }
}

impl<B, E> Connection<B, E> {
    fn body(&mut self) -> Option<&mut B> {
        match &mut self.0 {
            Conn::Open(b) => Some(b),
            _ => None,
        }
    }

    /// The failed call's error, leaving the connection closed.
    fn take_failure(&mut self) -> Option<E> {
        match std::mem::replace(&mut self.0, Conn::Closed) {
            Conn::Failed(e) => Some(e),
            _ => None,
        }
    }
}

/// A stream, its transport and its connection: the state that survives between items.
struct Running<T: Transport> {
    machine: Result<EventStream, Option<EventsError<T::Error>>>,
    transport: T,
    connection: Connection<T::Body, T::Error>,
    on_notice: Option<OnNotice>,
}

type Step<T> =
    Pin<Box<dyn Future<Output = (Box<Running<T>>, Item<<T as Transport>::Error>)> + Send>>;

/// Drives an event stream on an async runtime: [`next`](Self::next) and
/// [`poll_next`](Self::poll_next) (for a `Stream` impl) are cancel-safe, since each step
/// owns the stream and hands it back with its item; dropping a `next()` that is under
/// way keeps the connection and its progress for the next call.
///
/// ```
/// use std::future::{ready, Future};
/// use std::time::{Instant, SystemTime};
/// use baton_core::sse::{AsyncDriver, Chunk, Connect, EventStream, EventsError, Opened, Transport};
/// use baton_core::{Endpoint, Policy};
///
/// /// A server that answers 200 with a web page: not an event stream.
/// struct Html;
/// impl Transport for Html {
///     type Body = ();
///     type Chunk = Vec<u8>;
///     type Error = String;
///     fn open(&mut self, _: Connect) -> impl Future<Output = Opened<(), String>> + Send {
///         let mut headers = http::HeaderMap::new();
///         headers.insert("content-type", "text/html".parse().unwrap());
///         ready(Opened::Answer { endpoint: "a".into(), status: http::StatusCode::OK, headers, may_have_executed: true, body: () })
///     }
///     fn read(_: &mut (), _: Option<Instant>) -> impl Future<Output = Chunk<Vec<u8>>> + Send {
///         ready(Chunk::End)
///     }
///     fn sleep_until(_: Instant) -> impl Future<Output = ()> + Send { ready(()) }
///     fn now() -> Instant { Instant::now() }
///     fn wall() -> SystemTime { SystemTime::now() }
/// }
///
/// let policy = Policy::builder().endpoint(Endpoint::new("a", "http://a.example/")).build().unwrap();
/// let stream = EventStream::new(&policy, &http::Method::GET, Default::default(), 1);
/// let mut driver = AsyncDriver::new(stream.map_err(EventsError::Settings), Html);
/// let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
/// let std::task::Poll::Ready(Some(Err(e))) = driver.poll_next(&mut cx) else { panic!() };
/// assert!(e.to_string().contains("text/html"), "{e}");
/// assert_eq!(driver.delivered(), 0);
/// assert!(matches!(driver.poll_next(&mut cx), std::task::Poll::Ready(None))); // over
/// ```
pub struct AsyncDriver<T: Transport> {
    running: Option<Box<Running<T>>>,
    step: Option<Step<T>>,
    delivered: u64,
}

impl<T: Transport> std::fmt::Debug for AsyncDriver<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncDriver")
            .field("delivered", &self.delivered)
            .field("stepping", &self.step.is_some())
            .finish()
    }
}

impl<T: Transport> AsyncDriver<T> {
    /// A driver of `machine` (or of the error that stopped it being built) over `transport`.
    pub fn new(machine: Result<EventStream, EventsError<T::Error>>, transport: T) -> Self {
        let running = Running {
            machine: machine.map_err(Some),
            transport,
            connection: Connection::default(),
            on_notice: None,
        };
        AsyncDriver {
            running: Some(Box::new(running)),
            step: None,
            delivered: 0,
        }
    }

    /// Also tells `f` of every connection opened and every reconnection (set it before the
    /// first read).
    pub fn on_notice(&mut self, f: impl Fn(&Notice) + Send + Sync + 'static) {
        if let Some(r) = &mut self.running {
            r.on_notice = Some(Arc::new(f));
        }
    }

    /// Events returned so far (not those parsed and still waiting to be returned).
    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// The next item, an error once, or `None` when the stream is over.
    pub async fn next(&mut self) -> Item<T::Error> {
        std::future::poll_fn(|cx| self.poll_next(cx)).await
    }

    /// Polls for the next item (the body of a `Stream::poll_next`).
    pub fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Item<T::Error>> {
        let mut step = match (self.step.take(), self.running.take()) {
            (Some(step), _) => step,
            (None, Some(mut running)) => Box::pin(async move {
                let item = running.next().await;
                (running, item)
            }),
            (None, None) => return Poll::Ready(None),
        };
        match step.as_mut().poll(cx) {
            Poll::Ready((running, item)) => {
                // Events handed out, not those parsed and still queued.
                if let Some(Ok(crate::sse::StreamItem::Event { .. })) = &item {
                    self.delivered += 1;
                }
                self.running = Some(running);
                Poll::Ready(item)
            }
            Poll::Pending => {
                self.step = Some(step);
                Poll::Pending
            }
        }
    }
}

/// What a stream does with one action, the same on every adapter.
enum Next<C> {
    Connect(Connect),
    Sleep(Instant),
    Read(Option<Instant>),
    Return(Item<C>),
    Again,
}

/// Takes the machine's next action, closing a body that is not read any more.
fn next_action<B, E>(
    machine: &mut Result<EventStream, Option<EventsError<E>>>,
    connection: &mut Connection<B, E>,
    on_notice: Option<&OnNotice>,
    now: Instant,
) -> Next<E> {
    let m = match machine {
        Ok(m) => m,
        Err(e) => return Next::Return(e.take().map(Err)),
    };
    let action = m.poll(now);
    if matches!(
        action,
        StreamAction::Connect(_) | StreamAction::WaitUntil(_)
    ) {
        connection.0 = Conn::Closed; // closes an answer that is not read (a 503, a broken body)
    }
    match action {
        StreamAction::Connect(c) => Next::Connect(c),
        StreamAction::WaitUntil(t) => Next::Sleep(t),
        StreamAction::Read { idle_deadline } => Next::Read(idle_deadline),
        StreamAction::Deliver(item) => Next::Return(Some(Ok(item))),
        StreamAction::Notice(n) => {
            if let Some(f) = on_notice {
                f(&n);
            }
            Next::Again
        }
        StreamAction::Finished(end) => {
            *machine = Err(None);
            let cause = connection.take_failure().map(Box::new);
            Next::Return(
                end.err()
                    .map(|error| Err(EventsError::Stream { error, cause })),
            )
        }
        // AwaitAnswer never comes: a connection is answered before the next poll.
        _ => Next::Return(None),
    }
}

/// Hands the machine how a connection's call ended; keeps the body of an answer, or the
/// error of a failed call.
fn opened<B, E>(
    machine: &mut Result<EventStream, Option<EventsError<E>>>,
    connection: &mut Connection<B, E>,
    o: Opened<B, E>,
    (now, wall): (Instant, SystemTime),
) {
    let Ok(m) = machine else { return };
    match o {
        Opened::Answer {
            endpoint,
            status,
            headers,
            may_have_executed,
            body: b,
        } => {
            m.handle(
                StreamInput::Answered {
                    endpoint: &endpoint,
                    status,
                    headers: &headers,
                    may_have_executed,
                    wall: Some(wall),
                },
                now,
            );
            connection.0 = Conn::Open(b);
        }
        Opened::Failed { input, error } => {
            m.handle(input, now);
            // Kept only as the cause of the end it brought: a call's error can hold a
            // response (the 429 of a Retry-After too long), which must not stay open
            // through the wait before the next connection.
            connection.0 = if m.is_finished() {
                Conn::Failed(error)
            } else {
                Conn::Closed
            };
        }
        Opened::Rejected(e) => *machine = Err(Some(EventsError::Call(Box::new(e)))),
    }
}

/// Hands the machine one read.
fn chunk<E, C: AsRef<[u8]>>(
    machine: &mut Result<EventStream, Option<EventsError<E>>>,
    c: Chunk<C>,
    now: Instant,
) {
    let Ok(m) = machine else { return };
    let input = match &c {
        Chunk::Bytes(b) => StreamInput::Bytes(b.as_ref()),
        Chunk::End => StreamInput::Ended,
        Chunk::Broken => StreamInput::Broken,
        Chunk::Idle => StreamInput::Idle,
    };
    m.handle(input, now);
}

impl<T: Transport> Running<T> {
    async fn next(&mut self) -> Item<T::Error> {
        loop {
            let now = T::now();
            match next_action(
                &mut self.machine,
                &mut self.connection,
                self.on_notice.as_ref(),
                now,
            ) {
                Next::Connect(c) => {
                    let o = self.transport.open(c).await;
                    let at = (T::now(), T::wall());
                    opened(&mut self.machine, &mut self.connection, o, at);
                }
                Next::Sleep(t) => T::sleep_until(t).await,
                Next::Read(idle) => {
                    let c = match self.connection.body() {
                        Some(b) => T::read(b, idle).await,
                        None => Chunk::Broken,
                    };
                    chunk(&mut self.machine, c, T::now());
                }
                Next::Return(item) => return item,
                Next::Again => {}
            }
        }
    }
}

/// Drives an event stream on the calling thread: the body of a blocking adapter's
/// `Iterator::next`. `machine` is the stream (or the error that ended it), `connection`
/// its current connection, `buf` the read buffer.
pub fn drive_blocking<T: BlockingTransport>(
    machine: &mut Result<EventStream, Option<EventsError<T::Error>>>,
    transport: &mut T,
    connection: &mut Connection<T::Body, T::Error>,
    buf: &mut [u8],
    on_notice: Option<&OnNotice>,
) -> Item<T::Error> {
    loop {
        match next_action(machine, connection, on_notice, T::now()) {
            Next::Connect(c) => {
                let o = transport.open(c);
                opened(machine, connection, o, (T::now(), T::wall()));
            }
            Next::Sleep(t) => T::sleep_until(t),
            Next::Read(idle) => {
                let c = match connection.body().map(|b| T::read(b, buf, idle)) {
                    Some(Chunk::Bytes(0)) => Chunk::End,
                    Some(Chunk::Bytes(n)) => Chunk::Bytes(&buf[..n]),
                    Some(Chunk::End) => Chunk::End,
                    Some(Chunk::Idle) => Chunk::Idle,
                    Some(Chunk::Broken) | None => Chunk::Broken,
                };
                chunk(machine, c, T::now());
            }
            Next::Return(item) => return item,
            Next::Again => {}
        }
    }
}

/// The notice observer type the drivers take.
pub type NoticeSink = OnNotice;
