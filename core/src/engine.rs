//! The state shared by all calls of one client: the policy, endpoint health and the retry
//! budget. Everything behind `&self`, cheap on the healthy path, no I/O, no timers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::budget::BudgetState;
use crate::event::{Event, EventKind};
use crate::health::{EndpointHealth, Health};
use crate::limit::{LimitScope, LimiterState};
use crate::policy::Policy;

/// One client's engine: policy, per-endpoint health and budget, shared by all its calls
/// (wrap it in an [`Arc`] and hand it to [`Call::new`](crate::Call::new)).
///
/// ```
/// use std::sync::Arc;
/// use std::time::Instant;
/// use baton_core::{BreakerState, Endpoint, Engine, Policy};
/// let policy = Policy::builder()
///     .endpoint(Endpoint::new("a", "https://a.example/"))
///     .build()
///     .unwrap();
/// let engine = Arc::new(Engine::new(policy));
/// let now = Instant::now();
/// assert_eq!(engine.health(0, now).unwrap().state, BreakerState::Closed);
/// assert!(engine.reset("a", now));
/// assert!(!engine.reset("nope", now));
/// ```
#[derive(Debug)]
pub struct Engine {
    pub(crate) policy: Policy,
    pub(crate) health: Health,
    pub(crate) budget: Option<BudgetState>,
    pub(crate) ids: Vec<Arc<str>>,
    /// One limiter (client scope) or one per endpoint; empty when rate limiting is off.
    pub(crate) limiters: Vec<LimiterState>,
    calls: AtomicU64,
}

impl Engine {
    /// A fresh engine: every endpoint closed, budget full.
    pub fn new(policy: Policy) -> Self {
        let health = Health::new(policy.settings.breaker, policy.endpoints.len());
        let budget = policy.settings.budget.map(BudgetState::new);
        let ids = policy.endpoints.iter().map(|e| Arc::from(e.id())).collect();
        let limiters = match policy.settings.rate_limit {
            None => Vec::new(),
            Some(rl) => {
                let n = match rl.scope {
                    LimitScope::Client => 1,
                    LimitScope::Endpoint => policy.endpoints.len(),
                };
                (0..n).map(|_| LimiterState::new(rl.limiter)).collect()
            }
        };
        Engine {
            policy,
            health,
            budget,
            ids,
            limiters,
            calls: AtomicU64::new(0),
        }
    }

    /// The policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// A snapshot of endpoint `index`'s health at `now`.
    pub fn health(&self, index: usize, now: Instant) -> Option<EndpointHealth> {
        self.health.snapshot(index, now)
    }

    /// A snapshot of the endpoint with `id`.
    pub fn health_of(&self, id: &str, now: Instant) -> Option<EndpointHealth> {
        self.health(self.policy.endpoint_index(id)?, now)
    }

    /// Resets the endpoint with `id` to closed, by hand; outcomes of attempts started
    /// before the reset are ignored. Returns false for an unknown id. The transition is
    /// reported to the policy's event sink (with an empty request id: no call caused it).
    pub fn reset(&self, id: &str, now: Instant) -> bool {
        let Some(i) = self.policy.endpoint_index(id) else {
            return false;
        };
        let (found, transitions) = self.health.reset(i);
        if let Some(sink) = &self.policy.events {
            for t in transitions {
                sink(&Event {
                    request_id: "",
                    idempotency_key: None,
                    at: now,
                    kind: EventKind::BreakerTransition {
                        endpoint: &self.ids[i],
                        from: t.from,
                        to: t.to,
                    },
                });
            }
        }
        found
    }

    /// Retry-budget tokens available at `now` (`None` when the budget is off).
    pub fn budget_balance(&self, now: Instant) -> Option<f64> {
        self.budget.as_ref().map(|b| b.balance(now))
    }

    /// The limiter that governs attempts at endpoint `index`, if any.
    pub(crate) fn limiter(&self, index: usize) -> Option<&LimiterState> {
        match self.limiters.len() {
            0 => None,
            1 => self.limiters.first(),
            _ => self.limiters.get(index),
        }
    }

    /// The sequence number of the next call (seeds its random source).
    pub(crate) fn next_call(&self) -> u64 {
        self.calls.fetch_add(1, Ordering::Relaxed)
    }
}
