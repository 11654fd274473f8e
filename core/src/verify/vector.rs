//! A counterexample as a scenario vector: the `vectors/` format of the conformance crate,
//! so it drops straight into the suite (feature `serde` to write it, e.g. with `toml`).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::backoff::BackoffOverride;
use crate::permission::{Permission, PermissionSource};
use crate::policy::Settings;

use super::judge::Violation;
use super::world::{CallClass, Fault, Planned, Sent, Traced, World};

/// The shortest failing session found for a class, and the vector that replays it.
///
/// With the `serde` feature, [`vector`](Counterexample::vector) serialises to a vector
/// file (`toml::to_string(&cx.vector)`); the call that breaks the rule expects
/// `safe = true`, so the conformance runner fails on it with the same violation.
///
/// A permission function that lets every write fail over, even after an attempt that may
/// have done the work, is caught:
///
/// ```
/// use std::time::Instant;
/// use baton_core::verify::{CallClass, Check, Fault, ViolationKind};
/// use baton_core::{Endpoint, Permission, PermissionOverride, Policy};
///
/// let policy = Policy::builder()
///     .endpoint(Endpoint::new("a", "https://a.example/"))
///     .endpoint(Endpoint::new("b", "https://b.example/"))
///     .permission_fn(|_| PermissionOverride::both(Permission::Always))
///     .build()
///     .unwrap();
/// let findings = Check::new().calls(500).run(&policy, Instant::now());
/// let writes = &findings.classes[1];
/// assert_eq!(writes.class, CallClass::Write);
/// let cx = writes.counterexample.as_ref().unwrap();
/// assert_eq!(cx.class, CallClass::Write);
/// // Shrunk to one call: "a" resets after reading the request, "b" answers.
/// assert_eq!(cx.faults, [[Fault::Reset, Fault::Ok]]);
/// assert_eq!(cx.violations[0].kind, ViolationKind::Repeated);
/// assert!(cx.violations[0].to_string().starts_with("repeated: attempt 1 at a ended ambiguous"));
/// ```
#[derive(Debug, Clone)]
pub struct Counterexample {
    /// The class of the call that broke the rule.
    pub class: CallClass,
    /// Every rule the session's last call broke, as the judge reported them (the first is
    /// the one its class counted).
    pub violations: Vec<Violation>,
    /// The faults of each call's attempts, in order, as `baton check` prints them.
    pub faults: Vec<Vec<Fault>>,
    /// The scenario, in the vectors' format.
    pub vector: Vector,
}

/// A scenario file (see the conformance crate's docs for the format).
///
/// ```
/// use std::time::Instant;
/// use baton_core::verify::Check;
/// use baton_core::{Endpoint, Permission, PermissionOverride, Policy};
///
/// let policy = Policy::builder()
///     .endpoint(Endpoint::new("a", "https://a.example/"))
///     .endpoint(Endpoint::new("b", "https://b.example/"))
///     .permission_fn(|_| PermissionOverride::both(Permission::Always))
///     .build()
///     .unwrap();
/// let findings = Check::new().calls(500).seed(9).run(&policy, Instant::now());
/// let cx = findings.classes.iter().find_map(|c| c.counterexample.as_ref()).unwrap();
/// let v = &cx.vector;
/// let ids: Vec<&str> = v.endpoints.iter().map(|e| e.id.as_str()).collect();
/// assert_eq!(ids, ["a", "b"]);
/// assert_eq!(v.policy.seed, Some(9)); // the seed that replays the run
/// assert_eq!(v.paths, ["sim"]);
/// assert_eq!(v.calls.last().unwrap().expect.safe, Some(true)); // the call that breaks it
/// ```
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Vector {
    /// What it shows.
    pub name: String,
    /// The paths it runs on (the simulator: real sockets cannot time every fault alike).
    pub paths: Vec<String>,
    /// Why only those paths.
    pub why_not: String,
    /// The policy's settings, with the seed that replays the run.
    pub policy: Settings,
    /// Endpoints with the faults their providers played.
    pub endpoints: Vec<VectorEndpoint>,
    /// The session's calls, in order.
    pub calls: Vec<VectorCall>,
}

/// One endpoint of a vector (its headers are left out: they may hold credentials).
///
/// ```
/// use std::time::Instant;
/// use baton_core::verify::Check;
/// use baton_core::{Endpoint, Permission, PermissionOverride, Policy};
///
/// // Every write may fail over, even after an attempt that may have done the work.
/// let policy = Policy::builder()
///     .endpoint(Endpoint::new("a", "https://a.example/"))
///     .endpoint(Endpoint::new("b", "https://b.example/"))
///     .permission_fn(|_| PermissionOverride::both(Permission::Always))
///     .build()
///     .unwrap();
/// let findings = Check::new().calls(500).run(&policy, Instant::now());
/// let cx = findings.classes[1].counterexample.as_ref().unwrap(); // writes
/// let b = &cx.vector.endpoints[1];
/// assert_eq!(b.id, "b");
/// assert_eq!(b.group, None);
/// // What "b" played, request by request; its last step, a 200, repeats.
/// assert_eq!(b.script.last().unwrap().status, Some(200));
/// ```
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct VectorEndpoint {
    /// Id.
    pub id: String,
    /// Idempotency group.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub group: Option<String>,
    /// Per-endpoint connect timeout.
    #[cfg_attr(
        feature = "serde",
        serde(
            skip_serializing_if = "Option::is_none",
            with = "crate::policy::serde_opt_duration"
        )
    )]
    pub connect_timeout: Option<Duration>,
    /// Per-endpoint attempt timeout.
    #[cfg_attr(
        feature = "serde",
        serde(
            skip_serializing_if = "Option::is_none",
            with = "crate::policy::serde_opt_duration"
        )
    )]
    pub attempt_timeout: Option<Duration>,
    /// Per-endpoint attempts per round.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub attempts_per_endpoint: Option<u32>,
    /// Priority tier.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub tier: Option<u32>,
    /// Weight within the tier.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub weight: Option<u32>,
    /// Per-endpoint backoff.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub backoff: Option<BackoffOverride>,
    /// The provider's steps per request number (the last, a 200, repeats).
    pub script: Vec<VectorStep>,
}

/// One provider step.
///
/// ```
/// use std::time::Instant;
/// use baton_core::verify::{Check, VectorStep};
/// use baton_core::{Endpoint, Permission, PermissionOverride, Policy};
///
/// // Every write may fail over, even after an attempt that may have done the work.
/// let policy = Policy::builder()
///     .endpoint(Endpoint::new("a", "https://a.example/"))
///     .endpoint(Endpoint::new("b", "https://b.example/"))
///     .permission_fn(|_| PermissionOverride::both(Permission::Always))
///     .build()
///     .unwrap();
/// let findings = Check::new().calls(500).run(&policy, Instant::now());
/// let cx = findings.classes[1].counterexample.as_ref().unwrap(); // writes
/// // "a" read the request and reset the connection, then answers 200 (the last step repeats).
/// let reset = VectorStep { fault: Some("reset"), ..VectorStep::default() };
/// let ok = VectorStep { status: Some(200), ..VectorStep::default() };
/// assert_eq!(cx.vector.endpoints[0].script, [reset, ok]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct VectorStep {
    /// A fault (`refuse`, `dns`, `reset`, `black_hole`, `half_body`).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub fault: Option<&'static str>,
    /// The status answered.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub status: Option<u16>,
    /// Response headers.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "BTreeMap::is_empty"))]
    pub headers: BTreeMap<String, String>,
    /// Delay before the answer or the fault.
    #[cfg_attr(
        feature = "serde",
        serde(
            skip_serializing_if = "Option::is_none",
            with = "crate::policy::serde_opt_duration"
        )
    )]
    pub delay: Option<Duration>,
}

/// One call of a vector.
///
/// ```
/// use std::time::Instant;
/// use baton_core::verify::Check;
/// use baton_core::{Endpoint, Permission, PermissionOverride, Policy};
///
/// // Every write may fail over, even after an attempt that may have done the work.
/// let policy = Policy::builder()
///     .endpoint(Endpoint::new("a", "https://a.example/"))
///     .endpoint(Endpoint::new("b", "https://b.example/"))
///     .permission_fn(|_| PermissionOverride::both(Permission::Always))
///     .build()
///     .unwrap();
/// let findings = Check::new().calls(500).run(&policy, Instant::now());
/// let cx = findings.classes[1].counterexample.as_ref().unwrap(); // writes
/// let call = cx.vector.calls.last().unwrap();
/// assert_eq!((call.method.as_str(), call.body.as_deref()), ("POST", Some("check")));
/// // The permissions came from the policy's function, so the vector states them.
/// assert_eq!((call.retry, call.failover), (Some(Permission::Always), Some(Permission::Always)));
/// assert_eq!(call.idempotency_key, None);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct VectorCall {
    /// Method.
    pub method: String,
    /// Body (writes).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub body: Option<String>,
    /// A one-shot body.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "std::ops::Not::not"))]
    pub one_shot: bool,
    /// Retry permission, when the policy's permission function set it.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub retry: Option<Permission>,
    /// Failover permission, when the policy's permission function set it.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub failover: Option<Permission>,
    /// Idempotency key.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub idempotency_key: Option<String>,
    /// Call deadline.
    #[cfg_attr(
        feature = "serde",
        serde(
            skip_serializing_if = "Option::is_none",
            with = "crate::policy::serde_opt_duration"
        )
    )]
    pub deadline: Option<Duration>,
    /// Eligible endpoints, when the policy's predicate left some out.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub eligible: Option<Vec<String>>,
    /// Time before the call.
    #[cfg_attr(
        feature = "serde",
        serde(
            skip_serializing_if = "Option::is_none",
            with = "crate::policy::serde_opt_duration"
        )
    )]
    pub wait_before: Option<Duration>,
    /// What must hold.
    pub expect: VectorExpect,
}

/// The expectations of a vector call.
///
/// ```
/// use std::time::Instant;
/// use baton_core::verify::Check;
/// use baton_core::{Endpoint, Permission, PermissionOverride, Policy};
///
/// // Every write may fail over, even after an attempt that may have done the work.
/// let policy = Policy::builder()
///     .endpoint(Endpoint::new("a", "https://a.example/"))
///     .endpoint(Endpoint::new("b", "https://b.example/"))
///     .permission_fn(|_| PermissionOverride::both(Permission::Always))
///     .build()
///     .unwrap();
/// let findings = Check::new().calls(500).run(&policy, Instant::now());
/// let cx = findings.classes[1].counterexample.as_ref().unwrap(); // writes
/// let expect = &cx.vector.calls.last().unwrap().expect;
/// assert_eq!(expect.safe, Some(true)); // what the conformance runner will find broken
/// // [endpoint id, outcome] per attempt, as observed: the write reached "b" after all.
/// let attempts: Vec<(&str, &str)> =
///     expect.attempts.iter().flatten().map(|(id, how)| (id.as_str(), how.as_str())).collect();
/// assert_eq!(attempts, [("a", "ambiguous"), ("b", "response")]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct VectorExpect {
    /// The safety rules of [`judge`](super::judge) hold for this call.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub safe: Option<bool>,
    /// `[endpoint id, outcome]` per attempt, as observed.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub attempts: Option<Vec<(String, String)>>,
}

impl Counterexample {
    /// Builds the vector of a session whose last call broke a rule.
    pub(crate) fn new(world: &World, calls: &[Planned], traced: &[Traced]) -> Self {
        let violations = traced
            .last()
            .map(|t| t.violations.clone())
            .unwrap_or_default();
        let policy = &world.policy;
        let mut scripts: Vec<Vec<VectorStep>> = vec![Vec::new(); policy.endpoints.len()];
        let mut timed_connect = false;
        for t in traced {
            for s in &t.sent {
                timed_connect |= s.fault == Fault::ConnectTimeout;
                scripts[s.endpoint].push(step_of(s, world));
            }
        }
        let endpoints = policy
            .endpoints
            .iter()
            .zip(scripts)
            .enumerate()
            .map(|(i, (e, mut script))| {
                if !script.is_empty() {
                    script.push(VectorStep {
                        status: Some(200),
                        ..VectorStep::default()
                    });
                }
                VectorEndpoint {
                    id: e.id().to_owned(),
                    group: e.group_name().map(str::to_owned),
                    connect_timeout: e.connect_timeout_override(),
                    attempt_timeout: e.attempt_timeout_override(),
                    attempts_per_endpoint: policy.attempts_per_endpoint_of(i),
                    tier: e.tier_of(),
                    weight: (e.weight_of() != 1).then(|| e.weight_of()),
                    backoff: e.backoff_override().copied(),
                    script,
                }
            })
            .collect();
        let last = traced.len().saturating_sub(1);
        let vector_calls = calls
            .iter()
            .zip(traced)
            .enumerate()
            .map(|(k, (c, t))| call_of(world, c, t, k == last, !timed_connect))
            .collect();
        let class = calls
            .last()
            .map_or(CallClass::SafeRead, |c| c.variant.class);
        // The world's policy always carries the seed its engines drew from.
        let settings = policy.settings.clone();
        let first = violations.first().map_or(String::new(), |v| v.to_string());
        let mut why_not = String::from(
            "written by `baton check` from the simulator; real sockets time refusals and \
             connect timeouts differently (remove `paths` to try them)",
        );
        if policy.classify.is_some() {
            why_not.push_str(
                "; the policy's response classifier is not part of this file, so calls whose \
                 answers it re-labelled may not replay",
            );
        }
        let name = format!("baton check counterexample ({}): {first}", class.as_str());
        Counterexample {
            class,
            faults: traced
                .iter()
                .map(|t| t.sent.iter().map(|s| s.fault).collect())
                .collect(),
            vector: Vector {
                name,
                paths: vec!["sim".into()],
                why_not,
                policy: settings,
                endpoints,
                calls: vector_calls,
            },
            violations,
        }
    }
}

/// A fault as a vector step. A connect timeout has no fault of its own in vectors (loopback
/// answers or refuses at once): it is written as a refusal after the attempt's connect
/// timeout, the same class (undelivered) at the same time.
fn step_of(sent: &Sent, world: &World) -> VectorStep {
    let fault = sent.fault;
    let faulted = |name: &'static str, delay: Option<Duration>| VectorStep {
        fault: Some(name),
        delay,
        ..VectorStep::default()
    };
    match fault {
        Fault::Refused => faulted("refuse", None),
        Fault::Dns => faulted("dns", None),
        Fault::ConnectTimeout => faulted("refuse", Some(sent.connect_timeout)),
        Fault::Reset => faulted("reset", None),
        Fault::BlackHole => faulted("black_hole", None),
        Fault::BrokenBody => faulted("half_body", None),
        Fault::RefusedStream => faulted("refused_stream", None),
        Fault::GoAwayBelow => faulted("goaway_below", None),
        Fault::GoAwayAt => faulted("goaway_at", None),
        Fault::StreamReset => faulted("stream_reset", None),
        other => {
            let (status, headers) = other.response(world).unwrap_or((200, Vec::new()));
            VectorStep {
                status: Some(status),
                headers: headers.into_iter().collect(),
                delay: (other == Fault::Slow).then_some(world.slow),
                fault: None,
            }
        }
    }
}

fn call_of(world: &World, c: &Planned, t: &Traced, last: bool, with_attempts: bool) -> VectorCall {
    let policy = &world.policy;
    let from_fn =
        |p: Permission, s: PermissionSource| (s == PermissionSource::PolicyFn).then_some(p);
    let eligible = (!t.eligible.iter().all(|e| *e)).then(|| {
        policy
            .endpoints
            .iter()
            .zip(&t.eligible)
            .filter(|(_, ok)| **ok)
            .map(|(e, _)| e.id().to_owned())
            .collect()
    });
    let write = c.variant.class != CallClass::SafeRead;
    VectorCall {
        method: c.variant.class.method().to_string(),
        body: write.then(|| "check".to_string()),
        one_shot: write && c.variant.one_shot,
        retry: from_fn(t.permissions.0, t.sources.0),
        failover: from_fn(t.permissions.1, t.sources.1),
        idempotency_key: t.key.clone(),
        deadline: c.variant.deadline,
        eligible,
        wait_before: (!c.wait_before.is_zero()).then_some(c.wait_before),
        expect: VectorExpect {
            safe: last.then_some(true),
            attempts: (last && with_attempts).then(|| {
                t.report
                    .attempts
                    .iter()
                    .map(|a| (a.endpoint_id.to_string(), a.result.as_str().to_string()))
                    .collect()
            }),
        },
    }
}
