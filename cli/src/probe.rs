//! `baton probe`: the policy's health request (`[policy.probe]`: method, path, healthy
//! statuses; default `GET` of each endpoint URL, healthy on 2xx) to every endpoint, one
//! after another, each under its breaker; one line per endpoint on stdout (the text
//! table, or JSON lines with `--json`). Exit status 0 when every endpoint was healthy, 3
//! when any was not, 2 for invalid usage or configuration (nothing sent).

use std::io::Write;
use std::time::Instant;

use crate::args::ProbeArgs;
use crate::output;
use crate::runner::Runner;

/// Runs the probes; returns the exit status.
pub fn run(args: ProbeArgs) -> u8 {
    let t0 = Instant::now();
    let runner = match Runner::from_args(&args.client, t0) {
        Ok(r) => r,
        Err(e) => return crate::usage_error(&e),
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut all_healthy = true;
    for id in runner.endpoint_ids() {
        // Each endpoint of a fresh client is closed: its probe is always admitted.
        let line = match runner.probe(&id) {
            Ok(r) => {
                all_healthy &= r.healthy;
                if args.json {
                    output::probe_json(&r).to_string()
                } else {
                    let answer = match (&r.status, &r.error) {
                        (Some(s), _) => s.as_u16().to_string(),
                        (None, Some(e)) => e.clone(),
                        (None, None) => "-".into(),
                    };
                    let health = if r.healthy { "healthy" } else { "unhealthy" };
                    format!("{id}\t{health}\t{answer}\t{}", r.state.as_str())
                }
            }
            Err(e) => {
                all_healthy = false;
                if args.json {
                    serde_json::json!({"endpoint": id, "healthy": false, "error": e.to_string()})
                        .to_string()
                } else {
                    format!("{id}\tunhealthy\t{e}\t-")
                }
            }
        };
        if writeln!(out, "{line}").is_err() {
            return 23;
        }
    }
    if all_healthy {
        0
    } else {
        3
    }
}
