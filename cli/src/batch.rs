//! `baton batch`: calls as JSON lines on stdin, one client, one JSON line per call on
//! stdout, in input order.
//!
//! A reader thread reads and parses lines and hands calls to `--concurrency` worker
//! threads through a rendezvous channel (so at most N calls are in flight and none is
//! read ahead); the main thread writes results in input order as soon as each one and
//! all before it are done. With the default concurrency of 1 calls run strictly one after
//! another, so each call sees the endpoint health the previous ones left.
//!
//! Decisions: empty (or all-blank) lines are skipped; the first malformed line (not a
//! JSON object of the documented fields, an unknown field, a wrong type, invalid UTF-8)
//! stops reading: calls already read finish and are printed, then the line number and
//! the reason go to stderr and the exit status is 2. A call that is well-formed JSON but
//! invalid as a call (bad method, header or request id, unknown `prefer`) is not
//! malformed: it gets an output line with an `invalid_call` / `unknown_endpoint` error and
//! nothing is sent. A body larger than `--max-body` (decoded, with `--compressed`) gives
//! its line the error kind `body_too_large`; the other lines go on. A body that is not
//! valid UTF-8 is written as `body_base64` instead of `body`, so every byte survives.
//! A call that panics (a bug; no input should make one) gets an output
//! line with error kind `internal` and `may_have_executed: true` (nothing is known about
//! what it sent), and the batch goes on. A line whose `path` complete endpoint URLs would
//! not send (no `--base`), or whose method is a standard one in lower case, is an
//! `invalid_call` line too.
//!
//! When writing the output fails (a closed pipe, a full disk), no call starts after that:
//! the batch reports it on stderr and exits 23 without waiting for more input; the lines
//! of calls started before are lost, and those calls may have executed.
//!
//! A line `{"probe": "due"}` (with an optional `id`) probes the endpoints that are due a
//! probe at that point of the batch (breaker open time passed, no probe in flight) with
//! the batch's client; its output line is `{"id", "probe": "due", "results": [...]}`, one
//! result per probed endpoint (`endpoint`, `healthy`, `status` or `error`, `state`).

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::args::BatchArgs;
use crate::call::{BatchLine, CallSpec};
use crate::output;
use crate::runner::{Collect, Runner};

/// What one input line asks for.
enum Work {
    Call(Box<CallSpec>),
    /// Probe the endpoints due a probe.
    ProbeDue,
}

type Job = (usize, Value, Work);

/// Runs the batch; returns the exit status.
pub fn run(args: BatchArgs) -> u8 {
    let t0 = Instant::now();
    let runner = match Runner::from_args(&args.client, t0) {
        Ok(r) => r,
        Err(e) => return crate::usage_error(&e),
    };
    let workers = usize::from(args.concurrency);
    let (max_body, compressed) = (args.max_body, args.compressed);
    // Set when stdout fails: no call starts after that, since its result could not be told.
    let output_failed = Arc::new(AtomicBool::new(false));
    let (job_tx, job_rx) = mpsc::sync_channel::<Job>(0);
    let malformed = read_in_background(job_tx, compressed, Arc::clone(&output_failed));
    // Dropped on the way out: a reader still offering a line then stops.
    let job_rx = Mutex::new(job_rx);
    let written = std::thread::scope(|scope| {
        let (out_tx, out_rx) = mpsc::channel::<(usize, Value)>();
        for _ in 0..workers {
            let (job_rx, out_tx, runner) = (&job_rx, out_tx.clone(), &runner);
            let failed = &*output_failed;
            scope.spawn(move || work(runner, job_rx, &out_tx, (max_body, compressed), failed));
        }
        drop(out_tx);
        // The workers end when the input does (or the output failed); the writer when
        // they have.
        write_in_order(out_rx, &output_failed)
    });
    if let Err(why) = written {
        eprintln!(
            "baton batch: writing the output failed ({why}); no call was started after that, \
             and the lines of calls started before are lost (those calls may have executed)"
        );
        return 23;
    }
    // Every line was written: the input ended, or stopped at a malformed line, and the
    // reader has said which.
    match malformed.recv().ok().flatten() {
        Some((line, why)) => {
            eprintln!("baton batch: malformed input line {line}: {why}");
            2
        }
        None => 0,
    }
}

/// Reads stdin's lines into `jobs` on a thread of its own, which is not waited for: once
/// the output failed, the batch ends without waiting for an input line that may never
/// come (a stdin left open). The receiver gets why reading stopped.
fn read_in_background(
    jobs: mpsc::SyncSender<Job>,
    compressed: bool,
    output_failed: Arc<AtomicBool>,
) -> mpsc::Receiver<Option<(usize, String)>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let malformed = read_jobs(&jobs, compressed, &output_failed);
        drop(jobs);
        let _ = tx.send(malformed);
    });
    rx
}

/// One worker: takes jobs until the input ends or the output failed (a job taken then is
/// not run; a worker waiting for one looks at the failure every 50 ms), sends each job's
/// output line.
fn work(
    runner: &Runner,
    jobs: &Mutex<mpsc::Receiver<Job>>,
    out: &mpsc::Sender<(usize, Value)>,
    (max_body, compressed): (usize, bool),
    output_failed: &AtomicBool,
) {
    loop {
        let job = loop {
            let Ok(rx) = jobs.lock() else { return };
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(job) => break job,
                Err(mpsc::RecvTimeoutError::Timeout) if !output_failed.load(Ordering::SeqCst) => {}
                Err(_) => return,
            }
        };
        let (index, id, work) = job;
        if output_failed.load(Ordering::SeqCst) {
            return;
        }
        let line = match work {
            Work::ProbeDue => output::probe_line(&id, &runner.probe_due()),
            // A panic in a call (a bug: no input should cause one) must neither hang the
            // batch nor lose the lines of calls that did execute: it becomes this line's
            // error, possibly executed, and the worker goes on.
            Work::Call(spec) => match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let mut sink = Collect::new(max_body, compressed);
                let mut result = runner.run_into(&spec, &mut sink);
                result.body = sink.body;
                output::batch_line(&id, &result)
            })) {
                Ok(line) => line,
                Err(_) => output::panic_line(&id, spec.options.request_id.as_deref()),
            },
        };
        if out.send((index, line)).is_err() {
            return;
        }
    }
}

/// Writes the output lines in input order as they come. On a failed write it raises
/// `failed` and stops: the reader then starts no further call.
fn write_in_order(
    lines: mpsc::Receiver<(usize, Value)>,
    failed: &AtomicBool,
) -> Result<(), String> {
    let mut next = 0usize;
    let mut pending = BTreeMap::new();
    let stdout = std::io::stdout();
    for (index, line) in lines {
        pending.insert(index, line);
        while let Some(line) = pending.remove(&next) {
            let mut out = stdout.lock();
            if let Err(e) = writeln!(out, "{line}").and_then(|()| out.flush()) {
                failed.store(true, Ordering::SeqCst);
                return Err(e.to_string());
            }
            next += 1;
        }
    }
    Ok(())
}

/// Reads stdin's lines into jobs; stops at the first malformed line (returned with its
/// number and why), once writing the output failed, or when no worker takes jobs.
fn read_jobs(
    jobs: &mpsc::SyncSender<Job>,
    compressed: bool,
    output_failed: &AtomicBool,
) -> Option<(usize, String)> {
    let stdin = std::io::stdin();
    let mut index = 0usize;
    for (n, line) in stdin.lock().lines().enumerate() {
        let line = match line {
            Ok(l) => l,
            Err(e) => return Some((n + 1, format!("cannot read the line: {e}"))),
        };
        if line.trim().is_empty() {
            continue;
        }
        let parsed = match probe_request(&line) {
            Some(probe) => probe.map(|id| (id, Work::ProbeDue)),
            None => BatchLine::parse(&line).map(|l| {
                let mut spec = l.spec();
                if compressed {
                    spec.ask_compressed();
                }
                (l.id, Work::Call(Box::new(spec)))
            }),
        };
        if output_failed.load(Ordering::SeqCst) {
            return None;
        }
        match parsed {
            Ok((id, work)) => {
                if jobs.send((index, id, work)).is_err() {
                    return None;
                }
                index += 1;
            }
            Err(e) => return Some((n + 1, e)),
        }
    }
    None
}

/// A `{"probe": "due"}` line: its `id` (`None`: not a probe line; an error: a malformed
/// one).
fn probe_request(line: &str) -> Option<Result<Value, String>> {
    let Ok(Value::Object(map)) = serde_json::from_str::<Value>(line) else {
        return None;
    };
    let probe = map.get("probe")?;
    if probe != "due" {
        return Some(Err(format!(
            "probe: {probe} is not a probe request; the only one is \"due\""
        )));
    }
    if let Some(k) = map.keys().find(|k| *k != "probe" && *k != "id") {
        return Some(Err(format!("unknown field `{k}` in a probe line")));
    }
    Some(Ok(map.get("id").cloned().unwrap_or(Value::Null)))
}
