//! The loop that drives one call through the inner services: it turns the engine's actions
//! into `poll_ready` + `call` under timers, and what happened into the engine's inputs. It
//! decides nothing: which endpoint, whether to retry, how long to wait come from
//! [`baton_core::Call`]. Attempts in flight are futures owned by the call's future, so
//! dropping it cancels them and drops the `Call` (which frees any half-open probe slot).

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant, SystemTime};

use baton_core::{
    Action, Answer, Attempt, AttemptOutcome, Call, CallOptions, Done, Engine, FailureClass, Input,
    Redirects, RequestInfo, Scrubbed, TimeoutPhase,
};
use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body::Body;
use smallvec::SmallVec;
use tower_service::Service;

use crate::body::{self, Kept, ReplayBody};
use crate::classify::{classify, ErrorClassifier};
use crate::error::Error;
use crate::sleep::{Sleep, Sleeping};
use crate::BoxError;

/// What a service shares with every call's driver.
pub(crate) struct Shared {
    pub(crate) engine: Arc<Engine>,
    pub(crate) sleep: Arc<dyn Sleep>,
    pub(crate) buffer_limit: Option<usize>,
    pub(crate) classify_error: Option<ErrorClassifier>,
}

/// Where attempts go: one service that takes absolute URIs, or one per endpoint (cloned
/// into each call, so a service need not be `Sync`).
#[derive(Clone)]
pub(crate) enum Backends<S> {
    One(S),
    PerEndpoint(Vec<S>),
}

impl<S: Clone> Backends<S> {
    fn for_endpoint(&self, e: usize) -> Option<S> {
        match self {
            Backends::One(s) => Some(s.clone()),
            Backends::PerEndpoint(all) => all.get(e).cloned(),
        }
    }
}

/// A response as the engine reads it.
struct Reply<R>(Response<R>);

impl<R> Answer for Reply<R> {
    fn status(&self) -> StatusCode {
        self.0.status()
    }
    fn headers(&self) -> &HeaderMap {
        self.0.headers()
    }
    fn version(&self) -> Option<http::Version> {
        Some(self.0.version())
    }
}

/// How one request of an attempt ended.
enum Landed<R> {
    Response(Response<R>),
    Failed(FailureClass, BoxError),
    /// The attempt timer fired; `handed` says whether the request had been handed to the
    /// service (its `poll_ready` had finished).
    TimedOut {
        handed: bool,
    },
}

type FlightFuture<R> = Pin<Box<dyn Future<Output = Landed<R>> + Send>>;

struct Flight<R> {
    number: u32,
    endpoint: usize,
    timeout: Duration,
    /// When the attempt's timer ends (every redirect hop shares it).
    at: Instant,
    redirects: Option<Box<Redirects>>,
    /// The request; `None`: it is the call's unboxed slot. A healthy call (one attempt in
    /// flight) allocates no future of its own; a hedge beside it or a redirect hop is
    /// boxed.
    fut: Option<FlightFuture<R>>,
}

/// The error of an inner service's `poll_ready` or `call`.
#[derive(Debug)]
struct NotReady(BoxError);

impl std::fmt::Display for NotReady {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the endpoint's service was not ready: {}", self.0)
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

/// Drives one call to its end.
pub(crate) async fn drive<S, B, R>(
    shared: Arc<Shared>,
    backends: Backends<S>,
    request: Request<B>,
) -> Result<Response<R>, Error<R>>
where
    S: Service<Request<ReplayBody<B>>, Response = Response<R>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
    R: Send + 'static,
{
    let (parts, body) = request.into_parts();
    let options = parts
        .extensions
        .get::<CallOptions>()
        .cloned()
        .unwrap_or_default();
    let prepared = body::prepare(body, shared.buffer_limit).await;
    let engine = Arc::clone(&shared.engine);
    let info = RequestInfo {
        method: &parts.method,
        uri: &parts.uri,
        headers: &parts.headers,
    };
    let mut call: Call<'_, Reply<R>> = Call::new(
        &engine,
        &info,
        prepared.body.kind(),
        options,
        shared.sleep.now(),
    );
    if let Some(limit) = prepared.over_limit {
        call.handle(Input::BodyNotBuffered { limit }, shared.sleep.now());
    }
    let make: AttemptFn<S, B, _> = attempt::<S, B, R>;
    let slot = std::pin::pin!(empty_slot(make));
    let mut driver = Driver {
        shared: &shared,
        identity: call.identity_headers(),
        backends,
        parts: &parts,
        body: prepared.body,
        body_error: prepared.error.map(|e| e.to_string()),
        flights: SmallVec::new(),
        last: None,
        slot,
        attempt: make,
    };
    loop {
        match call.poll() {
            Action::Send(a) => driver.send(&mut call, &a),
            Action::Discard(n) => driver.discard(n),
            Action::WaitUntil(t) => driver.wait(&mut call, Some(t)).await,
            Action::WaitForAttempt => driver.wait(&mut call, None).await,
            Action::Done => break,
            // An action this adapter does not know: end the call with what it has.
            _ => call.handle(Input::Cancel, shared.sleep.now()),
        }
    }
    driver.clear();
    let last = driver.last.take();
    finish(call.take_done(), last)
}

struct Driver<'a, 's, S, B, R, F> {
    shared: &'a Shared,
    /// The call's request id and key as header values, made once for all its attempts.
    identity: Result<baton_core::IdentityHeaders, baton_core::DestinationError>,
    backends: Backends<S>,
    parts: &'a http::request::Parts,
    body: Kept<B>,
    /// The request body failed while it was being read for copying.
    body_error: Option<String>,
    flights: SmallVec<[Flight<R>; 2]>,
    /// The last attempt's error: (attempt number, error), for the call error's `source()`.
    last: Option<(u32, BoxError)>,
    /// The request of one attempt, unboxed, in the call's own future.
    slot: Pin<&'s mut Option<F>>,
    /// Makes the slot's request ([`attempt`]; a pointer, as its future's type has no name).
    attempt: AttemptFn<S, B, F>,
}

impl<S, B, R, F> Driver<'_, '_, S, B, R, F>
where
    S: Service<Request<ReplayBody<B>>, Response = Response<R>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
    R: Send + 'static,
    F: Future<Output = Landed<R>>,
{
    /// Builds and sends attempt `a`, or tells the call why it could not be sent.
    fn send(&mut self, call: &mut Call<'_, Reply<R>>, a: &Attempt) {
        let now = self.shared.sleep.now();
        let mut headers = self.parts.headers.clone();
        // Why an attempt cannot be sent is the error's source: the destination rules'
        // typed error, as on every adapter, or this driver's reason in words.
        let rejected = |why: String| -> BoxError { Box::new(Rejected(why)) };
        let built = match (&self.body_error, self.backends.for_endpoint(a.endpoint)) {
            (Some(e), _) => Err(rejected(format!("reading the request body failed: {e}"))),
            (None, None) => Err(rejected(format!("no service for endpoint {}", a.endpoint))),
            (None, Some(svc)) => self
                .identity
                .as_ref()
                .map_err(Clone::clone)
                .and_then(|identity| call.attempt_parts(a, identity, &self.parts.uri, &mut headers))
                .map_err(|e| -> BoxError { Box::new(e) })
                .map(|uri| (svc, uri)),
        };
        let (svc, uri) = match built {
            Ok(b) => b,
            Err(why) => {
                self.last = Some((a.number, why));
                let outcome = AttemptOutcome::Failure(FailureClass::RejectedLocally);
                call.handle(
                    Input::Failed {
                        attempt: a.number,
                        outcome,
                    },
                    now,
                );
                return;
            }
        };
        let Some(body) = self.body.next() else {
            call.handle(Input::ReplayFailed { attempt: a.number }, now);
            return;
        };
        let request = self.request(self.parts.method.clone(), uri, headers, body);
        let at = now + a.timeout;
        let fut = self.start(svc, request, at);
        self.flights.push(Flight {
            number: a.number,
            endpoint: a.endpoint,
            timeout: a.timeout,
            at,
            redirects: None,
            fut,
        });
    }

    fn request(
        &self,
        method: http::Method,
        uri: http::Uri,
        headers: HeaderMap,
        body: ReplayBody<B>,
    ) -> Request<ReplayBody<B>> {
        let mut request = Request::new(body);
        *request.method_mut() = method;
        *request.uri_mut() = uri;
        *request.headers_mut() = headers;
        *request.version_mut() = self.parts.version;
        *request.extensions_mut() = self.parts.extensions.clone();
        request
    }

    /// One request under the attempt's timer, boxed (a hedge beside the slot's attempt,
    /// or a redirect hop).
    fn flight(&self, svc: S, request: Request<ReplayBody<B>>, at: Instant) -> FlightFuture<R> {
        let timer = self.shared.sleep.sleep_until(at);
        Box::pin(attempt(
            svc,
            request,
            self.shared.classify_error.clone(),
            timer,
        ))
    }

    /// Starts one request of an attempt: in the call's unboxed slot when it is free
    /// (`None`), else boxed.
    fn start(
        &mut self,
        svc: S,
        request: Request<ReplayBody<B>>,
        at: Instant,
    ) -> Option<FlightFuture<R>> {
        if self.slot.is_some() {
            return Some(self.flight(svc, request, at));
        }
        let timer = self.shared.sleep.sleep_until(at);
        let hook = self.shared.classify_error.clone();
        self.slot
            .set(Some((self.attempt)(svc, request, hook, timer)));
        None
    }

    /// Takes attempt `n` out of flight (its request is dropped, which cancels it).
    fn discard(&mut self, n: u32) {
        if let Some(p) = self.flights.iter().position(|f| f.number == n) {
            if self.flights.remove(p).fut.is_none() {
                self.slot.set(None);
            }
        }
    }

    /// Drops every request in flight.
    fn clear(&mut self) {
        self.flights.clear();
        self.slot.set(None);
    }

    /// Waits until `until` (or, without it, for an attempt) and hands the call what
    /// happened.
    async fn wait(&mut self, call: &mut Call<'_, Reply<R>>, until: Option<Instant>) {
        let mut timer: Option<Sleeping> = until.map(|t| self.shared.sleep.sleep_until(t));
        if self.flights.is_empty() && timer.is_none() {
            call.handle(Input::Cancel, self.shared.sleep.now());
            return;
        }
        let (flights, slot) = (&mut self.flights, &mut self.slot);
        let done = poll_fn(|cx| {
            for (i, f) in flights.iter_mut().enumerate() {
                let ended = match f.fut.as_mut() {
                    Some(fut) => fut.as_mut().poll(cx),
                    None => baton_core::poll_slot(slot.as_mut(), cx),
                };
                if let Poll::Ready(out) = ended {
                    return Poll::Ready(Some((i, out)));
                }
            }
            match timer.as_mut().map(|t| t.as_mut().poll(cx)) {
                Some(Poll::Ready(())) => Poll::Ready(None),
                _ => Poll::Pending,
            }
        })
        .await;
        match done {
            None => call.handle(Input::Timer, self.shared.sleep.now()),
            Some((i, out)) => {
                let f = self.flights.swap_remove(i);
                self.landed(call, f, out);
            }
        }
    }

    /// A request of attempt `f` ended: follow a redirect, or hand the call the response or
    /// the classified failure.
    fn landed(&mut self, call: &mut Call<'_, Reply<R>>, mut f: Flight<R>, out: Landed<R>) {
        // One table of response limits on every adapter: an over-limit head is a
        // protocol failure after the request was sent.
        let out = match out {
            Landed::Response(r) => match baton_core::check_response_head(r.headers()) {
                Ok(()) => Landed::Response(r),
                Err(e) => Landed::Failed(FailureClass::Ambiguous, Box::new(e)),
            },
            other => other,
        };
        // Redirects are followed only through one service that takes absolute URIs: a
        // per-endpoint service (a tonic channel, a transport) sends every request to its
        // own endpoint, whatever the `Location` says, so there the 3xx is the answer.
        let follows = matches!(self.backends, Backends::One(_));
        if let (true, Landed::Response(r)) = (follows, &out) {
            if r.status().is_redirection() {
                if let Some(next) = self.next_hop(&mut f, r) {
                    f.fut = Some(next);
                    self.flights.push(f);
                    return;
                }
            }
        }
        let now = self.shared.sleep.now();
        if let Some(r) = f.redirects.take() {
            call.handle(r.into_input(f.number), now);
        }
        let attempt = f.number;
        let input = match out {
            Landed::Response(response) => {
                Input::response(attempt, Reply(response), SystemTime::now)
            }
            Landed::Failed(class, e) => {
                self.last = Some((attempt, e));
                Input::Failed {
                    attempt,
                    outcome: AttemptOutcome::Failure(class),
                }
            }
            Landed::TimedOut { handed } => {
                self.last = Some((attempt, Box::new(Elapsed(f.timeout))));
                // Never handed over (the service was not ready): nothing was sent. Handed
                // over: a generic service does not say whether it had connected.
                let phase = if handed {
                    TimeoutPhase::Unknown
                } else {
                    TimeoutPhase::Connect
                };
                let outcome = AttemptOutcome::Timeout(phase);
                Input::Failed { attempt, outcome }
            }
        };
        call.handle(input, self.shared.sleep.now());
    }

    /// The next request of attempt `f` when `response` is a redirect the engine's rules
    /// follow; `None`: the response is the attempt's answer.
    fn next_hop(&self, f: &mut Flight<R>, response: &Response<R>) -> Option<FlightFuture<R>> {
        let policy = self.shared.engine.policy();
        let identity = self.identity.as_ref().ok()?;
        if policy.settings().max_redirects == 0 {
            return None;
        }
        let (endpoint, number) = (f.endpoint, f.number);
        let parts = self.parts;
        let kind = self.body.kind();
        let state = f.redirects.get_or_insert_with(|| {
            let first = baton_core::attempt_uri(policy, endpoint, &parts.uri).unwrap_or_default();
            Box::new(Redirects::new(
                policy,
                endpoint,
                number,
                kind,
                &first,
                &parts.method,
            ))
        });
        let hop = state.next(response.status(), response.headers())?;
        let built = state.hop_headers(policy, &hop, &parts.uri, identity, &parts.headers);
        let body = if hop.body {
            self.body.copy()
        } else {
            Some(ReplayBody::from_bytes(Bytes::new()))
        };
        let (Ok(headers), Some(body), Some(svc)) =
            (built, body, self.backends.for_endpoint(endpoint))
        else {
            state.unfollow();
            return None;
        };
        let request = self.request(hop.method, hop.uri, headers, body);
        Some(self.flight(svc, request, f.at))
    }
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

/// One request of an attempt under its timer: the service's readiness first (a service
/// that fails it never took the request: undelivered), then its call; `TimedOut` when
/// `timer` ends first, saying whether the request had been handed over.
async fn attempt<S, B, R>(
    mut svc: S,
    request: Request<ReplayBody<B>>,
    hook: Option<ErrorClassifier>,
    mut timer: Sleeping,
) -> Landed<R>
where
    S: Service<Request<ReplayBody<B>>, Response = Response<R>>,
    S::Error: Into<BoxError>,
{
    // Errors become `BoxError` at once: a service's own error type need not be `Send`.
    let ready = poll_fn(|cx| {
        if let Poll::Ready(r) = svc.poll_ready(cx) {
            return Poll::Ready(Some(r.map_err(Into::<BoxError>::into)));
        }
        timer.as_mut().poll(cx).map(|()| None)
    })
    .await;
    match ready {
        None => return Landed::TimedOut { handed: false },
        Some(Err(e)) => {
            let e: BoxError = Box::new(NotReady(Box::new(Scrubbed::new(e))));
            return Landed::Failed(FailureClass::Undelivered, e);
        }
        Some(Ok(())) => {}
    }
    let mut call = std::pin::pin!(svc.call(request));
    let answered = poll_fn(|cx| {
        if let Poll::Ready(r) = call.as_mut().poll(cx) {
            return Poll::Ready(Some(r.map_err(Into::<BoxError>::into)));
        }
        timer.as_mut().poll(cx).map(|()| None)
    })
    .await;
    match answered {
        None => Landed::TimedOut { handed: true },
        Some(Ok(r)) => Landed::Response(r),
        Some(Err(e)) => {
            let class = classify(&*e, hook.as_ref());
            // The text of a client error may quote the URL (keys): scrubbed.
            Landed::Failed(class, Box::new(Scrubbed::new(e)))
        }
    }
}

/// The type of [`attempt`] for one service, body and response type: the driver's slot
/// holds its future, whose type has no name.
type AttemptFn<S, B, F> = fn(S, Request<ReplayBody<B>>, Option<ErrorClassifier>, Sleeping) -> F;

/// An empty slot for a future of `f`.
fn empty_slot<S, B, F>(_: AttemptFn<S, B, F>) -> Option<F> {
    None
}

/// The call's result: the response with its report in the extensions, or the error with
/// the last attempt's error and any retained response.
fn finish<R>(done: Done<Reply<R>>, last: Option<(u32, BoxError)>) -> Result<Response<R>, Error<R>>
where
    R: Send + 'static,
{
    let last_number = done.report().attempts.last().map(|a| a.number);
    let last = last
        .filter(|(n, _)| Some(*n) == last_number)
        .map(|(_, e)| e);
    match done.into_result() {
        Ok((reply, report)) => {
            let mut response = reply.0;
            response.extensions_mut().insert(report);
            Ok(response)
        }
        Err((error, retained)) => {
            let retained = retained.map(|r| {
                let mut response = r.0;
                response.extensions_mut().insert((*error.report).clone());
                response
            });
            Err(Error::new(error, last, retained))
        }
    }
}
