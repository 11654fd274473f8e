//! What this adapter gives core's call driver ([`baton_core::drive`]): each attempt's
//! request and connection context, hyper sends on the client's pool (see `attempt`),
//! redirect hops routed to their own origin, async-io timers, and the [`Response`] a call
//! ends as. The loop itself (attempts in flight, redirects, waits) is core's, shared with
//! every async adapter; nothing here decides which endpoint, whether to retry, or how
//! long to wait.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_io::Timer;
use baton_core::drive::{Built, CallTransport, Flight, Landed, NotBuilt, Sent};
use baton_core::{
    apply_attempt_headers, attempt_uri, Answer, Attempt, BodyKind, Call, CallOptions,
    DestinationError, Done, IdentityHeaders, InvalidRequest,
};
use http::header::HeaderMap;
use http::Uri;

use crate::attempt::{self, AttemptCtx, AttemptEnd, Exchange, Route};
use crate::body::{OutBody, Source};
use crate::classify::{BoxError, Phase, TransportError};
use crate::connect;
use crate::error::{CallError, Error};
use crate::pool::Pool;
use crate::response::Response;
use crate::Inner;

/// A request ready to run.
pub(crate) struct Prepared {
    /// Method, URL and headers (the version is the connection's).
    pub(crate) head: http::request::Parts,
    pub(crate) body: Source,
    pub(crate) body_kind: BodyKind,
    /// Why the request cannot be built at all (rejected locally at the first send).
    pub(crate) invalid: Option<InvalidRequest>,
    /// Opt-in buffering of a streamed body up to this many bytes (SPEC 2.4), done when
    /// the call starts.
    pub(crate) buffer: Option<usize>,
}

impl AsRef<http::request::Parts> for Prepared {
    fn as_ref(&self) -> &http::request::Parts {
        &self.head
    }
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

/// Runs one call to its end, on core's call driver.
// Inlined with `RequestBuilder::send`, so that the future is built where its caller keeps it.
#[inline]
pub(crate) fn run(
    inner: Arc<Inner>,
    req: Prepared,
    options: CallOptions,
) -> impl Future<Output = Result<Response, Error>> + Send {
    baton_core::drive::drive(Calls(inner), req, options)
}

/// A client as core's driver sees it: hyper sends on the client's pool, async-io timers.
struct Calls(Arc<Inner>);

/// One request of an attempt: what it needs to connect, and the request.
type Outgoing = (AttemptCtx, http::Request<OutBody>);

impl CallTransport for Calls {
    type Prepared = Prepared;
    type Answer = Kept;
    type Request = Outgoing;
    /// The attempt's connect timeout (a redirect hop gets what is left of it).
    type Ticket = std::time::Duration;
    type Ended = AttemptEnd;
    type Error = TransportError;
    type Timer = Timer;
    type Output = Result<Response, Error>;

    fn engine(&self) -> &baton_core::Engine {
        &self.0.engine
    }

    fn now(&self) -> Instant {
        Instant::now()
    }

    fn body_kind(&self, req: &Prepared) -> BodyKind {
        req.body_kind
    }

    fn redirect_body_kind(&self, req: &Prepared) -> BodyKind {
        body_kind_of(&req.body)
    }

    #[allow(clippy::manual_async_fn)]
    fn prepare<'p>(
        &'p self,
        req: &'p mut Prepared,
    ) -> impl Future<Output = Option<usize>> + Send + 'p {
        async move {
            let limit = req.buffer.filter(|_| req.invalid.is_none())?;
            let Source::Stream(stream) = &mut req.body else {
                return None;
            };
            let (prefix, rest) = stream.take()?;
            // Boxed: the read loop's state is not kept in every call's future.
            let (body, over) =
                match Box::pin(crate::Body::of_stream(prefix, rest).buffer(limit)).await {
                    Ok(b) => {
                        let over = (b.kind() == BodyKind::OneShot).then_some(limit);
                        (b, over)
                    }
                    Err(e) => {
                        let e = baton_core::chain_text(&e);
                        let why = format!("the body stream failed while buffering: {e}");
                        req.invalid = Some(why.into());
                        (crate::Body::empty(), None)
                    }
                };
            req.body_kind = body.kind();
            req.body = body.into_source();
            over
        }
    }

    fn build(
        &self,
        req: &mut Prepared,
        call: &Call<'_, Kept>,
        identity: &Result<IdentityHeaders, DestinationError>,
        a: &Attempt,
        now: Instant,
    ) -> Result<Built<Outgoing, Duration>, NotBuilt<TransportError>> {
        let inner = &*self.0;
        let built = match (&req.invalid, identity) {
            (Some(why), _) => Err(NotBuilt::Rejected(Box::new(why.clone()) as BoxError)),
            (None, Err(e)) => Err(NotBuilt::Rejected(Box::new(e.clone()) as BoxError)),
            (None, Ok(id)) => build(inner, id, a, req),
        };
        let why = |e: BoxError| {
            let id = inner.routes[a.endpoint].endpoint_id.clone();
            TransportError::new(id, a.number, Phase::NotSent, false, e)
        };
        let request = match built {
            Ok(request) => request,
            Err(NotBuilt::Rejected(e)) => return Err(NotBuilt::Rejected(why(e))),
            Err(NotBuilt::Replay(e)) => return Err(NotBuilt::Replay(e.map(why))),
        };
        // The attempt's timers end by the call's deadline as an instant (the engine
        // clipped them from the time of its last input): they fire with the driver's
        // deadline wait, so a connect the deadline cuts reports its phase (SPEC 2.6).
        let start = now;
        let left = (call.deadline()).map_or(Duration::MAX, |d| d.saturating_duration_since(start));
        let ctx = AttemptCtx {
            route: inner.routes[a.endpoint].clone(),
            number: a.number,
            start,
            connect_timeout: a.connect_timeout.min(left),
            timeout: a.timeout.min(left),
            ends_by: call.deadline(),
        };
        // Only an endpoint with a credential pays for the copy.
        let spare = (inner.engine.credential(a.endpoint))
            .and_then(|_| crate::auth::spare(&request))
            .map(|spare| Box::new((ctx.clone(), spare)));
        Ok(Built {
            request: (ctx, request),
            spare,
            ticket: a.connect_timeout,
        })
    }

    fn send<'a>(
        &'a self,
        _: usize,
        (ctx, request): Outgoing,
        _: Instant,
    ) -> impl Future<Output = AttemptEnd> + Send + 'a {
        attempt::run(ctx, request)
    }

    fn send_authorized<'a>(
        &'a self,
        _: usize,
        (ctx, request): Outgoing,
        spare: Option<Box<Outgoing>>,
        _: Instant,
    ) -> Flight<'a, AttemptEnd> {
        let spare = spare.map(|s| s.1);
        Box::pin(crate::auth::run(self.0.clone(), ctx, request, spare))
    }

    fn land(
        &self,
        ended: AttemptEnd,
        sent: &Sent<std::time::Duration>,
    ) -> Landed<Kept, TransportError> {
        match ended {
            AttemptEnd::Response(exchange) => Landed::Response(Kept {
                number: sent.number,
                endpoint: sent.endpoint,
                exchange,
            }),
            AttemptEnd::Failed(e) => Landed::Failed(e.outcome(), e),
        }
    }

    /// The hop's request: on the endpoint's own target and pool, or, for another origin,
    /// on a connection of its own (see [`hop_route`]).
    fn hop(
        &self,
        req: &mut Prepared,
        sent: &Sent<std::time::Duration>,
        hop: &baton_core::Hop,
        mut h: HeaderMap,
    ) -> Option<Outgoing> {
        let inner = &*self.0;
        let out = match hop.body {
            true => req.body.body_for(true).ok()?,
            false => OutBody::Empty,
        };
        let route = hop_route(inner, sent.endpoint, hop)?;
        let target = &route.target;
        target.complete_headers(&mut h);
        let path = hop
            .uri
            .path_and_query()
            .map_or_else(|| Uri::from_static("/"), |pq| Uri::from(pq.clone()));
        let mut request = http::Request::new(out);
        *request.method_mut() = hop.method.clone();
        *request.uri_mut() = target.request_uri(path);
        *request.headers_mut() = h;
        Some((hop_ctx(sent, route), request))
    }

    fn timer(&self, at: Instant) -> Timer {
        Timer::at(at)
    }

    fn reset(&self, timer: &mut Timer, at: Instant) {
        timer.set_at(at);
    }

    fn finish(
        &self,
        done: Done<Kept>,
        last: Option<TransportError>,
        read_by: Option<Instant>,
    ) -> Self::Output {
        finish(&self.0, done, read_by, last)
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
            inner.routes[k.endpoint].endpoint_id.clone(),
            k.number,
            report,
            read_by,
        )
    };
    done.resolve(
        |k, report| Ok(make(k, Box::new(report))),
        |error, retained| {
            let response = retained.map(|k| make(k, error.report.clone()));
            let error = match transport {
                Some(t) => error.with_last_error(Box::new(t)),
                None => error,
            };
            Err(Error::Call(Box::new(CallError { error, response })))
        },
    )
}

/// Where a redirect hop of `endpoint` connects: the endpoint's own route, or, for another
/// origin, a connection of its own, never pooled with the endpoint's, with the same trust,
/// never the endpoint's client identity (SPEC 9), and its own protocol by ALPN (`None`:
/// the hop's URL cannot be routed).
fn hop_route(inner: &Inner, endpoint: usize, hop: &baton_core::Hop) -> Option<Arc<Route>> {
    let own = &inner.routes[endpoint];
    if !hop.cross_origin {
        return Some(own.clone());
    }
    let target = connect::Target::routed(&hop.uri, &inner.proxies).ok()?;
    Some(Arc::new(Route {
        pool: Arc::new(Pool::new(0, 0, std::time::Duration::ZERO)),
        tls: inner.bare[endpoint].clone(),
        http1: inner.http1.clone(),
        target: Arc::new(target),
        endpoint: 0,
        endpoint_id: own.endpoint_id.clone(),
        version: baton_core::HttpVersion::Auto,
    }))
}

/// The context of a redirect hop of attempt `sent` on `route`, within what is left of
/// its time: hops share the attempt's timer as the engine set it (from the attempt's
/// start; the first hop's connect time is not added back).
fn hop_ctx(sent: &Sent<std::time::Duration>, route: Arc<Route>) -> AttemptCtx {
    let now = Instant::now();
    let left = sent.at.saturating_duration_since(now);
    AttemptCtx {
        route,
        number: sent.number,
        start: now,
        connect_timeout: sent.ticket.min(left),
        timeout: left,
        ends_by: Some(sent.at),
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
    req: &mut Prepared,
) -> Result<http::Request<OutBody>, NotBuilt<BoxError>> {
    let (head, body) = (&req.head, &mut req.body);
    let (method, uri, headers) = (&head.method, &head.uri, &head.headers);
    let policy = inner.engine.policy();
    let rejected = |e: DestinationError| NotBuilt::Rejected(Box::new(e) as BoxError);
    let dest = attempt_uri(policy, a.endpoint, uri).map_err(rejected)?;
    let mut h = headers.clone();
    apply_attempt_headers(policy, a.endpoint, uri, identity, a.number, &mut h).map_err(rejected)?;
    let target = &inner.routes[a.endpoint].target;
    target.complete_headers(&mut h);
    let out = match body.body_for(a.fresh_body) {
        Ok(b) => b,
        Err(e) if a.number > 1 => return Err(NotBuilt::Replay(Some(Box::new(e)))),
        Err(e) => {
            return Err(NotBuilt::Rejected(Box::new(InvalidRequest::Other(
                format!("the body could not be made: {}", baton_core::chain_text(&e)),
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

/// Sends a probe's health request on the endpoint's connections, as an attempt is sent:
/// with the endpoint's token when it has a credential slot (a refusal invalidates it, and
/// the probe, which has no body, is sent once more with a refreshed one). Its status and
/// headers, or why there was none.
pub(crate) async fn send_probe(
    inner: &Arc<Inner>,
    probe: &baton_core::Probe<'_>,
) -> Result<(http::StatusCode, http::HeaderMap), String> {
    let policy = inner.engine.policy();
    let endpoint = policy.endpoint_index(probe.endpoint_id()).unwrap_or(0);
    let route = inner.routes[endpoint].clone();
    let target = &route.target;
    let mut h = probe.headers.clone();
    target.complete_headers(&mut h);
    let path = probe
        .uri
        .path_and_query()
        .map_or_else(|| Uri::from_static("/"), |pq| Uri::from(pq.clone()));
    let mut req = http::Request::new(OutBody::Full(None));
    *req.method_mut() = probe.method.clone();
    *req.uri_mut() = target.request_uri(path);
    *req.headers_mut() = h;
    let ctx = AttemptCtx {
        route,
        number: 1,
        start: Instant::now(),
        connect_timeout: probe.connect_timeout,
        timeout: probe.timeout,
        ends_by: None,
    };
    let spare = crate::auth::spare(&req);
    match crate::auth::run(inner.clone(), ctx, req, spare).await {
        attempt::AttemptEnd::Response(exchange) => {
            Ok((exchange.head.status, exchange.head.headers.clone()))
        }
        attempt::AttemptEnd::Failed(e) => Err(baton_core::scrub_urls(&e.to_string())),
    }
}
