//! The loop: drives one [`Call`] of the engine on the calling thread.
//!
//! It follows the call order of `baton_core::call` and decides nothing: it builds each
//! attempt's request from the engine's [`Attempt`] (destination rules of
//! `baton_core::destination`), sends it with ureq under the attempt's budgets, reports the
//! classified outcome ([`crate::classify`]) with the time, sleeps when told to wait, and
//! returns what the engine's report says to return. One attempt is in flight at a time, so
//! the engine never has to be asked to hedge (the client builder refuses hedging).

use std::io::{self, Read};
use std::thread;
use std::time::{Instant, SystemTime};

use baton_core::{
    apply_attempt_headers, attempt_uri, Action, Attempt, AttemptOutcome, BodyKind, Call,
    CallOptions, DestinationError, Done, FailureClass, IdentityHeaders, Input, InvalidRequest,
    Redirect, Redirects, RequestInfo, Route,
};
use ureq::http::{HeaderMap, Method, Request, Response, Uri};
use ureq::{AsSendBody, Body, SendBody};

use crate::classify::{self, classify};
use crate::error::Error;
use crate::response;
use crate::Inner;

/// Produces a fresh body for a later attempt.
pub(crate) type BodyFactory = Box<dyn FnMut() -> io::Result<Box<dyn Read>>>;

/// The request body as the driver holds it.
pub(crate) enum SendData {
    /// No body.
    Empty,
    /// Bytes in memory: every attempt sends the same slice, nothing is copied.
    Bytes(Vec<u8>),
    /// A stream that can be sent once (taken by the first attempt).
    OneShot(Option<Box<dyn Read>>),
    /// A body the caller can produce again (the first product is made up front).
    Factory(Option<Box<dyn Read>>, BodyFactory),
}

impl SendData {
    fn kind(&self) -> BodyKind {
        match self {
            // An empty body is no body, as on the other adapters (a 307 hop then carries
            // none, and none of its headers).
            SendData::Empty => BodyKind::Empty,
            SendData::Bytes(b) if b.is_empty() => BodyKind::Empty,
            SendData::Bytes(_) | SendData::Factory(..) => BodyKind::Replayable,
            SendData::OneShot(_) => BodyKind::OneShot,
        }
    }
}

/// One call, ready to drive.
pub(crate) struct Prepared {
    pub(crate) method: Method,
    pub(crate) uri: Uri,
    pub(crate) headers: HeaderMap,
    pub(crate) body: SendData,
    /// The buffering limit a streamed body was over (sent once, with an event).
    pub(crate) over_limit: Option<usize>,
    pub(crate) options: CallOptions,
    /// Why the request cannot be built (an invalid header or URL from the caller): every
    /// attempt is rejected locally and the call ends as invalid, with a report.
    pub(crate) invalid: Option<InvalidRequest>,
}

enum Sent {
    Response(Response<Body>),
    Failed(AttemptOutcome, Option<ureq::Error>),
    ReplayFailed,
}

/// Runs the call to its end.
pub(crate) fn drive(inner: &Inner, mut p: Prepared) -> Result<Response<Body>, Error> {
    let options = std::mem::take(&mut p.options);
    let info = RequestInfo {
        method: &p.method,
        uri: &p.uri,
        headers: &p.headers,
    };
    let kind = p.body.kind();
    // The time of the call's last input: an attempt's redirect hops share a timer that
    // runs from when the attempt was decided (one clock read per event, not two).
    let mut now = Instant::now();
    let mut call: Call<'_, Response<Body>> = Call::new(&inner.engine, &info, kind, options, now);
    if let Some(limit) = p.over_limit {
        call.handle(Input::BodyNotBuffered { limit }, now);
    }
    // The request id and key as header values, made once for every attempt and hop.
    let identity = call.identity_headers();
    let mut last_error: Option<ureq::Error> = None;
    loop {
        match call.poll() {
            Action::Send(attempt) => {
                let (sent, redirects) = send(inner, &call, &identity, &attempt, &mut p, now);
                now = Instant::now();
                if !redirects.is_empty() {
                    let number = attempt.number;
                    call.handle(
                        Input::Redirected {
                            attempt: number,
                            redirects,
                        },
                        now,
                    );
                }
                last_error = None;
                let input = match sent {
                    Sent::Response(resp) => Input::response(attempt.number, resp, SystemTime::now),
                    Sent::Failed(outcome, err) => {
                        last_error = err;
                        Input::Failed {
                            attempt: attempt.number,
                            outcome,
                        }
                    }
                    Sent::ReplayFailed => Input::ReplayFailed {
                        attempt: attempt.number,
                    },
                };
                call.handle(input, now);
            }
            // One attempt is in flight at a time and it has ended before the next poll:
            // there is never anything to cancel or wait for.
            Action::Discard(_) | Action::WaitForAttempt => {
                now = Instant::now();
                call.handle(Input::Cancel, now)
            }
            Action::WaitUntil(until) => {
                let before = Instant::now();
                if until > before {
                    thread::sleep(until - before);
                }
                now = Instant::now();
                call.handle(Input::Timer, now);
            }
            Action::Done => return finish(call.take_done(), last_error),
            // An action this adapter does not know: end the call with what it has.
            _ => {
                now = Instant::now();
                call.handle(Input::Cancel, now)
            }
        }
    }
}

fn finish(
    done: Done<Response<Body>>,
    last_error: Option<ureq::Error>,
) -> Result<Response<Body>, Error> {
    let kept = done.report().outcome.kept_attempt().unwrap_or(0);
    done.resolve(
        |resp, report| Ok(response::finish(resp, report, kept)),
        |error, retained| {
            let retained = retained.map(|r| response::finish(r, (*error.report).clone(), kept));
            Err(Error::new(error, last_error, retained))
        },
    )
}

/// Sends one attempt and classifies how it ended, following the redirects the engine's
/// rules allow ([`Redirects`], SPEC 3) within the attempt; ureq follows none itself.
fn send(
    inner: &Inner,
    call: &Call<'_, Response<Body>>,
    identity: &Result<IdentityHeaders, DestinationError>,
    attempt: &Attempt,
    p: &mut Prepared,
    decided: Instant,
) -> (Sent, Vec<Redirect>) {
    const REJECTED: AttemptOutcome = AttemptOutcome::Failure(FailureClass::RejectedLocally);
    // Why the call is rejected travels as the error's source, like every adapter's: the
    // destination rules' typed error, or the text of an invalid request.
    let rejected = |why: Box<dyn std::error::Error + Send + Sync>| {
        let e = ureq::Error::Other(why);
        (Sent::Failed(REJECTED, Some(e)), Vec::new())
    };
    if let Some(why) = &p.invalid {
        return rejected(Box::new(why.clone()));
    }
    let identity = match identity {
        Ok(identity) => identity,
        Err(e) => return rejected(Box::new(e.clone())),
    };
    let policy = inner.engine.policy();
    let target = match attempt_uri(policy, attempt.endpoint, &p.uri) {
        Ok(t) => t,
        Err(e) => return rejected(Box::new(e)),
    };
    let mut headers = p.headers.clone();
    let number = attempt.number;
    if let Err(e) = apply_attempt_headers(
        policy,
        attempt.endpoint,
        &p.uri,
        identity,
        number,
        &mut headers,
    ) {
        return rejected(Box::new(e));
    }
    // The attempt's request takes the body's first product unless it needs a fresh copy.
    let leg = Leg::Own {
        first_use: attempt.number == 1 || !attempt.fresh_body,
    };
    // Every hop of the attempt shares its timer, as on the other adapters, from when the
    // attempt was decided.
    let respond_by = decided + attempt.timeout;
    let sent = send_one(
        inner,
        call,
        attempt,
        &mut p.body,
        &p.method,
        target,
        headers,
        leg,
    );
    let follows = policy.settings().max_redirects > 0;
    match sent {
        Sent::Response(resp) if follows && resp.status().is_redirection() => {
            // The first request's URL again, derived as it was above (it was moved into
            // the request: cloned for every attempt, it cost 115 instructions a call for
            // the rare redirect; callgrind, `callcost blocking`).
            let Ok(target) = attempt_uri(policy, attempt.endpoint, &p.uri) else {
                return (Sent::Response(resp), Vec::new());
            };
            let first = Hop {
                target: &target,
                respond_by,
                identity,
            };
            follow(inner, call, attempt, p, first, resp)
        }
        sent => (sent, Vec::new()),
    }
}

/// Where the first request of an attempt went, for the redirects that follow it.
struct Hop<'a> {
    target: &'a Uri,
    /// When the attempt's timer ends (every hop shares it).
    respond_by: Instant,
    identity: &'a IdentityHeaders,
}

/// Follows the redirects the engine's rules allow from `resp`, the attempt's answer so
/// far, within the attempt's timer (SPEC 3); ureq follows none itself.
fn follow(
    inner: &Inner,
    call: &Call<'_, Response<Body>>,
    attempt: &Attempt,
    p: &mut Prepared,
    from: Hop<'_>,
    mut resp: Response<Body>,
) -> (Sent, Vec<Redirect>) {
    let policy = inner.engine.policy();
    let (identity, respond_by) = (from.identity, from.respond_by);
    let mut redirects =
        Redirects::for_attempt(policy, attempt, p.body.kind(), from.target, &p.method);
    loop {
        let Some(hop) = redirects.next(resp.status(), resp.headers()) else {
            return (Sent::Response(resp), redirects.into_followed());
        };
        // Each hop's headers are built from the caller's: the healthy path copies them once.
        let Ok(headers) = redirects.hop_headers(policy, &hop, &p.uri, identity, &p.headers) else {
            redirects.unfollow();
            return (Sent::Response(resp), redirects.into_followed());
        };
        let left = respond_by.saturating_duration_since(Instant::now());
        if left.is_zero() {
            let timeout = AttemptOutcome::Timeout(baton_core::TimeoutPhase::Response);
            return (Sent::Failed(timeout, None), redirects.into_followed());
        }
        let hop_attempt = Attempt {
            timeout: left,
            connect_timeout: attempt.connect_timeout.min(left),
            ..attempt.clone()
        };
        let mut body = if hop.body {
            std::mem::replace(&mut p.body, SendData::Empty)
        } else {
            SendData::Empty
        };
        // A chain that has left the endpoint's origin carries its token no more, not even
        // back at that origin (core's rule for every adapter: the URL was chosen elsewhere).
        let next = send_one(
            inner,
            call,
            &hop_attempt,
            &mut body,
            &hop.method,
            hop.uri.clone(),
            headers,
            Leg::Hop {
                own_origin: !hop.cross_origin,
            },
        );
        if hop.body {
            p.body = body;
        }
        match next {
            Sent::Response(r) => {
                drop(resp);
                resp = r;
            }
            // A hop ureq refuses to build (the provider's Location, not the caller's
            // request) is not followed: the redirect is the answer.
            Sent::Failed(AttemptOutcome::Failure(FailureClass::RejectedLocally), _) => {
                redirects.unfollow();
                return (Sent::Response(resp), redirects.into_followed());
            }
            Sent::ReplayFailed => {
                // No copy of the body for the hop: the redirect is the answer.
                redirects.unfollow();
                return (Sent::Response(resp), redirects.into_followed());
            }
            failed => return (failed, redirects.into_followed()),
        }
    }
}

/// Which request of an attempt [`send_one`] sends.
#[derive(Clone, Copy)]
enum Leg {
    /// The attempt's own request; `first_use` when it takes the body's first product
    /// (the call's first attempt, or a later one that needs no fresh copy).
    Own { first_use: bool },
    /// A redirect hop; `own_origin` when its chain never left the endpoint's origin.
    Hop { own_origin: bool },
}

/// Sends one request of an attempt (its own, or a redirect hop) with the endpoint's
/// token (SPEC 9) when it has a credential slot, the request goes to the endpoint's own
/// origin and its chain never left it: a refusal (401, or 403 when configured) of the
/// current token invalidates it, and an attempt's own request whose body can be sent
/// again is, once, with a refreshed token, whichever attempt of the call it is (a hop's
/// refusal is its answer); a refusal right after a fresh token is the answer. No token at
/// all fails the attempt undelivered (nothing was sent).
#[allow(clippy::too_many_arguments)]
fn send_one(
    inner: &Inner,
    call: &Call<'_, Response<Body>>,
    attempt: &Attempt,
    body: &mut SendData,
    method: &Method,
    target: Uri,
    mut headers: HeaderMap,
    leg: Leg,
) -> Sent {
    let (first, own_origin) = match leg {
        Leg::Own { first_use } => (first_use, true),
        Leg::Hop { own_origin } => (false, own_origin),
    };
    let policy = inner.engine.policy();
    let ep = policy.endpoints().get(attempt.endpoint);
    let slot = inner.engine.credential(attempt.endpoint);
    let (Some(slot), Some(tokens), Some(ep)) = (slot, &inner.tokens, ep) else {
        return send_plain(inner, call, attempt, body, method, target, headers, first);
    };
    if !own_origin || !baton_core::credential::may_carry(ep.uri(), &target) {
        return send_plain(inner, call, attempt, body, method, target, headers, first);
    }
    let lease = || block_on(slot.lease(Instant::now, || std::future::ready(tokens(ep.id()))));
    let unavailable = |e: baton_core::credential::Unavailable| {
        let outcome = AttemptOutcome::Failure(FailureClass::Undelivered);
        Sent::Failed(outcome, Some(ureq::Error::Other(Box::new(e))))
    };
    let token = match lease() {
        Ok(t) => t,
        Err(e) => return unavailable(e),
    };
    let settings = slot.settings();
    let again = headers.clone();
    if let Some(v) = token.header_value(settings) {
        headers.insert(settings.header.clone(), v);
    }
    let sent = send_plain(
        inner,
        call,
        attempt,
        body,
        method,
        target.clone(),
        headers,
        first,
    );
    let Sent::Response(resp) = &sent else {
        return sent;
    };
    let replayable = matches!(
        body,
        SendData::Empty | SendData::Bytes(_) | SendData::Factory(..)
    );
    // A redirect hop is never re-sent: the async adapters keep no spare copy of a hop,
    // and every runtime answers alike (SPEC 7). Its refusal still invalidates the token.
    let own = matches!(leg, Leg::Own { .. });
    if !(slot.answered(&token, resp.status()) && replayable && own) {
        return sent;
    }
    let Ok(token) = lease() else { return sent };
    let Some(first) = copy_for_resend(body) else {
        return sent;
    };
    drop(sent);
    let mut headers = again;
    if let Some(v) = token.header_value(settings) {
        headers.insert(settings.header.clone(), v);
    }
    let resent = send_plain(inner, call, attempt, body, method, target, headers, first);
    // A refused fresh token is invalidated too (no third send): the next call refreshes.
    if let Sent::Response(resp) = &resent {
        slot.answered(&token, resp.status());
    }
    resent
}

/// Makes the body's copy for the one re-send after a refusal while the refusal is still
/// in hand: `None` when it cannot be made, and the refusal is then the answer (as on
/// tokio, whose spare copy is made up front), not a replay failure that drops it. Else
/// whether the re-send takes the copy made (`first`, in `send_plain`'s terms).
fn copy_for_resend(body: &mut SendData) -> Option<bool> {
    if let SendData::Factory(ready, make) = body {
        *ready = Some(make().ok()?);
    }
    Some(matches!(body, SendData::Factory(Some(_), _)))
}

/// The credential slot of `endpoint` and a token leased from it (waiting, when another
/// call is refreshing it, for that refresh), or `None` when the endpoint has no slot.
pub(crate) fn lease_for(
    inner: &Inner,
    endpoint: usize,
) -> Option<(
    &baton_core::credential::Credential,
    Result<baton_core::credential::Lease, baton_core::credential::Unavailable>,
)> {
    let slot = inner.engine.credential(endpoint)?;
    let tokens = inner.tokens.as_ref()?;
    let ep = inner.engine.policy().endpoints().get(endpoint)?;
    let lease = block_on(slot.lease(Instant::now, || std::future::ready(tokens(ep.id()))));
    Some((slot, lease))
}

/// Runs `fut` on the calling thread, parking it while the future waits: only a token
/// lease waits, for the refresh another call is running (single flight).
fn block_on<F: std::future::Future>(fut: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(std::sync::Arc::new(Unpark(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut fut = std::pin::pin!(fut);
    loop {
        if let std::task::Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}

#[allow(clippy::too_many_arguments)]
fn send_plain(
    inner: &Inner,
    call: &Call<'_, Response<Body>>,
    attempt: &Attempt,
    body: &mut SendData,
    method: &Method,
    target: Uri,
    headers: HeaderMap,
    first: bool,
) -> Sent {
    let mut request = Request::new(());
    *request.method_mut() = method.clone();
    *request.uri_mut() = target;
    *request.headers_mut() = headers;
    let deadline = call.deadline();
    match body {
        SendData::Empty => exec(inner, request, attempt, deadline),
        SendData::Bytes(b) => exec(inner, request.map(|()| &b[..]), attempt, deadline),
        SendData::OneShot(r) => match r.take() {
            Some(r) if first => exec(
                inner,
                request.map(|()| SendBody::from_owned_reader(classify::SourceRead(r))),
                attempt,
                deadline,
            ),
            _ => Sent::ReplayFailed,
        },
        SendData::Factory(ready, make) => {
            let body = match ready.take() {
                Some(r) if first => Ok(r),
                _ => make(),
            };
            match body {
                Ok(r) => exec(
                    inner,
                    request.map(|()| SendBody::from_owned_reader(classify::SourceRead(r))),
                    attempt,
                    deadline,
                ),
                Err(_) => Sent::ReplayFailed,
            }
        }
    }
}

/// What one attempt's request asks of ureq: baton's request settings (no redirects, 4xx
/// and 5xx as responses, the environment's proxy) and the attempt's timeouts.
struct AttemptConfig {
    tunnel: Option<ureq::Proxy>,
    /// The policy's body timeout, and the agent's own if shorter (ureq's body timer
    /// starts when the body is read, right after the headers); none for an event stream.
    recv_body: Option<std::time::Duration>,
    /// The call's deadline as the global budget, so reading the body is held to it too
    /// (SPEC 2.6). Every phase budget ends by the deadline already.
    global: Option<std::time::Duration>,
    connect: std::time::Duration,
    timeout: std::time::Duration,
}

impl AttemptConfig {
    fn of(
        inner: &Inner,
        agent: &ureq::Agent,
        attempt: &Attempt,
        deadline: Option<Instant>,
        tunnel: Option<ureq::Proxy>,
    ) -> Self {
        let own = agent.config().timeouts().recv_body;
        let recv_body = match (own, inner.engine.policy().settings().body_timeout) {
            _ if classify::is_endless_body() => None,
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        // An event stream's body outlives its connection's call, as on every adapter: the
        // call's deadline bounds the call (its attempt timeouts are clipped to it), not
        // the stream. ureq's global timeout would also cut the body.
        let deadline = deadline.filter(|_| !classify::is_endless_body());
        AttemptConfig {
            tunnel,
            recv_body,
            global: deadline.map(|d| d.saturating_duration_since(Instant::now())),
            connect: attempt.connect_timeout,
            timeout: attempt.timeout,
        }
    }

    /// Whether the agent's own configuration is this attempt's (see
    /// `with_request_settings` in the crate root, which builds agents that way).
    fn is_agents(&self, config: &ureq::config::Config) -> bool {
        let t = config.timeouts();
        let (connect, timeout) = (Some(self.connect), Some(self.timeout));
        self.tunnel.is_none()
            && config.proxy().is_none()
            && !config.http_status_as_error()
            && config.max_redirects() == 0
            && config.allow_non_standard_methods()
            && config.max_response_header_size() == crate::RESPONSE_HEAD_BYTES
            && (t.global, t.per_call, t.recv_body) == (self.global, None, self.recv_body)
            && (t.resolve, t.connect) == (connect, connect)
            && (t.send_request, t.send_body, t.recv_response) == (timeout, timeout, timeout)
            && (cfg!(feature = "gzip")
                || matches!(
                    config.accept_encoding(),
                    ureq::config::AutoHeaderValue::None
                ))
    }

    /// `request` with this configuration, for the agent's run.
    fn configure<B: AsSendBody>(self, agent: &ureq::Agent, request: Request<B>) -> Request<B> {
        let configured = agent
            .configure_request(request)
            .timeout_recv_body(self.recv_body)
            .proxy(self.tunnel)
            // 4xx and 5xx are responses: the engine decides what they mean.
            .http_status_as_error(false)
            // Redirects are the engine's decision (SPEC 3): ureq follows none.
            .max_redirects(0)
            // Any method the engine accepts (a `PURGE`, a `QUERY`) is sent, as on every
            // adapter: ureq's own refusal came after the connection was made, and read as
            // a transport failure.
            .allow_non_standard_methods(true)
            .max_response_header_size(crate::RESPONSE_HEAD_BYTES)
            // Per-phase budgets for the attempt (the phase is learned by watching the
            // connection), and the deadline's global one.
            .timeout_global(self.global)
            .timeout_per_call(None)
            .timeout_resolve(Some(self.connect))
            .timeout_connect(Some(self.connect))
            .timeout_send_request(Some(self.timeout))
            .timeout_send_body(Some(self.timeout))
            .timeout_recv_response(Some(self.timeout));
        // No encoding asked for without this crate's `gzip` feature, also on an agent the
        // caller configured (see `with_request_settings`).
        #[cfg(not(feature = "gzip"))]
        let configured = configured.accept_encoding("");
        configured.build()
    }
}

/// How `request` goes out under the environment's proxies (SPEC 3), for calls and probes
/// alike: https through ureq's CONNECT tunnel; http forwarded in absolute form (the
/// connection goes to the proxy, see `classify`), with the proxy's credentials added to
/// the request. Arm the forward with [`classify::forward_through`] for the run.
pub(crate) fn route<B>(
    inner: &Inner,
    request: &mut Request<B>,
) -> Result<(Option<ureq::Proxy>, Option<classify::Forward>), ureq::Error> {
    match inner.proxies.route(request.uri()) {
        Route::Tunnel(p) => Ok((Some(ureq::Proxy::new(&p.url_with_credentials())?), None)),
        Route::Forward(p) => {
            if let Some(a) = p.authorization() {
                request
                    .headers_mut()
                    .insert(ureq::http::header::PROXY_AUTHORIZATION, a.clone());
            }
            let authority = request.uri().authority().map_or("", |a| a.as_str());
            let forward = classify::Forward {
                proxy: p.url(),
                absolute: format!("http://{authority}"),
            };
            Ok((None, Some(forward)))
        }
        _ => Ok((None, None)),
    }
}

/// Runs one request with the attempt's budgets, observing its phase.
fn exec<B: AsSendBody>(
    inner: &Inner,
    mut request: Request<B>,
    attempt: &Attempt,
    deadline: Option<Instant>,
) -> Sent {
    let (tunnel, forward) = match route(inner, &mut request) {
        Ok(r) => r,
        Err(e) => {
            return Sent::Failed(
                AttemptOutcome::Failure(FailureClass::RejectedLocally),
                Some(e),
            )
        }
    };
    let agent = inner.agent(attempt.endpoint, request.uri());
    let wanted = AttemptConfig::of(inner, agent, attempt, deadline, tunnel);
    // The deadline passed before the attempt could start (a slow event callback, a token
    // lease that waited): nothing is sent, and nothing was, as tokio's tracked body proves
    // there. ureq would fail its global timeout before connecting, a timeout of no phase.
    if wanted.global == Some(std::time::Duration::ZERO) {
        let e = ureq::Error::Timeout(ureq::Timeout::Global);
        let phase = baton_core::TimeoutPhase::Connect;
        return Sent::Failed(AttemptOutcome::Timeout(phase), Some(e));
    }
    // ureq copies the agent's whole configuration into a request that changes any of it
    // (about 2,000 instructions a call, measured with callgrind on `callcost blocking`):
    // an attempt with the policy's own timeouts, which the agent was built with, runs
    // with the agent's configuration as it is.
    let request = match wanted.is_agents(agent.config()) {
        true => request,
        false => wanted.configure(agent, request),
    };
    classify::begin(
        Instant::now(),
        attempt.connect_timeout,
        attempt.timeout,
        deadline,
    );
    classify::forward_through(forward);
    let result = agent.run(request);
    let (phase, fresh) = classify::end_fresh();
    match result {
        // One table of response limits on every adapter (`baton_core::limits`): an
        // over-limit head is a protocol failure after the request was sent.
        Ok(resp) => match baton_core::check_response_head(resp.headers()) {
            Ok(()) => Sent::Response(resp),
            Err(e) => Sent::Failed(
                AttemptOutcome::Failure(FailureClass::Ambiguous),
                Some(ureq::Error::Other(Box::new(e))),
            ),
        },
        Err(e) => Sent::Failed(classify(&e, phase, fresh), Some(e)),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::AttemptConfig;

    /// The attempt of a call under the policy's own timeouts, as `AttemptConfig::of`
    /// makes it for a client's agent.
    fn policy_attempt(s: &baton_core::Settings) -> AttemptConfig {
        AttemptConfig {
            tunnel: None,
            recv_body: s.body_timeout,
            global: None,
            connect: s.connect_timeout.min(s.attempt_timeout),
            timeout: s.attempt_timeout,
        }
    }

    #[test]
    fn an_attempt_under_the_policys_timeouts_runs_with_the_agents_configuration() {
        let s = baton_core::Settings {
            body_timeout: Some(Duration::from_secs(7)),
            ..baton_core::Settings::default()
        };
        let built = crate::with_request_settings(ureq::config::Config::builder(), &s).build();
        assert!(policy_attempt(&s).is_agents(&built));
        // ureq's own defaults follow redirects, fail on 4xx/5xx and read the
        // environment's proxy: such an agent's requests are always configured.
        let stock = ureq::config::Config::builder().build();
        assert!(!policy_attempt(&s).is_agents(&stock));
    }

    #[test]
    fn an_attempt_asking_anything_else_is_configured_for_itself() {
        let s = baton_core::Settings::default();
        let built = crate::with_request_settings(ureq::config::Config::builder(), &s).build();
        let changes: [fn(&mut AttemptConfig); 5] = [
            |a| a.timeout = Duration::from_millis(1500),
            |a| a.connect = Duration::from_millis(1),
            |a| a.global = Some(Duration::from_secs(1)),
            |a| a.recv_body = Some(Duration::from_millis(1)),
            |a| a.tunnel = Some(ureq::Proxy::new("http://127.0.0.1:3128").unwrap()),
        ];
        for change in changes {
            let mut a = policy_attempt(&s);
            change(&mut a);
            assert!(!a.is_agents(&built));
        }
    }
}
