//! Configuration: endpoints, the policy, and their validation (SPEC 1, 5 and 8).
//!
//! Every setting is checked when the policy is built, and a bad one is reported with the
//! setting's name and the value. Nothing here panics on user input. The plain-data part of
//! the policy is [`Settings`] (serde-able behind the `serde` feature); the functions a user
//! may plug in (permission, eligibility, response classifier, event sink) live beside it.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::{Method, StatusCode, Uri};

use crate::backoff::{Backoff, BackoffOverride, Jitter};
use crate::event::Event;
use crate::limit::{Limiter, RateLimit};
use crate::permission::PermissionOverride;
use crate::redirect::CrossOrigin;
use crate::status::StatusSet;

/// Most endpoints one policy may hold. Per-call state is kept in fixed-size bitsets so
/// that a call allocates nothing on the healthy path; 64 is far above the "small, ordered
/// set of providers" baton is for.
pub const MAX_ENDPOINTS: usize = 64;

/// Most bytes of a body the response classifier may read (`classify_body`: 16 MiB).
pub const MAX_CLASSIFY_BODY: usize = 16 << 20;
/// Most redirects one attempt follows (`max_redirects`).
pub const MAX_REDIRECTS: u32 = 32;

/// Longest duration any setting accepts (10 years); anything longer is surely a unit
/// mistake, and the cap keeps all time arithmetic far from overflow.
pub const MAX_DURATION: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// Why a policy or an endpoint could not be built. Each variant names the setting and the
/// offending value.
///
/// ```
/// use std::time::Duration;
/// use baton_core::{ConfigError, Endpoint, Policy};
///
/// let e = Policy::builder()
///     .endpoint(Endpoint::new("a", "https://a.example/"))
///     .endpoint(Endpoint::new("a", "https://b.example/"))
///     .build()
///     .unwrap_err();
/// assert_eq!(e, ConfigError::DuplicateId { id: "a".into() });
/// assert_eq!(e.to_string(), r#"duplicate endpoint id "a""#);
///
/// let e = Policy::builder()
///     .endpoint(Endpoint::new("a", "https://a.example/"))
///     .attempt_timeout(Duration::ZERO)
///     .build()
///     .unwrap_err();
/// assert!(matches!(e, ConfigError::InvalidSetting { setting: "attempt_timeout", .. }));
/// assert_eq!(e.to_string(), "setting `attempt_timeout` = 0ns: a timeout must be greater than zero");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The policy has no endpoints.
    #[error("no endpoints configured: a policy needs at least one")]
    NoEndpoints,
    /// More than [`MAX_ENDPOINTS`] endpoints.
    #[error("{count} endpoints configured; at most {max} are supported")]
    TooManyEndpoints {
        /// How many were configured.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// A per-endpoint setting is out of range (`error` names the setting). Its text holds
    /// that error's, so it is not also its `source()`.
    #[error("endpoint {id:?}: {error}")]
    Endpoint {
        /// The endpoint's id.
        id: String,
        /// What is wrong with its setting.
        error: Box<ConfigError>,
    },
    /// An endpoint id is empty.
    #[error("endpoint #{index} has an empty id")]
    EmptyId {
        /// Position of the endpoint (0-based).
        index: usize,
    },
    /// Two endpoints share an id.
    #[error("duplicate endpoint id {id:?}")]
    DuplicateId {
        /// The repeated id.
        id: String,
    },
    /// An endpoint URL is not an absolute `http`/`https` URL with a host and no fragment.
    #[error("endpoint {id:?}: unusable url {url:?}: {reason}")]
    InvalidUrl {
        /// The endpoint's id.
        id: String,
        /// The URL as given, reduced to `scheme://host:port` (its userinfo, path and query
        /// may hold secrets).
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A header name or value in the configuration is not valid HTTP.
    #[error("{setting}: invalid header {name:?}: {reason}")]
    InvalidHeader {
        /// Where the header was configured (an endpoint id or a setting name).
        setting: String,
        /// The header name as given.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A proxy variable of the environment is not a usable proxy URL.
    #[error("environment variable {variable} = {value:?}: {reason}")]
    InvalidProxy {
        /// The variable (`HTTP_PROXY`, `HTTPS_PROXY` or `ALL_PROXY`).
        variable: &'static str,
        /// Its value, reduced to `scheme://host:port`.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An endpoint has a credential slot but the client has no token provider: its calls
    /// would go out without their token (SPEC 9).
    #[error(
        "endpoint {endpoint:?} has a credential but the client has no token_provider to fetch its token"
    )]
    NoTokenProvider {
        /// The endpoint's id.
        endpoint: String,
    },
    /// A numeric or duration setting is out of range, or settings contradict each other.
    #[error("setting `{setting}` = {value}: {reason}")]
    InvalidSetting {
        /// The setting's name, as in [`Settings`].
        setting: &'static str,
        /// The offending value.
        value: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

fn invalid(setting: &'static str, value: impl fmt::Debug, reason: &'static str) -> ConfigError {
    ConfigError::InvalidSetting {
        setting,
        value: format!("{value:?}"),
        reason,
    }
}

/// One provider URL, with its id, optional idempotency group and per-endpoint settings.
///
/// Per-endpoint settings that are unset inherit the client's defaults. Problems (a bad URL,
/// a bad header) are reported when the policy is built, with the endpoint's id.
///
/// ```
/// use std::time::Duration;
/// use baton_core::Endpoint;
/// let e = Endpoint::new("eu", "https://eu.pay.example/v1")
///     .group("pay")
///     .header("authorization", "Bearer eu-secret")
///     .attempt_timeout(Duration::from_secs(10));
/// assert_eq!(e.id(), "eu");
/// assert_eq!(e.group_name(), Some("pay"));
/// assert_eq!(e.uri().host(), Some("eu.pay.example"));
/// ```
#[derive(Clone)]
pub struct Endpoint {
    id: String,
    url: String,
    uri: Uri,
    url_error: Option<String>,
    group: Option<String>,
    tier: Option<u32>,
    weight: u32,
    connect_timeout: Option<Duration>,
    attempt_timeout: Option<Duration>,
    attempts_per_endpoint: Option<u32>,
    backoff: Option<BackoffOverride>,
    headers: HeaderMap,
    /// The `authorization` header came from the URL's userinfo (an explicit one replaces
    /// it).
    basic_from_url: bool,
    header_error: Option<(String, String)>,
    /// A credential slot refreshed by the adapter's token provider (SPEC 9).
    credential: Option<crate::credential::CredentialSettings>,
    /// This endpoint's HTTP version (else the policy's).
    http_version: Option<crate::HttpVersion>,
    /// This endpoint's TLS files, over the policy's.
    tls: crate::Tls,
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Header values are credentials more often than not: show names only.
        f.debug_struct("Endpoint")
            .field("id", &self.id)
            .field(
                "url",
                &format_args!("{}", crate::redact::redact_url(&self.url)),
            )
            .field("group", &self.group)
            .field("connect_timeout", &self.connect_timeout)
            .field("attempt_timeout", &self.attempt_timeout)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("http_version", &self.http_version)
            .field("tls", &self.tls)
            .finish()
    }
}

fn check_url(url: &str) -> Result<Uri, String> {
    if url.contains('#') {
        return Err("it has a fragment (#...), which is never sent to a server".into());
    }
    // The parser's message never quotes the URL (which may hold a key).
    let uri: Uri = url
        .parse()
        .map_err(|e: http::uri::InvalidUri| e.to_string())?;
    match uri.scheme_str() {
        Some("http") | Some("https") => {}
        Some(other) => return Err(format!("scheme {other:?} is not http or https")),
        None => return Err("it is not absolute (no http:// or https://)".into()),
    }
    match uri.host() {
        Some(h) if !h.is_empty() => {}
        _ => return Err("it has no host".into()),
    }
    if let Some(authority) = uri.authority() {
        let host_port = authority
            .as_str()
            .rsplit_once('@')
            .map_or(authority.as_str(), |(_, hp)| hp);
        let port = match host_port.rfind(']') {
            Some(end) => host_port[end + 1..].strip_prefix(':'),
            None => host_port.rsplit_once(':').map(|(_, p)| p),
        };
        if let Some(port) = port {
            match port.parse::<u32>() {
                Ok(1..=65535) => {}
                _ => return Err(format!("port {port:?} is outside 1-65535")),
            }
        }
    }
    Ok(uri)
}

/// Splits the userinfo off an endpoint URL (SPEC 3): `user:password@` becomes the
/// endpoint's `Authorization: Basic` credential, and the URL the adapters see has none.
fn split_userinfo(uri: Uri) -> (Uri, Option<HeaderValue>) {
    let Some(authority) = uri.authority() else {
        return (uri, None);
    };
    let Some((userinfo, host)) = authority.as_str().rsplit_once('@') else {
        return (uri, None);
    };
    let value = Some(basic_credential(userinfo));
    let mut parts = uri.clone().into_parts();
    parts.authority = http::uri::Authority::try_from(host).ok();
    match Uri::from_parts(parts) {
        Ok(bare) => (bare, value),
        Err(_) => (uri, value),
    }
}

/// `Basic base64(user:password)` from URL userinfo (percent-decoded, RFC 3986).
pub(crate) fn basic_credential(userinfo: &str) -> HeaderValue {
    let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
    let mut credential = percent_decode(user);
    credential.push(b':');
    credential.extend(percent_decode(password));
    // Base64 is always a valid header value.
    HeaderValue::try_from(format!("Basic {}", base64(&credential)))
        .unwrap_or_else(|_| HeaderValue::from_static("Basic"))
}

fn percent_decode(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                out.push((hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0)) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

fn base64(data: &[u8]) -> String {
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for k in 0..4 {
            if k <= chunk.len() {
                out.push(TABLE[(n >> (18 - 6 * k) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

impl Endpoint {
    /// An endpoint with `id` and `url`; both are checked when the policy is built.
    pub fn new(id: impl Into<String>, url: impl Into<String>) -> Self {
        let mut url = url.into();
        let mut headers = HeaderMap::new();
        let mut basic_from_url = false;
        let (uri, url_error) = match check_url(&url) {
            Ok(u) => {
                let (bare, basic) = split_userinfo(u);
                if let Some(mut value) = basic {
                    value.set_sensitive(true);
                    headers.insert(http::header::AUTHORIZATION, value);
                    basic_from_url = true;
                    url = bare.to_string();
                }
                (bare, None)
            }
            Err(e) => (Uri::default(), Some(e)),
        };
        Endpoint {
            id: id.into(),
            url,
            uri,
            url_error,
            group: None,
            tier: None,
            weight: 1,
            connect_timeout: None,
            attempt_timeout: None,
            attempts_per_endpoint: None,
            backoff: None,
            headers,
            basic_from_url,
            header_error: None,
            credential: None,
            http_version: None,
            tls: crate::Tls::default(),
        }
    }

    /// Gives the endpoint a credential slot (SPEC 9): every attempt to it carries a token
    /// from the client's token provider, refreshed ahead of expiry, once per 401 of the
    /// current token, and never sent to another endpoint. See
    /// [`credential`](crate::credential). With a credential anywhere in the policy, a 401
    /// (and a 403 with `refresh_on_403`) is a refusal: it triggers and counts as not
    /// processed, so the call fails over where permitted after the one refresh; the
    /// endpoint that refused gets no further attempt in the call.
    pub fn credential(mut self, settings: crate::credential::CredentialSettings) -> Self {
        self.credential = Some(settings);
        self
    }

    /// The endpoint's credential settings, when it has a slot.
    pub fn credential_settings(&self) -> Option<&crate::credential::CredentialSettings> {
        self.credential.as_ref()
    }

    /// Declares the idempotency group (SPEC 1.1): endpoints of one group share
    /// idempotency state, so a keyed call repeated within the group is de-duplicated.
    pub fn group(mut self, name: impl Into<String>) -> Self {
        self.group = Some(name.into());
        self
    }

    /// A header sent on every attempt to this endpoint only (credentials). It overrides a
    /// caller header of the same name and never reaches another endpoint.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        match (HeaderName::try_from(name), HeaderValue::try_from(value)) {
            (Ok(n), Ok(_))
                if crate::limits::is_framing_header(n.as_str()) || n == http::header::HOST =>
            {
                self.header_error.get_or_insert_with(|| {
                    (
                        name.to_string(),
                        "it frames the message (or is the Host rule's); the HTTP client sets it"
                            .into(),
                    )
                });
            }
            (Ok(_), Ok(_)) if self.headers.len() >= crate::limits::MAX_ENDPOINT_HEADERS => {
                self.header_error.get_or_insert_with(|| {
                    (
                        name.to_string(),
                        format!(
                            "more than {} headers on one endpoint",
                            crate::limits::MAX_ENDPOINT_HEADERS
                        ),
                    )
                });
            }
            (Ok(n), Ok(mut v)) => {
                v.set_sensitive(true);
                if self.basic_from_url && n == http::header::AUTHORIZATION {
                    self.headers.remove(&n);
                    self.basic_from_url = false;
                }
                self.headers.append(n, v);
            }
            (Err(e), _) => {
                self.header_error
                    .get_or_insert_with(|| (name.to_string(), e.to_string()));
            }
            (_, Err(e)) => {
                self.header_error
                    .get_or_insert_with(|| (name.to_string(), e.to_string()));
            }
        }
        self
    }

    /// This endpoint's connect timeout (else the policy's).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = Some(timeout);
        self
    }

    /// This endpoint's attempt timeout (else the policy's).
    pub fn attempt_timeout(mut self, timeout: Duration) -> Self {
        self.attempt_timeout = Some(timeout);
        self
    }

    /// This endpoint's attempts per round (else the call's or the policy's; a call that
    /// sets its own `attempts_per_endpoint` overrides every endpoint's).
    pub fn attempts_per_endpoint(mut self, n: u32) -> Self {
        self.attempts_per_endpoint = Some(n);
        self
    }

    /// The backoff before a retry at this endpoint, or before a new round that starts
    /// here: a whole [`Backoff`], or a [`BackoffOverride`] whose unset settings inherit
    /// the policy's.
    pub fn backoff(mut self, backoff: impl Into<BackoffOverride>) -> Self {
        self.backoff = Some(backoff.into());
        self
    }

    /// The endpoint's priority tier (lower goes first). Without one, an endpoint is a
    /// tier of its own, placed as if its tier were its index in the list: it is never
    /// shuffled with endpoints that name that number, and goes before them or after them
    /// by list position.
    ///
    /// ```
    /// use baton_core::{Endpoint, Policy};
    /// let policy = Policy::builder()
    ///     .endpoint(Endpoint::new("a", "https://a.example/").tier(0).weight(2))
    ///     .endpoint(Endpoint::new("b", "https://b.example/").tier(0))
    ///     .endpoint(Endpoint::new("backup", "https://c.example/").tier(1))
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(policy.endpoints()[0].weight_of(), 2);
    /// ```
    pub fn tier(mut self, tier: u32) -> Self {
        self.tier = Some(tier);
        self
    }

    /// The endpoint's weight within its tier (default 1, at most 1,000,000): a call's
    /// first endpoint in the tier is drawn with probability weight / tier total, and
    /// failover goes on through the rest of the tier by weight, then to the next tier.
    pub fn weight(mut self, weight: u32) -> Self {
        self.weight = weight;
        self
    }

    /// This endpoint's HTTP version (else the policy's `http_version`; SPEC 9).
    ///
    /// ```
    /// use baton_core::{Endpoint, HttpVersion, Policy};
    /// let policy = Policy::builder()
    ///     .endpoint(Endpoint::new("push", "https://push.example/").http_version(HttpVersion::Http2))
    ///     .endpoint(Endpoint::new("other", "https://other.example/"))
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(policy.http_version_for(0), HttpVersion::Http2);
    /// assert_eq!(policy.http_version_for(1), HttpVersion::Auto);
    /// ```
    pub fn http_version(mut self, version: crate::HttpVersion) -> Self {
        self.http_version = Some(version);
        self
    }

    /// This endpoint's TLS files, over the policy's key by key (SPEC 9): its own trusted
    /// certificates, or a client identity presented only on its connections.
    ///
    /// ```
    /// use baton_core::{Endpoint, Policy, Tls};
    /// let bank = Tls {
    ///     client_cert: Some("client.pem".into()),
    ///     client_key: Some("client.key".into()),
    ///     ..Tls::default()
    /// };
    /// let policy = Policy::builder()
    ///     .endpoint(Endpoint::new("bank", "https://bank.example/").tls(bank))
    ///     .build()
    ///     .unwrap();
    /// assert!(policy.tls_for(0).client_cert.is_some());
    /// ```
    pub fn tls(mut self, tls: crate::Tls) -> Self {
        self.tls = tls;
        self
    }

    /// This endpoint's own HTTP version setting, if any.
    pub fn http_version_override(&self) -> Option<crate::HttpVersion> {
        self.http_version
    }

    /// This endpoint's own TLS files (unset keys inherit the policy's).
    pub fn tls_override(&self) -> &crate::Tls {
        &self.tls
    }

    /// The endpoint's tier, if set.
    pub fn tier_of(&self) -> Option<u32> {
        self.tier
    }

    /// The endpoint's weight.
    pub fn weight_of(&self) -> u32 {
        self.weight
    }

    /// The endpoint's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The URL as configured, without its userinfo (which became the endpoint's
    /// `Authorization: Basic` header). Its path and query may hold a key: never log it,
    /// show [`Origin`](crate::Origin) of [`uri`](Self::uri) instead.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The parsed URL (valid once the endpoint is part of a built [`Policy`]).
    pub fn uri(&self) -> &Uri {
        &self.uri
    }

    /// The idempotency group, if declared.
    pub fn group_name(&self) -> Option<&str> {
        self.group.as_deref()
    }

    /// Per-endpoint headers (values are marked sensitive).
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// The per-endpoint connect timeout, if set.
    pub fn connect_timeout_override(&self) -> Option<Duration> {
        self.connect_timeout
    }

    /// The per-endpoint attempt timeout, if set.
    pub fn attempt_timeout_override(&self) -> Option<Duration> {
        self.attempt_timeout
    }

    /// The endpoint's own backoff, when it overrides the policy's.
    pub(crate) fn backoff_override(&self) -> Option<&BackoffOverride> {
        self.backoff.as_ref()
    }
}

/// How an endpoint URL combines with the request's own path and query.
///
/// ```
/// use baton_core::UrlMode;
/// assert_eq!(UrlMode::default(), UrlMode::Complete);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum UrlMode {
    /// The endpoint URL is the whole destination; the request's path is ignored
    /// (JSON-RPC style; the default).
    #[default]
    Complete,
    /// The endpoint URL is a base: base path + request path, base query first then the
    /// request's (REST style).
    Base,
}

/// What to do with endpoints that are unavailable (breaker open, probe slots taken, or
/// `not_before` in the future).
///
/// ```
/// use baton_core::Unavailable;
/// assert_eq!(Unavailable::default(), Unavailable::TryLast);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Unavailable {
    /// Try them after the available ones, in the same order (the default: a total outage
    /// degrades to plain single-endpoint behaviour instead of failing with no request).
    #[default]
    TryLast,
    /// Skip them (each skip is an event).
    Skip,
}

/// When a breaker trips (SPEC 2.5).
///
/// ```
/// use baton_core::BreakerRule;
/// assert_eq!(BreakerRule::default(), BreakerRule::Consecutive { failures: 3 });
/// let rate = BreakerRule::failure_rate();
/// assert!(matches!(rate, BreakerRule::FailureRate { window: 20, min_calls: 10, .. }));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "snake_case", deny_unknown_fields)
)]
pub enum BreakerRule {
    /// Open after this many breaker failures in a row (default 3).
    Consecutive {
        /// Failures in a row that trip the breaker.
        #[cfg_attr(feature = "serde", serde(default = "defaults::failures"))]
        failures: u32,
    },
    /// Open when, over the last `window` recorded attempts (at least `min_calls`), the
    /// share of failures reaches `rate`. An attempt slower than `slow_call` counts as a
    /// failure even when it succeeded.
    FailureRate {
        /// Attempts remembered (default 20).
        #[cfg_attr(feature = "serde", serde(default = "defaults::window"))]
        window: u32,
        /// Fewest recorded attempts before the rule may trip (default 10).
        #[cfg_attr(feature = "serde", serde(default = "defaults::min_calls"))]
        min_calls: u32,
        /// Failure share that trips, in `(0, 1]` (default 0.5).
        #[cfg_attr(feature = "serde", serde(default = "defaults::rate"))]
        rate: f64,
        /// Attempts slower than this count as failures (default off).
        #[cfg_attr(feature = "serde", serde(default, with = "serde_opt_duration"))]
        slow_call: Option<Duration>,
    },
    /// Never trip.
    Disabled,
}

impl Default for BreakerRule {
    fn default() -> Self {
        BreakerRule::Consecutive {
            failures: defaults::failures(),
        }
    }
}

impl BreakerRule {
    /// The failure-rate rule with its defaults (last 20, at least 10, 50 %, slow calls off).
    pub fn failure_rate() -> Self {
        BreakerRule::FailureRate {
            window: defaults::window(),
            min_calls: defaults::min_calls(),
            rate: defaults::rate(),
            slow_call: None,
        }
    }
}

/// SPEC 8's breaker defaults, also for a rule's keys left out of a TOML table (an empty
/// `[policy.breaker.rule.failure_rate]` is the failure-rate rule "when chosen").
mod defaults {
    pub(super) fn failures() -> u32 {
        3
    }
    pub(super) fn window() -> u32 {
        20
    }
    pub(super) fn min_calls() -> u32 {
        10
    }
    pub(super) fn rate() -> f64 {
        0.5
    }
}

/// Circuit-breaker settings, per endpoint, shared by all calls of a client.
///
/// ```
/// use std::time::Duration;
/// use baton_core::Breaker;
/// let b = Breaker::default();
/// assert_eq!(b.open, Duration::from_secs(30));
/// assert_eq!(b.max_open, Duration::from_secs(300));
/// assert_eq!(b.probe_quota, 1);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct Breaker {
    /// When to trip.
    pub rule: BreakerRule,
    /// Base open time (default 30 s).
    #[cfg_attr(feature = "serde", serde(with = "serde_duration"))]
    pub open: Duration,
    /// Factor applied to the open time after each failed probe (default 2).
    pub open_growth: f64,
    /// Longest open time (default 5 min).
    #[cfg_attr(feature = "serde", serde(with = "serde_duration"))]
    pub max_open: Duration,
    /// Calls admitted while half-open (default 1).
    pub probe_quota: u32,
}

impl Default for Breaker {
    fn default() -> Self {
        Breaker {
            rule: BreakerRule::default(),
            open: Duration::from_secs(30),
            open_growth: 2.0,
            max_open: Duration::from_secs(300),
            probe_quota: 1,
        }
    }
}

/// Retry budget settings (SPEC 2.7).
///
/// ```
/// use std::time::Duration;
/// use baton_core::Budget;
/// let b = Budget::default();
/// assert_eq!((b.ratio, b.window, b.min_per_sec), (0.2, Duration::from_secs(10), 10.0));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct Budget {
    /// Tokens deposited by each first attempt (default 0.2).
    pub ratio: f64,
    /// How long a deposit (and a withdrawal) counts (default 10 s).
    #[cfg_attr(feature = "serde", serde(with = "serde_duration"))]
    pub window: Duration,
    /// Reserve of tokens per second always available on top (default 10).
    pub min_per_sec: f64,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            ratio: 0.2,
            window: Duration::from_secs(10),
            min_per_sec: 10.0,
        }
    }
}

/// Hedging settings (SPEC 2.8): reads only.
///
/// ```
/// use std::time::Duration;
/// use baton_core::Hedge;
/// let h = Hedge::after(Duration::from_millis(150));
/// assert_eq!(h.max_in_flight, 2);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct Hedge {
    /// Delay after which the next endpoint is started while earlier attempts run.
    #[cfg_attr(feature = "serde", serde(with = "serde_duration"))]
    pub after: Duration,
    /// Most attempts of one call in flight at once (default 2).
    #[cfg_attr(feature = "serde", serde(default = "default_in_flight"))]
    pub max_in_flight: u32,
}

#[cfg(feature = "serde")]
fn default_in_flight() -> u32 {
    2
}

impl Hedge {
    /// Hedging after `after`, with at most two attempts in flight.
    pub fn after(after: Duration) -> Self {
        Hedge {
            after,
            max_in_flight: 2,
        }
    }
}

/// The plain-data part of a policy. Every field has the default of SPEC 8.
///
/// ```
/// use std::time::Duration;
/// use baton_core::Settings;
/// let s = Settings { max_attempts: Some(5), ..Settings::default() };
/// assert_eq!(s.connect_timeout, Duration::from_secs(5));
/// assert!(s.trigger_statuses.contains_code(503));
/// ```
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct Settings {
    /// How endpoint URLs combine with request paths.
    pub url_mode: UrlMode,
    /// Attempts per endpoint per round (default: 1 with several usable endpoints, 3 with one;
    /// at most 255).
    pub attempts_per_endpoint: Option<u32>,
    /// Attempts at a pinned endpoint (default: `attempts_per_endpoint` where it is set,
    /// the call's, else the endpoint's own, else this one; else 3; at most 255).
    pub pinned_attempts: Option<u32>,
    /// Cap on a call's attempts (default: one round; at most 10000).
    pub max_attempts: Option<u32>,
    /// Unavailable endpoints: tried last or skipped.
    pub unavailable: Unavailable,
    /// Backoff between attempts at one endpoint and between rounds.
    pub backoff: Backoff,
    /// Longest `Retry-After` the call will wait for (default 30 s).
    #[cfg_attr(feature = "serde", serde(with = "serde_duration"))]
    pub max_retry_after: Duration,
    /// Connect timeout per attempt (default 5 s).
    #[cfg_attr(feature = "serde", serde(with = "serde_duration"))]
    pub connect_timeout: Duration,
    /// Attempt timeout, from sending to the end of the response headers (default 30 s).
    #[cfg_attr(feature = "serde", serde(with = "serde_duration"))]
    pub attempt_timeout: Duration,
    /// Deadline for the whole call (default none).
    #[cfg_attr(feature = "serde", serde(with = "serde_opt_duration"))]
    pub deadline: Option<Duration>,
    /// Statuses that trigger another attempt for calls whose permissions are `Always`
    /// (default `{502, 503, 504}`).
    #[cfg_attr(feature = "serde", serde(with = "serde_status_set"))]
    pub trigger_statuses: StatusSet,
    /// Statuses that trigger another attempt for calls relying on an idempotency key
    /// (default `{503}`).
    #[cfg_attr(feature = "serde", serde(with = "serde_status_set"))]
    pub key_trigger_statuses: StatusSet,
    /// Statuses by which a provider promises it did nothing (default `{429}`).
    #[cfg_attr(feature = "serde", serde(with = "serde_status_set"))]
    pub not_processed: StatusSet,
    /// Circuit breaker.
    pub breaker: Breaker,
    /// Retry budget (default on; `None` turns it off; in files: `budget = false`).
    #[cfg_attr(feature = "serde", serde(with = "serde_budget"))]
    pub budget: Option<Budget>,
    /// Hedging (default off).
    pub hedge: Option<Hedge>,
    /// Outbound rate limiting (default off).
    pub rate_limit: Option<RateLimit>,
    /// Request-id header (default `x-request-id`).
    pub request_id_header: String,
    /// Idempotency-key header (default `idempotency-key`).
    pub idempotency_key_header: String,
    /// Attempt-number header (default off).
    pub attempt_header: Option<String>,
    /// Reading a response body through baton's response: at most this long from the end
    /// of the headers to the last byte (default none: only the call's deadline bounds
    /// it). Past it the read fails with a body error; the report (and its
    /// `may_have_executed`) is the call's.
    #[cfg_attr(feature = "serde", serde(with = "serde_opt_duration"))]
    pub body_timeout: Option<Duration>,
    /// Whether the adapters honour `HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY` and `NO_PROXY`
    /// (SPEC 3; default true).
    pub env_proxies: bool,
    /// Bytes of a response body the response classifier may read (default 0: it sees the
    /// head only; at most [`MAX_CLASSIFY_BODY`]). With a limit, an adapter that supports it
    /// (baton-tokio's client and middleware; the other adapters hand the classifier no
    /// body) reads a body of at most that many bytes within the attempt's time
    /// before the engine decides, and hands it to the classifier
    /// ([`ResponseView::body`]); a longer body stays unread and the classifier sees none.
    /// What JSON-RPC providers need: their outages come as errors in a 200's body.
    pub classify_body: usize,
    /// Redirects followed within one attempt (SPEC 3; default 10, at most
    /// [`MAX_REDIRECTS`]; 0 returns every 3xx as the answer).
    pub max_redirects: u32,
    /// Redirects to another origin than the endpoint's: followed without the endpoint's
    /// headers (`follow`, the default) or returned as the answer (`return`).
    pub cross_origin_redirects: CrossOrigin,
    /// Seed of the engine's random source (jitter, generated request ids), for runs that
    /// must repeat exactly (tests, simulations): every call then draws from one sequence.
    /// Unset (the default), adapters seed each engine from the OS
    /// ([`Engine::with_entropy`](crate::Engine::with_entropy)) and each thread's calls draw
    /// from their own sequence, so concurrent calls share no counter. In TOML, a seed
    /// above 2^63 - 1 (no TOML integer holds it) is written, and read, as text.
    #[cfg_attr(feature = "serde", serde(default, with = "serde_seed"))]
    pub seed: Option<u64>,
    /// The health request a probe sends (`[policy.probe]`; default `GET` of the endpoint
    /// URL, healthy on 2xx).
    pub probe: ProbeRequest,
    /// The HTTP version of every endpoint's connections (SPEC 9; default `auto`: ALPN for
    /// https, HTTP/1.1 for http); an endpoint may set its own.
    pub http_version: crate::HttpVersion,
    /// TLS trust and identity files of every endpoint (`[policy.tls]`, SPEC 9); an
    /// endpoint's own table overrides key by key.
    pub tls: crate::Tls,
}

/// One sink that delivers every event to `first`, then to `then` (either may be absent):
/// the one meaning of several sinks on every adapter (the policy's, the client's, the
/// call's).
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use baton_core::{join_sinks, EventSink};
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let (a, b) = (seen.clone(), seen.clone());
/// let first: EventSink = Arc::new(move |_| a.lock().unwrap().push("first"));
/// let then: EventSink = Arc::new(move |_| b.lock().unwrap().push("then"));
/// assert!(join_sinks(None, None).is_none());
/// let both = join_sinks(Some(first), Some(then)).unwrap();
/// let event = baton_core::Event {
///     request_id: "r",
///     idempotency_key: None,
///     at: std::time::Instant::now(),
///     kind: baton_core::EventKind::NotReplayable,
/// };
/// both(&event);
/// assert_eq!(*seen.lock().unwrap(), ["first", "then"]);
/// ```
pub fn join_sinks(first: Option<EventSink>, then: Option<EventSink>) -> Option<EventSink> {
    match (first, then) {
        (Some(first), Some(then)) => Some(Arc::new(move |e: &Event<'_>| {
            first(e);
            then(e);
        })),
        (first, then) => first.or(then),
    }
}

/// The health request a probe sends to an endpoint
/// ([`Engine::probe`](crate::Engine::probe)).
///
/// ```
/// use baton_core::ProbeRequest;
/// let p = ProbeRequest::default();
/// assert_eq!(p.method, "GET");
/// assert!(p.path.is_none());
/// assert!(p.expect.contains_code(204) && !p.expect.contains_code(301));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct ProbeRequest {
    /// The method (default `GET`).
    pub method: String,
    /// Path and query sent to the endpoint's host instead of the endpoint URL's own, such
    /// as `/health` (default: the endpoint URL as it is).
    pub path: Option<String>,
    /// Statuses that mean healthy (default 200-299); any other answer, and any failure to
    /// get one, is a failure for the breaker.
    #[cfg_attr(feature = "serde", serde(with = "serde_status_set"))]
    pub expect: StatusSet,
}

impl Default for ProbeRequest {
    fn default() -> Self {
        let mut expect = StatusSet::new();
        for code in 200..300 {
            expect.insert(code);
        }
        ProbeRequest {
            method: "GET".into(),
            path: None,
            expect,
        }
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            url_mode: UrlMode::Complete,
            attempts_per_endpoint: None,
            pinned_attempts: None,
            max_attempts: None,
            unavailable: Unavailable::TryLast,
            backoff: Backoff::default(),
            max_retry_after: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            attempt_timeout: Duration::from_secs(30),
            deadline: None,
            trigger_statuses: StatusSet::from_codes(&[502, 503, 504]),
            key_trigger_statuses: StatusSet::from_codes(&[503]),
            not_processed: StatusSet::from_codes(&[429]),
            breaker: Breaker::default(),
            budget: Some(Budget::default()),
            hedge: None,
            rate_limit: None,
            request_id_header: "x-request-id".into(),
            idempotency_key_header: "idempotency-key".into(),
            attempt_header: None,
            body_timeout: None,
            env_proxies: true,
            classify_body: 0,
            max_redirects: 10,
            cross_origin_redirects: CrossOrigin::Follow,
            seed: None,
            probe: ProbeRequest::default(),
            http_version: crate::HttpVersion::Auto,
            tls: crate::Tls::default(),
        }
    }
}

/// What a call's request looks like to the functions a user plugs in: method, URL and
/// headers, never the body.
///
/// ```
/// use baton_core::RequestInfo;
/// let headers = http::HeaderMap::new();
/// let uri: http::Uri = "/v1/charges".parse().unwrap();
/// let info = RequestInfo { method: &http::Method::POST, uri: &uri, headers: &headers };
/// assert_eq!(info.uri.path(), "/v1/charges");
/// ```
#[derive(Debug, Clone, Copy)]
pub struct RequestInfo<'a> {
    /// The request method.
    pub method: &'a Method,
    /// The request URL as the caller gave it (often only a path).
    pub uri: &'a Uri,
    /// The caller's headers.
    pub headers: &'a HeaderMap,
}

/// What the engine reads of a request head as `http` keeps it.
///
/// ```
/// use baton_core::RequestInfo;
/// let (head, ()) = http::Request::post("/v1/charges").body(()).unwrap().into_parts();
/// assert_eq!(RequestInfo::from(&head).method, http::Method::POST);
/// ```
impl<'a> From<&'a http::request::Parts> for RequestInfo<'a> {
    fn from(head: &'a http::request::Parts) -> Self {
        RequestInfo {
            method: &head.method,
            uri: &head.uri,
            headers: &head.headers,
        }
    }
}

/// What the optional response classifier sees (SPEC 2.3).
///
/// ```
/// use baton_core::{ResponseView, Verdict};
/// fn classify(r: &ResponseView<'_>) -> Option<Verdict> {
///     // A DELETE answered 404 after an ambiguous attempt: the first one did the work.
///     (r.method == http::Method::DELETE && r.status == 404 && r.earlier_ambiguous)
///         .then_some(Verdict::Success)
/// }
/// # let _ = classify;
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ResponseView<'a> {
    /// The call's method.
    pub method: &'a Method,
    /// The endpoint that answered.
    pub endpoint: &'a Endpoint,
    /// The response status.
    pub status: StatusCode,
    /// The response headers.
    pub headers: &'a HeaderMap,
    /// Whether an earlier attempt of this call ended ambiguous.
    pub earlier_ambiguous: bool,
    /// The whole response body, when the policy lets the classifier read bodies
    /// ([`Settings::classify_body`]), the adapter read it, and it is no longer than that;
    /// `None` otherwise.
    pub body: Option<&'a [u8]>,
}

/// A response classifier's verdict.
///
/// ```
/// use baton_core::Verdict;
/// assert_ne!(Verdict::Success, Verdict::Trigger);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The work is done: return this response as a success.
    Success,
    /// Return this response as the call's answer.
    Answer,
    /// Another attempt is called for (still subject to permission, replay and budget).
    Trigger,
}

/// A permission function: given the request (never the body), it may set either permission
/// or leave it to inference. Called at most once per call.
pub type PermissionFn = Arc<dyn Fn(&RequestInfo<'_>) -> PermissionOverride + Send + Sync>;
/// An eligibility predicate: asked once per endpoint per call; the answers stay fixed for
/// that call.
pub type EligibleFn = Arc<dyn Fn(&Endpoint, &RequestInfo<'_>) -> bool + Send + Sync>;
/// A response classifier: `None` keeps the default decision.
pub type ClassifyFn = Arc<dyn Fn(&ResponseView<'_>) -> Option<Verdict> + Send + Sync>;
/// A receiver of events, called synchronously, in causal order per call. Its panics are not
/// caught.
pub type EventSink = Arc<dyn Fn(&Event<'_>) + Send + Sync>;

/// A validated policy: endpoints, settings and the plugged-in functions.
///
/// ```
/// use baton_core::{Endpoint, Policy};
/// let policy = Policy::builder()
///     .endpoint(Endpoint::new("primary", "https://rpc-a.example/"))
///     .endpoint(Endpoint::new("backup", "https://rpc-b.example/"))
///     .build()
///     .unwrap();
/// assert_eq!(policy.endpoints().len(), 2);
/// assert_eq!(policy.endpoint_index("backup"), Some(1));
///
/// let err = Policy::builder().build().unwrap_err();
/// assert!(err.to_string().contains("no endpoints"));
/// ```
#[derive(Clone)]
pub struct Policy {
    pub(crate) endpoints: Vec<Endpoint>,
    pub(crate) settings: Settings,
    pub(crate) request_id_header: HeaderName,
    pub(crate) idempotency_key_header: HeaderName,
    pub(crate) attempt_header: Option<HeaderName>,
    pub(crate) permission: Option<PermissionFn>,
    pub(crate) eligible: Option<EligibleFn>,
    pub(crate) classify: Option<ClassifyFn>,
    pub(crate) events: Option<EventSink>,
    /// Group number per endpoint: endpoints without a group get a group of their own.
    pub(crate) group_of: Vec<u8>,
    /// How the base order is made from the tiers.
    pub(crate) tiers: Tiers,
    /// Each endpoint's backoff, when it overrides the policy's (merged when built).
    pub(crate) backoffs: Vec<Option<Backoff>>,
    /// Each endpoint's metric labels, made once (feature `metrics`); `None` for a copy
    /// that records no metrics (the verifier's simulated calls).
    #[cfg(feature = "metrics")]
    pub(crate) metric_labels: Option<Vec<crate::telemetry::EndpointLabels>>,
}

/// The endpoints' priority order, worked out once when the policy is built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Tiers {
    /// Every endpoint a tier of its own, in list order (the healthy path's fast case).
    ListOrder,
    /// Endpoint indexes by tier (then list position), each with its tier's rank; a tier of
    /// more than one endpoint is shuffled by weight for every call.
    Ranked(Vec<(u8, u32)>),
}

impl fmt::Debug for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Policy")
            .field("endpoints", &self.endpoints)
            .field("settings", &self.settings)
            .field("permission_fn", &self.permission.is_some())
            .field("eligible_fn", &self.eligible.is_some())
            .field("classify_fn", &self.classify.is_some())
            .field("event_sink", &self.events.is_some())
            .finish()
    }
}

impl Policy {
    /// Starts building a policy with the defaults of SPEC 8.
    pub fn builder() -> PolicyBuilder {
        PolicyBuilder::default()
    }

    /// The endpoints, in priority order.
    pub fn endpoints(&self) -> &[Endpoint] {
        &self.endpoints
    }

    /// Refuses a client without a token provider (`has_token_provider` false) for a
    /// policy with an endpoint credential: that endpoint's calls would go out without
    /// their token. Every adapter's client builder asks this once.
    ///
    /// ```
    /// use baton_core::{credential::CredentialSettings, ConfigError, Endpoint, Policy};
    /// let policy = Policy::builder()
    ///     .endpoint(Endpoint::new("a", "https://a.example/").credential(CredentialSettings::default()))
    ///     .build()
    ///     .unwrap();
    /// let e = policy.require_token_provider(false).unwrap_err();
    /// assert_eq!(e, ConfigError::NoTokenProvider { endpoint: "a".into() });
    /// assert!(policy.require_token_provider(true).is_ok());
    /// ```
    pub fn require_token_provider(&self, has_token_provider: bool) -> Result<(), ConfigError> {
        match self
            .endpoints
            .iter()
            .find(|e| e.credential_settings().is_some())
        {
            Some(e) if !has_token_provider => Err(ConfigError::NoTokenProvider {
                endpoint: e.id.clone(),
            }),
            _ => Ok(()),
        }
    }

    /// The index of the endpoint with `id`.
    pub fn endpoint_index(&self, id: &str) -> Option<usize> {
        self.endpoints.iter().position(|e| e.id == id)
    }

    /// The settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The request-id header name.
    pub fn request_id_header(&self) -> &HeaderName {
        &self.request_id_header
    }

    /// The idempotency-key header name.
    pub fn idempotency_key_header(&self) -> &HeaderName {
        &self.idempotency_key_header
    }

    /// The attempt-number header name, when enabled.
    pub fn attempt_header(&self) -> Option<&HeaderName> {
        self.attempt_header.as_ref()
    }

    /// The event sink every call of the client reports to, if any.
    pub fn event_sink(&self) -> Option<&EventSink> {
        self.events.as_ref()
    }

    /// The same policy with another event sink (adapters combine theirs with the user's).
    pub fn with_event_sink(mut self, sink: Option<EventSink>) -> Self {
        self.events = sink;
        self
    }

    /// The effective connect timeout for endpoint `index`.
    pub fn connect_timeout_for(&self, index: usize) -> Duration {
        self.endpoints
            .get(index)
            .and_then(|e| e.connect_timeout)
            .unwrap_or(self.settings.connect_timeout)
    }

    /// Endpoint `index`'s own attempts per round, if set.
    pub(crate) fn attempts_per_endpoint_of(&self, index: usize) -> Option<u32> {
        self.endpoints
            .get(index)
            .and_then(|e| e.attempts_per_endpoint)
    }

    /// The backoff before an attempt at endpoint `index`.
    pub(crate) fn backoff_for(&self, index: usize) -> &Backoff {
        self.backoffs
            .get(index)
            .and_then(Option::as_ref)
            .unwrap_or(&self.settings.backoff)
    }

    /// The effective attempt timeout for endpoint `index`.
    pub fn attempt_timeout_for(&self, index: usize) -> Duration {
        self.endpoints
            .get(index)
            .and_then(|e| e.attempt_timeout)
            .unwrap_or(self.settings.attempt_timeout)
    }

    /// The HTTP version of endpoint `index`'s connections: its own, else the policy's.
    pub fn http_version_for(&self, index: usize) -> crate::HttpVersion {
        self.endpoints
            .get(index)
            .and_then(|e| e.http_version)
            .unwrap_or(self.settings.http_version)
    }

    /// The TLS files of endpoint `index`: its own over the policy's, key by key.
    pub fn tls_for(&self, index: usize) -> crate::Tls {
        match self.endpoints.get(index) {
            Some(e) => e.tls.over(&self.settings.tls),
            None => self.settings.tls.clone(),
        }
    }

    /// Whether endpoints `a` and `b` share an idempotency group (an endpoint is always in
    /// its own group).
    pub fn same_group(&self, a: usize, b: usize) -> bool {
        a == b
            || matches!((self.group_of.get(a), self.group_of.get(b)), (Some(x), Some(y)) if x == y)
    }
}

/// Builds a [`Policy`]; [`build`](PolicyBuilder::build) validates everything.
///
/// ```
/// use std::time::Duration;
/// use baton_core::{Endpoint, Permission, PermissionOverride, Policy, Unavailable};
/// let policy = Policy::builder()
///     .endpoint(Endpoint::new("a", "https://a.example/rpc"))
///     .endpoint(Endpoint::new("b", "https://b.example/rpc"))
///     .unavailable(Unavailable::Skip)
///     .attempt_timeout(Duration::from_secs(2))
///     .permission_fn(|req| {
///         // Our JSON-RPC reads are POSTs, but they are safe to repeat anywhere.
///         if req.headers.get("x-rpc-read").is_some() {
///             PermissionOverride::both(Permission::Always)
///         } else {
///             PermissionOverride::default()
///         }
///     })
///     .build()
///     .unwrap();
/// assert_eq!(policy.settings().attempt_timeout, Duration::from_secs(2));
/// ```
#[derive(Default)]
pub struct PolicyBuilder {
    endpoints: Vec<Endpoint>,
    settings: Settings,
    permission: Option<PermissionFn>,
    eligible: Option<EligibleFn>,
    classify: Option<ClassifyFn>,
    events: Option<EventSink>,
}

impl PolicyBuilder {
    /// Adds an endpoint (priority order is the order of these calls).
    pub fn endpoint(mut self, endpoint: Endpoint) -> Self {
        self.endpoints.push(endpoint);
        self
    }

    /// Adds several endpoints.
    pub fn endpoints(mut self, endpoints: impl IntoIterator<Item = Endpoint>) -> Self {
        self.endpoints.extend(endpoints);
        self
    }

    /// Replaces all plain settings at once.
    pub fn settings(mut self, settings: Settings) -> Self {
        self.settings = settings;
        self
    }

    /// Gives mutable access to the plain settings.
    pub fn configure(mut self, f: impl FnOnce(&mut Settings)) -> Self {
        f(&mut self.settings);
        self
    }

    /// Endpoint URL mode.
    pub fn url_mode(mut self, mode: UrlMode) -> Self {
        self.settings.url_mode = mode;
        self
    }

    /// Attempts per endpoint per round.
    pub fn attempts_per_endpoint(mut self, n: u32) -> Self {
        self.settings.attempts_per_endpoint = Some(n);
        self
    }

    /// Attempts at a pinned endpoint, in total (SPEC 2.6; default: `attempts_per_endpoint`
    /// where it is set, the call's, else the endpoint's own, else the policy's; else 3).
    pub fn pinned_attempts(mut self, n: u32) -> Self {
        self.settings.pinned_attempts = Some(n);
        self
    }

    /// Cap on a call's attempts.
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.settings.max_attempts = Some(n);
        self
    }

    /// Unavailable endpoints: tried last or skipped.
    pub fn unavailable(mut self, mode: Unavailable) -> Self {
        self.settings.unavailable = mode;
        self
    }

    /// Backoff schedule.
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.settings.backoff = backoff;
        self
    }

    /// Jitter of the backoff.
    pub fn jitter(mut self, jitter: Jitter) -> Self {
        self.settings.backoff.jitter = jitter;
        self
    }

    /// Longest `Retry-After` to wait for.
    pub fn max_retry_after(mut self, d: Duration) -> Self {
        self.settings.max_retry_after = d;
        self
    }

    /// Connect timeout.
    pub fn connect_timeout(mut self, d: Duration) -> Self {
        self.settings.connect_timeout = d;
        self
    }

    /// Attempt timeout.
    pub fn attempt_timeout(mut self, d: Duration) -> Self {
        self.settings.attempt_timeout = d;
        self
    }

    /// Deadline of every call (a call may set its own).
    pub fn deadline(mut self, d: Duration) -> Self {
        self.settings.deadline = Some(d);
        self
    }

    /// Adds statuses to the trigger set of calls whose permissions are `Always` (safe
    /// methods, explicit allow). The key-reliant set is left alone (SPEC 2.3): a 500, 502 or
    /// 504 may come after the provider passed the work on, so a keyed POST retried on it
    /// could do the work twice; extend that set on its own with
    /// [`extend_key_trigger_statuses`](Self::extend_key_trigger_statuses) when the
    /// provider documents the status as safe to repeat.
    ///
    /// ```
    /// use baton_core::{Endpoint, Policy};
    /// let p = Policy::builder()
    ///     .endpoint(Endpoint::new("a", "https://a.example/"))
    ///     .extend_trigger_statuses(&[500])
    ///     .build()
    ///     .unwrap();
    /// assert!(p.settings().trigger_statuses.contains_code(500));
    /// assert!(!p.settings().key_trigger_statuses.contains_code(500));
    /// ```
    pub fn extend_trigger_statuses(mut self, codes: &[u16]) -> Self {
        for &c in codes {
            self.settings.trigger_statuses.insert(c);
        }
        self
    }

    /// Adds statuses to the trigger set of calls that rely on an idempotency key (default
    /// `{503}`). Only for statuses the provider documents as "nothing was done, repeat
    /// with the same key".
    pub fn extend_key_trigger_statuses(mut self, codes: &[u16]) -> Self {
        for &c in codes {
            self.settings.key_trigger_statuses.insert(c);
        }
        self
    }

    /// Adds statuses to `not_processed`.
    pub fn extend_not_processed(mut self, codes: &[u16]) -> Self {
        for &c in codes {
            self.settings.not_processed.insert(c);
        }
        self
    }

    /// Circuit breaker settings.
    pub fn breaker(mut self, breaker: Breaker) -> Self {
        self.settings.breaker = breaker;
        self
    }

    /// Retry budget (`None` turns it off).
    pub fn budget(mut self, budget: Option<Budget>) -> Self {
        self.settings.budget = budget;
        self
    }

    /// Outbound rate limiting.
    pub fn rate_limit(mut self, rate_limit: Option<RateLimit>) -> Self {
        self.settings.rate_limit = rate_limit;
        self
    }

    /// Hedging for reads.
    pub fn hedge(mut self, hedge: Option<Hedge>) -> Self {
        self.settings.hedge = hedge;
        self
    }

    /// Seed of the random source (runs that must repeat exactly).
    pub fn seed(mut self, seed: u64) -> Self {
        self.settings.seed = Some(seed);
        self
    }

    /// The permission function.
    pub fn permission_fn(
        mut self,
        f: impl Fn(&RequestInfo<'_>) -> PermissionOverride + Send + Sync + 'static,
    ) -> Self {
        self.permission = Some(Arc::new(f));
        self
    }

    /// The eligibility predicate.
    pub fn eligible_fn(
        mut self,
        f: impl Fn(&Endpoint, &RequestInfo<'_>) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.eligible = Some(Arc::new(f));
        self
    }

    /// The response classifier.
    pub fn classify_fn(
        mut self,
        f: impl Fn(&ResponseView<'_>) -> Option<Verdict> + Send + Sync + 'static,
    ) -> Self {
        self.classify = Some(Arc::new(f));
        self
    }

    /// The event sink for every call of the client.
    pub fn on_event(mut self, f: impl Fn(&Event<'_>) + Send + Sync + 'static) -> Self {
        self.events = Some(Arc::new(f));
        self
    }

    /// Adds an event sink after the one already set (both get every event, the earlier
    /// first): how an adapter's client-level callback joins a policy's own sink.
    pub fn add_event_sink(mut self, sink: EventSink) -> Self {
        self.events = join_sinks(self.events.take(), Some(sink));
        self
    }

    /// The event sink, as a shared function.
    pub fn event_sink(mut self, sink: Option<EventSink>) -> Self {
        self.events = sink;
        self
    }

    /// The event sink set so far, if any (so an adapter can combine it with its own).
    pub fn event_sink_ref(&self) -> Option<&EventSink> {
        self.events.as_ref()
    }

    /// The plain settings so far.
    pub fn settings_ref(&self) -> &Settings {
        &self.settings
    }

    /// Validates everything and builds the policy.
    pub fn build(self) -> Result<Policy, ConfigError> {
        let s = &self.settings;
        if self.endpoints.is_empty() {
            return Err(ConfigError::NoEndpoints);
        }
        if self.endpoints.len() > MAX_ENDPOINTS {
            return Err(ConfigError::TooManyEndpoints {
                count: self.endpoints.len(),
                max: MAX_ENDPOINTS,
            });
        }
        let group_of = check_endpoints(&self.endpoints, &s.backoff)?;
        let tiers = tiers_of(&self.endpoints);
        #[cfg(feature = "metrics")]
        let metric_labels = Some(crate::telemetry::endpoint_labels(&self.endpoints));
        let backoffs = self
            .endpoints
            .iter()
            .map(|e| e.backoff.map(|b| b.over(&s.backoff)))
            .collect();
        validate_settings(s)?;
        check_tls(&self.endpoints, &s.tls)?;
        let (request_id_header, idempotency_key_header, attempt_header) = call_headers(s)?;
        let mut settings = self.settings.clone();
        credential_refusals(&self.endpoints, &mut settings)?;
        // The request id and the idempotency key are the call's, the same on every attempt
        // (SPEC 3); the attempt number is the engine's.
        let call_header = |h: &HeaderName| {
            h == request_id_header
                || h == idempotency_key_header
                || attempt_header.as_ref() == Some(h)
        };
        for e in &self.endpoints {
            if let Some(c) = e.credential.as_ref().filter(|c| call_header(&c.header)) {
                return Err(ConfigError::Endpoint {
                    id: e.id.clone(),
                    error: Box::new(ConfigError::InvalidHeader {
                        setting: "credential.header".to_string(),
                        name: c.header.as_str().to_string(),
                        reason: "the request id, idempotency key and attempt number are the \
                                 call's; name another header for the token"
                            .to_string(),
                    }),
                });
            }
            // The idempotency key too (SPEC 3: "sent unchanged on every attempt"): an
            // endpoint's own key would replace the call's there, and a failover counted as
            // a retry within the group would reach a provider that cannot de-duplicate it.
            if let Some(name) = e.headers.keys().find(|h| call_header(h)) {
                return Err(ConfigError::InvalidHeader {
                    setting: format!("endpoint {:?}", e.id),
                    name: name.as_str().to_string(),
                    reason: "the request id, idempotency key and attempt number are the \
                             call's, the same on every endpoint; they cannot be set per endpoint"
                        .to_string(),
                });
            }
        }
        Ok(Policy {
            endpoints: self.endpoints,
            settings,
            request_id_header,
            idempotency_key_header,
            attempt_header,
            permission: self.permission,
            eligible: self.eligible,
            classify: self.classify,
            events: self.events,
            #[cfg(feature = "metrics")]
            metric_labels,
            group_of,
            tiers,
            backoffs,
        })
    }
}

/// A client certificate needs its key, and a key its certificate (SPEC 9): in
/// `[policy.tls]`, and in each endpoint's own table. The files themselves are read by the
/// adapters when the client is built.
fn check_tls(endpoints: &[Endpoint], policy: &crate::Tls) -> Result<(), ConfigError> {
    let half = |tls: &crate::Tls| {
        tls.missing_half()
            .map(|missing| ConfigError::InvalidSetting {
                setting: if missing == "client_key" {
                    "tls.client_key"
                } else {
                    "tls.client_cert"
                },
                value: "none".to_string(),
                reason: "client_cert and client_key name the two halves of one identity: give both",
            })
    };
    if let Some(e) = half(policy) {
        return Err(e);
    }
    for e in endpoints {
        if let Some(err) = half(&e.tls) {
            return Err(ConfigError::Endpoint {
                id: e.id.clone(),
                error: Box::new(err),
            });
        }
    }
    Ok(())
}

/// Checks each endpoint's credential settings; with any credential in the policy, a 401
/// (and a 403 where `refresh_on_403`) is a refusal: it triggers, for every call class, and
/// promises nothing was processed (SPEC 9: "a 401 is a refusal").
fn credential_refusals(endpoints: &[Endpoint], s: &mut Settings) -> Result<(), ConfigError> {
    for e in endpoints {
        let Some(c) = &e.credential else { continue };
        c.validate().map_err(|error| ConfigError::Endpoint {
            id: e.id.clone(),
            error: Box::new(error),
        })?;
        let codes: &[u16] = if c.refresh_on_403 {
            &[401, 403]
        } else {
            &[401]
        };
        for &code in codes {
            s.not_processed.insert(code);
            s.trigger_statuses.insert(code);
            s.key_trigger_statuses.insert(code);
        }
    }
    Ok(())
}

/// Checks each endpoint (id, URL, headers, timeouts, group) and numbers its idempotency
/// group: endpoints without a group form a group of their own; named groups share a
/// number. Numbers stay below `MAX_ENDPOINTS * 2`, so they fit in a u8.
fn check_endpoints(endpoints: &[Endpoint], backoff: &Backoff) -> Result<Vec<u8>, ConfigError> {
    let mut groups: Vec<&str> = Vec::new();
    let mut group_of = Vec::with_capacity(endpoints.len());
    for (i, e) in endpoints.iter().enumerate() {
        if e.id.is_empty() {
            return Err(ConfigError::EmptyId { index: i });
        }
        if endpoints[..i].iter().any(|o| o.id == e.id) {
            return Err(ConfigError::DuplicateId { id: e.id.clone() });
        }
        if let Some(reason) = &e.url_error {
            return Err(ConfigError::InvalidUrl {
                id: e.id.clone(),
                url: crate::redact::redact_url(&e.url),
                reason: reason.clone(),
            });
        }
        if let Some((name, reason)) = &e.header_error {
            return Err(ConfigError::InvalidHeader {
                setting: format!("endpoint {:?}", e.id),
                name: name.clone(),
                reason: reason.clone(),
            });
        }
        check_endpoint_settings(e, backoff).map_err(|error| ConfigError::Endpoint {
            id: e.id.clone(),
            error: Box::new(error),
        })?;
        let g = match &e.group {
            Some(name) if name.is_empty() => {
                return Err(ConfigError::Endpoint {
                    id: e.id.clone(),
                    error: Box::new(invalid("group", name, "a group name must not be empty")),
                })
            }
            Some(name) => match groups.iter().position(|g| *g == name.as_str()) {
                Some(p) => p,
                None => {
                    groups.push(name);
                    groups.len() - 1
                }
            },
            None => {
                groups.push("");
                groups.len() - 1
            }
        };
        group_of.push(g as u8);
    }
    Ok(group_of)
}

/// An endpoint's own settings (SPEC 5), named as in the endpoint's builder.
fn check_endpoint_settings(e: &Endpoint, policy_backoff: &Backoff) -> Result<(), ConfigError> {
    if let Some(t) = e.connect_timeout {
        check_timeout("connect_timeout", t)?;
    }
    if let Some(t) = e.attempt_timeout {
        check_timeout("attempt_timeout", t)?;
    }
    check_count(
        "attempts_per_endpoint",
        e.attempts_per_endpoint,
        MAX_ATTEMPTS_PER_ENDPOINT,
    )?;
    if let Some(b) = &e.backoff {
        check_backoff(&b.over(policy_backoff))?;
    }
    let w = e.weight;
    require(
        (1..=MAX_WEIGHT).contains(&w),
        "weight",
        w,
        "must be 1 to 1000000",
    )
}

/// Largest endpoint weight.
pub const MAX_WEIGHT: u32 = 1_000_000;

/// The priority order: by tier (an endpoint without one is placed as if its tier were its
/// list index), then by list position. Endpoints share a tier only when both name it: one
/// without a tier is a tier of its own, never shuffled with one that names its index.
fn tiers_of(endpoints: &[Endpoint]) -> Tiers {
    let key = |i: usize| endpoints[i].tier.unwrap_or(i as u32);
    let same_tier =
        |a: usize, b: usize| endpoints[a].tier.is_some() && endpoints[a].tier == endpoints[b].tier;
    let mut order: Vec<usize> = (0..endpoints.len()).collect();
    order.sort_by_key(|&i| (key(i), i));
    let in_list_order = order.iter().enumerate().all(|(p, &i)| p == i);
    let shared = order.windows(2).any(|w| same_tier(w[0], w[1]));
    if in_list_order && !shared {
        return Tiers::ListOrder;
    }
    // Each endpoint with its tier's rank: the endpoints of one tier share it.
    let mut rank = 0;
    let ranked = order.iter().enumerate().map(|(p, &i)| {
        if p > 0 && !same_tier(order[p - 1], i) {
            rank += 1;
        }
        (i as u8, rank)
    });
    Tiers::Ranked(ranked.collect())
}

/// The request-id, idempotency-key and attempt-number header names, parsed once; each must
/// be a header that does not frame the message, and all three must differ.
fn call_headers(s: &Settings) -> Result<(HeaderName, HeaderName, Option<HeaderName>), ConfigError> {
    let header = |setting: &'static str, name: &str| {
        let parsed = HeaderName::try_from(name).map_err(|e| ConfigError::InvalidHeader {
            setting: setting.to_string(),
            name: name.to_string(),
            reason: e.to_string(),
        })?;
        if crate::limits::is_framing_header(parsed.as_str()) || parsed == http::header::HOST {
            return Err(ConfigError::InvalidHeader {
                setting: setting.to_string(),
                name: name.to_string(),
                reason: "it frames the message (or is the Host rule's); name another header"
                    .to_string(),
            });
        }
        Ok(parsed)
    };
    let request_id_header = header("request_id_header", &s.request_id_header)?;
    let idempotency_key_header = header("idempotency_key_header", &s.idempotency_key_header)?;
    let attempt_header = match &s.attempt_header {
        Some(h) => Some(header("attempt_header", h)?),
        None => None,
    };
    // The error names the setting that collides: the key's header when it is the request
    // id's, else the attempt header.
    let setting = if request_id_header == idempotency_key_header {
        "idempotency_key_header"
    } else {
        "attempt_header"
    };
    if request_id_header == idempotency_key_header
        || attempt_header.as_ref() == Some(&request_id_header)
        || attempt_header.as_ref() == Some(&idempotency_key_header)
    {
        return Err(invalid(
            setting,
            (
                &s.request_id_header,
                &s.idempotency_key_header,
                &s.attempt_header,
            ),
            "the request-id, idempotency-key and attempt-number headers must differ",
        ));
    }
    Ok((request_id_header, idempotency_key_header, attempt_header))
}

fn check_timeout(setting: &'static str, d: Duration) -> Result<(), ConfigError> {
    if d.is_zero() {
        return Err(invalid(setting, d, "a timeout must be greater than zero"));
    }
    if d > MAX_DURATION {
        return Err(invalid(setting, d, "longer than 10 years; check the unit"));
    }
    Ok(())
}

pub(crate) fn check_duration(setting: &'static str, d: Duration) -> Result<(), ConfigError> {
    if d > MAX_DURATION {
        return Err(invalid(setting, d, "longer than 10 years; check the unit"));
    }
    Ok(())
}

fn check_count(setting: &'static str, n: Option<u32>, max: u32) -> Result<(), ConfigError> {
    match n {
        Some(0) => Err(invalid(setting, 0, "must be at least 1")),
        Some(n) if n > max => Err(invalid(
            setting,
            n,
            "too many attempts (see the setting's limit)",
        )),
        _ => Ok(()),
    }
}

/// Most attempts at one endpoint per round (`attempts_per_endpoint`, `pinned_attempts`).
pub const MAX_ATTEMPTS_PER_ENDPOINT: u32 = 255;
/// Most attempts of one call (`max_attempts`).
pub const MAX_ATTEMPTS: u32 = 10_000;

/// Checks every setting (SPEC 5): the first one out of range is named in the error. One
/// function per section of the settings.
pub(crate) fn validate_settings(s: &Settings) -> Result<(), ConfigError> {
    check_counts_and_timeouts(s)?;
    check_backoff(&s.backoff)?;
    check_statuses(s)?;
    check_breaker(&s.breaker)?;
    if let Some(bu) = &s.budget {
        check_budget(bu)?;
    }
    if let Some(h) = &s.hedge {
        check_duration("hedge.after", h.after)?;
        let n = h.max_in_flight;
        require(
            n >= 2 && n as usize <= MAX_ENDPOINTS,
            "hedge.max_in_flight",
            n,
            "must be 2 to 64",
        )?;
    }
    if let Some(rl) = &s.rate_limit {
        check_limiter(&rl.limiter)?;
    }
    check_probe(&s.probe)
}

fn check_probe(p: &ProbeRequest) -> Result<(), ConfigError> {
    let method_ok = Method::from_bytes(p.method.as_bytes()).is_ok();
    require(method_ok, "probe.method", &p.method, "not an HTTP method")?;
    // Methods are case-sensitive: "get" is another method than GET, which a provider
    // answers 405 or 501, and the probe would count as a breaker failure.
    let upper = !p.method.bytes().any(|b| b.is_ascii_lowercase());
    require(
        upper,
        "probe.method",
        &p.method,
        "methods are case-sensitive; write it in upper case",
    )?;
    if let Some(path) = &p.path {
        let ok = path.starts_with('/') && path.parse::<http::uri::PathAndQuery>().is_ok();
        require(ok, "probe.path", path, "must be a path starting with /")?;
    }
    require(
        !p.expect.is_empty(),
        "probe.expect",
        "[]",
        "name at least one status",
    )
}

/// `Ok` when `ok`, else the error naming `setting`, its value and why.
fn require(
    ok: bool,
    setting: &'static str,
    value: impl fmt::Debug,
    reason: &'static str,
) -> Result<(), ConfigError> {
    if ok {
        Ok(())
    } else {
        Err(invalid(setting, value, reason))
    }
}

fn check_counts_and_timeouts(s: &Settings) -> Result<(), ConfigError> {
    let per_endpoint = MAX_ATTEMPTS_PER_ENDPOINT;
    check_count(
        "attempts_per_endpoint",
        s.attempts_per_endpoint,
        per_endpoint,
    )?;
    check_count("pinned_attempts", s.pinned_attempts, per_endpoint)?;
    check_count("max_attempts", s.max_attempts, MAX_ATTEMPTS)?;
    require(
        s.max_redirects <= MAX_REDIRECTS,
        "max_redirects",
        s.max_redirects,
        "at most 32 redirects are followed in one attempt",
    )?;
    require(
        s.classify_body <= MAX_CLASSIFY_BODY,
        "classify_body",
        s.classify_body,
        "the classifier reads at most 16 MiB (16777216 bytes) of a body",
    )?;
    check_timeout("connect_timeout", s.connect_timeout)?;
    check_timeout("attempt_timeout", s.attempt_timeout)?;
    if let Some(d) = s.deadline {
        check_timeout("deadline", d)?;
    }
    if let Some(d) = s.body_timeout {
        check_timeout("body_timeout", d)?;
    }
    check_duration("max_retry_after", s.max_retry_after)
}

fn check_backoff(b: &Backoff) -> Result<(), ConfigError> {
    check_duration("backoff.initial", b.initial)?;
    check_duration("backoff.max", b.max)?;
    let m = b.multiplier;
    require(
        m.is_finite() && m >= 1.0,
        "backoff.multiplier",
        m,
        "must be a finite number >= 1",
    )?;
    require(
        b.initial <= b.max,
        "backoff.initial",
        (b.initial, b.max),
        "the initial delay is larger than backoff.max",
    )?;
    if let Jitter::Proportional(f) = b.jitter {
        let ok = f.is_finite() && (0.0..=1.0).contains(&f);
        require(
            ok,
            "backoff.jitter",
            f,
            "the proportional factor must be in [0, 1]",
        )?;
    }
    Ok(())
}

fn check_statuses(s: &Settings) -> Result<(), ConfigError> {
    for (name, set) in [
        ("trigger_statuses", &s.trigger_statuses),
        ("key_trigger_statuses", &s.key_trigger_statuses),
        ("not_processed", &s.not_processed),
    ] {
        if let Some(c) = set.codes().find(|c| *c < 400 || *c > 599) {
            return Err(invalid(
                name,
                c,
                "only 4xx and 5xx statuses can call for another attempt",
            ));
        }
    }
    if let Some(c) = s.not_processed.codes().find(|c| *c != 429 && *c < 500) {
        return Err(invalid(
            "not_processed",
            c,
            "a 4xx other than 429 means the provider looked at the request; it cannot promise it did nothing",
        ));
    }
    Ok(())
}

pub(crate) fn check_breaker(br: &Breaker) -> Result<(), ConfigError> {
    match br.rule {
        BreakerRule::Consecutive { failures } => {
            require(
                failures > 0,
                "breaker.rule.failures",
                failures,
                "must be at least 1",
            )?;
        }
        BreakerRule::FailureRate {
            window,
            min_calls,
            rate,
            slow_call,
        } => {
            let ok = (1..=1024).contains(&window);
            require(ok, "breaker.rule.window", window, "must be 1 to 1024")?;
            require(
                min_calls > 0 && min_calls <= window,
                "breaker.rule.min_calls",
                (min_calls, window),
                "must be at least 1 and at most the window",
            )?;
            let ok = rate.is_finite() && rate > 0.0 && rate <= 1.0;
            require(ok, "breaker.rule.rate", rate, "must be in (0, 1]")?;
            if let Some(d) = slow_call {
                check_timeout("breaker.rule.slow_call", d)?;
            }
        }
        BreakerRule::Disabled => return Ok(()),
    }
    check_timeout("breaker.open", br.open)?;
    check_duration("breaker.max_open", br.max_open)?;
    require(
        br.max_open >= br.open,
        "breaker.max_open",
        (br.max_open, br.open),
        "is shorter than breaker.open",
    )?;
    let g = br.open_growth;
    require(
        g.is_finite() && g >= 1.0,
        "breaker.open_growth",
        g,
        "must be a finite number >= 1",
    )?;
    require(
        br.probe_quota > 0,
        "breaker.probe_quota",
        0,
        "must be at least 1",
    )
}

fn check_budget(bu: &Budget) -> Result<(), ConfigError> {
    let r = bu.ratio;
    let ok = r.is_finite() && (0.0..=1000.0).contains(&r);
    require(ok, "budget.ratio", r, "must be a number from 0 to 1000")?;
    let m = bu.min_per_sec;
    let ok = m.is_finite() && (0.0..=1e9).contains(&m);
    require(
        ok,
        "budget.min_per_sec",
        m,
        "must be a number from 0 to 1e9",
    )?;
    let ok = bu.window >= Duration::from_millis(10);
    require(ok, "budget.window", bu.window, "must be at least 10 ms")?;
    check_duration("budget.window", bu.window)
}

fn check_limiter(limiter: &Limiter) -> Result<(), ConfigError> {
    match *limiter {
        Limiter::TokenBucket {
            capacity,
            per_second,
        } => {
            require(
                capacity > 0,
                "rate_limit.limiter.capacity",
                0,
                "must be at least 1",
            )?;
            require(
                per_second.is_finite() && per_second > 0.0 && per_second <= 1e9,
                "rate_limit.limiter.per_second",
                per_second,
                "must be a number above 0 and at most 1e9",
            )
        }
        Limiter::SlidingWindow { limit, window } => {
            require(
                limit > 0,
                "rate_limit.limiter.limit",
                0,
                "must be at least 1",
            )?;
            check_timeout("rate_limit.limiter.window", window)
        }
    }
}

/// serde helpers: durations as `"250ms"`, `"5s"`, `"1.5s"`, `"2m"`, `"1h"`, or a number of
/// seconds.
#[cfg(feature = "serde")]
pub mod serde_duration {
    use std::time::Duration;

    use serde::{Deserializer, Serializer};

    /// Parses `"250ms"`, `"5s"`, `"1.5s"`, `"2m"`, `"1h"` or a bare number of seconds.
    pub fn parse(text: &str) -> Result<Duration, String> {
        let t = text.trim();
        let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
            (n, 0.001)
        } else if let Some(n) = t.strip_suffix('s') {
            (n, 1.0)
        } else if let Some(n) = t.strip_suffix('m') {
            (n, 60.0)
        } else if let Some(n) = t.strip_suffix('h') {
            (n, 3600.0)
        } else {
            (t, 1.0)
        };
        let v: f64 = num
            .trim()
            .parse()
            .map_err(|_| format!("{text:?} is not a duration (try \"250ms\", \"5s\", \"2m\")"))?;
        Duration::try_from_secs_f64(v * scale)
            .map_err(|_| format!("{text:?} is not a valid duration (negative or too large)"))
    }

    /// Reads text (parsed) or a number of seconds; anything else is an error saying which
    /// forms a duration takes (an untagged enum would say only that nothing matched).
    struct Form;

    impl serde::de::Visitor<'_> for Form {
        type Value = Duration;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(r#"a duration such as "250ms", "1.5s" or "2m", or a number of seconds"#)
        }

        fn visit_str<E: serde::de::Error>(self, t: &str) -> Result<Duration, E> {
            parse(t).map_err(E::custom)
        }

        fn visit_f64<E: serde::de::Error>(self, n: f64) -> Result<Duration, E> {
            Duration::try_from_secs_f64(n)
                .map_err(|_| E::custom(format!("{n} is not a valid number of seconds")))
        }

        fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<Duration, E> {
            u64::try_from(n)
                .map(Duration::from_secs)
                .map_err(|_| E::custom(format!("{n} is not a valid number of seconds")))
        }

        fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Duration, E> {
            Ok(Duration::from_secs(n))
        }
    }

    pub(crate) fn to_text(d: &Duration) -> String {
        if d.subsec_nanos() == 0 {
            format!("{}s", d.as_secs())
        } else {
            format!("{}ms", d.as_secs_f64() * 1000.0)
        }
    }

    pub(crate) fn from_raw<'de, D: Deserializer<'de>>(de: D) -> Result<Duration, D::Error> {
        de.deserialize_any(Form)
    }

    /// Serialises a duration as text.
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&to_text(d))
    }

    /// Deserialises a duration from text or seconds.
    pub fn deserialize<'de, D: Deserializer<'de>>(de: D) -> Result<Duration, D::Error> {
        from_raw(de)
    }
}

#[cfg(feature = "serde")]
pub(crate) mod serde_opt_duration {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_str(&super::serde_duration::to_text(d)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(de: D) -> Result<Option<Duration>, D::Error> {
        #[derive(Deserialize)]
        struct Wrap(#[serde(deserialize_with = "super::serde_duration::from_raw")] Duration);
        Ok(Option::<Wrap>::deserialize(de)?.map(|w| w.0))
    }
}

/// A seed as a TOML integer, or as text when it is above `i64::MAX`: every `u64` is a
/// valid seed, and a counterexample file must replay whichever one drew it.
#[cfg(feature = "serde")]
mod serde_seed {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(seed: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        match seed {
            None => s.serialize_none(),
            Some(n) if i64::try_from(*n).is_ok() => s.serialize_some(n),
            Some(n) => s.serialize_some(&n.to_string()),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(de: D) -> Result<Option<u64>, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Number(u64),
            Text(String),
        }
        match Option::<Raw>::deserialize(de)? {
            None => Ok(None),
            Some(Raw::Number(n)) => Ok(Some(n)),
            Some(Raw::Text(t)) => t.parse().map(Some).map_err(|_| {
                serde::de::Error::custom(format!("seed {t:?} is not a number from 0 to 2^64 - 1"))
            }),
        }
    }
}

#[cfg(feature = "serde")]
mod serde_budget {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::Budget;

    /// `false`, `true` or a table, read without an untagged enum, so that an error inside
    /// the table (a bad duration, an unknown key) is the one reported.
    struct Form;

    impl<'de> serde::de::Visitor<'de> for Form {
        type Value = Option<Budget>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("false, true or a table of budget settings")
        }

        fn visit_bool<E: serde::de::Error>(self, on: bool) -> Result<Option<Budget>, E> {
            Ok(on.then(Budget::default))
        }

        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            map: A,
        ) -> Result<Option<Budget>, A::Error> {
            Budget::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(Some)
        }
    }

    /// `false` when off, else the budget's table.
    pub fn serialize<S: Serializer>(b: &Option<Budget>, s: S) -> Result<S::Ok, S::Error> {
        match b {
            None => s.serialize_bool(false),
            Some(b) => b.serialize(s),
        }
    }

    /// `false` (off), `true` (the defaults) or a table of budget settings.
    pub fn deserialize<'de, D: Deserializer<'de>>(de: D) -> Result<Option<Budget>, D::Error> {
        de.deserialize_any(Form)
    }
}

#[cfg(feature = "serde")]
mod serde_status_set {
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::status::StatusSet;

    pub fn serialize<S: Serializer>(set: &StatusSet, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(set.codes())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(de: D) -> Result<StatusSet, D::Error> {
        let codes = Vec::<u16>::deserialize(de)?;
        let mut set = StatusSet::new();
        for c in codes {
            if !set.insert(c) {
                return Err(serde::de::Error::custom(format!(
                    "{c} is not an HTTP status code"
                )));
            }
        }
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one() -> PolicyBuilder {
        Policy::builder().endpoint(Endpoint::new("a", "http://127.0.0.1:1/"))
    }

    #[test]
    fn config_rejects_no_endpoints() {
        assert_eq!(
            Policy::builder().build().unwrap_err(),
            ConfigError::NoEndpoints
        );
    }

    #[test]
    fn config_rejects_duplicate_and_empty_ids_by_name() {
        let e = one()
            .endpoint(Endpoint::new("a", "http://127.0.0.1:2/"))
            .build()
            .unwrap_err();
        assert_eq!(e, ConfigError::DuplicateId { id: "a".into() });
        let e = Policy::builder()
            .endpoint(Endpoint::new("", "http://x/"))
            .build()
            .unwrap_err();
        assert_eq!(e, ConfigError::EmptyId { index: 0 });
    }

    #[test]
    fn userinfo_becomes_the_endpoints_basic_credential_and_leaves_the_url() {
        let e = Endpoint::new("a", "http://alice:s3cr%3At@127.0.0.1:8080/v2/KEY");
        assert_eq!(e.uri(), "http://127.0.0.1:8080/v2/KEY");
        assert!(!e.url().contains("s3cr"));
        // base64("alice:s3cr:t")
        assert_eq!(e.headers()["authorization"], "Basic YWxpY2U6czNjcjp0");
        let e =
            Endpoint::new("a", "http://alice:pw@host.example/").header("authorization", "Bearer T");
        assert_eq!(e.headers().get_all("authorization").iter().count(), 1);
        assert_eq!(e.headers()["authorization"], "Bearer T");
    }

    #[test]
    fn ports_outside_the_range_are_rejected_naming_endpoint_and_port() {
        for url in [
            "http://127.0.0.1:65536/",
            "https://h.example:99999/x",
            "http://h:0/",
        ] {
            let e = Policy::builder()
                .endpoint(Endpoint::new("p", url))
                .build()
                .unwrap_err();
            let text = e.to_string();
            assert!(matches!(e, ConfigError::InvalidUrl { .. }), "{url}: {text}");
            assert!(
                text.contains("\"p\"") && text.contains("outside 1-65535"),
                "{text}"
            );
        }
        assert!(Policy::builder()
            .endpoint(Endpoint::new("p", "http://[::1]:65535/"))
            .build()
            .is_ok());
    }

    #[test]
    fn secrets_in_endpoint_urls_never_reach_debug_or_errors() {
        let url = "http://user:SECRETPW@127.0.0.1:65536/v2/SECRETKEY?k=SECRETQ";
        let e = Endpoint::new("a", url);
        let shown = format!("{e:?}");
        let err = Policy::builder().endpoint(e).build().unwrap_err();
        for text in [shown, err.to_string(), format!("{err:?}")] {
            for secret in ["SECRETPW", "SECRETKEY", "SECRETQ"] {
                assert!(!text.contains(secret), "{text}");
            }
        }
        let p = Policy::builder()
            .endpoint(Endpoint::new(
                "a",
                "https://u:SECRETPW@rpc.example/v2/SECRETKEY",
            ))
            .build()
            .unwrap();
        let text = format!("{p:?}");
        assert!(!text.contains("SECRET"), "{text}");
    }

    #[test]
    fn config_rejects_unusable_urls_naming_endpoint_and_url() {
        for (url, needle) in [
            ("ftp://x/", "scheme"),
            ("/relative", "not absolute"),
            ("http://x/#frag", "fragment"),
            ("http://", ""),
            ("not a url", ""),
        ] {
            let e = Policy::builder()
                .endpoint(Endpoint::new("p", url))
                .build()
                .unwrap_err();
            let text = e.to_string();
            assert!(matches!(e, ConfigError::InvalidUrl { .. }), "{url}: {text}");
            assert!(text.contains("\"p\"") && text.contains(needle), "{text}");
        }
    }

    #[test]
    fn config_rejects_zero_timeouts_and_thresholds_naming_the_setting() {
        let e = one().attempt_timeout(Duration::ZERO).build().unwrap_err();
        assert!(e.to_string().contains("attempt_timeout"), "{e}");
        let e = one()
            .breaker(Breaker {
                rule: BreakerRule::Consecutive { failures: 0 },
                ..Breaker::default()
            })
            .build()
            .unwrap_err();
        assert!(e.to_string().contains("breaker.rule.failures"), "{e}");
        let e = one().max_attempts(0).build().unwrap_err();
        assert!(e.to_string().contains("max_attempts"), "{e}");
    }

    #[test]
    fn config_rejects_contradictory_settings() {
        let e = one()
            .backoff(Backoff {
                initial: Duration::from_secs(10),
                max: Duration::from_secs(1),
                ..Backoff::default()
            })
            .build()
            .unwrap_err();
        assert!(e.to_string().contains("backoff.initial"), "{e}");
        let e = one()
            .breaker(Breaker {
                rule: BreakerRule::FailureRate {
                    window: 5,
                    min_calls: 10,
                    rate: 0.5,
                    slow_call: None,
                },
                ..Breaker::default()
            })
            .build()
            .unwrap_err();
        assert!(e.to_string().contains("min_calls"), "{e}");
        let e = one().extend_not_processed(&[404]).build().unwrap_err();
        assert!(e.to_string().contains("not_processed"), "{e}");
    }

    #[test]
    fn config_rejects_bad_endpoint_header_naming_the_endpoint() {
        let e = Policy::builder()
            .endpoint(Endpoint::new("a", "http://x/").header("bad header", "v"))
            .build()
            .unwrap_err();
        assert!(matches!(e, ConfigError::InvalidHeader { .. }));
        assert!(e.to_string().contains("\"a\""), "{e}");
    }

    #[test]
    fn endpoints_without_group_are_their_own_group() {
        let p = Policy::builder()
            .endpoint(Endpoint::new("a", "http://a/").group("g"))
            .endpoint(Endpoint::new("b", "http://b/").group("g"))
            .endpoint(Endpoint::new("c", "http://c/"))
            .endpoint(Endpoint::new("d", "http://d/"))
            .build()
            .unwrap();
        assert!(p.same_group(0, 1));
        assert!(!p.same_group(0, 2));
        assert!(!p.same_group(2, 3));
        assert!(p.same_group(3, 3));
    }

    #[test]
    fn endpoint_debug_never_shows_header_values() {
        let e = Endpoint::new("a", "http://a/").header("authorization", "secret-token");
        assert!(!format!("{e:?}").contains("secret-token"));
    }
}
