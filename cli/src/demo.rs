//! `baton demo`: a scripted outage against two local providers, printed as a table.
//!
//! Two `testkit` providers listen on 127.0.0.1 (no network needed): `primary` and
//! `backup`. One client (of the chosen `--runtime`) with a short attempt timeout (400 ms)
//! and a quick cooldown (after 2 consecutive failures, 1 s, doubling after a failed
//! probe) sends calls while the primary goes through four phases:
//!
//! 1. healthy: calls go to the primary;
//! 2. refusing connections: each call fails over to the backup (undelivered, so even a
//!    keyed payment may move), then the primary's breaker opens and calls go straight to
//!    the backup;
//! 3. black-holed (accepts, reads, never answers): after the cooldown a POST without an
//!    idempotency key probes the primary, times out (ambiguous) and is *not* repeated on
//!    the backup, because it may have executed; reads keep flowing to the backup;
//! 4. back: after the (doubled) cooldown the next call probes the primary, which answers,
//!    and traffic returns to it.
//!
//! Providers answer with `Connection: close`, so no pooled connection can hide a phase
//! change. The whole run takes about 4 s.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use baton_core::Endpoint;
use serde_json::Value;
use testkit::{Behaviour, Provider};

use crate::args::DemoArgs;
use crate::call::{CallResult, CallSpec};
use crate::config::{self, ClientConfig};
use crate::events;
use crate::runner::Runner;

enum Step {
    Phase(&'static str, &'static str),
    Pause(Duration, &'static str),
    Call(Box<CallSpec>),
}

fn get(path: &str) -> Step {
    Step::Call(Box::new(CallSpec {
        method: "GET".into(),
        path: path.into(),
        ..CallSpec::default()
    }))
}

fn post(path: &str, key: Option<&str>) -> Step {
    Step::Call(Box::new(CallSpec {
        method: "POST".into(),
        path: path.into(),
        headers: vec![("content-type".into(), "application/json".into())],
        body: Some(br#"{"amount":100}"#.to_vec()),
        options: baton_core::CallOptions {
            idempotency_key: key.map(str::to_string),
            ..Default::default()
        },
    }))
}

fn healthy(name: &str) -> Behaviour {
    Behaviour::ok()
        .header("connection", "close")
        .body(format!("{{\"served_by\":\"{name}\"}}\n"))
}

/// The attempts of a call, compactly: `primary undelivered, backup 200`.
fn attempts_cell(r: &CallResult) -> String {
    let Some(rep) = &r.report else {
        return "-".into();
    };
    rep.attempts
        .iter()
        .map(|a| match a.result.status() {
            Some(s) => format!("{} {}", a.endpoint_id, s.as_u16()),
            None => format!("{} {}", a.endpoint_id, a.result.as_str()),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn result_cell(r: &CallResult) -> String {
    match (&r.response, &r.failure) {
        (Some(h), None) => format!("{} from {}", h.status, h.endpoint),
        (_, Some(f)) => {
            let executed = r.report.as_ref().is_some_and(|rep| rep.may_have_executed);
            format!(
                "error: {}{}",
                f.kind,
                if executed { " (may have executed)" } else { "" }
            )
        }
        (None, None) => "-".into(),
    }
}

fn notes_cell(evs: &[Value]) -> String {
    let mut notes: Vec<String> = Vec::new();
    for e in evs {
        let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("");
        let note = match s("event") {
            "breaker_transition" => format!("{} {} -> {}", s("endpoint"), s("from"), s("to")),
            "cooldown_skip" => format!("{} in cooldown, tried last", s("endpoint")),
            "attempt_started" if e.get("probe") == Some(&Value::Bool(true)) => {
                format!("{} probed", s("endpoint"))
            }
            _ => continue,
        };
        if !notes.contains(&note) {
            notes.push(note);
        }
    }
    notes.join("; ")
}

/// The demo's policy, `cli/examples/demo.toml` (so `baton check` can check it), with its
/// two endpoints pointed at the local providers.
pub fn demo_config(primary: String, backup: String) -> Result<ClientConfig, String> {
    let file = config::parse(include_str!("../examples/demo.toml"))
        .map_err(|e| format!("cli/examples/demo.toml: {e}"))?;
    Ok(ClientConfig {
        endpoints: vec![
            Endpoint::new("primary", primary),
            Endpoint::new("backup", backup),
        ],
        settings: file.policy,
        permissions: Vec::new(),
        auth: Default::default(),
    })
}

/// The demo's script: the phases of the outage and the calls made in each.
fn script() -> Vec<Step> {
    vec![
        Step::Phase("healthy", "both providers answer"),
        get("/balance"),
        post("/payments", Some("pay-1001")),
        Step::Phase("refusing", "primary refuses connections (process down)"),
        get("/balance"),
        post("/payments", Some("pay-1002")),
        get("/balance"),
        Step::Phase(
            "black hole",
            "primary accepts and reads requests but never answers",
        ),
        Step::Pause(Duration::from_millis(1100), "primary's 1 s cooldown"),
        post("/orders", None),
        get("/balance"),
        Step::Phase("recovered", "primary answers again"),
        Step::Pause(
            Duration::from_millis(2100),
            "primary's doubled 2 s cooldown",
        ),
        get("/balance"),
        get("/balance"),
    ]
}

/// What the calls came to, for the summary.
#[derive(Default)]
struct Tally {
    calls: usize,
    answered: std::collections::BTreeMap<String, u32>,
    failed: usize,
    unsafe_repeat_avoided: Vec<usize>,
}

/// The demo's run: its providers, its client, what it collects and prints.
struct Demo {
    primary: Provider,
    backup: Provider,
    runner: Runner,
    collected: Arc<Mutex<Vec<Value>>>,
    tally: Tally,
}

/// Runs the demo; returns the exit status.
pub fn run(args: DemoArgs) -> u8 {
    let t0 = Instant::now();
    let primary = Provider::start(healthy("primary"));
    let backup = Provider::start(healthy("backup"));
    let config = match demo_config(primary.url(), backup.url()) {
        Ok(c) => c,
        Err(e) => return crate::usage_error(&e),
    };
    let collected = Arc::new(Mutex::new(Vec::new()));
    let mut sink = events::collecting_sink(Arc::clone(&collected), t0);
    if args.events {
        sink = events::both(sink, events::stderr_sink(t0));
    }
    let runner = match Runner::new(args.runtime, config, Some(sink)) {
        Ok(r) => r,
        Err(e) => return crate::usage_error(&e),
    };
    let mut demo = Demo {
        primary,
        backup,
        runner,
        collected,
        tally: Tally::default(),
    };
    let mut out = std::io::stdout().lock();
    demo.header(&mut out, args.runtime.as_str());
    let mut phase = "";
    for step in script() {
        demo.step(&mut out, step, &mut phase);
    }
    demo.summary(&mut out, t0);
    0
}

impl Demo {
    fn header(&self, out: &mut impl Write, runtime: &str) {
        let _ = writeln!(
            out,
            "baton demo: runtime {runtime}, providers on 127.0.0.1: primary {}, backup {}",
            self.primary.url(),
            self.backup.url()
        );
        let _ = writeln!(
            out,
            "policy: attempt timeout 400 ms; cooldown after 2 consecutive failures, 1 s, doubled after a failed probe\n"
        );
        let _ = writeln!(
            out,
            "{:>2}  {:<10}  {:<28}  {:<34}  {:<36}  {:>7}  notes",
            "#", "phase", "call", "attempts", "result", "time"
        );
        let _ = writeln!(out, "{}", "-".repeat(130));
    }

    /// One step of the script: a phase change (the primary's behaviour), a pause, or a
    /// call and its row.
    fn step(&mut self, out: &mut impl Write, step: Step, phase: &mut &'static str) {
        match step {
            Step::Phase(name, what) => {
                *phase = name;
                match name {
                    "refusing" => self.primary.set_behaviour(Behaviour::refuse()),
                    "black hole" => self.primary.set_behaviour(Behaviour::black_hole()),
                    "recovered" => self.primary.set_behaviour(healthy("primary")),
                    _ => {}
                }
                let _ = writeln!(out, "    == {name}: {what}");
            }
            Step::Pause(d, why) => {
                let _ = writeln!(
                    out,
                    "    .. waiting {:.1} s for {why} to pass",
                    d.as_secs_f64()
                );
                let _ = out.flush();
                std::thread::sleep(d);
            }
            Step::Call(spec) => self.call(out, &spec, phase),
        }
    }

    fn call(&mut self, out: &mut impl Write, spec: &CallSpec, phase: &str) {
        let t = &mut self.tally;
        t.calls += 1;
        if let Ok(mut v) = self.collected.lock() {
            v.clear();
        }
        let started = Instant::now();
        let r = self.runner.run(spec);
        let took = started.elapsed();
        let evs = self.collected.lock().map(|v| v.clone()).unwrap_or_default();
        let key = spec.options.idempotency_key.as_ref();
        let call = format!(
            "{} {}{}",
            spec.method,
            spec.path,
            key.map_or(String::new(), |k| format!(" key={k}"))
        );
        match (&r.response, &r.failure) {
            (Some(h), None) => *t.answered.entry(h.endpoint.clone()).or_default() += 1,
            _ => {
                t.failed += 1;
                if r.report.as_ref().is_some_and(|rep| rep.may_have_executed) {
                    t.unsafe_repeat_avoided.push(t.calls);
                }
            }
        }
        let _ = writeln!(
            out,
            "{:>2}  {:<10}  {:<28}  {:<34}  {:<36}  {:>4} ms  {}",
            t.calls,
            phase,
            call,
            attempts_cell(&r),
            result_cell(&r),
            took.as_millis(),
            notes_cell(&evs)
        );
        let _ = out.flush();
    }

    fn summary(&self, out: &mut impl Write, t0: Instant) {
        let t = &self.tally;
        let _ = writeln!(out, "{}", "-".repeat(130));
        let by: Vec<String> = t
            .answered
            .iter()
            .map(|(k, v)| format!("{v} by {k}"))
            .collect();
        let _ = writeln!(
            out,
            "summary: {} calls in {:.1} s; answered {}; {} failed",
            t.calls,
            t0.elapsed().as_secs_f64(),
            by.join(", "),
            t.failed
        );
        let _ = writeln!(
            out,
            "requests received: primary {} (refused connections never arrive), backup {}",
            self.primary.request_count(),
            self.backup.request_count()
        );
        for c in &t.unsafe_repeat_avoided {
            let _ = writeln!(
                out,
                "call {c}: ambiguous failure on a POST without an idempotency key: not repeated on backup (it may have executed on primary)"
            );
        }
        let health = |id: &str| {
            self.runner
                .health(id)
                .map_or("unknown", |h| h.state.as_str())
                .to_string()
        };
        let _ = writeln!(
            out,
            "endpoint health now: primary {}, backup {}",
            health("primary"),
            health("backup")
        );
    }
}
