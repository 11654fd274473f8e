//! `baton check`'s counterexamples are vectors: written out, loaded back and run on the
//! simulator, they fail exactly as the check reported, and only on the safety rule.

use std::time::Instant;

use baton_core::verify::{CallClass, Check};
use baton_core::{Endpoint, Permission, PermissionOverride, Policy};
use conformance::{check, run_sim, Vector};

/// Lets every POST retry and fail over always, and keyed POSTs retry on 500; endpoints
/// with `ids`.
fn unsafe_policy([a, b, c]: [&str; 3]) -> Policy {
    Policy::builder()
        .endpoint(Endpoint::new(a, "https://a.example/"))
        .endpoint(Endpoint::new(b, "https://b.example/").group("pay"))
        .endpoint(Endpoint::new(c, "https://c.example/").group("pay"))
        .attempt_timeout(std::time::Duration::from_millis(500))
        .permission_fn(|req| {
            if req.method == http::Method::POST {
                PermissionOverride::both(Permission::Always)
            } else {
                PermissionOverride::default()
            }
        })
        .extend_key_trigger_statuses(&[500])
        .build()
        .unwrap()
}

#[test]
fn a_counterexample_fails_the_simulator_runner_exactly_as_reported() {
    replays_as_reported(["a", "b", "c"]);
}

/// Any id a policy accepts replays, also one no host name can hold. Before, the
/// simulator's provider of `eu/1` was host `eu`: every attempt there replayed undelivered
/// (or the vector's policy did not build).
#[test]
fn a_counterexample_with_ids_that_are_no_host_names_replays() {
    replays_as_reported(["eu/1", "us 2", "ap:3"]);
}

fn replays_as_reported(ids: [&str; 3]) {
    let findings = Check::new()
        .calls(4_000)
        .run(&unsafe_policy(ids), Instant::now());
    let mut checked = 0;
    for class in findings
        .classes
        .iter()
        .filter(|c| c.class != CallClass::SafeRead)
    {
        assert!(class.violations > 0, "{:?} found no violation", class.class);
        let cx = class.counterexample.as_ref().expect("a counterexample");
        let text = toml::to_string(&cx.vector).unwrap();
        let vector: Vector = toml::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let observed = run_sim(&vector).unwrap();
        assert_eq!(observed.len(), vector.calls.len());
        let (last, got) = (vector.calls.last().unwrap(), observed.last().unwrap());
        let bad = check(&vector, last, got, conformance::Slack::NONE);
        let reported: Vec<String> = cx
            .violations
            .iter()
            .map(|v| format!("safety: {v}"))
            .collect();
        assert!(!reported.is_empty());
        assert_eq!(bad, reported, "{text}");
        for (c, o) in vector
            .calls
            .iter()
            .zip(&observed)
            .take(vector.calls.len() - 1)
        {
            assert!(check(&vector, c, o, conformance::Slack::NONE).is_empty());
        }
        checked += 1;
    }
    assert_eq!(checked, 2);
}

#[test]
fn a_safe_policy_has_no_counterexample() {
    let policy = Policy::builder()
        .endpoint(Endpoint::new("a", "https://a.example/"))
        .endpoint(Endpoint::new("b", "https://b.example/"))
        .build()
        .unwrap();
    let findings = Check::new().calls(4_000).run(&policy, Instant::now());
    assert!(findings.is_safe());
    assert!(findings.classes.iter().all(|c| c.counterexample.is_none()));
}
