//! One call's state machine.
//!
//! The call order, for an adapter:
//!
//! 1. [`Call::new`] with the shared [`Engine`] (borrowed: a call writes nothing to it on
//!    the healthy path), the request's method, URL and headers, the kind of body, the
//!    call's options and the time.
//! 2. Drain [`Call::poll`] until it says wait or done:
//!    - [`Action::Send`]: send the attempt to its endpoint ([`Call::attempt_parts`] builds
//!      its URL and headers; a fresh copy of the body when [`Attempt::fresh_body`] says so,
//!      and if the copy fails, [`Input::ReplayFailed`]).
//!    - [`Action::Discard`]: cancel that in-flight attempt. Report nothing more for it.
//!    - [`Action::WaitUntil`]: sleep until then, or until an in-flight attempt ends.
//!    - [`Action::WaitForAttempt`]: wait until an in-flight attempt ends.
//!    - [`Action::Done`]: the call is over; [`Call::take_done`] gives the response to return
//!      or the error.
//! 3. Hand every event to [`Call::handle`] with the time it happened: an attempt's
//!    response or failure, the redirects it followed, a failed body copy, a cancel, or
//!    [`Input::Timer`] when a wait ends. Then drain the actions again.
//!
//! Time enters only with inputs: polling does not move the clock, and a call dropped
//! before it ended is cancelled at the time of its last input (its attempts count for
//! nothing and free their half-open probe slots at once). The call never reads
//! a clock or OS randomness, never sleeps and never does I/O: the same inputs give the same
//! actions.
//!
//! The decisions live in one module per section of the spec: [`class`] (what kind of call),
//! [`order`] (which endpoint next), [`trigger`] (does an outcome call for another
//! attempt), [`gate`] (may it be made), [`schedule`] (when), [`history`] (what happened),
//! [`outcome`] (an attempt ended) and [`result`] (what the call returns).

use std::time::{Duration, Instant};

use smallvec::SmallVec;

use crate::engine::Engine;
use crate::event::{AttemptKind, Event, EventKind};
use crate::health::{Record, Transitions};
use crate::id::RequestId;
use crate::permission::{Permission, PermissionSource};
use crate::policy::RequestInfo;
use crate::report::{AttemptResult, CallRejection, StopReason};
use crate::time::{add, since};

mod class;
mod gate;
mod history;
mod order;
mod outcome;
mod result;
mod schedule;
mod surface;
mod trigger;

pub use class::CallOptions;
pub use schedule::MIN_ATTEMPT_TIME;
pub use surface::{Action, Answer, Attempt, AttemptOutcome, BodyKind, Done, Head, Input};

use class::Class;
use gate::Admission;
use history::{Bits, Flight, History};
use order::Order;
use result::Ending;
use schedule::{Plan, Schedule, Step};

/// Why the call stops (the answer aside).
pub(crate) enum Stop {
    Reason(StopReason),
    RetryAfter(Duration),
    UnknownEndpoint(String),
    Invalid(CallRejection),
}

/// Where the call is in its life.
enum Phase {
    Running,
    /// Ended; the result waits for [`Call::take_done`].
    Finished(Ending),
    /// The result was taken by [`Call::take_done`].
    Taken,
}

/// One call's state machine. See the module docs for the call order.
///
/// ```
/// use std::time::{Duration, Instant};
/// use baton_core::*;
///
/// let policy = Policy::builder()
///     .endpoint(Endpoint::new("primary", "https://a.example/"))
///     .endpoint(Endpoint::new("backup", "https://b.example/"))
///     .build()
///     .unwrap();
/// let engine = Engine::new(policy);
/// let (uri, headers) = ("/".parse().unwrap(), http::HeaderMap::new());
/// let info = RequestInfo { method: &http::Method::POST, uri: &uri, headers: &headers };
/// let t0 = Instant::now();
/// let mut call: Call<'_, Head> =
///     Call::new(&engine, &info, BodyKind::Replayable, CallOptions::default(), t0);
///
/// // The primary refuses the connection: nothing was sent, so a POST may fail over.
/// let Action::Send(first) = call.poll() else { unreachable!() };
/// let refused = AttemptOutcome::Failure(FailureClass::Undelivered);
/// call.handle(Input::Failed { attempt: first.number, outcome: refused }, t0);
/// let Action::Send(second) = call.poll() else { unreachable!() };
/// assert_eq!(second.endpoint, 1);
/// assert!(second.fresh_body);
///
/// // The backup times out waiting: it may have executed, so the call stops there.
/// let t1 = t0 + Duration::from_secs(30);
/// let waited = AttemptOutcome::Timeout(TimeoutPhase::Response);
/// call.handle(Input::Failed { attempt: second.number, outcome: waited }, t1);
/// assert_eq!(call.poll(), Action::Done);
/// let Done::Error { report, .. } = call.take_done() else { unreachable!() };
/// assert_eq!(report.stop_reason, StopReason::NotPermitted);
/// assert!(report.may_have_executed);
/// ```
pub struct Call<'e, R = Head> {
    engine: &'e Engine,
    /// The call's own event sink (the policy's is read from the engine).
    sink: Option<crate::policy::EventSink>,
    class: Class,
    body: BodyKind,
    start: Instant,
    /// The time of the last input.
    now: Instant,
    order: Order,
    history: History<R>,
    schedule: Schedule,
    discards: SmallVec<[u32; 2]>,
    phase: Phase,
}

impl<R> std::fmt::Debug for Call<'_, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call")
            .field("request_id", &self.class.identity.request_id)
            .field("plan", &self.schedule.plan)
            .field("attempts", &self.history.records.len())
            .field("in_flight", &self.history.flights.len())
            .field("done", &self.is_done())
            .finish()
    }
}

impl<'e, R: Answer> Call<'e, R> {
    /// Starts a call. Invalid call settings (a bad request id, an unknown preferred
    /// endpoint, zero timeouts) do not panic: the first [`poll`](Call::poll) returns
    /// [`Action::Done`] with the error, before any send.
    // Not inlined: measured with the healthy_path bench, the call is then copied out once
    // (inlined, twice).
    #[inline(never)]
    pub fn new(
        engine: &'e Engine,
        request: &RequestInfo<'_>,
        body: BodyKind,
        mut options: CallOptions,
        now: Instant,
    ) -> Self {
        let mut rng = engine.call_rng();
        let (class, invalid) = class::classify(engine, request, &mut options, &mut rng, now);
        // Eligibility is asked once (the policy's predicate is the caller's code). The
        // common start (every eligible endpoint calm, in index order) is decided before the
        // call is written, so that it is written once, in place; any other start is built
        // on the call.
        let eligibility = match invalid {
            Some(why) => Err(Stop::Invalid(why)),
            None => order::eligibility(&engine.policy, request, &options),
        };
        let calm = (eligibility.as_ref().ok()).and_then(|e| Order::calm_set(engine, *e));
        let sink = options.events.take();
        if let Some(eligible) = calm {
            let first = eligible.0.trailing_zeros() as u8;
            return Self::made(
                engine,
                sink,
                class,
                body,
                now,
                Order::calm(engine, eligible, &options),
                Schedule::new(rng, first, now),
            );
        }
        Self::new_uncommon(engine, sink, class, body, options, eligibility, rng, now)
    }

    /// [`new`](Self::new) for any start but the common one (an endpoint not calm, a
    /// preferred endpoint, ranked tiers, an invalid call): built on the call. Out of
    /// line, so that the common start's code sits on few lines and pages.
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn new_uncommon(
        engine: &'e Engine,
        sink: Option<crate::policy::EventSink>,
        class: Class,
        body: BodyKind,
        options: CallOptions,
        eligibility: Result<(Bits, Option<u8>), Stop>,
        rng: crate::rng::Rng,
        now: Instant,
    ) -> Self {
        let mut call = Self::made(
            engine,
            sink,
            class,
            body,
            now,
            Order::new(),
            Schedule::new(rng, 0, now),
        );
        match eligibility {
            Ok(eligible) => call.start(eligible, &options, now),
            Err(stop) => call.stop(now, stop),
        }
        call
    }

    /// A running call made of its parts, nothing attempted yet.
    #[inline(always)]
    fn made(
        engine: &'e Engine,
        sink: Option<crate::policy::EventSink>,
        class: Class,
        body: BodyKind,
        now: Instant,
        order: Order,
        schedule: Schedule,
    ) -> Self {
        Call {
            engine,
            sink,
            class,
            body,
            start: now,
            now,
            order,
            history: History::new(),
            schedule,
            discards: SmallVec::new(),
            phase: Phase::Running,
        }
    }

    /// Sets up the order from the call's eligible endpoints and plans the first attempt.
    fn start(&mut self, eligible: (Bits, Option<u8>), options: &CallOptions, now: Instant) {
        match self.order_start(eligible, options, now) {
            Ok(()) => {
                self.schedule.plan = Plan::Send {
                    endpoint: self.order.round.get(0) as u8,
                    at: now,
                    kind: AttemptKind::First,
                }
            }
            Err(stop) => self.stop(now, stop),
        }
    }

    /// Hands the call one input, with the time it happened. Then drain [`poll`](Call::poll).
    // Inlined: out of line, the input was first copied whole from where the caller wrote
    // it, in wider pieces than it was written, and waited on those stores (healthy_calls
    // -3%); a caller's constant input (a timer, a cancel) also folds to its one branch.
    #[inline]
    pub fn handle(&mut self, input: Input<R>, now: Instant) {
        self.now = self.now.max(now);
        match input {
            Input::Response {
                attempt,
                response,
                wall,
            } => self.on_response(attempt, response, wall),
            Input::Failed { attempt, outcome } => self.on_failure(attempt, outcome),
            Input::Redirected { attempt, redirects } => self.on_redirects(attempt, redirects),
            Input::ReplayFailed { attempt } => self.on_replay_failed(attempt),
            // Not after the call's result (an invalid call ends in `new`): events of a
            // call keep their causal order (SPEC 4).
            Input::BodyNotBuffered { limit } if !self.is_done() => {
                self.emit(self.now, EventKind::BodyNotBuffered { limit })
            }
            Input::BodyNotBuffered { .. } => {}
            Input::Cancel => self.cancel(),
            Input::Timer => {}
        }
    }

    /// The next action at the time of the last input. Drain until it says wait or done.
    #[must_use = "the action says what to send, cancel or wait for"]
    pub fn poll(&mut self) -> Action {
        loop {
            if let Some(n) = self.discards.pop() {
                return Action::Discard(n);
            }
            if self.is_done() {
                return Action::Done;
            }
            if self.class.deadline.is_some_and(|d| self.now >= d) {
                self.deadline_reached();
                continue;
            }
            match self.step() {
                Step::Send(a) => return Action::Send(a),
                Step::WaitUntil(t) => return Action::WaitUntil(t),
                Step::WaitForAttempt => return Action::WaitForAttempt,
                Step::Again => {}
            }
        }
    }

    /// The call's result: the response to return, or the error, with the report. Taken
    /// once [`poll`](Call::poll) said [`Action::Done`]; a call taken before it ended is
    /// cancelled first, at the time of its last input. Take it once: a second take finds
    /// the result gone and returns a `Cancelled` error.
    // On `&mut self`, not by value: a call passed by value is first copied whole into the
    // argument (744 bytes, 100 instructions of memcpy a call, measured with callgrind on
    // core's healthy_calls example; inlining the by-value form did not remove the copy).
    #[inline(never)]
    pub fn take_done(&mut self) -> Done<R> {
        // Field by field: the ending was just written, and a whole-struct copy would wait
        // on those stores.
        let ending = match &mut self.phase {
            Phase::Finished(e) => e.take(),
            Phase::Taken => self.taken_again(),
            Phase::Running => {
                let now = self.now;
                self.cancel_in_flight(now, AttemptResult::Cancelled);
                self.ending(now, Stop::Reason(StopReason::Cancelled))
            }
        };
        self.phase = Phase::Taken;
        self.hand_out(ending)
    }
}

impl<'e, R> Call<'e, R> {
    /// The call's request id (send it in the request-id header on every attempt).
    pub fn request_id(&self) -> &RequestId {
        &self.class.identity.request_id
    }

    /// The call's idempotency key, if any (send it unchanged on every attempt).
    pub fn idempotency_key(&self) -> Option<&str> {
        self.class.identity.key.as_deref()
    }

    /// The engine this call runs on.
    pub fn engine(&self) -> &'e Engine {
        self.engine
    }

    /// When the call was started.
    pub fn started(&self) -> Instant {
        self.start
    }

    /// The call's deadline, if any.
    pub fn deadline(&self) -> Option<Instant> {
        self.class.deadline
    }

    /// When reading the body of the call's response must end: the policy's `body_timeout`
    /// from the call's last input (when the response arrived), never past the call's
    /// deadline (SPEC 2.6). Asked once the call is done; no clock is read for it.
    pub fn body_read_by(&self) -> Option<Instant> {
        let timeout = self
            .engine
            .policy
            .settings
            .body_timeout
            .map(|d| add(self.now, d));
        match (timeout, self.class.deadline) {
            (Some(t), Some(d)) => Some(t.min(d)),
            (t, d) => t.or(d),
        }
    }

    /// The resolved retry and failover permissions.
    pub fn permissions(&self) -> (Permission, Permission) {
        (self.class.perms.retry, self.class.perms.failover)
    }

    /// Which endpoints the eligibility predicate admitted for this call, in policy order
    /// (asked once, at the start).
    pub(crate) fn eligible_endpoints(&self) -> Vec<bool> {
        (0..self.engine.policy.endpoints.len())
            .map(|i| self.order.eligible.has(i))
            .collect()
    }

    /// Where each resolved permission came from: (retry, failover).
    pub fn permission_sources(&self) -> (PermissionSource, PermissionSource) {
        (
            self.class.perms.retry_source,
            self.class.perms.failover_source,
        )
    }

    /// Whether the call is hedged (SPEC 2.8).
    pub fn is_hedged(&self) -> bool {
        self.class.hedged
    }

    /// Numbers of the attempts in flight.
    pub fn in_flight(&self) -> impl Iterator<Item = u32> + '_ {
        self.history.flights.iter().map(|f| f.number)
    }

    /// Whether the call has ended.
    pub fn is_done(&self) -> bool {
        !matches!(self.phase, Phase::Running)
    }

    /// The call's request id and idempotency key as header values, for every attempt's
    /// [`attempt_parts`](Call::attempt_parts). A driver makes them once per call.
    pub fn identity_headers(&self) -> Result<crate::IdentityHeaders, crate::DestinationError> {
        crate::IdentityHeaders::of_bytes(
            &self.engine.policy,
            self.request_id().as_bytes(),
            self.idempotency_key().map(str::as_bytes),
        )
    }

    /// The URL and headers of `attempt` (the driver kit: every adapter builds its requests
    /// here). `uri` is the request's URL as the caller gave it and `headers` a copy of the
    /// caller's headers; they get the endpoint's headers and credentials, the request id
    /// and idempotency key (`identity`, from [`identity_headers`](Call::identity_headers))
    /// and the attempt header, by the destination rules (SPEC 3).
    ///
    /// ```
    /// # use baton_core::{Action, BodyKind, Call, CallOptions, Endpoint, Engine, Head, Policy, RequestInfo};
    /// # use std::time::Instant;
    /// let policy = Policy::builder().endpoint(Endpoint::new("a", "https://a.example/v1/")).build().unwrap();
    /// let engine = Engine::new(policy);
    /// let (uri, headers) = ("/".parse().unwrap(), http::HeaderMap::new());
    /// let info = RequestInfo { method: &http::Method::GET, uri: &uri, headers: &headers };
    /// let mut call: Call<'_, Head> =
    ///     Call::new(&engine, &info, BodyKind::Empty, CallOptions::default(), Instant::now());
    /// let Action::Send(attempt) = call.poll() else { panic!() };
    /// let identity = call.identity_headers().unwrap();
    /// let mut h = headers.clone();
    /// let url = call.attempt_parts(&attempt, &identity, &uri, &mut h).unwrap();
    /// assert_eq!(url, "https://a.example/v1/");
    /// assert!(h.contains_key("x-request-id"));
    /// ```
    pub fn attempt_parts(
        &self,
        attempt: &Attempt,
        identity: &crate::IdentityHeaders,
        uri: &http::Uri,
        headers: &mut http::HeaderMap,
    ) -> Result<http::Uri, crate::DestinationError> {
        let policy = &self.engine.policy;
        let target = crate::attempt_uri(policy, attempt.endpoint, uri)?;
        crate::apply_attempt_headers(
            policy,
            attempt.endpoint,
            uri,
            identity,
            attempt.number,
            headers,
        )?;
        Ok(target)
    }

    // ----- events -----

    fn has_sink(&self) -> bool {
        // With the `metrics` feature every event is measured.
        cfg!(feature = "metrics") || self.sink.is_some() || self.engine.policy.events.is_some()
    }

    /// Delivers an event: to the policy's sink, then to the call's own.
    #[inline(always)]
    fn emit(&self, at: Instant, kind: EventKind<'_>) {
        if self.has_sink() {
            self.deliver(at, kind);
        }
    }

    /// [`emit`](Self::emit) to a sink. Cold: most calls have none, and their code stays
    /// together without it (each line of a call's code is an instruction-cache miss on the
    /// healthy path, measured with cachegrind).
    #[cold]
    #[inline(never)]
    fn deliver(&self, at: Instant, kind: EventKind<'_>) {
        let event = Event {
            request_id: self.class.identity.request_id.as_str(),
            idempotency_key: self.class.identity.key.as_deref(),
            at,
            kind,
        };
        #[cfg(feature = "metrics")]
        crate::telemetry::record(&self.engine.policy, &self.class.method, self.start, &event);
        for sink in [&self.engine.policy.events, &self.sink]
            .into_iter()
            .flatten()
        {
            sink(&event);
        }
    }

    /// Reports breaker transitions (collected under the health lock, reported after it was
    /// released).
    #[cold]
    #[inline(never)]
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

    // ----- attempts -----

    /// Re-checks the deadline, availability and the gate, then starts the attempt;
    /// `Ok(None)` when a limiter re-planned it for later.
    fn start_attempt(
        &mut self,
        planned: usize,
        kind: AttemptKind,
        now: Instant,
    ) -> Result<Option<Attempt>, Stop> {
        // A later attempt that could only get a sliver of the time left is not started:
        // it would be cut by the deadline before any provider could answer.
        if self.too_late_for(kind, now) {
            return Err(Stop::Reason(StopReason::Deadline));
        }
        let endpoint = self.reroute_unavailable(planned, now)?;
        let kind = if endpoint != planned && kind != AttemptKind::First {
            self.kind_at(endpoint)
        } else {
            kind
        };
        let Admission::Go { endpoint, kind } = self.admit(endpoint, kind, now)? else {
            return Ok(None);
        };
        self.schedule.paid = false;
        if self.has_sink() && self.history.last.is_some() {
            self.emit_moved(endpoint, kind, now);
        }
        Ok(Some(self.launch(endpoint, kind, now)))
    }

    /// The failover event, when the attempt about to start moves the call to another
    /// endpoint.
    #[cold]
    #[inline(never)]
    fn emit_moved(&self, endpoint: usize, kind: AttemptKind, now: Instant) {
        let Some((from, reason)) = self.history.last else {
            return;
        };
        let from = from as usize;
        let moved =
            kind == AttemptKind::Failover || (kind == AttemptKind::Retry && endpoint != from);
        if moved {
            self.emit(
                now,
                EventKind::Failover {
                    from: &self.engine.ids[from],
                    to: &self.engine.ids[endpoint],
                    reason,
                    status: reason.status(),
                },
            );
        }
    }

    /// Admits the attempt with the endpoint's health, records it and puts it in flight.
    fn launch(&mut self, endpoint: usize, kind: AttemptKind, now: Instant) -> Attempt {
        let mut transitions = Transitions::new();
        let ticket = self.engine.health.begin(endpoint, now, &mut transitions);
        if !transitions.is_empty() {
            self.report_transitions(endpoint, now, &transitions);
        }
        let number = self.history.made() + 1;
        let policy = &self.engine.policy;
        let mut timeout = self
            .class
            .attempt_timeout
            .unwrap_or_else(|| policy.attempt_timeout_for(endpoint));
        let mut clipped = false;
        if let Some(d) = self.class.deadline {
            let left = since(d, now);
            // An adapter whose attempt timer starts when the connection is ready (SPEC
            // 2.6) may clip it to the deadline although the attempt timeout alone fits.
            let connect = policy.connect_timeout_for(endpoint);
            clipped = left <= timeout.saturating_add(connect);
            timeout = timeout.min(left);
        }
        let attempt = Attempt {
            number,
            endpoint,
            kind,
            connect_timeout: policy.connect_timeout_for(endpoint).min(timeout),
            timeout,
            fresh_body: number > 1 && self.body != BodyKind::Empty,
            probe: ticket.probe().is_some(),
        };
        self.history.records.push(history::Rec {
            endpoint: endpoint as u8,
            result: AttemptResult::InFlight,
            elapsed_ns: 0,
            version: None,
        });
        self.history.flights.push(Flight {
            number,
            endpoint: endpoint as u8,
            clipped,
            started: now,
            ticket,
        });
        self.launched_at(endpoint);
        self.schedule.plan = Plan::Idle;
        self.arm_hedge(now);
        self.emit_started(endpoint, number, kind, attempt.probe, now);
        attempt
    }

    fn emit_started(
        &self,
        endpoint: usize,
        attempt: u32,
        kind: AttemptKind,
        probe: bool,
        now: Instant,
    ) {
        if !self.has_sink() {
            return;
        }
        let id = &self.engine.ids[endpoint];
        if kind == AttemptKind::Hedge {
            self.emit(
                now,
                EventKind::HedgeStarted {
                    endpoint: id,
                    attempt,
                },
            );
        }
        self.emit(
            now,
            EventKind::AttemptStarted {
                endpoint: id,
                attempt,
                kind,
                probe,
            },
        );
    }

    /// The call's deadline has passed: attempts in flight end cut by it, and the call
    /// stops. Out of line, as every rare branch of the healthy path: the lines of a call's
    /// code it runs are each a cache miss in place (`bench/footprint.py`), and a rare
    /// branch inlined between them spreads them over more lines.
    #[cold]
    #[inline(never)]
    fn deadline_reached(&mut self) {
        let now = self.now;
        self.cancel_in_flight(now, AttemptResult::Deadline);
        self.stop(now, Stop::Reason(StopReason::Deadline));
    }

    /// Cancels the call: in-flight attempts are discarded (and count for nothing), and the
    /// call ends with what it has and the stop reason "cancelled". Out of line: the call's
    /// drop runs on every call and a cancel on few.
    #[cold]
    #[inline(never)]
    fn cancel(&mut self) {
        if self.is_done() {
            return;
        }
        let now = self.now;
        self.cancel_in_flight(now, AttemptResult::Cancelled);
        self.stop(now, Stop::Reason(StopReason::Cancelled));
    }

    /// Ends every in-flight attempt with `result`: sent and not answered, so nothing proves
    /// it did not execute. Each is discarded; none counts in health.
    #[inline(always)]
    fn cancel_in_flight(&mut self, now: Instant, result: AttemptResult) {
        if !self.history.flights.is_empty() {
            self.cancel_flights(now, result);
        }
    }

    #[cold]
    #[inline(never)]
    fn cancel_flights(&mut self, now: Instant, result: AttemptResult) {
        let flights = std::mem::take(&mut self.history.flights);
        for f in flights {
            let endpoint = f.endpoint as usize;
            let not_processed = &self.engine.policy.settings.not_processed;
            self.history
                .close(&f, result, since(now, f.started), not_processed);
            let mut transitions = Transitions::new();
            self.engine
                .health
                .finish(endpoint, f.ticket, Record::Nothing, now, &mut transitions);
            self.discards.push(f.number);
            // Cut by the deadline, the attempt finishes with it, as when its own clipped
            // timer fires first (SPEC 2.6): one event and one duration either way.
            let id = &self.engine.ids[endpoint];
            let kind = match result {
                AttemptResult::Deadline => EventKind::AttemptFinished {
                    endpoint: id,
                    attempt: f.number,
                    result,
                    elapsed: since(now, f.started),
                },
                _ => EventKind::AttemptCancelled {
                    endpoint: id,
                    attempt: f.number,
                },
            };
            self.emit(now, kind);
            self.report_transitions(endpoint, now, &transitions);
        }
    }
}

impl<R> Drop for Call<'_, R> {
    fn drop(&mut self) {
        // A call dropped before it ended is cancelled (SPEC 2.5): its in-flight attempts
        // end cancelled, count for nothing and free their probe slots at once, and the
        // events say so. The time is the call's last input: no time is invented here.
        if !self.is_done() {
            self.cancel();
        }
    }
}
