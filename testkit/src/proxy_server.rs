//! A forward proxy on `127.0.0.1` for tests of proxy routing (SPEC 3): absolute-form
//! requests (`GET http://host:port/path HTTP/1.1`) are forwarded to their target, one
//! request per connection; `CONNECT host:port` opens a tunnel. Every request line and its
//! headers are recorded before anything is forwarded, so a test can tell how a client used
//! the proxy and what the proxy saw (credentials must only be inside tunnels).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// What the proxy received: the request line's method and target, and the headers
/// (names lowercased) of a forwarded request or of a `CONNECT`.
///
/// ```
/// let r = testkit::ProxyRequest {
///     method: "CONNECT".into(),
///     target: "127.0.0.1:443".into(),
///     headers: vec![("host".into(), "127.0.0.1:443".into())],
/// };
/// assert_eq!(r.header("Host"), Some("127.0.0.1:443"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyRequest {
    /// `GET`, `POST`, `CONNECT`, ...
    pub method: String,
    /// The request target as sent: `http://host:port/path` or `host:port`.
    pub target: String,
    /// Headers, names lowercased.
    pub headers: Vec<(String, String)>,
}

impl ProxyRequest {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A recording forward proxy; stops when dropped.
///
/// ```
/// use std::io::{Read, Write};
/// let upstream = testkit::Provider::start(testkit::Behaviour::ok().body("hi"));
/// let proxy = testkit::ProxyServer::start();
/// let mut s = std::net::TcpStream::connect(proxy.addr()).unwrap();
/// write!(s, "GET {}/x HTTP/1.1\r\nhost: {}\r\n\r\n", upstream.url(), upstream.addr()).unwrap();
/// let mut out = String::new();
/// s.read_to_string(&mut out).unwrap();
/// assert!(out.ends_with("hi"));
/// assert!(proxy.requests()[0].target.starts_with("http://127.0.0.1:"));
/// ```
pub struct ProxyServer {
    addr: SocketAddr,
    log: Arc<Mutex<Vec<ProxyRequest>>>,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl ProxyServer {
    /// Binds `127.0.0.1:0` and starts serving.
    ///
    /// # Panics
    /// If binding fails.
    pub fn start() -> ProxyServer {
        let listener = TcpListener::bind(("127.0.0.1", 0)).expect("testkit: bind the proxy");
        let addr = listener.local_addr().expect("testkit: proxy address");
        let log = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (l, s) = (log.clone(), stop.clone());
        let acceptor = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::Acquire) {
                    return;
                }
                if let Ok(conn) = conn {
                    let l = l.clone();
                    std::thread::spawn(move || serve(conn, &l));
                }
            }
        });
        ProxyServer {
            addr,
            log,
            stop,
            acceptor: Some(acceptor),
        }
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<ProxyRequest> {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

impl Drop for ProxyServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
    }
}

fn serve(conn: TcpStream, log: &Mutex<Vec<ProxyRequest>>) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let Ok(read_half) = conn.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(read_half);
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let mut parts = line.split_whitespace();
    let (method, target) = match (parts.next(), parts.next()) {
        (Some(m), Some(t)) => (m.to_string(), t.to_string()),
        _ => return,
    };
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 {
            return;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((n, v)) = h.split_once(':') {
            headers.push((n.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    if let Ok(mut l) = log.lock() {
        l.push(ProxyRequest {
            method: method.clone(),
            target: target.clone(),
            headers: headers.clone(),
        });
    }
    if method == "CONNECT" {
        tunnel(conn, reader, &target);
    } else {
        forward(conn, reader, &method, &target, &headers);
    }
}

fn tunnel(mut conn: TcpStream, reader: BufReader<TcpStream>, target: &str) {
    let Ok(upstream) = TcpStream::connect(target) else {
        let _ = conn.write_all(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n");
        return;
    };
    if conn
        .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        .is_err()
    {
        return;
    }
    pipe(reader, upstream, conn);
}

fn forward(
    mut conn: TcpStream,
    mut reader: BufReader<TcpStream>,
    method: &str,
    target: &str,
    headers: &[(String, String)],
) {
    let Some(rest) = target.strip_prefix("http://") else {
        let _ = conn.write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n");
        return;
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let len: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; len];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let Ok(mut upstream) = TcpStream::connect(authority) else {
        let _ = conn.write_all(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n");
        return;
    };
    let mut head = format!("{method} {path} HTTP/1.1\r\n");
    for (n, v) in headers {
        if !matches!(
            n.as_str(),
            "proxy-authorization" | "proxy-connection" | "connection"
        ) {
            head.push_str(&format!("{n}: {v}\r\n"));
        }
    }
    head.push_str("connection: close\r\n\r\n");
    if upstream.write_all(head.as_bytes()).is_err() || upstream.write_all(&body).is_err() {
        return;
    }
    let _ = std::io::copy(&mut upstream, &mut conn);
    let _ = conn.shutdown(std::net::Shutdown::Both);
}

/// Copies both ways until either side closes.
fn pipe(mut from_client: BufReader<TcpStream>, upstream: TcpStream, mut to_client: TcpStream) {
    let Ok(mut up_read) = upstream.try_clone() else {
        return;
    };
    let mut up_write = upstream;
    let t = std::thread::spawn(move || {
        let _ = std::io::copy(&mut from_client, &mut up_write);
        let _ = up_write.shutdown(std::net::Shutdown::Write);
    });
    let _ = std::io::copy(&mut up_read, &mut to_client);
    let _ = to_client.shutdown(std::net::Shutdown::Both);
    let _ = t.join();
}
