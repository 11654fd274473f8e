//! A fault-injecting reverse proxy on `127.0.0.1` in front of a real server (a JSON-RPC
//! node in the alloy tests): two proxies in front of one node are two providers of one
//! chain, each of which can fail on its own.
//!
//! Each request read from a client is handled by the proxy's mode at that moment
//! ([`FaultMode`]): forwarded and answered, held without being forwarded (a black hole),
//! or forwarded and its answer swallowed (the node did the work; the client never hears).
//! [`FaultProxy::stop`] closes the listener and every connection: from then on a connect is
//! refused, as for a provider that went away.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::http::{read_body, read_head};
use crate::served::Served;

/// What the proxy does with each request it reads.
///
/// ```
/// assert_ne!(testkit::FaultMode::Pass, testkit::FaultMode::Swallow);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultMode {
    /// Forward it and return the answer.
    Pass,
    /// Read it and never forward or answer it (the client's timer decides).
    BlackHole,
    /// Forward it, read the answer, and never pass the answer on.
    Swallow,
}

impl FaultMode {
    fn from_u8(v: u8) -> FaultMode {
        match v {
            1 => FaultMode::BlackHole,
            2 => FaultMode::Swallow,
            _ => FaultMode::Pass,
        }
    }
}

struct Shared {
    upstream: SocketAddr,
    mode: AtomicU8,
    /// The mode applies only to requests whose body contains this (`None`: to all).
    only: Mutex<Option<String>>,
    received: AtomicUsize,
    forwarded: Mutex<Vec<String>>,
    served: Served,
}

/// A fault-injecting reverse proxy on `127.0.0.1` in front of a real server: two proxies
/// in front of one node are two providers of one chain. Each request it reads is handled
/// by its mode of the moment ([`FaultMode`]); [`FaultProxy::stop`] closes the listener and
/// every connection, so a connect is refused from then on.
///
/// ```
/// let node = testkit::Provider::start(testkit::Behaviour::ok());
/// let proxy = testkit::FaultProxy::start(node.addr());
/// assert!(proxy.url().starts_with("http://127.0.0.1:"));
/// proxy.set(testkit::FaultMode::BlackHole);
/// proxy.stop();
/// assert!(std::net::TcpStream::connect(proxy.addr()).is_err());
/// ```
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: std::sync::Mutex<Option<JoinHandle<()>>>,
}

impl FaultProxy {
    /// Binds `127.0.0.1:0` and forwards to `upstream`, in [`FaultMode::Pass`].
    ///
    /// # Panics
    /// If binding fails.
    pub fn start(upstream: SocketAddr) -> FaultProxy {
        let listener = TcpListener::bind(("127.0.0.1", 0)).expect("testkit: bind the fault proxy");
        let addr = listener.local_addr().expect("testkit: fault proxy address");
        let shared = Arc::new(Shared {
            upstream,
            mode: AtomicU8::new(0),
            only: Mutex::new(None),
            received: AtomicUsize::new(0),
            forwarded: Mutex::new(Vec::new()),
            served: Served::default(),
        });
        let s = shared.clone();
        let acceptor = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.served.stopping() {
                    return;
                }
                if let Ok(conn) = conn {
                    let per = s.clone();
                    s.served.spawn(conn, move |c| serve(&per, c));
                }
            }
        });
        FaultProxy {
            addr,
            shared,
            acceptor: std::sync::Mutex::new(Some(acceptor)),
        }
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// Handles the requests read from now on this way.
    pub fn set(&self, mode: FaultMode) {
        *crate::served::lock(&self.shared.only) = None;
        self.store(mode);
    }

    /// Handles the requests whose body contains `text` this way from now on, and passes
    /// the others (a fault for one JSON-RPC method: `"eth_sendRawTransaction"`).
    pub fn set_for(&self, mode: FaultMode, text: &str) {
        *crate::served::lock(&self.shared.only) = Some(text.to_owned());
        self.store(mode);
    }

    fn store(&self, mode: FaultMode) {
        let v = match mode {
            FaultMode::Pass => 0,
            FaultMode::BlackHole => 1,
            FaultMode::Swallow => 2,
        };
        self.shared.mode.store(v, Ordering::SeqCst);
    }

    /// Requests read from clients so far.
    pub fn received(&self) -> usize {
        self.shared.received.load(Ordering::SeqCst)
    }

    /// Requests forwarded to the upstream so far.
    pub fn forwarded(&self) -> usize {
        crate::served::lock(&self.shared.forwarded).len()
    }

    /// Requests forwarded to the upstream so far whose body contains `text`.
    pub fn forwarded_with(&self, text: &str) -> usize {
        let bodies = crate::served::lock(&self.shared.forwarded);
        bodies.iter().filter(|b| b.contains(text)).count()
    }

    /// Closes the listener and every connection (idempotent): connects are refused from
    /// now on.
    pub fn stop(&self) {
        let accept = crate::served::lock(&self.acceptor).take();
        if accept.is_some() {
            self.shared.served.stop(self.addr, accept);
        }
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One client connection: request by request, by the mode of the moment.
fn serve(s: &Shared, client: TcpStream) {
    let Ok(mut out) = client.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(client);
    let mut upstream: Option<(TcpStream, BufReader<TcpStream>)> = None;
    let mut line = Vec::new();
    while !s.served.stopping() {
        let Ok(head) = read_head(&mut reader, &mut line) else {
            return;
        };
        let Ok(body) = read_body(&mut reader, head.framing, &mut line) else {
            return;
        };
        s.received.fetch_add(1, Ordering::SeqCst);
        let text = String::from_utf8_lossy(&body).into_owned();
        let applies = crate::served::lock(&s.only)
            .as_ref()
            .is_none_or(|only| text.contains(only.as_str()));
        let mode = match applies {
            true => FaultMode::from_u8(s.mode.load(Ordering::SeqCst)),
            false => FaultMode::Pass,
        };
        if mode == FaultMode::BlackHole {
            return hold(s);
        }
        let mut request = format!(
            "{} {}{} HTTP/1.1\r\n",
            head.method,
            head.path,
            head.query
                .as_ref()
                .map(|q| format!("?{q}"))
                .unwrap_or_default()
        );
        for (n, v) in &head.headers {
            if n != "content-length" && n != "transfer-encoding" {
                request.push_str(&format!("{n}: {v}\r\n"));
            }
        }
        request.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
        let Some(answer) = forward(s, &mut upstream, request.as_bytes(), &body) else {
            return;
        };
        crate::served::lock(&s.forwarded).push(text);
        if mode == FaultMode::Swallow {
            return hold(s);
        }
        if out.write_all(&answer).is_err() {
            return;
        }
    }
}

/// Keeps the connection open and silent until the proxy stops.
fn hold(s: &Shared) {
    while !s.served.stopping() {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sends one request upstream (on a kept connection, opened when needed) and reads its
/// whole answer, returned as received.
fn forward(
    s: &Shared,
    upstream: &mut Option<(TcpStream, BufReader<TcpStream>)>,
    head: &[u8],
    body: &[u8],
) -> Option<Vec<u8>> {
    if upstream.is_none() {
        let conn = TcpStream::connect(s.upstream).ok()?;
        // A stalled upstream must not hold `stop` (which joins this thread) for ever.
        conn.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
        let reader = BufReader::new(conn.try_clone().ok()?);
        *upstream = Some((conn, reader));
    }
    let (conn, reader) = upstream.as_mut()?;
    conn.write_all(head).ok()?;
    conn.write_all(body).ok()?;
    let answer = read_answer(reader);
    if answer.is_none() {
        *upstream = None;
    }
    answer
}

/// One HTTP/1.1 response, raw: the head, then a body by `content-length` or chunked.
fn read_answer(r: &mut BufReader<TcpStream>) -> Option<Vec<u8>> {
    let mut raw = Vec::new();
    let (mut length, mut chunked) = (0usize, false);
    loop {
        let start = raw.len();
        if r.read_until(b'\n', &mut raw).ok()? == 0 {
            return None;
        }
        let line = String::from_utf8_lossy(&raw[start..])
            .trim_end()
            .to_ascii_lowercase();
        if line.is_empty() {
            break;
        }
        if let Some(v) = line.strip_prefix("content-length:") {
            length = v.trim().parse().ok()?;
        } else if line.starts_with("transfer-encoding:") && line.contains("chunked") {
            chunked = true;
        }
    }
    if !chunked {
        let start = raw.len();
        raw.resize(start + length, 0);
        r.read_exact(&mut raw[start..]).ok()?;
        return Some(raw);
    }
    loop {
        let start = raw.len();
        r.read_until(b'\n', &mut raw).ok()?;
        let size_line = String::from_utf8_lossy(&raw[start..]).trim().to_string();
        let size = usize::from_str_radix(size_line.split(';').next()?.trim(), 16).ok()?;
        let start = raw.len();
        raw.resize(start + size + 2, 0);
        r.read_exact(&mut raw[start..]).ok()?;
        if size == 0 {
            return Some(raw);
        }
    }
}
