//! `baton request [PATH]`: one call; the response body (and nothing else) to stdout.
//!
//! With `-i` the status line, the answering endpoint and the response headers go to
//! stderr; with `--events` every engine event does (the final `result` event carries the
//! status). Errors always go to stderr as one `baton: ...` line naming the attempts, the
//! request id and the last cause. A body that failed half-way is not printed at all
//! (never passed off as complete): exit status 7.

use std::io::Write;
use std::time::Instant;

use crate::args::RequestArgs;
use crate::call::CallSpec;
use crate::runner::Runner;
use crate::{config, events};

/// Runs the call; returns the exit status.
pub fn run(args: RequestArgs) -> u8 {
    let t0 = Instant::now();
    let spec = match CallSpec::from_args(&args.call, &args.path) {
        Ok(s) => s,
        Err(e) => return crate::usage_error(&e),
    };
    let config = match config::resolve(&args.client) {
        Ok(c) => c,
        Err(e) => return crate::usage_error(&e),
    };
    let sink = args.client.events.then(|| events::stderr_sink(t0));
    let runner = match Runner::new(args.client.runtime, config, sink) {
        Ok(r) => r,
        Err(e) => return crate::usage_error(&e),
    };
    let result = runner.run(&spec);
    if args.include {
        if let (Some(head), Some(report)) = (&result.response, &result.report) {
            let reason = http::StatusCode::from_u16(head.status)
                .ok()
                .and_then(|s| s.canonical_reason())
                .unwrap_or("");
            let mut err = std::io::stderr().lock();
            let _ = writeln!(
                err,
                "< HTTP {} {reason} (endpoint {:?}, {} attempt(s), {:.1} ms, request id {})",
                head.status,
                head.endpoint,
                report.attempts.len(),
                report.elapsed.as_secs_f64() * 1e3,
                report.request_id,
            );
            for (k, v) in &head.headers {
                let _ = writeln!(err, "< {k}: {v}");
            }
        }
    }
    if let Some(body) = &result.body {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(body);
        let _ = out.flush();
    }
    if let Some(f) = &result.failure {
        eprintln!("baton: {}", f.message);
    }
    result.exit_code()
}
