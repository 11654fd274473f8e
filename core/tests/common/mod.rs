//! Drives a [`Call`] step by step in the words these tests were written in: poll at a
//! time, hand in an outcome at a time. Each helper is the new surface's exact equivalent:
//! polling at `t` is `Input::Timer` at `t` then `poll()`; an outcome is the matching
//! `Input`; the result comes out as its report. Nothing is decided here.

#![allow(dead_code)]

use std::time::{Instant, SystemTime};

use baton_core::{Action as Next, Attempt, Call, FailureClass, Head, Input, Report, TimeoutPhase};
use http::{HeaderMap, StatusCode};

/// What a poll asked for.
#[derive(Debug, PartialEq)]
pub enum Action {
    Send(Attempt),
    Discard(u32),
    /// `Some(t)`: wait until `t` or an attempt's end; `None`: until an attempt's end.
    Wait(Option<Instant>),
    /// The call is over: its report is [`report`]`(call)`.
    Done,
}

/// A response as the test hands it in.
#[derive(Debug, Clone, Copy)]
pub struct ResponseInfo<'a> {
    pub status: StatusCode,
    pub headers: &'a HeaderMap,
    pub wall: Option<SystemTime>,
}

impl<'a> ResponseInfo<'a> {
    pub fn new(status: StatusCode, headers: &'a HeaderMap) -> Self {
        ResponseInfo {
            status,
            headers,
            wall: None,
        }
    }
    pub fn wall(mut self, wall: SystemTime) -> Self {
        self.wall = Some(wall);
        self
    }
}

/// How an attempt ended.
#[derive(Debug, Clone, Copy)]
pub enum AttemptOutcome<'a> {
    Response(ResponseInfo<'a>),
    Failure(FailureClass),
    Timeout(TimeoutPhase),
}

pub trait Drive {
    fn poll_action(&mut self, t: Instant) -> Action;
    /// Returns whether the attempt was in flight (the report counted).
    fn handle_outcome(&mut self, n: u32, o: AttemptOutcome<'_>, t: Instant) -> bool;
    fn replay_failed(&mut self, n: u32, t: Instant) -> bool;
    fn cancel(&mut self, t: Instant);
}

/// Takes a finished call's report (the call is consumed).
pub fn report(mut call: Call<'_, Head>) -> Report {
    call.take_done().into_report()
}

impl Drive for Call<'_, Head> {
    fn poll_action(&mut self, t: Instant) -> Action {
        self.handle(Input::Timer, t);
        match self.poll() {
            Next::Send(a) => Action::Send(a),
            Next::Discard(n) => Action::Discard(n),
            Next::WaitUntil(t) => Action::Wait(Some(t)),
            Next::WaitForAttempt => Action::Wait(None),
            _ => Action::Done,
        }
    }

    fn handle_outcome(&mut self, n: u32, o: AttemptOutcome<'_>, t: Instant) -> bool {
        let in_flight = self.in_flight().any(|x| x == n);
        let input = match o {
            AttemptOutcome::Response(r) => Input::Response {
                attempt: n,
                response: Head::with_headers(r.status, r.headers.clone()),
                wall: r.wall,
            },
            AttemptOutcome::Failure(c) => Input::Failed {
                attempt: n,
                outcome: baton_core::AttemptOutcome::Failure(c),
            },
            AttemptOutcome::Timeout(p) => Input::Failed {
                attempt: n,
                outcome: baton_core::AttemptOutcome::Timeout(p),
            },
        };
        self.handle(input, t);
        in_flight
    }

    fn replay_failed(&mut self, n: u32, t: Instant) -> bool {
        let in_flight = self.in_flight().any(|x| x == n);
        self.handle(Input::ReplayFailed { attempt: n }, t);
        in_flight
    }

    fn cancel(&mut self, t: Instant) {
        self.handle(Input::Cancel, t);
    }
}

/// A policy event sink that notes each event's kind by name (`"Result"`,
/// `"ProbeResult"`, ...), in order, and the names noted.
pub fn event_names() -> (
    baton_core::EventSink,
    std::sync::Arc<std::sync::Mutex<Vec<String>>>,
) {
    let names = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = names.clone();
    let sink: baton_core::EventSink = std::sync::Arc::new(move |e: &baton_core::Event<'_>| {
        let kind = format!("{:?}", e.kind);
        let name = kind
            .split([' ', '{'])
            .next()
            .unwrap_or_default()
            .to_string();
        log.lock().unwrap().push(name);
    });
    (sink, names)
}
