//! Probes the caller drives, on every runtime (testkit's probe scenario): the health
//! request goes to the endpoint's probe path with its headers, an unhealthy answer
//! opens the breaker, and once the open time passed the endpoint is due and a healthy
//! probe closes it; a credential slot's token goes with it, refreshed after a refusal.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use baton_core::credential::{CredentialSettings, Token};
use baton_core::{BreakerRule, BreakerState, Endpoint, Policy, PolicyBuilder, ProbeResult};
use testkit::auth::AuthServer;
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

/// An endpoint with a credential slot, probed at `/health` by a server that checks the
/// token; and the slot's provider, which hands out `t1`, then `t2`.
fn with_slot() -> (
    AuthServer,
    PolicyBuilder,
    impl Fn(&str) -> Result<Token, String> + Clone,
) {
    let server = AuthServer::start("t1");
    let slot = Endpoint::new("a", server.url()).credential(CredentialSettings::default());
    let policy = Policy::builder().endpoint(slot).configure(|s| {
        s.probe.path = Some("/health".into());
        s.env_proxies = false;
    });
    let fetched = Arc::new(AtomicUsize::new(0));
    let tokens = move |_: &str| {
        let n = fetched.fetch_add(1, Ordering::SeqCst) + 1;
        Ok(Token::new(format!("t{n}")).expires_in(Duration::from_secs(3600)))
    };
    (server, policy, tokens)
}

/// A probe carries the slot's token, and once the server rotated it, the refused token is
/// refreshed and the probe sent once more: healthy both times, never a breaker failure.
fn carried_the_token(first: &ProbeResult, rotated: &ProbeResult, server: &AuthServer) {
    for r in [first, rotated] {
        assert_eq!((r.healthy, r.state), (true, BreakerState::Closed), "{r:?}");
    }
    let seen: Vec<_> = server.seen().into_iter().flatten().collect();
    assert_eq!(seen, ["Bearer t1", "Bearer t1", "Bearer t2"]);
}

#[test]
fn a_probe_carries_the_slot_token_on_tokio() {
    let (server, policy, tokens) = with_slot();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = {
        let _g = rt.enter();
        baton_tokio::Client::builder(policy)
            .token_provider(move |e: &str| std::future::ready(tokens(e)))
            .build()
            .unwrap()
    };
    let first = rt.block_on(client.probe("a")).unwrap();
    server.accept("t2");
    let rotated = rt.block_on(client.probe("a")).unwrap();
    carried_the_token(&first, &rotated, &server);
}

#[test]
fn a_probe_carries_the_slot_token_on_blocking() {
    let (server, policy, tokens) = with_slot();
    let client = baton_blocking::Client::builder(policy)
        .token_provider(tokens)
        .build()
        .unwrap();
    let first = client.probe("a").unwrap();
    server.accept("t2");
    carried_the_token(&first, &client.probe("a").unwrap(), &server);
}

#[test]
fn a_probe_carries_the_slot_token_on_async_std_and_smol() {
    for smol in [false, true] {
        let (server, policy, tokens) = with_slot();
        let client = baton_async_std::Client::builder(policy)
            .token_provider(move |e: &str| std::future::ready(tokens(e)))
            .build()
            .unwrap();
        let run = |f| match smol {
            true => smol::block_on(f),
            false => async_std::task::block_on(f),
        };
        let first = run(client.probe("a")).unwrap();
        server.accept("t2");
        let rotated = run(client.probe("a")).unwrap();
        carried_the_token(&first, &rotated, &server);
    }
}

/// SPEC 2.5 on every runtime: a probe answered 503 with `Retry-After: 120` opens the
/// breaker and makes the endpoint unavailable for the 120 s it asked, not only for the
/// breaker's open time. Before, a probe's `Retry-After` was never read: the endpoint was
/// due again after 200 ms.
#[test]
fn a_probes_retry_after_holds_the_endpoint_on_every_runtime() {
    let busy = || Provider::start(testkit::Behaviour::status(503).header("retry-after", "120"));
    let held =
        |runtime: &str, r: &ProbeResult, due: usize, health: Option<baton_core::EndpointHealth>| {
            assert_eq!(
                (r.healthy, r.state),
                (false, BreakerState::Open),
                "{runtime}"
            );
            assert_eq!(due, 0, "{runtime}: due again before the Retry-After");
            let h = health.unwrap();
            assert!(!h.available && h.not_before.is_some(), "{runtime}: {h:?}");
        };
    let p = busy();
    let client = baton_blocking::Client::new(policy(&p)).unwrap();
    let r = client.probe("a").unwrap();
    std::thread::sleep(PAST_OPEN);
    held("blocking", &r, client.probe_due().len(), client.health("a"));
    let p = busy();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = {
        let _g = rt.enter();
        baton_tokio::Client::new(policy(&p)).unwrap()
    };
    let r = rt.block_on(client.probe("a")).unwrap();
    std::thread::sleep(PAST_OPEN);
    held(
        "tokio",
        &r,
        rt.block_on(client.probe_due()).len(),
        client.health("a"),
    );
    let p = busy();
    let client = baton_async_std::Client::new(policy(&p)).unwrap();
    let r = async_std::task::block_on(client.probe("a")).unwrap();
    std::thread::sleep(PAST_OPEN);
    let due = async_std::task::block_on(client.probe_due()).len();
    held("async-std", &r, due, client.health("a"));
}
