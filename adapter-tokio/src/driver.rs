//! The loop that drives one call: it turns the engine's actions into reqwest sends and tokio
//! timers, and what happened into the engine's inputs. It decides nothing: which endpoint,
//! whether to retry, how long to wait, all come from [`baton_core::Call`].
//!
//! Every in-flight attempt is a future owned by the call's future (no spawned task), so
//! dropping the call's future cancels them all and drops the [`Call`], which reports the
//! attempts as cancelled and frees any half-open probe slot at once.

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant, SystemTime};

use baton_core::{
    Action, Answer, Attempt, AttemptOutcome, BodyKind, Call, CallOptions, DestinationError, Done,
    EndpointId, Engine, IdentityHeaders, Input, Outcome, Redirects, Report, RequestInfo,
    TimeoutPhase,
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
pub(crate) trait Transport: Sync {
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
    /// Default body-buffering limit.
    pub(crate) buffer_limit: Option<usize>,
    /// The token provider of endpoints with a credential slot (SPEC 9).
    pub(crate) tokens: Option<TokenProvider>,
}

/// The client's token provider: called with the endpoint id by the one call that
/// refreshes that endpoint's slot.
pub(crate) type TokenProvider = baton_core::credential::AsyncProvider;

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
    pub(crate) invalid: Option<InvalidRequest>,
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
                Some(
                    format!(
                        "url {}: {e}",
                        baton_core::redact_url(request.url().as_str())
                    )
                    .into(),
                ),
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
    pub(crate) endpoint: EndpointId,
}

impl Finished {
    /// The response the caller gets.
    pub(crate) fn response(self) -> Response {
        Response::new(self.response, self.report, self.endpoint, self.deadline)
    }
}

/// A reqwest response as the engine reads it.
pub(crate) struct Reply(reqwest::Response);

impl Answer for Reply {
    fn status(&self) -> StatusCode {
        self.0.status()
    }
    fn headers(&self) -> &HeaderMap {
        self.0.headers()
    }
    fn version(&self) -> Option<http::Version> {
        Some(self.0.version())
    }
    fn body(&self) -> Option<&[u8]> {
        self.0
            .extensions()
            .get::<crate::peek::Peeked>()
            .map(|p| &p.0[..])
    }
}

/// One attempt's send under its timer.
type Flight<'a> = Pin<
    Box<
        dyn Future<
                Output = Result<Result<reqwest::Response, SendError>, tokio::time::error::Elapsed>,
            > + Send
            + 'a,
    >,
>;

struct InFlight<'a> {
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
    /// The send; `None`: it is the driver's unboxed slot.
    fut: Option<Flight<'a>>,
}

/// Why a request could not be built for an attempt.
enum BuildFail {
    Replay,
    Rejected(BoxError),
}

/// What a call's driver runs on, held by the call's future for the whole call: the
/// client's shared state and its transport (a client owns both; the middleware lends
/// them), and what a finished call becomes for the caller.
///
/// The driver's future is the caller's future itself, with no `async fn` around it: each
/// such layer would hold a copy of its whole state (kilobytes) and move it into place when
/// first polled, writing that much cold memory on every call.
pub(crate) trait Owner {
    /// The transport of the attempts.
    type Transport: Transport;
    /// What the caller gets for a call that returned a response.
    type Output;
    /// The state every call of the client shares.
    fn shared(&self) -> &Shared;
    /// The transport of the attempts.
    fn transport(&self) -> &Self::Transport;
    /// The caller's value of a finished call.
    fn output(finished: Finished) -> Self::Output;
}

impl<T: Transport> Owner for (&Shared, &T) {
    type Transport = T;
    type Output = Finished;
    fn shared(&self) -> &Shared {
        self.0
    }
    fn transport(&self) -> &T {
        self.1
    }
    fn output(finished: Finished) -> Finished {
        finished
    }
}

/// Drives one call to its end. An `async` block rather than an `async fn`: the block uses
/// its captured arguments in place, where an `async fn` keeps a second copy of them (the
/// request and the options, about 470 bytes) in its state.
// Not `async fn`, on purpose: see above (measured with `-Zprint-type-sizes`: 3,192 bytes
// as an `async fn`, 2,424 as a block).
#[allow(clippy::manual_async_fn)]
pub(crate) fn drive<O: Owner>(
    owner: O,
    mut req: Prepared,
    options: CallOptions,
) -> impl Future<Output = Result<O::Output, Error>> {
    async move {
        let (shared, transport) = (owner.shared(), owner.transport());
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

        let engine = &*shared.engine;
        let info = RequestInfo {
            method: &req.method,
            uri: &req.uri,
            headers: &req.headers,
        };
        let kind = req.body.kind();
        // Dropping the driver's future drops the call, which cancels it (SPEC 2.5).
        let mut call: Call<'_, Reply> = Call::new(engine, &info, kind, options, Instant::now());
        if let Some(limit) = over_limit {
            call.handle(Input::BodyNotBuffered { limit }, Instant::now());
        }
        // Declared after the call: in-flight sends are dropped before it.
        let slot = std::pin::pin!(None);
        let mut driver = Driver {
            shared,
            transport,
            identity: call.identity_headers(),
            flights: SmallVec::new(),
            errors: SmallVec::new(),
            sleep: None,
            slot,
            timed: timed::<O::Transport>,
        };
        loop {
            match call.poll() {
                Action::Send(a) => driver.send(&mut req, &mut call, &a),
                Action::Discard(n) => driver.discard(n),
                Action::WaitUntil(t) => driver.wait(&req, &mut call, Some(t)).await,
                Action::WaitForAttempt => driver.wait(&req, &mut call, None).await,
                Action::Done => break,
                // An action this adapter does not know: end the call with what it has.
                _ => call.handle(Input::Cancel, Instant::now()),
            }
        }
        driver.clear();
        let deadline = call.body_read_by(Instant::now());
        driver
            .finish(engine, call.take_done(), deadline)
            .map(O::output)
    }
}

/// The state of one call's driver besides the engine's.
struct Driver<'a, 's, T, F> {
    shared: &'a Shared,
    transport: &'a T,
    /// The call's request id and key as header values, made once for all its attempts.
    identity: Result<IdentityHeaders, DestinationError>,
    flights: SmallVec<[InFlight<'a>; 2]>,
    /// The last attempt's error, for the call error's `source()`.
    errors: SmallVec<[AttemptError; 1]>,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    /// The send of one attempt, unboxed, in the call's own future: a healthy call (one
    /// attempt in flight, no credential) allocates no future of its own. Another attempt
    /// in flight at the same time (a hedge), or one with a credential, is boxed.
    slot: Pin<&'s mut Option<F>>,
    /// Makes the slot's send ([`timed`]; a pointer, as its type has no name).
    timed: fn(&'a T, usize, reqwest::Request, tokio::time::Instant) -> F,
}

/// A send under the attempt's timer, as the driver's slot holds it.
fn timed<T: Transport>(
    transport: &T,
    endpoint: usize,
    request: reqwest::Request,
    at: tokio::time::Instant,
) -> tokio::time::Timeout<impl Future<Output = Result<reqwest::Response, SendError>> + Send + '_> {
    tokio::time::timeout_at(at, transport.send(endpoint, request))
}

impl<'a, T: Transport, F: Future<Output = Timed>> Driver<'a, '_, T, F> {
    /// Starts the send of a request of an attempt at `endpoint`: in the slot when it is
    /// free and the endpoint has no credential (`None`), else boxed.
    fn start(
        &mut self,
        endpoint: usize,
        request: reqwest::Request,
        spare: Option<reqwest::Request>,
        at: tokio::time::Instant,
    ) -> Option<Flight<'a>> {
        if self.slot.is_none() && self.shared.engine.credential(endpoint).is_none() {
            self.slot
                .set(Some((self.timed)(self.transport, endpoint, request, at)));
            return None;
        }
        Some(send_by(
            self.shared,
            self.transport,
            endpoint,
            request,
            spare,
            at,
        ))
    }

    /// Takes attempt `f` out of flight: its send is dropped at once, whether it is the
    /// slot's or boxed in `f` (which cancels it). A send that ended by its timer must be
    /// gone before [`unsent_after_cancel`] looks whether the request was written: while
    /// it lives, the connection task may still take the request.
    fn release(&mut self, f: &mut InFlight<'a>) {
        if f.fut.take().is_none() {
            self.slot.set(None);
        }
    }

    /// Cancels in-flight attempt `n` (its send is dropped).
    fn discard(&mut self, n: u32) {
        if let Some(p) = self.flights.iter().position(|f| f.number == n) {
            let mut f = self.flights.remove(p);
            self.release(&mut f);
        }
    }

    /// Drops every in-flight send.
    fn clear(&mut self) {
        self.flights.clear();
        self.slot.set(None);
    }

    /// Builds and sends attempt `a`, or tells the call why it could not be sent.
    fn send(&mut self, req: &mut Prepared, call: &mut Call<'_, Reply>, a: &Attempt) {
        let now = Instant::now();
        let built = match &self.identity {
            Ok(identity) => build(self.shared, req, call, identity, a),
            Err(e) => Err(BuildFail::Rejected(Box::new(e.clone()))),
        };
        let mut request = match built {
            Ok(request) => request,
            Err(BuildFail::Replay) => {
                call.handle(Input::ReplayFailed { attempt: a.number }, now);
                return;
            }
            Err(BuildFail::Rejected(e)) => {
                let id = endpoint_id(&self.shared.engine, a.endpoint);
                self.errors.clear();
                self.errors
                    .push(AttemptError::new(a.number, id, FailureCause::Rejected, e));
                let outcome = AttemptOutcome::Failure(baton_core::FailureClass::RejectedLocally);
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
        let connect_timeout = self.transport.connect_timeout(a.endpoint);
        let phase = match connect_timeout {
            Some(ct) if a.timeout > ct => TimeoutPhase::Response,
            _ => TimeoutPhase::Unknown,
        };
        // The attempt timer may fire before the connection is ready: learn whether the
        // request was handed to a connection (SPEC 2.6). Only with baton's own reqwest
        // clients: a middleware stack may read or rebuild the body (signing), so its timer
        // expiries stay ambiguous.
        // The copy for the one re-send after a credential refusal, before the body is
        // wrapped (a wrapped body cannot be copied).
        let spare = self
            .shared
            .engine
            .credential(a.endpoint)
            .and_then(|_| request.try_clone());
        let tracked = matches!(connect_timeout, Some(ct) if a.timeout <= ct);
        let written = tracked.then(|| {
            let (body, written) = crate::body::Tracked::wrap(request.body_mut().take());
            *request.body_mut() = Some(body);
            written
        });
        let at = tokio::time::Instant::from_std(now + a.timeout);
        let fut = self.start(a.endpoint, request, spare, at);
        self.flights.push(InFlight {
            number: a.number,
            endpoint: a.endpoint,
            timeout: a.timeout,
            phase,
            written,
            at,
            redirects: None,
            fut,
        });
    }

    /// Waits until `until` (or, without it, for an attempt) and hands the call what
    /// happened: an attempt's end, or the timer.
    async fn wait(&mut self, req: &Prepared, call: &mut Call<'_, Reply>, until: Option<Instant>) {
        match until {
            Some(t) => {
                let t = tokio::time::Instant::from_std(t);
                match &mut self.sleep {
                    Some(s) => s.as_mut().reset(t),
                    None => self.sleep = Some(Box::pin(tokio::time::sleep_until(t))),
                }
            }
            None => self.sleep = None,
        }
        let flights = &mut self.flights;
        let sleep = &mut self.sleep;
        let slot = &mut self.slot;
        let done = poll_fn(|cx| {
            for (i, f) in flights.iter_mut().enumerate() {
                let polled = match (&mut f.fut, slot.as_mut().as_pin_mut()) {
                    (Some(boxed), _) => boxed.as_mut().poll(cx),
                    (None, Some(unboxed)) => unboxed.poll(cx),
                    (None, None) => Poll::Pending,
                };
                if let Poll::Ready(out) = polled {
                    return Poll::Ready(Some((i, out)));
                }
            }
            if let Some(s) = sleep {
                if s.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(None);
                }
            }
            Poll::Pending
        })
        .await;
        let now = Instant::now();
        match done {
            None => call.handle(Input::Timer, now),
            Some((i, out)) => {
                let mut f = self.flights.swap_remove(i);
                self.release(&mut f);
                // A timer that fired while the connection was being made: whether the
                // request was ever handed to it is known after a short grace (the one
                // wait of an ended attempt, kept here so that `landed` has no future).
                let unsent = match (&out, f.written.clone()) {
                    (Err(_), Some(w)) => {
                        hand_redirects(call, &mut f, Instant::now());
                        unsent_after_cancel(&w).await
                    }
                    _ => false,
                };
                self.landed(req, call, f, out, unsent);
            }
        }
    }

    /// An attempt's send ended: follow a redirect, or hand the call the response or the
    /// classified failure. `unsent`: its timer fired and the request never reached a
    /// connection.
    fn landed(
        &mut self,
        req: &Prepared,
        call: &mut Call<'_, Reply>,
        mut f: InFlight<'a>,
        out: Result<Result<reqwest::Response, SendError>, tokio::time::error::Elapsed>,
        unsent: bool,
    ) {
        // One table of response limits on every adapter (`baton_core::limits`): an
        // over-limit head is a protocol failure after the request was sent.
        let out = match out {
            Ok(Ok(r)) => match baton_core::check_response_head(r.headers()) {
                Ok(()) => Ok(Ok(r)),
                Err(e) => Ok(Err(SendError::Other(Box::new(e)))),
            },
            other => other,
        };
        // A redirect the engine's rules follow: the attempt's next request, on the same
        // timer (SPEC 3). reqwest follows none itself.
        if let (Ok(Ok(r)), Ok(identity)) = (&out, &self.identity) {
            if r.status().is_redirection() {
                if let Some(request) = next_hop(self.shared, req, identity, &mut f, r) {
                    f.fut = self.start(f.endpoint, request, None, f.at);
                    self.flights.push(f);
                    return;
                }
            }
        }
        hand_redirects(call, &mut f, Instant::now());
        let attempt = f.number;
        let input = match out {
            Ok(Ok(response)) => Input::response(attempt, Reply(response), SystemTime::now),
            Ok(Err(e)) => {
                let (classified, source): (_, BoxError) = match e {
                    // The text of a reqwest error quotes the URL (keys, ids): kept without
                    // it (SPEC 4); classified first.
                    SendError::Reqwest(e) => (classify(&e), Box::new(e.without_url())),
                    SendError::Other(e) => {
                        let classified = classify_dyn(&*e);
                        (classified, crate::error::scrubbed(e))
                    }
                };
                self.fail(&f, classified.cause, source);
                Input::Failed {
                    attempt,
                    outcome: classified.outcome(),
                }
            }
            Err(_elapsed) => {
                let (phase, cause) = if unsent {
                    (TimeoutPhase::Connect, FailureCause::ConnectTimeout)
                } else {
                    (f.phase, FailureCause::Timeout)
                };
                self.fail(&f, cause, Box::new(AttemptTimeout { after: f.timeout }));
                Input::Failed {
                    attempt,
                    outcome: AttemptOutcome::Timeout(phase),
                }
            }
        };
        call.handle(input, Instant::now());
    }

    /// Keeps attempt `f`'s error as the call's last cause.
    fn fail(&mut self, f: &InFlight<'a>, cause: FailureCause, source: BoxError) {
        let id = endpoint_id(&self.shared.engine, f.endpoint);
        self.errors.clear();
        self.errors
            .push(AttemptError::new(f.number, id, cause, source));
    }

    /// The call's result: the response, or the error carrying the last attempt's cause
    /// and any retained response.
    // The client's own error type, returned as is by every call (boxing it here would
    // only move the allocation).
    #[allow(clippy::result_large_err)]
    fn finish(
        mut self,
        engine: &Engine,
        done: Done<Reply>,
        deadline: Option<Instant>,
    ) -> Result<Finished, Error> {
        let last_number = done.report().attempts.last().map(|a| a.number);
        let last = self
            .errors
            .pop()
            .filter(|e| Some(e.attempt()) == last_number);
        let kept_endpoint = |report: &Report| match report.outcome {
            Outcome::Response { endpoint, .. } => endpoint_id(engine, endpoint),
            Outcome::Error { retained, .. } => retained
                .and_then(|n| report.attempts.iter().find(|a| a.number == n))
                .map(|a| a.endpoint_id.clone())
                .unwrap_or_else(|| EndpointId::from("?")),
        };
        match done.into_result() {
            Ok((response, report)) => Ok(Finished {
                response: response.0,
                deadline,
                endpoint: kept_endpoint(&report),
                report,
            }),
            Err((error, retained)) => {
                let retained = retained.map(|r| {
                    let report = (*error.report).clone();
                    let endpoint = kept_endpoint(&report);
                    Box::new(Response::new(r.0, report, endpoint, deadline))
                });
                Err(Error::Call {
                    error,
                    last,
                    retained,
                })
            }
        }
    }
}

/// Sends one request of an attempt under the attempt's timer (with the endpoint's token,
/// when it has a credential slot; `spare` is a copy of the request for the one re-send
/// after a refusal, taken before the body was wrapped for tracking).
fn send_by<'a, T: Transport>(
    shared: &'a Shared,
    transport: &'a T,
    endpoint: usize,
    request: reqwest::Request,
    spare: Option<reqwest::Request>,
    at: tokio::time::Instant,
) -> Flight<'a> {
    // Only an endpoint with a credential pays for the token's state.
    match shared.engine.credential(endpoint) {
        None => Box::pin(tokio::time::timeout_at(
            at,
            transport.send(endpoint, request),
        )),
        Some(_) => Box::pin(authorized(shared, transport, endpoint, request, spare, at)),
    }
}

type Timed = Result<Result<reqwest::Response, SendError>, tokio::time::error::Elapsed>;

/// Sends `request` with the endpoint's token (SPEC 9) when the request goes to the
/// endpoint's own origin. The provider gets the attempt's time (past it, a valid token is
/// sent, or the attempt fails undelivered: nothing was sent); a refusal (401, or 403 when
/// configured) of the current token invalidates it, and the spare copy is sent once with a
/// refreshed token; a refusal right after a fresh token is the answer.
async fn authorized<T: Transport>(
    shared: &Shared,
    transport: &T,
    endpoint: usize,
    mut request: reqwest::Request,
    spare: Option<reqwest::Request>,
    at: tokio::time::Instant,
) -> Timed {
    let policy = shared.engine.policy();
    let (Some(slot), Some(tokens), Some(ep)) = (
        shared.engine.credential(endpoint),
        &shared.tokens,
        policy.endpoints().get(endpoint),
    ) else {
        return tokio::time::timeout_at(at, transport.send(endpoint, request)).await;
    };
    let target = request.url().as_str().parse().unwrap_or_default();
    if !baton_core::credential::may_carry(ep.uri(), &target) {
        return tokio::time::timeout_at(at, transport.send(endpoint, request)).await;
    }
    let lease = || {
        let deadline = tokio::time::sleep_until(at);
        slot.lease_until(Instant::now, || tokens(ep.id()), deadline)
    };
    let first = match lease().await {
        Ok(l) => l,
        Err(e) => return Ok(Err(SendError::Other(Box::new(e)))),
    };
    set_token(&mut request, slot, &first);
    let response = match tokio::time::timeout_at(at, transport.send(endpoint, request)).await {
        Ok(Ok(r)) => r,
        other => return other,
    };
    // Called whatever the spare: a refusal invalidates the token either way.
    let resend = slot.answered(&first, response.status());
    let Some(mut again) = spare.filter(|_| resend) else {
        return Ok(Ok(response));
    };
    match lease().await {
        Ok(second) => {
            drop(response);
            set_token(&mut again, slot, &second);
            tokio::time::timeout_at(at, transport.send(endpoint, again)).await
        }
        // No new token: the refusal is the answer.
        Err(_) => Ok(Ok(response)),
    }
}

fn set_token(
    request: &mut reqwest::Request,
    slot: &baton_core::credential::Credential,
    lease: &baton_core::credential::Lease,
) {
    let settings = slot.settings();
    if let Some(v) = lease.header_value(settings) {
        request.headers_mut().insert(settings.header.clone(), v);
    }
}

/// The next request of attempt `f` when `response` is a redirect the engine's rules
/// follow ([`Redirects`]); `None`: the response is the attempt's answer. The hop's headers
/// are the attempt's built again (the healthy path copies them once), then prepared for
/// the hop; a hop that needs the body gets a copy of a buffered one.
fn next_hop(
    shared: &Shared,
    req: &Prepared,
    identity: &IdentityHeaders,
    f: &mut InFlight<'_>,
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
    let built = state.hop_headers(policy, &hop, &req.uri, identity, &req.headers);
    let url = reqwest::Url::parse(&hop.uri.to_string());
    let body = match (&req.body, hop.body) {
        (_, false) => Some(None),
        (Body::Bytes(b), true) => Some(Some(reqwest::Body::from(b.clone()))),
        _ => None,
    };
    let (Ok(headers), Ok(url), Some(body)) = (built, url, body) else {
        state.unfollow();
        return None;
    };
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

/// Hands the call the redirects attempt `f` followed, once.
fn hand_redirects(call: &mut Call<'_, Reply>, f: &mut InFlight<'_>, now: Instant) {
    if let Some(r) = f.redirects.take() {
        call.handle(r.into_input(f.number), now);
    }
}

fn endpoint_id(engine: &Engine, index: usize) -> EndpointId {
    engine
        .endpoint_id(index)
        .cloned()
        .unwrap_or_else(|| EndpointId::from("?"))
}

/// Builds the request of one attempt (SPEC 3): the endpoint's URL, the caller's headers
/// plus the attempt's, and the body (a copy, or the one-shot stream for attempt 1).
fn build(
    shared: &Shared,
    req: &mut Prepared,
    call: &Call<'_, Reply>,
    identity: &IdentityHeaders,
    a: &Attempt,
) -> Result<reqwest::Request, BuildFail> {
    if let Some(why) = &req.invalid {
        return Err(BuildFail::Rejected(Box::new(why.clone())));
    }
    let complete = shared
        .urls
        .as_ref()
        .and_then(|u| u.get(a.endpoint).cloned().flatten());
    let mut headers = req.headers.clone();
    let rejected = |e: baton_core::DestinationError| BuildFail::Rejected(Box::new(e));
    let url = match complete {
        // Complete mode: the endpoint's URL, parsed once; the request's path is ignored,
        // but a bad scheme is still rejected.
        Some(url) => {
            baton_core::check_scheme(&req.uri).map_err(rejected)?;
            baton_core::apply_attempt_headers(
                shared.engine.policy(),
                a.endpoint,
                &req.uri,
                identity,
                a.number,
                &mut headers,
            )
            .map_err(rejected)?;
            url
        }
        None => {
            let target = call
                .attempt_parts(a, identity, &req.uri, &mut headers)
                .map_err(rejected)?;
            reqwest::Url::parse(&target.to_string())
                .map_err(|e| BuildFail::Rejected(Box::new(e)))?
        }
    };
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
mod instant_transport {
    //! The driver over a transport that answers at once (no I/O): what it sends and what
    //! it returns, with no clock in the assertions (its cost is measured by the benches).
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
    fn a_healthy_call_is_one_attempt_at_the_first_endpoint() {
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
            buffer_limit: None,
            tokens: None,
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        for _ in 0..3 {
            let prepared = Prepared {
                method: Method::GET,
                uri: Uri::from_static("/"),
                headers: HeaderMap::new(),
                version: Version::default(),
                body: Body::None,
                buffer_limit: None,
                invalid: None,
            };
            let Ok(done) = rt.block_on(drive(
                (&shared, &Instant200),
                prepared,
                CallOptions::default(),
            )) else {
                panic!("the call failed");
            };
            assert_eq!(done.response.status(), http::StatusCode::OK);
            assert_eq!(&*done.endpoint, "a");
            assert_eq!(done.report.attempts.len(), 1);
            assert!(done.report.may_have_executed);
        }
    }
}
