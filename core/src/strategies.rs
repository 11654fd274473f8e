//! proptest strategies (feature `proptest`): random policies, eligibility, call options and
//! endpoint scripts, so users can property-test their own permission and eligibility
//! functions against the engine with the simulator.
//!
//! ```
//! use proptest::prelude::*;
//! use baton_core::strategies::{scenario, Scenario};
//! use baton_core::sim::Sim;
//!
//! proptest!(ProptestConfig::with_cases(16), |(s in scenario())| {
//!     let mut sim = Sim::new(s.policy(), std::time::Instant::now());
//!     for (id, script) in &s.scripts {
//!         sim.script(id, script.clone());
//!     }
//!     let run = sim.run_request(s.request(), s.options.clone());
//!     prop_assert!(run.report.attempts.len() as u32 <= 64 * 255);
//! });
//! ```

use std::time::Duration;

use http::Method;
use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;

use crate::backoff::{Backoff, Jitter};
use crate::call::{BodyKind, CallOptions};
use crate::limit::{LimitScope, Limiter, OnLimit, RateLimit};
use crate::permission::Permission;
use crate::policy::{Breaker, BreakerRule, Budget, Endpoint, Hedge, Policy, Settings, Unavailable};
use crate::sim::{Reply, Script, SimRequest, Step};
use crate::status::StatusSet;

/// A random scenario: endpoints (with groups), settings, eligibility, a request, call
/// options and a script per endpoint.
///
/// One made by hand (the [`scenario`] strategy draws them at random):
///
/// ```
/// use baton_core::sim::{Script, Sim};
/// use baton_core::strategies::Scenario;
/// use baton_core::{BodyKind, CallOptions, Settings};
///
/// let s = Scenario {
///     endpoints: vec![("a".into(), None), ("b".into(), None)],
///     settings: Settings::default(),
///     eligible: vec![false, true], // "a" is not eligible for this call
///     method: http::Method::GET,
///     body: BodyKind::Empty,
///     options: CallOptions::default(),
///     scripts: vec![("a".into(), Script::status(200)), ("b".into(), Script::status(200))],
/// };
/// let mut sim = Sim::new(s.policy(), std::time::Instant::now());
/// for (id, script) in &s.scripts {
///     sim.script(id, script.clone());
/// }
/// let run = sim.run_request(s.request(), s.options.clone());
/// assert_eq!(run.endpoints_attempted(), ["b"]);
/// ```
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Endpoint ids with their optional idempotency group.
    pub endpoints: Vec<(String, Option<String>)>,
    /// Plain settings.
    pub settings: Settings,
    /// Eligibility per endpoint (fixed for the call).
    pub eligible: Vec<bool>,
    /// Method of the call.
    pub method: Method,
    /// Body kind of the call.
    pub body: BodyKind,
    /// Call options.
    pub options: CallOptions,
    /// Script per endpoint id.
    pub scripts: Vec<(String, Script)>,
}

impl Scenario {
    /// The policy (eligibility included as an eligible function).
    pub fn policy(&self) -> Policy {
        let eligible = self.eligible.clone();
        let ids: Vec<String> = self.endpoints.iter().map(|(id, _)| id.clone()).collect();
        let mut b = Policy::builder().settings(self.settings.clone());
        for (id, group) in &self.endpoints {
            let mut e = Endpoint::new(id.clone(), format!("https://{id}.example/"));
            if let Some(g) = group {
                e = e.group(g.clone());
            }
            b = b.endpoint(e);
        }
        b.eligible_fn(move |e, _| {
            ids.iter()
                .position(|i| i == e.id())
                .is_none_or(|i| eligible[i])
        })
        .build()
        .expect("strategies only generate valid policies")
    }

    /// The request.
    pub fn request(&self) -> SimRequest {
        SimRequest::new(self.method.clone()).body(self.body)
    }
}

/// A permission.
pub fn permission() -> impl Strategy<Value = Permission> {
    prop_oneof![
        Just(Permission::Never),
        Just(Permission::IfUndelivered),
        Just(Permission::Always)
    ]
}

/// A method: safe ones and unsafe ones.
pub fn method() -> impl Strategy<Value = Method> {
    prop_oneof![
        Just(Method::GET),
        Just(Method::HEAD),
        Just(Method::POST),
        Just(Method::PUT),
        Just(Method::PATCH),
        Just(Method::DELETE),
    ]
}

/// One scripted reply.
pub fn reply() -> impl Strategy<Value = Reply> {
    prop_oneof![
        3 => Just(Reply::Status(200, vec![])),
        1 => prop::sample::select(vec![201u16, 400, 404, 409, 500]).prop_map(|c| Reply::Status(c, vec![])),
        3 => prop::sample::select(vec![429u16, 502, 503, 504]).prop_map(|c| Reply::Status(c, vec![])),
        1 => (prop::sample::select(vec![429u16, 503]), 0u64..5)
            .prop_map(|(c, s)| Reply::Status(c, vec![("retry-after".into(), s.to_string())])),
        2 => Just(Reply::Refuse),
        1 => Just(Reply::ConnectTimeout),
        2 => Just(Reply::Reset),
        1 => Just(Reply::BlackHole),
        1 => Just(Reply::Untrusted),
        1 => Just(Reply::RefusedStream),
        1 => any::<bool>().prop_map(|above_last| Reply::GoAway { above_last }),
        1 => Just(Reply::StreamReset),
    ]
}

/// A script of up to 6 steps with delays up to 2 s.
pub fn script() -> impl Strategy<Value = Script> {
    vec((reply(), 0u64..2_000), 1..6).prop_map(|steps| {
        Script::steps_of(
            steps
                .into_iter()
                .map(|(reply, ms)| Step {
                    reply,
                    after: Duration::from_millis(ms),
                })
                .collect(),
        )
    })
}

/// Valid settings with small timeouts, any breaker rule, budget on or off, jitter of any
/// kind, and sometimes explicit attempt counts.
pub fn settings() -> impl Strategy<Value = Settings> {
    (
        (
            option::of(1u32..4),
            option::of(1u32..4),
            option::of(1u32..8),
            any::<bool>(),
            prop_oneof![
                Just(Jitter::None),
                Just(Jitter::Full),
                Just(Jitter::Proportional(0.25))
            ],
        ),
        (100u64..3_000, 50u64..1_000, option::of(100u64..8_000)),
        prop_oneof![
            (1u32..4).prop_map(|failures| BreakerRule::Consecutive { failures }),
            Just(BreakerRule::FailureRate {
                window: 4,
                min_calls: 2,
                rate: 0.5,
                slow_call: Some(Duration::from_millis(1_500))
            }),
            Just(BreakerRule::Disabled),
        ],
        (1u32..3, any::<bool>(), any::<bool>(), any::<u64>()),
        (hedge(), rate_limit()),
    )
        .prop_map(
            |(
                (per, pinned, max, skip, jitter),
                (attempt_ms, connect_ms, deadline),
                rule,
                (quota, budget, np503, seed),
                (hedge, rate_limit),
            )| {
                let mut not_processed = StatusSet::from_codes(&[429]);
                if np503 {
                    not_processed.insert(503);
                }
                Settings {
                    attempts_per_endpoint: per,
                    pinned_attempts: pinned,
                    max_attempts: max,
                    unavailable: if skip {
                        Unavailable::Skip
                    } else {
                        Unavailable::TryLast
                    },
                    backoff: Backoff {
                        jitter,
                        ..Backoff::default()
                    },
                    attempt_timeout: Duration::from_millis(attempt_ms),
                    connect_timeout: Duration::from_millis(connect_ms),
                    deadline: deadline.map(Duration::from_millis),
                    max_retry_after: Duration::from_secs(3),
                    not_processed,
                    breaker: Breaker {
                        rule,
                        open: Duration::from_secs(2),
                        probe_quota: quota,
                        ..Breaker::default()
                    },
                    budget: budget.then(|| Budget {
                        ratio: 0.2,
                        window: Duration::from_secs(10),
                        min_per_sec: 0.5,
                    }),
                    seed: Some(seed),
                    hedge,
                    rate_limit,
                    ..Settings::default()
                }
            },
        )
}

/// Hedging, off in most policies: `hedge_after` 20 ms to 1 s, two or three in flight.
fn hedge() -> impl Strategy<Value = Option<Hedge>> {
    option::weighted(
        0.25,
        (20u64..1_000, 2u32..4).prop_map(|(after, max_in_flight)| Hedge {
            after: Duration::from_millis(after),
            max_in_flight,
        }),
    )
}

/// Outbound rate limiting, off in most policies: either limiter, either scope, either
/// answer to "not before".
fn rate_limit() -> impl Strategy<Value = Option<RateLimit>> {
    let limiter = prop_oneof![
        (1u32..4, 1u32..20).prop_map(|(capacity, per_second)| Limiter::TokenBucket {
            capacity,
            per_second: f64::from(per_second),
        }),
        (1u32..4, 100u64..1_000).prop_map(|(limit, ms)| Limiter::SlidingWindow {
            limit,
            window: Duration::from_millis(ms),
        }),
    ];
    let scope = prop_oneof![Just(LimitScope::Client), Just(LimitScope::Endpoint)];
    let on_limit = prop_oneof![Just(OnLimit::Wait), Just(OnLimit::FailFast)];
    option::weighted(
        0.2,
        (limiter, scope, on_limit).prop_map(|(limiter, scope, on_limit)| RateLimit {
            limiter,
            scope,
            on_limit,
        }),
    )
}

/// Call options: permissions, deny, preference, key, deadline, attempt counts.
pub fn call_options(endpoints: usize) -> impl Strategy<Value = CallOptions> {
    (
        option::of(permission()),
        option::of(permission()),
        prop::bool::weighted(0.1),
        option::of(0..endpoints + 1),
        option::of("[a-z0-9]{4,12}"),
        option::of(100u64..5_000),
        option::of(1u32..4),
    )
        .prop_map(
            move |(retry, failover, deny, prefer, key, deadline, max)| CallOptions {
                retry,
                failover,
                deny,
                // index == endpoints means an unknown id
                prefer: prefer.map(|i| {
                    if i == endpoints {
                        "nope".into()
                    } else {
                        format!("e{i}")
                    }
                }),
                idempotency_key: key,
                deadline: deadline.map(Duration::from_millis),
                max_attempts: max,
                ..CallOptions::default()
            },
        )
}

/// A whole scenario with 1 to 4 endpoints.
pub fn scenario() -> impl Strategy<Value = Scenario> {
    (1usize..5).prop_flat_map(|n| {
        (
            vec(option::of(prop::sample::select(vec!["g1", "g2"])), n),
            settings(),
            vec(prop::bool::weighted(0.85), n),
            method(),
            prop_oneof![
                Just(BodyKind::Empty),
                Just(BodyKind::Replayable),
                Just(BodyKind::OneShot)
            ],
            call_options(n),
            vec(script(), n),
        )
            .prop_map(
                move |(groups, settings, eligible, method, body, options, scripts)| Scenario {
                    endpoints: groups
                        .into_iter()
                        .enumerate()
                        .map(|(i, g)| (format!("e{i}"), g.map(str::to_owned)))
                        .collect(),
                    settings,
                    eligible,
                    method,
                    body,
                    options,
                    scripts: scripts
                        .into_iter()
                        .enumerate()
                        .map(|(i, s)| (format!("e{i}"), s))
                        .collect(),
                },
            )
    })
}
