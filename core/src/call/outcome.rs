//! An attempt ended: what its outcome means for the record (SPEC 1: executed, ambiguous,
//! the deadline's cut), for the endpoint's health (SPEC 2.5: a breaker failure, a
//! `Retry-After` cooldown, a probe result), and for the call (answer, retain, or plan the
//! next attempt).

use std::time::{Duration, SystemTime};

use http::StatusCode;

use super::history::{Flight, Kept};
use super::surface::{Answer, AttemptOutcome};
use super::trigger::{self, Trigger};
use super::{Call, Stop};
use crate::event::EventKind;
use crate::health::{Record, Transitions};
use crate::policy::ResponseView;
use crate::redirect::Redirect;
use crate::report::{AttemptResult, CallRejection, FailureClass, StopReason, TimeoutPhase};
use crate::retry_after::retry_after_from_headers;
use crate::time::add;

/// How early a timer clipped to the deadline may fire and still be read as the deadline's
/// cut: a timer rounded down to whole milliseconds (ureq's), and a socket timeout, which
/// the kernel counts in ticks (up to 10 ms early at 100 Hz). A real timeout of the
/// endpoint's own this close to the deadline leaves another attempt too little time.
const DEADLINE_CUT_SLACK: Duration = Duration::from_millis(20);

impl<R: Answer> Call<'_, R> {
    /// Response headers of attempt `number` arrived.
    pub(super) fn on_response(&mut self, number: u32, response: R, wall: Option<SystemTime>) {
        let Some(flight) = self.history.land(number) else {
            return;
        };
        let now = self.now;
        let endpoint = flight.endpoint as usize;
        let status = response.status();
        let elapsed = crate::time::since(now, flight.started);
        if let Some(version) = response.version() {
            if let Some(rec) = self.history.record_mut(number) {
                rec.version = Some(version);
            }
        }
        // 502, 503 and 504 say the endpoint is struggling; any other answer is a success.
        let record = if matches!(status.as_u16(), 502..=504) {
            Record::Failure
        } else {
            Record::Success(elapsed)
        };
        let result = AttemptResult::Response(status);
        // The provider's Retry-After is written before the breaker hears of the answer: a
        // transition it causes (a third 503 opening it, a probe's 429 closing it) makes the
        // attempt's epoch stale, and the cooldown would be dropped as a stale outcome's.
        let retry_after = if status == StatusCode::TOO_MANY_REQUESTS
            || status == StatusCode::SERVICE_UNAVAILABLE
        {
            self.cool_down(&flight, response.headers(), wall)
        } else {
            None
        };
        self.ended(&flight, result, record, elapsed);
        if self.is_done() {
            return;
        }
        self.schedule.retry_after = retry_after;
        let verdict = match &self.engine.policy.classify {
            Some(f) => self.verdict(f, endpoint, &response),
            None => None,
        };
        // The response is moved once, straight to where the call keeps it: a copy of a
        // copy waits on the stores that wrote the first (measured with `healthy_calls`).
        let kept = |response| Kept {
            attempt: number,
            endpoint: flight.endpoint,
            status,
            response,
            executed_before: 0,
        };
        match trigger::response(status, verdict, &self.class, &self.engine.policy.settings) {
            Trigger::No { success } => {
                self.cancel_in_flight(now, AttemptResult::Cancelled);
                // A newer response replaces an older one; the older is closed (dropped).
                self.history.kept = Some(kept(response));
                // The first attempt started with the call: its time is the call's.
                let call_elapsed = if flight.started == self.start {
                    elapsed
                } else {
                    crate::time::since(now, self.start)
                };
                self.answer(success, now, call_elapsed);
            }
            Trigger::Yes => self.keep_and_go_on(kept(response), &flight),
        }
    }

    /// A response that calls for another attempt: kept (it may be returned if nothing
    /// better comes, SPEC 2.10), and the next attempt planned. Out of line: a healthy
    /// call's answer does not trigger.
    #[cold]
    #[inline(never)]
    fn keep_and_go_on(&mut self, mut kept: Kept<R>, flight: &Flight) {
        let not_processed = &self.engine.policy.settings.not_processed;
        kept.executed_before = self.history.executed_count(not_processed);
        self.history.kept = Some(kept);
        self.after_trigger(flight, false);
    }

    /// The policy's classify function's verdict on a response from `endpoint`. Out of
    /// line: most policies have none.
    #[inline(never)]
    fn verdict(
        &self,
        classify: &crate::policy::ClassifyFn,
        endpoint: usize,
        response: &R,
    ) -> Option<crate::policy::Verdict> {
        classify(&ResponseView {
            method: &self.class.method,
            endpoint: &self.engine.policy.endpoints[endpoint],
            status: response.status(),
            headers: response.headers(),
            // This attempt's own record is a response: never ambiguous.
            earlier_ambiguous: self.history.any_ambiguous(),
            body: response.body().filter(|b| {
                let limit = self.engine.policy.settings.classify_body;
                limit > 0 && b.len() <= limit
            }),
        })
    }

    /// Attempt `number` ended without a response.
    // Out of line: `handle` keeps only a response's path, so that a healthy call's code
    // in it sits on as few lines and pages as it can.
    #[inline(never)]
    pub(super) fn on_failure(&mut self, number: u32, outcome: AttemptOutcome) {
        let Some(flight) = self.history.land(number) else {
            return;
        };
        let outcome = self.after_redirects(number, outcome);
        let deadline_hit = self.deadline_passed() || self.deadline_cut(&flight, outcome);
        let (result, record) = judge(outcome, deadline_hit);
        let elapsed = crate::time::since(self.now, flight.started);
        self.ended(&flight, result, record, elapsed);
        if self.is_done() {
            return;
        }
        self.schedule.retry_after = None;
        if outcome == AttemptOutcome::Failure(FailureClass::RejectedLocally) {
            self.cancel_in_flight(self.now, AttemptResult::Cancelled);
            self.stop(self.now, Stop::Invalid(CallRejection::NotBuilt));
            return;
        }
        self.after_trigger(&flight, deadline_hit);
    }

    /// The attempt triggered: stop at the deadline, or plan the next attempt.
    fn after_trigger(&mut self, flight: &Flight, deadline_hit: bool) {
        let now = self.now;
        if deadline_hit || self.deadline_passed() {
            self.cancel_in_flight(now, AttemptResult::Deadline);
            self.stop(now, Stop::Reason(StopReason::Deadline));
            return;
        }
        self.schedule_next(flight.endpoint as usize, now);
    }

    /// A `Retry-After` on a 429 or 503 cools the endpoint down (separately from its
    /// breaker); the endpoint and the delay asked decide the wait before a retry there.
    #[cold]
    #[inline(never)]
    fn cool_down(
        &self,
        flight: &Flight,
        headers: &http::HeaderMap,
        wall: Option<SystemTime>,
    ) -> Option<(usize, Duration)> {
        let d = retry_after_from_headers(headers, wall)?;
        let endpoint = flight.endpoint as usize;
        let capped = d.min(self.engine.policy.settings.max_retry_after);
        self.engine
            .health
            .set_not_before(endpoint, add(self.now, capped), flight.ticket.epoch);
        Some((endpoint, d))
    }
}

impl<R> Call<'_, R> {
    fn deadline_passed(&self) -> bool {
        self.class.deadline.is_some_and(|d| self.now >= d)
    }

    /// Whether a timeout is the deadline's cut though the deadline has not quite passed:
    /// the attempt's timer may have been clipped to the deadline and fired a little early,
    /// less than [`DEADLINE_CUT_SLACK`] before it (SPEC 2.6). A timeout with more time left
    /// is a timer of the endpoint's own (its connect timeout, shorter than the time left):
    /// it triggers and counts, as before any deadline.
    fn deadline_cut(&self, flight: &Flight, outcome: AttemptOutcome) -> bool {
        flight.clipped
            && matches!(outcome, AttemptOutcome::Timeout(_))
            && (self.class.deadline)
                .is_some_and(|d| crate::time::since(d, self.now) < DEADLINE_CUT_SLACK)
    }

    /// Records how a landed attempt ended and tells the endpoint's health; events in causal
    /// order: the attempt ended, the probe result, then what it did to the breaker.
    fn ended(&mut self, flight: &Flight, result: AttemptResult, record: Record, elapsed: Duration) {
        let now = self.now;
        let endpoint = flight.endpoint as usize;
        let not_processed = &self.engine.policy.settings.not_processed;
        let result = self.history.close(flight, result, elapsed, not_processed);
        self.history.last = Some((endpoint as u8, result));
        let mut transitions = Transitions::new();
        let probe =
            self.engine
                .health
                .finish(endpoint, flight.ticket, record, now, &mut transitions);
        if !self.has_sink() {
            return;
        }
        let id = &self.engine.ids[endpoint];
        self.emit(
            now,
            EventKind::AttemptFinished {
                endpoint: id,
                attempt: flight.number,
                result,
                elapsed,
            },
        );
        if let Some(success) = probe {
            self.emit(
                now,
                EventKind::ProbeResult {
                    endpoint: id,
                    success,
                },
            );
        }
        self.report_transitions(endpoint, now, &transitions);
    }

    /// An outcome of an attempt that followed a redirect: the endpoint answered, so a
    /// later failure can never prove that nothing was done. A hop the client refused to
    /// build is no invalid call either: its first request was sent and answered.
    fn after_redirects(&self, number: u32, outcome: AttemptOutcome) -> AttemptOutcome {
        if !self.history.redirected(number) {
            return outcome;
        }
        match outcome {
            AttemptOutcome::Failure(
                FailureClass::Undelivered | FailureClass::Untrusted | FailureClass::RejectedLocally,
            ) => AttemptOutcome::Failure(FailureClass::Ambiguous),
            AttemptOutcome::Timeout(TimeoutPhase::Connect) => {
                AttemptOutcome::Timeout(TimeoutPhase::Response)
            }
            other => other,
        }
    }

    /// Records the redirects attempt `number` followed (SPEC 3), each with an event.
    /// Redirects of an attempt that is not in flight are ignored.
    #[inline(never)]
    pub(super) fn on_redirects(&mut self, number: u32, redirects: Vec<Redirect>) {
        let Some(flight) = self.history.flights.iter().find(|f| f.number == number) else {
            return;
        };
        let endpoint = flight.endpoint as usize;
        for r in redirects.into_iter().filter(|r| r.attempt == number) {
            self.emit(
                self.now,
                EventKind::Redirected {
                    endpoint: &self.engine.ids[endpoint],
                    redirect: &r,
                },
            );
            self.history.redirects.push(r);
        }
    }

    /// No copy of the body could be made for attempt `number`: no later attempt can be
    /// made (every endpoint would need the copy); the call ends with what it has.
    #[inline(never)]
    pub(super) fn on_replay_failed(&mut self, number: u32) {
        let Some(flight) = self.history.land(number) else {
            return;
        };
        let now = self.now;
        let endpoint = flight.endpoint as usize;
        // An attempt that followed a redirect was sent and answered: a copy that failed
        // for a hop (adapters answer with the 3xx instead) proves nothing undone (SPEC 1).
        let result = if self.history.redirected(number) {
            AttemptResult::Failed(FailureClass::Ambiguous)
        } else {
            AttemptResult::ReplayFailed
        };
        if let Some(rec) = self.history.record_mut(number) {
            rec.result = result;
        }
        let mut transitions = Transitions::new();
        self.engine.health.finish(
            endpoint,
            flight.ticket,
            Record::Nothing,
            now,
            &mut transitions,
        );
        self.emit(now, EventKind::ReplayFailed { attempt: number });
        self.report_transitions(endpoint, now, &transitions);
        if self.is_done() {
            return;
        }
        self.body = super::BodyKind::OneShot;
        self.schedule.hedge_at = None;
        self.stop_or_wait(Stop::Reason(StopReason::ReplayFailed));
    }
}

/// The record and the breaker's reading of an attempt that ended without a response.
/// Cut short by the caller's deadline, it counts for nothing in health; a failure before
/// the connection was ready keeps its class (nothing was sent).
fn judge(outcome: AttemptOutcome, deadline_hit: bool) -> (AttemptResult, Record) {
    match outcome {
        AttemptOutcome::Failure(FailureClass::RejectedLocally) => (
            AttemptResult::Failed(FailureClass::RejectedLocally),
            Record::Nothing,
        ),
        AttemptOutcome::Failure(c @ (FailureClass::Undelivered | FailureClass::Untrusted))
            if deadline_hit =>
        {
            (AttemptResult::Failed(c), Record::Nothing)
        }
        AttemptOutcome::Timeout(TimeoutPhase::Connect) if deadline_hit => (
            AttemptResult::TimedOut(TimeoutPhase::Connect),
            Record::Nothing,
        ),
        _ if deadline_hit => (AttemptResult::Deadline, Record::Nothing),
        AttemptOutcome::Failure(c) => (AttemptResult::Failed(c), Record::Failure),
        AttemptOutcome::Timeout(p) => (AttemptResult::TimedOut(p), Record::Failure),
    }
}
