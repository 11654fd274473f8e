//! baton as a `reqwest_middleware::Middleware`: every request passing through it becomes a
//! call, and every attempt runs the rest of the stack (the middleware after it, then the
//! reqwest client).
//!
//! # Composition
//!
//! Middleware added *before* baton (outer) sees one logical call: one request in, one
//! response (or one error) out. Middleware added *after* baton (inner) runs once per
//! attempt, with the attempt's URL and headers: the place for request signing, per-attempt
//! logging or metrics. Each attempt gets its own copy of the request's extensions (changes
//! an inner middleware makes to them are not seen by other attempts or by outer
//! middleware). Do not combine baton with another retrying middleware (such as
//! `reqwest-retry`) on either side: attempts would multiply, and the other middleware does
//! not know which failures may have executed.
//!
//! Per-call options ride in the request's extensions
//! (`.with_extension(CallOptions { .. })`); baton takes them out, so the middleware after
//! it (a nested baton among them) never reads them as its own. The call's [`Report`](baton_core::Report) is
//! put into the returned response's extensions. A failed call is a
//! `reqwest_middleware::Error::Middleware` wrapping a [`crate::Error`] (downcast it to read
//! the report).
//!
//! The reqwest client at the bottom of the stack is the caller's: its connect timeout
//! applies, its HTTP version is its own (an endpoint's `http_version` is not applied to
//! its connections), and when baton's attempt timer fires the phase is unknown
//! (ambiguous). An
//! error from an inner middleware that is not a reqwest error is ambiguous too, except a
//! baton call's own: a second `BatonMiddleware` after this one is read by its call's report
//! (undelivered only when none of its attempts may have executed), never by the error of
//! its last attempt, which says nothing of the attempts before it.
//!
//! # Safety: one request per attempt
//!
//! The client at the bottom, and every middleware after baton, must send each attempt's
//! request once and nowhere else: build the client with
//! `.redirect(reqwest::redirect::Policy::none())` (reqwest follows up to 10 redirects by
//! default) and `.retry(reqwest::retry::never())`, and add no retrying or
//! redirect-following middleware after baton. reqwest's default retry re-sends a request,
//! up to twice and unseen by baton's report, after an HTTP/2 `REFUSED_STREAM` and also
//! after a `GOAWAY` with `NO_ERROR`: a server shutting down gracefully may have taken that
//! request already (the `GOAWAY` names the last stream it processes, and reqwest does not
//! read it), so a POST could run twice. A redirect
//! followed below baton hides that the first request was answered: a POST answered 303,
//! whose `Location` then refuses the connection, would end as a connect error, which reads
//! as "nothing was sent", and the POST would fail over. baton follows redirects itself,
//! within the attempt, by the engine's rules.
//!
//! A second `BatonMiddleware` after this one is read by its call's report, so it must be
//! one call per attempt too: a retrying middleware between the two would hand back only
//! the last inner call's error, whose report does not cover the calls before it. Both must
//! also be built on the same `baton-core` (one version in the build): the inner call's
//! error is recognised by its type.

use std::future::Future;
use std::time::Duration;

use baton_core::{CallOptions, EndpointHealth, Engine, PolicyBuilder};
use http::Extensions;
use reqwest_middleware::{Middleware, Next};

use crate::driver::{self, Prepared, SendError, Shared, Transport};
use crate::error::BuildError;
use crate::ClientBuilder;

/// A `reqwest_middleware::Middleware` that applies baton to the requests passing through
/// it. It keeps its own engine: endpoint health and the retry budget are shared by all
/// requests through it.
///
/// ```
/// use baton_core::{Endpoint, Policy};
/// use baton_tokio::BatonMiddleware;
///
/// let baton = BatonMiddleware::new(
///     Policy::builder()
///         .endpoint(Endpoint::new("primary", "https://rpc-a.example/"))
///         .endpoint(Endpoint::new("backup", "https://rpc-b.example/")),
/// )
/// .unwrap();
/// // One request per attempt: redirects and retries are baton's (see the module docs).
/// let reqwest = reqwest::Client::builder()
///     .redirect(reqwest::redirect::Policy::none())
///     .retry(reqwest::retry::never())
///     .build()
///     .unwrap();
/// let client = reqwest_middleware::ClientBuilder::new(reqwest)
///     .with(baton)
///     .build();
/// // client.post("https://rpc-a.example/").body("{..}").send().await
/// # drop(client);
/// ```
pub struct BatonMiddleware {
    shared: Shared,
}

impl std::fmt::Debug for BatonMiddleware {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatonMiddleware")
            .field("policy", self.shared.engine.policy())
            .finish()
    }
}

impl BatonMiddleware {
    /// A middleware for this policy (seeded from the OS, like [`Client::new`](crate::Client::new)).
    pub fn new(policy: PolicyBuilder) -> Result<Self, BuildError> {
        ClientBuilder::new(policy).build_middleware()
    }

    pub(crate) fn from_shared(shared: Shared) -> Self {
        BatonMiddleware { shared }
    }

    /// The engine (policy, health, budget).
    pub fn engine(&self) -> &std::sync::Arc<Engine> {
        &self.shared.engine
    }

    /// The health of the endpoint with `id`, now.
    pub fn health(&self, id: &str) -> Option<EndpointHealth> {
        self.shared.engine.health_of(id, std::time::Instant::now())
    }
}

struct NextTransport<'a> {
    next: Next<'a>,
    extensions: Extensions,
    /// Bytes of a body read ahead for the classifier (`classify_body`), as the client does.
    peek: usize,
}

impl Transport for NextTransport<'_> {
    fn send(
        &self,
        _endpoint: usize,
        request: reqwest::Request,
    ) -> impl Future<Output = Result<reqwest::Response, SendError>> + Send {
        let next = self.next.clone();
        let mut extensions = self.extensions.clone();
        let peek = self.peek;
        async move {
            let response = next.run(request, &mut extensions).await;
            let response = response.map_err(|e| match e {
                reqwest_middleware::Error::Reqwest(e) => SendError::Reqwest(e),
                reqwest_middleware::Error::Middleware(e) => SendError::Other(e.into()),
            })?;
            if peek == 0 {
                return Ok(response);
            }
            // Boxed, as the client's: only policies whose classifier reads bodies pay.
            Box::pin(crate::peek::body(response, peek))
                .await
                .map_err(SendError::Reqwest)
        }
    }

    fn connect_timeout(&self, _endpoint: usize) -> Option<Duration> {
        None
    }
}

#[async_trait::async_trait]
impl Middleware for BatonMiddleware {
    async fn handle(
        &self,
        req: reqwest::Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<reqwest::Response> {
        // Taken out, not copied: the options are this call's, and the middleware after
        // baton (a nested baton among them) must not read them as its own.
        let mut options = extensions.remove::<CallOptions>().unwrap_or_default();
        let (prepared, timeout) = Prepared::from_reqwest(req);
        if options.attempt_timeout.is_none() {
            options.attempt_timeout = timeout;
        }
        let transport = NextTransport {
            next,
            extensions: extensions.clone(),
            peek: self.shared.engine.policy().settings().classify_body,
        };
        match driver::drive((&self.shared, &transport), prepared, options).await {
            Ok(f) => {
                let mut response = f.response;
                response.extensions_mut().insert(*f.report);
                Ok(response)
            }
            Err(e) => Err(reqwest_middleware::Error::middleware(e)),
        }
    }
}
