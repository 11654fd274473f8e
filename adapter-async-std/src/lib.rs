//! # baton-async-std: baton's failover engine on async-std and smol
//!
//! A [`Client`] sends each call to a small ordered set of provider endpoints and lets
//! [`baton_core`]'s engine decide everything: which endpoint, whether another attempt is
//! allowed and safe, when to wait, when to stop. This crate only sends, sleeps, classifies
//! failures and builds requests, so it behaves exactly like `baton-tokio` and
//! `baton-blocking` on the same scenario.
//!
//! ```no_run
//! use std::time::Duration;
//! use baton_async_std::Client;
//! use baton_core::{Endpoint, Policy};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let client = Client::new(
//!     Policy::builder()
//!         .endpoint(Endpoint::new("primary", "https://rpc-a.example/v1/key"))
//!         .endpoint(Endpoint::new("backup", "https://rpc-b.example/"))
//!         .attempt_timeout(Duration::from_secs(2)),
//! )?;
//! async_std::task::block_on(async {
//!     let resp = client.post("/").body(r#"{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}"#)
//!         .send().await?;
//!     println!("{} from {}", resp.status(), resp.endpoint());
//!     Ok::<_, baton_async_std::Error>(())
//! })?;
//! # Ok(()) }
//! ```
//!
//! ## Runtime
//!
//! Everything runs on `async-io` (the reactor and timers both async-std and smol are built
//! on), so a client works under `async_std::task::block_on`/`spawn`, `smol::block_on`/
//! `spawn`, or any executor, with no tokio. **No task is spawned**: hyper's connection
//! future is polled inline by whoever uses the connection (the attempt until the response
//! headers, then the [`Response`] while its body is read), and attempts in flight are
//! futures owned by the call's future. So the adapter needs no executor handle (an HTTP/2
//! connection, shared by many calls, is the one exception: below), and
//! dropping a call's future cancels all of its attempts (their connections close, an
//! HTTP/2 attempt's stream is reset) and
//! releases any half-open probe slot they held (the engine's `Call` is dropped with them).
//! Several attempts can be in flight at once when the policy hedges.
//!
//! ## Transport
//!
//! HTTP/1.1 (and HTTP/1.0 responses) and HTTP/2 through hyper 1.x's client connection
//! API, over `async_io::Async<TcpStream>` and, for `https`, `futures-rustls` (ring, TLS
//! early data off) with the trust and client identities of `baton-tls`: the platform's
//! store plus `ca_file`, the same certificates as every other adapter (SPEC 9). Names are
//! resolved with the OS resolver on the `blocking` pool.
//!
//! The HTTP version follows each endpoint's `http_version` (SPEC 9): `auto` offers `h2`
//! and `http/1.1` by ALPN for https (what the origin agreed is remembered) and speaks
//! HTTP/1.1 on http; `http1` is HTTP/1.1 only; `http2` is h2-only ALPN on https and prior
//! knowledge on http, and a server that does not agree is an undelivered failure. An
//! HTTP/2 endpoint has one multiplexed connection that every call shares; one caller
//! opens it while the others wait for it. Its frames are read by a task on baton's own
//! executor thread (`baton-h2`, one per process, the same under async-std and smol; see
//! hyper's `http2` client), never a tokio runtime. An HTTP/2 failure is read by core's
//! rule: `REFUSED_STREAM`, or a `GOAWAY` below the stream, is undelivered ([`Phase::Refused`]);
//! any other reset is ambiguous. A certificate rejected in the handshake, or an identity
//! the server refused, is untrusted ([`Phase::Certificate`]): the endpoint gets no further
//! attempt in the call, and the message names the reason.
//! Keep-alive connections are reused per endpoint: at most
//! [`ClientBuilder::pool_max_idle_per_endpoint`] idle ones (default 32), each closed when
//! found idle for longer than [`ClientBuilder::pool_idle_timeout`] (default 90 s).
//! Redirects are followed by the engine's rules ([`baton_core::Redirects`], SPEC 3), the
//! same on every adapter: a hop to the endpoint's origin reuses its pool; a hop to another
//! origin gets a connection of its own (never pooled) and none of the endpoint's headers.
//! Proxies come from the environment as core's [`baton_core::ProxyEnv`] routes them
//! (SPEC 3): `http` requests are written in absolute form to the proxy, `https` ones go
//! through a `CONNECT` tunnel opened before the TLS handshake (a failure on the way is
//! still the connect phase: undelivered). There is no compression.
//!
//! ## Failure classes, by phase
//!
//! Because the adapter owns DNS, connect, TLS and the exchange, each failure is classified
//! by the phase it happened in ([`Phase`]): DNS failure, refused, unreachable, connect
//! timeout, TLS handshake failure are *undelivered*; anything after the request started to
//! be written (reset, EOF, a timeout waiting for the headers) is *ambiguous*. The response
//! headers are the commit point: a later body failure is an [`Error::Body`] naming the
//! endpoint, never a short body passed off as complete.
//!
//! The connect timeout is measured from the moment the engine asks for the attempt and
//! bounds DNS + TCP + TLS of a new connection (and the wait for another call's connect of
//! the shared HTTP/2 connection); the attempt timeout starts when the connection is ready
//! (SPEC 2.6) and bounds everything up to the end of the response headers, within the
//! call's deadline. A redirect hop, and the re-send after a credential refusal, stay
//! within the attempt's time as the engine counts it (from its start). Reading the body
//! is held to the policy's `body_timeout` (none by default; [`ClientBuilder::body_timeout`]
//! sets it) and to the call's deadline.
//!
//! ## Decisions this crate made (where the spec is silent)
//!
//! - **Seed**: [`ClientBuilder::build`] seeds the engine's random source (jitter, request
//!   ids) from OS randomness ([`baton_core::os_entropy`], the same on every adapter)
//!   unless the policy set a seed of its own (a prebuilt policy given to
//!   [`Client::with_policy`] too: without a seed in the policy, OS randomness is used).
//! - **Host**: a request without a Host header gets the endpoint's host (with the port
//!   when it is not the default), as every HTTP client does; a caller's Host follows the
//!   engine's Host rule.
//! - **Dead pooled connections**: a keep-alive connection found closed before any request
//!   byte was written is replaced transparently (the next idle one, or a new one): nothing
//!   was sent, so it is not an attempt.
//! - **Events**: the client's callback ([`ClientBuilder::on_event`]) or a per-call one
//!   ([`RequestBuilder::on_event`]), delivered synchronously by the engine. With the
//!   `tracing` feature, every event is also forwarded to `tracing` unless
//!   `ClientBuilder::tracing(false)` (and `tracing_sink()` gives that sink for a policy
//!   built by hand).
//! - **Keep-alive timer**: the attempt timeout of a keep-alive connection uses one
//!   `async-io` timer kept armed across its requests and re-armed only when it fires early,
//!   because registering a timer wakes the reactor (a system call) and doing so per request
//!   cost measurable throughput.
//! - **Streams**: a streamed request body is one-shot (no retry, no failover); buffering it
//!   for replay is an explicit opt-in with a size limit ([`RequestBuilder::buffer_body`],
//!   [`ClientBuilder::buffer_bodies`]); an over-limit body is sent once, with the engine's
//!   `BodyNotBuffered` event.
//!
//! ## Benchmark
//!
//! `cargo bench -p baton-async-std --bench throughput` runs sequential `GET`s with a 2-byte
//! body against one local keep-alive `testkit` provider, under async-std and under smol,
//! through the adapter (default policy: consecutive breaker rule, budget on, no hedging, no
//! events, default features) and through a bare hyper 1.x connection reused on the same
//! runtime, with its connection task either spawned (the idiomatic way) or polled inline
//! as the adapter does. Medians of 31 interleaved rounds of 300 calls; ratios are taken
//! per round. On the shared 2-core development machine (load average ~8 from other
//! builds, so absolute numbers swing by 2x between runs):
//!
//! | runtime | bare hyper, task spawned | bare hyper, inline | adapter | adapter / spawned | adapter / inline |
//! |---|---|---|---|---|---|
//! | async-std | ~8,000 calls/s | ~17,500 calls/s | ~15,500 calls/s | 1.9 | 0.88-0.90 |
//! | smol | ~9,000 calls/s | ~19,000 calls/s | ~17,000 calls/s | 1.5-2.7 | 0.89-0.90 |
//!
//! The adapter is far faster than idiomatic bare hyper (no cross-thread hop to a spawned
//! connection task) and within about 10 % (about 5 µs per call, the engine's decisions,
//! building the attempt's request and the report) of the best hand-written bare hyper
//! loop; the 0.95 goal is met against the former and not yet against the latter.
//!
//! ## Dependencies
//!
//! - `baton-core`: the engine (every decision).
//! - `http`, `http-body`, `bytes`: the request/response vocabulary hyper speaks.
//! - `hyper` (client, http1, http2): HTTP/1.1 framing that rejects truncated bodies and
//!   accepts HTTP/1.0 responses (why not surf/async-h1), and HTTP/2; `h2` for its error
//!   type (the protocol's proofs that nothing was processed).
//! - `async-executor`, `async-lock`, `async-channel`: the one executor thread of HTTP/2
//!   connections, the lock that lets one caller open an endpoint's HTTP/2 connection, and
//!   the word of how a connection's task ended (all three already under async-std and
//!   smol).
//! - `baton-tls`: the one TLS trust rule of every adapter.
//! - `async-io`: the reactor-registered TCP socket and timers shared by async-std and smol.
//! - `blocking`: the thread pool for the OS resolver, so DNS never blocks an executor.
//! - `futures-io`, `futures-core`: the runtime-neutral I/O and stream traits (also the
//!   `Stream` of event streams); `futures-lite` (smol's utility crate): the read and
//!   write helpers of the proxy `CONNECT` handshake.
//! - `futures-rustls`: TLS on futures-io streams.
//! - `smallvec`: in-flight attempts stored inline (the healthy path allocates less).
//! - `sync_wrapper`: keeps a streamed request body (which need not be `Sync`) from making
//!   responses and errors `!Sync`, without `unsafe` here.
//! - `thiserror`: error boilerplate.
//! - optional `serde`, `serde_json` (feature `json`, default): JSON bodies;
//!   `tracing` (feature `tracing`): event forwarding.

#![forbid(unsafe_code)]
// docs.rs (and CI, with nightly) builds with `--cfg docsrs`: every feature-gated item then
// says which feature it needs.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(missing_docs)]

mod attempt;
mod auth;
mod body;
mod classify;
mod connect;
mod driver;
mod error;
mod exec;
mod io;
mod pool;
mod request;
mod response;
mod sse;

use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_core::{BreakerState, Engine, EventSink, Policy, PolicyBuilder};
use futures_rustls::rustls::ClientConfig;
use http::Method;

pub use body::Body;
pub use classify::{Phase, TransportError};
#[cfg(feature = "json")]
pub use error::DecodeError;
pub use error::{BodyError, BuildError, CallError, Error};
pub use request::RequestBuilder;
pub use response::Response;
pub use sse::{EventStream, EventsError};

/// The state shared by all clones of one client.
pub(crate) struct Inner {
    pub(crate) engine: Arc<Engine>,
    pub(crate) pool: Arc<pool::Pool>,
    /// Each endpoint's route: the client's pool and HTTP/1.1 settings, the endpoint's index,
    /// TLS (with its client identity), target, id and HTTP version, shared by its attempts.
    pub(crate) routes: Vec<Arc<attempt::Route>>,
    /// Each endpoint's TLS without its client identity (for a redirect to another origin).
    pub(crate) bare: Vec<Arc<ClientConfig>>,
    pub(crate) http1: Arc<hyper::client::conn::http1::Builder>,
    /// The environment's proxies (for redirect targets on another origin).
    pub(crate) proxies: Arc<baton_core::ProxyEnv>,
    pub(crate) buffer_limit: Option<usize>,
    /// The client's event sink, installed per call when the policy was built elsewhere.
    pub(crate) events: Option<EventSink>,
    /// The token provider of endpoints with a credential slot (SPEC 9).
    pub(crate) tokens: Option<auth::TokenProvider>,
}

/// One endpoint's wire settings (SPEC 9).
struct Wire {
    tls: Arc<ClientConfig>,
    /// The same trust without the client identity, for a redirect to another origin.
    bare: Arc<ClientConfig>,
    version: baton_core::HttpVersion,
}

/// Each endpoint's [`Wire`]: baton-tls's trust and identity (or a configuration given
/// whole), ALPN by the endpoint's HTTP version, no early data.
fn wires(policy: &Policy, given: Option<ClientConfig>) -> Result<Vec<Wire>, BuildError> {
    let tls = baton_tls::for_policy(policy).map_err(|e| BuildError::Tls(e.to_string()))?;
    if given.is_some() && tls.iter().any(|t| t.files().is_set()) {
        return Err(BuildError::Setting {
            setting: "tls",
            reason: "the policy's TLS files cannot be applied to a TLS configuration given \
                     whole (ClientBuilder::tls_config)"
                .into(),
        });
    }
    let mut out = Vec::with_capacity(tls.len());
    for (i, t) in tls.iter().enumerate() {
        let version = policy.http_version_for(i);
        let config = |t: &baton_tls::TlsConfig| {
            let base = given.clone().unwrap_or_else(|| t.client_config(version));
            Arc::new(connect::harden(base, version))
        };
        let own = config(t);
        let bare = match &given {
            // A configuration given whole may carry an identity of its own.
            Some(_) => Arc::new(baton_tls::without_client_identity((*own).clone())),
            None if t.has_identity() => config(&t.without_identity()),
            None => own.clone(),
        };
        out.push(Wire {
            tls: own,
            bare,
            version,
        });
    }
    Ok(out)
}

/// A failover HTTP client; cheap to clone (clones share endpoint health, the retry budget
/// and the connection pool).
///
/// ```
/// use baton_async_std::Client;
/// use baton_core::{BreakerState, Endpoint, Policy};
/// let client = Client::new(Policy::builder().endpoint(Endpoint::new("a", "http://127.0.0.1:1/")))
///     .unwrap();
/// assert_eq!(client.state("a"), Some(BreakerState::Closed));
/// let _call = client.get("/status"); // a RequestBuilder; `.send().await` runs it
/// ```
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl Client {
    /// A client for a policy built elsewhere, with default transport settings. A seed left
    /// unset means OS randomness; a seed set is used as given.
    pub fn with_policy(policy: Policy) -> Result<Client, BuildError> {
        ClientBuilder::from_policy(policy).build()
    }

    /// A call with `method` to `url` (a path such as `/v1/charges`, or an absolute URL;
    /// resolved against each endpoint by the policy's URL mode).
    pub fn request(&self, method: Method, url: impl AsRef<str>) -> RequestBuilder {
        RequestBuilder::new(self.clone(), method, url.as_ref(), self.inner.buffer_limit)
    }

    baton_core::client_methods!(RequestBuilder, inner.engine, Instant::now);

    /// The breaker state of the endpoint with `id`.
    pub fn state(&self, id: &str) -> Option<BreakerState> {
        self.health(id).map(|h| h.state)
    }

    /// Sends the policy's health request ([`ProbeRequest`](baton_core::ProbeRequest)) to
    /// the endpoint with `id`, under its breaker: an answer in the probe's `expect` set is
    /// a success, anything else a failure. Refused when the breaker is open and not yet
    /// due, or its probe slot is taken. It carries the endpoint's headers and, with a
    /// credential slot, its token; a refusal of the token invalidates it and the probe is
    /// sent once more with a refreshed one. No redirect is followed, no other retry made; the
    /// request uses the endpoint's connections (and proxy route), as its calls do.
    pub async fn probe(
        &self,
        id: &str,
    ) -> Result<baton_core::ProbeResult, baton_core::ProbeRefused> {
        let engine = self.inner.engine.clone();
        let probe = engine.probe(id, Instant::now())?;
        let outcome = driver::send_probe(&self.inner, &probe).await;
        let (now, wall) = (Instant::now(), Some(std::time::SystemTime::now()));
        Ok(match outcome {
            Ok((status, headers)) => probe.answered(status, &headers, wall, now),
            Err(e) => probe.finish(Err(e), now),
        })
    }

    /// Probes every endpoint that is due a probe now, one after another: call it from
    /// your own scheduler (baton runs no timers).
    pub async fn probe_due(&self) -> Vec<baton_core::ProbeResult> {
        let mut results = Vec::new();
        for id in self.inner.engine.due_probes(Instant::now()) {
            results.extend(self.probe(&id).await.ok());
        }
        results
    }

    /// Idle keep-alive connections kept for the endpoint with `id`.
    pub fn idle_connections(&self, id: &str) -> usize {
        self.policy()
            .endpoint_index(id)
            .map_or(0, |i| self.inner.pool.idle(i))
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("policy", self.policy())
            .finish_non_exhaustive()
    }
}

/// Builds a [`Client`]: the policy (endpoints and every engine setting) and the transport
/// (pool, TLS, body timeout).
///
/// ```
/// use std::time::Duration;
/// use baton_async_std::Client;
/// use baton_core::{Endpoint, Hedge, Policy};
/// let policy = Policy::builder()
///     .endpoint(Endpoint::new("a", "https://a.example/"))
///     .endpoint(Endpoint::new("b", "https://b.example/"))
///     .hedge(Some(Hedge::after(Duration::from_millis(150))));
/// let client = Client::builder(policy)
///     .pool_max_idle_per_endpoint(8)
///     .pool_idle_timeout(Duration::from_secs(30))
///     .on_event(|e| eprintln!("{}: {:?}", e.request_id, e.kind))
///     .build()
///     .unwrap();
/// assert_eq!(client.policy().endpoints().len(), 2);
/// ```
#[must_use]
pub struct ClientBuilder {
    policy: PolicyBuilder,
    max_idle: usize,
    idle_timeout: Duration,
    body_timeout: Option<Duration>,
    tls: Option<ClientConfig>,
    events: Option<EventSink>,
    #[cfg(feature = "tracing")]
    tracing: bool,
    built: Option<Policy>,
    buffer_limit: Option<usize>,
    tokens: Option<auth::TokenProvider>,
}

impl Default for ClientBuilder {
    fn default() -> Self {
        ClientBuilder {
            policy: Policy::builder(),
            max_idle: 32,
            idle_timeout: Duration::from_secs(90),
            body_timeout: None,
            tls: None,
            events: None,
            #[cfg(feature = "tracing")]
            tracing: true,
            built: None,
            buffer_limit: None,
            tokens: None,
        }
    }
}

impl ClientBuilder {
    /// A builder starting from this policy builder (as `baton-tokio`'s
    /// `ClientBuilder::new`).
    pub fn new(policy: PolicyBuilder) -> Self {
        ClientBuilder {
            policy,
            ..ClientBuilder::default()
        }
    }

    /// A builder for an already built policy: without a seed in it, OS randomness is used
    /// (a seed set is kept); an event callback set here gets every call's events after
    /// the policy's own sink.
    pub fn from_policy(policy: Policy) -> Self {
        ClientBuilder {
            built: Some(policy),
            ..ClientBuilder::default()
        }
    }

    baton_core::client_builder_setters!(events, async);

    /// At most this many idle keep-alive connections per endpoint (0 disables reuse).
    pub fn pool_max_idle_per_endpoint(mut self, n: usize) -> Self {
        self.max_idle = n;
        self
    }

    /// An idle connection older than this is closed instead of reused.
    pub fn pool_idle_timeout(mut self, d: Duration) -> Self {
        self.idle_timeout = d;
        self
    }

    /// The policy's `body_timeout` (from the end of the headers to the last body byte;
    /// none by default), set here for convenience: the same setting, with the same meaning,
    /// as on every adapter. With a prebuilt policy, set it in the policy.
    pub fn body_timeout(mut self, d: Duration) -> Self {
        self.body_timeout = Some(d);
        self
    }

    /// A TLS configuration of your own, used for every endpoint instead of baton's trust
    /// rule (the platform's store plus `ca_file`, SPEC 9); a policy with TLS files is then
    /// refused. Early data is turned off and ALPN set by each endpoint's `http_version`
    /// whatever it says.
    pub fn tls_config(mut self, config: ClientConfig) -> Self {
        self.tls = Some(config);
        self
    }

    /// Validates everything and builds the client. The engine's random source is seeded
    /// from OS randomness unless the policy set a seed.
    pub fn build(mut self) -> Result<Client, BuildError> {
        #[cfg(feature = "tracing")]
        if self.tracing {
            let user = self.events.take();
            let trace = tracing_sink();
            self.events = Some(Arc::new(move |e: &baton_core::Event<'_>| {
                trace(e);
                if let Some(u) = &user {
                    u(e);
                }
            }));
        }
        let events = self.events.take();
        let body_timeout = self.body_timeout;
        let policy = match self.built.take() {
            Some(_) if body_timeout.is_some() => {
                return Err(BuildError::Setting {
                    setting: "body_timeout",
                    reason: "set `body_timeout` in the prebuilt policy's settings".into(),
                })
            }
            Some(p) => p,
            None => {
                let mut pb = std::mem::take(&mut self.policy).configure(|s| {
                    if body_timeout.is_some() {
                        s.body_timeout = body_timeout;
                    }
                });
                if let Some(sink) = &events {
                    pb = pb.add_event_sink(sink.clone());
                }
                pb.build()?
            }
        };
        self.build_with(policy, events)
    }

    fn build_with(self, policy: Policy, events: Option<EventSink>) -> Result<Client, BuildError> {
        if self.idle_timeout.is_zero() {
            return Err(BuildError::Setting {
                setting: "pool_idle_timeout",
                reason: "must be greater than zero".into(),
            });
        }
        // Proxies from the environment, decided by core the same way on every adapter.
        let proxies = Arc::new(baton_core::ProxyEnv::for_policy(&policy)?);
        policy.require_token_provider(self.tokens.is_some())?;
        let mut targets = Vec::with_capacity(policy.endpoints().len());
        for e in policy.endpoints() {
            let t = connect::Target::routed(e.uri(), &proxies).map_err(|reason| {
                BuildError::Endpoint {
                    id: e.id().to_string(),
                    reason,
                }
            })?;
            targets.push(Arc::new(t));
        }
        let wires = wires(&policy, self.tls)?;
        let n = policy.endpoints().len();
        let pool = Arc::new(pool::Pool::new(n, self.max_idle, self.idle_timeout));
        let http1 = Arc::new(hyper::client::conn::http1::Builder::new());
        let (mut routes, mut bare) = (Vec::with_capacity(n), Vec::with_capacity(n));
        let each = policy
            .endpoints()
            .iter()
            .zip(targets)
            .zip(wires)
            .enumerate();
        for (endpoint, ((e, target), wire)) in each {
            routes.push(Arc::new(attempt::Route {
                pool: pool.clone(),
                tls: wire.tls,
                http1: http1.clone(),
                target,
                endpoint,
                endpoint_id: Arc::from(e.id()),
                version: wire.version,
            }));
            bare.push(wire.bare);
        }
        Ok(Client {
            inner: Arc::new(Inner {
                // OS randomness once per client; a seed set in the policy wins.
                engine: Arc::new(Engine::with_entropy(policy, baton_core::os_entropy())),
                pool,
                routes,
                bare,
                http1,
                proxies,
                buffer_limit: self.buffer_limit,
                events,
                tokens: self.tokens,
            }),
        })
    }
}

impl std::fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("max_idle", &self.max_idle)
            .field("idle_timeout", &self.idle_timeout)
            .field("body_timeout", &self.body_timeout)
            .finish_non_exhaustive()
    }
}
/// An event sink that forwards every event to `tracing` (target `baton`, level DEBUG;
/// breaker transitions, budget refusals and failed results at INFO).
///
/// ```
/// # #[cfg(feature = "tracing")] {
/// let sink = baton_async_std::tracing_sink();
/// let policy = baton_core::Policy::builder()
///     .endpoint(baton_core::Endpoint::new("a", "http://a.example/"))
///     .event_sink(Some(sink))
///     .build()
///     .unwrap();
/// # let _ = policy; }
/// ```
#[cfg(feature = "tracing")]
pub fn tracing_sink() -> EventSink {
    Arc::new(|e: &baton_core::Event<'_>| {
        use baton_core::{EventKind, StopReason};
        let notable = match &e.kind {
            EventKind::BreakerTransition { .. } | EventKind::BudgetRefused { .. } => true,
            EventKind::Result { stop_reason, .. } => *stop_reason != StopReason::Answered,
            _ => false,
        };
        if notable {
            tracing::info!(target: "baton", request_id = e.request_id, idempotency_key = e.idempotency_key, event = ?e.kind);
        } else {
            tracing::debug!(target: "baton", request_id = e.request_id, idempotency_key = e.idempotency_key, event = ?e.kind);
        }
    })
}
