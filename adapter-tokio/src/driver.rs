//! The loop that drives one call: it turns the engine's actions into reqwest sends and tokio
//! timers, and what happened into the engine's inputs. It decides nothing: which endpoint,
//! whether to retry, how long to wait, all come from [`baton_core::Call`].
//!
//! Every in-flight attempt is a future owned by the call's future (no spawned task), so
//! dropping the call's future cancels them all; a guard then cancels the [`Call`], which
//! reports the attempts as cancelled and frees any half-open probe slot at once.

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant, SystemTime};

use baton_core::{
    apply_attempt_headers, attempt_uri, Action, Attempt, AttemptOutcome, BodyKind, Call,
    CallOptions, Engine, ErrorKind, Event, EventSink, Outcome, Redirects, Report, RequestInfo,
    ResponseInfo, TimeoutPhase,
};
use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode, Uri, Version};
use smallvec::SmallVec;

use crate::classify::{classify, classify_dyn, FailureCause};
use crate::error::{AttemptError, AttemptTimeout, BoxError, Error, InvalidRequest};
use crate::response::Response;

/// How an attempt's send failed, before classification.
pub(crate) enum SendError {
    /// reqwest's own error.
    Reqwest(reqwest::Error),
    /// Any other error (from an inner middleware, or a response head over the limits).
    Other(BoxError),
}

/// Something that sends one attempt's request: a reqwest client, or the rest of a
/// middleware stack.
pub(crate) trait Transport {
    /// Sends `request` for endpoint `endpoint`.
    fn send(
        &self,
        endpoint: usize,
        request: reqwest::Request,
    ) -> impl Future<Output = Result<reqwest::Response, SendError>> + Send;
    /// The connect timeout the transport enforces for `endpoint`, when known: an attempt
    /// timer that fires later than it fired after the connect phase.
    fn connect_timeout(&self, endpoint: usize) -> Option<Duration>;
}

/// What one client shares with every call's driver.
pub(crate) struct Shared {
    pub(crate) engine: Arc<Engine>,
    /// Pre-parsed endpoint URLs (complete mode only: the request's path is ignored).
    pub(crate) urls: Option<Vec<Option<reqwest::Url>>>,
    /// Sink the client installs per call (when the policy does not carry it).
    pub(crate) call_sink: Option<EventSink>,
    /// The client's event sink, to combine with a call's own sink.
    pub(crate) client_sink: Option<EventSink>,
    /// Default body-buffering limit.
    pub(crate) buffer_limit: Option<usize>,
}

/// The request body, as the driver keeps it.
pub(crate) enum Body {
    /// No body.
    None,
    /// A buffered body: every attempt gets a cheap copy.
    Bytes(Bytes),
    /// A stream: sent once (taken by the first attempt).
    Stream(Option<reqwest::Body>),
}

impl Body {
    /// Classifies a reqwest body: buffered bodies are replayable, streams are not.
    pub(crate) fn from_reqwest(body: Option<reqwest::Body>) -> Body {
        match body {
            None => Body::None,
            Some(b) => match b.as_bytes() {
                Some(bytes) => Body::Bytes(Bytes::copy_from_slice(bytes)),
                None => Body::Stream(Some(b)),
            },
        }
    }

    fn kind(&self) -> BodyKind {
        match self {
            Body::None => BodyKind::Empty,
            Body::Bytes(b) if b.is_empty() => BodyKind::Empty,
            Body::Bytes(_) => BodyKind::Replayable,
            Body::Stream(_) => BodyKind::OneShot,
        }
    }
}

/// One call's request, as the caller gave it.
pub(crate) struct Prepared {
    pub(crate) method: Method,
    /// The request URL (a path, or an absolute URL).
    pub(crate) uri: Uri,
    pub(crate) headers: HeaderMap,
    pub(crate) version: Version,
    pub(crate) body: Body,
    /// Opt-in buffering of a streaming body up to this many bytes (SPEC 2.4).
    pub(crate) buffer_limit: Option<usize>,
    /// Why the request cannot be built (the call ends as rejected locally).
    pub(crate) invalid: Option<String>,
}

impl Prepared {
    /// A prepared request from a reqwest request (its timeout, if any, is returned for the
    /// caller to use as the attempt timeout).
    pub(crate) fn from_reqwest(mut request: reqwest::Request) -> (Prepared, Option<Duration>) {
        let timeout = request.timeout().copied();
        let body = Body::from_reqwest(request.body_mut().take());
        let (uri, invalid) = match request.url().as_str().parse::<Uri>() {
            Ok(u) => (u, None),
            Err(e) => (
                Uri::from_static("/"),
                Some(format!(
                    "url {}: {e}",
                    baton_core::redact_url(request.url().as_str())
                )),
            ),
        };
        let version = request.version();
        let method = request.method().clone();
        let mut headers = std::mem::take(request.headers_mut());
        // reqwest's builder writes `content-length` itself for some bodies (multipart):
        // one that states the buffered body's exact length is reqwest's framing, not the
        // caller's, and is left to the client; any other value is the caller's and the
        // call is rejected (SPEC 3: framing headers are the client's).
        if let (Body::Bytes(b), Some(v)) = (&body, headers.get(http::header::CONTENT_LENGTH)) {
            if v.to_str().ok().and_then(|v| v.parse::<usize>().ok()) == Some(b.len()) {
                headers.remove(http::header::CONTENT_LENGTH);
            }
        }
        (
            Prepared {
                method,
                uri,
                headers,
                version,
                body,
                buffer_limit: None,
                invalid,
            },
            timeout,
        )
    }
}

/// A finished call that returned a response.
pub(crate) struct Finished {
    pub(crate) response: reqwest::Response,
    /// When body reads must end (the body timeout, the call's deadline).
    pub(crate) deadline: Option<Instant>,
    pub(crate) report: Report,
    pub(crate) endpoint: Arc<str>,
}

type Flight<F> = Pin<Box<F>>;

struct InFlight<F> {
    number: u32,
    endpoint: usize,
    timeout: Duration,
    /// The phase to report when baton's attempt timer fires.
    phase: TimeoutPhase,
    /// Whether hyper began writing the request (tracked when the timer may fire during
    /// connect): still false when the timer fires means nothing was sent.
    written: Option<Arc<std::sync::atomic::AtomicBool>>,
    /// When the attempt's timer ends (every redirect hop shares it).
    at: tokio::time::Instant,
    /// The attempt's redirects, once it met one.
    redirects: Option<Box<Redirects>>,
    fut: Flight<F>,
}

/// Cancels the call when the driver's future is dropped before the call ended: the
/// attempts are reported cancelled and probe slots are freed at once (SPEC 2.5).
struct Guard(Call);

impl Drop for Guard {
    fn drop(&mut self) {
        if !self.0.is_done() {
            self.0.cancel(Instant::now());
        }
    }
}

/// Why a request could not be built for an attempt.
enum BuildFail {
    Replay,
    Rejected(BoxError),
}

pub(crate) fn combine(a: EventSink, b: EventSink) -> EventSink {
    Arc::new(move |e: &Event<'_>| {
        a(e);
        b(e);
    })
}

/// Drives one call to its end.
pub(crate) async fn drive<T: Transport>(
    shared: &Shared,
    transport: &T,
    mut req: Prepared,
    mut options: CallOptions,
) -> Result<Finished, Error> {
    // Events: the call's own sink, plus the client's.
    options.events = match (options.events.take(), &shared.client_sink) {
        (Some(call), Some(client)) => Some(combine(client.clone(), call)),
        (Some(call), None) => Some(call),
        (None, _) => shared.call_sink.clone(),
    };

    // Opt-in buffering of a streaming body (SPEC 2.4), before the call starts.
    let mut over_limit = None;
    if let (Some(limit), Body::Stream(stream)) =
        (req.buffer_limit.or(shared.buffer_limit), &mut req.body)
    {
        if let Some(s) = stream.take() {
            match crate::body::buffer(s, limit).await {
                crate::body::Buffered::Complete(bytes) => req.body = Body::Bytes(bytes),
                crate::body::Buffered::OverLimit(body) => {
                    *stream = Some(body);
                    over_limit = Some(limit);
                }
            }
        }
    }

    let engine = &shared.engine;
    let info = RequestInfo {
        method: &req.method,
        uri: &req.uri,
        headers: &req.headers,
    };
    let mut call = Guard(Call::new(
        engine.clone(),
        &info,
        req.body.kind(),
        options,
        Instant::now(),
    ));
    if let Some(limit) = over_limit {
        call.0.body_not_buffered(limit, Instant::now());
    }

    let mut flights: SmallVec<[InFlight<_>; 2]> = SmallVec::new();
    let mut kept: SmallVec<[(u32, reqwest::Response); 1]> = SmallVec::new();
    let mut errors: SmallVec<[AttemptError; 1]> = SmallVec::new();
    let mut sleep: Option<Pin<Box<tokio::time::Sleep>>> = None;

    // The clock is read once after every await: between two awaits only microseconds of
    // engine and request-building work pass, and `Instant::now` is not free on every VM.
    let mut now = Instant::now();
    loop {
        match call.0.poll_action(now) {
            Action::Send(a) => match build(shared, &mut req, &call.0, &a) {
                Ok(mut request) => {
                    let phase = match transport.connect_timeout(a.endpoint) {
                        Some(ct) if a.timeout > ct => TimeoutPhase::Response,
                        _ => TimeoutPhase::Unknown,
                    };
                    // The attempt timer may fire before the connection is ready: learn
                    // whether the request was handed to a connection (SPEC 2.6). Only with
                    // baton's own reqwest clients: a middleware stack may read or rebuild
                    // the body (signing), so its timer expiries stay ambiguous.
                    let tracked = matches!(
                        transport.connect_timeout(a.endpoint),
                        Some(ct) if a.timeout <= ct
                    );
                    let written = tracked.then(|| {
                        let (body, written) = crate::body::Tracked::wrap(request.body_mut().take());
                        *request.body_mut() = Some(body);
                        written
                    });
                    let at = tokio::time::Instant::from_std(now + a.timeout);
                    flights.push(InFlight {
                        number: a.number,
                        endpoint: a.endpoint,
                        timeout: a.timeout,
                        phase,
                        written,
                        at,
                        redirects: None,
                        fut: Box::pin(send_by(transport, a.endpoint, request, at)),
                    });
                }
                Err(BuildFail::Replay) => {
                    call.0.replay_failed(a.number, now);
                }
                Err(BuildFail::Rejected(e)) => {
                    errors.clear();
                    errors.push(AttemptError::new(
                        a.number,
                        endpoint_id(engine, a.endpoint),
                        FailureCause::Rejected,
                        e,
                    ));
                    call.0.handle_outcome(
                        a.number,
                        AttemptOutcome::Failure(baton_core::FailureClass::RejectedLocally),
                        now,
                    );
                }
            },
            Action::Discard(n) => {
                flights.retain(|f| f.number != n);
                kept.retain(|k| k.0 != n);
            }
            Action::Wait(until) => {
                if flights.is_empty() && until.is_none() {
                    // Nothing can wake us: never expected from the engine; end the call
                    // rather than hang.
                    call.0.cancel(now);
                    continue;
                }
                match until {
                    Some(t) => {
                        let t = tokio::time::Instant::from_std(t);
                        match &mut sleep {
                            Some(s) => s.as_mut().reset(t),
                            None => sleep = Some(Box::pin(tokio::time::sleep_until(t))),
                        }
                    }
                    None => sleep = None,
                }
                let done = poll_fn(|cx| {
                    for (i, f) in flights.iter_mut().enumerate() {
                        if let Poll::Ready(out) = f.fut.as_mut().poll(cx) {
                            return Poll::Ready(Some((i, out)));
                        }
                    }
                    if let Some(s) = &mut sleep {
                        if s.as_mut().poll(cx).is_ready() {
                            return Poll::Ready(None);
                        }
                    }
                    Poll::Pending
                })
                .await;
                now = Instant::now();
                let Some((i, out)) = done else { continue };
                let mut f = flights.swap_remove(i);
                // One table of response limits on every adapter (`baton_core::limits`): an
                // over-limit head is a protocol failure after the request was sent.
                let out = match out {
                    Ok(Ok(r)) => match baton_core::check_response_head(r.headers()) {
                        Ok(()) => Ok(Ok(r)),
                        Err(e) => Ok(Err(SendError::Other(Box::new(e)))),
                    },
                    other => other,
                };
                // A redirect the engine's rules follow: the attempt's next request, on the
                // same timer (SPEC 3). reqwest follows none itself.
                let out = match out {
                    Ok(Ok(r)) if r.status().is_redirection() => {
                        match next_hop(shared, &req, &call.0, &mut f, &r) {
                            Some(request) => {
                                drop(r);
                                f.fut = Box::pin(send_by(transport, f.endpoint, request, f.at));
                                flights.push(f);
                                continue;
                            }
                            None => Ok(Ok(r)),
                        }
                    }
                    other => other,
                };
                if let Some(r) = f.redirects.take() {
                    call.0.redirected(f.number, r.into_followed(), now);
                }
                let id = || endpoint_id(engine, f.endpoint);
                match out {
                    Ok(Ok(response)) => {
                        let status = response.status();
                        let mut info = ResponseInfo::new(status, response.headers());
                        // The wall time only matters for an HTTP-date `Retry-After`, which
                        // the engine reads on 429 and 503 only.
                        if status == StatusCode::TOO_MANY_REQUESTS
                            || status == StatusCode::SERVICE_UNAVAILABLE
                        {
                            info = info.wall(SystemTime::now());
                        }
                        if call
                            .0
                            .handle_outcome(f.number, AttemptOutcome::Response(info), now)
                        {
                            kept.push((f.number, response));
                        }
                    }
                    Ok(Err(e)) => {
                        let (classified, source): (_, BoxError) = match e {
                            // The text of a reqwest error quotes the URL (keys, ids): kept
                            // without it (SPEC 4); classified first.
                            SendError::Reqwest(e) => (classify(&e), Box::new(e.without_url())),
                            SendError::Other(e) => {
                                let classified = classify_dyn(&*e);
                                (classified, crate::error::scrubbed(e))
                            }
                        };
                        errors.clear();
                        errors.push(AttemptError::new(f.number, id(), classified.cause, source));
                        call.0.handle_outcome(f.number, classified.outcome(), now);
                    }
                    Err(_elapsed) => {
                        let unsent = match &f.written {
                            Some(w) => unsent_after_cancel(w).await,
                            None => false,
                        };
                        now = Instant::now();
                        let phase = if unsent {
                            TimeoutPhase::Connect
                        } else {
                            f.phase
                        };
                        errors.clear();
                        errors.push(AttemptError::new(
                            f.number,
                            id(),
                            if unsent {
                                FailureCause::ConnectTimeout
                            } else {
                                FailureCause::Timeout
                            },
                            Box::new(AttemptTimeout { after: f.timeout }),
                        ));
                        call.0
                            .handle_outcome(f.number, AttemptOutcome::Timeout(phase), now);
                    }
                }
            }
            Action::Done(mut report) => {
                flights.clear();
                let kept_n = report.outcome.kept_attempt();
                let response = kept_n.and_then(|n| {
                    let i = kept.iter().position(|k| k.0 == n)?;
                    Some(kept.swap_remove(i).1)
                });
                kept.clear();
                let endpoint = kept_n
                    .and_then(|n| report.attempts.iter().find(|a| a.number == n))
                    .map(|a| a.endpoint_id.clone());
                let last_number = report.attempts.last().map(|a| a.number);
                let last = errors.pop().filter(|e| Some(e.attempt()) == last_number);
                if matches!(report.outcome, Outcome::Response { .. }) {
                    if let (Some(response), Some(endpoint)) = (response, endpoint.clone()) {
                        return Ok(Finished {
                            response,
                            deadline: call.0.body_read_by(Instant::now()),
                            report,
                            endpoint,
                        });
                    }
                    // Unreachable: the engine only answers with a response it was given.
                    report.outcome = Outcome::Error {
                        kind: ErrorKind::Failover,
                        retained: None,
                    };
                    return Err(call_error(report, last, None));
                }
                let retained = match (response, endpoint) {
                    (Some(r), Some(ep)) => Some(Box::new(Response::new(
                        r,
                        report.clone(),
                        ep,
                        call.0.body_read_by(Instant::now()),
                    ))),
                    _ => None,
                };
                return Err(call_error(report, last, retained));
            }
        }
    }
}

/// Sends one request of an attempt under the attempt's timer.
fn send_by<T: Transport>(
    transport: &T,
    endpoint: usize,
    request: reqwest::Request,
    at: tokio::time::Instant,
) -> tokio::time::Timeout<impl Future<Output = Result<reqwest::Response, SendError>> + Send + '_> {
    tokio::time::timeout_at(at, transport.send(endpoint, request))
}

/// The next request of attempt `f` when `response` is a redirect the engine's rules
/// follow ([`Redirects`]); `None`: the response is the attempt's answer. The hop's headers
/// are the attempt's built again (the healthy path copies them once), then prepared for
/// the hop; a hop that needs the body gets a copy of a buffered one.
fn next_hop<F>(
    shared: &Shared,
    req: &Prepared,
    call: &Call,
    f: &mut InFlight<F>,
    response: &reqwest::Response,
) -> Option<reqwest::Request> {
    let policy = shared.engine.policy();
    if policy.settings().max_redirects == 0 {
        return None;
    }
    let (endpoint, number) = (f.endpoint, f.number);
    let state = f.redirects.get_or_insert_with(|| {
        let uri = response.url().as_str().parse().unwrap_or_default();
        Box::new(Redirects::new(
            policy,
            endpoint,
            number,
            req.body.kind(),
            &uri,
            &req.method,
        ))
    });
    let hop = state.next(response.status(), response.headers())?;
    let mut headers = req.headers.clone();
    let built = apply_attempt_headers(
        policy,
        endpoint,
        &req.uri,
        call.request_id().as_str(),
        call.idempotency_key(),
        number,
        &mut headers,
    );
    let url = reqwest::Url::parse(&hop.uri.to_string());
    let body = match (&req.body, hop.body) {
        (_, false) => Some(None),
        (Body::Bytes(b), true) => Some(Some(reqwest::Body::from(b.clone()))),
        _ => None,
    };
    let (Ok(()), Ok(url), Some(body)) = (built, url, body) else {
        state.unfollow();
        return None;
    };
    state.prepare(policy, &hop, &mut headers);
    let mut next = reqwest::Request::new(hop.method, url);
    *next.headers_mut() = headers;
    *next.body_mut() = body;
    *next.version_mut() = req.version;
    Some(next)
}

/// How long the driver lets a connection task finish a write it may have begun when the
/// attempt timer fired (see [`unsent_after_cancel`]).
const CANCEL_GRACE: Duration = Duration::from_millis(10);

/// Whether a request whose attempt timer fired was provably never written. The send
/// future is already dropped, which cancels the request for hyper: a connection task
/// that had not yet taken it never will. One that took it an instant before checks the
/// cancellation and then looks at the body (marking it written) in the same poll, so
/// after a short grace the flag is final. Left: a connection task preempted for longer
/// than the grace between those two steps (a few instructions apart).
async fn unsent_after_cancel(written: &std::sync::atomic::AtomicBool) -> bool {
    use std::sync::atomic::Ordering;
    if written.load(Ordering::Acquire) {
        return false;
    }
    tokio::time::sleep(CANCEL_GRACE).await;
    !written.load(Ordering::Acquire)
}

fn call_error(
    report: Report,
    last: Option<AttemptError>,
    retained: Option<Box<Response>>,
) -> Error {
    let error = report
        .into_error()
        .expect("an error outcome always converts into an error");
    Error::Call {
        error,
        last,
        retained,
    }
}

fn endpoint_id(engine: &Engine, index: usize) -> Arc<str> {
    engine
        .policy()
        .endpoints()
        .get(index)
        .map(|e| Arc::from(e.id()))
        .unwrap_or_else(|| Arc::from("?"))
}

/// Builds the request of one attempt (SPEC 3): the endpoint's URL, the caller's headers
/// plus the attempt's, and the body (a copy, or the one-shot stream for attempt 1).
fn build(
    shared: &Shared,
    req: &mut Prepared,
    call: &Call,
    a: &Attempt,
) -> Result<reqwest::Request, BuildFail> {
    if let Some(why) = &req.invalid {
        return Err(BuildFail::Rejected(Box::new(InvalidRequest(why.clone()))));
    }
    let policy = shared.engine.policy();
    let url = match shared
        .urls
        .as_ref()
        .and_then(|u| u.get(a.endpoint).cloned().flatten())
    {
        Some(url) => {
            // Complete mode ignores the request's path, but still rejects a bad scheme.
            if let Some(s) = req.uri.scheme_str() {
                if s != "http" && s != "https" {
                    return Err(BuildFail::Rejected(Box::new(
                        baton_core::DestinationError::Scheme(s.to_string()),
                    )));
                }
            }
            url
        }
        None => {
            let uri = attempt_uri(policy, a.endpoint, &req.uri)
                .map_err(|e| BuildFail::Rejected(Box::new(e)))?;
            reqwest::Url::parse(&uri.to_string()).map_err(|e| BuildFail::Rejected(Box::new(e)))?
        }
    };
    let mut headers = req.headers.clone();
    apply_attempt_headers(
        policy,
        a.endpoint,
        &req.uri,
        call.request_id().as_str(),
        call.idempotency_key(),
        a.number,
        &mut headers,
    )
    .map_err(|e| BuildFail::Rejected(Box::new(e)))?;
    let body = match &mut req.body {
        Body::None => None,
        Body::Bytes(b) => Some(reqwest::Body::from(b.clone())),
        Body::Stream(s) => match s.take() {
            Some(s) => Some(s),
            None => return Err(BuildFail::Replay),
        },
    };
    let mut request = reqwest::Request::new(req.method.clone(), url);
    *request.headers_mut() = headers;
    *request.body_mut() = body;
    *request.version_mut() = req.version;
    Ok(request)
}

#[cfg(test)]
mod overhead {
    //! Per-call overhead of the driver and the engine with a transport that answers at
    //! once (no I/O). Run with `cargo test --release -p baton-tokio overhead -- --ignored
    //! --nocapture`.
    use super::*;

    struct Instant200;
    impl Transport for Instant200 {
        fn send(
            &self,
            _: usize,
            _: reqwest::Request,
        ) -> impl Future<Output = Result<reqwest::Response, SendError>> + Send {
            std::future::ready(Ok(reqwest::Response::from(http::Response::new(
                "ok".to_string(),
            ))))
        }
        fn connect_timeout(&self, _: usize) -> Option<Duration> {
            Some(Duration::from_secs(1))
        }
    }

    #[test]
    #[ignore = "a measurement, not a test"]
    fn per_call_overhead() {
        let policy = baton_core::Policy::builder()
            .endpoint(baton_core::Endpoint::new("a", "http://127.0.0.1:1/"))
            .endpoint(baton_core::Endpoint::new("b", "http://127.0.0.1:2/"))
            .build()
            .unwrap();
        let shared = Shared {
            urls: Some(
                policy
                    .endpoints()
                    .iter()
                    .map(|e| reqwest::Url::parse(e.url()).ok())
                    .collect(),
            ),
            engine: Arc::new(Engine::new(policy)),
            call_sink: None,
            client_sink: None,
            buffer_limit: None,
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let fut = drive(
                &shared,
                &Instant200,
                Prepared {
                    method: Method::GET,
                    uri: Uri::from_static("/"),
                    headers: HeaderMap::new(),
                    version: Version::default(),
                    body: Body::None,
                    buffer_limit: None,
                    invalid: None,
                },
                CallOptions::default(),
            );
            println!(
                "drive future: {} bytes, Call: {} bytes, Report: {} bytes",
                std::mem::size_of_val(&fut),
                std::mem::size_of::<Call>(),
                std::mem::size_of::<Report>()
            );
            drop(fut);
            for _ in 0..3 {
                let n = 200_000;
                let t0 = Instant::now();
                for _ in 0..n {
                    let prepared = Prepared {
                        method: Method::GET,
                        uri: Uri::from_static("/"),
                        headers: HeaderMap::new(),
                        version: Version::default(),
                        body: Body::None,
                        buffer_limit: None,
                        invalid: None,
                    };
                    let f = drive(&shared, &Instant200, prepared, CallOptions::default())
                        .await
                        .ok()
                        .unwrap();
                    drop(f);
                }
                println!("{:?} per call", t0.elapsed() / n);
            }
        });
    }
}
