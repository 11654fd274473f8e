//! `baton_core::verify`: the bounds are never below what the engine does, the engine with
//! the spec's own permissions is judged safe on every generated policy, and the lints and
//! bounds say what their docs say.

use std::time::{Duration, Instant};

use baton_core::verify::{CallClass, Check, TimeBound, ViolationKind};
use baton_core::{
    Breaker, BreakerRule, Endpoint, LimitScope, Limiter, OnLimit, Permission, PermissionOverride,
    Policy, PolicyBuilder, RateLimit, Unavailable,
};
use proptest::prelude::*;

fn three() -> PolicyBuilder {
    Policy::builder()
        .endpoint(Endpoint::new("a", "https://a.example/"))
        .endpoint(Endpoint::new("b", "https://b.example/"))
        .endpoint(Endpoint::new("c", "https://c.example/"))
}

fn class(f: &baton_core::verify::Findings, c: CallClass) -> &baton_core::verify::ClassReport {
    f.classes.iter().find(|r| r.class == c).unwrap()
}

fn settings_name(f: &baton_core::verify::Findings) -> Vec<&str> {
    f.lints.iter().map(|l| l.setting.as_str()).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// On generated policies (1 to 4 endpoints, groups, per-endpoint attempts and
    /// timeouts): the computed worst case is never below an observed call, and the
    /// engine with the spec's permissions breaks no safety rule.
    #[test]
    fn bounds_hold_and_the_spec_permissions_are_safe(
        settings in baton_core::strategies::settings(),
        endpoints in prop::collection::vec(
            (prop::option::of(0u8..2), prop::option::of(1u32..4), prop::option::of(100u64..2_000)),
            1..5,
        ),
        seed in any::<u64>(),
    ) {
        let mut b = Policy::builder().settings(settings);
        for (i, (group, per, timeout)) in endpoints.into_iter().enumerate() {
            let mut e = Endpoint::new(format!("e{i}"), format!("https://e{i}.example/"));
            if let Some(g) = group {
                e = e.group(format!("g{g}"));
            }
            if let Some(n) = per {
                e = e.attempts_per_endpoint(n);
            }
            if let Some(ms) = timeout {
                e = e.attempt_timeout(Duration::from_millis(ms));
            }
            b = b.endpoint(e);
        }
        let policy = b.build().unwrap();
        let f = Check::new().calls(400).seed(seed).outage(Duration::from_secs(5)).run(&policy, Instant::now());
        for c in &f.classes {
            prop_assert!(c.observed_attempts <= c.bound.attempts, "{:?}: {} > {}", c.class, c.observed_attempts, c.bound.attempts);
            if let TimeBound::Within(t) = c.bound.time {
                prop_assert!(c.observed_time <= t, "{:?}: {:?} > {:?}", c.class, c.observed_time, t);
            }
            prop_assert!(c.counterexample.is_none(), "{:?}", c.counterexample);
        }
        prop_assert!(f.is_safe());
    }
}

#[test]
fn attempt_bounds_follow_the_schedule() {
    let f = Check::new()
        .calls(2_000)
        .run(&three().build().unwrap(), Instant::now());
    // One round of one attempt each; a keyed write pinned after its last endpoint's
    // ambiguous attempt gets up to pinned_attempts (3) there: 2 + 3.
    assert_eq!(class(&f, CallClass::SafeRead).bound.attempts, 3);
    assert_eq!(class(&f, CallClass::Write).bound.attempts, 3);
    assert_eq!(class(&f, CallClass::KeyedWrite).bound.attempts, 5);
    // The explorer reaches the worst case.
    assert_eq!(class(&f, CallClass::KeyedWrite).observed_attempts, 5);
    // 3 x (5 s + 30 s) plus two waits of at most max_retry_after (30 s).
    assert_eq!(
        class(&f, CallClass::SafeRead).bound.time,
        TimeBound::Within(Duration::from_secs(165))
    );

    let capped = three().max_attempts(4).build().unwrap();
    let f = Check::new().calls(1_000).run(&capped, Instant::now());
    assert!(f.classes.iter().all(|c| c.bound.attempts == 4));

    let single = Policy::builder()
        .endpoint(Endpoint::new("only", "https://only.example/"))
        .build()
        .unwrap();
    let f = Check::new().calls(1_000).run(&single, Instant::now());
    assert!(f.classes.iter().all(|c| c.bound.attempts == 3));
}

/// An endpoint's own `attempts_per_endpoint` is also its pinned limit (SPEC 2.6): with 2 a
/// round at each of three endpoints, a keyed write pinned at the last one has made 4
/// attempts elsewhere and makes 2 there, not 3. The bound is `M - 1 + 2` = 7 (a share a
/// skip or a limiter left unused can go to a further round before the pin); the explorer
/// stays within it.
#[test]
fn an_endpoints_own_attempts_are_its_pinned_limit_in_the_bound() {
    let mut policy = Policy::builder();
    for id in ["a", "b", "c"] {
        let url = format!("https://{id}.example/");
        policy = policy.endpoint(Endpoint::new(id, url).attempts_per_endpoint(2));
    }
    let f = Check::new()
        .calls(3_000)
        .run(&policy.build().unwrap(), Instant::now());
    let keyed = class(&f, CallClass::KeyedWrite);
    assert_eq!(keyed.bound.attempts, 7);
    assert!(
        (6..=7).contains(&keyed.observed_attempts),
        "{}",
        keyed.observed_attempts
    );
    assert_eq!(class(&f, CallClass::Write).bound.attempts, 6);
    assert!(f.is_safe());
}

#[test]
fn a_deadline_bounds_time_and_a_waiting_limiter_without_one_does_not() {
    let f = Check::new().calls(500).run(
        &three().deadline(Duration::from_secs(40)).build().unwrap(),
        Instant::now(),
    );
    assert!(f.classes.iter().all(
        |c| c.bound.time == TimeBound::Within(Duration::from_secs(40))
            && c.observed_time <= Duration::from_secs(40)
    ));

    let limited = three()
        .rate_limit(Some(RateLimit {
            limiter: Limiter::TokenBucket {
                capacity: 5,
                per_second: 5.0,
            },
            scope: LimitScope::Client,
            on_limit: OnLimit::Wait,
        }))
        .build()
        .unwrap();
    let f = Check::new().calls(500).run(&limited, Instant::now());
    assert!(f
        .classes
        .iter()
        .all(|c| matches!(c.bound.time, TimeBound::Unbounded(_))));
}

#[test]
fn a_permission_function_that_lets_posts_fail_over_is_caught_and_shrunk() {
    let policy = three()
        .permission_fn(|req| {
            if req.method == http::Method::POST {
                PermissionOverride::both(Permission::Always)
            } else {
                PermissionOverride::default()
            }
        })
        .build()
        .unwrap();
    let f = Check::new().calls(3_000).run(&policy, Instant::now());
    assert!(!f.is_safe());
    let writes = class(&f, CallClass::Write);
    assert!(writes.violations > 0);
    let cx = writes.counterexample.as_ref().unwrap();
    assert_eq!(cx.violations[0].kind, ViolationKind::Repeated);
    // Shrunk: one call, one ambiguous attempt, then the failover that answers.
    assert_eq!(cx.faults.len(), 1);
    assert_eq!(cx.faults[0].len(), 2);
    let first = cx.faults[0][0];
    assert!(
        first.delivered() && first != baton_core::verify::Fault::Ok,
        "{first:?}"
    );
    assert_eq!(cx.vector.calls[0].failover, Some(Permission::Always));
    assert_eq!(cx.vector.calls[0].expect.safe, Some(true));
    // Reads are still safe, and the spec's keyed inference too.
    assert_eq!(class(&f, CallClass::SafeRead).violations, 0);
}

#[test]
fn keyed_retries_on_500_are_repeats_the_key_may_not_cover() {
    let policy = three().extend_key_trigger_statuses(&[500]).build().unwrap();
    let f = Check::new().calls(3_000).run(&policy, Instant::now());
    let keyed = class(&f, CallClass::KeyedWrite);
    assert!(keyed.violations > 0);
    let cx = keyed.counterexample.as_ref().unwrap();
    assert!(
        cx.violations[0].text.contains("500"),
        "{}",
        cx.violations[0]
    );
    assert!(settings_name(&f).contains(&"policy.key_trigger_statuses"));
}

#[test]
fn lints_name_the_setting() {
    let risky = three()
        .budget(None)
        .deadline(Duration::from_secs(10))
        .attempt_timeout(Duration::from_secs(10))
        .max_retry_after(Duration::from_secs(20))
        .breaker(Breaker {
            rule: BreakerRule::Disabled,
            ..Breaker::default()
        })
        .unavailable(Unavailable::Skip)
        .eligible_fn(|e, _| e.id() != "c")
        .build()
        .unwrap();
    let f = Check::new().calls(1_000).run(&risky, Instant::now());
    let names = settings_name(&f);
    for expected in [
        "policy.budget",
        "policy.attempt_timeout",
        "policy.max_retry_after",
        "policy.breaker.rule",
        "endpoint.c",
    ] {
        assert!(names.contains(&expected), "{expected} not in {names:?}");
    }
    assert!(f.is_safe());

    let clean = three().build().unwrap();
    let f = Check::new().calls(1_000).run(&clean, Instant::now());
    assert!(f.lints.is_empty(), "{:?}", f.lints);
}

#[test]
fn the_outage_run_shows_the_budget_at_work() {
    let with = Check::new()
        .calls(200)
        .run(&three().build().unwrap(), Instant::now());
    let without = Check::new()
        .calls(200)
        .run(&three().budget(None).build().unwrap(), Instant::now());
    let (w, wo) = (
        class(&with, CallClass::SafeRead).outage,
        class(&without, CallClass::SafeRead).outage,
    );
    assert!(w.calls > 100 && wo.calls > 100);
    assert!(w.per_call() >= 1.0 && wo.per_call() <= 3.0);
    assert!(w.steady < wo.steady, "{w:?} vs {wo:?}");
}

#[test]
fn an_outage_window_too_long_to_plan_is_cut_not_a_panic() {
    let policy = Policy::builder()
        .endpoint(Endpoint::new("a", "https://a.example/"))
        .build()
        .unwrap();
    let f = Check::new()
        .calls(10)
        .outage(Duration::MAX)
        .run(&policy, Instant::now());
    // A call every 50 ms, cut at 100,000 calls (5,000 s).
    assert_eq!(class(&f, CallClass::SafeRead).outage.calls, 100_000);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// With a permission function giving POSTs any permissions (failover `Never` pins a
    /// call at its first endpoint, for one), the computed worst case still holds.
    #[test]
    fn bounds_hold_under_any_permission_function(
        settings in baton_core::strategies::settings(),
        n in 1usize..4,
        retry in prop::option::of(baton_core::strategies::permission()),
        failover in prop::option::of(baton_core::strategies::permission()),
        seed in any::<u64>(),
    ) {
        let mut b = Policy::builder().settings(settings);
        for i in 0..n {
            b = b.endpoint(Endpoint::new(format!("e{i}"), format!("https://e{i}.example/")));
        }
        let policy = b
            .permission_fn(move |req| {
                if req.method == http::Method::POST {
                    PermissionOverride { retry, failover }
                } else {
                    PermissionOverride::default()
                }
            })
            .build()
            .unwrap();
        let f = Check::new().calls(400).seed(seed).outage(Duration::from_secs(5)).run(&policy, Instant::now());
        for c in &f.classes {
            prop_assert!(c.observed_attempts <= c.bound.attempts, "{:?}: {} > {}", c.class, c.observed_attempts, c.bound.attempts);
            if let TimeBound::Within(t) = c.bound.time {
                prop_assert!(c.observed_time <= t, "{:?}: {:?} > {:?}", c.class, c.observed_time, t);
            }
        }
    }
}

#[test]
fn a_retained_answer_returned_after_a_later_possible_execution_is_hidden() {
    use baton_core::{AttemptRecord, AttemptResult, FailureClass, Outcome, Report, RequestId};
    let policy = three().build().unwrap();
    let record = |number, result| AttemptRecord {
        endpoint: 0,
        endpoint_id: "a".into(),
        number,
        result,
        elapsed: Duration::from_millis(1),
        http_version: None,
        credential_refused: false,
    };
    let status = http::StatusCode::SERVICE_UNAVAILABLE;
    let report = Report {
        request_id: RequestId::parse("check-request-1").unwrap(),
        idempotency_key: Some("k-1".into()),
        attempts: [
            record(1, AttemptResult::Response(status)),
            record(2, AttemptResult::Failed(FailureClass::Ambiguous)),
        ]
        .into_iter()
        .collect(),
        redirects: Vec::new(),
        elapsed: Duration::from_millis(2),
        stop_reason: baton_core::StopReason::AttemptsExhausted,
        may_have_executed: true,
        outcome: Outcome::Response {
            attempt: 1,
            endpoint: 0,
            status,
            retained: true,
            classified_success: false,
        },
    };
    // Keyed, one endpoint: the repeat itself was safe, but "503, not done" hides that the
    // second attempt may have done it (SPEC 2.10, invariant 11).
    let found = baton_core::verify::judge(&policy, &http::Method::POST, &report);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].kind, ViolationKind::Hidden);
    assert!(found[0].text.contains("retained"), "{}", found[0]);
    // A GET may return it: repeating a read is harmless.
    assert!(baton_core::verify::judge(&policy, &http::Method::GET, &report).is_empty());
}

/// A credential slot's own refusal statuses (401 here) in the trigger sets are no lint; a
/// client error the policy added itself is, named by the set that holds it.
#[test]
fn client_error_lints_name_their_set_and_spare_credential_refusals() {
    let slot = baton_core::credential::CredentialSettings::default();
    let with_slot = Policy::builder()
        .endpoint(Endpoint::new("a", "https://a.example/").credential(slot))
        .endpoint(Endpoint::new("b", "https://b.example/"))
        .build()
        .unwrap();
    let f = Check::new().calls(200).run(&with_slot, Instant::now());
    let names = settings_name(&f);
    assert!(!names.contains(&"policy.trigger_statuses"), "{names:?}");
    assert!(!names.contains(&"policy.key_trigger_statuses"), "{names:?}");
    let keyed_404 = three().extend_key_trigger_statuses(&[404]).build().unwrap();
    let f = Check::new().calls(200).run(&keyed_404, Instant::now());
    let names = settings_name(&f);
    assert!(names.contains(&"policy.key_trigger_statuses"), "{names:?}");
    assert!(!names.contains(&"policy.trigger_statuses"), "{names:?}");
}

/// The explorer sends GET and POST calls only: a permission function that lets PATCH (or
/// PUT, DELETE) repeat is named by a lint, not passed in silence.
#[test]
fn permissions_for_unexplored_methods_are_linted() {
    use baton_core::PermissionOverride;
    let policy = three()
        .permission_fn(|r| {
            if r.method == http::Method::PATCH {
                PermissionOverride::both(Permission::Always)
            } else {
                PermissionOverride::default()
            }
        })
        .build()
        .unwrap();
    let f = Check::new().calls(200).run(&policy, Instant::now());
    let lint = f.lints.iter().find(|l| l.setting == "permissions.PATCH");
    let lint = lint.unwrap_or_else(|| panic!("{:?}", settings_name(&f)));
    assert!(
        lint.reason.contains("retry and failover always"),
        "{}",
        lint.reason
    );
    assert!(!settings_name(&f).contains(&"permissions.PUT"));
}

/// Simulated calls are no traffic: checking a policy tells its event sink nothing.
/// Before, every explored attempt, failover and breaker transition reached the caller's
/// sink (and, with the `metrics` feature, its metrics).
#[test]
fn checking_a_policy_tells_its_event_sink_nothing() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let heard = Arc::new(AtomicUsize::new(0));
    let h = heard.clone();
    let policy = three()
        .on_event(move |_| {
            h.fetch_add(1, Ordering::Relaxed);
        })
        .build()
        .unwrap();
    let f = Check::new().calls(200).run(&policy, Instant::now());
    assert!(f.classes.iter().all(|c| c.calls > 0));
    assert_eq!(heard.load(Ordering::Relaxed), 0);
}
