//! Fuzz target bodies (feature `fuzzing`), shared by the cargo-fuzz crate in `fuzz/` and by
//! this crate's stable test run, so they never rot where no nightly toolchain exists.
//!
//! Each body decodes its bytes with `arbitrary` into a configuration and a sequence of
//! operations, drives the engine, and panics (the fuzzer's signal) when an invariant of
//! SPEC section 6 breaks. Invalid configurations must come back as errors, never panics.
//! Like the rest of the engine, the bodies read no clock: the caller supplies the instant
//! the run starts at (only differences from it matter).
//!
//! ```
//! let start = std::time::Instant::now();
//! baton_core::fuzzing::call_sequence(&[1, 2, 3, 4, 5, 6, 7, 8], start);
//! baton_core::fuzzing::retry_after(b"Wed, 21 Oct 2015 07:28:00 GMT");
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use arbitrary::{Arbitrary, Unstructured};
use http::{HeaderMap, HeaderValue, Method, StatusCode};

use crate::backoff::{Backoff, Jitter};
use crate::call::{Action, AttemptOutcome, BodyKind, Call, CallOptions, Head, Input};
use crate::engine::Engine;
use crate::health::BreakerState;
use crate::limit::{LimitScope, Limiter, OnLimit, RateLimit};
use crate::permission::Permission;
use crate::policy::{
    Breaker, BreakerRule, Budget, Endpoint, Hedge, Policy, RequestInfo, Settings, Unavailable,
};
use crate::report::{AttemptResult, FailureClass, TimeoutPhase};
use crate::retry_after::{parse_retry_after, retry_after_from_headers};
use crate::status::StatusSet;

#[derive(Debug, Arbitrary)]
struct FuzzSettings {
    endpoints: u8,
    groups: [u8; 4],
    per: Option<u8>,
    pinned: Option<u8>,
    max: Option<u8>,
    skip: bool,
    attempt_ms: u16,
    connect_ms: u16,
    deadline_ms: Option<u16>,
    rule: u8,
    failures: u8,
    quota: u8,
    budget: Option<(u8, u8)>,
    hedge_ms: Option<u16>,
    np503: bool,
    extra_trigger: Option<u16>,
    /// A rate limiter: its kind and size, per endpoint, fail fast.
    limit: Option<(u8, bool, bool)>,
    seed: u64,
}

impl FuzzSettings {
    fn policy(&self, eligible: [bool; 4]) -> Policy {
        let n = (self.endpoints % 4) as usize + 1;
        let mut not_processed = StatusSet::from_codes(&[429]);
        if self.np503 {
            not_processed.insert(503);
        }
        let mut trigger = StatusSet::from_codes(&[502, 503, 504]);
        if let Some(c) = self.extra_trigger {
            trigger.insert(400 + c % 200);
        }
        let rule = match self.rule % 3 {
            0 => BreakerRule::Consecutive {
                failures: u32::from(self.failures % 5) + 1,
            },
            1 => BreakerRule::FailureRate {
                window: 6,
                min_calls: 3,
                rate: 0.5,
                slow_call: Some(Duration::from_millis(800)),
            },
            _ => BreakerRule::Disabled,
        };
        let settings = Settings {
            attempts_per_endpoint: self.per.map(|p| u32::from(p % 4) + 1),
            pinned_attempts: self.pinned.map(|p| u32::from(p % 4) + 1),
            max_attempts: self.max.map(|m| u32::from(m % 10) + 1),
            unavailable: if self.skip {
                Unavailable::Skip
            } else {
                Unavailable::TryLast
            },
            backoff: Backoff {
                jitter: Jitter::Full,
                ..Backoff::default()
            },
            attempt_timeout: Duration::from_millis(u64::from(self.attempt_ms % 5_000) + 1),
            connect_timeout: Duration::from_millis(u64::from(self.connect_ms % 2_000) + 1),
            deadline: self
                .deadline_ms
                .map(|d| Duration::from_millis(u64::from(d) + 1)),
            trigger_statuses: trigger,
            not_processed,
            breaker: Breaker {
                rule,
                open: Duration::from_secs(1),
                probe_quota: u32::from(self.quota % 3) + 1,
                ..Breaker::default()
            },
            budget: self.budget.map(|(r, m)| Budget {
                ratio: f64::from(r) / 100.0,
                window: Duration::from_secs(10),
                min_per_sec: f64::from(m % 20) / 10.0,
            }),
            hedge: self
                .hedge_ms
                .map(|h| Hedge::after(Duration::from_millis(u64::from(h % 1_000)))),
            max_retry_after: Duration::from_secs(3),
            rate_limit: self.limit.map(|(size, per_endpoint, fail_fast)| {
                let n = u32::from(size % 4) + 1;
                RateLimit {
                    limiter: match size % 2 {
                        0 => Limiter::TokenBucket {
                            capacity: n,
                            per_second: f64::from(n),
                        },
                        _ => Limiter::SlidingWindow {
                            limit: n,
                            window: Duration::from_millis(500),
                        },
                    },
                    scope: match per_endpoint {
                        true => LimitScope::Endpoint,
                        false => LimitScope::Client,
                    },
                    on_limit: match fail_fast {
                        true => OnLimit::FailFast,
                        false => OnLimit::Wait,
                    },
                }
            }),
            seed: Some(self.seed),
            ..Settings::default()
        };
        let mut b = Policy::builder().settings(settings);
        for i in 0..n {
            let mut e = Endpoint::new(format!("e{i}"), format!("https://e{i}.example/"));
            if self.groups[i] % 3 != 0 {
                e = e.group(format!("g{}", self.groups[i] % 3));
            }
            b = b.endpoint(e);
        }
        b.eligible_fn(move |e, _| {
            let i: usize = e.id()[1..].parse().unwrap_or(0);
            eligible[i % 4]
        })
        .build()
        .expect("fuzz settings are always valid")
    }
}

#[derive(Debug, Arbitrary)]
struct FuzzCall {
    method: u8,
    body: u8,
    retry: Option<u8>,
    failover: Option<u8>,
    deny: bool,
    prefer: Option<u8>,
    key: Option<u8>,
    deadline_ms: Option<u16>,
    max: Option<u8>,
    hedge: bool,
}

fn permission(p: u8) -> Permission {
    match p % 3 {
        0 => Permission::Never,
        1 => Permission::IfUndelivered,
        _ => Permission::Always,
    }
}

impl FuzzCall {
    fn method(&self) -> Method {
        [
            Method::GET,
            Method::HEAD,
            Method::POST,
            Method::PUT,
            Method::DELETE,
            Method::PATCH,
        ][(self.method % 6) as usize]
            .clone()
    }
    fn body(&self) -> BodyKind {
        [BodyKind::Empty, BodyKind::Replayable, BodyKind::OneShot][(self.body % 3) as usize]
    }
    fn options(&self) -> CallOptions {
        CallOptions {
            retry: self.retry.map(permission),
            failover: self.failover.map(permission),
            deny: self.deny,
            prefer: self.prefer.map(|p| format!("e{}", p % 5)),
            idempotency_key: self.key.map(|k| format!("key-{k}")),
            deadline: self
                .deadline_ms
                .map(|d| Duration::from_millis(u64::from(d) + 1)),
            max_attempts: self.max.map(|m| u32::from(m % 8) + 1),
            hedge: self.hedge,
            ..CallOptions::default()
        }
    }
}

#[derive(Debug, Arbitrary)]
enum Op {
    /// Poll every call and collect actions.
    Poll,
    /// An in-flight attempt of call `k` ends (`which`: hedges end in any order).
    Outcome {
        call: u8,
        which: u8,
        kind: u8,
        status: u16,
        retry_after: Option<u8>,
    },
    /// Time passes.
    Advance(u16),
    /// A call is cancelled.
    Cancel(u8),
    /// A call is dropped mid-flight.
    Drop(u8),
    /// Body copy fails for the newest attempt of a call.
    ReplayFails(u8),
    /// An endpoint is reset by hand.
    Reset(u8),
    /// A new call starts.
    Start(FuzzCall),
    /// The oldest in-flight attempt of call `k` followed a redirect (SPEC 3).
    Redirected { call: u8, cross_origin: bool },
}

struct Tracked<'e> {
    /// The call, until its result was taken.
    call: Option<Call<'e, Head>>,
    in_flight: Vec<(u32, usize)>,
    sent: Vec<(u32, usize, Instant)>,
    finished: bool,
    options: CallOptions,
    method: Method,
    body: BodyKind,
    start: Instant,
    /// Attempts reported as having followed a redirect.
    redirected: Vec<u32>,
    /// The endpoint of every attempt that may have executed the call, as SPEC 1's table
    /// reads the inputs this harness fed (not as the engine reads them): the oracle of
    /// invariant 2 and of `may_have_executed`.
    executed: Vec<usize>,
    /// The endpoints' idempotency groups (0: none).
    groups: [u8; 4],
}

impl Tracked<'_> {
    /// Hands the call an input, while it has not been taken.
    fn input(&mut self, input: Input<Head>, now: Instant) {
        if let Some(call) = self.call.as_mut() {
            call.handle(input, now);
        }
    }

    /// Attempt `number` at `endpoint` ended with `input`: records whether it may have
    /// executed the call, by SPEC 1's table (written out here, not the engine's): a
    /// response outside `not_processed`, an ambiguous failure, a timeout after the
    /// connection was ready; and any attempt that followed a redirect (its endpoint
    /// answered). Undelivered, untrusted, rejected-locally, a connect timeout and a body
    /// that could not be copied sent nothing.
    fn ended(&mut self, number: u32, endpoint: usize, input: &Input<Head>, np: &StatusSet) {
        let executed = self.redirected.contains(&number)
            || match input {
                Input::Response { response, .. } => !np.contains(response.status),
                Input::Failed { outcome, .. } => match outcome {
                    AttemptOutcome::Failure(c) => matches!(c, FailureClass::Ambiguous),
                    AttemptOutcome::Timeout(p) => *p != TimeoutPhase::Connect,
                },
                _ => false,
            };
        if executed && self.call.is_some() && !self.finished {
            self.executed.push(endpoint);
        }
    }

    /// The permissions of this call as SPEC 2.2 resolves them (the fuzz policy has no
    /// permission function): the call's own, else by method and key, else conservative.
    fn permissions(&self) -> (Permission, Permission) {
        if self.options.deny {
            return (Permission::Never, Permission::Never);
        }
        let (r, f) = if crate::is_safe_method(&self.method) {
            (Permission::Always, Permission::Always)
        } else if self.options.idempotency_key.is_some() {
            (Permission::Always, Permission::IfUndelivered)
        } else {
            (Permission::IfUndelivered, Permission::IfUndelivered)
        };
        (
            self.options.retry.unwrap_or(r),
            self.options.failover.unwrap_or(f),
        )
    }

    /// Invariant 2, for a later attempt at `x` about to be sent: the sticky rule of SPEC
    /// 2.2 over the attempts that ended so far (a keyed call's group counts as one
    /// endpoint).
    fn check_permitted(&self, x: usize) {
        if self.sent.is_empty() {
            return; // The first attempt needs no permission.
        }
        let (retry, failover) = self.permissions();
        let keyed = self.options.idempotency_key.is_some();
        let group = |e: usize| self.groups[e % 4] % 3;
        let same = |e: usize| e == x || (keyed && group(e) != 0 && group(e) == group(x));
        let outside = self.executed.iter().any(|&e| !same(e));
        let inside = self.executed.iter().any(|&e| same(e));
        let why = || format!("attempt at e{x} after executions at {:?}", self.executed);
        if outside {
            assert_eq!(failover, Permission::Always, "failover: {}", why());
        }
        if inside {
            assert_eq!(retry, Permission::Always, "retry: {}", why());
        }
        if !(outside || inside) {
            let again = self.sent.iter().any(|(_, e, _)| *e == x);
            let kind = if again { retry } else { failover };
            assert_ne!(kind, Permission::Never, "{}", why());
        }
    }
}

fn outcome_for(kind: u8, status: u16, attempt: u32, headers: HeaderMap) -> Input<Head> {
    let failed = |outcome| Input::Failed { attempt, outcome };
    match kind % 9 {
        0 | 1 => Input::Response {
            attempt,
            response: Head::with_headers(
                StatusCode::from_u16(100 + status % 500).unwrap_or(StatusCode::OK),
                headers,
            ),
            wall: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000)),
        },
        2 => failed(AttemptOutcome::Failure(FailureClass::Undelivered)),
        3 => failed(AttemptOutcome::Failure(FailureClass::Ambiguous)),
        4 => failed(AttemptOutcome::Timeout(TimeoutPhase::Connect)),
        5 => failed(AttemptOutcome::Timeout(TimeoutPhase::Response)),
        6 => failed(AttemptOutcome::Timeout(TimeoutPhase::Unknown)),
        7 => failed(AttemptOutcome::Failure(FailureClass::Untrusted)),
        _ => failed(AttemptOutcome::Failure(if status % 50 == 0 {
            FailureClass::RejectedLocally
        } else {
            FailureClass::Ambiguous
        })),
    }
}

/// Checks the invariants that can be read off a call's attempts so far.
fn check_call(engine: &Engine, t: &Tracked<'_>, eligible: [bool; 4]) {
    let policy = engine.policy();
    let settings = policy.settings();
    let sends = t.sent.len();
    // Invariant 3 and 7.
    if t.options.deny || t.body == BodyKind::OneShot {
        assert!(sends <= 1, "deny/one-shot call sent {sends} attempts");
    }
    // Invariant 1 (total cap when explicit).
    if let Some(max) = t.options.max_attempts.or(settings.max_attempts) {
        assert!(sends as u32 <= max, "{sends} attempts > max {max}");
    }
    // Invariant 4.
    for (_, e, _) in &t.sent {
        assert!(eligible[*e % 4], "attempt at ineligible endpoint {e}");
    }
    // Invariant 6: no attempt starts at or after the deadline.
    let deadline = t
        .options
        .deadline
        .or(settings.deadline)
        .map(|d| t.start + d);
    if let Some(d) = deadline {
        for (_, _, at) in &t.sent {
            assert!(*at < d, "attempt started after the deadline");
        }
    }
    // Invariant 12: hedging only for reads (or opt-in) without a key.
    let concurrent = t.in_flight.len() > 1;
    if concurrent {
        let read = crate::is_safe_method(&t.method) || t.options.hedge;
        assert!(
            read && t.options.idempotency_key.is_none(),
            "hedged a call that may not hedge"
        );
        if let Some(h) = settings.hedge {
            assert!(t.in_flight.len() as u32 <= h.max_in_flight);
        }
    }
}

/// One call, any outcomes: start, poll, outcomes of any class and status, time advances,
/// cancellation, replay failures.
pub fn call_sequence(data: &[u8], start: Instant) {
    let mut u = Unstructured::new(data);
    let Ok(settings) = FuzzSettings::arbitrary(&mut u) else {
        return;
    };
    let Ok(eligible) = <[bool; 4]>::arbitrary(&mut u) else {
        return;
    };
    let Ok(first) = FuzzCall::arbitrary(&mut u) else {
        return;
    };
    let ops: Vec<Op> = Vec::arbitrary(&mut u).unwrap_or_default();
    let ops = ops
        .into_iter()
        .filter(|op| !matches!(op, Op::Start(_) | Op::Drop(_)))
        .take(200)
        .collect();
    drive(&settings, eligible, vec![first], ops, start);
}

/// Many interleaved calls on one health table: probe quota, breaker transitions, budget.
pub fn shared_health(data: &[u8], start: Instant) {
    let mut u = Unstructured::new(data);
    let Ok(settings) = FuzzSettings::arbitrary(&mut u) else {
        return;
    };
    let Ok(eligible) = <[bool; 4]>::arbitrary(&mut u) else {
        return;
    };
    let Ok(first) = FuzzCall::arbitrary(&mut u) else {
        return;
    };
    let ops: Vec<Op> = Vec::arbitrary(&mut u).unwrap_or_default();
    drive(
        &settings,
        eligible,
        vec![first],
        ops.into_iter().take(300).collect(),
        start,
    );
}

fn drive(
    settings: &FuzzSettings,
    eligible: [bool; 4],
    first: Vec<FuzzCall>,
    ops: Vec<Op>,
    origin: Instant,
) {
    let policy = settings.policy(eligible);
    let quota = policy.settings().breaker.probe_quota;
    let np = &policy.settings().not_processed.clone();
    let n = policy.endpoints().len();
    // Each endpoint's transitions in order, and its manual resets (`None`).
    type Change = Option<(BreakerState, BreakerState)>;
    let transitions: Arc<std::sync::Mutex<Vec<(String, Change)>>> = Arc::default();
    let tr = transitions.clone();
    let sink: crate::EventSink = Arc::new(move |e: &crate::Event<'_>| {
        if let crate::EventKind::BreakerTransition { endpoint, from, to } = &e.kind {
            if let Ok(mut v) = tr.lock() {
                v.push((endpoint.to_string(), Some((*from, *to))));
            }
        }
    });
    let engine = Engine::new(policy);
    let engine = &engine;
    let mut now = origin;
    let uri: http::Uri = "/".parse().expect("static");
    let empty = HeaderMap::new();
    let mut calls: Vec<Tracked<'_>> = Vec::new();
    let start = |fc: &FuzzCall, now: Instant, calls: &mut Vec<_>| {
        let method = fc.method();
        let mut options = fc.options();
        options.events = Some(sink.clone());
        let info = RequestInfo {
            method: &method,
            uri: &uri,
            headers: &empty,
        };
        let call = Call::new(engine, &info, fc.body(), options.clone(), now);
        calls.push(Tracked {
            call: Some(call),
            in_flight: Vec::new(),
            sent: Vec::new(),
            finished: false,
            options,
            method,
            body: fc.body(),
            start: now,
            redirected: Vec::new(),
            executed: Vec::new(),
            groups: settings.groups,
        });
    };
    for fc in &first {
        start(fc, now, &mut calls);
    }
    for op in ops {
        match op {
            Op::Poll => {}
            Op::Outcome {
                call,
                which,
                kind,
                status,
                retry_after,
            } => {
                if calls.is_empty() {
                    continue;
                }
                let k = call as usize % calls.len();
                let t = &mut calls[k];
                let i = usize::from(which) % t.in_flight.len().max(1);
                if let Some((number, endpoint)) = t.in_flight.get(i).copied() {
                    t.in_flight.remove(i);
                    let mut headers = HeaderMap::new();
                    if let Some(s) = retry_after {
                        headers.insert(
                            http::header::RETRY_AFTER,
                            HeaderValue::from(u32::from(s % 8)),
                        );
                    }
                    let input = outcome_for(kind, status, number, headers);
                    t.ended(number, endpoint, &input, np);
                    t.input(input, now);
                }
            }
            Op::Advance(ms) => now += Duration::from_millis(u64::from(ms % 4_000)),
            Op::Cancel(k) => {
                let len = calls.len().max(1);
                if let Some(t) = calls.get_mut(k as usize % len) {
                    // Cancelled while in flight: it may have reached the provider.
                    if t.call.is_some() && !t.finished {
                        let cut = t.in_flight.iter().map(|(_, e)| *e);
                        t.executed.extend(cut.collect::<Vec<_>>());
                    }
                    t.input(Input::Cancel, now);
                }
            }
            Op::Drop(k) => {
                if !calls.is_empty() {
                    calls.remove(k as usize % calls.len());
                }
            }
            Op::ReplayFails(k) => {
                let len = calls.len().max(1);
                if let Some(t) = calls.get_mut(k as usize % len) {
                    if let Some((number, endpoint)) = t.in_flight.pop() {
                        let input = Input::ReplayFailed { attempt: number };
                        t.ended(number, endpoint, &input, np);
                        t.input(input, now);
                    }
                }
            }
            Op::Reset(e) => {
                let id = format!("e{}", e as usize % n);
                engine.reset(&id, now);
                if let Ok(mut v) = transitions.lock() {
                    v.push((id, None));
                }
            }
            Op::Start(fc) => {
                if calls.len() < 16 {
                    start(&fc, now, &mut calls);
                }
            }
            Op::Redirected { call, cross_origin } => {
                let len = calls.len().max(1);
                if let Some(t) = calls.get_mut(call as usize % len) {
                    if let Some((number, _)) = t.in_flight.first().copied() {
                        let hop = crate::redirect::Redirect {
                            attempt: number,
                            status: StatusCode::FOUND,
                            from: http::Uri::from_static("https://e.example/"),
                            to: http::Uri::from_static("https://elsewhere.example/"),
                            cross_origin,
                        };
                        let redirects = vec![hop];
                        t.input(
                            Input::Redirected {
                                attempt: number,
                                redirects,
                            },
                            now,
                        );
                        t.redirected.push(number);
                    }
                }
            }
        }
        // Poll every call until it waits, checking invariants after every step.
        for t in calls.iter_mut() {
            // Time passed for every call (the adapter's timer input).
            t.input(Input::Timer, now);
            for _ in 0..64 {
                let Some(call) = t.call.as_mut() else { break };
                match call.poll() {
                    Action::Send(a) => {
                        assert!(a.endpoint < n);
                        assert!(!t.finished, "send after done");
                        t.check_permitted(a.endpoint);
                        t.in_flight.push((a.number, a.endpoint));
                        t.sent.push((a.number, a.endpoint, now));
                    }
                    Action::Discard(number) => {
                        // Cancelled by the engine while in flight: it may have executed.
                        let cut = t.in_flight.iter().filter(|(x, _)| *x == number);
                        let cut: Vec<usize> = cut.map(|(_, e)| *e).collect();
                        t.executed.extend(cut);
                        t.in_flight.retain(|(x, _)| *x != number);
                    }
                    Action::WaitUntil(u) => {
                        assert!(
                            u > now || !t.in_flight.is_empty(),
                            "wait until a past time with nothing in flight"
                        );
                        // Invariant 6: no wait ends after the deadline.
                        let deadline = t.options.deadline.or(engine.policy().settings().deadline);
                        if let Some(d) = deadline.map(|d| crate::time::add(t.start, d)) {
                            assert!(u <= d, "a wait past the deadline");
                        }
                        break;
                    }
                    Action::WaitForAttempt => {
                        assert!(!t.in_flight.is_empty(), "wait for nothing");
                        break;
                    }
                    Action::Done => {
                        // Cut by the deadline, a cancel or an invalid later attempt while
                        // in flight: each may have reached the provider.
                        let cut: Vec<usize> = t.in_flight.iter().map(|(_, e)| *e).collect();
                        t.executed.extend(cut);
                        t.in_flight.clear();
                        assert!(!t.finished, "result handed out twice");
                        t.finished = true;
                        // A finished call stays finished: later input changes nothing.
                        call.handle(Input::Cancel, now);
                        call.handle(Input::Timer, now);
                        assert_eq!(call.poll(), Action::Done, "a finished call acted again");
                        let Some(mut call) = t.call.take() else { break };
                        let report = call.take_done().into_report();
                        assert_eq!(report.attempts.len(), t.sent.len());
                        let executed = report.attempts.iter().any(|a| {
                            a.result
                                .may_have_executed(&engine.policy().settings().not_processed)
                        });
                        assert_eq!(report.may_have_executed, executed);
                        // The same, by SPEC 1's table over what this harness fed.
                        assert_eq!(
                            report.may_have_executed,
                            !t.executed.is_empty(),
                            "may_have_executed against the spec's table: {:?}",
                            report.attempts
                        );
                        assert!(report
                            .attempts
                            .iter()
                            .all(|a| a.result != AttemptResult::InFlight));
                        // SPEC 3: after a followed redirect the endpoint had answered, so
                        // the attempt can never be "nothing was sent".
                        for a in report.attempts.iter() {
                            if t.redirected.contains(&a.number) {
                                assert!(
                                    !matches!(
                                        a.result,
                                        AttemptResult::Failed(FailureClass::Undelivered)
                                            | AttemptResult::TimedOut(TimeoutPhase::Connect)
                                    ),
                                    "a redirected attempt reported undelivered: {:?}",
                                    a.result
                                );
                                // SPEC 1, 3: the endpoint answered the request with a
                                // redirect that promises nothing (a 302 outside
                                // `not_processed`), so the attempt may have executed
                                // whatever its last hop answered.
                                let not_processed = &engine.policy().settings().not_processed;
                                if !not_processed.contains(StatusCode::FOUND) {
                                    assert!(
                                        a.result.may_have_executed(not_processed),
                                        "a redirected attempt read as not executed: {:?}",
                                        a.result
                                    );
                                }
                            }
                        }
                        break;
                    }
                }
            }
            check_call(engine, t, eligible);
        }
        for i in 0..n {
            if let Some(h) = engine.health(i, now) {
                assert!(
                    h.probes_in_flight <= quota,
                    "probes {} > quota {quota}",
                    h.probes_in_flight
                );
            }
        }
    }
    // Invariant 8: legal transitions, each from the state the last one left (a manual
    // reset, which the calls' sinks do not hear, closes the breaker).
    let log = transitions.lock().map(|v| v.clone()).unwrap_or_default();
    let mut state = vec![BreakerState::Closed; n];
    for (endpoint, change) in log {
        let i: usize = endpoint[1..].parse().unwrap_or(0) % n;
        let Some((from, to)) = change else {
            state[i] = BreakerState::Closed;
            continue;
        };
        assert!(
            matches!(
                (from, to),
                (BreakerState::Closed, BreakerState::Open)
                    | (BreakerState::Open, BreakerState::HalfOpen)
                    | (BreakerState::HalfOpen, BreakerState::Closed)
                    | (BreakerState::HalfOpen, BreakerState::Open)
            ),
            "illegal transition {from:?} -> {to:?}"
        );
        assert_eq!(
            from, state[i],
            "{endpoint}: a transition from a state it was not in"
        );
        state[i] = to;
    }
}

/// Arbitrary header bytes for `Retry-After` (delta-seconds and HTTP-date): never panics,
/// never reports more than the saturation limit, and is the same for both entry points.
pub fn retry_after(data: &[u8]) {
    let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480);
    let parsed = parse_retry_after(data, Some(wall));
    if let Some(d) = parsed {
        assert!(d <= crate::MAX_RETRY_AFTER_VALUE);
    }
    if let Ok(v) = HeaderValue::from_bytes(data) {
        let mut h = HeaderMap::new();
        h.insert(http::header::RETRY_AFTER, v);
        assert_eq!(retry_after_from_headers(&h, Some(wall)), parsed);
    }
    // Plain digits always parse.
    if !data.is_empty() && data.iter().all(u8::is_ascii_digit) {
        assert!(parsed.is_some());
    }
}

#[derive(Debug, Arbitrary)]
struct RawConfig {
    ids: Vec<String>,
    urls: Vec<String>,
    groups: Vec<Option<String>>,
    headers: Vec<(String, String)>,
    per: Option<u32>,
    pinned: Option<u32>,
    max: Option<u32>,
    timeouts: (u64, u64, Option<u64>, u64),
    backoff: (u64, f64, u64, u8, f64),
    breaker: (u8, u32, u32, u32, f64, Option<u64>, u64, f64, u64, u32),
    budget: Option<(f64, u64, f64)>,
    hedge: Option<(u64, u32)>,
    statuses: (Vec<u16>, Vec<u16>),
    names: (String, String, Option<String>),
}

/// Arbitrary configuration building: every invalid input is an error, never a panic; a
/// valid one runs a call in the simulator without panicking.
pub fn config(data: &[u8], start: Instant) {
    let mut u = Unstructured::new(data);
    let Ok(raw) = RawConfig::arbitrary(&mut u) else {
        return;
    };
    match builder_of(raw).build() {
        Err(e) => {
            // Errors name what is wrong.
            assert!(!e.to_string().is_empty());
        }
        Ok(policy) => run_scripted(policy, start),
    }
}

/// The policy builder the raw configuration describes (validated only by `build`).
fn builder_of(raw: RawConfig) -> crate::PolicyBuilder {
    let ms = Duration::from_millis;
    let b = raw.backoff;
    let br = raw.breaker;
    let mut settings = Settings {
        attempts_per_endpoint: raw.per,
        pinned_attempts: raw.pinned,
        max_attempts: raw.max,
        connect_timeout: ms(raw.timeouts.0),
        attempt_timeout: ms(raw.timeouts.1),
        deadline: raw.timeouts.2.map(ms),
        max_retry_after: ms(raw.timeouts.3),
        backoff: Backoff {
            initial: ms(b.0),
            multiplier: b.1,
            max: ms(b.2),
            jitter: match b.3 % 3 {
                0 => Jitter::Full,
                1 => Jitter::None,
                _ => Jitter::Proportional(b.4),
            },
        },
        breaker: Breaker {
            rule: match br.0 % 3 {
                0 => BreakerRule::Consecutive { failures: br.1 },
                1 => BreakerRule::FailureRate {
                    window: br.2,
                    min_calls: br.3,
                    rate: br.4,
                    slow_call: br.5.map(ms),
                },
                _ => BreakerRule::Disabled,
            },
            open: ms(br.6),
            open_growth: br.7,
            max_open: ms(br.8),
            probe_quota: br.9,
        },
        budget: raw.budget.map(|(ratio, w, m)| Budget {
            ratio,
            window: ms(w),
            min_per_sec: m,
        }),
        hedge: raw.hedge.map(|(a, m)| Hedge {
            after: ms(a),
            max_in_flight: m,
        }),
        request_id_header: raw.names.0,
        idempotency_key_header: raw.names.1,
        attempt_header: raw.names.2,
        ..Settings::default()
    };
    for c in raw.statuses.0 {
        settings.trigger_statuses.insert(c);
    }
    for c in raw.statuses.1 {
        settings.not_processed.insert(c);
    }
    let mut builder = Policy::builder().settings(settings);
    for (i, id) in raw.ids.iter().enumerate().take(70) {
        let url = raw.urls.get(i).cloned().unwrap_or_default();
        let mut e = Endpoint::new(id.clone(), url);
        if let Some(Some(g)) = raw.groups.get(i) {
            e = e.group(g.clone());
        }
        if let Some((k, v)) = raw.headers.get(i) {
            e = e.header(k, v);
        }
        builder = builder.endpoint(e);
    }
    builder
}

/// Runs one call on a valid policy whose endpoints fail in turn (503, refused, reset): it
/// must end.
fn run_scripted(policy: Policy, start: Instant) {
    let mut sim = crate::sim::Sim::new(policy, start);
    let ids: Vec<String> = sim
        .engine()
        .policy()
        .endpoints()
        .iter()
        .map(|e| e.id().to_string())
        .collect();
    for (k, id) in ids.iter().enumerate() {
        let script = match k % 3 {
            0 => crate::sim::Script::status(503),
            1 => crate::sim::Script::refuse(),
            _ => crate::sim::Script::reset(),
        };
        sim.script(id, script);
    }
    let run = sim.run(Method::GET, CallOptions::default());
    assert!(!run.stuck, "simulated call got stuck");
}
