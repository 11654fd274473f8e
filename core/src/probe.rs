//! Probes the caller drives (SPEC 2.5): no background timers, ever. The caller's scheduler
//! asks which endpoints are due ([`Engine::due_probes`]), and for each one
//! [`Engine::probe`] hands out the health request to send (the policy's
//! [`ProbeRequest`](crate::ProbeRequest) on the endpoint, with the endpoint's headers)
//! under the endpoint's breaker. The adapter sends it as it sends an attempt (with a
//! credential slot's token, refreshed and sent once more after a refusal) and hands the
//! outcome to [`Probe::answered`] (a response: its `Retry-After` on a 429 or 503 holds the
//! endpoint as an attempt's does) or [`Probe::finish`]: a status in the probe's `expect` set (2xx by default) is a
//! success for the breaker, anything else a failure. That is stricter than a call's
//! attempt, where only 502, 503 and 504 count against the endpoint: a probe asks whether
//! the health request is answered as expected.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use baton_core::{Breaker, BreakerRule, BreakerState, Endpoint, Engine, Policy};
//!
//! let policy = Policy::builder()
//!     .endpoint(Endpoint::new("a", "https://a.example/rpc"))
//!     .configure(|s| {
//!         s.breaker.rule = BreakerRule::Consecutive { failures: 1 };
//!         s.breaker.open = Duration::from_secs(10);
//!         s.probe.path = Some("/health".into());
//!     })
//!     .build()
//!     .unwrap();
//! let engine = Engine::new(policy);
//! let t0 = Instant::now();
//! engine.circuit("a").unwrap().allow(t0).unwrap().failure(t0);
//! assert!(engine.due_probes(t0).is_empty()); // open: not yet
//!
//! let t1 = t0 + Duration::from_secs(10);
//! assert_eq!(engine.due_probes(t1), ["a"]);
//! let probe = engine.probe("a", t1).unwrap();
//! assert_eq!(probe.uri, "https://a.example/health");
//! // ... the adapter sends probe.method to probe.uri with probe.headers ...
//! let result = probe.finish(Ok(http::StatusCode::OK), t1);
//! assert!(result.healthy);
//! assert_eq!(result.state, BreakerState::Closed);
//! ```

use std::time::{Duration, Instant};

use http::{HeaderMap, Method, StatusCode, Uri};

use crate::breaker::{CircuitOpen, Permit};
use crate::engine::Engine;
use crate::BreakerState;

/// A health request to send, admitted by the endpoint's breaker (a half-open endpoint's
/// probe slot is held until [`finish`](Probe::finish), or freed if the probe is dropped).
///
/// ```
/// use std::time::{Duration, Instant};
/// use baton_core::{Endpoint, Engine, Policy};
///
/// let endpoint = Endpoint::new("a", "https://a.example/rpc").header("authorization", "Bearer t");
/// let engine = Engine::new(Policy::builder().endpoint(endpoint).build().unwrap());
/// let now = Instant::now();
/// let probe = engine.probe("a", now).unwrap(); // a closed endpoint may be probed too
/// assert_eq!((probe.endpoint_id(), &probe.method), ("a", &http::Method::GET));
/// assert_eq!(probe.uri, "https://a.example/rpc");
/// assert_eq!(probe.headers["authorization"], "Bearer t");
/// assert_eq!(probe.timeout, Duration::from_secs(30));
/// // ... the adapter sends it; the connection was refused:
/// let result = probe.finish(Err("connection refused".into()), now);
/// assert!(!result.healthy);
/// assert_eq!(result.error.as_deref(), Some("connection refused"));
/// ```
#[must_use = "send the request and hand its outcome to finish()"]
pub struct Probe<'a> {
    engine: &'a Engine,
    endpoint: usize,
    permit: Permit<'a>,
    /// The method to send.
    pub method: Method,
    /// Where to send it.
    pub uri: Uri,
    /// The endpoint's own headers (a credential slot's token is the adapter's to add).
    pub headers: HeaderMap,
    /// The endpoint's connect timeout.
    pub connect_timeout: Duration,
    /// The endpoint's attempt timeout: the whole probe, to the response headers.
    pub timeout: Duration,
}

/// Shows the URL as its origin (a path or query may hold a key, SPEC 4) and the header
/// values as the endpoint's sensitive ones are shown.
///
/// ```
/// use std::time::Instant;
/// use baton_core::{Endpoint, Engine, Policy};
/// let policy = Policy::builder()
///     .endpoint(Endpoint::new("a", "https://rpc.example/v3/KEY?k=SECRET"))
///     .build()
///     .unwrap();
/// let engine = Engine::new(policy);
/// let shown = format!("{:?}", engine.probe("a", Instant::now()).unwrap());
/// assert!(shown.contains("https://rpc.example") && !shown.contains("KEY"), "{shown}");
/// ```
impl std::fmt::Debug for Probe<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Probe")
            .field("endpoint", &self.endpoint_id())
            .field("method", &self.method)
            .field("uri", &format_args!("{}", crate::redact::Origin(&self.uri)))
            .field("headers", &self.headers)
            .field("connect_timeout", &self.connect_timeout)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl Probe<'_> {
    /// The probed endpoint's id.
    pub fn endpoint_id(&self) -> &str {
        self.engine.policy().endpoints()[self.endpoint].id()
    }

    /// Records an answered probe: [`finish`](Self::finish) with its status, after reading
    /// its headers for a wait. A `Retry-After` on a 429 or 503 makes the endpoint
    /// unavailable until then (capped at `max_retry_after`), separately from its breaker,
    /// as an attempt's does (SPEC 2.5). `wall` is the wall clock, for a date.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use baton_core::{Endpoint, Engine, Policy};
    /// let engine = Engine::new(Policy::builder().endpoint(Endpoint::new("a", "https://a.example/")).build().unwrap());
    /// let now = Instant::now();
    /// let probe = engine.probe("a", now).unwrap();
    /// let mut headers = http::HeaderMap::new();
    /// headers.insert("retry-after", "20".parse().unwrap());
    /// let result = probe.answered(http::StatusCode::SERVICE_UNAVAILABLE, &headers, None, now);
    /// assert!(!result.healthy);
    /// assert!(!engine.health_of("a", now).unwrap().available);
    /// assert!(engine.health_of("a", now + Duration::from_secs(20)).unwrap().available);
    /// ```
    pub fn answered(
        self,
        status: StatusCode,
        headers: &HeaderMap,
        wall: Option<std::time::SystemTime>,
        now: Instant,
    ) -> ProbeResult {
        let busy =
            status == StatusCode::TOO_MANY_REQUESTS || status == StatusCode::SERVICE_UNAVAILABLE;
        let asked = busy
            .then(|| crate::retry_after::retry_after_from_headers(headers, wall))
            .flatten();
        if let Some(asked) = asked {
            // Before the breaker hears of it: its transition would make the permit stale.
            let capped = asked.min(self.engine.policy().settings().max_retry_after);
            self.permit.cool_down(crate::time::add(now, capped));
        }
        self.finish(Ok(status), now)
    }

    /// Records the probe's outcome: the response status, or why there was none. A status
    /// in the probe's `expect` set is a success for the breaker, anything else a failure.
    pub fn finish(self, outcome: Result<StatusCode, String>, now: Instant) -> ProbeResult {
        let expect = &self.engine.policy().settings().probe.expect;
        let healthy = matches!(outcome, Ok(s) if expect.contains(s));
        let endpoint = self.endpoint_id().to_owned();
        if healthy {
            self.permit.success(now);
        } else {
            self.permit.failure(now);
        }
        let state = self
            .engine
            .health(self.endpoint, now)
            .map_or(BreakerState::Closed, |h| h.state);
        let (status, error) = match outcome {
            Ok(s) => (Some(s), None),
            Err(e) => (None, Some(e)),
        };
        ProbeResult {
            endpoint,
            status,
            error,
            healthy,
            state,
        }
    }
}

/// What one probe found.
///
/// ```
/// use baton_core::{BreakerState, ProbeResult};
/// let r = ProbeResult {
///     endpoint: "a".into(),
///     status: Some(http::StatusCode::SERVICE_UNAVAILABLE),
///     error: None,
///     healthy: false,
///     state: BreakerState::Closed,
/// };
/// assert!(!r.healthy);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeResult {
    /// The endpoint's id.
    pub endpoint: String,
    /// The status it answered, if it answered.
    pub status: Option<StatusCode>,
    /// Why there was no answer (connect failure, timeout, ...).
    pub error: Option<String>,
    /// Whether the answer was one of the healthy statuses.
    pub healthy: bool,
    /// The endpoint's breaker state after the probe.
    pub state: BreakerState,
}

/// Why no probe was handed out.
///
/// ```
/// use std::time::Instant;
/// use baton_core::{BreakerRule, Endpoint, Engine, Policy, ProbeRefused};
///
/// let policy = Policy::builder()
///     .endpoint(Endpoint::new("a", "https://a.example/"))
///     .configure(|s| s.breaker.rule = BreakerRule::Consecutive { failures: 1 })
///     .build()
///     .unwrap();
/// let engine = Engine::new(policy);
/// let now = Instant::now();
/// let e = engine.probe("z", now).unwrap_err();
/// assert_eq!(e, ProbeRefused::UnknownEndpoint("z".into()));
/// assert_eq!(e.to_string(), r#"unknown endpoint "z""#);
///
/// engine.circuit("a").unwrap().allow(now).unwrap().failure(now); // the breaker opens
/// let e = engine.probe("a", now).unwrap_err();
/// assert!(matches!(&e, ProbeRefused::Open(open) if open.key == "a"));
/// assert_eq!(e.to_string(), r#"the circuit of "a" is open"#);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProbeRefused {
    /// No endpoint has this id.
    #[error("unknown endpoint {0:?}")]
    UnknownEndpoint(String),
    /// The breaker refused: open, or its probe slots are taken.
    #[error(transparent)]
    Open(#[from] CircuitOpen),
}

impl Engine {
    /// The endpoints due a probe at `now`, in priority order: their breaker is open and
    /// its open time has passed, or half-open with a probe slot free, and no `Retry-After`
    /// cooldown is running. Closed endpoints are never due (their calls are the probes).
    pub fn due_probes(&self, now: Instant) -> Vec<String> {
        let policy = self.policy();
        let endpoints = policy.endpoints();
        let by_priority: Vec<usize> = match &policy.tiers {
            crate::policy::Tiers::ListOrder => (0..endpoints.len()).collect(),
            crate::policy::Tiers::Ranked(ranked) => {
                ranked.iter().map(|&(i, _)| usize::from(i)).collect()
            }
        };
        by_priority
            .into_iter()
            .filter(|&i| {
                self.health(i, now).is_some_and(|h| {
                    h.state == BreakerState::HalfOpen && h.available && h.not_before.is_none()
                })
            })
            .map(|i| endpoints[i].id().to_owned())
            .collect()
    }

    /// The health request for endpoint `id`, admitted by its breaker at `now` (a closed
    /// endpoint is probed too: a failure there counts toward opening it).
    pub fn probe(&self, id: &str, now: Instant) -> Result<Probe<'_>, ProbeRefused> {
        let endpoint = self
            .policy()
            .endpoint_index(id)
            .ok_or_else(|| ProbeRefused::UnknownEndpoint(id.to_owned()))?;
        let circuit = self
            .circuit(id)
            .ok_or_else(|| ProbeRefused::UnknownEndpoint(id.to_owned()))?;
        let permit = circuit.allow(now)?;
        let policy = self.policy();
        let e = &policy.endpoints()[endpoint];
        let request = &policy.settings().probe;
        let uri = match &request.path {
            None => e.uri().clone(),
            Some(path) => with_path(e.uri(), path),
        };
        Ok(Probe {
            engine: self,
            endpoint,
            permit,
            method: Method::from_bytes(request.method.as_bytes()).unwrap_or(Method::GET),
            uri,
            headers: e.headers().clone(),
            connect_timeout: policy.connect_timeout_for(endpoint),
            timeout: policy.attempt_timeout_for(endpoint),
        })
    }
}

/// `base` with its path and query replaced by `path` (validated when the policy was built).
fn with_path(base: &Uri, path: &str) -> Uri {
    let mut parts = base.clone().into_parts();
    parts.path_and_query = path.parse().ok();
    Uri::from_parts(parts).unwrap_or_else(|_| base.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BreakerRule, Endpoint, Policy};

    fn engine() -> Engine {
        let policy = Policy::builder()
            .endpoint(
                Endpoint::new("a", "https://a.example/v1?k=1").header("authorization", "Bearer t"),
            )
            .endpoint(Endpoint::new("b", "http://b.example:8080/"))
            .configure(|s| {
                s.breaker.rule = BreakerRule::Consecutive { failures: 1 };
                s.breaker.open = Duration::from_secs(1);
            })
            .build()
            .unwrap();
        Engine::new(policy)
    }

    #[test]
    fn a_probe_is_the_endpoint_url_with_its_credentials_by_default() {
        let e = engine();
        let p = e.probe("a", Instant::now()).unwrap();
        assert_eq!(p.method, Method::GET);
        assert_eq!(p.uri, "https://a.example/v1?k=1");
        assert!(p.headers.contains_key("authorization"));
        assert_eq!(p.endpoint_id(), "a");
    }

    #[test]
    fn only_half_open_endpoints_are_due_and_one_probe_at_a_time() {
        let e = engine();
        let t0 = Instant::now();
        let r = e.probe("b", t0).unwrap().finish(Err("refused".into()), t0);
        assert!(!r.healthy);
        assert_eq!(r.state, BreakerState::Open);
        assert!(e.due_probes(t0).is_empty());
        assert!(matches!(e.probe("b", t0), Err(ProbeRefused::Open(_))));
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(e.due_probes(t1), ["b"]);
        let p = e.probe("b", t1).unwrap();
        assert!(e.due_probes(t1).is_empty(), "the slot is taken");
        let r = p.finish(Ok(StatusCode::NO_CONTENT), t1);
        assert!(r.healthy);
        assert_eq!(r.state, BreakerState::Closed);
        assert!(matches!(
            e.probe("c", t1),
            Err(ProbeRefused::UnknownEndpoint(_))
        ));
    }

    #[test]
    fn due_endpoints_come_in_priority_order() {
        let policy = Policy::builder()
            .endpoint(Endpoint::new("backup", "https://c.example/").tier(1))
            .endpoint(Endpoint::new("primary", "https://p.example/").tier(0))
            .configure(|s| {
                s.breaker.rule = BreakerRule::Consecutive { failures: 1 };
                s.breaker.open = Duration::from_secs(1);
            })
            .build()
            .unwrap();
        let e = Engine::new(policy);
        let t0 = Instant::now();
        for id in ["backup", "primary"] {
            e.probe(id, t0).unwrap().finish(Err("refused".into()), t0);
        }
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(e.due_probes(t1), ["primary", "backup"]);
    }

    #[test]
    fn an_unexpected_status_is_a_failure_and_bad_probe_settings_are_named() {
        let e = engine();
        let t0 = Instant::now();
        let r = e
            .probe("a", t0)
            .unwrap()
            .finish(Ok(StatusCode::MOVED_PERMANENTLY), t0);
        assert!(!r.healthy);
        assert_eq!(r.status, Some(StatusCode::MOVED_PERMANENTLY));
        assert_eq!(r.state, BreakerState::Open);
        let bad = Policy::builder()
            .endpoint(Endpoint::new("a", "https://a.example/"))
            .configure(|s| s.probe.path = Some("health".into()))
            .build()
            .unwrap_err();
        assert!(bad.to_string().contains("probe.path"), "{bad}");
    }
}
