//! Regression tests from the second reading of the engine against the spec: each pins a
//! behaviour that was once wrong (deadlock in event sinks, event order, pinned single
//! endpoints, stale Retry-After, deadline-cut undelivered attempts, limiter tokens spent on
//! budget-refused attempts, trigger sets, cooling endpoints and the breaker, key bytes).

use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_core::sim::{Script, Sim};
use baton_core::*;

mod common;
use common::{Action, AttemptOutcome, Drive, ResponseInfo};
use http::Method;

fn endpoints(ids: &[&str]) -> PolicyBuilder {
    let mut b = Policy::builder().jitter(Jitter::None).seed(7);
    for id in ids {
        b = b.endpoint(Endpoint::new(*id, format!("https://{id}.example/")));
    }
    b
}

fn sim(b: PolicyBuilder) -> Sim {
    Sim::new(b.build().unwrap(), Instant::now())
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn names(run: &sim::SimRun) -> Vec<String> {
    run.events
        .iter()
        .map(|e| e.text.split([' ', '{']).next().unwrap().to_string())
        .collect()
}

/// SPEC 2.10 / 1: a connect-phase failure sends nothing, even when the deadline cut it.
#[test]
fn connect_timeout_cut_by_deadline_is_not_may_have_executed() {
    let mut s = sim(endpoints(&["a"]));
    s.script("a", Script::connect_timeout());
    let run = s.run(
        Method::POST,
        CallOptions {
            deadline: Some(ms(500)),
            ..CallOptions::default()
        },
    );
    assert_eq!(run.executions("a"), 0);
    assert_eq!(run.report.stop_reason, StopReason::Deadline);
    assert!(
        !run.report.may_have_executed,
        "nothing reached a provider, yet the report says 'unknown': {:?}",
        run.report.attempts
    );
}

/// SPEC 2.6: Retry-After replaces the backoff only for the wait that follows the 429/503
/// carrying it; a later failure without a response gets the ordinary backoff.
#[test]
fn retry_after_is_not_reused_for_a_later_failure_without_a_response() {
    let mut s = sim(endpoints(&["a"]).budget(None));
    s.script(
        "a",
        Script::status(503)
            .header("retry-after", "10")
            .then(Script::refuse())
            .then(Script::status(200)),
    );
    let run = s.run(Method::GET, CallOptions::default());
    assert_eq!(run.report.attempts.len(), 3);
    let waits = run.events_named("BackoffWait");
    assert_eq!(waits.len(), 2);
    assert!(waits[0].text.contains("RetryAfter"), "{}", waits[0].text);
    // waits so far = 1: 200 ms x 2 = 400 ms, no jitter.
    assert!(
        waits[1].text.contains("delay: 400ms"),
        "second wait reuses the old Retry-After: {}",
        waits[1].text
    );
}

/// SPEC 4: events in causal order: the attempt finishes, then the breaker transition it
/// caused.
#[test]
fn breaker_transition_is_reported_after_the_attempt_that_caused_it() {
    let mut s = sim(endpoints(&["a"]).budget(None));
    s.script("a", Script::status(503));
    let run = s.run(Method::GET, CallOptions::default());
    let n = names(&run);
    let t = n
        .iter()
        .position(|e| e == "BreakerTransition")
        .expect("3 failures trip");
    let last_finished = n.iter().rposition(|e| e == "AttemptFinished").unwrap();
    assert!(
        last_finished < t,
        "transition reported before the attempt that caused it finished: {n:?}"
    );
}

/// SPEC 4 + 2.5: a probe's result is reported after the attempt finished and before (or
/// with) the transition it causes, never after it.
#[test]
fn probe_result_precedes_the_transition_it_causes() {
    let mut s = sim(endpoints(&["a"]).budget(None).attempts_per_endpoint(1));
    s.script("a", Script::status(503));
    for _ in 0..3 {
        s.run(Method::GET, CallOptions::default());
    }
    s.advance(Duration::from_secs(30));
    let run = s.run(Method::GET, CallOptions::default());
    let n = names(&run);
    let p = n.iter().position(|e| e == "ProbeResult").expect("probe");
    let t = n
        .iter()
        .rposition(|e| e == "BreakerTransition")
        .expect("half_open -> open");
    assert!(p < t, "{n:?}");
}

/// SPEC 2.5 ("no lock held for more than a few instructions") and 4: the event sink is
/// called while the endpoint's health lock is held, so a sink that reads endpoint state
/// (SPEC 2.5: "Read any endpoint's state") on a breaker transition deadlocks the call.
#[test]
fn event_sink_may_read_endpoint_health_without_deadlocking() {
    let cell: Arc<std::sync::OnceLock<Arc<Engine>>> = Arc::new(std::sync::OnceLock::new());
    let c2 = cell.clone();
    let policy = endpoints(&["a"])
        .budget(None)
        .on_event(move |e| {
            if let EventKind::BreakerTransition { endpoint, .. } = e.kind {
                if let Some(engine) = c2.get() {
                    let _ = engine.health_of(endpoint, e.at);
                }
            }
        })
        .build()
        .unwrap();
    let mut s = Sim::new(policy, Instant::now());
    cell.set(s.engine().clone()).unwrap();
    s.script("a", Script::status(503));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let run = s.run(Method::GET, CallOptions::default());
        let _ = tx.send(run.report.attempts.len());
    });
    let got = rx.recv_timeout(Duration::from_secs(5));
    assert_eq!(
        got.ok(),
        Some(3),
        "the call hung: the sink was called under the health lock"
    );
}

/// SPEC 2.9: a limiter token is spent only when the attempt is actually sent; an attempt
/// the budget refuses (SPEC 2.3: all of trigger, permission, replay, budget must allow)
/// must not consume a token.
#[test]
fn budget_refused_attempt_spends_no_rate_limit_token() {
    let policy = endpoints(&["a", "b"])
        .budget(Some(Budget {
            ratio: 0.0,
            window: Duration::from_secs(10),
            min_per_sec: 0.0,
        }))
        .rate_limit(Some(RateLimit {
            limiter: Limiter::TokenBucket {
                capacity: 2,
                per_second: 0.001,
            },
            scope: LimitScope::Client,
            on_limit: OnLimit::FailFast,
        }))
        .build()
        .unwrap();
    let mut s = Sim::new(policy, Instant::now());
    s.script("a", Script::status(503));
    let first = s.run(Method::GET, CallOptions::default());
    assert_eq!(first.report.attempts.len(), 1);
    assert_eq!(first.report.stop_reason, StopReason::Budget);
    // One attempt was sent, so one token must remain for the next call's first attempt.
    let second = s.run(Method::GET, CallOptions::default());
    assert_eq!(
        second.report.attempts.len(),
        1,
        "the refused failover burned a limiter token: {:?}",
        second.report.stop_reason
    );
}

/// SPEC 3: the idempotency key is sent unchanged on every attempt. A key header holding
/// bytes that are not UTF-8 (valid obs-text in HTTP) comes back altered.
#[test]
fn idempotency_key_from_header_is_sent_unchanged() {
    let policy = endpoints(&["a"]).build().unwrap();
    let engine = Arc::new(Engine::new(policy));
    let mut headers = http::HeaderMap::new();
    let original = http::HeaderValue::from_bytes(b"key-\xe9-1").unwrap();
    headers.insert("idempotency-key", original.clone());
    let uri: http::Uri = "/".parse().unwrap();
    let info = RequestInfo {
        method: &Method::POST,
        uri: &uri,
        headers: &headers,
    };
    let now = Instant::now();
    let mut call = Call::new(
        &engine,
        &info,
        BodyKind::Replayable,
        CallOptions::default(),
        now,
    );
    // Decision: a key that is not visible ASCII cannot be kept byte for byte through every
    // HTTP client, so the call is rejected before anything is sent instead of altering it.
    assert_eq!(
        call.poll_action(now),
        Action::Done,
        "a non-ASCII idempotency key must be rejected before any attempt"
    );
    let report = common::report(call);
    assert!(report.attempts.is_empty());
    assert!(matches!(
        report.outcome,
        Outcome::Error {
            kind: ErrorKind::InvalidCall(_),
            ..
        }
    ));
    let _ = (original, apply_attempt_headers);

    // The same rule for a key given as a call option: "clé" is refused, not sent as the
    // UTF-8 bytes the header path refuses.
    let policy = endpoints(&["a"]).build().unwrap();
    let options = CallOptions {
        idempotency_key: Some("clé-0001".into()),
        ..CallOptions::default()
    };
    let mut call = direct_call(policy, Method::POST, http::HeaderMap::new(), options, now);
    assert_eq!(
        call.poll_action(now),
        Action::Done,
        "a non-ASCII key was sent"
    );
    let report = common::report(call);
    assert!(report.attempts.is_empty());
    assert!(matches!(
        report.outcome,
        Outcome::Error {
            kind: ErrorKind::InvalidCall(_),
            ..
        }
    ));
}

/// SPEC 2.6: `max_attempts` set above one round starts further rounds. A GET to a single
/// endpoint is not a pinned call (no endpoint is forbidden by permission), yet it stops
/// after one round of 3.
#[test]
fn single_endpoint_get_with_larger_max_attempts_gets_further_rounds() {
    let mut s = sim(endpoints(&["a"]).budget(None).max_attempts(5));
    s.script("a", Script::status(503));
    let run = s.run(Method::GET, CallOptions::default());
    assert_eq!(
        run.report.attempts.len(),
        5,
        "stop reason {:?}",
        run.report.stop_reason
    );
}

/// SPEC 2.6 / 8: `pinned_attempts` only governs pinned calls (permission forbids every
/// other endpoint). A GET to the only endpoint gets `attempts_per_endpoint` (3 with one
/// usable endpoint), whatever `pinned_attempts` says.
#[test]
fn pinned_attempts_does_not_limit_a_get_to_a_single_endpoint() {
    let mut s = sim(endpoints(&["a"]).budget(None).pinned_attempts(1));
    s.script("a", Script::status(503));
    let run = s.run(Method::GET, CallOptions::default());
    assert_eq!(run.report.attempts.len(), 3);
}

/// SPEC 2.5: outcomes of attempts that started before the endpoint's last reset are stale
/// and change no state. A stale 503 still sets the endpoint's `not_before` (Retry-After)
/// after an operator reset it by hand.
#[test]
fn stale_retry_after_does_not_set_not_before_after_a_manual_reset() {
    let policy = endpoints(&["a", "b"]).build().unwrap();
    let engine = Arc::new(Engine::new(policy));
    let uri: http::Uri = "/".parse().unwrap();
    let headers = http::HeaderMap::new();
    let info = RequestInfo {
        method: &Method::GET,
        uri: &uri,
        headers: &headers,
    };
    let t0 = Instant::now();
    let mut call = Call::new(&engine, &info, BodyKind::Empty, CallOptions::default(), t0);
    let Action::Send(a) = call.poll_action(t0) else {
        panic!("first attempt expected")
    };
    assert!(engine.reset("a", t0 + ms(10)));
    let mut resp = http::HeaderMap::new();
    resp.insert("retry-after", "20".parse().unwrap());
    let t1 = t0 + ms(20);
    call.handle_outcome(
        a.number,
        AttemptOutcome::Response(ResponseInfo::new(
            http::StatusCode::SERVICE_UNAVAILABLE,
            &resp,
        )),
        t1,
    );
    let h = engine.health_of("a", t1).unwrap();
    assert_eq!(
        h.not_before, None,
        "a stale outcome changed the endpoint's state"
    );
    assert!(h.available);
}

/// SPEC 2.5: `not_before` is kept separately from the breaker, and a 502/503/504 counts as
/// a breaker failure. Attempts at a closed endpoint that is only cooling down (tried last)
/// are silently not counted, so its breaker never trips.
#[test]
fn failures_at_a_cooling_but_closed_endpoint_still_count_for_the_breaker() {
    let mut s = sim(endpoints(&["a", "b"]).budget(None));
    s.script(
        "a",
        Script::status(429)
            .header("retry-after", "20")
            .then(Script::status(503)),
    );
    s.script("b", Script::refuse());
    let first = s.run(Method::GET, CallOptions::default());
    assert_eq!(first.endpoints_attempted(), ["a", "b"]);
    for _ in 0..3 {
        let run = s.run(Method::GET, CallOptions::default());
        assert!(run.endpoints_attempted().contains(&"a"));
        assert_eq!(
            run.report
                .attempts
                .iter()
                .find(|r| &*r.endpoint_id == "a")
                .unwrap()
                .result,
            AttemptResult::Response(http::StatusCode::SERVICE_UNAVAILABLE)
        );
    }
    let h = s.engine().health_of("a", s.now()).unwrap();
    assert_eq!(
        h.state,
        BreakerState::Open,
        "three 503s in a row did not trip: {h:?}"
    );
}

/// SPEC 2.5: a `Retry-After` sets `not_before` also when the same response moves the
/// breaker: the third 503 in a row opens it (30 s) and asks for 120 s, and the endpoint is
/// not probed before the 120 s. Before, the transition made the attempt's epoch stale and
/// the `Retry-After` was dropped: the endpoint was probed after 30 s.
#[test]
fn a_retry_after_on_the_response_that_opens_the_breaker_is_kept() {
    let b = endpoints(&["a", "b"])
        .budget(None)
        .configure(|s| s.max_retry_after = Duration::from_secs(300));
    let mut s = sim(b);
    let busy = Script::status(503);
    let asks = Script::status(503).header("retry-after", "120");
    s.script(
        "a",
        busy.clone().then(busy).then(asks).then(Script::status(200)),
    );
    for _ in 0..3 {
        let run = s.run(Method::GET, CallOptions::default());
        assert_eq!(run.endpoints_attempted(), ["a", "b"]);
    }
    let h = s.engine().health_of("a", s.now()).unwrap();
    assert_eq!(h.state, BreakerState::Open);
    assert!(h.not_before.is_some(), "the Retry-After was dropped: {h:?}");
    s.advance(Duration::from_secs(31));
    let run = s.run(Method::GET, CallOptions::default());
    assert_eq!(run.endpoints_attempted(), ["b"], "probed before the 120 s");
    s.advance(Duration::from_secs(90));
    let run = s.run(Method::GET, CallOptions::default());
    assert_eq!(run.endpoints_attempted(), ["a"]);
}

/// SPEC 2.3: the narrow `{503}` trigger set is for calls that *rely on an idempotency
/// key*. A GET whose caller forbade failover still has retry `Always` from its safe method
/// and relies on no key, yet a 502 from its only endpoint is returned instead of retried.
#[test]
fn get_with_failover_forbidden_still_retries_502_on_the_same_endpoint() {
    let mut s = sim(endpoints(&["a"]).budget(None));
    s.script("a", Script::status(502).then(Script::status(200)));
    let run = s.run(
        Method::GET,
        CallOptions {
            failover: Some(Permission::Never),
            ..CallOptions::default()
        },
    );
    assert_eq!(
        run.report.attempts.len(),
        2,
        "502 was returned as an answer"
    );
    assert_eq!(run.report.status(), Some(http::StatusCode::OK));
}

// ------------------------------------------------- edges found by the adversarial run

fn direct_call(
    policy: Policy,
    method: Method,
    headers: http::HeaderMap,
    options: CallOptions,
    now: Instant,
) -> Call<'static> {
    // Each test's engine lives as long as the test process: the call borrows it.
    let engine: &'static Engine = Box::leak(Box::new(Engine::new(policy)));
    let uri: http::Uri = "/".parse().unwrap();
    let info = RequestInfo {
        method: &method,
        uri: &uri,
        headers: &headers,
    };
    Call::new(engine, &info, BodyKind::Empty, options, now)
}

/// SPEC 2.5, 2.6: an attempt whose timer was clipped to the deadline and fired a hair
/// early (timers rounded to whole milliseconds) is the deadline's cut: reported as the
/// deadline, not counted against the breaker, and no later attempt starts with a sliver of
/// time left.
#[test]
fn timer_clipped_to_the_deadline_firing_early_is_the_deadline_not_the_endpoint() {
    let policy = endpoints(&["a", "b"])
        .configure(|s| s.breaker.rule = BreakerRule::Consecutive { failures: 1 })
        .build()
        .unwrap();
    let t0 = Instant::now();
    let mut call = direct_call(
        policy,
        Method::GET,
        http::HeaderMap::new(),
        CallOptions {
            deadline: Some(ms(300)),
            ..CallOptions::default()
        },
        t0,
    );
    let Action::Send(a) = call.poll_action(t0) else {
        panic!()
    };
    assert_eq!(a.timeout, ms(300));
    // The adapter's timer fires 1 ms before the deadline.
    let t1 = t0 + ms(299);
    call.handle_outcome(
        a.number,
        AttemptOutcome::Timeout(TimeoutPhase::Response),
        t1,
    );
    assert_eq!(
        call.poll_action(t1),
        Action::Done,
        "an attempt was started with 1 ms left"
    );
    let engine = call.engine();
    let report = common::report(call);
    assert_eq!(report.attempts.len(), 1);
    assert_eq!(report.attempts[0].result, AttemptResult::Deadline);
    assert_eq!(report.stop_reason, StopReason::Deadline);
    assert_eq!(
        engine.health_of("a", t1).unwrap().state,
        BreakerState::Closed,
        "the caller's deadline tripped the endpoint's breaker"
    );
}

/// SPEC 1, 2.3, 2.5: a connect timeout that fires well before the deadline is the
/// endpoint's (undelivered: a GET fails over, the breaker counts it), even when the attempt
/// timer was clipped to the deadline. It used to end the call as "deadline" with 5 s left.
#[test]
fn connect_timeout_before_a_clipped_deadline_fails_over_and_counts() {
    let policy = endpoints(&["a", "b"])
        .configure(|s| s.breaker.rule = BreakerRule::Consecutive { failures: 1 })
        .build()
        .unwrap();
    let t0 = Instant::now();
    let mut call = direct_call(
        policy,
        Method::POST,
        http::HeaderMap::new(),
        CallOptions {
            deadline: Some(ms(10_000)),
            ..CallOptions::default()
        },
        t0,
    );
    let Action::Send(a) = call.poll_action(t0) else {
        panic!()
    };
    assert_eq!((a.timeout, a.connect_timeout), (ms(10_000), ms(5_000)));
    let t1 = t0 + ms(5_000);
    let connect = AttemptOutcome::Timeout(TimeoutPhase::Connect);
    call.handle_outcome(a.number, connect, t1);
    let Action::Send(b) = call.poll_action(t1) else {
        panic!("the call stopped at a connect timeout with 5 s left")
    };
    assert_eq!(b.endpoint, 1);
    assert_eq!(b.timeout, ms(5_000), "clipped to the time left");
    let engine = call.engine();
    assert_eq!(
        engine.health_of("a", t1).unwrap().state,
        BreakerState::Open,
        "the endpoint's own connect timeout did not count"
    );
    // b's connect timer is cut by the deadline too: its timeout is the deadline's.
    let t2 = t0 + ms(9_999);
    call.handle_outcome(b.number, connect, t2);
    assert_eq!(call.poll_action(t2), Action::Done);
    let report = common::report(call);
    assert_eq!(report.stop_reason, StopReason::Deadline);
    assert!(!report.may_have_executed);
    assert_eq!(
        engine.health_of("b", t2).unwrap().state,
        BreakerState::Closed,
        "the caller's deadline tripped b's breaker"
    );
}

/// SPEC 3, 5: framing headers from a caller, and more headers than the limit, reject the
/// call before anything is sent.
#[test]
fn framing_headers_and_too_many_headers_reject_the_call_before_any_send() {
    let t0 = Instant::now();
    let mut framing = http::HeaderMap::new();
    framing.insert("content-length", "8".parse().unwrap());
    let mut many = http::HeaderMap::new();
    for i in 0..=MAX_REQUEST_HEADERS {
        many.insert(
            http::HeaderName::try_from(format!("x-h{i}")).unwrap(),
            "v".parse().unwrap(),
        );
    }
    for headers in [framing, many] {
        let policy = endpoints(&["a"]).build().unwrap();
        let mut call = direct_call(policy, Method::POST, headers, CallOptions::default(), t0);
        assert_eq!(call.poll_action(t0), Action::Done, "an attempt was sent");
        let report = common::report(call);
        assert!(report.attempts.is_empty());
        assert_eq!(report.stop_reason, StopReason::InvalidCall);
    }
}

/// SPEC 3: framing headers, `host` and the request-id header cannot be endpoint headers,
/// and header-name settings cannot name framing headers.
#[test]
fn framing_and_identity_headers_are_rejected_in_the_configuration() {
    for name in [
        "content-length",
        "Transfer-Encoding",
        "connection",
        "te",
        "upgrade",
        "host",
        "x-request-id",
        "Idempotency-Key",
    ] {
        let e = Policy::builder()
            .endpoint(Endpoint::new("a", "http://a.example/").header(name, "1"))
            .build()
            .unwrap_err();
        assert!(
            matches!(e, ConfigError::InvalidHeader { .. }) && e.to_string().contains("\"a\""),
            "{name}: {e}"
        );
    }
    let e = Policy::builder()
        .endpoint(Endpoint::new("a", "http://a.example/"))
        .configure(|s| s.attempt_header = Some("content-length".into()))
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("attempt_header"), "{e}");
    let mut ep = Endpoint::new("a", "http://a.example/");
    for i in 0..100 {
        ep = ep.header(&format!("x-h{i}"), "v");
    }
    let e = Policy::builder().endpoint(ep).build().unwrap_err();
    assert!(e.to_string().contains("more than 64"), "{e}");
}

/// A probe's method is checked as the CLI's `[permissions]` are: a lower-case name is
/// another method than the one meant, and is refused naming `probe.method`.
#[test]
fn a_lower_case_probe_method_is_refused() {
    let probe = |method: &str| {
        let p = ProbeRequest {
            method: method.into(),
            ..ProbeRequest::default()
        };
        endpoints(&["a"]).configure(|s| s.probe = p).build()
    };
    let e = probe("get").unwrap_err();
    assert!(e.to_string().contains("probe.method"), "{e}");
    assert!(probe("HEAD").is_ok());
}

/// SPEC 3: a failure after a followed redirect is ambiguous (the endpoint answered), so an
/// unkeyed POST does not fail over.
#[test]
fn failure_after_a_followed_redirect_is_ambiguous() {
    let t0 = Instant::now();
    let (mut call, a) = post_redirected(307, "https://elsewhere.example/", t0);
    call.handle_outcome(a, AttemptOutcome::Failure(FailureClass::Undelivered), t0);
    assert_eq!(call.poll_action(t0), Action::Done, "failed over");
    let report = common::report(call);
    assert_eq!(
        report.attempts[0].result,
        AttemptResult::Failed(FailureClass::Ambiguous)
    );
    assert!(report.may_have_executed);
    assert_eq!(report.redirects.len(), 1);
}

/// An unkeyed POST over endpoints a and b whose first attempt, at a, followed one
/// redirect with `status` to `to`: the call, and that attempt's number.
fn post_redirected(status: u16, to: &str, t0: Instant) -> (Call<'static>, u32) {
    let policy = endpoints(&["a", "b"]).build().unwrap();
    let options = CallOptions::default();
    let mut call = direct_call(policy, Method::POST, http::HeaderMap::new(), options, t0);
    let Action::Send(a) = call.poll_action(t0) else {
        panic!()
    };
    let to: http::Uri = to.parse().unwrap();
    let redirects = vec![Redirect {
        attempt: a.number,
        status: http::StatusCode::from_u16(status).unwrap(),
        from: "https://a.example/".parse().unwrap(),
        cross_origin: to.host() != Some("a.example"),
        to,
    }];
    let hop = Input::Redirected {
        attempt: a.number,
        redirects,
    };
    call.handle(hop, t0);
    (call, a.number)
}

/// SPEC 1, 3: a redirect hop the client refused to build (tower's hook can say so) ends
/// the attempt ambiguous, not as an invalid call that sent nothing: its first request was
/// answered. Before, the call stopped "invalid" with nothing executed.
#[test]
fn a_hop_rejected_locally_after_a_followed_redirect_is_ambiguous() {
    let t0 = Instant::now();
    let (mut call, a) = post_redirected(307, "https://a.example/next", t0);
    let rejected = AttemptOutcome::Failure(FailureClass::RejectedLocally);
    call.handle_outcome(a, rejected, t0);
    assert_eq!(call.poll_action(t0), Action::Done, "no attempt at b");
    let report = common::report(call);
    assert_eq!(report.attempts.len(), 1, "{report:?}");
    assert_eq!(
        report.attempts[0].result,
        AttemptResult::Failed(FailureClass::Ambiguous)
    );
    assert_ne!(report.stop_reason, StopReason::InvalidCall, "{report:?}");
    assert!(report.may_have_executed);
}

/// SPEC 1, 3: a POST answered 303 may have been done; the 429 its GET hop then got (a
/// status in `not_processed`) does not unsay that, so the unkeyed POST does not fail over,
/// and the attempt's own result says it may have executed. Before, the attempt read as
/// not executed and the POST was sent to b: the work could run twice.
#[test]
fn a_response_in_not_processed_after_a_followed_redirect_may_have_executed() {
    let t0 = Instant::now();
    let (mut call, a) = post_redirected(303, "https://a.example/paid", t0);
    let busy = Input::Response {
        attempt: a,
        response: Head::new(http::StatusCode::TOO_MANY_REQUESTS),
        wall: None,
    };
    call.handle(busy, t0);
    assert_eq!(call.poll_action(t0), Action::Done, "no attempt at b");
    let report = common::report(call);
    assert_eq!(report.attempts.len(), 1, "{report:?}");
    let result = report.attempts[0].result;
    assert_eq!(
        result,
        AttemptResult::AfterRedirect(http::StatusCode::TOO_MANY_REQUESTS)
    );
    assert_eq!(result.status(), Some(http::StatusCode::TOO_MANY_REQUESTS));
    assert!(report.may_have_executed);
    assert_eq!(report.redirects.len(), 1);
}

/// A failed body copy reported for an attempt that followed a redirect (an adapter should
/// answer with the 3xx instead) cannot say nothing was sent: the first request was
/// answered. Before, it read `ReplayFailed`, which promises the attempt was never sent.
#[test]
fn a_replay_failure_after_a_followed_redirect_is_ambiguous() {
    let t0 = Instant::now();
    let (mut call, a) = post_redirected(307, "https://a.example/next", t0);
    call.handle(Input::ReplayFailed { attempt: a }, t0);
    assert_eq!(call.poll_action(t0), Action::Done);
    let report = common::report(call);
    let result = report.attempts[0].result;
    assert_eq!(result, AttemptResult::Failed(FailureClass::Ambiguous));
    assert!(report.may_have_executed);
}

/// The other side of the rule above: an answer not in `not_processed` after a redirect
/// says by itself that the work may have been done, and reads as a plain response.
#[test]
fn an_answer_not_in_not_processed_after_a_redirect_is_a_plain_response() {
    let t0 = Instant::now();
    let (mut call, a) = post_redirected(303, "https://a.example/paid", t0);
    let ok = Input::Response {
        attempt: a,
        response: Head::new(http::StatusCode::OK),
        wall: None,
    };
    call.handle(ok, t0);
    assert_eq!(call.poll_action(t0), Action::Done);
    let report = common::report(call);
    let result = report.attempts[0].result;
    assert_eq!(result, AttemptResult::Response(http::StatusCode::OK));
}

/// SPEC 4: the result event comes once per call, also when the result is taken and the
/// call dropped (a dropped call that had ended is not cancelled again).
#[test]
fn result_event_is_delivered_once_when_the_result_is_taken() {
    let results = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let r2 = results.clone();
    let sink: EventSink = Arc::new(move |e: &Event<'_>| {
        if matches!(e.kind, EventKind::Result { .. }) {
            r2.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    });
    let policy = endpoints(&["a"]).event_sink(Some(sink)).build().unwrap();
    let t0 = Instant::now();
    let mut call = direct_call(
        policy,
        Method::GET,
        http::HeaderMap::new(),
        CallOptions::default(),
        t0,
    );
    let Action::Send(a) = call.poll_action(t0) else {
        panic!()
    };
    let h = http::HeaderMap::new();
    call.handle_outcome(
        a.number,
        AttemptOutcome::Response(ResponseInfo::new(http::StatusCode::OK, &h)),
        t0,
    );
    assert_eq!(call.poll_action(t0), Action::Done);
    let report = common::report(call);
    assert_eq!(report.stop_reason, StopReason::Answered);
    assert_eq!(results.load(std::sync::atomic::Ordering::Relaxed), 1);
}

/// SPEC 4 and 9: a probe the caller sends through the breaker handle (`Engine::probe`,
/// as `Client::probe` does) reports its result as a call's probe does, before the
/// transition it causes.
#[test]
fn a_probe_outside_a_call_reports_its_result() {
    let (sink, seen) = common::event_names();
    let policy = endpoints(&["a"])
        .budget(None)
        .event_sink(Some(sink))
        .build()
        .unwrap();
    let engine = Engine::new(policy);
    let t0 = Instant::now();
    let circuit = engine.circuit("a").unwrap();
    for _ in 0..3 {
        circuit.allow(t0).unwrap().failure(t0);
    }
    let later = t0 + Duration::from_secs(31);
    let probe = engine.probe("a", later).unwrap();
    let result = probe.finish(Ok(http::StatusCode::OK), later);
    assert!(result.healthy);
    let n = seen.lock().unwrap().clone();
    let p = n
        .iter()
        .position(|e| e == "ProbeResult")
        .expect("no ProbeResult");
    let t = n.iter().rposition(|e| e == "BreakerTransition").unwrap();
    assert!(p < t, "{n:?}");
}

/// A simulator moved by the longest duration does not panic (the wall clock overflowed),
/// and its clocks stay in step: a call after it runs as any other.
#[test]
fn the_simulator_moves_by_any_duration_without_panicking() {
    let mut s = sim(endpoints(&["a"]));
    s.advance(Duration::MAX);
    s.advance(Duration::MAX);
    let run = s.run(Method::GET, CallOptions::default());
    assert_eq!(run.report.stop_reason, StopReason::Answered);
}

/// The simulator follows redirects within the attempt as every adapter does (SPEC 3): a
/// same-origin 302 is followed to the endpoint's next step, a 307 to another endpoint's
/// origin runs there (and that endpoint executed the call), and a hop to an origin no
/// endpoint has does not resolve, which after a redirect is ambiguous. Before, the 3xx
/// was the call's answer and the hop's execution was not seen.
#[test]
fn the_simulator_follows_redirects_within_the_attempt() {
    let mut s = sim(endpoints(&["a", "b"]));
    s.script(
        "a",
        Script::status(302)
            .header("location", "/final")
            .then(Script::status(200)),
    );
    let run = s.run(Method::GET, CallOptions::default());
    assert_eq!(run.report.status(), Some(http::StatusCode::OK));
    assert_eq!((run.executions("a"), run.executions("b")), (2, 0));
    assert_eq!(run.report.attempts.len(), 1);
    assert_eq!(run.report.redirects.len(), 1);

    let mut s = sim(endpoints(&["a", "b"]));
    s.script(
        "a",
        Script::status(307).header("location", "https://b.example/pay"),
    );
    let run = s.run(Method::POST, CallOptions::default());
    assert_eq!(run.report.status(), Some(http::StatusCode::OK));
    assert_eq!((run.executions("a"), run.executions("b")), (1, 1));
    assert_eq!(run.report.attempts.len(), 1, "a redirect is not an attempt");

    let mut s = sim(endpoints(&["a", "b"]));
    s.script(
        "a",
        Script::status(307).header("location", "https://elsewhere.example/pay"),
    );
    let run = s.run(Method::POST, CallOptions::default());
    assert!(run.report.may_have_executed);
    assert_eq!(
        run.executions("b"),
        0,
        "a POST that may have executed stays"
    );

    // Two endpoints on one host: a hop on that origin stays with the one redirecting.
    let policy = Policy::builder()
        .jitter(Jitter::None)
        .seed(7)
        .endpoint(Endpoint::new("x", "https://h.example/v2/KEY1"))
        .endpoint(Endpoint::new("y", "https://h.example/v2/KEY2"));
    let mut s = sim(policy);
    s.script("x", Script::refuse());
    s.script(
        "y",
        Script::status(302)
            .header("location", "/v2/final")
            .then(Script::status(200)),
    );
    let run = s.run(Method::GET, CallOptions::default());
    assert_eq!(run.report.status(), Some(http::StatusCode::OK));
    assert_eq!((run.executions("x"), run.executions("y")), (0, 2));
}

/// The simulator re-sends a refused credential as every adapter does (SPEC 9): a 401 for
/// a token the slot held is refreshed and re-sent once to the same endpoint within the
/// attempt; a 401 for a token just fetched is not re-sent (the call fails over). Before,
/// the 401 was the answer and the re-send's execution unseen.
#[test]
fn the_simulator_re_sends_a_refused_credential_once() {
    use baton_core::credential::CredentialSettings;
    let policy = Policy::builder()
        .jitter(Jitter::None)
        .seed(7)
        .endpoint(
            Endpoint::new("a", "https://a.example/").credential(CredentialSettings::default()),
        )
        .endpoint(Endpoint::new("b", "https://b.example/"));
    let mut s = sim(policy);
    s.script(
        "a",
        Script::status(200)
            .then(Script::status(401))
            .then(Script::status(200))
            .then(Script::status(401)),
    );
    // The first call's token is fetched for it: answered.
    let run = s.run(Method::GET, CallOptions::default());
    assert_eq!(run.report.status(), Some(http::StatusCode::OK));
    // The second holds it: refused, refreshed, re-sent once within the one attempt.
    let run = s.run(Method::POST, CallOptions::default());
    assert_eq!(run.report.status(), Some(http::StatusCode::OK));
    assert_eq!((run.executions("a"), run.executions("b")), (2, 0));
    assert_eq!(run.report.attempts.len(), 1);
    // The third holds the refreshed one: refused (a's fourth step), re-sent, and the
    // re-send (the script's last step again) refused too: the answer is no third send
    // there, the call fails over.
    let run = s.run(Method::GET, CallOptions::default());
    assert_eq!(run.executions("a"), 2);
    assert_eq!(run.report.status(), Some(http::StatusCode::OK));
    assert_eq!(run.report.endpoint_id(), Some("b"));
}

/// SPEC 4: no text shows an endpoint URL's path or query. A `)` or `'` inside a path or
/// query (the `url` crate leaves them unencoded) ended the URL there, and the rest of it
/// (keys among it) was printed as it was.
#[test]
fn scrubbed_urls_hide_a_path_or_query_holding_a_bracket_or_a_quote() {
    let cases = [
        (
            "error sending request for url (https://rpc.example/q?f=(a)&key=SECRET)",
            "error sending request for url (https://rpc.example:443)",
        ),
        (
            "url (https://api.example/odata/Orders('A1')/v2/SECRET)",
            "url (https://api.example:443)",
        ),
        (
            "see 'http://a.example:81/x)SECRET'.",
            "see 'http://a.example:81'.",
        ),
        ("(https://b.example)", "(https://b.example:443)"),
        (
            "no route to `https://c.example/q?a=`SECRET`",
            "no route to `https://c.example:443`",
        ),
    ];
    for (text, want) in cases {
        let got = baton_core::scrub_urls(text);
        assert_eq!(got, want);
        assert!(!got.contains("SECRET"), "{got}");
    }
}
