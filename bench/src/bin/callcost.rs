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

use std::time::{Duration, Instant};

use baton_core::{Endpoint, Policy};
use testkit::{Behaviour, Provider};

// Only its request id is used here.
#[allow(dead_code)]
#[path = "../bare.rs"]
mod bare;

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
    if who != "baton" && who != "raw" {
        eprintln!("callcost: the contender is `baton` or `raw`, not {who:?}");
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
    let http = reqwest::Client::builder()
        .connect_timeout(Duration::from_millis(100))
        .build()
        .expect("reqwest client");
    let mut policy = Policy::builder();
    for (i, url) in urls.iter().enumerate() {
        policy = policy.endpoint(Endpoint::new(format!("e{i}"), url.clone()));
    }
    let client = baton_tokio::Client::builder(policy)
        .reqwest_client(http.clone())
        .build()
        .expect("baton client");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        for round in 0..2 {
            let t = Instant::now();
            for _ in 0..n {
                let ok = if who == "baton" {
                    match client.get("/").send().await {
                        Ok(r) => r.status().is_success() && r.bytes().await.is_ok(),
                        Err(_) => false,
                    }
                } else {
                    let rb = http.get(&urls[0]).header("x-request-id", bare::REQUEST_ID);
                    match rb.send().await {
                        Ok(r) => r.status().is_success() && r.bytes().await.is_ok(),
                        Err(_) => false,
                    }
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
