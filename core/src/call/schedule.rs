//! The schedule (SPEC 2.6, 2.8): when the next attempt goes. A failover goes at once; a
//! retry or a new round waits for `Retry-After` (never shortened by jitter, capped by
//! `max_retry_after`) or the jittered backoff, or until a cooling first endpoint is
//! available again; no wait may end past the deadline, and a later attempt needs at least
//! [`MIN_ATTEMPT_TIME`] before it. Hedges start `hedge_after` apart.

use std::time::{Duration, Instant};

use super::order::Next;
use super::surface::Attempt;
use super::{Call, Stop};
use crate::event::{AttemptKind, EventKind, WaitReason};
use crate::report::StopReason;
use crate::rng::Rng;
use crate::time::{add, since};

/// A later attempt is started only with at least this much time left before the call's
/// deadline (the first attempt always starts): with less, the deadline would cut it before
/// a provider could answer, and timers that round to whole milliseconds (ureq's) would fire
/// before the deadline and look like the endpoint's timeout.
pub const MIN_ATTEMPT_TIME: Duration = Duration::from_millis(5);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Plan {
    /// Send to `endpoint` at `at`.
    Send {
        endpoint: u8,
        at: Instant,
        kind: AttemptKind,
    },
    /// Attempts are in flight; nothing else is planned (maybe a hedge at `hedge_at`).
    Idle,
}

pub(crate) struct Schedule {
    pub(crate) plan: Plan,
    pub(crate) hedge_at: Option<Instant>,
    /// Backoff waits so far (the backoff's exponent).
    pub(crate) waits: u32,
    pub(crate) rng: Rng,
    /// The `Retry-After` of the last response, with its endpoint: it only ever applies to
    /// the wait that follows its own response.
    pub(crate) retry_after: Option<(usize, Duration)>,
    /// The planned attempt's budget step is done (a limiter then asked it to wait).
    pub(crate) paid: bool,
}

impl Schedule {
    /// The schedule of a call starting at `now`: its first attempt goes to `first`.
    pub(crate) fn new(rng: Rng, first: u8, now: Instant) -> Self {
        Schedule {
            plan: Plan::Send {
                endpoint: first,
                at: now,
                kind: AttemptKind::First,
            },
            hedge_at: None,
            waits: 0,
            rng,
            retry_after: None,
            paid: false,
        }
    }
}

/// What the plan asks for now.
pub(crate) enum Step {
    Send(Attempt),
    WaitUntil(Instant),
    WaitForAttempt,
    /// The call's state changed (re-planned, or it stopped): poll again.
    Again,
}

impl<R> Call<'_, R> {
    /// Plans the next attempt after a triggering outcome at `current`.
    pub(crate) fn schedule_next(&mut self, current: usize, now: Instant) {
        self.schedule.hedge_at = None;
        let stop = match self.next_target(current, now) {
            Ok(Some(next)) => match self.plan_next(next, now) {
                Ok(()) => return,
                Err(stop) => stop,
            },
            Ok(None) => {
                // Nothing to start now; wait for attempts still in flight.
                self.schedule.plan = Plan::Idle;
                return;
            }
            Err(stop) => stop,
        };
        self.stop_or_wait(stop);
    }

    /// Plans `next`: a failover at once; a retry or a new round after its wait, which is
    /// always reported, even a zero one (`Retry-After: 0`).
    fn plan_next(&mut self, next: Next, now: Instant) -> Result<(), Stop> {
        let at = match next.wait {
            None => now,
            Some((delay, reason)) => {
                let at = add(now, delay);
                if self.class.deadline.is_some_and(|d| at > d) {
                    return Err(Stop::Reason(StopReason::Deadline));
                }
                self.schedule.waits = self.schedule.waits.saturating_add(1);
                self.emit(now, EventKind::BackoffWait { delay, reason });
                at
            }
        };
        self.schedule.plan = Plan::Send {
            endpoint: next.endpoint as u8,
            at,
            kind: next.kind,
        };
        Ok(())
    }

    /// Stops the call, or, while attempts are still in flight, waits for them.
    pub(crate) fn stop_or_wait(&mut self, stop: Stop) {
        if self.history.flights.is_empty() {
            self.stop(self.now, stop);
        } else {
            self.schedule.plan = Plan::Idle;
        }
    }

    /// The wait before an attempt at `target` that needs one: `Retry-After` when the last
    /// response at that endpoint asked (never shortened by jitter), else the backoff.
    pub(crate) fn wait_for(
        &mut self,
        target: usize,
        reason: WaitReason,
        now: Instant,
    ) -> Result<(Duration, WaitReason), Stop> {
        let settings = &self.engine.policy.settings;
        if let Some((e, d)) = self.schedule.retry_after {
            if e == target {
                if d > settings.max_retry_after {
                    return Err(Stop::RetryAfter(d));
                }
                return Ok((d, WaitReason::RetryAfter));
            }
        }
        // The target endpoint's own backoff, else the policy's.
        let delay = (self.engine.policy.backoff_for(target))
            .delay(self.schedule.waits, &mut self.schedule.rng);
        // A new round whose first endpoint is cooling down waits until it is available.
        if reason == WaitReason::Round {
            if let Some(at) = self.engine.health.available_at(target, now) {
                let until = since(at, now);
                if until > delay && until <= settings.max_retry_after {
                    return Ok((until, WaitReason::Cooldown));
                }
            }
        }
        Ok((delay, reason))
    }

    /// What the plan asks for at the call's current time.
    pub(crate) fn step(&mut self) -> Step {
        let now = self.now;
        match self.schedule.plan {
            Plan::Send { at, .. } if now < at => Step::WaitUntil(at),
            Plan::Send { endpoint, kind, .. } => {
                match self.start_attempt(endpoint as usize, kind, now) {
                    Ok(Some(a)) => Step::Send(a),
                    Ok(None) => Step::Again,
                    Err(stop) => {
                        self.stop_or_wait(stop);
                        Step::Again
                    }
                }
            }
            Plan::Idle if self.history.flights.is_empty() => {
                self.stop(now, Stop::Reason(StopReason::AttemptsExhausted));
                Step::Again
            }
            Plan::Idle => {
                if self.schedule.hedge_at.is_some_and(|at| now >= at) {
                    if let Some(a) = self.hedge_if_due(now) {
                        return Step::Send(a);
                    }
                }
                self.wait_step()
            }
        }
    }

    /// What to wait for while attempts are in flight: the hedge timer, the deadline, or
    /// an attempt's end.
    fn wait_step(&self) -> Step {
        match (self.schedule.hedge_at, self.class.deadline) {
            (Some(h), Some(d)) => Step::WaitUntil(h.min(d)),
            (Some(t), None) | (None, Some(t)) => Step::WaitUntil(t),
            (None, None) => Step::WaitForAttempt,
        }
    }

    /// Whether a later attempt would get only a sliver of the time left.
    pub(crate) fn too_late_for(&self, kind: AttemptKind, now: Instant) -> bool {
        kind != AttemptKind::First
            && self
                .class
                .deadline
                .is_some_and(|d| since(d, now) < MIN_ATTEMPT_TIME)
    }

    /// Arms the hedge timer after a launch, while more attempts may be in flight.
    pub(crate) fn arm_hedge(&mut self, now: Instant) {
        if self.class.hedged {
            self.arm_hedge_timer(now);
        }
    }

    /// [`arm_hedge`](Self::arm_hedge) for a hedged call. Out of line: most calls are not.
    #[inline(never)]
    fn arm_hedge_timer(&mut self, now: Instant) {
        if let Some(h) = self.hedging() {
            self.schedule.hedge_at =
                ((self.history.flights.len() as u32) < h.max_in_flight).then(|| add(now, h.after));
        }
    }

    /// The policy's hedging settings, when this call is hedged.
    fn hedging(&self) -> Option<crate::policy::Hedge> {
        self.engine
            .policy
            .settings
            .hedge
            .filter(|_| self.class.hedged)
    }

    /// Starts a hedge when its time came: the next endpoint of the round that is not in
    /// flight, available and permitted, within `max_in_flight` and the attempt cap.
    /// Called by [`step`](Self::step) once the hedge timer is due. Out of line: only a
    /// hedged call's timer gets here.
    #[inline(never)]
    fn hedge_if_due(&mut self, now: Instant) -> Option<Attempt> {
        self.schedule.hedge_at = None;
        let max = self.hedging()?.max_in_flight;
        if self.history.flights.len() as u32 >= max
            || self.history.made() >= self.order.max_attempts
            || !self.body.replayable()
        {
            return None;
        }
        // A hedge is a later attempt: it needs the time every later attempt needs.
        if self.too_late_for(AttemptKind::Hedge, now) {
            return None;
        }
        let next = self.hedge_target(now)?;
        let next = self.admit_hedge(next, now)?;
        Some(self.launch(next, AttemptKind::Hedge, now))
    }
}
