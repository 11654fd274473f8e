//! N healthy calls through one engine, for counting instructions per call:
//!
//! ```text
//! cargo build --release -p baton-core --example healthy_calls
//! valgrind --tool=callgrind target/release/examples/healthy_calls 100000 [budget|rate]
//! ```
//!
//! Each call is the healthy path of scenario 5 of the bench binary: three endpoints, a GET,
//! `Call::new`, a poll that sends the first attempt, a 200 response, the poll that says done
//! and `take_done`. The time is passed in (read once), so the count is the engine's alone.
//! Budget off unless `budget` is given; `rate` uses the failure-rate breaker rule. 1,000
//! warm-up calls come first, then the N calls and their wall time (noisy; count
//! instructions for comparisons).

use std::time::Instant;

use baton_core::{BreakerRule, Endpoint, Engine, Policy, RequestInfo};

#[path = "common/healthy_call.rs"]
mod common;

use common::healthy_call as one_call;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let mode = args.next().unwrap_or_default();
    let mut b = Policy::builder()
        .endpoint(Endpoint::new("a", "https://a.example/"))
        .endpoint(Endpoint::new("b", "https://b.example/"))
        .endpoint(Endpoint::new("c", "https://c.example/"));
    if mode == "rate" {
        b = b.configure(|s| s.breaker.rule = BreakerRule::failure_rate());
    }
    if mode != "budget" {
        b = b.budget(None);
    }
    let engine = Engine::with_entropy(b.build().expect("the policy builds"), 0x5EED);
    let (uri, headers) = (http::Uri::from_static("/"), http::HeaderMap::new());
    let info = RequestInfo {
        method: &http::Method::GET,
        uri: &uri,
        headers: &headers,
    };
    let t = Instant::now();
    for _ in 0..1000 {
        one_call(&engine, &info, t);
    }
    let start = Instant::now();
    let ok = (0..n).filter(|_| one_call(&engine, &info, t)).count();
    let took = start.elapsed();
    println!(
        "{ok} of {n} calls answered, {:.1} ns a call",
        took.as_nanos() as f64 / n.max(1) as f64
    );
    assert_eq!(ok as u64, n, "every call is answered");
}
