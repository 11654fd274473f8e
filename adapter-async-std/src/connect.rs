//! Opening a connection to one endpoint: DNS, TCP connect, TLS handshake, each a phase of
//! its own so a failure is classified exactly (see [`crate::Phase`]).
//!
//! - DNS: IP literals skip resolution; names are resolved with the OS resolver
//!   (`ToSocketAddrs`) on the `blocking` thread pool, so no executor thread blocks.
//! - TCP: `async_io::Async::<TcpStream>::connect` to each resolved address in order until
//!   one accepts (no happy-eyeballs racing); `TCP_NODELAY` on; TCP Fast Open is never
//!   enabled (std does not), so no request byte leaves before the handshake.
//! - TLS: `futures-rustls` with early data (0-RTT) disabled, ALPN `http/1.1`.
//!
//! The whole connect (all three phases) is bounded by the attempt's connect timeout; that
//! bound is applied by the caller.

use std::io;
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::Arc;

use async_io::Async;
use futures_rustls::pki_types::ServerName;
use futures_rustls::rustls::ClientConfig;
use futures_rustls::TlsConnector;
use http::header::HeaderValue;
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
        })
    }
}

/// Resolves the target's host (IP literals without any lookup).
pub(crate) async fn resolve(target: &Target) -> io::Result<Vec<SocketAddr>> {
    if let Ok(ip) = target.host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, target.port)]);
    }
    let host = target.host.clone();
    let port = target.port;
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

/// Opens a connection: resolve, connect, then (https) the TLS handshake. The error says in
/// which phase it failed.
pub(crate) async fn connect(
    target: &Target,
    tls: &Arc<ClientConfig>,
) -> Result<Stream, (Phase, io::Error)> {
    let addrs = resolve(target).await.map_err(|e| (Phase::Dns, e))?;
    let mut last = None;
    let mut tcp = None;
    for addr in addrs {
        match Async::<TcpStream>::connect(addr).await {
            Ok(s) => {
                tcp = Some(s);
                break;
            }
            Err(e) => last = Some(e),
        }
    }
    let tcp = match tcp {
        Some(s) => s,
        None => {
            return Err((
                Phase::Connect,
                last.unwrap_or_else(|| io::Error::other("no address to connect to")),
            ))
        }
    };
    // Best effort: a socket that refuses NODELAY still works, only slower.
    let _ = tcp.get_ref().set_nodelay(true);
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

/// The default TLS configuration: webpki's Mozilla roots, ring, TLS 1.2 and 1.3.
pub(crate) fn default_tls() -> Result<ClientConfig, String> {
    let mut roots = futures_rustls::rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let provider = Arc::new(futures_rustls::rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(config)
}

/// Makes a TLS configuration safe for baton: no early data (0-RTT would send request
/// bytes before the handshake completes, making a handshake failure ambiguous), and ALPN
/// `http/1.1` (the only protocol this adapter speaks).
pub(crate) fn harden(mut config: ClientConfig) -> ClientConfig {
    config.enable_early_data = false;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn hardened_tls_config_has_no_early_data() {
        let c = harden(default_tls().unwrap());
        assert!(!c.enable_early_data);
        assert_eq!(c.alpn_protocols, vec![b"http/1.1".to_vec()]);
    }
}
