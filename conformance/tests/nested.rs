//! baton below baton: a baton-tower layer in front of a service that sends through a
//! baton-tokio client. An outer attempt that fails with the inner call's error is read by
//! that call's report, never by the error of its last attempt alone (which says nothing of
//! the attempts before it).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use baton_core::{AttemptResult, Endpoint, FailureClass, Policy, PolicyBuilder, StopReason};
use tower_layer::Layer;
use tower_service::Service;

/// A tower service that sends a GET of each request's path through a baton-tokio client,
/// whatever the request's method: the inner call may go on after an ambiguous attempt,
/// which the outer POST may not.
#[derive(Clone)]
struct ViaTokio(baton_tokio::Client);

type Answer = Result<http::Response<String>, baton_tower::BoxError>;

impl<B> Service<http::Request<B>> for ViaTokio {
    type Response = http::Response<String>;
    type Error = baton_tower::BoxError;
    type Future = Pin<Box<dyn Future<Output = Answer> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let (client, path) = (self.0.clone(), req.uri().path().to_string());
        Box::pin(async move {
            let resp = client.get(path).send().await?;
            Ok(http::Response::builder()
                .status(resp.status())
                .body(String::new())?)
        })
    }
}

fn two(a: &str, b: &str) -> PolicyBuilder {
    Policy::builder()
        .endpoint(Endpoint::new("a", a))
        .endpoint(Endpoint::new("b", b))
        .attempt_timeout(Duration::from_millis(800))
        .connect_timeout(Duration::from_millis(300))
        .configure(|s| s.attempts_per_endpoint = Some(1))
}

/// The outer layer (two endpoints, one attempt each; every attempt goes through the inner
/// client, whatever its URL) over an inner baton-tokio client of `a` and `b`.
fn nested(a: &str, b: &str) -> baton_tower::Baton<ViaTokio> {
    let inner = baton_tokio::Client::new(two(a, b)).unwrap();
    let outer = two("http://127.0.0.1:9/", "http://127.0.0.1:9/");
    baton_tower::BatonLayer::new(outer)
        .unwrap()
        .layer(ViaTokio(inner))
}

fn post() -> http::Request<String> {
    let req = http::Request::builder().method("POST").uri("/charges");
    req.body("{}".to_string()).unwrap()
}

fn results(report: &baton_core::Report) -> Vec<AttemptResult> {
    report.attempts.iter().map(|a| a.result).collect()
}

/// The inner call's first endpoint reads the GET and resets (it may have executed), its
/// second refuses the connection. The refusal, the inner call's last error, would read as
/// "nothing was sent" (hyper-util's `is_connect` in the chain), and the outer POST would go
/// on to its second endpoint, through the inner call again: the first endpoint would run
/// twice. The inner call's report says it may have executed: the POST stops there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outer_post_stops_where_the_inner_call_may_have_executed() {
    let reset = testkit::Provider::start(testkit::Behaviour::reset());
    let refused = testkit::refused_url();
    let mut svc = nested(&reset.url(), &refused);
    let err = svc.call(post()).await.unwrap_err();
    let ambiguous = AttemptResult::Failed(FailureClass::Ambiguous);
    assert_eq!(results(err.report()), [ambiguous], "{err}");
    assert_eq!(err.report().stop_reason, StopReason::NotPermitted);
    assert!(err.may_have_executed());
    assert_eq!(reset.request_count(), 1);
}

/// An inner call that proves nothing was sent anywhere is undelivered for the outer call:
/// its POST goes on to the next endpoint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outer_post_fails_over_where_the_inner_call_sent_nothing() {
    let refused = testkit::refused_url();
    let mut svc = nested(&refused, &refused);
    let err = svc.call(post()).await.unwrap_err();
    let undelivered = AttemptResult::Failed(FailureClass::Undelivered);
    assert_eq!(results(err.report()), [undelivered, undelivered], "{err}");
    assert!(!err.may_have_executed());
}
