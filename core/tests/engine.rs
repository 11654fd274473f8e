//! Behaviour of the engine, driven through the simulator. Each test names the rule it pins.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use baton_core::sim::{Script, Sim, SimRequest};
use baton_core::*;

mod common;
use common::{Action, AttemptOutcome, Drive, ResponseInfo};
use http::{Method, StatusCode};

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

fn keyed(key: &str) -> CallOptions {
    CallOptions {
        idempotency_key: Some(key.into()),
        ..CallOptions::default()
    }
}

// ---------------------------------------------------------------- ordering

#[test]
fn endpoints_are_tried_in_priority_order() {
    let mut s = sim(endpoints(&["a", "b", "c"]));
    s.script("a", Script::status(503))
        .script("b", Script::status(502));
    let run = s.run(Method::GET, CallOptions::default());
    assert_eq!(run.endpoints_attempted(), ["a", "b", "c"]);
    assert_eq!(run.report.status(), Some(http::StatusCode::OK));
}

#[test]
fn eligibility_is_asked_once_per_endpoint_and_ineligible_endpoints_are_never_tried() {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let a2 = asked.clone();
    let mut s = sim(endpoints(&["a", "b", "c"]).eligible_fn(move |e, _| {
        a2.lock().unwrap().push(e.id().to_string());
        e.id() != "b"
    }));
    s.script("a", Script::status(503));
    let run = s.run(Method::GET, CallOptions::default());
    assert_eq!(run.endpoints_attempted(), ["a", "c"]);
    assert_eq!(*asked.lock().unwrap(), ["a", "b", "c"]);
    assert_eq!(run.executions("b"), 0);
}

#[test]
fn preferred_eligible_endpoint_goes_first_and_the_rest_keep_their_order() {
    let mut s = sim(endpoints(&["a", "b", "c"]));
    s.script("c", Script::status(503))
        .script("a", Script::status(503));
    let run = s.run(
        Method::GET,
        CallOptions {
            prefer: Some("c".into()),
            ..CallOptions::default()
        },
    );
    assert_eq!(run.endpoints_attempted(), ["c", "a", "b"]);
}

#[test]
fn preferred_but_ineligible_endpoint_is_not_tried() {
    let mut s = sim(endpoints(&["a", "b"]).eligible_fn(|e, _| e.id() == "a"));
    let run = s.run(
        Method::GET,
        CallOptions {
            prefer: Some("b".into()),
            ..CallOptions::default()
        },
    );
    assert_eq!(run.endpoints_attempted(), ["a"]);
}

#[test]
fn unknown_preferred_id_is_rejected_before_any_attempt() {
    let mut s = sim(endpoints(&["a"]));
    let run = s.run(
        Method::GET,
        CallOptions {
            prefer: Some("zz".into()),
            ..CallOptions::default()
        },
    );
    assert!(run.report.attempts.is_empty());
    assert_eq!(run.report.stop_reason, StopReason::UnknownEndpoint);
    let err = run.report.into_error().unwrap();
    assert_eq!(err.kind, ErrorKind::UnknownEndpoint("zz".into()));
}

#[test]
fn all_ineligible_ends_with_no_usable_endpoint_before_any_send() {
    let mut s = sim(endpoints(&["a", "b"]).eligible_fn(|_, _| false));
    let run = s.run(Method::GET, CallOptions::default());
    assert!(run.report.attempts.is_empty());
    assert_eq!(
        run.report.into_error().unwrap().kind,
        ErrorKind::NoUsableEndpoint
    );
}

fn trip(s: &mut Sim, id: &str) {
    // Three GETs that all fail at `id` trip its breaker (consecutive rule, 3).
    let saved = Script::status(200);
    s.script(id, Script::status(503));
    for _ in 0..3 {
        s.run(
            Method::GET,
            CallOptions {
                prefer: Some(id.into()),
                max_attempts: Some(1),
                ..CallOptions::default()
            },
        );
    }
    s.script(id, saved);
    let h = s.engine().health_of(id, s.now()).unwrap();
    assert_eq!(h.state, BreakerState::Open);
}

#[test]
fn open_endpoint_is_tried_last_by_default() {
    let mut s = sim(endpoints(&["a", "b"]));
    trip(&mut s, "a");
    s.script("b", Script::status(503));
    let run = s.run(Method::GET, CallOptions::default());
    assert_eq!(run.endpoints_attempted(), ["b", "a"]);
    assert_eq!(run.events_named("CooldownSkip").len(), 1);
}

#[test]
fn open_endpoint_is_skipped_in_skip_mode_with_an_event() {
    let mut s = sim(endpoints(&["a", "b"]).unavailable(Unavailable::Skip));
    trip(&mut s, "a");
    s.script("b", Script::status(503));
    let run = s.run(Method::GET, CallOptions::default());
    // With a skipped, b is the only usable endpoint: it gets the single-endpoint default
    // of three attempts.
    assert_eq!(run.endpoints_attempted(), ["b", "b", "b"]);
    assert_eq!(run.executions("a"), 0);
    assert!(run.events_named("CooldownSkip")[0]
        .text
        .contains("skipped: true"));
}

#[test]
fn total_outage_in_skip_mode_fails_without_a_request() {
    let mut s = sim(endpoints(&["a"]).unavailable(Unavailable::Skip));
    trip(&mut s, "a");
    let run = s.run(Method::GET, CallOptions::default());
    assert!(run.report.attempts.is_empty());
    assert_eq!(run.report.stop_reason, StopReason::NoUsableEndpoint);
}

#[test]
fn total_outage_in_try_last_mode_still_sends() {
    let mut s = sim(endpoints(&["a"]));
    trip(&mut s, "a");
    let run = s.run(Method::GET, CallOptions::default());
    assert_eq!(run.report.status(), Some(http::StatusCode::OK));
}

#[test]
fn preferred_endpoint_that_is_open_stays_with_the_unavailable_ones() {
    let mut s = sim(endpoints(&["a", "b", "c"]));
    trip(&mut s, "c");
    let run = s.run(
        Method::GET,
        CallOptions {
            prefer: Some("c".into()),
            ..CallOptions::default()
        },
    );
    assert_eq!(run.endpoints_attempted(), ["a"]);
}

#[test]
fn a_call_restricted_to_one_endpoint_reaches_it_or_nothing() {
    let mut s = sim(endpoints(&["a", "b", "c"]));
    trip(&mut s, "c");
    let only_c = CallOptions {
        only: Some("c".into()),
        prefer: Some("c".into()),
        ..CallOptions::default()
    };
    // Unavailable, tried last: the only one, so it is tried; no other endpoint is.
    let run = s.run(Method::GET, only_c.clone());
    assert_eq!(run.endpoints_attempted()[0], "c");
    assert!(
        run.endpoints_attempted().iter().all(|e| *e == "c"),
        "{:?}",
        run.endpoints_attempted()
    );
    s.script("b", Script::status(503));
    let only_b = CallOptions {
        only: Some("b".into()),
        ..CallOptions::default()
    };
    let run = s.run(Method::GET, only_b);
    assert!(!run.endpoints_attempted().is_empty());
    assert!(run.endpoints_attempted().iter().all(|e| *e == "b"));
    assert_eq!(run.executions("a"), 0);
    let unknown = CallOptions {
        only: Some("zz".into()),
        ..CallOptions::default()
    };
    let run = s.run(Method::GET, unknown);
    assert!(run.report.attempts.is_empty());
    assert_eq!(run.report.stop_reason, StopReason::UnknownEndpoint);
}

#[test]
fn max_attempts_caps_the_total() {
    let mut s = sim(endpoints(&["a", "b", "c"]));
    for id in ["a", "b", "c"] {
        s.script(id, Script::status(503));
    }
    let run = s.run(
        Method::GET,
        CallOptions {
            max_attempts: Some(2),
            ..CallOptions::default()
        },
    );
    assert_eq!(run.report.attempts.len(), 2);
    assert_eq!(run.report.stop_reason, StopReason::AttemptsExhausted);
}

#[test]
fn max_attempts_above_one_round_starts_new_rounds_after_backoff() {
    let mut s = sim(endpoints(&["a", "b"]).max_attempts(5).budget(None));
    s.script("a", Script::status(503))
        .script("b", Script::status(503));
    let run = s.run(Method::GET, CallOptions::default());
    assert_eq!(run.endpoints_attempted(), ["a", "b", "a", "b", "a"]);
    let waits = run.events_named("BackoffWait");
    assert_eq!(waits.len(), 2, "one wait per new round");
    assert!(waits[0].text.contains("200ms") && waits[0].text.contains("Round"));
    assert!(waits[1].text.contains("400ms"));
}

// ---------------------------------------------------------------- permission

#[test]
fn refused_primary_always_fails_over_for_post() {
    let mut s = sim(endpoints(&["a", "b"]));
    s.script("a", Script::refuse());
    let run = s.run(Method::POST, CallOptions::default());
    assert_eq!(run.endpoints_attempted(), ["a", "b"]);
    assert_eq!(run.report.status(), Some(http::StatusCode::OK));
    assert_eq!((run.executions("a"), run.executions("b")), (0, 1));
}

#[test]
fn a_rejected_certificate_fails_over_and_is_never_retried_at_its_endpoint() {
    // One endpoint: the schedule would give it 3 attempts; an untrusted handshake ends
    // the call after the first.
    let mut s = sim(endpoints(&["a"]));
    s.script("a", Script::untrusted());
    let run = s.run(Method::GET, CallOptions::default());
    assert_eq!(run.endpoints_attempted(), ["a"]);
    assert_eq!(run.report.stop_reason, StopReason::AttemptsExhausted);
    assert!(!run.report.may_have_executed);
    // Several rounds: later rounds skip the untrusted endpoint; an unkeyed POST fails
    // over (nothing was sent).
    let mut s = sim(endpoints(&["a", "b"]).max_attempts(4));
    s.script("a", Script::untrusted())
        .script("b", Script::status(503));
    let run = s.run(Method::POST, CallOptions::default());
    assert_eq!(run.endpoints_attempted(), ["a", "b"]);
    let mut s = sim(endpoints(&["a", "b"]).max_attempts(4));
    s.script("a", Script::untrusted())
        .script("b", Script::status(503));
    let run = s.run(Method::GET, CallOptions::default());
    assert_eq!(run.endpoints_attempted(), ["a", "b", "b", "b"]);
}

#[test]
fn a_refused_credential_ends_its_endpoint_for_the_call() {
    use baton_core::credential::CredentialSettings;
    let with_slot = |ids: &[&str], max: u32| {
        let mut b = Policy::builder()
            .jitter(Jitter::None)
            .seed(7)
            .max_attempts(max);
        for id in ids {
            b = b.endpoint(
                Endpoint::new(*id, format!("https://{id}.example/"))
                    .credential(CredentialSettings::default()),
            );
        }
        sim(b)
    };
    // One endpoint answering 401 to every token: the schedule would give it 3 attempts;
    // the first refusal (after the attempt's own refresh) returns the 401.
    let mut s = with_slot(&["a"], 3);
    s.script("a", Script::status(401));
    let run = s.run(Method::GET, CallOptions::default());
    assert_eq!(run.endpoints_attempted(), ["a"]);
    assert_eq!(run.report.stop_reason, StopReason::AttemptsExhausted);
    assert!(
        matches!(run.report.outcome, Outcome::Response { status, .. } if status == StatusCode::UNAUTHORIZED),
        "{:?}",
        run.report.outcome
    );
    let first = &run.report.attempts[0];
    assert!(first.credential_refused, "{first}");
    assert!(first.to_string().contains("credential refused"), "{first}");
    // Several rounds: later rounds skip it; a POST fails over too (a 401 is a refusal),
    // and b's 503 may have executed it.
    for (method, want) in [
        (Method::GET, &["a", "b", "b", "b"][..]),
        (Method::POST, &["a", "b"][..]),
    ] {
        let mut s = with_slot(&["a", "b"], 4);
        s.script("a", Script::status(401))
            .script("b", Script::status(503));
        let run = s.run(method.clone(), CallOptions::default());
        assert_eq!(run.endpoints_attempted(), want, "{method}");
        assert!(!run.report.attempts[1].credential_refused);
    }
    // A 403 is not a refusal unless configured, and an endpoint without a slot keeps
    // its schedule.
    let mut s = sim(endpoints(&["a"])
        .max_attempts(3)
        .extend_trigger_statuses(&[401]));
    s.script("a", Script::status(401));
    let run = s.run(Method::GET, CallOptions::default());
    assert_eq!(run.endpoints_attempted(), ["a", "a", "a"]);
    assert!(run.report.attempts.iter().all(|r| !r.credential_refused));
}

#[test]
fn h2_refusals_fail_over_and_resets_after_the_request_do_not() {
    for (script, failover) in [
        (Script::refused_stream(), true),
        (Script::go_away(true), true),
        (Script::go_away(false), false),
        (Script::stream_reset(), false),
    ] {
        let mut s = sim(endpoints(&["a", "b"]));
        s.script("a", script.clone());
        let run = s.run(Method::POST, CallOptions::default());
        let want: &[&str] = if failover { &["a", "b"] } else { &["a"] };
        assert_eq!(run.endpoints_attempted(), want, "{script:?}");
        let first = run.report.attempts[0].result;
        assert_eq!(
            first.may_have_executed(&StatusSet::new()),
            !failover,
            "{script:?}"
        );
        assert_eq!(run.executions("a"), usize::from(!failover), "{script:?}");
    }
}

#[test]
fn ambiguous_failure_never_reaches_second_endpoint_for_post_without_key() {
    for script in [Script::reset(), Script::black_hole()] {
        let mut s = sim(endpoints(&["a", "b"]).attempt_timeout(ms(500)));
        s.script("a", script);
        let run = s.run(Method::POST, CallOptions::default());
        assert_eq!(run.endpoints_attempted(), ["a"]);
        assert_eq!(run.executions("b"), 0);
        assert!(run.report.may_have_executed);
        assert_eq!(run.report.stop_reason, StopReason::NotPermitted);
    }
}

#[test]
fn ambiguous_failure_of_get_fails_over() {
    let mut s = sim(endpoints(&["a", "b"]).attempt_timeout(ms(500)));
    s.script("a", Script::black_hole());
    let run = s.run(Method::GET, CallOptions::default());
    assert_eq!(run.endpoints_attempted(), ["a", "b"]);
    assert_eq!(run.report.status(), Some(http::StatusCode::OK));
}

#[test]
fn keyed_post_after_ambiguous_failure_is_pinned_to_the_same_endpoint() {
    let mut s = sim(endpoints(&["a", "b"]));
    s.script(
        "a",
        Script::reset()
            .then(Script::reset())
            .then(Script::status(201)),
    );
    let run = s.run(Method::POST, keyed("k-1"));
    assert_eq!(run.endpoints_attempted(), ["a", "a", "a"]);
    assert_eq!(run.report.status(), Some(http::StatusCode::CREATED));
    assert_eq!(run.executions("b"), 0);
    assert_eq!(
        run.report.attempts[1].result,
        AttemptResult::Failed(FailureClass::Ambiguous)
    );
}

#[test]
fn pinned_call_stops_after_pinned_attempts() {
    let mut s = sim(endpoints(&["a", "b"]).pinned_attempts(2));
    s.script("a", Script::reset());
    let run = s.run(Method::POST, keyed("k-2"));
    assert_eq!(run.endpoints_attempted(), ["a", "a"]);
    assert_eq!(run.executions("b"), 0);
    assert_eq!(run.report.stop_reason, StopReason::AttemptsExhausted);
}

/// SPEC 2.6: a pinned endpoint's attempts default to `attempts_per_endpoint` when that was
/// set explicitly, and an endpoint's own setting is explicit for it (else 3).
#[test]
fn pinned_call_defaults_to_the_endpoints_own_attempts_per_endpoint() {
    let b = Policy::builder()
        .jitter(Jitter::None)
        .endpoint(Endpoint::new("a", "https://a.example/").attempts_per_endpoint(2))
        .endpoint(Endpoint::new("b", "https://b.example/"));
    let mut s = sim(b);
    s.script("a", Script::reset());
    let run = s.run(Method::POST, keyed("k-own"));
    assert_eq!(run.endpoints_attempted(), ["a", "a"]);
    assert_eq!(run.executions("b"), 0);
    assert_eq!(run.report.stop_reason, StopReason::AttemptsExhausted);

    // The policy's pinned_attempts, and a call's own attempts_per_endpoint, still win.
    let b = Policy::builder()
        .jitter(Jitter::None)
        .pinned_attempts(4)
        .endpoint(Endpoint::new("a", "https://a.example/").attempts_per_endpoint(2))
        .endpoint(Endpoint::new("b", "https://b.example/"));
    let mut s = sim(b);
    s.script("a", Script::reset());
    let run = s.run(Method::POST, keyed("k-pin"));
    assert_eq!(run.endpoints_attempted(), ["a"; 4]);
    let b = Policy::builder()
        .jitter(Jitter::None)
        .endpoint(Endpoint::new("a", "https://a.example/").attempts_per_endpoint(2))
        .endpoint(Endpoint::new("b", "https://b.example/"));
    let mut s = sim(b);
    s.script("a", Script::reset());
    let mut options = keyed("k-call");
    options.attempts_per_endpoint = Some(1);
    let run = s.run(Method::POST, options);
    assert_eq!(run.endpoints_attempted(), ["a"]);
}

#[test]
fn keyed_post_fails_over_while_undelivered_then_pins() {
    let mut s = sim(endpoints(&["a", "b", "c"]));
    s.script("a", Script::refuse())
        .script("b", Script::reset().then(Script::status(200)));
    let run = s.run(Method::POST, keyed("k-3"));
    assert_eq!(run.endpoints_attempted(), ["a", "b", "b"]);
    assert_eq!(run.executions("c"), 0);
}

#[test]
fn keyed_failover_within_idempotency_group_counts_as_retry() {
    let b = Policy::builder()
        .jitter(Jitter::None)
        .endpoint(Endpoint::new("eu", "https://eu.pay.example/").group("pay"))
        .endpoint(Endpoint::new("us", "https://us.pay.example/").group("pay"))
        .endpoint(Endpoint::new("other", "https://other.example/"));
    let mut s = sim(b);
    s.script("eu", Script::reset());
    let run = s.run(Method::POST, keyed("k-4"));
    assert_eq!(run.endpoints_attempted(), ["eu", "us"]);
    assert_eq!(run.executions("other"), 0);
}

#[test]
fn idempotency_group_does_not_help_a_call_without_key() {
    let b = Policy::builder()
        .endpoint(Endpoint::new("eu", "https://eu.pay.example/").group("pay"))
        .endpoint(Endpoint::new("us", "https://us.pay.example/").group("pay"));
    let mut s = sim(b);
    s.script("eu", Script::reset());
    let run = s.run(Method::POST, CallOptions::default());
    assert_eq!(run.endpoints_attempted(), ["eu"]);
}

#[test]
fn deny_makes_at_most_one_attempt_even_when_undelivered() {
    let mut s = sim(endpoints(&["a", "b"]));
    s.script("a", Script::refuse());
    let run = s.run(
        Method::GET,
        CallOptions {
            deny: true,
            ..CallOptions::default()
        },
    );
    assert_eq!(run.report.attempts.len(), 1);
}

#[test]
fn call_setting_overrides_inference() {
    let mut s = sim(endpoints(&["a", "b"]).attempt_timeout(ms(100)));
    s.script("a", Script::black_hole());
    let run = s.run(
        Method::POST,
        CallOptions {
            failover: Some(Permission::Always),
            retry: Some(Permission::Always),
            ..CallOptions::default()
        },
    );
    assert_eq!(run.endpoints_attempted(), ["a", "b"]);
}

#[test]
fn policy_fn_is_called_once_and_may_allow_failover_for_reads_sent_as_post() {
    let calls = Arc::new(Mutex::new(0));
    let c2 = calls.clone();
    let mut s = sim(endpoints(&["a", "b"])
        .attempt_timeout(ms(100))
        .permission_fn(move |req| {
            *c2.lock().unwrap() += 1;
            if req.headers.contains_key("x-read") {
                PermissionOverride::both(Permission::Always)
            } else {
                PermissionOverride::default()
            }
        }));
    s.script("a", Script::black_hole());
    let run = s.run_request(
        SimRequest::new(Method::POST).header("x-read", "1"),
        CallOptions::default(),
    );
    assert_eq!(run.endpoints_attempted(), ["a", "b"]);
    assert_eq!(*calls.lock().unwrap(), 1);
    let run = s.run(Method::POST, CallOptions::default());
    assert_eq!(run.endpoints_attempted(), ["a"]);
}

#[test]
fn not_processed_429_leaves_the_endpoint_unexecuted_so_post_may_fail_over() {
    let mut s = sim(endpoints(&["a", "b"]));
    s.script("a", Script::status(429));
    let run = s.run(Method::POST, CallOptions::default());
    assert_eq!(run.endpoints_attempted(), ["a", "b"]);
    assert_eq!(run.report.status(), Some(http::StatusCode::OK));
    // Only b may have done the work.
    assert!(run.report.may_have_executed);
}

#[test]
fn not_processed_can_be_extended_with_503() {
    let mut s = sim(endpoints(&["a", "b"]).extend_not_processed(&[503]));
    s.script("a", Script::status(503));
    let run = s.run(Method::POST, CallOptions::default());
    assert_eq!(run.endpoints_attempted(), ["a", "b"]);
}

#[test]
fn post_503_without_key_is_returned_not_failed_over() {
    let mut s = sim(endpoints(&["a", "b"]));
    s.script("a", Script::status(503));
    let run = s.run(Method::POST, CallOptions::default());
    assert_eq!(run.endpoints_attempted(), ["a"]);
    assert_eq!(
        run.report.status(),
        Some(http::StatusCode::SERVICE_UNAVAILABLE)
    );
    assert_eq!(run.report.stop_reason, StopReason::NotPermitted);
}

#[test]
fn may_have_executed_is_false_when_nothing_reached_a_provider() {
    let mut s = sim(endpoints(&["a", "b"]));
    s.script("a", Script::refuse())
        .script("b", Script::connect_timeout());
    let run = s.run(Method::POST, CallOptions::default());
    assert!(!run.report.may_have_executed);
    assert_eq!(run.report.into_error().unwrap().kind, ErrorKind::Failover);
}

// ---------------------------------------------------------------- trigger

#[test]
fn keyed_call_treats_500_502_504_as_answers_and_503_as_trigger() {
    for (code, tries) in [(500, 1), (502, 1), (504, 1), (503, 2)] {
        let mut s = sim(endpoints(&["a"]).attempts_per_endpoint(2));
        s.script("a", Script::status(code));
        let run = s.run(Method::POST, keyed("k"));
        assert_eq!(run.report.attempts.len(), tries, "status {code}");
    }
}

#[test]
fn safe_call_triggers_on_502_503_504_but_not_500() {
    for (code, tries) in [(500, 1), (502, 2), (503, 2), (504, 2), (404, 1)] {
        let mut s = sim(endpoints(&["a", "b"]));
        s.script("a", Script::status(code));
        let run = s.run(Method::GET, CallOptions::default());
        assert_eq!(run.report.attempts.len(), tries, "status {code}");
    }
}

#[test]
fn trigger_set_is_configurable() {
    let mut s = sim(endpoints(&["a", "b"]).extend_trigger_statuses(&[500]));
    s.script("a", Script::status(500));
    let run = s.run(Method::GET, CallOptions::default());
    assert_eq!(run.endpoints_attempted(), ["a", "b"]);
}

#[test]
fn classifier_relabels_delete_404_after_ambiguous_attempt_as_success() {
    let mut s = sim(endpoints(&["a"]).classify_fn(|r| {
        (r.method == Method::DELETE && r.status == 404 && r.earlier_ambiguous)
            .then_some(Verdict::Success)
    }));
    s.script("a", Script::reset().then(Script::status(404)));
    let run = s.run(Method::DELETE, keyed("del-1"));
    assert_eq!(run.report.attempts.len(), 2);
    assert!(matches!(
        run.report.outcome,
        Outcome::Response {
            classified_success: true,
            ..
        }
    ));
}

#[test]
fn classifier_can_turn_an_answer_into_a_trigger() {
    let mut s = sim(endpoints(&["a", "b"])
        .classify_fn(|r| (r.headers.contains_key("x-node-behind")).then_some(Verdict::Trigger)));
    s.script("a", Script::status(200).header("x-node-behind", "1"));
    let run = s.run(Method::GET, CallOptions::default());
    assert_eq!(run.endpoints_attempted(), ["a", "b"]);
}

#[test]
fn json_rpc_error_inside_200_is_an_answer() {
    let mut s = sim(endpoints(&["a", "b"]));
    s.script("a", Script::status(200));
    let run = s.run(Method::POST, CallOptions::default());
    assert_eq!(run.report.attempts.len(), 1);
    assert_eq!(run.report.stop_reason, StopReason::Answered);
}

#[test]
fn rejected_locally_ends_the_call_as_invalid_without_breaker_count() {
    let mut s = sim(endpoints(&["a", "b"]));
    s.script("a", Script::reject());
    let run = s.run(Method::GET, CallOptions::default());
    assert_eq!(run.report.attempts.len(), 1);
    assert_eq!(run.report.stop_reason, StopReason::InvalidCall);
    assert_eq!(
        s.engine()
            .health_of("a", s.now())
            .unwrap()
            .consecutive_failures,
        0
    );
}

// ---------------------------------------------------------------- replay

#[test]
fn one_shot_body_allows_no_later_attempt() {
    let mut s = sim(endpoints(&["a", "b"]));
    s.script("a", Script::refuse());
    let run = s.run_request(
        SimRequest::new(Method::POST).body(BodyKind::OneShot),
        CallOptions::default(),
    );
    assert_eq!(run.report.attempts.len(), 1);
    assert_eq!(run.report.stop_reason, StopReason::NotReplayable);
    assert_eq!(run.events_named("NotReplayable").len(), 1);
}

#[test]
fn later_attempts_ask_for_a_fresh_body_copy_and_a_failed_copy_ends_the_call() {
    let policy = endpoints(&["a", "b"]).build().unwrap();
    let engine = Arc::new(Engine::new(policy));
    let (uri, headers) = ("/".parse().unwrap(), http::HeaderMap::new());
    let info = RequestInfo {
        method: &Method::PUT,
        uri: &uri,
        headers: &headers,
    };
    let t = Instant::now();
    let mut call = Call::new(
        &engine,
        &info,
        BodyKind::Replayable,
        CallOptions::default(),
        t,
    );
    let Action::Send(a1) = call.poll_action(t) else {
        panic!()
    };
    assert!(!a1.fresh_body);
    call.handle_outcome(1, AttemptOutcome::Failure(FailureClass::Undelivered), t);
    let Action::Send(a2) = call.poll_action(t) else {
        panic!()
    };
    assert!(a2.fresh_body);
    assert!(call.replay_failed(a2.number, t));
    assert_eq!(call.poll_action(t), Action::Done);
    let r = common::report(call);
    assert_eq!(r.stop_reason, StopReason::ReplayFailed);
    assert_eq!(r.attempts[1].result, AttemptResult::ReplayFailed);
    assert!(!r.may_have_executed);
}

#[test]
fn empty_body_never_needs_a_copy() {
    let mut s = sim(endpoints(&["a", "b"]));
    s.script("a", Script::refuse());
    let run = s.run(Method::GET, CallOptions::default());
    assert_eq!(run.report.attempts.len(), 2);
    // The second attempt of a call without a body asks for no fresh copy.
    let engine = Arc::new(Engine::new(endpoints(&["a", "b"]).build().unwrap()));
    let t = Instant::now();
    let mut call = raw_call(&engine, Method::GET, t);
    let Action::Send(a1) = call.poll_action(t) else {
        panic!()
    };
    call.handle_outcome(
        a1.number,
        AttemptOutcome::Failure(FailureClass::Undelivered),
        t,
    );
    let Action::Send(a2) = call.poll_action(t) else {
        panic!()
    };
    assert_eq!(a2.endpoint, 1);
    assert!(!a1.fresh_body && !a2.fresh_body);
}

// ---------------------------------------------------------------- health

#[test]
fn consecutive_failures_open_the_breaker_for_30s() {
    let mut s = sim(endpoints(&["a", "b"]));
    trip(&mut s, "a");
    let h = s.engine().health_of("a", s.now()).unwrap();
    assert_eq!(h.open_time, Duration::from_secs(30));
    assert!(!h.available);
}

#[test]
fn success_ends_a_failure_streak() {
    let mut s = sim(endpoints(&["a", "b"]));
    let one = || CallOptions {
        max_attempts: Some(1),
        ..CallOptions::default()
    };
    s.script(
        "a",
        Script::status(503)
            .then(Script::status(503))
            .then(Script::status(200))
            .then(Script::status(503)),
    );
    for _ in 0..4 {
        s.run(Method::GET, one());
    }
    let h = s.engine().health_of("a", s.now()).unwrap();
    assert_eq!(h.state, BreakerState::Closed);
    assert_eq!(h.consecutive_failures, 1);
}

#[test]
fn triggering_statuses_outside_502_504_count_as_success_for_the_breaker() {
    let mut s = sim(endpoints(&["a", "b"]).extend_trigger_statuses(&[500]));
    s.script("a", Script::status(500));
    for _ in 0..5 {
        s.run(Method::GET, CallOptions::default());
    }
    assert_eq!(
        s.engine().health_of("a", s.now()).unwrap().state,
        BreakerState::Closed
    );
}

#[test]
fn half_open_admits_one_probe_and_success_closes() {
    let mut s = sim(endpoints(&["a", "b"]));
    trip(&mut s, "a");
    s.advance(Duration::from_secs(31));
    let h = s.engine().health_of("a", s.now()).unwrap();
    assert_eq!(h.state, BreakerState::HalfOpen);
    let run = s.run(Method::GET, CallOptions::default());
    assert_eq!(run.endpoints_attempted(), ["a"]);
    assert_eq!(run.events_named("ProbeResult").len(), 1);
    assert_eq!(
        s.engine().health_of("a", s.now()).unwrap().state,
        BreakerState::Closed
    );
}

#[test]
fn failed_probe_reopens_with_grown_open_time_up_to_the_cap() {
    let mut s = sim(endpoints(&["a", "b"]));
    trip(&mut s, "a");
    s.script("a", Script::status(503));
    let mut expected = [60u64, 120, 240, 300, 300].into_iter();
    let mut open = 30;
    for _ in 0..5 {
        s.advance(Duration::from_secs(open + 1));
        s.run(Method::GET, CallOptions::default());
        let h = s.engine().health_of("a", s.now()).unwrap();
        assert_eq!(h.state, BreakerState::Open);
        open = expected.next().unwrap();
        assert_eq!(h.open_time, Duration::from_secs(open));
    }
    // A successful probe resets the open time to its base.
    s.script("a", Script::status(200));
    s.advance(Duration::from_secs(open + 1));
    s.run(Method::GET, CallOptions::default());
    let h = s.engine().health_of("a", s.now()).unwrap();
    assert_eq!(
        (h.state, h.open_time),
        (BreakerState::Closed, Duration::from_secs(30))
    );
}

fn raw_call(engine: &Arc<Engine>, method: Method, t: Instant) -> Call<'_> {
    let (uri, headers) = ("/".parse().unwrap(), http::HeaderMap::new());
    let info = RequestInfo {
        method: &method,
        uri: &uri,
        headers: &headers,
    };
    Call::new(engine, &info, BodyKind::Empty, CallOptions::default(), t)
}

fn open_engine(ids: &[&str]) -> (Arc<Engine>, Instant) {
    let engine = Arc::new(Engine::new(endpoints(ids).build().unwrap()));
    let t = Instant::now();
    let h = http::HeaderMap::new();
    for _ in 0..3 {
        let mut c = raw_call(&engine, Method::GET, t);
        let Action::Send(a) = c.poll_action(t) else {
            panic!()
        };
        assert_eq!(a.endpoint, 0);
        c.handle_outcome(
            a.number,
            AttemptOutcome::Response(ResponseInfo::new(http::StatusCode::BAD_GATEWAY, &h)),
            t,
        );
    }
    (engine, t)
}

#[test]
fn concurrent_calls_never_exceed_the_probe_quota() {
    let (engine, t) = open_engine(&["a", "b"]);
    let t = t + Duration::from_secs(31);
    let mut c1 = raw_call(&engine, Method::GET, t);
    let mut c2 = raw_call(&engine, Method::GET, t);
    let Action::Send(a1) = c1.poll_action(t) else {
        panic!()
    };
    assert!(a1.probe);
    assert_eq!(a1.endpoint, 0);
    let Action::Send(a2) = c2.poll_action(t) else {
        panic!()
    };
    assert_eq!(a2.endpoint, 1, "the probe slot is taken; b is available");
    assert_eq!(engine.health(0, t).unwrap().probes_in_flight, 1);
}

#[test]
fn dropped_probe_call_frees_its_slot_at_once() {
    let (engine, t) = open_engine(&["a", "b"]);
    let t = t + Duration::from_secs(31);
    let mut c1 = raw_call(&engine, Method::GET, t);
    let Action::Send(a1) = c1.poll_action(t) else {
        panic!()
    };
    assert!(a1.probe);
    drop(c1);
    assert_eq!(engine.health(0, t).unwrap().probes_in_flight, 0);
    let mut c2 = raw_call(&engine, Method::GET, t);
    let Action::Send(a2) = c2.poll_action(t) else {
        panic!()
    };
    assert!(a2.probe && a2.endpoint == 0);
}

#[test]
fn lost_probe_expires_after_one_base_open_period() {
    let (engine, t) = open_engine(&["a", "b"]);
    let t1 = t + Duration::from_secs(31);
    let mut c1 = raw_call(&engine, Method::GET, t1);
    let Action::Send(_) = c1.poll_action(t1) else {
        panic!()
    };
    std::mem::forget(c1); // never reports, never drops
    assert!(
        !engine
            .health(0, t1 + Duration::from_secs(29))
            .unwrap()
            .available
    );
    assert!(
        engine
            .health(0, t1 + Duration::from_secs(30))
            .unwrap()
            .available
    );
}

#[test]
fn stale_outcomes_change_no_state() {
    let policy = endpoints(&["a", "b"]).build().unwrap();
    let engine = Arc::new(Engine::new(policy));
    let t = Instant::now();
    let h = http::HeaderMap::new();
    // Five calls start at a before anything fails.
    let mut calls: Vec<Call<'_>> = (0..5).map(|_| raw_call(&engine, Method::GET, t)).collect();
    let nums: Vec<u32> = calls
        .iter_mut()
        .map(|c| match c.poll_action(t) {
            Action::Send(a) => a.number,
            other => panic!("{other:?}"),
        })
        .collect();
    for (c, n) in calls.iter_mut().zip(&nums).take(3) {
        c.handle_outcome(
            *n,
            AttemptOutcome::Response(ResponseInfo::new(http::StatusCode::BAD_GATEWAY, &h)),
            t,
        );
    }
    assert_eq!(engine.health(0, t).unwrap().state, BreakerState::Open);
    // Calls 4 and 5 started before the trip: their successes must not close it.
    for (c, n) in calls.iter_mut().zip(&nums).skip(3) {
        c.handle_outcome(
            *n,
            AttemptOutcome::Response(ResponseInfo::new(http::StatusCode::OK, &h)),
            t,
        );
    }
    assert_eq!(engine.health(0, t).unwrap().state, BreakerState::Open);
}

#[test]
fn manual_reset_closes_and_makes_older_outcomes_stale() {
    let (engine, t) = open_engine(&["a", "b"]);
    // An attempt at the open endpoint that started before the reset (tried last).
    let mut before = raw_call(&engine, Method::GET, t);
    let mut n = None;
    for _ in 0..4 {
        if let Action::Send(a) = before.poll_action(t) {
            if a.endpoint == 0 {
                n = Some(a.number);
                break;
            }
            let h = http::HeaderMap::new();
            let r = ResponseInfo::new(http::StatusCode::BAD_GATEWAY, &h);
            before.handle_outcome(a.number, AttemptOutcome::Response(r), t);
        }
    }
    let n = n.expect("the open endpoint is tried last");
    assert!(engine.reset("a", t));
    let h = engine.health(0, t).unwrap();
    assert_eq!(h.state, BreakerState::Closed);
    assert!(h.available);
    // Its failure arrives after the reset: stale, it changes nothing.
    before.handle_outcome(n, AttemptOutcome::Failure(FailureClass::Ambiguous), t);
    let h = engine.health(0, t).unwrap();
    assert_eq!((h.state, h.consecutive_failures), (BreakerState::Closed, 0));
}

#[test]
fn failure_rate_rule_opens_at_half_failures_after_min_calls() {
    let b = endpoints(&["a", "b"]).breaker(Breaker {
        rule: BreakerRule::failure_rate(),
        ..Breaker::default()
    });
    let mut s = sim(b);
    let one = || CallOptions {
        max_attempts: Some(1),
        ..CallOptions::default()
    };
    // Alternate success and failure: 50 % once 10 are recorded.
    let mut script = Script::status(200);
    for i in 1..10 {
        script = script.then(Script::status(if i % 2 == 0 { 200 } else { 503 }));
    }
    s.script("a", script);
    for i in 0..10 {
        s.run(Method::GET, one());
        let h = s.engine().health_of("a", s.now()).unwrap();
        if i < 9 {
            assert_eq!(h.state, BreakerState::Closed, "after {} calls", i + 1);
        } else {
            assert_eq!(h.state, BreakerState::Open);
        }
    }
}

#[test]
fn failure_rate_rule_counts_slow_successes_as_failures() {
    let b = endpoints(&["a", "b"]).breaker(Breaker {
        rule: BreakerRule::FailureRate {
            window: 4,
            min_calls: 4,
            rate: 0.5,
            slow_call: Some(ms(100)),
        },
        ..Breaker::default()
    });
    let mut s = sim(b);
    s.script("a", Script::status(200).after(ms(150)));
    for _ in 0..4 {
        let run = s.run(Method::GET, CallOptions::default());
        assert_eq!(run.report.status(), Some(http::StatusCode::OK));
    }
    assert_eq!(
        s.engine().health_of("a", s.now()).unwrap().state,
        BreakerState::Open
    );
}

#[test]
fn disabled_breaker_never_opens() {
    let mut s = sim(endpoints(&["a", "b"]).breaker(Breaker {
        rule: BreakerRule::Disabled,
        ..Breaker::default()
    }));
    s.script("a", Script::status(503));
    for _ in 0..10 {
        s.run(Method::GET, CallOptions::default());
    }
    assert_eq!(
        s.engine().health_of("a", s.now()).unwrap().state,
        BreakerState::Closed
    );
}

#[test]
fn caller_deadline_failures_do_not_count_against_the_breaker() {
    let mut s = sim(endpoints(&["a"]).attempt_timeout(Duration::from_secs(10)));
    s.script("a", Script::black_hole());
    for _ in 0..5 {
        let run = s.run(
            Method::GET,
            CallOptions {
                deadline: Some(ms(100)),
                ..CallOptions::default()
            },
        );
        assert_eq!(run.report.attempts[0].result, AttemptResult::Deadline);
    }
    let h = s.engine().health_of("a", s.now()).unwrap();
    assert_eq!((h.state, h.consecutive_failures), (BreakerState::Closed, 0));
}

#[test]
fn retry_after_on_503_sets_not_before_separately_from_the_breaker() {
    let mut s = sim(endpoints(&["a", "b"]));
    s.script(
        "a",
        Script::status(503)
            .header("retry-after", "10")
            .then(Script::status(200)),
    );
    let run = s.run(Method::GET, CallOptions::default());
    assert_eq!(run.endpoints_attempted(), ["a", "b"]);
    let h = s.engine().health_of("a", s.now()).unwrap();
    assert_eq!(h.state, BreakerState::Closed);
    assert!(!h.available);
    let run = s.run(Method::GET, CallOptions::default());
    assert_eq!(run.endpoints_attempted(), ["b"]);
    s.advance(Duration::from_secs(10));
    let run = s.run(Method::GET, CallOptions::default());
    assert_eq!(run.endpoints_attempted(), ["a"]);
}

#[test]
fn healthy_path_writes_nothing_to_shared_state() {
    let mut s = sim(endpoints(&["a", "b", "c"]).budget(None));
    for _ in 0..10 {
        s.run(Method::GET, CallOptions::default());
    }
    let h = s.engine().health_of("a", s.now()).unwrap();
    assert_eq!((h.consecutive_failures, h.window), (0, (0, 0)));
}

// ---------------------------------------------------------------- timing

#[test]
fn single_endpoint_gets_three_attempts_with_backoff() {
    let mut s = sim(endpoints(&["a"]));
    s.script("a", Script::status(503));
    let run = s.run(Method::GET, CallOptions::default());
    assert_eq!(run.report.attempts.len(), 3);
    let waits = run.events_named("BackoffWait");
    assert_eq!(waits.len(), 2);
    assert!(waits[0].text.contains("200ms"), "{}", waits[0].text);
    assert!(waits[1].text.contains("400ms"), "{}", waits[1].text);
    assert_eq!(run.elapsed, ms(600));
    // Retained 503 is returned: the provider answered.
    assert_eq!(
        run.report.status(),
        Some(http::StatusCode::SERVICE_UNAVAILABLE)
    );
}

#[test]
fn failover_to_next_endpoint_does_not_wait() {
    let mut s = sim(endpoints(&["a", "b"]));
    s.script("a", Script::status(503));
    let run = s.run(Method::GET, CallOptions::default());
    assert!(run.events_named("BackoffWait").is_empty());
    assert_eq!(run.elapsed, Duration::ZERO);
}

#[test]
fn backoff_is_capped() {
    let mut s = sim(endpoints(&["a"]).attempts_per_endpoint(10).budget(None));
    s.script("a", Script::status(503));
    let run = s.run(Method::GET, CallOptions::default());
    let waits = run.events_named("BackoffWait");
    assert_eq!(waits.len(), 9);
    assert!(waits[8].text.contains("delay: 5s"), "{}", waits[8].text);
}

#[test]
fn full_jitter_is_drawn_from_the_seed_and_reproducible() {
    let run_once = |seed| {
        let mut s = sim(endpoints(&["a"]).jitter(Jitter::Full).seed(seed));
        s.script("a", Script::status(503));
        s.run(Method::GET, CallOptions::default()).elapsed
    };
    assert_eq!(run_once(1), run_once(1));
    assert_ne!(run_once(1), run_once(2));
    assert!(run_once(3) < ms(600));
}

#[test]
fn retry_after_delta_seconds_replaces_backoff_on_the_same_endpoint() {
    let mut s = sim(endpoints(&["a"]));
    s.script(
        "a",
        Script::status(429)
            .header("retry-after", "2")
            .then(Script::status(200)),
    );
    let run = s.run(Method::POST, CallOptions::default());
    assert_eq!(run.report.attempts.len(), 2);
    assert_eq!(run.elapsed, Duration::from_secs(2));
    assert!(run.events_named("BackoffWait")[0]
        .text
        .contains("RetryAfter"));
}

#[test]
fn retry_after_http_date_uses_the_date_header() {
    let mut s = sim(endpoints(&["a"]));
    s.script(
        "a",
        Script::status(503)
            .header("retry-after", "Wed, 21 Oct 2015 07:28:05 GMT")
            .header("date", "Wed, 21 Oct 2015 07:28:00 GMT")
            .then(Script::status(200)),
    );
    let run = s.run(Method::GET, CallOptions::default());
    assert_eq!(run.elapsed, Duration::from_secs(5));
}

#[test]
fn retry_after_too_long_stops_at_once_with_the_delay() {
    let mut s = sim(endpoints(&["a"]));
    s.script("a", Script::status(429).header("retry-after", "120"));
    let run = s.run(Method::GET, CallOptions::default());
    assert_eq!(run.report.attempts.len(), 1);
    let err = run.report.into_error().unwrap();
    assert_eq!(
        err.kind,
        ErrorKind::RetryAfterTooLong(Duration::from_secs(120))
    );
}

#[test]
fn retry_after_too_long_moves_on_to_another_endpoint_without_waiting() {
    let mut s = sim(endpoints(&["a", "b"]));
    s.script("a", Script::status(429).header("retry-after", "120"));
    let run = s.run(Method::GET, CallOptions::default());
    assert_eq!(run.endpoints_attempted(), ["a", "b"]);
    assert_eq!(run.elapsed, Duration::ZERO);
}

#[test]
fn attempt_timeout_is_clipped_to_the_deadline() {
    let policy = endpoints(&["a"]).build().unwrap();
    let engine = Arc::new(Engine::new(policy));
    let (uri, headers) = ("/".parse().unwrap(), http::HeaderMap::new());
    let info = RequestInfo {
        method: &Method::GET,
        uri: &uri,
        headers: &headers,
    };
    let t = Instant::now();
    let opts = CallOptions {
        deadline: Some(ms(250)),
        ..CallOptions::default()
    };
    let mut call = Call::new(&engine, &info, BodyKind::Empty, opts, t);
    let Action::Send(a) = call.poll_action(t) else {
        panic!()
    };
    assert_eq!(a.timeout, ms(250));
    assert_eq!(a.connect_timeout, ms(250));
}

#[test]
fn no_wait_is_started_that_ends_after_the_deadline() {
    let mut s = sim(endpoints(&["a"]));
    s.script("a", Script::status(503));
    let run = s.run(
        Method::GET,
        CallOptions {
            deadline: Some(ms(300)),
            ..CallOptions::default()
        },
    );
    // 200 ms wait fits, the 400 ms one would not.
    assert_eq!(run.report.attempts.len(), 2);
    assert_eq!(run.report.stop_reason, StopReason::Deadline);
    assert_eq!(run.elapsed, ms(200));
    // Retained 503 is what it has.
    assert_eq!(
        run.report.status(),
        Some(http::StatusCode::SERVICE_UNAVAILABLE)
    );
}

#[test]
fn deadline_shorter_than_attempt_timeout_ends_with_deadline_error() {
    let mut s = sim(endpoints(&["a", "b"]));
    s.script("a", Script::black_hole());
    let run = s.run(
        Method::GET,
        CallOptions {
            deadline: Some(ms(200)),
            ..CallOptions::default()
        },
    );
    assert_eq!(run.elapsed, ms(200));
    assert_eq!(run.report.attempts.len(), 1);
    assert_eq!(run.report.into_error().unwrap().kind, ErrorKind::Deadline);
}

#[test]
fn answer_in_hand_is_never_replaced_by_a_deadline_error() {
    let mut s = sim(endpoints(&["a"]));
    // The answer arrives 1 ms before the deadline; nothing else is in flight.
    s.script("a", Script::status(404).after(ms(99)));
    let run = s.run(
        Method::GET,
        CallOptions {
            deadline: Some(ms(100)),
            ..CallOptions::default()
        },
    );
    assert_eq!(run.report.status(), Some(http::StatusCode::NOT_FOUND));
    assert_eq!(run.report.stop_reason, StopReason::Answered);
}

#[test]
fn cancel_ends_the_call_with_cancelled_and_counts_nothing() {
    let (engine, t) = (
        Arc::new(Engine::new(endpoints(&["a"]).build().unwrap())),
        Instant::now(),
    );
    let mut c = raw_call(&engine, Method::GET, t);
    let Action::Send(a) = c.poll_action(t) else {
        panic!()
    };
    c.cancel(t);
    assert_eq!(c.poll_action(t), Action::Discard(a.number));
    assert_eq!(c.poll_action(t), Action::Done);
    let r = common::report(c);
    assert_eq!(r.stop_reason, StopReason::Cancelled);
    assert_eq!(r.into_error().unwrap().kind, ErrorKind::Cancelled);
    assert_eq!(engine.health(0, t).unwrap().consecutive_failures, 0);
}

// ---------------------------------------------------------------- results

#[test]
fn retained_503_is_returned_when_the_backup_fails_without_a_response() {
    let mut s = sim(endpoints(&["a", "b"]));
    s.script("a", Script::status(503))
        .script("b", Script::refuse());
    let run = s.run(Method::GET, CallOptions::default());
    assert!(matches!(
        run.report.outcome,
        Outcome::Response {
            retained: true,
            attempt: 1,
            ..
        }
    ));
}

#[test]
fn retained_response_is_not_returned_when_a_later_attempt_may_have_executed_a_keyed_call() {
    let b = Policy::builder()
        .endpoint(Endpoint::new("eu", "https://eu.example/").group("pay"))
        .endpoint(Endpoint::new("us", "https://us.example/").group("pay"));
    let mut s = sim(b);
    s.script("eu", Script::status(503))
        .script("us", Script::reset());
    let run = s.run(Method::POST, keyed("k-ret"));
    assert_eq!(run.endpoints_attempted(), ["eu", "us"]);
    match &run.report.outcome {
        Outcome::Error { kind, retained } => {
            assert_eq!(*kind, ErrorKind::Failover);
            assert_eq!(*retained, Some(1));
        }
        other => panic!("{other:?}"),
    }
}

/// A response that says when it was closed (dropped).
struct Closing {
    head: Head,
    closed: Arc<Mutex<Vec<StatusCode>>>,
}

impl Answer for Closing {
    fn status(&self) -> StatusCode {
        self.head.status
    }
    fn headers(&self) -> &http::HeaderMap {
        &self.head.headers
    }
}

impl Drop for Closing {
    fn drop(&mut self) {
        self.closed.lock().unwrap().push(self.head.status);
    }
}

#[test]
fn newer_triggering_response_replaces_the_older_one_and_the_older_is_discarded() {
    let policy = endpoints(&["a", "b", "c"]).build().unwrap();
    let engine = Engine::new(policy);
    let t = Instant::now();
    let closed = Arc::new(Mutex::new(Vec::new()));
    let respond = |status| Closing {
        head: Head::new(status),
        closed: closed.clone(),
    };
    let (uri, headers) = ("/".parse().unwrap(), http::HeaderMap::new());
    let info = RequestInfo {
        method: &Method::GET,
        uri: &uri,
        headers: &headers,
    };
    let mut c: Call<'_, Closing> =
        Call::new(&engine, &info, BodyKind::Empty, CallOptions::default(), t);
    let baton_core::Action::Send(a1) = c.poll() else {
        panic!()
    };
    let response = respond(StatusCode::BAD_GATEWAY);
    c.handle(
        Input::Response {
            attempt: a1.number,
            response,
            wall: None,
        },
        t,
    );
    let baton_core::Action::Send(a2) = c.poll() else {
        panic!()
    };
    assert!(closed.lock().unwrap().is_empty(), "the 502 is retained");
    let response = respond(StatusCode::SERVICE_UNAVAILABLE);
    c.handle(
        Input::Response {
            attempt: a2.number,
            response,
            wall: None,
        },
        t,
    );
    assert_eq!(
        *closed.lock().unwrap(),
        [StatusCode::BAD_GATEWAY],
        "the older response is closed as soon as the newer one replaces it"
    );
    let baton_core::Action::Send(a3) = c.poll() else {
        panic!()
    };
    let outcome = baton_core::AttemptOutcome::Failure(FailureClass::Undelivered);
    c.handle(
        Input::Failed {
            attempt: a3.number,
            outcome,
        },
        t,
    );
    assert_eq!(c.poll(), baton_core::Action::Done);
    let Done::Answer { response, report } = c.take_done() else {
        panic!()
    };
    assert_eq!(report.outcome.kept_attempt(), Some(2));
    assert_eq!(report.status(), Some(StatusCode::SERVICE_UNAVAILABLE));
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
}

#[test]
fn failover_error_lists_every_attempt_and_exposes_the_last_cause() {
    let mut s = sim(endpoints(&["a", "b"]).attempt_timeout(ms(50)));
    s.script("a", Script::refuse())
        .script("b", Script::black_hole());
    let run = s.run(Method::GET, CallOptions::default());
    let err = run.report.into_error().unwrap();
    assert_eq!(err.report.attempts.len(), 2);
    assert_eq!(
        err.report.attempts[0].result,
        AttemptResult::Failed(FailureClass::Undelivered)
    );
    assert_eq!(
        err.report.attempts[1].result,
        AttemptResult::TimedOut(TimeoutPhase::Response)
    );
    assert_eq!(err.report.attempts[1].elapsed, ms(50));
    let text = err.to_string();
    assert!(
        text.contains("#1 a: undelivered") && text.contains("#2 b"),
        "{text}"
    );
    let source = std::error::Error::source(&err).unwrap().to_string();
    assert!(source.contains("\"b\""), "{source}");
}

// ---------------------------------------------------------------- identity

#[test]
fn request_id_is_generated_with_26_characters_and_kept_across_attempts() {
    let mut s = sim(endpoints(&["a", "b"]));
    s.script("a", Script::reset());
    let run = s.run(Method::GET, CallOptions::default());
    let id = run.report.request_id.to_string();
    assert_eq!(id.len(), 26);
    assert_eq!(run.executed[0][0].request_id, id);
    assert_eq!(run.executed[1][0].request_id, id);
}

#[test]
fn caller_request_id_from_header_or_option_is_used() {
    let mut s = sim(endpoints(&["a"]));
    let run = s.run_request(
        SimRequest::new(Method::GET).header("x-request-id", "from-header-1"),
        CallOptions::default(),
    );
    assert_eq!(run.report.request_id.as_str(), "from-header-1");
    let run = s.run(
        Method::GET,
        CallOptions {
            request_id: Some("from-option-1".into()),
            ..CallOptions::default()
        },
    );
    assert_eq!(run.report.request_id.as_str(), "from-option-1");
}

#[test]
fn invalid_request_id_is_rejected_before_anything_is_sent() {
    let mut s = sim(endpoints(&["a"]));
    let run = s.run(
        Method::GET,
        CallOptions {
            request_id: Some("bad id!".into()),
            ..CallOptions::default()
        },
    );
    assert!(run.report.attempts.is_empty());
    assert_eq!(run.executions("a"), 0);
    let err = run.report.into_error().unwrap();
    assert!(
        matches!(err.kind, ErrorKind::InvalidCall(CallRejection::RequestId(ref e)) if e.to_string().contains("bad id!"))
    );
}

#[test]
fn an_identity_given_twice_with_different_values_is_rejected_before_anything_is_sent() {
    let mut s = sim(endpoints(&["a"]));
    let twice = |header: &str, value: &str, options: CallOptions| {
        (SimRequest::new(Method::POST).header(header, value), options)
    };
    let cases = [
        twice(
            "x-request-id",
            "from-header-1",
            CallOptions {
                request_id: Some("from-option-1".into()),
                ..CallOptions::default()
            },
        ),
        twice(
            "idempotency-key",
            "key-a",
            CallOptions {
                idempotency_key: Some("key-b".into()),
                ..CallOptions::default()
            },
        ),
    ];
    // The header twice, with no call option.
    let header_twice = SimRequest::new(Method::POST)
        .header("idempotency-key", "key-a")
        .header("idempotency-key", "key-b");
    let cases = cases
        .into_iter()
        .chain([(header_twice, CallOptions::default())]);
    for (request, options) in cases {
        let run = s.run_request(request, options);
        assert!(run.report.attempts.is_empty());
        assert_eq!(run.executions("a"), 0);
        let err = run.report.into_error().unwrap();
        let ErrorKind::InvalidCall(why) = &err.kind else {
            panic!("{err}");
        };
        assert!(why.to_string().contains("given twice"), "{why}");
    }
    // The same value twice is one identity: the call goes.
    let run = s.run_request(
        SimRequest::new(Method::POST).header("idempotency-key", "key-c"),
        CallOptions {
            idempotency_key: Some("key-c".into()),
            ..CallOptions::default()
        },
    );
    assert_eq!(run.executions("a"), 1);
    assert_eq!(run.report.idempotency_key.as_deref(), Some("key-c"));
}

#[test]
fn every_event_carries_the_request_id_and_idempotency_key() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let mut s = sim(endpoints(&["a", "b"]).on_event(move |e| {
        s2.lock().unwrap().push((
            e.request_id.to_string(),
            e.idempotency_key.map(str::to_owned),
        ));
    }));
    s.script("a", Script::refuse());
    let run = s.run(
        Method::POST,
        CallOptions {
            idempotency_key: Some("key-9".into()),
            request_id: Some("req-000000009".into()),
            ..CallOptions::default()
        },
    );
    assert_eq!(run.report.idempotency_key.as_deref(), Some("key-9"));
    let seen = seen.lock().unwrap();
    assert!(seen.len() >= 5);
    assert!(seen
        .iter()
        .all(|(r, k)| r == "req-000000009" && k.as_deref() == Some("key-9")));
}

// ---------------------------------------------------------------- events

#[test]
fn events_come_in_causal_order() {
    let mut s = sim(endpoints(&["a", "b"]));
    s.script("a", Script::status(503));
    let run = s.run(Method::GET, CallOptions::default());
    let names: Vec<&str> = run
        .events
        .iter()
        .map(|e| e.text.split([' ', '{']).next().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "AttemptStarted",
            "AttemptFinished",
            "Failover",
            "AttemptStarted",
            "AttemptFinished",
            "Result"
        ]
    );
}

#[test]
fn breaker_transitions_are_reported_to_the_call_that_caused_them() {
    let mut s = sim(endpoints(&["a", "b"]));
    s.script("a", Script::status(503));
    let mut transitions = 0;
    for _ in 0..3 {
        let run = s.run(Method::GET, CallOptions::default());
        transitions += run.events_named("BreakerTransition").len();
    }
    assert_eq!(transitions, 1);
}

// ---------------------------------------------------------------- hedging basics

#[test]
fn hedged_get_starts_the_backup_after_hedge_after_and_takes_the_first_answer() {
    let mut s = sim(endpoints(&["a", "b"]).hedge(Some(Hedge::after(ms(100)))));
    s.script("a", Script::status(200).after(ms(1000)))
        .script("b", Script::status(200).after(ms(50)));
    let run = s.run(Method::GET, CallOptions::default());
    assert_eq!(run.max_in_flight, 2);
    assert_eq!(run.elapsed, ms(150));
    assert_eq!(run.report.endpoint_id(), Some("b"));
    assert_eq!(run.report.attempts[0].result, AttemptResult::Cancelled);
    assert_eq!(run.events_named("HedgeStarted").len(), 1);
}

#[test]
fn hedging_never_applies_to_post_or_keyed_calls() {
    let mut s = sim(endpoints(&["a", "b"]).hedge(Some(Hedge::after(ms(10)))));
    s.script("a", Script::status(200).after(ms(500)));
    let run = s.run(Method::POST, CallOptions::default());
    assert_eq!(run.max_in_flight, 1);
    let run = s.run(Method::GET, keyed("k"));
    assert_eq!(run.max_in_flight, 1);
}

#[test]
fn an_endpoint_circuit_shares_the_breaker_with_calls() {
    let mut s = sim(endpoints(&["a", "b"]));
    let now = s.now();
    let circuit = s.engine().circuit("a").unwrap();
    for _ in 0..3 {
        circuit.allow(now).unwrap().failure(now);
    }
    assert_eq!(circuit.state(now), BreakerState::Open);
    assert!(circuit.allow(now).is_err());
    let run = s.run(Method::GET, CallOptions::default());
    assert_eq!(run.endpoints_attempted(), ["b"]);
}

#[test]
fn a_result_taken_twice_is_a_cancelled_error_the_second_time_and_reported_once() {
    let results = Arc::new(Mutex::new(0u32));
    let seen = results.clone();
    let policy = endpoints(&["a", "b"])
        .on_event(move |e| {
            if matches!(e.kind, baton_core::EventKind::Result { .. }) {
                *seen.lock().unwrap() += 1;
            }
        })
        .build()
        .unwrap();
    let engine = Engine::new(policy);
    let (uri, headers) = (http::Uri::from_static("/"), http::HeaderMap::new());
    let info = RequestInfo {
        method: &Method::GET,
        uri: &uri,
        headers: &headers,
    };
    let t = Instant::now();
    let mut c: Call<'_, Head> =
        Call::new(&engine, &info, BodyKind::Empty, CallOptions::default(), t);
    let baton_core::Action::Send(a) = c.poll() else {
        panic!()
    };
    let response = Head::new(StatusCode::OK);
    c.handle(
        Input::Response {
            attempt: a.number,
            response,
            wall: None,
        },
        t,
    );
    assert_eq!(c.poll(), baton_core::Action::Done);
    let Done::Answer { report, .. } = c.take_done() else {
        panic!("the first take is the answer")
    };
    assert_eq!(report.request_id.as_str().len(), 26);
    let Done::Error {
        kind,
        retained,
        report,
    } = c.take_done()
    else {
        panic!("the second take finds the result gone")
    };
    assert!(matches!(kind, baton_core::ErrorKind::Cancelled));
    assert!(retained.is_none());
    assert_eq!(report.stop_reason, StopReason::Cancelled);
    assert_eq!(report.attempts.len(), 1);
    assert!(report.may_have_executed, "the answered attempt executed");
    assert_eq!(*results.lock().unwrap(), 1, "one result event");
}

/// A response with its whole body, as baton-tokio hands one in when the policy lets the
/// classifier read bodies.
struct WithBody {
    status: StatusCode,
    headers: http::HeaderMap,
    body: &'static str,
}

impl Answer for WithBody {
    fn status(&self) -> StatusCode {
        self.status
    }
    fn headers(&self) -> &http::HeaderMap {
        &self.headers
    }
    fn body(&self) -> Option<&[u8]> {
        Some(self.body.as_bytes())
    }
}

#[test]
fn the_classifier_reads_a_body_only_within_classify_body() {
    // The classifier calls a 200 whose body says "outage" a trigger; the engine hands it
    // the body only when the policy allows bodies that long.
    let run = |limit: usize, body: &'static str| {
        let policy = endpoints(&["a", "b"])
            .classify_fn(|v| {
                v.body
                    .is_some_and(|b| b.starts_with(b"outage"))
                    .then_some(Verdict::Trigger)
            })
            .configure(|s| s.classify_body = limit)
            .build()
            .unwrap();
        let engine = Engine::new(policy);
        let (uri, headers) = ("/".parse::<http::Uri>().unwrap(), http::HeaderMap::new());
        let info = RequestInfo {
            method: &Method::GET,
            uri: &uri,
            headers: &headers,
        };
        let now = Instant::now();
        let mut call: Call<'_, WithBody> =
            Call::new(&engine, &info, BodyKind::Empty, CallOptions::default(), now);
        let baton_core::Action::Send(a) = call.poll() else {
            panic!()
        };
        let response = WithBody {
            status: StatusCode::OK,
            headers: http::HeaderMap::new(),
            body,
        };
        call.handle(
            Input::Response {
                attempt: a.number,
                response,
                wall: None,
            },
            now,
        );
        match call.poll() {
            baton_core::Action::Send(next) => Some(next.endpoint),
            _ => None,
        }
    };
    assert_eq!(
        run(16, "outage at a"),
        Some(1),
        "within the limit: fails over"
    );
    assert_eq!(
        run(0, "outage at a"),
        None,
        "limit 0: the classifier sees no body"
    );
    assert_eq!(
        run(8, "outage at a"),
        None,
        "longer than the limit: no body"
    );
    assert_eq!(run(16, "fine"), None);
    // The limit is checked when the policy is built.
    let err = endpoints(&["a"])
        .configure(|s| s.classify_body = baton_core::MAX_CLASSIFY_BODY + 1)
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("classify_body"), "{err}");
}

/// An invalid call ends at its start, its `Result` event already given: a body the
/// adapter could not buffer, handed in afterwards, adds no event after it (SPEC 4: a
/// call's events keep their causal order).
#[test]
fn no_event_follows_an_invalid_calls_result() {
    let (sink, seen) = common::event_names();
    let policy = endpoints(&["a"]).event_sink(Some(sink)).build().unwrap();
    let engine = Engine::new(policy);
    let (uri, headers) = (http::Uri::from_static("/"), http::HeaderMap::new());
    let info = RequestInfo {
        method: &Method::POST,
        uri: &uri,
        headers: &headers,
    };
    let options = CallOptions {
        prefer: Some("nope".into()),
        ..CallOptions::default()
    };
    let t0 = Instant::now();
    let mut call: Call<'_, Head> = Call::new(&engine, &info, BodyKind::OneShot, options, t0);
    call.handle(Input::BodyNotBuffered { limit: 1024 }, t0);
    assert_eq!(call.poll(), baton_core::Action::Done);
    drop(call.take_done());
    drop(call);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.last().map(String::as_str), Some("Result"), "{seen:?}");
}
