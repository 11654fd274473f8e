//! One call's state machine.
//!
//! The call order, for an adapter:
//!
//! 1. [`Call::new`] with the shared [`Engine`], the request's method, URL and headers, the
//!    kind of body, the call's options and the time.
//! 2. Loop on [`Call::poll_action`] with the current time:
//!    - [`Action::Send`]: send the attempt to its endpoint (a fresh copy of the body when
//!      [`Attempt::fresh_body`] says so; if the copy fails, [`Call::replay_failed`]).
//!    - [`Action::Discard`]: cancel that attempt if it is in flight, close its response if
//!      you kept one. Report nothing more for it.
//!    - [`Action::Wait`]: sleep until the time given (or until any in-flight attempt ends
//!      when there is none), then poll again.
//!    - [`Action::Done`]: the call is over; return the response of
//!      [`Outcome::kept_attempt`](crate::Outcome::kept_attempt) (if any) and drop the rest.
//! 3. When an attempt ends, [`Call::handle_outcome`] with its number, the classified
//!    outcome and the time; then poll again.
//!
//! Dropping a `Call` releases any half-open probe slot its in-flight attempts hold.
//! The call never reads a clock or OS randomness, never sleeps and never does I/O: the
//! same inputs give the same actions.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use http::header::HeaderMap;
use http::{Method, StatusCode};
use smallvec::SmallVec;

use crate::engine::Engine;
use crate::event::{AttemptKind, Event, EventKind, WaitReason};
use crate::health::{Record, Ticket, Transitions};
use crate::id::RequestId;
use crate::limit::{Admit, LimitScope, OnLimit};
use crate::permission::{self, Permission, PermissionOverride, PermissionSource, Resolved};
use crate::policy::{EventSink, RequestInfo, ResponseView, Unavailable, Verdict, MAX_ENDPOINTS};
use crate::redirect::Redirect;
use crate::report::{
    AttemptRecord, AttemptResult, CallRejection, ErrorKind, FailureClass, Outcome, Report,
    StopReason, TimeoutPhase,
};
use crate::retry_after::retry_after_from_headers;
use crate::rng::{mix, Rng};
use crate::time::{add, since};

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

/// Per-call settings (SPEC 2.2, 2.6, 3). Everything unset comes from the policy.
///
/// ```
/// use std::time::Duration;
/// use baton_core::{CallOptions, Permission};
/// let opts = CallOptions {
///     idempotency_key: Some("charge-42".into()),
///     deadline: Some(Duration::from_secs(3)),
///     failover: Some(Permission::Never),
///     ..CallOptions::default()
/// };
/// assert!(!opts.deny);
/// ```
#[derive(Clone, Default)]
pub struct CallOptions {
    /// Retry permission for this call.
    pub retry: Option<Permission>,
    /// Failover permission for this call.
    pub failover: Option<Permission>,
    /// At most one attempt (both permissions `Never`).
    pub deny: bool,
    /// Preferred endpoint id (moved to the front when eligible and available).
    pub prefer: Option<String>,
    /// Deadline for the whole call, from its start.
    pub deadline: Option<Duration>,
    /// Attempt timeout for this call.
    pub attempt_timeout: Option<Duration>,
    /// Attempts per endpoint per round for this call.
    pub attempts_per_endpoint: Option<u32>,
    /// Cap on this call's attempts.
    pub max_attempts: Option<u32>,
    /// Caller-chosen request id (validated: 8-128 of `A-Z a-z 0-9 . _ : -`).
    pub request_id: Option<String>,
    /// Idempotency key.
    pub idempotency_key: Option<String>,
    /// Opt in to hedging for a call that is not a safe method.
    pub hedge: bool,
    /// Event sink for this call (instead of the policy's).
    pub events: Option<EventSink>,
}

impl std::fmt::Debug for CallOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallOptions")
            .field("retry", &self.retry)
            .field("failover", &self.failover)
            .field("deny", &self.deny)
            .field("prefer", &self.prefer)
            .field("deadline", &self.deadline)
            .field("attempt_timeout", &self.attempt_timeout)
            .field("attempts_per_endpoint", &self.attempts_per_endpoint)
            .field("max_attempts", &self.max_attempts)
            .field("request_id", &self.request_id)
            .field("idempotency_key", &self.idempotency_key)
            .field("hedge", &self.hedge)
            .field("events", &self.events.is_some())
            .finish()
    }
}

/// One attempt the adapter is asked to send.
///
/// ```
/// # use baton_core::{Action, BodyKind, Call, CallOptions, Endpoint, Engine, Policy, RequestInfo};
/// # use std::{sync::Arc, time::Instant};
/// let policy = Policy::builder().endpoint(Endpoint::new("a", "http://a.example/")).build().unwrap();
/// let engine = Arc::new(Engine::new(policy));
/// let (uri, headers) = ("/".parse().unwrap(), http::HeaderMap::new());
/// let info = RequestInfo { method: &http::Method::GET, uri: &uri, headers: &headers };
/// let now = Instant::now();
/// let mut call = Call::new(engine, &info, BodyKind::Empty, CallOptions::default(), now);
/// let Action::Send(attempt) = call.poll_action(now) else { panic!() };
/// assert_eq!((attempt.number, attempt.endpoint), (1, 0));
/// assert!(!attempt.fresh_body);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// Attempt number (1-based, per call); hand it back to [`Call::handle_outcome`].
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

/// What the adapter should do next.
// `Done` is large, but boxing it would cost every call an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Send this attempt.
    Send(Attempt),
    /// Cancel this attempt if in flight, close its response if kept; report nothing more.
    Discard(u32),
    /// Nothing to do until this time (or, when `None`, until an in-flight attempt ends).
    Wait(Option<Instant>),
    /// The call is over.
    Done(Report),
}

/// How one attempt ended, as the adapter observed it.
///
/// ```
/// use baton_core::{AttemptOutcome, FailureClass, ResponseInfo};
/// let headers = http::HeaderMap::new();
/// let ok = AttemptOutcome::Response(ResponseInfo::new(http::StatusCode::OK, &headers));
/// let refused = AttemptOutcome::Failure(FailureClass::Undelivered);
/// # let _ = (ok, refused);
/// ```
#[derive(Debug, Clone, Copy)]
pub enum AttemptOutcome<'a> {
    /// Response headers arrived (the commit point).
    Response(ResponseInfo<'a>),
    /// A transport failure of this class.
    Failure(FailureClass),
    /// The attempt timeout fired in this phase.
    Timeout(TimeoutPhase),
    /// The attempt was cancelled.
    Cancelled,
}

/// A response as the engine needs it: status, headers (for `Retry-After`, `Date` and the
/// classifier) and the wall time it arrived (for HTTP-date `Retry-After` without `Date`).
///
/// ```
/// use std::time::SystemTime;
/// use baton_core::ResponseInfo;
/// let headers = http::HeaderMap::new();
/// let r = ResponseInfo::new(http::StatusCode::SERVICE_UNAVAILABLE, &headers)
///     .wall(SystemTime::UNIX_EPOCH);
/// assert_eq!(r.status, 503);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ResponseInfo<'a> {
    /// Status.
    pub status: StatusCode,
    /// Response headers.
    pub headers: &'a HeaderMap,
    /// Wall time of arrival.
    pub wall: Option<SystemTime>,
}

impl<'a> ResponseInfo<'a> {
    /// A response with `status` and `headers`.
    pub fn new(status: StatusCode, headers: &'a HeaderMap) -> Self {
        ResponseInfo {
            status,
            headers,
            wall: None,
        }
    }

    /// Sets the wall time of arrival.
    pub fn wall(mut self, wall: SystemTime) -> Self {
        self.wall = Some(wall);
        self
    }
}

/// The first per-call setting out of range, if any (SPEC 5: invalid per-call settings fail
/// the call before any send).
fn check_options(options: &CallOptions) -> Option<CallRejection> {
    let bad = |setting, value: String, reason: String| CallRejection::Setting {
        setting,
        value,
        reason,
    };
    for (name, d) in [
        ("deadline", options.deadline),
        ("attempt_timeout", options.attempt_timeout),
    ] {
        match d {
            Some(d) if d.is_zero() => {
                return Some(bad(
                    name,
                    format!("{d:?}"),
                    "must be greater than zero".into(),
                ))
            }
            Some(d) if d > crate::policy::MAX_DURATION => {
                return Some(bad(name, format!("{d:?}"), "longer than 10 years".into()))
            }
            _ => {}
        }
    }
    for (name, n, max) in [
        (
            "attempts_per_endpoint",
            options.attempts_per_endpoint,
            crate::policy::MAX_ATTEMPTS_PER_ENDPOINT,
        ),
        (
            "max_attempts",
            options.max_attempts,
            crate::policy::MAX_ATTEMPTS,
        ),
    ] {
        if let Some(n) = n.filter(|n| *n == 0 || *n > max) {
            return Some(bad(name, n.to_string(), format!("must be 1 to {max}")));
        }
    }
    None
}

/// A later attempt is started only with at least this much time left before the call's
/// deadline (the first attempt always starts): with less, the deadline would cut it before
/// a provider could answer, and timers that round to whole milliseconds (ureq's) would fire
/// before the deadline and look like the endpoint's timeout.
pub const MIN_ATTEMPT_TIME: Duration = Duration::from_millis(5);

#[derive(Debug, Clone, Copy)]
struct Flight {
    number: u32,
    endpoint: u8,
    /// The attempt's timer ends at the call's deadline: its timeout is the deadline's cut.
    clipped: bool,
    started: Instant,
    ticket: Ticket,
    record: usize,
}

#[derive(Debug, Clone, Copy)]
struct Retained {
    attempt: u32,
    endpoint: usize,
    status: StatusCode,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plan {
    /// Send to `endpoint` at `at`.
    Send {
        endpoint: u8,
        at: Instant,
        kind: AttemptKind,
    },
    /// Attempts are in flight; nothing else is planned (maybe a hedge at `hedge_at`).
    Idle,
    /// Finished (a report is stored).
    Finished,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bits(u64);

impl Bits {
    fn has(self, i: usize) -> bool {
        i < 64 && self.0 & (1u64 << i) != 0
    }
    fn set(&mut self, i: usize) {
        if i < 64 {
            self.0 |= 1u64 << i;
        }
    }
}

/// A small ordered list of endpoint indexes, stored inline.
#[derive(Clone, Copy)]
struct Order {
    items: [u8; MAX_ENDPOINTS],
    len: u8,
}

impl Order {
    fn new() -> Self {
        Order {
            items: [0; MAX_ENDPOINTS],
            len: 0,
        }
    }
    fn push(&mut self, i: usize) {
        if (self.len as usize) < MAX_ENDPOINTS {
            self.items[self.len as usize] = i as u8;
            self.len += 1;
        }
    }
    fn as_slice(&self) -> &[u8] {
        &self.items[..self.len as usize]
    }
    fn position(&self, i: usize) -> Option<usize> {
        self.as_slice().iter().position(|&e| e as usize == i)
    }
    /// Moves the item at `from` to position `to` (< `from`), shifting the rest back.
    fn move_before(&mut self, from: usize, to: usize) {
        if to < from && from < self.len as usize {
            let v = self.items[from];
            self.items.copy_within(to..from, to + 1);
            self.items[to] = v;
        }
    }
}

/// One call's state machine. See the module docs for the call order.
///
/// ```
/// use std::sync::Arc;
/// use std::time::{Duration, Instant};
/// use baton_core::*;
///
/// let policy = Policy::builder()
///     .endpoint(Endpoint::new("primary", "https://a.example/"))
///     .endpoint(Endpoint::new("backup", "https://b.example/"))
///     .build()
///     .unwrap();
/// let engine = Arc::new(Engine::new(policy));
/// let (uri, headers) = ("/".parse().unwrap(), http::HeaderMap::new());
/// let info = RequestInfo { method: &http::Method::POST, uri: &uri, headers: &headers };
/// let t0 = Instant::now();
/// let mut call = Call::new(engine, &info, BodyKind::Replayable, CallOptions::default(), t0);
///
/// // The primary refuses the connection: nothing was sent, so a POST may fail over.
/// let Action::Send(first) = call.poll_action(t0) else { unreachable!() };
/// call.handle_outcome(first.number, AttemptOutcome::Failure(FailureClass::Undelivered), t0);
/// let Action::Send(second) = call.poll_action(t0) else { unreachable!() };
/// assert_eq!(second.endpoint, 1);
/// assert!(second.fresh_body);
///
/// // The backup times out waiting: it may have executed, so the call stops there.
/// let t1 = t0 + Duration::from_secs(30);
/// call.handle_outcome(second.number, AttemptOutcome::Timeout(TimeoutPhase::Response), t1);
/// let Action::Done(report) = call.poll_action(t1) else { unreachable!() };
/// assert_eq!(report.stop_reason, StopReason::NotPermitted);
/// assert!(report.may_have_executed);
/// ```
pub struct Call {
    engine: Arc<Engine>,
    sink: Option<EventSink>,
    request_id: RequestId,
    key: Option<String>,
    method: Method,
    perms: Resolved,
    keyed: bool,
    hedging: Option<(Duration, u32)>,
    body: BodyKind,
    start: Instant,
    deadline: Option<Instant>,
    attempt_timeout: Option<Duration>,
    per_endpoint: u32,
    per_endpoint_explicit: bool,
    pinned_limit: u32,
    max_attempts: u32,
    max_explicit: bool,
    /// Eligible endpoints in priority order, preferred first.
    base: Order,
    /// The current round: available first (then unavailable when tried last).
    round: Order,
    round_pos: usize,
    round_counts: [u8; MAX_ENDPOINTS],
    totals: [u8; MAX_ENDPOINTS],
    /// Endpoints skipped for this round (skip mode).
    skipped: Bits,
    attempted: Bits,
    executed: Bits,
    in_flight_bits: Bits,
    any_ambiguous: bool,
    executed_after_retained: bool,
    next_number: u32,
    in_flight: SmallVec<[Flight; 2]>,
    retained: Option<Retained>,
    last_retry_after: Option<(usize, Duration)>,
    last_undelivered: bool,
    last_endpoint: usize,
    last_result: Option<AttemptResult>,
    hedge_at: Option<Instant>,
    waits: u32,
    rng: Rng,
    plan: Plan,
    discards: SmallVec<[u32; 2]>,
    records: SmallVec<[AttemptRecord; 2]>,
    /// Redirects followed by attempts, in the order they were reported.
    redirects: Vec<Redirect>,
    done: Option<Report>,
    first_deposited: bool,
    /// The budget token for the planned attempt is already paid (the limiter then asked it
    /// to wait).
    prepaid: bool,
}

impl std::fmt::Debug for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call")
            .field("request_id", &self.request_id)
            .field("plan", &self.plan)
            .field("attempts", &self.records.len())
            .field("in_flight", &self.in_flight.len())
            .field("done", &self.done.is_some())
            .finish()
    }
}

enum Stop {
    Reason(StopReason),
    RetryAfter(Duration),
    Answer(Retained, bool),
}

impl Call {
    /// Starts a call. Invalid call settings (a bad request id, an unknown preferred
    /// endpoint, zero timeouts) do not panic: the first [`poll_action`](Call::poll_action)
    /// returns [`Action::Done`] with the error, before any send.
    pub fn new(
        engine: Arc<Engine>,
        request: &RequestInfo<'_>,
        body: BodyKind,
        options: CallOptions,
        now: Instant,
    ) -> Call {
        let policy = &engine.policy;
        let settings = &policy.settings;
        let seed = mix(settings.seed, engine.next_call());
        let mut rng = Rng::new(seed);
        let sink = options.events.clone().or_else(|| policy.events.clone());

        // Request identity: call option, then the header on the request, then generated.
        let header_id = request.headers.get(&policy.request_id_header).map(|v| {
            v.to_str()
                .map(str::to_owned)
                .unwrap_or_else(|_| "<not text>".into())
        });
        let mut invalid: Option<CallRejection> = None;
        let request_id = match options.request_id.as_deref().or(header_id.as_deref()) {
            Some(given) => match RequestId::parse(given) {
                Ok(id) => id,
                Err(e) => {
                    invalid = Some(e.into());
                    RequestId::generate(&mut rng)
                }
            },
            None => RequestId::generate(&mut rng),
        };
        let key = match &options.idempotency_key {
            Some(k) => Some(k.clone()),
            None => match request.headers.get(&policy.idempotency_key_header) {
                None => None,
                Some(v) => match v.to_str() {
                    Ok(k) => Some(k.to_owned()),
                    Err(_) => {
                        // Sent unchanged means kept byte for byte: a key that is not
                        // visible ASCII is rejected rather than altered.
                        invalid.get_or_insert(CallRejection::IdempotencyKey(
                            "the header is not visible ASCII text",
                        ));
                        None
                    }
                },
            },
        };
        if let Some(k) = &key {
            if k.is_empty() || http::HeaderValue::from_str(k).is_err() {
                invalid.get_or_insert(CallRejection::IdempotencyKey(
                    "not a valid, non-empty header value",
                ));
            }
        }
        let keyed = key.is_some();
        if let Err(e) = crate::limits::check_request(request.method, request.headers) {
            invalid.get_or_insert(e.into());
        }

        // Permissions: call setting > policy function > inference > default.
        let call_override = if options.deny {
            PermissionOverride::deny()
        } else {
            PermissionOverride {
                retry: options.retry,
                failover: options.failover,
            }
        };
        let from_fn = match (
            &policy.permission,
            call_override.retry.and(call_override.failover),
        ) {
            (Some(f), None) => Some(f(request)),
            _ => None,
        };
        let perms = permission::resolve(call_override, from_fn, request.method, keyed);

        let hedging = settings.hedge.and_then(|h| {
            let read = permission::is_safe_method(request.method) || options.hedge;
            (read && perms.failover == Permission::Always && !keyed)
                .then_some((h.after, h.max_in_flight))
        });

        if let Some(why) = check_options(&options) {
            invalid.get_or_insert(why);
        }
        let deadline = options.deadline.or(settings.deadline).map(|d| add(now, d));

        let mut call = Call {
            engine: engine.clone(),
            sink,
            request_id,
            key,
            method: request.method.clone(),
            perms,
            keyed,
            hedging,
            body,
            start: now,
            deadline,
            attempt_timeout: options.attempt_timeout,
            per_endpoint: 1,
            per_endpoint_explicit: false,
            pinned_limit: 3,
            max_attempts: 1,
            max_explicit: false,
            base: Order::new(),
            round: Order::new(),
            round_pos: 0,
            round_counts: [0; MAX_ENDPOINTS],
            totals: [0; MAX_ENDPOINTS],
            skipped: Bits(0),
            attempted: Bits(0),
            executed: Bits(0),
            in_flight_bits: Bits(0),
            any_ambiguous: false,
            executed_after_retained: false,
            next_number: 1,
            in_flight: SmallVec::new(),
            retained: None,
            last_retry_after: None,
            last_undelivered: false,
            last_endpoint: 0,
            last_result: None,
            hedge_at: None,
            waits: 0,
            rng,
            plan: Plan::Finished,
            discards: SmallVec::new(),
            records: SmallVec::new(),
            redirects: Vec::new(),
            done: None,
            first_deposited: false,
            prepaid: false,
        };

        if let Some(why) = invalid {
            call.finish_with(now, StopReason::InvalidCall, ErrorKind::InvalidCall(why));
            return call;
        }

        // Ordering: priority, eligibility (asked once per endpoint), preference.
        let n = policy.endpoints.len();
        let mut eligible = Bits(0);
        for (i, e) in policy.endpoints.iter().enumerate() {
            if policy.eligible.as_ref().is_none_or(|f| f(e, request)) {
                eligible.set(i);
            }
        }
        let mut preferred = None;
        if let Some(id) = &options.prefer {
            match policy.endpoint_index(id) {
                Some(i) => preferred = Some(i).filter(|i| eligible.has(*i)),
                None => {
                    let id = id.clone();
                    call.finish_with(
                        now,
                        StopReason::UnknownEndpoint,
                        ErrorKind::UnknownEndpoint(id),
                    );
                    return call;
                }
            }
        }
        if let Some(p) = preferred {
            call.base.push(p);
        }
        for i in 0..n {
            if eligible.has(i) && Some(i) != preferred {
                call.base.push(i);
            }
        }
        call.build_round(now, true);
        let usable = call.round.len as u32;
        if usable == 0 {
            call.finish_with(
                now,
                StopReason::NoUsableEndpoint,
                ErrorKind::NoUsableEndpoint,
            );
            return call;
        }
        let explicit_per = options
            .attempts_per_endpoint
            .or(settings.attempts_per_endpoint);
        call.per_endpoint = explicit_per.unwrap_or(if usable > 1 { 1 } else { 3 });
        call.per_endpoint_explicit = explicit_per.is_some();
        call.pinned_limit = settings.pinned_attempts.or(explicit_per).unwrap_or(3);
        let explicit_max = options.max_attempts.or(settings.max_attempts);
        call.max_explicit = explicit_max.is_some();
        call.max_attempts = explicit_max.unwrap_or(call.per_endpoint.saturating_mul(usable));
        let first = call.round.items[0];
        call.plan = Plan::Send {
            endpoint: first,
            at: now,
            kind: AttemptKind::First,
        };
        call
    }

    /// The call's request id (send it in the request-id header on every attempt).
    pub fn request_id(&self) -> &RequestId {
        &self.request_id
    }

    /// The call's idempotency key, if any (send it unchanged on every attempt).
    pub fn idempotency_key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// The engine this call runs on.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// When the call was started.
    pub fn started(&self) -> Instant {
        self.start
    }

    /// The call's deadline, if any.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// When reading the body of a response that arrived at `now` must end: the policy's
    /// `body_timeout` from `now`, never past the call's deadline (SPEC 2.6).
    pub fn body_read_by(&self, now: Instant) -> Option<Instant> {
        let timeout = self
            .engine
            .policy
            .settings
            .body_timeout
            .map(|d| add(now, d));
        match (timeout, self.deadline) {
            (Some(t), Some(d)) => Some(t.min(d)),
            (t, d) => t.or(d),
        }
    }

    /// The resolved retry and failover permissions.
    pub fn permissions(&self) -> (Permission, Permission) {
        (self.perms.retry, self.perms.failover)
    }

    /// Where each resolved permission came from: (retry, failover).
    pub fn permission_sources(&self) -> (PermissionSource, PermissionSource) {
        (self.perms.retry_source, self.perms.failover_source)
    }

    /// Whether the call is hedged (SPEC 2.8).
    pub fn is_hedged(&self) -> bool {
        self.hedging.is_some()
    }

    /// Numbers of the attempts in flight.
    pub fn in_flight(&self) -> impl Iterator<Item = u32> + '_ {
        self.in_flight.iter().map(|f| f.number)
    }

    /// Whether the call has ended.
    pub fn is_done(&self) -> bool {
        self.done.is_some()
    }

    // ----- events -----

    fn emit(&self, at: Instant, kind: EventKind<'_>) {
        if let Some(sink) = &self.sink {
            sink(&Event {
                request_id: self.request_id.as_str(),
                idempotency_key: self.key.as_deref(),
                at,
                kind,
            });
        }
    }

    /// Reports breaker transitions (collected under the health lock, reported after it was
    /// released).
    fn report_transitions(&self, endpoint: usize, at: Instant, transitions: &Transitions) {
        for t in transitions {
            self.emit(
                at,
                EventKind::BreakerTransition {
                    endpoint: &self.engine.ids[endpoint],
                    from: t.from,
                    to: t.to,
                },
            );
        }
    }

    fn available(&self, i: usize, now: Instant) -> bool {
        let mut transitions = Transitions::new();
        let available = self.engine.health.available(i, now, &mut transitions);
        if !transitions.is_empty() {
            self.report_transitions(i, now, &transitions);
        }
        available
    }

    /// Builds a round: available endpoints of `base` first, then (tried-last mode) the
    /// unavailable ones, or (skip mode) none of them, with an event per skip.
    fn build_round(&mut self, now: Instant, first: bool) {
        let mut round = Order::new();
        let mut later = Order::new();
        self.skipped = Bits(0);
        for &e in self.base.as_slice() {
            let i = e as usize;
            if self.available(i, now) {
                round.push(i);
            } else {
                later.push(i);
            }
        }
        let skip = self.engine.policy.settings.unavailable == Unavailable::Skip;
        for &e in later.as_slice() {
            let i = e as usize;
            if self.sink.is_some() {
                let state = self
                    .engine
                    .health
                    .snapshot(i, now)
                    .map(|h| h.state)
                    .unwrap_or(crate::BreakerState::Closed);
                self.emit(
                    now,
                    EventKind::CooldownSkip {
                        endpoint: &self.engine.ids[i],
                        state,
                        skipped: skip,
                    },
                );
            }
            if skip {
                self.skipped.set(i);
            } else {
                round.push(i);
            }
        }
        let _ = first;
        self.round = round;
        self.round_pos = 0;
        self.round_counts = [0; MAX_ENDPOINTS];
    }

    fn allowed(&self, x: usize) -> bool {
        let policy = &self.engine.policy;
        permission::attempt_allowed(
            &self.perms,
            x,
            self.executed.0,
            self.attempted.0,
            self.keyed,
            |a, b| policy.same_group(a, b),
        )
    }

    /// The kind of a later attempt at `e`: a retry when the call already attempted it, else
    /// a failover (SPEC 1).
    fn kind_at(&self, e: usize) -> AttemptKind {
        if self.attempted.has(e) {
            AttemptKind::Retry
        } else {
            AttemptKind::Failover
        }
    }

    /// Whether an extra attempt of `kind` is free of budget: it follows an undelivered
    /// failure, which put no load on any provider (hedges always pay).
    fn free_step(&self, kind: AttemptKind) -> bool {
        self.last_undelivered && kind != AttemptKind::Hedge
    }

    fn attempts_made(&self) -> u32 {
        self.next_number - 1
    }

    /// The next action, given the time.
    pub fn poll_action(&mut self, now: Instant) -> Action {
        if let Some(id) = self.discards.pop() {
            return Action::Discard(id);
        }
        if let Some(report) = self.done.take() {
            // The full report is handed out once (moved, not cloned: the healthy path stays
            // cheap). Polling a finished call again returns the same outcome without the
            // attempt list.
            self.done = Some(Report {
                attempts: SmallVec::new(),
                redirects: Vec::new(),
                idempotency_key: report.idempotency_key.clone(),
                outcome: report.outcome.clone(),
                ..report
            });
            return Action::Done(report);
        }
        if self.deadline.is_some_and(|d| now >= d) {
            self.cancel_in_flight(now, AttemptResult::Deadline);
            self.stop(now, Stop::Reason(StopReason::Deadline));
            return self.poll_action(now);
        }
        match self.plan {
            Plan::Finished => {
                // Unreachable: a finished plan always stores a report.
                self.stop(now, Stop::Reason(StopReason::AttemptsExhausted));
                self.poll_action(now)
            }
            Plan::Send { endpoint, at, kind } => {
                if now < at {
                    return Action::Wait(Some(at));
                }
                match self.start_attempt(endpoint as usize, kind, now) {
                    Ok(Some(a)) => Action::Send(a),
                    // Re-planned to a later time (a rate limiter said "not before").
                    Ok(None) => self.poll_action(now),
                    Err(stop) => {
                        if self.in_flight.is_empty() {
                            self.stop(now, stop);
                        } else {
                            self.plan = Plan::Idle;
                        }
                        self.poll_action(now)
                    }
                }
            }
            Plan::Idle => {
                if self.in_flight.is_empty() {
                    self.stop(now, Stop::Reason(StopReason::AttemptsExhausted));
                    return self.poll_action(now);
                }
                if let Some(at) = self.hedge_at {
                    if now >= at {
                        self.hedge_at = None;
                        if let Some(a) = self.try_hedge(now) {
                            return Action::Send(a);
                        }
                    }
                }
                let wake = match (self.hedge_at, self.deadline) {
                    (Some(h), Some(d)) => Some(h.min(d)),
                    (h, d) => h.or(d),
                };
                Action::Wait(wake)
            }
        }
    }

    /// Re-checks availability, permission and budget, then starts the attempt.
    fn start_attempt(
        &mut self,
        planned: usize,
        kind: AttemptKind,
        now: Instant,
    ) -> Result<Option<Attempt>, Stop> {
        // A later attempt that could only get a sliver of the time left is not started:
        // it would be cut by the deadline before any provider could answer.
        if kind != AttemptKind::First
            && self
                .deadline
                .is_some_and(|d| since(d, now) < MIN_ATTEMPT_TIME)
        {
            return Err(Stop::Reason(StopReason::Deadline));
        }
        let mut endpoint = planned;
        let mut kind = kind;
        if !self.available(endpoint, now) {
            let skip = self.engine.policy.settings.unavailable == Unavailable::Skip;
            let state = self
                .engine
                .health
                .snapshot(endpoint, now)
                .map(|h| h.state)
                .unwrap_or(crate::BreakerState::Closed);
            // Another permitted endpoint later in the round that is available now?
            let pos = self.round.position(endpoint).unwrap_or(self.round_pos);
            let alt = (pos + 1..self.round.len as usize).find(|&p| {
                let e = self.round.items[p] as usize;
                !self.in_flight_bits.has(e)
                    && !self.skipped.has(e)
                    && self.round_counts[e] == 0
                    && self.allowed(e)
                    && self.available(e, now)
            });
            if skip || alt.is_some() {
                self.emit(
                    now,
                    EventKind::CooldownSkip {
                        endpoint: &self.engine.ids[endpoint],
                        state,
                        skipped: true,
                    },
                );
            }
            match (alt, skip) {
                (Some(p), _) => {
                    // Move the available one in front of the unavailable one.
                    if skip {
                        self.skipped.set(endpoint);
                        endpoint = self.round.items[p] as usize;
                    } else {
                        self.round.move_before(p, pos);
                        endpoint = self.round.items[pos] as usize;
                    }
                    if kind != AttemptKind::First {
                        kind = self.kind_at(endpoint);
                    }
                }
                (None, true) => {
                    self.skipped.set(endpoint);
                    return Err(Stop::Reason(StopReason::NoUsableEndpoint));
                }
                (None, false) => {}
            }
        }
        if !self.allowed(endpoint) {
            return Err(Stop::Reason(StopReason::NotPermitted));
        }
        // Rate limit: asked right before sending; a token is spent only on "go".
        if let Some(rl) = self.engine.policy.settings.rate_limit {
            match self.limit_check(endpoint, now) {
                Admit::Go => {}
                Admit::NotBefore(until) => {
                    let alt = (rl.scope == LimitScope::Endpoint)
                        .then(|| self.limit_alternative(endpoint, now))
                        .flatten();
                    self.emit(
                        now,
                        EventKind::RateLimited {
                            endpoint: &self.engine.ids[endpoint],
                            until,
                            waiting: alt.is_none() && rl.on_limit == OnLimit::Wait,
                        },
                    );
                    match alt {
                        Some(e) => {
                            endpoint = e;
                            if kind != AttemptKind::First {
                                kind = self.kind_at(e);
                            }
                        }
                        None if rl.on_limit == OnLimit::FailFast => {
                            return Err(Stop::Reason(StopReason::RateLimited));
                        }
                        None => {
                            if self.deadline.is_some_and(|d| until >= d) {
                                return Err(Stop::Reason(StopReason::Deadline));
                            }
                            self.plan = Plan::Send {
                                endpoint: endpoint as u8,
                                at: until,
                                kind,
                            };
                            return Ok(None);
                        }
                    }
                }
            }
        }
        // Budget: first attempts deposit; extra attempts withdraw unless they follow an
        // undelivered failure (they put no load on any provider). Asked after the limiter's
        // check and before its token is taken, so a refused attempt spends no token.
        if let Some(b) = &self.engine.budget {
            if kind == AttemptKind::First {
                if !self.first_deposited {
                    b.deposit(now);
                    self.first_deposited = true;
                }
            } else if !self.prepaid && !self.free_step(kind) {
                if !b.try_withdraw(now) {
                    self.emit(
                        now,
                        EventKind::BudgetRefused {
                            endpoint: &self.engine.ids[endpoint],
                        },
                    );
                    return Err(Stop::Reason(StopReason::Budget));
                }
                self.prepaid = true;
            }
        }
        if let Some(l) = self.engine.limiter(endpoint) {
            if let Admit::NotBefore(until) = l.admit(now) {
                // Another call took the token between the check and now: wait for it (the
                // budget token already paid stays with this attempt).
                if self.deadline.is_some_and(|d| until >= d) {
                    return Err(Stop::Reason(StopReason::Deadline));
                }
                self.plan = Plan::Send {
                    endpoint: endpoint as u8,
                    at: until,
                    kind,
                };
                return Ok(None);
            }
        }
        self.prepaid = false;
        if kind == AttemptKind::Failover
            || (kind == AttemptKind::Retry && endpoint != self.last_endpoint)
        {
            if let Some(last) = self.last_result {
                self.emit(
                    now,
                    EventKind::Failover {
                        from: &self.engine.ids[self.last_endpoint],
                        to: &self.engine.ids[endpoint],
                        reason: last,
                        status: last.status(),
                    },
                );
            }
        }
        Ok(Some(self.launch(endpoint, kind, now)))
    }

    fn limit_check(&self, endpoint: usize, now: Instant) -> Admit {
        self.engine
            .limiter(endpoint)
            .map_or(Admit::Go, |l| l.peek(now))
    }

    /// Another endpoint of the round, permitted, available and admitted by its limiter now.
    fn limit_alternative(&self, endpoint: usize, now: Instant) -> Option<usize> {
        (0..self.round.len as usize)
            .map(|p| self.round.items[p] as usize)
            .find(|&e| {
                e != endpoint
                    && !self.in_flight_bits.has(e)
                    && !self.skipped.has(e)
                    && self.round_counts[e] == 0
                    && self.allowed(e)
                    && self.available(e, now)
                    && self.limit_check(e, now) == Admit::Go
            })
    }

    fn launch(&mut self, endpoint: usize, kind: AttemptKind, now: Instant) -> Attempt {
        let mut transitions = Transitions::new();
        let ticket = self.engine.health.begin(endpoint, now, &mut transitions);
        if !transitions.is_empty() {
            self.report_transitions(endpoint, now, &transitions);
        }
        let number = self.next_number;
        self.next_number += 1;
        let policy = &self.engine.policy;
        let mut timeout = self
            .attempt_timeout
            .unwrap_or_else(|| policy.attempt_timeout_for(endpoint));
        let mut clipped = false;
        if let Some(d) = self.deadline {
            let left = since(d, now);
            clipped = left <= timeout;
            timeout = timeout.min(left);
        }
        let connect_timeout = policy.connect_timeout_for(endpoint).min(timeout);
        let attempt = Attempt {
            number,
            endpoint,
            kind,
            connect_timeout,
            timeout,
            fresh_body: number > 1 && self.body != BodyKind::Empty,
            probe: ticket.probe.is_some(),
        };
        self.records.push(AttemptRecord {
            endpoint,
            endpoint_id: self.engine.ids[endpoint].clone(),
            number,
            result: AttemptResult::InFlight,
            elapsed: Duration::ZERO,
        });
        self.in_flight.push(Flight {
            number,
            endpoint: endpoint as u8,
            clipped,
            started: now,
            ticket,
            record: self.records.len() - 1,
        });
        self.in_flight_bits.set(endpoint);
        self.attempted.set(endpoint);
        self.round_counts[endpoint] = self.round_counts[endpoint].saturating_add(1);
        self.totals[endpoint] = self.totals[endpoint].saturating_add(1);
        if let Some(p) = self.round.position(endpoint) {
            self.round_pos = p;
        }
        self.last_endpoint = endpoint;
        self.plan = Plan::Idle;
        if let Some((after, max)) = self.hedging {
            if (self.in_flight.len() as u32) < max {
                self.hedge_at = Some(add(now, after));
            } else {
                self.hedge_at = None;
            }
        }
        if kind == AttemptKind::Hedge {
            self.emit(
                now,
                EventKind::HedgeStarted {
                    endpoint: &self.engine.ids[endpoint],
                    attempt: number,
                },
            );
        }
        self.emit(
            now,
            EventKind::AttemptStarted {
                endpoint: &self.engine.ids[endpoint],
                attempt: number,
                kind,
                probe: attempt.probe,
            },
        );
        attempt
    }

    /// Starts a hedge: the next endpoint of the round that is not in flight, available and
    /// permitted, within `max_in_flight` and the attempt caps; spends budget.
    fn try_hedge(&mut self, now: Instant) -> Option<Attempt> {
        let (_, max) = self.hedging?;
        if self.in_flight.len() as u32 >= max || self.attempts_made() >= self.max_attempts {
            return None;
        }
        if !self.body.replayable() {
            return None;
        }
        let next = (0..self.round.len as usize)
            .map(|p| self.round.items[p] as usize)
            .find(|&e| {
                !self.in_flight_bits.has(e)
                    && !self.attempted.has(e)
                    && !self.skipped.has(e)
                    && self.allowed(e)
                    && self.available(e, now)
            })?;
        if let Admit::NotBefore(until) = self.limit_check(next, now) {
            self.emit(
                now,
                EventKind::RateLimited {
                    endpoint: &self.engine.ids[next],
                    until,
                    waiting: false,
                },
            );
            return None;
        }
        if let Some(b) = &self.engine.budget {
            if !b.try_withdraw(now) {
                self.emit(
                    now,
                    EventKind::BudgetRefused {
                        endpoint: &self.engine.ids[next],
                    },
                );
                return None;
            }
        }
        if let Some(l) = self.engine.limiter(next) {
            // Checked just above on this thread; only a concurrent call can take the
            // token in between, and then this hedge simply does not start.
            if l.admit(now) != Admit::Go {
                return None;
            }
        }
        Some(self.launch(next, AttemptKind::Hedge, now))
    }

    /// Reports the redirects attempt `number` followed (SPEC 3), in order, before its
    /// outcome: each is an event, and the report lists them. The attempt stays one attempt
    /// of its endpoint; a failure after a followed redirect counts as ambiguous, since the
    /// endpoint had answered. Redirects of an attempt that is not in flight are ignored.
    pub fn redirected(&mut self, number: u32, redirects: Vec<Redirect>, now: Instant) {
        let Some(flight) = self.in_flight.iter().find(|f| f.number == number) else {
            return;
        };
        let endpoint = flight.endpoint as usize;
        for r in redirects.into_iter().filter(|r| r.attempt == number) {
            self.emit(
                now,
                EventKind::Redirected {
                    endpoint: &self.engine.ids[endpoint],
                    redirect: &r,
                },
            );
            self.redirects.push(r);
        }
    }

    /// An outcome of an attempt that followed a redirect: the endpoint answered, so a
    /// later failure can never prove that nothing was done.
    fn after_redirects<'o>(&self, number: u32, outcome: AttemptOutcome<'o>) -> AttemptOutcome<'o> {
        if !self.redirects.iter().any(|r| r.attempt == number) {
            return outcome;
        }
        match outcome {
            AttemptOutcome::Failure(FailureClass::Undelivered) => {
                AttemptOutcome::Failure(FailureClass::Ambiguous)
            }
            AttemptOutcome::Timeout(TimeoutPhase::Connect) => {
                AttemptOutcome::Timeout(TimeoutPhase::Response)
            }
            other => other,
        }
    }

    /// Reports how attempt `number` ended. Returns false when the attempt is not in flight
    /// (already discarded, or unknown): such a report changes nothing.
    pub fn handle_outcome(
        &mut self,
        number: u32,
        outcome: AttemptOutcome<'_>,
        now: Instant,
    ) -> bool {
        let Some(pos) = self.in_flight.iter().position(|f| f.number == number) else {
            return false;
        };
        let flight = self.in_flight.remove(pos);
        let endpoint = flight.endpoint as usize;
        let outcome = self.after_redirects(number, outcome);
        self.in_flight_bits = Bits(0);
        for f in &self.in_flight {
            self.in_flight_bits.set(f.endpoint as usize);
        }
        let elapsed = since(now, flight.started);
        let settings = &self.engine.policy.settings;
        // A timeout of an attempt whose timer was clipped to the deadline is the deadline's
        // cut even when the adapter's timer fired a hair early (SPEC 2.6).
        let deadline_hit = self.deadline.is_some_and(|d| now >= d)
            || (flight.clipped && matches!(outcome, AttemptOutcome::Timeout(_)));
        let was_ambiguous = self.any_ambiguous;

        let (result, record) = match outcome {
            AttemptOutcome::Response(r) => {
                let code = r.status.as_u16();
                let rec = if matches!(code, 502..=504) {
                    Record::Failure
                } else {
                    Record::Success(elapsed)
                };
                (AttemptResult::Response(r.status), rec)
            }
            AttemptOutcome::Failure(FailureClass::RejectedLocally) => (
                AttemptResult::Failed(FailureClass::RejectedLocally),
                Record::Nothing,
            ),
            // Cut short by the caller's deadline: counts for nothing in health. A failure
            // before the connection was ready keeps its class (nothing was sent).
            AttemptOutcome::Failure(FailureClass::Undelivered) if deadline_hit => (
                AttemptResult::Failed(FailureClass::Undelivered),
                Record::Nothing,
            ),
            AttemptOutcome::Timeout(TimeoutPhase::Connect) if deadline_hit => (
                AttemptResult::TimedOut(TimeoutPhase::Connect),
                Record::Nothing,
            ),
            AttemptOutcome::Failure(_) | AttemptOutcome::Timeout(_) if deadline_hit => {
                (AttemptResult::Deadline, Record::Nothing)
            }
            AttemptOutcome::Failure(c) => (AttemptResult::Failed(c), Record::Failure),
            AttemptOutcome::Timeout(p) => (AttemptResult::TimedOut(p), Record::Failure),
            AttemptOutcome::Cancelled => (AttemptResult::Cancelled, Record::Nothing),
        };
        if let Some(rec) = self.records.get_mut(flight.record) {
            rec.result = result;
            rec.elapsed = elapsed;
        }
        let executed = result.may_have_executed(&settings.not_processed);
        if executed {
            self.executed.set(endpoint);
            if self.retained.is_some() {
                self.executed_after_retained = true;
            }
        }
        if matches!(
            result,
            AttemptResult::Failed(FailureClass::Ambiguous)
                | AttemptResult::TimedOut(TimeoutPhase::Response | TimeoutPhase::Unknown)
        ) {
            self.any_ambiguous = true;
        }
        self.last_undelivered = matches!(
            result,
            AttemptResult::Failed(FailureClass::Undelivered)
                | AttemptResult::TimedOut(TimeoutPhase::Connect)
        );
        self.last_endpoint = endpoint;
        self.last_result = Some(result);

        // Shared health.
        let mut transitions = Transitions::new();
        let probe =
            self.engine
                .health
                .finish(endpoint, flight.ticket, record, now, &mut transitions);
        // Causal order: the attempt ended, the probe result, then what it did to the breaker.
        self.emit(
            now,
            EventKind::AttemptFinished {
                endpoint: &self.engine.ids[endpoint],
                attempt: number,
                result,
                elapsed,
            },
        );
        if let Some(success) = probe {
            self.emit(
                now,
                EventKind::ProbeResult {
                    endpoint: &self.engine.ids[endpoint],
                    success,
                },
            );
        }
        if !transitions.is_empty() {
            self.report_transitions(endpoint, now, &transitions);
        }
        if self.done.is_some() {
            return true;
        }

        // A Retry-After only ever applies to the wait that follows its own response.
        self.last_retry_after = None;
        match outcome {
            AttemptOutcome::Response(r) => {
                let code = r.status;
                if code == StatusCode::TOO_MANY_REQUESTS || code == StatusCode::SERVICE_UNAVAILABLE
                {
                    if let Some(d) = retry_after_from_headers(r.headers, r.wall) {
                        let capped = d.min(settings.max_retry_after);
                        self.engine.health.set_not_before(
                            endpoint,
                            add(now, capped),
                            flight.ticket.epoch,
                        );
                        self.last_retry_after = Some((endpoint, d));
                    }
                }
                let verdict = self.engine.policy.classify.as_ref().and_then(|f| {
                    f(&ResponseView {
                        method: &self.method,
                        endpoint: &self.engine.policy.endpoints[endpoint],
                        status: code,
                        headers: r.headers,
                        earlier_ambiguous: was_ambiguous,
                    })
                });
                let triggers = match verdict {
                    Some(Verdict::Trigger) => true,
                    Some(Verdict::Success) | Some(Verdict::Answer) => false,
                    None => {
                        // The wide set for calls that may repeat; the narrow one for calls
                        // relying on an idempotency key (a 500/502/504 may come after the
                        // provider passed the work on) and for calls that may repeat nowhere.
                        let key_reliant = self.perms.retry_source
                            == PermissionSource::IdempotencyKey
                            || self.perms.failover_source == PermissionSource::IdempotencyKey;
                        let repeatable = self.perms.retry == Permission::Always
                            || self.perms.failover == Permission::Always;
                        let set = if repeatable && !key_reliant {
                            &settings.trigger_statuses
                        } else {
                            &settings.key_trigger_statuses
                        };
                        set.contains(code) || settings.not_processed.contains(code)
                    }
                };
                let this = Retained {
                    attempt: number,
                    endpoint,
                    status: code,
                };
                if !triggers {
                    self.cancel_in_flight(now, AttemptResult::Cancelled);
                    if let Some(old) = self.retained.take() {
                        self.discards.push(old.attempt);
                    }
                    self.stop(now, Stop::Answer(this, verdict == Some(Verdict::Success)));
                    return true;
                }
                if let Some(old) = self.retained.replace(this) {
                    self.discards.push(old.attempt);
                }
                self.executed_after_retained = false;
            }
            AttemptOutcome::Failure(FailureClass::RejectedLocally) => {
                self.cancel_in_flight(now, AttemptResult::Cancelled);
                self.stop_invalid(now, CallRejection::NotBuilt);
                return true;
            }
            _ => {}
        }
        if deadline_hit {
            self.cancel_in_flight(now, AttemptResult::Deadline);
            self.stop(now, Stop::Reason(StopReason::Deadline));
            return true;
        }
        if matches!(outcome, AttemptOutcome::Cancelled) {
            // Only the caller cancels attempts: the whole call is being cancelled.
            self.cancel(now);
            return true;
        }
        self.schedule_next(endpoint, now);
        true
    }

    /// Reports that no copy of the body could be made for attempt `number`: no later
    /// attempt can be made (every endpoint would need the copy); the call ends with what it
    /// has.
    pub fn replay_failed(&mut self, number: u32, now: Instant) -> bool {
        let Some(pos) = self.in_flight.iter().position(|f| f.number == number) else {
            return false;
        };
        let flight = self.in_flight.remove(pos);
        self.in_flight_bits = Bits(0);
        for f in &self.in_flight {
            self.in_flight_bits.set(f.endpoint as usize);
        }
        if let Some(rec) = self.records.get_mut(flight.record) {
            rec.result = AttemptResult::ReplayFailed;
        }
        let mut transitions = Transitions::new();
        self.engine.health.finish(
            flight.endpoint as usize,
            flight.ticket,
            Record::Nothing,
            now,
            &mut transitions,
        );
        self.emit(now, EventKind::ReplayFailed { attempt: number });
        self.report_transitions(flight.endpoint as usize, now, &transitions);
        if self.done.is_none() {
            self.body = BodyKind::OneShot;
            if self.in_flight.is_empty() {
                self.stop(now, Stop::Reason(StopReason::ReplayFailed));
            } else {
                self.plan = Plan::Idle;
                self.hedge_at = None;
            }
        }
        true
    }

    /// Reports that the adapter could not buffer a streaming body within its opt-in limit
    /// (SPEC 2.4): the body is sent once, unreplayable. Emits an event; call it before the
    /// first poll, with a [`BodyKind::OneShot`] call.
    pub fn body_not_buffered(&self, limit: usize, now: Instant) {
        self.emit(now, EventKind::BodyNotBuffered { limit });
    }

    /// Cancels the call: in-flight attempts are discarded (and count for nothing), and the
    /// call ends with what it has and the stop reason "cancelled".
    pub fn cancel(&mut self, now: Instant) {
        if self.done.is_some() {
            return;
        }
        self.cancel_in_flight(now, AttemptResult::Cancelled);
        self.stop(now, Stop::Reason(StopReason::Cancelled));
    }

    fn cancel_in_flight(&mut self, now: Instant, result: AttemptResult) {
        if self.in_flight.is_empty() {
            return;
        }
        let flights: SmallVec<[Flight; 2]> = self.in_flight.drain(..).collect();
        self.in_flight_bits = Bits(0);
        for f in flights {
            let endpoint = f.endpoint as usize;
            if let Some(rec) = self.records.get_mut(f.record) {
                rec.result = result;
                rec.elapsed = since(now, f.started);
            }
            // Sent and not answered: nothing proves it did not execute.
            self.executed.set(endpoint);
            if self.retained.is_some() {
                self.executed_after_retained = true;
            }
            let mut transitions = Transitions::new();
            self.engine
                .health
                .finish(endpoint, f.ticket, Record::Nothing, now, &mut transitions);
            self.discards.push(f.number);
            self.emit(
                now,
                EventKind::AttemptCancelled {
                    endpoint: &self.engine.ids[endpoint],
                    attempt: f.number,
                },
            );
            self.report_transitions(endpoint, now, &transitions);
        }
    }

    /// Decides the next attempt after a triggering outcome at `current`.
    fn schedule_next(&mut self, current: usize, now: Instant) {
        self.hedge_at = None;
        let stop = match self.next_target(current, now) {
            Ok(Some((endpoint, kind, wait, reason))) => {
                // A failover goes at once; a retry or a new round always reports its wait,
                // even a zero one (`Retry-After: 0`).
                let Some(reason) = reason else {
                    self.plan = Plan::Send {
                        endpoint: endpoint as u8,
                        at: now,
                        kind,
                    };
                    return;
                };
                let at = add(now, wait);
                if self.deadline.is_some_and(|d| at > d) {
                    Stop::Reason(StopReason::Deadline)
                } else {
                    self.waits = self.waits.saturating_add(1);
                    self.emit(
                        now,
                        EventKind::BackoffWait {
                            delay: wait,
                            reason,
                        },
                    );
                    self.plan = Plan::Send {
                        endpoint: endpoint as u8,
                        at,
                        kind,
                    };
                    return;
                }
            }
            Ok(None) => {
                // Nothing to start now; wait for attempts still in flight.
                self.plan = Plan::Idle;
                return;
            }
            Err(stop) => stop,
        };
        if self.in_flight.is_empty() {
            self.stop(now, stop);
        } else {
            self.plan = Plan::Idle;
        }
    }

    /// Pinned (SPEC 2.6): permission forbids every other endpoint but allows a retry of the
    /// current one. A call with no other usable endpoint at all is not pinned: it follows
    /// the ordinary schedule.
    fn is_pinned(&self, current: usize) -> bool {
        let mut others = self
            .base
            .as_slice()
            .iter()
            .map(|&e| e as usize)
            .filter(|&e| e != current && !self.skipped.has(e))
            .peekable();
        others.peek().is_some() && self.allowed(current) && !others.any(|e| self.allowed(e))
    }

    /// The next target: `Ok(Some((endpoint, kind, wait, reason)))`, `Ok(None)` to wait for
    /// in-flight attempts, or why the call stops.
    #[allow(clippy::type_complexity)]
    fn next_target(
        &mut self,
        current: usize,
        now: Instant,
    ) -> Result<Option<(usize, AttemptKind, Duration, Option<WaitReason>)>, Stop> {
        if !self.body.replayable() {
            if self.in_flight.is_empty() {
                self.emit(now, EventKind::NotReplayable);
            }
            return Err(Stop::Reason(StopReason::NotReplayable));
        }
        let made = self.attempts_made();
        let any_allowed = self.base.as_slice().iter().any(|&e| {
            let e = e as usize;
            !self.skipped.has(e) && self.allowed(e)
        });
        if !any_allowed {
            return Err(Stop::Reason(StopReason::NotPermitted));
        }
        let pinned = self.is_pinned(current)
            && !self
                .in_flight
                .iter()
                .any(|f| f.endpoint as usize != current);
        let cap_reached = if pinned && !self.max_explicit {
            false
        } else {
            made >= self.max_attempts
        };
        if cap_reached {
            return Err(Stop::Reason(StopReason::AttemptsExhausted));
        }
        let mut refused = false;

        // 1. Retry the same endpoint (after a wait), within its per-round or pinned limit.
        let limit_ok = if pinned {
            u32::from(self.totals[current]) < self.pinned_limit
        } else {
            u32::from(self.round_counts[current]) < self.per_endpoint
        };
        let hedged_in_flight = !self.in_flight.is_empty();
        if limit_ok && !hedged_in_flight {
            if self.allowed(current) {
                let wait = self.wait_for(current, WaitReason::Retry, now)?;
                return Ok(Some((current, AttemptKind::Retry, wait.0, Some(wait.1))));
            }
            refused = true;
        }
        // 2. Fail over to the next endpoint of the round, at once.
        let from = self.round.position(current).map_or(0, |p| p + 1);
        for p in from..self.round.len as usize {
            let e = self.round.items[p] as usize;
            if self.in_flight_bits.has(e) || self.skipped.has(e) || self.round_counts[e] > 0 {
                continue;
            }
            if self.allowed(e) {
                return Ok(Some((e, self.kind_at(e), Duration::ZERO, None)));
            }
            refused = true;
        }
        if hedged_in_flight {
            return Ok(None);
        }
        if pinned {
            return Err(Stop::Reason(if limit_ok {
                StopReason::NotPermitted
            } else {
                StopReason::AttemptsExhausted
            }));
        }
        // 3. A new round, from the first available endpoint, after a backoff wait.
        if made < self.max_attempts && !pinned {
            self.build_round(now, false);
            let first = (0..self.round.len as usize)
                .map(|p| self.round.items[p] as usize)
                .find(|&e| {
                    let ok = self.allowed(e);
                    refused |= !ok;
                    ok
                });
            if let Some(e) = first {
                let wait = self.wait_for(e, WaitReason::Round, now)?;
                return Ok(Some((e, self.kind_at(e), wait.0, Some(wait.1))));
            }
            if self.round.len == 0 {
                return Err(Stop::Reason(StopReason::NoUsableEndpoint));
            }
        }
        Err(Stop::Reason(if refused {
            StopReason::NotPermitted
        } else {
            StopReason::AttemptsExhausted
        }))
    }

    /// The wait before an attempt at `target` that needs one: `Retry-After` when the last
    /// response at that endpoint asked (never shortened by jitter), else the backoff.
    fn wait_for(
        &mut self,
        target: usize,
        reason: WaitReason,
        now: Instant,
    ) -> Result<(Duration, WaitReason), Stop> {
        if let Some((e, d)) = self.last_retry_after {
            if e == target {
                if d > self.engine.policy.settings.max_retry_after {
                    return Err(Stop::RetryAfter(d));
                }
                return Ok((d, WaitReason::RetryAfter));
            }
        }
        let backoff = self.engine.policy.settings.backoff;
        let mut d = backoff.delay(self.waits, &mut self.rng);
        let mut reason = reason;
        // A new round whose first endpoint is cooling down waits until it is available.
        if reason == WaitReason::Round {
            if let Some(at) = self.engine.health.available_at(target, now) {
                let until = since(at, now);
                if until > d && until <= self.engine.policy.settings.max_retry_after {
                    d = until;
                    reason = WaitReason::Cooldown;
                }
            }
        }
        Ok((d, reason))
    }

    fn stop_invalid(&mut self, now: Instant, why: CallRejection) {
        self.finish_with(now, StopReason::InvalidCall, ErrorKind::InvalidCall(why));
    }

    fn stop(&mut self, now: Instant, stop: Stop) {
        if self.done.is_some() {
            return;
        }
        let (reason, kind) = match stop {
            Stop::Answer(r, success) => {
                self.finish(
                    now,
                    StopReason::Answered,
                    Outcome::Response {
                        attempt: r.attempt,
                        endpoint: r.endpoint,
                        status: r.status,
                        retained: false,
                        classified_success: success,
                    },
                );
                return;
            }
            Stop::RetryAfter(d) => (
                StopReason::RetryAfterTooLong,
                ErrorKind::RetryAfterTooLong(d),
            ),
            Stop::Reason(r) => {
                let kind = match r {
                    StopReason::Deadline => ErrorKind::Deadline,
                    StopReason::Budget => ErrorKind::Budget,
                    StopReason::RateLimited => ErrorKind::RateLimited,
                    StopReason::Cancelled => ErrorKind::Cancelled,
                    StopReason::NoUsableEndpoint if self.records.is_empty() => {
                        ErrorKind::NoUsableEndpoint
                    }
                    _ => ErrorKind::Failover,
                };
                (r, kind)
            }
        };
        self.finish_with(now, reason, kind);
    }

    /// Ends the call with an error, or with the retained response when SPEC 2.10 allows.
    fn finish_with(&mut self, now: Instant, reason: StopReason, kind: ErrorKind) {
        let outcome = match self.retained.take() {
            Some(r)
                if !matches!(
                    kind,
                    ErrorKind::RetryAfterTooLong(_) | ErrorKind::InvalidCall(_)
                ) =>
            {
                if !self.executed_after_retained || self.perms.failover == Permission::Always {
                    Outcome::Response {
                        attempt: r.attempt,
                        endpoint: r.endpoint,
                        status: r.status,
                        retained: true,
                        classified_success: false,
                    }
                } else {
                    Outcome::Error {
                        kind,
                        retained: Some(r.attempt),
                    }
                }
            }
            Some(r) => Outcome::Error {
                kind,
                retained: Some(r.attempt),
            },
            None => Outcome::Error {
                kind,
                retained: None,
            },
        };
        self.finish(now, reason, outcome);
    }

    fn finish(&mut self, now: Instant, reason: StopReason, outcome: Outcome) {
        self.plan = Plan::Finished;
        self.hedge_at = None;
        let status = match &outcome {
            Outcome::Response { status, .. } => Some(*status),
            Outcome::Error { .. } => None,
        };
        let may_have_executed = self.executed.0 != 0;
        let attempts = self.records.len() as u32;
        self.emit(
            now,
            EventKind::Result {
                stop_reason: reason,
                status,
                may_have_executed,
                attempts,
            },
        );
        self.done = Some(Report {
            request_id: self.request_id,
            idempotency_key: self.key.clone(),
            attempts: std::mem::take(&mut self.records),
            redirects: std::mem::take(&mut self.redirects),
            elapsed: since(now, self.start),
            stop_reason: reason,
            may_have_executed,
            outcome,
        });
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        // A dropped call frees its probe slots at once (SPEC 2.5): cancelled attempts count
        // for nothing. No time is known here, so the last start time stands in; it is only
        // used for lazy transitions that the next real call redoes with its own time.
        for f in self.in_flight.drain(..) {
            self.engine.health.finish(
                f.endpoint as usize,
                f.ticket,
                Record::Nothing,
                f.started,
                &mut Transitions::new(),
            );
        }
    }
}
