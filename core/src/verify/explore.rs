//! Exploration: systematic short scripts, seeded random sessions beyond, shrinking.

use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

use crate::permission::{Permission, PermissionSource};
use crate::rng::Rng;

use super::judge::Violation;
use super::vector::Counterexample;
use super::world::{CallClass, Fault, Planned, Traced, Variant, World};

/// What exploring one class found.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    pub(crate) calls: usize,
    pub(crate) violations: usize,
    pub(crate) by_kind: [usize; 3],
    pub(crate) max_attempts: u32,
    pub(crate) max_time: Duration,
    pub(crate) counterexample: Option<(usize, Counterexample)>,
}

/// The explorer's running state.
pub(crate) struct Explorer<'w> {
    pub(crate) world: &'w World,
    pub(crate) start: Instant,
    pub(crate) tallies: [Tally; 3],
    pub(crate) attempted: Vec<usize>,
    pub(crate) scripts: HashSet<u64>,
    pub(crate) explored: usize,
}

impl<'w> Explorer<'w> {
    pub(crate) fn new(world: &'w World, start: Instant) -> Self {
        Explorer {
            world,
            start,
            tallies: Default::default(),
            attempted: vec![0; world.policy.endpoints.len()],
            scripts: HashSet::new(),
            explored: 0,
        }
    }

    /// Runs one session and tallies every call of it.
    pub(crate) fn session(&mut self, calls: &[Planned]) {
        let traced = self.world.run(calls, self.start);
        for (k, (c, t)) in calls.iter().zip(&traced).enumerate() {
            self.explored += 1;
            self.scripts.insert(signature(c, t));
            for e in t.sent.iter().map(|s| s.endpoint).collect::<HashSet<_>>() {
                self.attempted[e] += 1;
            }
            let tally = &mut self.tallies[class_index(c.variant.class)];
            tally.calls += 1;
            tally.max_attempts = tally.max_attempts.max(t.report.attempts.len() as u32);
            tally.max_time = tally.max_time.max(t.report.elapsed);
            let Some(v) = t.violations.first() else {
                continue;
            };
            tally.violations += 1;
            tally.by_kind[v.kind as usize] += 1;
            let found_size = size(&calls[..=k]);
            if tally
                .counterexample
                .as_ref()
                .is_none_or(|(s, _)| found_size < *s)
            {
                let shrunk = shrink(self.world, calls[..=k].to_vec(), v, self.start);
                let traced = self.world.run(&shrunk, self.start);
                let cx = Counterexample::new(self.world, &shrunk, &traced);
                tally.counterexample = Some((size(&shrunk), cx));
            }
        }
    }
}

pub(crate) fn class_index(c: CallClass) -> usize {
    match c {
        CallClass::SafeRead => 0,
        CallClass::Write => 1,
        CallClass::KeyedWrite => 2,
    }
}

/// A call's script as far as it was played: the variant, the wait, and the faults that
/// were used.
fn signature(c: &Planned, t: &Traced) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    c.variant.hash(&mut h);
    c.wait_before.hash(&mut h);
    for s in &t.sent {
        (s.endpoint, s.fault).hash(&mut h);
    }
    h.finish()
}

/// The size a counterexample is judged by: calls first, then faults.
fn size(calls: &[Planned]) -> usize {
    calls.len() * 1000 + calls.iter().map(|c| c.faults.len()).sum::<usize>()
}

/// The explored kinds of call: each class with no deadline and with `deadline`; writes
/// also with a one-shot body.
pub(crate) fn variants(deadline: Duration) -> Vec<Variant> {
    let mut out = Vec::new();
    for class in CallClass::ALL {
        for d in [None, Some(deadline)] {
            let bodies: &[bool] = if class == CallClass::SafeRead {
                &[false]
            } else {
                &[false, true]
            };
            for &one_shot in bodies {
                out.push(Variant {
                    class,
                    deadline: d,
                    one_shot,
                });
            }
        }
    }
    out
}

/// Every script of exactly `len` faults for `variant`, one call each, in order.
pub(crate) fn systematic(
    explorer: &mut Explorer<'_>,
    variant: Variant,
    len: usize,
    progress: &mut dyn FnMut(usize),
) {
    let n = Fault::ALL.len();
    let mut digits = vec![0usize; len];
    loop {
        let faults = digits.iter().map(|&d| Fault::ALL[d]).collect();
        explorer.session(&[Planned {
            variant,
            faults,
            wait_before: Duration::ZERO,
        }]);
        progress(explorer.explored);
        let Some(k) = digits.iter().rposition(|&d| d + 1 < n) else {
            return;
        };
        digits[k] += 1;
        digits[k + 1..].iter_mut().for_each(|d| *d = 0);
    }
}

/// A random session: up to four calls (and at most `max_calls`), each of a random variant, with up to
/// `max_faults` random faults and a random pause before it (none, a backoff's worth, the
/// breaker's open time, a Retry-After's worth).
pub(crate) fn random_session(
    world: &World,
    variants: &[Variant],
    rng: &mut Rng,
    max_faults: usize,
    max_calls: usize,
) -> Vec<Planned> {
    let s = &world.policy.settings;
    let pauses = [
        Duration::ZERO,
        Duration::ZERO,
        s.backoff.initial,
        s.breaker.open + Duration::from_millis(1),
        Duration::from_secs(1),
        Duration::from_secs(2),
    ];
    let calls = (1 + pick(rng, 4)).min(max_calls.max(1));
    (0..calls)
        .map(|_| {
            let len = pick(rng, max_faults + 1);
            Planned {
                variant: variants[pick(rng, variants.len())],
                faults: (0..len)
                    .map(|_| Fault::ALL[pick(rng, Fault::ALL.len())])
                    .collect(),
                wait_before: pauses[pick(rng, pauses.len())],
            }
        })
        .collect()
}

fn pick(rng: &mut Rng, n: usize) -> usize {
    ((u128::from(rng.next_u64()) * n as u128) >> 64) as usize
}

/// Whether the last call of `calls` still breaks a rule of the same kind as `v`.
fn still_fails(world: &World, calls: &[Planned], v: &Violation, start: Instant) -> bool {
    let traced = world.run(calls, start);
    traced
        .last()
        .is_some_and(|t| t.violations.iter().any(|x| x.kind == v.kind))
}

/// Shrinks a failing session: drops earlier calls, trims unused and then any faults,
/// replaces faults with simpler ones, and zeroes pauses, while the last call still fails
/// the same way. Each step makes the session strictly smaller or simpler, so it ends.
fn shrink(world: &World, mut calls: Vec<Planned>, v: &Violation, start: Instant) -> Vec<Planned> {
    trim_unused(world, &mut calls, start);
    loop {
        let before = calls.clone();
        for k in (0..calls.len().saturating_sub(1)).rev() {
            let mut fewer = calls.clone();
            fewer.remove(k);
            if still_fails(world, &fewer, v, start) {
                calls = fewer;
            }
        }
        for k in 0..calls.len() {
            simplify_call(world, &mut calls, k, v, start);
        }
        trim_unused(world, &mut calls, start);
        if calls == before {
            return calls;
        }
    }
}

fn simplify_call(world: &World, calls: &mut Vec<Planned>, k: usize, v: &Violation, start: Instant) {
    for i in (0..calls[k].faults.len()).rev() {
        let mut fewer = calls.clone();
        fewer[k].faults.remove(i);
        if still_fails(world, &fewer, v, start) {
            *calls = fewer;
        }
    }
    for i in 0..calls[k].faults.len() {
        let current = calls[k].faults[i];
        for &simpler in Fault::ALL.iter().take_while(|f| **f < current) {
            let mut other = calls.clone();
            other[k].faults[i] = simpler;
            if still_fails(world, &other, v, start) {
                *calls = other;
                break;
            }
        }
    }
    if !calls[k].wait_before.is_zero() {
        let mut other = calls.clone();
        other[k].wait_before = Duration::ZERO;
        if still_fails(world, &other, v, start) {
            *calls = other;
        }
    }
}

/// Drops the faults no attempt used (the calls ended before reaching them).
fn trim_unused(world: &World, calls: &mut [Planned], start: Instant) {
    let traced = world.run(calls, start);
    for (c, t) in calls.iter_mut().zip(&traced) {
        c.faults.truncate(t.sent.len());
    }
}

/// Whether a class's calls can be pinned (SPEC 2.6: the current endpoint may take an
/// attempt and no other may), and whether the policy's permission function makes failover
/// `Always` for it. Equal permissions allow or refuse every endpoint alike, so pinning
/// needs them to differ: retry `Always` with failover weaker (a keyed write after a
/// possible execution), failover `Never` (pinned at the first endpoint), or failover
/// `Always` with retry weaker (once the first endpoint may have executed, the sticky rule
/// of SPEC 2.2 forbids the first, and lets a failover endpoint take retries until it may
/// have executed too). Only retry
/// `Never` with failover `IfUndelivered` differs and never pins.
pub(crate) fn permissions_of(world: &World, class: CallClass, start: Instant) -> (bool, bool) {
    let variant = Variant {
        class,
        deadline: None,
        one_shot: false,
    };
    let traced = world.run(
        &[Planned {
            variant,
            faults: Vec::new(),
            wait_before: Duration::ZERO,
        }],
        start,
    );
    traced.first().map_or((false, false), |t: &Traced| {
        let (retry, failover) = t.permissions;
        (
            retry != failover && (retry != Permission::Never || failover == Permission::Always),
            failover == Permission::Always && t.sources.1 == PermissionSource::PolicyFn,
        )
    })
}
