//! The wire an endpoint speaks (SPEC 9, "HTTP/2" and "TLS trust and identity"): which HTTP
//! version its connections use, which certificates it trusts and which identity it
//! presents, and the one rule that classifies how an HTTP/2 exchange ended without a
//! response.
//!
//! Core holds settings and rules only: the files named here are read by the adapters
//! (core does no I/O), and each adapter turns its client's HTTP/2 error into an [`H2End`]
//! and asks [`H2End::class`], so every runtime reads the protocol's proofs the same way.

use std::fmt;
use std::path::PathBuf;

use crate::report::FailureClass;

/// The HTTP version an endpoint's connections speak (`http_version`, per policy or
/// endpoint).
///
/// - `auto` (the default): for `https`, both `h2` and `http/1.1` are offered by ALPN and
///   the server chooses; for `http`, HTTP/1.1.
/// - `http1`: HTTP/1.1 only (ALPN offers `http/1.1` alone).
/// - `http2`: HTTP/2 only: ALPN offers `h2` alone for `https`; on `http://` it is HTTP/2
///   with prior knowledge (h2c, no upgrade). A runtime without HTTP/2 refuses such an
///   endpoint when the client is built.
///
/// ```
/// use baton_core::HttpVersion;
/// assert_eq!(HttpVersion::default(), HttpVersion::Auto);
/// assert_eq!(HttpVersion::Http2.as_str(), "http2");
/// assert_eq!(HttpVersion::Auto.alpn(), &[b"h2".as_slice(), b"http/1.1".as_slice()]);
/// assert_eq!(HttpVersion::Http1.alpn(), &[b"http/1.1".as_slice()]);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum HttpVersion {
    /// ALPN for https (`h2` preferred, `http/1.1` accepted), HTTP/1.1 for http.
    #[default]
    Auto,
    /// HTTP/1.1 only.
    Http1,
    /// HTTP/2 only (prior knowledge on `http://`).
    Http2,
}

impl HttpVersion {
    /// The setting's value as written in files: `auto`, `http1`, `http2`.
    pub fn as_str(self) -> &'static str {
        match self {
            HttpVersion::Auto => "auto",
            HttpVersion::Http1 => "http1",
            HttpVersion::Http2 => "http2",
        }
    }

    /// The ALPN protocols a TLS connection offers, in the order of preference.
    pub fn alpn(self) -> &'static [&'static [u8]] {
        match self {
            HttpVersion::Auto => &[b"h2", b"http/1.1"],
            HttpVersion::Http1 => &[b"http/1.1"],
            HttpVersion::Http2 => &[b"h2"],
        }
    }

    /// Whether this setting can only be met by a client that speaks HTTP/2.
    pub fn requires_http2(self) -> bool {
        self == HttpVersion::Http2
    }
}

/// TLS trust and identity files (`[policy.tls]`, `[endpoint.tls]`), all PEM. Paths only:
/// the adapters read them when the client is built, and a missing or unusable file is a
/// build error that names the file and the setting.
///
/// - `ca_file`: certificates trusted on top of the platform's trust store (the same
///   store on every runtime).
/// - `client_cert` and `client_key`: a client identity (mTLS), presented only on the
///   connections of the endpoint it belongs to. Both or neither.
///
/// An endpoint's table overrides the policy's key by key: its `ca_file` replaces the
/// policy's, and its certificate and key pair replaces the policy's pair.
///
/// ```
/// use baton_core::Tls;
/// let policy = Tls { ca_file: Some("ca.pem".into()), ..Tls::default() };
/// let endpoint = Tls {
///     client_cert: Some("client.pem".into()),
///     client_key: Some("client.key".into()),
///     ..Tls::default()
/// };
/// let merged = endpoint.over(&policy);
/// assert_eq!(merged.ca_file.as_deref(), Some(std::path::Path::new("ca.pem")));
/// assert!(merged.client_cert.is_some());
/// assert!(!Tls::default().is_set());
/// ```
#[derive(Clone, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct Tls {
    /// PEM bundle of extra trusted certificates.
    pub ca_file: Option<PathBuf>,
    /// PEM certificate chain of the client identity.
    pub client_cert: Option<PathBuf>,
    /// PEM private key of the client identity (unencrypted).
    pub client_key: Option<PathBuf>,
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Paths only, never file contents; a key's path is not a secret.
        f.debug_struct("Tls")
            .field("ca_file", &self.ca_file)
            .field("client_cert", &self.client_cert)
            .field("client_key", &self.client_key)
            .finish()
    }
}

impl Tls {
    /// Whether any file is named.
    pub fn is_set(&self) -> bool {
        self.ca_file.is_some() || self.client_cert.is_some() || self.client_key.is_some()
    }

    /// These settings over `base`: a `ca_file` here replaces the base's; a certificate and
    /// key pair here replaces the base's pair.
    pub fn over(&self, base: &Tls) -> Tls {
        let identity = self.client_cert.is_some() || self.client_key.is_some();
        let (client_cert, client_key) = if identity {
            (self.client_cert.clone(), self.client_key.clone())
        } else {
            (base.client_cert.clone(), base.client_key.clone())
        };
        Tls {
            ca_file: self.ca_file.clone().or_else(|| base.ca_file.clone()),
            client_cert,
            client_key,
        }
    }

    /// A certificate needs its key and a key its certificate: the setting that is missing.
    pub(crate) fn missing_half(&self) -> Option<&'static str> {
        match (&self.client_cert, &self.client_key) {
            (Some(_), None) => Some("client_key"),
            (None, Some(_)) => Some("client_cert"),
            _ => None,
        }
    }
}

/// The HTTP/2 error code `REFUSED_STREAM` (RFC 9113 section 7): the stream was refused
/// before any application processing.
pub const REFUSED_STREAM: u32 = 0x7;

/// How an HTTP/2 exchange ended without a response head, in the protocol's terms (RFC
/// 9113). An adapter builds it from its client's HTTP/2 error; [`class`](Self::class) is
/// the one rule (SPEC 9).
///
/// ```
/// use baton_core::{FailureClass, H2End, REFUSED_STREAM};
/// assert_eq!(H2End::Reset { code: REFUSED_STREAM }.class(), FailureClass::Undelivered);
/// assert_eq!(H2End::Reset { code: 0x2 }.class(), FailureClass::Ambiguous);
/// assert_eq!(H2End::GoAway { above_last: true }.class(), FailureClass::Undelivered);
/// assert_eq!(H2End::GoAway { above_last: false }.class(), FailureClass::Ambiguous);
/// assert_eq!(H2End::NotAgreed.class(), FailureClass::Undelivered);
/// assert_eq!(H2End::ConnectionLost.class(), FailureClass::Ambiguous);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum H2End {
    /// The server reset the request's stream (`RST_STREAM`) with this error code before
    /// any response head.
    Reset {
        /// The HTTP/2 error code.
        code: u32,
    },
    /// The server's `GOAWAY` ended the stream: `above_last` when the request's stream id
    /// is known to be above the frame's last stream id (the server promises it did not
    /// process it); `false` when it is at or below it, or not known to be above.
    GoAway {
        /// Whether the stream id is known to be above the last stream id the server may
        /// process.
        above_last: bool,
    },
    /// The connection closed before the protocol was agreed (ALPN, the connection
    /// preface and first SETTINGS): no request was written.
    NotAgreed,
    /// The connection broke (I/O error, protocol error, our own reset) after the
    /// request's HEADERS were written.
    ConnectionLost,
}

/// What an HTTP/2 library says about a stream's error, in its own predicates (h2's
/// `Error::is_remote`, `is_go_away`, `is_reset`, `reason`), and whether the client hands
/// a `GOAWAY` only to the streams it left unprocessed: the adapters read their client's
/// error into it and [`end`](Self::end) gives the [`H2End`].
///
/// ```
/// use baton_core::{FailureClass, H2End, H2StreamError, REFUSED_STREAM};
/// let refused = H2StreamError {
///     remote: true,
///     go_away: false,
///     reset: true,
///     code: Some(REFUSED_STREAM),
///     goaway_per_stream: false,
/// };
/// assert_eq!(refused.end(), Some(H2End::Reset { code: REFUSED_STREAM }));
/// // A client that hands a GOAWAY only to the streams above its last stream id: proof.
/// let goaway = H2StreamError {
///     remote: true, go_away: true, reset: false, code: Some(0), goaway_per_stream: true,
/// };
/// assert_eq!(goaway.end().map(H2End::class), Some(FailureClass::Undelivered));
/// // One that may hand the connection's GOAWAY to any request: no proof.
/// let any = H2StreamError { goaway_per_stream: false, ..goaway };
/// assert_eq!(any.end().map(H2End::class), Some(FailureClass::Ambiguous));
/// // Our own side's errors prove nothing about the server.
/// let local = H2StreamError { remote: false, ..goaway };
/// assert_eq!(local.end(), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct H2StreamError {
    /// The peer (the server) sent it.
    pub remote: bool,
    /// It came from a `GOAWAY` frame.
    pub go_away: bool,
    /// It came from a `RST_STREAM` frame.
    pub reset: bool,
    /// The HTTP/2 error code, if any.
    pub code: Option<u32>,
    /// The client hands a remote `GOAWAY` error to a request only through its stream, so
    /// the error is proof. h2 gives a remote `GOAWAY` to a stream's response only when the
    /// stream is above the frame's last id, but its `poll_ready` returns the connection's
    /// error to any caller; right after opening a request's stream, hyper's HTTP/2 client
    /// calls it and hands the request any error it gets. That is proof only where the call
    /// cannot overlap the connection's task (hyper's tasks for the connection on one
    /// thread: baton-async-std).
    pub goaway_per_stream: bool,
}

impl H2StreamError {
    /// The end this error proves, if any. With [`goaway_per_stream`](Self::goaway_per_stream),
    /// a remote `GOAWAY` error reaches a stream only when its id is above the frame's last
    /// stream id (a stream at or below it that the connection then loses gets an I/O
    /// error), so it is read as `GoAway { above_last: true }`; without it, the stream may
    /// be at or below the last id, and it is `GoAway { above_last: false }`. A remote reset
    /// carries its code (a reset is sent for one stream, named by its id). Anything else
    /// (our own side's errors, I/O) is `None`: no proof, left to the adapter's phase rules.
    ///
    /// Why the client matters: right after it opens a request's stream, hyper's HTTP/2
    /// client checks the connection and hands that request the connection's error if
    /// there is one. A `GOAWAY` the connection's task read in that instant is that error,
    /// and h2 reports it as a remote `GOAWAY` whatever the stream's id; meanwhile the
    /// stream's HEADERS may be written, and a server draining with `GOAWAY(2^31-1)` may
    /// process them. Where the connection's task can run in that instant (another thread
    /// of a multi-threaded runtime), the error is no proof.
    pub fn end(self) -> Option<H2End> {
        if !self.remote {
            return None;
        }
        if self.go_away {
            return Some(H2End::GoAway {
                above_last: self.goaway_per_stream,
            });
        }
        if self.reset {
            return Some(H2End::Reset {
                code: self.code.unwrap_or(u32::MAX),
            });
        }
        None
    }
}

impl H2End {
    /// SPEC 9: `REFUSED_STREAM` before a response head, and a `GOAWAY` below the stream,
    /// prove that nothing was processed (undelivered), as does a connection closed before
    /// the protocol was agreed; any other reset or connection error after HEADERS were
    /// written is ambiguous.
    pub fn class(self) -> FailureClass {
        match self {
            H2End::Reset { code } if code == REFUSED_STREAM => FailureClass::Undelivered,
            H2End::GoAway { above_last: true } | H2End::NotAgreed => FailureClass::Undelivered,
            H2End::Reset { .. } | H2End::GoAway { .. } | H2End::ConnectionLost => {
                FailureClass::Ambiguous
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_protocols_proofs_make_an_h2_end_undelivered() {
        for code in 0..=0xd_u32 {
            let want = if code == REFUSED_STREAM {
                FailureClass::Undelivered
            } else {
                FailureClass::Ambiguous
            };
            assert_eq!(H2End::Reset { code }.class(), want, "code {code}");
        }
        assert!(!H2End::GoAway { above_last: true }
            .class()
            .may_have_executed());
        assert!(H2End::GoAway { above_last: false }
            .class()
            .may_have_executed());
        assert!(H2End::ConnectionLost.class().may_have_executed());
        assert!(!H2End::NotAgreed.class().may_have_executed());
    }

    #[test]
    fn an_endpoint_identity_replaces_the_policy_pair_whole() {
        let policy = Tls {
            ca_file: Some("p-ca".into()),
            client_cert: Some("p-cert".into()),
            client_key: Some("p-key".into()),
        };
        let own = Tls {
            client_cert: Some("e-cert".into()),
            client_key: Some("e-key".into()),
            ..Tls::default()
        };
        let merged = own.over(&policy);
        assert_eq!(merged.ca_file, policy.ca_file);
        assert_eq!(merged.client_cert.as_deref(), Some("e-cert".as_ref()));
        assert_eq!(merged.client_key.as_deref(), Some("e-key".as_ref()));
        assert_eq!(Tls::default().over(&policy), policy);
        let half = Tls {
            client_key: Some("k".into()),
            ..Tls::default()
        };
        assert_eq!(half.missing_half(), Some("client_cert"));
    }
}
