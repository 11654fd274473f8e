//! Every vector through baton-tokio (reqwest) against real loopback providers.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use conformance::real::{Scenario, Tally, BODY_TIMEOUT};
use conformance::{vectors, Observed};

/// A body that yields its bytes once and cannot be replayed (a one-shot stream).
struct OneShot(Option<Bytes>);

impl http_body::Body for OneShot {
    type Data = Bytes;
    type Error = std::io::Error;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, std::io::Error>>> {
        Poll::Ready(self.0.take().map(|b| Ok(http_body::Frame::data(b))))
    }
}

async fn run(sc: &Scenario) -> Result<Vec<Observed>, String> {
    let client = baton_tokio::Client::builder(sc.policy()?)
        .build()
        .map_err(|e| format!("build: {e}"))?;
    let mut out = Vec::new();
    for (k, c) in sc.vector.calls.iter().enumerate() {
        if let Some(w) = c.wait_before {
            tokio::time::sleep(w).await;
        }
        let mark = sc.begin(k);
        let mut req = client
            .request(c.http_method()?, &c.path)
            .options(c.options());
        for (name, value) in &c.headers {
            req = req.header(name.as_str(), value.as_str());
        }
        if let Some(body) = &c.body {
            req = if c.one_shot {
                req.body(baton_tokio::reqwest::Body::wrap(OneShot(Some(
                    Bytes::from(body.clone()),
                ))))
            } else {
                req.body(body.clone())
            };
        }
        let o = match req.send().await {
            Ok(resp) => {
                let report = resp.report().clone();
                let body = tokio::time::timeout(BODY_TIMEOUT, resp.bytes()).await;
                sc.observe(&mark, &report, Some(!matches!(body, Ok(Ok(_)))))
            }
            Err(e) => sc.observe(&mark, e.report(), None),
        };
        out.push(o);
    }
    Ok(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_vector_passes_on_tokio() {
    let all = vectors();
    let mut tally = Tally::new("tokio");
    // The runner's closure is synchronous; each vector runs to completion on this
    // runtime through `block_in_place`.
    tally.run_all(&all, |sc| {
        tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(run(sc)))
    });
    tally.finish();
}
