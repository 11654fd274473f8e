//! Prints the simulator measurements for the retry budget and hedging (SPEC 2.7, 2.8):
//! amplification under a total outage (budget on vs off) and tail latency with one slow
//! endpoint (hedging on vs off). Virtual clock: the figures are exact and repeatable.
//!
//! Run: `cargo run --release -p baton-core --example simulate`

use std::time::{Duration, Instant};

use baton_core::sim::{Script, Sim};
use baton_core::{Budget, CallOptions, Endpoint, Hedge, Jitter, Policy, PolicyBuilder};
use http::Method;

fn policy(ids: &[&str]) -> PolicyBuilder {
    let mut b = Policy::builder().jitter(Jitter::None);
    for id in ids {
        b = b.endpoint(Endpoint::new(*id, format!("https://{id}.example/")));
    }
    b
}

fn outage(budget: Option<Budget>, calls: usize, gap: Duration) -> f64 {
    let mut sim = Sim::new(
        policy(&["a", "b", "c"]).budget(budget).build().unwrap(),
        Instant::now(),
    );
    for id in ["a", "b", "c"] {
        sim.script(id, Script::status(503));
    }
    let mut attempts = 0;
    for _ in 0..calls {
        attempts += sim
            .run(Method::GET, CallOptions::default())
            .report
            .attempts
            .len();
        sim.advance(gap);
    }
    attempts as f64 / calls as f64
}

fn tail(hedge: bool) -> (Duration, Duration, f64) {
    let mut b = policy(&["a", "b"]).budget(None);
    if hedge {
        b = b.hedge(Some(Hedge::after(Duration::from_millis(100))));
    }
    let mut sim = Sim::new(b.build().unwrap(), Instant::now());
    let mut steps = vec![Script::status(200).after(Duration::from_millis(1_000))];
    steps.extend((0..9).map(|_| Script::status(200).after(Duration::from_millis(20))));
    let script = steps.into_iter().reduce(Script::then).unwrap().cycle();
    sim.script("a", script)
        .script("b", Script::status(200).after(Duration::from_millis(30)));
    let mut lat = Vec::new();
    let mut attempts = 0;
    for _ in 0..10_000 {
        let run = sim.run(Method::GET, CallOptions::default());
        lat.push(run.elapsed);
        attempts += run.report.attempts.len();
        sim.advance(Duration::from_millis(50));
    }
    lat.sort();
    (
        lat[lat.len() / 2],
        lat[lat.len() * 99 / 100],
        attempts as f64 / 10_000.0 - 1.0,
    )
}

fn main() {
    println!("## Total outage of 3 endpoints (all 503), GET, 100 calls/s for 60 s\n");
    println!("| budget | attempts per call |");
    println!("|---|---|");
    println!(
        "| off | {:.3} |",
        outage(None, 6_000, Duration::from_millis(10))
    );
    println!(
        "| on (0.2, 10 s, 10/s reserve) | {:.3} |",
        outage(Some(Budget::default()), 6_000, Duration::from_millis(10))
    );
    println!("\n## One endpoint answers 10 % of calls after 1 s (else 20 ms), backup 30 ms; 10,000 GETs\n");
    println!("| hedging | p50 | p99 | extra attempts per call |");
    println!("|---|---|---|---|");
    for on in [false, true] {
        let (p50, p99, extra) = tail(on);
        println!(
            "| {} | {:?} | {:?} | {:.1} % |",
            if on { "on, hedge_after 100 ms" } else { "off" },
            p50,
            p99,
            extra * 100.0
        );
    }
}
