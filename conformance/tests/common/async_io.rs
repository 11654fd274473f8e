//! The baton-async-std runner, shared by the async-std and smol test binaries: only the
//! executor and the sleep differ.

use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use conformance::real::{Scenario, BODY_TIMEOUT};
use conformance::Observed;

/// Runs a vector's calls in order through one client; `sleep` is the runtime's timer.
pub async fn run<S, F>(sc: &Scenario, sleep: S) -> Result<Vec<Observed>, String>
where
    S: Fn(Duration) -> F,
    F: Future<Output = ()>,
{
    let policy = sc.policy()?;
    let client = baton_async_std::Client::builder(policy)
        .body_timeout(BODY_TIMEOUT)
        .build()
        .map_err(|e| format!("build: {e}"))?;
    let mut out = Vec::new();
    for (k, c) in sc.vector.calls.iter().enumerate() {
        if let Some(w) = c.wait_before {
            sleep(w).await;
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
                let once = Bytes::from(body.clone());
                req.body(baton_async_std::Body::stream(smol::stream::once(Ok(once))))
            } else {
                req.body(body.clone())
            };
        }
        let o = match req.send().await {
            Ok(resp) => {
                let report = resp.report().clone();
                let body = resp.bytes().await;
                sc.observe(&mark, &report, Some(body.is_err()))
            }
            Err(e) => sc.observe(&mark, e.report(), None),
        };
        out.push(o);
    }
    Ok(out)
}
