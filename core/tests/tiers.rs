//! Tiers, weights and per-endpoint settings (SPEC 2.1, 2.6): priority groups whose first
//! endpoint is drawn by weight, and endpoints that override attempts and backoff; and a
//! one-endpoint policy that skips unavailable endpoints, which is a plain breaker (2.5).

use std::time::{Duration, Instant};

use baton_core::sim::{Script, Sim};
use baton_core::*;
use http::Method;

fn ep(id: &str) -> Endpoint {
    Endpoint::new(id, format!("https://{id}.example/"))
}

fn sim(b: PolicyBuilder) -> Sim {
    Sim::new(b.jitter(Jitter::None).build().unwrap(), Instant::now())
}

/// The endpoint of each call's first attempt, over `n` healthy calls.
fn first_endpoints(engine: &Engine, n: usize) -> Vec<usize> {
    let (uri, headers) = ("/".parse::<http::Uri>().unwrap(), http::HeaderMap::new());
    let info = RequestInfo {
        method: &Method::GET,
        uri: &uri,
        headers: &headers,
    };
    let now = Instant::now();
    (0..n)
        .map(|_| baton_core::sim::answered_call(engine, &info, http::StatusCode::OK, now).0)
        .collect()
}

#[test]
fn weights_two_to_one_send_two_thirds_of_first_attempts_to_the_heavier() {
    let policy = Policy::builder()
        .endpoint(ep("a").tier(0).weight(2))
        .endpoint(ep("b").tier(0).weight(1))
        .endpoint(ep("backup").tier(1))
        .build()
        .unwrap();
    let engine = Engine::new(policy);
    const N: usize = 100_000;
    let firsts = first_endpoints(&engine, N);
    let share = firsts.iter().filter(|&&e| e == 0).count() as f64 / N as f64;
    eprintln!("weights 2:1 over {N} calls: {share:.4} of first attempts to the heavier");
    assert!((share - 2.0 / 3.0).abs() < 0.01, "share of a: {share}");
    assert!(
        !firsts.contains(&2),
        "the backup tier is never first while healthy"
    );
    // Deterministic: the same engine seed draws the same sequence.
    let again = first_endpoints(&Engine::new(engine.policy().clone()), 1000);
    assert_eq!(again, firsts[..1000]);
}

#[test]
fn an_endpoint_without_a_tier_is_never_shuffled_with_one_that_names_its_index() {
    // "b" has no tier and sits at index 1; "a" names tier 1. They are two tiers, in list
    // order, whatever their weights: "a" is always first.
    let policy = Policy::builder()
        .endpoint(ep("a").tier(1))
        .endpoint(ep("b").weight(1000))
        .endpoint(ep("c").tier(0))
        .build()
        .unwrap();
    let firsts = first_endpoints(&Engine::new(policy), 1000);
    assert!(firsts.iter().all(|&e| e == 2), "tier 0 first: {firsts:?}");
    let policy = Policy::builder()
        .endpoint(ep("a").tier(1))
        .endpoint(ep("b").weight(1000))
        .build()
        .unwrap();
    let firsts = first_endpoints(&Engine::new(policy), 1000);
    assert!(firsts.iter().all(|&e| e == 0), "b was shuffled with a");
}

#[test]
fn failover_goes_through_the_tier_by_weight_then_the_next_tier() {
    let mut s = sim(Policy::builder()
        .endpoint(ep("a").tier(0).weight(5))
        .endpoint(ep("b").tier(0).weight(1))
        .endpoint(ep("c").tier(0).weight(1))
        .endpoint(ep("backup").tier(1))
        .budget(None));
    for id in ["a", "b", "c"] {
        s.script(id, Script::status(503));
    }
    let mut firsts = std::collections::BTreeMap::new();
    for _ in 0..200 {
        let run = s.run(Method::GET, CallOptions::default());
        let tried = run.endpoints_attempted();
        assert_eq!(tried.len(), 4, "{tried:?}");
        let mut tier0 = tried[..3].to_vec();
        tier0.sort();
        assert_eq!(tier0, ["a", "b", "c"]);
        assert_eq!(tried[3], "backup");
        *firsts.entry(tried[0].to_string()).or_insert(0) += 1;
        s.engine().reset("a", s.now());
        s.engine().reset("b", s.now());
        s.engine().reset("c", s.now());
    }
    assert!(firsts["a"] > firsts["b"] + firsts["c"], "{firsts:?}");
}

#[test]
fn a_tier_larger_than_eight_is_ranked_whole_and_every_round_keeps_its_order() {
    // Twelve weighted endpoints in one tier and a backup: the ranked tier (inline, however
    // many endpoints it has) is a permutation of all twelve, and a second round walks the
    // same order again (it is derived from the same random state, not drawn anew).
    let mut b = Policy::builder().budget(None).max_attempts(26);
    for i in 0..12 {
        b = b.endpoint(ep(&format!("t{i:02}")).tier(0).weight(1 + i % 3));
    }
    let mut s = sim(b.endpoint(ep("backup").tier(1)).configure(|s| {
        s.breaker.rule = BreakerRule::Disabled;
    }));
    for i in 0..12 {
        s.script(&format!("t{i:02}"), Script::status(503));
    }
    s.script("backup", Script::status(503));
    let mut firsts = std::collections::BTreeSet::new();
    for _ in 0..50 {
        let run = s.run(Method::GET, CallOptions::default());
        let tried = run.endpoints_attempted();
        assert_eq!(tried.len(), 26, "{tried:?}");
        let (round1, round2) = tried.split_at(13);
        assert_eq!(round1, round2, "the second round keeps the ranked order");
        assert_eq!(round1[12], "backup");
        let mut tier: Vec<_> = round1[..12].to_vec();
        tier.sort();
        let all: Vec<String> = (0..12).map(|i| format!("t{i:02}")).collect();
        assert_eq!(tier, all, "every endpoint of the tier, once");
        firsts.insert(round1[0].to_string());
    }
    assert!(firsts.len() > 3, "the first endpoint is drawn: {firsts:?}");
}

#[test]
fn tiers_set_the_order_and_a_preferred_endpoint_still_goes_first() {
    let mut s = sim(Policy::builder()
        .endpoint(ep("late").tier(2))
        .endpoint(ep("early").tier(0))
        .endpoint(ep("mid").tier(1)));
    s.script("early", Script::status(503));
    let run = s.run(Method::GET, CallOptions::default());
    assert_eq!(run.endpoints_attempted(), ["early", "mid"]);
    let prefer = CallOptions {
        prefer: Some("late".into()),
        ..CallOptions::default()
    };
    let run = s.run(Method::GET, prefer);
    assert_eq!(run.endpoints_attempted(), ["late"]);
}

#[test]
fn an_endpoint_overrides_attempts_per_round_and_backoff() {
    let slow = Backoff {
        initial: Duration::from_millis(70),
        multiplier: 1.0,
        max: Duration::from_secs(1),
        jitter: Jitter::None,
    };
    let mut s = sim(Policy::builder()
        .endpoint(ep("a").attempts_per_endpoint(3).backoff(slow))
        .endpoint(ep("b"))
        .configure(|s| s.breaker.rule = BreakerRule::Disabled));
    s.script("a", Script::status(503));
    let run = s.run(Method::GET, CallOptions::default());
    assert_eq!(run.endpoints_attempted(), ["a", "a", "a", "b"]);
    assert_eq!(run.elapsed, Duration::from_millis(140));
    // The call's own setting overrides the endpoint's.
    let once = CallOptions {
        attempts_per_endpoint: Some(1),
        ..CallOptions::default()
    };
    let run = s.run(Method::GET, once);
    assert_eq!(run.endpoints_attempted(), ["a", "b"]);
}

#[test]
fn an_endpoint_backoff_inherits_the_settings_it_leaves_unset() {
    let first = BackoffOverride {
        initial: Some(Duration::from_millis(30)),
        ..BackoffOverride::default()
    };
    // The policy's multiplier (1) and jitter (none) apply to the endpoint's own initial.
    let mut s = sim(Policy::builder()
        .endpoint(ep("a").attempts_per_endpoint(3).backoff(first))
        .configure(|s| s.backoff.multiplier = 1.0));
    s.script("a", Script::status(503));
    let run = s.run(Method::GET, CallOptions::default());
    assert_eq!(run.endpoints_attempted(), ["a", "a", "a"]);
    assert_eq!(run.elapsed, Duration::from_millis(60));
}

#[test]
fn bad_endpoint_settings_name_the_endpoint_and_the_setting() {
    let e = Policy::builder()
        .endpoint(ep("eu").weight(0))
        .build()
        .unwrap_err();
    let text = e.to_string();
    assert!(text.contains("\"eu\"") && text.contains("weight"), "{text}");
    let e = Policy::builder()
        .endpoint(ep("us").attempts_per_endpoint(0))
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("attempts_per_endpoint"), "{e}");
    let zero = Backoff {
        multiplier: 0.5,
        ..Backoff::default()
    };
    let e = Policy::builder()
        .endpoint(ep("ap").backoff(zero))
        .build()
        .unwrap_err();
    assert!(
        e.to_string().contains("\"ap\"") && e.to_string().contains("backoff.multiplier"),
        "{e}"
    );
}

/// PushX's breaker, as a one-endpoint policy that skips unavailable endpoints: open, a
/// call is refused at once with nothing sent; half-open, exactly one call is the probe and
/// the others are refused until it reports.
#[test]
fn one_endpoint_skip_policy_refuses_while_open_and_admits_one_probe() {
    let policy = Policy::builder()
        .endpoint(ep("push"))
        .configure(|s| {
            s.unavailable = Unavailable::Skip;
            s.attempts_per_endpoint = Some(1);
            s.breaker.rule = BreakerRule::Consecutive { failures: 1 };
            s.breaker.open = Duration::from_secs(1);
        })
        .build()
        .unwrap();
    let engine = Engine::new(policy);
    let (uri, headers) = ("/".parse::<http::Uri>().unwrap(), http::HeaderMap::new());
    let info = RequestInfo {
        method: &Method::POST,
        uri: &uri,
        headers: &headers,
    };
    let t0 = Instant::now();
    let start =
        |t| Call::<'_, Head>::new(&engine, &info, BodyKind::Empty, CallOptions::default(), t);
    let mut failing = start(t0);
    let Action::Send(a) = failing.poll() else {
        panic!("sends")
    };
    failing.handle(
        Input::Response {
            attempt: a.number,
            response: Head::new(http::StatusCode::SERVICE_UNAVAILABLE),
            wall: None,
        },
        t0,
    );
    assert_eq!(failing.poll(), Action::Done);
    drop(failing);
    let refused = |t| {
        let mut c = start(t);
        assert_eq!(c.poll(), Action::Done, "refused before any send");
        let report = c.take_done().into_report();
        assert!(report.attempts.is_empty());
        assert_eq!(report.stop_reason, StopReason::NoUsableEndpoint);
    };
    refused(t0);
    let t1 = t0 + Duration::from_secs(1);
    let mut probe = start(t1);
    let Action::Send(p) = probe.poll() else {
        panic!("the probe is sent")
    };
    assert!(p.probe);
    refused(t1);
    refused(t1 + Duration::from_millis(10));
    probe.handle(
        Input::Response {
            attempt: p.number,
            response: Head::new(http::StatusCode::OK),
            wall: None,
        },
        t1,
    );
    assert_eq!(probe.poll(), Action::Done);
    drop(probe);
    let mut after = start(t1);
    assert!(matches!(after.poll(), Action::Send(_)), "closed again");
}
