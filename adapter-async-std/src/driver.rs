//! The loop that drives one call: it turns the engine's actions into sends and sleeps and
//! hands every attempt's classified outcome back, with the time. It decides nothing.
//!
//! In-flight attempts are futures owned by the call's future (polled here, never spawned),
//! so several can be in flight at once (hedging), and dropping the call's future drops
//! them (closing their connections) together with the engine's `Call`, whose `Drop`
//! releases any half-open probe slot they held.

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Instant, SystemTime};

use async_io::Timer;
use baton_core::{
    apply_attempt_headers, attempt_uri, Action, Answer, Attempt, AttemptOutcome, BodyKind, Call,
    CallOptions, DestinationError, Done, FailureClass, IdentityHeaders, Input, InvalidRequest,
    Redirects, RequestInfo,
};
use http::header::{HeaderMap, HOST};
use http::{Method, Uri};
use smallvec::SmallVec;

use crate::attempt::{self, AttemptCtx, AttemptEnd, Exchange};
use crate::body::{OutBody, Source};
use crate::classify::{Phase, TransportError};
use crate::connect;
use crate::error::{CallError, Error};
use crate::pool::Pool;
use crate::response::Response;
use crate::Inner;

/// A request ready to run.
pub(crate) struct Prepared {
    pub(crate) method: Method,
    pub(crate) uri: Uri,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Source,
    pub(crate) body_kind: BodyKind,
    pub(crate) options: CallOptions,
    /// Why the request cannot be built at all (rejected locally at the first send).
    pub(crate) invalid: Option<InvalidRequest>,
    /// The buffering limit a streamed body was over (it is sent once).
    pub(crate) not_buffered: Option<usize>,
}

type AttemptFuture = Pin<Box<dyn Future<Output = AttemptEnd> + Send>>;

struct Flight {
    number: u32,
    endpoint: usize,
    /// When the attempt's timer ends (every redirect hop shares it).
    respond_by: Instant,
    connect_timeout: std::time::Duration,
    /// The attempt's redirects, once it met one (SPEC 3).
    redirects: Option<Box<Redirects>>,
    /// The send; `None`: it is the call's unboxed slot. A healthy call (one attempt in
    /// flight, no credential) allocates no future of its own; another attempt in flight
    /// at the same time (a hedge), one with a credential, or a redirect hop is boxed.
    fut: Option<AttemptFuture>,
}

/// An empty slot for a send of [`attempt::run`], whose future's type has no name.
fn empty_slot<F>(_: fn(AttemptCtx, http::Request<OutBody>) -> F) -> Option<F> {
    None
}

/// A response as the engine reads it: the exchange (head and connection) and its
/// attempt.
pub(crate) struct Kept {
    number: u32,
    endpoint: usize,
    exchange: Box<Exchange>,
}

impl Answer for Kept {
    fn status(&self) -> http::StatusCode {
        self.exchange.head.status
    }
    fn headers(&self) -> &HeaderMap {
        &self.exchange.head.headers
    }
    fn version(&self) -> Option<http::Version> {
        Some(self.exchange.head.version)
    }
}

/// Why no request could be made for an attempt.
enum NotBuilt {
    /// Invalid request: rejected locally, with the reason (a `baton_core::DestinationError` when
    /// the destination rules refused it, kept typed as the error's source).
    Rejected(crate::classify::BoxError),
    /// No copy of the body could be made for a later attempt.
    Replay(std::io::Error),
}

/// Runs one call to its end.
pub(crate) async fn run(inner: Arc<Inner>, req: Prepared) -> Result<Response, Error> {
    let Prepared {
        method,
        uri,
        headers,
        body,
        body_kind,
        options,
        invalid,
        not_buffered,
    } = req;
    let info = RequestInfo {
        method: &method,
        uri: &uri,
        headers: &headers,
    };
    let mut call: Call<'_, Kept> =
        Call::new(&inner.engine, &info, body_kind, options, Instant::now());
    if let Some(limit) = not_buffered {
        call.handle(Input::BodyNotBuffered { limit }, Instant::now());
    }
    let make: AttemptFn<_> = attempt::run;
    let mut driver = Driver {
        inner: &inner,
        // The request id and key as header values, made once for every attempt and hop.
        identity: call.identity_headers(),
        request: &info,
        body,
        invalid,
        flights: SmallVec::new(),
        last_error: None,
        timer: None,
        slot: std::pin::pin!(empty_slot(make)),
        make,
    };
    loop {
        match call.poll() {
            Action::Send(a) => driver.send(&mut call, &a),
            Action::Discard(n) => driver.discard(n),
            Action::WaitUntil(t) => driver.wait(&mut call, Some(t)).await,
            Action::WaitForAttempt => driver.wait(&mut call, None).await,
            Action::Done => {
                driver.clear();
                let read_by = call.body_read_by(Instant::now());
                return finish(&inner, call.take_done(), read_by, driver.last_error);
            }
            // An action this adapter does not know: end the call with what it has.
            _ => call.handle(Input::Cancel, Instant::now()),
        }
    }
}

/// The type of [`attempt::run`]: the driver's slot holds its future, whose type has no
/// name.
type AttemptFn<F> = fn(AttemptCtx, http::Request<OutBody>) -> F;

/// The state of one call's driver besides the engine's.
struct Driver<'a, 's, F> {
    inner: &'a Arc<Inner>,
    identity: Result<IdentityHeaders, DestinationError>,
    /// The caller's method, URL and headers.
    request: &'a RequestInfo<'a>,
    body: Source,
    /// Why the request cannot be built at all (rejected locally at the first send).
    invalid: Option<InvalidRequest>,
    flights: SmallVec<[Flight; 2]>,
    /// The last attempt's transport error, for the call error's `source()`.
    last_error: Option<TransportError>,
    /// The wait's timer, kept between waits (set again rather than made anew).
    timer: Option<Timer>,
    /// The send of one attempt, unboxed, in the call's own future (see [`Flight::fut`]).
    slot: Pin<&'s mut Option<F>>,
    /// Makes the slot's send ([`attempt::run`]).
    make: AttemptFn<F>,
}

impl<F: Future<Output = AttemptEnd>> Driver<'_, '_, F> {
    /// Builds and starts attempt `a`, or tells the call why it could not be sent.
    fn send(&mut self, call: &mut Call<'_, Kept>, a: &Attempt) {
        let built = match (&self.invalid, &self.identity) {
            (Some(why), _) => Err(NotBuilt::Rejected(Box::new(why.clone()))),
            (None, Err(e)) => Err(NotBuilt::Rejected(Box::new(e.clone()))),
            (None, Ok(id)) => build(self.inner, id, a, self.request, &mut self.body),
        };
        let (phase_error, input) = match built {
            Ok(request) => return self.start(a, request),
            Err(NotBuilt::Rejected(why)) => (
                why,
                Input::Failed {
                    attempt: a.number,
                    outcome: AttemptOutcome::Failure(FailureClass::RejectedLocally),
                },
            ),
            Err(NotBuilt::Replay(e)) => (
                Box::new(e) as crate::classify::BoxError,
                Input::ReplayFailed { attempt: a.number },
            ),
        };
        self.last_error = Some(TransportError::new(
            self.inner.ids[a.endpoint].clone(),
            a.number,
            Phase::NotSent,
            false,
            phase_error,
        ));
        call.handle(input, Instant::now());
    }

    /// Puts attempt `a` in flight with its request: in the slot when it is free and the
    /// endpoint has no credential, else boxed.
    fn start(&mut self, a: &Attempt, request: http::Request<OutBody>) {
        let inner = self.inner;
        let credential = inner.engine.credential(a.endpoint).is_some();
        let spare = credential.then(|| crate::auth::spare(&request)).flatten();
        let ctx = AttemptCtx {
            pool: inner.pool.clone(),
            tls: inner.wires[a.endpoint].tls.clone(),
            http1: inner.http1.clone(),
            target: inner.targets[a.endpoint].clone(),
            endpoint: a.endpoint,
            endpoint_id: inner.ids[a.endpoint].clone(),
            version: inner.wires[a.endpoint].version,
            number: a.number,
            start: Instant::now(),
            connect_timeout: a.connect_timeout,
            timeout: a.timeout,
        };
        let respond_by = ctx.start + a.timeout;
        // Only an endpoint with a credential pays for the token.
        let fut: Option<AttemptFuture> = if credential {
            Some(Box::pin(crate::auth::run(
                inner.clone(),
                ctx,
                request,
                spare,
            )))
        } else if self.slot.is_none() {
            self.slot.set(Some((self.make)(ctx, request)));
            None
        } else {
            Some(Box::pin(attempt::run(ctx, request)))
        };
        self.flights.push(Flight {
            number: a.number,
            endpoint: a.endpoint,
            respond_by,
            connect_timeout: a.connect_timeout,
            redirects: None,
            fut,
        });
    }

    /// Cancels in-flight attempt `n` (its send is dropped).
    fn discard(&mut self, n: u32) {
        if let Some(p) = self.flights.iter().position(|f| f.number == n) {
            if self.flights.remove(p).fut.is_none() {
                self.slot.set(None);
            }
        }
    }

    /// Drops every send in flight.
    fn clear(&mut self) {
        self.flights.clear();
        self.slot.set(None);
    }

    /// Waits until `until` (or, without it, for an attempt to end) and hands the call
    /// what happened.
    async fn wait(&mut self, call: &mut Call<'_, Kept>, until: Option<Instant>) {
        if let Some(t) = until {
            match self.timer.as_mut() {
                Some(tm) => tm.set_at(t),
                None => self.timer = Some(Timer::at(t)),
            }
        }
        let (flights, slot, timer) = (&mut self.flights, &mut self.slot, &mut self.timer);
        let finished = poll_fn(|cx| {
            for i in 0..flights.len() {
                let ended = match flights[i].fut.as_mut() {
                    Some(fut) => fut.as_mut().poll(cx),
                    None => baton_core::poll_slot(slot.as_mut(), cx),
                };
                if let Poll::Ready(end) = ended {
                    return Poll::Ready(Some((flights.swap_remove(i), end)));
                }
            }
            if until.is_some() {
                if let Some(tm) = timer.as_mut() {
                    if Pin::new(tm).poll(cx).is_ready() {
                        return Poll::Ready(None);
                    }
                }
            }
            Poll::Pending
        })
        .await;
        match finished {
            None => call.handle(Input::Timer, Instant::now()),
            Some((flight, end)) => self.landed(call, flight, end),
        }
    }

    /// A request of attempt `flight` ended: follow a redirect, or hand the call the
    /// response or the classified failure.
    fn landed(&mut self, call: &mut Call<'_, Kept>, mut flight: Flight, end: AttemptEnd) {
        let number = flight.number;
        let end = match (end, &self.identity) {
            (AttemptEnd::Response(ex), Ok(id)) if ex.head.status.is_redirection() => {
                match follow(
                    self.inner,
                    id,
                    self.request,
                    &mut self.body,
                    &mut flight,
                    ex,
                ) {
                    Ok(()) => {
                        self.flights.push(flight);
                        return;
                    }
                    Err(end) => end,
                }
            }
            (end, _) => end,
        };
        if let Some(r) = flight.redirects.take() {
            call.handle(r.into_input(number), Instant::now());
        }
        let input = match end {
            AttemptEnd::Response(ex) => {
                let kept = Kept {
                    number,
                    endpoint: flight.endpoint,
                    exchange: ex,
                };
                Input::response(number, kept, SystemTime::now)
            }
            AttemptEnd::Failed(e) => {
                let outcome = e.outcome();
                self.last_error = Some(e);
                Input::Failed {
                    attempt: number,
                    outcome,
                }
            }
        };
        call.handle(input, Instant::now());
    }
}

/// The call's result: the kept response, or the error with the retained one.
fn finish(
    inner: &Inner,
    done: Done<Kept>,
    read_by: Option<Instant>,
    transport: Option<TransportError>,
) -> Result<Response, Error> {
    let make = |k: Kept, report: Box<baton_core::Report>| {
        Response::new(
            *k.exchange,
            inner.ids[k.endpoint].clone(),
            k.number,
            report,
            read_by,
        )
    };
    match done.into_result() {
        Ok((k, report)) => Ok(make(k, Box::new(report))),
        Err((error, retained)) => {
            let response = retained.map(|k| make(k, error.report.clone()));
            Err(Error::Call(Box::new(CallError {
                error,
                response,
                transport,
            })))
        }
    }
}

/// Follows the redirect `ex` answers with, when the engine's rules allow it: the attempt's
/// next request goes out as a new future of the same flight (same number, same timer).
/// `Err` gives back how the attempt ended when the 3xx is the answer.
fn follow(
    inner: &Arc<Inner>,
    identity: &IdentityHeaders,
    request: &RequestInfo<'_>,
    body: &mut Source,
    flight: &mut Flight,
    ex: Box<Exchange>,
) -> Result<(), AttemptEnd> {
    let (method, uri, headers) = (request.method, request.uri, request.headers);
    let policy = inner.engine.policy();
    if policy.settings().max_redirects == 0 {
        return Err(AttemptEnd::Response(ex));
    }
    let endpoint = flight.endpoint;
    let state = match &mut flight.redirects {
        Some(s) => s,
        None => {
            let Ok(target) = attempt_uri(policy, endpoint, uri) else {
                return Err(AttemptEnd::Response(ex));
            };
            let kind = body_kind_of(body);
            flight.redirects.insert(Box::new(Redirects::new(
                policy,
                endpoint,
                flight.number,
                kind,
                &target,
                method,
            )))
        }
    };
    let Some(hop) = state.next(ex.head.status, &ex.head.headers) else {
        return Err(AttemptEnd::Response(ex));
    };
    let Ok(mut h) = state.hop_headers(policy, &hop, uri, identity, headers) else {
        state.unfollow();
        return Err(AttemptEnd::Response(ex));
    };
    let out = if hop.body {
        match body.body_for(true) {
            Ok(b) => b,
            Err(_) => {
                state.unfollow();
                return Err(AttemptEnd::Response(ex));
            }
        }
    } else {
        OutBody::Empty
    };
    let Some((target, pool)) = hop_target(inner, endpoint, &hop) else {
        state.unfollow();
        return Err(AttemptEnd::Response(ex));
    };
    if !h.contains_key(HOST) {
        h.insert(HOST, target.host_header.clone());
    }
    if let Some(a) = target.proxy_authorization() {
        h.insert(http::header::PROXY_AUTHORIZATION, a.clone());
    }
    drop(ex);
    let path = hop
        .uri
        .path_and_query()
        .map_or_else(|| Uri::from_static("/"), |pq| Uri::from(pq.clone()));
    let mut req = http::Request::new(out);
    *req.method_mut() = hop.method.clone();
    *req.uri_mut() = target.request_uri(path);
    *req.headers_mut() = h;
    let ctx = hop_ctx(inner, flight, target, pool, hop.cross_origin);
    // A hop within the endpoint's origin carries its token; one to another origin never.
    flight.fut = Some(
        if hop.cross_origin || inner.engine.credential(endpoint).is_none() {
            Box::pin(attempt::run(ctx, req))
        } else {
            Box::pin(crate::auth::run(inner.clone(), ctx, req, None))
        },
    );
    Ok(())
}

/// Where a redirect hop of `endpoint` connects: the endpoint's own target and pool, or,
/// for another origin, a connection of its own, never pooled with the endpoint's (`None`:
/// the hop's URL cannot be routed).
fn hop_target(
    inner: &Inner,
    endpoint: usize,
    hop: &baton_core::Hop,
) -> Option<(Arc<connect::Target>, Arc<Pool>)> {
    if !hop.cross_origin {
        return Some((inner.targets[endpoint].clone(), inner.pool.clone()));
    }
    let target = connect::Target::routed(&hop.uri, &inner.proxies).ok()?;
    let pool = Pool::new(0, 0, std::time::Duration::ZERO);
    Some((Arc::new(target), Arc::new(pool)))
}

/// The context of a redirect hop of `flight`, within what is left of its attempt time.
/// Another origin gets a connection of its own with the same trust, never the endpoint's
/// client identity (SPEC 9), and its own protocol by ALPN.
fn hop_ctx(
    inner: &Inner,
    flight: &Flight,
    target: Arc<connect::Target>,
    pool: Arc<Pool>,
    cross_origin: bool,
) -> AttemptCtx {
    let now = Instant::now();
    let left = flight.respond_by.saturating_duration_since(now);
    let wire = &inner.wires[flight.endpoint];
    let (tls, endpoint, version) = match cross_origin {
        true => (wire.bare.clone(), 0, baton_core::HttpVersion::Auto),
        false => (wire.tls.clone(), flight.endpoint, wire.version),
    };
    AttemptCtx {
        pool,
        tls,
        http1: inner.http1.clone(),
        target,
        endpoint,
        endpoint_id: inner.ids[flight.endpoint].clone(),
        version,
        number: flight.number,
        start: now,
        connect_timeout: flight.connect_timeout.min(left),
        timeout: left,
    }
}

fn body_kind_of(body: &Source) -> BodyKind {
    match body {
        Source::Empty => BodyKind::Empty,
        Source::Bytes(b) if b.is_empty() => BodyKind::Empty,
        Source::Bytes(_) | Source::Fn(_) => BodyKind::Replayable,
        Source::Stream(_) => BodyKind::OneShot,
    }
}

/// Builds the request of one attempt: the endpoint's URL, the caller's headers plus the
/// attempt's (request id, key, attempt number, Host rule, endpoint headers), and the body.
fn build(
    inner: &Inner,
    identity: &IdentityHeaders,
    a: &Attempt,
    request: &RequestInfo<'_>,
    body: &mut Source,
) -> Result<http::Request<OutBody>, NotBuilt> {
    let (method, uri, headers) = (request.method, request.uri, request.headers);
    let policy = inner.engine.policy();
    let dest = attempt_uri(policy, a.endpoint, uri).map_err(|e| NotBuilt::Rejected(Box::new(e)))?;
    let mut h = headers.clone();
    apply_attempt_headers(policy, a.endpoint, uri, identity, a.number, &mut h)
        .map_err(|e| NotBuilt::Rejected(Box::new(e)))?;
    let target = &inner.targets[a.endpoint];
    if !h.contains_key(HOST) {
        h.insert(HOST, target.host_header.clone());
    }
    if let Some(auth) = target.proxy_authorization() {
        h.insert(http::header::PROXY_AUTHORIZATION, auth.clone());
    }
    let out = match body.body_for(a.fresh_body) {
        Ok(b) => b,
        Err(e) if a.number > 1 => return Err(NotBuilt::Replay(e)),
        Err(e) => {
            return Err(NotBuilt::Rejected(Box::new(InvalidRequest::Other(
                format!("the body could not be made: {e}"),
            ))))
        }
    };
    let path = dest
        .path_and_query()
        .map_or_else(|| Uri::from_static("/"), |pq| Uri::from(pq.clone()));
    let mut req = http::Request::new(out);
    *req.method_mut() = method.clone();
    *req.uri_mut() = target.request_uri(path);
    *req.headers_mut() = h;
    Ok(req)
}

/// Sends a probe's health request on the endpoint's connections: its status, or why
/// there was none.
pub(crate) async fn send_probe(
    inner: &Inner,
    probe: &baton_core::Probe<'_>,
) -> Result<http::StatusCode, String> {
    let policy = inner.engine.policy();
    let endpoint = policy.endpoint_index(probe.endpoint_id()).unwrap_or(0);
    let target = inner.targets[endpoint].clone();
    let mut h = probe.headers.clone();
    if !h.contains_key(HOST) {
        h.insert(HOST, target.host_header.clone());
    }
    if let Some(auth) = target.proxy_authorization() {
        h.insert(http::header::PROXY_AUTHORIZATION, auth.clone());
    }
    let path = probe
        .uri
        .path_and_query()
        .map_or_else(|| Uri::from_static("/"), |pq| Uri::from(pq.clone()));
    let mut req = http::Request::new(OutBody::Full(None));
    *req.method_mut() = probe.method.clone();
    *req.uri_mut() = target.request_uri(path);
    *req.headers_mut() = h;
    let ctx = AttemptCtx {
        pool: inner.pool.clone(),
        tls: inner.wires[endpoint].tls.clone(),
        http1: inner.http1.clone(),
        target,
        endpoint,
        endpoint_id: inner.ids[endpoint].clone(),
        version: inner.wires[endpoint].version,
        number: 1,
        start: Instant::now(),
        connect_timeout: probe.connect_timeout,
        timeout: probe.connect_timeout + probe.timeout,
    };
    match attempt::run(ctx, req).await {
        attempt::AttemptEnd::Response(exchange) => Ok(exchange.head.status),
        attempt::AttemptEnd::Failed(e) => Err(baton_core::scrub_urls(&e.to_string())),
    }
}
