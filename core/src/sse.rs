//! Server-Sent Events: an incremental parser exact to the WHATWG "event stream
//! interpretation" rules, the ground floor of event streams that resume across providers
//! (SPEC 9).
//!
//! Feed it the bytes of a response body in chunks of any size, split anywhere (even inside
//! a CRLF or a multi-byte character); it yields the same events as on the whole input:
//!
//! - lines end with LF, CR or CRLF; a leading byte-order mark is dropped once;
//! - a line starting with `:` is a comment; `field:value` drops one space after the colon;
//!   a line without a colon is a field with an empty value;
//! - `data` appends its value and a line feed to the data buffer; `event` sets the type;
//!   `id` sets the last-event-ID buffer unless the value holds a NUL (an empty `id` clears
//!   it); `retry` sets the reconnection time only when the value is all ASCII digits; other
//!   fields are ignored;
//! - a blank line dispatches: with an empty data buffer nothing is dispatched (the buffers
//!   are reset all the same), else the event gets the data without its last line feed, the
//!   type (`message` when none was given) and the last event ID, which is kept across
//!   events; an event cut short by the end of the stream is dropped.
//!
//! One event's size (its data, type and the line being read) is capped (default 1 MiB): a
//! larger event is an error, never a silent cut. The parser reads no clock and does no
//! I/O; invalid UTF-8 becomes U+FFFD, as the standard decodes.
//!
//! Beside it, the rules every adapter applies to a stream's connections: what a response
//! means ([`answer`]), how long to wait before reconnecting ([`reconnect_delay`]) and when
//! `Last-Event-ID` goes along ([`last_event_id_for`]).
//!
//! # Streams that resume across providers
//!
//! [`EventStream`] is the stream's state machine, sans I/O like the engine's calls, and the
//! one every adapter drives (`events()` on baton-tokio and baton-async-std gives a
//! `Stream`, on baton-blocking an `Iterator`). A stream is a call whose answer arrives in
//! parts (SPEC 9): every connection is one ordinary call through the engine, so the
//! policy's order, breakers, budget, permissions and retries of refused connections apply
//! to it; the stream decides what the calls cannot see:
//!
//! - **What an answer means** ([`answer`]): 200 with `text/event-stream` opens; 204 ends
//!   the stream for good (`Finished(Ok)`); 408, 429 and 5xx reconnect after `Retry-After`
//!   or the backoff; any other status or content type is [`StreamError::Fatal`]. A 401
//!   goes to credential refresh: an endpoint with a credential slot
//!   ([`credential`](crate::credential)) refreshes its token and re-sends once inside the
//!   connection's call, which fails over after a refusal of a fresh token; a 401 that
//!   still ends the call (or one from an endpoint without a credential) is fatal.
//! - **Where the next connection goes**: the same endpoint first, with `Last-Event-ID` when
//!   the buffer is not empty, after the server's `retry:` or the jittered backoff,
//!   whichever is longer; after [`StreamSettings::reconnects_per_endpoint`] connections in
//!   a row without an event (or a `Retry-After` over `max_retry_after`), the next endpoint
//!   in the policy's order. A `Retry-After` over `max_retry_after` where the stream can go
//!   on only at the endpoint that asked (the only one, or the one it must resume at) ends
//!   the stream at once ([`StreamError::RetryAfterTooLong`], SPEC 2.6). A connection that carries `Last-Event-ID` to an endpoint that
//!   does not share ids reaches that endpoint or none ([`Connect::only_preferred`]: the
//!   call is restricted to it, since preference alone yields to an open breaker).
//! - **Which ids follow**: another endpoint gets `Last-Event-ID` only with
//!   [`StreamSettings::shared_event_ids`]; without it the consumer first gets
//!   [`StreamItem::Restarted`] (once events were delivered) and the stream starts over.
//! - **When to stop**: [`StreamSettings::max_reconnects`] reconnections in a row without an
//!   event give [`StreamError::GaveUp`]: only a delivered event resets the count, so a
//!   server that accepts and drops every connection cannot keep the stream alive forever.
//!   A stream that ends on its last connection's failed call keeps that call's error as
//!   the cause ([`EventsError::Stream`], its `source()`).
//! - **Never twice**: a stream opened by a method that is not safe (a `POST` that starts a
//!   job and streams its progress) is re-sent only when nothing can have executed (a
//!   refused connection, or a 429 from a call none of whose attempts may have done the
//!   work: the call's `may_have_executed` counts, not the status alone) or as a resumption with an event id to the endpoint that
//!   issued it (any endpoint, with shared ids); otherwise it ends with
//!   [`StreamError::Interrupted`], which says how many events were delivered.
//! - **Idle watchdog**: with [`StreamSettings::idle_timeout`], `Read` carries a deadline;
//!   no byte by then (heartbeat comments count) closes the connection and reconnects. The
//!   policy's `body_timeout` does not apply to a stream's body: set this instead.
//! - **What each connection sends**, on every adapter's `events()`: the request's
//!   headers, body and per-call options, plus `Accept: text/event-stream` and, when
//!   resuming, `Last-Event-ID`. Each reconnection sends the body again, so it must be
//!   bytes, never a one-shot stream.
//!
//! Events are delivered whole or not at all: the half-read event of a broken connection is
//! dropped, and the server replays from `Last-Event-ID`.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use baton_core::{Endpoint, Policy};
//! use baton_core::sse::{EventStream, Notice, StreamAction, StreamInput, StreamItem, StreamSettings};
//!
//! let policy = Policy::builder()
//!     .endpoint(Endpoint::new("a", "http://127.0.0.1:1"))
//!     .endpoint(Endpoint::new("b", "http://127.0.0.1:2"))
//!     .build()
//!     .unwrap();
//! let settings = StreamSettings { shared_event_ids: true, ..StreamSettings::default() };
//! let mut stream = EventStream::new(&policy, &http::Method::GET, settings, 1).unwrap();
//! let mut ok = http::HeaderMap::new();
//! ok.insert("content-type", "text/event-stream".parse().unwrap());
//! let mut now = Instant::now();
//!
//! let StreamAction::Connect(first) = stream.poll(now) else { unreachable!() };
//! assert_eq!(first.last_event_id, None);
//! stream.handle(StreamInput::Answered { endpoint: "a", status: http::StatusCode::OK, headers: &ok, may_have_executed: true, wall: None }, now);
//! stream.handle(StreamInput::Bytes(b"id: 7\ndata: one\n\n"), now);
//! stream.handle(StreamInput::Broken, now);
//! let mut events = 0;
//! let next = loop {
//!     match stream.poll(now) {
//!         StreamAction::Deliver(StreamItem::Event { .. }) => events += 1,
//!         StreamAction::Notice(_) => {}
//!         StreamAction::WaitUntil(t) => now = t,
//!         StreamAction::Connect(c) => break c,
//!         other => panic!("{other:?}"),
//!     }
//! };
//! assert_eq!(events, 1);
//! // Back to the same endpoint first, resuming after event 7.
//! assert_eq!(next.prefer.as_deref(), Some("a"));
//! assert_eq!(next.last_event_id.as_deref(), Some("7"));
//! ```
//!
//! ```
//! use baton_core::sse::Parser;
//! let mut p = Parser::new();
//! let mut events = Vec::new();
//! p.feed(b"id: 7\r\nevent: price\r\ndata: {\"eur\":", &mut events).unwrap();
//! p.feed(b"1.08}\r\n\r\n: heartbeat\n", &mut events).unwrap();
//! assert_eq!(events.len(), 1);
//! assert_eq!(events[0].event, "price");
//! assert_eq!(events[0].data, "{\"eur\":1.08}");
//! assert_eq!(events[0].id.as_deref(), Some("7"));
//! assert_eq!(p.last_event_id(), "7");
//! ```

use std::fmt;
use std::time::Duration;

mod driver;
mod stream;
pub use driver::{
    drive_blocking, AsyncDriver, BlockingTransport, Chunk, Connection, NoticeSink, Opened,
    Transport,
};
pub use stream::{
    Connect, EventStream, EventsError, Notice, Reason, StreamAction, StreamError, StreamInput,
    StreamItem, StreamSettingError, StreamSettings,
};

/// One dispatched event.
///
/// ```
/// let e = baton_core::sse::Event { id: None, event: "message".into(), data: "hi".into() };
/// assert_eq!(e.data, "hi");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The last event ID at dispatch (`None` when it is empty).
    pub id: Option<String>,
    /// The event type (`message` when the stream gave none).
    pub event: String,
    /// The data lines, joined by line feeds.
    pub data: String,
}

/// An event larger than the parser's cap (the stream is then broken: reconnect or stop).
///
/// ```
/// let mut p = baton_core::sse::Parser::with_max_event_size(8);
/// let err = p.feed(b"data: far too long for eight bytes\n", &mut Vec::new()).unwrap_err();
/// assert_eq!(err.limit, 8);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventTooLarge {
    /// The cap, in bytes.
    pub limit: usize,
}

impl fmt::Display for EventTooLarge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "an event of the stream is larger than the {} byte cap",
            self.limit
        )
    }
}

impl std::error::Error for EventTooLarge {}

/// The default cap on one event: 1 MiB.
pub const DEFAULT_MAX_EVENT_SIZE: usize = 1 << 20;

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The incremental parser of one event stream (one connection; build a new one, or call
/// [`Parser::reconnected`], for the next).
///
/// ```
/// use std::time::Duration;
/// use baton_core::sse::Parser;
///
/// let mut p = Parser::new();
/// let mut events = Vec::new();
/// // Chunks split anywhere, even inside a CRLF, give the same events as the whole input.
/// p.feed(b"retry: 1500\r", &mut events).unwrap();
/// p.feed(b"\nid: 41\ndata: first\ndata: second\n\nid: 42\ndata: cut", &mut events).unwrap();
/// assert_eq!(events.len(), 1);
/// assert_eq!(events[0].event, "message");
/// assert_eq!(events[0].data, "first\nsecond");
/// // The connection broke mid-event: the next one resumes after event 41.
/// let next = p.reconnected();
/// assert_eq!(next.last_event_id(), "41");
/// assert_eq!(next.retry(), Some(Duration::from_millis(1500)));
/// ```
#[derive(Debug, Clone)]
pub struct Parser {
    /// The bytes of the line being read.
    line: Vec<u8>,
    data: String,
    event: String,
    /// The last event ID buffer: set by `id` fields as they are read.
    last_id: String,
    /// The last event ID string: the buffer as of the last dispatch (blank line), which
    /// is what a reconnection sends, so a half-read event's `id` never counts.
    dispatched_id: String,
    retry: Option<Duration>,
    /// The previous chunk ended with CR: a leading LF of the next one ends no line.
    after_cr: bool,
    /// Bytes seen so far, up to the length of a BOM (to drop one split across chunks).
    start: Vec<u8>,
    started: bool,
    max: usize,
}

impl Default for Parser {
    fn default() -> Self {
        Parser::new()
    }
}

impl Parser {
    /// A parser with the default cap ([`DEFAULT_MAX_EVENT_SIZE`]).
    pub fn new() -> Self {
        Parser::with_max_event_size(DEFAULT_MAX_EVENT_SIZE)
    }

    /// A parser whose events may be at most `max` bytes (data, type and the current line).
    pub fn with_max_event_size(max: usize) -> Self {
        Parser {
            line: Vec::new(),
            data: String::new(),
            event: String::new(),
            last_id: String::new(),
            dispatched_id: String::new(),
            retry: None,
            after_cr: false,
            start: Vec::new(),
            started: false,
            max,
        }
    }

    /// The last event ID string: the ID buffer as of the last dispatch (kept across
    /// events; what a reconnect sends as `Last-Event-ID` when it is not empty). An `id`
    /// of an event not finished yet does not count.
    ///
    /// ```
    /// let mut p = baton_core::sse::Parser::new();
    /// p.feed(b"id: 1\ndata: a\n\nid: 2\ndata: b", &mut Vec::new()).unwrap();
    /// assert_eq!(p.last_event_id(), "1");
    /// ```
    pub fn last_event_id(&self) -> &str {
        &self.dispatched_id
    }

    /// The reconnection time the stream asked for with `retry:`, if it did.
    pub fn retry(&self) -> Option<Duration> {
        self.retry
    }

    /// The state for a new connection of the same stream: the last event ID and the
    /// reconnection time are kept, everything half-read is dropped.
    pub fn reconnected(&self) -> Parser {
        Parser {
            last_id: self.dispatched_id.clone(),
            dispatched_id: self.dispatched_id.clone(),
            retry: self.retry,
            ..Parser::with_max_event_size(self.max)
        }
    }

    /// Parses `chunk`, appending every event it completes to `out`.
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<Event>) -> Result<(), EventTooLarge> {
        let chunk = self.strip_bom(chunk);
        let mut rest = chunk.as_ref();
        // An empty chunk tells nothing about the byte after a CR: the flag waits for one.
        if self.after_cr && !rest.is_empty() {
            self.after_cr = false;
            if let Some(tail) = rest.strip_prefix(b"\n") {
                rest = tail;
            }
        }
        while let Some(end) = rest.iter().position(|&b| b == b'\n' || b == b'\r') {
            self.push_line_bytes(&rest[..end])?;
            let line = std::mem::take(&mut self.line);
            self.line_done(&line, out);
            self.line = line;
            self.line.clear();
            if rest[end] == b'\r' {
                match rest.get(end + 1) {
                    Some(b'\n') => rest = &rest[end + 2..],
                    Some(_) => rest = &rest[end + 1..],
                    None => {
                        self.after_cr = true;
                        rest = &[];
                    }
                }
            } else {
                rest = &rest[end + 1..];
            }
        }
        self.push_line_bytes(rest)
    }

    /// Drops a byte-order mark at the very start, even one split across chunks.
    fn strip_bom<'c>(&mut self, chunk: &'c [u8]) -> std::borrow::Cow<'c, [u8]> {
        if self.started {
            return chunk.into();
        }
        self.start.extend_from_slice(chunk);
        let seen = self.start.len().min(BOM.len());
        if self.start[..seen] != BOM[..seen] {
            self.started = true;
            return std::mem::take(&mut self.start).into();
        }
        if self.start.len() < BOM.len() {
            return (&[][..]).into();
        }
        self.started = true;
        let all = std::mem::take(&mut self.start);
        all[BOM.len()..].to_vec().into()
    }

    fn push_line_bytes(&mut self, bytes: &[u8]) -> Result<(), EventTooLarge> {
        let size = self.line.len() + bytes.len() + self.data.len() + self.event.len();
        if size > self.max {
            return Err(EventTooLarge { limit: self.max });
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    /// One complete line.
    fn line_done(&mut self, line: &[u8], out: &mut Vec<Event>) {
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if line[0] == b':' {
            return;
        }
        let text = String::from_utf8_lossy(line);
        let (field, value) = match text.find(':') {
            Some(i) => {
                let v = &text[i + 1..];
                (&text[..i], v.strip_prefix(' ').unwrap_or(v))
            }
            None => (&text[..], ""),
        };
        match field {
            "event" => value.clone_into(&mut self.event),
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
            }
            "id" if !value.contains('\0') => value.clone_into(&mut self.last_id),
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                // All digits: too large a number saturates.
                let ms = value.parse::<u64>().unwrap_or(u64::MAX);
                self.retry = Some(Duration::from_millis(ms));
            }
            _ => {}
        }
    }

    fn dispatch(&mut self, out: &mut Vec<Event>) {
        self.dispatched_id.clone_from(&self.last_id);
        if self.data.is_empty() {
            self.event.clear();
            return;
        }
        let mut data = std::mem::take(&mut self.data);
        if data.ends_with('\n') {
            data.pop();
        }
        let event = match std::mem::take(&mut self.event) {
            e if e.is_empty() => "message".to_string(),
            e => e,
        };
        out.push(Event {
            id: (!self.last_id.is_empty()).then(|| self.last_id.clone()),
            event,
            data,
        });
    }
}

/// What an event stream's response means for the stream (the issue's rules, shared by
/// every adapter): open it, end it for good, try again, refresh the credential, or stop.
///
/// ```
/// use baton_core::sse::{answer, Answer};
/// let mut h = http::HeaderMap::new();
/// h.insert("content-type", "text/event-stream; charset=utf-8".parse().unwrap());
/// assert_eq!(answer(http::StatusCode::OK, &h, false), Answer::Open);
/// assert_eq!(answer(http::StatusCode::NO_CONTENT, &h, false), Answer::End);
/// assert_eq!(answer(http::StatusCode::SERVICE_UNAVAILABLE, &h, false), Answer::Retry);
/// assert_eq!(answer(http::StatusCode::UNAUTHORIZED, &h, false), Answer::Refresh);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// 200 with `text/event-stream`: read events from the body.
    Open,
    /// 204: the server ends the stream for good; no reconnect.
    End,
    /// 408, 429 or 5xx: reconnect after `Retry-After`, else the backoff.
    Retry,
    /// 401 (and 403 when configured): refresh the credential, then reconnect once.
    Refresh,
    /// Anything else: the stream cannot go on; the reason says why.
    Fatal(Fatal),
}

/// Why a stream's response is fatal.
///
/// ```
/// let f = baton_core::sse::Fatal::ContentType(Some("text/html".into()));
/// assert!(f.to_string().contains("text/html"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fatal {
    /// A status that is neither an event stream, an end, nor worth a retry (another 4xx,
    /// another 2xx, a 3xx that was not followed).
    Status(http::StatusCode),
    /// A 200 whose content type is not `text/event-stream` (or is missing).
    ContentType(Option<String>),
}

impl fmt::Display for Fatal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fatal::Status(s) => write!(f, "the event stream was answered {s}"),
            Fatal::ContentType(Some(ct)) => {
                write!(
                    f,
                    "the event stream was answered with content type {ct:?}, not text/event-stream"
                )
            }
            Fatal::ContentType(None) => {
                f.write_str("the event stream was answered without a content type")
            }
        }
    }
}

impl std::error::Error for Fatal {}

/// Classifies an event stream's response by its status and `Content-Type`.
/// `refresh_on_403` makes a 403 ask for a credential refresh, as a 401 does.
pub fn answer(status: http::StatusCode, headers: &http::HeaderMap, refresh_on_403: bool) -> Answer {
    match status.as_u16() {
        200 => {
            let ct = headers
                .get(http::header::CONTENT_TYPE)
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
            let essence = ct
                .as_deref()
                .and_then(|c| c.split(';').next())
                .map(|e| e.trim().to_ascii_lowercase());
            if essence.as_deref() == Some("text/event-stream") {
                Answer::Open
            } else {
                Answer::Fatal(Fatal::ContentType(ct))
            }
        }
        204 => Answer::End,
        401 => Answer::Refresh,
        403 if refresh_on_403 => Answer::Refresh,
        408 | 429 | 500..=599 => Answer::Retry,
        _ => Answer::Fatal(Fatal::Status(status)),
    }
}

/// How long to wait before reconnecting: the server's `retry:` or the (jittered) backoff,
/// whichever is longer.
///
/// ```
/// use std::time::Duration;
/// let d = baton_core::sse::reconnect_delay(Some(Duration::from_secs(3)), Duration::from_millis(400));
/// assert_eq!(d, Duration::from_secs(3));
/// ```
pub fn reconnect_delay(server_retry: Option<Duration>, backoff: Duration) -> Duration {
    server_retry.map_or(backoff, |r| r.max(backoff))
}

/// The `Last-Event-ID` a reconnection sends: the last event ID when it is not empty (and a
/// header can carry it: no control character), to the same endpoint always, to another
/// endpoint only when the policy says the endpoints share event ids (otherwise the consumer
/// is told the stream restarted, and de-duplicates). An ID no header can carry is not
/// sent, and the stream counts as restarted.
///
/// ```
/// use baton_core::sse::last_event_id_for;
/// assert_eq!(last_event_id_for("41", true, false), Some("41"));
/// assert_eq!(last_event_id_for("41", false, false), None);
/// assert_eq!(last_event_id_for("41", false, true), Some("41"));
/// assert_eq!(last_event_id_for("", true, true), None);
/// assert_eq!(last_event_id_for("4\u{1}1", true, true), None); // no header can carry it
/// ```
pub fn last_event_id_for(last_id: &str, same_endpoint: bool, shared_ids: bool) -> Option<&str> {
    let sendable = http::HeaderValue::from_bytes(last_id.as_bytes()).is_ok();
    (!last_id.is_empty() && sendable && (same_endpoint || shared_ids)).then_some(last_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(input: &[u8]) -> Vec<Event> {
        let mut p = Parser::new();
        let mut out = Vec::new();
        p.feed(input, &mut out).unwrap();
        out
    }

    fn data(events: &[Event]) -> Vec<&str> {
        events.iter().map(|e| e.data.as_str()).collect()
    }

    #[test]
    fn the_standards_examples() {
        // Two events; the first data has two lines; a comment between.
        let e = parse(b"data: YHOO\ndata: +2\ndata: 10\n\n: ignored\ndata: second\n\n");
        assert_eq!(data(&e), ["YHOO\n+2\n10", "second"]);
        // A space after the colon is dropped once; none, or two, are kept as they are.
        let e = parse(b"data:test\n\ndata:  test\n\n");
        assert_eq!(data(&e), ["test", " test"]);
        // `data` alone is an empty line of data; two of them one line feed.
        let e = parse(b"data\n\ndata\ndata\n\ndata:\n");
        assert_eq!(data(&e), ["", "\n"]);
        assert!(e.iter().all(|e| e.event == "message"));
    }

    #[test]
    fn every_line_end_counts_and_a_crlf_split_across_chunks_is_one() {
        let e = parse(b"data: a\rdata: b\r\n\r\ndata: c\n\r\n");
        assert_eq!(data(&e), ["a\nb", "c"]);
        let mut p = Parser::new();
        let mut out = Vec::new();
        p.feed(b"data: x\r", &mut out).unwrap();
        p.feed(b"\n\r", &mut out).unwrap();
        p.feed(b"\n", &mut out).unwrap();
        assert_eq!(data(&out), ["x"]);
        // An empty chunk between the CR and the LF changes nothing (found by the
        // chunking property test).
        let mut p = Parser::new();
        let mut out = Vec::new();
        for chunk in [&b"data: y\r"[..], b"", b"\n", b"", b"\r", b"", b"\n"] {
            p.feed(chunk, &mut out).unwrap();
        }
        assert_eq!(data(&out), ["y"]);
    }

    #[test]
    fn a_leading_bom_is_dropped_once_even_split_and_only_at_the_start() {
        let mut p = Parser::new();
        let mut out = Vec::new();
        p.feed(b"\xEF", &mut out).unwrap();
        p.feed(b"\xBB\xBFdata: 1\n\n", &mut out).unwrap();
        p.feed(b"\xEF\xBB\xBFdata: 2\n\n", &mut out).unwrap();
        // The second BOM starts a line whose field is "\u{feff}data": ignored.
        assert_eq!(data(&out), ["1"]);
        assert_eq!(data(&parse(b"\xEFdata: x\n\n")), Vec::<&str>::new());
    }

    #[test]
    fn ids_persist_an_empty_id_clears_and_a_nul_is_ignored() {
        let e = parse(b"id: 1\ndata: a\n\ndata: b\n\nid\ndata: c\n\nid: 2\0x\ndata: d\n\n");
        let ids: Vec<Option<&str>> = e.iter().map(|e| e.id.as_deref()).collect();
        assert_eq!(ids, [Some("1"), Some("1"), None, None]);
        let mut p = Parser::new();
        p.feed(b"id: 9\n\n", &mut Vec::new()).unwrap();
        // An id without data dispatches nothing but is kept.
        assert_eq!(p.last_event_id(), "9");
    }

    #[test]
    fn retry_only_when_all_ascii_digits() {
        let mut p = Parser::new();
        let mut out = Vec::new();
        p.feed(b"retry: 1500\n", &mut out).unwrap();
        assert_eq!(p.retry(), Some(Duration::from_millis(1500)));
        for bad in [
            &b"retry: 15x\n"[..],
            b"retry: -1\n",
            b"retry: 1.5\n",
            b"retry:\n",
            b"retry: \xD9\xA3\n",
        ] {
            p.feed(bad, &mut out).unwrap();
            assert_eq!(p.retry(), Some(Duration::from_millis(1500)), "{bad:?}");
        }
        p.feed(b"retry: 99999999999999999999999\n", &mut out)
            .unwrap();
        assert_eq!(p.retry(), Some(Duration::from_millis(u64::MAX)));
    }

    #[test]
    fn event_types_reset_after_each_dispatch_and_empty_data_dispatches_nothing() {
        let e = parse(b"event: add\ndata: 1\n\ndata: 2\n\nevent: gone\n\ndata: 3\n\n");
        let types: Vec<&str> = e.iter().map(|e| e.event.as_str()).collect();
        assert_eq!(types, ["add", "message", "message"]);
        assert_eq!(data(&e), ["1", "2", "3"]);
    }

    #[test]
    fn an_unfinished_event_is_dropped_and_unknown_fields_ignored() {
        let e = parse(b"foo: bar\ndata: kept\n\ndata: cut");
        assert_eq!(data(&e), ["kept"]);
        let mut p = Parser::new();
        p.feed(b"data: cut", &mut Vec::new()).unwrap();
        let mut next = p.reconnected();
        let mut out = Vec::new();
        next.feed(b"\n\n", &mut out).unwrap();
        assert!(out.is_empty(), "a reconnect drops the half-read event");
    }

    #[test]
    fn an_event_over_the_cap_is_an_error_never_a_cut() {
        let mut p = Parser::with_max_event_size(16);
        let mut out = Vec::new();
        p.feed(b"data: 0123456789\n", &mut out).unwrap();
        let err = p.feed(b"data: more", &mut out).unwrap_err();
        assert_eq!(err, EventTooLarge { limit: 16 });
        assert!(out.is_empty());
        // Comments and dispatched events do not add up: each event is measured alone.
        let mut p = Parser::with_max_event_size(16);
        for _ in 0..10 {
            p.feed(b"data: 0123456\n\n", &mut out).unwrap();
        }
        assert_eq!(out.len(), 10);
    }

    #[test]
    fn responses_open_end_retry_refresh_or_stop() {
        use http::StatusCode as S;
        let ct = |v: &str| {
            let mut h = http::HeaderMap::new();
            h.insert(http::header::CONTENT_TYPE, v.parse().unwrap());
            h
        };
        let none = http::HeaderMap::new();
        assert_eq!(answer(S::OK, &ct("Text/Event-Stream"), false), Answer::Open);
        assert_eq!(
            answer(S::OK, &ct("application/json"), false),
            Answer::Fatal(Fatal::ContentType(Some("application/json".into())))
        );
        assert_eq!(
            answer(S::OK, &none, false),
            Answer::Fatal(Fatal::ContentType(None))
        );
        for s in [408, 429, 500, 502, 503, 504, 599] {
            let s = S::from_u16(s).unwrap();
            assert_eq!(answer(s, &none, false), Answer::Retry, "{s}");
        }
        assert_eq!(
            answer(S::FORBIDDEN, &none, false),
            Answer::Fatal(Fatal::Status(S::FORBIDDEN))
        );
        assert_eq!(answer(S::FORBIDDEN, &none, true), Answer::Refresh);
        for s in [201, 301, 400, 404, 410] {
            let s = S::from_u16(s).unwrap();
            assert_eq!(
                answer(s, &ct("text/event-stream"), false),
                Answer::Fatal(Fatal::Status(s))
            );
        }
    }

    #[test]
    fn invalid_utf8_becomes_replacement_characters() {
        let e = parse(b"data: caf\xC3\n\n");
        assert_eq!(e[0].data, "caf\u{FFFD}");
    }
}
