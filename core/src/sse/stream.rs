//! The event stream state machine: one stream over the policy's endpoints, reconnecting and
//! failing over by the rules of SPEC 9 (see the [module docs](super) for the guide).

use std::collections::VecDeque;
use std::fmt;
use std::time::{Duration, Instant, SystemTime};

use http::{HeaderMap, Method, StatusCode};

use super::{answer, last_event_id_for, reconnect_delay, Answer, Event, Fatal, Parser};
use crate::backoff::{Backoff, Jitter};
use crate::id::EndpointId;
use crate::policy::Policy;
use crate::rng::Rng;
use crate::status::StatusSet;

/// How an event stream reconnects. Every field has a default; [`StreamSettings::validate`]
/// names the first bad one.
///
/// ```
/// use std::time::Duration;
/// use baton_core::sse::StreamSettings;
/// let s = StreamSettings { idle_timeout: Some(Duration::from_secs(30)), ..StreamSettings::default() };
/// assert!(s.validate().is_ok());
/// assert!(!s.shared_event_ids);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct StreamSettings {
    /// The endpoints share event ids (one upstream feed behind several providers): a
    /// reconnection to another endpoint sends `Last-Event-ID` too, and the stream goes on
    /// without a [`StreamItem::Restarted`]. Default false.
    pub shared_event_ids: bool,
    /// Reconnections in a row to one endpoint without an event before the stream moves to
    /// the next endpoint in the policy's order (default 2; at least 1).
    pub reconnects_per_endpoint: u32,
    /// Reconnections in a row without an event before the stream gives up (default 10;
    /// 0 never reconnects). Only a delivered event resets the count, so a connection that
    /// opens and dies before its first event counts.
    pub max_reconnects: u32,
    /// No byte (comments count) for this long closes the connection and reconnects
    /// (default off).
    pub idle_timeout: Option<Duration>,
    /// The largest event, in bytes (default 1 MiB); a larger one ends the stream with
    /// [`StreamError::EventTooLarge`].
    pub max_event_size: usize,
    /// A 403 asks for a credential refresh as a 401 does (default false).
    pub refresh_on_403: bool,
    /// The wait between reconnections (default 500 ms doubling to 30 s, ±25 % jitter); the
    /// server's `retry:` is the floor of every wait.
    pub backoff: Backoff,
    /// The longest `Retry-After` the stream waits for at one endpoint (default 60 s); a
    /// longer one moves the stream to the next endpoint at once, or ends it
    /// ([`StreamError::RetryAfterTooLong`]) when it can go on only at that endpoint. The
    /// server's `retry:` is capped at it too.
    pub max_retry_after: Duration,
}

impl Default for StreamSettings {
    fn default() -> Self {
        StreamSettings {
            shared_event_ids: false,
            reconnects_per_endpoint: 2,
            max_reconnects: 10,
            idle_timeout: None,
            max_event_size: super::DEFAULT_MAX_EVENT_SIZE,
            refresh_on_403: false,
            backoff: Backoff {
                initial: Duration::from_millis(500),
                multiplier: 2.0,
                max: Duration::from_secs(30),
                jitter: Jitter::PROPORTIONAL,
            },
            max_retry_after: Duration::from_secs(60),
        }
    }
}

/// A stream setting that cannot work: the setting's name and why.
///
/// ```
/// use baton_core::sse::StreamSettings;
/// let bad = StreamSettings { max_event_size: 0, ..StreamSettings::default() };
/// assert_eq!(bad.validate().unwrap_err().setting, "max_event_size");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamSettingError {
    /// The setting, by its field name.
    pub setting: &'static str,
    /// What is wrong with its value.
    pub reason: String,
}

impl fmt::Display for StreamSettingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "stream setting `{}`: {}", self.setting, self.reason)
    }
}

impl std::error::Error for StreamSettingError {}

/// The longest wait any stream setting may ask for (a day).
const MAX_WAIT: Duration = Duration::from_secs(24 * 3600);

impl StreamSettings {
    /// Checks every setting.
    pub fn validate(&self) -> Result<(), StreamSettingError> {
        let bad = |setting, reason: String| Err(StreamSettingError { setting, reason });
        if self.reconnects_per_endpoint == 0 {
            return bad("reconnects_per_endpoint", "must be at least 1".into());
        }
        if self.max_event_size == 0 {
            return bad("max_event_size", "must be at least 1 byte".into());
        }
        if self.idle_timeout == Some(Duration::ZERO) {
            return bad(
                "idle_timeout",
                "must be longer than 0 (leave it unset for none)".into(),
            );
        }
        for (setting, d) in [
            ("idle_timeout", self.idle_timeout.unwrap_or_default()),
            ("backoff.max", self.backoff.max),
            ("max_retry_after", self.max_retry_after),
        ] {
            if d > MAX_WAIT {
                return bad(
                    setting,
                    format!("{d:?} is over the {MAX_WAIT:?} a stream waits at most"),
                );
            }
        }
        let b = &self.backoff;
        if b.initial.is_zero() {
            // A zero wait would reconnect in a hot loop to a server that closes every
            // stream after one event.
            return bad("backoff.initial", "must be longer than 0".into());
        }
        if !(b.multiplier.is_finite() && b.multiplier >= 1.0) {
            return bad(
                "backoff.multiplier",
                format!("{} must be at least 1", b.multiplier),
            );
        }
        if b.max < b.initial {
            return bad(
                "backoff.max",
                format!(
                    "{:?} is shorter than backoff.initial {:?}",
                    b.max, b.initial
                ),
            );
        }
        if let Jitter::Proportional(f) = b.jitter {
            if !(0.0..=1.0).contains(&f) {
                return bad("backoff.jitter", format!("{f} must be within 0 and 1"));
            }
        }
        Ok(())
    }
}

/// What the consumer of a stream receives.
///
/// ```
/// use baton_core::sse::{Event, StreamItem};
/// let item = StreamItem::Event { endpoint: "a".into(), event: Event { id: None, event: "message".into(), data: "hi".into() } };
/// assert!(matches!(item, StreamItem::Event { .. }));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StreamItem {
    /// An event, whole, from `endpoint`.
    Event {
        /// The endpoint whose connection carried it.
        endpoint: EndpointId,
        /// The event.
        event: Event,
    },
    /// The stream moved to `endpoint`, which does not share event ids with the one before:
    /// it starts over, so events already delivered may come again (de-duplicate by content).
    Restarted {
        /// The endpoint the stream continues on.
        endpoint: EndpointId,
    },
}

/// Why a connection ended or could not be opened.
///
/// ```
/// assert_eq!(baton_core::sse::Reason::Idle.to_string(), "no byte within the idle timeout");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reason {
    /// The server ended the body.
    Ended,
    /// Reading the body failed (reset, broken chunk).
    Broken,
    /// Nothing arrived within the idle timeout.
    Idle,
    /// The connection was answered with this status (408, 429 or 5xx).
    Status(StatusCode),
    /// The connection's call ended without a response.
    Unreachable,
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Ended => f.write_str("the server ended the stream"),
            Reason::Broken => f.write_str("the stream broke while being read"),
            Reason::Idle => f.write_str("no byte within the idle timeout"),
            Reason::Status(s) => write!(f, "the stream was answered {s}"),
            Reason::Unreachable => f.write_str("no endpoint answered"),
        }
    }
}

/// What a stream tells observers (the CLI's `--events`): never needed to consume events.
///
/// ```
/// use std::time::Duration;
/// use baton_core::sse::{Notice, Reason};
/// let n = Notice::Reconnecting { from: Some("a".into()), to: Some("b".into()), after: Duration::ZERO, reason: Reason::Ended, failover: true };
/// assert!(matches!(n, Notice::Reconnecting { failover: true, .. }));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Notice {
    /// A connection opened.
    Opened {
        /// Its endpoint.
        endpoint: EndpointId,
        /// The `Last-Event-ID` it was opened with.
        last_event_id: Option<String>,
    },
    /// The stream reconnects after `after`.
    Reconnecting {
        /// The endpoint of the connection that ended (none before the first opened).
        from: Option<EndpointId>,
        /// The endpoint the next connection prefers (none: the policy's order).
        to: Option<EndpointId>,
        /// The wait before it.
        after: Duration,
        /// Why.
        reason: Reason,
        /// `to` is another endpoint than `from`.
        failover: bool,
    },
}

/// How a stream ended without being dropped.
///
/// ```
/// let e = baton_core::sse::StreamError::Interrupted { endpoint: Some("a".into()), delivered: 3, reason: baton_core::sse::Reason::Broken };
/// assert!(e.to_string().contains("3 event"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StreamError {
    /// The answer cannot be a stream (another 4xx, a wrong content type, a 401 with no
    /// credential, or one that survived its refresh).
    Fatal {
        /// The endpoint that answered.
        endpoint: EndpointId,
        /// Why.
        reason: Fatal,
    },
    /// A stream opened by a method that is not safe broke, and going on would re-send its
    /// request where that could do the work again (no event id to resume from, or another
    /// endpoint that does not share ids).
    Interrupted {
        /// The endpoint the break happened at: the one whose answer or failed call ended
        /// the stream, else the last connection's.
        endpoint: Option<EndpointId>,
        /// Events delivered before the break.
        delivered: u64,
        /// Why the connection ended.
        reason: Reason,
    },
    /// `max_reconnects` reconnections in a row brought no event.
    GaveUp {
        /// The reconnections made.
        reconnects: u32,
        /// Events delivered over the stream's life.
        delivered: u64,
        /// Why the last connection ended.
        reason: Reason,
    },
    /// An event longer than `max_event_size`.
    EventTooLarge {
        /// The endpoint that sent it.
        endpoint: EndpointId,
        /// The limit.
        limit: usize,
    },
    /// The endpoint asked, with `Retry-After`, for a longer wait than `max_retry_after`, and
    /// the next connection would go to it again (it is the only endpoint, or the stream
    /// can resume only there): SPEC 2.6 stops at once, with the delay asked.
    RetryAfterTooLong {
        /// The endpoint that asked.
        endpoint: EndpointId,
        /// The wait it asked for.
        retry_after: Duration,
        /// Events delivered over the stream's life.
        delivered: u64,
    },
}

impl fmt::Display for StreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StreamError::Fatal { endpoint, reason } => write!(f, "{endpoint}: {reason}"),
            StreamError::Interrupted {
                endpoint,
                delivered,
                reason,
            } => write!(
                f,
                "the stream was interrupted after {delivered} event(s) ({reason}{}); its \
                 method is not safe and it cannot resume without sending the request again",
                endpoint
                    .as_ref()
                    .map(|e| format!(" at {e}"))
                    .unwrap_or_default()
            ),
            StreamError::GaveUp {
                reconnects,
                delivered,
                reason,
            } => write!(
                f,
                "gave up after {reconnects} reconnection(s) without an event ({reason}); \
                 {delivered} event(s) delivered"
            ),
            StreamError::EventTooLarge { endpoint, limit } => {
                write!(
                    f,
                    "{endpoint} sent an event over the {limit}-byte limit (max_event_size)"
                )
            }
            StreamError::RetryAfterTooLong {
                endpoint,
                retry_after,
                delivered,
            } => write!(
                f,
                "{endpoint} asked to wait {retry_after:?} (Retry-After), more than \
                 max_retry_after, and the stream can go on only there; {delivered} event(s) \
                 delivered"
            ),
        }
    }
}

impl std::error::Error for StreamError {}

/// Why an adapter's event stream ended with an error: the stream's own rules, a
/// connection's call that was rejected before anything was sent, or a bad setting. Each
/// adapter names it with its call error: `baton_tokio::EventsError` is
/// `EventsError<baton_tokio::Error>`.
///
/// A stream that ends because its last connection's call failed (it gave up reconnecting,
/// or an unsafe stream could not connect again) keeps that call's error as its `cause`, the
/// `source()`: the text says what the stream's rules decided, the cause why the connection
/// failed. `{:#}` shows both.
///
/// ```
/// use baton_core::sse::{EventsError, Reason, StreamError};
/// let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
/// let e = EventsError::Stream {
///     error: StreamError::GaveUp { reconnects: 10, delivered: 0, reason: Reason::Unreachable },
///     cause: Some(Box::new(refused)),
/// };
/// assert!(e.to_string().starts_with("gave up"));
/// assert!(format!("{e:#}").ends_with("(no endpoint answered); 0 event(s) delivered: connection refused"));
/// assert!(std::error::Error::source(&e).is_some());
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum EventsError<E> {
    /// The stream's rules ended it: a fatal answer, an interruption that would re-send an
    /// unsafe request, the reconnection limit, an oversized event.
    Stream {
        /// What the rules decided.
        error: StreamError,
        /// The error of the last connection's call, when the stream ended on its failure.
        cause: Option<Box<E>>,
    },
    /// A connection's call was rejected before anything was sent (an invalid request or
    /// call setting, a body that cannot be sent again): no reconnection can mend it.
    Call(Box<E>),
    /// A stream setting cannot work (nothing was sent).
    Settings(StreamSettingError),
}

impl<E> EventsError<E> {
    /// The stream's rule that ended it, if the rules did (not a rejected call or setting).
    ///
    /// ```
    /// use baton_core::sse::{EventsError, StreamSettings};
    /// let bad = StreamSettings { max_event_size: 0, ..StreamSettings::default() };
    /// let e: EventsError<std::io::Error> = EventsError::Settings(bad.validate().unwrap_err());
    /// assert!(e.stream_error().is_none());
    /// ```
    pub fn stream_error(&self) -> Option<&StreamError> {
        match self {
            EventsError::Stream { error, .. } => Some(error),
            _ => None,
        }
    }
}

impl<E: fmt::Display> fmt::Display for EventsError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EventsError::Stream { error, cause } => {
                error.fmt(f)?;
                match cause {
                    // The cause's own `{:#}` adds its causes (a baton call error scrubs them).
                    Some(c) if f.alternate() => write!(f, ": {c:#}"),
                    _ => Ok(()),
                }
            }
            EventsError::Call(e) => e.fmt(f),
            EventsError::Settings(e) => e.fmt(f),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for EventsError<E> {
    /// For a stream's rule, the last connection's call error; otherwise the sources of the
    /// error it holds, whose text it shows (so a chain says each part once); match the
    /// variant for the error itself.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            EventsError::Stream { cause, .. } => cause
                .as_deref()
                .map(|c| c as &(dyn std::error::Error + 'static)),
            EventsError::Call(e) => e.source(),
            EventsError::Settings(e) => e.source(),
        }
    }
}

/// Open one connection: run one call with these options.
///
/// ```
/// # use baton_core::sse::Connect;
/// let c = Connect { prefer: Some("b".into()), only_preferred: true, last_event_id: Some("41".into()) };
/// assert!(c.only_preferred);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connect {
    /// The endpoint to try first (the call's preferred endpoint); none on the first
    /// connection, which follows the policy's order.
    pub prefer: Option<EndpointId>,
    /// The call must reach `prefer` or nothing (its `Last-Event-ID` belongs there alone).
    pub only_preferred: bool,
    /// The `Last-Event-ID` header to send, if any.
    pub last_event_id: Option<String>,
}

impl Connect {
    /// Writes this connection into a call: `Accept: text/event-stream` (unless the caller
    /// set an `Accept`), `Cache-Control: no-cache` (no cache in between may answer it),
    /// `Last-Event-ID` (when there is one the header can carry), the preferred endpoint,
    /// and [`CallOptions::only`](crate::CallOptions::only) when the call must stay there
    /// (preference alone yields to health: an unavailable endpoint would be passed by). Every adapter opens its connections through this.
    ///
    /// ```
    /// use baton_core::sse::Connect;
    /// let c = Connect { prefer: Some("a".into()), only_preferred: true, last_event_id: Some("7".into()) };
    /// let (mut headers, mut options) = (http::HeaderMap::new(), baton_core::CallOptions::default());
    /// c.apply(&mut headers, &mut options);
    /// assert_eq!(headers["last-event-id"], "7");
    /// assert_eq!(headers["accept"], "text/event-stream");
    /// assert_eq!(options.prefer.as_deref(), Some("a"));
    /// assert_eq!(options.only.as_deref(), Some("a"));
    /// ```
    pub fn apply(&self, headers: &mut HeaderMap, options: &mut crate::CallOptions) {
        use http::header::{HeaderValue, ACCEPT, CACHE_CONTROL};
        if !headers.contains_key(ACCEPT) {
            headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        }
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        let name = http::header::HeaderName::from_static("last-event-id");
        headers.remove(&name);
        // `EventStream` never plans an id no header can carry (`last_event_id_for` refuses
        // it, and the stream counts as restarted); a hand-made `Connect` with one sends none.
        if let Some(v) = self
            .last_event_id
            .as_deref()
            .and_then(|id| HeaderValue::from_bytes(id.as_bytes()).ok())
        {
            headers.insert(name, v);
        }
        if let Some(p) = &self.prefer {
            options.prefer = Some(p.to_string());
        }
        if self.only_preferred {
            options.only.clone_from(&options.prefer);
        }
    }
}

impl StreamInput<'static> {
    /// The input for a connection's call that ended with an error of `kind`, or `None`
    /// when the error is the caller's (an invalid call, an unknown preferred endpoint):
    /// no reconnection can mend that, so the driver ends the stream with the call's error.
    ///
    /// ```
    /// use baton_core::{ErrorKind, sse::StreamInput};
    /// assert!(StreamInput::call_failed(&ErrorKind::NoUsableEndpoint, false).is_some());
    /// assert!(StreamInput::call_failed(&ErrorKind::UnknownEndpoint("x".into()), false).is_none());
    /// ```
    pub fn call_failed(kind: &crate::ErrorKind, may_have_executed: bool) -> Option<Self> {
        match kind {
            crate::ErrorKind::InvalidCall(_) | crate::ErrorKind::UnknownEndpoint(_) => None,
            crate::ErrorKind::RetryAfterTooLong(d) => Some(StreamInput::Failed {
                may_have_executed,
                retry_after: Some(*d),
            }),
            _ => Some(StreamInput::Failed {
                may_have_executed,
                retry_after: None,
            }),
        }
    }
}

/// What happened to the stream: the inputs of [`EventStream::handle`].
///
/// ```
/// use baton_core::sse::StreamInput;
/// let input = StreamInput::Bytes(b"data: hi\n\n");
/// assert!(matches!(input, StreamInput::Bytes(_)));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum StreamInput<'a> {
    /// The connection's call returned a response from `endpoint`.
    Answered {
        /// Its endpoint id.
        endpoint: &'a str,
        /// Its status.
        status: StatusCode,
        /// Its headers.
        headers: &'a HeaderMap,
        /// Whether an attempt of the call may have executed the request (the report's
        /// `may_have_executed`). An answer in `not_processed` after an attempt that may
        /// have done the work (a timeout, then a 429) leaves the request possibly done.
        may_have_executed: bool,
        /// The wall clock, for a `Retry-After` date (read only for 429/503).
        wall: Option<SystemTime>,
    },
    /// The connection's call ended without a response.
    Failed {
        /// Whether an attempt of it may have executed the request.
        may_have_executed: bool,
        /// The provider's `Retry-After`, when the call ended because it was too long.
        retry_after: Option<Duration>,
    },
    /// Bytes of the open connection's body.
    Bytes(&'a [u8]),
    /// The body ended.
    Ended,
    /// Reading the body failed.
    Broken,
    /// Nothing arrived by the idle deadline of the last [`StreamAction::Read`].
    Idle,
}

/// What the driver does next: the output of [`EventStream::poll`].
///
/// ```
/// use baton_core::sse::StreamAction;
/// fn done(a: &StreamAction) -> bool { matches!(a, StreamAction::Finished(_)) }
/// # let _ = done;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
#[non_exhaustive]
pub enum StreamAction {
    /// Open a connection, then give [`StreamInput::Answered`] or [`StreamInput::Failed`].
    Connect(Connect),
    /// The connection's call is under way: give its answer.
    AwaitAnswer,
    /// Nothing to do before this instant; poll again then.
    WaitUntil(Instant),
    /// Read the open body; give [`StreamInput::Idle`] if no byte arrives by the deadline.
    Read {
        /// When the idle timeout runs out.
        idle_deadline: Option<Instant>,
    },
    /// Hand this to the consumer, then poll again.
    Deliver(StreamItem),
    /// Tell observers, then poll again.
    Notice(Notice),
    /// The stream is over (every later poll says so again). `Ok` after a 204.
    Finished(Result<(), StreamError>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    Start,
    Connecting,
    Open,
    Waiting(Instant),
    Done(Result<(), StreamError>),
}

/// One event stream over a policy's endpoints, sans I/O: it decides where each connection
/// goes, with which `Last-Event-ID`, after how long, and when to stop; the driver opens
/// connections through the engine (so breakers, budget and permissions apply to each
/// one), reads bytes and sleeps.
///
/// ```
/// use std::time::Instant;
/// use baton_core::{Endpoint, Policy};
/// use baton_core::sse::{EventStream, StreamAction, StreamInput, StreamItem, StreamSettings};
/// let policy = Policy::builder().endpoint(Endpoint::new("a", "http://127.0.0.1:1")).build().unwrap();
/// let mut s = EventStream::new(&policy, &http::Method::GET, StreamSettings::default(), 7).unwrap();
/// let now = Instant::now();
/// assert!(matches!(s.poll(now), StreamAction::Connect(_)));
/// let mut h = http::HeaderMap::new();
/// h.insert("content-type", "text/event-stream".parse().unwrap());
/// s.handle(StreamInput::Answered { endpoint: "a", status: http::StatusCode::OK, headers: &h, may_have_executed: true, wall: None }, now);
/// assert!(matches!(s.poll(now), StreamAction::Notice(_)));
/// s.handle(StreamInput::Bytes(b"id: 1\ndata: hi\n\n"), now);
/// let StreamAction::Deliver(StreamItem::Event { event, .. }) = s.poll(now) else { panic!() };
/// assert_eq!(event.data, "hi");
/// assert!(matches!(s.poll(now), StreamAction::Read { .. }));
/// ```
#[derive(Debug, Clone)]
pub struct EventStream {
    settings: StreamSettings,
    endpoints: Vec<EndpointId>,
    safe: bool,
    not_processed: StatusSet,
    parser: Parser,
    phase: Phase,
    /// The endpoint of the open (or last opened) connection.
    endpoint: Option<usize>,
    /// Where the next connection goes first (none until one opened: the policy's order).
    target: Option<usize>,
    /// The `Last-Event-ID` the connection under way was sent.
    sent: Option<String>,
    /// Connections to `target` in a row without an event.
    on_target: u32,
    /// Reconnections in a row without an event.
    failures: u32,
    /// The stream's request may have done its work at some point (a connection opened,
    /// or one failed after it may have been processed): from then on a stream whose
    /// method is not safe goes on only as a resumption.
    ran: bool,
    delivered: u64,
    /// When the open connection last gave a byte (set when it opens).
    last_byte: Option<Instant>,
    rng: Rng,
    out: VecDeque<StreamAction>,
    scratch: Vec<Event>,
}

impl EventStream {
    /// A stream over `policy`'s endpoints, opened by `method`, jittered from `seed`.
    pub fn new(
        policy: &Policy,
        method: &Method,
        settings: StreamSettings,
        seed: u64,
    ) -> Result<Self, StreamSettingError> {
        settings.validate()?;
        Ok(EventStream {
            endpoints: policy
                .endpoints()
                .iter()
                .map(|e| EndpointId::from(e.id()))
                .collect(),
            safe: crate::permission::is_safe_method(method),
            not_processed: policy.settings().not_processed,
            parser: Parser::with_max_event_size(settings.max_event_size),
            settings,
            phase: Phase::Start,
            endpoint: None,
            target: None,
            sent: None,
            on_target: 0,
            failures: 0,
            ran: false,
            delivered: 0,
            last_byte: None,
            rng: Rng::new(seed),
            out: VecDeque::new(),
            scratch: Vec::new(),
        })
    }

    /// Events delivered so far.
    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// Whether the stream has ended (its last action, [`StreamAction::Finished`], may
    /// still be waiting to be polled).
    pub(crate) fn is_finished(&self) -> bool {
        matches!(self.phase, Phase::Done(_))
    }

    /// The last event ID buffer of the current connection's endpoint.
    pub fn last_event_id(&self) -> &str {
        self.parser.last_event_id()
    }

    /// The settings.
    pub fn settings(&self) -> &StreamSettings {
        &self.settings
    }

    /// What to do next. Polling never moves the clock: `now` only decides whether a wait
    /// is over.
    pub fn poll(&mut self, now: Instant) -> StreamAction {
        if let Some(a) = self.out.pop_front() {
            return a;
        }
        match &self.phase {
            Phase::Start => self.connect(),
            Phase::Waiting(until) if now >= *until => self.connect(),
            Phase::Waiting(until) => StreamAction::WaitUntil(*until),
            Phase::Connecting => StreamAction::AwaitAnswer,
            Phase::Open => StreamAction::Read {
                idle_deadline: self
                    .settings
                    .idle_timeout
                    .and_then(|t| self.last_byte?.checked_add(t)),
            },
            Phase::Done(r) => StreamAction::Finished(r.clone()),
        }
    }

    /// Takes what happened. Inputs that do not fit the stream's phase (bytes while no
    /// connection is open, an answer nobody asked for) are ignored.
    pub fn handle(&mut self, input: StreamInput<'_>, now: Instant) {
        match (input, &self.phase) {
            (
                StreamInput::Answered {
                    endpoint,
                    status,
                    headers,
                    may_have_executed,
                    wall,
                },
                Phase::Connecting,
            ) => {
                let answer = (status, headers, may_have_executed);
                self.answered(endpoint, answer, wall, now)
            }
            (
                StreamInput::Failed {
                    may_have_executed,
                    retry_after,
                },
                Phase::Connecting,
            ) => self.reconnect(Reason::Unreachable, may_have_executed, retry_after, now),
            (StreamInput::Bytes(b), Phase::Open) => self.bytes(b, now),
            (StreamInput::Ended, Phase::Open) => self.reconnect(Reason::Ended, true, None, now),
            (StreamInput::Broken, Phase::Open) => self.reconnect(Reason::Broken, true, None, now),
            (StreamInput::Idle, Phase::Open) => self.reconnect(Reason::Idle, true, None, now),
            _ => {}
        }
    }

    fn connect(&mut self) -> StreamAction {
        self.phase = Phase::Connecting;
        let same = self.target.is_some() && self.target == self.endpoint;
        let id = last_event_id_for(
            self.parser.last_event_id(),
            same,
            self.settings.shared_event_ids,
        );
        self.sent = id.map(str::to_owned);
        StreamAction::Connect(Connect {
            prefer: self.target.map(|t| self.endpoints[t].clone()),
            only_preferred: id.is_some() && !self.settings.shared_event_ids,
            last_event_id: self.sent.clone(),
        })
    }

    /// The connection's call answered from `endpoint`: the status, its headers, and
    /// whether an attempt of the call may have executed the request.
    fn answered(
        &mut self,
        endpoint: &str,
        (status, headers, may_have_executed): (StatusCode, &HeaderMap, bool),
        wall: Option<SystemTime>,
        now: Instant,
    ) {
        let Some(at) = self.endpoints.iter().position(|e| **e == *endpoint) else {
            // Not one of the policy's endpoints: nothing of it can be trusted.
            return self.finish(Err(StreamError::Fatal {
                endpoint: EndpointId::from(endpoint),
                reason: Fatal::Status(status),
            }));
        };
        match answer(status, headers, self.settings.refresh_on_403) {
            Answer::Open => self.opened(at, now),
            Answer::End => self.finish(Ok(())),
            Answer::Retry => {
                self.note_target(at);
                let wait = crate::retry_after::retry_after_from_headers(headers, wall);
                // SPEC 1: a 429 after an attempt that may have done the work does not
                // unsay it, so a stream that may not be re-sent blind is interrupted.
                let executed = may_have_executed || !self.not_processed.contains(status);
                self.reconnect(Reason::Status(status), executed, wait, now)
            }
            // The call already refreshed once (credential slots refresh inside it): a
            // refusal the stream cannot get past.
            Answer::Refresh => self.finish(Err(StreamError::Fatal {
                endpoint: self.endpoints[at].clone(),
                reason: Fatal::Status(status),
            })),
            Answer::Fatal(reason) => self.finish(Err(StreamError::Fatal {
                endpoint: self.endpoints[at].clone(),
                reason,
            })),
        }
    }

    /// The call landed on `at`: that is now where the stream stands.
    fn note_target(&mut self, at: usize) {
        if self.target != Some(at) {
            self.target = Some(at);
            self.on_target = 1;
        }
    }

    fn opened(&mut self, at: usize, now: Instant) {
        if !self.continues_at(at) {
            self.parser = Parser::with_max_event_size(self.settings.max_event_size);
            if self.delivered > 0 {
                self.out
                    .push_back(StreamAction::Deliver(StreamItem::Restarted {
                        endpoint: self.endpoints[at].clone(),
                    }));
            }
        } else {
            self.parser = self.parser.reconnected();
        }
        self.note_target(at);
        self.endpoint = Some(at);
        self.ran = true;
        self.last_byte = Some(now);
        self.phase = Phase::Open;
        self.out.push_front(StreamAction::Notice(Notice::Opened {
            endpoint: self.endpoints[at].clone(),
            last_event_id: self.sent.take(),
        }));
    }

    /// Whether a connection that opened at `at` continues the stream: it was sent the
    /// last event ID and `at` knows it (the endpoint that issued it, or any with shared
    /// ids), or there is no ID and it is the same endpoint. Otherwise the stream starts
    /// over: a call aimed elsewhere may fail over back to the old endpoint without the ID.
    fn continues_at(&self, at: usize) -> bool {
        let same = self.endpoint.is_none_or(|e| e == at);
        match self.sent {
            Some(_) => same || self.settings.shared_event_ids,
            None => same && self.parser.last_event_id().is_empty(),
        }
    }

    fn bytes(&mut self, chunk: &[u8], now: Instant) {
        self.last_byte = Some(now);
        let at = self.endpoint.unwrap_or_default();
        let fed = self.parser.feed(chunk, &mut self.scratch);
        if !self.scratch.is_empty() {
            // Progress: only a delivered event resets the reconnection counts.
            self.failures = 0;
            self.on_target = 0;
        }
        for event in self.scratch.drain(..) {
            self.delivered += 1;
            self.out.push_back(StreamAction::Deliver(StreamItem::Event {
                endpoint: self.endpoints[at].clone(),
                event,
            }));
        }
        if let Err(e) = fed {
            self.finish(Err(StreamError::EventTooLarge {
                endpoint: self.endpoints[at].clone(),
                limit: e.limit,
            }));
        }
    }

    /// The connection ended (or never opened) for `reason`; `executed` says whether the
    /// request may have done its work. Decides where and when the next one goes, or ends.
    fn reconnect(
        &mut self,
        reason: Reason,
        executed: bool,
        retry_after: Option<Duration>,
        now: Instant,
    ) {
        self.failures += 1;
        self.ran |= executed;
        let too_long = retry_after.is_some_and(|d| d > self.settings.max_retry_after);
        let next = self.next_target(too_long);
        // SPEC 9 names the interruption first: an unsafe stream that cannot resume says
        // so, also when the reconnection limit is reached at the same time.
        if !self.safe && self.ran && !self.resumable(next) {
            return self.finish(Err(StreamError::Interrupted {
                endpoint: self
                    .target
                    .or(self.endpoint)
                    .map(|e| self.endpoints[e].clone()),
                delivered: self.delivered,
                reason,
            }));
        }
        // The next connection stays where the too long wait was asked: at the target, or,
        // before any connection landed (a first call that ended on the wait), at the only
        // endpoint.
        let stays = match next {
            Some(n) => Some(n) == self.target,
            None => self.endpoints.len() == 1,
        };
        if too_long && stays {
            return self.finish(Err(StreamError::RetryAfterTooLong {
                endpoint: self.endpoints[next.unwrap_or(0)].clone(),
                retry_after: retry_after.unwrap_or_default(),
                delivered: self.delivered,
            }));
        }
        if self.failures > self.settings.max_reconnects {
            return self.finish(Err(StreamError::GaveUp {
                reconnects: self.failures - 1,
                delivered: self.delivered,
                reason,
            }));
        }
        if next != self.target {
            self.on_target = 0;
        }
        self.on_target += 1;
        self.target = next;
        let backoff = self
            .settings
            .backoff
            .delay(self.failures - 1, &mut self.rng);
        // The server's `retry:` is capped like a `Retry-After`: one line cannot stall the
        // stream for ever.
        let server = self
            .parser
            .retry()
            .map(|r| r.min(self.settings.max_retry_after));
        let mut after = reconnect_delay(server, backoff);
        // A Retry-After too long moved the stream to another endpoint: no wait for it.
        if let Some(ra) = retry_after.filter(|_| !too_long) {
            after = after.max(ra);
        }
        self.phase = Phase::Waiting(now.checked_add(after).unwrap_or(now));
        self.out
            .push_back(StreamAction::Notice(Notice::Reconnecting {
                from: self.endpoint.map(|e| self.endpoints[e].clone()),
                to: next.map(|t| self.endpoints[t].clone()),
                after,
                reason,
                failover: self.endpoint.is_some() && next != self.endpoint,
            }));
    }

    /// Where the next connection goes: the same endpoint until `reconnects_per_endpoint`
    /// connections in a row brought no event (or its `Retry-After` is too long), then the
    /// next in the policy's order. A stream whose method is not safe stays where it can
    /// resume.
    fn next_target(&self, too_long: bool) -> Option<usize> {
        let cur = self.target?;
        let stay = self.on_target < self.settings.reconnects_per_endpoint && !too_long;
        let pinned = !self.safe && self.ran && !self.settings.shared_event_ids;
        if stay || pinned || self.endpoints.len() == 1 {
            Some(cur)
        } else {
            Some((cur + 1) % self.endpoints.len())
        }
    }

    /// A request that may have done its work can go to `next` again only as a resumption:
    /// with an event id, to the endpoint it belongs to (or to any, when ids are shared).
    fn resumable(&self, next: Option<usize>) -> bool {
        let same = next.is_some() && next == self.endpoint;
        last_event_id_for(
            self.parser.last_event_id(),
            same,
            self.settings.shared_event_ids,
        )
        .is_some()
    }

    fn finish(&mut self, result: Result<(), StreamError>) {
        self.phase = Phase::Done(result);
    }
}
