//! Probes the caller drives, on every runtime (testkit's probe scenario): the health
//! request goes to the endpoint's probe path with its credentials, an unhealthy answer
//! opens the breaker, and once the open time passed the endpoint is due and a healthy
//! probe closes it.

use std::time::Duration;

use baton_core::{BreakerRule, BreakerState, Endpoint, Policy, PolicyBuilder, ProbeResult};
use testkit::Provider;

/// How long the breaker stays open, and how long each test sleeps past it.
const OPEN: Duration = Duration::from_millis(200);
const PAST_OPEN: Duration = Duration::from_millis(250);

/// One endpoint with a credential, tripped by one failure, probed at `/health`.
fn policy(p: &Provider) -> PolicyBuilder {
    Policy::builder()
        .endpoint(Endpoint::new("a", p.url()).header("authorization", "Bearer t"))
        .configure(|s| {
            s.breaker.rule = BreakerRule::Consecutive { failures: 1 };
            s.breaker.open = OPEN;
            s.probe.path = Some("/health".into());
            s.env_proxies = false;
        })
}

/// The first probe: the provider's 503 opens the breaker.
fn unhealthy(r: &ProbeResult) {
    assert_eq!((r.healthy, r.state), (false, BreakerState::Open));
    assert_eq!(r.status.map(|s| s.as_u16()), Some(503));
}

/// The probes of the due endpoints once the open time passed: one, healthy, closing it.
fn closed(due: &[ProbeResult]) {
    assert_eq!(due.len(), 1);
    assert_eq!((due[0].healthy, due[0].state), (true, BreakerState::Closed));
}

#[test]
fn on_tokio() {
    let p = testkit::probes::provider();
    let client = baton_tokio::Client::new(policy(&p)).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        unhealthy(&client.probe("a").await.unwrap());
        assert!(client.probe_due().await.is_empty(), "open: not due yet");
        assert!(client.probe("a").await.is_err(), "open: refused");
        tokio::time::sleep(PAST_OPEN).await;
        closed(&client.probe_due().await);
    });
    testkit::probes::check(&p);
}

#[test]
fn on_blocking() {
    let p = testkit::probes::provider();
    let client = baton_blocking::Client::new(policy(&p)).unwrap();
    unhealthy(&client.probe("a").unwrap());
    assert!(client.probe_due().is_empty(), "open: not due yet");
    assert!(client.probe("a").is_err(), "open: refused");
    std::thread::sleep(PAST_OPEN);
    closed(&client.probe_due());
    testkit::probes::check(&p);
}

/// The async-std adapter's scenario, with `sleep` waiting past the open time on the
/// runtime that runs it.
async fn on_async_io(sleep: impl std::future::Future<Output = ()>) {
    let p = testkit::probes::provider();
    let client = baton_async_std::Client::new(policy(&p)).unwrap();
    unhealthy(&client.probe("a").await.unwrap());
    assert!(client.probe_due().await.is_empty(), "open: not due yet");
    assert!(client.probe("a").await.is_err(), "open: refused");
    sleep.await;
    closed(&client.probe_due().await);
    testkit::probes::check(&p);
}

#[test]
fn on_async_std() {
    async_std::task::block_on(on_async_io(async_std::task::sleep(PAST_OPEN)));
}

#[test]
fn on_smol() {
    smol::block_on(on_async_io(async {
        smol::Timer::after(PAST_OPEN).await;
    }));
}
