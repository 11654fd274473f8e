//! Opening a connection to one endpoint: DNS, TCP connect, TLS handshake, each a phase of
//! its own so a failure is classified exactly (see [`crate::Phase`]).
//!
//! - DNS: IP literals skip resolution; names are resolved with the OS resolver
//!   (`ToSocketAddrs`) on the `blocking` thread pool, so no executor thread blocks.
//! - TCP: `async_io::Async::<TcpStream>::connect` to each resolved address in order until
//!   one accepts (no happy-eyeballs racing); `TCP_NODELAY` on; TCP Fast Open is never
//!   enabled (std does not), so no request byte leaves before the handshake.
//! - TLS: `futures-rustls` with early data (0-RTT) disabled, the trust and client identity
//!   of `baton-tls` (the platform's store plus `ca_file`; SPEC 9), and ALPN by the
//!   endpoint's `http_version` (`h2` and `http/1.1` under `auto`).
//!
//! The whole connect (all three phases) is bounded by the attempt's connect timeout; that
//! bound is applied by the caller.

use std::io;
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Instant;

use async_io::Async;
use baton_core::{ProxyEnv, Route};
use futures_rustls::pki_types::ServerName;
use futures_rustls::rustls::ClientConfig;
use futures_rustls::TlsConnector;
use http::header::{HeaderMap, HeaderValue};
use http::Uri;

use crate::classify::Phase;
use crate::io::Stream;

/// Where one endpoint's connections go, computed once when the client is built.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// Host name or IP literal (without IPv6 brackets).
    pub(crate) host: String,
    /// TCP port.
    pub(crate) port: u16,
    /// TLS server name, for https endpoints.
    pub(crate) tls: Option<ServerName<'static>>,
    /// The Host header sent when the request has none (port only when not the default).
    pub(crate) host_header: HeaderValue,
    /// The proxy that requests to this target go through (SPEC 3), if any.
    pub(crate) via: Option<Via>,
}

/// How a target is reached through a proxy: `http` requests are forwarded in absolute
/// form, `https` ones through a `CONNECT` tunnel.
#[derive(Debug, Clone)]
pub(crate) struct Via {
    proxy: Target0,
    tunnel: bool,
    authorization: Option<HeaderValue>,
    /// `http://host:port`, put in front of the path of a forwarded request.
    absolute: String,
}

/// A proxy's address.
#[derive(Debug, Clone)]
struct Target0 {
    host: String,
    port: u16,
}

impl Target {
    /// The target of an endpoint URL (already validated by the policy).
    pub(crate) fn of(uri: &Uri) -> Result<Target, String> {
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            other => return Err(format!("unsupported scheme {other:?}")),
        };
        let authority = uri.authority().ok_or_else(|| format!("no host in {uri}"))?;
        let raw_host = authority.host();
        let host = raw_host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let default_port = if https { 443 } else { 80 };
        let port = authority.port_u16().unwrap_or(default_port);
        let host_header = if port == default_port {
            HeaderValue::from_str(raw_host)
        } else {
            HeaderValue::from_str(&format!("{raw_host}:{port}"))
        }
        .map_err(|e| e.to_string())?;
        let tls = if https {
            Some(ServerName::try_from(host.clone()).map_err(|e| e.to_string())?)
        } else {
            None
        };
        Ok(Target {
            host,
            port,
            tls,
            host_header,
            via: None,
        })
    }

    /// The target of `uri`, routed through the environment's proxies as core decides.
    pub(crate) fn routed(uri: &Uri, proxies: &ProxyEnv) -> Result<Target, String> {
        let mut t = Target::of(uri)?;
        let route = proxies.route(uri);
        if let Some(p) = route.proxy() {
            let authority = uri.authority().map_or("", |a| a.as_str());
            t.via = Some(Via {
                proxy: Target0 {
                    host: p.host().to_string(),
                    port: p.port(),
                },
                tunnel: matches!(route, Route::Tunnel(_)),
                authorization: p.authorization().cloned(),
                absolute: format!("http://{authority}"),
            });
        }
        Ok(t)
    }

    /// The request target for `path` (`/x?y`): absolute form when forwarded to a proxy.
    pub(crate) fn request_uri(&self, path: Uri) -> Uri {
        match &self.via {
            Some(v) if !v.tunnel => format!("{}{}", v.absolute, path).parse().unwrap_or(path),
            _ => path,
        }
    }

    /// Adds what a request to this target needs beyond its own headers: Host when it has
    /// none (bare hyper writes no Host of its own), and `Proxy-Authorization` when it is
    /// forwarded to a proxy.
    pub(crate) fn complete_headers(&self, h: &mut HeaderMap) {
        baton_core::insert_host_if_absent(h, &self.host_header);
        if let Some(auth) = self.proxy_authorization() {
            h.insert(http::header::PROXY_AUTHORIZATION, auth.clone());
        }
    }

    /// `Proxy-Authorization` for a request forwarded to a proxy (never inside a tunnel).
    pub(crate) fn proxy_authorization(&self) -> Option<&HeaderValue> {
        self.via
            .as_ref()
            .filter(|v| !v.tunnel)
            .and_then(|v| v.authorization.as_ref())
    }
}

/// Resolves the target's host (IP literals without any lookup).
pub(crate) async fn resolve(target: &Target) -> io::Result<Vec<SocketAddr>> {
    // Through a proxy, the proxy is what is resolved and connected to.
    let (host, port) = match &target.via {
        Some(v) => (&v.proxy.host, v.proxy.port),
        None => (&target.host, target.port),
    };
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let host = host.clone();
    let addrs: Vec<SocketAddr> = blocking::unblock(move || {
        (host.as_str(), port)
            .to_socket_addrs()
            .map(Iterator::collect)
    })
    .await?;
    if addrs.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("{} resolved to no address", target.host),
        ));
    }
    Ok(addrs)
}

/// The first of `addrs` that accepts a connection. Each address but the last gets, in
/// turn, an even share of the time left until `connect_by`, as hyper-util and ureq split
/// the connect time: an address that never answers (a black-holed IPv6 route before a
/// working IPv4 one) leaves time for the next, on every runtime alike (SPEC 7). The last
/// one has what is left, under the attempt's own connect timer (a connect timeout).
async fn connect_any(addrs: &[SocketAddr], connect_by: Instant) -> io::Result<Async<TcpStream>> {
    let mut last = None;
    for (i, addr) in addrs.iter().enumerate() {
        let others = addrs.len() - i - 1;
        let connecting = Async::<TcpStream>::connect(*addr);
        let result = if others == 0 {
            connecting.await
        } else {
            let left = connect_by.saturating_duration_since(Instant::now());
            let share = left / u32::try_from(others + 1).unwrap_or(u32::MAX);
            let timed_out = async {
                async_io::Timer::after(share).await;
                Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("connect to {addr} timed out"),
                ))
            };
            futures_lite::future::or(connecting, timed_out).await
        };
        match result {
            Ok(s) => return Ok(s),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no address to connect to")))
}

/// Opens a connection by `connect_by`: resolve, connect, then (https) the TLS handshake.
/// The error says in which phase it failed.
pub(crate) async fn connect(
    target: &Target,
    tls: &Arc<ClientConfig>,
    connect_by: Instant,
) -> Result<Stream, (Phase, io::Error)> {
    let addrs = resolve(target).await.map_err(|e| (Phase::Dns, e))?;
    let tcp = connect_any(&addrs, connect_by)
        .await
        .map_err(|e| (Phase::Connect, e))?;
    // Best effort: a socket that refuses NODELAY still works, only slower.
    let _ = tcp.get_ref().set_nodelay(true);
    let mut tcp = tcp;
    if let Some(v) = target.via.as_ref().filter(|v| v.tunnel) {
        // Nothing of the request is sent before the tunnel is up: a failure here is
        // still the connect phase (undelivered).
        open_tunnel(&mut tcp, target, v)
            .await
            .map_err(|e| (Phase::Connect, e))?;
    }
    match &target.tls {
        None => Ok(Stream::Plain(tcp)),
        Some(name) => {
            let connector = TlsConnector::from(tls.clone());
            let s = connector
                .connect(name.clone(), tcp)
                .await
                .map_err(|e| (Phase::Tls, e))?;
            Ok(Stream::Tls(Box::new(s)))
        }
    }
}

/// Makes a TLS configuration safe for baton: no early data (0-RTT would send request
/// bytes before the handshake completes, making a handshake failure ambiguous), and ALPN
/// by the endpoint's HTTP version.
pub(crate) fn harden(mut config: ClientConfig, version: baton_core::HttpVersion) -> ClientConfig {
    config.enable_early_data = false;
    config.alpn_protocols = version.alpn().iter().map(|p| p.to_vec()).collect();
    config
}

/// Whether a connection agreed HTTP/2 (ALPN `h2`; on plain TCP, only by prior knowledge).
pub(crate) fn agreed_h2(stream: &Stream) -> bool {
    match stream {
        Stream::Plain(_) => false,
        Stream::Tls(s) => s.get_ref().1.alpn_protocol() == Some(b"h2"),
    }
}

/// Whether a connection agreed TLS 1.3 (plain TCP: no).
pub(crate) fn tls13(stream: &Stream) -> bool {
    match stream {
        Stream::Plain(_) => false,
        Stream::Tls(s) => {
            let version = s.get_ref().1.protocol_version();
            version == Some(futures_rustls::rustls::ProtocolVersion::TLSv1_3)
        }
    }
}

/// Opens a `CONNECT` tunnel to `target` through the proxy `tcp` is connected to. The
/// proxy's credential goes on the `CONNECT` only.
async fn open_tunnel(tcp: &mut Async<TcpStream>, target: &Target, via: &Via) -> io::Result<()> {
    use futures_lite::{AsyncReadExt, AsyncWriteExt};
    let authority = if target.host.contains(':') {
        format!("[{}]:{}", target.host, target.port)
    } else {
        format!("{}:{}", target.host, target.port)
    };
    let mut head = format!("CONNECT {authority} HTTP/1.1\r\nhost: {authority}\r\n");
    if let Some(a) = via.authorization.as_ref().and_then(|a| a.to_str().ok()) {
        head.push_str(&format!("proxy-authorization: {a}\r\n"));
    }
    head.push_str("\r\n");
    tcp.write_all(head.as_bytes()).await?;
    // The proxy's answer, byte by byte up to the blank line (nothing after it may be
    // read here: it belongs to the TLS handshake).
    let mut answer = Vec::new();
    while !answer.ends_with(b"\r\n\r\n") {
        if answer.len() > 16 * 1024 {
            return Err(io::Error::other("the proxy's CONNECT answer is too long"));
        }
        let mut byte = [0u8; 1];
        if tcp.read(&mut byte).await? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the proxy closed the connection during CONNECT",
            ));
        }
        answer.push(byte[0]);
    }
    let status = std::str::from_utf8(&answer)
        .ok()
        .and_then(|t| t.split_whitespace().nth(1))
        .and_then(|s| s.parse::<u16>().ok());
    match status {
        Some(200..=299) => Ok(()),
        Some(s) => Err(io::Error::other(format!(
            "the proxy refused CONNECT with {s}"
        ))),
        None => Err(io::Error::other("the proxy's CONNECT answer is not HTTP")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An address whose connects hang (a full backlog) gets its share of the connect time,
    /// then the next is tried. Before, the first address had the whole connect time, and
    /// the attempt failed as a connect timeout where tokio and blocking connected.
    #[test]
    fn a_hung_address_leaves_time_for_the_next() {
        let hung = testkit::HungConnect::start();
        let good = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addrs = [hung.addr(), good.local_addr().unwrap()];
        let by = Instant::now() + std::time::Duration::from_millis(600);
        let tcp = async_io::block_on(connect_any(&addrs, by)).unwrap();
        assert_eq!(tcp.get_ref().peer_addr().unwrap(), addrs[1]);
        assert!(
            Instant::now() < by,
            "the good address waited for the hung one's whole time"
        );
    }

    #[test]
    fn target_host_header_omits_the_default_port() {
        let t = Target::of(&"https://api.example/v1".parse().unwrap()).unwrap();
        assert_eq!(
            (t.port, t.host_header.to_str().unwrap()),
            (443, "api.example")
        );
        assert!(t.tls.is_some());
        let t = Target::of(&"http://127.0.0.1:8080/".parse().unwrap()).unwrap();
        assert_eq!(t.host_header, "127.0.0.1:8080");
        assert!(t.tls.is_none());
        let t = Target::of(&"http://[::1]:81/".parse().unwrap()).unwrap();
        assert_eq!((t.host.as_str(), t.port), ("::1", 81));
        assert_eq!(t.host_header, "[::1]:81");
    }

    #[test]
    fn hardened_tls_config_has_no_early_data_and_alpn_by_version() {
        let tls = baton_tls::TlsConfig::load(&baton_core::Tls::default()).unwrap();
        let base = || tls.client_config(baton_core::HttpVersion::Auto);
        let c = harden(base(), baton_core::HttpVersion::Http1);
        assert!(!c.enable_early_data);
        assert_eq!(c.alpn_protocols, vec![b"http/1.1".to_vec()]);
        let c = harden(base(), baton_core::HttpVersion::Auto);
        assert_eq!(c.alpn_protocols, vec![b"h2".to_vec(), b"http/1.1".to_vec()]);
    }
}
