//! Heap allocations per healthy call, per adapter, next to its raw client's (issue 18): a
//! counting global allocator (`stats_alloc`, as core's `healthy_path` bench) around `N`
//! sequential keep-alive GETs of each contender, after a warm-up, in one process.
//!
//! The loopback provider runs in the same process, so every figure includes its own
//! allocations per request; a raw socket client that allocates nothing measures those
//! alone ("provider alone"), and "baton's own" is baton's count minus its raw client's.
//!
//! ```text
//! cargo run --release -p bench --bin allocs          # N = 2000
//! cargo run --release -p bench --bin allocs -- --quick
//! ```

use std::alloc::System;
use std::future::Future;
use std::io::{Read, Write};
use std::net::TcpStream;

use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use testkit::{Behaviour, Provider};

// Its stock ureq agent is the bench's; this binary counts ureq's defaults.
#[allow(dead_code)]
#[path = "../bare.rs"]
mod bare;

type HyperClient = hyper_util::client::legacy::Client<
    hyper_util::client::legacy::connect::HttpConnector,
    baton_tower::ReplayBody<http_body_util::Empty<bytes::Bytes>>,
>;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Allocations per call of `n` calls of `f` (after `n / 4` warm-up calls).
fn per_call(n: usize, mut f: impl FnMut() -> bool) -> f64 {
    for _ in 0..n / 4 {
        assert!(f(), "warm-up call answered");
    }
    let region = Region::new(GLOBAL);
    for _ in 0..n {
        assert!(f(), "call answered");
    }
    region.change().allocations as f64 / n as f64
}

/// The provider's own allocations: a client on a raw socket that allocates nothing.
fn provider_alone(p: &Provider, n: usize) -> f64 {
    let mut s = TcpStream::connect(p.addr()).expect("connect");
    s.set_nodelay(true).expect("nodelay");
    let req = format!(
        "GET / HTTP/1.1\r\nhost: {}\r\nx-request-id: {}\r\n\r\n",
        p.addr(),
        bare::REQUEST_ID
    );
    let mut buf = [0u8; 4096];
    per_call(n, || {
        s.write_all(req.as_bytes()).expect("write");
        let mut got = 0;
        // The provider answers `200` with `content-length: 0`: the head is the response.
        while !buf[..got].windows(4).any(|w| w == b"\r\n\r\n") {
            let k = s.read(&mut buf[got..]).expect("read");
            assert!(k > 0, "provider closed");
            got += k;
        }
        true
    })
}

fn block_on_tokio<F: Future>(rt: &tokio::runtime::Runtime, f: F) -> F::Output {
    rt.block_on(f)
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let n = if quick { 200 } else { 2000 };
    let p = Provider::start(Behaviour::ok());
    p.set_recording(false);
    let url = format!("{}/", p.url());
    let policy =
        || baton_core::Policy::builder().endpoint(baton_core::Endpoint::new("a", url.clone()));
    let alone = provider_alone(&p, n);
    let mut rows: Vec<(&str, &str, f64, f64)> = Vec::new();

    // tokio: baton-tokio over the same reqwest::Client, against that client.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let http = reqwest::Client::new();
    let baton = {
        let _g = rt.enter();
        baton_tokio::Client::builder(policy())
            .reqwest_client(http.clone())
            .build()
            .expect("client")
    };
    let raw = per_call(n, || {
        block_on_tokio(&rt, async {
            let r = http
                .get(&url)
                .header("x-request-id", bare::REQUEST_ID)
                .send()
                .await
                .expect("send");
            r.status().is_success() && r.bytes().await.is_ok()
        })
    });
    let ours = per_call(n, || {
        block_on_tokio(&rt, async {
            let r = baton.get("/").send().await.expect("send");
            r.status().is_success() && r.bytes().await.is_ok()
        })
    });
    rows.push(("baton-tokio", "reqwest::Client", ours, raw));

    // blocking: baton-blocking against a stock ureq Agent.
    let agent = ureq::Agent::new_with_defaults();
    let client = baton_blocking::Client::new(policy()).expect("client");
    let raw = per_call(n, || {
        match agent
            .get(&url)
            .header("x-request-id", bare::REQUEST_ID)
            .call()
        {
            Ok(r) => r.into_body().read_to_vec().is_ok(),
            Err(_) => false,
        }
    });
    let ours = per_call(n, || match client.get("/").call() {
        Ok(r) => r.into_body().read_to_vec().is_ok(),
        Err(_) => false,
    });
    rows.push(("baton-blocking", "ureq::Agent", ours, raw));

    // async-std: baton-async-std against a bare hyper connection polled in the task.
    let client = baton_async_std::Client::new(policy()).expect("client");
    let mut conn = async_std::task::block_on(bare::Bare::connect(p.addr()));
    let raw = per_call(n, || async_std::task::block_on(conn.call(true)));
    let ours = per_call(n, || {
        async_std::task::block_on(async {
            let r = client.get("/").send().await.expect("send");
            r.status().is_success() && r.bytes().await.is_ok()
        })
    });
    rows.push(("baton-async-std", "bare hyper over async-io", ours, raw));

    // tower: the layer in front of hyper-util's client, against that client.
    let hyper: HyperClient = {
        let _g = rt.enter();
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build(hyper_util::client::legacy::connect::HttpConnector::new())
    };
    let layered = {
        let _g = rt.enter();
        use tower::Layer as _;
        baton_tower::BatonLayer::new(policy())
            .expect("layer")
            .layer(hyper.clone())
    };
    let uri: http::Uri = url.parse().expect("url");
    let raw = per_call(n, || {
        block_on_tokio(&rt, async {
            use http_body_util::BodyExt;
            let body = baton_tower::ReplayBody::from_bytes(bytes::Bytes::new());
            let req = http::Request::get(uri.clone())
                .header("x-request-id", bare::REQUEST_ID)
                .body(body)
                .expect("request");
            let r = hyper.request(req).await.expect("send");
            r.status().is_success() && r.into_body().collect().await.is_ok()
        })
    });
    let ours = per_call(n, || {
        block_on_tokio(&rt, async {
            use http_body_util::BodyExt;
            use tower::Service;
            let req = http::Request::get("/")
                .body(http_body_util::Empty::<bytes::Bytes>::new())
                .expect("request");
            let r = layered.clone().call(req).await.expect("send");
            r.status().is_success() && r.into_body().collect().await.is_ok()
        })
    });
    rows.push(("baton-tower", "hyper-util Client", ours, raw));

    println!("Heap allocations per healthy call ({n} sequential keep-alive GETs each; every figure includes the in-process loopback provider's {alone:.1} per request)\n");
    println!("| adapter | raw client | baton, allocations/call | raw client, allocations/call | baton's own (baton - raw) |");
    println!("|---|---|---|---|---|");
    for (a, r, ours, raw) in rows {
        println!("| {a} | {r} | {ours:.1} | {raw:.1} | {:+.1} |", ours - raw);
    }
}
