//! The state shared by all calls of one client: the policy, endpoint health and the retry
//! budget. Everything behind `&self`, cheap on the healthy path, no I/O, no timers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::rng::{mix, Rng};
use crate::stripe::{Padded, STRIPES};

use crate::budget::BudgetState;
use crate::event::{Event, EventKind};
use crate::health::{EndpointHealth, Health};
use crate::limit::{LimitScope, LimiterState};
use crate::policy::Policy;

/// One client's engine: policy, per-endpoint health and budget, shared by all its calls
/// (each [`Call`](crate::Call) borrows it; share it between threads by reference or in an
/// [`Arc`](std::sync::Arc)). A healthy call writes nothing that another thread's calls write.
///
/// ```
/// use std::time::Instant;
/// use baton_core::{BreakerState, Endpoint, Engine, Policy};
/// let policy = Policy::builder()
///     .endpoint(Endpoint::new("a", "https://a.example/"))
///     .build()
///     .unwrap();
/// let engine = Engine::with_entropy(policy, 0x1234_5678);
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
    pub(crate) ids: Vec<crate::id::EndpointId>,
    /// One limiter (client scope) or one per endpoint; empty when rate limiting is off.
    pub(crate) limiters: Vec<LimiterState>,
    /// Each endpoint's credential slot, for those that have one (SPEC 9).
    credentials: Vec<Option<crate::credential::Credential>>,
    seeds: Seeds,
}

/// Where each call's random seed comes from.
#[derive(Debug)]
enum Seeds {
    /// The n-th call of the engine gets `mix(seed, n)`, whichever thread makes it: runs
    /// repeat exactly (the policy's seed, or an engine built without entropy).
    Sequential { seed: u64, next: AtomicU64 },
    /// Each thread counts its own calls on its own stripe: no shared counter.
    PerThread {
        entropy: u64,
        next: Box<[Padded<AtomicU64>; STRIPES]>,
    },
}

/// The seed of an engine built without entropy and without a seed in its policy.
const FIXED_SEED: u64 = 0x5EED_BA70;

impl Engine {
    /// A fresh engine, deterministic: every endpoint closed, budget full, and each call's
    /// random source drawn from one sequence (the policy's seed, or a fixed one). For
    /// simulations and tests; adapters use [`with_entropy`](Engine::with_entropy). That one
    /// sequence is a counter every call writes: an engine shared by threads is built with
    /// [`with_entropy`](Engine::with_entropy), whose healthy calls write only their own
    /// thread's stripe.
    pub fn new(policy: Policy) -> Self {
        let seed = policy.settings.seed.unwrap_or(FIXED_SEED);
        Self::build(
            policy,
            Seeds::Sequential {
                seed,
                next: AtomicU64::new(0),
            },
        )
    }

    /// A fresh engine whose calls draw jitter and request ids from `entropy` (an adapter
    /// passes OS randomness, once per client, so that clients that failed together do not
    /// back off in lock-step), each thread from its own sequence. A seed in the policy
    /// wins: the engine is then deterministic, as with [`new`](Engine::new).
    pub fn with_entropy(policy: Policy, entropy: u64) -> Self {
        if policy.settings.seed.is_some() {
            return Self::new(policy);
        }
        Self::build(
            policy,
            Seeds::PerThread {
                entropy,
                next: Box::default(),
            },
        )
    }

    fn build(policy: Policy, seeds: Seeds) -> Self {
        let health = Health::new(policy.settings.breaker, policy.endpoints.len());
        let budget = policy.settings.budget.map(BudgetState::new);
        let ids = policy.endpoints.iter().map(|e| e.id().into()).collect();
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
        let credentials = policy
            .endpoints
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let seed = mix(
                    policy.settings.seed.unwrap_or(FIXED_SEED),
                    i as u64 ^ 0xC4ED,
                );
                e.credential_settings()
                    .map(|c| crate::credential::Credential::new(c.clone(), seed))
            })
            .collect();
        Engine {
            policy,
            health,
            budget,
            ids,
            limiters,
            credentials,
            seeds,
        }
    }

    /// The credential slot of the endpoint at `index`, when it has one: shared by every
    /// call of this engine, so one refresh serves them all.
    pub fn credential(&self, index: usize) -> Option<&crate::credential::Credential> {
        self.credentials.get(index)?.as_ref()
    }

    /// The policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The id of endpoint `index` (cheap to clone: short ids are stored inline).
    pub fn endpoint_id(&self, index: usize) -> Option<&crate::id::EndpointId> {
        self.ids.get(index)
    }

    /// A snapshot of endpoint `index`'s health at `now`.
    pub fn health(&self, index: usize, now: Instant) -> Option<EndpointHealth> {
        self.health.snapshot(index, now)
    }

    /// The breaker of the endpoint with `id`, to guard sends the engine does not make (a
    /// health check, a side channel to the same provider) with the rules and the state the
    /// calls use. Its transitions go to the policy's event sink (with an empty request id).
    ///
    /// ```
    /// use std::time::Instant;
    /// use baton_core::{Endpoint, Engine, Policy};
    /// let policy = Policy::builder().endpoint(Endpoint::new("a", "https://a.example/")).build().unwrap();
    /// let engine = Engine::new(policy);
    /// let circuit = engine.circuit("a").unwrap();
    /// circuit.allow(Instant::now()).unwrap().success(Instant::now());
    /// assert!(engine.circuit("b").is_none());
    /// ```
    pub fn circuit(&self, id: &str) -> Option<crate::Circuit<'_>> {
        let i = self.policy.endpoint_index(id)?;
        Some(crate::Circuit::of_endpoint(
            &self.health,
            i,
            &self.ids[i],
            self.policy.events.as_ref(),
        ))
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
        #[cfg(feature = "metrics")]
        for t in &transitions {
            crate::telemetry::transition(&self.ids[i], t.from, t.to);
        }
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

    /// Whether any rate limiter governs this engine's attempts.
    pub(crate) fn has_limiters(&self) -> bool {
        !self.limiters.is_empty()
    }

    /// The limiter that governs attempts at endpoint `index`, if any.
    pub(crate) fn limiter(&self, index: usize) -> Option<&LimiterState> {
        match self.limiters.len() {
            0 => None,
            1 => self.limiters.first(),
            _ => self.limiters.get(index),
        }
    }

    /// The random source of a new call.
    #[inline]
    pub(crate) fn call_rng(&self) -> Rng {
        let seed = match &self.seeds {
            Seeds::Sequential { seed, next } => {
                crate::stripe::shared_write();
                mix(*seed, next.fetch_add(1, Ordering::Relaxed))
            }
            Seeds::PerThread { entropy, next } => {
                crate::stripe::own_stripe_write();
                let stripe = crate::stripe::current();
                let n = next[stripe].0.fetch_add(1, Ordering::Relaxed);
                // Unique per call: the stripe in the low bits, its count above.
                mix(*entropy, n * STRIPES as u64 + stripe as u64)
            }
        };
        Rng::new(seed)
    }
}
