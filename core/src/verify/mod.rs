//! Verification: prove a policy safe and bound its cost before it ships.
//!
//! A failover policy is a deterministic state machine here, so its worst cases can be
//! looked for instead of waited for. [`Check`] explores calls of each class (a safe read,
//! a write without a key, a write with a key; each with and without a deadline; writes
//! with replayable and one-shot bodies) against fault scripts: every [`Fault`] at every
//! attempt position, systematically for short scripts, then seeded random sessions of
//! several calls sharing one engine (so breakers open, budgets drain and cooldowns run).
//! Each call goes through the real engine of [`sim`](crate::sim), with the policy's own
//! permission, eligibility and classifier functions, and is [`judge`]d. [`Findings`] then
//! holds, per [`CallClass`]:
//!
//! - **safety**: calls that broke a rule of [`judge`] (each must be 0), with the shortest
//!   [`Counterexample`] found, shrunk, as a vector of the conformance suite;
//! - **bounds**: the worst-case attempts and time to a result computed from the settings
//!   ([`Bound`], formulas in its docs) beside the worst observed;
//! - **load**: attempts per call during a total outage ([`Outage`]), budget as configured;
//!
//! and [`Lint`]s: settings that are legal but likely wrong. `baton check` prints the same.
//!
//! ```
//! use std::time::Instant;
//! use baton_core::{verify::Check, Endpoint, Policy};
//! let policy = Policy::builder()
//!     .endpoint(Endpoint::new("a", "https://a.example/"))
//!     .endpoint(Endpoint::new("b", "https://b.example/"))
//!     .build()
//!     .unwrap();
//! let findings = Check::new().calls(2_000).run(&policy, Instant::now());
//! assert!(findings.is_safe());
//! for class in &findings.classes {
//!     assert!(class.observed_attempts <= class.bound.attempts);
//! }
//! ```
//!
//! # Guide: property-test your own permission function
//!
//! A JSON-RPC client sends every call as a POST. Reads (`eth_call`, `eth_getBalance`) may
//! go anywhere any number of times; `eth_sendRawTransaction` must never reach a second
//! node after an attempt that may have delivered it, and a node that answers "header not
//! found" (it lags behind the chain) should make a read move on. Three functions say so,
//! and three tools check them:
//!
//! - `baton_core::strategies` (feature `proptest`) generates policies and
//!   outcome sequences for your own `proptest!` blocks;
//! - [`sim`](crate::sim) runs one scripted call on a virtual clock, for the cases you want
//!   to name;
//! - `verify` explores all the short cases and many long ones, and [`judge`] is the oracle
//!   you can apply to any report.
//!
//! ```
//! use std::time::Instant;
//! use baton_core::sim::{Script, Sim, SimRequest};
//! use baton_core::verify::{judge, Check};
//! use baton_core::{CallOptions, Endpoint, Permission, PermissionOverride, Policy, Verdict};
//!
//! let policy = Policy::builder()
//!     .endpoint(Endpoint::new("node-a", "https://a.rpc.example/"))
//!     .endpoint(Endpoint::new("node-b", "https://b.rpc.example/"))
//!     .permission_fn(|req| {
//!         // The JSON-RPC method travels in a header our client sets (permission
//!         // functions never see the body). Reads are listed; anything else, a send or a
//!         // method we do not know, keeps the spec's inference: once, unless undelivered.
//!         const READS: [&str; 3] = ["eth_call", "eth_getBalance", "eth_blockNumber"];
//!         let method = req.headers.get("x-rpc-method").and_then(|m| m.to_str().ok());
//!         if method.is_some_and(|m| READS.contains(&m)) {
//!             PermissionOverride::both(Permission::Always)
//!         } else {
//!             PermissionOverride::default()
//!         }
//!     })
//!     .classify_fn(|view| {
//!         // A lagging node answers 200 with "header not found": try the next one.
//!         let lagging = view.headers.get("x-rpc-error").is_some_and(|e| e == "header not found");
//!         lagging.then_some(Verdict::Trigger)
//!     })
//!     .build()
//!     .unwrap();
//!
//! // A named case: the send is reset after it went out; it must not reach node-b.
//! let mut sim = Sim::new(policy.clone(), Instant::now());
//! sim.script("node-a", Script::reset());
//! let send = SimRequest::new(http::Method::POST).header("x-rpc-method", "eth_sendRawTransaction");
//! let run = sim.run_request(send, CallOptions::default());
//! assert_eq!(run.executions("node-b"), 0);
//! assert!(judge(&policy, &http::Method::POST, &run.report).is_empty());
//!
//! // A lagging node makes a read move on.
//! let mut sim = Sim::new(policy.clone(), Instant::now());
//! sim.script("node-a", Script::status(200).header("x-rpc-error", "header not found"));
//! let read = SimRequest::new(http::Method::POST).header("x-rpc-method", "eth_call");
//! let run = sim.run_request(read, CallOptions::default());
//! assert_eq!(run.report.endpoint_id(), Some("node-b"));
//!
//! // Everything else, explored: the explorer's POSTs carry no `x-rpc-method`, so they
//! // are sends, and no safety rule may break.
//! let findings = Check::new().calls(3_000).run(&policy, Instant::now());
//! assert!(findings.is_safe(), "{:?}", findings.classes[1].counterexample);
//! ```
//!
//! The first draft of that function listed the *send* and allowed everything else: every
//! POST without the header (a new method, a typo, a client that forgot to set it) could
//! then fail over after an ambiguous attempt. `Check` finds that in its first few
//! scripts (writes: `[reset, ok]`, "attempt 1 at node-a ended ambiguous and may have
//! executed; attempt 2 then reached node-b"), and its counterexample replays it.
//!
//! # Speed
//! Ten thousand explored calls take well under two seconds on one core in a release
//! build (`baton check` prints its own figure); the work is the engine's own call path.

mod bounds;
mod explore;
mod judge;
mod lints;
mod vector;
mod world;

use std::time::{Duration, Instant};

pub use bounds::{Bound, TimeBound};
pub use judge::{is_idempotent_method, judge, understated_by_receipts, Violation, ViolationKind};
pub use lints::Lint;
pub use vector::{Counterexample, Vector, VectorCall, VectorEndpoint, VectorExpect, VectorStep};
pub use world::{CallClass, Fault};

use crate::policy::Policy;
use crate::rng::Rng;
use explore::{class_index, Explorer};
use world::{Planned, Variant, World};

/// The total-outage run's calls at most (see [`Check::outage`]).
const MAX_OUTAGE_CALLS: u128 = 100_000;

/// How much to explore, from which seed.
///
/// ```
/// let check = baton_core::verify::Check::new().calls(500).seed(7);
/// assert_eq!(check.calls_budget(), 500);
/// ```
#[derive(Debug, Clone)]
pub struct Check {
    calls: usize,
    seed: u64,
    outage: Duration,
}

impl Default for Check {
    fn default() -> Self {
        Check::new()
    }
}

impl Check {
    /// 10,000 calls from seed 1, and a 60 s outage.
    pub fn new() -> Self {
        Check {
            calls: 10_000,
            seed: 1,
            outage: Duration::from_secs(60),
        }
    }

    /// Calls to explore in all: every script of one fault, then of two, and so on while a
    /// whole length fits, one call per variant with every attempt refused (so every
    /// reachable endpoint is reached), then random sessions for the rest. At least the ten
    /// all-refused calls are explored.
    pub fn calls(mut self, n: usize) -> Self {
        self.calls = n;
        self
    }

    /// The random sessions' seed (and the engine's, when the policy sets none).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// The virtual duration of the total-outage run, at most 5,000 s: the run plans a
    /// call every 50 ms of the window, and a longer window is cut to 100,000 calls.
    pub fn outage(mut self, window: Duration) -> Self {
        self.outage = window;
        self
    }

    /// The calls budget.
    pub fn calls_budget(&self) -> usize {
        self.calls
    }

    /// Explores `policy` on a virtual clock starting at `start`.
    pub fn run(&self, policy: &Policy, start: Instant) -> Findings {
        self.run_with_progress(policy, start, &mut |_, _| {})
    }

    /// Like [`run`](Check::run), calling `progress(explored, budget)` as it goes.
    pub fn run_with_progress(
        &self,
        policy: &Policy,
        start: Instant,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Findings {
        let world = World::new(policy.clone(), self.seed);
        let variants = explore::variants(self.deadline_for(policy));
        let mut explorer = Explorer::new(&world, start);
        let budget = self.calls;
        let mut len = 1;
        while explorer.explored + variants.len() * Fault::ALL.len().pow(len as u32) <= budget {
            for &v in &variants {
                explore::systematic(&mut explorer, v, len, &mut |n| progress(n, budget));
            }
            len += 1;
        }
        // Every variant once with every attempt refused (undelivered: always free to move
        // on), so every endpoint a call can reach at all is reached.
        let all_refused = vec![Fault::Refused; policy.endpoints.len() * 4];
        for &variant in &variants {
            let faults = all_refused.clone();
            explorer.session(&[Planned {
                variant,
                faults,
                wait_before: Duration::ZERO,
            }]);
        }
        let systematic = explorer.explored;
        let bounds: Vec<(CallClass, Bound, bool)> = CallClass::ALL
            .iter()
            .map(|&c| {
                let (pinnable, writes_always) = explore::permissions_of(&world, c, start);
                let b = bounds::bound(policy, pinnable, policy.settings.deadline);
                (c, b, writes_always && c != CallClass::SafeRead)
            })
            .collect();
        let worst = bounds.iter().map(|b| b.1.attempts).max().unwrap_or(1);
        let mut rng = Rng::new(self.seed);
        let max_faults = (worst as usize + 1).min(32);
        while explorer.explored < budget {
            let left = budget - explorer.explored;
            let session = explore::random_session(&world, &variants, &mut rng, max_faults, left);
            explorer.session(&session);
            progress(explorer.explored.min(budget), budget);
        }
        let seen = lints::Seen {
            worst_attempts: worst,
            writes_fail_over_always: bounds.iter().any(|b| b.2),
            attempted: &explorer.attempted,
            explored: explorer.explored,
        };
        let lints = lints::lints(policy, &seen);
        let classes = bounds
            .into_iter()
            .map(|(class, bound, _)| {
                let tally = std::mem::take(&mut explorer.tallies[class_index(class)]);
                ClassReport {
                    class,
                    calls: tally.calls,
                    violations: tally.violations,
                    by_kind: tally.by_kind,
                    counterexample: tally.counterexample.map(|(_, cx)| cx),
                    bound,
                    observed_attempts: tally.max_attempts,
                    observed_time: tally.max_time,
                    outage: self.outage_run(&world, class, worst, start),
                }
            })
            .collect();
        Findings {
            classes,
            lints,
            explored: explorer.explored,
            systematic,
            scripts: explorer.scripts.len(),
            seed: self.seed,
        }
    }

    /// The deadline of the explored calls that have one: the policy's, else one and a half
    /// attempt timeouts (so it cuts a second attempt).
    fn deadline_for(&self, policy: &Policy) -> Duration {
        let s = &policy.settings;
        s.deadline.unwrap_or_else(|| s.attempt_timeout.mul_f64(1.5))
    }

    /// Every endpoint answers 503 to everything; a call starts 50 ms after the previous
    /// one ended, for the outage window.
    fn outage_run(&self, world: &World, class: CallClass, worst: u32, start: Instant) -> Outage {
        let variant = Variant {
            class,
            deadline: None,
            one_shot: false,
        };
        let faults = vec![Fault::Status503; worst as usize + 1];
        let gap = Duration::from_millis(50);
        let calls_in_window =
            (self.outage.as_millis() / gap.as_millis()).clamp(1, MAX_OUTAGE_CALLS) as usize;
        let mut planned: Vec<Planned> = Vec::with_capacity(calls_in_window);
        planned.resize(
            calls_in_window,
            Planned {
                variant,
                faults,
                wait_before: gap,
            },
        );
        let traced = world.run(&planned, start);
        let attempts: usize = traced.iter().map(|t| t.sent.len()).sum();
        let tail = &traced[traced.len() * 3 / 4..];
        let tail_attempts: usize = tail.iter().map(|t| t.sent.len()).sum();
        Outage {
            calls: traced.len(),
            attempts,
            steady: tail_attempts as f64 / tail.len().max(1) as f64,
        }
    }
}

/// What [`Check`] found.
///
/// ```
/// use std::time::Instant;
/// use baton_core::verify::{CallClass, Check};
/// use baton_core::{Endpoint, Policy};
///
/// let policy = Policy::builder()
///     .endpoint(Endpoint::new("a", "https://a.example/"))
///     .endpoint(Endpoint::new("b", "https://b.example/"))
///     .build()
///     .unwrap();
/// let findings = Check::new().calls(500).seed(4).run(&policy, Instant::now());
/// assert!(findings.is_safe());
/// assert!(findings.explored >= 500 && findings.systematic <= findings.explored);
/// assert_eq!(findings.seed, 4);
/// let classes: Vec<CallClass> = findings.classes.iter().map(|c| c.class).collect();
/// assert_eq!(classes, CallClass::ALL);
/// for lint in &findings.lints {
///     println!("warning: {lint}"); // legal, but likely wrong
/// }
/// ```
#[derive(Debug)]
pub struct Findings {
    /// One report per [`CallClass`], in [`CallClass::ALL`] order.
    pub classes: Vec<ClassReport>,
    /// Settings that are legal but likely wrong.
    pub lints: Vec<Lint>,
    /// Calls explored in all.
    pub explored: usize,
    /// Of those, calls of the systematic phase (every script up to some length).
    pub systematic: usize,
    /// Distinct scripts played (variant, pause, and the faults each attempt met).
    pub scripts: usize,
    /// The random sessions' seed.
    pub seed: u64,
}

impl Findings {
    /// Whether no call broke a safety rule.
    pub fn is_safe(&self) -> bool {
        self.classes.iter().all(|c| c.violations == 0)
    }
}

/// What [`Check`] found for one class of call.
///
/// ```
/// use std::time::Instant;
/// use baton_core::verify::{CallClass, Check};
/// use baton_core::{Endpoint, Policy};
///
/// let policy = Policy::builder()
///     .endpoint(Endpoint::new("a", "https://a.example/"))
///     .endpoint(Endpoint::new("b", "https://b.example/"))
///     .build()
///     .unwrap();
/// let findings = Check::new().calls(500).run(&policy, Instant::now());
/// let reads = &findings.classes[0];
/// assert_eq!(reads.class, CallClass::SafeRead);
/// assert!(reads.calls > 0);
/// assert_eq!((reads.violations, reads.by_kind), (0, [0, 0, 0]));
/// assert!(reads.counterexample.is_none());
/// // The worst case seen never exceeds the one computed from the settings.
/// assert!(reads.observed_attempts <= reads.bound.attempts);
/// assert!(reads.bound.time.within().is_none_or(|t| reads.observed_time <= t));
/// assert!(reads.outage.calls > 0);
/// ```
#[derive(Debug)]
pub struct ClassReport {
    /// The class.
    pub class: CallClass,
    /// Calls of this class explored.
    pub calls: usize,
    /// Calls that broke a safety rule (the first rule each broke).
    pub violations: usize,
    /// Those calls by [`ViolationKind`] (repeated, hidden, understated).
    pub by_kind: [usize; 3],
    /// The shortest failing session found, shrunk.
    pub counterexample: Option<Counterexample>,
    /// The worst case computed from the settings.
    pub bound: Bound,
    /// The most attempts any explored call made.
    pub observed_attempts: u32,
    /// The longest any explored call took to its result.
    pub observed_time: Duration,
    /// Attempts per call during a total outage.
    pub outage: Outage,
}

/// Attempts per call while every endpoint answers 503, over the outage window, with the
/// budget and breakers as configured.
///
/// ```
/// let o = baton_core::verify::Outage { calls: 10, attempts: 15, steady: 1.2 };
/// assert_eq!(o.per_call(), 1.5);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Outage {
    /// Calls made.
    pub calls: usize,
    /// Attempts they made.
    pub attempts: usize,
    /// Attempts per call over the last quarter of the window (once the budget and the
    /// breakers have settled).
    pub steady: f64,
}

impl Outage {
    /// Attempts per call over the whole window.
    pub fn per_call(&self) -> f64 {
        self.attempts as f64 / self.calls.max(1) as f64
    }
}
