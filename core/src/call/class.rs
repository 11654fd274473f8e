//! What kind of call this is, decided once when it starts: its identity (SPEC 3: request
//! id, idempotency key), its permissions (SPEC 2.2), whether it is hedged (SPEC 2.8), and
//! its per-call settings, validated (SPEC 5). Nothing here changes while the call runs.

use std::time::{Duration, Instant};

use http::Method;

use crate::engine::Engine;
use crate::id::RequestId;
use crate::permission::{self, Permission, PermissionOverride, PermissionSource, Resolved};
use crate::policy::{
    EventSink, RequestInfo, MAX_ATTEMPTS, MAX_ATTEMPTS_PER_ENDPOINT, MAX_DURATION,
};
use crate::report::CallRejection;
use crate::rng::Rng;
use crate::time::add;

/// Per-call settings (SPEC 2.2, 2.6, 3). Everything unset comes from the policy.
///
/// ```
/// use std::time::Duration;
/// use baton_core::{CallOptions, Permission};
/// let opts = CallOptions {
///     idempotency_key: Some("charge-42".into()),
///     deadline: Some(Duration::from_secs(3)),
///     failover: Some(Permission::Never),
///     ..CallOptions::default()
/// };
/// assert!(!opts.deny);
/// ```
///
/// With the `serde` feature the options have a text form (every field optional, durations
/// as in policy files, the event sink left out), for per-call settings kept in
/// configuration; the conformance vectors and the CLI's `batch` lines read theirs with it:
///
/// ```
/// # #[cfg(feature = "serde")] {
/// use std::time::Duration;
/// use baton_core::{CallOptions, Permission};
/// let opts: CallOptions =
///     serde_json::from_str(r#"{"retry": "never", "deadline": "1.5s", "max_attempts": 2}"#)
///         .unwrap();
/// assert_eq!(opts.retry, Some(Permission::Never));
/// assert_eq!(opts.deadline, Some(Duration::from_millis(1500)));
/// assert_eq!(opts.max_attempts, Some(2));
/// # }
/// ```
#[derive(Clone, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default))]
pub struct CallOptions {
    /// Retry permission for this call.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub retry: Option<Permission>,
    /// Failover permission for this call.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub failover: Option<Permission>,
    /// At most one attempt (both permissions `Never`).
    pub deny: bool,
    /// Preferred endpoint id (moved to the front when eligible and available).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub prefer: Option<String>,
    /// Restricts the call to the endpoint with this id: every other is ineligible for it
    /// (SPEC 2.1), so its requests reach that endpoint or none, even when it is
    /// unavailable (then it is tried last, or skipped). For state bound to one
    /// destination that must not travel, such as an event stream's `Last-Event-ID`. An
    /// unknown id is an error before any attempt.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub only: Option<String>,
    /// Deadline for the whole call, from its start.
    #[cfg_attr(
        feature = "serde",
        serde(
            with = "crate::policy::serde_opt_duration",
            skip_serializing_if = "Option::is_none"
        )
    )]
    pub deadline: Option<Duration>,
    /// Attempt timeout for this call.
    #[cfg_attr(
        feature = "serde",
        serde(
            with = "crate::policy::serde_opt_duration",
            skip_serializing_if = "Option::is_none"
        )
    )]
    pub attempt_timeout: Option<Duration>,
    /// Attempts per endpoint per round for this call.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub attempts_per_endpoint: Option<u32>,
    /// Cap on this call's attempts.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub max_attempts: Option<u32>,
    /// Caller-chosen request id (validated: 8-128 of `A-Z a-z 0-9 . _ : -`).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub request_id: Option<String>,
    /// Idempotency key.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub idempotency_key: Option<String>,
    /// Opt in to hedging for a call that is not a safe method.
    pub hedge: bool,
    /// Event sink for this call. It receives the call's events after the policy's sink
    /// (which sees every call's): a per-call sink never hides a call from the client's.
    #[cfg_attr(feature = "serde", serde(skip))]
    pub events: Option<EventSink>,
}

impl std::fmt::Debug for CallOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallOptions")
            .field("retry", &self.retry)
            .field("failover", &self.failover)
            .field("deny", &self.deny)
            .field("prefer", &self.prefer)
            .field("only", &self.only)
            .field("deadline", &self.deadline)
            .field("attempt_timeout", &self.attempt_timeout)
            .field("attempts_per_endpoint", &self.attempts_per_endpoint)
            .field("max_attempts", &self.max_attempts)
            .field("request_id", &self.request_id)
            .field("idempotency_key", &self.idempotency_key)
            .field("hedge", &self.hedge)
            .field("events", &self.events.is_some())
            .finish()
    }
}

/// The call's identity, sent unchanged on every attempt.
pub(crate) struct Identity {
    pub(crate) request_id: RequestId,
    pub(crate) key: Option<String>,
}

/// The call's class: identity, permissions, hedging and its own timing settings.
pub(crate) struct Class {
    pub(crate) identity: Identity,
    pub(crate) method: Method,
    pub(crate) perms: Resolved,
    /// The call is hedged (SPEC 2.8), by the policy's `hedge` setting.
    pub(crate) hedged: bool,
    pub(crate) deadline: Option<Instant>,
    pub(crate) attempt_timeout: Option<Duration>,
}

impl Class {
    /// Whether the call carries an idempotency key.
    pub(crate) fn keyed(&self) -> bool {
        self.identity.key.is_some()
    }

    /// Whether the call relies on its idempotency key for a repeat (SPEC 2.3: such a call
    /// triggers on the narrow, key-reliant status set).
    pub(crate) fn key_reliant(&self) -> bool {
        self.perms.retry_source == PermissionSource::IdempotencyKey
            || self.perms.failover_source == PermissionSource::IdempotencyKey
    }

    /// Whether some repeat is allowed even after the work may have been done.
    pub(crate) fn repeatable(&self) -> bool {
        self.perms.retry == Permission::Always || self.perms.failover == Permission::Always
    }
}

/// Decides the call's class. The request id is drawn from `rng` when the caller gave none
/// (or gave an invalid one: events still need an id). Returns the first reason the call
/// is rejected, if any, in this order: request id, idempotency key, request limits,
/// per-call settings.
#[inline(always)]
pub(crate) fn classify(
    engine: &Engine,
    request: &RequestInfo<'_>,
    options: &mut CallOptions,
    rng: &mut Rng,
    now: Instant,
) -> (Class, Option<CallRejection>) {
    let policy = &engine.policy;
    let mut invalid = None;
    let request_id = request_id(
        engine,
        request,
        options.request_id.take(),
        rng,
        &mut invalid,
    );
    let key = idempotency_key(
        engine,
        request,
        options.idempotency_key.take(),
        &mut invalid,
    );
    if let Err(e) = crate::limits::check_request(request.method, request.headers) {
        invalid.get_or_insert(e.into());
    }
    if let Some(why) = check_options(options) {
        invalid.get_or_insert(why);
    }
    // Permissions: call setting > policy function > inference > default.
    let call_override = if options.deny {
        PermissionOverride::deny()
    } else {
        PermissionOverride {
            retry: options.retry,
            failover: options.failover,
        }
    };
    let from_fn = match (
        &policy.permission,
        call_override.retry.and(call_override.failover),
    ) {
        (Some(f), None) => Some(f(request)),
        _ => None,
    };
    let keyed = key.is_some();
    let perms = permission::resolve(call_override, from_fn, request.method, keyed);
    let hedged = policy.settings.hedge.is_some() && {
        let read = permission::is_safe_method(request.method) || options.hedge;
        read && perms.failover == Permission::Always && !keyed
    };
    let deadline = options.deadline.or(policy.settings.deadline);
    let class = Class {
        identity: Identity { request_id, key },
        method: request.method.clone(),
        perms,
        hedged,
        deadline: deadline.map(|d| add(now, d)),
        attempt_timeout: options.attempt_timeout,
    };
    (class, invalid)
}

/// Request identity: the call option, then the header on the request, then generated. Given
/// twice with different values (the option and the header, or the header twice), the call
/// is rejected before anything is sent ([`RequestIdError::Twice`](crate::RequestIdError)).
#[inline]
fn request_id(
    engine: &Engine,
    request: &RequestInfo<'_>,
    given: Option<String>,
    rng: &mut Rng,
    invalid: &mut Option<CallRejection>,
) -> RequestId {
    if given.is_none() && request.headers.is_empty() {
        return RequestId::generate(rng);
    }
    given_request_id(engine, request, given, rng, invalid)
}

/// [`request_id`] when the call or its headers may give one. Out of line: a call without
/// either runs through less code (fewer instruction cache lines when the call runs cold,
/// between network reads).
#[cold]
#[inline(never)]
fn given_request_id(
    engine: &Engine,
    request: &RequestInfo<'_>,
    given: Option<String>,
    rng: &mut Rng,
    invalid: &mut Option<CallRejection>,
) -> RequestId {
    let header = &engine.policy.request_id_header;
    if let Some(twice) = given_twice(given.as_deref(), request, header) {
        let [first, second] = twice.map(|v| v.chars().take(160).collect());
        invalid.get_or_insert(crate::id::RequestIdError::Twice { first, second }.into());
        return RequestId::generate(rng);
    }
    let parsed = match given {
        Some(id) => Some(RequestId::parse(&id)),
        None => request
            .headers
            .get(&engine.policy.request_id_header)
            .map(|v| RequestId::parse(v.to_str().unwrap_or("<not text>"))),
    };
    match parsed {
        Some(Ok(id)) => id,
        Some(Err(e)) => {
            invalid.get_or_insert(e.into());
            RequestId::generate(rng)
        }
        None => RequestId::generate(rng),
    }
}

/// The idempotency key: the call option, then the header; given twice with different
/// values, the call is rejected before anything is sent. Sent unchanged means kept byte
/// for byte: a key that is not visible ASCII is rejected rather than altered.
#[inline]
fn idempotency_key(
    engine: &Engine,
    request: &RequestInfo<'_>,
    given: Option<String>,
    invalid: &mut Option<CallRejection>,
) -> Option<String> {
    if given.is_none() && request.headers.is_empty() {
        return None;
    }
    given_idempotency_key(engine, request, given, invalid)
}

/// [`idempotency_key`] when the call or its headers may give one (out of line, as for
/// the request id).
#[cold]
#[inline(never)]
fn given_idempotency_key(
    engine: &Engine,
    request: &RequestInfo<'_>,
    given: Option<String>,
    invalid: &mut Option<CallRejection>,
) -> Option<String> {
    let header = &engine.policy.idempotency_key_header;
    if given_twice(given.as_deref(), request, header).is_some() {
        invalid.get_or_insert(CallRejection::IdempotencyKey(
            "given twice with different values (a call option and the header, or the header \
             twice); give it once",
        ));
        return None;
    }
    let key = match given {
        Some(k) => Some(k),
        None => match request.headers.get(header) {
            None => None,
            Some(v) => match v.to_str() {
                Ok(k) => Some(k.to_owned()),
                Err(_) => {
                    invalid.get_or_insert(CallRejection::IdempotencyKey(
                        "the header is not visible ASCII text",
                    ));
                    None
                }
            },
        },
    };
    if let Some(k) = &key {
        // Visible ASCII (and spaces) only, as for the header: `HeaderValue` also takes
        // bytes above 0x7f, which a key given as a call option would then carry.
        let visible = |b: u8| b == b' ' || b == b'\t' || b.is_ascii_graphic();
        if k.is_empty() || !k.bytes().all(visible) || http::HeaderValue::from_str(k).is_err() {
            invalid.get_or_insert(CallRejection::IdempotencyKey(
                "not a valid, non-empty header value of visible ASCII text",
            ));
        }
    }
    key
}

/// Two different values of one identity (the call option's, then the header's), when the
/// caller gave it twice: which one was meant cannot be known, and one would be lost.
fn given_twice(
    option: Option<&str>,
    request: &RequestInfo<'_>,
    header: &http::HeaderName,
) -> Option<[String; 2]> {
    // Compared as bytes (two different values that are not text are still two).
    let mut values = option
        .map(str::as_bytes)
        .into_iter()
        .chain(request.headers.get_all(header).iter().map(|v| v.as_bytes()));
    let first = values.next()?;
    let second = values.find(|v| *v != first)?;
    Some([first, second].map(|v| String::from_utf8_lossy(v).into_owned()))
}

/// The first per-call setting out of range, if any (SPEC 5: invalid per-call settings fail
/// the call before any send).
#[inline]
fn check_options(options: &CallOptions) -> Option<CallRejection> {
    let o = options;
    let any = o.deadline.is_some()
        || o.attempt_timeout.is_some()
        || o.attempts_per_endpoint.is_some()
        || o.max_attempts.is_some();
    if any {
        check_set_options(options)
    } else {
        None
    }
}

/// [`check_options`] for a call that set any of the checked options.
#[cold]
#[inline(never)]
fn check_set_options(options: &CallOptions) -> Option<CallRejection> {
    let bad = |setting, value: String, reason: String| CallRejection::Setting {
        setting,
        value,
        reason,
    };
    for (name, d) in [
        ("deadline", options.deadline),
        ("attempt_timeout", options.attempt_timeout),
    ] {
        match d {
            Some(d) if d.is_zero() => {
                return Some(bad(
                    name,
                    format!("{d:?}"),
                    "must be greater than zero".into(),
                ))
            }
            Some(d) if d > MAX_DURATION => {
                return Some(bad(name, format!("{d:?}"), "longer than 10 years".into()))
            }
            _ => {}
        }
    }
    for (name, n, max) in [
        (
            "attempts_per_endpoint",
            options.attempts_per_endpoint,
            MAX_ATTEMPTS_PER_ENDPOINT,
        ),
        ("max_attempts", options.max_attempts, MAX_ATTEMPTS),
    ] {
        if let Some(n) = n.filter(|n| *n == 0 || *n > max) {
            return Some(bad(name, n.to_string(), format!("must be 1 to {max}")));
        }
    }
    None
}
