//! The layer's errors: a failed call (the engine's error with its report, the last
//! attempt's error, and any retained response), and build errors.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Mutex;

use baton_core::{ConfigError, ErrorKind, Report};

use crate::BoxError;

/// A failed call (SPEC 2.10): what the engine decided, and the retained response when the
/// engine kept one (its body unread). It shows the engine's error's text: `{}` the call and
/// its attempts, `{:#}` every cause after it. Its `source()` is the engine's link to the
/// last attempt ([`baton_core::AttemptFailure`]; [`baton_core::NoAttempt`] when none was
/// made), whose own source is that attempt's error
/// (the inner service's, its text scrubbed of URLs) when there is one: an error printer
/// that walks the chain (anyhow's `{:#}`) shows each part once. A layer or client of
/// baton's below this one, failing inside an attempt, is read by that call's report,
/// which the link carries ([`baton_core::Error::of_inner_call`]).
///
/// ```
/// # async fn demo<S>(mut svc: baton_tower::Baton<S>) where
/// #   S: tower_service::Service<http::Request<baton_tower::ReplayBody<String>>, Response = http::Response<String>> + Clone + Send + Sync + 'static,
/// #   S::Future: Send, S::Error: Into<baton_tower::BoxError> {
/// use tower_service::Service;
/// match svc.call(http::Request::post("/v1/charges").body(String::from("amount=1")).unwrap()).await {
///     Ok(resp) => println!("{}", resp.status()),
///     Err(e) => eprintln!("{e}; may have executed: {}", e.may_have_executed()),
/// }
/// # }
/// ```
pub struct Error<R>(Box<Failure<R>>);

/// What a failed call holds (boxed: a call's error stays one pointer wide). The retained
/// response sits behind a lock so that the error is `Sync` whatever its body (tower
/// middleware turns errors into `BoxError`s), which also lets it be taken out by `&self`.
pub(crate) struct Failure<R> {
    pub(crate) error: baton_core::Error,
    pub(crate) retained: Mutex<Option<http::Response<R>>>,
    pub(crate) retained_status: Option<http::StatusCode>,
}

impl<R> Error<R> {
    pub(crate) fn new(
        error: baton_core::Error,
        last: Option<BoxError>,
        retained: Option<http::Response<R>>,
    ) -> Self {
        let retained_status = retained.as_ref().map(http::Response::status);
        let error = match last {
            Some(last) => error.with_last_error(last),
            None => error,
        };
        Error(Box::new(Failure {
            error,
            retained: Mutex::new(retained),
            retained_status,
        }))
    }

    /// The engine's error kind.
    pub fn kind(&self) -> &ErrorKind {
        &self.0.error.kind
    }

    /// Every attempt, the stop reason, the elapsed time and `may_have_executed`.
    pub fn report(&self) -> &Report {
        &self.0.error.report
    }

    /// The endpoint of the retained response, else of the last attempt.
    pub fn endpoint(&self) -> Option<&str> {
        self.report().result_endpoint()
    }

    /// Whether the work may have been done somewhere.
    pub fn may_have_executed(&self) -> bool {
        self.report().may_have_executed
    }

    /// The call's request id.
    pub fn request_id(&self) -> &str {
        self.report().request_id.as_str()
    }

    /// The status of the retained response, when the engine kept one (SPEC 2.10).
    pub fn retained_status(&self) -> Option<http::StatusCode> {
        self.0.retained_status
    }

    /// Takes the retained response out (to read its body); `None` once taken.
    pub fn take_retained(&self) -> Option<http::Response<R>> {
        self.0.retained.lock().ok().and_then(|mut r| r.take())
    }

    /// The retained response, when the engine kept one and it was not taken.
    pub fn into_retained(self) -> Option<http::Response<R>> {
        self.0.retained.into_inner().ok().flatten()
    }
}

impl<R> fmt::Debug for Error<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("error", &self.0.error)
            .field("retained", &self.0.retained_status)
            .finish()
    }
}

impl<R> fmt::Display for Error<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0.error, f)
    }
}

impl<R> StdError for Error<R> {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.0.error.source()
    }
}

/// Why a layer or service could not be built.
///
/// ```
/// let err = baton_tower::BatonLayer::new(baton_core::Policy::builder()).unwrap_err();
/// assert!(err.to_string().contains("no endpoints"));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// The policy is invalid (the error names the setting).
    Policy(ConfigError),
    /// A setting of this crate is invalid.
    Setting {
        /// The setting.
        setting: &'static str,
        /// Why.
        reason: String,
    },
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::Policy(e) => write!(f, "invalid policy: {e}"),
            BuildError::Setting { setting, reason } => write!(f, "{setting}: {reason}"),
        }
    }
}

impl StdError for BuildError {
    /// The sources of the error whose text this one shows (each said once in a chain).
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            BuildError::Policy(e) => e.source(),
            BuildError::Setting { .. } => None,
        }
    }
}
