//! The loopback HTTP/1.1 server.

use std::collections::{HashMap, VecDeque};
use std::io::{BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::behaviour::{Action, Behaviour, Prepared};
use crate::http::{self, ReadError};

/// How long [`Provider::set_behaviour`] keeps trying to re-bind the provider's port.
const REBIND_FOR: Duration = Duration::from_secs(2);

/// Holds a loopback port without listening on it: connecting is refused, and no other
/// socket can bind the port meanwhile (the reservation does not set `SO_REUSEADDR`, so the
/// kernel never hands the port to another `bind`, not even an ephemeral one). Without it a
/// refusing provider's port could be given to the next provider a test starts, and a
/// "refused" endpoint would silently answer.
pub(crate) fn reserve(addr: SocketAddr) -> std::io::Result<socket2::Socket> {
    use socket2::{Domain, Socket, Type};
    let deadline = Instant::now() + REBIND_FOR;
    loop {
        let socket = Socket::new(Domain::IPV4, Type::STREAM, None)?;
        match socket.bind(&addr.into()) {
            Ok(()) => return Ok(socket),
            // Connections the listener accepted may linger in TIME_WAIT on this port for a
            // while; wait for them rather than share the port.
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => thread::sleep(Duration::from_millis(20)),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One request as a provider received it.
///
/// ```
/// use std::io::{Read, Write};
///
/// let p = testkit::Provider::start(testkit::Behaviour::ok());
/// let mut s = std::net::TcpStream::connect(p.addr()).unwrap();
/// s.write_all(b"POST /pay?x=1 HTTP/1.1\r\nHost: a\r\nIdempotency-Key: k1\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi").unwrap();
/// s.read_to_end(&mut Vec::new()).unwrap();
///
/// let r = &p.requests()[0];
/// assert_eq!((r.method.as_str(), r.path.as_str(), r.query.as_deref()), ("POST", "/pay", Some("x=1")));
/// assert_eq!(r.header("idempotency-key"), Some("k1"));
/// assert_eq!(r.body, b"hi");
/// assert_eq!(r.connection, 1);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The method, as sent (`GET`, `POST`, ...).
    pub method: String,
    /// The path of the request target, without the query (`/v1/pay`). For an
    /// absolute-form target (`http://host/p`) only the path is kept.
    pub path: String,
    /// The query, without the `?`; `None` when the target had no `?`.
    pub query: Option<String>,
    /// Every header field in the order received, names lowercased, values with
    /// surrounding whitespace removed. Repeated fields appear repeatedly.
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked if it was sent chunked.
    pub body: Vec<u8>,
    /// When the provider had read the whole request.
    pub received_at: Instant,
    /// Which connection it came on: connections are numbered 1, 2, ... per provider in
    /// accept order.
    pub connection: u64,
}

impl Request {
    /// The value of the first header named `name` (case-insensitive).
    ///
    /// ```
    /// # let r = testkit::Request { method: "GET".into(), path: "/".into(), query: None,
    /// #     headers: vec![("x-request-id".into(), "7".into())], body: vec![],
    /// #     received_at: std::time::Instant::now(), connection: 1 };
    /// assert_eq!(r.header("X-Request-Id"), Some("7"));
    /// ```
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as text (invalid UTF-8 replaced).
    ///
    /// ```
    /// # let r = testkit::Request { method: "POST".into(), path: "/".into(), query: None,
    /// #     headers: vec![], body: b"{}".to_vec(),
    /// #     received_at: std::time::Instant::now(), connection: 1 };
    /// assert_eq!(r.body_text(), "{}");
    /// ```
    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Builds a [`Provider`] with a per-request script: the first request gets the first
/// scripted behaviour, the second the second, ..., and every later request gets the
/// default ([`otherwise`](Self::otherwise), [`Behaviour::ok`] if not set).
///
/// Requests are numbered across all connections in the order the provider finished
/// reading them.
///
/// ```
/// use testkit::{Behaviour, Provider};
///
/// let p = Provider::builder()
///     .then(Behaviour::reset())
///     .then(Behaviour::status(503).header("Retry-After", "1"))
///     .then_n(2, Behaviour::black_hole())
///     .otherwise(Behaviour::ok())
///     .start();
/// # drop(p);
/// ```
#[derive(Debug, Clone, Default)]
pub struct ProviderBuilder {
    script: Vec<Behaviour>,
    otherwise: Option<Behaviour>,
    ip: Option<std::net::Ipv4Addr>,
}

impl ProviderBuilder {
    /// Appends one scripted behaviour (for the next request number).
    ///
    /// # Panics
    /// If `behaviour` is [`Behaviour::refuse`]: refusing is a provider state.
    pub fn then(mut self, behaviour: Behaviour) -> Self {
        assert_scriptable(&behaviour);
        self.script.push(behaviour);
        self
    }

    /// Appends `n` copies of a scripted behaviour.
    ///
    /// # Panics
    /// If `behaviour` is [`Behaviour::refuse`].
    pub fn then_n(mut self, n: usize, behaviour: Behaviour) -> Self {
        assert_scriptable(&behaviour);
        self.script.extend(std::iter::repeat_n(behaviour, n));
        self
    }

    /// The behaviour for every request after the script (default [`Behaviour::ok`]).
    pub fn otherwise(mut self, behaviour: Behaviour) -> Self {
        self.otherwise = Some(behaviour);
        self
    }

    /// Listens on another loopback address than `127.0.0.1` (say `127.0.0.2`, another
    /// host for tests of what crosses hosts). Only addresses in `127.0.0.0/8` are taken.
    ///
    /// # Panics
    /// If `ip` is not a loopback address.
    ///
    /// ```
    /// let p = testkit::Provider::builder().ip([127, 0, 0, 2].into()).start();
    /// assert!(p.url().starts_with("http://127.0.0.2:"));
    /// ```
    pub fn ip(mut self, ip: std::net::Ipv4Addr) -> Self {
        assert!(ip.is_loopback(), "testkit: {ip} is not a loopback address");
        self.ip = Some(ip);
        self
    }

    /// Binds `127.0.0.1:0` (or the address given with [`ip`](Self::ip)) and starts
    /// serving.
    ///
    /// # Panics
    /// If binding fails, or if the default is [`Behaviour::refuse`] after a non-empty
    /// script.
    pub fn start(self) -> Provider {
        let ip = self.ip.unwrap_or(std::net::Ipv4Addr::LOCALHOST);
        Provider::start_with(self.script, self.otherwise.unwrap_or_default(), ip)
    }
}

fn assert_scriptable(b: &Behaviour) {
    assert!(
        !b.is_refuse(),
        "testkit: Behaviour::refuse() is a provider state, not a per-request fault; \
         use Provider::set_behaviour(Behaviour::refuse())"
    );
}

/// The behaviours a provider applies, in request order.
struct Plan {
    script: VecDeque<Arc<Prepared>>,
    default: Arc<Prepared>,
}

impl Plan {
    fn new(script: Vec<Behaviour>, default: &Behaviour) -> Self {
        for b in &script {
            assert_scriptable(b);
        }
        assert!(
            script.is_empty() || !default.is_refuse(),
            "testkit: Behaviour::refuse() can only be the default of an empty script"
        );
        Plan {
            script: script.iter().map(|b| Arc::new(b.prepare())).collect(),
            default: Arc::new(default.prepare()),
        }
    }

    fn refusing(&self) -> bool {
        self.script.is_empty() && self.default.action == Action::Refuse
    }

    fn peek(&self) -> &Arc<Prepared> {
        self.script.front().unwrap_or(&self.default)
    }

    fn next(&mut self) -> Arc<Prepared> {
        self.script
            .pop_front()
            .unwrap_or_else(|| Arc::clone(&self.default))
    }
}

#[derive(Default)]
struct Log {
    requests: Vec<Request>,
    count: usize,
}

#[derive(Default)]
struct Conns {
    /// A clone of every open connection, to shut them down from outside.
    streams: HashMap<u64, TcpStream>,
    /// Every connection thread not yet joined.
    threads: Vec<JoinHandle<()>>,
}

/// State shared by the provider handle, the accept thread and the connection threads.
struct Shared {
    plan: Mutex<Plan>,
    log: Mutex<Log>,
    log_changed: Condvar,
    conns: Mutex<Conns>,
    connections: AtomicU64,
    recording: AtomicBool,
    /// Set when the provider is dropped; wakes delayed connection threads.
    closing: Mutex<bool>,
    closing_changed: Condvar,
}

impl Shared {
    /// Sleeps for `d` unless the provider is dropped first; returns whether it is.
    fn sleep(&self, d: Duration) -> bool {
        let deadline = Instant::now() + d;
        let mut closing = lock(&self.closing);
        while !*closing {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            closing = self
                .closing_changed
                .wait_timeout(closing, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        true
    }

    fn is_closing(&self) -> bool {
        *lock(&self.closing)
    }

    fn shutdown_connections(&self) {
        for s in lock(&self.conns).streams.values() {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    fn forget(&self, id: u64) {
        lock(&self.conns).streams.remove(&id);
    }

    fn record(&self, request: Request) {
        let mut log = lock(&self.log);
        log.count += 1;
        if self.recording.load(Ordering::Relaxed) {
            log.requests.push(request);
        }
        drop(log);
        self.log_changed.notify_all();
    }
}

/// The running accept loop of a provider that is listening.
struct Acceptor {
    stop: Arc<AtomicBool>,
    /// A clone of the listening socket, to wake the loop if connecting to it fails.
    listener: TcpListener,
    thread: JoinHandle<()>,
}

impl Acceptor {
    fn spawn(listener: TcpListener, shared: &Arc<Shared>) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let clone = listener.try_clone()?;
        let (stop2, shared) = (Arc::clone(&stop), Arc::clone(shared));
        let thread = thread::Builder::new()
            .name("testkit-accept".into())
            .spawn(move || accept_loop(&listener, &stop2, &shared))?;
        Ok(Acceptor {
            stop,
            listener: clone,
            thread,
        })
    }

    /// Stops the loop and closes the listening socket.
    fn stop(self, addr: SocketAddr) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept by connecting to it; if that fails, shut the listening
        // socket down (which wakes accept on Linux).
        if TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err() {
            let _ = socket2::SockRef::from(&self.listener).shutdown(Shutdown::Both);
        }
        let _ = self.thread.join();
        // Dropping `self.listener` closes the last descriptor of the listening socket.
    }
}

fn accept_loop(listener: &TcpListener, stop: &AtomicBool, shared: &Arc<Shared>) {
    loop {
        let accepted = listener.accept();
        if stop.load(Ordering::SeqCst) {
            return;
        }
        match accepted {
            Ok((stream, _)) => spawn_connection(stream, shared),
            // e.g. too many open files: back off briefly.
            Err(_) => thread::sleep(Duration::from_millis(5)),
        }
    }
}

fn spawn_connection(stream: TcpStream, shared: &Arc<Shared>) {
    let id = shared.connections.fetch_add(1, Ordering::SeqCst) + 1;
    let _ = stream.set_nodelay(true);
    let Ok(registered) = stream.try_clone() else {
        return;
    };
    let mut conns = lock(&shared.conns);
    conns.threads.retain(|t| !t.is_finished());
    conns.streams.insert(id, registered);
    let shared2 = Arc::clone(shared);
    let spawned = thread::Builder::new()
        .name(format!("testkit-conn-{id}"))
        .spawn(move || {
            serve(&shared2, id, stream);
            shared2.forget(id);
        });
    match spawned {
        Ok(t) => conns.threads.push(t),
        Err(_) => {
            conns.streams.remove(&id);
        }
    }
}

/// Reads until the peer closes or the connection is shut down, discarding the bytes.
fn drain(stream: &mut impl Read) {
    let mut buf = [0u8; 4096];
    while matches!(stream.read(&mut buf), Ok(n) if n > 0) {}
}

/// How long a closing connection keeps reading what the client still sends, so that
/// closing with unread data does not turn into a reset that could destroy the response.
const LINGER: Duration = Duration::from_millis(500);

/// Closes the connection gracefully: FIN now, then reads (and discards) until the client
/// closes too, for at most [`LINGER`].
fn finish(out: &TcpStream, reader: &mut BufReader<TcpStream>) {
    if out.shutdown(Shutdown::Write).is_err() {
        return;
    }
    let deadline = Instant::now() + LINGER;
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || out.set_read_timeout(Some(left)).is_err() {
            return;
        }
        if !matches!(reader.read(&mut buf), Ok(n) if n > 0) {
            return;
        }
    }
}

/// Serves one connection until it closes.
fn serve(shared: &Shared, id: u64, stream: TcpStream) {
    let Ok(mut out) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::with_capacity(16 * 1024, stream);
    let mut line = Vec::with_capacity(256);
    loop {
        let head = match http::read_head(&mut reader, &mut line) {
            Ok(head) => head,
            Err(ReadError::Malformed) => {
                let _ = out.write_all(
                    b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                );
                finish(&out, &mut reader);
                return;
            }
            Err(ReadError::Closed | ReadError::Io) => return,
        };
        let send_continue =
            head.expects_continue() && lock(&shared.plan).peek().action != Action::BlackHole;
        if send_continue && out.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").is_err() {
            return;
        }
        let body = match http::read_body(&mut reader, head.framing, &mut line) {
            Ok(body) => body,
            Err(ReadError::Malformed) => {
                let _ = out.write_all(
                    b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                );
                finish(&out, &mut reader);
                return;
            }
            Err(_) => return,
        };
        let keep_alive = head.keep_alive();
        let is_head = head.method == "HEAD";

        let behaviour = lock(&shared.plan).next();
        if behaviour.action == Action::Refuse {
            // Only reachable in the instant the provider switches to refusing.
            return;
        }
        shared.record(Request {
            method: head.method,
            path: head.path,
            query: head.query,
            headers: head.headers,
            body,
            received_at: Instant::now(),
            connection: id,
        });

        if !behaviour.delay.is_zero() && shared.sleep(behaviour.delay) {
            return;
        }
        let close = !keep_alive || behaviour.close_after;
        let wire = if close {
            &behaviour.closing
        } else {
            &behaviour.keep_alive
        };
        match behaviour.action {
            Action::Respond => {
                let bytes = if is_head {
                    &wire.bytes[..wire.head_len]
                } else {
                    &wire.bytes[..]
                };
                if out.write_all(bytes).is_err() {
                    return;
                }
                if close {
                    finish(&out, &mut reader);
                    return;
                }
            }
            Action::StallAfterHeaders => {
                if out.write_all(&wire.bytes[..wire.head_len]).is_ok() {
                    drain(&mut reader);
                }
                return;
            }
            Action::HalfBodyThenClose => {
                let half = (wire.bytes.len() - wire.head_len) / 2;
                let _ = out.write_all(&wire.bytes[..wire.head_len + half]);
                finish(&out, &mut reader);
                return;
            }
            Action::UnframedHalfBodyThenReset => {
                // The closing form: its head says `connection: close`.
                let wire = &behaviour.closing;
                let half = (wire.bytes.len() - wire.head_len) / 2;
                let _ = out.write_all(&wire.bytes[..wire.head_len + half]);
                std::thread::sleep(Duration::from_millis(50));
                let _ = socket2::SockRef::from(&out).set_linger(Some(Duration::ZERO));
                shared.forget(id);
                return;
            }
            Action::Close => {
                finish(&out, &mut reader);
                return;
            }
            Action::Reset => {
                let _ = socket2::SockRef::from(&out).set_linger(Some(Duration::ZERO));
                // Close every descriptor of the socket so the RST goes out now.
                shared.forget(id);
                return;
            }
            Action::BlackHole => {
                drain(&mut reader);
                return;
            }
            Action::Refuse => return,
        }
        if shared.is_closing() {
            return;
        }
    }
}

/// A fault-injecting HTTP/1.1 server on `127.0.0.1` with an ephemeral port.
///
/// Each accepted connection gets its own thread; requests on a connection are served in
/// order (keep-alive and pipelining work, `Connection: close` and HTTP/1.0 are
/// honoured). Every request is recorded *before* its behaviour is applied.
///
/// Dropping the provider stops the accept loop, closes the listening port, shuts down
/// every open connection (including stalled and black-holed ones) and joins every
/// thread it started.
///
/// `Provider` is `Send + Sync`: share it with `Arc` if several tasks need it.
///
/// ```
/// use std::io::{Read, Write};
/// use testkit::{Behaviour, Provider};
///
/// let p = Provider::start(Behaviour::status(200).body("ok"));
/// assert!(p.url().starts_with("http://127.0.0.1:"));
///
/// let mut s = std::net::TcpStream::connect(p.addr()).unwrap();
/// s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
/// let mut answer = String::new();
/// s.read_to_string(&mut answer).unwrap();
/// assert!(answer.starts_with("HTTP/1.1 200 OK\r\n") && answer.ends_with("\r\n\r\nok"));
/// assert_eq!(p.request_count(), 1);
///
/// // Run-time switching keeps the same port.
/// p.set_behaviour(Behaviour::refuse());
/// assert!(std::net::TcpStream::connect(p.addr()).is_err());
/// p.set_behaviour(Behaviour::ok());
/// assert!(std::net::TcpStream::connect(p.addr()).is_ok());
/// ```
pub struct Provider {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Mutex<Option<Acceptor>>,
    /// While refusing: the port, held without listening.
    reserved: Mutex<Option<socket2::Socket>>,
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provider")
            .field("addr", &self.addr)
            .field("listening", &lock(&self.acceptor).is_some())
            .field("requests", &self.request_count())
            .finish()
    }
}

impl Provider {
    /// Starts a provider that applies `behaviour` to every request.
    ///
    /// # Panics
    /// If binding `127.0.0.1:0` fails.
    ///
    /// ```
    /// let p = testkit::Provider::start(testkit::Behaviour::status(503));
    /// # drop(p);
    /// ```
    pub fn start(behaviour: Behaviour) -> Provider {
        Provider::start_with(Vec::new(), behaviour, std::net::Ipv4Addr::LOCALHOST)
    }

    /// A builder for a provider with a per-request script.
    ///
    /// ```
    /// let p = testkit::Provider::builder()
    ///     .then(testkit::Behaviour::status(500))
    ///     .start();
    /// # drop(p);
    /// ```
    pub fn builder() -> ProviderBuilder {
        ProviderBuilder::default()
    }

    fn start_with(script: Vec<Behaviour>, default: Behaviour, ip: std::net::Ipv4Addr) -> Provider {
        let plan = Plan::new(script, &default);
        let refusing = plan.refusing();
        let (listener, reserved, addr) = if refusing {
            let any: SocketAddr = (ip, 0).into();
            let socket = reserve(any).expect("testkit: reserve a port on 127.0.0.1");
            let addr = socket
                .local_addr()
                .ok()
                .and_then(|a| a.as_socket())
                .expect("testkit: local_addr");
            (None, Some(socket), addr)
        } else {
            let listener = TcpListener::bind((ip, 0)).expect("testkit: bind a loopback port");
            let addr = listener.local_addr().expect("testkit: local_addr");
            (Some(listener), None, addr)
        };
        let shared = Arc::new(Shared {
            plan: Mutex::new(plan),
            log: Mutex::new(Log::default()),
            log_changed: Condvar::new(),
            conns: Mutex::new(Conns::default()),
            connections: AtomicU64::new(0),
            recording: AtomicBool::new(true),
            closing: Mutex::new(false),
            closing_changed: Condvar::new(),
        });
        let acceptor =
            listener.map(|l| Acceptor::spawn(l, &shared).expect("testkit: spawn accept thread"));
        Provider {
            addr,
            shared,
            acceptor: Mutex::new(acceptor),
            reserved: Mutex::new(reserved),
        }
    }

    /// The listening address, `127.0.0.1:PORT`. It stays the same for the provider's
    /// whole life, also across [`Behaviour::refuse`] and back.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The base URL, `http://127.0.0.1:PORT` (no trailing slash).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Replaces the plan: every later request gets `behaviour` (any script left is
    /// dropped). Connections that are open stay open and get the new behaviour on their
    /// next request, except:
    ///
    /// * switching to [`Behaviour::refuse`] closes the listening port and shuts down
    ///   every open connection (like a crashed process);
    /// * switching from it re-binds the same port (with `SO_REUSEADDR`, as std does on
    ///   Unix, so connections in `TIME_WAIT` do not block it).
    ///
    /// # Panics
    /// If the port cannot be re-bound within 2 s. This is rare: it happens only if
    /// another socket took the port while the provider was refusing.
    ///
    /// ```
    /// let p = testkit::Provider::start(testkit::Behaviour::ok());
    /// p.set_behaviour(testkit::Behaviour::black_hole());
    /// # drop(p);
    /// ```
    pub fn set_behaviour(&self, behaviour: Behaviour) {
        self.set_script(Vec::new(), behaviour);
    }

    /// Replaces the plan with a new script: the next request (counted from now) gets
    /// `script[0]`, and so on; afterwards every request gets `otherwise`. Same rules as
    /// [`set_behaviour`](Self::set_behaviour).
    ///
    /// # Panics
    /// If the script contains [`Behaviour::refuse`], if `otherwise` is `refuse` after a
    /// non-empty script, or if re-binding the port fails.
    ///
    /// ```
    /// use testkit::{Behaviour, Provider};
    /// let p = Provider::start(Behaviour::ok());
    /// p.set_script([Behaviour::status(503), Behaviour::reset()], Behaviour::ok());
    /// # drop(p);
    /// ```
    pub fn set_script(&self, script: impl IntoIterator<Item = Behaviour>, otherwise: Behaviour) {
        let plan = Plan::new(script.into_iter().collect(), &otherwise);
        let refusing = plan.refusing();
        let mut acceptor = lock(&self.acceptor);
        *lock(&self.shared.plan) = plan;
        match (refusing, acceptor.is_some()) {
            (true, true) => {
                if let Some(a) = acceptor.take() {
                    a.stop(self.addr);
                }
                self.shared.shutdown_connections();
                // Keep the port: refused, and not given to anyone else. If lingering
                // connections keep it busy past the retry window, refusing still works;
                // only the reservation is missing.
                *lock(&self.reserved) = reserve(self.addr).ok();
            }
            (false, false) => {
                drop(lock(&self.reserved).take());
                let listener = rebind(self.addr).unwrap_or_else(|e| {
                    panic!(
                        "testkit: could not re-bind {} (another socket took the port?): {e}",
                        self.addr
                    )
                });
                *acceptor = Some(Acceptor::spawn(listener, &self.shared).expect("testkit: spawn"));
            }
            _ => {}
        }
    }

    /// Turns request recording on or off (on by default). While off,
    /// [`request_count`](Self::request_count) still counts but
    /// [`requests`](Self::requests) stays unchanged; turn it off for long benchmarks.
    ///
    /// ```
    /// let p = testkit::Provider::start(testkit::Behaviour::ok());
    /// p.set_recording(false);
    /// # drop(p);
    /// ```
    pub fn set_recording(&self, on: bool) {
        self.shared.recording.store(on, Ordering::Relaxed);
    }

    /// A copy of every recorded request, in the order they were read.
    ///
    /// ```
    /// let p = testkit::Provider::start(testkit::Behaviour::ok());
    /// assert!(p.requests().is_empty());
    /// ```
    pub fn requests(&self) -> Vec<Request> {
        lock(&self.shared.log).requests.clone()
    }

    /// How many requests the provider has read since it started or since
    /// [`clear`](Self::clear) (whatever their behaviour; counted also while recording is
    /// off).
    ///
    /// ```
    /// let p = testkit::Provider::start(testkit::Behaviour::ok());
    /// assert_eq!(p.request_count(), 0);
    /// ```
    pub fn request_count(&self) -> usize {
        lock(&self.shared.log).count
    }

    /// How many recorded requests carry a header `name` (case-insensitive) whose value is
    /// exactly `value`, e.g. how many times one idempotency key was executed here.
    ///
    /// ```
    /// let p = testkit::Provider::start(testkit::Behaviour::ok());
    /// assert_eq!(p.count_with_header("idempotency-key", "k1"), 0);
    /// ```
    pub fn count_with_header(&self, name: &str, value: &str) -> usize {
        lock(&self.shared.log)
            .requests
            .iter()
            .filter(|r| {
                r.headers
                    .iter()
                    .any(|(n, v)| n.eq_ignore_ascii_case(name) && v == value)
            })
            .count()
    }

    /// Forgets every recorded request and resets [`request_count`](Self::request_count)
    /// to 0. Does not change the plan or the connection numbering.
    ///
    /// ```
    /// let p = testkit::Provider::start(testkit::Behaviour::ok());
    /// p.clear();
    /// ```
    pub fn clear(&self) {
        let mut log = lock(&self.shared.log);
        log.requests.clear();
        log.count = 0;
    }

    /// Waits until [`request_count`](Self::request_count) is at least `n`, at most for
    /// `timeout`; returns whether it got there. Handy when the client gave up (timeout)
    /// before the provider finished reading.
    ///
    /// ```
    /// let p = testkit::Provider::start(testkit::Behaviour::ok());
    /// assert!(!p.wait_for_requests(1, std::time::Duration::from_millis(10)));
    /// ```
    pub fn wait_for_requests(&self, n: usize, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut log = lock(&self.shared.log);
        while log.count < n {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            log = self
                .shared
                .log_changed
                .wait_timeout(log, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        true
    }

    /// How many connections the provider has accepted so far (the highest
    /// [`Request::connection`] number).
    ///
    /// ```
    /// let p = testkit::Provider::start(testkit::Behaviour::ok());
    /// assert_eq!(p.connection_count(), 0);
    /// ```
    pub fn connection_count(&self) -> u64 {
        self.shared.connections.load(Ordering::SeqCst)
    }
}

fn rebind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let deadline = Instant::now() + REBIND_FOR;
    loop {
        match TcpListener::bind(addr) {
            Ok(l) => return Ok(l),
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => thread::sleep(Duration::from_millis(20)),
        }
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        *lock(&self.shared.closing) = true;
        self.shared.closing_changed.notify_all();
        if let Some(a) = lock(&self.acceptor).take() {
            a.stop(self.addr);
        }
        // No new connection can appear now: shut down the open ones and join them all.
        let threads = {
            let mut conns = lock(&self.shared.conns);
            for s in conns.streams.values() {
                let _ = s.shutdown(Shutdown::Both);
            }
            std::mem::take(&mut conns.threads)
        };
        for t in threads {
            let _ = t.join();
        }
    }
}
