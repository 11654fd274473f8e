//! Secrets in endpoint URLs stay out of every message (SPEC 4), on every adapter.
//!
//! Each failure class (refused, DNS, timeout, reset, 503, a body that breaks) is driven
//! against an endpoint whose URL holds a password, a key in the path and one in the query,
//! with a request path (base mode) that holds a customer id. Everything an adapter renders
//! as text (the error's `Display`, `Debug` and source chain, the response's `Debug`, the
//! report's `Debug`, every event's `Debug`) is collected and searched for them. Each error
//! chain is also checked to say each part once (no link's text holds its source's).

use std::io::Read;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton_blocking::ResponseExt;
use baton_core::{Backoff, Endpoint, Jitter, Policy, PolicyBuilder, UrlMode};
use testkit::{Behaviour, Provider};

const SECRETS: [&str; 4] = ["SECRETPW", "SECRETKEY", "SECRETQ", "SECRETPATH"];
const PATH: &str = "/customers/SECRETPATH";

#[derive(Debug, Clone, Copy)]
enum Fault {
    Refused,
    Dns,
    Timeout,
    Reset,
    Unavailable,
    BodyBroken,
}

const FAULTS: [Fault; 6] = [
    Fault::Refused,
    Fault::Dns,
    Fault::Timeout,
    Fault::Reset,
    Fault::Unavailable,
    Fault::BodyBroken,
];

/// The provider for `fault` (none for DNS) and the endpoint URL carrying the secrets.
fn target(fault: Fault) -> (Option<Provider>, String) {
    let behaviour = match fault {
        Fault::Refused => Behaviour::refuse(),
        Fault::Dns => {
            let host = testkit::unresolvable_url();
            let host = host.trim_start_matches("http://");
            return (None, secret_url(host));
        }
        Fault::Timeout => Behaviour::black_hole(),
        Fault::Reset => Behaviour::reset(),
        Fault::Unavailable => Behaviour::status(503).body("busy"),
        Fault::BodyBroken => Behaviour::ok()
            .body("0123456789abcdefghijklmnopqrstuv")
            .close_after_half_body(),
    };
    let p = Provider::start(behaviour);
    let url = secret_url(&p.addr().to_string());
    (Some(p), url)
}

fn secret_url(authority: &str) -> String {
    format!("http://user:SECRETPW@{authority}/v2/SECRETKEY?key=SECRETQ")
}

fn policy(url: &str) -> PolicyBuilder {
    Policy::builder()
        .endpoint(Endpoint::new("a", url))
        .url_mode(UrlMode::Base)
        .configure(|s| {
            s.attempt_timeout = Duration::from_millis(200);
            s.connect_timeout = Duration::from_millis(200);
            s.attempts_per_endpoint = Some(2);
            s.backoff = Backoff {
                initial: Duration::from_millis(5),
                multiplier: 2.0,
                max: Duration::from_millis(10),
                jitter: Jitter::None,
            };
        })
}

type Texts = Arc<Mutex<Vec<String>>>;

fn push(texts: &Texts, text: String) {
    texts.lock().unwrap().push(text);
}

/// `Display` (plain and with its causes, `{:#}`) and `Debug` of `e` and of every source of
/// it. Each link of the chain must say its own part once (an error printer that walks the
/// chain, anyhow's `{:#}`, would show a repeated text twice), and `{:#}` must add the
/// causes.
fn push_error(texts: &Texts, e: &(dyn std::error::Error + 'static)) {
    assert_eq!(testkit::repeated_in_chain(e), None, "{e:#}");
    if e.source().is_some() {
        // `{:#}` adds the causes to the error's own text.
        let (plain, full) = (e.to_string(), format!("{e:#}"));
        assert!(
            full.starts_with(&plain) && full.len() > plain.len(),
            "{full}"
        );
    }
    push(texts, format!("{e}"));
    push(texts, format!("{e:#}"));
    push(texts, format!("{e:?}"));
    let mut source = e.source();
    while let Some(s) = source {
        push(texts, format!("{s}"));
        push(texts, format!("{s:?}"));
        source = s.source();
    }
}

fn assert_clean(adapter: &str, fault: Fault, texts: &Texts) {
    let texts = texts.lock().unwrap();
    assert!(
        texts.len() >= 3,
        "{adapter} {fault:?}: too little was collected: {texts:?}"
    );
    for text in texts.iter() {
        for secret in SECRETS {
            assert!(
                !text.contains(secret),
                "{adapter} {fault:?}: {secret} shown in: {text}"
            );
        }
    }
}

#[test]
fn tokio_never_shows_url_secrets() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for fault in FAULTS {
        let (_p, url) = target(fault);
        let texts: Texts = Arc::default();
        let sink = texts.clone();
        let client = baton_tokio::Client::builder(policy(&url))
            .on_event(move |e| push(&sink, format!("{e:?}")))
            .build()
            .unwrap();
        rt.block_on(async {
            match client.get(PATH).send().await {
                Ok(resp) => {
                    push(&texts, format!("{resp:?}"));
                    push(&texts, format!("{:?}", resp.report()));
                    if let Err(e) = resp.bytes().await {
                        push_error(&texts, &e);
                    }
                }
                Err(e) => {
                    push(&texts, format!("{:?}", e.report()));
                    push_error(&texts, &e);
                }
            }
        });
        assert_clean("tokio", fault, &texts);
    }
}

#[test]
fn blocking_never_shows_url_secrets() {
    for fault in FAULTS {
        let (_p, url) = target(fault);
        let texts: Texts = Arc::default();
        let sink = texts.clone();
        let client = baton_blocking::Client::builder(policy(&url))
            .on_event(move |e| push(&sink, format!("{e:?}")))
            .build()
            .unwrap();
        match client.get(PATH).call() {
            Ok(mut resp) => {
                push(&texts, format!("{resp:?}"));
                push(&texts, format!("{:?}", resp.report()));
                let mut buf = Vec::new();
                if let Err(e) = resp.body_mut().as_reader().read_to_end(&mut buf) {
                    push_error(&texts, &e);
                }
            }
            Err(e) => {
                push(&texts, format!("{:?}", e.report()));
                push_error(&texts, &e);
            }
        }
        assert_clean("blocking", fault, &texts);
    }
}

async fn async_std_run(fault: Fault) -> Texts {
    let (_p, url) = target(fault);
    let texts: Texts = Arc::default();
    let sink = texts.clone();
    let client = baton_async_std::ClientBuilder::new(policy(&url))
        .on_event(move |e| push(&sink, format!("{e:?}")))
        .build()
        .unwrap();
    match client.get(PATH).send().await {
        Ok(resp) => {
            push(&texts, format!("{resp:?}"));
            push(&texts, format!("{:?}", resp.report()));
            if let Err(e) = resp.bytes().await {
                push_error(&texts, &e);
            }
        }
        Err(e) => {
            push(&texts, format!("{:?}", e.report()));
            push_error(&texts, &e);
        }
    }
    texts
}

#[test]
fn async_std_never_shows_url_secrets() {
    for fault in FAULTS {
        let texts = async_std::task::block_on(async_std_run(fault));
        assert_clean("async-std", fault, &texts);
    }
}

#[test]
fn smol_never_shows_url_secrets() {
    for fault in FAULTS {
        let texts = smol::block_on(async_std_run(fault));
        assert_clean("smol", fault, &texts);
    }
}

/// A request builder's `Debug` (an absolute URL with a password, a key and a query, a
/// path with a customer id, a header holding a key) shows none of them, on every adapter:
/// the URL as its origin, the path as `<path>`, headers by name.
#[test]
fn request_builders_never_show_secrets() {
    let endpoint = secret_url("127.0.0.1:1");
    let absolute = secret_url("127.0.0.1:2");
    let mut texts = Vec::new();
    let tokio = baton_tokio::Client::new(policy(&endpoint)).expect("client");
    let blocking = baton_blocking::Client::new(policy(&endpoint)).expect("client");
    let async_std = baton_async_std::Client::new(policy(&endpoint)).expect("client");
    for target in [absolute.as_str(), PATH] {
        let r = tokio.get(target).header("x-api-key", "SECRETKEY");
        texts.push(format!("{r:?}"));
        let r = blocking.get(target).header("x-api-key", "SECRETKEY");
        texts.push(format!("{r:?}"));
        let r = async_std.get(target).header("x-api-key", "SECRETKEY");
        texts.push(format!("{r:?}"));
    }
    for text in &texts {
        assert!(text.contains("x-api-key"), "{text}");
        for secret in SECRETS {
            assert!(!text.contains(secret), "{secret} shown in: {text}");
        }
    }
    assert!(texts.iter().any(|t| t.contains("http://127.0.0.1:2")));
}
