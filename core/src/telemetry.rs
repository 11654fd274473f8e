//! Metrics from the engine's events, through the [`metrics`] facade (feature `metrics`):
//! every adapter records them, to whichever recorder the application installed (a
//! Prometheus exporter, OpenTelemetry, ...). Without the feature none of this is compiled.
//!
//! | name | kind | labels |
//! |---|---|---|
//! | `http.client.request.duration` (s) | histogram, per attempt | `http.request.method`, `server.address`, `server.port`, `http.response.status_code` or `error.type`, `http.request.resend_count` (from the second attempt), `baton.endpoint` |
//! | `baton.call.duration` (s) | histogram, per call | `http.request.method`, `baton.stop_reason` |
//! | `baton.call.attempts` | histogram, per call | `http.request.method`, `baton.stop_reason` |
//! | `baton.failovers` | counter | `baton.endpoint` (from), `baton.to` |
//! | `baton.budget.refusals` | counter | `baton.endpoint` |
//! | `baton.rate_limit.waits` | counter | `baton.endpoint` |
//! | `baton.breaker.transitions` | counter | `baton.endpoint`, `baton.from`, `baton.to` |
//! | `baton.breaker.state` | gauge (0 closed, 1 half-open, 2 open) | `baton.endpoint` |
//!
//! The first names and labels follow the OpenTelemetry HTTP client conventions. Labels are
//! bounded: endpoint ids, hosts and ports of the policy's endpoints, methods, statuses and
//! failure classes; never a URL path, a query or a request id. A custom method is
//! labelled `_OTHER`, as the conventions ask.

use std::time::Instant;

use std::sync::Arc;

use ::metrics::{counter, gauge, histogram, Label, SharedString};
use http::Method;

use crate::event::{Event, EventKind};
use crate::policy::Policy;
use crate::report::AttemptResult;
use crate::BreakerState;

/// Records what `event` of a call of `method` (started at `start`) measures.
pub(crate) fn record(policy: &Policy, method: &Method, start: Instant, event: &Event<'_>) {
    if policy.metric_labels.is_none() {
        return;
    }
    match &event.kind {
        EventKind::AttemptFinished {
            endpoint,
            attempt,
            result,
            elapsed,
        } => attempt_finished(policy, method, endpoint, *attempt, *result, elapsed),
        EventKind::Result {
            stop_reason,
            attempts,
            ..
        } => {
            let labels = [
                ("http.request.method", method_label(method)),
                ("baton.stop_reason", stop_reason.as_str()),
            ];
            let took = crate::time::since(event.at, start).as_secs_f64();
            histogram!("baton.call.duration", &labels).record(took);
            histogram!("baton.call.attempts", &labels).record(f64::from(*attempts));
        }
        EventKind::Failover { from, to, .. } => {
            let labels = [
                ("baton.endpoint", from.to_string()),
                ("baton.to", to.to_string()),
            ];
            counter!("baton.failovers", &labels).increment(1);
        }
        EventKind::BudgetRefused { endpoint } => {
            counter!("baton.budget.refusals", "baton.endpoint" => endpoint.to_string())
                .increment(1);
        }
        EventKind::RateLimited {
            endpoint,
            waiting: true,
            ..
        } => {
            counter!("baton.rate_limit.waits", "baton.endpoint" => endpoint.to_string())
                .increment(1);
        }
        EventKind::BreakerTransition { endpoint, from, to } => transition(endpoint, *from, *to),
        _ => {}
    }
}

/// Records a breaker transition (also those made outside calls: a reset, a circuit).
pub(crate) fn transition(endpoint: &str, from: BreakerState, to: BreakerState) {
    let labels = [
        ("baton.endpoint", endpoint.to_string()),
        ("baton.from", from.as_str().to_string()),
        ("baton.to", to.as_str().to_string()),
    ];
    counter!("baton.breaker.transitions", &labels).increment(1);
    let state = match to {
        BreakerState::Closed => 0.0,
        BreakerState::HalfOpen => 1.0,
        BreakerState::Open => 2.0,
    };
    gauge!("baton.breaker.state", "baton.endpoint" => endpoint.to_string()).set(state);
}

/// An endpoint's labels, made once when the policy is built: recording an attempt then
/// copies shared strings instead of formatting them.
#[derive(Debug, Clone)]
pub(crate) struct EndpointLabels {
    id: SharedString,
    address: SharedString,
    port: SharedString,
}

/// The labels of every endpoint, by index.
pub(crate) fn endpoint_labels(endpoints: &[crate::Endpoint]) -> Vec<EndpointLabels> {
    let shared = |s: String| SharedString::from(Arc::<str>::from(s));
    endpoints
        .iter()
        .map(|e| {
            let uri = e.uri();
            let default_port = if uri.scheme_str() == Some("http") {
                80
            } else {
                443
            };
            EndpointLabels {
                id: shared(e.id().to_owned()),
                address: shared(uri.host().unwrap_or("").to_owned()),
                port: shared(uri.port_u16().unwrap_or(default_port).to_string()),
            }
        })
        .collect()
}

fn attempt_finished(
    policy: &Policy,
    method: &Method,
    endpoint: &str,
    attempt: u32,
    result: AttemptResult,
    elapsed: &std::time::Duration,
) {
    let Some(l) = policy
        .endpoint_index(endpoint)
        .and_then(|i| policy.metric_labels.as_ref()?.get(i))
    else {
        return;
    };
    let mut labels = Vec::with_capacity(6);
    labels.push(Label::new("http.request.method", method_label(method)));
    labels.push(Label::new("server.address", l.address.clone()));
    labels.push(Label::new("server.port", l.port.clone()));
    labels.push(Label::new("baton.endpoint", l.id.clone()));
    match result {
        AttemptResult::Response(status) | AttemptResult::AfterRedirect(status) => labels.push(
            Label::new("http.response.status_code", status.as_str().to_owned()),
        ),
        other => labels.push(Label::new("error.type", error_type(other))),
    }
    if attempt > 1 {
        labels.push(Label::new(
            "http.request.resend_count",
            (attempt - 1).to_string(),
        ));
    }
    histogram!("http.client.request.duration", labels).record(elapsed.as_secs_f64());
}

/// The OpenTelemetry method label: the method, or `_OTHER` for one it does not know.
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        Method::TRACE => "TRACE",
        Method::CONNECT => "CONNECT",
        _ => "_OTHER",
    }
}

/// A failed attempt's `error.type`: its failure class or timeout phase.
fn error_type(result: AttemptResult) -> &'static str {
    match result {
        AttemptResult::Failed(class) => class.as_str(),
        AttemptResult::TimedOut(crate::TimeoutPhase::Connect) => "connect_timeout",
        AttemptResult::TimedOut(_) => "timeout",
        AttemptResult::Deadline => "deadline",
        AttemptResult::Cancelled => "cancelled",
        AttemptResult::ReplayFailed => "replay_failed",
        AttemptResult::InFlight | AttemptResult::Response(_) | AttemptResult::AfterRedirect(_) => {
            "_OTHER"
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::sim::{Script, Sim};
    use crate::{CallOptions, Endpoint, Policy};
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};
    use metrics_util::MetricKind;
    use std::time::Instant;

    #[test]
    fn a_failover_records_attempts_the_call_and_the_counters_with_bounded_labels() {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        ::metrics::with_local_recorder(&recorder, || {
            let policy = Policy::builder()
                .endpoint(Endpoint::new("a", "https://a.example:8443/secret/path"))
                .endpoint(Endpoint::new("b", "http://b.example/"))
                .jitter(crate::Jitter::None)
                .build()
                .unwrap();
            let mut sim = Sim::new(policy, Instant::now());
            sim.script("a", Script::status(503));
            let run = sim.run(http::Method::GET, CallOptions::default());
            assert_eq!(run.endpoints_attempted(), ["a", "b"]);
        });
        let all = snapshotter.snapshot().into_vec();
        let find = |kind: MetricKind, name: &str| {
            all.iter()
                .filter(|(k, ..)| k.kind() == kind && k.key().name() == name)
                .map(|(k, _, _, v)| {
                    let labels: Vec<String> = k
                        .key()
                        .labels()
                        .map(|l| format!("{}={}", l.key(), l.value()))
                        .collect();
                    (labels, v)
                })
                .collect::<Vec<_>>()
        };
        let attempts = find(MetricKind::Histogram, "http.client.request.duration");
        assert_eq!(attempts.len(), 2, "{attempts:?}");
        let first = attempts
            .iter()
            .find(|(l, _)| l.contains(&"baton.endpoint=a".into()))
            .unwrap();
        for want in [
            "http.request.method=GET",
            "server.address=a.example",
            "server.port=8443",
            "http.response.status_code=503",
        ] {
            assert!(first.0.contains(&want.to_string()), "{want}: {:?}", first.0);
        }
        let second = attempts
            .iter()
            .find(|(l, _)| l.contains(&"baton.endpoint=b".into()))
            .unwrap();
        assert!(second
            .0
            .contains(&"http.request.resend_count=1".to_string()));
        assert!(second.0.contains(&"server.port=80".to_string()));
        let text = format!("{all:?}");
        assert!(
            !text.contains("secret"),
            "a URL path reached a label: {text}"
        );
        let calls = find(MetricKind::Histogram, "baton.call.attempts");
        assert_eq!(calls.len(), 1);
        assert!(
            matches!(&calls[0].1, DebugValue::Histogram(v) if v.len() == 1 && v[0].into_inner() == 2.0)
        );
        let failovers = find(MetricKind::Counter, "baton.failovers");
        assert!(
            matches!(failovers[..], [(_, DebugValue::Counter(1))]),
            "{failovers:?}"
        );
    }

    #[test]
    fn breaker_transitions_count_and_set_the_state_gauge() {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        ::metrics::with_local_recorder(&recorder, || {
            let policy = Policy::builder()
                .endpoint(Endpoint::new("a", "https://a.example/"))
                .build()
                .unwrap();
            let engine = crate::Engine::new(policy);
            let circuit = engine.circuit("a").unwrap();
            let now = Instant::now();
            for _ in 0..3 {
                circuit.allow(now).unwrap().failure(now);
            }
        });
        let all = snapshotter.snapshot().into_vec();
        let gauge = all
            .iter()
            .find(|(k, ..)| k.key().name() == "baton.breaker.state")
            .map(|(.., v)| v);
        assert!(
            matches!(gauge, Some(DebugValue::Gauge(g)) if g.into_inner() == 2.0),
            "{gauge:?}"
        );
        assert!(all
            .iter()
            .any(|(k, ..)| k.key().name() == "baton.breaker.transitions"));
    }
}
