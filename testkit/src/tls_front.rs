//! TLS in front of plain providers: a [`TlsFront`] terminates TLS on its own port and
//! forwards each connection's bytes to a plain upstream chosen by ALPN (`h2` to an
//! [`H2Provider`](crate::H2Provider), `http/1.1` or no ALPN to a [`Provider`](crate::Provider)),
//! so every fault of the upstream reaches the client through TLS unchanged: a reset
//! upstream is a reset (RST) toward the client, a close is a close.
//!
//! It counts handshakes that completed and handshakes that failed (a certificate the
//! client rejected, a client identity that is missing or refused): a connection whose
//! handshake failed reaches no upstream, so nothing is processed.
//!
//! ```
//! use testkit::{Behaviour, Provider, TestPki, TlsFront};
//! let pki = TestPki::new();
//! let plain = Provider::start(Behaviour::ok());
//! let front = TlsFront::start(pki.server_config(&pki.server, &["http/1.1"], false), Some(plain.addr()), None);
//! assert!(front.url().starts_with("https://127.0.0.1:"));
//! ```

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::served::{lock, Served};
use std::thread::JoinHandle;
use std::time::Duration;

use rustls::{ServerConfig, ServerConnection};

/// One server-side TLS connection, readable on one thread and writable from another: the
/// rustls state is shared behind a lock, each thread holds its own handle of the socket.
pub(crate) struct TlsConn {
    conn: Arc<Mutex<ServerConnection>>,
    raw: TcpStream,
    out: TcpStream,
}

/// The writing half of a [`TlsConn`].
#[derive(Clone)]
pub(crate) struct TlsWriter {
    conn: Arc<Mutex<ServerConnection>>,
    out: Arc<TcpStream>,
}

impl TlsConn {
    /// Runs the server side of the handshake on `stream`. A failed handshake sends its
    /// alert and is an error.
    pub(crate) fn accept(config: Arc<ServerConfig>, stream: TcpStream) -> io::Result<TlsConn> {
        let conn = ServerConnection::new(config).map_err(io::Error::other)?;
        let out = stream.try_clone()?;
        let mut tls = TlsConn {
            conn: Arc::new(Mutex::new(conn)),
            raw: stream,
            out,
        };
        loop {
            let handshaking = {
                let mut c = lock(&tls.conn);
                while c.wants_write() {
                    c.write_tls(&mut tls.out)?;
                }
                c.is_handshaking()
            };
            if !handshaking {
                return Ok(tls);
            }
            if tls.feed()? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
    }

    /// The ALPN protocol agreed, if any.
    pub(crate) fn alpn(&self) -> Option<Vec<u8>> {
        lock(&self.conn).alpn_protocol().map(<[u8]>::to_vec)
    }

    /// Reads raw bytes from the socket into the TLS state (answering what it must).
    /// Returns how many raw bytes were read (0 at EOF).
    fn feed(&mut self) -> io::Result<usize> {
        let mut raw = [0u8; 16 * 1024];
        let n = self.raw.read(&mut raw)?;
        let mut c = lock(&self.conn);
        let mut rest = &raw[..n];
        while !rest.is_empty() {
            c.read_tls(&mut rest)?;
            if let Err(e) = c.process_new_packets() {
                // Send the alert, then fail.
                while c.wants_write() {
                    let _ = c.write_tls(&mut self.out);
                }
                return Err(io::Error::new(io::ErrorKind::InvalidData, e));
            }
        }
        while c.wants_write() {
            c.write_tls(&mut self.out)?;
        }
        Ok(n)
    }

    /// The writing half.
    pub(crate) fn writer(&self) -> io::Result<TlsWriter> {
        Ok(TlsWriter {
            conn: self.conn.clone(),
            out: Arc::new(self.out.try_clone()?),
        })
    }

    /// The socket (for shutdown and linger).
    pub(crate) fn socket(&self) -> &TcpStream {
        &self.raw
    }
}

impl Read for TlsConn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match lock(&self.conn).reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // EOF without close_notify: the peer closed the socket.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
            if self.feed()? == 0 {
                return Ok(0);
            }
        }
    }
}

impl TlsWriter {
    /// Encrypts and sends all of `data`.
    pub(crate) fn write_all(&self, data: &[u8]) -> io::Result<()> {
        let mut c = lock(&self.conn);
        c.writer().write_all(data)?;
        let mut out: &TcpStream = &self.out;
        while c.wants_write() {
            c.write_tls(&mut out)?;
        }
        Ok(())
    }

    /// Sends `close_notify` and shuts the socket's write side.
    pub(crate) fn close(&self) {
        let mut c = lock(&self.conn);
        c.send_close_notify();
        let mut out: &TcpStream = &self.out;
        while c.wants_write() {
            if c.write_tls(&mut out).is_err() {
                break;
            }
        }
        let _ = self.out.shutdown(Shutdown::Write);
    }
}

/// Counters of a [`TlsFront`].
#[derive(Default)]
struct Stats {
    connections: AtomicU64,
    handshakes: AtomicU64,
    failed: AtomicU64,
}

struct Shared {
    config: Arc<ServerConfig>,
    h1: Option<SocketAddr>,
    h2: Option<SocketAddr>,
    stats: Stats,
    served: Served,
}

/// A TLS terminator on `127.0.0.1:0` in front of plain providers (see the module docs).
pub struct TlsFront {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for TlsFront {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsFront")
            .field("addr", &self.addr)
            .finish()
    }
}

impl TlsFront {
    /// Starts a front with this server configuration (its ALPN list decides what is
    /// offered), forwarding `http/1.1` (and no-ALPN) connections to `h1` and `h2`
    /// connections to `h2`. A connection whose protocol has no upstream is closed after
    /// the handshake.
    ///
    /// # Panics
    /// If no port on 127.0.0.1 can be bound.
    pub fn start(
        config: Arc<ServerConfig>,
        h1: Option<SocketAddr>,
        h2: Option<SocketAddr>,
    ) -> TlsFront {
        let listener =
            TcpListener::bind((crate::pki::LOOPBACK, 0)).expect("testkit: bind a TLS front");
        let addr = listener.local_addr().expect("testkit: local_addr");
        let shared = Arc::new(Shared {
            config,
            h1,
            h2,
            stats: Stats::default(),
            served: Served::default(),
        });
        let s = shared.clone();
        let accept = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if s.served.stopping() {
                    break;
                }
                let Ok(stream) = stream else { continue };
                s.stats.connections.fetch_add(1, Ordering::SeqCst);
                let s2 = s.clone();
                s.served.spawn(stream, move |stream| serve(&s2, stream));
            }
        });
        TlsFront {
            addr,
            shared,
            accept: Some(accept),
        }
    }

    /// The front's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https://127.0.0.1:PORT` (no trailing slash).
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// TCP connections accepted.
    pub fn connections(&self) -> u64 {
        self.shared.stats.connections.load(Ordering::SeqCst)
    }

    /// Handshakes that completed.
    pub fn handshakes(&self) -> u64 {
        self.shared.stats.handshakes.load(Ordering::SeqCst)
    }

    /// Handshakes that failed (a rejected certificate on either side).
    pub fn failed_handshakes(&self) -> u64 {
        self.shared.stats.failed.load(Ordering::SeqCst)
    }
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        self.shared.served.stop(self.addr, self.accept.take());
    }
}

fn serve(shared: &Shared, stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let handle = stream.try_clone();
    let tls = match TlsConn::accept(shared.config.clone(), stream) {
        Ok(tls) => tls,
        Err(_) => {
            // A lingering close, as servers do: the alert went out; what the client sent
            // meanwhile is read and dropped, so no reset overtakes the alert.
            if let Ok(mut s) = handle {
                let _ = s.shutdown(Shutdown::Write);
                let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
                let mut sink = [0u8; 4096];
                while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
                let _ = s.shutdown(Shutdown::Both);
            }
            if !shared.served.stopping() {
                shared.stats.failed.fetch_add(1, Ordering::SeqCst);
            }
            return;
        }
    };
    shared.stats.handshakes.fetch_add(1, Ordering::SeqCst);
    let upstream = match tls.alpn().as_deref() {
        Some(b"h2") => shared.h2,
        _ => shared.h1,
    };
    let Some(upstream) = upstream.and_then(|a| TcpStream::connect(a).ok()) else {
        if let Ok(w) = tls.writer() {
            w.close();
        }
        return;
    };
    let _ = upstream.set_nodelay(true);
    let client = tls.socket().try_clone();
    forward(tls, upstream);
    // The front keeps a handle of every socket (to close it when dropped): a connection
    // that ends shuts its socket, not just its handle.
    if let Ok(client) = client {
        let _ = client.shutdown(Shutdown::Both);
    }
}

/// Copies bytes both ways until either side ends; a reset on one side is a reset on the
/// other.
fn forward(mut tls: TlsConn, upstream: TcpStream) {
    let (Ok(writer), Ok(mut from_up), Ok(client)) =
        (tls.writer(), upstream.try_clone(), tls.socket().try_clone())
    else {
        return;
    };
    let down = std::thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        loop {
            match from_up.read(&mut buf) {
                Ok(0) => {
                    writer.close();
                    return;
                }
                Ok(n) => {
                    if writer.write_all(&buf[..n]).is_err() {
                        return;
                    }
                }
                Err(_) => {
                    // Upstream reset: reset the client too.
                    let _ = socket2::SockRef::from(&client).set_linger(Some(Duration::ZERO));
                    let _ = client.shutdown(Shutdown::Both);
                    return;
                }
            }
        }
    });
    let mut to_up = upstream;
    let mut buf = [0u8; 16 * 1024];
    loop {
        match tls.read(&mut buf) {
            Ok(0) => {
                let _ = to_up.shutdown(Shutdown::Write);
                break;
            }
            Ok(n) => {
                if to_up.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            Err(_) => {
                let _ = socket2::SockRef::from(&to_up).set_linger(Some(Duration::ZERO));
                let _ = to_up.shutdown(Shutdown::Both);
                break;
            }
        }
    }
    let _ = down.join();
}
