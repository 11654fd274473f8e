//! Every vector through baton-tower: the layer in front of hyper-util's legacy `Client`,
//! against real loopback providers (the fifth runner).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use conformance::real::{Scenario, Tally, BODY_TIMEOUT};
use conformance::{vectors, Observed};
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use tower_layer::Layer;
use tower_service::Service;

type Body = BoxBody<Bytes, baton_tower::BoxError>;

/// A one-shot stream: not ready at once, so the layer sends it once (no replay).
struct OneShot(Option<Bytes>, bool);

impl http_body::Body for OneShot {
    type Data = Bytes;
    type Error = baton_tower::BoxError;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        if !self.1 {
            self.1 = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        Poll::Ready(self.0.take().map(|b| Ok(http_body::Frame::data(b))))
    }
}

async fn run(sc: &Scenario) -> Result<Vec<Observed>, String> {
    let policy = sc.policy()?;
    let connect = policy.settings_ref().connect_timeout;
    let mut connector = HttpConnector::new();
    // A connect that fails is a connect error (undelivered), as on the other adapters.
    connector.set_connect_timeout(Some(connect));
    // An HTTP/2 vector's providers speak h2c: the client uses prior knowledge.
    let h2 = policy.settings_ref().http_version == baton_core::HttpVersion::Http2;
    let client: Client<_, baton_tower::ReplayBody<Body>> = Client::builder(TokioExecutor::new())
        .http2_only(h2)
        .build(connector);
    let layer = baton_tower::BatonLayer::new(policy).map_err(|e| format!("build: {e}"))?;
    let mut svc = layer.layer(client);
    let mut out = Vec::new();
    for (k, c) in sc.vector.calls.iter().enumerate() {
        if let Some(w) = c.wait_before {
            tokio::time::sleep(w).await;
        }
        let mark = sc.begin(k);
        let body: Body = match (&c.body, c.one_shot) {
            (Some(b), true) => OneShot(Some(Bytes::from(b.clone())), false).boxed(),
            (Some(b), false) => Full::new(Bytes::from(b.clone()))
                .map_err(|e| match e {})
                .boxed(),
            (None, _) => Full::new(Bytes::new()).map_err(|e| match e {}).boxed(),
        };
        let mut req = http::Request::builder()
            .method(c.http_method()?)
            .uri(c.path.as_str());
        for (name, value) in &c.headers {
            req = req.header(name.as_str(), value.as_str());
        }
        let mut req = req.body(body).map_err(|e| format!("request: {e}"))?;
        req.extensions_mut().insert(c.options());
        let o = match svc.call(req).await {
            Ok(resp) => {
                let report = resp
                    .extensions()
                    .get::<baton_core::Report>()
                    .cloned()
                    .ok_or("no report in the response's extensions")?;
                let body = tokio::time::timeout(BODY_TIMEOUT, resp.into_body().collect()).await;
                sc.observe(&mark, &report, Some(!matches!(body, Ok(Ok(_)))))
            }
            Err(e) => sc.observe(&mark, e.report(), None),
        };
        out.push(o);
    }
    Ok(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_vector_passes_through_the_tower_layer() {
    let all = vectors();
    let mut tally = Tally::new("tower");
    tally.run_all(&all, |sc| {
        tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(run(sc)))
    });
    tally.finish();
}
