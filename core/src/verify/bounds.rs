//! Worst-case bounds computed from the settings alone (SPEC 2.6), for one call class.
//!
//! **Attempts.** With `max_attempts` set, it is the bound, pinned calls included. Without
//! it, a call's cap is one round at its start: `M = sum over endpoints of per(e)`, where
//! `per(e)` is the endpoint's own `attempts_per_endpoint`, else the policy's, else 1. When
//! a call can find a single endpoint usable (the policy has one, or an eligibility
//! predicate or skipped unavailable endpoints can leave one), that default is 3 and the
//! bound is also at least `max over e of per(e)` with it. A call that can be pinned (only the
//! current endpoint allowed: a retry permission that differs from the failover one, such
//! as a keyed write's) makes fewer than `M` attempts before the pin and then up to
//! `pinned(e)` at the pinned endpoint `e` in total, where `pinned(e)` is
//! `pinned_attempts`, else `e`'s own or the policy's `attempts_per_endpoint`, else 3:
//! `M - 1 + max over e of pinned(e)`.
//!
//! The bounds are for calls without per-call schedule options (`CallOptions`'
//! `attempts_per_endpoint`, `max_attempts`, `attempt_timeout`), as the explorer makes them.
//!
//! **Time to a result** (the response headers, or the error). With a deadline, the
//! deadline: no wait ends after it and every attempt timeout is clipped to it. Otherwise,
//! for `A` attempts: `A x (connect_timeout + attempt_timeout)` (the longest of any
//! endpoint; redirect hops share the attempt's timer) plus, for each of the `A - 1` waits
//! between attempts, `max(backoff_k, max_retry_after)`, where `backoff_k` is the largest
//! backoff any endpoint can draw for the call's `k`-th wait (its base delay, times `1 + f`
//! with proportional jitter). A Retry-After wait and a wait for a cooling-down endpoint are
//! both capped by `max_retry_after`. The time is unbounded when a rate limiter makes calls
//! wait with no deadline (other calls can keep taking its tokens), or when the sum does not
//! fit in a `Duration`.

use std::time::Duration;

use crate::backoff::Jitter;
use crate::limit::OnLimit;
use crate::policy::{Policy, Unavailable};

/// The worst case of one call class, from the settings.
///
/// ```
/// use std::time::Duration;
/// use baton_core::verify::{Bound, TimeBound};
/// let b = Bound { attempts: 2, time: TimeBound::Within(Duration::from_secs(70)) };
/// assert_eq!(b.time.within(), Some(Duration::from_secs(70)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bound {
    /// Most attempts one call can make.
    pub attempts: u32,
    /// Longest time to a result.
    pub time: TimeBound,
}

/// The longest time to a result, or why there is none.
///
/// ```
/// use baton_core::verify::TimeBound;
/// assert_eq!(TimeBound::Unbounded("no deadline").within(), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeBound {
    /// At most this long.
    Within(Duration),
    /// No finite bound, and why.
    Unbounded(&'static str),
}

impl TimeBound {
    /// The bound, when finite.
    pub fn within(self) -> Option<Duration> {
        match self {
            TimeBound::Within(d) => Some(d),
            TimeBound::Unbounded(_) => None,
        }
    }
}

/// The bound for calls of a class that `pinnable` (may be pinned) and has `deadline`
/// (the call's, else the policy's).
pub(crate) fn bound(policy: &Policy, pinnable: bool, deadline: Option<Duration>) -> Bound {
    let attempts = attempts(policy, pinnable);
    let time = match deadline {
        Some(d) => TimeBound::Within(d),
        None => time(policy, attempts),
    };
    Bound { attempts, time }
}

fn attempts(policy: &Policy, pinnable: bool) -> u32 {
    let s = &policy.settings;
    if let Some(max) = s.max_attempts {
        return max;
    }
    let n = policy.endpoints.len();
    let per = |e: usize, default: u32| {
        policy
            .attempts_per_endpoint_of(e)
            .or(s.attempts_per_endpoint)
            .unwrap_or(default)
    };
    // A call sees one usable endpoint when the policy has one, or when eligibility or
    // skipping leaves one: it then defaults to 3 attempts there.
    let can_be_alone = n < 2 || policy.eligible.is_some() || s.unavailable == Unavailable::Skip;
    let one = if can_be_alone {
        (0..n).map(|e| per(e, 3)).max().unwrap_or(0)
    } else {
        0
    };
    if n < 2 {
        return one;
    }
    let round = (0..n).fold(0u32, |sum, e| sum.saturating_add(per(e, 1)));
    // Pinned at `e`: fewer than `M` attempts before the pin (a share of `e` a round left
    // unused, skipped or rate limited, goes to a further round of the others), then up to
    // `e`'s pinned limit there in total.
    let pinned_limit = (0..n).map(|e| s.pinned_attempts.unwrap_or(per(e, 3))).max();
    let pinned = match pinnable {
        true => round
            .saturating_sub(1)
            .saturating_add(pinned_limit.unwrap_or(3)),
        false => round,
    };
    one.max(pinned)
}

fn time(policy: &Policy, attempts: u32) -> TimeBound {
    let s = &policy.settings;
    if matches!(&s.rate_limit, Some(r) if r.on_limit == OnLimit::Wait) {
        return TimeBound::Unbounded("a rate limiter that waits, and no deadline");
    }
    let n = policy.endpoints.len();
    let per_attempt = (0..n)
        .map(|e| {
            policy
                .connect_timeout_for(e)
                .saturating_add(policy.attempt_timeout_for(e))
        })
        .max()
        .unwrap_or(Duration::ZERO);
    let mut total = Some(Duration::ZERO);
    let mut backoff = Duration::ZERO;
    for k in 0..attempts {
        total = total.and_then(|t| t.checked_add(per_attempt));
        if k + 1 < attempts {
            backoff = backoff.max(largest_backoff(policy, k));
            total = total.and_then(|t| t.checked_add(backoff.max(s.max_retry_after)));
        }
        if total.is_none() {
            break;
        }
    }
    match total {
        Some(t) => TimeBound::Within(t),
        None => TimeBound::Unbounded("the waits and timeouts add up past any duration"),
    }
}

/// The largest delay any endpoint's backoff can draw for the call's `k`-th wait.
fn largest_backoff(policy: &Policy, k: u32) -> Duration {
    (0..policy.endpoints.len())
        .map(|e| {
            let b = policy.backoff_for(e);
            let d = b.base_delay(k);
            match b.jitter {
                Jitter::Proportional(f) if f.is_finite() => d.mul_f64(1.0 + f.clamp(0.0, 1.0)),
                _ => d,
            }
        })
        .max()
        .unwrap_or(Duration::ZERO)
}
