//! baton inside a reqwest-middleware stack: outer middleware sees one call, inner
//! middleware runs once per attempt; options ride in extensions; the report comes back in
//! the response's extensions; a failed call is a middleware error wrapping baton's.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use baton_core::{CallOptions, Report, StopReason};
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
