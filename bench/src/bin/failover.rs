//! How long baton-tokio takes to fail over once an attempt timer fires in the connect
//! phase: the primary's connects never complete ([`testkit::HungConnect`]), the attempt
//! timeout (100 ms) is shorter than the connect timeout (5 s), and a POST must move to the
//! backup because nothing was sent (SPEC 2.6). What is printed is the time a call takes
//! beyond its 100 ms timer: the proof that the request was never written, the backup's
//! answer over a warm connection, and the timer's own lateness.
//!
//! ```text
//! cargo run --release -p bench --bin failover [CALLS]
//! ```
//!
//! Each call runs on a client of its own, so that no earlier call's outcome (the primary
//! marked unavailable) spares it the first attempt; each client's backup connection is
//! warmed by one call first.

use std::time::{Duration, Instant};

use baton_core::{AttemptResult, Endpoint, Policy, TimeoutPhase};
use testkit::{Behaviour, HungConnect, Provider};

const TIMER: Duration = Duration::from_millis(100);

fn main() {
    let calls: usize = match std::env::args().nth(1).map(|s| s.parse()) {
        None => 20,
        Some(Ok(n)) if n > 0 => n,
        _ => {
            eprintln!("failover: the number of calls must be a whole number above 0");
            std::process::exit(2);
        }
    };
    let hung = HungConnect::start();
    let backup = Provider::start(Behaviour::ok());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut beyond = Vec::with_capacity(calls);
    for _ in 0..calls {
        let policy = Policy::builder()
            .endpoint(Endpoint::new("primary", hung.url()))
            .endpoint(Endpoint::new("backup", backup.url()))
            .configure(|s| s.attempt_timeout = TIMER);
        let client = baton_tokio::Client::new(policy).expect("baton client");
        rt.block_on(async {
            // The warm-up fails over too, and leaves a connection to the backup.
            let _ = client.get("/").send().await;
            let t = Instant::now();
            let response =
                (client.post("/").body("amount=1").send().await).expect("the backup answers");
            let elapsed = t.elapsed();
            let report = response.report();
            assert_eq!(report.attempts.len(), 2, "failover: {report:?}");
            let connect = AttemptResult::TimedOut(TimeoutPhase::Connect);
            assert_eq!(report.attempts[0].result, connect, "failover: {report:?}");
            beyond.push(elapsed.saturating_sub(TIMER).as_secs_f64() * 1e3);
        });
    }
    beyond.sort_by(f64::total_cmp);
    println!(
        "failover after a connect-phase attempt timeout ({calls} calls): beyond the {} ms timer, median {:.2} ms (min {:.2}, max {:.2})",
        TIMER.as_millis(),
        beyond[calls / 2],
        beyond[0],
        beyond[calls - 1]
    );
}
