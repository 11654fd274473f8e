//! Per-endpoint health shared by all calls of one client (SPEC 2.5): circuit breakers and
//! `not_before` cooldowns.
//!
//! States move closed -> open -> half-open -> closed | open, plus a manual reset to closed,
//! and only when a call (or a caller) asks at a given time: there are no background timers.
//! A success on a closed endpoint with no failure streak (and, with the failure-rate rule,
//! a window already full of successes) touches nothing but one atomic load; every other
//! path takes a per-endpoint lock held for a few instructions. Outcomes of attempts started before the endpoint's last state change are
//! stale and change nothing.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::policy::{Breaker, BreakerRule};
use crate::time::add;

/// A breaker's state.
///
/// ```
/// use baton_core::BreakerState;
/// assert_eq!(BreakerState::Closed.as_str(), "closed");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BreakerState {
    /// Calls flow.
    Closed,
    /// Calls avoid the endpoint until the open time passes.
    Open,
    /// A limited number of probe calls may test the endpoint.
    HalfOpen,
}

impl BreakerState {
    /// The state's name in events and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open => "open",
            BreakerState::HalfOpen => "half_open",
        }
    }
}

/// A snapshot of one endpoint's health, read with [`Engine::health`](crate::Engine::health).
///
/// ```
/// use std::time::Instant;
/// use baton_core::{BreakerState, Endpoint, Engine, Policy};
/// let policy = Policy::builder().endpoint(Endpoint::new("a", "http://a.example/")).build().unwrap();
/// let engine = Engine::new(policy);
/// let h = engine.health(0, Instant::now()).unwrap();
/// assert_eq!(h.state, BreakerState::Closed);
/// assert!(h.available);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct EndpointHealth {
    /// Breaker state at the time asked.
    pub state: BreakerState,
    /// Whether a new call could use the endpoint now.
    pub available: bool,
    /// When an open breaker becomes half-open.
    pub open_until: Option<Instant>,
    /// The open time the breaker will use the next time it opens.
    pub open_time: Duration,
    /// `Retry-After` cooldown, separate from the breaker.
    pub not_before: Option<Instant>,
    /// Current run of consecutive breaker failures.
    pub consecutive_failures: u32,
    /// Attempts recorded in the failure-rate window, and how many of them failed.
    pub window: (u32, u32),
    /// Probes in flight while half-open.
    pub probes_in_flight: u32,
}

/// A breaker transition, reported to the call that caused it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Transition {
    pub from: BreakerState,
    pub to: BreakerState,
}

/// Transitions collected while a lock is held and reported once it is released, so an
/// event sink may read endpoint health (or reset an endpoint) without deadlocking.
pub(crate) type Transitions = smallvec::SmallVec<[Transition; 2]>;

/// What one attempt's outcome means for the breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Record {
    /// A success (any response that is not a breaker failure), with the attempt's time.
    Success(Duration),
    /// A breaker failure.
    Failure,
    /// Counts for nothing (cancelled, cut by the caller's deadline, rejected locally).
    Nothing,
}

/// Proof that an attempt was admitted, handed back when it ends.
///
/// Two words, so that it is handed back in two registers: with a third field it was
/// returned through the stack, written there in parts and read back whole, and the
/// attempt's start waited on those stores (measured with `perf record` on core's
/// healthy_calls example).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ticket {
    pub epoch: u64,
    /// What the attempt holds: [`UNTRACKED`], [`TRACKED`], or a probe id (at least
    /// [`FIRST_PROBE`]).
    held: u32,
}

/// An attempt at an endpoint that was unavailable and is tried anyway as a last resort:
/// its outcome changes no breaker state.
const UNTRACKED: u32 = 0;
/// An attempt whose outcome counts, holding no probe slot.
const TRACKED: u32 = 1;
/// The lowest probe id.
const FIRST_PROBE: u32 = 2;

impl Ticket {
    fn untracked(epoch: u64) -> Self {
        Ticket {
            epoch,
            held: UNTRACKED,
        }
    }

    fn tracked(epoch: u64) -> Self {
        Ticket {
            epoch,
            held: TRACKED,
        }
    }

    /// Probe id when the attempt holds a half-open probe slot (ids wrap: only the few
    /// probes in flight at once are told apart, and each expires after an open time).
    pub fn probe(&self) -> Option<u32> {
        (self.held >= FIRST_PROBE).then_some(self.held)
    }

    /// False when the endpoint was unavailable and is tried anyway as a last resort.
    pub fn is_tracked(&self) -> bool {
        self.held != UNTRACKED
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Closed,
    Open { until: Instant },
    HalfOpen,
}

impl State {
    fn public(self) -> BreakerState {
        match self {
            State::Closed => BreakerState::Closed,
            State::Open { .. } => BreakerState::Open,
            State::HalfOpen => BreakerState::HalfOpen,
        }
    }
}

#[derive(Debug)]
struct Inner {
    state: State,
    streak: u32,
    /// Failure-rate window as a ring of outcomes (true = failure).
    ring: Vec<bool>,
    ring_next: usize,
    ring_len: usize,
    ring_failures: u32,
    probes: Vec<(u32, Instant)>,
    next_probe: u32,
    open_time: Duration,
    not_before: Option<Instant>,
}

#[derive(Debug)]
struct Slot {
    /// True while closed, no failure streak, no `not_before`, and the rule records nothing
    /// for successes (consecutive or disabled): the healthy path then reads only this.
    quiet: AtomicBool,
    /// True while closed with no `not_before`: the endpoint is available and an attempt
    /// is admitted without looking further (whatever a failure-rate window holds).
    calm: AtomicBool,
    epoch: AtomicU64,
    inner: Mutex<Inner>,
}

/// The health table of one client.
#[derive(Debug)]
pub(crate) struct Health {
    breaker: Breaker,
    slots: Vec<Slot>,
}

fn lock(m: &Mutex<Inner>) -> MutexGuard<'_, Inner> {
    crate::stripe::shared_write();
    // Nothing inside the lock can panic; recover the data if a user callback ever did.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Health {
    pub(crate) fn new(breaker: Breaker, endpoints: usize) -> Self {
        let ring = match breaker.rule {
            BreakerRule::FailureRate { window, .. } => window as usize,
            _ => 0,
        };
        let slots = (0..endpoints)
            .map(|_| Slot {
                quiet: AtomicBool::new(ring == 0),
                calm: AtomicBool::new(true),
                epoch: AtomicU64::new(0),
                inner: Mutex::new(Inner {
                    state: State::Closed,
                    streak: 0,
                    ring: vec![false; ring],
                    ring_next: 0,
                    ring_len: 0,
                    ring_failures: 0,
                    probes: Vec::with_capacity(breaker.probe_quota.min(64) as usize),
                    next_probe: FIRST_PROBE,
                    open_time: breaker.open,
                    not_before: None,
                }),
            })
            .collect();
        Health { breaker, slots }
    }

    fn records_successes(&self) -> bool {
        matches!(self.breaker.rule, BreakerRule::FailureRate { .. })
    }

    /// A slot is quiet when a success there would change nothing: closed, no failure
    /// streak, no cooldown, and either the rule records no successes (consecutive,
    /// disabled) or its failure-rate window is full of successes (one more leaves the same
    /// window). The healthy path then reads one atomic and writes nothing.
    fn update_quiet(&self, slot: &Slot, inner: &Inner) {
        let window_settled = !self.records_successes()
            || (inner.ring_len == inner.ring.len() && inner.ring_failures == 0);
        let calm = inner.state == State::Closed && inner.not_before.is_none();
        let quiet = calm && inner.streak == 0 && window_settled;
        if slot.calm.load(Ordering::Relaxed) != calm {
            slot.calm.store(calm, Ordering::Release);
        }
        if slot.quiet.load(Ordering::Relaxed) != quiet {
            slot.quiet.store(quiet, Ordering::Release);
        }
    }

    fn transition(&self, slot: &Slot, inner: &mut Inner, to: State, out: &mut Transitions) {
        let from = inner.state.public();
        inner.state = to;
        slot.epoch.fetch_add(1, Ordering::AcqRel);
        if to == State::Closed {
            inner.open_time = self.breaker.open;
            inner.streak = 0;
            clear_ring(inner);
        }
        if matches!(to, State::Open { .. }) {
            inner.streak = 0;
            clear_ring(inner);
        }
        out.push(Transition {
            from,
            to: to.public(),
        });
    }

    /// Moves time forward for one slot: open -> half-open when its time has passed, lost
    /// probes expire, a passed `not_before` is forgotten.
    fn advance(&self, slot: &Slot, inner: &mut Inner, now: Instant, out: &mut Transitions) {
        if let State::Open { until } = inner.state {
            if now >= until {
                inner.probes.clear();
                self.transition(slot, inner, State::HalfOpen, out);
            }
        }
        if inner.state == State::HalfOpen && !inner.probes.is_empty() {
            let ttl = self.breaker.open;
            inner.probes.retain(|(_, started)| now < add(*started, ttl));
        }
        if let Some(nb) = inner.not_before {
            if now >= nb {
                inner.not_before = None;
            }
        }
        self.update_quiet(slot, inner);
    }

    fn available_locked(&self, inner: &Inner, now: Instant) -> bool {
        let cooled = inner.not_before.is_none_or(|nb| now >= nb);
        let breaker = match inner.state {
            State::Closed => true,
            State::Open { .. } => false,
            State::HalfOpen => inner.probes.len() < self.breaker.probe_quota as usize,
        };
        cooled && breaker
    }

    /// Whether endpoint `i` is closed with no cooldown (available and admitted without the
    /// lock): one atomic read, the healthy path's whole health check.
    #[inline]
    pub(crate) fn calm(&self, i: usize) -> bool {
        self.slots
            .get(i)
            .is_some_and(|slot| slot.calm.load(Ordering::Acquire))
    }

    /// Whether endpoint `i` is available at `now`.
    /// Transitions it makes are pushed to `out`, to be reported once the lock is released.
    #[inline]
    pub(crate) fn available(&self, i: usize, now: Instant, out: &mut Transitions) -> bool {
        let Some(slot) = self.slots.get(i) else {
            return false;
        };
        if slot.calm.load(Ordering::Acquire) {
            return true;
        }
        self.available_slow(slot, now, out)
    }

    #[inline(never)]
    #[cold]
    fn available_slow(&self, slot: &Slot, now: Instant, out: &mut Transitions) -> bool {
        let mut inner = lock(&slot.inner);
        self.advance(slot, &mut inner, now, out);
        self.available_locked(&inner, now)
    }

    /// Admits an attempt at `i` only if it is available, in one step (no other caller can
    /// take the last probe slot between the check and the admission): the ticket, or when
    /// the endpoint may be asked again (`None`: unknown). The healthy path reads one atomic.
    #[inline]
    pub(crate) fn admit(
        &self,
        i: usize,
        now: Instant,
        out: &mut Transitions,
    ) -> Result<Ticket, Option<Instant>> {
        let slot = self.slots.get(i).ok_or(None)?;
        if slot.calm.load(Ordering::Acquire) {
            return Ok(Ticket::tracked(slot.epoch.load(Ordering::Acquire)));
        }
        let mut inner = lock(&slot.inner);
        self.advance(slot, &mut inner, now, out);
        if !self.available_locked(&inner, now) {
            let ttl = self.breaker.open;
            let breaker = match inner.state {
                State::Open { until } => Some(until),
                // A probe that never reports frees its slot after a full open time.
                State::HalfOpen => inner.probes.iter().map(|(_, s)| add(*s, ttl)).min(),
                State::Closed => None,
            };
            let cool = inner.not_before.filter(|nb| *nb > now);
            return Err(breaker.max(cool));
        }
        Ok(self.ticket_locked(slot, &mut inner, now))
    }

    /// Admits an attempt at endpoint `i`; a half-open endpoint hands out a probe slot.
    #[inline]
    pub(crate) fn begin(&self, i: usize, now: Instant, out: &mut Transitions) -> Ticket {
        let Some(slot) = self.slots.get(i) else {
            return Ticket::untracked(0);
        };
        if slot.calm.load(Ordering::Acquire) {
            return Ticket::tracked(slot.epoch.load(Ordering::Acquire));
        }
        let mut inner = lock(&slot.inner);
        self.advance(slot, &mut inner, now, out);
        self.ticket_locked(slot, &mut inner, now)
    }

    /// The ticket of an attempt at a slot whose lock is held (and time advanced).
    fn ticket_locked(&self, slot: &Slot, inner: &mut Inner, now: Instant) -> Ticket {
        let epoch = slot.epoch.load(Ordering::Acquire);
        let cooled = inner.not_before.is_none_or(|nb| now >= nb);
        match inner.state {
            // A closed endpoint is always tracked: a `Retry-After` cooldown is separate
            // from the breaker, so failures there still count.
            State::Closed => Ticket::tracked(epoch),
            State::HalfOpen if cooled && inner.probes.len() < self.breaker.probe_quota as usize => {
                let id = inner.next_probe;
                inner.next_probe = inner.next_probe.checked_add(1).unwrap_or(FIRST_PROBE);
                inner.probes.push((id, now));
                Ticket { epoch, held: id }
            }
            _ => Ticket::untracked(epoch),
        }
    }

    /// Records how an admitted attempt ended. Returns whether the record was a probe result
    /// (`Some(success)`) so the call can report it.
    #[inline]
    pub(crate) fn finish(
        &self,
        i: usize,
        ticket: Ticket,
        record: Record,
        now: Instant,
        out: &mut Transitions,
    ) -> Option<bool> {
        let slot = self.slots.get(i)?;
        if ticket.probe().is_none()
            && (!ticket.is_tracked() || self.breaker.rule == BreakerRule::Disabled)
        {
            return None;
        }
        if ticket.probe().is_none() {
            if matches!(record, Record::Success(_))
                && !self.is_failure(record)
                && slot.quiet.load(Ordering::Acquire)
            {
                // The healthy path: nothing to write.
                return None;
            }
            if record == Record::Nothing {
                return None;
            }
        }
        self.finish_slow(slot, ticket, record, now, out)
    }

    #[inline(never)]
    #[cold]
    fn finish_slow(
        &self,
        slot: &Slot,
        ticket: Ticket,
        record: Record,
        now: Instant,
        out: &mut Transitions,
    ) -> Option<bool> {
        let mut inner = lock(&slot.inner);
        if let Some(id) = ticket.probe() {
            inner.probes.retain(|(p, _)| *p != id);
        }
        let stale = slot.epoch.load(Ordering::Acquire) != ticket.epoch;
        let mut probe_result = None;
        if !stale && record != Record::Nothing {
            match inner.state {
                State::Closed => self.record_closed(slot, &mut inner, record, now, out),
                State::HalfOpen if ticket.probe().is_some() => {
                    let failed = self.is_failure(record);
                    probe_result = Some(!failed);
                    if failed {
                        let grown = grow(
                            inner.open_time,
                            self.breaker.open_growth,
                            self.breaker.max_open,
                        );
                        inner.open_time = grown;
                        let until = add(now, grown);
                        self.transition(slot, &mut inner, State::Open { until }, out);
                    } else {
                        inner.probes.clear();
                        self.transition(slot, &mut inner, State::Closed, out);
                    }
                }
                _ => {}
            }
        }
        self.update_quiet(slot, &inner);
        probe_result
    }

    fn is_failure(&self, record: Record) -> bool {
        match record {
            Record::Failure => true,
            Record::Success(elapsed) => matches!(
                self.breaker.rule,
                BreakerRule::FailureRate { slow_call: Some(slow), .. } if elapsed > slow
            ),
            Record::Nothing => false,
        }
    }

    fn record_closed(
        &self,
        slot: &Slot,
        inner: &mut Inner,
        record: Record,
        now: Instant,
        out: &mut Transitions,
    ) {
        match self.breaker.rule {
            BreakerRule::Disabled => {}
            BreakerRule::Consecutive { failures } => {
                if record == Record::Failure {
                    inner.streak = inner.streak.saturating_add(1);
                    if inner.streak >= failures {
                        let until = add(now, inner.open_time);
                        self.transition(slot, inner, State::Open { until }, out);
                    }
                } else {
                    inner.streak = 0;
                }
            }
            BreakerRule::FailureRate {
                min_calls, rate, ..
            } => {
                let failed = self.is_failure(record);
                inner.streak = if failed {
                    inner.streak.saturating_add(1)
                } else {
                    0
                };
                push_ring(inner, failed);
                let len = inner.ring_len as u32;
                if len >= min_calls && f64::from(inner.ring_failures) >= rate * f64::from(len) {
                    let until = add(now, inner.open_time);
                    self.transition(slot, inner, State::Open { until }, out);
                }
            }
        }
    }

    /// Sets endpoint `i`'s `not_before` (Retry-After), separately from the breaker.
    /// Ignored when the endpoint changed state since the attempt started (`epoch`): a stale
    /// outcome changes no state.
    pub(crate) fn set_not_before(&self, i: usize, until: Instant, epoch: u64) {
        if let Some(slot) = self.slots.get(i) {
            let mut inner = lock(&slot.inner);
            if slot.epoch.load(Ordering::Acquire) != epoch {
                return;
            }
            inner.not_before = Some(until);
            self.update_quiet(slot, &inner);
        }
    }

    /// Resets endpoint `i` by hand: closed, no streak, no cooldown. A reset is a state
    /// change: outcomes of attempts started before it are stale.
    pub(crate) fn reset(&self, i: usize) -> (bool, Transitions) {
        let mut out = Transitions::new();
        let Some(slot) = self.slots.get(i) else {
            return (false, out);
        };
        let mut inner = lock(&slot.inner);
        inner.probes.clear();
        inner.not_before = None;
        if inner.state != State::Closed {
            self.transition(slot, &mut inner, State::Closed, &mut out);
        } else {
            inner.streak = 0;
            inner.open_time = self.breaker.open;
            clear_ring(&mut inner);
            slot.epoch.fetch_add(1, Ordering::AcqRel);
        }
        self.update_quiet(slot, &inner);
        drop(inner);
        (true, out)
    }

    /// A snapshot of endpoint `i` as it stands at `now`. Read-only: a lazy transition that
    /// is due (open -> half-open, expired probes) shows in the snapshot but is made, and
    /// reported, by the next call that considers the endpoint.
    pub(crate) fn snapshot(&self, i: usize, now: Instant) -> Option<EndpointHealth> {
        let slot = self.slots.get(i)?;
        let inner = lock(&slot.inner);
        let (state, open_until, probes) = match inner.state {
            State::Open { until } if now < until => (BreakerState::Open, Some(until), 0),
            State::Open { .. } => (BreakerState::HalfOpen, None, 0),
            State::HalfOpen => {
                let ttl = self.breaker.open;
                let live = inner
                    .probes
                    .iter()
                    .filter(|(_, s)| now < add(*s, ttl))
                    .count();
                (BreakerState::HalfOpen, None, live)
            }
            State::Closed => (BreakerState::Closed, None, 0),
        };
        let not_before = inner.not_before.filter(|nb| now < *nb);
        let breaker_ok = match state {
            BreakerState::Closed => true,
            BreakerState::Open => false,
            BreakerState::HalfOpen => probes < self.breaker.probe_quota as usize,
        };
        Some(EndpointHealth {
            state,
            available: breaker_ok && not_before.is_none(),
            open_until,
            open_time: inner.open_time,
            not_before,
            consecutive_failures: inner.streak,
            window: (inner.ring_len as u32, inner.ring_failures),
            probes_in_flight: probes as u32,
        })
    }

    /// The time when endpoint `i` next becomes available, if it is not available at `now`.
    pub(crate) fn available_at(&self, i: usize, now: Instant) -> Option<Instant> {
        let slot = self.slots.get(i)?;
        if slot.calm.load(Ordering::Acquire) {
            return None;
        }
        let inner = lock(&slot.inner);
        let breaker = match inner.state {
            State::Open { until } => Some(until),
            _ => None,
        };
        let cool = inner.not_before.filter(|nb| *nb > now);
        match (breaker, cool) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }
}

fn grow(current: Duration, growth: f64, max: Duration) -> Duration {
    let next = current.as_secs_f64() * growth;
    if !next.is_finite() || next >= max.as_secs_f64() {
        max
    } else {
        Duration::from_secs_f64(next)
    }
}

fn clear_ring(inner: &mut Inner) {
    inner.ring_next = 0;
    inner.ring_len = 0;
    inner.ring_failures = 0;
}

fn push_ring(inner: &mut Inner, failed: bool) {
    let cap = inner.ring.len();
    if cap == 0 {
        return;
    }
    if inner.ring_len == cap {
        if inner.ring[inner.ring_next] {
            inner.ring_failures -= 1;
        }
    } else {
        inner.ring_len += 1;
    }
    inner.ring[inner.ring_next] = failed;
    if failed {
        inner.ring_failures += 1;
    }
    inner.ring_next = (inner.ring_next + 1) % cap;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ticket_tells_tracked_untracked_and_probe_apart() {
        assert_eq!(Ticket::tracked(7).probe(), None);
        assert!(Ticket::tracked(7).is_tracked());
        assert!(!Ticket::untracked(7).is_tracked());
        assert_eq!(Ticket::untracked(7).probe(), None);
        let probe = Ticket {
            epoch: 7,
            held: FIRST_PROBE,
        };
        assert_eq!(probe.probe(), Some(FIRST_PROBE));
        assert!(probe.is_tracked());
    }

    #[test]
    fn probe_ids_wrap_past_the_last_to_the_first_and_stay_probes() {
        let breaker = Breaker {
            rule: BreakerRule::Consecutive { failures: 1 },
            probe_quota: 2,
            ..Breaker::default()
        };
        let health = Health::new(breaker, 1);
        let slot = &health.slots[0];
        let t0 = Instant::now();
        let mut inner = lock(&slot.inner);
        inner.state = State::HalfOpen;
        inner.next_probe = u32::MAX;
        let last = health.ticket_locked(slot, &mut inner, t0);
        let first = health.ticket_locked(slot, &mut inner, t0);
        assert_eq!(last.probe(), Some(u32::MAX));
        assert_eq!(first.probe(), Some(FIRST_PROBE));
        assert!(first.is_tracked() && last.is_tracked());
        // The quota is full: the next attempt holds no probe and is not tracked.
        let over = health.ticket_locked(slot, &mut inner, t0);
        assert_eq!(over.probe(), None);
        assert!(!over.is_tracked());
    }
}
