//! Probes the caller drives: an unhealthy health answer opens the breaker; once the open
//! time passed the endpoint is due, and a healthy probe closes it (testkit's probe
//! scenario).

use std::time::Duration;

use baton_core::{BreakerRule, BreakerState, Endpoint, Policy};
use baton_tokio::Client;

#[tokio::test]
async fn probes_move_the_breaker_like_calls() {
    let p = testkit::probes::provider();
    let policy = Policy::builder()
        .endpoint(Endpoint::new("a", p.url()).header("authorization", "Bearer t"))
        .configure(|s| {
            s.breaker.rule = BreakerRule::Consecutive { failures: 1 };
            s.breaker.open = Duration::from_millis(200);
            s.probe.path = Some("/health".into());
            s.env_proxies = false;
        });
    let client = Client::new(policy).unwrap();
    let r = client.probe("a").await.unwrap();
    assert_eq!((r.healthy, r.state), (false, BreakerState::Open));
    assert!(client.probe_due().await.is_empty(), "open: not due yet");
    assert!(client.probe("a").await.is_err(), "open: refused");
    tokio::time::sleep(Duration::from_millis(250)).await;
    let due = client.probe_due().await;
    assert_eq!(due.len(), 1);
    assert_eq!((due[0].healthy, due[0].state), (true, BreakerState::Closed));
    testkit::probes::check(&p);
}
