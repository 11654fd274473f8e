//! What goes into a call and what comes out of it: the one input enum, the one action enum,
//! the attempt an adapter sends, and the call's result. Types only; the decisions live in
//! the sibling modules.

use std::time::{Duration, Instant, SystemTime};

use http::header::HeaderMap;
use http::StatusCode;

use crate::event::AttemptKind;
use crate::redirect::Redirect;
use crate::report::{ErrorKind, FailureClass, Report, TimeoutPhase};

/// What the request body allows (bodies never enter the engine).
///
/// ```
/// use baton_core::BodyKind;
/// assert!(BodyKind::Replayable.replayable());
/// assert!(!BodyKind::OneShot.replayable());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BodyKind {
    /// No body.
    #[default]
    Empty,
    /// A body the adapter can copy for every later attempt.
    Replayable,
    /// A body that can be sent once (a stream): no later attempt.
    OneShot,
}

impl BodyKind {
    /// Whether later attempts can get a copy.
    pub fn replayable(self) -> bool {
        self != BodyKind::OneShot
    }
}

/// A response as the engine reads it: its status and headers (for `Retry-After` and the
/// classifier). The adapter's own response type implements it, and the call keeps the
/// response it will return, so the result never needs a lookup.
///
/// ```
/// use baton_core::{Answer, Head};
/// let head = Head::new(http::StatusCode::OK);
/// assert_eq!(head.status(), 200);
/// assert!(head.headers().is_empty());
/// ```
pub trait Answer {
    /// The response status.
    fn status(&self) -> StatusCode;
    /// The response headers.
    fn headers(&self) -> &HeaderMap;
    /// The HTTP version the response came over, recorded in the attempt's record (default
    /// `None`: not known).
    fn version(&self) -> Option<http::Version> {
        None
    }
    /// The whole body, when the adapter read it before the engine decides
    /// ([`Settings::classify_body`](crate::Settings::classify_body); default `None`).
    fn body(&self) -> Option<&[u8]> {
        None
    }
}

/// A response head with nothing behind it: what the simulator, the conformance runner and
/// tests hand to a call.
///
/// ```
/// use baton_core::Head;
/// let mut head = Head::new(http::StatusCode::SERVICE_UNAVAILABLE);
/// head.headers.insert(http::header::RETRY_AFTER, "3".parse().unwrap());
/// assert_eq!(head.headers.len(), 1);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// Status.
    pub status: StatusCode,
    /// Headers.
    pub headers: HeaderMap,
}

impl Head {
    /// A head with `status` and no headers (allocates nothing).
    #[inline]
    pub fn new(status: StatusCode) -> Self {
        Head {
            status,
            headers: HeaderMap::new(),
        }
    }

    /// A head with `status` and `headers`.
    pub fn with_headers(status: StatusCode, headers: HeaderMap) -> Self {
        Head { status, headers }
    }
}

/// An `http` response is an answer as it is: what the tower layer and the blocking adapter
/// hand their calls.
///
/// ```
/// use baton_core::Answer;
/// let response = http::Response::builder().status(503).body(()).unwrap();
/// assert_eq!(Answer::status(&response), 503);
/// assert_eq!(Answer::version(&response), Some(http::Version::HTTP_11));
/// ```
impl<B> Answer for http::Response<B> {
    fn status(&self) -> StatusCode {
        self.status()
    }
    fn headers(&self) -> &HeaderMap {
        self.headers()
    }
    fn version(&self) -> Option<http::Version> {
        Some(self.version())
    }
}

impl Answer for Head {
    fn status(&self) -> StatusCode {
        self.status
    }
    fn headers(&self) -> &HeaderMap {
        &self.headers
    }
}

/// How an attempt ended without a response, as the adapter observed it.
///
/// ```
/// use baton_core::{AttemptOutcome, FailureClass, TimeoutPhase};
/// let refused = AttemptOutcome::Failure(FailureClass::Undelivered);
/// let waited = AttemptOutcome::Timeout(TimeoutPhase::Response);
/// assert_ne!(refused, waited);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptOutcome {
    /// A transport failure of this class.
    Failure(FailureClass),
    /// The attempt timeout fired in this phase.
    Timeout(TimeoutPhase),
}

/// Everything that can happen to a call, handed to [`Call::handle`](crate::Call::handle)
/// with the time it happened. A report about an attempt that is not in flight (already
/// discarded, or unknown) changes nothing.
///
/// ```
/// use baton_core::{AttemptOutcome, FailureClass, Head, Input};
/// let answered: Input<Head> = Input::Response {
///     attempt: 1,
///     response: Head::new(http::StatusCode::OK),
///     wall: None,
/// };
/// let refused: Input<Head> = Input::Failed {
///     attempt: 2,
///     outcome: AttemptOutcome::Failure(FailureClass::Undelivered),
/// };
/// # let _ = (answered, refused);
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum Input<R> {
    /// Response headers of `attempt` arrived (the commit point). `wall` is the wall time
    /// of arrival, read only for an HTTP-date `Retry-After` on 429 and 503 that has no
    /// `Date` beside it.
    Response {
        /// The attempt number from [`Attempt::number`].
        attempt: u32,
        /// The response; the call keeps it when it may be the result.
        response: R,
        /// Wall time of arrival.
        wall: Option<SystemTime>,
    },
    /// `attempt` ended without a response.
    Failed {
        /// The attempt number.
        attempt: u32,
        /// How it ended.
        outcome: AttemptOutcome,
    },
    /// The redirects `attempt` followed (SPEC 3), in order, before its outcome. The attempt
    /// stays one attempt of its endpoint; a failure after a followed redirect counts as
    /// ambiguous, since the endpoint had answered.
    Redirected {
        /// The attempt number.
        attempt: u32,
        /// The hops it followed.
        redirects: Vec<Redirect>,
    },
    /// No copy of the body could be made for `attempt`, so it was never sent: no later
    /// attempt can be made either (every endpoint would need the copy).
    ReplayFailed {
        /// The attempt number.
        attempt: u32,
    },
    /// The adapter could not buffer a streaming body within its opt-in limit (SPEC 2.4):
    /// the body is sent once. Only an event; hand it in before the first poll.
    BodyNotBuffered {
        /// The buffering limit, in bytes.
        limit: usize,
    },
    /// The caller cancels the call: in-flight attempts are discarded (and count for
    /// nothing) and the call ends with what it has.
    Cancel,
    /// Time passed: a time the call waits for ([`Action::WaitUntil`]) came, or the adapter
    /// woke for another reason.
    Timer,
}

impl<R: Answer> Input<R> {
    /// The response of `attempt`, with the wall time read (by `wall`) only when the engine
    /// may need it: for a `Retry-After` given as an HTTP-date on a 429 or 503 without a
    /// `Date` header (SPEC 2.6). Every adapter hands responses in through this.
    ///
    /// ```
    /// use baton_core::{Head, Input};
    /// let ok: Input<Head> = Input::response(1, Head::new(http::StatusCode::OK), || unreachable!());
    /// let busy: Input<Head> =
    ///     Input::response(2, Head::new(http::StatusCode::SERVICE_UNAVAILABLE), std::time::SystemTime::now);
    /// assert!(matches!(ok, Input::Response { wall: None, .. }));
    /// assert!(matches!(busy, Input::Response { wall: Some(_), .. }));
    /// ```
    pub fn response(attempt: u32, response: R, wall: impl FnOnce() -> SystemTime) -> Self {
        let status = response.status();
        let wall = (status == StatusCode::TOO_MANY_REQUESTS
            || status == StatusCode::SERVICE_UNAVAILABLE)
            .then(wall);
        Input::Response {
            attempt,
            response,
            wall,
        }
    }
}

/// One attempt the adapter is asked to send.
///
/// ```
/// # use baton_core::{Action, BodyKind, Call, CallOptions, Endpoint, Engine, Head, Policy, RequestInfo};
/// # use std::time::Instant;
/// let policy = Policy::builder().endpoint(Endpoint::new("a", "http://a.example/")).build().unwrap();
/// let engine = Engine::new(policy);
/// let (uri, headers) = ("/".parse().unwrap(), http::HeaderMap::new());
/// let info = RequestInfo { method: &http::Method::GET, uri: &uri, headers: &headers };
/// let mut call: Call<'_, Head> =
///     Call::new(&engine, &info, BodyKind::Empty, CallOptions::default(), Instant::now());
/// let Action::Send(attempt) = call.poll() else { panic!() };
/// assert_eq!((attempt.number, attempt.endpoint), (1, 0));
/// assert!(!attempt.fresh_body);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// Attempt number (1-based, per call); hand it back with the attempt's input.
    pub number: u32,
    /// Endpoint index in the policy.
    pub endpoint: usize,
    /// First, retry, failover or hedge.
    pub kind: AttemptKind,
    /// Connect timeout for this attempt.
    pub connect_timeout: Duration,
    /// Attempt timeout (sending to end of response headers), clipped to the deadline.
    pub timeout: Duration,
    /// Whether the attempt needs a fresh copy of the body.
    pub fresh_body: bool,
    /// Whether the attempt holds a half-open probe slot.
    pub probe: bool,
}

/// How a call ended: the response to return, or the error (with the triggering response it
/// retained, if any). Built once, by [`Call::take_done`](crate::Call::take_done), from the
/// call's history: the response is the one the call kept, so no adapter looks anything up.
///
/// ```
/// # use baton_core::{Action, BodyKind, Call, CallOptions, Done, Endpoint, Engine, Head, Input, Policy, RequestInfo};
/// # use std::time::Instant;
/// # let policy = Policy::builder().endpoint(Endpoint::new("a", "http://a.example/")).build().unwrap();
/// # let engine = Engine::new(policy);
/// # let (uri, headers) = ("/".parse().unwrap(), http::HeaderMap::new());
/// # let info = RequestInfo { method: &http::Method::GET, uri: &uri, headers: &headers };
/// # let now = Instant::now();
/// let mut call = Call::new(&engine, &info, BodyKind::Empty, CallOptions::default(), now);
/// let Action::Send(a) = call.poll() else { panic!() };
/// let response = Head::new(http::StatusCode::OK);
/// call.handle(Input::Response { attempt: a.number, response, wall: None }, now);
/// assert_eq!(call.poll(), Action::Done);
/// let Done::Answer { response, report } = call.take_done() else { panic!() };
/// assert_eq!((response.status, report.attempts.len()), (http::StatusCode::OK, 1));
/// ```
#[derive(Debug)]
pub enum Done<R> {
    /// Return this response.
    Answer {
        /// The response.
        response: R,
        /// Everything known about the call.
        report: Report,
    },
    /// The call failed.
    Error {
        /// Which error (also in the report's outcome).
        kind: ErrorKind,
        /// The retained triggering response the error carries, when returning it as the
        /// answer was not allowed (SPEC 2.10).
        retained: Option<R>,
        /// Everything known about the call.
        report: Report,
    },
}

impl<R> Done<R> {
    /// The call's report.
    pub fn report(&self) -> &Report {
        match self {
            Done::Answer { report, .. } | Done::Error { report, .. } => report,
        }
    }

    /// The response with its report, or the call's error with the retained response it
    /// carries (if any).
    // Inline: in the adapter's driver the result is then moved once, not twice (measured
    // with callgrind on `callcost baton`: 43 instructions a call fewer).
    #[inline]
    pub fn into_result(self) -> Result<(R, Report), (crate::report::Error, Option<R>)> {
        match self {
            Done::Answer { response, report } => Ok((response, report)),
            Done::Error {
                kind,
                retained,
                report,
            } => Err((crate::report::Error::new(kind, report), retained)),
        }
    }

    /// Hands the response and its report to `answer`, or the call's error and the retained
    /// response it carries (if any) to `error`: what [`into_result`](Self::into_result)
    /// gives, without building the `Result` in between (inlined, each field then moves
    /// once, straight to where `answer` puts it; through `into_result` the response and
    /// its report were copied once more: 184 instructions a call in baton-blocking,
    /// measured with callgrind).
    ///
    /// ```
    /// use baton_core::Done;
    /// fn status(done: Done<u16>) -> String {
    ///     done.resolve(|status, _| format!("answered {status}"), |e, _| e.to_string())
    /// }
    /// # let _ = status;
    /// ```
    #[inline(always)]
    pub fn resolve<T>(
        self,
        answer: impl FnOnce(R, Report) -> T,
        error: impl FnOnce(crate::report::Error, Option<R>) -> T,
    ) -> T {
        match self {
            Done::Answer { response, report } => answer(response, report),
            Done::Error {
                kind,
                retained,
                report,
            } => error(crate::report::Error::new(kind, report), retained),
        }
    }

    /// The report, dropping any response.
    #[inline]
    pub fn into_report(self) -> Report {
        match self {
            Done::Answer { report, .. } | Done::Error { report, .. } => report,
        }
    }
}

/// What the adapter should do next, from [`Call::poll`](crate::Call::poll). Drain actions
/// until one says wait (or done).
///
/// ```
/// use std::time::Instant;
/// use baton_core::{Action, AttemptOutcome, BodyKind, Call, CallOptions, Endpoint, Engine,
///     FailureClass, Head, Input, Policy, RequestInfo};
///
/// let policy = Policy::builder()
///     .endpoint(Endpoint::new("a", "http://a.example/"))
///     .endpoint(Endpoint::new("b", "http://b.example/"))
///     .build()
///     .unwrap();
/// let engine = Engine::new(policy);
/// let (uri, headers, now) = ("/".parse().unwrap(), http::HeaderMap::new(), Instant::now());
/// let info = RequestInfo { method: &http::Method::GET, uri: &uri, headers: &headers };
/// let mut call: Call<'_, Head> =
///     Call::new(&engine, &info, BodyKind::Empty, CallOptions::default(), now);
/// let Action::Send(first) = call.poll() else { panic!() };
/// assert_eq!(call.poll(), Action::WaitForAttempt); // it is in flight
/// let refused = AttemptOutcome::Failure(FailureClass::Undelivered);
/// call.handle(Input::Failed { attempt: first.number, outcome: refused }, now);
/// let Action::Send(second) = call.poll() else { panic!() };
/// assert_eq!((second.number, second.endpoint), (2, 1)); // fails over to "b"
/// let ok = Head::new(http::StatusCode::OK);
/// call.handle(Input::Response { attempt: second.number, response: ok, wall: None }, now);
/// assert_eq!(call.poll(), Action::Done);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Action {
    /// Send this attempt.
    Send(Attempt),
    /// Cancel this in-flight attempt; report nothing more for it.
    Discard(u32),
    /// Nothing to do before this time, unless an in-flight attempt ends first: then hand
    /// in what happened; when the time comes, hand in [`Input::Timer`].
    WaitUntil(Instant),
    /// Nothing to do until an in-flight attempt ends (at least one is in flight).
    WaitForAttempt,
    /// The call is over: take its result with [`Call::take_done`](crate::Call::take_done).
    /// A finished call answers `Done` to every later poll.
    Done,
}
