//! The event-stream drivers keep the last connection's call error as the cause of a stream
//! that ends on it, and only then: a stream whose last connection was answered ends with no
//! cause (its reason names the answer), and no failed call's error (which can hold an open
//! response) lives on through the wait before the next connection.

use std::cell::Cell;
use std::collections::VecDeque;
use std::future::{ready, Future};
use std::time::{Duration, Instant, SystemTime};

use baton_core::sse::{
    drive_blocking, AsyncDriver, BlockingTransport, Chunk, Connect, Connection, EventStream,
    EventsError, Opened, StreamError, StreamInput, StreamSettings, Transport,
};
use baton_core::{Backoff, Endpoint, ErrorKind, Policy};

thread_local! {
    /// The [`Refused`] errors alive on this thread (each test drives its stream on its own).
    static ALIVE: Cell<usize> = const { Cell::new(0) };
}

/// A connection's call that failed: the `n`th of the stream. Counted while alive, as a
/// call error holding an unread response would hold its connection.
#[derive(Debug)]
struct Refused(u32);

impl Refused {
    fn new(n: u32) -> Self {
        ALIVE.with(|a| a.set(a.get() + 1));
        Refused(n)
    }
}

impl Drop for Refused {
    fn drop(&mut self) {
        ALIVE.with(|a| a.set(a.get() - 1));
    }
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "connection {} refused", self.0)
    }
}

impl std::error::Error for Refused {}

/// What each connection gets, in order: `None` a refused call, `Some(status)` an answer.
/// `executed` says whether a refused call may have executed the request.
struct Script {
    answers: VecDeque<Option<u16>>,
    opened: u32,
    executed: bool,
}

impl Script {
    fn new(answers: &[Option<u16>]) -> Self {
        Script {
            answers: answers.iter().copied().collect(),
            opened: 0,
            executed: false,
        }
    }

    fn open(&mut self) -> Opened<(), Refused> {
        self.opened += 1;
        match self.answers.pop_front().expect("a scripted connection") {
            Some(status) => Opened::Answer {
                endpoint: "a".into(),
                status: status.try_into().unwrap(),
                headers: http::HeaderMap::new(),
                may_have_executed: true,
                body: (),
            },
            None => {
                let kind = ErrorKind::NoUsableEndpoint;
                let input = StreamInput::call_failed(&kind, self.executed);
                Opened::failed(input, Refused::new(self.opened))
            }
        }
    }
}

impl BlockingTransport for Script {
    type Body = ();
    type Error = Refused;
    fn open(&mut self, _: Connect) -> Opened<(), Refused> {
        Script::open(self)
    }
    fn read(_: &mut (), _: &mut [u8], _: Option<Instant>) -> Chunk<usize> {
        Chunk::Broken
    }
    fn sleep_until(at: Instant) {
        let alive = ALIVE.with(Cell::get);
        assert_eq!(alive, 0, "a failed call's error is kept through the wait");
        std::thread::sleep(at.saturating_duration_since(Instant::now()));
    }
    fn now() -> Instant {
        Instant::now()
    }
    fn wall() -> SystemTime {
        SystemTime::now()
    }
}

impl Transport for Script {
    type Body = ();
    type Chunk = Vec<u8>;
    type Error = Refused;
    fn open(&mut self, _: Connect) -> impl Future<Output = Opened<(), Refused>> + Send {
        ready(Script::open(self))
    }
    fn read(_: &mut (), _: Option<Instant>) -> impl Future<Output = Chunk<Vec<u8>>> + Send {
        ready(Chunk::Broken)
    }
    fn sleep_until(at: Instant) -> impl Future<Output = ()> + Send {
        <Self as BlockingTransport>::sleep_until(at);
        ready(())
    }
    fn now() -> Instant {
        Instant::now()
    }
    fn wall() -> SystemTime {
        SystemTime::now()
    }
}

/// A GET stream of one endpoint that gives up after two reconnections, waiting 1 ms
/// between.
fn stream() -> EventStream {
    stream_of(&http::Method::GET)
}

fn stream_of(method: &http::Method) -> EventStream {
    let policy = Policy::builder()
        .endpoint(Endpoint::new("a", "http://a.example/"))
        .build()
        .unwrap();
    let settings = StreamSettings {
        max_reconnects: 2,
        reconnects_per_endpoint: 3,
        backoff: Backoff {
            initial: Duration::from_millis(1),
            max: Duration::from_millis(1),
            ..Backoff::default()
        },
        ..StreamSettings::default()
    };
    EventStream::new(&policy, method, settings, 7).unwrap()
}

/// Reads the stream to its end on the blocking driver.
fn end_blocking(script: &mut Script) -> EventsError<Refused> {
    end_blocking_of(script, stream())
}

fn end_blocking_of(script: &mut Script, stream: EventStream) -> EventsError<Refused> {
    let mut machine = Ok(stream);
    let (mut connection, mut buf) = (Connection::default(), [0u8; 64]);
    match drive_blocking(&mut machine, script, &mut connection, &mut buf, None) {
        Some(Err(e)) => e,
        other => panic!("the stream ends with an error, not {other:?}"),
    }
}

#[test]
fn a_stream_that_gives_up_on_failed_calls_names_the_last_ones_error() {
    let mut script = Script::new(&[None, None, None]);
    let e = end_blocking(&mut script);
    assert_eq!(script.opened, 3);
    assert!(
        matches!(e.stream_error(), Some(StreamError::GaveUp { .. })),
        "{e:?}"
    );
    let source = std::error::Error::source(&e).expect("the last call's error");
    assert_eq!(source.to_string(), "connection 3 refused");
    assert!(!e.to_string().contains("refused"), "{e}");
    assert!(
        format!("{e:#}").ends_with(": connection 3 refused"),
        "{e:#}"
    );
}

#[test]
fn a_stream_whose_last_connection_was_answered_has_no_cause() {
    // A refused call, then two 503s: the reason is the last answer, and the earlier
    // call's error is not its cause.
    let mut script = Script::new(&[None, Some(503), Some(503)]);
    let e = end_blocking(&mut script);
    assert_eq!(script.opened, 3);
    let Some(StreamError::GaveUp { reason, .. }) = e.stream_error() else {
        panic!("{e:?}");
    };
    assert_eq!(
        reason.to_string(),
        "the stream was answered 503 Service Unavailable"
    );
    assert!(std::error::Error::source(&e).is_none(), "{e:#}");
    assert_eq!(format!("{e:#}"), e.to_string());
}

#[test]
fn the_async_driver_keeps_the_cause_too() {
    let script = Script::new(&[Some(503), None, None]);
    let mut driver = AsyncDriver::new(Ok(stream()), script);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    let std::task::Poll::Ready(Some(Err(e))) = driver.poll_next(&mut cx) else {
        panic!("the stream ends at once with an error");
    };
    let source = std::error::Error::source(&e).expect("the last call's error");
    assert_eq!(source.to_string(), "connection 3 refused");
}

#[test]
fn an_unsafe_stream_interrupted_by_a_call_that_may_have_executed_names_it() {
    // A POST without event ids whose call may have executed: it cannot be sent again.
    let mut script = Script::new(&[None, None]);
    script.executed = true;
    let e = end_blocking_of(&mut script, stream_of(&http::Method::POST));
    assert_eq!(script.opened, 1, "the POST was not sent again");
    assert!(
        matches!(e.stream_error(), Some(StreamError::Interrupted { .. })),
        "{e:?}"
    );
    let source = std::error::Error::source(&e).expect("the call's error");
    assert_eq!(source.to_string(), "connection 1 refused");
}

#[test]
fn the_error_of_a_failed_call_is_dropped_once_the_stream_reconnects() {
    // sleep_until checks that no Refused is alive while the stream waits to reconnect.
    let mut script = Script::new(&[None, None, Some(503)]);
    let e = end_blocking(&mut script);
    assert_eq!(script.opened, 3);
    assert!(std::error::Error::source(&e).is_none(), "{e:#}");
    drop(e);
    assert_eq!(ALIVE.with(Cell::get), 0);
}

/// One endpoint whose connection brings three events in one chunk, then ends.
struct ThreeInOne;

impl Transport for ThreeInOne {
    type Body = bool;
    type Chunk = Vec<u8>;
    type Error = Refused;
    fn open(&mut self, _: Connect) -> impl Future<Output = Opened<bool, Refused>> + Send {
        let mut headers = http::HeaderMap::new();
        headers.insert("content-type", "text/event-stream".parse().unwrap());
        ready(Opened::Answer {
            endpoint: "a".into(),
            status: http::StatusCode::OK,
            headers,
            may_have_executed: true,
            body: false,
        })
    }
    fn read(read: &mut bool, _: Option<Instant>) -> impl Future<Output = Chunk<Vec<u8>>> + Send {
        let chunk = if std::mem::replace(read, true) {
            Chunk::End
        } else {
            Chunk::Bytes(b"data: 1\n\ndata: 2\n\ndata: 3\n\n".to_vec())
        };
        ready(chunk)
    }
    fn sleep_until(_: Instant) -> impl Future<Output = ()> + Send {
        ready(())
    }
    fn now() -> Instant {
        Instant::now()
    }
    fn wall() -> SystemTime {
        SystemTime::now()
    }
}

/// `delivered()` counts the events handed out, not those parsed and still queued. Before,
/// three events in one chunk read 3 after the first was returned.
#[test]
fn delivered_counts_the_events_returned() {
    let mut driver = AsyncDriver::new(Ok(stream()), ThreeInOne);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    for n in 1..=3 {
        let std::task::Poll::Ready(Some(Ok(_))) = driver.poll_next(&mut cx) else {
            panic!("event {n}");
        };
        assert_eq!(driver.delivered(), n);
    }
}
