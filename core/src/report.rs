//! What a call returns (SPEC 2.10): the answer or an error, and always the attempt list,
//! the elapsed time, the stop reason and whether the work may have been done.

use std::fmt;
use std::time::Duration;

use http::{StatusCode, Uri};
use smallvec::SmallVec;

use crate::id::RequestId;
use crate::redirect::Redirect;

/// The class of a transport failure, decided by the phase it happened in (SPEC 1).
///
/// ```
/// use baton_core::FailureClass;
/// assert!(!FailureClass::Undelivered.may_have_executed());
/// assert!(FailureClass::Ambiguous.may_have_executed());
/// assert!(!FailureClass::Untrusted.may_have_executed());
/// assert!(FailureClass::Untrusted.is_undelivered());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureClass {
    /// Before the connection was ready: no request byte can have reached the server
    /// (DNS failure, refused, unreachable, connect timeout, TLS handshake failure).
    Undelivered,
    /// After the connection was ready, or the phase is unknown: the server may have done
    /// the work.
    Ambiguous,
    /// The request could not be built for any endpoint; the call ends as invalid.
    RejectedLocally,
    /// The TLS handshake failed on a certificate (SPEC 9, TLS trust and identity): the
    /// client rejected the server's (unknown issuer, name mismatch, expired), or the
    /// server refused the client's identity with a handshake alert. Undelivered (nothing
    /// was processed), and the same endpoint would fail the same way again, so the call
    /// makes no further attempt there; it may fail over.
    Untrusted,
}

impl FailureClass {
    /// Whether a failure of this class may hide an executed request.
    #[inline]
    pub fn may_have_executed(self) -> bool {
        self == FailureClass::Ambiguous
    }

    /// Whether nothing was sent: [`Undelivered`](Self::Undelivered), or
    /// [`Untrusted`](Self::Untrusted) (a handshake that failed on a certificate).
    #[inline]
    pub fn is_undelivered(self) -> bool {
        matches!(self, FailureClass::Undelivered | FailureClass::Untrusted)
    }

    /// The class's name in events and output.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureClass::Undelivered => "undelivered",
            FailureClass::Ambiguous => "ambiguous",
            FailureClass::RejectedLocally => "rejected_locally",
            FailureClass::Untrusted => "untrusted",
        }
    }
}

/// The phase an attempt timeout fired in.
///
/// ```
/// use baton_core::{FailureClass, TimeoutPhase};
/// assert_eq!(TimeoutPhase::Connect.class(), FailureClass::Undelivered);
/// assert_eq!(TimeoutPhase::Response.class(), FailureClass::Ambiguous);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimeoutPhase {
    /// While connecting (TCP or TLS handshake): nothing was sent.
    Connect,
    /// While sending the request or waiting for the response headers.
    Response,
    /// The phase is not known (treated as ambiguous).
    Unknown,
}

impl TimeoutPhase {
    /// The failure class this timeout belongs to.
    pub fn class(self) -> FailureClass {
        match self {
            TimeoutPhase::Connect => FailureClass::Undelivered,
            _ => FailureClass::Ambiguous,
        }
    }
}

/// How one attempt ended, as recorded in the report and events.
///
/// ```
/// use baton_core::{AttemptResult, FailureClass};
/// let r = AttemptResult::Failed(FailureClass::Ambiguous);
/// assert_eq!(r.as_str(), "ambiguous");
/// assert!(r.may_have_executed(&baton_core::StatusSet::new()));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptResult {
    /// Response headers arrived with this status.
    Response(StatusCode),
    /// Response headers arrived with this status, one in `not_processed`, on a hop of a
    /// redirect that the endpoint answered with a status not in `not_processed` (SPEC 1,
    /// 3): the endpoint may have done the work before it redirected, whatever the last
    /// hop says. A POST answered 303, whose GET hop then got a 429, reads so. The
    /// report's `redirects` name the hops.
    AfterRedirect(StatusCode),
    /// A transport failure of this class.
    Failed(FailureClass),
    /// The attempt timeout fired in this phase.
    TimedOut(TimeoutPhase),
    /// Cut short by the call's deadline (never counts against the breaker).
    Deadline,
    /// Cancelled (lost a hedge race, or the call was dropped).
    Cancelled,
    /// No copy of the body could be made, so the attempt was never sent.
    ReplayFailed,
    /// Still in flight when the report was taken.
    InFlight,
}

impl AttemptResult {
    /// The name used in events and batch output: `response`, `undelivered`, `ambiguous`,
    /// `rejected_locally`, `untrusted`, `timeout`, `deadline`, `cancelled`, `replay_failed`, `in_flight`.
    pub fn as_str(&self) -> &'static str {
        match self {
            AttemptResult::Response(_) | AttemptResult::AfterRedirect(_) => "response",
            AttemptResult::Failed(c) => c.as_str(),
            AttemptResult::TimedOut(_) => "timeout",
            AttemptResult::Deadline => "deadline",
            AttemptResult::Cancelled => "cancelled",
            AttemptResult::ReplayFailed => "replay_failed",
            AttemptResult::InFlight => "in_flight",
        }
    }

    /// Whether the endpoint may have done the work, given the `not_processed` statuses.
    /// An attempt cut by the deadline or cancelled after sending counts as possibly
    /// executed too: nothing proves it was not, and so does a response after a redirect
    /// that may have done the work ([`AfterRedirect`](Self::AfterRedirect)).
    #[inline]
    pub fn may_have_executed(&self, not_processed: &crate::StatusSet) -> bool {
        match self {
            AttemptResult::Response(s) => !not_processed.contains(*s),
            AttemptResult::AfterRedirect(_) => true,
            AttemptResult::Failed(c) => c.may_have_executed(),
            AttemptResult::TimedOut(p) => p.class().may_have_executed(),
            AttemptResult::Deadline | AttemptResult::Cancelled | AttemptResult::InFlight => true,
            AttemptResult::ReplayFailed => false,
        }
    }

    /// The status, when the attempt got a response.
    pub fn status(&self) -> Option<StatusCode> {
        match self {
            AttemptResult::Response(s) | AttemptResult::AfterRedirect(s) => Some(*s),
            _ => None,
        }
    }
}

impl fmt::Display for AttemptResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttemptResult::Response(s) => write!(f, "status {}", s.as_u16()),
            AttemptResult::AfterRedirect(s) => write!(f, "status {} after a redirect", s.as_u16()),
            AttemptResult::TimedOut(TimeoutPhase::Connect) => f.write_str("connect timeout"),
            AttemptResult::TimedOut(_) => f.write_str("timeout waiting for response"),
            other => f.write_str(other.as_str()),
        }
    }
}

/// One attempt in a call's report.
///
/// ```
/// use std::time::Duration;
/// use baton_core::{AttemptRecord, AttemptResult};
/// let r = AttemptRecord { endpoint: 0, endpoint_id: "a".into(), number: 1, http_version: None,
///     result: AttemptResult::Response(http::StatusCode::OK), elapsed: Duration::from_millis(3),
///     credential_refused: false };
/// assert_eq!(r.to_string(), "#1 a: status 200 after 3ms");
/// let refused = AttemptRecord {
///     result: AttemptResult::Response(http::StatusCode::UNAUTHORIZED),
///     credential_refused: true,
///     ..r
/// };
/// assert_eq!(refused.to_string(), "#1 a: status 401, credential refused, after 3ms");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptRecord {
    /// Endpoint index in the policy.
    pub endpoint: usize,
    /// Endpoint id.
    pub endpoint_id: crate::id::EndpointId,
    /// Attempt number (1-based).
    pub number: u32,
    /// How it ended.
    pub result: AttemptResult,
    /// Time from its start to its end.
    pub elapsed: Duration,
    /// The HTTP version of the attempt's response (`None` without a response, or when the
    /// adapter does not say).
    pub http_version: Option<http::Version>,
    /// The endpoint refused its credential (401, or 403 where configured) after the
    /// attempt's own refresh (SPEC 9): the endpoint got no further attempt in the call.
    pub credential_refused: bool,
}

impl AttemptRecord {
    /// A slot of a report's inline list that holds no record (it is never read, and owns
    /// nothing to free).
    pub(crate) fn unused() -> Self {
        AttemptRecord {
            endpoint: 0,
            endpoint_id: crate::id::EndpointId::none(),
            number: 0,
            result: AttemptResult::InFlight,
            elapsed: Duration::ZERO,
            http_version: None,
            credential_refused: false,
        }
    }
}

impl fmt::Display for AttemptRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let refused = if self.credential_refused {
            ", credential refused,"
        } else {
            ""
        };
        write!(
            f,
            "#{} {}: {}{refused} after {:?}",
            self.number, self.endpoint_id, self.result, self.elapsed
        )
    }
}

/// Why a call stopped.
///
/// ```
/// use baton_core::StopReason;
/// assert_eq!(StopReason::Deadline.as_str(), "deadline");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StopReason {
    /// A response that does not call for another attempt.
    Answered,
    /// Every attempt the schedule allows was made.
    AttemptsExhausted,
    /// Permission forbids every further attempt (it may have executed somewhere).
    NotPermitted,
    /// The body cannot be replayed.
    NotReplayable,
    /// A copy of the body could not be made.
    ReplayFailed,
    /// The call's deadline.
    Deadline,
    /// The retry budget refused.
    Budget,
    /// A rate limiter refused and the call fails fast.
    RateLimited,
    /// A `Retry-After` longer than `max_retry_after` on the endpoint that is next.
    RetryAfterTooLong,
    /// The call was cancelled.
    Cancelled,
    /// No endpoint is eligible or available.
    NoUsableEndpoint,
    /// The preferred endpoint does not exist.
    UnknownEndpoint,
    /// The call's settings or request are invalid (nothing sent).
    InvalidCall,
}

impl StopReason {
    /// The reason's name in events and output.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Answered => "answered",
            StopReason::AttemptsExhausted => "attempts_exhausted",
            StopReason::NotPermitted => "not_permitted",
            StopReason::NotReplayable => "not_replayable",
            StopReason::ReplayFailed => "replay_failed",
            StopReason::Deadline => "deadline",
            StopReason::Budget => "budget",
            StopReason::RateLimited => "rate_limited",
            StopReason::RetryAfterTooLong => "retry_after_too_long",
            StopReason::Cancelled => "cancelled",
            StopReason::NoUsableEndpoint => "no_usable_endpoint",
            StopReason::UnknownEndpoint => "unknown_endpoint",
            StopReason::InvalidCall => "invalid_call",
        }
    }
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The distinct errors of SPEC 2.10.
///
/// ```
/// use baton_core::ErrorKind;
/// assert_eq!(ErrorKind::Deadline.as_str(), "deadline");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Every attempt failed (or further attempts were not allowed).
    Failover,
    /// No endpoint is eligible or available.
    NoUsableEndpoint,
    /// The preferred endpoint id does not exist.
    UnknownEndpoint(String),
    /// The deadline passed before a usable answer.
    Deadline,
    /// The call was cancelled.
    Cancelled,
    /// The provider asked to wait longer than `max_retry_after`.
    RetryAfterTooLong(Duration),
    /// The retry budget refused the next attempt.
    Budget,
    /// A rate limiter refused the next attempt.
    RateLimited,
    /// The call's settings or request are invalid; nothing was sent.
    InvalidCall(CallRejection),
}

/// Why a call was rejected before anything was sent (SPEC 5): a reason a caller can match
/// on, naming the option and the value.
///
/// ```
/// use baton_core::CallRejection;
/// let r = CallRejection::Setting {
///     setting: "deadline",
///     value: "0ns".into(),
///     reason: "must be greater than zero".into(),
/// };
/// assert_eq!(r.to_string(), "call setting `deadline` = 0ns: must be greater than zero");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CallRejection {
    /// The caller's request id (call option or header) is not valid.
    #[error(transparent)]
    RequestId(#[from] crate::id::RequestIdError),
    /// The idempotency key cannot be sent unchanged on every attempt.
    #[error("idempotency key: {0}")]
    IdempotencyKey(&'static str),
    /// The request breaks a limit or carries a framing header.
    #[error(transparent)]
    Limit(#[from] crate::limits::LimitError),
    /// A per-call setting is out of range.
    #[error("call setting `{setting}` = {value}: {reason}")]
    Setting {
        /// The setting, as in [`CallOptions`](crate::CallOptions).
        setting: &'static str,
        /// Its value.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The adapter could not build the request for an endpoint (an invalid URL or header
    /// given to its request builder; the adapter's error says which).
    #[error("the request could not be built for the endpoint")]
    NotBuilt,
}

impl ErrorKind {
    /// The kind's name in output (`failover`, `no_usable_endpoint`, ...).
    pub fn as_str(&self) -> &'static str {
        match self {
            ErrorKind::Failover => "failover",
            ErrorKind::NoUsableEndpoint => "no_usable_endpoint",
            ErrorKind::UnknownEndpoint(_) => "unknown_endpoint",
            ErrorKind::Deadline => "deadline",
            ErrorKind::Cancelled => "cancelled",
            ErrorKind::RetryAfterTooLong(_) => "retry_after_too_long",
            ErrorKind::Budget => "budget",
            ErrorKind::RateLimited => "rate_limited",
            ErrorKind::InvalidCall(_) => "invalid_call",
        }
    }
}

/// What the call returns.
///
/// ```
/// use baton_core::Outcome;
/// let o = Outcome::Error { kind: baton_core::ErrorKind::Deadline, retained: None };
/// assert!(o.response_attempt().is_none());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Return the response of this attempt.
    Response {
        /// The attempt whose response to return.
        attempt: u32,
        /// Its endpoint index.
        endpoint: usize,
        /// Its status.
        status: StatusCode,
        /// True when it is a retained triggering response (later attempts failed without
        /// a response).
        retained: bool,
        /// True when the response classifier labelled it a success.
        classified_success: bool,
    },
    /// The call failed.
    Error {
        /// Which error.
        kind: ErrorKind,
        /// A retained triggering response the error carries (its attempt number), when
        /// returning it was not allowed.
        retained: Option<u32>,
    },
}

impl Outcome {
    /// The attempt whose response the adapter returns, if any.
    pub fn response_attempt(&self) -> Option<u32> {
        match self {
            Outcome::Response { attempt, .. } => Some(*attempt),
            Outcome::Error { .. } => None,
        }
    }

    /// The attempt whose response the adapter keeps: the answer, or the retained response
    /// an error carries.
    pub fn kept_attempt(&self) -> Option<u32> {
        match self {
            Outcome::Response { attempt, .. } => Some(*attempt),
            Outcome::Error { retained, .. } => *retained,
        }
    }
}

/// Everything known about a finished call.
///
/// ```
/// # use baton_core::{sim::{Sim, Script}, CallOptions, Endpoint, Policy};
/// # use std::time::Instant;
/// let policy = Policy::builder().endpoint(Endpoint::new("a", "http://a.example/")).build().unwrap();
/// let mut sim = Sim::new(policy, Instant::now());
/// sim.script("a", Script::status(200));
/// let run = sim.run(http::Method::GET, CallOptions::default());
/// let report = run.report;
/// assert_eq!(report.attempts.len(), 1);
/// assert!(report.may_have_executed);
/// assert_eq!(report.stop_reason, baton_core::StopReason::Answered);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The call's request id.
    pub request_id: RequestId,
    /// The call's idempotency key, if any.
    pub idempotency_key: Option<String>,
    /// Every attempt, in order.
    pub attempts: SmallVec<[AttemptRecord; 2]>,
    /// Every redirect an attempt followed, in order (SPEC 3).
    pub redirects: Vec<Redirect>,
    /// Time from the call's start to its end.
    pub elapsed: Duration,
    /// Why the call stopped.
    pub stop_reason: StopReason,
    /// True when any attempt may have done the work: a caller moving money can tell
    /// "nothing happened" (false) from "unknown" (true).
    pub may_have_executed: bool,
    /// The answer or the error.
    pub outcome: Outcome,
}

impl Report {
    /// The status of the returned response, if any.
    pub fn status(&self) -> Option<StatusCode> {
        match &self.outcome {
            Outcome::Response { status, .. } => Some(*status),
            Outcome::Error { .. } => None,
        }
    }

    /// The id of the endpoint that gave the result, if any.
    pub fn endpoint_id(&self) -> Option<&str> {
        let attempt = self.outcome.response_attempt()?;
        self.attempts
            .iter()
            .find(|a| a.number == attempt)
            .map(|a| &*a.endpoint_id)
    }

    /// The endpoint a result names: the one whose response the call returns or retains,
    /// else the one of the last attempt (`None`: no attempt was made). Every adapter's
    /// `endpoint()` on a response or an error.
    pub fn result_endpoint(&self) -> Option<&str> {
        let attempt = self.outcome.kept_attempt();
        let record = match attempt {
            Some(n) => self.attempts.iter().find(|a| a.number == n),
            None => self.attempts.last(),
        };
        record.map(|a| &*a.endpoint_id)
    }

    /// The URL the returned response came from, when its attempt followed redirects
    /// (`None`: the endpoint's own URL). Show it with [`Origin`](crate::Origin): its path
    /// and query may hold secrets.
    pub fn final_url(&self) -> Option<&Uri> {
        let attempt = self.outcome.response_attempt()?;
        self.redirects
            .iter()
            .rev()
            .find(|r| r.attempt == attempt)
            .map(|r| &r.to)
    }

    /// Converts a failed call into an error; `None` when the call returned a response.
    pub fn into_error(self) -> Option<Error> {
        match &self.outcome {
            Outcome::Error { kind, .. } => Some(Error::new(kind.clone(), self)),
            Outcome::Response { .. } => None,
        }
    }
}

/// A boxed error of an attempt, shared so that the errors holding it stay `Clone`.
type Shared = std::sync::Arc<dyn std::error::Error + Send + Sync>;

/// The last attempt of a failed call, as the engine saw it: the `source()` of [`Error`]
/// and of every adapter's call error ([`NoAttempt`] instead when the call made none). Its own `source()` is the attempt's own error, when
/// the adapter gave it ([`Error::with_last_error`]): a transport's, a service's.
///
/// Each link of the chain says its own part once: the call's error gives the call (its
/// kind and report), this link the attempt, the next one what failed. An error printer
/// that walks the chain (anyhow's `{:#}`, eyre's report) shows each once.
///
/// It also marks where a baton call's attempts begin in an error chain: a baton call
/// that fails inside another one's attempt is read by its report, which this link
/// carries, and never by one of its attempts' errors below it ([`Error::of_inner_call`]).
///
/// ```
/// use baton_core::{AttemptFailure, AttemptResult, FailureClass};
/// let f = AttemptFailure::new("a", 2, AttemptResult::Failed(FailureClass::Undelivered), false);
/// assert_eq!(f.to_string(), "attempt 2 at \"a\": undelivered");
/// assert_eq!(f.attempt, 2);
/// ```
#[derive(Clone)]
pub struct AttemptFailure {
    /// Endpoint id.
    pub endpoint_id: String,
    /// Attempt number.
    pub attempt: u32,
    /// How it ended.
    pub result: AttemptResult,
    /// The attempt's own error, when an adapter gave it.
    error: Option<Shared>,
    /// The verdict of the whole call whose last attempt this is.
    call_may_have_executed: bool,
}

impl AttemptFailure {
    /// The attempt numbered `attempt` at endpoint `endpoint_id`, which ended as `result`,
    /// the last of a call whose report says `call_may_have_executed`.
    pub fn new(
        endpoint_id: impl Into<String>,
        attempt: u32,
        result: AttemptResult,
        call_may_have_executed: bool,
    ) -> Self {
        AttemptFailure {
            endpoint_id: endpoint_id.into(),
            attempt,
            result,
            error: None,
            call_may_have_executed,
        }
    }

    /// The attempt's own error, when the adapter gave it.
    pub fn error(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        self.error.as_deref()
    }

    /// Whether the call this attempt ended may have done the work (its report's
    /// `may_have_executed`): what an outer baton reads when this call failed inside one
    /// of its attempts.
    pub fn call_may_have_executed(&self) -> bool {
        self.call_may_have_executed
    }
}

impl fmt::Debug for AttemptFailure {
    /// The attempt's own error is shown with URLs reduced to their origins (SPEC 4), as
    /// its `Debug` may quote one in full.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let error = (self.error.as_ref()).map(|e| crate::scrub_urls(&format!("{e:?}")));
        f.debug_struct("AttemptFailure")
            .field("endpoint_id", &self.endpoint_id)
            .field("attempt", &self.attempt)
            .field("result", &self.result)
            .field("error", &error)
            .field("call_may_have_executed", &self.call_may_have_executed)
            .finish()
    }
}

impl fmt::Display for AttemptFailure {
    /// The attempt, and how it ended when no error of its own follows in the chain (the
    /// error says it, in the transport's words); `{:#}` adds every cause.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "attempt {} at {:?}", self.attempt, self.endpoint_id)?;
        match self.error {
            Some(_) if f.alternate() => crate::write_causes(f, self),
            Some(_) => Ok(()),
            None => write!(f, ": {}", self.result),
        }
    }
}

/// The `source()` of a failed call's error when the call made no attempt (no endpoint was
/// usable, the budget or the deadline stopped it first, the call was invalid): nothing was
/// sent. Like [`AttemptFailure`], it marks a baton call in an error chain: a baton call
/// that fails so inside another one's attempt proves that attempt sent nothing
/// ([`Error::of_inner_call`]).
///
/// ```
/// # use baton_core::{sim::Sim, CallOptions, Endpoint, Error, FailureClass, NoAttempt, Policy};
/// # use std::time::Instant;
/// let policy = Policy::builder().endpoint(Endpoint::new("a", "http://a.example/")).build().unwrap();
/// let mut sim = Sim::new(policy, Instant::now());
/// // An unknown endpoint id for `only`: an error before any attempt.
/// let only = CallOptions { only: Some("z".into()), ..CallOptions::default() };
/// let err = sim.run(http::Method::POST, only).report.into_error().unwrap();
/// let link = std::error::Error::source(&err).unwrap();
/// assert!(link.is::<NoAttempt>());
/// assert_eq!(link.to_string(), "no request was sent");
/// assert_eq!(Error::of_inner_call(&err, |_| false), Some(FailureClass::Undelivered));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoAttempt;

impl fmt::Display for NoAttempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("no request was sent")
    }
}

impl std::error::Error for NoAttempt {}

impl std::error::Error for AttemptFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.error
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// A failed call: the kind of error plus the full report (attempts, request id, stop
/// reason, `may_have_executed`), and the last attempt ([`AttemptFailure`], with its own
/// error when an adapter gave it) as its `source()`, or [`NoAttempt`] when the call made
/// none.
///
/// Every adapter's call error shows this error's text and has the same source, so a
/// chain reads: the call, its last attempt, what failed there. `{}` shows the call alone;
/// `{:#}` adds every source, joined with `": "`, with URLs reduced to their origins.
///
/// ```
/// # use baton_core::{sim::{Sim, Script}, CallOptions, Endpoint, Policy, ErrorKind};
/// # use std::time::Instant;
/// let policy = Policy::builder().endpoint(Endpoint::new("a", "http://a.example/")).build().unwrap();
/// let mut sim = Sim::new(policy, Instant::now());
/// sim.script("a", Script::refuse());
/// let err = sim.run(http::Method::GET, CallOptions::default()).report.into_error().unwrap();
/// assert_eq!(err.kind, ErrorKind::Failover);
/// assert!(!err.report.may_have_executed);
/// let last = std::error::Error::source(&err).unwrap();
/// assert_eq!(last.to_string(), "attempt 3 at \"a\": undelivered"); // 3 attempts an endpoint by default
/// assert!(err.to_string().contains(err.report.request_id.as_str()));
/// assert!(format!("{err:#}").ends_with("not executed): attempt 3 at \"a\": undelivered"));
/// ```
#[derive(Debug, Clone)]
pub struct Error {
    /// Which error.
    pub kind: ErrorKind,
    /// Everything known about the call.
    pub report: Box<Report>,
    /// The last attempt (the `source()`), with its own error when an adapter gave it
    /// (boxed, as the report: a failed call's error stays small to move).
    last: Option<Box<AttemptFailure>>,
}

impl Error {
    /// The error `kind` of the call that `report` describes.
    pub(crate) fn new(kind: ErrorKind, report: Report) -> Self {
        let last = (report.attempts.last()).map(|a| {
            let executed = report.may_have_executed;
            Box::new(AttemptFailure::new(
                a.endpoint_id.to_string(),
                a.number,
                a.result,
                executed,
            ))
        });
        Error {
            kind,
            report: Box::new(report),
            last,
        }
    }

    /// The last attempt's failure, if there was an attempt.
    pub fn last_failure(&self) -> Option<&AttemptFailure> {
        self.last.as_deref()
    }

    /// This error with `error`, the last attempt's own error (a transport's, a service's),
    /// as the source of its last attempt ([`AttemptFailure`]). Adapters call it, and read
    /// the error back by downcasting [`last_error`](Self::last_error). A report without
    /// attempts has no attempt to hold it: an error before any attempt belongs in the
    /// error's kind (an invalid call's reason), and `error` is dropped.
    ///
    /// ```
    /// # use baton_core::{sim::{Sim, Script}, CallOptions, Endpoint, Policy};
    /// # use std::time::Instant;
    /// # let policy = Policy::builder().endpoint(Endpoint::new("a", "http://a.example/")).build().unwrap();
    /// # let mut sim = Sim::new(policy, Instant::now());
    /// # sim.script("a", Script::refuse());
    /// let err = sim.run(http::Method::GET, CallOptions::default()).report.into_error().unwrap();
    /// let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
    /// let err = err.with_last_error(Box::new(refused));
    /// assert!(err.last_error().unwrap().is::<std::io::Error>());
    /// let attempt = std::error::Error::source(&err).unwrap();
    /// assert_eq!(attempt.to_string(), "attempt 3 at \"a\"");
    /// assert!(attempt.source().unwrap().is::<std::io::Error>());
    /// ```
    pub fn with_last_error(mut self, error: Box<dyn std::error::Error + Send + Sync>) -> Self {
        if let Some(last) = &mut self.last {
            last.error = Some(std::sync::Arc::from(error));
        }
        self
    }

    /// The last attempt's own error, when the adapter gave it.
    pub fn last_error(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        self.last.as_ref()?.error()
    }

    /// Whether `e` is a baton call's error or the link to its last attempt
    /// ([`AttemptFailure`], or [`NoAttempt`]): where a walk of an attempt's error chain
    /// for its own facts (a certificate, an HTTP/2 refusal, an I/O error) ends, since below
    /// it are another call's attempts, read by that call's report
    /// ([`of_inner_call`](Self::of_inner_call)).
    ///
    /// ```
    /// # use baton_core::{AttemptFailure, AttemptResult, Error, FailureClass};
    /// let link = AttemptFailure::new("a", 1, AttemptResult::Failed(FailureClass::Ambiguous), true);
    /// assert!(Error::is_call_link(&link));
    /// assert!(!Error::is_call_link(&std::io::Error::other("x")));
    /// ```
    pub fn is_call_link(e: &(dyn std::error::Error + 'static)) -> bool {
        e.is::<Error>() || e.is::<AttemptFailure>() || e.is::<NoAttempt>()
    }

    /// The failure class of an attempt whose error is, or was caused by, another baton
    /// call's failure (baton nested in baton): `Some` when `error`'s chain holds a baton
    /// call's [`Error`] or the link to its last attempt ([`AttemptFailure`], which every
    /// adapter's call error has as its source; [`NoAttempt`] when it made none: nothing
    /// was sent), before any error that decides on its own (`decides`, the
    /// adapter's proofs, such as a credential that could not be had). That inner call's
    /// report decides: undelivered only when none of its attempts may have executed,
    /// else ambiguous. An error of one of the inner call's attempts below it (a refused
    /// connection after an earlier attempt that timed out) proves nothing about the
    /// others, so the chain is not read past it.
    ///
    /// ```
    /// # use baton_core::{sim::{Sim, Script}, CallOptions, Endpoint, Error, FailureClass, Policy};
    /// # use std::time::Instant;
    /// let policy = Policy::builder()
    ///     .endpoint(Endpoint::new("a", "http://a.example/"))
    ///     .endpoint(Endpoint::new("b", "http://b.example/"))
    ///     .build()
    ///     .unwrap();
    /// let mut sim = Sim::new(policy, Instant::now());
    /// // Endpoint a resets every request after reading it (it may have executed), b
    /// // refuses every connection: the inner call's last attempt is b's refusal, and that
    /// // error alone would say "nothing was sent".
    /// sim.script("a", Script::reset());
    /// sim.script("b", Script::refuse());
    /// let inner = sim.run(http::Method::GET, CallOptions::default()).report.into_error().unwrap();
    /// let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
    /// let inner = inner.with_last_error(Box::new(refused));
    /// assert!(inner.report.may_have_executed);
    /// assert_eq!(Error::of_inner_call(&inner, |_| false), Some(FailureClass::Ambiguous));
    /// assert_eq!(Error::of_inner_call(&std::io::Error::other("x"), |_| false), None);
    /// ```
    pub fn of_inner_call(
        error: &(dyn std::error::Error + 'static),
        decides: impl Fn(&(dyn std::error::Error + 'static)) -> bool,
    ) -> Option<crate::FailureClass> {
        let mut cur = Some(error);
        let mut depth = 0;
        while let Some(e) = cur {
            let verdict = match e.downcast_ref::<Error>() {
                Some(call) => Some(call.report.may_have_executed),
                None if e.is::<NoAttempt>() => Some(false),
                None => e
                    .downcast_ref::<AttemptFailure>()
                    .map(AttemptFailure::call_may_have_executed),
            };
            if let Some(may_have_executed) = verdict {
                return Some(match may_have_executed {
                    true => crate::FailureClass::Ambiguous,
                    false => crate::FailureClass::Undelivered,
                });
            }
            depth += 1;
            if decides(e) || depth > 64 {
                return None;
            }
            cur = e.source();
        }
        None
    }
}

impl fmt::Display for Error {
    /// The call: its kind and report. With `{:#}`, every source follows, each after
    /// `": "`, with URLs reduced to their origins.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = &self.report;
        match &self.kind {
            ErrorKind::Failover => write!(f, "all attempts failed")?,
            ErrorKind::NoUsableEndpoint => write!(f, "no usable endpoint")?,
            ErrorKind::UnknownEndpoint(id) => write!(f, "unknown endpoint {id:?}")?,
            ErrorKind::Deadline => write!(f, "deadline exceeded")?,
            ErrorKind::Cancelled => write!(f, "call cancelled")?,
            ErrorKind::RetryAfterTooLong(d) => write!(
                f,
                "provider asked to retry after {d:?}, longer than max_retry_after"
            )?,
            ErrorKind::Budget => write!(f, "retry budget exhausted")?,
            ErrorKind::RateLimited => write!(f, "rate limited")?,
            ErrorKind::InvalidCall(why) => write!(f, "invalid call: {why}")?,
        }
        write!(
            f,
            " (request id {}, stop reason {}, {} attempt(s)",
            r.request_id,
            r.stop_reason,
            r.attempts.len()
        )?;
        for a in &r.attempts {
            write!(f, "; {a}")?;
        }
        write!(
            f,
            "; {})",
            if r.may_have_executed {
                "may have executed"
            } else {
                "not executed"
            }
        )?;
        if f.alternate() {
            crate::write_causes(f, self)?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {
    /// The last attempt ([`AttemptFailure`]), whose source is its own error when the
    /// adapter gave it; [`NoAttempt`] when the call made none.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self.last.as_deref() {
            Some(last) => Some(last),
            // A report is public to build: "nothing was sent" only where it says so.
            None if !self.report.may_have_executed => Some(&NoAttempt),
            None => None,
        }
    }
}
