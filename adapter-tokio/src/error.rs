//! The adapter's errors: a failed call (the engine's error with its report, the last
//! underlying client error, and a retained response when there is one), a body error after
//! the response head arrived (naming the endpoint), and client build errors.

use std::error::Error as StdError;
use std::fmt;

use baton_core::{ErrorKind, Report};

use crate::classify::FailureCause;
use crate::response::Response;

/// A boxed error, as the underlying failure of an attempt.
pub type BoxError = Box<dyn StdError + Send + Sync>;

/// The last attempt's underlying failure: which attempt, where, what (the finer cause) and
/// the client's own error (a `reqwest::Error`, a timeout, or why the request could not be
/// built). It shows the cause alone: in a call's error chain the link above it names the
/// attempt, and the source below it says what the client saw.
///
/// ```
/// use baton_tokio::{AttemptError, FailureCause};
/// let e = AttemptError::new(2, "backup".into(), FailureCause::Refused, "os error 111".into());
/// assert_eq!(e.to_string(), "connection refused");
/// assert_eq!((e.attempt(), e.endpoint()), (2, "backup"));
/// assert!(std::error::Error::source(&e).is_some());
/// ```
#[derive(Debug)]
pub struct AttemptError {
    attempt: u32,
    endpoint: baton_core::EndpointId,
    cause: FailureCause,
    source: BoxError,
}

impl AttemptError {
    /// An attempt error (mostly for tests; the client builds these).
    pub fn new(
        attempt: u32,
        endpoint: baton_core::EndpointId,
        cause: FailureCause,
        source: BoxError,
    ) -> Self {
        AttemptError {
            attempt,
            endpoint,
            cause,
            source,
        }
    }

    /// The attempt number.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The endpoint id.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// What went wrong, as far as the error chain tells.
    pub fn cause(&self) -> FailureCause {
        self.cause
    }

    /// The client's error, as a `reqwest::Error` when it is one.
    pub fn reqwest(&self) -> Option<&reqwest::Error> {
        self.source.downcast_ref()
    }

    /// The underlying error.
    pub fn inner(&self) -> &(dyn StdError + Send + Sync + 'static) {
        &*self.source
    }
}

impl fmt::Display for AttemptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.cause, f)?;
        if f.alternate() {
            baton_core::write_causes(f, self)?;
        }
        Ok(())
    }
}

impl StdError for AttemptError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(&*self.source)
    }
}

/// An attempt timeout fired (the source of an [`AttemptError`] with cause `Timeout` or
/// `ConnectTimeout` when baton's own timer fired rather than reqwest's).
///
/// Found by walking an error's sources, as for any error in the chain:
///
/// ```
/// use std::error::Error;
/// use std::time::Duration;
/// use baton_tokio::AttemptTimeout;
///
/// fn timed_out_after(e: &(dyn Error + 'static)) -> Option<Duration> {
///     let mut next = Some(e);
///     while let Some(e) = next {
///         if let Some(t) = e.downcast_ref::<AttemptTimeout>() {
///             return Some(t.after);
///         }
///         next = e.source();
///     }
///     None
/// }
///
/// let fired = AttemptTimeout { after: Duration::from_millis(200) };
/// assert_eq!(fired.to_string(), "no response head within 200ms");
/// assert_eq!(timed_out_after(&fired), Some(Duration::from_millis(200)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttemptTimeout {
    /// The attempt timeout that fired.
    pub after: std::time::Duration,
}

impl fmt::Display for AttemptTimeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no response head within {:?}", self.after)
    }
}

impl StdError for AttemptTimeout {}

/// Why a request could not be built (an invalid URL or header given to the request
/// builder; the call ends as rejected locally, nothing is sent): core's, the same on
/// every adapter.
pub use baton_core::InvalidRequest;

/// An error from an inner middleware, shown with every URL in it reduced to
/// `scheme://host:port` (core's [`baton_core::Scrubbed`]).
///
/// ```
/// fn log(e: &baton_tokio::Scrubbed) {
///     eprintln!("{e}"); // URLs as scheme://host:port only
///     let _original: &(dyn std::error::Error + Send + Sync) = e.inner();
/// }
/// # let _ = log;
/// ```
pub use baton_core::Scrubbed;

/// `e` with the URLs in its text reduced to their origin.
pub(crate) fn scrubbed(e: BoxError) -> BoxError {
    Box::new(Scrubbed::new(e))
}

/// What a call through [`Client`](crate::Client) can fail with.
///
/// - [`Error::Call`]: the call ended without a usable response (every attempt failed, the
///   deadline passed, the budget refused, nothing was permitted, the call was invalid...).
///   It carries the engine's [`baton_core::Error`] (kind, report with every attempt, request
///   id, stop reason and `may_have_executed`), the last attempt's underlying failure, and the
///   retained response when the engine kept one it was not allowed to return (SPEC 2.10).
/// - [`Error::Body`]: the response head arrived (the call succeeded) but reading its body
///   failed; it names the endpoint and is never passed off as a complete body.
///
/// A failed call shows the engine's error's text: `{}` the call and its attempts, `{:#}`
/// every cause after it (a body error likewise: `{}` the endpoint, `{:#}` what failed).
/// Its `source()` is the engine's link to the last attempt ([`baton_core::AttemptFailure`];
/// [`baton_core::NoAttempt`] when none was made), whose source is that attempt's
/// [`AttemptError`] (and its source the `reqwest::Error`) when there is one: an error
/// printer that walks the chain (anyhow's `{:#}`) shows each part once. Walk the chain, or use
/// [`Error::reqwest`]. A baton call failing inside another's attempt is read by its
/// report, not by its last attempt alone ([`baton_core::Error::of_inner_call`]).
///
/// ```no_run
/// # async fn demo(client: baton_tokio::Client) {
/// match client.post("/v1/charges").body("{}").send().await {
///     Ok(resp) => println!("{} from {}", resp.status(), resp.endpoint()),
///     Err(e) => {
///         eprintln!("{e}");
///         if !e.may_have_executed() {
///             // Nothing reached any provider: safe to try again later.
///         }
///     }
/// }
/// # }
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The call failed.
    Call {
        /// The engine's error: kind and report, and the last attempt's [`AttemptError`]
        /// when it had one (see [`Error::last_attempt_error`]).
        error: baton_core::Error,
        /// A retained response the engine was not allowed to return (SPEC 2.10).
        retained: Option<Box<Response>>,
    },
    /// Reading the response body failed after the response head arrived.
    Body {
        /// The endpoint that sent the response.
        endpoint: baton_core::EndpointId,
        /// The call's report.
        report: Box<Report>,
        /// Why: a `reqwest::Error` (`is_decode()` tells a decoding error from a transport
        /// one; see [`Error::reqwest`]), or [`BodyDeadline`](crate::BodyDeadline) when the
        /// call's deadline passed during the read.
        source: BoxError,
    },
}

impl Error {
    /// The endpoint the error names: the one that sent the response whose body failed,
    /// or, for a failed call, the one of its retained response or of its last attempt
    /// (`None`: nothing was attempted).
    pub fn endpoint(&self) -> Option<&str> {
        match self {
            Error::Call { error, .. } => error.report.result_endpoint(),
            Error::Body { endpoint, .. } => Some(endpoint),
        }
    }

    /// The engine's error kind, for a failed call.
    pub fn kind(&self) -> Option<&ErrorKind> {
        match self {
            Error::Call { error, .. } => Some(&error.kind),
            Error::Body { .. } => None,
        }
    }

    /// The call's report: every attempt, the request id, the stop reason.
    pub fn report(&self) -> &Report {
        match self {
            Error::Call { error, .. } => &error.report,
            Error::Body { report, .. } => report,
        }
    }

    /// The call's request id.
    pub fn request_id(&self) -> &str {
        self.report().request_id.as_str()
    }

    /// Whether any attempt may have done the work. `false` means nothing happened on any
    /// provider; `true` means "unknown" (or done, for a body error).
    pub fn may_have_executed(&self) -> bool {
        self.report().may_have_executed
    }

    /// Whether this is a body error after the response head arrived.
    pub fn is_body(&self) -> bool {
        matches!(self, Error::Body { .. })
    }

    /// The last attempt's underlying failure.
    pub fn last_attempt_error(&self) -> Option<&AttemptError> {
        match self {
            Error::Call { error, .. } => error.last_error()?.downcast_ref(),
            Error::Body { .. } => None,
        }
    }

    /// The last underlying reqwest error, when there is one.
    pub fn reqwest(&self) -> Option<&reqwest::Error> {
        match self {
            Error::Call { .. } => self.last_attempt_error()?.reqwest(),
            Error::Body { source, .. } => source.downcast_ref(),
        }
    }

    /// The retained response carried by a failed call.
    pub fn retained_response(&self) -> Option<&Response> {
        match self {
            Error::Call { retained, .. } => retained.as_deref(),
            Error::Body { .. } => None,
        }
    }

    /// Takes the retained response out of a failed call.
    pub fn into_retained_response(self) -> Option<Response> {
        match self {
            Error::Call { retained, .. } => retained.map(|r| *r),
            Error::Body { .. } => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Call { error, .. } => fmt::Display::fmt(error, f),
            Error::Body {
                endpoint, report, ..
            } => {
                write!(
                    f,
                    "reading the response body from endpoint {endpoint:?} failed (request id {})",
                    report.request_id
                )?;
                if f.alternate() {
                    baton_core::write_causes(f, self)?;
                }
                Ok(())
            }
        }
    }
}

impl StdError for Error {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            Error::Call { error, .. } => error.source(),
            Error::Body { source, .. } => Some(&**source as &(dyn StdError + 'static)),
        }
    }
}

/// Why a [`Client`](crate::Client) or [`BatonMiddleware`](crate::BatonMiddleware) could not
/// be built. Each variant names the setting.
///
/// ```
/// let err = baton_tokio::Client::new(baton_core::Policy::builder()).unwrap_err();
/// assert!(err.to_string().contains("no endpoints"));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// The policy is invalid.
    Config(baton_core::ConfigError),
    /// reqwest could not build a client.
    Reqwest(reqwest::Error),
    /// A client setting is invalid.
    Setting {
        /// The setting's name.
        setting: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// An endpoint's TLS files (`ca_file`, `client_cert`, `client_key`) cannot be used.
    Tls(baton_tls::EndpointTlsError),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::Config(e) => write!(f, "invalid policy: {e}"),
            BuildError::Reqwest(e) => write!(f, "cannot build the reqwest client: {e}"),
            BuildError::Setting { setting, reason } => write!(f, "setting `{setting}`: {reason}"),
            BuildError::Tls(e) => write!(f, "{e}"),
        }
    }
}

impl StdError for BuildError {
    /// The sources of the error whose text this one shows (each said once in a chain).
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            BuildError::Config(e) => e.source(),
            BuildError::Reqwest(e) => e.source(),
            BuildError::Setting { .. } => None,
            BuildError::Tls(e) => e.source(),
        }
    }
}

impl From<baton_core::ConfigError> for BuildError {
    fn from(e: baton_core::ConfigError) -> Self {
        BuildError::Config(e)
    }
}
