//! The order of endpoints (SPEC 2.1, 2.6): priority, the preferred endpoint, eligibility,
//! rounds, per-endpoint counts, pinning, and unavailable endpoints tried last or skipped.
//! It proposes the next endpoint; the gate decides whether the attempt may be made and the
//! schedule when.

use std::time::{Duration, Instant};

use super::history::Bits;
use super::{Call, Stop};
use crate::event::{AttemptKind, EventKind, WaitReason};
use crate::health::Transitions;
use crate::policy::{Tiers, Unavailable, MAX_ENDPOINTS};
use crate::report::StopReason;
use crate::rng::Rng;

/// A small ordered list of endpoint indexes, stored inline (a policy has at most 64).
///
/// A list that is simply a set of endpoints in index order (a calm call's first round, the
/// common start) is held as that set, and written out as bytes only when it is first
/// changed. The common start then writes no byte of `items`: a call is built aside and
/// then moved into place, and a copy of bytes written one at a time waits for those
/// stores to reach the cache (measured with `healthy_floor`: 4% of the engine's time).
#[derive(Clone)]
pub(crate) struct List {
    /// Not empty: the list is these endpoints in index order, and `items` and `len` are
    /// not read (an empty list is the same either way).
    by_index: Bits,
    items: [u8; MAX_ENDPOINTS],
    len: u8,
}

impl Default for List {
    fn default() -> Self {
        List {
            by_index: Bits(0),
            items: [0; MAX_ENDPOINTS],
            len: 0,
        }
    }
}

impl List {
    /// The endpoints of `set` in index order.
    pub(crate) fn of_set(set: Bits) -> List {
        List {
            by_index: set,
            ..List::default()
        }
    }
    /// Writes a list held as a set out as bytes, before it is changed.
    fn written(&mut self) -> &mut Self {
        let set = std::mem::take(&mut self.by_index);
        if set.0 != 0 {
            self.len = set.0.count_ones() as u8;
            for (slot, e) in self.items.iter_mut().zip(set.iter()) {
                *slot = e as u8;
            }
        }
        self
    }
    fn clear(&mut self) {
        self.by_index = Bits(0);
        self.len = 0;
    }
    pub(crate) fn push(&mut self, i: usize) {
        let list = self.written();
        if let Some(slot) = list.items.get_mut(list.len as usize) {
            *slot = i as u8;
            list.len += 1;
        }
    }
    pub(crate) fn len(&self) -> usize {
        match self.by_index.0 {
            0 => self.len as usize,
            set => set.count_ones() as usize,
        }
    }
    pub(crate) fn get(&self, p: usize) -> usize {
        match self.by_index.0 {
            0 => self.items[..self.len as usize][p] as usize,
            _ => (self.by_index.iter().nth(p)).expect("a position in the list"),
        }
    }
    pub(crate) fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        // One of the two is empty: a list held as a set has no bytes written.
        let written = match self.by_index.0 {
            0 => &self.items[..self.len as usize],
            _ => &[],
        };
        (self.by_index.iter()).chain(written.iter().map(|&e| e as usize))
    }
    /// The sum of `f` over the items, saturating. Each form is folded on its own: through
    /// [`iter`](Self::iter)'s chain, the fold was not inlined into [`Call::new`] and cost
    /// a call about 70 instructions (callgrind, `healthy_calls`).
    #[inline(always)]
    fn sum_by(&self, f: impl Fn(usize) -> u32) -> u32 {
        let add = |sum: u32, e: usize| sum.saturating_add(f(e));
        match self.by_index.0 {
            0 => (self.items[..self.len as usize].iter()).fold(0, |sum, &e| add(sum, e as usize)),
            _ => self.by_index.iter().fold(0, add),
        }
    }
    pub(crate) fn position(&self, i: usize) -> Option<usize> {
        let set = self.by_index;
        match set.0 {
            0 => self.iter().position(|e| e == i),
            _ => (set.has(i)).then(|| (set.0 & ((1u64 << i) - 1)).count_ones() as usize),
        }
    }
    /// Takes out the item at `p` (< `len`), shifting the rest forward.
    fn remove(&mut self, p: usize) -> usize {
        let item = self.get(p);
        let list = self.written();
        list.items[p..list.len as usize].rotate_left(1);
        list.len -= 1;
        item
    }
    /// Moves the item at `from` to position `to` (< `from`), shifting the rest back.
    fn move_before(&mut self, from: usize, to: usize) {
        if to < from && from < self.len() {
            self.written().items[to..=from].rotate_right(1);
        }
    }
}

/// The base order: the preferred endpoint, then the other eligible ones by index, or
/// (with tiers) the call's ranked order.
pub(crate) enum BaseOrder {
    Bits { preferred: Option<u8>, rest: Bits },
    Ranked { list: List, pos: usize },
}

impl Iterator for BaseOrder {
    type Item = usize;
    fn next(&mut self) -> Option<usize> {
        match self {
            BaseOrder::Bits { preferred, rest } => match preferred.take() {
                Some(p) => Some(p as usize),
                None => rest.pop(),
            },
            BaseOrder::Ranked { list, pos } => {
                let next = (*pos < list.len()).then(|| list.get(*pos));
                *pos += 1;
                next
            }
        }
    }
}

/// The call's order and its counts.
pub(crate) struct Order {
    /// The eligible endpoints (asked once, at the start).
    pub(crate) eligible: Bits,
    /// The preferred endpoint, when it is eligible: first in the base order.
    pub(crate) preferred: Option<u8>,
    /// With tiers: the random state the call's base order (preferred, then tier by tier,
    /// shuffled by weight within each) was drawn from when the call started. The order is
    /// derived from it again when needed rather than kept.
    pub(crate) ranked: Option<Rng>,
    /// The current round: available first (then unavailable ones when tried last).
    pub(crate) round: List,
    /// Position in the round of the attempt launched last.
    pub(crate) pos: u32,
    /// The number of the first attempt of the current round.
    pub(crate) round_start: u32,
    /// Endpoints skipped for this round (skip mode).
    pub(crate) skipped: Bits,
    /// Attempts per endpoint per round set by the call (it overrides the endpoints').
    pub(crate) per_call: Option<u32>,
    /// Attempts per endpoint per round for an endpoint without its own: the policy's, or
    /// 1 (3 when the call has one usable endpoint).
    pub(crate) per_default: u32,
    /// Cap on the call's attempts, and whether it was set explicitly.
    pub(crate) max_attempts: u32,
    pub(crate) max_explicit: bool,
}

/// A call's attempt caps (SPEC 2.6), decided once its first round is known.
struct Caps {
    per_default: u32,
    max_attempts: u32,
    max_explicit: bool,
}

impl Caps {
    /// The caps of a call whose first round is `round`: attempts per endpoint per round
    /// (the call's `per_call`, else each endpoint's own, else the policy's, else 1, or 3
    /// for a call with one usable endpoint), and the cap on attempts (the call's, else the
    /// policy's, else one round). The pinned limit is derived where it is used
    /// ([`Order::pinned_limit`]).
    #[inline(always)]
    fn of(policy: &crate::Policy, round: &List, per_call: Option<u32>, max: Option<u32>) -> Caps {
        let settings = &policy.settings;
        let explicit_per = per_call.or(settings.attempts_per_endpoint);
        let explicit_max = max.or(settings.max_attempts);
        let per_default = explicit_per.unwrap_or(if round.len() > 1 { 1 } else { 3 });
        let per_endpoint =
            |e| (per_call.or(policy.attempts_per_endpoint_of(e))).unwrap_or(per_default);
        Caps {
            per_default,
            max_attempts: explicit_max.unwrap_or_else(|| round.sum_by(per_endpoint)),
            max_explicit: explicit_max.is_some(),
        }
    }
}

impl Order {
    /// The endpoints of a call whose first round is simply its eligible endpoints by
    /// index, every one calm (no preferred endpoint, no tiers, nothing cooling down: the
    /// common case), or `None` for any other call. [`Order::calm`] is its order.
    #[inline(always)]
    pub(crate) fn calm_set(
        engine: &crate::Engine,
        (eligible, preferred): (Bits, Option<u8>),
    ) -> Option<Bits> {
        let calm = preferred.is_none()
            && !matches!(engine.policy.tiers, Tiers::Ranked(_))
            && eligible.0 != 0
            && eligible.iter().all(|i| engine.health.calm(i));
        calm.then_some(eligible)
    }

    /// The order of a call with a calm start (`eligible`, from [`Order::calm_set`]): the
    /// order [`Call::order_start`] builds for such a call, made without the call and in
    /// one piece, so that [`Call::new`] writes the call once, in place (measured with
    /// callgrind: a call built and then started is copied out whole, 744 bytes, about 100
    /// instructions; and with `healthy_calls`: an order built and then changed is copied
    /// into the call, and the copy waits on the stores that changed it).
    #[inline(always)]
    pub(crate) fn calm(engine: &crate::Engine, eligible: Bits, call: &crate::CallOptions) -> Order {
        let round = List::of_set(eligible);
        let caps = Caps::of(
            &engine.policy,
            &round,
            call.attempts_per_endpoint,
            call.max_attempts,
        );
        Order {
            eligible,
            round,
            per_call: call.attempts_per_endpoint,
            per_default: caps.per_default,
            max_attempts: caps.max_attempts,
            max_explicit: caps.max_explicit,
            ..Order::new()
        }
    }

    /// Sets the attempt caps of a call whose first round is built (see [`Caps::of`]).
    fn set_caps(&mut self, policy: &crate::Policy, per_call: Option<u32>, max: Option<u32>) {
        let caps = Caps::of(policy, &self.round, per_call, max);
        self.per_call = per_call;
        self.per_default = caps.per_default;
        self.max_attempts = caps.max_attempts;
        self.max_explicit = caps.max_explicit;
    }

    /// Attempts per round at endpoint `e`: the call's setting, else the endpoint's own,
    /// else the policy's (SPEC 2.6).
    fn per_endpoint(&self, policy: &crate::Policy, e: usize) -> u32 {
        let own = policy.attempts_per_endpoint_of(e);
        self.per_call.or(own).unwrap_or(self.per_default)
    }

    /// Attempts in total at endpoint `e` when the call is pinned there (SPEC 2.6): the
    /// policy's `pinned_attempts`, else `attempts_per_endpoint` where it was set explicitly
    /// (the call's, else the endpoint's own, else the policy's), else 3. Not the round's
    /// default of 1: a pinned call's retries are the ones the key makes safe.
    fn pinned_limit(&self, policy: &crate::Policy, e: usize) -> u32 {
        let settings = &policy.settings;
        (settings.pinned_attempts.or(self.per_call))
            .or_else(|| policy.attempts_per_endpoint_of(e))
            .or(settings.attempts_per_endpoint)
            .unwrap_or(3)
    }

    /// Eligible endpoints in priority order, the preferred one first (without tiers).
    fn by_index(&self) -> BaseOrder {
        let mut rest = self.eligible;
        if let Some(p) = self.preferred {
            rest.0 &= !(1u64 << p);
        }
        BaseOrder::Bits {
            preferred: self.preferred,
            rest,
        }
    }

    pub(crate) fn new() -> Self {
        Order {
            eligible: Bits(0),
            preferred: None,
            ranked: None,
            round: List::default(),
            pos: 0,
            round_start: 1,
            skipped: Bits(0),
            per_call: None,
            per_default: 1,
            max_attempts: 1,
            max_explicit: false,
        }
    }
}

/// The endpoints eligible for a call and its preferred one (asked once, at the start).
#[inline(always)]
pub(crate) fn eligibility(
    policy: &crate::Policy,
    request: &crate::policy::RequestInfo<'_>,
    call: &crate::CallOptions,
) -> Result<(Bits, Option<u8>), Stop> {
    let n = policy.endpoints.len();
    let every = Bits(if n >= 64 { u64::MAX } else { (1u64 << n) - 1 });
    if policy.eligible.is_none() && call.only.is_none() && call.prefer.is_none() {
        Ok((every, None))
    } else {
        restrict(policy, request, call, every)
    }
}

/// The eligible endpoints and the preferred one of a call that the policy's predicate, the
/// call's `only` or its `prefer` restricts (out of line: most calls have none of them).
#[cold]
#[inline(never)]
fn restrict(
    policy: &crate::Policy,
    request: &crate::policy::RequestInfo<'_>,
    call: &crate::CallOptions,
    every: Bits,
) -> Result<(Bits, Option<u8>), Stop> {
    let mut eligible = every;
    if let Some(f) = &policy.eligible {
        eligible = Bits(0);
        for (i, e) in policy.endpoints.iter().enumerate() {
            if f(e, request) {
                eligible.set(i);
            }
        }
    }
    if let Some(id) = call.only.as_deref() {
        let i = policy
            .endpoint_index(id)
            .ok_or_else(|| Stop::UnknownEndpoint(id.to_owned()))?;
        eligible = Bits(eligible.0 & (1u64 << i));
    }
    let mut preferred = None;
    if let Some(id) = call.prefer.as_deref() {
        let i = policy
            .endpoint_index(id)
            .ok_or_else(|| Stop::UnknownEndpoint(id.to_owned()))?;
        preferred = Some(i).filter(|i| eligible.has(*i));
    }
    Ok((eligible, preferred.map(|p| p as u8)))
}

/// The endpoint proposed for the next attempt, and the wait before it (`None`: a failover,
/// which goes at once).
pub(crate) struct Next {
    pub(crate) endpoint: usize,
    pub(crate) kind: AttemptKind,
    pub(crate) wait: Option<(Duration, WaitReason)>,
}

impl<R> Call<'_, R> {
    /// The call's base order: eligible endpoints in priority order, the preferred one
    /// first, or with tiers the order ranked when the call started.
    pub(crate) fn base(&self) -> BaseOrder {
        match (&self.order.ranked, &self.engine.policy.tiers) {
            (Some(drawn_from), Tiers::Ranked(ranked)) => BaseOrder::Ranked {
                list: self.rank(ranked, &mut drawn_from.clone()),
                pos: 0,
            },
            _ => self.order.by_index(),
        }
    }

    /// Whether endpoint `i` is available now (reporting any transition that asking made).
    #[inline]
    pub(crate) fn available(&self, i: usize, now: Instant) -> bool {
        self.engine.health.calm(i) || self.available_now(i, now)
    }

    /// [`available`](Self::available) for an endpoint that is not calm: asks under its
    /// lock.
    #[cold]
    #[inline(never)]
    fn available_now(&self, i: usize, now: Instant) -> bool {
        let mut transitions = Transitions::new();
        let available = self.engine.health.available(i, now, &mut transitions);
        if !transitions.is_empty() {
            self.report_transitions(i, now, &transitions);
        }
        available
    }

    /// Sets up the order at the call's start from its eligible endpoints and preferred one
    /// ([`eligibility`], asked once): the first round and the attempt caps. Returns why
    /// the call cannot start.
    pub(crate) fn order_start(
        &mut self,
        (eligible, preferred): (Bits, Option<u8>),
        call: &crate::CallOptions,
        now: Instant,
    ) -> Result<(), Stop> {
        self.order.eligible = eligible;
        self.order.preferred = preferred;
        if let Tiers::Ranked(ranked) = &self.engine.policy.tiers {
            self.draw_ranked(ranked);
        }
        self.build_round(now);
        if self.order.round.len() == 0 {
            return Err(Stop::Reason(StopReason::NoUsableEndpoint));
        }
        self.order.set_caps(
            &self.engine.policy,
            call.attempts_per_endpoint,
            call.max_attempts,
        );
        Ok(())
    }

    /// With tiers: draws the call's ranked order once (the draws advance the call's random
    /// source once, as if the order were kept) and keeps the state it was drawn from.
    #[cold]
    #[inline(never)]
    fn draw_ranked(&mut self, ranked: &[(u8, u32)]) {
        let drawn_from = self.schedule.rng.clone();
        let mut rng = drawn_from.clone();
        self.rank(ranked, &mut rng);
        self.schedule.rng = rng;
        self.order.ranked = Some(drawn_from);
    }

    /// Attempts per round at endpoint `e`: the call's setting, else the endpoint's own,
    /// else the policy's (SPEC 2.6).
    pub(crate) fn per_endpoint(&self, e: usize) -> u32 {
        self.order.per_endpoint(&self.engine.policy, e)
    }

    /// The call's base order with tiers: the preferred endpoint, then each tier's eligible
    /// endpoints, the tier shuffled by weight from the call's random source (each next
    /// endpoint drawn with probability weight / weight left in the tier).
    fn rank(&self, ranked: &[(u8, u32)], rng: &mut Rng) -> List {
        let mut list = List::default();
        let preferred = self.order.preferred.map(usize::from);
        if let Some(p) = preferred {
            list.push(p);
        }
        let eligible = self.order.eligible;
        let endpoints = &self.engine.policy.endpoints;
        let weight = |i: usize| u64::from(endpoints[i].weight_of());
        for tier in ranked.chunk_by(|a, b| a.1 == b.1) {
            // Inline, whatever the tier's size: ranking allocates nothing.
            let mut left = List::default();
            for i in tier.iter().map(|&(i, _)| usize::from(i)) {
                if eligible.has(i) && Some(i) != preferred {
                    left.push(i);
                }
            }
            while left.len() > 1 {
                let total: u64 = left.iter().map(weight).sum();
                let mut r = ((u128::from(rng.next_u64()) * u128::from(total)) >> 64) as u64;
                let k = left
                    .iter()
                    .position(|e| {
                        let w = weight(e);
                        let hit = r < w;
                        r = r.saturating_sub(w);
                        hit
                    })
                    .unwrap_or(left.len() - 1);
                list.push(left.remove(k));
            }
            if left.len() == 1 {
                list.push(left.get(0));
            }
        }
        list
    }

    /// Builds a round: available endpoints of the base order first, then (tried-last mode)
    /// the unavailable ones, or (skip mode) none of them, with an event per skip.
    pub(crate) fn build_round(&mut self, now: Instant) {
        // Built in place: a round assembled byte by byte and then copied whole makes the
        // copy wait on the byte stores.
        self.order.round.clear();
        let mut later = Bits(0);
        if self.order.ranked.is_none() && self.order.preferred.is_none() {
            // The common order, eligible endpoints by index: a walk over the bits, with
            // one atomic read per calm endpoint.
            let mut rest = self.order.eligible;
            while let Some(i) = rest.pop() {
                if self.available(i, now) {
                    self.order.round.push(i);
                } else {
                    later.set(i);
                }
            }
        } else {
            for i in self.base() {
                if self.available(i, now) {
                    self.order.round.push(i);
                } else {
                    later.set(i);
                }
            }
        }
        let skip = self.engine.policy.settings.unavailable == Unavailable::Skip;
        let mut skipped = Bits(0);
        if later.0 != 0 {
            // Only when an endpoint is unavailable is the base order derived a second time.
            for i in self.base().filter(|&i| later.has(i)) {
                if self.has_sink() {
                    self.emit_cooldown_skip(i, skip, now);
                }
                if skip {
                    skipped.set(i);
                } else {
                    self.order.round.push(i);
                }
            }
        }
        let order = &mut self.order;
        order.skipped = skipped;
        order.pos = 0;
        order.round_start = self.history.made() + 1;
    }

    /// Attempts at `e` in the current round.
    pub(crate) fn round_count(&self, e: usize) -> u32 {
        self.history.count_at(e, self.order.round_start)
    }

    /// Whether `e` can take another attempt in this round (not in flight, not skipped, not
    /// yet tried in it, and not [`closed`](Self::closed)).
    fn open_in_round(&self, e: usize, in_flight: Bits) -> bool {
        !in_flight.has(e)
            && !self.order.skipped.has(e)
            && self.round_count(e) == 0
            && !self.closed().has(e)
    }

    /// Endpoints that get no further attempt in this call, since another would fail the
    /// same way (SPEC 9): those that rejected the call's TLS handshake on a certificate,
    /// and those that refused a credential the attempt had just refreshed.
    pub(crate) fn closed(&self) -> Bits {
        let refused = self
            .history
            .credential_refused(|e, status| self.is_credential_refusal(e, status));
        Bits(self.history.untrusted().0 | refused.0)
    }

    /// Whether `status` at endpoint `e` refuses its credential (401, or 403 where
    /// configured); never for an endpoint without a credential slot.
    pub(crate) fn is_credential_refusal(&self, e: usize, status: http::StatusCode) -> bool {
        self.engine.policy.endpoints[e]
            .credential_settings()
            .is_some_and(|c| c.is_refusal(status))
    }

    /// The kind of a later attempt at `e`: a retry when the call already attempted it, else
    /// a failover (SPEC 1).
    pub(crate) fn kind_at(&self, e: usize) -> AttemptKind {
        if self.history.attempted().has(e) {
            AttemptKind::Retry
        } else {
            AttemptKind::Failover
        }
    }

    /// Pinned (SPEC 2.6): permission forbids every other endpoint but allows a retry of the
    /// current one. A call with no other usable endpoint at all is not pinned: it follows
    /// the ordinary schedule.
    fn is_pinned(&self, current: usize) -> bool {
        let mut others = self
            .base()
            .filter(|&e| e != current && !self.order.skipped.has(e))
            .peekable();
        others.peek().is_some() && self.allowed(current) && !others.any(|e| self.allowed(e))
    }

    /// The next target after a triggering outcome at `current`: `Ok(Some(next))`, `Ok(None)`
    /// to wait for attempts still in flight, or why the call stops.
    pub(crate) fn next_target(
        &mut self,
        current: usize,
        now: Instant,
    ) -> Result<Option<Next>, Stop> {
        self.may_continue()?;
        let pinned = self.is_pinned(current)
            && !self
                .history
                .flights
                .iter()
                .any(|f| f.endpoint as usize != current);
        if (!pinned || self.order.max_explicit) && self.history.made() >= self.order.max_attempts {
            return Err(Stop::Reason(StopReason::AttemptsExhausted));
        }
        let mut refused = false;
        // 1. Retry the same endpoint (after a wait), within its per-round or pinned limit.
        let limit_ok = if pinned {
            let limit = self.order.pinned_limit(&self.engine.policy, current);
            self.history.count_at(current, 0) < limit
        } else {
            self.round_count(current) < self.per_endpoint(current)
        };
        let hedged_in_flight = !self.history.flights.is_empty();
        // An endpoint that rejected the TLS handshake on a certificate, or refused a
        // credential just refreshed, fails the same way again: no retry there (SPEC 9).
        let closed = self.closed().has(current);
        if limit_ok && !hedged_in_flight && !closed {
            if self.allowed(current) {
                let wait = self.wait_for(current, WaitReason::Retry, now)?;
                return Ok(Some(Next {
                    endpoint: current,
                    kind: AttemptKind::Retry,
                    wait: Some(wait),
                }));
            }
            refused = true;
        }
        // 2. Fail over to the next endpoint of the round, at once.
        if let Some(next) = self.failover_after(current, &mut refused) {
            return Ok(Some(next));
        }
        if hedged_in_flight {
            return Ok(None);
        }
        if pinned {
            return Err(Stop::Reason(if limit_ok {
                StopReason::NotPermitted
            } else {
                StopReason::AttemptsExhausted
            }));
        }
        // 3. A new round, from the first permitted endpoint, after a backoff wait.
        self.new_round(now, refused)
    }

    /// The next endpoint of the round after `current` that may take a failover.
    fn failover_after(&self, current: usize, refused: &mut bool) -> Option<Next> {
        let from = self.order.round.position(current).map_or(0, |p| p + 1);
        let in_flight = self.history.in_flight();
        for p in from..self.order.round.len() {
            let e = self.order.round.get(p);
            if !self.open_in_round(e, in_flight) {
                continue;
            }
            if self.allowed(e) {
                return Some(Next {
                    endpoint: e,
                    kind: self.kind_at(e),
                    wait: None,
                });
            }
            *refused = true;
        }
        None
    }

    /// Starts a new round when the attempt cap allows, from its first permitted endpoint.
    fn new_round(&mut self, now: Instant, mut refused: bool) -> Result<Option<Next>, Stop> {
        if self.history.made() < self.order.max_attempts {
            self.build_round(now);
            let closed = self.closed();
            let first = self.order.round.iter().find(|&e| {
                if closed.has(e) {
                    return false;
                }
                let ok = self.allowed(e);
                refused |= !ok;
                ok
            });
            if let Some(e) = first {
                let wait = self.wait_for(e, WaitReason::Round, now)?;
                return Ok(Some(Next {
                    endpoint: e,
                    kind: self.kind_at(e),
                    wait: Some(wait),
                }));
            }
            if self.order.round.len() == 0 {
                return Err(Stop::Reason(StopReason::NoUsableEndpoint));
            }
        }
        Err(Stop::Reason(if refused {
            StopReason::NotPermitted
        } else {
            StopReason::AttemptsExhausted
        }))
    }

    /// The planned endpoint is unavailable at send time: another permitted endpoint later
    /// in the round that is available now takes its place (moved in front of it); in skip
    /// mode without one, the call stops. Returns the endpoint to send to.
    pub(crate) fn reroute_unavailable(
        &mut self,
        planned: usize,
        now: Instant,
    ) -> Result<usize, Stop> {
        if self.engine.health.calm(planned) {
            return Ok(planned);
        }
        self.reroute_if_unavailable(planned, now)
    }

    /// [`reroute_unavailable`](Self::reroute_unavailable) when the planned endpoint is
    /// not calm (cold: a healthy call's endpoint is).
    #[cold]
    #[inline(never)]
    fn reroute_if_unavailable(&mut self, planned: usize, now: Instant) -> Result<usize, Stop> {
        if self.available_now(planned, now) {
            return Ok(planned);
        }
        let skip = self.engine.policy.settings.unavailable == Unavailable::Skip;
        let pos = (self.order.round.position(planned)).unwrap_or(self.order.pos as usize);
        let in_flight = self.history.in_flight();
        let alt = (pos + 1..self.order.round.len()).find(|&p| {
            let e = self.order.round.get(p);
            self.open_in_round(e, in_flight) && self.allowed(e) && self.available(e, now)
        });
        if skip || alt.is_some() {
            self.emit_cooldown_skip(planned, true, now);
        }
        match (alt, skip) {
            (Some(p), true) => {
                self.order.skipped.set(planned);
                Ok(self.order.round.get(p))
            }
            (Some(p), false) => {
                self.order.round.move_before(p, pos);
                Ok(self.order.round.get(pos))
            }
            (None, true) => {
                self.order.skipped.set(planned);
                Err(Stop::Reason(StopReason::NoUsableEndpoint))
            }
            (None, false) => Ok(planned),
        }
    }

    /// Another endpoint of the round, permitted, available and admitted by its limiter now
    /// (a per-endpoint limiter said "not before" to `endpoint`).
    pub(crate) fn limit_alternative(&self, endpoint: usize, now: Instant) -> Option<usize> {
        let in_flight = self.history.in_flight();
        self.order.round.iter().find(|&e| {
            e != endpoint
                && self.open_in_round(e, in_flight)
                && self.allowed(e)
                && self.available(e, now)
                && self.limit_peek(e, now) == crate::limit::Admit::Go
        })
    }

    /// The endpoint a hedge goes to: the next of the round that is not in flight, not yet
    /// attempted, not skipped, permitted and available.
    pub(crate) fn hedge_target(&self, now: Instant) -> Option<usize> {
        self.hedge_targets(now).next()
    }

    /// Every endpoint a hedge may go to, in the round's order (see
    /// [`hedge_target`](Self::hedge_target)).
    pub(crate) fn hedge_targets(&self, now: Instant) -> impl Iterator<Item = usize> + '_ {
        let in_flight = self.history.in_flight();
        let attempted = self.history.attempted();
        self.order.round.iter().filter(move |&e| {
            !in_flight.has(e)
                && !attempted.has(e)
                && !self.order.skipped.has(e)
                && self.allowed(e)
                && self.available(e, now)
        })
    }

    /// Notes that an attempt at `endpoint` was launched.
    pub(crate) fn launched_at(&mut self, endpoint: usize) {
        if let Some(p) = self.order.round.position(endpoint) {
            self.order.pos = p as u32;
        }
    }

    fn emit_cooldown_skip(&self, i: usize, skipped: bool, now: Instant) {
        let state = self
            .engine
            .health
            .snapshot(i, now)
            .map(|h| h.state)
            .unwrap_or(crate::BreakerState::Closed);
        self.emit(
            now,
            EventKind::CooldownSkip {
                endpoint: &self.engine.ids[i],
                state,
                skipped,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use crate::{BodyKind, Call, CallOptions, Endpoint, Engine, Head, Policy, RequestInfo};

    /// The order fields a start decides, as text (every one of them, by name).
    fn snapshot(call: &Call<'_, Head>) -> String {
        let o = &call.order;
        format!(
            "eligible {:b} preferred {:?} round {:?} skipped {:b} pos {} round_start {} per_call {:?} \
             per_default {} max_attempts {} max_explicit {} ranked {}",
            o.eligible.0,
            o.preferred,
            o.round.iter().collect::<Vec<_>>(),
            o.skipped.0,
            o.pos,
            o.round_start,
            o.per_call,
            o.per_default,
            o.max_attempts,
            o.max_explicit,
            o.ranked.is_some(),
        )
    }

    /// The calm start made in `Call::new` is the order `order_start` builds for the same
    /// call, for every combination of endpoint count and attempt settings tried.
    #[test]
    fn the_calm_start_is_the_order_the_general_start_builds() {
        let (uri, headers) = ("/".parse().unwrap(), http::HeaderMap::new());
        let info = RequestInfo {
            method: &http::Method::GET,
            uri: &uri,
            headers: &headers,
        };
        let counts = [None, Some(1), Some(2)];
        for n in 1..=4 {
            for own in [None, Some(2)] {
                for (policy_per, policy_max, pinned) in
                    [(None, None, None), (Some(2), Some(5), Some(4))]
                {
                    for call_per in counts {
                        for call_max in counts {
                            let mut b = Policy::builder();
                            for i in 0..n {
                                let mut e = Endpoint::new(
                                    format!("e{i}"),
                                    format!("https://e{i}.example/"),
                                );
                                if i == 0 {
                                    if let Some(k) = own {
                                        e = e.attempts_per_endpoint(k);
                                    }
                                }
                                b = b.endpoint(e);
                            }
                            b = b.configure(|s| {
                                s.attempts_per_endpoint = policy_per;
                                s.max_attempts = policy_max;
                                s.pinned_attempts = pinned;
                            });
                            let engine = Engine::new(b.build().unwrap());
                            let options = CallOptions {
                                attempts_per_endpoint: call_per,
                                max_attempts: call_max,
                                ..CallOptions::default()
                            };
                            let now = Instant::now();
                            let mut call: Call<'_, Head> =
                                Call::new(&engine, &info, BodyKind::Empty, options.clone(), now);
                            let eligible = (call.order.eligible, None);
                            assert!(super::Order::calm_set(&engine, eligible).is_some());
                            let calm = snapshot(&call);
                            let eligible = (call.order.eligible, None);
                            assert!(call.order_start(eligible, &options, now).is_ok());
                            assert_eq!(calm, snapshot(&call), "n {n}, own {own:?}, policy {policy_per:?}/{policy_max:?}/{pinned:?}, call {call_per:?}/{call_max:?}");
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod asked_once {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Instant;

    use crate::{Action, BodyKind, Call, CallOptions, Endpoint, Engine, Head, Policy, RequestInfo};

    /// The policy's eligibility predicate is the caller's code: a call asks it once per
    /// endpoint, whichever start it takes.
    #[test]
    fn the_eligibility_predicate_is_asked_once_per_endpoint() {
        let asked = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&asked);
        let policy = Policy::builder()
            .endpoint(Endpoint::new("a", "https://a.example/"))
            .endpoint(Endpoint::new("b", "https://b.example/"))
            .endpoint(Endpoint::new("c", "https://c.example/"))
            .eligible_fn(move |e, _| {
                counter.fetch_add(1, Ordering::Relaxed);
                e.id() != "a"
            })
            .build()
            .unwrap();
        let engine = Engine::new(policy);
        let (uri, headers) = ("/".parse().unwrap(), http::HeaderMap::new());
        let info = RequestInfo {
            method: &http::Method::GET,
            uri: &uri,
            headers: &headers,
        };
        // A preferred endpoint: the call takes the general start.
        let options = CallOptions {
            prefer: Some("c".into()),
            ..CallOptions::default()
        };
        let mut call: Call<'_, Head> =
            Call::new(&engine, &info, BodyKind::Empty, options, Instant::now());
        let Action::Send(first) = call.poll() else {
            panic!("a call with eligible endpoints sends")
        };
        assert_eq!(first.endpoint, 2);
        assert_eq!(asked.load(Ordering::Relaxed), 3);
    }
}
