//! Probes the caller drives, on async-std and on smol: an unhealthy health answer opens
//! the breaker; once the open time passed the endpoint is due, and a healthy probe closes
//! it (testkit's probe scenario).

use std::time::Duration;

use baton_async_std::Client;
use baton_core::{BreakerRule, BreakerState, Endpoint, Policy};

async fn probes_move_the_breaker_like_calls(sleep: impl std::future::Future<Output = ()>) {
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
    sleep.await;
    let due = client.probe_due().await;
    assert_eq!(due.len(), 1);
    assert_eq!((due[0].healthy, due[0].state), (true, BreakerState::Closed));
    testkit::probes::check(&p);
}

#[test]
fn on_async_std() {
    async_std::task::block_on(probes_move_the_breaker_like_calls(async_std::task::sleep(
        Duration::from_millis(250),
    )));
}

#[test]
fn on_smol() {
    smol::block_on(async {
        let sleep = async {
            smol::Timer::after(Duration::from_millis(250)).await;
        };
        probes_move_the_breaker_like_calls(sleep).await
    });
}
