//! The gate (SPEC 2.3): an attempt is made only when the trigger AND permission (2.2) AND
//! replay (2.4) AND budget (2.7) allow, and a rate limiter (2.9) admits it. The trigger is
//! decided when an outcome arrives (`trigger.rs`); this module asks the rest, and says
//! which one said no:
//!
//! - when planning the next attempt: replay first (a body that cannot be copied ends the
//!   call whatever the permission), then whether permission allows any endpoint at all;
//! - right before sending: permission at the chosen endpoint, the limiter's "go or not
//!   before T" (asked without spending, so a wait or another endpoint is found before a
//!   budget token is spent), the budget, and only then the limiter's token.
//!
//! A first attempt needs no permission and deposits in the budget; a later one withdraws a
//! token unless it follows an undelivered failure (it put no load on any provider). Hedges
//! always pay, and a hedge the budget refuses simply does not start. A limiter's "not
//! before T" moves a hedge to another endpoint it admits now (per-endpoint limiters) or
//! makes it wait until T, as any attempt; failing fast, the hedge does not start and the
//! attempts in flight go on.

use std::time::{Duration, Instant};

use super::{Call, Plan, Stop};
use crate::event::{AttemptKind, EventKind};
use crate::limit::{Admit, LimitScope, OnLimit};
use crate::permission;
use crate::report::StopReason;
use crate::time::since;

/// The gate's answer for a planned attempt.
pub(crate) enum Admission {
    /// Send to `endpoint` now, as an attempt of `kind`.
    Go { endpoint: usize, kind: AttemptKind },
    /// A limiter said "not before": the attempt was re-planned for later.
    Later,
}

impl<R> Call<'_, R> {
    /// Permission (SPEC 2.2) for an attempt at endpoint `x`, from the call's whole history.
    /// Out of line: asked only after a first attempt, from several places.
    #[inline(never)]
    pub(crate) fn allowed(&self, x: usize) -> bool {
        let policy = &self.engine.policy;
        permission::attempt_allowed(
            &self.class.perms,
            x,
            self.history.executed(&policy.settings.not_processed).0,
            self.history.attempted().0,
            self.class.keyed(),
            |a, b| policy.same_group(a, b),
        )
    }

    /// Replay, then permission anywhere: whether the call may make any later attempt.
    pub(crate) fn may_continue(&self) -> Result<(), Stop> {
        if !self.body.replayable() {
            if self.history.flights.is_empty() {
                self.emit(self.now, EventKind::NotReplayable);
            }
            return Err(Stop::Reason(StopReason::NotReplayable));
        }
        let any_allowed = self
            .order
            .eligible
            .iter()
            .any(|e| !self.order.skipped.has(e) && self.allowed(e));
        if any_allowed {
            Ok(())
        } else {
            Err(Stop::Reason(StopReason::NotPermitted))
        }
    }

    /// Right before sending the planned attempt at `endpoint`: permission, limiter,
    /// budget, limiter token.
    pub(crate) fn admit(
        &mut self,
        endpoint: usize,
        kind: AttemptKind,
        now: Instant,
    ) -> Result<Admission, Stop> {
        // The call's first attempt needs no permission (`allowed` says so too, after
        // reading the history).
        if self.history.made() > 0 && !self.allowed(endpoint) {
            return Err(Stop::Reason(StopReason::NotPermitted));
        }
        if !self.engine.has_limiters() {
            self.pay(endpoint, kind, now)?;
            return Ok(Admission::Go { endpoint, kind });
        }
        self.admit_limited(endpoint, kind, now)
    }

    /// [`admit`](Self::admit) with a rate limiter (SPEC 2.9): the limiter's "go or not
    /// before T" is asked without spending, then the budget, then the limiter's token.
    /// Out of line: a policy without limiters never runs it.
    #[inline(never)]
    fn admit_limited(
        &mut self,
        mut endpoint: usize,
        mut kind: AttemptKind,
        now: Instant,
    ) -> Result<Admission, Stop> {
        if let Admit::NotBefore(until) = self.limit_peek(endpoint, now) {
            match self.limited(endpoint, until, now)? {
                Some(e) => {
                    endpoint = e;
                    if kind != AttemptKind::First {
                        kind = self.kind_at(e);
                    }
                }
                None => return self.later(endpoint, kind, until),
            }
        }
        self.pay(endpoint, kind, now)?;
        if let Some(l) = self.engine.limiter(endpoint) {
            if let Admit::NotBefore(until) = l.admit(now) {
                // Another call took the token between the check and now: wait for it (the
                // budget token already paid stays with this attempt) or fail fast, as
                // configured, and say which.
                let rl = self.engine.policy.settings.rate_limit;
                let on_limit = rl.map_or(OnLimit::Wait, |rl| rl.on_limit);
                self.say_limited(on_limit, endpoint, until, None, Duration::ZERO, now);
                if on_limit == OnLimit::FailFast {
                    return Err(Stop::Reason(StopReason::RateLimited));
                }
                return self.later(endpoint, kind, until);
            }
        }
        Ok(Admission::Go { endpoint, kind })
    }

    /// A limiter said "not before `until`" to `endpoint`: another endpoint admitted now
    /// (per-endpoint limiters), `None` to wait, or the call fails fast.
    fn limited(
        &self,
        endpoint: usize,
        until: Instant,
        now: Instant,
    ) -> Result<Option<usize>, Stop> {
        let Some(rl) = self.engine.policy.settings.rate_limit else {
            return Ok(None);
        };
        let alt = (rl.scope == LimitScope::Endpoint)
            .then(|| self.limit_alternative(endpoint, now))
            .flatten();
        self.say_limited(rl.on_limit, endpoint, until, alt, Duration::ZERO, now);
        match alt {
            None if rl.on_limit == OnLimit::FailFast => Err(Stop::Reason(StopReason::RateLimited)),
            alt => Ok(alt),
        }
    }

    /// The event for a limiter's "not before `until`" to `endpoint`, when `alt` is the
    /// other endpoint the call moves to, if any. Returns whether the attempt waits: no
    /// other endpoint, waiting configured, and `until` leaves it `room` before the
    /// deadline (a wait the deadline would cut is not waited; see `later`).
    fn say_limited(
        &self,
        on_limit: OnLimit,
        endpoint: usize,
        until: Instant,
        alt: Option<usize>,
        room: Duration,
        now: Instant,
    ) -> bool {
        let in_time = (self.class.deadline).is_none_or(|d| until < d && since(d, until) >= room);
        let waiting = alt.is_none() && on_limit == OnLimit::Wait && in_time;
        self.emit(
            now,
            EventKind::RateLimited {
                endpoint: &self.engine.ids[endpoint],
                until,
                waiting,
            },
        );
        waiting
    }

    /// Re-plans the attempt for `until`, unless the deadline comes first.
    fn later(
        &mut self,
        endpoint: usize,
        kind: AttemptKind,
        until: Instant,
    ) -> Result<Admission, Stop> {
        if self.class.deadline.is_some_and(|d| until >= d) {
            return Err(Stop::Reason(StopReason::Deadline));
        }
        self.schedule.plan = Plan::Send {
            endpoint: endpoint as u8,
            at: until,
            kind,
        };
        Ok(Admission::Later)
    }

    /// The budget step of the planned attempt, once (a re-planned attempt does not pay
    /// twice): a first attempt deposits, a later one withdraws unless it is free.
    fn pay(&mut self, endpoint: usize, kind: AttemptKind, now: Instant) -> Result<(), Stop> {
        if self.engine.budget.is_none() || self.schedule.paid {
            return Ok(());
        }
        self.pay_budget(endpoint, kind, now)
    }

    /// [`pay`](Self::pay) to the budget. Out of line: its withdrawal path would sit
    /// between the lines of every attempt's start.
    #[inline(never)]
    fn pay_budget(&mut self, endpoint: usize, kind: AttemptKind, now: Instant) -> Result<(), Stop> {
        let Some(budget) = &self.engine.budget else {
            return Ok(());
        };
        if kind == AttemptKind::First {
            budget.deposit(now);
            self.schedule.paid = true;
        } else if !self.history.last_undelivered() {
            if !budget.try_withdraw(now) {
                self.emit_budget_refused(endpoint, now);
                return Err(Stop::Reason(StopReason::Budget));
            }
            self.schedule.paid = true;
        }
        Ok(())
    }

    fn emit_budget_refused(&self, endpoint: usize, now: Instant) {
        self.emit(
            now,
            EventKind::BudgetRefused {
                endpoint: &self.engine.ids[endpoint],
            },
        );
    }

    /// The limiter's answer for `endpoint` now, spending nothing.
    pub(crate) fn limit_peek(&self, endpoint: usize, now: Instant) -> Admit {
        self.engine
            .limiter(endpoint)
            .map_or(Admit::Go, |l| l.peek(now))
    }

    /// The gate for a hedge at `endpoint`: limiter, budget (hedges always pay), token.
    /// The endpoint the hedge goes to, or `None`: it does not start now.
    pub(crate) fn admit_hedge(&mut self, mut endpoint: usize, now: Instant) -> Option<usize> {
        if let Admit::NotBefore(until) = self.limit_peek(endpoint, now) {
            endpoint = self.hedge_limited(endpoint, until, now)?;
        }
        if let Some(b) = &self.engine.budget {
            if !b.try_withdraw(now) {
                self.emit_budget_refused(endpoint, now);
                return None;
            }
        }
        // Peeked just above; only a concurrent call can take the token in between, and
        // then this hedge simply does not start.
        let admitted = (self.engine.limiter(endpoint)).is_none_or(|l| l.admit(now) == Admit::Go);
        admitted.then_some(endpoint)
    }

    /// A limiter said "not before `until`" to the hedge's endpoint (SPEC 2.9): another
    /// hedge target its limiter admits now (per-endpoint limiters), else the hedge waits
    /// until then (its timer re-armed, unless the deadline comes first) or, failing fast,
    /// does not start. The attempts in flight go on either way. Out of line: only a hedged
    /// call under a limiter gets here.
    #[inline(never)]
    fn hedge_limited(&mut self, endpoint: usize, until: Instant, now: Instant) -> Option<usize> {
        let rl = self.engine.policy.settings.rate_limit?;
        let alt = (rl.scope == LimitScope::Endpoint)
            .then(|| {
                self.hedge_targets(now)
                    .find(|&e| e != endpoint && self.limit_peek(e, now) == Admit::Go)
            })
            .flatten();
        // A hedge needs the time every later attempt needs (`hedge_if_due`).
        let room = super::MIN_ATTEMPT_TIME;
        if self.say_limited(rl.on_limit, endpoint, until, alt, room, now) {
            self.schedule.hedge_at = Some(until);
        }
        alt
    }
}
