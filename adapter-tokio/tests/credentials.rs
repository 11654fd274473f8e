//! Credentials on baton-tokio (SPEC 9) beyond the scenarios every runtime runs in
//! `conformance/tests/credentials.rs` (rotation under 64 concurrent calls, a fresh token's
//! refusal, no token at all): a failing provider keeps the valid token, and a credential
//! without a provider is a build error.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use baton_core::credential::{CredentialSettings, Token};
use baton_core::{Endpoint, Policy};
use testkit::auth::AuthServer;

fn policy(endpoints: &[(&str, &AuthServer)]) -> baton_core::PolicyBuilder {
    let mut b = Policy::builder()
        .connect_timeout(Duration::from_millis(300))
        .attempt_timeout(Duration::from_secs(2));
    for (id, s) in endpoints {
        b = b.endpoint(Endpoint::new(*id, s.url()).credential(CredentialSettings::default()));
    }
    b
}

#[tokio::test]
async fn a_failing_provider_keeps_the_valid_token_and_is_not_asked_on_every_call() {
    let a = AuthServer::start("t1");
    let b = AuthServer::start("b1");
    let calls = Arc::new(AtomicUsize::new(0));
    let c2 = calls.clone();
    // Valid for 3 s; the 30 s margin is capped at half of it, less up to a fifth of that
    // (jitter): due after 1.5-1.8 s, and the refresh fails.
    let client = baton_tokio::Client::builder(policy(&[("a", &a), ("b", &b)]))
        .token_provider(move |_: &str| {
            let n = c2.fetch_add(1, Ordering::SeqCst);
            async move {
                match n {
                    0 => Ok(Token::new("t1").expires_in(Duration::from_secs(3))),
                    _ => Err("identity service down"),
                }
            }
        })
        .build()
        .unwrap();
    let resp = client.get("/").send().await.unwrap();
    assert_eq!((resp.status().as_u16(), resp.endpoint()), (200, "a"));
    tokio::time::sleep(Duration::from_millis(1_900)).await;
    for _ in 0..10 {
        let resp = client.get("/").send().await.unwrap();
        assert_eq!((resp.status().as_u16(), resp.endpoint()), (200, "a"));
    }
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "one fill, one failed refresh, then the backoff"
    );
}

#[test]
fn a_credential_without_a_provider_is_a_build_error() {
    let policy = Policy::builder().endpoint(
        Endpoint::new("a", "http://127.0.0.1:1/").credential(CredentialSettings::default()),
    );
    let e = baton_tokio::Client::new(policy).unwrap_err();
    assert!(e.to_string().contains("token_provider"), "{e}");
}

#[tokio::test]
async fn a_refusal_is_refreshed_and_resent_when_the_body_is_tracked_for_the_connect_phase() {
    // An attempt timeout within the connect timeout: the adapter wraps the body to learn
    // whether it was written; the re-send after a refusal uses a copy taken before that.
    let a = AuthServer::start("t1");
    let calls = Arc::new(AtomicUsize::new(0));
    let c2 = calls.clone();
    let policy = Policy::builder()
        .connect_timeout(Duration::from_secs(2))
        .attempt_timeout(Duration::from_secs(1))
        .endpoint(Endpoint::new("a", a.url()).credential(CredentialSettings::default()));
    let client = baton_tokio::Client::builder(policy)
        .token_provider(move |_: &str| {
            let n = c2.fetch_add(1, Ordering::SeqCst);
            async move { Ok::<_, String>(Token::new(if n == 0 { "t1" } else { "t2" })) }
        })
        .build()
        .unwrap();
    assert_eq!(
        client.post("/").body("{}").send().await.unwrap().status(),
        200
    );
    a.accept("t2");
    let resp = client.post("/").body("{}").send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.report().attempts.len(),
        1,
        "refreshed and re-sent within the attempt"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_provider_slower_than_the_attempt_fails_it_undelivered_so_a_post_fails_over() {
    let a = AuthServer::start("ta");
    let b = AuthServer::start("tb");
    let policy = policy(&[("a", &a), ("b", &b)]).attempt_timeout(Duration::from_millis(400));
    let client = baton_tokio::Client::builder(policy)
        .token_provider(|endpoint: &str| {
            let slow = endpoint == "a";
            let token = format!("t{endpoint}");
            async move {
                if slow {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                }
                Ok::<_, String>(Token::new(token))
            }
        })
        .build()
        .unwrap();
    let t0 = std::time::Instant::now();
    // An unkeyed POST may fail over only while nothing may have executed.
    let resp = client.post("/").body("{}").send().await.unwrap();
    assert_eq!(resp.endpoint(), "b");
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    assert!(a.seen().is_empty());
    assert!(!resp.report().attempts[0]
        .result
        .may_have_executed(&Default::default()));
}

/// A token that takes a while eats into the attempt's time: the attempt timer then fires
/// while the connection is still in the making, though it is longer than the connect
/// timeout. Nothing was written, so the POST fails over. Before, a timer longer than the
/// connect timeout was taken to have fired after the connection was ready: ambiguous, and
/// the POST stopped there.
#[tokio::test]
async fn an_attempt_timer_that_fires_while_connecting_after_a_slow_token_is_undelivered() {
    let hung = testkit::HungConnect::start();
    let b = testkit::Provider::start(testkit::Behaviour::ok());
    let policy = Policy::builder()
        .connect_timeout(Duration::from_millis(500))
        .attempt_timeout(Duration::from_millis(600))
        .endpoint(
            Endpoint::new("a", format!("http://{}", hung.addr()))
                .credential(CredentialSettings::default()),
        )
        .endpoint(Endpoint::new("b", b.url()));
    let client = baton_tokio::Client::builder(policy)
        .token_provider(|_: &str| async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            Ok::<_, &str>(Token::new("t1").expires_in(Duration::from_secs(600)))
        })
        .build()
        .unwrap();
    let resp = client.post("/").body("{}").send().await;
    let resp = resp.unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!((resp.status().as_u16(), resp.endpoint()), (200, "b"));
    let first = resp.report().attempts[0].result;
    let connect = baton_core::AttemptResult::TimedOut(baton_core::TimeoutPhase::Connect);
    assert_eq!(first, connect);
}
