//! # conformance: one scenario suite, every runtime
//!
//! baton's promise is that every runtime makes the same decisions, because every decision
//! lives in `baton-core`. This crate proves it with data: scenario *vectors* in
//! `vectors/*.toml` (in the spirit of the shared retry test vectors AWS SDKs run in every
//! language) hold endpoints with scripted provider behaviour, a policy, calls, and what must
//! happen: the attempts in order with their outcome class, the status or error kind, the stop
//! reason, `may_have_executed`, and what each provider received.
//!
//! The same files run through the core simulator ([`run_sim`]) and through every adapter
//! against real loopback providers (the tests of this crate). A vector that a path cannot
//! express says so in `paths` and is counted as skipped for that path, never silently.
//!
//! ## Vector format
//!
//! ```toml
//! name = "refused primary: POST fails over"
//! paths = ["sim", "tokio", "blocking", "async-std", "smol", "tower"]   # optional; default all
//!
//! [policy]                      # baton_core::Settings in its serde form
//! attempt_timeout = "500ms"
//!
//! [[endpoints]]
//! id = "a"
//! base = "/v1"                  # optional: appended to the provider's URL
//! group = "pay"                 # optional idempotency group
//! headers = { authorization = "Bearer A" }
//! attempt_timeout = "300ms"     # optional per-endpoint settings: connect_timeout,
//!                               # attempt_timeout, attempts_per_endpoint, tier, weight, backoff
//! script = [{ fault = "refuse" }]   # per request number; the last step repeats
//!
//! [[endpoints]]
//! id = "b"
//! script = [{ status = 503, headers = { "retry-after" = "1" } }, { status = 200, delay = "50ms" }]
//!
//! [[calls]]
//! method = "POST"
//! path = "/charges"
//! body = "amount=1"
//! idempotency_key = "k-1"
//! expect.attempts = [["a", "undelivered"], ["b", "response"]]
//! expect.status = 200
//! expect.stop_reason = "answered"
//! expect.may_have_executed = true
//! expect.executions = { a = 0, b = 1 }
//! ```
//!
//! `[[hosts]]` are providers that are not endpoints (redirect targets), written like
//! endpoints (`id`, `script`); `ip = "127.0.0.2"` puts a provider on another loopback host
//! on real sockets.
//!
//! Header values of a call, of a script step and of `expect.headers_seen` may name an endpoint's authority
//! as `{authority:ID}` (`ID.test` on the simulator, `127.0.0.1:PORT` on real sockets), so
//! Host rules are written once for every path.
//!
//! Faults (`fault = ...`): `refuse` (connection refused), `dns` (the endpoint's host does not
//! resolve), `reset` (reads the request, then resets), `close` (reads the request, then
//! closes), `black_hole` (reads the request, never answers), `stall` (sends headers, never the
//! body), `half_body` (sends headers and half the body, then closes). HTTP/2 faults (SPEC 9;
//! the vector's policy says `http_version = "http2"`, and the real runners serve every
//! endpoint with testkit's HTTP/2 provider, h2c with prior knowledge): `refused_stream`
//! (`RST_STREAM(REFUSED_STREAM)` on the HEADERS: undelivered), `goaway_below` (`GOAWAY`
//! below the request's stream: undelivered where the client proves it, on the simulator,
//! async-std and smol; ambiguous on tokio and tower, whose hyper may hand the connection's
//! `GOAWAY` to a stream it had just opened), `goaway_at` (the whole request read, then
//! `GOAWAY` at its stream: ambiguous), `stream_reset` (the whole request read, then
//! `RST_STREAM(INTERNAL_ERROR)`: ambiguous); `black_hole` and answers work there too. Without `fault`, a step
//! answers `status` (default 200) with `headers` and `body` after `delay`; a `refuse` or
//! `dns` with a `delay` fails then (at most at the connect timeout: on the simulator only,
//! as `baton check` writes a connect that never completes). `refuse` and `dns`
//! are states of a whole endpoint on real sockets: a script that mixes them with other steps
//! cannot run there (the runner fails such a vector unless its `paths` leave those out).
//!
//! Besides the fields above, `expect` may hold `error`, `endpoint`, `elapsed_ms = [min, max]`
//! (real paths widen it by a [`Slack`]: [`real::TOLERANCE`] above, [`EARLY`] below), `headers_seen` (`"*same*"`: equal on every
//! request), `headers_absent`, `target_seen`, `key_executions` (requests carrying each
//! idempotency key, over all providers), `body_error` (reading the returned body fails:
//! `stall`, `half_body`) and `safe = true` (no rule of `baton_core::verify::judge` breaks:
//! what the counterexamples `baton check` writes expect, so they fail here exactly as it
//! reported them).
//!
//! ## Runners
//!
//! | path | test | how |
//! |---|---|---|
//! | `sim` | `tests/sim.rs` | [`run_sim`]: the engine on a virtual clock, requests built as adapters build them; the same file holds `baton_core::sim::Sim` (the simulator users test their policies with, through [`run_core_sim`]) to every vector it models, field by field |
//! | `tokio` | `tests/tokio.rs` | baton-tokio (reqwest) on a multi-thread runtime |
//! | `blocking` | `tests/blocking.rs` | baton-blocking (ureq) on the test thread |
//! | `async-std` | `tests/async_std.rs` | baton-async-std under `async_std::task::block_on` |
//! | `smol` | `tests/smol.rs` | baton-async-std under `smol::block_on` |
//! | `tower` | `tests/tower.rs` | baton-tower's layer in front of hyper-util's legacy `Client` on tokio |
//!
//! The real runners share [`real`]: one `testkit` provider per endpoint on 127.0.0.1, the
//! policy pointed at them, one client per vector, calls in order (really sleeping
//! `wait_before`), the body of a returned response read in full (with a
//! [`real::BODY_TIMEOUT`]), and the requests each provider recorded during each call.
//! Besides its own `expect`, every call of a vector that also runs on `sim` must decide as
//! the simulator did: the same stop reason, error kind, `may_have_executed` and attempts
//! (endpoint and outcome each), stated in the vector or not. Each
//! runner prints `N vectors ran, M not expressible on this path` with every reason, and
//! fails listing every mismatch. Set `CONFORMANCE_DUMP=1` to have `tests/sim.rs` print what
//! each call did (handy when writing a vector).
//!
//! `tests/fault_matrix.rs` is the randomized counterpart: every testkit fault x {GET, POST
//! without key, keyed POST} x {first, second endpoint}, 20 rounds each, on every adapter,
//! asserting that nothing is executed more often or in more places than its permission
//! allows and that every call returns by its deadline plus 100 ms.
//!
//! ## What the vectors cover (SPEC sections 2 and 3)
//!
//! | rule | vectors |
//! |---|---|
//! | 2.1 order, eligible, preferred, unknown, no usable endpoint | 12, 13, 14, 52, 53 |
//! | 2.1 unavailable tried last / skipped | 17, 18, 35, 53, 57 |
//! | 2.2 permissions: GET, POST, keyed POST, deny, explicit | 01-07, 15, 33, 39, 43, 54 |
//! | 2.2 idempotency groups | 40 |
//! | 2.2 `not_processed` (429) | 09, 32, 33 |
//! | 2.3 triggers: sets per call kind, extended set (reads only), 200 with an error body | 08, 27, 28, 29, 30, 55, 73 |
//! | 2.4 replay | 16 |
//! | 2.5 breaker: consecutive, failure rate, half-open, re-open, deadline not counted, one endpoint skipped as a plain breaker | 17, 18, 19, 35, 56, 64, 75 |
//! | 2.5 `not_before` | 57 |
//! | 2.6 schedule: rounds, attempts per endpoint, pinned, single-endpoint default | 36, 37, 38, 39 |
//! | 2.6 backoff | 07, 08, 36, 37, 38, 60 |
//! | 2.6 Retry-After: seconds, HTTP-date, past date, unparseable, too long (same / other endpoint) | 09, 10, 32, 34, 60, 61 |
//! | 2.6 timeouts and deadline | 04, 20, 54, 56, 58 |
//! | 2.7 budget (refused; free after undelivered) | 45, 46 |
//! | 2.8 hedging (GET, never POST, triggering answer starts the next) | 47, 48, 62 |
//! | 2.9 rate limiting (wait, fail fast, per endpoint) | 49, 50, 63 |
//! | 2.10 result: retained returned / withheld, error kinds, commit at headers | 10, 11, 13, 20, 21, 41, 42, 44, 45, 50, 51, 52 |
//! | 3 request id (caller, generated, invalid), key, attempt header | 21, 22, 51, 59 |
//! | 3 Host, credentials, URL modes | 23, 24, 25, 26, 31 |
//! | 3 redirects: same origin, another host (credentials dropped), `return`, `max_redirects` 0, 307/303 methods, loop and limit, one-shot body, failing target, hops sharing the attempt timeout | 65-72, 74 |
//! | 9 tiers and weights: failover through the rest of a tier (by weight) before the next tier, a preferred endpoint first from any tier, each call's order drawn by weight from its seeded source (the policy's `seed`); per-endpoint attempts and backoff | 80-83 |
//! | 9 HTTP/2: `REFUSED_STREAM` and `GOAWAY` below the stream undelivered, `GOAWAY` at the stream and a reset after the request ambiguous (an unkeyed POST stops, a keyed one stays pinned); a `GOAWAY` below the stream where the client cannot prove it (tokio, tower) ambiguous | 76-79, 84 (not on blocking: HTTP/1.1 only) |
//!
//! Not expressible as data, and covered by `baton-core`'s and the adapters' own tests
//! instead: the permission and response-classifier functions, a body copy failing at run
//! time, cancellation (dropping a call), concurrent probes and stale outcomes, a TCP connect
//! timeout (loopback answers or refuses at once), a redirect from https to http (the
//! providers speak plain HTTP; `baton_core`'s redirect unit tests cover it).

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod events;
pub mod real;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use baton_core::serde_duration;
use baton_core::{
    Action, AttemptOutcome, AttemptResult, BodyKind, Call, CallOptions, Endpoint, Engine,
    FailureClass, Head, Input, Outcome, Policy, Redirect, Redirects, RequestInfo, Settings,
    TimeoutPhase,
};
use serde::Deserialize;

/// Every execution path a vector can run on.
pub const PATHS: [&str; 6] = ["sim", "tokio", "blocking", "async-std", "smol", "tower"];

/// One scenario file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Vector {
    /// Short description (unique).
    pub name: String,
    /// Paths this vector runs on (default: all). A path left out is counted as skipped,
    /// with `why_not` saying why.
    #[serde(default)]
    pub paths: Option<Vec<String>>,
    /// Why some paths cannot express this vector.
    #[serde(default)]
    pub why_not: Option<String>,
    /// The policy's plain settings.
    #[serde(default)]
    pub policy: Settings,
    /// Endpoints in priority order, with their provider scripts.
    pub endpoints: Vec<EndpointSpec>,
    /// Providers that are not endpoints (redirect targets on another origin), with their
    /// scripts; `headers`, `base` and `group` do not apply to them.
    #[serde(default)]
    pub hosts: Vec<EndpointSpec>,
    /// Calls, run in order through one client.
    #[serde(deserialize_with = "known_calls")]
    pub calls: Vec<CallSpec>,
    /// Where this vector was loaded from.
    #[serde(skip)]
    pub file: PathBuf,
}

/// An endpoint and its provider's behaviour.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointSpec {
    /// Endpoint id.
    pub id: String,
    /// Path (and query) appended to the provider's URL.
    #[serde(default)]
    pub base: String,
    /// Idempotency group.
    #[serde(default)]
    pub group: Option<String>,
    /// Per-endpoint headers (credentials).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Behaviour per request number; the last step repeats.
    #[serde(default)]
    pub script: Vec<StepSpec>,
    /// This endpoint's connect timeout.
    #[serde(default, deserialize_with = "opt_duration")]
    pub connect_timeout: Option<Duration>,
    /// This endpoint's attempt timeout.
    #[serde(default, deserialize_with = "opt_duration")]
    pub attempt_timeout: Option<Duration>,
    /// This endpoint's attempts per round.
    #[serde(default)]
    pub attempts_per_endpoint: Option<u32>,
    /// Priority tier.
    #[serde(default)]
    pub tier: Option<u32>,
    /// Weight within the tier.
    #[serde(default)]
    pub weight: Option<u32>,
    /// This endpoint's backoff (the keys of `[policy.backoff]`).
    #[serde(default)]
    pub backoff: Option<baton_core::BackoffOverride>,
    /// Loopback address the real provider listens on (default `127.0.0.1`; `127.0.0.2`
    /// makes it another host). The simulator ignores it.
    #[serde(default)]
    pub ip: Option<std::net::Ipv4Addr>,
}

/// One scripted provider step.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepSpec {
    /// A fault instead of an answer.
    #[serde(default)]
    pub fault: Option<Fault>,
    /// Status to answer (default 200).
    #[serde(default)]
    pub status: Option<u16>,
    /// Response headers.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Response body.
    #[serde(default)]
    pub body: Option<String>,
    /// Delay before the answer (or the fault).
    #[serde(default, deserialize_with = "opt_duration")]
    pub delay: Option<Duration>,
}

/// Provider faults (see the crate docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fault {
    /// Connection refused (undelivered).
    Refuse,
    /// Host does not resolve (undelivered).
    Dns,
    /// Reads the request, then resets (ambiguous).
    Reset,
    /// Reads the request, then closes (ambiguous).
    Close,
    /// Reads the request, never answers (ambiguous, attempt timeout).
    BlackHole,
    /// Sends the headers, never the body (a response; the body read fails later).
    Stall,
    /// Sends the headers and half the body, then closes (a response; the body is cut).
    HalfBody,
    /// HTTP/2: `RST_STREAM(REFUSED_STREAM)` on the request's HEADERS (undelivered).
    RefusedStream,
    /// HTTP/2: `GOAWAY` whose last stream id is below the request's stream, then the
    /// connection closes (nothing processed: undelivered where the client can prove it).
    GoawayBelow,
    /// HTTP/2: the whole request is read, then `GOAWAY` at its stream and the connection
    /// closes (ambiguous).
    GoawayAt,
    /// HTTP/2: the whole request is read, then `RST_STREAM(INTERNAL_ERROR)` (ambiguous).
    StreamReset,
}

impl Fault {
    /// Whether the request reaches the provider.
    pub fn delivered(self) -> bool {
        !matches!(
            self,
            Fault::Refuse | Fault::Dns | Fault::RefusedStream | Fault::GoawayBelow
        )
    }

    /// Whether the fault exists only in HTTP/2 (a vector with one sets
    /// `http_version = "http2"` in its policy; the real runners then serve every endpoint
    /// with testkit's HTTP/2 provider, with prior knowledge).
    pub fn is_h2(self) -> bool {
        matches!(
            self,
            Fault::RefusedStream | Fault::GoawayBelow | Fault::GoawayAt | Fault::StreamReset
        )
    }

    /// The HTTP/2 end this fault shows the client, read by core's rule.
    fn h2_end(self) -> Option<baton_core::H2End> {
        use baton_core::H2End;
        Some(match self {
            Fault::RefusedStream => H2End::Reset {
                code: baton_core::REFUSED_STREAM,
            },
            Fault::GoawayBelow => H2End::GoAway { above_last: true },
            Fault::GoawayAt => H2End::GoAway { above_last: false },
            Fault::StreamReset => H2End::Reset { code: 0x2 },
            _ => return None,
        })
    }
}

/// One call and what must happen.
///
/// The per-call options (`retry`, `failover`, `deny`, `prefer`, `only`, `deadline`,
/// `attempt_timeout`, `attempts_per_endpoint`, `max_attempts`, `request_id`,
/// `idempotency_key`, `hedge`) are the engine's own text form of [`CallOptions`], written
/// beside the call's other keys. Any other key is an error when the vector is loaded.
#[derive(Debug, Clone, Deserialize)]
pub struct CallSpec {
    /// Method (default GET).
    #[serde(default = "get")]
    pub method: String,
    /// Request path and query (default `/`).
    #[serde(default = "root")]
    pub path: String,
    /// Request headers.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Body (replayable unless `one_shot`).
    #[serde(default)]
    pub body: Option<String>,
    /// Send the body as a one-shot stream (no replay).
    #[serde(default)]
    pub one_shot: bool,
    /// Endpoints eligible for this call (default all).
    #[serde(default)]
    pub eligible: Option<Vec<String>>,
    /// Wait this long before the call (cooldowns, half-open probes).
    #[serde(default, deserialize_with = "opt_duration")]
    pub wait_before: Option<Duration>,
    /// The call's options, in the engine's text form.
    #[serde(flatten)]
    pub options: CallOptions,
    /// Keys that are neither the call's nor an option (a vector with one is rejected).
    #[serde(flatten)]
    unknown: BTreeMap<String, toml::Value>,
    /// What must happen.
    pub expect: Expect,
}

/// The calls of a vector, each with only known keys: a call's own keys and the per-call
/// options share one table, so a misspelt key is caught here rather than ignored.
fn known_calls<'de, D: serde::Deserializer<'de>>(de: D) -> Result<Vec<CallSpec>, D::Error> {
    let calls = Vec::<CallSpec>::deserialize(de)?;
    match (calls.iter().enumerate()).find_map(|(i, c)| Some((i, c.unknown_key()?))) {
        Some((i, key)) => Err(serde::de::Error::custom(format!(
            "call {}: unknown field `{key}` (neither a call key nor a call option)",
            i + 1
        ))),
        None => Ok(calls),
    }
}

fn get() -> String {
    "GET".into()
}
fn root() -> String {
    "/".into()
}

fn opt_duration<'de, D: serde::Deserializer<'de>>(de: D) -> Result<Option<Duration>, D::Error> {
    let text = Option::<String>::deserialize(de)?;
    text.map(|t| serde_duration::parse(&t).map_err(serde::de::Error::custom))
        .transpose()
}

/// The expected result of a call. Unset fields are not checked.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// `[endpoint id, outcome]` per attempt, in order. Outcomes: `response`, `undelivered`,
    /// `ambiguous`, `timeout`, `deadline`, `cancelled`, `rejected_locally`.
    #[serde(default)]
    pub attempts: Option<Vec<(String, String)>>,
    /// Status of the returned response.
    #[serde(default)]
    pub status: Option<u16>,
    /// Id of the endpoint that gave the returned response.
    #[serde(default)]
    pub endpoint: Option<String>,
    /// Error kind (`failover`, `deadline`, `no_usable_endpoint`, ...), when the call fails.
    #[serde(default)]
    pub error: Option<String>,
    /// Stop reason.
    #[serde(default)]
    pub stop_reason: Option<String>,
    /// `may_have_executed` of the result.
    #[serde(default)]
    pub may_have_executed: Option<bool>,
    /// Requests each provider received during this call.
    #[serde(default)]
    pub executions: BTreeMap<String, usize>,
    /// Elapsed time of the call, `[min, max]` (real paths add their own tolerance).
    #[serde(default)]
    pub elapsed_ms: Option<(u64, u64)>,
    /// Headers every request at a provider must carry: `{ b = { "x-request-id" = "r-1" } }`.
    /// The value `"*same*"` means "present, and equal on every request of the call".
    #[serde(default)]
    pub headers_seen: BTreeMap<String, BTreeMap<String, String>>,
    /// Headers no request at a provider may carry.
    #[serde(default)]
    pub headers_absent: BTreeMap<String, Vec<String>>,
    /// Path and query each request at a provider must have, relative to the provider's URL.
    #[serde(default)]
    pub target_seen: BTreeMap<String, String>,
    /// Methods of the requests each provider received, in order (redirects change them).
    #[serde(default)]
    pub methods_seen: BTreeMap<String, Vec<String>>,
    /// Requests carrying each idempotency key, over all providers, during this call.
    #[serde(default)]
    pub key_executions: BTreeMap<String, usize>,
    /// The safety rules of `baton_core::verify::judge` hold for this call (what
    /// `baton check` counterexamples expect, so they fail here as it reported).
    #[serde(default)]
    pub safe: Option<bool>,
    /// Whether reading the returned response's body fails (`stall`, `half_body`): the
    /// headers were the commit point, and a cut body is never passed off as complete.
    #[serde(default)]
    pub body_error: Option<bool>,
}

/// A request as a provider saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenRequest {
    /// Method.
    pub method: String,
    /// Path and query, relative to the provider's URL (host and port removed).
    pub target: String,
    /// Headers (names lowercased).
    pub headers: Vec<(String, String)>,
}

/// What one call did, on any path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    /// `(endpoint id, outcome)` per attempt.
    pub attempts: Vec<(String, String)>,
    /// Status of the returned response.
    pub status: Option<u16>,
    /// Endpoint that gave the returned response.
    pub endpoint: Option<String>,
    /// Error kind name, when the call failed.
    pub error: Option<String>,
    /// Stop reason name.
    pub stop_reason: String,
    /// `may_have_executed`.
    pub may_have_executed: bool,
    /// Elapsed time.
    pub elapsed: Duration,
    /// Requests per provider id during the call.
    pub seen: BTreeMap<String, Vec<SeenRequest>>,
    /// Whether reading the returned body failed (`None`: no response was returned).
    pub body_error: Option<bool>,
    /// The engine's report, for the safety judge (`expect.safe`).
    pub report: Option<baton_core::Report>,
}

/// The outcome name of an attempt result, as vectors write it.
pub fn outcome_name(r: &AttemptResult) -> &'static str {
    r.as_str()
}

impl Observed {
    /// Fills the decision fields from an engine report.
    pub fn from_report(report: &baton_core::Report) -> Observed {
        Observed {
            attempts: report
                .attempts
                .iter()
                .map(|a| {
                    (
                        a.endpoint_id.to_string(),
                        outcome_name(&a.result).to_string(),
                    )
                })
                .collect(),
            status: report.status().map(|s| s.as_u16()),
            endpoint: report.endpoint_id().map(str::to_owned),
            error: match &report.outcome {
                Outcome::Error { kind, .. } => Some(kind.as_str().to_string()),
                Outcome::Response { .. } => None,
            },
            stop_reason: report.stop_reason.as_str().to_string(),
            may_have_executed: report.may_have_executed,
            elapsed: report.elapsed,
            seen: BTreeMap::new(),
            body_error: None,
            report: Some(report.clone()),
        }
    }
}

/// How much earlier than its lower bound a call may end on real sockets: a timer fires
/// late, never early, so only the clock reads around the call and the timers' millisecond
/// ticks are allowed for (plus the time earlier calls of the vector took, see [`Slack`]).
pub const EARLY: Duration = Duration::from_millis(5);

/// How far a call's elapsed time may stray from its vector's `elapsed_ms` bounds.
///
/// ```
/// use std::time::Duration;
/// use conformance::Slack;
/// assert_eq!(Slack::NONE.early, Duration::ZERO);
/// let real = Slack::real(Duration::from_millis(12));
/// assert_eq!(real.early, Duration::from_millis(17));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slack {
    /// Below the lower bound.
    pub early: Duration,
    /// Above the upper bound.
    pub late: Duration,
}

impl Slack {
    /// Exact bounds (the simulator: its virtual clock is the vector's own time).
    pub const NONE: Slack = Slack {
        early: Duration::ZERO,
        late: Duration::ZERO,
    };

    /// Real sockets, for a call after earlier calls of its vector that took `before` in
    /// all beyond the vector's own time for them (with the runner's pauses between them):
    /// a wait that state from an earlier call decides (a token, a cooldown) runs from a
    /// moment inside those calls, so it may end that much sooner than the vector says;
    /// beyond that, [`EARLY`] below the lower bound and [`real::TOLERANCE`] above the
    /// upper.
    pub fn real(before: Duration) -> Slack {
        Slack {
            early: EARLY + before,
            late: real::TOLERANCE,
        }
    }
}

/// Compares what call `c` of vector `v` did with what it expects, its elapsed time within
/// `slack` of the bounds (an adapter that skipped a wait or a hedge delay must not pass).
/// Returns every mismatch.
pub fn check(v: &Vector, c: &CallSpec, got: &Observed, slack: Slack) -> Vec<String> {
    let expect = &c.expect;
    let mut bad = Vec::new();
    if expect.safe == Some(true) {
        bad.extend(safety(v, c, got));
    } else {
        bad.extend(receipts(v, got));
    }
    bad.extend(hidden_requests(got));
    if let Some(a) = &expect.attempts {
        if *a != got.attempts {
            bad.push(format!("attempts: expected {a:?}, got {:?}", got.attempts));
        }
    }
    if expect.status.is_some() && expect.status != got.status {
        bad.push(format!(
            "status: expected {:?}, got {:?}",
            expect.status, got.status
        ));
    }
    if expect.endpoint.is_some() && expect.endpoint != got.endpoint {
        bad.push(format!(
            "endpoint: expected {:?}, got {:?}",
            expect.endpoint, got.endpoint
        ));
    }
    if expect.error.is_some() && expect.error != got.error {
        bad.push(format!(
            "error: expected {:?}, got {:?}",
            expect.error, got.error
        ));
    }
    if expect.status.is_some() && got.error.is_some() {
        bad.push(format!("expected a response, got error {:?}", got.error));
    }
    if let Some(s) = &expect.stop_reason {
        if *s != got.stop_reason {
            bad.push(format!(
                "stop_reason: expected {s}, got {}",
                got.stop_reason
            ));
        }
    }
    if let Some(m) = expect.may_have_executed {
        if m != got.may_have_executed {
            bad.push(format!(
                "may_have_executed: expected {m}, got {}",
                got.may_have_executed
            ));
        }
    }
    for (id, n) in &expect.executions {
        let seen = got.seen.get(id).map_or(0, Vec::len);
        if seen != *n {
            bad.push(format!("executions at {id}: expected {n}, got {seen}"));
        }
    }
    if let Some((lo, hi)) = expect.elapsed_ms {
        let lo = Duration::from_millis(lo).saturating_sub(slack.early);
        let hi = Duration::from_millis(hi) + slack.late;
        if got.elapsed < lo || got.elapsed > hi {
            bad.push(format!(
                "elapsed {:?} outside [{lo:?}, {hi:?}]",
                got.elapsed
            ));
        }
    }
    for (id, headers) in &expect.headers_seen {
        let reqs = got.seen.get(id).map(Vec::as_slice).unwrap_or(&[]);
        if reqs.is_empty() {
            bad.push(format!("headers_seen: {id} received nothing"));
        }
        for (name, value) in headers {
            // Every copy of the header in each request: a second copy (an appended value,
            // a header the caller and an endpoint both set) is a mismatch too.
            let values: Vec<Vec<&str>> = reqs
                .iter()
                .map(|r| {
                    (r.headers.iter())
                        .filter(|(n, _)| n == name)
                        .map(|(_, v)| v.as_str())
                        .collect()
                })
                .collect();
            let ok = if value == "*same*" {
                values.iter().all(|v| v.len() == 1) && values.windows(2).all(|w| w[0] == w[1])
            } else {
                values.iter().all(|v| *v == [value.as_str()])
            };
            if !ok {
                bad.push(format!(
                    "header {name} at {id}: expected {value:?}, got {values:?}"
                ));
            }
        }
    }
    // "*same*" across providers: the same value at every provider of the call.
    let mut across: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (id, headers) in &expect.headers_seen {
        for (name, value) in headers {
            if value == "*same*" {
                for r in got.seen.get(id).map(Vec::as_slice).unwrap_or(&[]) {
                    for (_, v) in r.headers.iter().filter(|(n, _)| n == name) {
                        across.entry(name).or_default().push(v.clone());
                    }
                }
            }
        }
    }
    for (name, values) in across {
        if values.windows(2).any(|w| w[0] != w[1]) {
            bad.push(format!(
                "header {name} differs between attempts: {values:?}"
            ));
        }
    }
    for (id, names) in &expect.headers_absent {
        for r in got.seen.get(id).map(Vec::as_slice).unwrap_or(&[]) {
            for name in names {
                if r.headers.iter().any(|(n, _)| n == name) {
                    bad.push(format!("header {name} must not reach {id}"));
                }
            }
        }
    }
    for (id, methods) in &expect.methods_seen {
        let got_methods: Vec<&str> = got
            .seen
            .get(id)
            .map(Vec::as_slice)
            .unwrap_or(&[])
            .iter()
            .map(|r| r.method.as_str())
            .collect();
        if got_methods != *methods {
            bad.push(format!(
                "methods at {id}: expected {methods:?}, got {got_methods:?}"
            ));
        }
    }
    for (key, n) in &expect.key_executions {
        let seen = got
            .seen
            .values()
            .flatten()
            .filter(|r| {
                r.headers
                    .iter()
                    .any(|(name, v)| name == "idempotency-key" && v == key)
            })
            .count();
        if seen != *n {
            bad.push(format!("executions of key {key}: expected {n}, got {seen}"));
        }
    }
    if expect.body_error.is_some() && expect.body_error != got.body_error {
        bad.push(format!(
            "body_error: expected {:?}, got {:?}",
            expect.body_error, got.body_error
        ));
    }
    for (id, target) in &expect.target_seen {
        let seen = got.seen.get(id).map(Vec::as_slice).unwrap_or(&[]);
        if seen.is_empty() {
            bad.push(format!(
                "target at {id}: expected {target}, but {id} received nothing"
            ));
        }
        for r in seen {
            if r.target != *target {
                bad.push(format!(
                    "target at {id}: expected {target}, got {}",
                    r.target
                ));
            }
        }
    }
    bad
}

/// The safety judge's verdict on one observed call: every rule broken, as
/// `safety: <rule>: <what happened>`.
fn safety(v: &Vector, c: &CallSpec, got: &Observed) -> Vec<String> {
    let (Some(report), Ok(method)) = (&got.report, c.method.parse::<http::Method>()) else {
        return vec!["safety: no report to judge".into()];
    };
    match v
        .policy(|e| format!("http://{}.test", sim_host(&e.id)))
        .and_then(|b| b.build().map_err(|e| e.to_string()))
    {
        Ok(policy) => {
            let received = got.seen.values().map(Vec::len).sum();
            let mut found = baton_core::verify::judge(&policy, &method, report);
            found.extend(baton_core::verify::understated_by_receipts(
                &policy, report, received, &found,
            ));
            found.iter().map(|x| format!("safety: {x}")).collect()
        }
        Err(e) => vec![format!("safety: the vector's policy does not build: {e}")],
    }
}

/// The rule every call is held to, whatever its vector expects: a call that says nothing
/// was executed (`may_have_executed` false) may have reached providers only with requests
/// they answered with a `not_processed` status (SPEC 1, 2.10). The receipts are the
/// requests the providers recorded during the call (a refused stream or connection is
/// never recorded).
fn receipts(v: &Vector, got: &Observed) -> Vec<String> {
    let Some(report) = &got.report else {
        return Vec::new();
    };
    let received: usize = got.seen.values().map(Vec::len).sum();
    if report.may_have_executed {
        return Vec::new();
    }
    let policy = v
        .policy(|e| format!("http://{}.test", sim_host(&e.id)))
        .and_then(|b| b.build().map_err(|e| e.to_string()));
    match policy {
        Ok(policy) => {
            let found = baton_core::verify::understated_by_receipts(&policy, report, received, &[]);
            found.iter().map(|x| format!("safety: {x}")).collect()
        }
        Err(e) => vec![format!("safety: the vector's policy does not build: {e}")],
    }
}

/// The converse of [`receipts`], for every call too: providers never receive more
/// requests of a call than its report shows (an attempt each, a redirect hop each). One
/// more is a request the report hides, such as an HTTP client's own silent re-send.
/// Vectors run without token providers: a credential's refresh-and-re-send (SPEC 9, one
/// more request within an attempt, shown in no report when it succeeds) would need
/// counting here first.
fn hidden_requests(got: &Observed) -> Option<String> {
    let report = got.report.as_ref()?;
    let received: usize = got.seen.values().map(Vec::len).sum();
    let (attempts, hops) = (report.attempts.len(), report.redirects.len());
    (received > attempts + hops).then(|| {
        format!(
            "safety: providers received {received} request(s), more than the report's {attempts} attempt(s) and {hops} redirect hop(s)"
        )
    })
}

/// Loads every vector under `dir` (sorted by file name).
pub fn load_dir(dir: &Path) -> Result<Vec<Vector>, String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(&f).map_err(|e| format!("{}: {e}", f.display()))?;
            let mut v: Vector =
                toml::from_str(&text).map_err(|e| format!("{}: {e}", f.display()))?;
            v.check_paths()
                .map_err(|e| format!("{}: {e}", f.display()))?;
            v.file = f;
            Ok(v)
        })
        .collect()
}

/// The repository's vectors (`vectors/` at the workspace root); none found is an error,
/// so a moved or emptied directory cannot pass every runner.
pub fn vectors() -> Vec<Vector> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../vectors");
    let all = load_dir(&dir).unwrap_or_else(|e| panic!("loading vectors: {e}"));
    assert!(!all.is_empty(), "no vectors in {}", dir.display());
    all
}

impl Vector {
    /// A copy with every `{authority:ID}` in the calls' header values and in
    /// `expect.headers_seen` replaced by `authority_of(ID)` (the `host:port` of endpoint
    /// ID on this path), so Host rules can be written once for every path.
    pub fn resolve(&self, authority_of: impl Fn(&str) -> Option<String>) -> Vector {
        let fill = |text: &mut String| {
            for e in self.endpoints.iter().chain(&self.hosts) {
                let token = format!("{{authority:{}}}", e.id);
                if text.contains(&token) {
                    if let Some(a) = authority_of(&e.id) {
                        *text = text.replace(&token, &a);
                    }
                }
            }
        };
        let mut v = self.clone();
        for e in v.endpoints.iter_mut().chain(v.hosts.iter_mut()) {
            for step in &mut e.script {
                step.headers.values_mut().for_each(fill);
            }
        }
        for c in &mut v.calls {
            c.headers.values_mut().for_each(fill);
            for headers in c.expect.headers_seen.values_mut() {
                headers.values_mut().for_each(fill);
            }
        }
        v
    }

    /// [`resolve`](Self::resolve)d for the simulator, where endpoint `ID` is `http://ID.test`.
    pub fn for_sim(&self) -> Vector {
        self.resolve(|id| Some(format!("{}.test", sim_host(id))))
    }

    /// `paths` names only known paths (a misspelt one would skip a path silently), and a
    /// vector that leaves some out says why in `why_not`.
    pub fn check_paths(&self) -> Result<(), String> {
        let Some(paths) = &self.paths else {
            return Ok(());
        };
        if let Some(p) = paths.iter().find(|p| !PATHS.contains(&p.as_str())) {
            return Err(format!("unknown path {p:?} in `paths` (known: {PATHS:?})"));
        }
        let left_out = PATHS.iter().any(|k| !paths.iter().any(|p| p == k));
        if left_out && self.why_not.as_deref().is_none_or(|w| w.trim().is_empty()) {
            return Err("`paths` leaves some out, and `why_not` does not say why".into());
        }
        Ok(())
    }

    /// Whether the vector runs on `path`.
    pub fn runs_on(&self, path: &str) -> bool {
        self.paths
            .as_ref()
            .is_none_or(|p| p.iter().any(|x| x == path))
    }

    /// The policy, with each endpoint's URL made from `url_of(endpoint spec)`.
    pub fn policy(
        &self,
        url_of: impl Fn(&EndpointSpec) -> String,
    ) -> Result<baton_core::PolicyBuilder, String> {
        let mut b = Policy::builder().settings(self.policy.clone());
        for e in &self.endpoints {
            let mut ep = Endpoint::new(e.id.clone(), format!("{}{}", url_of(e), e.base));
            if let Some(g) = &e.group {
                ep = ep.group(g.clone());
            }
            for (k, v) in &e.headers {
                ep = ep.header(k, v);
            }
            b = b.endpoint(e.overrides(ep));
        }
        Ok(b)
    }
}

impl EndpointSpec {
    /// `ep` with this spec's per-endpoint settings.
    fn overrides(&self, mut ep: Endpoint) -> Endpoint {
        if let Some(t) = self.connect_timeout {
            ep = ep.connect_timeout(t);
        }
        if let Some(t) = self.attempt_timeout {
            ep = ep.attempt_timeout(t);
        }
        if let Some(n) = self.attempts_per_endpoint {
            ep = ep.attempts_per_endpoint(n);
        }
        if let Some(t) = self.tier {
            ep = ep.tier(t);
        }
        if let Some(w) = self.weight {
            ep = ep.weight(w);
        }
        if let Some(b) = self.backoff {
            ep = ep.backoff(b);
        }
        ep
    }
}

impl CallSpec {
    /// The call's options (without event sink).
    pub fn options(&self) -> CallOptions {
        self.options.clone()
    }

    /// The first key of the call that is neither the call's own nor an option.
    fn unknown_key(&self) -> Option<&str> {
        self.unknown.keys().next().map(String::as_str)
    }

    /// The body kind the engine sees.
    pub fn body_kind(&self) -> BodyKind {
        match (&self.body, self.one_shot) {
            (_, true) => BodyKind::OneShot,
            (Some(_), false) => BodyKind::Replayable,
            (None, false) => BodyKind::Empty,
        }
    }
}

/// One call through [`baton_core::sim::Sim`]: what it observed, and how many requests
/// each endpoint (by id) received.
pub type CoreSimCall = (Observed, BTreeMap<String, usize>);

/// The policy of vector `v` (already [`for_sim`](Vector::for_sim)) on the simulated hosts,
/// with each call's `eligible` list: the call whose index is in the returned counter (set
/// it before each call) sees its own list.
fn sim_policy(v: &Vector) -> Result<(Policy, Arc<std::sync::atomic::AtomicUsize>), String> {
    let eligible_sets: Vec<Option<Vec<String>>> =
        v.calls.iter().map(|c| c.eligible.clone()).collect();
    let current = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let cur = current.clone();
    let policy = v
        .policy(|e| format!("http://{}.test", sim_host(&e.id)))?
        .eligible_fn(move |e, _| {
            let k = cur.load(std::sync::atomic::Ordering::Relaxed);
            eligible_sets
                .get(k)
                .and_then(|s| s.as_ref())
                .is_none_or(|s| s.iter().any(|id| id == e.id()))
        })
        .build()
        .map_err(|e| e.to_string())?;
    Ok((policy, current))
}

/// Runs a vector through [`baton_core::sim::Sim`], the simulator users property-test their
/// policies with, and returns, per call, what it observed and the requests each endpoint
/// received. `None` when the vector holds what that simulator does not model: providers
/// that are not endpoints (`hosts`). Body faults (`stall`, `half_body`) answer there with
/// their status (it reads no body), so `body_error` is never set.
pub fn run_core_sim(v: &Vector) -> Result<Option<Vec<CoreSimCall>>, String> {
    use baton_core::sim::{Reply, Script, SimRequest, Step};
    let v = &v.for_sim();
    if !v.hosts.is_empty() {
        return Ok(None);
    }
    let (policy, current) = sim_policy(v)?;
    let mut sim = baton_core::sim::Sim::new(policy, Instant::now());
    for e in &v.endpoints {
        let steps = e.script.iter().map(|step| {
            let reply = match step.fault {
                Some(Fault::Refuse | Fault::Dns) => Reply::Refuse,
                Some(Fault::Reset | Fault::Close) => Reply::Reset,
                Some(Fault::BlackHole) => Reply::BlackHole,
                Some(Fault::RefusedStream) => Reply::RefusedStream,
                Some(Fault::GoawayBelow) => Reply::GoAway { above_last: true },
                Some(Fault::GoawayAt) => Reply::GoAway { above_last: false },
                Some(Fault::StreamReset) => Reply::StreamReset,
                Some(Fault::Stall | Fault::HalfBody) | None => {
                    let headers = step.headers.iter();
                    let headers = headers.map(|(k, v)| (k.clone(), v.clone())).collect();
                    Reply::Status(step.status.unwrap_or(200), headers)
                }
            };
            let after = step.delay.unwrap_or_default();
            Step { reply, after }
        });
        sim.script(&e.id, Script::steps_of(steps.collect()));
    }
    let mut out = Vec::new();
    for (k, c) in v.calls.iter().enumerate() {
        current.store(k, std::sync::atomic::Ordering::Relaxed);
        if let Some(w) = c.wait_before {
            sim.advance(w);
        }
        let method: http::Method = c
            .method
            .parse()
            .map_err(|_| format!("bad method {}", c.method))?;
        let mut request = SimRequest::new(method).body(c.body_kind());
        request.uri = c
            .path
            .parse()
            .map_err(|e| format!("bad path {}: {e}", c.path))?;
        for (name, value) in &c.headers {
            request = request.header(name, value);
        }
        let run = sim.run_request(request, c.options());
        let mut o = Observed::from_report(&run.report);
        o.elapsed = run.elapsed;
        let seen = v
            .endpoints
            .iter()
            .map(|e| (e.id.clone(), run.executions(&e.id)))
            .collect();
        out.push((o, seen));
    }
    Ok(Some(out))
}

/// Runs a vector through the core engine on a virtual clock, building each attempt's
/// request exactly as the adapters do (`attempt_uri`, `apply_attempt_headers`). Returns one
/// observation per call.
pub fn run_sim(v: &Vector) -> Result<Vec<Observed>, String> {
    let v = &v.for_sim();
    let (policy, current) = sim_policy(v)?;
    let engine = Arc::new(Engine::new(policy));
    let origin = Instant::now();
    let mut now = origin;
    let mut counters = vec![0usize; v.endpoints.len() + v.hosts.len()];
    let mut out = Vec::new();
    for (k, c) in v.calls.iter().enumerate() {
        current.store(k, std::sync::atomic::Ordering::Relaxed);
        if let Some(w) = c.wait_before {
            now += w;
        }
        let method: http::Method = c
            .method
            .parse()
            .map_err(|_| format!("bad method {}", c.method))?;
        let uri: http::Uri = c
            .path
            .parse()
            .map_err(|e| format!("bad path {}: {e}", c.path))?;
        let mut headers = http::HeaderMap::new();
        for (name, value) in &c.headers {
            headers.append(
                http::HeaderName::try_from(name.as_str()).map_err(|e| e.to_string())?,
                http::HeaderValue::try_from(value.as_str()).map_err(|e| e.to_string())?,
            );
        }
        let info = RequestInfo {
            method: &method,
            uri: &uri,
            headers: &headers,
        };
        let start = now;
        let mut call: Call<'_, Head> = Call::new(&engine, &info, c.body_kind(), c.options(), now);
        // As the adapters do: the request id and key header values, once per call.
        let identity = call.identity_headers();
        let mut seen: BTreeMap<String, Vec<SeenRequest>> = BTreeMap::new();
        let mut pending: Vec<(u32, usize, Instant, SimReply, Vec<Redirect>)> = Vec::new();
        let mut cut_body: Vec<u32> = Vec::new();
        let report = loop {
            let action = call.poll();
            match action {
                Action::Send(a) => {
                    let policy = engine.policy();
                    let mut h = headers.clone();
                    let built = identity
                        .clone()
                        .and_then(|id| call.attempt_parts(&a, &id, &uri, &mut h));
                    let Ok(target) = built else {
                        let outcome = AttemptOutcome::Failure(FailureClass::RejectedLocally);
                        call.handle(
                            Input::Failed {
                                attempt: a.number,
                                outcome,
                            },
                            now,
                        );
                        continue;
                    };
                    let request = SimRequest {
                        method: method.clone(),
                        target,
                        headers: h,
                        body: c.body_kind(),
                    };
                    let played = play_attempt(v, policy, &a, request, &mut counters, &mut seen)?;
                    if played.cut_body {
                        cut_body.push(a.number);
                    }
                    pending.push((
                        a.number,
                        a.endpoint,
                        now + played.after,
                        played.reply,
                        played.redirects,
                    ));
                }
                Action::Discard(n) => pending.retain(|p| p.0 != n),
                Action::WaitUntil(_) | Action::WaitForAttempt => {
                    let until = match action {
                        Action::WaitUntil(t) => Some(t),
                        _ => None,
                    };
                    let next = pending
                        .iter()
                        .enumerate()
                        .min_by_key(|(_, p)| (p.2, p.0))
                        .map(|(i, p)| (i, p.2));
                    match (next, until) {
                        (Some((i, at)), u) if u.is_none_or(|u| at <= u) => {
                            let (number, _, at, reply, redirects) = pending.remove(i);
                            now = now.max(at);
                            if !redirects.is_empty() {
                                call.handle(
                                    Input::Redirected {
                                        attempt: number,
                                        redirects,
                                    },
                                    now,
                                );
                            }
                            let wall = SystemTime::UNIX_EPOCH
                                + Duration::from_secs(1_700_000_000)
                                + now.duration_since(origin);
                            let failed = |outcome| Input::Failed {
                                attempt: number,
                                outcome,
                            };
                            let input = match reply {
                                SimReply::Status(code, hs) => {
                                    let status = http::StatusCode::from_u16(code)
                                        .map_err(|e| e.to_string())?;
                                    Input::Response {
                                        attempt: number,
                                        response: Head::with_headers(status, header_map(&hs)),
                                        wall: Some(wall),
                                    }
                                }
                                SimReply::Undelivered => {
                                    failed(AttemptOutcome::Failure(FailureClass::Undelivered))
                                }
                                SimReply::Ambiguous => {
                                    failed(AttemptOutcome::Failure(FailureClass::Ambiguous))
                                }
                                SimReply::Timeout => {
                                    failed(AttemptOutcome::Timeout(TimeoutPhase::Response))
                                }
                            };
                            call.handle(input, now);
                        }
                        (_, Some(u)) => {
                            now = now.max(u);
                            call.handle(Input::Timer, now);
                        }
                        _ => return Err("engine waited with nothing in flight".into()),
                    }
                }
                Action::Done => break call.take_done().into_report(),
                _ => return Err("the engine asked for an action this runner does not know".into()),
            }
        };
        let mut o = Observed::from_report(&report);
        o.elapsed = now.duration_since(start);
        o.seen = seen;
        o.body_error = report
            .outcome
            .response_attempt()
            .map(|n| cut_body.contains(&n));
        out.push(o);
    }
    Ok(out)
}

/// One request of an attempt in the simulator.
struct SimRequest {
    method: http::Method,
    target: http::Uri,
    headers: http::HeaderMap,
    body: BodyKind,
}

/// How one simulated attempt ends: after how long, with what, and the redirects it
/// followed on the way (SPEC 3, decided by [`Redirects`] exactly as adapters do).
struct Played {
    after: Duration,
    reply: SimReply,
    redirects: Vec<Redirect>,
    cut_body: bool,
}

impl Played {
    fn new(after: Duration, reply: SimReply, redirects: Option<Redirects>, cut_body: bool) -> Self {
        Played {
            after,
            reply,
            redirects: redirects.map(Redirects::into_followed).unwrap_or_default(),
            cut_body,
        }
    }
}

/// The provider of a simulated URL: `http://ID.test` is endpoint or host `ID`.
fn sim_provider<'v>(v: &'v Vector, uri: &http::Uri) -> Option<(usize, &'v EndpointSpec)> {
    let host = uri.host()?.strip_suffix(".test")?;
    v.endpoints
        .iter()
        .chain(&v.hosts)
        .enumerate()
        .find(|(_, e)| sim_host(&e.id) == host)
}

/// The simulated host name of endpoint or host `id`: the id itself when a host name can
/// hold it (letters, digits, `-`, `.`), else each other character written as `-HEX-`, so
/// that any id a policy accepts (`eu/1`, `a b`) has a provider on the simulator and a
/// counterexample of `baton check` replays.
fn sim_host(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for c in id.chars() {
        if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
            out.push(c);
        } else {
            out.push_str(&format!("-{:x}-", u32::from(c)));
        }
    }
    out
}

/// Plays attempt `a` against the scripted providers, following redirects.
fn play_attempt(
    v: &Vector,
    policy: &Policy,
    a: &baton_core::Attempt,
    mut request: SimRequest,
    counters: &mut [usize],
    seen: &mut BTreeMap<String, Vec<SeenRequest>>,
) -> Result<Played, String> {
    let mut redirects: Option<Redirects> = None;
    let mut spent = Duration::ZERO;
    let mut provider = sim_provider(v, &request.target);
    loop {
        let Some((index, spec)) = provider else {
            // A host no provider plays: its name does not resolve.
            return Ok(Played::new(spent, SimReply::Undelivered, redirects, false));
        };
        let n = counters[index];
        counters[index] += 1;
        let step = spec
            .script
            .get(n.min(spec.script.len().saturating_sub(1)))
            .cloned()
            .unwrap_or_default();
        if step.fault.is_none_or(Fault::delivered) {
            let base = format!("http://{}.test", sim_host(&spec.id));
            let full = request.target.to_string();
            seen.entry(spec.id.clone()).or_default().push(SeenRequest {
                method: request.method.to_string(),
                target: full.strip_prefix(&base).unwrap_or(&full).to_string(),
                headers: request
                    .headers
                    .iter()
                    .map(|(n, v)| {
                        (
                            n.as_str().to_string(),
                            String::from_utf8_lossy(v.as_bytes()).into_owned(),
                        )
                    })
                    .collect(),
            });
        }
        let left = a.timeout.saturating_sub(spent);
        let (after, reply) = play_step(&step, left, a.connect_timeout);
        spent += after;
        let cut_body = matches!(step.fault, Some(Fault::Stall | Fault::HalfBody));
        let SimReply::Status(code, hs) = &reply else {
            return Ok(Played::new(spent, reply, redirects, cut_body));
        };
        let status = http::StatusCode::from_u16(*code).map_err(|e| e.to_string())?;
        let map = header_map(hs);
        let state = redirects.get_or_insert_with(|| {
            Redirects::for_attempt(policy, a, request.body, &request.target, &request.method)
        });
        let Some(hop) = state.next(status, &map) else {
            return Ok(Played::new(spent, reply, redirects, cut_body));
        };
        state.prepare(policy, &hop, &mut request.headers);
        if hop.cross_origin {
            if let Some(host) = hop.uri.authority() {
                if let Ok(value) = http::HeaderValue::from_str(host.as_str()) {
                    request.headers.insert(http::header::HOST, value);
                }
            }
        }
        provider = sim_provider(v, &hop.uri);
        request.method = hop.method;
        request.target = hop.uri;
    }
}

/// What one scripted step does within `left` of the attempt's time (a refusal after a
/// delay comes at most at the connect timeout: a connect that long never completed).
fn play_step(step: &StepSpec, left: Duration, connect: Duration) -> (Duration, SimReply) {
    let delay = step.delay.unwrap_or_default();
    match step.fault {
        Some(Fault::Refuse) | Some(Fault::Dns) => (delay.min(connect), SimReply::Undelivered),
        Some(
            f @ (Fault::RefusedStream | Fault::GoawayBelow | Fault::GoawayAt | Fault::StreamReset),
        ) if delay < left => {
            let class = f.h2_end().map(baton_core::H2End::class);
            let reply = match class {
                Some(FailureClass::Undelivered) => SimReply::Undelivered,
                _ => SimReply::Ambiguous,
            };
            (delay, reply)
        }
        Some(Fault::RefusedStream | Fault::GoawayBelow | Fault::GoawayAt | Fault::StreamReset) => {
            (left, SimReply::Timeout)
        }
        Some(Fault::Reset) | Some(Fault::Close) if delay < left => (delay, SimReply::Ambiguous),
        Some(Fault::BlackHole) | Some(Fault::Reset) | Some(Fault::Close) => {
            (left, SimReply::Timeout)
        }
        Some(Fault::Stall) | Some(Fault::HalfBody) | None => {
            if delay >= left {
                (left, SimReply::Timeout)
            } else {
                (
                    delay,
                    SimReply::Status(step.status.unwrap_or(200), step.headers.clone()),
                )
            }
        }
    }
}

fn header_map(headers: &BTreeMap<String, String>) -> http::HeaderMap {
    let mut map = http::HeaderMap::new();
    for (k, v) in headers {
        if let (Ok(n), Ok(v)) = (
            http::HeaderName::try_from(k.as_str()),
            http::HeaderValue::try_from(v.as_str()),
        ) {
            map.append(n, v);
        }
    }
    map
}

enum SimReply {
    Status(u16, BTreeMap<String, String>),
    Undelivered,
    Ambiguous,
    Timeout,
}

#[cfg(test)]
mod call_keys {
    use super::*;

    const HEAD: &str = "name = \"t\"\n[policy]\n[[endpoints]]\nid = \"a\"\n";

    fn load(call: &str) -> Result<Vector, String> {
        toml::from_str(&format!(
            "{HEAD}[[calls]]\n{call}expect.error = \"failover\"\n"
        ))
        .map_err(|e| e.to_string())
    }

    #[test]
    fn call_options_are_the_engines_text_form() {
        let v = load(
            "method = \"POST\"\nmax_attempts = 1\nattempt_timeout = \"250ms\"\nonly = \"a\"\n",
        )
        .unwrap();
        let o = v.calls[0].options();
        assert_eq!(o.max_attempts, Some(1));
        assert_eq!(o.attempt_timeout, Some(Duration::from_millis(250)));
        assert_eq!(o.only.as_deref(), Some("a"));
    }

    #[test]
    fn a_misspelt_call_key_is_an_error() {
        let e = load("methd = \"POST\"\n").unwrap_err();
        assert!(e.contains("unknown field `methd`"), "{e}");
        let e = load("retyr = \"never\"\n").unwrap_err();
        assert!(e.contains("unknown field `retyr`"), "{e}");
        assert!(load("retry = \"sometimes\"\n").is_err());
    }
}

#[cfg(test)]
mod checks {
    use super::*;

    fn vector(expect: &str) -> Vector {
        let text = format!(
            "name = \"t\"\n[policy]\n[[endpoints]]\nid = \"a\"\n[[calls]]\nmethod = \"POST\"\n{expect}"
        );
        toml::from_str(&text).unwrap()
    }

    fn request(headers: &[(&str, &str)]) -> SeenRequest {
        SeenRequest {
            method: "POST".into(),
            target: "/".into(),
            headers: (headers.iter())
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
        }
    }

    /// A header an adapter sent twice (the caller's and an endpoint's, or appended across
    /// attempts) is a mismatch even when its first copy is the one expected.
    #[test]
    fn a_second_copy_of_an_expected_header_is_a_mismatch() {
        let v = vector("expect.headers_seen = { a = { authorization = \"Bearer caller\" } }\n");
        let mut got = Observed::default();
        let one = request(&[("authorization", "Bearer caller")]);
        got.seen.insert("a".into(), vec![one]);
        assert!(check(&v, &v.calls[0], &got, Slack::NONE).is_empty());
        let two = request(&[
            ("authorization", "Bearer caller"),
            ("authorization", "Bearer A-secret"),
        ]);
        got.seen.insert("a".into(), vec![two]);
        let bad = check(&v, &v.calls[0], &got, Slack::NONE);
        assert!(
            bad.iter().any(|b| b.contains("header authorization at a")),
            "{bad:?}"
        );
    }

    /// Every call is held to its receipts, whether or not its vector names
    /// `may_have_executed`: "nothing was executed" while a provider recorded the request
    /// is a mismatch.
    #[test]
    fn a_call_that_says_nothing_executed_is_held_to_what_providers_received() {
        let v = vector("expect.stop_reason = \"attempts_exhausted\"\n");
        let policy = Policy::builder()
            .endpoint(baton_core::Endpoint::new("a", "http://a.test/"))
            .build()
            .unwrap();
        let mut sim = baton_core::sim::Sim::new(policy, Instant::now());
        sim.script("a", baton_core::sim::Script::refuse());
        let run = sim.run(http::Method::POST, baton_core::CallOptions::default());
        assert!(!run.report.may_have_executed);
        let mut got = Observed::from_report(&run.report);
        assert!(receipts(&v, &got).is_empty());
        got.seen.insert("a".into(), vec![request(&[])]);
        let bad = check(&v, &v.calls[0], &got, Slack::NONE);
        assert!(
            bad.iter().any(|b| b.contains("may_have_executed is false")),
            "{bad:?}"
        );
        // More requests than the report's three attempts: one it does not show.
        got.seen.insert("a".into(), vec![request(&[]); 4]);
        let bad = check(&v, &v.calls[0], &got, Slack::NONE);
        let hidden = "more than the report's 3 attempt";
        assert!(bad.iter().any(|b| b.contains(hidden)), "{bad:?}");
    }
}
