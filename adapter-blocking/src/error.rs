//! Errors: building a client ([`BuildError`]) and a failed call ([`Error`]).

use std::fmt;

use baton_core::{ConfigError, ErrorKind, Report};
use ureq::http::Response;
use ureq::Body;

/// Why a [`Client`](crate::Client) could not be built.
///
/// ```
/// use std::time::Duration;
/// use baton_blocking::{BuildError, Client, Endpoint, Hedge, Policy};
/// let hedged = Policy::builder()
///     .endpoint(Endpoint::new("a", "http://127.0.0.1:1/"))
///     .configure(|s| s.hedge = Some(Hedge::after(Duration::from_millis(50))));
/// let err = Client::new(hedged).unwrap_err();
/// assert!(matches!(err, BuildError::HedgingUnsupported));
/// assert!(Client::new(Policy::builder()).is_err()); // no endpoints
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuildError {
    /// The policy is invalid (the error names the setting and the value).
    Config(ConfigError),
    /// The policy enables hedging, which needs several attempts in flight at once: the
    /// blocking adapter runs one attempt at a time on the calling thread and refuses it
    /// rather than silently ignoring it. Use `baton-tokio` or `baton-async-std` to hedge.
    HedgingUnsupported,
    /// An endpoint requires HTTP/2 (`http_version = "http2"`, SPEC 9): ureq speaks
    /// HTTP/1.1 only. Use `baton-tokio` or `baton-async-std` for it.
    Http2Unsupported {
        /// The endpoint's id.
        endpoint: String,
    },
    /// An endpoint's TLS files (`ca_file`, `client_cert`, `client_key`) cannot be used.
    Tls(baton_tls::EndpointTlsError),
    /// A ureq configuration given whole ([`ClientBuilder::config`](crate::ClientBuilder::config),
    /// [`ClientBuilder::agent`](crate::ClientBuilder::agent)) carries its own TLS, so the
    /// policy's TLS files cannot be applied to it; use
    /// [`ClientBuilder::configure_ureq`](crate::ClientBuilder::configure_ureq) instead.
    TlsWithGivenConfig,
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::Config(e) => write!(f, "invalid baton policy: {e}"),
            BuildError::HedgingUnsupported => f.write_str(
                "setting `hedge` is not supported by baton-blocking (one attempt in flight at a \
                 time); remove it or use an async adapter",
            ),
            BuildError::Http2Unsupported { endpoint } => write!(
                f,
                "endpoint {endpoint:?} requires HTTP/2 (setting `http_version` = \"http2\"), but \
                 baton-blocking speaks HTTP/1.1 only (ureq); use `auto` or `http1`, or an async \
                 adapter (baton-tokio, baton-async-std)"
            ),
            BuildError::Tls(e) => write!(f, "{e}"),
            BuildError::TlsWithGivenConfig => f.write_str(
                "the policy's `tls` files cannot be applied to a ureq configuration given whole \
                 (ClientBuilder::config or ::agent); use ClientBuilder::configure_ureq",
            ),
        }
    }
}

impl std::error::Error for BuildError {
    /// The sources of the error whose text this one shows (each said once in a chain).
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BuildError::Config(e) => e.source(),
            BuildError::Tls(e) => e.source(),
            BuildError::HedgingUnsupported
            | BuildError::Http2Unsupported { .. }
            | BuildError::TlsWithGivenConfig => None,
        }
    }
}

impl From<ConfigError> for BuildError {
    fn from(e: ConfigError) -> Self {
        BuildError::Config(e)
    }
}

/// A failed call: the engine's error (kind and full [`Report`]), the last ureq error when
/// the last attempt failed in the HTTP client, and the retained response when the error
/// carries one (SPEC 2.10).
///
/// It shows the engine's error's text: `{}` the call and its attempts, `{:#}` every cause
/// after it. `source()` is the engine's link to the last attempt
/// ([`baton_core::AttemptFailure`]; [`baton_core::NoAttempt`] when none was made), whose
/// own source is the last ureq error when there is
/// one (shown with URLs reduced to their origins; for an attempt baton refused to send,
/// the reason inside it is its source in turn): an error printer that walks the chain
/// (anyhow's `{:#}`) shows each part once. [`Error::client_error`] gives the ureq error
/// itself.
///
/// ```no_run
/// use baton_blocking::{Client, Endpoint, ErrorKind, Policy};
/// let client = Client::new(Policy::builder().endpoint(Endpoint::new("a", "http://127.0.0.1:1/")))?;
/// let err = client.post("/charge").send("{}").unwrap_err();
/// assert_eq!(err.kind(), Some(&ErrorKind::Failover));
/// assert!(!err.report().may_have_executed); // refused: nothing was sent
/// println!("{err}");
/// # Ok::<_, Box<dyn std::error::Error>>(())
/// ```
pub struct Error(Box<Inner>);

struct Inner {
    /// The engine's error, with the last ureq error as its `last_error` (see
    /// [`ClientError`]).
    inner: baton_core::Error,
    retained: Option<Response<Body>>,
}

/// The last attempt's ureq error, as the source of the engine's link to the last attempt.
/// It shows ureq's text with URLs reduced to their origins (ureq quotes the URL in some
/// errors, a bad URI; SPEC 4), after baton's reading of a rejected certificate; `Debug`
/// shows the same text. ureq's errors have no source of their own, so this error gives
/// the sources of what is inside one, in reach of a walk of the chain: for
/// `ureq::Error::Other` (an attempt baton refused to send) the reason itself (a
/// [`DestinationError`](baton_core::DestinationError) where the destination rules
/// refused), not repeated in its text; for `ureq::Error::Io` the sources of the I/O
/// error, whose own text ureq's shows.
struct ClientError(ureq::Error);

impl fmt::Debug for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ClientError")
            .field(&self.to_string())
            .finish()
    }
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let ureq::Error::Other(_) = &self.0 {
            return f.write_str("not sent");
        }
        if let Some(r) = crate::classify::rejected(&self.0) {
            write!(f, "{}: ", r.message())?;
        }
        f.write_str(&baton_core::scrub_urls(&self.0.to_string()))
    }
}

impl std::error::Error for ClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.0 {
            ureq::Error::Other(reason) => Some(&**reason),
            ureq::Error::Io(io) => io.source(),
            _ => None,
        }
    }
}

impl Error {
    pub(crate) fn new(
        inner: baton_core::Error,
        client_error: Option<ureq::Error>,
        retained: Option<Response<Body>>,
    ) -> Self {
        let inner = match client_error {
            Some(e) => inner.with_last_error(Box::new(ClientError(e))),
            None => inner,
        };
        Error(Box::new(Inner { inner, retained }))
    }

    /// Which error (SPEC 2.10). Always `Some` here (a body that fails later is an
    /// `io::Error` of the read, carrying a [`BodyError`](crate::BodyError)); `Option` as on
    /// every adapter, whose errors also cover body reads.
    pub fn kind(&self) -> Option<&ErrorKind> {
        Some(&self.0.inner.kind)
    }

    /// Everything known about the call: attempts, request id, stop reason,
    /// `may_have_executed`.
    pub fn report(&self) -> &Report {
        &self.0.inner.report
    }

    /// The endpoint the error names: the one of the retained response, else of the last
    /// attempt (`None`: nothing was attempted).
    pub fn endpoint(&self) -> Option<&str> {
        self.report().result_endpoint()
    }

    /// The call's request id.
    pub fn request_id(&self) -> &str {
        self.report().request_id.as_str()
    }

    /// Whether any attempt may have done the work (SPEC 2.10).
    pub fn may_have_executed(&self) -> bool {
        self.report().may_have_executed
    }

    /// The engine's error.
    pub fn engine_error(&self) -> &baton_core::Error {
        &self.0.inner
    }

    /// The ureq error of the last attempt, when it failed inside the HTTP client.
    pub fn client_error(&self) -> Option<&ureq::Error> {
        let last = self.0.inner.last_error()?;
        last.downcast_ref().map(|c: &ClientError| &c.0)
    }

    /// The retained (triggering) response the error carries, if any.
    pub fn response(&self) -> Option<&Response<Body>> {
        self.0.retained.as_ref()
    }

    /// Takes the retained response out of the error (to read its body).
    pub fn into_response(self) -> Option<Response<Body>> {
        self.0.retained
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("kind", &self.0.inner.kind)
            .field("report", &self.0.inner.report)
            .field(
                "client_error",
                &self
                    .client_error()
                    .map(|e| baton_core::scrub_urls(&format!("{e:?}"))),
            )
            .field("retained", &self.0.retained.as_ref().map(|r| r.status()))
            .finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0.inner, f)
    }
}

impl std::error::Error for Error {
    /// The engine's link to the last attempt (see [`Error`]).
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&self.0.inner)
    }
}
