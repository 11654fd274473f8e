//! Fault-injecting HTTP/1.1 and HTTP/2 providers on loopback, TLS in front of them and
//! test certificates, for baton's tests, demos and benchmarks.
//!
//! A [`Provider`] is a real HTTP/1.1 server bound to `127.0.0.1:0` (an ephemeral port),
//! running on its own threads (one accept thread, one thread per connection), with a
//! plain synchronous API, so it serves blocking tests, tokio tests and async-std / smol
//! tests alike. What it does with each request is a [`Behaviour`]: a response, or a
//! fault. Behaviours can follow a per-request-number script
//! ([`Provider::builder`]) and can be changed at run time ([`Provider::set_behaviour`]),
//! e.g. "healthy, then refusing, then black-holed, then healthy again" on one port.
//!
//! Every provider records each request it read ([`Request`]: method, path, query, all
//! headers, body, arrival time, connection number) *before* applying the behaviour, so a
//! test can assert how often a request (by idempotency key or request id) was executed
//! on which provider: [`Provider::requests`], [`Provider::request_count`],
//! [`Provider::count_with_header`], [`Provider::clear`].
//!
//! ```
//! use testkit::{Behaviour, Provider};
//!
//! let p = Provider::builder()
//!     .then(Behaviour::reset())
//!     .then(Behaviour::status(503).header("Retry-After", "1"))
//!     .otherwise(Behaviour::ok())
//!     .start();
//! let base = p.url(); // "http://127.0.0.1:PORT"
//! # let _ = base;
//! ```
//!
//! # Faults, and the failure class a client should report
//!
//! baton's spec (section 1) classifies transport failures by phase: **undelivered** when
//! no request byte can have reached the server (safe to send elsewhere), **ambiguous**
//! once the connection was ready (the server may have done the work).
//!
//! | fault | how to get it | what the client sees | class |
//! |---|---|---|---|
//! | refused port | [`refused_url`], or a provider in [`Behaviour::refuse`] | connect fails with `ConnectionRefused`; nothing recorded | undelivered |
//! | DNS failure | [`unresolvable_url`] (a name under `.invalid`, RFC 6761) | name resolution fails | undelivered |
//! | status, headers, body | [`Behaviour::status`], [`Behaviour::ok`], `.header(..)`, `.body(..)` | a response (e.g. `503` with `Retry-After`) | a response, not a transport failure |
//! | delay | `.delay(d)` | the response after `d`; past the client's timeout, a timeout while waiting | ambiguous (if it times out) |
//! | headers then stall | `.stall_after_headers()` | the head (status, `Content-Length`), then no body ever | ambiguous (the head is the commit point: a body error) |
//! | half body then close | `.close_after_half_body()` | the head with `Content-Length: N`, `N/2` body bytes, then EOF | ambiguous (body error) |
//! | close without answer | [`Behaviour::close`] | EOF before any response byte | ambiguous |
//! | reset after read | [`Behaviour::reset`] | connection reset (RST) before any response byte; the request **was** recorded | ambiguous |
//! | black hole | [`Behaviour::black_hole`] | the connection is accepted and the request read, nothing ever comes back | ambiguous (timeout) |
//!
//! In every ambiguous case the request bytes reached the server and were recorded, which is
//! exactly why a client must not assume it was not executed.
//!
//! # HTTP/2 and TLS
//!
//! [`H2Provider`] speaks HTTP/2 (h2c with prior knowledge) and plays the protocol's own
//! faults: `REFUSED_STREAM` on the HEADERS and a `GOAWAY` below the stream (nothing
//! processed: undelivered where the client can prove it), a `GOAWAY` at the stream or a reset after the whole request
//! (processed: ambiguous); it counts the requests it processed. [`TlsFront`] puts TLS in
//! front of a plain provider (HTTP/1.1 or HTTP/2, by ALPN) with a certificate from
//! [`TestPki`], optionally requiring a client certificate, and counts the handshakes that
//! completed and failed. The bad identities of [`TestPki`] (another CA, a wrong name,
//! expired) are the certificates a client must reject.
//!
//! # HTTP/1.1 support
//!
//! Request line (origin- or absolute-form target), headers, `Content-Length` and chunked
//! request bodies (chunk extensions and trailers are accepted and ignored),
//! `Expect: 100-continue` (answered with `100 Continue`, except by a black hole),
//! keep-alive with pipelining, `Connection: close`, HTTP/1.0 (closes unless
//! `Connection: keep-alive`). Responses always carry `Content-Length` (except `1xx`,
//! `204`, `304`), a `HEAD` request gets the head only. A malformed request gets `400`
//! and the connection is closed (and it is not recorded).
//!
//! Responses are serialised once per installed behaviour and written with one `write`,
//! with `TCP_NODELAY` on: a healthy provider serves many thousands of keep-alive
//! requests per second over several connections. For long benchmarks, turn recording off
//! with [`Provider::set_recording`].
//!
//! # Cleanup
//!
//! Dropping a provider stops its accept loop, closes its port (connecting afterwards is
//! refused), shuts down every open connection (stalled and black-holed ones included,
//! the client sees EOF) and joins every thread it started. A pending
//! [`delay`](Behaviour::delay) ends early.
//!
//! # Re-binding after `refuse`
//!
//! A provider switched to [`Behaviour::refuse`] really closes its listening socket, and
//! switching back binds the *same* port again (std sets `SO_REUSEADDR` on Unix, so
//! connections left in `TIME_WAIT` do not block it). If, in between, another socket took
//! that port (rare: e.g. another test's ephemeral port), re-binding fails after retrying
//! for 2 s and [`Provider::set_behaviour`] panics. Likewise the port behind
//! [`refused_url`] is free when returned, and could in rare cases be taken later.
//!
//! # Dependencies
//!
//! std, plus:
//! - [`socket2`](https://docs.rs/socket2): a real TCP reset needs `SO_LINGER` with a zero
//!   timeout before closing, and `TcpStream::set_linger` is still unstable in std. socket2
//!   is also used to shut down a listening socket as a fallback when waking the accept
//!   loop by connecting to it fails.
//! - `rustls` (ring): TLS in front of the providers ([`TlsFront`]), synchronous, on the
//!   providers' own threads.
//! - `rcgen`: the test certificates ([`TestPki`]), made at run time.
//! - `httlib-hpack`: HPACK for the HTTP/2 provider ([`H2Provider`]), with a table-driven
//!   Huffman decoder: fluke-hpack's built a hash map per string, which cost the provider
//!   tens of microseconds for every request header it had not indexed.
//!
//! baton-core is not a dependency.

pub mod auth;
mod behaviour;
mod fault_proxy;
pub mod h2;
mod http;
pub mod pki;
mod provider;
mod proxy_server;
mod served;
pub mod sse;
pub mod tls_front;

pub use behaviour::Behaviour;
pub use fault_proxy::{FaultMode, FaultProxy};
pub use h2::{H2Behaviour, H2Provider, H2ProviderBuilder, H2Request};
pub use pki::{Identity, PkiFiles, TestPki};
pub use provider::{Provider, ProviderBuilder, Request};
pub use proxy_server::{ProxyRequest, ProxyServer};
pub use tls_front::TlsFront;

use std::net::SocketAddr;

/// A host name that never resolves (`.invalid` is reserved by RFC 6761).
pub const UNRESOLVABLE_HOST: &str = "baton-test.invalid";

/// A loopback address that refuses connections (*undelivered*): a port held for the whole
/// process by a socket that is bound but never listens, so connecting fails with
/// `ConnectionRefused` and no other socket (another test's provider, say) can be given the
/// port. Every call returns the same address.
///
/// # Panics
/// If no port on 127.0.0.1 can be reserved.
///
/// ```
/// let addr = testkit::refused_addr();
/// let err = std::net::TcpStream::connect(addr).unwrap_err();
/// assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused);
/// assert_eq!(addr, testkit::refused_addr());
/// ```
pub fn refused_addr() -> SocketAddr {
    static RESERVED: std::sync::OnceLock<(socket2::Socket, SocketAddr)> =
        std::sync::OnceLock::new();
    RESERVED
        .get_or_init(|| {
            let any: SocketAddr = ([127, 0, 0, 1], 0).into();
            let socket = provider::reserve(any).expect("testkit: reserve a port on 127.0.0.1");
            let addr = socket
                .local_addr()
                .ok()
                .and_then(|a| a.as_socket())
                .expect("testkit: local_addr");
            (socket, addr)
        })
        .1
}

/// `http://127.0.0.1:PORT` for a [`refused_addr`] (no trailing slash).
///
/// ```
/// assert!(testkit::refused_url().starts_with("http://127.0.0.1:"));
/// ```
pub fn refused_url() -> String {
    format!("http://{}", refused_addr())
}

/// The first error of type `T` in `error`'s source chain (`error` itself included): how a
/// test finds the typed reason an adapter keeps behind its own error.
///
/// ```
/// #[derive(Debug)]
/// struct Outer(std::fmt::Error);
/// impl std::fmt::Display for Outer {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
///         f.write_str("outer")
///     }
/// }
/// impl std::error::Error for Outer {
///     fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
///         Some(&self.0)
///     }
/// }
/// let e = Outer(std::fmt::Error);
/// assert!(testkit::in_chain::<std::fmt::Error>(&e).is_some());
/// assert!(testkit::in_chain::<Outer>(&e).is_some());
/// assert!(testkit::in_chain::<std::num::ParseIntError>(&e).is_none());
/// ```
pub fn in_chain<'a, T: std::error::Error + 'static>(
    error: &'a (dyn std::error::Error + 'static),
) -> Option<&'a T> {
    let mut cur = Some(error);
    while let Some(e) = cur {
        if let Some(t) = e.downcast_ref::<T>() {
            return Some(t);
        }
        cur = e.source();
    }
    None
}

/// Where an error chain says something twice: the first link whose text holds its
/// source's text (an error printer that walks the chain, anyhow's `{:#}`, would show it
/// twice), as `"link" holds "source"`; `None` when each link says its own part once.
/// Every link's text must also be non-empty.
///
/// ```
/// #[derive(Debug)]
/// struct Outer(std::num::ParseIntError, bool);
/// impl std::fmt::Display for Outer {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
///         match self.1 {
///             true => write!(f, "bad port: {}", self.0),
///             false => f.write_str("bad port"),
///         }
///     }
/// }
/// impl std::error::Error for Outer {
///     fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
///         Some(&self.0)
///     }
/// }
/// let parse = "x".parse::<u16>().unwrap_err();
/// assert_eq!(testkit::repeated_in_chain(&Outer(parse.clone(), false)), None);
/// assert!(testkit::repeated_in_chain(&Outer(parse, true)).is_some());
/// ```
pub fn repeated_in_chain(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut cur = error;
    loop {
        let text = cur.to_string();
        if text.is_empty() {
            return Some(format!("an empty link: {cur:?}"));
        }
        let next = cur.source()?;
        let below = next.to_string();
        if !below.is_empty() && text.contains(&below) {
            return Some(format!("{text:?} holds {below:?}"));
        }
        cur = next;
    }
}

/// `http://baton-test.invalid:80`, a URL whose host name never resolves, to exercise
/// DNS failure (*undelivered*). No trailing slash, like [`Provider::url`].
///
/// ```
/// assert_eq!(testkit::unresolvable_url(), "http://baton-test.invalid:80");
/// ```
pub fn unresolvable_url() -> String {
    format!("http://{UNRESOLVABLE_HOST}:80")
}

/// A port on `127.0.0.1` whose TCP connects never complete: a listener that never accepts,
/// its accept backlog filled by connections this value holds, so the kernel drops further
/// SYNs and a client's connect hangs until its own timeout. Nothing is ever read from it:
/// a client that reports anything but a connect-phase failure (undelivered) here is wrong.
///
/// ```
/// let hung = testkit::HungConnect::start();
/// let r = std::net::TcpStream::connect_timeout(&hung.addr(), std::time::Duration::from_millis(200));
/// assert!(r.is_err());
/// ```
pub struct HungConnect {
    addr: SocketAddr,
    _listener: socket2::Socket,
    _held: Vec<socket2::Socket>,
}

impl HungConnect {
    /// Binds, fills the backlog, and checks that a further connect hangs.
    ///
    /// # Panics
    /// If the backlog cannot be filled (a kernel that answers SYNs past a full backlog).
    pub fn start() -> HungConnect {
        use socket2::{Domain, Socket, Type};
        let listener = Socket::new(Domain::IPV4, Type::STREAM, None).expect("testkit: socket");
        let any: SocketAddr = ([127, 0, 0, 1], 0).into();
        listener.bind(&any.into()).expect("testkit: bind");
        listener.listen(0).expect("testkit: listen");
        let addr = listener
            .local_addr()
            .ok()
            .and_then(|a| a.as_socket())
            .expect("testkit: local_addr");
        let mut held = Vec::new();
        let connects = |wait_ms| {
            let s = Socket::new(Domain::IPV4, Type::STREAM, None).expect("testkit: socket");
            let done = s
                .connect_timeout(&addr.into(), std::time::Duration::from_millis(wait_ms))
                .is_ok();
            (s, done)
        };
        for _ in 0..64 {
            let (s, done) = connects(100);
            held.push(s);
            if done {
                continue;
            }
            // A connect that timed out on a busy machine may only have been slow: the
            // backlog is full when a second, longer one hangs too.
            let (s, done) = connects(400);
            held.push(s);
            if !done {
                return HungConnect {
                    addr,
                    _listener: listener,
                    _held: held,
                };
            }
        }
        panic!("testkit: the accept backlog of {addr} never filled");
    }

    /// The address whose connects hang.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

/// The probe scenario every adapter runs: a provider whose first request gets a 503 and
/// every later one a 200, and the check of what it received (two `GET /health` carrying
/// the endpoint's credentials `authorization: Bearer t`).
pub mod probes {
    use crate::{Behaviour, Provider};

    /// The provider: 503 once, then 200.
    pub fn provider() -> Provider {
        Provider::builder()
            .then(Behaviour::status(503))
            .otherwise(Behaviour::ok())
            .start()
    }

    /// Asserts the provider got exactly the two probes, to `/health`, with credentials.
    ///
    /// # Panics
    /// When it did not.
    pub fn check(p: &Provider) {
        let seen = p.requests();
        assert_eq!(seen.len(), 2, "two probes");
        assert!(
            seen.iter()
                .all(|r| r.path == "/health" && r.method == "GET"),
            "{seen:?}"
        );
        assert!(seen.iter().all(|r| r
            .headers
            .iter()
            .any(|(k, v)| k == "authorization" && v == "Bearer t")));
    }
}

/// Runs each test body twice: once under async-std's executor and once under smol's, as
/// `#[test]` functions of the same name in the modules `on_async_std` and `on_smol`. For
/// the tests of baton-async-std, which serves both runtimes; the calling crate depends on
/// `async-std` and `smol` (testkit does not). The bodies are written as `async fn name()
/// { ... }` items inside the macro; attributes such as `#[ignore]` carry over to both.
#[macro_export]
macro_rules! on_both_runtimes {
    ($( $(#[$meta:meta])* async fn $name:ident() $body:block )*) => {
        mod on_async_std {
            #[allow(unused_imports)]
            use super::*;
            $( $(#[$meta])* #[test] fn $name() { async_std::task::block_on(async $body) } )*
        }
        mod on_smol {
            #[allow(unused_imports)]
            use super::*;
            $( $(#[$meta])* #[test] fn $name() { smol::block_on(async $body) } )*
        }
    };
}
