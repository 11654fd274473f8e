//! Property tests for the invariants of SPEC section 6 (1-11), at least 1,000 random cases
//! each: random policies, eligibility, scripts (outcome sequences), times and seeds.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use baton_core::sim::{Sim, SimRun};
use baton_core::strategies::{scenario, script, Scenario};
use baton_core::*;

mod common;
use common::{Action, AttemptOutcome, Drive, ResponseInfo};
use proptest::prelude::*;

const CASES: u32 = 1_000;

#[derive(Debug, Clone, PartialEq)]
enum Seen {
    Started {
        at: Instant,
        endpoint: String,
    },
    Wait {
        at: Instant,
        delay: Duration,
        reason: WaitReason,
    },
    Transition {
        endpoint: String,
        from: BreakerState,
        to: BreakerState,
    },
    Reset(String),
}

fn recorder() -> (EventSink, Arc<Mutex<Vec<Seen>>>) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let l2 = log.clone();
    let sink: EventSink = Arc::new(move |e: &Event<'_>| {
        let seen = match &e.kind {
            EventKind::AttemptStarted { endpoint, .. } => Seen::Started {
                at: e.at,
                endpoint: endpoint.to_string(),
            },
            EventKind::BackoffWait { delay, reason } => Seen::Wait {
                at: e.at,
                delay: *delay,
                reason: *reason,
            },
            EventKind::BreakerTransition { endpoint, from, to } => Seen::Transition {
                endpoint: endpoint.to_string(),
                from: *from,
                to: *to,
            },
            _ => return,
        };
        l2.lock().unwrap().push(seen);
    });
    (sink, log)
}

struct Observed {
    run: SimRun,
    seen: Vec<Seen>,
    start: Instant,
}

fn run_scenario(s: &Scenario, start: Instant) -> Observed {
    let mut sim = Sim::new(s.policy(), start);
    for (id, script) in &s.scripts {
        sim.script(id, script.clone());
    }
    let (sink, log) = recorder();
    let mut options = s.options.clone();
    options.events = Some(sink);
    let run = sim.run_request(s.request(), options);
    let seen = log.lock().unwrap().clone();
    Observed { run, seen, start }
}

/// The permissions SPEC 2.2 resolves for a scenario (no policy function in scenarios).
fn resolved(s: &Scenario) -> (Permission, Permission) {
    if s.options.deny {
        return (Permission::Never, Permission::Never);
    }
    let (r, f) = if is_safe_method(&s.method) {
        (Permission::Always, Permission::Always)
    } else if s.options.idempotency_key.is_some() {
        (Permission::Always, Permission::IfUndelivered)
    } else {
        (Permission::IfUndelivered, Permission::IfUndelivered)
    };
    (
        s.options.retry.unwrap_or(r),
        s.options.failover.unwrap_or(f),
    )
}

fn same_group(s: &Scenario, a: usize, b: usize) -> bool {
    a == b || matches!((&s.endpoints[a].1, &s.endpoints[b].1), (Some(x), Some(y)) if x == y)
}

fn index(s: &Scenario, id: &str) -> usize {
    s.endpoints.iter().position(|(i, _)| i == id).unwrap()
}

fn usable(s: &Scenario) -> u32 {
    s.eligible.iter().filter(|e| **e).count() as u32
}

fn per_endpoint(s: &Scenario) -> u32 {
    s.options
        .attempts_per_endpoint
        .or(s.settings.attempts_per_endpoint)
        .unwrap_or(if usable(s) > 1 { 1 } else { 3 })
}

fn pinned_limit(s: &Scenario) -> u32 {
    s.settings
        .pinned_attempts
        .or(s.options.attempts_per_endpoint)
        .or(s.settings.attempts_per_endpoint)
        .unwrap_or(3)
}

fn explicit_max(s: &Scenario) -> Option<u32> {
    s.options.max_attempts.or(s.settings.max_attempts)
}

/// Which recorded ends mean that an endpoint may have executed the call, written out from
/// the spec's table (SPEC 2.1, 2.6, 9) rather than read from the engine, so that the
/// permission properties below check the engine against the spec and not against itself.
fn spec_may_have_executed(r: &AttemptResult, not_processed: &StatusSet) -> bool {
    match r {
        // An answer: executed, unless its status is one the provider promises it did not
        // process (a 429 or 503 configured as such).
        AttemptResult::Response(status) => !not_processed.contains(*status),
        // An answer in `not_processed` after a redirect the endpoint gave with a status
        // not in it: the redirect was the endpoint's answer, so it may have done the work.
        AttemptResult::AfterRedirect(_) => true,
        // Sent, and the connection broke before an answer: no proof either way.
        AttemptResult::Failed(FailureClass::Ambiguous) => true,
        // Nothing left the client (refused, a failed handshake, a request rejected before
        // sending).
        AttemptResult::Failed(
            FailureClass::Undelivered | FailureClass::Untrusted | FailureClass::RejectedLocally,
        ) => false,
        // The attempt timeout during connect: nothing was written.
        AttemptResult::TimedOut(TimeoutPhase::Connect) => false,
        AttemptResult::TimedOut(TimeoutPhase::Response | TimeoutPhase::Unknown) => true,
        // Cut short or dropped while in flight: it may have reached the provider.
        AttemptResult::Deadline | AttemptResult::Cancelled | AttemptResult::InFlight => true,
        // No copy of the body could be made: never sent.
        AttemptResult::ReplayFailed => false,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: CASES, failure_persistence: None, ..ProptestConfig::default() })]

    /// Invariant 1: attempts never exceed `max_attempts`, nor the per-endpoint limit per
    /// round (`pinned_attempts` for a pinned call).
    #[test]
    fn attempts_stay_within_max_and_per_endpoint_limits(s in scenario()) {
        let o = run_scenario(&s, Instant::now());
        let attempts = o.run.report.attempts.len() as u32;
        let per = per_endpoint(&s);
        let pinned = pinned_limit(&s);
        match explicit_max(&s) {
            Some(max) => prop_assert!(attempts <= max, "{attempts} > {max}"),
            None => prop_assert!(attempts <= usable(&s) * per + pinned),
        }
        // Every new round starts after a reported wait that is not a retry's (Round,
        // Cooldown, or RetryAfter when the provider asked); counting those bounds the
        // rounds from above. A retry's own wait must not raise the endpoint's allowance.
        // (Without an explicit max_attempts a further round still starts when the first
        // left the default cap room, as vector 40 expects.)
        let new_round = |e: &Seen| matches!(e, Seen::Wait { reason, .. } if *reason != WaitReason::Retry);
        let rounds = 1 + o.seen.iter().filter(|e| new_round(e)).count() as u32;
        for (i, _) in s.endpoints.iter().enumerate() {
            let n = o.run.report.attempts.iter().filter(|a| a.endpoint == i).count() as u32;
            prop_assert!(n <= (per * rounds).max(pinned), "endpoint {i}: {n} attempts, per {per} x {rounds} rounds, pinned {pinned}");
        }
    }

    /// Invariant 2: the sticky permission rule of SPEC 2.2 holds for every attempt,
    /// checked against an independent oracle.
    #[test]
    fn every_attempt_obeys_the_permission_rule(s in scenario()) {
        let o = run_scenario(&s, Instant::now());
        let (retry, failover) = resolved(&s);
        let keyed = s.options.idempotency_key.is_some();
        let mut executed: Vec<usize> = Vec::new();
        let mut attempted: Vec<usize> = Vec::new();
        for a in &o.run.report.attempts {
            let x = a.endpoint;
            if !attempted.is_empty() {
                let in_group = |e: usize| if keyed { same_group(&s, e, x) } else { e == x };
                let outside = executed.iter().any(|&e| !in_group(e));
                let inside = executed.iter().any(|&e| in_group(e));
                // Invariant 2 holds both of its halves at once.
                if outside {
                    prop_assert_eq!(failover, Permission::Always, "attempt {} at {} after executions at {:?}", a.number, x, executed);
                }
                if inside {
                    prop_assert_eq!(retry, Permission::Always, "attempt {} at {} after executions at {:?}", a.number, x, executed);
                }
                if !(outside || inside) && attempted.contains(&x) {
                    prop_assert_ne!(retry, Permission::Never);
                } else if !(outside || inside) {
                    prop_assert_ne!(failover, Permission::Never);
                }
            }
            attempted.push(x);
            if spec_may_have_executed(&a.result, &s.settings.not_processed) {
                executed.push(x);
            }
        }
        // may_have_executed on the result agrees with the attempts.
        prop_assert_eq!(o.run.report.may_have_executed, !executed.is_empty());
    }

    /// Invariant 3: a call marked deny makes at most one attempt.
    #[test]
    fn deny_makes_at_most_one_attempt(mut s in scenario()) {
        s.options.deny = true;
        let o = run_scenario(&s, Instant::now());
        prop_assert!(o.run.report.attempts.len() <= 1);
    }

    /// Invariant 4: no attempt goes to an ineligible endpoint; a preferred, eligible,
    /// available endpoint is tried first.
    #[test]
    fn eligibility_and_preference_are_respected(s in scenario()) {
        let o = run_scenario(&s, Instant::now());
        for a in &o.run.report.attempts {
            prop_assert!(s.eligible[a.endpoint], "attempt at ineligible {}", a.endpoint);
        }
        if let (Some(p), Some(first)) = (&s.options.prefer, o.run.report.attempts.first()) {
            if let Some(i) = s.endpoints.iter().position(|(id, _)| id == p) {
                if s.eligible[i] {
                    prop_assert_eq!(first.endpoint, i);
                }
            }
        }
        if s.options.prefer.as_deref() == Some("nope") {
            prop_assert!(o.run.report.attempts.is_empty());
            prop_assert_eq!(o.run.report.stop_reason, StopReason::UnknownEndpoint);
        }
    }

    /// Invariant 5: an available endpoint is always tried before an unavailable one
    /// (across calls that share health).
    #[test]
    fn available_endpoints_come_before_unavailable_ones(s in scenario(), gaps in proptest::collection::vec(0u64..3_000, 4)) {
        let mut sim = Sim::new(s.policy(), Instant::now());
        for (id, script) in &s.scripts {
            sim.script(id, script.clone());
        }
        for gap in gaps {
            let now = sim.now();
            let available: Vec<bool> = (0..s.endpoints.len())
                .map(|i| sim.engine().health(i, now).unwrap().available)
                .collect();
            let mut options = s.options.clone();
            options.prefer = None;
            let run = sim.run_request(s.request(), options);
            if let Some(first) = run.report.attempts.first() {
                let any_available = (0..s.endpoints.len()).any(|i| s.eligible[i] && available[i]);
                if any_available {
                    prop_assert!(available[first.endpoint], "first attempt at unavailable {} while {:?}", first.endpoint, available);
                }
            }
            sim.advance(Duration::from_millis(gap));
        }
    }

    /// Invariant 6: no wait ends after the deadline, no attempt starts after it, and a
    /// non-triggering response in hand is never replaced by a deadline error.
    #[test]
    fn deadline_bounds_waits_and_attempts(s in scenario()) {
        let o = run_scenario(&s, Instant::now());
        let deadline = s.options.deadline.or(s.settings.deadline).map(|d| o.start + d);
        if let Some(d) = deadline {
            for e in &o.seen {
                match e {
                    Seen::Started { at, .. } => prop_assert!(*at < d),
                    Seen::Wait { at, delay, .. } => prop_assert!(*at + *delay <= d),
                    _ => {}
                }
            }
            prop_assert!(o.start + o.run.elapsed <= d);
        }
        // A status outside every trigger set and `not_processed` (the scenarios' scripts
        // answer 200, 201, 400, 404, 409 and 500 so) is never a trigger: once one arrives
        // it is the answer. Unhedged, it is the last attempt; hedged, hedges started
        // beside it may follow it in the report, and it is still the attempt returned.
        let answers = |r: &AttemptResult| matches!(r, AttemptResult::Response(st)
            if !matches!(st.as_u16(), 429 | 502 | 503 | 504) && !s.settings.not_processed.contains(*st));
        if let Some(pos) = o.run.report.attempts.iter().position(|a| answers(&a.result)) {
            if s.settings.hedge.is_none() {
                prop_assert_eq!(pos + 1, o.run.report.attempts.len());
            }
            let answered = o.run.report.attempts[pos].number;
            let returned = match o.run.report.outcome {
                Outcome::Response { attempt, .. } => Some(attempt),
                _ => None,
            };
            prop_assert_eq!(returned, Some(answered));
            let AttemptResult::Response(status) = o.run.report.attempts[pos].result else {
                unreachable!()
            };
            prop_assert_eq!(o.run.report.status(), Some(status));
            prop_assert_eq!(o.run.report.stop_reason, StopReason::Answered);
        }
    }

    /// Invariant 7: a non-replayable body is sent at most once.
    #[test]
    fn one_shot_body_is_sent_at_most_once(mut s in scenario()) {
        s.body = BodyKind::OneShot;
        let o = run_scenario(&s, Instant::now());
        prop_assert!(o.run.report.attempts.len() <= 1);
        let sent: usize = o.run.executed.iter().map(Vec::len).sum();
        prop_assert!(sent <= 1);
    }

    /// Invariant 9: the same inputs give the same actions.
    #[test]
    fn same_inputs_give_the_same_actions(s in scenario()) {
        let t = Instant::now();
        let a = run_scenario(&s, t);
        let b = run_scenario(&s, t);
        prop_assert_eq!(&a.run.report, &b.run.report);
        prop_assert_eq!(&a.run.events, &b.run.events);
        prop_assert_eq!(a.seen, b.seen);
    }

    /// SPEC 9 (TLS trust): an endpoint that rejected the call's handshake on a certificate
    /// gets no later attempt in that call, and the rejection never counts as executed.
    #[test]
    fn an_untrusted_endpoint_gets_no_further_attempt_in_the_call(s in scenario()) {
        let o = run_scenario(&s, Instant::now());
        let attempts = &o.run.report.attempts;
        for (i, a) in attempts.iter().enumerate() {
            if a.result == AttemptResult::Failed(FailureClass::Untrusted) {
                prop_assert!(!a.result.may_have_executed(&s.settings.not_processed));
                for later in &attempts[i + 1..] {
                    prop_assert!(later.endpoint != a.endpoint, "attempt {} at {} after untrusted attempt {}", later.number, later.endpoint_id, a.number);
                }
            }
        }
    }

    /// Invariant 11: a retained response is never returned when a later attempt may have
    /// executed a call whose failover permission is not Always. Checked for every
    /// returned response, not only those the engine labels retained (without `Always`
    /// the call is not hedged, so no attempt after an answer may have executed either).
    #[test]
    fn retained_response_respects_later_executions(s in scenario()) {
        let o = run_scenario(&s, Instant::now());
        let (_, failover) = resolved(&s);
        if let Outcome::Response { attempt, .. } = o.run.report.outcome {
            if failover != Permission::Always {
                for a in o.run.report.attempts.iter().filter(|a| a.number > attempt) {
                    prop_assert!(!spec_may_have_executed(&a.result, &s.settings.not_processed), "attempt {} after retained {attempt}: {:?}", a.number, a.result);
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: CASES, failure_persistence: None, ..ProptestConfig::default() })]

    /// Invariant 8: breaker transitions are only closed -> open -> half-open -> closed |
    /// open (plus manual reset), consistent per endpoint, and concurrent probes never
    /// exceed the quota. Calls interleave on shared health.
    #[test]
    fn breaker_transitions_follow_the_state_machine(
        s in scenario(),
        scripts in proptest::collection::vec(script(), 1..4),
        ops in proptest::collection::vec((0usize..3, 0u64..4_000, any::<bool>()), 1..12),
    ) {
        let policy = s.policy();
        let quota = policy.settings().breaker.probe_quota;
        let engine = Arc::new(Engine::new(policy));
        let (sink, log) = recorder();
        let mut t = Instant::now();
        let headers = http::HeaderMap::new();
        let uri: http::Uri = "/".parse().unwrap();
        let mut calls: Vec<(Call<'_>, Vec<u32>)> = Vec::new();
        let mut step = 0usize;
        for (which, gap, reset) in ops {
            t += Duration::from_millis(gap);
            if reset && which == 0 {
                engine.reset("e0", t);
                log.lock().unwrap().push(Seen::Reset("e0".into()));
            }
            // Start a call, or advance an existing one with the next scripted outcome.
            if which == 0 || calls.is_empty() {
                let info = RequestInfo { method: &s.method, uri: &uri, headers: &headers };
                let opts = CallOptions { events: Some(sink.clone()), ..CallOptions::default() };
                calls.push((Call::new(&engine, &info, BodyKind::Empty, opts, t), Vec::new()));
            }
            let k = which % calls.len();
            let (call, in_flight) = &mut calls[k];
            loop {
                match call.poll_action(t) {
                    Action::Send(a) => in_flight.push(a.number),
                    Action::Discard(n) => in_flight.retain(|x| *x != n),
                    _ => break,
                }
            }
            if let Some(n) = in_flight.pop() {
                let sc = &scripts[step % scripts.len()];
                let st = &sc.steps()[step % sc.steps().len()];
                step += 1;
                let outcome = match &st.reply {
                    baton_core::sim::Reply::Status(c, _) => AttemptOutcome::Response(ResponseInfo::new(http::StatusCode::from_u16(*c).unwrap(), &headers)),
                    baton_core::sim::Reply::Refuse => AttemptOutcome::Failure(FailureClass::Undelivered),
                    baton_core::sim::Reply::ConnectTimeout => AttemptOutcome::Timeout(TimeoutPhase::Connect),
                    baton_core::sim::Reply::Reset => AttemptOutcome::Failure(FailureClass::Ambiguous),
                    baton_core::sim::Reply::Untrusted => AttemptOutcome::Failure(FailureClass::Untrusted),
                    baton_core::sim::Reply::RefusedStream => AttemptOutcome::Failure(H2End::Reset { code: REFUSED_STREAM }.class()),
                    baton_core::sim::Reply::GoAway { above_last } => AttemptOutcome::Failure(H2End::GoAway { above_last: *above_last }.class()),
                    baton_core::sim::Reply::StreamReset => AttemptOutcome::Failure(FailureClass::Ambiguous),
                    _ => AttemptOutcome::Timeout(TimeoutPhase::Response),
                };
                call.handle_outcome(n, outcome, t);
            }
            for i in 0..s.endpoints.len() {
                let h = engine.health(i, t).unwrap();
                prop_assert!(h.probes_in_flight <= quota);
            }
        }
        let seen = log.lock().unwrap().clone();
        let mut state: Vec<BreakerState> = vec![BreakerState::Closed; s.endpoints.len()];
        for e in seen {
            if let Seen::Reset(endpoint) = &e {
                state[index(&s, endpoint)] = BreakerState::Closed;
            }
            if let Seen::Transition { endpoint, from, to } = e {
                let i = s.endpoints.iter().position(|(id, _)| *id == endpoint).unwrap();
                prop_assert_eq!(from, state[i], "transition on {} from {:?} but state was {:?}", endpoint, from, state[i]);
                let ok = matches!(
                    (from, to),
                    (BreakerState::Closed, BreakerState::Open)
                        | (BreakerState::Open, BreakerState::HalfOpen)
                        | (BreakerState::HalfOpen, BreakerState::Closed)
                        | (BreakerState::HalfOpen, BreakerState::Open)
                );
                prop_assert!(ok, "illegal transition {:?} -> {:?}", from, to);
                state[i] = to;
            }
        }
    }

    /// Invariant 10: the engine never panics, whatever the sequence of inputs, including
    /// reports for unknown attempts, repeated reports and time going backwards.
    #[test]
    fn engine_never_panics_on_odd_input_sequences(
        s in scenario(),
        ops in proptest::collection::vec((0u32..6, 0u32..8, -2_000i64..4_000), 1..40),
    ) {
        let engine = Arc::new(Engine::new(s.policy()));
        let headers = http::HeaderMap::new();
        let uri: http::Uri = "/".parse().unwrap();
        let info = RequestInfo { method: &s.method, uri: &uri, headers: &headers };
        let base = Instant::now() + Duration::from_secs(10);
        let mut call = Call::new(&engine, &info, s.body, s.options.clone(), base);
        for (op, n, dt) in ops {
            let t = if dt < 0 { base.checked_sub(Duration::from_millis((-dt) as u64)).unwrap_or(base) } else { base + Duration::from_millis(dt as u64) };
            match op {
                0 => { let _ = call.poll_action(t); }
                1 => { call.handle_outcome(n, AttemptOutcome::Failure(FailureClass::Undelivered), t); }
                2 => { call.handle_outcome(n, AttemptOutcome::Response(ResponseInfo::new(http::StatusCode::SERVICE_UNAVAILABLE, &headers)), t); }
                3 => { call.handle_outcome(n, AttemptOutcome::Timeout(TimeoutPhase::Response), t); }
                4 => { call.replay_failed(n, t); }
                _ => call.cancel(t),
            }
        }
        // Whatever happened, the call can always be finished.
        call.cancel(base + Duration::from_secs(60));
        let mut done = false;
        for _ in 0..100 {
            if let Action::Done = call.poll_action(base + Duration::from_secs(60)) { done = true; break; }
        }
        prop_assert!(done);
    }
}
