//! Time arithmetic that never panics: every instant the engine computes goes through here.

use std::time::{Duration, Instant};

use crate::policy::MAX_DURATION;

/// `t + d`, with `d` capped at [`MAX_DURATION`] so the sum cannot overflow on any platform
/// that can represent the caller's instants plus ten years.
#[inline]
pub(crate) fn add(t: Instant, d: Duration) -> Instant {
    let d = d.min(MAX_DURATION);
    t.checked_add(d)
        .or_else(|| t.checked_add(Duration::from_secs(3600)))
        .unwrap_or(t)
}

/// `later - earlier`, or zero when `later` is earlier.
#[inline]
pub(crate) fn since(later: Instant, earlier: Instant) -> Duration {
    later.saturating_duration_since(earlier)
}
