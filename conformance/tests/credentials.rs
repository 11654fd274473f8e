//! Credentials (SPEC 9) on every runtime: 64 concurrent calls meeting a rotated token cause one provider call and are
//! all re-sent to the same endpoint; a fresh token's refusal fails over with the backup's
//! own token; a provider that cannot give a token fails the attempt undelivered; a
//! redirect hop's refused token is the answer; a later attempt's refused token is
//! refreshed and re-sent once, as a first attempt's; on every runtime.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton_core::credential::{CredentialSettings, Token};
use baton_core::{Endpoint, Policy, PolicyBuilder};
use testkit::auth::AuthServer;
use testkit::{Behaviour, Provider};

/// Scripted tokens per endpoint, and the provider calls made.
#[derive(Clone, Default)]
struct Tokens {
    calls: Arc<Mutex<Vec<String>>>,
    answers: Arc<Mutex<std::collections::HashMap<String, Result<String, String>>>>,
}

impl Tokens {
    fn set(&self, endpoint: &str, answer: Result<&str, &str>) {
        let a = answer.map(str::to_owned).map_err(str::to_owned);
        self.answers.lock().unwrap().insert(endpoint.into(), a);
    }

    fn calls(&self, endpoint: &str) -> usize {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|e| *e == endpoint)
            .count()
    }

    /// One provider call: a moment's work, then the scripted answer.
    fn fetch(&self, endpoint: &str) -> Result<Token, String> {
        std::thread::sleep(Duration::from_millis(20));
        self.calls.lock().unwrap().push(endpoint.into());
        let answer = self.answers.lock().unwrap().get(endpoint).cloned();
        answer
            .unwrap_or(Err("no token scripted".into()))
            .map(|t| Token::new(t).expires_in(Duration::from_secs(3600)))
    }
}

fn policy(servers: &[(&str, &AuthServer)]) -> PolicyBuilder {
    let mut b = Policy::builder()
        .connect_timeout(Duration::from_millis(300))
        .attempt_timeout(Duration::from_secs(2));
    for (id, s) in servers {
        b = b.endpoint(Endpoint::new(*id, s.url()).credential(CredentialSettings::default()));
    }
    b
}

fn tokens_seen(s: &AuthServer) -> Vec<String> {
    s.seen().into_iter().flatten().collect()
}

/// What one call returned: (status, endpoint).
type Outcome = (u16, String);

/// Runs `n` concurrent calls (POST with a body, or GET) through one runtime's client.
type Calls = Box<dyn Fn(bool, usize) -> Vec<Outcome>>;

/// Builds a runtime's client over a policy and a token script.
type MakeCalls = dyn Fn(PolicyBuilder, Tokens) -> Calls;

/// The three scenarios over one runtime's calls.
fn scenarios(runtime: &str, make: &MakeCalls) {
    // 1. Rotation under load: one provider call.
    let (a, b) = (AuthServer::start("t1"), AuthServer::start("b1"));
    let tokens = Tokens::default();
    tokens.set("a", Ok("t1"));
    tokens.set("b", Ok("b1"));
    let calls = make(policy(&[("a", &a), ("b", &b)]), tokens.clone());
    assert_eq!(calls(false, 1), [(200, "a".to_string())], "{runtime}");
    a.accept("t2");
    tokens.set("a", Ok("t2"));
    let got = calls(false, 64);
    assert!(
        got.iter().all(|(s, e)| *s == 200 && e == "a"),
        "{runtime}: {got:?}"
    );
    assert_eq!(
        tokens.calls("a"),
        2,
        "{runtime}: one provider call for 64 calls"
    );
    assert!(tokens_seen(&b).is_empty(), "{runtime}");

    // 2. A fresh token refused: the POST fails over, with b's own token.
    let (a, b) = (AuthServer::start("never"), AuthServer::start("b1"));
    let tokens = Tokens::default();
    tokens.set("a", Ok("a1"));
    tokens.set("b", Ok("b1"));
    let calls = make(policy(&[("a", &a), ("b", &b)]), tokens.clone());
    assert_eq!(calls(true, 1), [(200, "b".to_string())], "{runtime}");
    assert_eq!(tokens.calls("a"), 1, "{runtime}");
    assert_eq!(tokens_seen(&a), ["Bearer a1"], "{runtime}");
    assert_eq!(
        tokens_seen(&b),
        ["Bearer b1"],
        "{runtime}: never a's token at b"
    );

    // 3. No token for a: nothing is sent there; the POST fails over.
    let (a, b) = (AuthServer::start("t1"), AuthServer::start("b1"));
    let tokens = Tokens::default();
    tokens.set("a", Err("vault unreachable"));
    tokens.set("b", Ok("b1"));
    let calls = make(policy(&[("a", &a), ("b", &b)]), tokens.clone());
    assert_eq!(calls(true, 1), [(200, "b".to_string())], "{runtime}");
    assert!(a.seen().is_empty(), "{runtime}: nothing sent to a");

    // 4. A redirect that leaves a's origin and comes back: the hop back, whose URL the
    //    other origin chose, carries no token, and neither does the other origin.
    let other = Provider::start(Behaviour::ok());
    let own = Provider::builder()
        .then(Behaviour::status(302).header("location", format!("{}/there", other.url())))
        .otherwise(Behaviour::ok())
        .start();
    other.set_behaviour(Behaviour::status(302).header("location", format!("{}/back", own.url())));
    let tokens = Tokens::default();
    tokens.set("a", Ok("t1"));
    let slot = Endpoint::new("a", own.url()).credential(CredentialSettings::default());
    let calls = make(Policy::builder().endpoint(slot), tokens);
    assert_eq!(calls(false, 1), [(200, "a".to_string())], "{runtime}");
    let authorization = |p: &Provider| -> Vec<Option<String>> {
        let requests = p.requests();
        requests
            .iter()
            .map(|r| r.header("authorization").map(str::to_owned))
            .collect()
    };
    assert_eq!(
        authorization(&own),
        [Some("Bearer t1".into()), None],
        "{runtime}"
    );
    assert_eq!(authorization(&other), [None], "{runtime}");

    // 5. A held token refused, then its refreshed token refused too: both are invalidated,
    //    so the next call refreshes rather than sending the refused token again.
    let (a, b) = (AuthServer::start("t1"), AuthServer::start("b1"));
    let tokens = Tokens::default();
    tokens.set("a", Ok("t1"));
    tokens.set("b", Ok("b1"));
    let calls = make(policy(&[("a", &a), ("b", &b)]), tokens.clone());
    assert_eq!(calls(false, 1), [(200, "a".to_string())], "{runtime}");
    a.accept("t3");
    tokens.set("a", Ok("t2"));
    assert_eq!(calls(false, 1), [(200, "b".to_string())], "{runtime}");
    tokens.set("a", Ok("t3"));
    assert_eq!(calls(false, 1), [(200, "a".to_string())], "{runtime}");
    let sent = ["Bearer t1", "Bearer t1", "Bearer t2", "Bearer t3"];
    assert_eq!(tokens_seen(&a), sent, "{runtime}: t2 sent once");

    // 6. A POST answered 302 whose same-origin hop's token is refused: the token is
    //    invalidated and the refusal is the answer, with no re-send of the hop (a hop has
    //    no spare copy on any runtime) and no new attempt (the POST may have been done);
    //    the next call refreshes.
    let own = Provider::builder()
        .then(Behaviour::status(302).header("location", "/next"))
        .then(Behaviour::status(401))
        .otherwise(Behaviour::ok())
        .start();
    let tokens = Tokens::default();
    tokens.set("a", Ok("t1"));
    let slot = Endpoint::new("a", own.url()).credential(CredentialSettings::default());
    let calls = make(Policy::builder().endpoint(slot), tokens.clone());
    assert_eq!(calls(true, 1), [(401, "a".to_string())], "{runtime}");
    tokens.set("a", Ok("t2"));
    assert_eq!(calls(true, 1), [(200, "a".to_string())], "{runtime}");
    assert_eq!(
        tokens.calls("a"),
        2,
        "{runtime}: the refused token was dropped"
    );
    let bearer = |t: &str| Some(format!("Bearer {t}"));
    assert_eq!(
        authorization(&own),
        [bearer("t1"), bearer("t1"), bearer("t2")],
        "{runtime}"
    );

    // 7. A held token refused on a later attempt of a POST with a body (the first endpoint
    //    refused the connection): one refresh and one re-send, as on a first attempt.
    let a = AuthServer::start("t1");
    let tokens = Tokens::default();
    tokens.set("a", Ok("t1"));
    let slot = Endpoint::new("a", a.url()).credential(CredentialSettings::default());
    let policy = Policy::builder()
        .connect_timeout(Duration::from_millis(300))
        .attempt_timeout(Duration::from_secs(2))
        .endpoint(Endpoint::new("x", testkit::refused_url()))
        .endpoint(slot);
    let calls = make(policy, tokens.clone());
    assert_eq!(calls(true, 1), [(200, "a".to_string())], "{runtime}");
    a.accept("t2");
    tokens.set("a", Ok("t2"));
    assert_eq!(calls(true, 1), [(200, "a".to_string())], "{runtime}");
    let sent = ["Bearer t1", "Bearer t1", "Bearer t2"];
    assert_eq!(tokens_seen(&a), sent, "{runtime}: re-sent once, refreshed");
}

#[test]
fn blocking_credentials() {
    scenarios("blocking", &|policy, tokens| {
        let t = tokens.clone();
        let client = baton_blocking::Client::builder(policy)
            .token_provider(move |e: &str| t.fetch(e))
            .build()
            .unwrap();
        Box::new(move |post, n| {
            let threads: Vec<_> = (0..n)
                .map(|_| {
                    let c = client.clone();
                    std::thread::spawn(move || {
                        use baton_blocking::ResponseExt;
                        let r = if post {
                            c.post("/").send("{}")
                        } else {
                            c.get("/").call()
                        }
                        .unwrap();
                        (r.status().as_u16(), r.endpoint().unwrap().to_string())
                    })
                })
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).collect()
        })
    });
}

#[test]
fn tokio_credentials() {
    let rt = Arc::new(tokio::runtime::Runtime::new().unwrap());
    scenarios("tokio", &move |policy, tokens| {
        let client = {
            let _g = rt.enter();
            baton_tokio::Client::builder(policy)
                .token_provider(move |e: &str| {
                    let (t, e) = (tokens.clone(), e.to_owned());
                    async move {
                        tokio::task::spawn_blocking(move || t.fetch(&e))
                            .await
                            .unwrap()
                    }
                })
                .build()
                .unwrap()
        };
        let rt = rt.clone();
        Box::new(move |post, n| {
            rt.block_on(async {
                let tasks: Vec<_> = (0..n)
                    .map(|_| {
                        let c = client.clone();
                        tokio::spawn(async move {
                            let r = if post {
                                c.post("/").body("{}")
                            } else {
                                c.get("/")
                            };
                            let r = r.send().await.unwrap();
                            (r.status().as_u16(), r.endpoint().to_string())
                        })
                    })
                    .collect();
                let mut out = Vec::new();
                for t in tasks {
                    out.push(t.await.unwrap());
                }
                out
            })
        })
    });
}

fn async_client(policy: PolicyBuilder, tokens: Tokens) -> baton_async_std::Client {
    baton_async_std::Client::builder(policy)
        .token_provider(move |e: &str| {
            let (t, e) = (tokens.clone(), e.to_owned());
            // The provider's moment of work off the executor (smol's thread pool).
            async move { smol::unblock(move || t.fetch(&e)).await }
        })
        .build()
        .unwrap()
}

async fn one(c: baton_async_std::Client, post: bool) -> Outcome {
    let r = if post {
        c.post("/").body("{}")
    } else {
        c.get("/")
    };
    let r = r.send().await.unwrap();
    (r.status().as_u16(), r.endpoint().to_string())
}

#[test]
fn async_std_credentials() {
    scenarios("async-std", &|policy, tokens| {
        let client = async_client(policy, tokens);
        Box::new(move |post, n| {
            async_std::task::block_on(async {
                let tasks: Vec<_> = (0..n)
                    .map(|_| async_std::task::spawn(one(client.clone(), post)))
                    .collect();
                let mut out = Vec::new();
                for t in tasks {
                    out.push(t.await);
                }
                out
            })
        })
    });
}

#[test]
fn smol_credentials() {
    scenarios("smol", &|policy, tokens| {
        let client = async_client(policy, tokens);
        Box::new(move |post, n| {
            smol::block_on(async {
                let tasks: Vec<_> = (0..n)
                    .map(|_| smol::spawn(one(client.clone(), post)))
                    .collect();
                let mut out = Vec::new();
                for t in tasks {
                    out.push(t.await);
                }
                out
            })
        })
    });
}

/// Everything a runtime renders as text during calls with refreshed tokens.
type Texts = Arc<Mutex<Vec<String>>>;

fn leak_policy(a: &AuthServer, texts: &Texts) -> PolicyBuilder {
    let t = texts.clone();
    Policy::builder()
        .connect_timeout(Duration::from_millis(300))
        .attempt_timeout(Duration::from_secs(2))
        .endpoint(Endpoint::new("a", a.url()).credential(CredentialSettings::default()))
        .on_event(move |e| t.lock().unwrap().push(format!("{e:?}")))
}

/// Refreshed tokens (a rotation, then a refusal that survives the refresh) never appear
/// in `Debug` output, events, errors or reports.
fn assert_no_token(runtime: &str, texts: &Texts) {
    let texts = texts.lock().unwrap();
    assert!(
        texts.len() > 5,
        "{runtime}: too little collected to mean anything"
    );
    for t in texts.iter() {
        assert!(!t.contains("SECRETTOK"), "{runtime}: a token in {t}");
    }
}

fn leak_tokens() -> (Tokens, AuthServer) {
    let tokens = Tokens::default();
    tokens.set("a", Ok("SECRETTOK1"));
    (tokens, AuthServer::start("SECRETTOK1"))
}

#[test]
fn blocking_never_shows_a_token() {
    let texts = Texts::default();
    let (tokens, a) = leak_tokens();
    let t = tokens.clone();
    let client = baton_blocking::Client::builder(leak_policy(&a, &texts))
        .token_provider(move |e: &str| t.fetch(e))
        .build()
        .unwrap();
    let push = |s: String| texts.lock().unwrap().push(s);
    let ok = client.get("/").call().unwrap();
    push(format!("{ok:?} {client:?}"));
    a.accept("SECRETTOK3");
    tokens.set("a", Ok("SECRETTOK2"));
    let e = client.get("/").call();
    push(format!("{e:?}"));
    if let Ok(r) = &e {
        push(format!("{:?}", baton_blocking::ResponseExt::report(r)));
    }
    assert_no_token("blocking", &texts);
}

#[test]
fn async_std_never_shows_a_token() {
    let texts = Texts::default();
    let (tokens, a) = leak_tokens();
    let client = async_client(leak_policy(&a, &texts), tokens.clone());
    let push = |s: String| texts.lock().unwrap().push(s);
    async_std::task::block_on(async {
        let ok = client.get("/").send().await.unwrap();
        push(format!("{ok:?} {:?} {client:?}", ok.report()));
        a.accept("SECRETTOK3");
        tokens.set("a", Ok("SECRETTOK2"));
        match client.get("/").send().await {
            Ok(r) => push(format!("{r:?} {:?}", r.report())),
            Err(e) => push(format!("{e} {e:?} {:?}", e.report())),
        }
    });
    assert_no_token("async-std", &texts);
}

#[test]
fn tokio_never_shows_a_token() {
    let texts = Texts::default();
    let (tokens, a) = leak_tokens();
    let t = tokens.clone();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let push = |s: String| texts.lock().unwrap().push(s);
    rt.block_on(async {
        let client = baton_tokio::Client::builder(leak_policy(&a, &texts))
            .token_provider(move |e: &str| {
                let (t, e) = (t.clone(), e.to_owned());
                async move {
                    tokio::task::spawn_blocking(move || t.fetch(&e))
                        .await
                        .unwrap()
                }
            })
            .build()
            .unwrap();
        let ok = client.get("/").send().await.unwrap();
        push(format!("{ok:?} {:?} {client:?}", ok.report()));
        a.accept("SECRETTOK3");
        tokens.set("a", Ok("SECRETTOK2"));
        match client.get("/").send().await {
            Ok(r) => push(format!("{r:?} {:?}", r.report())),
            Err(e) => push(format!("{e} {e:?} {:?}", e.report())),
        }
    });
    assert_no_token("tokio", &texts);
}

/// A client without a token provider for a policy with an endpoint credential is refused
/// when it is built, by the same core check and with the same error on every adapter
/// that runs token providers: its calls would otherwise go out without their token.
#[test]
fn every_adapter_refuses_a_credential_without_a_token_provider() {
    let policy = || {
        Policy::builder().endpoint(
            Endpoint::new("a", "http://127.0.0.1:1/").credential(CredentialSettings::default()),
        )
    };
    let want = baton_core::ConfigError::NoTokenProvider {
        endpoint: "a".into(),
    };
    let tokio = baton_tokio::Client::new(policy()).unwrap_err();
    assert!(
        matches!(&tokio, baton_tokio::BuildError::Config(e) if *e == want),
        "tokio: {tokio}"
    );
    let blocking = baton_blocking::Client::new(policy()).unwrap_err();
    assert_eq!(blocking, baton_blocking::BuildError::Config(want.clone()));
    let async_std = baton_async_std::Client::new(policy()).unwrap_err();
    assert!(
        matches!(&async_std, baton_async_std::BuildError::Config(e) if *e == want),
        "async-std: {async_std}"
    );
    assert!(tokio.to_string().contains("token_provider"), "{tokio}");
}

/// SPEC 2.4, 9 on blocking: a held token refused on a request whose body cannot be made
/// again (the caller's body factory fails the second time) ends with the refusal as the
/// answer, as on tokio, whose spare copy is made before the send; it used to end as a
/// replay failure that dropped the 401.
#[test]
fn blocking_refusal_whose_body_cannot_be_made_again_is_the_answer() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let a = AuthServer::start("t1");
    let tokens = Tokens::default();
    tokens.set("a", Ok("t1"));
    let t = tokens.clone();
    let slot = Endpoint::new("a", a.url()).credential(CredentialSettings::default());
    let client = baton_blocking::Client::builder(Policy::builder().endpoint(slot))
        .token_provider(move |e: &str| t.fetch(e))
        .build()
        .unwrap();
    assert_eq!(client.get("/").call().unwrap().status().as_u16(), 200);
    // The token rotates: the held t1 is refused, t2 is leased for the one re-send.
    a.accept("t2");
    tokens.set("a", Ok("t2"));
    let made = Arc::new(AtomicUsize::new(0));
    let m = made.clone();
    let resp = client
        .post("/")
        .send_with(move || match m.fetch_add(1, Ordering::SeqCst) {
            0 => Ok(std::io::Cursor::new(b"{}".to_vec())),
            _ => Err(std::io::Error::other("the body cannot be made again")),
        })
        .unwrap_or_else(|e| panic!("the refusal was dropped: {e:#}"));
    assert_eq!(resp.status().as_u16(), 401);
    assert_eq!(
        made.load(Ordering::SeqCst),
        2,
        "a second copy was asked for"
    );
    assert_eq!(
        tokens_seen(&a),
        ["Bearer t1", "Bearer t1"],
        "nothing was re-sent"
    );
}
