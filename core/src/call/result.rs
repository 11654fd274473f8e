//! What the call returns (SPEC 2.10): the first usable answer; else the retained
//! triggering response when no later attempt may have executed or repeating is harmless;
//! else an error, carrying the retained response. The report is built once, when the
//! result is handed out, by moving the history into it.

use std::time::Instant;

use super::history::Kept;
use super::surface::Done;
use super::{Call, Phase, Stop};
use crate::event::EventKind;
use crate::permission::Permission;
use crate::report::{ErrorKind, Outcome, Report, StopReason};
use crate::time::since;

/// A finished call, waiting to be handed out.
pub(crate) struct Ending<R> {
    reason: StopReason,
    outcome: Outcome,
    result: Result<R, (ErrorKind, Option<R>)>,
    at: Instant,
    may_have_executed: bool,
}

impl<R> Call<'_, R> {
    /// Ends the call with the first usable answer.
    pub(super) fn answer(&mut self, kept: Kept<R>, success: bool, now: Instant) {
        let outcome = Outcome::Response {
            attempt: kept.attempt,
            endpoint: kept.endpoint,
            status: kept.status,
            retained: false,
            classified_success: success,
        };
        self.phase =
            Phase::Finished(self.finish(now, StopReason::Answered, outcome, Ok(kept.response)));
    }

    /// Ends the call for `stop`, with the retained response when SPEC 2.10 allows.
    pub(super) fn stop(&mut self, now: Instant, stop: Stop) {
        if !self.is_done() {
            self.phase = Phase::Finished(self.ending(now, stop));
        }
    }

    /// How the call ends for `stop` (reported with the result event).
    pub(super) fn ending(&mut self, now: Instant, stop: Stop) -> Ending<R> {
        let (reason, kind) = match stop {
            Stop::RetryAfter(d) => (
                StopReason::RetryAfterTooLong,
                ErrorKind::RetryAfterTooLong(d),
            ),
            Stop::UnknownEndpoint(id) => {
                (StopReason::UnknownEndpoint, ErrorKind::UnknownEndpoint(id))
            }
            Stop::Invalid(why) => (StopReason::InvalidCall, ErrorKind::InvalidCall(why)),
            Stop::Reason(r) => {
                let kind = match r {
                    StopReason::Deadline => ErrorKind::Deadline,
                    StopReason::Budget => ErrorKind::Budget,
                    StopReason::RateLimited => ErrorKind::RateLimited,
                    StopReason::Cancelled => ErrorKind::Cancelled,
                    StopReason::NoUsableEndpoint if self.history.records.is_empty() => {
                        ErrorKind::NoUsableEndpoint
                    }
                    _ => ErrorKind::Failover,
                };
                (r, kind)
            }
        };
        let (outcome, result) = match self.history.kept.take() {
            None => (
                Outcome::Error {
                    kind: kind.clone(),
                    retained: None,
                },
                Err((kind, None)),
            ),
            Some(r) if self.may_return_retained(&r, &kind) => {
                let outcome = Outcome::Response {
                    attempt: r.attempt,
                    endpoint: r.endpoint,
                    status: r.status,
                    retained: true,
                    classified_success: false,
                };
                (outcome, Ok(r.response))
            }
            Some(r) => (
                Outcome::Error {
                    kind: kind.clone(),
                    retained: Some(r.attempt),
                },
                Err((kind, Some(r.response))),
            ),
        };
        self.finish(now, reason, outcome, result)
    }

    /// A retained response is the answer unless the provider asked to wait too long, the
    /// call is invalid, or a later attempt may have executed and repeating is not harmless.
    fn may_return_retained(&self, kept: &Kept<R>, kind: &ErrorKind) -> bool {
        if matches!(
            kind,
            ErrorKind::RetryAfterTooLong(_) | ErrorKind::InvalidCall(_)
        ) {
            return false;
        }
        let executed_later = self
            .history
            .executed_count(&self.engine.policy.settings.not_processed)
            > kept.executed_before;
        !executed_later || self.class.perms.failover == Permission::Always
    }

    fn finish(
        &mut self,
        now: Instant,
        reason: StopReason,
        outcome: Outcome,
        result: Result<R, (ErrorKind, Option<R>)>,
    ) -> Ending<R> {
        self.schedule.hedge_at = None;
        let may_have_executed = self
            .history
            .executed(&self.engine.policy.settings.not_processed)
            .0
            != 0;
        let status = match &outcome {
            Outcome::Response { status, .. } => Some(*status),
            Outcome::Error { .. } => None,
        };
        self.emit(
            now,
            EventKind::Result {
                stop_reason: reason,
                status,
                may_have_executed,
                attempts: self.history.made(),
            },
        );
        Ending {
            reason,
            outcome,
            result,
            at: now,
            may_have_executed,
        }
    }

    /// Builds the result from the ending, moving the history into the report.
    pub(super) fn hand_out(&mut self, ending: Ending<R>) -> Done<R> {
        let report = Report {
            request_id: self.class.identity.request_id,
            idempotency_key: self.class.identity.key.clone(),
            attempts: std::mem::take(&mut self.history.records),
            redirects: std::mem::take(&mut self.history.redirects),
            elapsed: since(ending.at, self.start),
            stop_reason: ending.reason,
            may_have_executed: ending.may_have_executed,
            outcome: ending.outcome,
        };
        match ending.result {
            Ok(response) => Done::Answer { response, report },
            Err((kind, retained)) => Done::Error {
                kind,
                retained,
                report,
            },
        }
    }
}
