//! An event-stream provider: a real HTTP/1.1 server on `127.0.0.1:0` that serves one feed
//! of Server-Sent Events, resumes from `Last-Event-ID` when it issued that id, and meets
//! each connection with a scripted fault.
//!
//! ```
//! use std::time::Duration;
//! use testkit::sse::{Conn, EventServer, Ids};
//! let server = EventServer::builder("a", 5)
//!     .ids(Ids::Shared)
//!     .interval(Duration::from_millis(1))
//!     .then(Conn::MidEvent(2))
//!     .start();
//! assert!(server.url().starts_with("http://127.0.0.1:"));
//! ```

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What one connection meets (connections are numbered from 0 in arrival order; after the
/// script, [`Conn::Live`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conn {
    /// `n` events, then the server closes the body cleanly.
    Events(usize),
    /// `n` events, half of the next, then a TCP reset.
    MidEvent(usize),
    /// `n` events, then silence with the connection held open (until the server stops).
    BlackHole(usize),
    /// `503` with `Retry-After: secs`, no body.
    Busy(u64),
    /// Every remaining event, then a clean close; a connection that resumes after the last
    /// event is answered `204` (the feed is over).
    Live,
}

/// Whose ids the events carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ids {
    /// The feed position (`"3"`): every server of one feed issues the same ids.
    Shared,
    /// The server's name and the position (`"a-3"`): ids mean nothing elsewhere.
    Own,
    /// No ids at all.
    None,
}

/// What the server saw of one connection.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The request method.
    pub method: String,
    /// Its `Last-Event-ID`, if any.
    pub last_event_id: Option<String>,
    /// Its `Accept`, if any.
    pub accept: Option<String>,
    /// When the request was read.
    pub at: Instant,
    /// What the connection met.
    pub conn: Conn,
    /// The feed position it started at.
    pub from: usize,
    /// When the fault struck (the close, reset or start of silence), if it did.
    pub cut_at: Option<Instant>,
}

/// Builds an [`EventServer`].
#[derive(Debug)]
pub struct EventServerBuilder {
    name: String,
    feed: usize,
    ids: Ids,
    interval: Duration,
    script: Vec<Conn>,
}

impl EventServerBuilder {
    /// Whose ids the events carry (default [`Ids::Shared`]).
    pub fn ids(mut self, ids: Ids) -> Self {
        self.ids = ids;
        self
    }

    /// The pause before each event (default 5 ms).
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// The next connection meets `conn`.
    pub fn then(mut self, conn: Conn) -> Self {
        self.script.push(conn);
        self
    }

    /// Binds `127.0.0.1:0` and serves.
    ///
    /// # Panics
    /// If no loopback port can be bound.
    pub fn start(self) -> EventServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let shared = Arc::new(Shared {
            cfg: self,
            stop: AtomicBool::new(false),
            seen: Mutex::new(Vec::new()),
            open: Mutex::new(Vec::new()),
            threads: Mutex::new(Vec::new()),
        });
        let s = shared.clone();
        let accept = std::thread::spawn(move || accept_loop(&listener, &s));
        EventServer {
            addr,
            shared,
            accept: Some(accept),
        }
    }
}

struct Shared {
    cfg: EventServerBuilder,
    stop: AtomicBool,
    seen: Mutex<Vec<Seen>>,
    /// A second handle of each open connection (by number), to reset it on kill.
    open: Mutex<Vec<(usize, TcpStream)>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

/// A running event-stream provider; dropping it (or [`EventServer::kill`]) resets every
/// open connection and closes the port.
pub struct EventServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for EventServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventServer")
            .field("name", &self.shared.cfg.name)
            .field("addr", &self.addr)
            .finish()
    }
}

impl EventServer {
    /// A server named `name` (its ids with [`Ids::Own`]) with a feed of `feed` events
    /// whose data is `event N`.
    pub fn builder(name: &str, feed: usize) -> EventServerBuilder {
        EventServerBuilder {
            name: name.to_string(),
            feed,
            ids: Ids::Shared,
            interval: Duration::from_millis(5),
            script: Vec::new(),
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every connection so far, in arrival order.
    pub fn seen(&self) -> Vec<Seen> {
        self.shared.seen.lock().unwrap().clone()
    }

    /// The provider dies: open connections are reset, and connecting is refused from now.
    pub fn kill(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr); // wakes the accept loop
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
        for (_, s) in self.shared.open.lock().unwrap().drain(..) {
            let _ = socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO));
            let _ = s.shutdown(Shutdown::Both);
        }
        let threads: Vec<_> = self.shared.threads.lock().unwrap().drain(..).collect();
        for t in threads {
            let _ = t.join();
        }
    }
}

impl Drop for EventServer {
    fn drop(&mut self) {
        self.kill();
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    for (n, stream) in listener.incoming().enumerate() {
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(stream) = stream else { continue };
        let _ = stream.set_nodelay(true);
        if let Ok(c) = stream.try_clone() {
            shared.open.lock().unwrap().push((n, c));
        }
        let s = shared.clone();
        let t = std::thread::spawn(move || {
            let _ = serve(stream, n, &s);
            // Both handles gone: the socket closes now (with a reset after `MidEvent`).
            s.open.lock().unwrap().retain(|(k, _)| *k != n);
        });
        shared.threads.lock().unwrap().push(t);
    }
}

struct Head {
    method: String,
    headers: Vec<(String, String)>,
}

fn read_head(stream: &TcpStream) -> std::io::Result<Head> {
    let mut r = BufReader::new(stream);
    let mut line = String::new();
    r.read_line(&mut line)?;
    let method = line.split(' ').next().unwrap_or("").to_string();
    let mut headers = Vec::new();
    let mut length = 0usize;
    loop {
        line.clear();
        if r.read_line(&mut line)? == 0 || line.trim_end().is_empty() {
            break;
        }
        if let Some((k, v)) = line.trim_end().split_once(':') {
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim().to_string());
            if k == "content-length" {
                length = v.parse().unwrap_or(0);
            }
            headers.push((k, v));
        }
    }
    let mut body = vec![0; length];
    r.read_exact(&mut body)?;
    Ok(Head { method, headers })
}

fn id_of(cfg: &EventServerBuilder, pos: usize) -> Option<String> {
    match cfg.ids {
        Ids::Shared => Some(pos.to_string()),
        Ids::Own => Some(format!("{}-{pos}", cfg.name)),
        Ids::None => None,
    }
}

fn event_bytes(cfg: &EventServerBuilder, pos: usize) -> Vec<u8> {
    let id = id_of(cfg, pos)
        .map(|i| format!("id: {i}\n"))
        .unwrap_or_default();
    format!("{id}data: event {pos}\n\n").into_bytes()
}

fn serve(mut stream: TcpStream, n: usize, shared: &Shared) -> std::io::Result<()> {
    let head = read_head(&stream)?;
    let cfg = &shared.cfg;
    let header = |name: &str| {
        head.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let last = header("last-event-id");
    let from = last
        .as_deref()
        .and_then(|l| (0..cfg.feed).find(|p| id_of(cfg, *p).as_deref() == Some(l)))
        .map_or(0, |p| p + 1);
    let conn = cfg.script.get(n).copied().unwrap_or(Conn::Live);
    let index = {
        let mut seen = shared.seen.lock().unwrap();
        seen.push(Seen {
            method: head.method.clone(),
            last_event_id: last,
            accept: header("accept"),
            at: Instant::now(),
            conn,
            from,
            cut_at: None,
        });
        seen.len() - 1
    };
    let cut = |shared: &Shared| shared.seen.lock().unwrap()[index].cut_at = Some(Instant::now());
    if let Conn::Busy(secs) = conn {
        let head = format!("HTTP/1.1 503 Service Unavailable\r\nRetry-After: {secs}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        return stream.write_all(head.as_bytes());
    }
    if from >= cfg.feed && conn == Conn::Live {
        return stream.write_all(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n");
    }
    stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n: open\n\n")?;
    let count = match conn {
        Conn::Events(k) | Conn::MidEvent(k) | Conn::BlackHole(k) => k,
        _ => cfg.feed,
    };
    for pos in from..(from + count).min(cfg.feed) {
        std::thread::sleep(cfg.interval);
        if shared.stop.load(Ordering::SeqCst) {
            return Ok(());
        }
        stream.write_all(&event_bytes(cfg, pos))?;
    }
    match conn {
        Conn::MidEvent(_) => {
            let next = event_bytes(cfg, from + count);
            stream.write_all(&next[..next.len() / 2])?;
            std::thread::sleep(Duration::from_millis(5));
            cut(shared);
            let _ = socket2::SockRef::from(&stream).set_linger(Some(Duration::ZERO));
            Ok(())
        }
        Conn::BlackHole(_) => {
            cut(shared);
            while !shared.stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(10));
            }
            Ok(())
        }
        _ => {
            cut(shared);
            stream.shutdown(Shutdown::Write)
        }
    }
}
