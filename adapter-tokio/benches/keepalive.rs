//! Requests per second through `baton_tokio::Client` versus the same `reqwest::Client` used
//! directly, against a local keep-alive testkit provider, interleaved in one run.
//!
//! Run: `cargo bench -p baton-tokio --bench keepalive` (optional arguments: rounds,
//! requests per batch). Each round runs one batch directly and one through baton (the
//! order alternates between rounds), for two shapes: one request at a time, and 8 tasks
//! in parallel. The medians of the per-batch rates and their ratio are printed.
//!
//! Engine configuration: two endpoints (the healthy provider first), default policy:
//! consecutive breaker rule, retry budget on, no hedging, no event callback, no tracing.

use std::time::{Duration, Instant};

use baton_core::{Endpoint, Policy};
use testkit::{Behaviour, Provider};

#[derive(Clone, Copy)]
enum Via {
    Direct,
    /// Direct, under a tokio timeout (as baton's attempt timeout), for reference.
    DirectTimeout,
    Baton,
}

async fn one(via: Via, http: &reqwest::Client, baton: &baton_tokio::Client, url: &str) {
    match via {
        Via::Direct => {
            let r = http.get(url).send().await.expect("direct request");
            assert!(r.status().is_success());
            r.bytes().await.expect("direct body");
        }
        Via::DirectTimeout => {
            let r = tokio::time::timeout(Duration::from_secs(30), http.get(url).send())
                .await
                .expect("no timeout")
                .expect("direct request");
            assert!(r.status().is_success());
            r.bytes().await.expect("direct body");
        }
        Via::Baton => {
            let r = baton.get("/").send().await.expect("baton request");
            assert!(r.status().is_success());
            r.bytes().await.expect("baton body");
        }
    }
}

/// Runs `n` requests with `tasks` concurrent tasks; returns requests per second.
async fn batch(
    via: Via,
    http: &reqwest::Client,
    baton: &baton_tokio::Client,
    url: &str,
    n: usize,
    tasks: usize,
) -> f64 {
    let t0 = Instant::now();
    if tasks == 1 {
        for _ in 0..n {
            one(via, http, baton, url).await;
        }
    } else {
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..tasks {
            let (http, baton, url) = (http.clone(), baton.clone(), url.to_string());
            let per = n / tasks;
            set.spawn(async move {
                for _ in 0..per {
                    one(via, &http, &baton, &url).await;
                }
            });
        }
        while let Some(r) = set.join_next().await {
            r.expect("task");
        }
    }
    n as f64 / t0.elapsed().as_secs_f64()
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let m = v.len() / 2;
    if v.len().is_multiple_of(2) {
        (v[m - 1] + v[m]) / 2.0
    } else {
        v[m]
    }
}

fn main() {
    let mut args = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .filter_map(|a| a.parse::<usize>().ok());
    let rounds = args.next().unwrap_or(15);
    let n = args.next().unwrap_or(2000);
    let shapes: Vec<usize> = match args.next() {
        Some(t) => vec![t],
        None => vec![1, 8],
    };
    // For profiling one path alone: BATON_BENCH_ONLY=direct|baton.
    let only = std::env::var("BATON_BENCH_ONLY").ok();

    let provider = Provider::start(Behaviour::ok());
    provider.set_recording(false);
    let url = format!("{}/", provider.url());
    let http = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(1))
        .build()
        .expect("reqwest client");
    let baton = baton_tokio::Client::builder(
        Policy::builder()
            .endpoint(Endpoint::new("primary", url.clone()))
            .endpoint(Endpoint::new("backup", testkit::refused_url())),
    )
    .reqwest_client(http.clone())
    .build()
    .expect("baton client");

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        for tasks in shapes {
            // Warm up both paths (connections, allocator).
            batch(Via::Direct, &http, &baton, &url, n / 4, tasks).await;
            batch(Via::Baton, &http, &baton, &url, n / 4, tasks).await;
            let (mut direct, mut via_baton, mut timed) = (Vec::new(), Vec::new(), Vec::new());
            for round in 0..rounds {
                let order = if round % 2 == 0 {
                    [Via::Direct, Via::Baton, Via::DirectTimeout]
                } else {
                    [Via::DirectTimeout, Via::Baton, Via::Direct]
                };
                for via in order {
                    let skip = match (&only, via) {
                        (Some(o), Via::Direct | Via::DirectTimeout) => o != "direct",
                        (Some(o), Via::Baton) => o != "baton",
                        _ => false,
                    };
                    if skip {
                        continue;
                    }
                    let rate = batch(via, &http, &baton, &url, n, tasks).await;
                    match via {
                        Via::Direct => direct.push(rate),
                        Via::DirectTimeout => timed.push(rate),
                        Via::Baton => via_baton.push(rate),
                    }
                }
            }
            if only.is_some() {
                println!("direct {direct:?}\nbaton {via_baton:?}");
                continue;
            }
            let (d, b, t) = (
                median(&mut direct),
                median(&mut via_baton),
                median(&mut timed),
            );
            println!(
                "tasks={tasks:<2} rounds={rounds} requests/batch={n}: reqwest direct median \
                 {d:>8.0} req/s, through baton median {b:>8.0} req/s, ratio {:.3} \
                 (reqwest under a tokio timeout: {t:>8.0} req/s, ratio {:.3})",
                b / d,
                b / t
            );
        }
    });
}
