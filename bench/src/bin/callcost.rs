//! What a healthy call costs in instructions, baton-tokio against the same
//! `reqwest::Client` sending the same request bytes (issue 18): counted, not timed, so the
//! figure does not move with loopback wake-ups the way a calls/s ratio on two cores does.
//!
//! Run it under callgrind, once per contender, and compare the totals (each run makes
//! `2 * N` calls: a warm-up round, then a measured one, both counted):
//!
//! ```text
//! cargo build --release -p bench --bin callcost
//! valgrind --tool=callgrind target/release/callcost raw 3000
//! valgrind --tool=callgrind target/release/callcost baton 3000
//! ```
//!
//! (baton's total - raw's total) / 6000 is what baton adds to one call; the in-process
//! provider's instructions are in both totals alike. Without valgrind it prints the
//! wall time per call of the second round, which is as noisy as scenario 1.
//!
//! `retry` is reqwest-retry's middleware over the same client (2 retries, scenario 1's
//! configuration), sending the plain request: `baton` against `retry` is the comparison
//! scenario 1's goal makes, counted.
//!
//! `tower` and `hyper` are the same pair for baton-tower's layer in front of hyper-util's
//! `Client` and that client used directly (scenario 1's tower row); `blocking` and `ureq`
//! for baton-blocking and a stock `ureq::Agent` with the policy's timeouts (scenario 1's
//! blocking row; no runtime).
//!
//! `smol` is baton-async-std on smol alone, for comparing two builds of it (see
//! [`smol_calls`]).
//!
//! `callcost cpu N` runs both contenders in one process, interleaved in turns of 10
//! calls (as scenario 1 does), and prints each one's wall time and the calling thread's
//! on-CPU time per call (from `/proc/thread-self/schedstat`: user and kernel time of the
//! thread that runs the client, the provider's threads not included). Where the two
//! differ by more than the counted instructions explain, the cost is in cycles (cache
//! and TLB misses) or in the kernel, not in the instructions baton runs.
//!
//! `callcost parts N` splits baton-tokio's extra the same way, four contenders interleaved:
//! the raw call, the raw call inside one 30 s tokio timeout (the attempt timer baton arms),
//! the raw call inside one healthy call of baton's engine (`Call::new` and the first
//! attempt before the send, the response and `take_done` after it), and baton's call. The
//! engine row shows what the engine costs with the caches a network call leaves behind:
//! several microseconds, about nine times what `healthy_floor` times for it in a loop, where its
//! code and data stay cached; the remainder of baton's row is its adapter and driver.

use std::time::{Duration, Instant};

use baton_core::{Endpoint, Policy};
use testkit::{Behaviour, Provider};
use tower::Layer as _;

// Only its request id and the stock ureq agent are used here.
#[allow(dead_code)]
#[path = "../bare.rs"]
mod bare;

type HyperClient = hyper_util::client::legacy::Client<
    hyper_util::client::legacy::connect::HttpConnector,
    baton_tower::ReplayBody<http_body_util::Empty<bytes::Bytes>>,
>;

fn main() {
    let mut args = std::env::args().skip(1);
    let who = args.next().unwrap_or_else(|| "baton".into());
    let n: usize = match args.next().map(|s| s.parse()) {
        None => 3000,
        Some(Ok(n)) => n,
        Some(Err(e)) => {
            eprintln!("callcost: the number of calls must be a whole number: {e}");
            std::process::exit(2);
        }
    };
    let contenders = [
        "baton", "raw", "retry", "cpu", "parts", "tower", "hyper", "blocking", "ureq", "smol",
    ];
    if !contenders.contains(&who.as_str()) {
        eprintln!(
            "callcost: the contender is one of {}, not {who:?}",
            contenders.join(", ")
        );
        std::process::exit(2);
    }
    let providers = [
        Provider::start(Behaviour::ok()),
        Provider::start(Behaviour::ok()),
    ];
    let urls: Vec<String> = providers
        .iter()
        .map(|p| {
            p.set_recording(false);
            format!("{}/", p.url())
        })
        .collect();
    if who == "blocking" || who == "ureq" {
        blocking(&who, &urls, n);
        return;
    }
    if who == "smol" {
        smol_calls(&urls, n);
        return;
    }
    let http = reqwest::Client::builder()
        .connect_timeout(Duration::from_millis(100))
        .build()
        .expect("reqwest client");
    let policy = endpoints(&urls);
    let client = baton_tokio::Client::builder(policy)
        .reqwest_client(http.clone())
        .build()
        .expect("baton client");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let baton_call = || async {
        match client.get("/").send().await {
            Ok(r) => r.status().is_success() && r.bytes().await.is_ok(),
            Err(_) => false,
        }
    };
    // reqwest-retry's middleware over the same client, as scenario 1 configures it (2
    // retries), sending its plain request: the row every baton row of scenario 1 is held to.
    let retry = bare::reqwest_retry(
        &http,
        2,
        (Duration::from_millis(100), Duration::from_secs(5)),
    );
    let retry_call = || async {
        match retry.get(&urls[0]).send().await {
            Ok(r) => r.status().is_success() && r.bytes().await.is_ok(),
            Err(_) => false,
        }
    };
    let raw_call = || async {
        let rb = http.get(&urls[0]).header("x-request-id", bare::REQUEST_ID);
        match rb.send().await {
            Ok(r) => r.status().is_success() && r.bytes().await.is_ok(),
            Err(_) => false,
        }
    };
    // baton-tower's layer in front of hyper-util's client, and that client used directly
    // with the same request bytes (scenario 1's tower row).
    let mut connector = hyper_util::client::legacy::connect::HttpConnector::new();
    connector.set_connect_timeout(Some(Duration::from_millis(100)));
    let hyper: HyperClient =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build(connector);
    let policy = endpoints(&urls);
    let layered = baton_tower::BatonLayer::new(policy)
        .expect("baton-tower layer")
        .layer(hyper.clone());
    let hyper_uri: http::Uri = urls[0].parse().expect("provider url");
    let tower_call = || async {
        use http_body_util::BodyExt;
        use tower::Service;
        let req = http::Request::get("/")
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .expect("request");
        match layered.clone().call(req).await {
            Ok(r) => r.status().is_success() && r.into_body().collect().await.is_ok(),
            Err(_) => false,
        }
    };
    let hyper_call = || async {
        use http_body_util::BodyExt;
        let body = baton_tower::ReplayBody::from_bytes(bytes::Bytes::new());
        let req = http::Request::get(hyper_uri.clone())
            .header("x-request-id", bare::REQUEST_ID)
            .body(body)
            .expect("request");
        match hyper.request(req).await {
            Ok(r) => r.status().is_success() && r.into_body().collect().await.is_ok(),
            Err(_) => false,
        }
    };
    if who == "cpu" || who == "parts" {
        if on_cpu().is_none() {
            eprintln!("callcost {who}: /proc/thread-self/schedstat cannot be read on this system");
            std::process::exit(2);
        }
        // `parts`: the raw call alone, with one 30 s tokio timeout around it (baton's attempt
        // timer), with one healthy engine call around it (baton's decisions, made cold, as
        // they are between network reads), and baton's call.
        let names: &[&str] = if who == "cpu" {
            &["raw", "baton"]
        } else {
            &["raw", "raw+timer", "raw+engine", "baton"]
        };
        let engine = baton_core::Engine::new(endpoints(&urls).build().expect("policy"));
        let call = |k: usize| {
            let (engine, name) = (&engine, names[k]);
            async move {
                match name {
                    "baton" => baton_call().await,
                    "raw+timer" => tokio::time::timeout(Duration::from_secs(30), raw_call())
                        .await
                        .unwrap_or(false),
                    "raw+engine" => engine_around(engine, raw_call()).await,
                    _ => raw_call().await,
                }
            }
        };
        rt.block_on(interleaved(names, n, call));
        return;
    }
    rt.block_on(async {
        for round in 0..2 {
            let t = Instant::now();
            for _ in 0..n {
                let ok = match who.as_str() {
                    "baton" => baton_call().await,
                    "tower" => tower_call().await,
                    "hyper" => hyper_call().await,
                    "retry" => retry_call().await,
                    _ => raw_call().await,
                };
                assert!(ok, "callcost: every call is answered 200");
            }
            if round == 1 {
                let per = t.elapsed().as_secs_f64() * 1e6 / n as f64;
                println!("{who}: {n} calls, {per:.1} µs per call");
            }
        }
    });
}

/// baton-async-std on smol, alone: for comparing two builds of it. Its raw client in
/// scenario 1, a bare hyper connection, runs 2.4 times its instructions (375 M against
/// 155 M for 4,000 calls), so the pair would not tell baton's cost.
fn smol_calls(urls: &[String], n: usize) {
    let policy = endpoints(urls);
    let client = baton_async_std::Client::new(policy).expect("baton-async-std client");
    smol::block_on(async {
        for round in 0..2 {
            let t = Instant::now();
            for _ in 0..n {
                let ok = match client.get("/").send().await {
                    Ok(r) => r.status().is_success() && r.bytes().await.is_ok(),
                    Err(_) => false,
                };
                assert!(ok, "callcost: every call is answered 200");
            }
            if round == 1 {
                let per = t.elapsed().as_secs_f64() * 1e6 / n as f64;
                println!("smol: {n} calls, {per:.1} µs per call");
            }
        }
    });
}

/// The blocking pair: baton-blocking, or a stock ureq Agent with the policy's timeouts
/// sending the same request bytes (as scenario 1's blocking row).
fn blocking(who: &str, urls: &[String], n: usize) {
    let agent = bare::stock_ureq();
    let policy = endpoints(urls);
    let client = baton_blocking::Client::new(policy).expect("baton-blocking client");
    let read_all = |body: ureq::Body| {
        let mut body = body;
        body.read_to_vec().is_ok()
    };
    for round in 0..2 {
        let t = Instant::now();
        for _ in 0..n {
            let answered =
                |r: http::Response<ureq::Body>| r.status().is_success() && read_all(r.into_body());
            let ok = match who {
                "blocking" => client.get("/").call().is_ok_and(answered),
                _ => (agent.get(&urls[0]))
                    .header("x-request-id", bare::REQUEST_ID)
                    .call()
                    .is_ok_and(answered),
            };
            assert!(ok, "callcost: every call is answered 200");
        }
        if round == 1 {
            let per = t.elapsed().as_secs_f64() * 1e6 / n as f64;
            println!("{who}: {n} calls, {per:.1} µs per call");
        }
    }
}

/// A policy of the providers at `urls`, in that order.
fn endpoints(urls: &[String]) -> baton_core::PolicyBuilder {
    let mut policy = Policy::builder();
    for (i, url) in urls.iter().enumerate() {
        policy = policy.endpoint(Endpoint::new(format!("e{i}"), url.clone()));
    }
    policy
}

/// The contenders `names`, interleaved in turns of 10 calls (the order of each turn rotating),
/// after a warm-up of `n` calls each: each one's wall time and the calling thread's on-CPU
/// time per call over the next `n`.
/// `call(k)` makes one call of contender `names[k]`.
async fn interleaved<F, C>(names: &[&str], n: usize, call: C)
where
    C: Fn(usize) -> F,
    F: std::future::Future<Output = bool>,
{
    let on_cpu = || on_cpu().unwrap_or(0.0);
    // [wall, on-CPU] seconds per contender, after the warm-up.
    let mut sums = vec![[0.0f64; 2]; names.len()];
    let turns = (2 * n / 10).max(2);
    for round in 0..turns {
        for j in 0..names.len() {
            let k = (round + j) % names.len();
            let (t, c) = (Instant::now(), on_cpu());
            for _ in 0..10 {
                assert!(call(k).await, "callcost: every call is answered 200");
            }
            if round >= n / 10 {
                sums[k][0] += t.elapsed().as_secs_f64();
                sums[k][1] += on_cpu() - c;
            }
        }
    }
    let calls = (turns - n / 10) as f64 * 10.0;
    for (k, name) in names.iter().enumerate() {
        println!(
            "{name}: {calls} calls, wall {:.1} µs, calling thread on CPU {:.1} µs per call",
            sums[k][0] * 1e6 / calls,
            sums[k][1] * 1e6 / calls
        );
    }
}

/// One healthy call of `engine` around `send`: the call is made and its first attempt
/// started before the send, and the response handed to it after, as an adapter does; what
/// it adds to `send` is the engine's cost with the caches as a real call leaves them.
async fn engine_around(
    engine: &baton_core::Engine,
    send: impl std::future::Future<Output = bool>,
) -> bool {
    use baton_core::{Action, BodyKind, Call, CallOptions, Head, Input, RequestInfo};
    let (uri, headers) = (http::Uri::from_static("/"), http::HeaderMap::new());
    let info = RequestInfo {
        method: &http::Method::GET,
        uri: &uri,
        headers: &headers,
    };
    let mut call: Call<'_, Head> = Call::new(
        engine,
        &info,
        BodyKind::Empty,
        CallOptions::default(),
        Instant::now(),
    );
    let Action::Send(attempt) = call.poll() else {
        return false;
    };
    let ok = send.await;
    let response = Head::new(http::StatusCode::OK);
    let input = Input::Response {
        attempt: attempt.number,
        response,
        wall: None,
    };
    call.handle(input, Instant::now());
    let done = call.poll() == Action::Done;
    ok && done
        && matches!(
            std::hint::black_box(call.take_done()),
            baton_core::Done::Answer { .. }
        )
}

/// Seconds the calling thread has been on a CPU (user and kernel), from the first field of
/// `/proc/thread-self/schedstat` (nanoseconds). The calling thread also runs the runtime's
/// reactor and the hyper connection tasks of both contenders, as in any current-thread
/// client.
fn on_cpu() -> Option<f64> {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .map(|ns| ns as f64 * 1e-9)
}
