//! Calls per second through `baton_blocking::Client` versus the same `ureq::Agent` used
//! directly, against one healthy keep-alive testkit provider on loopback, on one thread.
//!
//! Rounds are interleaved (baton, agent, plain agent, baton, ...) so that drift of the
//! machine affects all three alike; the medians of the per-round rates are compared.
//! Policy: one endpoint, default settings (consecutive breaker rule, budget on, no
//! events). `agent` is the client's own agent (with the phase-observing connector and
//! resolver), `plain` a stock ureq agent with the same configuration.
//!
//! `cargo bench -p baton-blocking --bench blocking_throughput` (env `BATON_BENCH_ROUNDS`,
//! `BATON_BENCH_CALLS` to change the size; defaults 40 rounds of 500 calls each).

use std::time::{Duration, Instant};

use baton_blocking::{Client, Endpoint, Policy};
use testkit::{Behaviour, Provider};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn rate(calls: usize, f: impl FnMut()) -> f64 {
    let mut f = f;
    let t0 = Instant::now();
    for _ in 0..calls {
        f();
    }
    calls as f64 / t0.elapsed().as_secs_f64()
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this with a tiny size.
    let quick =
        std::env::args().any(|a| a == "--test") || !std::env::args().any(|a| a == "--bench");
    let rounds = if quick {
        1
    } else {
        env("BATON_BENCH_ROUNDS", 40)
    };
    let calls = if quick {
        20
    } else {
        env("BATON_BENCH_CALLS", 500)
    };

    let provider = Provider::start(Behaviour::ok());
    provider.set_recording(false);
    let url = format!("{}/", provider.url());
    let config = ureq::Agent::config_builder()
        .proxy(None)
        .http_status_as_error(false)
        .build();
    let client = Client::builder(Policy::builder().endpoint(Endpoint::new("local", url.clone())))
        .config(config.clone())
        .build()
        .expect("client");
    let agent = client.agent().clone();
    let plain: ureq::Agent = config.into();

    let via_baton = || {
        let mut r = client.get("/").call().expect("baton call");
        let body = r.body_mut().read_to_string().expect("body");
        assert_eq!(body, "ok");
    };
    let via_agent = |agent: &ureq::Agent| {
        let mut r = agent.get(&url).call().expect("agent call");
        let body = r.body_mut().read_to_string().expect("body");
        assert_eq!(body, "ok");
    };

    // The plain agent with the per-request configuration baton sets on every attempt.
    let via_configured = |agent: &ureq::Agent| {
        let req = ureq::http::Request::get(&url).body(()).expect("request");
        let req = agent
            .configure_request(req)
            .http_status_as_error(false)
            .timeout_global(None)
            .timeout_per_call(None)
            .timeout_resolve(Some(Duration::from_secs(5)))
            .timeout_connect(Some(Duration::from_secs(5)))
            .timeout_send_request(Some(Duration::from_secs(30)))
            .timeout_send_body(Some(Duration::from_secs(30)))
            .timeout_recv_response(Some(Duration::from_secs(30)))
            .build();
        let mut r = agent.run(req).expect("configured call");
        let body = r.body_mut().read_to_string().expect("body");
        assert_eq!(body, "ok");
    };

    if std::env::var("BATON_BENCH_ONLY").is_ok_and(|v| v == "baton") {
        // For profiling the adapter alone.
        println!("baton only: {:.0} calls/s", rate(rounds * calls, via_baton));
        return;
    }
    if std::env::var("BATON_BENCH_ONLY").is_ok_and(|v| v == "agent") {
        println!(
            "agent only: {:.0} calls/s",
            rate(rounds * calls, || via_agent(&agent))
        );
        return;
    }

    // Warm up: connections in the pools, caches, CPU frequency.
    rate(calls / 4 + 1, via_baton);
    rate(calls / 4 + 1, || via_agent(&agent));
    rate(calls / 4 + 1, || via_agent(&plain));

    rate(calls / 4 + 1, || via_configured(&agent));
    let (mut b, mut a, mut p, mut c) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        b.push(rate(calls, via_baton));
        a.push(rate(calls, || via_agent(&agent)));
        p.push(rate(calls, || via_agent(&plain)));
        c.push(rate(calls, || via_configured(&agent)));
        std::thread::sleep(Duration::from_millis(20));
    }
    let (mb, ma, mp, mc) = (median(b), median(a), median(p), median(c));
    println!("baton-blocking throughput: {rounds} interleaved rounds x {calls} GET calls, 1 thread, keep-alive, 127.0.0.1");
    println!("  baton Client        median {mb:>9.0} calls/s");
    println!("  same ureq::Agent    median {ma:>9.0} calls/s");
    println!("  plain ureq::Agent   median {mp:>9.0} calls/s");
    println!("  same agent + per-request config median {mc:>9.0} calls/s");
    println!("  ratio baton / same agent  = {:.3}", mb / ma);
    println!("  ratio baton / plain agent = {:.3}", mb / mp);
}
