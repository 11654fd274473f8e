//! The `batch` output line.
//!
//! `{"id", "request_id", "status", "endpoint", "attempts": [{"endpoint", "outcome",
//! "status", "elapsed_ms", "http_version", "credential_refused"}], "error": null | {"kind", "message"}, "stop_reason",
//! "may_have_executed", "elapsed_ms", "body"}`, plus `"redirects": [{"attempt", "status",
//! "from", "to", "cross_origin"}]` when an attempt followed redirects (URLs as
//! `scheme://host:port` only). `http_version` is the protocol of the attempt's response
//! as ALPN names it (`"http/1.1"`, `"h2"`; null without a response). `credential_refused`
//! is true when the endpoint refused its credential after the attempt's own refresh (it
//! got no further attempt in the call). `status` and
//! `endpoint` are those of the
//! returned response (null when the call returned none); `body` is the response body as
//! text, or null; a body that is not valid UTF-8 is null there and given whole as
//! `body_base64` (standard base64, padded). Times are milliseconds (fractions
//! allowed).

use baton_core::Origin;
use serde_json::{json, Value};

use crate::call::CallResult;
use crate::events::millis;

/// An HTTP version as ALPN names it: `http/1.0`, `http/1.1`, `h2`, `h3`.
pub fn version_name(v: http::Version) -> &'static str {
    match v {
        http::Version::HTTP_09 => "http/0.9",
        http::Version::HTTP_10 => "http/1.0",
        http::Version::HTTP_2 => "h2",
        http::Version::HTTP_3 => "h3",
        _ => "http/1.1",
    }
}

/// The output line of one batch call.
pub fn batch_line(id: &Value, r: &CallResult) -> Value {
    let attempts: Vec<Value> = r.report.as_ref().map_or_else(Vec::new, |rep| {
        rep.attempts
            .iter()
            .map(|a| {
                json!({
                    "endpoint": &*a.endpoint_id,
                    "outcome": a.result.as_str(),
                    "status": a.result.status().map(|s| s.as_u16()),
                    "elapsed_ms": millis(a.elapsed),
                    "http_version": a.http_version.map(version_name),
                    "credential_refused": a.credential_refused,
                })
            })
            .collect()
    });
    let error = r.failure.as_ref().map_or(
        Value::Null,
        |f| json!({ "kind": f.kind, "message": f.message }),
    );
    let mut line = json!({
        "id": id,
        "request_id": r
            .report
            .as_ref()
            .map(|rep| rep.request_id.as_str().to_string())
            .or_else(|| r.request_id.clone()),
        "status": r.response.as_ref().map(|h| h.status),
        "endpoint": r.response.as_ref().map(|h| h.endpoint.clone()),
        "attempts": attempts,
        "error": error,
        "stop_reason": r.report.as_ref().map_or("invalid_call", |rep| rep.stop_reason.as_str()),
        "may_have_executed": r.report.as_ref().is_some_and(|rep| rep.may_have_executed),
        "elapsed_ms": r.report.as_ref().map_or(json!(0.0), |rep| millis(rep.elapsed)),
        "body": null,
    });
    // Text when it is UTF-8; otherwise every byte in base64 under `body_base64`.
    if let Some(b) = &r.body {
        match std::str::from_utf8(b) {
            Ok(text) => line["body"] = Value::from(text),
            Err(_) => {
                line["body_base64"] = Value::from(crate::body::base64(b));
            }
        }
    }
    let redirects: Vec<Value> = r.report.as_ref().map_or_else(Vec::new, |rep| {
        rep.redirects
            .iter()
            .map(|h| {
                json!({
                    "attempt": h.attempt,
                    "status": h.status.as_u16(),
                    "from": Origin(&h.from).to_string(),
                    "to": Origin(&h.to).to_string(),
                    "cross_origin": h.cross_origin,
                })
            })
            .collect()
    });
    if !redirects.is_empty() {
        line["redirects"] = Value::Array(redirects);
    }
    line
}

/// The output line of a call that panicked: nothing is known about what it sent, so it
/// may have executed.
pub fn panic_line(id: &Value, request_id: Option<&str>) -> Value {
    json!({
        "id": id,
        "request_id": request_id,
        "status": null,
        "endpoint": null,
        "attempts": [],
        "error": {"kind": "internal", "message": "the call panicked (a bug in baton); it may have executed"},
        "stop_reason": "internal",
        "may_have_executed": true,
        "elapsed_ms": 0.0,
        "body": null,
    })
}

/// One probe's result as JSON: the endpoint, whether it was healthy, its status or the
/// error, and the breaker state after it.
pub fn probe_json(r: &baton_core::ProbeResult) -> Value {
    json!({
        "endpoint": r.endpoint,
        "healthy": r.healthy,
        "status": r.status.map(|s| s.as_u16()),
        "error": r.error,
        "state": r.state.as_str(),
    })
}

/// The output line of a batch `{"probe": "due"}` line.
pub fn probe_line(id: &Value, results: &[baton_core::ProbeResult]) -> Value {
    let results: Vec<Value> = results.iter().map(probe_json).collect();
    json!({ "id": id, "probe": "due", "results": results })
}
