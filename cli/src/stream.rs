//! `baton events [PATH]`: one Server-Sent Events stream through the client, one JSON line
//! per event on stdout; the stream's own happenings (connections, reconnections,
//! failovers, restarts) as JSON lines on stderr with `--events`, beside the engine's.

use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use baton_core::sse::{Notice, NoticeSink, Reason, StreamError, StreamItem, StreamSettings};
use serde_json::{json, Value};

use crate::args::EventsArgs;
use crate::call::CallSpec;
use crate::runner::{ms_since, Runner, StreamEnd};
use crate::{config, events};

/// Runs the stream; returns the exit status.
pub fn run(args: EventsArgs) -> u8 {
    let t0 = Instant::now();
    let spec = match CallSpec::from_args(&args.call, &args.path) {
        Ok(s) => s,
        Err(e) => return crate::usage_error(&e),
    };
    let settings = settings(&args);
    if let Err(e) = settings.validate() {
        return crate::usage_error(&e.to_string());
    }
    let config = match config::resolve(&args.client) {
        Ok(c) => c,
        Err(e) => return crate::usage_error(&e),
    };
    let observe = args.client.events;
    let runner = match Runner::new(
        args.client.runtime,
        config,
        observe.then(|| events::stderr_sink(t0)),
    ) {
        Ok(r) => r,
        Err(e) => return crate::usage_error(&e),
    };
    let notices: Option<NoticeSink> =
        observe.then(|| Arc::new(move |n: &Notice| stderr_line(&notice_json(n, t0))) as _);
    let mut out = std::io::stdout().lock();
    let mut delivered = 0u64;
    let max = args.max_events;
    let end = runner.events(&spec, settings, notices, &mut |item| match item {
        StreamItem::Event { endpoint, event } => {
            let line = json!({"endpoint": &*endpoint, "id": event.id, "event": event.event, "data": event.data});
            if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
                return Err(23);
            }
            delivered += 1;
            Ok(max.is_none_or(|m| delivered < m))
        }
        StreamItem::Restarted { endpoint } => {
            if observe {
                let t = ms_since(t0, Instant::now());
                stderr_line(&json!({"t_ms": t, "event": "stream_restarted", "endpoint": &*endpoint}));
            }
            Ok(true)
        }
        _ => Ok(true),
    });
    match end {
        StreamEnd::Ended => 0,
        StreamEnd::Stopped(code) => code,
        StreamEnd::Stream { error, cause } => {
            match cause {
                Some(cause) => eprintln!("baton: {error}: {cause}"),
                None => eprintln!("baton: {error}"),
            }
            exit_for(&error)
        }
        StreamEnd::Rejected(message) => crate::usage_error(&message),
    }
}

fn settings(args: &EventsArgs) -> StreamSettings {
    let d = StreamSettings::default();
    StreamSettings {
        shared_event_ids: args.shared_event_ids,
        idle_timeout: args.idle_timeout,
        max_reconnects: args.max_reconnects.unwrap_or(d.max_reconnects),
        reconnects_per_endpoint: args
            .reconnects_per_endpoint
            .unwrap_or(d.reconnects_per_endpoint),
        max_event_size: args.max_event_size.unwrap_or(d.max_event_size),
        ..d
    }
}

/// The exit status of a stream that ended with an error (see `--help`).
fn exit_for(e: &StreamError) -> u8 {
    match e {
        StreamError::GaveUp { .. } => 3,
        // As `request`'s retry_after_too_long.
        StreamError::RetryAfterTooLong { .. } => 6,
        StreamError::Fatal { .. } => 9,
        StreamError::Interrupted { .. } => 10,
        StreamError::EventTooLarge { .. } => 11,
        _ => 1,
    }
}

fn stderr_line(v: &Value) {
    let line = format!("{v}\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

fn reason_fields(r: &Reason) -> (&'static str, Value) {
    match r {
        Reason::Ended => ("ended", Value::Null),
        Reason::Broken => ("broken", Value::Null),
        Reason::Idle => ("idle", Value::Null),
        Reason::Status(s) => ("status", s.as_u16().into()),
        Reason::Unreachable => ("unreachable", Value::Null),
        _ => ("other", Value::Null),
    }
}

/// The JSON line of one stream notice.
fn notice_json(n: &Notice, t0: Instant) -> Value {
    let t = ms_since(t0, Instant::now());
    match n {
        Notice::Opened {
            endpoint,
            last_event_id,
        } => {
            json!({"t_ms": t, "event": "stream_opened", "endpoint": &**endpoint, "last_event_id": last_event_id})
        }
        Notice::Reconnecting {
            from,
            to,
            after,
            reason,
            failover,
        } => {
            let (reason, status) = reason_fields(reason);
            json!({
                "t_ms": t, "event": "stream_reconnecting",
                "from": from.as_deref(), "to": to.as_deref(),
                "after_ms": events::millis(*after), "reason": reason, "status": status,
                "failover": failover,
            })
        }
        other => json!({"t_ms": t, "event": "other", "debug": format!("{other:?}")}),
    }
}
