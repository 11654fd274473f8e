//! Forwarding the engine's events to `tracing` (behind the `tracing` feature). The engine
//! delivers events synchronously, in causal order per call; this only maps each one to a
//! `tracing` event (target `baton`) with the request id as a field.

use baton_core::{Event, EventKind};

/// Emits `e` as a `tracing` event: warnings for breaker transitions, budget refusals,
/// replay failures and failed calls; debug for everything else.
pub(crate) fn trace(e: &Event<'_>) {
    let id = e.request_id;
    match &e.kind {
        EventKind::BreakerTransition { endpoint, from, to } => tracing::warn!(
            target: "baton",
            request_id = id,
            endpoint = *endpoint,
            from = from.as_str(),
            to = to.as_str(),
            "breaker transition"
        ),
        EventKind::BudgetRefused { endpoint } => tracing::warn!(
            target: "baton",
            request_id = id,
            endpoint = *endpoint,
            "retry budget refused an attempt"
        ),
        EventKind::ReplayFailed { attempt } => tracing::warn!(
            target: "baton",
            request_id = id,
            attempt = *attempt,
            "request body could not be replayed"
        ),
        EventKind::Result {
            stop_reason,
            status: None,
            may_have_executed,
            attempts,
        } => tracing::warn!(
            target: "baton",
            request_id = id,
            stop_reason = stop_reason.as_str(),
            may_have_executed = *may_have_executed,
            attempts = *attempts,
            "call failed"
        ),
        other => tracing::debug!(target: "baton", request_id = id, event = ?other, "baton event"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn every_kind_maps_without_a_subscriber() {
        let now = Instant::now();
        for kind in [
            EventKind::NotReplayable,
            EventKind::BudgetRefused { endpoint: "a" },
            EventKind::ReplayFailed { attempt: 2 },
        ] {
            trace(&Event {
                request_id: "abcdefgh",
                idempotency_key: None,
                at: now,
                kind,
            });
        }
    }
}
