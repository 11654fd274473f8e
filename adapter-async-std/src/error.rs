//! The adapter's errors: a failed call (the engine's error with its report, plus the last
//! transport error and any retained response), a body error after the commit point, and
//! client build errors.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;

use baton_core::{ConfigError, ErrorKind, Report};

use crate::classify::TransportError;
use crate::response::Response;

/// What a call, or reading a response body, can fail with.
///
/// ```no_run
/// # async fn demo(client: baton_async_std::Client) {
/// use baton_async_std::Error;
/// match client.post("/v1/charges").idempotency_key("charge-42").send().await {
///     Ok(resp) => println!("{} from {}", resp.status(), resp.endpoint()),
///     Err(Error::Call(e)) => {
///         // Every attempt, the stop reason, and whether the work may have been done.
///         eprintln!("{e}; may have executed: {}", e.report().may_have_executed);
///     }
///     Err(e) => eprintln!("{e}"),
/// }
/// # }
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The call failed (SPEC 2.10).
    Call(Box<CallError>),
    /// Reading the response body failed after the headers arrived (never passed off as a
    /// complete body).
    Body(Box<BodyError>),
    /// The body is not the JSON the caller asked for.
    #[cfg(feature = "json")]
    Decode(Box<DecodeError>),
}

impl Error {
    /// The call's report (every error has one: a body or decode error's is the report of
    /// the call that answered).
    pub fn report(&self) -> &Report {
        match self {
            Error::Call(e) => e.report(),
            Error::Body(b) => &b.report,
            #[cfg(feature = "json")]
            Error::Decode(d) => &d.report,
        }
    }

    /// The endpoint the error names: the one that sent the response whose body failed,
    /// or, for a failed call, the one of its retained response or of its last attempt.
    pub fn endpoint(&self) -> Option<&str> {
        match self {
            Error::Call(e) => e.report().result_endpoint(),
            Error::Body(b) => Some(&b.endpoint),
            #[cfg(feature = "json")]
            Error::Decode(d) => Some(&d.endpoint),
        }
    }

    /// The engine's error kind (`None`: the call answered, and reading or decoding the
    /// body failed).
    pub fn kind(&self) -> Option<&ErrorKind> {
        match self {
            Error::Call(e) => Some(e.kind()),
            _ => None,
        }
    }

    /// Whether the work may have been done somewhere: the call's `may_have_executed`.
    pub fn may_have_executed(&self) -> bool {
        self.report().may_have_executed
    }

    /// The call's request id (every error has one, even a call that never got a response).
    pub fn request_id(&self) -> &str {
        self.report().request_id.as_str()
    }

    /// The retained response a failed call carries (SPEC 2.10), if any.
    pub fn retained_response(&self) -> Option<&Response> {
        match self {
            Error::Call(e) => e.response(),
            _ => None,
        }
    }

    /// Takes the retained response out of a failed call.
    pub fn into_retained_response(self) -> Option<Response> {
        match self {
            Error::Call(e) => e.into_response(),
            _ => None,
        }
    }

    /// Whether this is a body error.
    pub fn is_body(&self) -> bool {
        matches!(self, Error::Body(_))
    }

    /// Whether a timeout ended this (a body timeout, or a call whose last attempt timed
    /// out, or the deadline).
    pub fn is_timeout(&self) -> bool {
        match self {
            Error::Call(e) => {
                matches!(e.kind(), ErrorKind::Deadline)
                    || e.transport().is_some_and(TransportError::is_timeout)
            }
            Error::Body(b) => b.timed_out,
            #[cfg(feature = "json")]
            Error::Decode(_) => false,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Call(e) => e.fmt(f),
            Error::Body(e) => e.fmt(f),
            #[cfg(feature = "json")]
            Error::Decode(e) => e.fmt(f),
        }
    }
}

impl StdError for Error {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            Error::Call(e) => e.source(),
            Error::Body(e) => e.source(),
            #[cfg(feature = "json")]
            Error::Decode(e) => e.source(),
        }
    }
}

/// A failed call: the engine's [`baton_core::Error`] (kind, report), the response it
/// retained when returning it was not allowed, and the last transport error.
///
/// It shows the engine's error's text: `{}` the call and its attempts, `{:#}` every cause
/// after it. Its [`source`](StdError::source) is the engine's link to the last attempt
/// ([`baton_core::AttemptFailure`]; [`baton_core::NoAttempt`] when none was made), whose
/// own source is the last transport error (whose
/// own source is the I/O, TLS or hyper error) when one happened: an error printer that
/// walks the chain (anyhow's `{:#}`) shows each part once.
///
/// ```no_run
/// # async fn demo(client: baton_async_std::Client) {
/// use baton_async_std::Error;
/// if let Err(Error::Call(e)) = client.post("/v1/charges").body("{}").send().await {
///     for a in &e.report().attempts {
///         eprintln!("{a}"); // "#1 primary: ambiguous after 12ms"
///     }
///     if let Some(t) = e.transport() {
///         eprintln!("last transport error: {t} ({:?})", t.phase());
///     }
///     if let Some(resp) = e.into_response() {
///         eprintln!("the provider said {}", resp.status());
///     }
/// }
/// # }
/// ```
#[derive(Debug)]
pub struct CallError {
    /// The engine's error, with the last transport error as its `last_error`.
    pub(crate) error: baton_core::Error,
    pub(crate) response: Option<Response>,
}

impl CallError {
    /// Which error (failover, deadline, budget, ...).
    pub fn kind(&self) -> &ErrorKind {
        &self.error.kind
    }

    /// Every attempt, the stop reason, the elapsed time and `may_have_executed`.
    pub fn report(&self) -> &Report {
        &self.error.report
    }

    /// The engine's error.
    pub fn core(&self) -> &baton_core::Error {
        &self.error
    }

    /// The retained response this error carries (SPEC 2.10), if any.
    pub fn response(&self) -> Option<&Response> {
        self.response.as_ref()
    }

    /// Takes the retained response.
    pub fn into_response(self) -> Option<Response> {
        self.response
    }

    /// The last transport error of the call, if any.
    pub fn transport(&self) -> Option<&TransportError> {
        self.error.last_error()?.downcast_ref()
    }
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl StdError for CallError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.error.source()
    }
}

/// Reading a response body failed (or timed out) after its headers arrived. It names the
/// endpoint and attempt that gave the response.
///
/// ```no_run
/// # async fn demo(client: baton_async_std::Client) -> Result<(), baton_async_std::Error> {
/// use baton_async_std::Error;
/// let resp = client.get("/blocks/latest").send().await?;
/// match resp.bytes().await {
///     Ok(body) => println!("{} bytes", body.len()),
///     // The headers were the commit point: the call is over, the body is incomplete.
///     Err(Error::Body(b)) => eprintln!("body from {} broke: {b}", b.endpoint()),
///     Err(e) => return Err(e),
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct BodyError {
    pub(crate) endpoint: Arc<str>,
    pub(crate) attempt: u32,
    pub(crate) report: Box<Report>,
    pub(crate) timed_out: bool,
    pub(crate) source: Option<hyper::Error>,
}

impl BodyError {
    /// The endpoint whose response body failed.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The attempt that got the response.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The call's request id.
    pub fn request_id(&self) -> &str {
        self.report.request_id.as_str()
    }

    /// The report of the call whose response this body belongs to.
    pub fn report(&self) -> &Report {
        &self.report
    }

    /// Whether the body timeout fired.
    pub fn is_timeout(&self) -> bool {
        self.timed_out
    }
}

impl fmt::Display for BodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "reading the response body from endpoint {:?} (attempt {}, request id {}) {}",
            self.endpoint,
            self.attempt,
            self.report.request_id,
            if self.timed_out {
                "timed out"
            } else {
                "failed"
            }
        )?;
        if f.alternate() {
            baton_core::write_causes(f, self)?;
        }
        Ok(())
    }
}

impl StdError for BodyError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source.as_ref().map(|e| e as &(dyn StdError + 'static))
    }
}

/// The response body is not the JSON asked for.
///
/// ```no_run
/// # async fn demo(client: baton_async_std::Client) {
/// #[derive(serde::Deserialize)]
/// struct Head { number: u64 }
/// match client.get("/head").send().await {
///     Ok(resp) => match resp.json::<Head>().await {
///         Ok(h) => println!("head {}", h.number),
///         Err(baton_async_std::Error::Decode(d)) => eprintln!("{d}"),
///         Err(e) => eprintln!("{e}"),
///     },
///     Err(e) => eprintln!("{e}"),
/// }
/// # }
/// ```
#[cfg(feature = "json")]
#[derive(Debug)]
pub struct DecodeError {
    pub(crate) endpoint: Arc<str>,
    pub(crate) report: Box<Report>,
    pub(crate) source: serde_json::Error,
}

#[cfg(feature = "json")]
impl DecodeError {
    /// The endpoint whose response body is not the expected JSON.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }
}

#[cfg(feature = "json")]
impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the response body from endpoint {:?} is not the expected JSON",
            self.endpoint
        )?;
        if f.alternate() {
            baton_core::write_causes(f, self)?;
        }
        Ok(())
    }
}

#[cfg(feature = "json")]
impl StdError for DecodeError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(&self.source)
    }
}

/// Building a [`Client`](crate::Client) failed; the message names the setting.
///
/// ```
/// let err = baton_async_std::Client::new(baton_core::Policy::builder()).unwrap_err();
/// assert!(err.to_string().contains("no endpoints"));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// The policy is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The TLS configuration could not be built.
    #[error("TLS configuration: {0}")]
    Tls(String),
    /// An endpoint URL cannot be connected to.
    #[error("endpoint {id:?}: {reason}")]
    Endpoint {
        /// Endpoint id.
        id: String,
        /// Why.
        reason: String,
    },
    /// A client setting is invalid.
    #[error("client setting `{setting}`: {reason}")]
    Setting {
        /// The setting's name.
        setting: &'static str,
        /// Why.
        reason: String,
    },
}
