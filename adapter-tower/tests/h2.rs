//! baton-tower in front of hyper-util's HTTP/2 client (prior knowledge), against
//! testkit's HTTP/2 provider on loopback: the protocol's own proofs that nothing was
//! processed (SPEC 9) read from the inner service's errors.

use std::time::Duration;

use baton_core::{AttemptResult, Endpoint, FailureClass, Policy, Report};
use baton_tower::{BatonLayer, ReplayBody};
use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use testkit::{H2Behaviour, H2Provider};
use tower_layer::Layer;
use tower_service::Service;

type Body = BoxBody<Bytes, baton_tower::BoxError>;

/// An unkeyed POST through the layer to a primary that ends it with `fault` and a
/// healthy backup; the report and what each provider processed.
async fn post_against(fault: H2Behaviour) -> (Report, usize, usize) {
    let a = H2Provider::start(fault);
    let b = H2Provider::start(H2Behaviour::ok());
    let inner: Client<HttpConnector, ReplayBody<Body>> = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build(HttpConnector::new());
    let policy = Policy::builder()
        .endpoint(Endpoint::new("a", a.url()))
        .endpoint(Endpoint::new("b", b.url()))
        .attempt_timeout(Duration::from_secs(3));
    let mut svc = BatonLayer::new(policy).unwrap().layer(inner);
    let body = Full::new(Bytes::from_static(b"amount=1"))
        .map_err(|e| match e {})
        .boxed();
    let request = http::Request::builder()
        .method("POST")
        .uri("/charges")
        .body(body)
        .unwrap();
    let report = match svc.call(request).await {
        Ok(resp) => resp.extensions().get::<Report>().cloned().unwrap(),
        Err(e) => e.report().clone(),
    };
    (report, a.processed(), b.processed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_stream_fails_over_and_nothing_was_processed() {
    let (report, a, b) = post_against(H2Behaviour::refuse_stream()).await;
    let results: Vec<_> = report.attempts.iter().map(|r| r.result).collect();
    assert_eq!(results[0], AttemptResult::Failed(FailureClass::Undelivered));
    assert_eq!(report.result_endpoint(), Some("b"));
    assert_eq!((a, b), (0, 1));
}

/// hyper's HTTP/2 client may hand the connection's GOAWAY to a request whose stream it
/// had just opened (`H2StreamError::goaway_per_stream`): behind the layer a GOAWAY, even
/// below the stream, is no proof, and an unkeyed POST stops there. (Judged by what
/// happened: the layer keeps the last error as scrubbed text, without h2's error; read as
/// proof, as before, the POST failed over to `b`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_goaway_below_the_stream_is_no_proof_and_a_post_does_not_fail_over() {
    let (report, a, b) = post_against(H2Behaviour::go_away_below()).await;
    let results: Vec<_> = report.attempts.iter().map(|r| r.result).collect();
    assert_eq!(results, [AttemptResult::Failed(FailureClass::Ambiguous)]);
    assert!(report.may_have_executed);
    assert_eq!((a, b), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_after_the_request_is_ambiguous_and_does_not_fail_over() {
    for fault in [
        H2Behaviour::reset_after_request(),
        H2Behaviour::go_away_at(),
    ] {
        let (report, a, b) = post_against(fault.clone()).await;
        assert!(report.may_have_executed, "{fault:?}");
        assert_eq!(report.attempts.len(), 1, "{fault:?}");
        assert_eq!((a, b), (1, 0), "{fault:?}");
    }
}

/// A request body streamed from a download that HTTP/2 refused (`REFUSED_STREAM`, the
/// protocol's proof of nothing processed, but of the download): the POST's head and a
/// part went to this attempt's provider, over HTTP/1.1, so it may have executed. The
/// refusal is the body source's, not this attempt's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_whose_source_was_refused_over_http2_may_have_executed() {
    let download = H2Provider::start(H2Behaviour::refuse_stream());
    let h2: Client<HttpConnector, Full<Bytes>> = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build(HttpConnector::new());
    let refused = h2.get(download.url().parse().unwrap()).await.unwrap_err();
    let refused: std::sync::Arc<dyn std::error::Error + Send + Sync> = std::sync::Arc::new(refused);
    let provider = testkit::Provider::start(testkit::Behaviour::ok());
    // A caller's hook that reads any h2 refusal in the chain as proof never sees this one.
    let hook = |e: &(dyn std::error::Error + 'static)| {
        let chain = std::iter::successors(Some(e), |e| (*e).source());
        let refused = |e: &(dyn std::error::Error + 'static)| {
            e.downcast_ref::<h2::Error>()
                .is_some_and(|h| h.reason() == Some(h2::Reason::REFUSED_STREAM))
        };
        chain
            .into_iter()
            .any(refused)
            .then_some(FailureClass::Undelivered)
    };
    for with_hook in [false, true] {
        let inner: Client<HttpConnector, ReplayBody<Body>> =
            Client::builder(TokioExecutor::new()).build(HttpConnector::new());
        let policy = Policy::builder()
            .endpoint(Endpoint::new("a", provider.url()))
            .attempt_timeout(Duration::from_secs(3));
        let mut builder = baton_tower::BatonBuilder::new(policy);
        if with_hook {
            builder = builder.classify_error(hook);
        }
        let mut svc = builder.layer().unwrap().layer(inner);
        let parts: Vec<Result<Bytes, baton_tower::BoxError>> = vec![
            Ok(Bytes::from_static(b"amount=")),
            Err(Box::new(Shared(refused.clone()))),
        ];
        let body = Pending(parts.into_iter(), false).boxed();
        let request = http::Request::post("/charges").body(body).unwrap();
        let err = svc.call(request).await.unwrap_err();
        let ambiguous = AttemptResult::Failed(FailureClass::Ambiguous);
        assert_eq!(
            err.report().attempts[0].result,
            ambiguous,
            "hook {with_hook}: {err}"
        );
        assert!(err.may_have_executed());
    }
}

/// One error, shared by several bodies.
#[derive(Debug)]
struct Shared(std::sync::Arc<dyn std::error::Error + Send + Sync>);

impl std::fmt::Display for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for Shared {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.0)
    }
}

/// A body of `parts`, not ready at first (so the layer sends it once, unbuffered).
struct Pending<I>(I, bool);

impl<I> http_body::Body for Pending<I>
where
    I: Iterator<Item = Result<Bytes, baton_tower::BoxError>> + Unpin,
{
    type Data = Bytes;
    type Error = baton_tower::BoxError;
    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        if !std::mem::replace(&mut self.1, true) {
            cx.waker().wake_by_ref();
            return std::task::Poll::Pending;
        }
        std::task::Poll::Ready(self.0.next().map(|p| p.map(http_body::Frame::data)))
    }
}
