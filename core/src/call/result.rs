//! What the call returns (SPEC 2.10): the first usable answer; else the retained
//! triggering response when no later attempt may have executed or repeating is harmless;
//! else an error, carrying the retained response. The report is built once, when the
//! result is handed out, by moving the history into it.

use std::time::{Duration, Instant};

use smallvec::SmallVec;

use super::history::Kept;
use super::surface::Done;
use super::{Call, Phase, Stop};
use crate::event::EventKind;
use crate::id::RequestId;
use crate::permission::Permission;
use crate::report::{ErrorKind, Outcome, Report, StopReason};
use crate::time::since;

/// A finished call, waiting to be handed out. The response it returns (the answer, or the
/// retained one) stays in the history's `kept` until then.
pub(crate) struct Ending {
    reason: StopReason,
    /// `None`: the kept response is the result. Boxed: only failed calls carry one, and the
    /// call stays small on the healthy path.
    error: Option<Box<ErrorKind>>,
    /// The kept response is returned although it triggered (SPEC 2.10).
    retained: bool,
    /// The classifier called the answer a success.
    success: bool,
    /// From the call's start to its end.
    elapsed: Duration,
    may_have_executed: bool,
}

impl Ending {
    /// Moves the ending out, field by field.
    pub(super) fn take(&mut self) -> Ending {
        Ending {
            reason: self.reason,
            error: self.error.take(),
            retained: self.retained,
            success: self.success,
            elapsed: self.elapsed,
            may_have_executed: self.may_have_executed,
        }
    }
}

impl<R> Call<'_, R> {
    /// Ends the call with the first usable answer (kept already), which arrived `elapsed`
    /// after the call started.
    pub(super) fn answer(&mut self, success: bool, now: Instant, elapsed: Duration) {
        let ending = self.finish(now, elapsed, StopReason::Answered, None, success);
        self.phase = Phase::Finished(ending);
    }

    /// Ends the call for `stop`, with the retained response when SPEC 2.10 allows.
    pub(super) fn stop(&mut self, now: Instant, stop: Stop) {
        if !self.is_done() {
            self.phase = Phase::Finished(self.ending(now, stop));
        }
    }

    /// How the call ends for `stop` (reported with the result event). Cold: a healthy
    /// call ends with [`answer`](Self::answer).
    #[cold]
    pub(super) fn ending(&mut self, now: Instant, stop: Stop) -> Ending {
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
        let returned = matches!(&self.history.kept, Some(r) if self.may_return_retained(r, &kind));
        let error = (!returned).then(|| Box::new(kind));
        let mut ending = self.finish(now, since(now, self.start), reason, error, false);
        ending.retained = returned;
        ending
    }

    /// The ending of a result taken a second time: the first take moved the response and
    /// the id out, so this one is a `Cancelled` error with the same attempts. No event: the
    /// call's result was reported once, when it ended.
    #[cold]
    pub(super) fn taken_again(&self) -> Ending {
        let not_processed = &self.engine.policy.settings.not_processed;
        Ending {
            reason: StopReason::Cancelled,
            error: Some(Box::new(ErrorKind::Cancelled)),
            retained: false,
            success: false,
            elapsed: since(self.now, self.start),
            may_have_executed: self.history.executed(not_processed).0 != 0,
        }
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
        elapsed: Duration,
        reason: StopReason,
        error: Option<Box<ErrorKind>>,
        success: bool,
    ) -> Ending {
        self.schedule.hedge_at = None;
        let may_have_executed = self
            .history
            .executed(&self.engine.policy.settings.not_processed)
            .0
            != 0;
        let status = match (&error, &self.history.kept) {
            (None, Some(kept)) => Some(kept.status),
            _ => None,
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
            error,
            retained: false,
            success,
            elapsed,
            may_have_executed,
        }
    }

    /// Builds the result from the ending, moving the history into the report. An ending
    /// without an error always has a kept response (made only by [`Call::answer`] or with a
    /// retained response); were one ever missing, the call fails as a failover rather than
    /// inventing a response.
    pub(super) fn hand_out(&mut self, ending: Ending) -> Done<R> {
        // The attempt records are written first, so that their stores are done by the time
        // the report copies them; the result is then written straight where it is returned
        // (built in a local and changed after, it was copied whole into the return slot,
        // and the copy waited on the records' stores).
        let mut attempts = SmallVec::new();
        let refusal = |e, s| self.is_credential_refusal(e, s);
        self.history
            .report_records(&self.engine.ids, refusal, &mut attempts);
        macro_rules! report {
            ($outcome:expr) => {
                Report {
                    request_id: std::mem::replace(
                        &mut self.class.identity.request_id,
                        RequestId::taken(),
                    ),
                    // Taken only when there is something to take: a `None` or an empty
                    // list is written as it is, where a taken one is copied aside first
                    // and its copy into the result waits on that copy.
                    idempotency_key: match self.class.identity.key {
                        Some(_) => self.class.identity.key.take(),
                        None => None,
                    },
                    attempts,
                    redirects: match self.history.redirects.is_empty() {
                        true => Vec::new(),
                        false => std::mem::take(&mut self.history.redirects),
                    },
                    elapsed: ending.elapsed,
                    stop_reason: ending.reason,
                    may_have_executed: ending.may_have_executed,
                    outcome: $outcome,
                }
            };
        }
        match (ending.error, self.history.kept.take()) {
            (None, Some(k)) => Done::Answer {
                report: report!(Outcome::Response {
                    attempt: k.attempt,
                    endpoint: usize::from(k.endpoint),
                    status: k.status,
                    retained: ending.retained,
                    classified_success: ending.success,
                }),
                response: k.response,
            },
            (error, kept) => {
                let kind = error.map_or(ErrorKind::Failover, |k| *k);
                Done::Error {
                    report: report!(Outcome::Error {
                        kind: kind.clone(),
                        retained: kept.as_ref().map(|k| k.attempt),
                    }),
                    kind,
                    retained: kept.map(|k| k.response),
                }
            }
        }
    }
}
