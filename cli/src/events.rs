//! `--events`: every engine event as one JSON line on stderr.
//!
//! Each line has `t_ms` (milliseconds since the client was built), `request_id`,
//! `idempotency_key` (when the call has one), `event` (the kind, snake_case) and the
//! kind's fields: endpoint ids, attempt numbers, `outcome` (the failure class or
//! `response`), `status`, durations in milliseconds. A kind this version does not know
//! yet is printed as `{"event": "other", "debug": "..."}`.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use baton_core::{AttemptResult, Event, EventKind, EventSink, Origin};
use serde_json::{json, Map, Value};

use crate::runner::ms_since;

fn result_fields(m: &mut Map<String, Value>, r: &AttemptResult) {
    m.insert("outcome".into(), r.as_str().into());
    m.insert(
        "status".into(),
        r.status().map_or(Value::Null, |s| s.as_u16().into()),
    );
}

/// The JSON form of one event.
pub fn to_json(e: &Event<'_>, t0: Instant) -> Value {
    let mut m = Map::new();
    m.insert("t_ms".into(), ms_since(t0, e.at).into());
    m.insert("request_id".into(), e.request_id.into());
    if let Some(k) = e.idempotency_key {
        m.insert("idempotency_key".into(), k.into());
    }
    let (name, fields) = kind_json(&e.kind, t0);
    m.insert("event".into(), name.into());
    if let Value::Object(fields) = fields {
        m.extend(fields);
    }
    Value::Object(m)
}

/// The event's name and its own fields (the attempts' events; the others in
/// [`decision_json`]).
fn kind_json(kind: &EventKind<'_>, t0: Instant) -> (&'static str, Value) {
    match kind {
        EventKind::AttemptStarted {
            endpoint,
            attempt,
            kind,
            probe,
        } => (
            "attempt_started",
            json!({ "endpoint": endpoint, "attempt": attempt, "kind": kind.as_str(), "probe": probe }),
        ),
        EventKind::AttemptFinished {
            endpoint,
            attempt,
            result,
            elapsed,
        } => (
            "attempt_finished",
            with_result(
                json!({ "endpoint": endpoint, "attempt": attempt, "elapsed_ms": millis(*elapsed) }),
                result,
            ),
        ),
        EventKind::CooldownSkip {
            endpoint,
            state,
            skipped,
        } => (
            "cooldown_skip",
            json!({ "endpoint": endpoint, "state": state.as_str(), "skipped": skipped }),
        ),
        EventKind::ReplayFailed { attempt } => ("replay_failed", json!({ "attempt": attempt })),
        EventKind::NotReplayable => ("not_replayable", json!({})),
        EventKind::Failover {
            from, to, reason, ..
        } => (
            "failover",
            with_result(json!({ "from": from, "to": to }), reason),
        ),
        EventKind::BackoffWait { delay, reason } => (
            "backoff_wait",
            json!({ "delay_ms": millis(*delay), "reason": reason.as_str() }),
        ),
        EventKind::HedgeStarted { endpoint, attempt } => (
            "hedge_started",
            json!({ "endpoint": endpoint, "attempt": attempt }),
        ),
        EventKind::AttemptCancelled { endpoint, attempt } => (
            "attempt_cancelled",
            json!({ "endpoint": endpoint, "attempt": attempt }),
        ),
        _ => decision_json(kind, t0),
    }
}

/// The fields of an event about the call's decisions and endpoints.
fn decision_json(kind: &EventKind<'_>, t0: Instant) -> (&'static str, Value) {
    match kind {
        EventKind::BreakerTransition { endpoint, from, to } => (
            "breaker_transition",
            json!({ "endpoint": endpoint, "from": from.as_str(), "to": to.as_str() }),
        ),
        EventKind::BudgetRefused { endpoint } => {
            ("budget_refused", json!({ "endpoint": endpoint }))
        }
        EventKind::RateLimited {
            endpoint,
            until,
            waiting,
        } => (
            "rate_limited",
            json!({ "endpoint": endpoint, "until_ms": ms_since(t0, *until), "waiting": waiting }),
        ),
        EventKind::Redirected { endpoint, redirect } => {
            ("redirected", redirected(endpoint, redirect))
        }

        EventKind::ProbeResult { endpoint, success } => (
            "probe_result",
            json!({ "endpoint": endpoint, "success": success }),
        ),
        EventKind::Result {
            stop_reason,
            status,
            may_have_executed,
            attempts,
        } => (
            "result",
            json!({
                "stop_reason": stop_reason.as_str(), "status": status.map(|s| s.as_u16()),
                "may_have_executed": may_have_executed, "attempts": attempts,
            }),
        ),
        other => ("other", json!({ "debug": format!("{other:?}") })),
    }
}

/// A redirect's fields: origins only (paths and queries of provider URLs may hold keys).
fn redirected(endpoint: &str, r: &baton_core::Redirect) -> Value {
    json!({
        "endpoint": endpoint,
        "attempt": r.attempt,
        "status": r.status.as_u16(),
        "from": Origin(&r.from).to_string(),
        "to": Origin(&r.to).to_string(),
        "cross_origin": r.cross_origin,
    })
}

/// `fields` with those of an attempt's result (`outcome`, `status`).
fn with_result(mut fields: Value, result: &baton_core::AttemptResult) -> Value {
    if let Value::Object(m) = &mut fields {
        result_fields(m, result);
    }
    fields
}

/// Milliseconds as a JSON number with microsecond precision.
pub fn millis(d: std::time::Duration) -> Value {
    json!((d.as_secs_f64() * 1e6).round() / 1e3)
}

/// A sink writing every event as a JSON line to stderr (one locked write per line).
pub fn stderr_sink(t0: Instant) -> EventSink {
    Arc::new(move |e: &Event<'_>| {
        let line = format!("{}\n", to_json(e, t0));
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    })
}

/// A sink that keeps a copy of the interesting events (for the demo's notes column).
pub fn collecting_sink(into: Arc<Mutex<Vec<Value>>>, t0: Instant) -> EventSink {
    Arc::new(move |e: &Event<'_>| {
        if let Ok(mut v) = into.lock() {
            v.push(to_json(e, t0));
        }
    })
}

/// Both sinks.
pub fn both(a: EventSink, b: EventSink) -> EventSink {
    Arc::new(move |e: &Event<'_>| {
        a(e);
        b(e);
    })
}
