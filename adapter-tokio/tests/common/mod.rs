//! Helpers shared by the integration tests: policies with short timeouts, and clients whose
//! events are recorded.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton_core::{Backoff, Endpoint, Jitter, Policy, PolicyBuilder};

/// A policy over `(id, url)` endpoints with short timeouts and short backoff, so that the
/// tests are fast: connect 1 s, attempt 600 ms... (connect must stay shorter than the
/// attempt timeout, so the attempt timeout is 1.5 s here and black holes use a per-call one).
pub fn policy(endpoints: &[(&str, &str)]) -> PolicyBuilder {
    let mut b = Policy::builder()
        .connect_timeout(Duration::from_millis(500))
        .attempt_timeout(Duration::from_millis(800))
        .backoff(Backoff {
            initial: Duration::from_millis(10),
            multiplier: 2.0,
            max: Duration::from_millis(50),
            jitter: Jitter::Full,
        });
    for (id, url) in endpoints {
        b = b.endpoint(Endpoint::new(*id, *url));
    }
    b
}

/// Recorded events (their debug text), in order.
#[derive(Clone, Default)]
pub struct Log(pub Arc<Mutex<Vec<String>>>);

impl Log {
    pub fn names(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|t| t.split([' ', '{', '(']).next().unwrap_or("").to_string())
            .collect()
    }
    pub fn texts(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

/// A client for `policy` with a read timeout (so stalled bodies end) and an event log.
pub fn client(policy: PolicyBuilder) -> (baton_tokio::Client, Log) {
    let log = Log::default();
    let l = log.clone();
    let client = baton_tokio::Client::builder(policy)
        .read_timeout(Duration::from_millis(700))
        .on_event(move |e| l.0.lock().unwrap().push(format!("{:?}", e.kind)))
        .build()
        .unwrap();
    (client, log)
}

/// An empty policy builder with a connect timeout shorter than the test read timeout.
pub fn short() -> PolicyBuilder {
    Policy::builder().connect_timeout(Duration::from_millis(500))
}
