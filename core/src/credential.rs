//! Credentials that refresh themselves (SPEC 9): one slot per endpoint, shared by every
//! call of a client, with a generation number.
//!
//! The adapter supplies a token provider (async on tokio and async-std, blocking on
//! blocking); the slot decides when to call it:
//!
//! - **Refresh ahead**: a token with an expiry is refreshed once it is within
//!   [`CredentialSettings::refresh_margin`] of it (the margin shortened by up to
//!   `margin_jitter` of itself, per token, so clients that started together do not refresh
//!   together; and never more than half the token's lifetime, so a token that lives
//!   shorter than the margin is not refreshed on every call). Until then, and while a
//!   refresh runs, the current token is used.
//! - **Single flight**: of any number of concurrent calls that need a token, exactly one
//!   calls the provider; the others use the current token when it is still valid, or wait
//!   for the refresh to finish (no thundering herd).
//! - **Invalidation by generation**: a 401 (and a 403 with
//!   [`CredentialSettings::refresh_on_403`]) invalidates the slot only when the failing
//!   attempt sent the current generation: a late 401 of an old token never throws away a
//!   newer one. The attempt then refreshes once and re-sends once to the same endpoint
//!   when its body can be replayed (a 401 is a refusal: nothing was processed). A 401 right
//!   after a fresh token is that endpoint's failure: the call fails over where permitted,
//!   or returns the 401, and that endpoint gets no further attempt in the call (its
//!   record says `credential_refused`), so one call runs the provider at most twice per
//!   endpoint, as Google's and Azure's client libraries bound their refreshes.
//! - **Failures are not cached**: a failed refresh keeps an unexpired token in use, backs
//!   off ([`CredentialSettings::failure_backoff`]) before the provider is asked again, and
//!   an attempt that has no usable token fails undelivered (nothing was sent), so the call
//!   fails over where permitted. A token no header can carry counts as a failed refresh.
//! - **Time**: the async adapters give the provider at most the attempt's time; when it
//!   runs out, a caller holding a valid token sends that one ([`Credential::valid`]), and
//!   the timeout counts as a failed refresh ([`Credential::timed_out`]). baton-blocking
//!   runs the provider on the calling thread and cannot interrupt it: a blocking provider
//!   must bound its own time (the CLI's commands get 30 s).
//!
//! A token belongs to its endpoint and never reaches another; it never appears in `Debug`
//! output, events, errors or reports ([`Secret`] shows `[redacted]`, and the header value
//! it makes is marked sensitive).
//!
//! The slot is sans I/O: [`Credential::lease`] is a future that runs the provider the
//! adapter hands it and waits for a refresh under way with a waker, never a timer; the
//! async adapters await it, baton-blocking drives it on the calling thread (parking while
//! another call refreshes). Core reads no clock: the adapter passes it.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use baton_core::credential::{Credential, CredentialSettings, Lease, Token, Unavailable};
//! # // Every lease below finishes at once (no refresh under way): one poll drives it.
//! # fn now_or_never<F: std::future::Future>(f: F) -> F::Output {
//! #     let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
//! #     match std::future::Future::poll(std::pin::pin!(f), &mut cx) {
//! #         std::task::Poll::Ready(v) => v,
//! #         std::task::Poll::Pending => unreachable!(),
//! #     }
//! # }
//! let slot = Credential::new(CredentialSettings::default(), 7);
//! let now = Instant::now();
//! let lease = |t: Option<&'static str>| -> Result<Lease, Unavailable> {
//!     now_or_never(slot.lease(|| now, || async move {
//!         Ok(Token::new(t.expect("no refresh needed")).expires_in(Duration::from_secs(3600)))
//!     }))
//! };
//! let first = lease(Some("t1")).unwrap();
//! assert_eq!(first.secret().expose(), "t1");
//! assert!(first.fresh());
//! // A second call uses the same token: the provider is not asked again.
//! let again = lease(None).unwrap();
//! assert_eq!(again.generation(), first.generation());
//! assert!(!again.fresh());
//! // A 401 of that generation invalidates it; the next lease refreshes.
//! assert!(slot.rejected(first.generation()));
//! let next = lease(Some("t2")).unwrap();
//! assert_eq!(next.secret().expose(), "t2");
//! assert!(!slot.rejected(first.generation()), "an old generation's 401 changes nothing");
//! ```

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use http::header::{HeaderName, HeaderValue, AUTHORIZATION};

use crate::backoff::{Backoff, Jitter};
use crate::rng::Rng;

/// A secret (an access token): `Debug` and `Display` show `[redacted]`; only
/// [`expose`](Self::expose) gives the text.
///
/// ```
/// let s = baton_core::credential::Secret::new("sk_live_123");
/// assert_eq!(format!("{s:?}"), "[redacted]");
/// assert_eq!(s.expose(), "sk_live_123");
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Arc<str>);

impl Secret {
    /// Wraps `text`.
    pub fn new(text: impl Into<Arc<str>>) -> Self {
        Secret(text.into())
    }

    /// The secret's text.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// What a token provider returns: the token and, when known, how long it is valid.
///
/// ```
/// use std::time::Duration;
/// let t = baton_core::credential::Token::new("abc").expires_in(Duration::from_secs(300));
/// assert_eq!(t.valid_for(), Some(Duration::from_secs(300)));
/// ```
#[derive(Debug, Clone)]
pub struct Token {
    secret: Secret,
    expires_in: Option<Duration>,
}

impl Token {
    /// A token without a known expiry (it is refreshed only after a 401).
    pub fn new(secret: impl Into<Arc<str>>) -> Self {
        Token {
            secret: Secret::new(secret),
            expires_in: None,
        }
    }

    /// The token expires this long after it was received.
    pub fn expires_in(mut self, d: Duration) -> Self {
        self.expires_in = Some(d);
        self
    }

    /// How long it is valid, when known.
    pub fn valid_for(&self) -> Option<Duration> {
        self.expires_in
    }

    /// The secret.
    pub fn secret(&self) -> &Secret {
        &self.secret
    }
}

/// How an endpoint's credential is sent and refreshed.
///
/// ```
/// use baton_core::credential::CredentialSettings;
/// let s = CredentialSettings::default();
/// assert_eq!(s.header, http::header::AUTHORIZATION);
/// assert_eq!(s.scheme.as_deref(), Some("Bearer"));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct CredentialSettings {
    /// The header that carries the token (default `authorization`).
    pub header: HeaderName,
    /// The scheme before the token (default `Bearer`; none sends the token alone).
    pub scheme: Option<String>,
    /// Refresh this long before the token expires (default 30 s; at most 10 years), and
    /// at most half the token's lifetime before it: a token that lives 20 s is refreshed
    /// after 10 s, not at once on every call.
    pub refresh_margin: Duration,
    /// Up to this fraction of the margin is taken off per token, at random (default 0.2).
    pub margin_jitter: f64,
    /// A 403 invalidates and refreshes as a 401 does (default false).
    pub refresh_on_403: bool,
    /// The wait before asking the provider again after it failed (default 1 s doubling
    /// to 60 s, ±20 %).
    pub failure_backoff: Backoff,
}

impl Default for CredentialSettings {
    fn default() -> Self {
        CredentialSettings {
            header: AUTHORIZATION,
            scheme: Some("Bearer".into()),
            refresh_margin: Duration::from_secs(30),
            margin_jitter: 0.2,
            refresh_on_403: false,
            failure_backoff: Backoff {
                initial: Duration::from_secs(1),
                multiplier: 2.0,
                max: Duration::from_secs(60),
                jitter: Jitter::Proportional(0.2),
            },
        }
    }
}

impl CredentialSettings {
    /// Checks the settings; the error names the setting.
    pub fn validate(&self) -> Result<(), crate::ConfigError> {
        let bad = |setting, value: String, reason| {
            Err(crate::ConfigError::InvalidSetting {
                setting,
                value,
                reason,
            })
        };
        if !(0.0..=1.0).contains(&self.margin_jitter) {
            return bad(
                "credential.margin_jitter",
                self.margin_jitter.to_string(),
                "must be within 0 and 1",
            );
        }
        // The token's header is sent to the endpoint alone: never one that frames the
        // message, the Host rule's, or the one a proxy reads.
        let h = &self.header;
        if crate::limits::is_framing_header(h.as_str())
            || h == http::header::HOST
            || h == http::header::PROXY_AUTHORIZATION
        {
            return Err(crate::ConfigError::InvalidHeader {
                setting: "credential.header".to_string(),
                name: h.as_str().to_string(),
                reason: "it frames the message, is the Host rule's or is read by a proxy; \
                         name another header"
                    .to_string(),
            });
        }
        if let Some(s) = &self.scheme {
            if s.is_empty() || s.contains(|c: char| c.is_ascii_whitespace() || c.is_control()) {
                return bad("credential.scheme", format!("{s:?}"), "must be one word");
            }
        }
        crate::policy::check_duration("credential.refresh_margin", self.refresh_margin)?;
        let b = &self.failure_backoff;
        if !(b.multiplier.is_finite() && b.multiplier >= 1.0) {
            return bad(
                "credential.failure_backoff.multiplier",
                b.multiplier.to_string(),
                "must be at least 1",
            );
        }
        if b.max < b.initial {
            return bad(
                "credential.failure_backoff.max",
                format!("{:?}", b.max),
                "must be at least failure_backoff.initial",
            );
        }
        Ok(())
    }

    /// Whether `status` is a credential refusal: 401, and 403 when configured.
    pub fn is_refusal(&self, status: http::StatusCode) -> bool {
        status == http::StatusCode::UNAUTHORIZED
            || (self.refresh_on_403 && status == http::StatusCode::FORBIDDEN)
    }
}

/// Whether a request to `target`, sent for the endpoint `endpoint`, may carry its token:
/// only to the endpoint's own origin (a redirect hop to another origin never gets it).
///
/// ```
/// use baton_core::credential::may_carry;
/// let ep: http::Uri = "https://api.example/v1".parse().unwrap();
/// assert!(may_carry(&ep, &"https://api.example:443/v1/x".parse().unwrap()));
/// assert!(!may_carry(&ep, &"https://cdn.example/v1/x".parse().unwrap()));
/// ```
pub fn may_carry(endpoint: &http::Uri, target: &http::Uri) -> bool {
    crate::redirect::same_origin(endpoint, target)
}

/// An async adapter's token provider, boxed: called with the endpoint id, it gives the
/// token or the provider's error text.
pub type AsyncProvider = Arc<
    dyn Fn(&str) -> std::pin::Pin<Box<dyn Future<Output = Result<Token, String>> + Send>>
        + Send
        + Sync,
>;

/// Boxes an async token provider (the body of the async adapters' `token_provider`).
///
/// ```
/// use baton_core::credential::{async_provider, Token};
/// let p = async_provider(|endpoint: &str| {
///     let t = format!("t-{endpoint}");
///     async move { Ok::<_, std::io::Error>(Token::new(t)) }
/// });
/// # let _ = p;
/// ```
pub fn async_provider<F, Fut, E>(provider: F) -> AsyncProvider
where
    F: Fn(&str) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Token, E>> + Send + 'static,
    E: fmt::Display,
{
    Arc::new(move |endpoint: &str| {
        let fut = provider(endpoint);
        Box::pin(async move { fut.await.map_err(|e| e.to_string()) })
    })
}

/// A token to send: its secret, its generation, and whether this lease refreshed it.
///
/// ```
/// use std::time::Instant;
/// use baton_core::credential::{Credential, CredentialSettings, Token};
/// # fn now_or_never<F: std::future::Future>(f: F) -> F::Output {
/// #     let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
/// #     match std::future::Future::poll(std::pin::pin!(f), &mut cx) {
/// #         std::task::Poll::Ready(v) => v,
/// #         std::task::Poll::Pending => unreachable!(),
/// #     }
/// # }
/// let settings = CredentialSettings::default();
/// let slot = Credential::new(settings.clone(), 1);
/// let lease = now_or_never(slot.lease(Instant::now, || async { Ok(Token::new("t1")) })).unwrap();
/// assert!(lease.fresh()); // this lease asked the provider
/// assert_eq!(lease.generation(), 1);
/// let value = lease.header_value(&settings).unwrap();
/// assert_eq!(value, "Bearer t1");
/// assert!(value.is_sensitive());
/// assert_eq!(format!("{:?}", lease.secret()), "[redacted]");
/// ```
#[derive(Debug, Clone)]
pub struct Lease {
    secret: Secret,
    generation: u64,
    fresh: bool,
}

impl Lease {
    /// The token.
    pub fn secret(&self) -> &Secret {
        &self.secret
    }

    /// The slot's generation this token belongs to (what a 401 invalidates).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// This lease fetched the token itself (a 401 on it is the endpoint's failure, not
    /// a stale token).
    pub fn fresh(&self) -> bool {
        self.fresh
    }

    /// The header value: the scheme and the token, marked sensitive (never logged by the
    /// HTTP stacks). `None` when the token cannot be a header value.
    pub fn header_value(&self, settings: &CredentialSettings) -> Option<HeaderValue> {
        let text = match &settings.scheme {
            Some(s) => format!("{s} {}", self.secret.expose()),
            None => self.secret.expose().to_owned(),
        };
        let mut v = HeaderValue::from_str(&text).ok()?;
        v.set_sensitive(true);
        Some(v)
    }
}

/// Why no token could be had: the provider failed (its message; the token never
/// appears in it) and no unexpired token is left.
///
/// ```
/// let u = baton_core::credential::Unavailable { reason: "provider exited 1".into(), retry_at: None };
/// assert!(u.to_string().contains("exited 1"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable {
    /// What the provider said.
    pub reason: String,
    /// When the provider will be asked again (the failure backoff), if a refresh failed.
    pub retry_at: Option<Instant>,
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "no credential: the token provider failed: {}",
            self.reason
        )
    }
}

impl std::error::Error for Unavailable {}

#[derive(Debug)]
struct Held {
    secret: Secret,
    generation: u64,
    expires_at: Option<Instant>,
    refresh_at: Option<Instant>,
}

#[derive(Debug)]
struct Slot {
    current: Option<Held>,
    generation: u64,
    refreshing: bool,
    failures: u32,
    retry_at: Option<Instant>,
    last_error: Option<String>,
    /// Bumped when a refresh ends: waiters compare it.
    version: u64,
    waiters: Vec<Waker>,
    rng: Rng,
}

/// What [`Credential::begin`] tells the caller to do.
#[derive(Debug)]
enum Begin {
    Use(Lease),
    /// Call the provider, then [`Credential::finish`]; `fallback` is the valid token to use
    /// if it fails.
    Refresh(Option<Lease>),
    /// Another caller is refreshing and no valid token is left: wait for `version` to pass.
    Wait(u64),
    Unavailable(Unavailable),
}

/// One endpoint's credential slot (share it in an `Arc`; every call of a client uses the
/// same one). See the [module docs](self).
///
/// Refresh ahead of expiry, here with a 30 s margin and no jitter:
///
/// ```
/// use std::time::{Duration, Instant};
/// use baton_core::credential::{Credential, CredentialSettings, Token};
/// # fn now_or_never<F: std::future::Future>(f: F) -> F::Output {
/// #     let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
/// #     match std::future::Future::poll(std::pin::pin!(f), &mut cx) {
/// #         std::task::Poll::Ready(v) => v,
/// #         std::task::Poll::Pending => unreachable!(),
/// #     }
/// # }
/// let settings = CredentialSettings { margin_jitter: 0.0, ..CredentialSettings::default() };
/// let slot = Credential::new(settings, 7);
/// let t0 = Instant::now();
/// let lease = |at: Instant, t: &'static str| {
///     let token = Token::new(t).expires_in(Duration::from_secs(60));
///     now_or_never(slot.lease(|| at, || async move { Ok(token) })).unwrap()
/// };
/// assert_eq!(lease(t0, "t1").secret().expose(), "t1");
/// // 20 s in: still outside the margin, the provider is not asked.
/// assert_eq!(lease(t0 + Duration::from_secs(20), "unused").secret().expose(), "t1");
/// // 31 s in: within 30 s of expiry, the next lease refreshes.
/// let next = lease(t0 + Duration::from_secs(31), "t2");
/// assert_eq!((next.secret().expose(), next.generation()), ("t2", 2));
/// assert!(slot.valid(t0 + Duration::from_secs(90)).is_some()); // t2 expires at 91 s
/// ```
#[derive(Debug)]
pub struct Credential {
    settings: CredentialSettings,
    slot: Mutex<Slot>,
}

impl Held {
    fn valid(&self, now: Instant) -> bool {
        self.expires_at.is_none_or(|e| now < e)
    }

    fn lease(&self, fresh: bool) -> Lease {
        Lease {
            secret: self.secret.clone(),
            generation: self.generation,
            fresh,
        }
    }
}

impl Credential {
    /// An empty slot: the first lease asks the provider. `seed` jitters the margin and
    /// the failure backoff.
    pub fn new(settings: CredentialSettings, seed: u64) -> Self {
        let slot = Slot {
            current: None,
            generation: 0,
            refreshing: false,
            failures: 0,
            retry_at: None,
            last_error: None,
            version: 0,
            waiters: Vec::new(),
            rng: Rng::new(seed),
        };
        Credential {
            settings,
            slot: Mutex::new(slot),
        }
    }

    /// The settings.
    pub fn settings(&self) -> &CredentialSettings {
        &self.settings
    }

    fn lock(&self) -> MutexGuard<'_, Slot> {
        // A panic while holding the lock leaves a consistent slot (every change is one
        // assignment): go on with it.
        self.slot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn begin(&self, now: Instant) -> Begin {
        let mut s = self.lock();
        let valid = s
            .current
            .as_ref()
            .filter(|h| h.valid(now))
            .map(|h| h.lease(false));
        let due = s
            .current
            .as_ref()
            .is_none_or(|h| !h.valid(now) || h.refresh_at.is_some_and(|r| now >= r));
        let backing_off = s.retry_at.is_some_and(|r| now < r);
        match valid {
            Some(lease) if !due || s.refreshing || backing_off => Begin::Use(lease),
            None if s.refreshing => Begin::Wait(s.version),
            None if backing_off => Begin::Unavailable(Unavailable {
                reason: s
                    .last_error
                    .clone()
                    .unwrap_or_else(|| "no token yet".into()),
                retry_at: s.retry_at,
            }),
            fallback => {
                s.refreshing = true;
                Begin::Refresh(fallback)
            }
        }
    }

    /// Ends the refresh this caller started: keeps the new token, or counts the failure
    /// (keeping an unexpired token) and backs off. Wakes every waiter.
    fn finish(
        &self,
        got: Result<Token, String>,
        fallback: Option<Lease>,
        now: Instant,
    ) -> Result<Lease, Unavailable> {
        // A token no header can carry is the provider's failure, not a token to send.
        let got = got.and_then(|t| {
            let probe = Lease { secret: t.secret.clone(), generation: 0, fresh: true };
            match probe.header_value(&self.settings) {
                Some(_) => Ok(t),
                None => Err("the token provider returned a token no header can carry (a control character?)".into()),
            }
        });
        let mut s = self.lock();
        s.refreshing = false;
        s.version += 1;
        for w in s.waiters.drain(..) {
            w.wake();
        }
        match got {
            Ok(token) => {
                s.generation += 1;
                s.failures = 0;
                s.retry_at = None;
                s.last_error = None;
                let expires_at = token.expires_in.and_then(|d| now.checked_add(d));
                let (margin, jitter) = (self.settings.refresh_margin, self.settings.margin_jitter);
                // A token that lives shorter than the margin is used for half its life: a
                // refresh at once would call the provider on every call. Capped before the
                // jitter, so that short-lived tokens are still refreshed apart.
                let margin = token.expires_in.map_or(margin, |d| margin.min(d / 2));
                let margin = jittered_margin(margin, jitter, s.rng.next_f64());
                let refresh_at = expires_at.map(|e| e.checked_sub(margin).unwrap_or(now));
                let held = Held {
                    secret: token.secret,
                    generation: s.generation,
                    expires_at,
                    refresh_at,
                };
                let lease = held.lease(true);
                s.current = Some(held);
                Ok(lease)
            }
            Err(reason) => {
                let wait = self.settings.failure_backoff.delay(s.failures, &mut s.rng);
                s.failures = s.failures.saturating_add(1);
                s.retry_at = now.checked_add(wait);
                s.last_error = Some(reason.clone());
                // The old token only while it is still the slot's (a 401 may have
                // invalidated it during the refresh).
                let still = |f: &Lease| {
                    s.current
                        .as_ref()
                        .is_some_and(|h| h.generation == f.generation && h.valid(now))
                };
                fallback.filter(still).ok_or(Unavailable {
                    reason,
                    retry_at: s.retry_at,
                })
            }
        }
    }

    /// What an answer with `status` to a request that carried `lease` means for the slot,
    /// and whether that request may be sent once more with a new token: a refusal (401,
    /// or 403 when configured) invalidates the token when it is still the slot's, and only
    /// a refusal of a token that was not fresh earns the one re-send (a fresh token's
    /// refusal is the endpoint's failure).
    ///
    /// ```
    /// use std::time::Instant;
    /// use baton_core::credential::{Credential, CredentialSettings, Token};
    /// # fn now_or_never<F: std::future::Future>(f: F) -> F::Output {
    /// #     let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    /// #     match std::future::Future::poll(std::pin::pin!(f), &mut cx) {
    /// #         std::task::Poll::Ready(v) => v,
    /// #         std::task::Poll::Pending => unreachable!(),
    /// #     }
    /// # }
    /// let slot = Credential::new(CredentialSettings::default(), 1);
    /// let lease = |t: &'static str| now_or_never(slot.lease(Instant::now, || async move { Ok(Token::new(t)) }));
    /// let fresh = lease("t1").unwrap();
    /// assert!(!slot.answered(&fresh, http::StatusCode::UNAUTHORIZED), "fresh: no re-send");
    /// lease("t2").unwrap(); // the refresh after that refusal
    /// let held = lease("unused").unwrap(); // t2, held: not fresh
    /// assert!(!held.fresh());
    /// assert!(!slot.answered(&held, http::StatusCode::OK));
    /// assert!(slot.answered(&held, http::StatusCode::UNAUTHORIZED), "a held token's refusal: re-send once");
    /// ```
    pub fn answered(&self, lease: &Lease, status: http::StatusCode) -> bool {
        if !self.settings.is_refusal(status) {
            return false;
        }
        self.rejected(lease.generation());
        !lease.fresh()
    }

    /// The current token when it has not expired (what a caller whose refresh ran out of
    /// time sends instead).
    pub fn valid(&self, now: Instant) -> Option<Lease> {
        let s = self.lock();
        s.current
            .as_ref()
            .filter(|h| h.valid(now))
            .map(|h| h.lease(false))
    }

    /// The provider did not answer within the caller's time (its refresh future was
    /// dropped): counted as a failed refresh, so the next callers back off instead of
    /// each waiting as long again.
    pub fn timed_out(&self, now: Instant) {
        let mut s = self.lock();
        let wait = self.settings.failure_backoff.delay(s.failures, &mut s.rng);
        s.failures = s.failures.saturating_add(1);
        s.retry_at = now.checked_add(wait);
        s.last_error = Some("the token provider did not answer in time".into());
    }

    /// A credential refusal (401, or 403 when configured) of an attempt that sent
    /// `generation`: invalidates the slot when that is still its generation. Returns
    /// whether it did.
    pub fn rejected(&self, generation: u64) -> bool {
        let mut s = self.lock();
        if s.current
            .as_ref()
            .is_some_and(|h| h.generation == generation)
        {
            s.current = None;
            true
        } else {
            false
        }
    }

    fn poll_changed(&self, version: u64, cx: &mut Context<'_>) -> Poll<()> {
        let mut s = self.lock();
        if s.version != version || !s.refreshing {
            return Poll::Ready(());
        }
        if !s.waiters.iter().any(|w| w.will_wake(cx.waker())) {
            s.waiters.push(cx.waker().clone());
        }
        Poll::Pending
    }

    /// A token to send: the current one, or a refreshed one when it is due, missing or
    /// invalidated. `fetch` is called only by the one caller that refreshes; the others
    /// wait for it (without a timer) or use the still-valid token. `now` reads the clock
    /// the slot compares expiries with.
    pub async fn lease<F, Fut>(
        &self,
        now: impl Fn() -> Instant,
        fetch: F,
    ) -> Result<Lease, Unavailable>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Token, String>>,
    {
        self.lease_noting(now, fetch, &AtomicBool::new(false)).await
    }

    /// [`lease`](Self::lease), setting `refreshing` once this caller is the one that
    /// refreshes.
    async fn lease_noting<F, Fut>(
        &self,
        now: impl Fn() -> Instant,
        fetch: F,
        refreshing: &AtomicBool,
    ) -> Result<Lease, Unavailable>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Token, String>>,
    {
        let mut fetch = Some(fetch);
        loop {
            match self.begin(now()) {
                Begin::Use(lease) => return Ok(lease),
                Begin::Unavailable(u) => return Err(u),
                Begin::Wait(version) => {
                    std::future::poll_fn(|cx| self.poll_changed(version, cx)).await
                }
                Begin::Refresh(fallback) => {
                    refreshing.store(true, Ordering::Relaxed);
                    let guard = Abandon(self);
                    let got = match fetch.take() {
                        Some(f) => f().await,
                        None => Err("the token provider was already asked".into()),
                    };
                    std::mem::forget(guard);
                    return self.finish(got, fallback, now());
                }
            }
        }
    }

    /// [`lease`](Self::lease) with a time limit: `deadline` is the adapter's timer (the
    /// attempt's). When it fires first, the caller gets the still-valid token, or
    /// [`Unavailable`] (nothing was sent). A caller that was refreshing drops its refresh,
    /// counted as failed ([`timed_out`](Self::timed_out)) before the callers waiting for
    /// it wake (they then back off with it, rather than call the provider at once); a
    /// caller that was only waiting counts nothing.
    pub async fn lease_until<F, Fut, D>(
        &self,
        now: impl Fn() -> Instant,
        fetch: F,
        deadline: D,
    ) -> Result<Lease, Unavailable>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Token, String>>,
        D: Future<Output = ()>,
    {
        let got = {
            let refreshing = AtomicBool::new(false);
            let mut lease = std::pin::pin!(self.lease_noting(&now, fetch, &refreshing));
            let mut deadline = std::pin::pin!(deadline);
            let got = std::future::poll_fn(|cx| {
                if let Poll::Ready(r) = lease.as_mut().poll(cx) {
                    return Poll::Ready(Some(r));
                }
                deadline.as_mut().poll(cx).map(|()| None)
            })
            .await;
            // Counted while the refresh is still this caller's: dropping it (below) frees
            // the slot and wakes the waiters.
            let got = got.ok_or_else(&now);
            if let (Err(at), true) = (&got, refreshing.load(Ordering::Relaxed)) {
                self.timed_out(*at);
            }
            got
        };
        match got {
            Ok(r) => r,
            Err(at) => self.valid(at).ok_or_else(|| Unavailable {
                reason: "the token provider did not answer within the attempt's time".into(),
                retry_at: self.lock().retry_at,
            }),
        }
    }
}

/// A refresh whose caller went away (a dropped future, a panicking provider): the slot is
/// never left refreshing; the next caller (or a waiter) refreshes instead.
struct Abandon<'a>(&'a Credential);

impl Drop for Abandon<'_> {
    fn drop(&mut self) {
        // Not the provider's failure: no backoff; a waiter takes the refresh over.
        let mut s = self.0.lock();
        s.refreshing = false;
        s.version += 1;
        for w in s.waiters.drain(..) {
            w.wake();
        }
    }
}

/// How long before expiry a token is refreshed: `margin` shortened by up to `jitter` of it,
/// with `r` drawn from `[0, 1)`. The same product as `margin.mul_f64(1 - jitter * r)`, but
/// total: a [`Credential`] made directly is not validated, so a jitter outside `0..=1` is
/// clamped into it (NaN counts as none), and a product too large for a `Duration` keeps the
/// margin as it is.
fn jittered_margin(margin: Duration, jitter: f64, r: f64) -> Duration {
    let jitter = if jitter.is_nan() {
        0.0
    } else {
        jitter.clamp(0.0, 1.0)
    };
    Duration::try_from_secs_f64((1.0 - jitter * r) * margin.as_secs_f64()).unwrap_or(margin)
}
#[cfg(test)]
mod tests {
    use super::*;

    /// Drives `lease` on this thread (as baton-blocking does), parking while it waits.
    fn lease_blocking(
        slot: &Credential,
        now: impl Fn() -> Instant,
        fetch: impl FnOnce() -> Result<Token, String>,
    ) -> Result<Lease, Unavailable> {
        struct Unpark(std::thread::Thread);
        impl std::task::Wake for Unpark {
            fn wake(self: Arc<Self>) {
                self.0.unpark();
            }
        }
        let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
        let mut cx = Context::from_waker(&waker);
        let mut fut = std::pin::pin!(slot.lease(now, || std::future::ready(fetch())));
        loop {
            if let Poll::Ready(r) = fut.as_mut().poll(&mut cx) {
                return r;
            }
            std::thread::park();
        }
    }

    fn token(s: &str, secs: u64) -> Result<Token, String> {
        Ok(Token::new(s).expires_in(Duration::from_secs(secs)))
    }

    #[test]
    fn refreshes_ahead_of_expiry_and_keeps_the_token_while_the_provider_fails() {
        let slot = Credential::new(
            CredentialSettings {
                margin_jitter: 0.0,
                ..CredentialSettings::default()
            },
            1,
        );
        let t0 = Instant::now();
        let first = lease_blocking(&slot, || t0, || token("t1", 100)).unwrap();
        // 80 s later: 20 s left, inside the 30 s margin: refresh; it fails, t1 is kept.
        let t1 = t0 + Duration::from_secs(80);
        let kept = lease_blocking(&slot, || t1, || Err("provider down".into())).unwrap();
        assert_eq!(kept.generation(), first.generation());
        // Backing off: the provider is not asked again at once.
        let kept = lease_blocking(&slot, || t1, || panic!("asked during the backoff")).unwrap();
        assert_eq!(kept.secret().expose(), "t1");
    }

    /// A token that lives shorter than the margin (15 s against 30 s) is refreshed after
    /// half its life, not on every call.
    #[test]
    fn a_token_shorter_lived_than_the_margin_is_used_for_half_its_life() {
        let slot = Credential::new(CredentialSettings::default(), 1);
        let t0 = Instant::now();
        let first = lease_blocking(&slot, || t0, || token("t1", 15)).unwrap();
        let t1 = t0 + Duration::from_secs(7);
        let held = lease_blocking(&slot, || t1, || panic!("refreshed at 7 s of 15")).unwrap();
        assert_eq!(held.generation(), first.generation());
        // Due between 7.5 s and 9 s (the margin's jitter takes up to a fifth of it off).
        let t2 = t0 + Duration::from_millis(9_100);
        let next = lease_blocking(&slot, || t2, || token("t2", 15)).unwrap();
        assert_eq!(next.secret().expose(), "t2");
    }

    #[test]
    fn an_expired_token_is_never_used_and_a_failure_is_not_cached_for_ever() {
        let slot = Credential::new(CredentialSettings::default(), 1);
        let t0 = Instant::now();
        lease_blocking(&slot, || t0, || token("t1", 1)).unwrap();
        std::thread::sleep(Duration::from_millis(1100));
        let e = lease_blocking(&slot, Instant::now, || Err("boom".into())).unwrap_err();
        assert!(e.reason.contains("boom"));
        assert!(!format!("{e:?}").contains("t1"));
        // After the backoff the provider is asked again.
        let later = e.retry_at.unwrap() + Duration::from_millis(1);
        std::thread::sleep(later.saturating_duration_since(Instant::now()));
        assert_eq!(
            lease_blocking(&slot, || later, || token("t2", 60))
                .unwrap()
                .secret()
                .expose(),
            "t2"
        );
    }

    #[test]
    fn an_abandoned_refresh_frees_the_slot() {
        let slot = Credential::new(CredentialSettings::default(), 1);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            lease_blocking(&slot, Instant::now, || panic!("provider panicked"))
        }));
        assert!(r.is_err());
        assert!(!slot.lock().refreshing);
    }

    #[test]
    fn a_token_no_header_can_carry_is_a_failed_refresh() {
        let slot = Credential::new(CredentialSettings::default(), 1);
        let e =
            lease_blocking(&slot, Instant::now, || Ok(Token::new("bad\u{1}token"))).unwrap_err();
        assert!(e.reason.contains("no header can carry"), "{e}");
        assert!(!format!("{e:?}").contains("bad"), "{e:?}");
    }

    #[test]
    fn a_failed_refresh_never_hands_back_a_token_invalidated_meanwhile() {
        let settings = CredentialSettings {
            margin_jitter: 0.0,
            ..CredentialSettings::default()
        };
        let slot = Credential::new(settings, 1);
        let t0 = Instant::now();
        let first = lease_blocking(&slot, || t0, || token("t1", 10)).unwrap();
        // Due for a refresh 6 s later (past half of its 10 s: the 30 s margin is capped
        // there); while it runs, a 401 of t1 arrives; then the refresh fails: t1 must not
        // come back.
        let t1 = t0 + Duration::from_millis(6_100);
        let got = lease_blocking(
            &slot,
            || t1,
            || {
                assert!(slot.rejected(first.generation()));
                Err("provider down".into())
            },
        );
        assert!(got.is_err(), "{got:?}");
    }

    #[test]
    fn a_provider_past_its_time_is_a_failed_refresh_and_a_valid_token_is_used() {
        let slot = Credential::new(CredentialSettings::default(), 1);
        let mut cx = Context::from_waker(Waker::noop());
        // No token yet, and the provider never answers: past the deadline, nothing.
        let lease = slot.lease_until(
            Instant::now,
            std::future::pending::<Result<Token, String>>,
            std::future::ready(()),
        );
        let Poll::Ready(r) = std::pin::pin!(lease).poll(&mut cx) else {
            panic!("pending")
        };
        let e = r.unwrap_err();
        assert!(
            e.reason.contains("did not answer") && e.retry_at.is_some(),
            "{e:?}"
        );
        assert!(!slot.lock().refreshing, "the slot is free again");
        // With a token held and due (past 9 s of its 10: the capped margin, less up to a
        // fifth of it), the same timeout sends that token.
        let slot = Credential::new(CredentialSettings::default(), 1);
        let t0 = Instant::now();
        lease_blocking(&slot, || t0, || token("t1", 10)).unwrap();
        let lease = slot.lease_until(
            || t0 + Duration::from_millis(9_100),
            std::future::pending::<Result<Token, String>>,
            std::future::ready(()),
        );
        let Poll::Ready(r) = std::pin::pin!(lease).poll(&mut cx) else {
            panic!("pending")
        };
        assert_eq!(r.unwrap().secret().expose(), "t1");
    }

    /// A caller that only waited for another's refresh and ran out of time counts no
    /// failure: the refresher's provider did not fail, and a backoff would hold back
    /// every call.
    #[test]
    fn a_waiter_past_its_time_counts_no_failed_refresh() {
        let slot = Credential::new(CredentialSettings::default(), 1);
        let mut cx = Context::from_waker(Waker::noop());
        // One caller refreshes, its provider still working.
        let refresh = slot.lease(Instant::now, std::future::pending::<Result<Token, String>>);
        let mut refresh = std::pin::pin!(refresh);
        assert!(refresh.as_mut().poll(&mut cx).is_pending());
        // Another waits for it, with no time left.
        let waiter = slot.lease_until(
            Instant::now,
            || async { panic!("the waiter refreshed") },
            std::future::ready(()),
        );
        let Poll::Ready(r) = std::pin::pin!(waiter).poll(&mut cx) else {
            panic!("pending")
        };
        assert!(r.is_err());
        let s = slot.lock();
        assert_eq!(
            (s.failures, s.retry_at),
            (0, None),
            "a waiter counted a failure"
        );
        assert!(s.refreshing, "the refresh is still the first caller's");
    }

    #[test]
    fn the_token_header_is_never_one_the_message_or_the_call_owns() {
        let built = |header: &str| {
            let settings = CredentialSettings {
                header: http::HeaderName::try_from(header).unwrap(),
                ..CredentialSettings::default()
            };
            let endpoint = crate::Endpoint::new("bank", "https://bank.example/");
            crate::Policy::builder()
                .endpoint(endpoint.credential(settings))
                .build()
        };
        for header in [
            "host",
            "content-length",
            "transfer-encoding",
            "proxy-authorization",
            "x-request-id",
            "idempotency-key",
        ] {
            let text = built(header).unwrap_err().to_string();
            assert!(
                text.contains("bank")
                    && text.contains("credential.header")
                    && text.contains(header),
                "{header}: {text}"
            );
        }
        assert!(built("x-api-key").is_ok());
    }

    #[test]
    fn the_header_value_is_sensitive_and_secrets_do_not_print() {
        let lease = Lease {
            secret: Secret::new("abc"),
            generation: 1,
            fresh: true,
        };
        let v = lease.header_value(&CredentialSettings::default()).unwrap();
        assert!(v.is_sensitive());
        assert_eq!(v, "Bearer abc");
        assert!(!format!("{lease:?}").contains("abc"));
    }

    #[test]
    fn a_margin_of_any_size_and_any_jitter_refreshes_without_panicking() {
        // Settings a Credential made directly may carry: they were never validated.
        for (margin, jitter) in [
            (Duration::MAX, 0.0),
            (Duration::MAX, 0.2),
            (Duration::from_secs(30), 2.0),
            (Duration::from_secs(30), -1.0),
            (Duration::from_secs(30), f64::NAN),
        ] {
            let settings = CredentialSettings {
                refresh_margin: margin,
                margin_jitter: jitter,
                ..CredentialSettings::default()
            };
            let slot = Credential::new(settings, 7);
            for n in 0..20 {
                let lease = lease_blocking(&slot, Instant::now, || token("t", 60));
                assert!(lease.is_ok(), "{margin:?} {jitter} refresh {n}");
                slot.lock().current = None;
            }
        }
        // Within the settings' range it is the plain product, unchanged.
        let m = Duration::from_millis(30_001);
        assert_eq!(jittered_margin(m, 0.2, 0.37), m.mul_f64(1.0 - 0.2 * 0.37));
        assert_eq!(jittered_margin(m, 2.0, 0.5), m.mul_f64(0.5));
        assert_eq!(jittered_margin(m, f64::NAN, 0.5), m);
    }

    #[test]
    fn a_refresh_margin_over_ten_years_is_rejected_by_name() {
        let settings = CredentialSettings {
            refresh_margin: Duration::MAX,
            ..CredentialSettings::default()
        };
        let e = settings.validate().unwrap_err().to_string();
        assert!(e.contains("credential.refresh_margin"), "{e}");
    }
}
