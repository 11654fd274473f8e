//! # bench: baton side by side with the alternatives, on loopback
//!
//! One binary runs six scenarios against real testkit providers on 127.0.0.1 (and, for
//! the last one, the engine alone), each contender in the same run, interleaved (the order
//! of the contenders rotates every repetition), several repetitions, and prints a markdown
//! table of medians and ratios. The reading of the table is in `BENCHMARKS.md` at the
//! repository root.
//!
//! ```text
//! cargo run --release -p bench            # the full run (about 2.5 minutes)
//! cargo run --release -p bench -- --quick # a reduced run (seconds), as CI does
//! cargo run --release -p bench -- --only 1,5 # some scenarios only
//! ```
//!
//! | # | scenario | contenders |
//! |---|---|---|
//! | 1 | healthy provider: calls/s, p50, p99 | baton-tokio vs the same `reqwest::Client` used directly (also sending baton's request id header, and under a bare tokio timeout, as references) and vs reqwest-retry's middleware over that client (2 retries); baton-tower's layer vs the same hyper-util `Client` used directly; baton-blocking vs a stock `ureq::Agent` with the same timeouts (1 and 8 threads); baton-async-std vs a bare hyper connection polled in the task, on async-std and on smol (`runtimes.rs`; each raw client sends baton's request bytes, and a plain request beside it) |
//! | 2 | black-holed primary, healthy backup, 200 ms attempt timeout | baton (1 task and 8 tasks), a hand-written "try A then B" loop, reqwest-retry (at the primary); references: plain reqwest to the backup, baton with a healthy primary |
//! | 3 | total outage (3 endpoints answer 503): attempts per call | baton with and without budget, reqwest-retry (2 retries), tower retry (2 retries, `TpsBudget`) |
//! | 4 | primary slow (1 s) for 10 % of calls | baton with and without hedging |
//! | 5 | the engine alone, 1 vs 2 threads sharing one `Engine` | breaker rules and budget on/off; control: one `Engine` per thread |
//! | 6 | healthy provider over HTTP/2 (h2c, one multiplexed connection), 1 and 8 callers | baton-tokio vs the same `reqwest::Client` (prior knowledge); baton-async-std vs a bare hyper HTTP/2 connection, on async-std and on smol (`h2.rs`; scenario 1's row format) |
//!
//! Each run also draws three SVG charts (`chart.rs`, no plotting dependency): the latency
//! of every call in scenario 2 (baton, the hand-written loop, reqwest-retry), attempts per
//! call over time in scenario 3 (baton with and without the budget), and each baton row's
//! ratio to its raw client in scenario 1. A full run writes them to `docs/charts/` (shown
//! in `BENCHMARKS.md`), a quick one to `target/bench-charts/`.
//!
//! Everything runs on one current-thread tokio runtime (the providers have their own
//! threads), so the client side uses one core and the providers the other on a 2-core
//! machine.
//!
//! ## Dependencies
//! - `baton-core`, `baton-tokio`: what is measured; `testkit`: the loopback providers.
//! - `reqwest`: the plain-client baseline (and the client every contender sends with).
//! - `reqwest-middleware`, `reqwest-retry`: the retry middleware most reqwest users reach
//!   for (versions that match the reqwest 0.13 baton-tokio uses).
//! - `tower` (`retry`, `util`): tower's `retry::Policy` with its `TpsBudget`, the other
//!   common way to retry a reqwest `Client` (which is a tower `Service`).
//! - `tokio`: the runtime; `futures-util`: `join_all` to run several call loops at once
//!   without spawning; `http`: method and status types for the engine-only scenario.
//! - `baton-tower`, `hyper-util`, `http-body-util`, `bytes`: scenario 1's tower rows (the
//!   layer in front of hyper-util's legacy client, and that client alone).
//! - `baton-blocking`, `ureq`: scenario 1's blocking rows; `baton-async-std`, `async-std`,
//!   `smol`, `async-io`, `hyper`, `smol-hyper`: its async-std and smol rows (a bare hyper
//!   connection over async-io is the in-task baseline).

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

mod bare;
mod chart;
mod h2;
mod interleave;
mod runtimes;

use baton_core::{
    Action, BodyKind, BreakerRule, Call, CallOptions, Endpoint, Engine, Head, Hedge, Input, Policy,
    PolicyBuilder, RequestInfo,
};
use testkit::{Behaviour, Provider};
use tower::retry::budget::{Budget as _, TpsBudget};
use tower::Layer as _;

/// How big a run is.
#[derive(Debug, Clone, Copy)]
struct Scale {
    /// Repetitions of every scenario (each contender once per repetition).
    reps: usize,
    /// Scenario 1: calls per contender and repetition with one caller (the repetitions'
    /// calls are made as one interleaved run).
    healthy_calls: usize,
    /// Scenario 1: the same with 8 callers.
    healthy_calls_8: usize,
    /// Scenario 2: calls per contender and repetition.
    blackhole_calls: usize,
    /// Scenario 3: calls per contender and repetition.
    outage_calls: usize,
    /// Scenario 4: calls per contender and repetition.
    slow_calls: usize,
    /// Scenario 5: how long each measurement runs.
    engine_time: Duration,
}

const FULL: Scale = Scale {
    reps: 9,
    healthy_calls: 2_000,
    healthy_calls_8: 4_000,
    blackhole_calls: 200,
    outage_calls: 1_000,
    slow_calls: 200,
    engine_time: Duration::from_millis(500),
};

const QUICK: Scale = Scale {
    reps: 2,
    healthy_calls: 100,
    healthy_calls_8: 200,
    blackhole_calls: 40,
    outage_calls: 100,
    slow_calls: 40,
    engine_time: Duration::from_millis(50),
};

/// The attempt timeout of scenario 2.
const ATTEMPT_TIMEOUT: Duration = Duration::from_millis(200);
/// Concurrent call loops for the stateless contenders of scenario 2 (their calls do not
/// depend on each other, so running them side by side only shortens the run).
const BLACKHOLE_TASKS: usize = 40;
/// Concurrent call loops in scenario 3 (every contender).
const OUTAGE_TASKS: usize = 10;
/// Concurrent call loops in scenario 4 (every contender).
const SLOW_TASKS: usize = 20;
/// The slow response of scenario 4.
const SLOW: Duration = Duration::from_secs(1);
/// Hedging delay of scenario 4.
const HEDGE_AFTER: Duration = Duration::from_millis(50);

/// What the charts are drawn from, filled by the scenarios that ran.
#[derive(Default)]
struct Charts {
    /// Scenario 1: calls/s ratio of each baton row against its own raw client.
    healthy: Vec<(String, f64)>,
    /// Scenario 2: median latency (ms) per call number, per contender.
    blackhole: Vec<chart::Series>,
    /// Scenario 3: attempts per call over the run's time, budget on and off.
    outage: Vec<chart::Series>,
}

/// One row of the printed table.
struct Row {
    scenario: &'static str,
    contender: String,
    setup: String,
    result: String,
    ratio: String,
    goal: String,
}

/// What one call looked like from the caller's side.
#[derive(Debug, Clone, Copy)]
struct Sample {
    latency: Duration,
    /// A 2xx response whose body was read.
    ok: bool,
}

/// The samples of one batch of calls, in completion order per task (tasks one after
/// another), and the batch's wall time.
struct Batch {
    samples: Vec<Sample>,
    elapsed: Duration,
}

impl Batch {
    fn latencies(&self) -> Vec<Duration> {
        self.samples.iter().map(|s| s.latency).collect()
    }

    fn ok(&self) -> usize {
        self.samples.iter().filter(|s| s.ok).count()
    }
}

/// Runs `calls` calls of `f` in `tasks` concurrent loops (no spawning: the loops are
/// joined in place on the current task).
async fn drive<F, Fut>(calls: usize, tasks: usize, f: F) -> Batch
where
    F: Fn() -> Fut,
    Fut: Future<Output = bool>,
{
    let f = &f;
    let per = calls / tasks;
    let t0 = Instant::now();
    let loops = (0..tasks).map(|_| async move {
        let mut out = Vec::with_capacity(per);
        for _ in 0..per {
            let t = Instant::now();
            let ok = f().await;
            out.push(Sample {
                latency: t.elapsed(),
                ok,
            });
        }
        out
    });
    let results = futures_util::future::join_all(loops).await;
    Batch {
        elapsed: t0.elapsed(),
        samples: results.into_iter().flatten().collect(),
    }
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        return f64::NAN;
    }
    let m = v.len() / 2;
    if v.len() % 2 == 0 {
        (v[m - 1] + v[m]) / 2.0
    } else {
        v[m]
    }
}

fn median_d(v: &[Duration]) -> Duration {
    Duration::from_secs_f64(median(
        &v.iter().map(|d| d.as_secs_f64()).collect::<Vec<_>>(),
    ))
}

/// The `p`-quantile (nearest rank) of `v`.
fn quantile(v: &[Duration], p: f64) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    let mut v = v.to_vec();
    v.sort();
    let rank = ((p * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

fn fmt_d(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 1_000.0 {
        format!("{us:.0} µs")
    } else if us < 1_000_000.0 {
        format!("{:.1} ms", us / 1e3)
    } else {
        format!("{:.2} s", us / 1e6)
    }
}

fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "MISSED"
    }
}

/// The contender to start repetition `rep` with: the order rotates.
fn rotated<T: Copy>(items: &[T], rep: usize) -> Vec<T> {
    let k = rep % items.len();
    items[k..].iter().chain(&items[..k]).copied().collect()
}

fn reqwest_client() -> reqwest::Client {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_millis(100))
        .build()
        .expect("reqwest client")
}

fn endpoints(urls: &[String]) -> PolicyBuilder {
    let mut b = Policy::builder();
    for (i, url) in urls.iter().enumerate() {
        b = b.endpoint(Endpoint::new(format!("e{i}"), url.clone()));
    }
    b
}

fn baton(policy: PolicyBuilder, http: &reqwest::Client) -> baton_tokio::Client {
    baton_tokio::Client::builder(policy)
        .reqwest_client(http.clone())
        .build()
        .expect("baton client")
}

async fn plain_get(http: &reqwest::Client, url: &str, timeout: Option<Duration>) -> bool {
    let mut rb = http.get(url);
    if let Some(t) = timeout {
        rb = rb.timeout(t);
    }
    match rb.send().await {
        Ok(r) => r.status().is_success() && r.bytes().await.is_ok(),
        Err(_) => false,
    }
}

/// `plain_get` with the request id header baton sends: the same request bytes.
async fn same_bytes_get(http: &reqwest::Client, url: &str) -> bool {
    let rb = http.get(url).header("x-request-id", bare::REQUEST_ID);
    match rb.send().await {
        Ok(r) => r.status().is_success() && r.bytes().await.is_ok(),
        Err(_) => false,
    }
}

async fn baton_get(client: &baton_tokio::Client) -> bool {
    match client.get("/").send().await {
        Ok(r) => r.status().is_success() && r.bytes().await.is_ok(),
        Err(_) => false,
    }
}

type HyperClient = hyper_util::client::legacy::Client<
    hyper_util::client::legacy::connect::HttpConnector,
    baton_tower::ReplayBody<http_body_util::Empty<bytes::Bytes>>,
>;

fn hyper_client() -> HyperClient {
    let mut connector = hyper_util::client::legacy::connect::HttpConnector::new();
    connector.set_connect_timeout(Some(Duration::from_millis(100)));
    hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build(connector)
}

/// hyper-util's client used directly, with the same body type the layer hands it, and
/// with baton's request id header when `request_id` (the same request bytes).
async fn hyper_get(client: &HyperClient, uri: &http::Uri, request_id: bool) -> bool {
    use http_body_util::BodyExt;
    let body = baton_tower::ReplayBody::from_bytes(bytes::Bytes::new());
    let mut req = http::Request::get(uri.clone());
    if request_id {
        req = req.header("x-request-id", bare::REQUEST_ID);
    }
    let req = req.body(body).expect("request");
    match client.request(req).await {
        Ok(r) => r.status().is_success() && r.into_body().collect().await.is_ok(),
        Err(_) => false,
    }
}

/// A GET through the tower layer.
async fn tower_layer_get(svc: &baton_tower::Baton<HyperClient>) -> bool {
    use http_body_util::BodyExt;
    use tower::Service;
    let req = http::Request::get("/")
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .expect("request");
    match svc.clone().call(req).await {
        Ok(r) => r.status().is_success() && r.into_body().collect().await.is_ok(),
        Err(_) => false,
    }
}

/// A baton GET that logs (milliseconds since `t0`, attempts made) for the outage chart.
async fn baton_attempts(
    client: &baton_tokio::Client,
    log: &std::cell::RefCell<Vec<(f64, f64)>>,
    t0: Instant,
) -> bool {
    let (ok, attempts) = match client.get("/").send().await {
        Ok(r) => {
            let n = r.report().attempts.len();
            (r.status().is_success() && r.bytes().await.is_ok(), n)
        }
        Err(e) => (false, e.report().attempts.len()),
    };
    log.borrow_mut()
        .push((t0.elapsed().as_secs_f64() * 1000.0, attempts as f64));
    ok
}

/// The median latency (ms) per call number over repetitions.
fn per_call_median(name: &str, runs: &[Vec<Duration>]) -> chart::Series {
    let n = runs.iter().map(Vec::len).min().unwrap_or(0);
    let points = (0..n)
        .map(|k| {
            let at: Vec<Duration> = runs.iter().map(|r| r[k]).collect();
            ((k + 1) as f64, median_d(&at).as_secs_f64() * 1000.0)
        })
        .collect();
    chart::Series {
        name: name.into(),
        points,
    }
}

/// Calls in time order, averaged over bins of `size` calls: (mean time, mean attempts).
fn binned(name: &str, mut log: Vec<(f64, f64)>, size: usize) -> chart::Series {
    log.sort_by(|a, b| a.0.total_cmp(&b.0));
    let points = log
        .chunks(size.max(1))
        .map(|c| {
            let n = c.len() as f64;
            (
                c.iter().map(|p| p.0).sum::<f64>() / n,
                c.iter().map(|p| p.1).sum::<f64>() / n,
            )
        })
        .collect();
    chart::Series {
        name: name.into(),
        points,
    }
}

fn is_trigger(status: reqwest::StatusCode) -> bool {
    matches!(status.as_u16(), 502..=504)
}

/// The hand-written loop: each URL in turn, one attempt each, with a per-attempt timeout;
/// the first response that is not 502/503/504 wins.
async fn try_in_turn(http: &reqwest::Client, urls: &[String], timeout: Duration) -> bool {
    for url in urls {
        match http.get(url).timeout(timeout).send().await {
            Ok(r) if !is_trigger(r.status()) => {
                return r.status().is_success() && r.bytes().await.is_ok();
            }
            _ => continue,
        }
    }
    false
}

async fn middleware_get(
    client: &reqwest_middleware::ClientWithMiddleware,
    url: &str,
    timeout: Option<Duration>,
) -> bool {
    let mut rb = client.get(url);
    if let Some(t) = timeout {
        rb = rb.timeout(t);
    }
    match rb.send().await {
        Ok(r) => r.status().is_success() && r.bytes().await.is_ok(),
        Err(_) => false,
    }
}

/// tower's retry policy as its docs show it, with a retry limit: retry transport errors
/// and 502/503/504 while retries are left and the shared `TpsBudget` allows. The caller
/// deposits once per call (Finagle's rule, which baton follows too).
#[derive(Clone)]
struct TowerRetry {
    budget: Arc<TpsBudget>,
    retries_left: u32,
}

impl tower::retry::Policy<reqwest::Request, reqwest::Response, reqwest::Error> for TowerRetry {
    type Future = std::future::Ready<()>;

    fn retry(
        &mut self,
        _req: &mut reqwest::Request,
        result: &mut Result<reqwest::Response, reqwest::Error>,
    ) -> Option<Self::Future> {
        let retryable = match result {
            Ok(r) => is_trigger(r.status()),
            Err(_) => true,
        };
        if !retryable || self.retries_left == 0 || !self.budget.withdraw() {
            return None;
        }
        self.retries_left -= 1;
        Some(std::future::ready(()))
    }

    fn clone_request(&mut self, req: &reqwest::Request) -> Option<reqwest::Request> {
        req.try_clone()
    }
}

type TowerService = tower::retry::Retry<TowerRetry, reqwest::Client>;

async fn tower_get(svc: &TowerService, budget: &TpsBudget, url: &str) -> bool {
    use tower::ServiceExt;
    budget.deposit();
    let req = reqwest::Request::new(reqwest::Method::GET, url.parse().expect("url"));
    match svc.clone().oneshot(req).await {
        Ok(r) => r.status().is_success() && r.bytes().await.is_ok(),
        Err(_) => false,
    }
}

fn provider(b: Behaviour) -> Provider {
    let p = Provider::start(b);
    p.set_recording(false);
    p
}

// ---------------------------------------------------------------------------------------
// Scenario 1: healthy.

async fn healthy(scale: Scale, rows: &mut Vec<Row>, charts: &mut Charts) {
    let primary = provider(Behaviour::ok());
    let backup = provider(Behaviour::ok());
    let urls = vec![format!("{}/", primary.url()), format!("{}/", backup.url())];
    let http = reqwest_client();
    let client = baton(endpoints(&urls), &http);
    let url = urls[0].as_str();
    // The tower layer in front of hyper-util's client, against that client used directly.
    let hyper = hyper_client();
    let layered = baton_tower::BatonLayer::new(endpoints(&urls))
        .expect("baton-tower layer")
        .layer(hyper.clone());
    let hyper_uri: http::Uri = url.parse().expect("provider url");
    // reqwest-retry as its users configure it, over the same reqwest Client: 2 retries.
    let retry = bare::reqwest_retry(
        &http,
        2,
        (Duration::from_millis(100), Duration::from_secs(5)),
    );

    for (tasks, calls) in [(1, scale.healthy_calls), (8, scale.healthy_calls_8)] {
        let rounds = calls * scale.reps / tasks / interleave::TURN;
        let setup = format!(
            "{tasks} task(s), {} GETs each, interleaved",
            rounds * tasks * interleave::TURN
        );
        // reqwest's group: every contender over the same reqwest::Client.
        let reqwest_call = |who: usize| {
            let (http, client, retry) = (&http, &client, &retry);
            async move {
                match who {
                    0 => same_bytes_get(http, url).await,
                    1 => plain_get(http, url, None).await,
                    2 => baton_get(client).await,
                    3 => middleware_get(retry, url, None).await,
                    // What an attempt timer alone costs: baton arms one per attempt.
                    _ => tokio::time::timeout(Duration::from_secs(30), plain_get(http, url, None))
                        .await
                        .unwrap_or(false),
                }
            }
        };
        // Warm up (connections, allocator), then measure.
        interleave::tasks(rounds / 10 + 1, tasks, 5, reqwest_call).await;
        let m = interleave::tasks(rounds, tasks, 5, reqwest_call).await;
        // hyper-util's group apart: interleaving the two stacks made each slow the other
        // down (their idle pooled connections and tasks).
        let hyper_call = |who: usize| {
            let (hyper, layered, uri) = (&hyper, &layered, &hyper_uri);
            async move {
                match who {
                    0 => hyper_get(hyper, uri, true).await,
                    1 => hyper_get(hyper, uri, false).await,
                    _ => tower_layer_get(layered).await,
                }
            }
        };
        interleave::tasks(rounds / 10 + 1, tasks, 3, hyper_call).await;
        let h = interleave::tasks(rounds, tasks, 3, hyper_call).await;
        tokio_rows(rows, charts, &setup, &m);
        interleave::push_rows(
            rows,
            charts,
            [
                "plain hyper-util Client, same request bytes",
                "plain hyper-util Client, plain request",
                "baton-tower over that hyper-util Client",
            ],
            &setup,
            &h,
        );
    }
}

/// The reqwest group's rows: baton-tokio against the same `reqwest::Client` sending its
/// request bytes, and against reqwest-retry over that client, measured in the same run.
fn tokio_rows(rows: &mut Vec<Row>, charts: &mut Charts, setup: &str, m: &interleave::Interleaved) {
    let names = [
        "plain reqwest, same request bytes",
        "plain reqwest",
        "baton-tokio",
        "reqwest-retry over that reqwest Client (2 retries)",
        "plain reqwest + 30 s tokio timeout (reference)",
    ];
    // Each row against the raw client sending its own request bytes: baton's with the
    // request id, reqwest-retry's and the timeout's plain.
    let base = |who: usize| if who == 2 { 0 } else { 1 };
    let retry_q = m.ratio(3, 1);
    for who in [0, 1, 2, 3, 4] {
        let q = m.ratio(who, base(who));
        let p99 = m.p99_ratio(who, base(who));
        let (ratio, goal) = match who {
            0 => ("1 (baseline)".to_string(), String::new()),
            1 => (
                format!(
                    "calls/s {:.3}; p99 {:.2}x",
                    m.ratio(1, 0),
                    m.p99_ratio(1, 0)
                ),
                String::new(),
            ),
            2 => {
                charts
                    .healthy
                    .push((interleave::chart_label(names[2], "reqwest", setup), q));
                (
                    format!(
                        "calls/s {q:.3}; p99 {p99:.2}x; vs a plain request {:.3}",
                        m.ratio(2, 1)
                    ),
                    format!(
                        "calls/s ratio >= 0.98: {}; >= reqwest-retry's {retry_q:.3}: {}",
                        verdict(q >= 0.98),
                        verdict(q >= retry_q)
                    ),
                )
            }
            _ => (format!("calls/s {q:.3}; p99 {p99:.2}x"), String::new()),
        };
        rows.push(m.row(who, names[who], setup, ratio, goal));
    }
}

// ---------------------------------------------------------------------------------------
// Scenario 2: black-holed primary, healthy backup.

#[derive(Clone, Copy, PartialEq)]
enum Bh {
    /// Plain reqwest straight to the backup: the healthy reference.
    Healthy,
    /// baton with a healthy primary: baton's own healthy reference.
    BatonHealthy,
    Baton1,
    Baton8,
    Loop,
    Retry,
}

#[derive(Default)]
struct BhStats {
    paid: Vec<f64>,
    ok: Vec<f64>,
    p50: Vec<Duration>,
    p99: Vec<Duration>,
    p99_after: Vec<Duration>,
    /// Every latency of every repetition (healthy references) or every latency after the
    /// trip (baton, 1 task): pooled, their p99 rests on ~10x more samples than one run's.
    pooled: Vec<Duration>,
}

async fn blackhole(scale: Scale, rows: &mut Vec<Row>, charts: &mut Charts) {
    let primary = provider(Behaviour::black_hole());
    let backup = provider(Behaviour::ok());
    let urls = vec![format!("{}/", primary.url()), format!("{}/", backup.url())];
    let http = reqwest_client();
    let calls = scale.blackhole_calls;
    let retry = bare::reqwest_retry(
        &http,
        2,
        (Duration::from_millis(200), Duration::from_secs(5)),
    );
    let contenders = [
        Bh::Healthy,
        Bh::BatonHealthy,
        Bh::Baton1,
        Bh::Baton8,
        Bh::Loop,
        Bh::Retry,
    ];
    // For baton's healthy reference: the same backup behind a healthy primary.
    let healthy_primary = provider(Behaviour::ok());
    let healthy_urls = vec![format!("{}/", healthy_primary.url()), urls[1].clone()];
    let mut stats: Vec<BhStats> = contenders.iter().map(|_| BhStats::default()).collect();
    // Per contender, each repetition's latencies in call order (for the chart).
    let mut runs: Vec<Vec<Vec<Duration>>> = contenders.iter().map(|_| Vec::new()).collect();
    // Warm the connection pool (backup and healthy primary).
    drive(20, 1, || plain_get(&http, &urls[1], None)).await;
    drive(20, 1, || plain_get(&http, &healthy_urls[0], None)).await;
    for rep in 0..scale.reps {
        for who in rotated(&contenders, rep) {
            let b = match who {
                Bh::Healthy => drive(calls, 1, || plain_get(&http, &urls[1], None)).await,
                Bh::BatonHealthy => {
                    let client = baton(
                        endpoints(&healthy_urls).attempt_timeout(ATTEMPT_TIMEOUT),
                        &http,
                    );
                    drive(calls, 1, || baton_get(&client)).await
                }
                Bh::Baton1 | Bh::Baton8 => {
                    // A fresh client: the primary's breaker starts closed.
                    let client = baton(endpoints(&urls).attempt_timeout(ATTEMPT_TIMEOUT), &http);
                    let tasks = if who == Bh::Baton1 { 1 } else { 8 };
                    drive(calls, tasks, || baton_get(&client)).await
                }
                Bh::Loop => {
                    drive(calls, BLACKHOLE_TASKS, || {
                        try_in_turn(&http, &urls, ATTEMPT_TIMEOUT)
                    })
                    .await
                }
                Bh::Retry => {
                    drive(calls, BLACKHOLE_TASKS, || {
                        middleware_get(&retry, &urls[0], Some(ATTEMPT_TIMEOUT))
                    })
                    .await
                }
            };
            let i = contenders.iter().position(|c| *c == who).unwrap_or(0);
            let lat = b.latencies();
            runs[i].push(lat.clone());
            let paid = lat.iter().filter(|d| **d >= ATTEMPT_TIMEOUT).count();
            let s = &mut stats[i];
            s.paid.push(paid as f64);
            s.ok.push(b.ok() as f64);
            s.p50.push(quantile(&lat, 0.5));
            s.p99.push(quantile(&lat, 0.99));
            // Calls after the last one that paid the timeout (meaningful for one task).
            let last_paid = lat.iter().rposition(|d| *d >= ATTEMPT_TIMEOUT);
            let after = match last_paid {
                Some(k) => &lat[k + 1..],
                None => &lat[..],
            };
            if !after.is_empty() {
                s.p99_after.push(quantile(after, 0.99));
            }
            s.pooled.extend_from_slice(after);
        }
    }
    for (who, name) in [
        (Bh::Baton1, "baton-tokio (1 task)"),
        (Bh::Loop, "hand-written A then B"),
        (Bh::Retry, "reqwest-retry at A"),
    ] {
        let i = contenders.iter().position(|c| *c == who).unwrap_or(0);
        charts.blackhole.push(per_call_median(name, &runs[i]));
    }
    let healthy_p99 = median_d(&stats[0].p99);
    let baton_healthy_p99 = median_d(&stats[1].p99);
    for (i, who) in contenders.iter().enumerate() {
        let s = &stats[i];
        let (name, setup) = match who {
            Bh::Healthy => (
                "plain reqwest to the backup (reference)",
                "healthy backup only, 1 task".to_string(),
            ),
            Bh::BatonHealthy => (
                "baton-tokio, healthy primary (reference)",
                "1 task; a healthy primary instead of the black hole".to_string(),
            ),
            Bh::Baton1 => (
                "baton-tokio",
                "1 task; consecutive breaker (3 failures, 30 s open), budget on".to_string(),
            ),
            Bh::Baton8 => (
                "baton-tokio, 8 tasks",
                "8 concurrent tasks; same policy".to_string(),
            ),
            Bh::Loop => (
                "hand-written try A then B",
                format!("{BLACKHOLE_TASKS} tasks; 200 ms timeout per attempt"),
            ),
            Bh::Retry => (
                "reqwest-retry (at the primary)",
                format!(
                    "{BLACKHOLE_TASKS} tasks; 2 retries, backoff 200 ms..5 s, 200 ms timeout \
                     per attempt"
                ),
            ),
        };
        let paid = median(&s.paid);
        let mut result = format!(
            "{paid:.0}/{calls} paid the timeout, {:.0} answered, p50 {}, p99 {}",
            median(&s.ok),
            fmt_d(median_d(&s.p50)),
            fmt_d(median_d(&s.p99)),
        );
        let mut ratio = format!(
            "p99 {:.2}x healthy",
            median_d(&s.p99).as_secs_f64() / healthy_p99.as_secs_f64()
        );
        let mut goal = String::new();
        if *who == Bh::Baton1 {
            let after = median_d(&s.p99_after);
            let pooled = quantile(&s.pooled, 0.99);
            let pooled_healthy = quantile(&stats[1].pooled, 0.99);
            let q = pooled.as_secs_f64() / pooled_healthy.as_secs_f64();
            result.push_str(&format!(
                ", p99 after the trip {} (pooled over all repetitions: p50 {} vs {}, p99 {} \
                 vs {} for baton healthy)",
                fmt_d(after),
                fmt_d(quantile(&s.pooled, 0.5)),
                fmt_d(quantile(&stats[1].pooled, 0.5)),
                fmt_d(pooled),
                fmt_d(pooled_healthy)
            ));
            ratio = format!(
                "p99 after trip (pooled) {q:.2}x baton healthy; median p99 {:.2}x baton \
                 healthy, {:.2}x plain reqwest",
                after.as_secs_f64() / baton_healthy_p99.as_secs_f64(),
                after.as_secs_f64() / healthy_p99.as_secs_f64()
            );
            goal = format!(
                "<= 3 paid: {}; p99 after trip <= 1.1x baton healthy: {}",
                verdict(paid <= 3.0),
                verdict(q <= 1.1)
            );
        }
        if *who == Bh::Healthy {
            ratio = "1 (baseline)".into();
        }
        rows.push(Row {
            scenario: "2 black-holed primary",
            contender: name.into(),
            setup,
            result,
            ratio,
            goal,
        });
    }
}

// ---------------------------------------------------------------------------------------
// Scenario 3: total outage.

#[derive(Clone, Copy, PartialEq)]
enum Out {
    BatonBudget,
    BatonNoBudget,
    Retry,
    Tower,
}

async fn outage(scale: Scale, rows: &mut Vec<Row>, charts: &mut Charts) {
    let providers: Vec<Provider> = (0..3).map(|_| provider(Behaviour::status(503))).collect();
    let urls: Vec<String> = providers.iter().map(|p| format!("{}/", p.url())).collect();
    let http = reqwest_client();
    let calls = scale.outage_calls;
    let contenders = [Out::BatonBudget, Out::BatonNoBudget, Out::Retry, Out::Tower];
    let mut per_call: Vec<Vec<f64>> = contenders.iter().map(|_| Vec::new()).collect();
    let mut secs: Vec<Vec<f64>> = contenders.iter().map(|_| Vec::new()).collect();
    let total = || providers.iter().map(Provider::request_count).sum::<usize>();
    for rep in 0..scale.reps {
        for who in rotated(&contenders, rep) {
            let before = total();
            let b = match who {
                Out::BatonBudget | Out::BatonNoBudget => {
                    let mut policy = endpoints(&urls);
                    if who == Out::BatonNoBudget {
                        policy = policy.budget(None);
                    }
                    let client = baton(policy, &http);
                    let log = std::cell::RefCell::new(Vec::with_capacity(calls));
                    let t0 = Instant::now();
                    let b = drive(calls, OUTAGE_TASKS, || baton_attempts(&client, &log, t0)).await;
                    if rep + 1 == scale.reps {
                        let name = if who == Out::BatonBudget {
                            "budget on"
                        } else {
                            "budget off"
                        };
                        charts.outage.push(binned(name, log.into_inner(), 25));
                    }
                    b
                }
                Out::Retry => {
                    // Short backoff bounds only keep the run short: the number of attempts
                    // does not depend on them.
                    let retry = bare::reqwest_retry(
                        &http,
                        2,
                        (Duration::from_millis(1), Duration::from_millis(5)),
                    );
                    drive(calls, OUTAGE_TASKS, || {
                        middleware_get(&retry, &urls[0], None)
                    })
                    .await
                }
                Out::Tower => {
                    let budget = Arc::new(TpsBudget::new(Duration::from_secs(10), 10, 0.2));
                    let svc = tower::ServiceBuilder::new()
                        .layer(tower::retry::RetryLayer::new(TowerRetry {
                            budget: budget.clone(),
                            retries_left: 2,
                        }))
                        .service(http.clone());
                    drive(calls, OUTAGE_TASKS, || tower_get(&svc, &budget, &urls[0])).await
                }
            };
            let i = contenders.iter().position(|c| *c == who).unwrap_or(0);
            per_call[i].push((total() - before) as f64 / calls as f64);
            secs[i].push(b.elapsed.as_secs_f64());
        }
    }
    // The budget's floor: its reserve (10 tokens/s x 10 s window) spread over the calls of
    // one run, which lasts well under one window.
    let floor = 10.0 * 10.0 / calls as f64;
    for (i, who) in contenders.iter().enumerate() {
        let a = median(&per_call[i]);
        let (name, setup) = match who {
            Out::BatonBudget => (
                "baton-tokio, budget on",
                "3 endpoints; budget 0.2/call, 10 s window, 10/s reserve; consecutive breaker",
            ),
            Out::BatonNoBudget => (
                "baton-tokio, budget off",
                "3 endpoints; no budget; consecutive breaker",
            ),
            Out::Retry => (
                "reqwest-retry, 2 retries",
                "at the primary; backoff 1..5 ms (shortened; no effect on attempts)",
            ),
            Out::Tower => (
                "tower retry, 2 retries + TpsBudget",
                "at the primary; TpsBudget(10 s, 10/s, 20 %), deposit per call, no delay",
            ),
        };
        let goal = if *who == Out::BatonBudget {
            format!(
                "<= 1.2 + floor {floor:.2} = {:.2}: {}",
                1.2 + floor,
                verdict(a <= 1.2 + floor + 1e-9)
            )
        } else {
            String::new()
        };
        rows.push(Row {
            scenario: "3 total outage (503)",
            contender: name.into(),
            setup: format!("{setup}; {OUTAGE_TASKS} tasks, {calls} calls"),
            result: format!(
                "{a:.3} attempts per call (run took {:.2} s)",
                median(&secs[i])
            ),
            ratio: format!("{:.2}x baton with budget", a / median(&per_call[0])),
            goal,
        });
    }
}

// ---------------------------------------------------------------------------------------
// Scenario 4: primary slow for 10 % of calls.

#[derive(Clone, Copy, PartialEq)]
enum Slow {
    /// Plain reqwest to the backup: its p99 is the goal's reference.
    Backup,
    HedgeOff,
    HedgeOn,
}

async fn slow(scale: Scale, rows: &mut Vec<Row>) {
    let primary = provider(Behaviour::ok());
    let backup = provider(Behaviour::ok());
    let urls = vec![format!("{}/", primary.url()), format!("{}/", backup.url())];
    let http = reqwest_client();
    let calls = scale.slow_calls;
    // Every tenth request at the primary takes 1 s.
    let script = |n: usize| {
        (0..n).map(|i| {
            if i % 10 == 5 {
                Behaviour::ok().delay(SLOW)
            } else {
                Behaviour::ok()
            }
        })
    };
    let contenders = [Slow::Backup, Slow::HedgeOff, Slow::HedgeOn];
    let mut p50: Vec<Vec<Duration>> = contenders.iter().map(|_| Vec::new()).collect();
    let mut p99: Vec<Vec<Duration>> = contenders.iter().map(|_| Vec::new()).collect();
    let mut extra: Vec<Vec<f64>> = contenders.iter().map(|_| Vec::new()).collect();
    drive(20, 1, || plain_get(&http, &urls[1], None)).await;
    for rep in 0..scale.reps {
        for who in rotated(&contenders, rep) {
            primary.set_script(script(calls * 2), Behaviour::ok());
            let before = primary.request_count() + backup.request_count();
            let b = match who {
                Slow::Backup => drive(calls, SLOW_TASKS, || plain_get(&http, &urls[1], None)).await,
                Slow::HedgeOff | Slow::HedgeOn => {
                    let mut policy = endpoints(&urls);
                    if who == Slow::HedgeOn {
                        policy = policy.hedge(Some(Hedge::after(HEDGE_AFTER)));
                    }
                    let client = baton(policy, &http);
                    drive(calls, SLOW_TASKS, || baton_get(&client)).await
                }
            };
            let i = contenders.iter().position(|c| *c == who).unwrap_or(0);
            let attempts = primary.request_count() + backup.request_count() - before;
            let lat = b.latencies();
            p50[i].push(quantile(&lat, 0.5));
            p99[i].push(quantile(&lat, 0.99));
            extra[i].push(attempts as f64 / calls as f64 - 1.0);
        }
    }
    let backup_p99 = median_d(&p99[0]);
    for (i, who) in contenders.iter().enumerate() {
        let (name, setup) = match who {
            Slow::Backup => (
                "plain reqwest to the backup (reference)",
                "healthy backup only".to_string(),
            ),
            Slow::HedgeOff => (
                "baton-tokio, hedging off",
                "primary slow (1 s) on 1 request in 10; budget on".to_string(),
            ),
            Slow::HedgeOn => (
                "baton-tokio, hedging on",
                format!(
                    "same; hedge_after {} ms, max_in_flight 2; budget on",
                    HEDGE_AFTER.as_millis()
                ),
            ),
        };
        let q99 = median_d(&p99[i]);
        let x = median(&extra[i]);
        let goal = if *who == Slow::HedgeOn {
            let bound = HEDGE_AFTER + backup_p99;
            format!(
                "p99 <= {}: {}; extra <= 10 %: {}",
                fmt_d(bound),
                verdict(q99 <= bound),
                verdict(x <= 0.10 + 1e-9)
            )
        } else {
            String::new()
        };
        let ratio = match who {
            Slow::Backup => "1 (baseline)".to_string(),
            _ => format!(
                "p99 {:.2}x hedging off",
                q99.as_secs_f64() / median_d(&p99[1]).as_secs_f64()
            ),
        };
        rows.push(Row {
            scenario: "4 slow primary (10 %)",
            contender: name.into(),
            setup: format!("{setup}; {SLOW_TASKS} tasks, {calls} calls"),
            result: format!(
                "p50 {}, p99 {}, extra attempts {:.1} %",
                fmt_d(median_d(&p50[i])),
                fmt_d(q99),
                x * 100.0
            ),
            ratio,
            goal,
        });
    }
}

// ---------------------------------------------------------------------------------------
// Scenario 5: the engine alone, shared by 1 or 2 threads.

/// One healthy call through the engine (as in core's `healthy_path` benchmark), with the
/// time read from the clock as an adapter does.
fn one_call(engine: &Engine, info: &RequestInfo<'_>) -> bool {
    let t = Instant::now();
    let mut call = Call::new(engine, info, BodyKind::Empty, CallOptions::default(), t);
    let Action::Send(a) = call.poll() else {
        return false;
    };
    let response = Head::new(http::StatusCode::OK);
    call.handle(
        Input::Response {
            attempt: a.number,
            response,
            wall: None,
        },
        t,
    );
    let done = call.poll() == Action::Done;
    std::hint::black_box(call.take_done());
    done
}

/// Calls per second of `threads` threads for `time`; thread `i` uses `engines[i % len]`
/// (one engine: shared health; one per thread: the no-sharing control).
fn engine_rate(engines: &[Arc<Engine>], threads: usize, time: Duration) -> f64 {
    let stop = AtomicBool::new(false);
    let start = Barrier::new(threads + 1);
    let total: u64 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let engine = &engines[i % engines.len()];
                let (stop, start) = (&stop, &start);
                s.spawn(move || {
                    let uri: http::Uri = "/".parse().expect("uri");
                    let headers = http::HeaderMap::new();
                    let info = RequestInfo {
                        method: &http::Method::GET,
                        uri: &uri,
                        headers: &headers,
                    };
                    start.wait();
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..64 {
                            n += u64::from(one_call(engine, &info));
                        }
                    }
                    n
                })
            })
            .collect();
        start.wait();
        std::thread::sleep(time);
        stop.store(true, Ordering::Relaxed);
        handles
            .into_iter()
            .map(|h| h.join().expect("engine thread"))
            .sum()
    });
    total as f64 / time.as_secs_f64()
}

fn engine_only(scale: Scale, rows: &mut Vec<Row>) {
    let configs: [(&str, BreakerRule, bool, bool); 4] = [
        (
            "consecutive rule, budget off",
            BreakerRule::default(),
            false,
            true,
        ),
        (
            "consecutive rule, budget on",
            BreakerRule::default(),
            true,
            true,
        ),
        (
            "failure-rate rule, budget off",
            BreakerRule::failure_rate(),
            false,
            true,
        ),
        (
            "one Engine per thread (control: nothing shared)",
            BreakerRule::default(),
            false,
            false,
        ),
    ];
    for (label, rule, budget, shared) in configs {
        let make = || {
            let mut b = Policy::builder()
                .endpoint(Endpoint::new("a", "https://a.example/"))
                .endpoint(Endpoint::new("b", "https://b.example/"))
                .endpoint(Endpoint::new("c", "https://c.example/"))
                .configure(|s| s.breaker.rule = rule);
            if !budget {
                b = b.budget(None);
            }
            // As the adapters build it: seeded from entropy once, each thread's calls
            // drawing from their own sequence.
            Arc::new(Engine::with_entropy(b.build().expect("policy"), 0x5EED))
        };
        let engines = if shared {
            vec![make()]
        } else {
            vec![make(), make()]
        };
        engine_rate(&engines, 2, scale.engine_time / 4);
        let mut rates = [Vec::new(), Vec::new()];
        for rep in 0..scale.reps {
            for threads in rotated(&[1, 2], rep) {
                rates[threads - 1].push(engine_rate(&engines, threads, scale.engine_time));
            }
        }
        let (one, two) = (median(&rates[0]), median(&rates[1]));
        let q = two / one;
        rows.push(Row {
            scenario: "5 shared engine",
            contender: format!("baton-core, {label}"),
            setup: format!(
                "3 endpoints, healthy GET calls, no network; 1 vs 2 threads on {}",
                if shared {
                    "one Engine"
                } else {
                    "an Engine each"
                }
            ),
            result: format!(
                "{:.2} M calls/s (1 thread), {:.2} M calls/s (2 threads)",
                one / 1e6,
                two / 1e6
            ),
            ratio: format!("2 threads {q:.2}x 1 thread"),
            goal: if shared {
                format!(">= 1.8x: {}", verdict(q >= 1.8))
            } else {
                "(what the machine allows)".into()
            },
        });
    }
}

// ---------------------------------------------------------------------------------------

fn print_table(rows: &[Row]) {
    println!("| scenario | contender | setup | medians | ratio | goal |");
    println!("|---|---|---|---|---|---|");
    for r in rows {
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            r.scenario, r.contender, r.setup, r.result, r.ratio, r.goal
        );
    }
}

fn main() {
    let mut quick = false;
    let mut only: Option<Vec<u32>> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => quick = true,
            "--only" => {
                let list = args.next().unwrap_or_default();
                only = Some(
                    list.split(',')
                        .filter_map(|n| n.trim().parse().ok())
                        .collect(),
                );
            }
            _ => {
                eprintln!("usage: bench [--quick] [--only 1,2,...]  (unknown argument {a:?})");
                std::process::exit(2);
            }
        }
    }
    let run = |n: u32| only.as_ref().is_none_or(|o| o.contains(&n));
    let scale = if quick { QUICK } else { FULL };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let mut rows = Vec::new();
    let mut charts = Charts::default();
    let t0 = Instant::now();
    if run(1) {
        eprintln!("scenario 1: healthy");
        rt.block_on(healthy(scale, &mut rows, &mut charts));
        eprintln!("scenario 1: healthy, blocking");
        runtimes::blocking(scale, &mut rows, &mut charts);
        eprintln!("scenario 1: healthy, async-std and smol");
        runtimes::async_std_and_smol(scale, &mut rows, &mut charts);
    }
    if run(2) {
        eprintln!("scenario 2: black-holed primary");
        rt.block_on(blackhole(scale, &mut rows, &mut charts));
    }
    if run(3) {
        eprintln!("scenario 3: total outage");
        rt.block_on(outage(scale, &mut rows, &mut charts));
    }
    if run(4) {
        eprintln!("scenario 4: slow primary");
        rt.block_on(slow(scale, &mut rows));
    }
    if run(5) {
        eprintln!("scenario 5: shared engine");
        engine_only(scale, &mut rows);
    }
    if run(6) {
        eprintln!("scenario 6: healthy over HTTP/2");
        rt.block_on(h2::tokio(scale, &mut rows));
        h2::async_std_and_smol(scale, &mut rows);
    }
    println!(
        "{} run: {} repetitions per scenario, contenders interleaved (order rotates each \
         repetition; scenario 1 in turns of {} calls by every caller at once, its ratios paired over \
         blocks of {} rounds); \
         medians over repetitions; took {:.0} s.\n",
        if quick { "Quick" } else { "Full" },
        scale.reps,
        interleave::TURN,
        interleave::BLOCK,
        t0.elapsed().as_secs_f64()
    );
    print_table(&rows);
    write_charts(&charts, quick);
}

/// Draws the charts of the scenarios that ran: into `docs/charts/` for a full run (the
/// ones BENCHMARKS.md shows), into `target/bench-charts/` for a quick one.
fn write_charts(charts: &Charts, quick: bool) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = if quick {
        root.join("target/bench-charts")
    } else {
        root.join("docs/charts")
    };
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("charts: cannot create {}: {e}", dir.display());
        return;
    }
    let mut drawn = Vec::new();
    if !charts.blackhole.is_empty() {
        let path = dir.join("blackhole_latency.svg");
        let r = chart::lines(
            &path,
            "Black-holed primary (200 ms attempt timeout): latency per call",
            "call number",
            "latency, ms (median over repetitions)",
            &charts.blackhole,
        );
        drawn.push((path, r));
    }
    if !charts.outage.is_empty() {
        let path = dir.join("outage_attempts.svg");
        let r = chart::lines(
            &path,
            "Total outage (3 endpoints answer 503): attempts per call over time",
            "milliseconds into the run",
            "attempts per call (mean of 25 calls)",
            &charts.outage,
        );
        drawn.push((path, r));
    }
    if !charts.healthy.is_empty() {
        let path = dir.join("healthy_ratios.svg");
        let r = chart::bars(
            &path,
            "Healthy calls: calls/s of baton over its own raw client",
            "ratio (1 = as fast as the raw client)",
            &charts.healthy,
            0.98,
        );
        drawn.push((path, r));
    }
    for (path, r) in drawn {
        match r {
            Ok(()) => eprintln!("chart: {}", path.display()),
            Err(e) => eprintln!("chart {}: {e}", path.display()),
        }
    }
}
