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
use hyper::body::Incoming;
use hyper::client::conn::http1;

use crate::body::OutBody;
use crate::classify::{Phase, TransportError};
use crate::connect::{self, Target};
use crate::io::Io;
use crate::pool::{Conn, Lease, Pool};

/// Everything an attempt needs, owned (the attempt future is `'static`).
#[derive(Clone)]
pub(crate) struct AttemptCtx {
    pub(crate) pool: Arc<Pool>,
    pub(crate) tls: Arc<futures_rustls::rustls::ClientConfig>,
    pub(crate) http1: Arc<http1::Builder>,
    pub(crate) target: Arc<Target>,
    pub(crate) endpoint: usize,
    pub(crate) endpoint_id: Arc<str>,
    pub(crate) number: u32,
    pub(crate) start: Instant,
    pub(crate) connect_timeout: Duration,
    pub(crate) timeout: Duration,
}

/// The response headers arrived; the body is still on the connection.
pub(crate) struct Exchange {
    pub(crate) head: http::response::Parts,
    pub(crate) body: Incoming,
    pub(crate) lease: Lease,
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

async fn open(ctx: &AttemptCtx) -> Result<Conn, (Phase, Box<dyn std::error::Error + Send + Sync>)> {
    let stream = connect::connect(&ctx.target, &ctx.tls)
        .await
        .map_err(|(p, e)| (p, e.into()))?;
    let (sender, driver) = ctx
        .http1
        .handshake(Io::new(stream))
        .await
        .map_err(|e| (Phase::NotSent, e.into()))?;
    Ok(Conn::new(sender, driver))
}

/// Runs one attempt to its commit point (response headers) or failure.
pub(crate) async fn run(ctx: AttemptCtx, mut req: http::Request<OutBody>) -> AttemptEnd {
    let connect_by = ctx.start + ctx.connect_timeout;
    let respond_by = ctx.start + ctx.timeout;
    let fail = |phase: Phase, e: Box<dyn std::error::Error + Send + Sync>| {
        AttemptEnd::Failed(TransportError::new(
            ctx.endpoint_id.clone(),
            ctx.number,
            phase,
            false,
            e,
        ))
    };
    let timed_out = |phase: Phase| {
        AttemptEnd::Failed(TransportError::timeout(
            ctx.endpoint_id.clone(),
            ctx.number,
            phase,
        ))
    };
    loop {
        let (mut conn, fresh) = match ctx.pool.take(ctx.endpoint, Instant::now()) {
            Some(c) => (c, false),
            None => match timeout_at(connect_by, Box::pin(open(&ctx))).await {
                None => return timed_out(Phase::Connect),
                Some(Err((phase, e))) => return fail(phase, e),
                Some(Ok(c)) => (c, true),
            },
        };
        // Ready to take the request? A pooled connection the server closed is found here.
        let ready = poll_fn(|cx| match conn.poll_ready(cx) {
            Poll::Ready(r) => Poll::Ready(Some(r)),
            Poll::Pending => conn.alarm.poll_until(cx, respond_by).map(|()| None),
        })
        .await;
        match ready {
            None => return timed_out(Phase::NotSent),
            Some(Err(e)) if fresh => return fail(Phase::NotSent, e.into()),
            Some(Err(_)) => continue,
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
        match sent {
            None => return timed_out(Phase::Exchange),
            Some(Ok(res)) => {
                // One table of response limits on every adapter (`baton_core::limits`).
                if let Err(e) = baton_core::check_response_head(res.headers()) {
                    return fail(Phase::Exchange, Box::new(e));
                }
                let (head, body) = res.into_parts();
                return AttemptEnd::Response(Box::new(Exchange {
                    head,
                    body,
                    lease: Lease {
                        conn,
                        pool: ctx.pool.clone(),
                        endpoint: ctx.endpoint,
                    },
                }));
            }
            Some(Err(mut e)) => match e.take_message() {
                // Handed back unsent: no byte of it was written.
                Some(r) if !fresh => req = r,
                Some(_) => return fail(Phase::NotSent, e.into_error().into()),
                None => return fail(Phase::Exchange, e.into_error().into()),
            },
        }
    }
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
    use crate::connect::{default_tls, harden};

    fn ctx(url: &str, pool: &Arc<Pool>, connect_ms: u64, timeout_ms: u64) -> AttemptCtx {
        AttemptCtx {
            pool: pool.clone(),
            tls: Arc::new(harden(default_tls().unwrap())),
            http1: Arc::new(http1::Builder::new()),
            target: Arc::new(Target::of(&url.parse().unwrap()).unwrap()),
            endpoint: 0,
            endpoint_id: Arc::from("e"),
            number: 1,
            start: Instant::now(),
            connect_timeout: Duration::from_millis(connect_ms),
            timeout: Duration::from_millis(timeout_ms),
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
        assert!(e.to_string().to_lowercase().contains("alert"), "{e}");
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
            pool.put(0, ex.lease.conn, Instant::now());
            assert_eq!(pool.idle(0), 1);
            async_io::Timer::after(Duration::from_millis(300)).await;
            let second = run(ctx(&url, &pool, 2000, 3000), request(&addr)).await;
            assert!(matches!(second, AttemptEnd::Response(_)));
        });
    }
}
