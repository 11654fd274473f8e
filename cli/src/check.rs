//! `baton check`: explores the policy's calls on the engine's simulator and reports, per
//! call class, the safety count, the worst case (computed and observed), the load in a
//! total outage, and the lints (see `baton_core::verify`). Nothing is sent.
//!
//! Exit status: 0 clean, 1 lints only, 2 invalid usage or configuration, 8 a safety
//! violation; each violating class's shortest counterexample is written as a vector file
//! (`--out DIR`, default the current directory, created when missing:
//! `baton-check-writes.toml`, ...), and its
//! path printed (a file that cannot be written is reported on stderr, and the status
//! stays 8); 23 when the report cannot be written to stdout.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use baton_core::verify::{CallClass, Check, ClassReport, Counterexample, Findings, TimeBound};
use serde_json::{json, Value};

use crate::args::CheckArgs;

/// Runs the check; returns the exit status.
pub fn run(args: CheckArgs) -> u8 {
    let config = match crate::config::resolve(&args.client) {
        Ok(c) => c,
        Err(e) => return crate::usage_error(&e),
    };
    let endpoints = config.endpoints.len();
    let policy = match config.clone().policy().build() {
        Ok(p) => p,
        Err(e) => return crate::usage_error(&e.to_string()),
    };
    // The client `--runtime` would build, of the configuration read once (a `--config`
    // that is a pipe cannot be read twice): its own checks (TLS files, hedging or HTTP/2
    // on the blocking runtime) refuse a configuration here as every other command does.
    // Built and dropped; nothing is sent.
    if let Err(e) = crate::runner::Runner::new(args.client.runtime, config, None) {
        return crate::usage_error(&e);
    }
    let check = Check::new().calls(args.calls).seed(args.seed);
    let started = Instant::now();
    let findings = if std::io::stderr().is_terminal() {
        let mut bar = Progress::default();
        let f = check.run_with_progress(&policy, started, &mut |n, of| bar.draw(n, of));
        bar.clear();
        f
    } else {
        check.run(&policy, started)
    };
    let elapsed = started.elapsed();
    // A counterexample that cannot be written is said on stderr; the report and the exit
    // status still say the policy is unsafe.
    let mut written = Vec::new();
    for class in &findings.classes {
        if let Some(cx) = &class.counterexample {
            match write_vector(&args.out, cx) {
                Ok(path) => written.push((class.class, path)),
                Err(e) => eprintln!("baton: {e}"),
            }
        }
    }
    let status = if !findings.is_safe() {
        8
    } else if !findings.lints.is_empty() {
        1
    } else {
        0
    };
    let text = if args.json {
        json_report(&findings, elapsed, status, &written).to_string() + "\n"
    } else {
        table(&findings, endpoints, elapsed, &written)
    };
    if std::io::stdout().lock().write_all(text.as_bytes()).is_err() {
        return 23;
    }
    status
}

/// Where a class's counterexample was written.
fn path_of<'a>(written: &'a [(CallClass, PathBuf)], c: &ClassReport) -> Option<&'a Path> {
    written
        .iter()
        .find(|(k, _)| *k == c.class)
        .map(|(_, p)| p.as_path())
}

/// Writes a counterexample as `baton-check-<class>.toml` in `dir`, created first when it
/// does not exist (as `mkdir -p` would); a file in its way is an error that says so.
fn write_vector(dir: &Path, cx: &Counterexample) -> Result<PathBuf, String> {
    std::fs::create_dir_all(dir).map_err(|e| {
        format!(
            "cannot create the directory {} for the counterexample (--out): {e}",
            dir.display()
        )
    })?;
    let name = format!("baton-check-{}.toml", cx.class.as_str().replace(' ', "-"));
    let path = dir.join(name);
    let body = toml::to_string(&cx.vector)
        .map_err(|e| format!("cannot write the counterexample as a vector: {e}"))?;
    let text = format!(
        "# Written by `baton check`: the shortest session found in which the last call broke\n\
         # a safety rule. It fails the conformance runner's simulator path with that rule;\n\
         # copy it into vectors/ to keep it there.\n{body}"
    );
    std::fs::write(&path, text)
        .map_err(|e| format!("cannot write the counterexample to {}: {e}", path.display()))?;
    Ok(path)
}

fn time_text(t: TimeBound) -> String {
    match t {
        TimeBound::Within(d) => duration_text(d),
        TimeBound::Unbounded(_) => "unbounded".into(),
    }
}

fn duration_text(d: Duration) -> String {
    if d >= Duration::from_secs(1) {
        format!("{:.1}s", d.as_secs_f64())
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// The text report: a summary line, one row per class, then violations and lints.
fn table(
    f: &Findings,
    endpoints: usize,
    elapsed: Duration,
    written: &[(CallClass, PathBuf)],
) -> String {
    let mut out = format!(
        "baton check: {endpoints} endpoints, {} calls explored ({} systematic, {} distinct scripts, seed {}) in {:.2}s\n\n",
        f.explored,
        f.systematic,
        f.scripts,
        f.seed,
        elapsed.as_secs_f64()
    );
    out += &rows(f);
    if f.classes.iter().any(|c| c.bound.time.within().is_none()) {
        out += "\n";
    }
    for c in &f.classes {
        if let TimeBound::Unbounded(why) = c.bound.time {
            out += &format!(
                "{}: no bound on the time to a result: {why}\n",
                c.class.as_str()
            );
        }
    }
    for c in f.classes.iter().filter(|c| c.violations > 0) {
        out += &violations(c, path_of(written, c));
    }
    if f.classes.iter().any(|c| c.violations > 0) {
        out += "\n";
    }
    if f.lints.is_empty() {
        out += "\nlints: none\n";
    } else {
        out += "\nlints:\n";
        for l in &f.lints {
            out += &format!("  {l}\n");
        }
    }
    out
}

/// The table's header and one row per class.
fn rows(f: &Findings) -> String {
    let mut out = format!(
        "{:<13} {:>6} {:>7}  {:>14}  {:>20}  {:>16}\n",
        "class", "calls", "safety", "worst attempts", "worst time", "outage att./call"
    );
    out += &format!(
        "{:<13} {:>6} {:>7}  {:>6} {:>7}  {:>10} {:>9}  {:>7} {:>8}\n",
        "", "", "", "bound", "seen", "bound", "seen", "window", "steady"
    );
    for c in &f.classes {
        out += &format!(
            "{:<13} {:>6} {:>7}  {:>6} {:>7}  {:>10} {:>9}  {:>7.2} {:>8.2}\n",
            c.class.as_str(),
            c.calls,
            c.violations,
            c.bound.attempts,
            c.observed_attempts,
            time_text(c.bound.time),
            duration_text(c.observed_time),
            c.outage.per_call(),
            c.outage.steady
        );
    }
    out
}

/// A violating class: counts by rule, the shortest counterexample, and where it is.
fn violations(c: &ClassReport, path: Option<&Path>) -> String {
    let mut out = format!(
        "\nSAFETY {}: {} calls broke a rule (repeated {}, hidden {}, understated {})",
        c.class.as_str(),
        c.violations,
        c.by_kind[0],
        c.by_kind[1],
        c.by_kind[2]
    );
    if let Some(cx) = &c.counterexample {
        let faults: Vec<String> = cx
            .faults
            .iter()
            .map(|call| {
                let names: Vec<&str> = call.iter().map(|x| x.as_str()).collect();
                format!("[{}]", names.join(", "))
            })
            .collect();
        out += &format!(
            "\n  shortest: {} call(s), faults {}",
            cx.faults.len(),
            faults.join(" ")
        );
        for v in &cx.violations {
            out += &format!("\n  {v}");
        }
        if let Some(p) = path {
            out += &format!("\n  counterexample: {}", p.display());
        }
    }
    out
}

fn json_report(
    f: &Findings,
    elapsed: Duration,
    status: u8,
    written: &[(CallClass, PathBuf)],
) -> Value {
    let classes: Vec<Value> = f
        .classes
        .iter()
        .map(|c| {
            let counterexample = c.counterexample.as_ref().map(|cx| {
                json!({
                    "path": path_of(written, c).map(|p| p.display().to_string()),
                    "violations": cx.violations.iter().map(|v| json!({"kind": v.kind.as_str(), "text": v.text})).collect::<Vec<_>>(),
                    "faults": cx.faults.iter().map(|call| call.iter().map(|x| x.as_str()).collect::<Vec<_>>()).collect::<Vec<_>>(),
                })
            });
            let (time_ms, unbounded) = match c.bound.time {
                TimeBound::Within(d) => (Some(d.as_secs_f64() * 1000.0), None),
                TimeBound::Unbounded(why) => (None, Some(why)),
            };
            json!({
                "class": c.class.as_str(),
                "calls": c.calls,
                "violations": c.violations,
                "by_kind": {"repeated": c.by_kind[0], "hidden": c.by_kind[1], "understated": c.by_kind[2]},
                "bound": {"attempts": c.bound.attempts, "time_ms": time_ms, "unbounded": unbounded},
                "observed": {"attempts": c.observed_attempts, "time_ms": c.observed_time.as_secs_f64() * 1000.0},
                "outage": {"calls": c.outage.calls, "attempts": c.outage.attempts, "per_call": c.outage.per_call(), "steady": c.outage.steady},
                "counterexample": counterexample,
            })
        })
        .collect();
    json!({
        "explored": f.explored,
        "systematic": f.systematic,
        "scripts": f.scripts,
        "seed": f.seed,
        "elapsed_ms": elapsed.as_secs_f64() * 1000.0,
        "classes": classes,
        "lints": f.lints.iter().map(|l| json!({"setting": l.setting, "reason": l.reason})).collect::<Vec<_>>(),
        "status": status,
    })
}

/// A one-line progress bar on stderr, redrawn when the percentage changes.
#[derive(Default)]
struct Progress {
    shown: Option<usize>,
}

impl Progress {
    fn draw(&mut self, n: usize, of: usize) {
        let pct = n.saturating_mul(100) / of.max(1);
        if self.shown == Some(pct) {
            return;
        }
        self.shown = Some(pct);
        let filled = pct / 5;
        eprint!(
            "\rbaton check [{}{}] {pct:>3}% {n}/{of} calls",
            "#".repeat(filled),
            " ".repeat(20 - filled.min(20))
        );
    }

    fn clear(&self) {
        if self.shown.is_some() {
            eprint!("\r{}\r", " ".repeat(60));
        }
    }
}
