//! # baton-blocking: baton's failover on the calling thread, with ureq
//!
//! A [`Client`] sends each call to a small ordered set of providers (endpoints) and lets
//! the `baton-core` engine decide everything: which endpoint, whether another attempt is
//! allowed and safe, how long to wait, when to stop. This crate only sends with ureq,
//! sleeps with `std::thread::sleep`, classifies failures and builds requests. It never
//! sends a request twice where that could do the work twice.
//!
//! ```no_run
//! use std::time::Duration;
//! use baton_blocking::{Client, Endpoint, Policy};
//!
//! let client = Client::new(
//!     Policy::builder()
//!         .endpoint(Endpoint::new("primary", "https://rpc-a.example/v1/KEY"))
//!         .endpoint(Endpoint::new("backup", "https://rpc-b.example/"))
//!         .attempt_timeout(Duration::from_secs(2)),
//! )?;
//!
//! // A read: retried and failed over freely.
//! let mut head = client.get("/").call()?;
//! let text = head.body_mut().read_to_string()?;
//!
//! // A payment: failed over only while nothing may have executed; the key is sent
//! // unchanged on every attempt.
//! let charge = client
//!     .post("/")
//!     .idempotency_key("order-1234")
//!     .send(r#"{"amount":100}"#);
//! match charge {
//!     Ok(resp) => println!("{}", resp.status()),
//!     Err(e) if !e.report().may_have_executed => println!("nothing happened: {e}"),
//!     Err(e) => println!("unknown, reconcile {}: {e}", e.report().request_id),
//! }
//! # let _ = text;
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! ```
//!
//! ## What a call returns
//! An `http::Response<ureq::Body>`, read as usual with ureq. 4xx and 5xx statuses are
//! responses, never `Err` (the engine decides what they mean). The call's [`Report`]
//! (attempts, request id, stop reason, `may_have_executed`) is in the response's
//! extensions ([`ResponseExt::report`]) and in every [`Error`]. The response head is the
//! commit point: a failure while reading the body afterwards is an `io::Error` whose inner
//! error is a [`BodyError`] naming the endpoint, never a short body passed off as whole.
//! The rebuilt body keeps its MIME type, not its charset (its text is read through ureq's
//! reader once, so that ureq's `charset` feature, if another crate switched it on, converts
//! it once, not twice; with that feature on, a text body reads as UTF-8 whatever charset
//! its `Content-Type` header names, and its `Content-Length` header counts the bytes
//! before the conversion), and `Body::content_length()` is `None`: read the
//! `Content-Length` header instead. Without
//! this crate's `gzip` feature no encoding is asked for, even when ureq's own `gzip` is on
//! (one of its default features, so a dependency on plain `ureq` elsewhere switches it on);
//! a gzip body a server sends unasked is then decoded by ureq, which cannot be told not to.
//!
//! ## Failure classes, learnt by phase
//! ureq 3 reports a DNS failure as an uncategorised I/O error, so the class is never read
//! from an error message: the client wraps ureq's resolver, its connector chain and every
//! transport, and records how far each attempt got (resolving, connecting, ready). A
//! failure before the connection was ready is *undelivered* (DNS, refused, unreachable,
//! connect timeout, TLS handshake); anything later (a timeout waiting, reset, closed,
//! protocol error) is *ambiguous*; an unobserved phase is ambiguous. std opens no TCP Fast
//! Open connection and ureq's rustls configuration sends no TLS early data, so nothing
//! leaves before the handshake completes. A certificate rejected in the handshake (unknown
//! issuer, name mismatch, expired), or a client identity the server refused with a
//! handshake alert on a connection the attempt opened itself, is *untrusted*: undelivered,
//! no further attempt at that endpoint in the call, and the error's message names the
//! reason (SPEC 9).
//!
//! ## HTTP version and TLS
//! ureq speaks HTTP/1.1 only: an endpoint whose `http_version` is `http2` is refused at
//! build ([`BuildError::Http2Unsupported`]); `auto` is HTTP/1.1 here (ureq offers no ALPN).
//! TLS follows baton's one trust rule (`baton-tls`): the platform's trust store
//! (`SSL_CERT_FILE`, `SSL_CERT_DIR`) plus the policy's or endpoint's `ca_file`, the same
//! certificates as every other adapter, and the endpoint's client identity
//! (`client_cert`, `client_key`). One agent serves each distinct set of TLS files; an
//! agent with an identity has a twin without it for requests that left the endpoint's
//! origin (redirects).
//!
//! ## Timeouts
//! Each attempt runs with ureq's per-phase budgets, never a global one (a global timeout
//! hides the phase): resolving plus connecting share the attempt's `connect_timeout`;
//! sending plus waiting for the response head share its attempt timeout, counted from the
//! moment the connection is ready; both are clipped to the call's deadline. An agent's own
//! `timeout_global` and `timeout_per_call` are replaced during the attempt by these;
//! `timeout_recv_body` and the per-read/per-write limits are kept and govern reading the
//! body. Backoff and `Retry-After` waits are `std::thread::sleep` until the instant the
//! engine names, which is never past the deadline.
//!
//! ## The agent
//! [`ClientBuilder::agent`] takes an existing `ureq::Agent`'s configuration (TLS,
//! user agent, middleware, ...; its redirect and proxy settings are overridden per
//! request: redirects are the engine's, and proxies come from the environment as core's
//! [`baton_core::ProxyEnv`] routes them: `https` through ureq's `CONNECT` proxy, `http`
//! forwarded in absolute form, which ureq cannot write, so the connection goes to the
//! proxy and its transport rewrites each request line; SPEC 3) and builds the client's own agent from it with
//! ureq's default connector and resolver wrapped as above; ureq does not expose an agent's
//! connector or connection pool, so a bespoke connector must be handed over with
//! [`ClientBuilder::parts`]. Each agent the client builds (one per distinct set of TLS
//! files; [`Client::agent`] is the first endpoint's) keeps its own keep-alive pool. A
//! configuration given whole keeps its own TLS, so a policy with TLS files is then refused
//! ([`BuildError::TlsWithGivenConfig`]); [`ClientBuilder::configure_ureq`] adjusts the
//! agents baton builds and keeps the trust rule.
//!
//! ## Choices where the spec is silent
//! - **Hedging** needs several attempts in flight: this adapter runs one at a time, so a
//!   policy with `hedge` set is refused at build ([`BuildError::HedgingUnsupported`]).
//! - **Seed**: without a seed in the policy, the engine's random source (jitter, request
//!   ids) is seeded from OS randomness ([`baton_core::os_entropy`], the same on every
//!   adapter), so jitter de-correlates clients; a seed in the policy is kept
//!   (deterministic runs).
//! - **Bodies**: [`RequestBuilder::send`] and `send_json` hold bytes and replay the same
//!   slice; [`RequestBuilder::send_reader`] is one-shot unless
//!   [`RequestBuilder::buffer_body`] opts in with a size limit;
//!   [`RequestBuilder::send_with`] re-produces the body per attempt, and a failure to do so
//!   is a replay failure.
//! - **Invalid requests** (a bad header, URL or body) fail the call before any send as an
//!   invalid call that carries a report, like every other call error.
//! - **Events** go to the policy's sink, then to [`ClientBuilder::on_event`], then to a
//!   per-call sink, synchronously on the calling thread; with the `tracing` feature,
//!   `ClientBuilder::tracing` (on by default) also forwards them to `tracing` at debug
//!   level.
//!
//! ## Cost on the healthy path
//! `benches/blocking_throughput.rs` compares calls per second through a `Client` with the
//! same `ureq::Agent` used directly (one keep-alive loopback provider, one thread, default
//! policy: consecutive breaker rule, budget on, no events). Per call, baton adds the
//! engine's call (about 4k instructions: `Call::new`, two polls, one outcome), building
//! the attempt's headers, the per-request ureq configuration and the body wrapper, about
//! 10k instructions in all; loopback round trips of ~60 µs make that 5-15 %. Two
//! measures keep ureq's own work flat: IP-literal hosts skip the resolver, and attempt
//! budgets are whole milliseconds so ureq does not reset socket timeouts on every call.
//!
//! ## Dependencies
//! - `baton-core`: the engine (every decision).
//! - `ureq` 3: the blocking HTTP/1.1 client, with its pluggable resolver and connector
//!   (its `unversioned` API, which ureq exempts from semver: the requirement is `3.5`
//!   so that an application's own ureq 3 resolves to the same crate; CI builds against
//!   the version in `Cargo.lock`; a later ureq 3 release may change that API and break
//!   this crate) for exact phases.
//! - `http`: the request and response types ureq and baton-core share.
//! - `baton-tls`: the one TLS trust rule of every adapter (root certificates, client
//!   identities, the reason a certificate was rejected).
//! - optional `serde` + `serde_json` (`json`, default): [`RequestBuilder::send_json`].
//! - optional `tracing` (`tracing`): forwarding events.
//!
//! Features `rustls` (default, https) and `gzip` (off by default) switch on ureq's
//! features of the same name. Content encoding: like every baton adapter, by default
//! the client neither asks for an encoding nor decodes one: the body's bytes are passed
//! through as sent. `gzip` turns on ureq's asking and decoding for this adapter only.

#![forbid(unsafe_code)]
// docs.rs (and CI, with nightly) builds with `--cfg docsrs`: every feature-gated item then
// says which feature it needs.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(missing_docs)]

mod classify;
mod driver;
mod error;
mod request;
mod response;
mod sse;
mod tls;

use std::sync::Arc;
use std::time::Instant;

/// The engine crate, re-exported under its own name (as every adapter does).
pub use baton_core;
pub use baton_core::{
    BreakerState, CallOptions, Endpoint, EndpointHealth, ErrorKind, Event, EventKind, Hedge,
    Outcome, Permission, Policy, PolicyBuilder, ProbeRefused, ProbeResult, Report, RequestId,
    Settings, StopReason, UrlMode,
};
pub use error::{BuildError, Error};
pub use request::RequestBuilder;
pub use response::{BodyError, ResponseExt};
pub use sse::{EventStream, EventsError};

use baton_core::{Engine, EventSink};
use ureq::config::{Config, ConfigBuilder};
use ureq::http::Method;
use ureq::typestate::AgentScope;
use ureq::unversioned::resolver::{DefaultResolver, Resolver};
use ureq::unversioned::transport::{Connector, DefaultConnector};
use ureq::Agent;

use classify::{ObservedConnector, ObservedResolver};

pub(crate) struct Inner {
    pub(crate) engine: Arc<Engine>,
    /// One agent per distinct TLS configuration among the endpoints (trust and client
    /// identity are per agent in ureq, per endpoint in baton).
    pub(crate) agents: Vec<Agent>,
    /// How each endpoint's requests pick their agent.
    pub(crate) agent_of: Vec<AgentOf>,
    /// The environment's proxies, as core routes them.
    pub(crate) proxies: baton_core::ProxyEnv,
    /// The token provider of endpoints with a credential slot (SPEC 9).
    pub(crate) tokens: Option<TokenProvider>,
}

/// The client's token provider, called with the endpoint id on the calling thread by the
/// one call that refreshes that endpoint's slot.
pub(crate) type TokenProvider =
    Arc<dyn Fn(&str) -> Result<baton_core::credential::Token, String> + Send + Sync>;

/// A failover HTTP client: one engine (endpoint health, retry budget) and one ureq agent
/// (keep-alive pool) shared by all its calls. Cheap to clone; `Send + Sync`, so one client
/// can serve many threads.
///
/// ```no_run
/// use baton_blocking::{Client, Endpoint, Policy};
/// let client = Client::new(
///     Policy::builder()
///         .endpoint(Endpoint::new("a", "http://127.0.0.1:8080/"))
///         .endpoint(Endpoint::new("b", "http://127.0.0.1:8081/")),
/// )?;
/// let threads: Vec<_> = (0..4)
///     .map(|_| {
///         let client = client.clone();
///         std::thread::spawn(move || client.get("/").call().map(|r| r.status()))
///     })
///     .collect();
/// for t in threads {
///     println!("{:?}", t.join().unwrap());
/// }
/// # Ok::<_, Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("policy", self.inner.engine.policy())
            .finish()
    }
}

impl Client {
    /// A call with `method` to `path` (or a URL; see [`RequestBuilder`]).
    pub fn request(&self, method: Method, path: &str) -> RequestBuilder<'_> {
        RequestBuilder::new(self, method, path)
    }

    baton_core::client_methods!(RequestBuilder<'_>, inner.engine, Instant::now);

    /// The ureq agent of the first endpoint (phase-observing connector and resolver, one
    /// pool; endpoints with other TLS files have agents of their own). Using it directly
    /// bypasses baton.
    pub fn agent(&self) -> &Agent {
        &self.inner.agents[0]
    }

    /// Sends the policy's health request ([`ProbeRequest`](baton_core::ProbeRequest)) to
    /// the endpoint with `id`, under its breaker: an answer in the probe's `expect` set is
    /// a success, anything else a failure. Refused when the breaker is open and not yet
    /// due, or its probe slot is taken. It carries the endpoint's headers and, with a
    /// credential slot, its token; a refusal of the token invalidates it and the probe is
    /// sent once more with a refreshed one. No redirect is followed, no other retry made; the
    /// request is routed as a call's attempt is (the environment's proxies, SPEC 3).
    pub fn probe(&self, id: &str) -> Result<ProbeResult, ProbeRefused> {
        let probe = self.inner.engine.probe(id, Instant::now())?;
        let outcome = self.send_probe(&probe);
        let (now, wall) = (Instant::now(), Some(std::time::SystemTime::now()));
        Ok(match outcome {
            Ok((status, headers)) => probe.answered(status, &headers, wall, now),
            Err(e) => probe.finish(Err(e), now),
        })
    }

    /// Probes every endpoint that is due a probe now, one after another: call it from
    /// your own scheduler (baton runs no timers).
    pub fn probe_due(&self) -> Vec<ProbeResult> {
        let due = self.inner.engine.due_probes(Instant::now());
        due.iter().filter_map(|id| self.probe(id).ok()).collect()
    }

    /// Sends a probe as an attempt is sent: with the endpoint's token when it has a
    /// credential slot (a refusal invalidates it, and the probe, which has no body, is
    /// sent once more with a refreshed one).
    fn send_probe(&self, probe: &baton_core::Probe<'_>) -> Result<ProbeAnswer, String> {
        let index = self
            .policy()
            .endpoint_index(probe.endpoint_id())
            .unwrap_or(0);
        let Some((slot, first)) = driver::lease_for(&self.inner, index) else {
            return self.probe_once(probe, index, None);
        };
        let first = first.map_err(|e| baton_core::scrub_urls(&e.to_string()))?;
        let answer = self.probe_once(probe, index, Some((slot, &first)))?;
        if !slot.answered(&first, answer.0) {
            return Ok(answer);
        }
        let Some((_, Ok(second))) = driver::lease_for(&self.inner, index) else {
            // No new token: the refusal is the answer.
            return Ok(answer);
        };
        let answer = self.probe_once(probe, index, Some((slot, &second)))?;
        // A refused fresh token is invalidated too: the next call or probe refreshes.
        slot.answered(&second, answer.0);
        Ok(answer)
    }

    fn probe_once(
        &self,
        probe: &baton_core::Probe<'_>,
        index: usize,
        token: Option<(
            &baton_core::credential::Credential,
            &baton_core::credential::Lease,
        )>,
    ) -> Result<ProbeAnswer, String> {
        let mut request = ureq::http::Request::new(());
        *request.method_mut() = probe.method.clone();
        *request.uri_mut() = probe.uri.clone();
        *request.headers_mut() = probe.headers.clone();
        if let Some((slot, lease)) = token {
            let settings = slot.settings();
            if let Some(v) = lease.header_value(settings) {
                request.headers_mut().insert(settings.header.clone(), v);
            }
        }
        let (tunnel, forward) = driver::route(&self.inner, &mut request)
            .map_err(|e| baton_core::scrub_urls(&e.to_string()))?;
        let agent = self.inner.agent(index, &probe.uri);
        let request = agent
            .configure_request(request)
            .proxy(tunnel)
            .http_status_as_error(false)
            .max_redirects(0)
            .allow_non_standard_methods(true)
            .max_response_header_size(RESPONSE_HEAD_BYTES)
            .timeout_global(Some(probe.connect_timeout + probe.timeout))
            .timeout_connect(Some(probe.connect_timeout))
            .timeout_recv_response(Some(probe.timeout))
            .build();
        classify::begin(Instant::now(), probe.connect_timeout, probe.timeout, None);
        classify::forward_through(forward);
        let result = agent.run(request);
        classify::end();
        match result {
            Ok(response) => Ok((response.status(), response.headers().clone())),
            Err(e) => Err(baton_core::scrub_urls(&e.to_string())),
        }
    }
}

/// A probe's status and headers.
type ProbeAnswer = (ureq::http::StatusCode, ureq::http::HeaderMap);

type AgentFactory = Box<dyn Fn(Config) -> Agent>;
type Configure = Box<dyn Fn(ConfigBuilder<AgentScope>) -> ConfigBuilder<AgentScope>>;

/// The agent of one endpoint, and, when that agent presents a client identity, the agent
/// with the same trust and no identity for requests that left the endpoint's origin (a
/// redirect): an identity is presented only on its endpoint's own connections (SPEC 9).
#[derive(Debug, Clone)]
pub(crate) struct AgentOf {
    own: usize,
    elsewhere: Option<(usize, ureq::http::Uri)>,
}

impl Inner {
    /// The agent that sends `uri` for endpoint `index`.
    pub(crate) fn agent(&self, index: usize, uri: &ureq::http::Uri) -> &Agent {
        let Some(of) = self.agent_of.get(index) else {
            return &self.agents[0];
        };
        match &of.elsewhere {
            Some((bare, origin)) if !baton_core::same_origin(uri, origin) => &self.agents[*bare],
            _ => &self.agents[of.own],
        }
    }
}

/// Builds a [`Client`]: endpoints, policy settings, the ureq configuration, events.
///
/// ```
/// use std::time::Duration;
/// use baton_blocking::{Client, Endpoint, Policy};
/// let agent: ureq::Agent = ureq::Agent::config_builder()
///     .user_agent("my-app/1.0")
///     .build()
///     .into();
/// let policy = Policy::builder()
///     .attempt_timeout(Duration::from_secs(3))
///     .endpoint(Endpoint::new("a", "http://127.0.0.1:8080/"))
///     .endpoint(Endpoint::new("b", "http://127.0.0.1:8081/"));
/// let client = Client::builder(policy)
///     .agent(&agent)
///     .on_event(|e| eprintln!("{}: {:?}", e.request_id, e.kind))
///     .build()
///     .unwrap();
/// assert_eq!(client.policy().endpoints().len(), 2);
/// ```
#[must_use]
pub struct ClientBuilder {
    policy: PolicyBuilder,
    /// A policy built elsewhere ([`ClientBuilder::from_policy`]), used instead.
    built: Option<Policy>,
    config: Option<Config>,
    configure: Option<Configure>,
    parts: Option<AgentFactory>,
    sink: Option<EventSink>,
    #[cfg(feature = "tracing")]
    tracing: bool,
    tokens: Option<TokenProvider>,
}

impl ClientBuilder {
    /// A builder starting from this policy builder.
    pub fn new(policy: PolicyBuilder) -> Self {
        ClientBuilder {
            policy,
            built: None,
            config: None,
            configure: None,
            parts: None,
            sink: None,
            #[cfg(feature = "tracing")]
            tracing: true,
            tokens: None,
        }
    }

    /// A builder for an already built policy: without a seed in it, OS randomness is used
    /// (a seed set is kept); an event callback set here gets every event after the
    /// policy's own sink.
    pub fn from_policy(policy: Policy) -> Self {
        ClientBuilder {
            built: Some(policy),
            ..ClientBuilder::new(Policy::builder())
        }
    }
}

impl std::fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("config", &self.config)
            .field("custom_parts", &self.parts.is_some())
            .field("on_event", &self.sink.is_some())
            .finish()
    }
}

impl ClientBuilder {
    /// Uses `agent`'s configuration (proxy, TLS, user agent, middleware, ...). Its redirect
    /// setting is not used: every request is sent with ureq's redirect following off, and
    /// redirects are followed by the engine's rules (SPEC 3).
    /// The client builds its own agent from it, with phase-observing wrappers around
    /// ureq's default connector and resolver (see the crate docs). Its TLS is its own: a
    /// policy with TLS files is refused ([`BuildError::TlsWithGivenConfig`]); use
    /// [`configure_ureq`](Self::configure_ureq) to keep baton's trust rule.
    pub fn agent(mut self, agent: &Agent) -> Self {
        self.config = Some(agent.config().clone());
        self
    }

    /// Uses this ureq configuration (its TLS included; see [`agent`](Self::agent)).
    pub fn config(mut self, config: Config) -> Self {
        self.config = Some(config);
        self
    }

    /// Adjusts the ureq configuration of each agent baton builds (user agent, timeouts,
    /// ...); baton then sets its TLS: the platform's trust store plus `ca_file`, and the
    /// endpoint's client identity (SPEC 9), the same trust as every other adapter.
    ///
    /// ```
    /// use baton_blocking::{Client, Endpoint, Policy};
    /// let client = Client::builder(Policy::builder().endpoint(Endpoint::new("a", "https://a.example/")))
    ///     .configure_ureq(|b| b.user_agent("my-app/1.0"))
    ///     .build()
    ///     .unwrap();
    /// # drop(client);
    /// ```
    pub fn configure_ureq(
        mut self,
        f: impl Fn(ConfigBuilder<AgentScope>) -> ConfigBuilder<AgentScope> + 'static,
    ) -> Self {
        self.configure = Some(Box::new(f));
        self
    }

    /// Uses a bespoke ureq connector chain and resolver (wrapped to observe phases); each
    /// agent the client builds (one per distinct TLS configuration) gets a copy.
    pub fn parts<C, R>(mut self, connector: C, resolver: R) -> Self
    where
        C: Connector<()> + Clone,
        R: Resolver + Clone,
    {
        self.parts = Some(Box::new(move |config| {
            Agent::with_parts(
                config,
                ObservedConnector(connector.clone()),
                ObservedResolver(resolver.clone()),
            )
        }));
        self
    }

    baton_core::client_builder_setters!(sink);

    /// The token provider of the endpoints with a credential slot
    /// ([`Endpoint::credential`](baton_core::Endpoint::credential)), called with the
    /// endpoint id, on the calling thread, by the one call that refreshes that endpoint's
    /// token (SPEC 9): ahead of expiry, after a 401 of the current token, or when none is
    /// held. Concurrent calls wait for it (or use the still-valid token). Its error's text
    /// is kept (never a token); the attempt then fails undelivered and the call fails over
    /// where permitted.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use baton_blocking::baton_core::credential::{CredentialSettings, Token};
    /// use baton_blocking::{Client, Endpoint, Policy};
    /// let client = Client::builder(
    ///     Policy::builder().endpoint(Endpoint::new("eu", "https://eu.api.example/").credential(CredentialSettings::default())),
    /// )
    /// .token_provider(|endpoint: &str| {
    ///     Ok::<_, std::io::Error>(Token::new(format!("token-for-{endpoint}")).expires_in(Duration::from_secs(3600)))
    /// })
    /// .build()?;
    /// # drop(client);
    /// # Ok::<_, Box<dyn std::error::Error>>(())
    /// ```
    pub fn token_provider<E: std::fmt::Display>(
        mut self,
        provider: impl Fn(&str) -> Result<baton_core::credential::Token, E> + Send + Sync + 'static,
    ) -> Self {
        self.tokens = Some(Arc::new(move |endpoint: &str| {
            provider(endpoint).map_err(|e| e.to_string())
        }));
        self
    }

    /// Validates everything and builds the client.
    pub fn build(self) -> Result<Client, BuildError> {
        let hedge = match &self.built {
            Some(p) => p.settings().hedge.is_some(),
            None => self.policy.settings_ref().hedge.is_some(),
        };
        if hedge {
            return Err(BuildError::HedgingUnsupported);
        }
        #[cfg(feature = "tracing")]
        let sink = match (self.sink, self.tracing) {
            (Some(user), true) => Some(Arc::new(move |e: &Event<'_>| {
                trace_event(e);
                user(e);
            }) as EventSink),
            (None, true) => Some(Arc::new(trace_event) as EventSink),
            (user, false) => user,
        };
        #[cfg(not(feature = "tracing"))]
        let sink = self.sink;
        let policy = match self.built {
            Some(p) => {
                let joined = baton_core::join_sinks(p.event_sink().cloned(), sink);
                p.with_event_sink(joined)
            }
            None => match sink {
                Some(sink) => self.policy.add_event_sink(sink).build()?,
                None => self.policy.build()?,
            },
        };
        // Proxies from the environment, decided by core the same way on every adapter
        // (SPEC 3); ureq's own proxy setting is replaced per request.
        let proxies = baton_core::ProxyEnv::for_policy(&policy)?;
        policy.require_token_provider(self.tokens.is_some())?;
        let (configs, agent_of) = agent_configs(&policy, self.config, self.configure.as_deref())?;
        let agents = configs
            .into_iter()
            .map(|config| match &self.parts {
                Some(make) => make(config),
                None => Agent::with_parts(
                    config,
                    ObservedConnector(DefaultConnector::new()),
                    ObservedResolver(DefaultResolver::default()),
                ),
            })
            .collect();
        Ok(Client {
            inner: Arc::new(Inner {
                // OS randomness once per client; a seed set in the policy wins.
                engine: Arc::new(Engine::with_entropy(policy, baton_core::os_entropy())),
                agents,
                agent_of,
                proxies,
                tokens: self.tokens,
            }),
        })
    }
}
/// The ureq configuration of each agent (one per distinct set of TLS files among the
/// endpoints, and one without the identity beside each that presents one) and how each
/// endpoint picks its agent. Refuses an endpoint that requires HTTP/2.
fn agent_configs(
    policy: &Policy,
    given: Option<Config>,
    configure: Option<&dyn Fn(ConfigBuilder<AgentScope>) -> ConfigBuilder<AgentScope>>,
) -> Result<(Vec<Config>, Vec<AgentOf>), BuildError> {
    for (i, e) in policy.endpoints().iter().enumerate() {
        if policy.http_version_for(i).requires_http2() {
            return Err(BuildError::Http2Unsupported {
                endpoint: e.id().to_string(),
            });
        }
    }
    let tls = baton_tls::for_policy(policy).map_err(BuildError::Tls)?;
    if let Some(config) = given {
        if tls.iter().any(|t| t.files().is_set()) {
            return Err(BuildError::TlsWithGivenConfig);
        }
        let own = AgentOf {
            own: 0,
            elsewhere: None,
        };
        return Ok((vec![config], vec![own; tls.len()]));
    }
    let mut files: Vec<baton_core::Tls> = Vec::new();
    let mut configs = Vec::new();
    let mut place = |t: &baton_tls::TlsConfig, endpoint: &str| -> Result<usize, BuildError> {
        if let Some(k) = files.iter().position(|f| f == t.files()) {
            return Ok(k);
        }
        let mut b = with_request_settings(Config::builder(), policy.settings());
        if let Some(f) = configure {
            b = f(b);
        }
        configs.push(tls::with_tls(b, t, endpoint)?.build());
        files.push(t.files().clone());
        Ok(configs.len() - 1)
    };
    let mut agent_of = Vec::with_capacity(tls.len());
    for (t, e) in tls.iter().zip(policy.endpoints()) {
        let own = place(t, e.id())?;
        let elsewhere = match t.has_identity() {
            true => Some((place(&t.without_identity(), e.id())?, e.uri().clone())),
            false => None,
        };
        agent_of.push(AgentOf { own, elsewhere });
    }
    Ok((configs, agent_of))
}

/// The most bytes of a response head ureq reads: baton's table
/// ([`baton_core::MAX_RESPONSE_HEADER_BYTES`], names and values only) decides, so ureq's
/// own limit, which counts the whole head (status line, `": "`, line ends), is that table's
/// limit plus the framing of its most headers and a status line. At ureq's default (64 KiB
/// of the whole head), a head within the table failed here alone, as a protocol error.
pub(crate) const RESPONSE_HEAD_BYTES: usize =
    baton_core::MAX_RESPONSE_HEADER_BYTES + baton_core::MAX_RESPONSE_HEADERS * 4 + 8 * 1024;

/// baton's settings for every request, and the policy's timeouts, as an agent's own
/// (before the caller's `configure_ureq`): an attempt that asks nothing else then runs with
/// the agent's configuration as it is, where a request that changes any setting gets a
/// copy of the whole configuration. What each attempt asks is in the driver's
/// `AttemptConfig`; the request's own settings still decide whenever they differ.
fn with_request_settings(
    b: ConfigBuilder<AgentScope>,
    settings: &baton_core::Settings,
) -> ConfigBuilder<AgentScope> {
    let attempt = Some(settings.attempt_timeout);
    let connect = Some(settings.connect_timeout.min(settings.attempt_timeout));
    // Without this crate's `gzip` feature no encoding is asked for, also when another
    // crate of the application switched on ureq's own `gzip` (one of its defaults): bytes
    // pass through as sent, as on every runtime.
    #[cfg(not(feature = "gzip"))]
    let b = b.accept_encoding("");
    b.http_status_as_error(false)
        .max_redirects(0)
        // Any method the engine accepts is sent (ureq refuses extension methods by default).
        .allow_non_standard_methods(true)
        .max_response_header_size(RESPONSE_HEAD_BYTES)
        // The environment's proxies are core's to decide (SPEC 3), per request.
        .proxy(None)
        .timeout_global(None)
        .timeout_per_call(None)
        .timeout_resolve(connect)
        .timeout_connect(connect)
        .timeout_send_request(attempt)
        .timeout_send_body(attempt)
        .timeout_recv_response(attempt)
        .timeout_recv_body(settings.body_timeout)
}

#[cfg(feature = "tracing")]
fn trace_event(e: &Event<'_>) {
    tracing::debug!(
        target: "baton",
        request_id = e.request_id,
        idempotency_key = e.idempotency_key,
        event = ?e.kind,
        "baton event"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_is_send_sync_and_cheap_to_clone() {
        fn assert_send_sync<T: Send + Sync + Clone>() {}
        assert_send_sync::<Client>();
    }

    /// The request id of a call to a closed port (refused at once, nothing sent).
    fn first_request_id(client: &Client) -> String {
        let err = client.get("/").call().unwrap_err();
        err.report().request_id.to_string()
    }

    #[test]
    fn clients_without_a_seed_draw_from_the_os_and_a_seed_repeats_exactly() {
        let client = |seed: Option<u64>| {
            Client::new(
                Policy::builder()
                    .endpoint(Endpoint::new("a", "http://127.0.0.1:1/"))
                    .configure(|s| s.seed = seed),
            )
            .unwrap()
        };
        let (a, b) = (client(None), client(None));
        assert_eq!(a.policy().settings().seed, None);
        assert_ne!(
            first_request_id(&a),
            first_request_id(&b),
            "both drew the same ids"
        );
        let (c, d) = (client(Some(42)), client(Some(42)));
        assert_eq!(c.policy().settings().seed, Some(42));
        assert_eq!(first_request_id(&c), first_request_id(&d));
    }

    #[test]
    fn a_prebuilt_policy_keeps_its_sink_and_the_client_callback_joins_it() {
        use std::sync::Mutex;
        let seen: Arc<Mutex<Vec<&str>>> = Arc::default();
        let (a, b) = (seen.clone(), seen.clone());
        let policy = Policy::builder()
            .endpoint(Endpoint::new("a", "http://127.0.0.1:1/"))
            .on_event(move |e| {
                if matches!(e.kind, EventKind::Result { .. }) {
                    a.lock().unwrap().push("policy");
                }
            })
            .build()
            .unwrap();
        let client = ClientBuilder::from_policy(policy)
            .on_event(move |e| {
                if matches!(e.kind, EventKind::Result { .. }) {
                    b.lock().unwrap().push("client");
                }
            })
            .build()
            .unwrap();
        let _ = client.get("/").call();
        assert_eq!(*seen.lock().unwrap(), ["policy", "client"]);
    }

    #[test]
    fn hedging_is_refused_with_a_clear_error() {
        let err = Client::new(
            Policy::builder()
                .endpoint(Endpoint::new("a", "http://127.0.0.1:1/"))
                .hedge(Some(Hedge::after(std::time::Duration::from_millis(5)))),
        )
        .unwrap_err();
        assert_eq!(err, BuildError::HedgingUnsupported);
        assert!(err.to_string().contains("hedge"));
    }

    #[test]
    fn invalid_policy_names_the_setting() {
        let err = Client::new(
            Policy::builder()
                .endpoint(Endpoint::new("a", "http://127.0.0.1:1/"))
                .configure(|s| s.connect_timeout = std::time::Duration::ZERO),
        )
        .unwrap_err();
        assert!(err.to_string().contains("connect_timeout"), "{err}");
    }
}
