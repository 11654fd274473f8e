//! Credentials that refresh themselves (SPEC 9), against token-checking providers on
//! loopback: one provider call for any number of concurrent calls, invalidation by
//! generation, a refusal after a fresh token fails over, tokens stay with their endpoint.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton_core::credential::{CredentialSettings, Token};
use baton_core::{Endpoint, Policy};
use testkit::auth::AuthServer;

/// A token provider whose answers per endpoint are scripted; counts its calls.
#[derive(Clone, Default)]
struct Tokens {
    calls: Arc<Mutex<Vec<String>>>,
    next: Arc<Mutex<std::collections::HashMap<String, Result<String, String>>>>,
}

impl Tokens {
    fn set(&self, endpoint: &str, answer: Result<&str, &str>) {
        let a = answer.map(str::to_owned).map_err(str::to_owned);
        self.next.lock().unwrap().insert(endpoint.to_owned(), a);
    }

    fn calls(&self, endpoint: &str) -> usize {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|e| *e == endpoint)
            .count()
    }

    fn client(&self, policy: baton_core::PolicyBuilder) -> baton_tokio::Client {
        let me = self.clone();
        baton_tokio::Client::builder(policy)
            .token_provider(move |endpoint: &str| {
                let me = me.clone();
                let endpoint = endpoint.to_owned();
                async move {
                    // A provider that takes a moment: concurrent callers pile up on it.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    me.calls.lock().unwrap().push(endpoint.clone());
                    let answer = me.next.lock().unwrap().get(&endpoint).cloned();
                    match answer.unwrap_or(Err("no token scripted".into())) {
                        Ok(t) => Ok(Token::new(t).expires_in(Duration::from_secs(3600))),
                        Err(e) => Err(e),
                    }
                }
            })
            .build()
            .unwrap()
    }
}

fn policy(endpoints: &[(&str, &AuthServer)]) -> baton_core::PolicyBuilder {
    let mut b = Policy::builder()
        .connect_timeout(Duration::from_millis(300))
        .attempt_timeout(Duration::from_secs(2));
    for (id, s) in endpoints {
        b = b.endpoint(Endpoint::new(*id, s.url()).credential(CredentialSettings::default()));
    }
    b
}

fn tokens_seen(s: &AuthServer) -> Vec<String> {
    s.seen().into_iter().flatten().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_calls_meeting_a_rotated_token_cause_one_provider_call() {
    let a = AuthServer::start("t1");
    let b = AuthServer::start("b1");
    let tokens = Tokens::default();
    tokens.set("a", Ok("t1"));
    tokens.set("b", Ok("b1"));
    let client = tokens.client(policy(&[("a", &a), ("b", &b)]));
    assert_eq!(client.get("/").send().await.unwrap().status(), 200);
    assert_eq!(tokens.calls("a"), 1);
    // The provider rotates: t1 is now refused (expired on the server's side).
    a.accept("t2");
    tokens.set("a", Ok("t2"));
    let calls = (0..64).map(|_| {
        let c = client.clone();
        tokio::spawn(async move { c.get("/").send().await })
    });
    for call in calls {
        let resp = call.await.unwrap().unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(
            resp.endpoint(),
            "a",
            "refreshed and re-sent to the same endpoint"
        );
    }
    assert_eq!(
        tokens.calls("a"),
        2,
        "exactly one provider call for the 64 calls"
    );
    assert!(tokens_seen(&b).is_empty(), "no call reached b");
    for t in tokens_seen(&a) {
        assert!(t == "Bearer t1" || t == "Bearer t2", "{t}");
    }
}

#[tokio::test]
async fn a_refusal_right_after_a_fresh_token_fails_over_with_the_backups_own_token() {
    let a = AuthServer::start("never");
    let b = AuthServer::start("b1");
    let tokens = Tokens::default();
    tokens.set("a", Ok("a1"));
    tokens.set("b", Ok("b1"));
    let client = tokens.client(policy(&[("a", &a), ("b", &b)]));
    // Even a POST without a key may fail over: a 401 is a refusal, nothing was processed.
    let resp = client.post("/").body("{}").send().await.unwrap();
    assert_eq!((resp.status().as_u16(), resp.endpoint()), (200, "b"));
    assert_eq!(
        tokens.calls("a"),
        1,
        "a fresh token's refusal is not refreshed again"
    );
    assert_eq!(tokens_seen(&a), ["Bearer a1"]);
    assert_eq!(
        tokens_seen(&b),
        ["Bearer b1"],
        "b gets its own token, never a's"
    );
    let attempts = &resp.report().attempts;
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[0].result.status().map(|s| s.as_u16()), Some(401));
}

#[tokio::test]
async fn a_failing_provider_keeps_the_valid_token_and_is_not_asked_on_every_call() {
    let a = AuthServer::start("t1");
    let b = AuthServer::start("b1");
    let tokens = Tokens::default();
    let calls = Arc::new(AtomicUsize::new(0));
    let c2 = calls.clone();
    // Valid for 10 s, refreshed 30 s ahead: due at once, and the refresh fails.
    let client = baton_tokio::Client::builder(policy(&[("a", &a), ("b", &b)]))
        .token_provider(move |_: &str| {
            let n = c2.fetch_add(1, Ordering::SeqCst);
            async move {
                match n {
                    0 => Ok(Token::new("t1").expires_in(Duration::from_secs(10))),
                    _ => Err("identity service down"),
                }
            }
        })
        .build()
        .unwrap();
    for _ in 0..10 {
        let resp = client.get("/").send().await.unwrap();
        assert_eq!((resp.status().as_u16(), resp.endpoint()), (200, "a"));
    }
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "one fill, one failed refresh, then the backoff"
    );
    drop(tokens);
}

#[tokio::test]
async fn no_token_at_all_fails_the_attempt_undelivered_and_the_call_fails_over() {
    let a = AuthServer::start("t1");
    let b = AuthServer::start("b1");
    let tokens = Tokens::default();
    tokens.set("a", Err("cannot reach the vault"));
    tokens.set("b", Ok("b1"));
    let client = tokens.client(policy(&[("a", &a), ("b", &b)]));
    let resp = client.post("/").body("{}").send().await.unwrap();
    assert_eq!(resp.endpoint(), "b");
    assert!(a.seen().is_empty(), "nothing was sent to a");
    let debug = format!("{:?} {:?} {client:?}", resp, resp.report());
    assert!(!debug.contains("b1") && !debug.contains("vault"), "{debug}");
}

#[test]
fn a_credential_without_a_provider_is_a_build_error() {
    let policy = Policy::builder().endpoint(
        Endpoint::new("a", "http://127.0.0.1:1/").credential(CredentialSettings::default()),
    );
    let e = baton_tokio::Client::new(policy).unwrap_err();
    assert!(e.to_string().contains("token_provider"), "{e}");
}
