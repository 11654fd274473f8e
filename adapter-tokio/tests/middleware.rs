//! baton inside a reqwest-middleware stack: outer middleware sees one call, inner
//! middleware runs once per attempt; options ride in extensions; the report comes back in
//! the response's extensions; a failed call is a middleware error wrapping baton's.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use baton_core::{AttemptResult, CallOptions, FailureClass, Report, StopReason};
use baton_tokio::BatonMiddleware;
use http::Extensions;
use reqwest_middleware::{Middleware, Next};
use testkit::{Behaviour, Provider};

#[derive(Clone, Default)]
struct Count(Arc<AtomicUsize>);

#[async_trait::async_trait]
impl Middleware for Count {
    async fn handle(
        &self,
        req: reqwest::Request,
        ext: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<reqwest::Response> {
        self.0.fetch_add(1, Ordering::SeqCst);
        next.run(req, ext).await
    }
}

fn stack(baton: BatonMiddleware) -> (reqwest_middleware::ClientWithMiddleware, Count, Count) {
    let (outer, inner) = (Count::default(), Count::default());
    let client = reqwest_middleware::ClientBuilder::new(
        reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_millis(500))
            .build()
            .unwrap(),
    )
    .with(outer.clone())
    .with(baton)
    .with(inner.clone())
    .build();
    (client, outer, inner)
}

#[tokio::test]
async fn refused_primary_fails_over_and_inner_middleware_runs_per_attempt() {
    let backup = Provider::start(Behaviour::ok());
    let refused = testkit::refused_url();
    let baton = BatonMiddleware::new(common::policy(&[
        ("primary", &refused),
        ("backup", &backup.url()),
    ]))
    .unwrap();
    let (client, outer, inner) = stack(baton);
    let resp = client
        .post(format!("{refused}/pay"))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let report = resp
        .extensions()
        .get::<Report>()
        .expect("report in extensions");
    assert_eq!(report.attempts.len(), 2);
    assert_eq!(report.endpoint_id(), Some("backup"));
    assert_eq!(outer.0.load(Ordering::SeqCst), 1);
    assert_eq!(inner.0.load(Ordering::SeqCst), 2);
    assert_eq!(backup.requests()[0].body, b"{}");
}

#[tokio::test]
async fn ambiguous_failure_of_unkeyed_post_is_a_baton_error() {
    let primary = Provider::start(Behaviour::reset());
    let backup = Provider::start(Behaviour::ok());
    let baton = BatonMiddleware::new(common::policy(&[
        ("primary", &primary.url()),
        ("backup", &backup.url()),
    ]))
    .unwrap();
    let (client, _, _) = stack(baton);
    let err = client
        .post(primary.url())
        .body("{}")
        .send()
        .await
        .unwrap_err();
    let reqwest_middleware::Error::Middleware(e) = err else {
        panic!("expected a middleware error")
    };
    let baton_err = e.downcast_ref::<baton_tokio::Error>().unwrap();
    assert!(baton_err.may_have_executed());
    assert_eq!(baton_err.report().stop_reason, StopReason::NotPermitted);
    assert_eq!(backup.request_count(), 0);
}

#[tokio::test]
async fn call_options_ride_in_extensions() {
    let primary = Provider::builder()
        .then(Behaviour::reset())
        .otherwise(Behaviour::ok())
        .start();
    let backup = Provider::start(Behaviour::ok());
    let baton = BatonMiddleware::new(common::policy(&[
        ("primary", &primary.url()),
        ("backup", &backup.url()),
    ]))
    .unwrap();
    let (client, _, inner) = stack(baton);
    let resp = client
        .post(primary.url())
        .with_extension(CallOptions {
            idempotency_key: Some("mw-key-1".into()),
            ..CallOptions::default()
        })
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(primary.count_with_header("idempotency-key", "mw-key-1"), 2);
    assert_eq!(backup.request_count(), 0);
    assert_eq!(inner.0.load(Ordering::SeqCst), 2);
}

/// Counts the attempts whose extensions still hold `CallOptions`.
#[derive(Clone, Default)]
struct SawOptions(Arc<AtomicUsize>);

#[async_trait::async_trait]
impl Middleware for SawOptions {
    async fn handle(
        &self,
        req: reqwest::Request,
        ext: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<reqwest::Response> {
        if ext.get::<CallOptions>().is_some() {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
        next.run(req, ext).await
    }
}

/// The call's options are baton's: the middleware after it (a nested baton among them)
/// does not see them, or a `prefer` or `only` naming an outer endpoint would fail there.
#[tokio::test]
async fn call_options_stay_with_baton_and_do_not_reach_the_middleware_after_it() {
    let primary = Provider::start(Behaviour::ok());
    let baton = BatonMiddleware::new(common::policy(&[("primary", &primary.url())])).unwrap();
    let saw = SawOptions::default();
    let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(baton)
        .with(saw.clone())
        .build();
    let resp = client
        .get(primary.url())
        .with_extension(CallOptions {
            prefer: Some("primary".into()),
            ..CallOptions::default()
        })
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(primary.request_count(), 1);
    assert_eq!(
        saw.0.load(Ordering::SeqCst),
        0,
        "the inner middleware saw the options"
    );
}

/// baton inside baton: the outer attempt fails with the inner call's error, and what the
/// inner call's report says decides the outer attempt's class, never its last attempt's
/// error alone. Here the inner call's first endpoint reset the GET after reading it (it
/// may have executed) and its second refused the connection: the refusal alone would read
/// as "nothing was sent".
#[tokio::test]
async fn baton_inside_baton_reads_the_inner_calls_report_not_its_last_attempt() {
    let reset = Provider::start(Behaviour::reset());
    let refused = testkit::refused_url();
    let (outer, inner) = nested(&[("p", &reset.url()), ("q", &refused)]);
    let client = reqwest_middleware::ClientBuilder::new(plain())
        .with(outer)
        .with(inner)
        .build();
    let err = client.get(reset.url()).send().await.unwrap_err();
    let reqwest_middleware::Error::Middleware(e) = err else {
        panic!("expected a middleware error")
    };
    let outer_err = e.downcast_ref::<baton_tokio::Error>().unwrap();
    let last = outer_err.last_attempt_error().unwrap();
    // The inner call's error, kept for programs behind the outer attempt's scrubbed text
    // (anyhow's, in reqwest-middleware, whose sources are the inner call's error's).
    let scrubbed = last
        .inner()
        .downcast_ref::<baton_tokio::Scrubbed>()
        .unwrap();
    // What the outer call read: the link to the inner call's last attempt carries the
    // inner call's verdict (its first attempt may have executed), not its last attempt's.
    let link = testkit::in_chain::<baton_core::AttemptFailure>(scrubbed.inner()).unwrap();
    assert_eq!((link.attempt, link.call_may_have_executed()), (2, true));
    let refusal = link
        .error()
        .unwrap()
        .downcast_ref::<baton_tokio::AttemptError>();
    assert_eq!(refusal.unwrap().cause(), baton_tokio::FailureCause::Refused);
    // Each outer attempt (a GET: the second goes on after the first) is ambiguous: the
    // inner call it made may have executed.
    let ambiguous = AttemptResult::Failed(FailureClass::Ambiguous);
    let results: Vec<_> = outer_err
        .report()
        .attempts
        .iter()
        .map(|a| a.result)
        .collect();
    assert_eq!(results, [ambiguous, ambiguous], "{outer_err}");
    let cause = baton_tokio::FailureCause::InnerCall {
        may_have_executed: true,
    };
    assert_eq!(last.cause(), cause);
    assert!(outer_err.may_have_executed());
    assert_eq!(reset.request_count(), 2);
}

/// An inner baton call that proves nothing was sent anywhere is undelivered for the outer
/// call: its POST may go on to the outer call's next endpoint.
#[tokio::test]
async fn an_inner_call_that_sent_nothing_lets_the_outer_post_fail_over() {
    let refused = testkit::refused_url();
    let (outer, inner) = nested(&[("p", &refused), ("q", &refused)]);
    let client = reqwest_middleware::ClientBuilder::new(plain())
        .with(outer)
        .with(inner)
        .build();
    let err = client.post(&refused).body("{}").send().await.unwrap_err();
    let reqwest_middleware::Error::Middleware(e) = err else {
        panic!("expected a middleware error")
    };
    let outer_err = e.downcast_ref::<baton_tokio::Error>().unwrap();
    let undelivered = AttemptResult::Failed(FailureClass::Undelivered);
    let results: Vec<_> = outer_err
        .report()
        .attempts
        .iter()
        .map(|a| a.result)
        .collect();
    assert_eq!(results, [undelivered, undelivered], "{outer_err}");
    assert!(!outer_err.may_have_executed());
}

/// A reqwest client that follows no redirects and retries nothing (one request per attempt).
fn plain() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .retry(reqwest::retry::never())
        .connect_timeout(std::time::Duration::from_millis(500))
        .build()
        .unwrap()
}

/// An outer baton of two endpoints (one attempt each; every attempt goes through the
/// inner baton, whatever its URL) and an inner one of `inner`.
fn nested(inner: &[(&str, &str)]) -> (BatonMiddleware, BatonMiddleware) {
    let outer = common::policy(&[("x", "http://127.0.0.1:9/"), ("y", "http://127.0.0.1:9/")])
        .configure(|s| s.attempts_per_endpoint = Some(1));
    let inner = common::policy(inner).configure(|s| s.attempts_per_endpoint = Some(1));
    (
        BatonMiddleware::new(outer).unwrap(),
        BatonMiddleware::new(inner).unwrap(),
    )
}

/// The middleware reads a short body ahead for the classifier (`classify_body`) as the
/// client does: a JSON-RPC outage inside a 200 fails over, and the caller reads the
/// answer's body whole. Before, the classifier saw no body through the middleware.
#[tokio::test]
async fn the_classifier_sees_short_bodies_through_the_middleware() {
    let down = Provider::start(Behaviour::status(200).body("outage"));
    let up = Provider::start(Behaviour::status(200).body("fine"));
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let s = seen.clone();
    let policy = common::policy(&[("down", &down.url()), ("up", &up.url())])
        .configure(|c| c.classify_body = 16)
        .classify_fn(move |v| {
            s.lock().unwrap().push(v.body.map(<[u8]>::to_vec));
            (v.body == Some(b"outage")).then_some(baton_core::Verdict::Trigger)
        });
    let (client, _, _) = stack(BatonMiddleware::new(policy).unwrap());
    let resp = client.get(format!("{}/", down.url())).send().await.unwrap();
    assert_eq!(resp.text().await.unwrap(), "fine");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen, [Some(b"outage".to_vec()), Some(b"fine".to_vec())]);
}
