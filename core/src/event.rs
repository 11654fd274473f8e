//! Events (SPEC 4): what the engine decided and why, delivered synchronously and in causal
//! order per call to the sink the adapter or the user installed.

use std::time::{Duration, Instant};

use http::StatusCode;

use crate::health::BreakerState;
use crate::redirect::Redirect;
use crate::report::{AttemptResult, StopReason};

/// One event of one call. Every event carries the call's request id and idempotency key.
///
/// ```
/// use baton_core::{Event, EventKind};
/// fn log(e: &Event<'_>) {
///     if let EventKind::Failover { from, to, .. } = &e.kind {
///         eprintln!("{}: failover {from} -> {to}", e.request_id);
///     }
/// }
/// # let _ = log;
/// ```
#[derive(Debug, Clone)]
pub struct Event<'a> {
    /// The call's request id.
    pub request_id: &'a str,
    /// The call's idempotency key, if any.
    pub idempotency_key: Option<&'a str>,
    /// When the engine made the decision (the time the adapter supplied).
    pub at: Instant,
    /// What happened.
    pub kind: EventKind<'a>,
}

/// Why the engine is waiting.
///
/// ```
/// use baton_core::WaitReason;
/// assert_eq!(WaitReason::RetryAfter.as_str(), "retry_after");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitReason {
    /// Backoff before a retry of the same endpoint.
    Retry,
    /// Backoff before a new round.
    Round,
    /// A `Retry-After` the provider asked for.
    RetryAfter,
    /// An unavailable endpoint that is next becomes available.
    Cooldown,
}

impl WaitReason {
    /// The reason's name in events and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            WaitReason::Retry => "retry",
            WaitReason::Round => "round",
            WaitReason::RetryAfter => "retry_after",
            WaitReason::Cooldown => "cooldown",
        }
    }
}

/// What kind of attempt is being made.
///
/// ```
/// use baton_core::AttemptKind;
/// assert_eq!(AttemptKind::Failover.as_str(), "failover");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptKind {
    /// The call's first attempt.
    First,
    /// An attempt at an endpoint this call already attempted.
    Retry,
    /// An attempt at an endpoint this call has not attempted yet.
    Failover,
    /// An attempt started while others are still in flight.
    Hedge,
}

impl AttemptKind {
    /// The kind's name in events and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptKind::First => "first",
            AttemptKind::Retry => "retry",
            AttemptKind::Failover => "failover",
            AttemptKind::Hedge => "hedge",
        }
    }
}

/// The events of SPEC 4.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use std::time::Instant;
/// use baton_core::sim::{Script, Sim};
/// use baton_core::{CallOptions, Endpoint, EventKind, Policy};
///
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let log = seen.clone();
/// let policy = Policy::builder()
///     .endpoint(Endpoint::new("a", "https://a.example/"))
///     .endpoint(Endpoint::new("b", "https://b.example/"))
///     .on_event(move |e| {
///         if let EventKind::Failover { from, to, .. } = &e.kind {
///             log.lock().unwrap().push(format!("{from} -> {to}"));
///         }
///     })
///     .build()
///     .unwrap();
/// let mut sim = Sim::new(policy, Instant::now());
/// sim.script("a", Script::refuse());
/// sim.run(http::Method::GET, CallOptions::default());
/// assert_eq!(*seen.lock().unwrap(), ["a -> b"]);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum EventKind<'a> {
    /// An attempt is being sent.
    AttemptStarted {
        /// Endpoint id.
        endpoint: &'a str,
        /// Attempt number (1-based, per call).
        attempt: u32,
        /// First, retry, failover or hedge.
        kind: AttemptKind,
        /// Whether the attempt holds a half-open probe slot.
        probe: bool,
    },
    /// An attempt ended.
    AttemptFinished {
        /// Endpoint id.
        endpoint: &'a str,
        /// Attempt number.
        attempt: u32,
        /// Status or failure class.
        result: AttemptResult,
        /// Time from start to end of the attempt.
        elapsed: Duration,
    },
    /// An attempt followed a redirect (SPEC 3); it is still the same attempt.
    Redirected {
        /// Endpoint id of the attempt.
        endpoint: &'a str,
        /// The hop (its `Debug` and `Display` show origins only).
        redirect: &'a Redirect,
    },
    /// An unavailable endpoint was skipped (skip mode) or left for last.
    CooldownSkip {
        /// Endpoint id.
        endpoint: &'a str,
        /// Its breaker state.
        state: BreakerState,
        /// True when skipped for good, false when moved to the back.
        skipped: bool,
    },
    /// A copy of the body could not be made for a later attempt.
    ReplayFailed {
        /// Attempt number that needed the copy.
        attempt: u32,
    },
    /// No later attempt is possible because the body cannot be replayed.
    NotReplayable,
    /// A streaming body was over the adapter's buffering limit: it is sent once, without
    /// replay (SPEC 2.4).
    BodyNotBuffered {
        /// The buffering limit in bytes.
        limit: usize,
    },
    /// The call moves to another endpoint.
    Failover {
        /// From endpoint id.
        from: &'a str,
        /// To endpoint id.
        to: &'a str,
        /// What the `from` attempt ended with.
        reason: AttemptResult,
        /// The status, when the reason was a response.
        status: Option<StatusCode>,
    },
    /// The call waits before its next attempt.
    BackoffWait {
        /// How long.
        delay: Duration,
        /// Why.
        reason: WaitReason,
    },
    /// An endpoint's breaker changed state.
    BreakerTransition {
        /// Endpoint id.
        endpoint: &'a str,
        /// Previous state.
        from: BreakerState,
        /// New state.
        to: BreakerState,
    },
    /// The retry budget refused an extra attempt.
    BudgetRefused {
        /// The endpoint the attempt would have gone to.
        endpoint: &'a str,
    },
    /// A rate limiter said "not before `until`".
    RateLimited {
        /// The endpoint the attempt would have gone to.
        endpoint: &'a str,
        /// When the limiter would admit it.
        until: Instant,
        /// True when the call waits; false when it moves on or fails fast.
        waiting: bool,
    },
    /// A hedge attempt started while others are in flight.
    HedgeStarted {
        /// Endpoint id.
        endpoint: &'a str,
        /// Attempt number.
        attempt: u32,
    },
    /// An in-flight attempt was cancelled (lost a hedge race, or the call ended). One
    /// the call's deadline cut finishes instead ([`EventKind::AttemptFinished`] with
    /// [`AttemptResult::Deadline`]), whichever timer fired first.
    AttemptCancelled {
        /// Endpoint id.
        endpoint: &'a str,
        /// Attempt number.
        attempt: u32,
    },
    /// A half-open probe ended.
    ProbeResult {
        /// Endpoint id.
        endpoint: &'a str,
        /// Whether it succeeded (closing the breaker).
        success: bool,
    },
    /// The call ended.
    Result {
        /// Why it stopped.
        stop_reason: StopReason,
        /// Status of the returned response, if any.
        status: Option<StatusCode>,
        /// Whether any attempt may have done the work.
        may_have_executed: bool,
        /// Attempts made.
        attempts: u32,
    },
}
