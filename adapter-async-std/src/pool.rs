//! Keep-alive connections, reused per endpoint.
//!
//! An HTTP/2 connection is one per endpoint, shared by every call at once (see
//! [`crate::exec`] for the task that drives it): the pool keeps its sender behind an async
//! lock that also makes one caller at a time open it, so concurrent calls wait for that
//! connection instead of each opening their own. What ALPN agreed with an `auto` endpoint
//! is remembered, so an endpoint that answered `http/1.1` goes straight to the HTTP/1.1
//! connections below.
//!
//! A connection is hyper's request sender plus its connection future (the "driver"),
//! which this adapter polls *inline*, from whatever future is using the connection (the
//! attempt while it waits for the headers, then the [`Response`](crate::Response) while
//! the caller reads the body). No task is spawned, so the adapter needs no executor of its
//! own and works the same under async-std and smol; dropping the future that uses a
//! connection drops (closes) it, which is how an attempt is cancelled.
//!
//! When a response body has been read to its end, the connection goes back to its
//! endpoint's idle list. Idle connections are not polled: a connection the server closed
//! meanwhile is found dead when next taken (the driver sees EOF before anything is sent),
//! and the attempt moves on to the next idle one or a new one. Each endpoint keeps at most
//! `max_idle` idle connections (the oldest goes first), and one idle for longer than
//! `idle_timeout` is closed when next seen (there is no background timer).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper::client::conn::http1::{Connection, SendRequest};
use hyper::client::conn::http2;

use crate::attempt::Alarm;
use crate::body::OutBody;
use crate::io::Io;

/// One HTTP/1.1 connection.
pub(crate) struct Conn {
    pub(crate) sender: SendRequest<OutBody>,
    driver: Option<Pin<Box<Connection<Io, OutBody>>>>,
    /// The attempt timeout's timer, kept armed across requests (see [`Alarm`]).
    pub(crate) alarm: Alarm,
}

impl Conn {
    pub(crate) fn new(sender: SendRequest<OutBody>, driver: Connection<Io, OutBody>) -> Self {
        Conn {
            sender,
            driver: Some(Box::pin(driver)),
            alarm: Alarm::new(),
        }
    }

    /// Polls the connection future; when it has finished (closed or failed) it is dropped,
    /// which fails or hands back whatever request was waiting on it. Returns whether the
    /// connection is still open.
    pub(crate) fn drive(&mut self, cx: &mut Context<'_>) -> bool {
        if let Some(d) = self.driver.as_mut() {
            if d.as_mut().poll(cx).is_ready() {
                self.driver = None;
            }
        }
        self.driver.is_some()
    }

    /// Ready to take a request (drives the connection meanwhile).
    pub(crate) fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<hyper::Result<()>> {
        self.drive(cx);
        self.sender.poll_ready(cx)
    }

    fn reusable(&self) -> bool {
        self.driver.is_some() && !self.sender.is_closed()
    }
}

struct Idle {
    conn: Conn,
    since: Instant,
}

/// The sender of an endpoint's shared HTTP/2 connection, if one is open.
pub(crate) type H2Slot = async_lock::Mutex<Option<http2::SendRequest<OutBody>>>;

/// What an endpoint's origin agreed by ALPN: not known yet, HTTP/2, HTTP/1.1.
const UNKNOWN: u8 = 0;
const H2: u8 = 1;
const H1: u8 = 2;

/// Idle connections per endpoint (index in the policy).
pub(crate) struct Pool {
    slots: Box<[Mutex<Vec<Idle>>]>,
    h2: Box<[H2Slot]>,
    agreed: Box<[AtomicU8]>,
    max_idle: usize,
    idle_timeout: Duration,
}

impl Pool {
    pub(crate) fn new(endpoints: usize, max_idle: usize, idle_timeout: Duration) -> Self {
        Pool {
            slots: (0..endpoints).map(|_| Mutex::new(Vec::new())).collect(),
            h2: (0..endpoints)
                .map(|_| async_lock::Mutex::new(None))
                .collect(),
            agreed: (0..endpoints).map(|_| AtomicU8::new(UNKNOWN)).collect(),
            max_idle,
            idle_timeout,
        }
    }

    /// The HTTP/2 slot of `endpoint` (none in a pool without slots: a redirect's).
    pub(crate) fn h2(&self, endpoint: usize) -> Option<&H2Slot> {
        self.h2.get(endpoint)
    }

    /// Whether `endpoint`'s origin agreed HTTP/1.1 by ALPN.
    pub(crate) fn speaks_h1(&self, endpoint: usize) -> bool {
        self.agreed
            .get(endpoint)
            .is_some_and(|a| a.load(Ordering::Relaxed) == H1)
    }

    /// Remembers what `endpoint`'s origin agreed by ALPN.
    pub(crate) fn agreed(&self, endpoint: usize, h2: bool) {
        if let Some(a) = self.agreed.get(endpoint) {
            a.store(if h2 { H2 } else { H1 }, Ordering::Relaxed);
        }
    }

    /// The most recently used idle connection of `endpoint`, if one is fresh enough.
    pub(crate) fn take(&self, endpoint: usize, now: Instant) -> Option<Conn> {
        let slot = self.slots.get(endpoint)?;
        let mut expired = Vec::new();
        let found = {
            let mut idle = slot.lock().unwrap_or_else(|e| e.into_inner());
            let found = idle.pop();
            match found {
                Some(i) if now.saturating_duration_since(i.since) <= self.idle_timeout => {
                    Some(i.conn)
                }
                Some(i) => {
                    // The newest is too old, so are all the others.
                    expired.push(i);
                    expired.append(&mut idle);
                    None
                }
                None => None,
            }
        };
        drop(expired); // closed outside the lock
        found
    }

    /// Gives a connection back after its response was read to the end.
    pub(crate) fn put(&self, endpoint: usize, conn: Conn, now: Instant) {
        if self.max_idle == 0 || !conn.reusable() {
            return;
        }
        let Some(slot) = self.slots.get(endpoint) else {
            return;
        };
        let evicted = {
            let mut idle = slot.lock().unwrap_or_else(|e| e.into_inner());
            let evicted = if idle.len() >= self.max_idle {
                Some(idle.remove(0))
            } else {
                None
            };
            idle.push(Idle { conn, since: now });
            evicted
        };
        drop(evicted);
    }

    /// Idle connections of `endpoint` (for tests and diagnostics).
    pub(crate) fn idle(&self, endpoint: usize) -> usize {
        self.slots
            .get(endpoint)
            .map_or(0, |s| s.lock().unwrap_or_else(|e| e.into_inner()).len())
    }
}

/// An HTTP/1.1 connection lent to a response until its body has been read (an HTTP/2
/// response needs none: its connection's task reads for it).
pub(crate) struct Lease {
    pub(crate) conn: Conn,
    pub(crate) pool: Arc<Pool>,
    pub(crate) endpoint: usize,
}

impl Lease {
    /// Returns the connection to the pool.
    pub(crate) fn release(self) {
        self.pool.put(self.endpoint, self.conn, Instant::now());
    }
}
