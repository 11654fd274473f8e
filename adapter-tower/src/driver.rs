//! What the layer gives core's call driver ([`baton_core::drive`]): each attempt's request
//! for the inner service, `poll_ready` + `call` under the layer's timers, the service's
//! errors classified, and the response with its report. The loop itself (attempts in
//! flight, redirects, waits) is core's, shared with every async adapter; nothing here
//! decides which endpoint, whether to retry, or how long to wait.

use std::future::{poll_fn, Future};
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use baton_core::drive::{Built, CallTransport, Landed, NotBuilt, Sent};
use baton_core::{
    Attempt, AttemptOutcome, BodyKind, Call, CallOptions, DestinationError, Done, Engine,
    FailureClass, Hop, IdentityHeaders, Scrubbed, TimeoutPhase,
};
use bytes::Bytes;
use http::{HeaderMap, Request, Response, Uri};
use http_body::Body;
use tower_service::Service;

use crate::body::{self, Kept, ReplayBody};
use crate::classify::{classify, ErrorClassifier};
use crate::error::Error;
use crate::sleep::{Sleeping, Timers};
use crate::BoxError;

/// What a service shares with every call's driver.
pub(crate) struct Shared {
    pub(crate) engine: Arc<Engine>,
    pub(crate) timers: Timers,
    pub(crate) buffer_limit: Option<usize>,
    pub(crate) classify_error: Option<ErrorClassifier>,
}

/// Where attempts go: one service that takes absolute URIs, or one per endpoint (as many
/// as the policy has endpoints, checked when the service is built).
///
/// Shared by a layer, every clone of it and every call. Each attempt sends on a clone of
/// its endpoint's service, made under the lock by the attempt's future when it first
/// runs: a service need not be `Sync`, a call clones one service per attempt instead of
/// all of them per call, and the clone is made where it is kept. Made before the future
/// was built, it was copied with the future into the driver's slot (callgrind, `callcost
/// tower 2000`: 180 instructions of `memcpy` a call).
pub(crate) struct Backends<S> {
    /// One service for every endpoint: it takes absolute URIs.
    pub(crate) one: bool,
    pub(crate) services: Mutex<Vec<S>>,
}

/// The services, shared.
pub(crate) type SharedBackends<S> = Arc<Backends<S>>;

impl<S> Backends<S> {
    /// One service for every endpoint.
    pub(crate) fn one(service: S) -> SharedBackends<S> {
        Arc::new(Backends {
            one: true,
            services: Mutex::new(vec![service]),
        })
    }

    /// One service per endpoint, in the policy's order.
    pub(crate) fn per_endpoint(services: Vec<S>) -> SharedBackends<S> {
        Arc::new(Backends {
            one: false,
            services: Mutex::new(services),
        })
    }

    /// A clone of the service of endpoint `e`.
    fn for_endpoint(&self, e: usize) -> Option<S>
    where
        S: Clone,
    {
        let i = if self.one { 0 } else { e };
        // A clone that panicked leaves the services as they were: the lock is taken anyway.
        let services = self.services.lock();
        services.unwrap_or_else(|p| p.into_inner()).get(i).cloned()
    }
}

/// How one request of an attempt ended.
pub(crate) enum End<R> {
    Response(Response<R>),
    Failed(FailureClass, BoxError),
    /// The attempt timer fired; `handed` says whether the request had been handed to the
    /// service (its `poll_ready` had finished).
    TimedOut {
        handed: bool,
    },
}

/// The error of an inner service's `poll_ready` or `call`.
#[derive(Debug)]
struct NotReady(BoxError);

impl std::fmt::Display for NotReady {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the endpoint's service was not ready")
    }
}

impl std::error::Error for NotReady {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.0)
    }
}

/// Why an attempt's request could not be built.
#[derive(Debug)]
struct Rejected(String);

impl std::fmt::Display for Rejected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the request could not be built: {}", self.0)
    }
}

impl std::error::Error for Rejected {}

/// A call's request, as the driver keeps it.
pub(crate) struct Prepared<B> {
    parts: http::request::Parts,
    /// The caller's body, until the call starts.
    raw: Option<B>,
    /// The body every attempt takes its copy (or the stream) from.
    body: Kept<B>,
    /// The request body failed while it was being read for copying.
    body_error: Option<String>,
}

impl<B> AsRef<http::request::Parts> for Prepared<B> {
    fn as_ref(&self) -> &http::request::Parts {
        &self.parts
    }
}

/// Drives one call to its end, on core's call driver.
// Inlined into `Baton::call`, so that the future is built in its box (see `boxed`).
#[inline]
pub(crate) fn drive<S, B, R>(
    shared: Arc<Shared>,
    backends: SharedBackends<S>,
    request: Request<B>,
) -> impl Future<Output = Result<Response<R>, Error<R>>> + Send
where
    S: Service<Request<ReplayBody<B>>, Response = Response<R>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
    R: Send + 'static,
{
    let (mut parts, body) = request.into_parts();
    // Taken out, not copied: every attempt's request carries the caller's extensions, and
    // the options are this call's, not the inner service's (a nested baton's among them).
    let options = parts.extensions.remove::<CallOptions>().unwrap_or_default();
    let prepared = Prepared {
        parts,
        raw: Some(body),
        body: Kept::Once(None),
        body_error: None,
    };
    let layer = Layer {
        shared,
        backends,
        types: PhantomData,
    };
    baton_core::drive::drive(layer, prepared, options)
}

/// The layer's inner services as core's driver sees them.
struct Layer<S, B, R> {
    shared: Arc<Shared>,
    backends: SharedBackends<S>,
    types: PhantomData<Types<B, R>>,
}

/// The body and response types a [`Layer`] drives (it holds neither).
type Types<B, R> = fn() -> (B, R);

impl<S, B, R> CallTransport for Layer<S, B, R>
where
    S: Service<Request<ReplayBody<B>>, Response = Response<R>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
    R: Send + 'static,
{
    type Prepared = Prepared<B>;
    type Answer = Response<R>;
    type Request = Request<ReplayBody<B>>;
    type Ticket = ();
    type Ended = End<R>;
    type Error = BoxError;
    type Timer = Sleeping;
    type Output = Result<Response<R>, Error<R>>;

    fn engine(&self) -> &Engine {
        &self.shared.engine
    }

    fn now(&self) -> Instant {
        self.shared.timers.now()
    }

    fn body_kind(&self, p: &Prepared<B>) -> BodyKind {
        p.body.kind()
    }

    fn prepare<'p>(
        &'p self,
        p: &'p mut Prepared<B>,
    ) -> impl Future<Output = Option<usize>> + Send + 'p {
        let limit = self.shared.buffer_limit;
        async move {
            let raw = p.raw.take()?;
            let prepared = body::prepare(raw, limit).await;
            p.body = prepared.body;
            p.body_error = prepared.error.map(|e| baton_core::chain_text(&*e));
            prepared.over_limit
        }
    }

    fn build(
        &self,
        p: &mut Prepared<B>,
        call: &Call<'_, Response<R>>,
        identity: &Result<IdentityHeaders, DestinationError>,
        a: &Attempt,
        _: Instant,
    ) -> Result<Built<Self::Request, ()>, NotBuilt<BoxError>> {
        let mut headers = p.parts.headers.clone();
        // Why an attempt cannot be sent is the error's source: the destination rules'
        // typed error, as on every adapter, or this driver's reason in words.
        let rejected = |why: String| -> BoxError { Box::new(Rejected(why)) };
        let uri = match &p.body_error {
            Some(e) => Err(rejected(format!("reading the request body failed: {e}"))),
            None => identity
                .as_ref()
                .map_err(Clone::clone)
                .and_then(|identity| call.attempt_parts(a, identity, &p.parts.uri, &mut headers))
                .map_err(|e| -> BoxError { Box::new(e) }),
        };
        let uri = uri.map_err(NotBuilt::Rejected)?;
        let body = p.body.next().ok_or(NotBuilt::Replay(None))?;
        let request = request(&p.parts, p.parts.method.clone(), uri, headers, body);
        Ok(Built {
            request,
            spare: None,
            ticket: (),
        })
    }

    // Inlined with `attempt`: the attempt's future is no longer returned and copied once
    // on its way into the driver's slot (setting the slot still copies it once; callgrind,
    // `callcost tower 2000`: 196.22 M to 195.99 M instructions, 58 a call).
    #[inline]
    fn send<'a>(
        &'a self,
        endpoint: usize,
        request: Self::Request,
        at: Instant,
    ) -> impl Future<Output = End<R>> + Send + 'a {
        let (backends, timers) = (&*self.backends, &self.shared.timers);
        let hook = self.shared.classify_error.clone();
        attempt(backends, endpoint, request, hook, timers, at)
    }

    fn land(&self, ended: End<R>, sent: &Sent<()>) -> Landed<Response<R>, BoxError> {
        match ended {
            // One table of response limits on every adapter: an over-limit head is a
            // protocol failure after the request was sent.
            End::Response(r) => match baton_core::check_response_head(r.headers()) {
                Ok(()) => Landed::Response(r),
                Err(e) => Landed::Failed(
                    AttemptOutcome::Failure(FailureClass::Ambiguous),
                    Box::new(e),
                ),
            },
            End::Failed(class, e) => Landed::Failed(AttemptOutcome::Failure(class), e),
            End::TimedOut { handed } => {
                // Never handed over (the service was not ready): nothing was sent. Handed
                // over: a generic service does not say whether it had connected.
                let phase = match handed {
                    true => TimeoutPhase::Unknown,
                    false => TimeoutPhase::Connect,
                };
                let e = Box::new(Elapsed(sent.timeout));
                Landed::Failed(AttemptOutcome::Timeout(phase), e)
            }
        }
    }

    /// Redirects are followed only through one service that takes absolute URIs: a
    /// per-endpoint service (a tonic channel, a transport) sends every request to its
    /// own endpoint, whatever the `Location` says, so there the 3xx is the answer.
    fn follows(&self, _: &Prepared<B>) -> bool {
        self.backends.one
    }

    fn first_uri(&self, p: &Prepared<B>, endpoint: usize, _: &Response<R>) -> Option<Uri> {
        let policy = self.shared.engine.policy();
        Some(baton_core::attempt_uri(policy, endpoint, &p.parts.uri).unwrap_or_default())
    }

    fn hop(
        &self,
        p: &mut Prepared<B>,
        _: &Sent<()>,
        hop: &Hop,
        headers: HeaderMap,
    ) -> Option<Self::Request> {
        let body = match hop.body {
            true => p.body.copy()?,
            false => ReplayBody::from_bytes(Bytes::new()),
        };
        let (method, uri) = (hop.method.clone(), hop.uri.clone());
        Some(request(&p.parts, method, uri, headers, body))
    }

    fn timer(&self, at: Instant) -> Sleeping {
        self.shared.timers.sleep_until(at)
    }

    fn finish(
        &self,
        done: Done<Response<R>>,
        last: Option<BoxError>,
        _: Option<Instant>,
    ) -> Self::Output {
        finish(done, last)
    }
}

/// A request of an attempt with the caller's version and extensions.
fn request<B>(
    parts: &http::request::Parts,
    method: http::Method,
    uri: Uri,
    headers: HeaderMap,
    body: ReplayBody<B>,
) -> Request<ReplayBody<B>> {
    let mut request = Request::new(body);
    *request.method_mut() = method;
    *request.uri_mut() = uri;
    *request.headers_mut() = headers;
    *request.version_mut() = parts.version;
    *request.extensions_mut() = parts.extensions.clone();
    request
}

/// The attempt timer fired.
#[derive(Debug)]
struct Elapsed(Duration);

impl std::fmt::Display for Elapsed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the attempt timed out after {:?}", self.0)
    }
}

impl std::error::Error for Elapsed {}

/// One request of an attempt on a clone of `endpoint`'s service, under its timer (made in
/// the future, ending at `at`): the service's readiness first (a service that fails it
/// never took the request: undelivered), then its call; `TimedOut` when the timer ends
/// first, saying whether the request had been handed over.
///
/// Not an `async fn`: that would hold a second copy of the request in every call's
/// future.
#[allow(clippy::manual_async_fn)]
#[inline]
fn attempt<'a, S, B, R>(
    backends: &'a Backends<S>,
    endpoint: usize,
    request: Request<ReplayBody<B>>,
    hook: Option<ErrorClassifier>,
    timers: &'a Timers,
    at: Instant,
) -> impl Future<Output = End<R>> + 'a
where
    S: Service<Request<ReplayBody<B>>, Response = Response<R>> + Clone,
    S::Error: Into<BoxError>,
    B: 'a,
    R: 'a,
{
    async move {
        let mut svc = backends.for_endpoint(endpoint);
        // Borrowed where it is kept: a binding of its own would hold a second copy.
        let Some(svc) = svc.as_mut() else {
            // Not reached: a service exists for every endpoint (checked when built).
            let why = Rejected("no service for the attempt's endpoint".into());
            return End::Failed(FailureClass::RejectedLocally, Box::new(why));
        };
        // tokio's timer pinned here, in the attempt's future; another runtime's boxed.
        let (in_place, mut boxed) = timers.attempt(at);
        let mut in_place = std::pin::pin!(in_place);
        let mut timer = |cx: &mut Context<'_>| match in_place.as_mut().as_pin_mut() {
            Some(t) => t.poll(cx),
            // Never without a timer (`Timers::attempt` makes one of the two); were it
            // ever, the attempt would time out at once rather than never.
            None => boxed
                .as_mut()
                .map_or(Poll::Ready(()), |t| t.as_mut().poll(cx)),
        };
        // Errors become `BoxError` at once: a service's own error type need not be `Send`.
        let ready = poll_fn(|cx| {
            if let Poll::Ready(r) = svc.poll_ready(cx) {
                return Poll::Ready(Some(r.map_err(Into::<BoxError>::into)));
            }
            timer(cx).map(|()| None)
        })
        .await;
        match ready {
            None => return End::TimedOut { handed: false },
            Some(Err(e)) => {
                let e: BoxError = Box::new(NotReady(Box::new(Scrubbed::new(e))));
                return End::Failed(FailureClass::Undelivered, e);
            }
            Some(Ok(())) => {}
        }
        let mut call = std::pin::pin!(svc.call(request));
        let answered = poll_fn(|cx| {
            if let Poll::Ready(r) = call.as_mut().poll(cx) {
                return Poll::Ready(Some(r.map_err(Into::<BoxError>::into)));
            }
            timer(cx).map(|()| None)
        })
        .await;
        match answered {
            None => End::TimedOut { handed: true },
            Some(Ok(r)) => End::Response(r),
            Some(Err(e)) => {
                let class = classify(&*e, hook.as_ref());
                // The text of a client error may quote the URL (keys): scrubbed.
                End::Failed(class, Box::new(Scrubbed::new(e)))
            }
        }
    }
}

/// The call's result: the response with its report in the extensions, or the error with
/// the last attempt's error and any retained response.
fn finish<R>(done: Done<Response<R>>, last: Option<BoxError>) -> Result<Response<R>, Error<R>>
where
    R: Send + 'static,
{
    done.resolve(
        |mut response, report| {
            response.extensions_mut().insert(report);
            Ok(response)
        },
        |error, retained| {
            let retained = retained.map(|mut response| {
                response.extensions_mut().insert((*error.report).clone());
                response
            });
            Err(Error::new(error, last, retained))
        },
    )
}
