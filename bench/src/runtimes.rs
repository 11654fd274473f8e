//! Scenario 1 on the other adapters: baton-blocking against a stock `ureq::Agent` with the
//! same timeouts (the client a user would use without baton, not the adapter's own
//! phase-observing agent), and baton-async-std against a bare hyper 1.x connection over
//! async-io polled in the calling task (the adapter's own way of driving connections), on
//! async-std and on smol. 1 and 8 concurrent callers (threads for blocking).
//!
//! Each raw client sends the same request bytes as baton (the same headers, a request id
//! included), so the ratio is baton's cost alone; a plain request (no request id) is
//! measured beside it as a reference.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use testkit::Behaviour;

use crate::bare::Bare;

use crate::{
    fmt_d, median, median_d, paired, provider, quantile, rotated, verdict, Batch, Charts, Row,
    Sample, Scale,
};

use crate::bare::REQUEST_ID;

/// One contender's batches over the repetitions.
#[derive(Default)]
struct Stats {
    rate: Vec<f64>,
    p50: Vec<Duration>,
    p99: Vec<Duration>,
}

impl Stats {
    fn add(&mut self, b: &Batch) {
        assert_eq!(b.ok(), b.samples.len(), "scenario 1: every call answered");
        let lat = b.latencies();
        self.rate.push(b.rate());
        self.p50.push(quantile(&lat, 0.5));
        self.p99.push(quantile(&lat, 0.99));
    }
}

/// The rows of one runtime and caller count: `names[0]` is the baseline (same bytes),
/// `names[1]` the plain-request reference, `names[2]` baton.
fn push_rows(
    rows: &mut Vec<Row>,
    charts: &mut Charts,
    names: [&str; 3],
    setup: &str,
    stats: &[Stats; 3],
) {
    let r: Vec<f64> = stats.iter().map(|s| median(&s.rate)).collect();
    let p50: Vec<Duration> = stats.iter().map(|s| median_d(&s.p50)).collect();
    let p99: Vec<Duration> = stats.iter().map(|s| median_d(&s.p99)).collect();
    for who in 0..3 {
        let q = paired(&stats[who].rate, &stats[0].rate);
        let (ratio, goal) = match who {
            0 => ("1 (baseline)".to_string(), String::new()),
            1 => (
                format!(
                    "calls/s {q:.3}; p99 {:.2}x",
                    p99[1].as_secs_f64() / p99[0].as_secs_f64()
                ),
                String::new(),
            ),
            _ => (
                format!(
                    "calls/s {q:.3}; p99 {:.2}x; vs a plain request {:.3}",
                    p99[2].as_secs_f64() / p99[0].as_secs_f64(),
                    paired(&stats[2].rate, &stats[1].rate)
                ),
                format!("calls/s ratio >= 0.98: {}", verdict(q >= 0.98)),
            ),
        };
        if who == 2 {
            charts
                .healthy
                .push((format!("{} vs {}, {setup}", names[2], names[0]), q));
        }
        rows.push(Row {
            scenario: "1 healthy",
            contender: names[who].into(),
            setup: setup.into(),
            result: format!(
                "{:.0} calls/s, p50 {}, p99 {}",
                r[who],
                fmt_d(p50[who]),
                fmt_d(p99[who])
            ),
            ratio,
            goal,
        });
    }
}

// ---------------------------------------------------------------------------- blocking

/// Runs `calls` calls of `f` on `threads` threads at once.
fn threads(calls: usize, threads: usize, f: &(dyn Fn() -> bool + Sync)) -> Batch {
    let per = calls / threads;
    let t0 = Instant::now();
    let samples = std::thread::scope(|s| {
        let loops: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(move || {
                    (0..per)
                        .map(|_| {
                            let t = Instant::now();
                            let ok = f();
                            Sample {
                                latency: t.elapsed(),
                                ok,
                            }
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        loops
            .into_iter()
            .flat_map(|h| h.join().expect("call thread"))
            .collect()
    });
    Batch {
        samples,
        elapsed: t0.elapsed(),
    }
}

fn read_all(body: ureq::Body) -> bool {
    let mut body = body;
    body.read_to_vec().is_ok()
}

/// baton-blocking against a stock ureq Agent with the policy's timeouts.
pub(crate) fn blocking(scale: Scale, rows: &mut Vec<Row>, charts: &mut Charts) {
    let p = provider(Behaviour::ok());
    let url = format!("{}/", p.url());
    let d = baton_core::Settings::default();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_connect(Some(d.connect_timeout))
        .timeout_recv_response(Some(d.attempt_timeout))
        .http_status_as_error(false)
        .build()
        .into();
    let client = baton_blocking::Client::new(crate::endpoints(std::slice::from_ref(&url)))
        .expect("baton-blocking client");
    let same = || match agent.get(&url).header("x-request-id", REQUEST_ID).call() {
        Ok(r) => r.status().is_success() && read_all(r.into_body()),
        Err(_) => false,
    };
    let plain = || match agent.get(&url).call() {
        Ok(r) => r.status().is_success() && read_all(r.into_body()),
        Err(_) => false,
    };
    let baton = || match client.get("/").call() {
        Ok(r) => r.status().is_success() && read_all(r.into_body()),
        Err(_) => false,
    };
    let contenders: [&(dyn Fn() -> bool + Sync); 3] = [&same, &plain, &baton];
    for (n, calls) in [(1, scale.healthy_calls), (8, scale.healthy_calls_8)] {
        for f in contenders {
            threads(calls / 4, n, f);
        }
        let mut stats: [Stats; 3] = Default::default();
        for rep in 0..scale.reps {
            for who in rotated(&[0, 1, 2], rep) {
                stats[who].add(&threads(calls, n, contenders[who]));
            }
        }
        let names = [
            "stock ureq Agent, same request bytes",
            "stock ureq Agent, plain request",
            "baton-blocking",
        ];
        push_rows(
            rows,
            charts,
            names,
            &format!("{n} thread(s), {calls} GETs per batch"),
            &stats,
        );
    }
}

// ---------------------------------------------------------------------- async-std, smol

/// `loops` concurrent call loops, the i-th one `f(i)`, joined in the calling task.
async fn joined<F, Fut>(loops: usize, f: F) -> Batch
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Vec<Sample>>,
{
    let t0 = Instant::now();
    let all = futures_util::future::join_all((0..loops).map(f)).await;
    Batch {
        samples: all.into_iter().flatten().collect(),
        elapsed: t0.elapsed(),
    }
}

async fn bare_loop(bare: &mut Bare, per: usize, request_id: bool) -> Vec<Sample> {
    let mut out = Vec::with_capacity(per);
    for _ in 0..per {
        let t = Instant::now();
        let ok = bare.call(request_id).await;
        out.push(Sample {
            latency: t.elapsed(),
            ok,
        });
    }
    out
}

/// One loop per bare connection, joined.
async fn bare_batch(conns: &mut [Bare], per: usize, request_id: bool) -> Batch {
    let t0 = Instant::now();
    let loops = conns.iter_mut().map(|b| bare_loop(b, per, request_id));
    let all = futures_util::future::join_all(loops).await;
    Batch {
        samples: all.into_iter().flatten().collect(),
        elapsed: t0.elapsed(),
    }
}

async fn baton_loop(client: &baton_async_std::Client, per: usize) -> Vec<Sample> {
    let mut out = Vec::with_capacity(per);
    for _ in 0..per {
        let t = Instant::now();
        let ok = match client.get("/").send().await {
            Ok(r) => r.status().is_success() && r.bytes().await.is_ok(),
            Err(_) => false,
        };
        out.push(Sample {
            latency: t.elapsed(),
            ok,
        });
    }
    out
}

/// One runtime's rows: `block_on` is async-std's or smol's.
fn async_runtime(
    name: &str,
    block_on: fn(Pin<Box<dyn Future<Output = ()> + '_>>),
    scale: Scale,
    rows: &mut Vec<Row>,
    charts: &mut Charts,
) {
    let p = provider(Behaviour::ok());
    let url = format!("{}/", p.url());
    let addr = p.addr();
    let client = baton_async_std::Client::new(crate::endpoints(std::slice::from_ref(&url)))
        .expect("baton-async-std client");
    let mut out: Vec<(usize, usize, [Stats; 3])> = Vec::new();
    block_on(Box::pin(async {
        for (n, calls) in [(1, scale.healthy_calls), (8, scale.healthy_calls_8)] {
            let mut same = Vec::new();
            let mut plain = Vec::new();
            for _ in 0..n {
                same.push(Bare::connect(addr).await);
                plain.push(Bare::connect(addr).await);
            }
            let per = calls / n;
            let mut stats: [Stats; 3] = Default::default();
            for rep in 0..=scale.reps {
                for who in rotated(&[0, 1, 2], rep) {
                    let b = match who {
                        0 => bare_batch(&mut same, per, true).await,
                        1 => bare_batch(&mut plain, per, false).await,
                        _ => joined(n, |_| baton_loop(&client, per)).await,
                    };
                    // The first repetition warms up (connections, allocator).
                    if rep > 0 {
                        stats[who].add(&b);
                    }
                }
            }
            out.push((n, calls, stats));
        }
    }));
    for (n, calls, stats) in out {
        let names = [
            &*format!("bare hyper on {name}, same request bytes"),
            &*format!("bare hyper on {name}, plain request"),
            &*format!("baton-async-std on {name}"),
        ];
        push_rows(
            rows,
            charts,
            names,
            &format!("{n} task(s), {calls} GETs per batch"),
            &stats,
        );
    }
}

/// baton-async-std against bare hyper, on async-std and on smol.
pub(crate) fn async_std_and_smol(scale: Scale, rows: &mut Vec<Row>, charts: &mut Charts) {
    async_runtime(
        "async-std",
        |f| async_std::task::block_on(f),
        scale,
        rows,
        charts,
    );
    async_runtime("smol", |f| smol::block_on(f), scale, rows, charts);
}
