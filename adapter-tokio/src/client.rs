//! The client: a policy, an engine shared by all calls (endpoint health, retry budget), and
//! the reqwest clients that send the attempts.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_core::{
    CallOptions, Engine, EventSink, HttpVersion, Policy, PolicyBuilder, Probe, ProbeRefused,
    ProbeResult, UrlMode,
};
use http::header::{HeaderName, HeaderValue, AUTHORIZATION};
use http::{HeaderMap, Method, Uri, Version};

use crate::driver::{self, Body, Prepared, SendError, Shared, Transport};
use crate::error::{BuildError, Error, InvalidRequest};
use crate::response::Response;

type Configure = Box<dyn Fn(reqwest::ClientBuilder) -> reqwest::ClientBuilder + Send + Sync>;

enum PolicySource {
    Builder(PolicyBuilder),
    Built(Policy),
}

enum HttpSource {
    Default,
    Configure(Configure),
    Client(reqwest::Client),
}

/// Builds a [`Client`].
///
/// By default baton builds its own reqwest clients: one per distinct connect timeout, HTTP
/// version and set of TLS files among the endpoints (reqwest's are per client, baton's
/// per endpoint), each with that connect timeout, the TLS of `baton-tls` (the platform's
/// trust store plus `ca_file`, the endpoint's client identity, ALPN `h2` and `http/1.1`
/// under `http_version = "auto"`, early data off), reqwest's own re-send of refused
/// HTTP/2 streams off (each refusal is an attempt of the engine's), and nothing else
/// changed from reqwest's defaults (TCP Fast Open is off). Use
/// [`configure_reqwest`](Self::configure_reqwest) to adjust them (user agent, ...), or
/// [`reqwest_client`](Self::reqwest_client) to bring your own client, which then sends to
/// every endpoint with its own connect timeout and TLS.
///
/// ```
/// use std::time::Duration;
/// use baton_core::{Endpoint, Policy};
///
/// let client = baton_tokio::Client::builder(
///     Policy::builder()
///         .endpoint(Endpoint::new("primary", "https://rpc-a.example/"))
///         .endpoint(Endpoint::new("backup", "https://rpc-b.example/"))
///         .connect_timeout(Duration::from_secs(2)),
/// )
/// .configure_reqwest(|b| b.user_agent("my-app/1.0"))
/// .on_event(|e| eprintln!("{}: {:?}", e.request_id, e.kind))
/// // For endpoints with a credential slot: ask your identity service for the token.
/// .token_provider(|endpoint: &str| {
///     let token = baton_core::credential::Token::new(format!("token-for-{endpoint}"));
///     async move { Ok::<_, std::io::Error>(token.expires_in(Duration::from_secs(3600))) }
/// })
/// .build()
/// .unwrap();
/// # drop(client);
/// ```
pub struct ClientBuilder {
    policy: PolicySource,
    http: HttpSource,
    read_timeout: Option<Duration>,
    events: Option<EventSink>,
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    tracing: bool,
    buffer_limit: Option<usize>,
    tokens: Option<crate::driver::TokenProvider>,
}

impl ClientBuilder {
    /// A builder for a client with this policy. The engine's randomness (jitter, generated
    /// request ids) is drawn from the OS unless the policy sets a seed.
    pub fn new(policy: PolicyBuilder) -> Self {
        Self::with_source(PolicySource::Builder(policy))
    }

    /// A builder for a client with an already built policy. Without a seed in the policy
    /// the engine draws from OS randomness, and an event callback set here runs after the
    /// policy's own sink.
    pub fn from_policy(policy: Policy) -> Self {
        Self::with_source(PolicySource::Built(policy))
    }

    fn with_source(policy: PolicySource) -> Self {
        ClientBuilder {
            policy,
            http: HttpSource::Default,
            read_timeout: None,
            events: None,
            tracing: true,
            buffer_limit: None,
            tokens: None,
        }
    }

    baton_core::client_builder_setters!(events, async);

    /// Adjusts each reqwest client baton builds. After this runs, baton sets what the
    /// policy decides, replacing anything set here on the same subject: the connect
    /// timeout, redirects (none: the engine's), reqwest's own retries (none), proxies (the
    /// environment's, as core reads them; a `proxy` set here is dropped), the HTTP version
    /// when the policy's `http_version` names one (`http1`, `http2`; under `auto` a
    /// version set here stays) and TLS (the platform's trust store plus the policy's `ca_file`,
    /// `client_cert` and `client_key`: root certificates, identities and TLS versions set
    /// here are dropped). Everything else (pool sizes, keep-alive, user agent, default
    /// headers, local address) is kept. Do not set reqwest's total `timeout` here: it also
    /// runs during connect, so a connect-phase failure could be reported as ambiguous; use
    /// the policy's attempt timeout and deadline instead.
    pub fn configure_reqwest(
        mut self,
        f: impl Fn(reqwest::ClientBuilder) -> reqwest::ClientBuilder + Send + Sync + 'static,
    ) -> Self {
        self.http = HttpSource::Configure(Box::new(f));
        self
    }

    /// Sends every attempt with this reqwest client (its connection pool is shared by all
    /// endpoints). Its connect timeout applies instead of the policy's, so keep it shorter
    /// than every attempt timeout, and keep its read and total timeouts (if any) longer than
    /// its connect timeout: those timers also run during connect. When baton's own attempt
    /// timer fires, it cannot tell the phase, and reports it as unknown (ambiguous).
    ///
    /// Build it with `redirect(reqwest::redirect::Policy::none())`: redirects are the
    /// engine's decision, and a client that follows them itself would carry the endpoint's
    /// headers (credentials) to wherever it is redirected. Build it with
    /// `retry(reqwest::retry::never())` too: reqwest's default re-sends a request itself,
    /// unseen by the engine and the report, after a refused HTTP/2 stream and also after a
    /// `GOAWAY` with `NO_ERROR`, which does not prove the request was not processed (a POST
    /// could run twice; SPEC 9). Its TLS is its own:
    /// the policy's TLS files are refused with it, and a client identity it carries goes
    /// to every origin it connects to. So is its HTTP version: an endpoint's
    /// `http_version` is not applied to its connections (build it with
    /// `http2_prior_knowledge` or `http1_only` to match; the policy's value still tells
    /// baton whether a first connection's protocol is yet to be agreed).
    pub fn reqwest_client(mut self, client: reqwest::Client) -> Self {
        self.http = HttpSource::Client(client);
        self
    }

    /// Sets reqwest's read timeout (between reads, including body reads after the call
    /// returned) on the clients baton builds; it must be longer than every endpoint's
    /// connect timeout. Without it, a stalled body stalls the caller's read.
    pub fn read_timeout(mut self, timeout: Duration) -> Self {
        self.read_timeout = Some(timeout);
        self
    }

    fn sink(&self) -> Option<EventSink> {
        #[cfg(feature = "tracing")]
        if self.tracing {
            let user = self.events.clone();
            return Some(Arc::new(move |e: &baton_core::Event<'_>| {
                crate::events::trace(e);
                if let Some(u) = &user {
                    u(e);
                }
            }));
        }
        self.events.clone()
    }

    /// Builds the policy (seeding it and installing the event sink) and the engine.
    fn shared(
        policy: PolicySource,
        sink: Option<EventSink>,
        buffer_limit: Option<usize>,
        tokens: Option<crate::driver::TokenProvider>,
    ) -> Result<Shared, BuildError> {
        // The client's callback (and tracing) is combined with a sink the user set on the
        // policy itself: both see every event, the policy's first.
        let effective =
            |user: Option<&EventSink>| baton_core::join_sinks(user.cloned(), sink.clone());
        let policy = match policy {
            PolicySource::Builder(b) => {
                let events = effective(b.event_sink_ref());
                b.event_sink(events).build()?
            }
            PolicySource::Built(p) => {
                let events = effective(p.event_sink());
                p.with_event_sink(events)
            }
        };
        policy.require_token_provider(tokens.is_some())?;
        check_urls(&policy)?;
        let urls = (policy.settings().url_mode == UrlMode::Complete).then(|| {
            policy
                .endpoints()
                .iter()
                .map(|e| reqwest::Url::parse(e.url()).ok())
                .collect()
        });
        Ok(Shared {
            // OS randomness once per client; a seed set in the policy wins.
            engine: Arc::new(Engine::with_entropy(policy, baton_core::os_entropy())),
            urls,
            buffer_limit,
            tokens,
        })
    }

    /// Builds a [`BatonMiddleware`](crate::BatonMiddleware) with this policy, event
    /// callback and body buffering (the reqwest settings do not apply: the middleware
    /// sends through the stack it is part of).
    #[cfg(feature = "middleware")]
    pub fn build_middleware(self) -> Result<crate::BatonMiddleware, BuildError> {
        if !matches!(self.http, HttpSource::Default) || self.read_timeout.is_some() {
            return Err(BuildError::Setting {
                setting: "reqwest_client",
                reason: "a middleware sends through its reqwest-middleware stack; \
                         configure that stack's client instead"
                    .into(),
            });
        }
        let sink = self.sink();
        let shared = Self::shared(self.policy, sink, self.buffer_limit, self.tokens)?;
        let policy = shared.engine.policy();
        if (0..policy.endpoints().len()).any(|i| policy.tls_for(i).is_set()) {
            return Err(BuildError::Setting {
                setting: "tls",
                reason: "a middleware sends through its reqwest-middleware stack's client: \
                         configure that client's TLS instead of the policy's TLS files"
                    .into(),
            });
        }
        Ok(crate::BatonMiddleware::from_shared(shared))
    }

    /// Validates everything and builds the client.
    pub fn build(self) -> Result<Client, BuildError> {
        let sink = self.sink();
        let shared = Self::shared(self.policy, sink, self.buffer_limit, self.tokens)?;
        let policy = shared.engine.policy();
        let n = policy.endpoints().len();
        // Proxies from the environment, decided by core the same way on every adapter
        // (SPEC 3); reqwest's own reading of the environment is off.
        let proxies = Arc::new(baton_core::ProxyEnv::for_policy(policy)?);
        let mut clients: Vec<reqwest::Client> = Vec::new();
        let mut of_endpoint = Vec::with_capacity(n);
        let mut connect = Vec::with_capacity(n);
        let mut anonymous = vec![None];
        let origins = policy.endpoints().iter().map(|e| e.uri().clone()).collect();
        let first = (0..n)
            .map(|i| {
                let alpn = policy.endpoints()[i].uri().scheme_str() == Some("https")
                    && policy.http_version_for(i) == HttpVersion::Auto;
                alpn.then(FirstConnection::default)
            })
            .collect();
        match self.http {
            HttpSource::Client(c) => {
                if (0..n).any(|i| policy.tls_for(i).is_set()) {
                    return Err(BuildError::Setting {
                        setting: "tls",
                        reason: "the policy's TLS files cannot be applied to a reqwest client \
                                 given with `reqwest_client`; configure its TLS yourself"
                            .into(),
                    });
                }
                if self.read_timeout.is_some() {
                    return Err(BuildError::Setting {
                        setting: "read_timeout",
                        reason: "cannot be applied to a reqwest client given with \
                                 `reqwest_client`; set it on that client"
                            .into(),
                    });
                }
                clients.push(c);
                of_endpoint.resize(n, 0);
                connect.resize(n, None);
            }
            source => {
                let configure = match &source {
                    HttpSource::Configure(f) => Some(f),
                    _ => None,
                };
                let groups = client_groups(policy, self.read_timeout)?;
                for (k, g) in groups.keys.iter().enumerate() {
                    let b = reqwest_builder(g, &groups.tls[k], configure, &proxies)?;
                    let b = match self.read_timeout {
                        Some(rt) => b.read_timeout(rt),
                        None => b,
                    };
                    clients.push(b.build().map_err(BuildError::Reqwest)?);
                }
                of_endpoint = groups.of_endpoint;
                connect = groups.connect;
                anonymous = groups.anonymous;
            }
        }
        let peek = shared.engine.policy().settings().classify_body;
        Ok(Client {
            inner: Arc::new(Inner {
                shared,
                http: HttpClients {
                    clients,
                    of_endpoint,
                    connect,
                    anonymous,
                    origins,
                    first,
                    peek,
                },
            }),
        })
    }
}

/// The reqwest client of one group: the user's adjustments first, then baton's.
fn reqwest_builder(
    g: &GroupKey,
    tls: &baton_tls::TlsConfig,
    configure: Option<&Configure>,
    proxies: &Arc<baton_core::ProxyEnv>,
) -> Result<reqwest::ClientBuilder, BuildError> {
    let mut b = reqwest::Client::builder();
    if let Some(f) = configure {
        b = f(b);
    }
    // Redirects are the engine's decision (SPEC 3): reqwest follows none. A refused stream
    // is an attempt of the engine's (SPEC 9): reqwest re-sends none itself.
    b = b
        .connect_timeout(g.connect)
        .redirect(reqwest::redirect::Policy::none())
        .retry(reqwest::retry::never())
        .no_proxy();
    // SPEC 9: ALPN decides for https under `auto` (HTTP/1.1 for http); `http2` is prior
    // knowledge on http and h2-only ALPN on https.
    b = match g.version {
        HttpVersion::Http1 => b.http1_only(),
        HttpVersion::Http2 => b.http2_prior_knowledge(),
        HttpVersion::Auto => b,
    };
    b = with_tls(b, tls, g.version)?;
    for proxy in env_proxies(proxies) {
        b = b.proxy(proxy);
    }
    Ok(b)
}

/// What sets one reqwest client apart from another: reqwest's connect timeout, HTTP
/// version and TLS configuration are per client, baton's per endpoint.
#[derive(PartialEq)]
struct GroupKey {
    connect: Duration,
    version: HttpVersion,
    tls: baton_core::Tls,
}

/// The distinct reqwest clients the endpoints need, which one serves which endpoint,
/// and each endpoint's connect timeout.
struct Groups {
    keys: Vec<GroupKey>,
    tls: Vec<baton_tls::TlsConfig>,
    /// For a client that presents an identity: the client with the same settings and no
    /// identity, for requests that left the endpoint's origin (redirects; SPEC 9).
    anonymous: Vec<Option<usize>>,
    of_endpoint: Vec<usize>,
    connect: Vec<Option<Duration>>,
}

impl Groups {
    /// The client of `key`, added when new.
    fn place(&mut self, key: GroupKey, tls: baton_tls::TlsConfig) -> usize {
        if let Some(k) = self.keys.iter().position(|g| *g == key) {
            return k;
        }
        self.keys.push(key);
        self.tls.push(tls);
        self.anonymous.push(None);
        self.keys.len() - 1
    }
}

fn client_groups(policy: &Policy, read_timeout: Option<Duration>) -> Result<Groups, BuildError> {
    let tls = baton_tls::for_policy(policy).map_err(BuildError::Tls)?;
    let mut groups = Groups {
        keys: Vec::new(),
        tls: Vec::new(),
        anonymous: Vec::new(),
        of_endpoint: Vec::new(),
        connect: Vec::new(),
    };
    for (i, endpoint) in policy.endpoints().iter().enumerate() {
        let ct = policy.connect_timeout_for(i);
        if let Some(rt) = read_timeout {
            if rt <= ct {
                return Err(BuildError::Setting {
                    setting: "read_timeout",
                    reason: format!(
                        "{rt:?} must be longer than the connect timeout {ct:?} of endpoint {:?} \
                         (reqwest's read timer also runs during connect)",
                        endpoint.id()
                    ),
                });
            }
        }
        let key = |tls: &baton_tls::TlsConfig| GroupKey {
            connect: ct,
            version: policy.http_version_for(i),
            tls: tls.files().clone(),
        };
        let k = groups.place(key(&tls[i]), tls[i].clone());
        if tls[i].has_identity() {
            let bare = tls[i].without_identity();
            groups.anonymous[k] = Some(groups.place(key(&bare), bare));
        }
        groups.of_endpoint.push(k);
        groups.connect.push(Some(ct));
    }
    Ok(groups)
}

/// The TLS of baton-tls (SPEC 9: the platform's store plus `ca_file`, the endpoint's
/// client identity, ALPN by HTTP version, no early data) on a reqwest client.
#[cfg(feature = "rustls")]
fn with_tls(
    b: reqwest::ClientBuilder,
    tls: &baton_tls::TlsConfig,
    version: HttpVersion,
) -> Result<reqwest::ClientBuilder, BuildError> {
    Ok(b.tls_backend_preconfigured(tls.client_config(version)))
}

/// Without the `rustls` feature there is no TLS: https endpoints cannot be reached, and
/// TLS files are refused.
#[cfg(not(feature = "rustls"))]
fn with_tls(
    b: reqwest::ClientBuilder,
    tls: &baton_tls::TlsConfig,
    _version: HttpVersion,
) -> Result<reqwest::ClientBuilder, BuildError> {
    if tls.files().is_set() {
        return Err(BuildError::Setting {
            setting: "tls",
            reason: "TLS files need baton-tokio's `rustls` feature".into(),
        });
    }
    Ok(b)
}

/// reqwest proxies that follow core's decision for each request URL: one for `http`
/// targets (forwarded in absolute form), one for `https` (a `CONNECT` tunnel), each with
/// its proxy's credential.
fn env_proxies(env: &Arc<baton_core::ProxyEnv>) -> Vec<reqwest::Proxy> {
    if env.is_empty() {
        return Vec::new();
    }
    ["http", "https"]
        .into_iter()
        .filter_map(|scheme| {
            let auth = env.proxy_for(scheme)?.authorization().cloned();
            let env = env.clone();
            let proxy = reqwest::Proxy::custom(move |url| {
                if url.scheme() != scheme {
                    return None;
                }
                let uri: http::Uri = url.as_str().parse().ok()?;
                let target = env.route(&uri).proxy()?.url();
                reqwest::Url::parse(&target).ok()
            });
            Some(match auth {
                Some(a) => proxy.custom_http_auth(a),
                None => proxy,
            })
        })
        .collect()
}

/// The reqwest clients and which one sends to which endpoint.
pub(crate) struct HttpClients {
    clients: Vec<reqwest::Client>,
    of_endpoint: Vec<usize>,
    connect: Vec<Option<Duration>>,
    /// Per client: the one without its identity, for another origin (see [`Groups`]).
    anonymous: Vec<Option<usize>>,
    /// Each endpoint's URL (its origin decides whether its identity goes along).
    origins: Vec<Uri>,
    /// Per endpoint whose version ALPN decides (`auto` on https): the gate of its first
    /// connection (see [`FirstConnection`]).
    first: Vec<Option<FirstConnection>>,
    /// Bytes of a body read before the engine decides (`Settings::classify_body`).
    peek: usize,
}

/// One request at a time until an endpoint's first response arrived.
///
/// Before its first connection, reqwest cannot know that an `auto` https endpoint will
/// agree HTTP/2, so concurrent calls would each open a connection of their own (32 callers,
/// 32 connections). Until the endpoint has answered once, its requests pass one at a time
/// (each waiting inside its attempt's timer, before anything is written, at most the
/// endpoint's connect timeout: then it goes anyway); from then on they go concurrently and
/// share the connection reqwest keeps (one multiplexed HTTP/2 connection, or HTTP/1.1
/// keep-alive ones). A connection lost later is not gated again.
#[derive(Default)]
struct FirstConnection {
    answered: std::sync::atomic::AtomicBool,
    one_at_a_time: tokio::sync::Mutex<()>,
}

impl HttpClients {
    /// The client that sends `request` for `endpoint`: the endpoint's own, or, when the
    /// request left the endpoint's origin (a redirect), the same without its identity.
    fn client_for(&self, endpoint: usize, request: &reqwest::Request) -> &reqwest::Client {
        let k = self.of_endpoint.get(endpoint).copied().unwrap_or(0);
        if let (Some(Some(bare)), Some(origin)) =
            (self.anonymous.get(k), self.origins.get(endpoint))
        {
            let elsewhere = match request.url().as_str().parse::<Uri>() {
                Ok(uri) => !baton_core::same_origin(&uri, origin),
                Err(_) => true,
            };
            if elsewhere {
                return &self.clients[*bare];
            }
        }
        &self.clients[k]
    }
}

impl Transport for HttpClients {
    fn send(
        &self,
        endpoint: usize,
        request: reqwest::Request,
    ) -> impl std::future::Future<Output = Result<reqwest::Response, SendError>> + Send {
        use std::sync::atomic::Ordering;
        let connect = self
            .connect
            .get(endpoint)
            .copied()
            .flatten()
            .unwrap_or(Duration::from_secs(5));
        let fut = self.client_for(endpoint, &request).execute(request);
        let first = self
            .first
            .get(endpoint)
            .and_then(Option::as_ref)
            .filter(|f| !f.answered.load(Ordering::Relaxed));
        let peek = self.peek;
        async move {
            let sent = match first {
                None => fut.await,
                Some(first) => {
                    // Waiting is bounded by the connect timeout: past it the request goes
                    // anyway (its own connect then decides), so a slow first answer never
                    // makes a queued request's timer fire while nothing of it was written.
                    // Boxed, as the peek below: only an endpoint's first requests wait here.
                    let turn = tokio::time::timeout(connect, first.one_at_a_time.lock());
                    let _turn = Box::pin(turn).await.ok();
                    let sent = fut.await;
                    if sent.is_ok() {
                        first.answered.store(true, Ordering::Relaxed);
                    }
                    sent
                }
            };
            let response = sent.map_err(SendError::Reqwest)?;
            if peek == 0 {
                return Ok(response);
            }
            // Boxed, so the send's own state (moved with every call's future) stays as
            // small as without a classifier that reads bodies: only such policies pay.
            Box::pin(crate::peek::body(response, peek))
                .await
                .map_err(SendError::Reqwest)
        }
    }

    fn connect_timeout(&self, endpoint: usize) -> Option<Duration> {
        self.connect.get(endpoint).copied().flatten()
    }

    fn may_wait(&self, endpoint: usize) -> bool {
        use std::sync::atomic::Ordering;
        let first = self.first.get(endpoint).and_then(Option::as_ref);
        first.is_some_and(|f| !f.answered.load(Ordering::Relaxed))
    }
}

struct Inner {
    shared: Shared,
    http: HttpClients,
}

/// An HTTP client that fails over between the endpoints of its policy.
///
/// Cheap to clone (an `Arc`); every clone shares one engine, so endpoint health
/// (cooldown, breakers) and the retry budget are shared by all calls of the client.
/// Calls take a path (or an absolute URL) and follow the policy's URL mode: in complete
/// mode (the default) every attempt goes to the endpoint's URL as is; in base mode the
/// request's path and query are joined onto it.
///
/// ```no_run
/// use baton_core::{Endpoint, Policy};
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let client = baton_tokio::Client::new(
///     Policy::builder()
///         .endpoint(Endpoint::new("primary", "https://rpc-a.example/"))
///         .endpoint(Endpoint::new("backup", "https://rpc-b.example/")),
/// )?;
/// let resp = client
///     .post("/")
///     .header("content-type", "application/json")
///     .body(r#"{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}"#)
///     .send()
///     .await?;
/// println!("{} from {}", resp.status(), resp.endpoint());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("policy", self.policy())
            .field("reqwest_clients", &self.inner.http.clients.len())
            .finish()
    }
}

impl Client {
    baton_core::client_methods!(RequestBuilder, inner.shared.engine, Instant::now);

    /// Sends the policy's health request ([`ProbeRequest`](baton_core::ProbeRequest)) to
    /// the endpoint with `id`, under its breaker: an answer in the probe's `expect` set is
    /// a success, anything else a failure. Refused when the breaker is open and not yet
    /// due, or its probe slot is taken. It carries the endpoint's headers and, with a
    /// credential slot, its token; a refusal of the token invalidates it and the probe is
    /// sent once more with a refreshed one. No redirect is followed, no other retry made; the
    /// request goes through the endpoint's reqwest client, as its calls do.
    pub async fn probe(&self, id: &str) -> Result<ProbeResult, ProbeRefused> {
        let engine = self.engine().clone();
        let probe = engine.probe(id, Instant::now())?;
        let outcome = self.send_probe(&probe).await;
        let (now, wall) = (Instant::now(), Some(std::time::SystemTime::now()));
        Ok(match outcome {
            Ok((status, headers)) => probe.answered(status, &headers, wall, now),
            Err(e) => probe.finish(Err(e), now),
        })
    }

    /// Probes every endpoint that is due a probe now
    /// ([`Engine::due_probes`](baton_core::Engine::due_probes)), one after another: call
    /// it from your own scheduler (baton runs no timers).
    pub async fn probe_due(&self) -> Vec<ProbeResult> {
        let mut results = Vec::new();
        for id in self.engine().due_probes(Instant::now()) {
            results.extend(self.probe(&id).await.ok());
        }
        results
    }

    /// Sends a probe as an attempt is sent: with the endpoint's token when it has a
    /// credential slot (a refusal invalidates it, and the probe, which has no body, is
    /// sent once more with a refreshed one).
    async fn send_probe(&self, probe: &Probe<'_>) -> Result<(http::StatusCode, HeaderMap), String> {
        let url = reqwest::Url::parse(&probe.uri.to_string()).map_err(|e| e.to_string())?;
        let mut request = reqwest::Request::new(probe.method.clone(), url);
        *request.headers_mut() = probe.headers.clone();
        let endpoint = self
            .policy()
            .endpoint_index(probe.endpoint_id())
            .unwrap_or(0);
        let spare = request.try_clone();
        let at = tokio::time::Instant::now() + probe.connect_timeout + probe.timeout;
        let (shared, http) = (&self.inner.shared, &self.inner.http);
        match driver::authorized(shared, http, endpoint, request, spare, at).await {
            Ok(Ok(response)) => Ok((response.status(), response.headers().clone())),
            Ok(Err(SendError::Reqwest(e))) => Err(baton_core::scrub_urls(&e.to_string())),
            Ok(Err(SendError::Other(e))) => Err(baton_core::scrub_urls(&e.to_string())),
            Err(_) => Err("the probe timed out".to_string()),
        }
    }

    /// A request with `method` to `url` (a path such as `/v1/charges`, or an absolute URL).
    pub fn request(&self, method: Method, url: impl AsRef<str>) -> RequestBuilder {
        let (uri, error) = baton_core::request_target(url.as_ref());
        RequestBuilder {
            client: self.clone(),
            method,
            uri,
            headers: HeaderMap::new(),
            version: Version::default(),
            body: None,
            options: CallOptions::default(),
            buffer_limit: None,
            error,
        }
    }

    /// Runs a call for an `http::Request`. Call options may ride in its extensions (a
    /// [`CallOptions`] value); a buffered body (bytes, string) is replayable, a stream is
    /// sent once.
    ///
    /// ```no_run
    /// # async fn demo(client: baton_tokio::Client) -> Result<(), baton_tokio::Error> {
    /// let request = http::Request::post("/v1/charges")
    ///     .header("idempotency-key", "charge-42")
    ///     .body(r#"{"amount":100}"#)
    ///     .unwrap();
    /// let resp = client.execute(request).await?;
    /// # let _ = resp; Ok(()) }
    /// ```
    pub fn execute<B: Into<reqwest::Body>>(
        &self,
        request: http::Request<B>,
    ) -> impl Future<Output = Result<Response, Error>> + '_ {
        let (mut parts, body) = request.into_parts();
        let options = parts.extensions.remove::<CallOptions>().unwrap_or_default();
        let prepared = Prepared {
            head: parts,
            body: Body::from_reqwest(Some(body.into())),
            buffer_limit: None,
            invalid: None,
        };
        self.run(prepared, options)
    }

    /// Runs a call for a `reqwest::Request` with these options. A per-request reqwest
    /// timeout, if set, is used as the attempt timeout unless the options set one.
    pub fn execute_reqwest(
        &self,
        request: reqwest::Request,
        mut options: CallOptions,
    ) -> impl Future<Output = Result<Response, Error>> + '_ {
        let (prepared, timeout) = Prepared::from_reqwest(request);
        if options.attempt_timeout.is_none() {
            options.attempt_timeout = timeout;
        }
        self.run(prepared, options)
    }

    /// The driver's future of one call, returned as it is rather than awaited inside a
    /// future of its own (see [`driver::Owner`]).
    pub(crate) fn run(
        &self,
        prepared: Prepared,
        options: CallOptions,
    ) -> impl Future<Output = Result<Response, Error>> + '_ {
        driver::drive(self, prepared, options)
    }
}

/// A client's calls run on its own shared state and HTTP clients, and end in a
/// [`Response`]: owned by the future of [`RequestBuilder::send`], borrowed by
/// [`Client::execute`] (no reference count touched per call).
impl<C: std::borrow::Borrow<Client>> driver::Owner for C {
    type Transport = HttpClients;
    type Output = Response;
    fn shared(&self) -> &Shared {
        &self.borrow().inner.shared
    }
    fn transport(&self) -> &HttpClients {
        &self.borrow().inner.http
    }
    fn output(finished: driver::Finished) -> Response {
        finished.response()
    }
}

/// A request being built, in reqwest's style, plus baton's per-call options.
///
/// Invalid input (a bad URL or header) is reported when the request is sent, as an
/// [`Error::Call`] whose kind is "invalid call"; nothing is sent.
///
/// ```no_run
/// use std::time::Duration;
/// use baton_core::Permission;
///
/// # async fn demo(client: baton_tokio::Client) -> Result<(), baton_tokio::Error> {
/// let resp = client
///     .post("/v1/charges")
///     .idempotency_key("charge-42")
///     .deadline(Duration::from_secs(3))
///     .attempt_timeout(Duration::from_secs(1))
///     .body(r#"{"amount":100}"#)
///     .send()
///     .await?;
/// println!("may have executed: {}", resp.may_have_executed());
/// # Ok(()) }
/// ```
#[must_use = "a request does nothing until it is sent"]
pub struct RequestBuilder {
    client: Client,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    version: Version,
    body: Option<reqwest::Body>,
    options: CallOptions,
    buffer_limit: Option<usize>,
    error: Option<InvalidRequest>,
}

impl std::fmt::Debug for RequestBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestBuilder")
            .field("method", &self.method)
            .field("uri", &baton_core::Target(&self.uri))
            .field("version", &self.version)
            .field("headers", &baton_core::HeaderNames(&self.headers))
            .field("body", &self.body.as_ref().map(|_| "..."))
            .field("options", &self.options)
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl RequestBuilder {
    fn fail(mut self, why: impl Into<InvalidRequest>) -> Self {
        self.error.get_or_insert_with(|| why.into());
        self
    }

    /// Adds a header (appended: repeated names are kept). An invalid name or value fails
    /// the call before anything is sent, with an error that names the header (never its
    /// value, which may be a secret).
    pub fn header<K, V>(mut self, name: K, value: V) -> Self
    where
        K: std::fmt::Debug,
        HeaderName: TryFrom<K>,
        <HeaderName as TryFrom<K>>::Error: Into<http::Error>,
        HeaderValue: TryFrom<V>,
        <HeaderValue as TryFrom<V>>::Error: Into<http::Error>,
    {
        let shown = format!("{name:?}");
        let name = match HeaderName::try_from(name) {
            Ok(n) => n,
            Err(e) => return self.fail(format!("header name {shown}: {}", e.into())),
        };
        match HeaderValue::try_from(value) {
            Ok(v) => match baton_core::append_request_header(&mut self.headers, name, v) {
                Ok(()) => self,
                Err(e) => self.fail(e.to_string()),
            },
            Err(e) => self.fail(format!("header {name}: {}", e.into())),
        }
    }

    /// Adds these headers (replacing any of the same names).
    pub fn headers(mut self, headers: HeaderMap) -> Self {
        let mut last = None;
        for (name, value) in headers {
            if let Some(n) = name {
                self.headers.remove(&n);
                last = Some(n);
            }
            if let Some(n) = &last {
                if let Err(e) =
                    baton_core::append_request_header(&mut self.headers, n.clone(), value)
                {
                    return self.fail(e.to_string());
                }
            }
        }
        self
    }

    /// Sets a bearer `Authorization` header (marked sensitive). A per-endpoint header of the
    /// same name overrides it on that endpoint.
    pub fn bearer_auth(self, token: impl std::fmt::Display) -> Self {
        match HeaderValue::try_from(format!("Bearer {token}")) {
            Ok(mut v) => {
                v.set_sensitive(true);
                let mut s = self;
                s.headers.insert(AUTHORIZATION, v);
                s
            }
            Err(e) => self.fail(format!("bearer token: {e}")),
        }
    }

    /// Sets the body. Bytes and strings are replayable; a stream
    /// (`reqwest::Body::wrap_stream`, `reqwest::Body::wrap`) is sent once unless
    /// [`buffer_body`](Self::buffer_body) allows buffering it.
    pub fn body(mut self, body: impl Into<reqwest::Body>) -> Self {
        self.body = Some(body.into());
        self
    }

    /// Sets a JSON body and `Content-Type: application/json` (unless already set).
    #[cfg(feature = "json")]
    pub fn json<T: serde::Serialize + ?Sized>(mut self, value: &T) -> Self {
        let json = HeaderValue::from_static("application/json");
        match serde_json::to_vec(value) {
            Ok(v) => {
                self.headers
                    .entry(http::header::CONTENT_TYPE)
                    .or_insert(json);
                self.body(v)
            }
            Err(e) => self.fail(format!("json body: {e}")),
        }
    }

    /// Sets the HTTP version the call asks for: HTTP/1.0, HTTP/1.1 or HTTP/2 (any other is
    /// an invalid call: nothing is sent). HTTP/2 forces it on every attempt: an endpoint
    /// whose connection agreed HTTP/1.1 (an `http://` one without `http_version = "http2"`,
    /// or a server that chose `http/1.1`) refuses the attempt before writing it, an
    /// undelivered failure, so the call may fail over; like any transport failure it counts
    /// against that endpoint's breaker, so a client whose calls force HTTP/2 should point
    /// them at endpoints that speak it. The policy's `http_version` is the per-endpoint way
    /// to choose (SPEC 9).
    pub fn version(mut self, version: Version) -> Self {
        if ![Version::HTTP_10, Version::HTTP_11, Version::HTTP_2].contains(&version) {
            return self.fail(format!(
                "HTTP version {version:?}: baton-tokio sends HTTP/1.0, HTTP/1.1 and HTTP/2"
            ));
        }
        self.version = version;
        self
    }

    baton_core::call_option_setters!(options, buffer_limit, hedge);

    /// Opens this request as an event stream that fails over by `settings`, as
    /// [`baton_core::sse`] describes (bytes bodies only: each reconnection resends it).
    pub fn events(self, settings: baton_core::sse::StreamSettings) -> crate::EventStream {
        let parts = Parts {
            client: self.client,
            method: self.method,
            uri: self.uri,
            headers: self.headers,
            version: self.version,
            body: self.body,
            options: self.options,
            error: self.error,
        };
        crate::EventStream::new(parts, settings)
    }

    /// Runs the call. The future is the call's driver itself (no `async fn` layer around
    /// it moves its state into place on the first poll); it owns the client.
    // Inlined, so that the future (2,192 bytes) is built where its caller keeps it, not
    // built aside and copied there (callgrind, `callcost baton 2000`: 401 instructions a
    // call fewer: `memcpy` 426 fewer, the rest 25 more).
    #[inline]
    pub fn send(self) -> impl Future<Output = Result<Response, Error>> + 'static {
        let RequestBuilder {
            client,
            method,
            uri,
            headers,
            version,
            body,
            options,
            buffer_limit,
            error,
        } = self;
        let prepared = Prepared {
            head: baton_core::request_head(method, uri, headers, version),
            body: Body::from_reqwest(body),
            buffer_limit,
            invalid: error,
        };
        driver::drive(client, prepared, options)
    }
}

/// A request builder's parts, for the event stream that reuses them on every connection.
pub(crate) struct Parts {
    pub(crate) client: Client,
    pub(crate) method: Method,
    pub(crate) uri: Uri,
    pub(crate) headers: HeaderMap,
    pub(crate) version: Version,
    pub(crate) body: Option<reqwest::Body>,
    pub(crate) options: CallOptions,
    pub(crate) error: Option<InvalidRequest>,
}

/// Every endpoint URL as reqwest reads it (the WHATWG URL rules): one the policy accepts
/// but reqwest cannot parse (`http://256.0.0.1/`, a host that reads as an IPv4 address out
/// of range) is refused when the client is built. Found only when sent, every call ended
/// there as invalid, and none failed over to the endpoints after it.
fn check_urls(policy: &Policy) -> Result<(), BuildError> {
    for e in policy.endpoints() {
        if let Err(why) = reqwest::Url::parse(e.url()) {
            return Err(BuildError::Config(baton_core::ConfigError::InvalidUrl {
                id: e.id().to_string(),
                url: baton_core::redact_url(e.url()),
                reason: format!("reqwest cannot use it: {why}"),
            }));
        }
    }
    Ok(())
}
