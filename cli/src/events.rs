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
    let mut put = |k: &str, v: Value| {
        m.insert(k.into(), v);
    };
    match &e.kind {
        EventKind::AttemptStarted {
            endpoint,
            attempt,
            kind,
            probe,
        } => {
            put("event", "attempt_started".into());
            put("endpoint", (*endpoint).into());
            put("attempt", (*attempt).into());
            put("kind", kind.as_str().into());
            put("probe", (*probe).into());
        }
        EventKind::AttemptFinished {
            endpoint,
            attempt,
            result,
            elapsed,
        } => {
            put("event", "attempt_finished".into());
            put("endpoint", (*endpoint).into());
            put("attempt", (*attempt).into());
            put("elapsed_ms", millis(*elapsed));
            result_fields(&mut m, result);
        }
        EventKind::CooldownSkip {
            endpoint,
            state,
            skipped,
        } => {
            put("event", "cooldown_skip".into());
            put("endpoint", (*endpoint).into());
            put("state", state.as_str().into());
            put("skipped", (*skipped).into());
        }
        EventKind::ReplayFailed { attempt } => {
            put("event", "replay_failed".into());
            put("attempt", (*attempt).into());
        }
        EventKind::NotReplayable => put("event", "not_replayable".into()),
        EventKind::Failover {
            from,
            to,
            reason,
            status: _,
        } => {
            put("event", "failover".into());
            put("from", (*from).into());
            put("to", (*to).into());
            result_fields(&mut m, reason);
        }
        EventKind::BackoffWait { delay, reason } => {
            put("event", "backoff_wait".into());
            put("delay_ms", millis(*delay));
            put("reason", reason.as_str().into());
        }
        EventKind::BreakerTransition { endpoint, from, to } => {
            put("event", "breaker_transition".into());
            put("endpoint", (*endpoint).into());
            put("from", from.as_str().into());
            put("to", to.as_str().into());
        }
        EventKind::BudgetRefused { endpoint } => {
            put("event", "budget_refused".into());
            put("endpoint", (*endpoint).into());
        }
        EventKind::RateLimited {
            endpoint,
            until,
            waiting,
        } => {
            put("event", "rate_limited".into());
            put("endpoint", (*endpoint).into());
            put("until_ms", ms_since(t0, *until).into());
            put("waiting", (*waiting).into());
        }
        EventKind::HedgeStarted { endpoint, attempt } => {
            put("event", "hedge_started".into());
            put("endpoint", (*endpoint).into());
            put("attempt", (*attempt).into());
        }
        EventKind::AttemptCancelled { endpoint, attempt } => {
            put("event", "attempt_cancelled".into());
            put("endpoint", (*endpoint).into());
            put("attempt", (*attempt).into());
        }
        EventKind::Redirected { endpoint, redirect } => {
            // Origins only: paths and queries of provider URLs may hold keys.
            put("event", "redirected".into());
            put("endpoint", (*endpoint).into());
            put("attempt", redirect.attempt.into());
            put("status", redirect.status.as_u16().into());
            put("from", Origin(&redirect.from).to_string().into());
            put("to", Origin(&redirect.to).to_string().into());
            put("cross_origin", redirect.cross_origin.into());
        }
        EventKind::ProbeResult { endpoint, success } => {
            put("event", "probe_result".into());
            put("endpoint", (*endpoint).into());
            put("success", (*success).into());
        }
        EventKind::Result {
            stop_reason,
            status,
            may_have_executed,
            attempts,
        } => {
            put("event", "result".into());
            put("stop_reason", stop_reason.as_str().into());
            put("status", status.map_or(Value::Null, |s| s.as_u16().into()));
            put("may_have_executed", (*may_have_executed).into());
            put("attempts", (*attempts).into());
        }
        other => {
            put("event", "other".into());
            put("debug", format!("{other:?}").into());
        }
    }
    Value::Object(m)
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
