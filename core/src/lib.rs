//! # baton-core: the failover engine, without I/O
//!
//! baton decides, for every HTTP call to a small ordered set of providers, which endpoint
//! to try, whether another attempt is allowed and safe, when to wait and when to stop, and
//! it never sends a request twice where that could do the work twice.
//!
//! This crate is the whole policy, as pure state machines: a [`Call`] takes explicit inputs
//! (the request's method, URL and headers, each attempt's classified outcome, the time) and
//! answers with [`Action`]s (send this attempt, discard that one, wait until, done). It
//! never reads a clock, never draws OS randomness, never sleeps, spawns or does I/O: time
//! comes in as `Instant`s, randomness from a seed in the [`Settings`] or the entropy an
//! adapter gives its [`Engine`] once (the one helper that draws OS randomness,
//! [`os_entropy`], is for adapters; no `Call` or `Engine` calls it). The same inputs give
//! the same actions, so one property test covers every runtime. The adapters
//! (`baton-tokio`, `baton-blocking`, `baton-async-std`, `baton-tower`) only send, sleep
//! and classify: the async ones through one driver of the call loop, [`drive`], which
//! polls the futures an adapter's transport makes and does no I/O of its own.
//!
//! State shared by all calls of a client (endpoint health, the retry budget) lives in an
//! [`Engine`] behind `&self`: with the consecutive breaker rule, a healthy call writes
//! nothing shared.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use baton_core::{sim::{Script, Sim}, CallOptions, Endpoint, Policy};
//!
//! let policy = Policy::builder()
//!     .endpoint(Endpoint::new("primary", "https://a.example/"))
//!     .endpoint(Endpoint::new("backup", "https://b.example/"))
//!     .build()
//!     .unwrap();
//! let mut sim = Sim::new(policy, Instant::now());
//! sim.script("primary", Script::refuse());
//! sim.script("backup", Script::status(200).after(Duration::from_millis(30)));
//! let run = sim.run(http::Method::POST, CallOptions::default());
//! assert_eq!(run.report.status(), Some(http::StatusCode::OK));
//! assert_eq!(run.endpoints_attempted(), ["primary", "backup"]);
//! assert_eq!(run.executions("primary"), 0);
//! ```
//!
//! ## Dependencies
//! - `http`: the request and response vocabulary every Rust HTTP client shares.
//! - `bytes` (already under `http`): a call's request-id and key header values as one
//!   shared buffer each, copied to every attempt by reference count.
//! - `thiserror`: error types without boilerplate.
//! - `smallvec`: attempt lists stored inline, so the healthy path allocates nothing.
//! - `httpdate`: the HTTP-date form of `Retry-After` (RFC 9110), no I/O.
//! - optional `proptest` (strategies for users' property tests), `arbitrary` (fuzzing),
//!   `serde` (configuration files) and `metrics` (feature `metrics`: attempt and call
//!   durations and the failover, budget, rate-limit and breaker counters through the
//!   `metrics` facade).
//!
//! Rust 1.85 or later (`rust-version`, checked in CI against the default dependency
//! tree); the `proptest` feature needs 1.88 (proptest 1.12).

#![forbid(unsafe_code)]
// docs.rs (and CI, with nightly) builds with `--cfg docsrs`: every feature-gated item then
// says which feature it needs.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(missing_docs)]

mod backoff;
mod breaker;
mod budget;
mod call;
pub mod credential;
mod destination;
pub mod drive;
mod engine;
mod event;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod health;
mod id;
mod kit;
mod limit;
mod limits;
mod permission;
mod policy;
mod probe;
mod proxy;
mod redact;
mod redirect;
mod report;
mod retry_after;
mod rng;
pub mod sim;
pub mod sse;
mod status;
#[cfg(feature = "proptest")]
pub mod strategies;
mod stripe;
#[cfg(feature = "metrics")]
mod telemetry;
mod time;
pub mod verify;
mod wire;

// The `http` crate, for the adapters' shared macros (`client_methods!`).
pub use backoff::{Backoff, BackoffOverride, Jitter};
pub use breaker::{Breakers, Circuit, CircuitOpen, Permit};
pub use call::{
    Action, Answer, Attempt, AttemptOutcome, BodyKind, Call, CallOptions, Done, Head, Input,
    MIN_ATTEMPT_TIME,
};
pub use destination::{
    apply_attempt_headers, attempt_uri, check_scheme, insert_host_if_absent, original_authority,
    request_head, request_target, request_uri, DestinationError, IdentityHeaders, InvalidRequest,
};
pub use engine::Engine;
pub use event::{AttemptKind, Event, EventKind, WaitReason};
pub use health::{BreakerState, EndpointHealth};
#[doc(hidden)]
pub use http as __http;
pub use id::{
    EndpointId, RequestId, RequestIdError, GENERATED_ID_LEN, REQUEST_ID_MAX_LEN, REQUEST_ID_MIN_LEN,
};
pub use kit::{os_entropy, poll_slot};
pub use limit::{LimitScope, Limiter, OnLimit, RateLimit};
pub use limits::{
    append_request_header, check_request, check_response_head, frames_message, is_framing_header,
    LimitError, FRAMING_HEADERS, MAX_ENDPOINT_HEADERS, MAX_METHOD_LEN, MAX_REQUEST_HEADERS,
    MAX_REQUEST_HEADER_BYTES, MAX_RESPONSE_HEADERS, MAX_RESPONSE_HEADER_BYTES,
};
pub use permission::{is_safe_method, Permission, PermissionOverride, PermissionSource};
#[cfg(feature = "serde")]
pub use policy::serde_duration;
pub use policy::{
    join_sinks, Breaker, BreakerRule, Budget, ClassifyFn, ConfigError, EligibleFn, Endpoint,
    EventSink, Hedge, PermissionFn, Policy, PolicyBuilder, ProbeRequest, RequestInfo, ResponseView,
    Settings, Unavailable, UrlMode, Verdict, MAX_ATTEMPTS, MAX_ATTEMPTS_PER_ENDPOINT,
    MAX_CLASSIFY_BODY, MAX_DURATION, MAX_ENDPOINTS, MAX_REDIRECTS, MAX_WEIGHT,
};
pub use probe::{Probe, ProbeRefused, ProbeResult};
pub use proxy::{Proxy, ProxyEnv, Route};
pub use redact::{
    chain_text, redact_url, scrub_urls, write_causes, HeaderNames, Origin, Scrubbed, Target,
};
pub use redirect::{same_origin, CrossOrigin, Hop, Redirect, Redirects};
pub use report::{
    AttemptFailure, AttemptRecord, AttemptResult, CallRejection, Error, ErrorKind, FailureClass,
    NoAttempt, Outcome, Report, StopReason, TimeoutPhase,
};
pub use retry_after::{parse_retry_after, retry_after_from_headers, MAX_RETRY_AFTER_VALUE};
pub use status::StatusSet;
pub use wire::{H2End, H2StreamError, HttpVersion, Tls, REFUSED_STREAM};
