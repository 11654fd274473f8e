//! Outbound rate limiting (SPEC 2.9): token-bucket and sliding-window limiters, per client
//! or per endpoint, off by default.
//!
//! Asked with the time right before an attempt would be sent, a limiter answers "go" (and
//! spends a token only then) or "not before T". The call decides what to do with a "not
//! before" (move to another endpoint, wait, or fail fast); the limiter never sleeps.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::time::{add, since};

/// A limiter's algorithm.
///
/// ```
/// use std::time::Duration;
/// use baton_core::Limiter;
/// let bucket = Limiter::TokenBucket { capacity: 10, per_second: 5.0 };
/// let window = Limiter::SlidingWindow { limit: 100, window: Duration::from_secs(60) };
/// # let _ = (bucket, window);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "snake_case", deny_unknown_fields)
)]
pub enum Limiter {
    /// A bucket of `capacity` tokens refilled at `per_second`; starts full.
    TokenBucket {
        /// Most tokens held (the burst size).
        capacity: u32,
        /// Refill rate.
        per_second: f64,
    },
    /// At most `limit` attempts in any `window`.
    SlidingWindow {
        /// Attempts admitted per window.
        limit: u32,
        /// Window length.
        #[cfg_attr(feature = "serde", serde(with = "crate::policy::serde_duration"))]
        window: Duration,
    },
}

/// Whether one limiter covers the whole client or each endpoint has its own.
///
/// ```
/// use baton_core::LimitScope;
/// assert_eq!(LimitScope::default(), LimitScope::Client);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum LimitScope {
    /// One limiter for every attempt of the client (the default).
    #[default]
    Client,
    /// One limiter per endpoint.
    Endpoint,
}

/// What a call does when the limiter says "not before T".
///
/// ```
/// use baton_core::OnLimit;
/// assert_eq!(OnLimit::default(), OnLimit::Wait);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum OnLimit {
    /// Wait until T, bounded by the call's deadline (the default).
    #[default]
    Wait,
    /// End the call at once with the stop reason "rate limited".
    FailFast,
}

/// Rate-limiting settings.
///
/// ```
/// use std::time::Duration;
/// use baton_core::{LimitScope, Limiter, OnLimit, RateLimit};
/// let rl = RateLimit {
///     limiter: Limiter::TokenBucket { capacity: 20, per_second: 10.0 },
///     scope: LimitScope::Endpoint,
///     on_limit: OnLimit::Wait,
/// };
/// # let _ = rl;
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct RateLimit {
    /// The algorithm.
    pub limiter: Limiter,
    /// Per client or per endpoint.
    #[cfg_attr(feature = "serde", serde(default))]
    pub scope: LimitScope,
    /// Wait or fail fast.
    #[cfg_attr(feature = "serde", serde(default))]
    pub on_limit: OnLimit,
}

/// A limiter's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admit {
    Go,
    NotBefore(Instant),
}

#[derive(Debug)]
enum State {
    Bucket { tokens: f64, last: Option<Instant> },
    Window { admitted: VecDeque<Instant> },
}

/// One limiter's state.
#[derive(Debug)]
pub(crate) struct LimiterState {
    limiter: Limiter,
    state: Mutex<State>,
}

impl LimiterState {
    pub(crate) fn new(limiter: Limiter) -> Self {
        let state = match limiter {
            Limiter::TokenBucket { capacity, .. } => State::Bucket {
                tokens: f64::from(capacity),
                last: None,
            },
            Limiter::SlidingWindow { limit, .. } => State::Window {
                admitted: VecDeque::with_capacity(limit.min(4096) as usize),
            },
        };
        LimiterState {
            limiter,
            state: Mutex::new(state),
        }
    }

    /// Asks for one attempt at `now`; spends a token only on "go".
    pub(crate) fn admit(&self, now: Instant) -> Admit {
        self.check(now, true)
    }

    /// Asks without spending.
    pub(crate) fn peek(&self, now: Instant) -> Admit {
        self.check(now, false)
    }

    fn check(&self, now: Instant, spend: bool) -> Admit {
        crate::stripe::shared_write();
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match (&mut *state, self.limiter) {
            (
                State::Bucket { tokens, last },
                Limiter::TokenBucket {
                    capacity,
                    per_second,
                },
            ) => {
                let cap = f64::from(capacity);
                if let Some(l) = *last {
                    // Time going backwards refills nothing.
                    let gained = since(now, l).as_secs_f64() * per_second;
                    *tokens = (*tokens + gained).min(cap);
                }
                if last.is_none_or(|l| now > l) {
                    *last = Some(now);
                }
                if *tokens >= 1.0 {
                    if spend {
                        *tokens -= 1.0;
                    }
                    Admit::Go
                } else {
                    let missing = (1.0 - *tokens) / per_second;
                    let wait = Duration::try_from_secs_f64(missing).unwrap_or(crate::MAX_DURATION);
                    Admit::NotBefore(add(now, wait.max(Duration::from_nanos(1))))
                }
            }
            (State::Window { admitted }, Limiter::SlidingWindow { limit, window }) => {
                while admitted.front().is_some_and(|t| add(*t, window) <= now) {
                    admitted.pop_front();
                }
                if (admitted.len() as u32) < limit {
                    if spend {
                        admitted.push_back(now);
                    }
                    Admit::Go
                } else {
                    let oldest = admitted.front().copied().unwrap_or(now);
                    Admit::NotBefore(add(oldest, window).max(now))
                }
            }
            _ => Admit::Go,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_bucket_admits_its_capacity_then_says_when() {
        let l = LimiterState::new(Limiter::TokenBucket {
            capacity: 2,
            per_second: 10.0,
        });
        let t = Instant::now();
        assert_eq!(l.admit(t), Admit::Go);
        assert_eq!(l.admit(t), Admit::Go);
        let Admit::NotBefore(at) = l.admit(t) else {
            panic!("bucket should be empty")
        };
        assert_eq!(at - t, Duration::from_millis(100));
        assert_eq!(l.admit(at), Admit::Go);
    }

    #[test]
    fn peek_spends_nothing() {
        let l = LimiterState::new(Limiter::TokenBucket {
            capacity: 1,
            per_second: 1.0,
        });
        let t = Instant::now();
        assert_eq!(l.peek(t), Admit::Go);
        assert_eq!(l.peek(t), Admit::Go);
        assert_eq!(l.admit(t), Admit::Go);
        assert!(matches!(l.peek(t), Admit::NotBefore(_)));
    }

    #[test]
    fn sliding_window_admits_limit_per_window() {
        let w = Duration::from_secs(1);
        let l = LimiterState::new(Limiter::SlidingWindow {
            limit: 3,
            window: w,
        });
        let t = Instant::now();
        for k in 0..3 {
            assert_eq!(l.admit(t + Duration::from_millis(k * 100)), Admit::Go);
        }
        assert_eq!(
            l.admit(t + Duration::from_millis(500)),
            Admit::NotBefore(t + w)
        );
        assert_eq!(l.admit(t + w), Admit::Go);
    }
}
