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
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;
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

/// Runs `fut` until `at`; `None` when the time came first.
pub(crate) async fn timeout_at<F: Future>(at: Instant, fut: F) -> Option<F::Output> {
    let mut fut = pin!(fut);
    let mut timer: Option<Timer> = None;
    poll_fn(|cx| {
        if let Poll::Ready(v) = fut.as_mut().poll(cx) {
            return Poll::Ready(Some(v));
        }
        let t = timer.get_or_insert_with(|| Timer::at(at));
        match std::pin::Pin::new(t).poll(cx) {
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
            None => match timeout_at(connect_by, open(&ctx)).await {
                None => return timed_out(Phase::Connect),
                Some(Err((phase, e))) => return fail(phase, e),
                Some(Ok(c)) => (c, true),
            },
        };
        // Ready to take the request? A pooled connection the server closed is found here.
        match timeout_at(respond_by, poll_fn(|cx| conn.poll_ready(cx))).await {
            None => return timed_out(Phase::NotSent),
            Some(Err(e)) if fresh => return fail(Phase::NotSent, e.into()),
            Some(Err(_)) => continue,
            Some(Ok(())) => {}
        }
        let mut response = pin!(conn.sender.try_send_request(req));
        let sent = timeout_at(
            respond_by,
            poll_fn(|cx| {
                conn.drive(cx);
                response.as_mut().poll(cx)
            }),
        )
        .await;
        match sent {
            None => return timed_out(Phase::Exchange),
            Some(Ok(res)) => {
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
