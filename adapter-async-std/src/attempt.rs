//! One attempt: take or open a connection to the endpoint, send the request, wait for the
//! response headers (the commit point), and say how it ended, classified by phase.
//!
//! Timeouts (both from the moment the engine asked for the attempt):
//! - the connect timeout bounds DNS + TCP + TLS of a new connection (it fires as a
//!   connect-phase timeout: undelivered);
//! - the attempt timeout bounds everything up to the end of the response headers (it fires
//!   as a response-phase timeout: ambiguous, unless nothing was written yet).
//!
//! A pooled connection found closed before any request byte was written (the server closed
//! it while idle) is replaced by the next idle one or a new one, transparently: nothing was
//! sent, so this is connection management, not a new attempt. A new connection that closes
//! before the request was written is reported as undelivered.

use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use async_io::Timer;
use baton_core::HttpVersion;
use hyper::body::Incoming;
use hyper::client::conn::{http1, http2};

use crate::body::OutBody;
use crate::classify::{Phase, TransportError};
use crate::connect::{self, Target};
use crate::exec::Exec;
use crate::io::Io;
use crate::pool::{Conn, Lease, Pool};

/// Where and how an attempt connects: the client's pool (where connections are kept under
/// the endpoint's index), the endpoint's TLS, HTTP/1.1 settings and target (made once per
/// endpoint when the client is built and shared by all its attempts), or, for a redirect
/// hop to another origin, a pool, TLS and target of the hop's own (made for that hop).
pub(crate) struct Route {
    pub(crate) pool: Arc<Pool>,
    pub(crate) tls: Arc<futures_rustls::rustls::ClientConfig>,
    pub(crate) http1: Arc<http1::Builder>,
    pub(crate) target: Arc<Target>,
    /// The endpoint's index in the pool (and for its credential); a hop to another
    /// origin: 0, in a pool of its own.
    pub(crate) endpoint: usize,
    /// The id of the endpoint the attempt is for, named in its errors.
    pub(crate) endpoint_id: Arc<str>,
    /// The endpoint's HTTP version setting (SPEC 9).
    pub(crate) version: HttpVersion,
}

/// Everything an attempt needs, owned (the attempt future is `'static`). The route is
/// shared: an attempt takes one reference to it, not one to each of its parts.
#[derive(Clone)]
pub(crate) struct AttemptCtx {
    pub(crate) route: Arc<Route>,
    pub(crate) number: u32,
    /// When the attempt started: its connect timeout counts from here.
    pub(crate) start: Instant,
    pub(crate) connect_timeout: Duration,
    /// The attempt timeout, counted from when the connection is ready (SPEC 2.6), so
    /// that a slow connect never eats the provider's time to answer.
    pub(crate) timeout: Duration,
    /// No timer of the attempt ends later: the call's deadline, or the end of the
    /// attempt a redirect hop or a credential re-send belongs to.
    pub(crate) ends_by: Option<Instant>,
}

/// The response headers arrived; the body is still on the connection (an HTTP/1.1 one
/// lent with it; an HTTP/2 stream's is read by its connection's task).
pub(crate) struct Exchange {
    pub(crate) head: http::response::Parts,
    pub(crate) body: Incoming,
    pub(crate) lease: Option<Lease>,
}

/// How an attempt ended.
pub(crate) enum AttemptEnd {
    Response(Box<Exchange>),
    Failed(TransportError),
}

/// A reactor timer that is registered again only when it must fire *earlier* than it is
/// set to.
///
/// Registering an `async-io` timer wakes the reactor (a system call, and often a context
/// switch). A keep-alive connection carries one `Alarm` for all its requests: the first
/// request arms it at its deadline; later requests (whose deadlines are later) keep it.
/// When it fires before the current deadline it is re-armed for that deadline. So the
/// healthy path registers about one timer per attempt-timeout period per connection,
/// instead of one per request, and a timeout still fires on time.
pub(crate) struct Alarm {
    timer: Timer,
    armed: Option<Instant>,
}

impl Alarm {
    pub(crate) fn new() -> Self {
        Alarm {
            timer: Timer::never(),
            armed: None,
        }
    }

    /// Ready once `deadline` has passed.
    pub(crate) fn poll_until(&mut self, cx: &mut Context<'_>, deadline: Instant) -> Poll<()> {
        loop {
            if self.armed.is_none_or(|at| at > deadline) {
                self.timer.set_at(deadline);
                self.armed = Some(deadline);
            }
            if Pin::new(&mut self.timer).poll(cx).is_pending() {
                return Poll::Pending;
            }
            self.armed = None; // spent
            if Instant::now() >= deadline {
                return Poll::Ready(());
            }
        }
    }
}

/// Runs `fut` until `at`; `None` when the time came first.
pub(crate) async fn timeout_at<F: Future>(at: Instant, fut: F) -> Option<F::Output> {
    let mut fut = pin!(fut);
    let mut timer: Option<Timer> = None;
    poll_fn(|cx| {
        if let Poll::Ready(v) = fut.as_mut().poll(cx) {
            return Poll::Ready(Some(v));
        }
        let t = timer.get_or_insert_with(|| Timer::at(at));
        match Pin::new(t).poll(cx) {
            Poll::Ready(_) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    })
    .await
}

/// A connection to send on: an HTTP/1.1 one of the attempt's own (how it came by it),
/// or the endpoint's shared HTTP/2 one (with, when opened for this attempt, where its
/// task leaves the error that ended it).
enum Taken {
    H1(Conn, Opened),
    H2(http2::SendRequest<OutBody>, Option<Died>),
}

/// How an attempt came by its HTTP/1.1 connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Opened {
    /// An idle one from the pool.
    Pooled,
    /// A new one, for this attempt; `alert_proves` as in [`alert_proves`].
    Fresh { alert_proves: bool },
}

/// Whether a server's alert refusing our identity on a new connection proves that its
/// request was not processed (SPEC 1, 9). Only over TLS 1.3: there the server judges the
/// client's certificate after the client finished its side of the handshake (so after
/// the connection was ready here), and a server that refuses it reads no request. Over
/// TLS 1.2 it judges the certificate before its own `Finished`, so a refusal fails the
/// handshake itself (undelivered anyway), and an alert after the connection was ready
/// came after the handshake: ambiguous, like any alert then.
fn alert_proves(stream: &crate::io::Stream) -> bool {
    connect::tls13(stream)
}

/// How an HTTP/2 connection's task ended (its error, if any): a request that finds the
/// connection closed learns why from it (a TLS alert refusing our identity, say).
struct Died {
    ended: async_channel::Receiver<Option<hyper::Error>>,
    /// As in [`alert_proves`].
    alert_proves: bool,
}

/// What sending on a connection came to: the attempt's end, or the request handed back
/// unsent by a pooled connection that turned out closed (try another).
enum Sent {
    Done(AttemptEnd),
    /// Boxed: the rare path, and the common one stays small.
    Again(Box<http::Request<OutBody>>),
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Failure = (Phase, BoxError);

/// Opens a connection: DNS, TCP, TLS, then HTTP/2 when ALPN agreed `h2` (or prior
/// knowledge on http), else HTTP/1.1. An endpoint that requires HTTP/2 and was not
/// agreed it is a connection closed before the protocol was agreed: undelivered.
async fn open(ctx: &AttemptCtx) -> Result<Taken, Failure> {
    let connect_by = ctx.start + ctx.connect_timeout;
    let stream = connect::connect(&ctx.route.target, &ctx.route.tls, connect_by)
        .await
        .map_err(|(p, e)| (crate::classify::proven(p, &e, true), e.into()))?;
    let proves = alert_proves(&stream);
    let h2 = match &ctx.route.target.tls {
        Some(_) => connect::agreed_h2(&stream),
        None => ctx.route.version == HttpVersion::Http2,
    };
    if ctx.route.version == HttpVersion::Http2 && !h2 {
        return Err((
            Phase::NotSent,
            "the server did not agree to HTTP/2 (ALPN h2), which the endpoint requires".into(),
        ));
    }
    if ctx.route.target.tls.is_some() && ctx.route.version == HttpVersion::Auto {
        ctx.route.pool.agreed(ctx.route.endpoint, h2);
    }
    if h2 {
        crate::exec::start().map_err(|e| (Phase::NotSent, e.into()))?;
        let (sender, driver) = http2::Builder::new(Exec)
            .handshake(Io::new(stream))
            .await
            .map_err(|e| (Phase::NotSent, e.into()))?;
        let (ended, died) = async_channel::bounded(1);
        hyper::rt::Executor::execute(&Exec, async move {
            let _ = ended.try_send(driver.await.err());
        });
        let died = Died {
            ended: died,
            alert_proves: proves,
        };
        return Ok(Taken::H2(sender, Some(died)));
    }
    let (sender, driver) = ctx
        .route
        .http1
        .handshake(Io::new(stream))
        .await
        .map_err(|e| (Phase::NotSent, e.into()))?;
    let opened = Opened::Fresh {
        alert_proves: proves,
    };
    Ok(Taken::H1(Conn::new(sender, driver), opened))
}

/// Whether the endpoint may speak HTTP/2 on this attempt's connection.
fn h2_possible(ctx: &AttemptCtx) -> bool {
    match ctx.route.version {
        HttpVersion::Http2 => true,
        HttpVersion::Http1 => false,
        HttpVersion::Auto => {
            ctx.route.target.tls.is_some() && !ctx.route.pool.speaks_h1(ctx.route.endpoint)
        }
    }
}

/// How many connections an attempt's request may meet (pooled ones that turned out
/// closed, then a new one).
const TRIES: u32 = 8;

/// The connection to send on: the endpoint's shared HTTP/2 connection (opened by one
/// caller while the others wait for it), an idle HTTP/1.1 one when `pooled`, or a new
/// one.
async fn take(ctx: &AttemptCtx, connect_by: Instant, pooled: bool) -> Result<Taken, AttemptEnd> {
    let timed_out = || AttemptEnd::Failed(ctx.timeout_error(Phase::Connect));
    let open_by = |ctx| async move {
        match timeout_at(connect_by, Box::pin(open(ctx))).await {
            None => Err(timed_out()),
            Some(r) => r.map_err(|(p, e)| ctx.failed(p, e, true)),
        }
    };
    if let (true, Some(slot)) = (h2_possible(ctx), ctx.route.pool.h2(ctx.route.endpoint)) {
        let Some(mut shared) = timeout_at(connect_by, slot.lock()).await else {
            return Err(timed_out());
        };
        if let Some(s) = shared.as_ref().filter(|s| !s.is_closed()) {
            return Ok(Taken::H2(s.clone(), None));
        }
        if !ctx.route.pool.speaks_h1(ctx.route.endpoint) {
            let taken = open_by(ctx).await?;
            if let Taken::H2(s, _) = &taken {
                *shared = Some(s.clone());
            }
            return Ok(taken);
        }
    }
    let idle = pooled.then(|| ctx.route.pool.take(ctx.route.endpoint, Instant::now()));
    match idle.flatten() {
        Some(c) => Ok(Taken::H1(c, Opened::Pooled)),
        None => open_by(ctx).await,
    }
}

impl AttemptCtx {
    /// When the provider's time to answer ends, for a connection ready at `ready`: the
    /// attempt timeout from then, within [`ends_by`](Self::ends_by).
    pub(crate) fn respond_by(&self, ready: Instant) -> Instant {
        let by = ready.checked_add(self.timeout);
        match (by, self.ends_by) {
            (Some(by), Some(end)) => by.min(end),
            (by, end) => by.or(end).unwrap_or(ready),
        }
    }

    /// A failure in `phase`. `alert_proves`: a server's alert refusing our identity proves
    /// that nothing was processed (on a connection this attempt opened, before its request
    /// was sent, or once sent over TLS 1.3: see [`alert_proves`]).
    fn failed(&self, phase: Phase, e: BoxError, alert_proves: bool) -> AttemptEnd {
        let phase = crate::classify::proven(phase, &*e, alert_proves);
        AttemptEnd::Failed(TransportError::new(
            self.route.endpoint_id.clone(),
            self.number,
            phase,
            false,
            e,
        ))
    }

    fn timeout_error(&self, phase: Phase) -> TransportError {
        TransportError::timeout(self.route.endpoint_id.clone(), self.number, phase)
    }

    fn exchange(&self, res: http::Response<Incoming>, lease: Option<Lease>) -> AttemptEnd {
        // One table of response limits on every adapter (`baton_core::limits`).
        if let Err(e) = baton_core::check_response_head(res.headers()) {
            return self.failed(Phase::Exchange, Box::new(e), false);
        }
        let (head, body) = res.into_parts();
        AttemptEnd::Response(Box::new(Exchange { head, body, lease }))
    }
}

/// Runs one attempt to its commit point (response headers) or failure.
///
/// Its future is every call's send slot, so it is kept small: not an `async fn` (which
/// would hold a second copy of the request and context), and an HTTP/2 send, whose state
/// is twice an HTTP/1.1 send's, is boxed (an h2 stream allocates anyway).
#[allow(clippy::manual_async_fn)]
pub(crate) fn run(
    ctx: AttemptCtx,
    mut req: http::Request<OutBody>,
) -> impl Future<Output = AttemptEnd> + Send {
    async move {
        let connect_by = ctx.start + ctx.connect_timeout;
        let mut respond_by: Option<Instant> = None;
        // A request handed back unsent by a pooled connection goes to another; a few
        // times at most (each pooled connection it met was closing), the last on a new
        // connection: a pool a restarted provider left all dead never costs an attempt,
        // as hyper-util's never costs tokio one (SPEC 7).
        for tries in (0..TRIES).rev() {
            let taken = take(&ctx, connect_by, tries > 0).await;
            // The attempt timer starts once the first connection is ready (SPEC 2.6), once:
            // from the attempt's start, a connect that took most of it left the provider a
            // sliver, and the request was written only to time out as "may have executed".
            let now = Instant::now();
            let respond_by = *respond_by.get_or_insert_with(|| ctx.respond_by(now));
            // No time left (a redirect hop or a re-send whose attempt's time ran out):
            // nothing is written.
            if taken.is_ok() && respond_by <= now {
                return AttemptEnd::Failed(ctx.timeout_error(Phase::NotSent));
            }
            let sent = match taken {
                Err(end) => return end,
                Ok(Taken::H1(conn, opened)) => send_h1(&ctx, conn, opened, req, respond_by).await,
                Ok(Taken::H2(sender, died)) => {
                    Box::pin(send_h2(&ctx, sender, died, req, respond_by)).await
                }
            };
            match sent {
                Sent::Done(end) => return end,
                Sent::Again(r) => req = *r,
            }
        }
        ctx.failed(
            Phase::NotSent,
            "every pooled connection closed before the request was sent".into(),
            false,
        )
    }
}

/// An HTTP/1.1 send on `conn`. Not an `async fn`: that would hold a second copy of the
/// connection and the request in every call's future.
#[allow(clippy::manual_async_fn)]
fn send_h1(
    ctx: &AttemptCtx,
    mut conn: Conn,
    opened: Opened,
    req: http::Request<OutBody>,
    respond_by: Instant,
) -> impl Future<Output = Sent> + Send + '_ {
    async move {
        let fresh = opened != Opened::Pooled;
        // Ready to take the request? A pooled connection the server closed is found here.
        let ready = poll_fn(|cx| match conn.poll_ready(cx) {
            Poll::Ready(r) => Poll::Ready(Some(r)),
            Poll::Pending => conn.alarm.poll_until(cx, respond_by).map(|()| None),
        })
        .await;
        match ready {
            None => return Sent::Done(AttemptEnd::Failed(ctx.timeout_error(Phase::NotSent))),
            Some(Err(e)) if fresh => return Sent::Done(ctx.failed(Phase::NotSent, e.into(), true)),
            Some(Err(_)) => return Sent::Again(Box::new(req)),
            Some(Ok(())) => {}
        }
        let mut response = pin!(conn.sender.try_send_request(req));
        let sent = poll_fn(|cx| {
            conn.drive(cx);
            match response.as_mut().poll(cx) {
                Poll::Ready(r) => Poll::Ready(Some(r)),
                Poll::Pending => conn.alarm.poll_until(cx, respond_by).map(|()| None),
            }
        })
        .await;
        Sent::Done(match sent {
            None => AttemptEnd::Failed(ctx.timeout_error(Phase::Exchange)),
            Some(Ok(res)) => {
                let lease = Lease {
                    conn,
                    pool: ctx.route.pool.clone(),
                    endpoint: ctx.route.endpoint,
                };
                ctx.exchange(res, Some(lease))
            }
            Some(Err(mut e)) => match e.take_message() {
                // Handed back unsent: no byte of it was written.
                Some(r) if !fresh => return Sent::Again(Box::new(r)),
                Some(_) => ctx.failed(Phase::NotSent, e.into_error().into(), fresh),
                None => {
                    let proves = opened == Opened::Fresh { alert_proves: true };
                    ctx.failed(Phase::Exchange, e.into_error().into(), proves)
                }
            },
        })
    }
}

async fn send_h2(
    ctx: &AttemptCtx,
    mut sender: http2::SendRequest<OutBody>,
    died: Option<Died>,
    req: http::Request<OutBody>,
    respond_by: Instant,
) -> Sent {
    // A connection found closed before anything of the request is sent (the server's
    // stream limit is waited for inside the send, by h2).
    let ready = timeout_at(respond_by, poll_fn(|cx| sender.poll_ready(cx))).await;
    match ready {
        None => return Sent::Done(AttemptEnd::Failed(ctx.timeout_error(Phase::NotSent))),
        Some(Err(e)) => {
            let Some(died) = died else {
                return Sent::Again(Box::new(req));
            };
            return Sent::Done(ctx.failed(Phase::NotSent, why(&died, e, respond_by).await, true));
        }
        Some(Ok(())) => {}
    }
    let req = absolute(&ctx.route.target, req);
    Sent::Done(
        match timeout_at(respond_by, sender.try_send_request(req)).await {
            None => AttemptEnd::Failed(ctx.timeout_error(Phase::Exchange)),
            Some(Ok(res)) => ctx.exchange(res, None),
            Some(Err(mut e)) => match e.take_message() {
                // Handed back unsent: the connection closed before the stream opened.
                Some(r) => match &died {
                    None => return Sent::Again(Box::new(relative(r))),
                    Some(died) => {
                        let cause = why(died, e.into_error(), respond_by).await;
                        ctx.failed(Phase::NotSent, cause, true)
                    }
                },
                None => {
                    let proves = died.as_ref().is_some_and(|d| d.alert_proves);
                    ctx.failed(Phase::Exchange, e.into_error().into(), proves)
                }
            },
        },
    )
}

/// Why a new HTTP/2 connection closed, as its task (ending now) says; else `fallback`.
async fn why(died: &Died, fallback: hyper::Error, by: Instant) -> BoxError {
    let cause = timeout_at(by, died.ended.recv()).await;
    cause
        .and_then(Result::ok)
        .flatten()
        .unwrap_or(fallback)
        .into()
}

/// HTTP/2 names the target in `:scheme` and `:authority`: the request's URL made
/// absolute, its authority from the Host header (which HTTP/2 does not send), else the
/// endpoint's.
fn absolute(target: &Target, mut req: http::Request<OutBody>) -> http::Request<OutBody> {
    if req.uri().scheme().is_some() {
        return req;
    }
    let host = req.headers_mut().remove(http::header::HOST);
    let authority = host
        .as_ref()
        .and_then(|h| h.to_str().ok())
        .unwrap_or_else(|| target.host_header.to_str().unwrap_or_default());
    let scheme = if target.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let pq = req.uri().path_and_query().map_or("/", |pq| pq.as_str());
    if let Ok(uri) = format!("{scheme}://{authority}{pq}").parse() {
        *req.uri_mut() = uri;
    }
    req
}

/// The request as it was before [`absolute`]: origin-form, the Host header back.
fn relative(mut req: http::Request<OutBody>) -> http::Request<OutBody> {
    if let Some(authority) = req.uri().authority().cloned() {
        if let Ok(v) = http::HeaderValue::from_str(authority.as_str()) {
            req.headers_mut().insert(http::header::HOST, v);
        }
    }
    if let Some(pq) = req.uri().path_and_query().cloned() {
        *req.uri_mut() = http::Uri::from(pq);
    }
    req
}

/// One test per failure case of the phase table in [`crate::classify`], each against a
/// real socket on 127.0.0.1 (or a name under `.invalid`, which fails locally).
#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpListener;

    use baton_core::{AttemptOutcome, FailureClass, TimeoutPhase};
    use bytes::Bytes;
    use testkit::{Behaviour, Provider};

    use super::*;
    use crate::connect::harden;

    fn ctx(url: &str, pool: &Arc<Pool>, connect_ms: u64, timeout_ms: u64) -> AttemptCtx {
        let route = Route {
            pool: pool.clone(),
            tls: Arc::new(harden(
                baton_tls::TlsConfig::load(&baton_core::Tls::default())
                    .unwrap()
                    .client_config(HttpVersion::Http1),
                HttpVersion::Http1,
            )),
            http1: Arc::new(http1::Builder::new()),
            target: Arc::new(Target::of(&url.parse().unwrap()).unwrap()),
            endpoint: 0,
            endpoint_id: Arc::from("e"),
            version: HttpVersion::Auto,
        };
        AttemptCtx {
            route: Arc::new(route),
            number: 1,
            start: Instant::now(),
            connect_timeout: Duration::from_millis(connect_ms),
            timeout: Duration::from_millis(timeout_ms),
            ends_by: None,
        }
    }

    fn request(host: &str) -> http::Request<OutBody> {
        http::Request::builder()
            .method("POST")
            .uri("/")
            .header("host", host)
            .body(OutBody::Full(Some(Bytes::from_static(b"{}"))))
            .unwrap()
    }

    fn attempt(url: &str, connect_ms: u64, timeout_ms: u64) -> AttemptEnd {
        let pool = Arc::new(Pool::new(1, 4, Duration::from_secs(60)));
        let host = url
            .trim_start_matches("http://")
            .trim_start_matches("https://");
        async_io::block_on(run(ctx(url, &pool, connect_ms, timeout_ms), request(host)))
    }

    fn failure(end: AttemptEnd) -> TransportError {
        match end {
            AttemptEnd::Failed(e) => e,
            AttemptEnd::Response(ex) => panic!("expected a failure, got {}", ex.head.status),
        }
    }

    /// A listener on 127.0.0.1 that answers every connection with `reply` (after reading
    /// whatever arrives first), then closes it.
    fn raw(reply: &'static [u8], read_first: bool) -> String {
        raw_linger(reply, read_first, Duration::ZERO)
    }

    /// Like [`raw`], closing each connection `linger` after the reply.
    fn raw_linger(reply: &'static [u8], read_first: bool, linger: Duration) -> String {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            for c in l.incoming() {
                let Ok(mut c) = c else { return };
                if read_first {
                    let mut buf = [0u8; 2048];
                    let _ = c.read(&mut buf);
                }
                let _ = c.write_all(reply);
                std::thread::spawn(move || {
                    std::thread::sleep(linger);
                    drop(c);
                });
            }
        });
        format!("{addr}")
    }

    #[test]
    fn dns_failure_is_undelivered() {
        let e = failure(attempt(&testkit::unresolvable_url(), 2000, 3000));
        assert_eq!(e.phase(), Phase::Dns);
        assert!(matches!(
            e.outcome(),
            AttemptOutcome::Failure(FailureClass::Undelivered)
        ));
    }

    #[test]
    fn refused_is_undelivered() {
        let e = failure(attempt(&testkit::refused_url(), 2000, 3000));
        assert_eq!(e.phase(), Phase::Connect);
        assert_eq!(e.class(), FailureClass::Undelivered);
        let io = std::error::Error::source(&e)
            .and_then(|s| s.downcast_ref::<std::io::Error>())
            .unwrap();
        assert_eq!(io.kind(), std::io::ErrorKind::ConnectionRefused);
    }

    #[test]
    fn unreachable_is_undelivered() {
        // Host and network unreachable cannot be produced on loopback without sending
        // packets elsewhere; they are connect-phase errors like a refusal, and the class
        // is decided by the phase alone.
        for kind in [
            std::io::ErrorKind::HostUnreachable,
            std::io::ErrorKind::NetworkUnreachable,
        ] {
            let e = TransportError::new("e", 1, Phase::Connect, false, std::io::Error::from(kind));
            assert!(matches!(
                e.outcome(),
                AttemptOutcome::Failure(FailureClass::Undelivered)
            ));
        }
    }

    #[test]
    fn connect_timeout_is_undelivered() {
        // A listener with a backlog of 0 whose accept queue is already full: the kernel
        // drops further SYNs, so connecting hangs.
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        s.bind(
            &"127.0.0.1:0"
                .parse::<std::net::SocketAddr>()
                .unwrap()
                .into(),
        )
        .unwrap();
        s.listen(0).unwrap();
        let addr = s.local_addr().unwrap().as_socket().unwrap();
        let mut fillers = Vec::new();
        for _ in 0..4 {
            let f =
                socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
            f.set_nonblocking(true).unwrap();
            let _ = f.connect(&addr.into());
            fillers.push(f);
        }
        std::thread::sleep(Duration::from_millis(50));
        let t0 = Instant::now();
        let e = failure(attempt(&format!("http://{addr}"), 300, 3000));
        assert!(e.is_timeout(), "{e}");
        assert_eq!(e.phase(), Phase::Connect);
        assert!(matches!(
            e.outcome(),
            AttemptOutcome::Timeout(TimeoutPhase::Connect)
        ));
        assert!(t0.elapsed() < Duration::from_secs(2));
        drop((s, fillers));
    }

    #[test]
    fn tls_handshake_failure_is_undelivered() {
        // https to a plain-HTTP server: it answers the ClientHello with a 400.
        let p = Provider::start(Behaviour::ok());
        let e = failure(attempt(&p.url().replace("http://", "https://"), 2000, 3000));
        assert_eq!(e.phase(), Phase::Tls);
        assert_eq!(e.class(), FailureClass::Undelivered);
        assert_eq!(p.request_count(), 0);
    }

    #[test]
    fn tls_alert_during_the_handshake_is_undelivered() {
        // A fatal handshake_failure alert in reply to the ClientHello.
        let addr = raw(&[0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28], true);
        let e = failure(attempt(&format!("https://{addr}"), 2000, 3000));
        assert_eq!(e.phase(), Phase::Tls);
        assert_eq!(e.class(), FailureClass::Undelivered);
        // The alert is named by the TLS error, the transport error's source.
        let source = std::error::Error::source(&e).map(|s| s.to_string());
        assert!(source.unwrap().to_lowercase().contains("alert"), "{e}");
    }

    #[test]
    fn reset_after_the_request_is_ambiguous() {
        let p = Provider::start(Behaviour::reset());
        let e = failure(attempt(&p.url(), 2000, 3000));
        assert_eq!(e.phase(), Phase::Exchange);
        assert!(matches!(
            e.outcome(),
            AttemptOutcome::Failure(FailureClass::Ambiguous)
        ));
        assert_eq!(p.request_count(), 1);
    }

    #[test]
    fn eof_before_the_response_is_ambiguous() {
        let p = Provider::start(Behaviour::close());
        let e = failure(attempt(&p.url(), 2000, 3000));
        assert_eq!(e.phase(), Phase::Exchange);
        assert_eq!(e.class(), FailureClass::Ambiguous);
    }

    #[test]
    fn garbage_response_is_ambiguous() {
        let addr = raw(b"SMTP ready\r\n\r\n", true);
        let e = failure(attempt(&format!("http://{addr}"), 2000, 3000));
        assert_eq!(e.phase(), Phase::Exchange);
        assert_eq!(e.class(), FailureClass::Ambiguous);
    }

    #[test]
    fn timeout_waiting_for_the_headers_is_ambiguous() {
        let p = Provider::start(Behaviour::black_hole());
        let e = failure(attempt(&p.url(), 2000, 300));
        assert!(e.is_timeout());
        assert_eq!(e.phase(), Phase::Exchange);
        assert!(matches!(
            e.outcome(),
            AttemptOutcome::Timeout(TimeoutPhase::Response)
        ));
    }

    #[test]
    fn a_dead_pooled_connection_is_replaced_before_anything_is_sent() {
        // The server answers, then closes the connection without saying so.
        let addr = raw_linger(
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
            true,
            Duration::from_millis(50),
        );
        let url = format!("http://{addr}");
        let pool = Arc::new(Pool::new(1, 4, Duration::from_secs(60)));
        async_io::block_on(async {
            let AttemptEnd::Response(ex) = run(ctx(&url, &pool, 2000, 3000), request(&addr)).await
            else {
                panic!("first attempt failed")
            };
            // Give the connection back as if its (already complete) body had been read,
            // before the close is seen.
            pool.put(0, ex.lease.unwrap().conn, Instant::now());
            assert_eq!(pool.idle(0), 1);
            async_io::Timer::after(Duration::from_millis(300)).await;
            let second = run(ctx(&url, &pool, 2000, 3000), request(&addr)).await;
            assert!(matches!(second, AttemptEnd::Response(_)));
        });
    }

    /// A server's alert refusing our identity proves nothing processed only on a new
    /// connection that agreed TLS 1.3 (see [`alert_proves`]): the connection says which
    /// version it agreed.
    #[test]
    fn a_server_alert_proves_nothing_processed_only_over_tls13() {
        use futures_rustls::rustls::{version, ClientConfig, RootCertStore};
        let pki = testkit::TestPki::new();
        let provider = Provider::start(Behaviour::ok());
        let front = pki.front(
            &pki.server,
            &["http/1.1"],
            false,
            Some(provider.addr()),
            None,
        );
        let pool = Arc::new(Pool::new(1, 4, Duration::from_secs(60)));
        for (versions, proves) in [(&version::TLS12, false), (&version::TLS13, true)] {
            let mut roots = RootCertStore::empty();
            roots.add(pki.ca_der()).unwrap();
            let config = ClientConfig::builder_with_provider(baton_tls::provider())
                .with_protocol_versions(&[versions])
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth();
            let mut c = ctx(&front.url(), &pool, 2000, 3000);
            Arc::get_mut(&mut c.route).unwrap().tls = Arc::new(harden(config, HttpVersion::Http1));
            let Ok(Taken::H1(_, opened)) = async_io::block_on(open(&c)) else {
                panic!("no HTTP/1.1 connection over {versions:?}")
            };
            let fresh = Opened::Fresh {
                alert_proves: proves,
            };
            assert_eq!(opened, fresh, "{versions:?}");
        }
    }
}
