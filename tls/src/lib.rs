//! # baton-tls: one TLS trust rule on every runtime
//!
//! SPEC 9 ("TLS trust and identity") asks the same trust on every adapter: the platform's
//! trust store, plus the PEM certificates of `ca_file`, and an optional client identity
//! (`client_cert` + `client_key`) presented only on its endpoint's connections. This crate
//! is that rule, written once:
//!
//! - [`TlsConfig::load`] reads an endpoint's files ([`baton_core::Tls`]) when a client is
//!   built. A missing file, a file with no PEM in it, an encrypted key, or a key that does
//!   not match its certificate is a [`TlsError`] that names the setting and the file; the
//!   key's bytes never appear in a message or in `Debug`.
//! - [`TlsConfig::client_config`] gives the rustls configuration of a connection (ALPN
//!   from the endpoint's [`HttpVersion`], early data off), used as is by baton-tokio
//!   (reqwest) and baton-async-std (futures-rustls); baton-blocking hands ureq the same
//!   certificate list ([`TlsConfig::trusted`]) and identity ([`TlsConfig::identity_pem`]).
//! - [`rejection`] reads, from any client's error chain, why a handshake failed on a
//!   certificate (unknown issuer, name mismatch, expired, or a client identity the server
//!   refused): the adapters report such an attempt as
//!   [`FailureClass::Untrusted`](baton_core::FailureClass::Untrusted), and name the reason.
//!
//! The platform's store is the one `rustls-native-certs` reads: on Linux and the BSDs,
//! `SSL_CERT_FILE` and `SSL_CERT_DIR` when set (and then only those), else the
//! distribution's bundle and certificate directories; on macOS and Windows, the system
//! keychain and store. It is read once per process for each value of those two
//! variables; certificates in it that cannot be parsed are skipped.
//!
//! ```
//! use baton_core::{HttpVersion, Tls};
//! use baton_tls::TlsConfig;
//!
//! let tls = TlsConfig::load(&Tls::default()).unwrap();
//! let config = tls.client_config(HttpVersion::Auto);
//! assert_eq!(config.alpn_protocols, [b"h2".to_vec(), b"http/1.1".to_vec()]);
//! assert!(!config.enable_early_data);
//! ```
//!
//! ## Dependencies
//! - `rustls` (ring provider): the TLS implementation under every baton adapter.
//! - `rustls-native-certs`: the platform's trust store, read the same way for all of them.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

use std::error::Error as StdError;
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use baton_core::{HttpVersion, Tls};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{AlertDescription, CertificateError, ClientConfig, RootCertStore};

/// The crypto provider of every configuration this crate builds (ring: the one ureq and
/// futures-rustls already use; a process with two providers compiled in has no default).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Why a TLS file could not be used: the setting, the file, and what is wrong with it.
///
/// ```
/// use baton_core::Tls;
/// let err = baton_tls::TlsConfig::load(&Tls {
///     ca_file: Some("/nonexistent/ca.pem".into()),
///     ..Tls::default()
/// })
/// .unwrap_err();
/// assert_eq!(err.setting(), "tls.ca_file");
/// assert!(err.to_string().contains("/nonexistent/ca.pem"), "{err}");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsError {
    setting: &'static str,
    file: PathBuf,
    reason: String,
}

impl TlsError {
    /// An error about `file`, named by `setting`: what is wrong with it in `reason`
    /// (never the file's contents).
    pub fn new(setting: &'static str, file: &Path, reason: impl Into<String>) -> Self {
        TlsError {
            setting,
            file: file.to_path_buf(),
            reason: reason.into(),
        }
    }

    /// The setting that named the file: `tls.ca_file`, `tls.client_cert` or
    /// `tls.client_key`.
    pub fn setting(&self) -> &'static str {
        self.setting
    }

    /// The file.
    pub fn file(&self) -> &Path {
        &self.file
    }
}

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} = {:?}: {}",
            self.setting,
            self.file.display().to_string(),
            self.reason
        )
    }
}

impl StdError for TlsError {}

/// The trust and identity of one endpoint's connections, loaded from its files. Cheap to
/// clone (shared parts).
#[derive(Clone)]
pub struct TlsConfig {
    files: Tls,
    trusted: Arc<[CertificateDer<'static>]>,
    roots: Arc<RootCertStore>,
    identity: Option<Arc<Identity>>,
}

/// A client identity: its certificate chain, its key, and both files' PEM text (for
/// clients that take PEM). `Debug` shows neither the key nor its text.
struct Identity {
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
}

impl fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsConfig")
            .field("files", &self.files)
            .field("trusted", &self.trusted.len())
            .field("identity", &self.identity.is_some())
            .finish()
    }
}

impl TlsConfig {
    /// Loads the platform's trust store, `ca_file` and the client identity named by
    /// `files`. Errors name the setting and the file.
    pub fn load(files: &Tls) -> Result<TlsConfig, TlsError> {
        let (platform, platform_roots) = platform_store();
        let extra = match &files.ca_file {
            Some(path) => read_certificates("tls.ca_file", path)?,
            None => Vec::new(),
        };
        // The platform's unusable entries were skipped, as every platform verifier does;
        // an unusable certificate in `ca_file` is the user's error.
        let roots = match &files.ca_file {
            None => platform_roots,
            Some(path) => {
                let mut roots = (*platform_roots).clone();
                for cert in &extra {
                    roots.add(cert.clone()).map_err(|e| {
                        TlsError::new(
                            "tls.ca_file",
                            path,
                            format!("not a usable CA certificate: {e}"),
                        )
                    })?;
                }
                Arc::new(roots)
            }
        };
        let trusted: Vec<_> = platform.iter().cloned().chain(extra).collect();
        let identity = match (&files.client_cert, &files.client_key) {
            (Some(cert), Some(key)) => Some(Arc::new(read_identity(cert, key)?)),
            (Some(cert), None) => {
                return Err(TlsError::new(
                    "tls.client_cert",
                    cert,
                    "tls.client_key is not set",
                ))
            }
            (None, Some(key)) => {
                return Err(TlsError::new(
                    "tls.client_key",
                    key,
                    "tls.client_cert is not set",
                ))
            }
            (None, None) => None,
        };
        Ok(TlsConfig {
            files: files.clone(),
            trusted: trusted.into(),
            roots,
            identity,
        })
    }

    /// The files this configuration was loaded from.
    pub fn files(&self) -> &Tls {
        &self.files
    }

    /// Every trusted certificate: the platform's store, then `ca_file`'s.
    pub fn trusted(&self) -> &[CertificateDer<'static>] {
        &self.trusted
    }

    /// The same trust without the client identity: what a connection to another origin
    /// than the endpoint's (a redirect) uses, since an identity is presented only on its
    /// endpoint's own connections.
    pub fn without_identity(&self) -> TlsConfig {
        TlsConfig {
            files: Tls {
                client_cert: None,
                client_key: None,
                ..self.files.clone()
            },
            identity: None,
            ..self.clone()
        }
    }

    /// The client identity's certificate chain, if any.
    pub fn identity_chain(&self) -> Option<&[CertificateDer<'static>]> {
        self.identity.as_deref().map(|i| i.chain.as_slice())
    }

    /// Whether a client identity is presented.
    pub fn has_identity(&self) -> bool {
        self.identity.is_some()
    }

    /// The client identity as PEM text (certificate chain, key), for clients that take
    /// PEM. The key's text is a secret: never log it.
    pub fn identity_pem(&self) -> Option<(&[u8], &[u8])> {
        self.identity
            .as_deref()
            .map(|i| (i.cert_pem.as_slice(), i.key_pem.as_slice()))
    }

    /// The rustls configuration of a connection: this trust and identity, ALPN from
    /// `version` ([`HttpVersion::alpn`]), TLS 1.2 and 1.3, early data (0-RTT) off
    /// (SPEC 1: no request byte before the handshake completes).
    pub fn client_config(&self, version: HttpVersion) -> ClientConfig {
        let builder = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .expect("ring supports the default protocol versions")
            .with_root_certificates(self.roots.clone());
        let mut config = match &self.identity {
            // The pair was checked by `load`, with the same provider.
            Some(id) => builder
                .with_client_auth_cert(id.chain.clone(), id.key.clone_key())
                .expect("the identity was checked when it was loaded"),
            None => builder.with_no_client_auth(),
        };
        config.alpn_protocols = version.alpn().iter().map(|p| p.to_vec()).collect();
        config.enable_early_data = false;
        config
    }
}

/// `config` with no client identity: the configuration of a connection to another origin
/// than the endpoint's (a redirect), when the endpoint's own presents one (SPEC 9). Its
/// trust, ALPN and everything else stay, its session store included: the store is found
/// by server name alone, but rustls (0.23.24 and later, which this crate requires)
/// resumes a session only with the certificate resolver it was made with, so a TLS 1.3
/// session of the identity's handshake (which would carry the identity to the server) is
/// never resumed here.
///
/// ```
/// let config = baton_tls::TlsConfig::load(&baton_core::Tls::default())
///     .unwrap()
///     .client_config(baton_core::HttpVersion::Auto);
/// assert!(!baton_tls::without_client_identity(config).client_auth_cert_resolver.has_certs());
/// ```
pub fn without_client_identity(mut config: ClientConfig) -> ClientConfig {
    #[derive(Debug)]
    struct NoIdentity;
    impl rustls::client::ResolvesClientCert for NoIdentity {
        fn resolve(
            &self,
            _: &[&[u8]],
            _: &[rustls::SignatureScheme],
        ) -> Option<Arc<rustls::sign::CertifiedKey>> {
            None
        }
        fn has_certs(&self) -> bool {
            false
        }
    }
    config.client_auth_cert_resolver = Arc::new(NoIdentity);
    config
}

/// An endpoint's TLS files could not be used: which endpoint, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointTlsError {
    /// The endpoint's id.
    pub endpoint: String,
    /// What is wrong with its files.
    pub source: TlsError,
}

impl fmt::Display for EndpointTlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "endpoint {:?}: {}", self.endpoint, self.source)
    }
}

impl StdError for EndpointTlsError {
    /// The sources of the file's error, whose text this one shows (each said once in a
    /// chain).
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source.source()
    }
}

/// The TLS configuration of every endpoint of `policy` (its own files over the
/// policy's, [`Policy::tls_for`](baton_core::Policy::tls_for)), in endpoint order; each
/// distinct set of files is loaded once, and endpoints with the same files share it
/// ([`TlsConfig::files`] tells them apart).
///
/// ```
/// use baton_core::{Endpoint, Policy};
/// let policy = Policy::builder()
///     .endpoint(Endpoint::new("a", "https://a.example/"))
///     .endpoint(Endpoint::new("b", "https://b.example/"))
///     .build()
///     .unwrap();
/// let tls = baton_tls::for_policy(&policy).unwrap();
/// assert_eq!(tls.len(), 2);
/// assert_eq!(tls[0].files(), tls[1].files());
/// ```
pub fn for_policy(policy: &baton_core::Policy) -> Result<Vec<TlsConfig>, EndpointTlsError> {
    let mut loaded: Vec<TlsConfig> = Vec::new();
    let mut out = Vec::with_capacity(policy.endpoints().len());
    for (i, endpoint) in policy.endpoints().iter().enumerate() {
        let files = policy.tls_for(i);
        let config = match loaded.iter().find(|c| c.files == files) {
            Some(c) => c.clone(),
            None => {
                let c = TlsConfig::load(&files).map_err(|source| EndpointTlsError {
                    endpoint: endpoint.id().to_string(),
                    source,
                })?;
                loaded.push(c.clone());
                c
            }
        };
        out.push(config);
    }
    Ok(out)
}

/// The platform's trusted certificates and their root store, read once per value of
/// `SSL_CERT_FILE` and `SSL_CERT_DIR`; entries that cannot be read or parsed are skipped,
/// as every platform verifier does.
fn platform_store() -> (Arc<[CertificateDer<'static>]>, Arc<RootCertStore>) {
    type Key = (Option<OsString>, Option<OsString>);
    type Store = (Arc<[CertificateDer<'static>]>, Arc<RootCertStore>);
    static CACHE: Mutex<Option<(Key, Store)>> = Mutex::new(None);
    let key = (
        std::env::var_os("SSL_CERT_FILE"),
        std::env::var_os("SSL_CERT_DIR"),
    );
    let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((k, store)) = cache.as_ref() {
        if *k == key {
            return store.clone();
        }
    }
    let certs: Arc<[CertificateDer<'static>]> =
        rustls_native_certs::load_native_certs().certs.into();
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(certs.iter().cloned());
    let store = (certs, Arc::new(roots));
    *cache = Some((key, store.clone()));
    store
}

fn read_file(setting: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|e| {
        let reason = match e.kind() {
            std::io::ErrorKind::NotFound => "no such file".to_string(),
            std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
            _ => format!("cannot be read: {e}"),
        };
        TlsError::new(setting, path, reason)
    })
}

/// A PEM problem in words of our own: the parser's own text can quote the file's bytes.
fn pem_problem(e: &rustls::pki_types::pem::Error) -> &'static str {
    use rustls::pki_types::pem::Error as E;
    match e {
        E::MissingSectionEnd { .. } => "a PEM section has no END line",
        E::IllegalSectionStart { .. } => "a PEM section starts badly",
        E::Base64Decode(_) => "a PEM section is not valid base64",
        _ => "it is not valid PEM",
    }
}

fn read_certificates(
    setting: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = read_file(setting, path)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::new(setting, path, pem_problem(&e)))?;
    if certs.is_empty() {
        return Err(TlsError::new(
            setting,
            path,
            "no PEM certificate (-----BEGIN CERTIFICATE-----) in it",
        ));
    }
    Ok(certs)
}

fn read_identity(cert: &Path, key: &Path) -> Result<Identity, TlsError> {
    let chain = read_certificates("tls.client_cert", cert)?;
    let cert_pem = read_file("tls.client_cert", cert)?;
    let key_pem = read_file("tls.client_key", key)?;
    let text = String::from_utf8_lossy(&key_pem);
    if text.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----")
        || text.contains("Proc-Type: 4,ENCRYPTED")
    {
        return Err(TlsError::new(
            "tls.client_key",
            key,
            "the key is encrypted; give it unencrypted (for example: openssl pkey -in KEY -out PLAIN)",
        ));
    }
    let private = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
        let reason = match e {
            rustls::pki_types::pem::Error::NoItemsFound => {
                "no PEM private key (PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY) in it"
            }
            other => pem_problem(&other),
        };
        TlsError::new("tls.client_key", key, reason)
    })?;
    // Building a configuration checks that the key parses and matches the certificate.
    ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .with_root_certificates(RootCertStore::empty())
        .with_client_auth_cert(chain.clone(), private.clone_key())
        .map_err(|e| match e {
            rustls::Error::InconsistentKeys(_) => TlsError::new(
                "tls.client_key",
                key,
                format!(
                    "the key does not match the certificate of tls.client_cert ({})",
                    cert.display()
                ),
            ),
            // The key loaded: the match check could not parse the certificate itself.
            rustls::Error::InvalidCertificate(_) => TlsError::new(
                "tls.client_cert",
                cert,
                "its first certificate cannot be parsed (not a valid X.509 certificate)",
            ),
            _ => TlsError::new(
                "tls.client_key",
                key,
                "the key cannot be used (not an RSA, ECDSA or Ed25519 key)",
            ),
        })?;
    Ok(Identity {
        chain,
        key: private,
        cert_pem,
        key_pem,
    })
}

/// Why a TLS handshake failed on a certificate (SPEC 9): an attempt that ends so is
/// undelivered, and the same endpoint would fail the same way again.
///
/// ```
/// use baton_tls::Rejection;
/// assert_eq!(Rejection::UnknownIssuer.to_string(), "unknown issuer");
/// assert_eq!(Rejection::NameMismatch.to_string(), "name mismatch");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Rejection {
    /// The server's certificate does not chain to a trusted certificate.
    UnknownIssuer,
    /// The server's certificate is not valid for the endpoint's host name.
    NameMismatch,
    /// The server's certificate has expired.
    Expired,
    /// The server's certificate is not valid yet.
    NotYetValid,
    /// The server's certificate was revoked.
    Revoked,
    /// The server's certificate is otherwise unusable (bad signature, wrong purpose, bad
    /// encoding).
    BadCertificate,
    /// The server refused the client's identity, or asked for one the client does not
    /// have (a handshake alert).
    ClientIdentityRefused,
}

impl Rejection {
    /// A short description: `unknown issuer`, `name mismatch`, `expired`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            Rejection::UnknownIssuer => "unknown issuer",
            Rejection::NameMismatch => "name mismatch",
            Rejection::Expired => "expired",
            Rejection::NotYetValid => "not valid yet",
            Rejection::Revoked => "revoked",
            Rejection::BadCertificate => "bad certificate",
            Rejection::ClientIdentityRefused => "client certificate refused by the server",
        }
    }
}

impl Rejection {
    /// Whether the server said it (a handshake alert refusing our identity), rather than
    /// our own verification of its certificate. Our verdict comes before the client's
    /// side of the handshake ends, so before any request byte: always proof. The server's
    /// alert is proof only on a connection this attempt opened and before anything of the
    /// response arrived (in TLS 1.3 it comes after the client's side ended, with the
    /// request possibly written but never read by a server that refused the handshake):
    /// an adapter that cannot tell which connection an error came from reads it as
    /// ambiguous.
    ///
    /// ```
    /// use baton_tls::Rejection;
    /// assert!(!Rejection::UnknownIssuer.is_server_alert());
    /// assert!(Rejection::ClientIdentityRefused.is_server_alert());
    /// ```
    pub fn is_server_alert(self) -> bool {
        self == Rejection::ClientIdentityRefused
    }

    /// The reason with what it is about: `certificate rejected: unknown issuer`, ...
    pub fn message(self) -> &'static str {
        match self {
            Rejection::UnknownIssuer => "certificate rejected: unknown issuer",
            Rejection::NameMismatch => "certificate rejected: name mismatch",
            Rejection::Expired => "certificate rejected: expired",
            Rejection::NotYetValid => "certificate rejected: not valid yet",
            Rejection::Revoked => "certificate rejected: revoked",
            Rejection::BadCertificate => "certificate rejected: bad certificate",
            Rejection::ClientIdentityRefused => "client certificate refused by the server",
        }
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The certificate rejection in an error chain, if any: a rustls error anywhere in it
/// (also inside an `io::Error`, whose `source()` skips the error it wraps), above any
/// baton call's own error or the link to its last attempt
/// ([`baton_core::Error::is_call_link`]): what is below that one is of the inner call's
/// attempts, read by its report, not of this attempt.
///
/// ```
/// use baton_tls::{rejection, Rejection};
/// let inner = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
/// let io = std::io::Error::new(std::io::ErrorKind::InvalidData, inner);
/// assert_eq!(rejection(&io), Some(Rejection::UnknownIssuer));
/// assert_eq!(rejection(&std::io::Error::other("reset")), None);
/// ```
pub fn rejection(err: &(dyn StdError + 'static)) -> Option<Rejection> {
    rejection_above(err, &|_| false)
}

/// [`rejection`], read only down to the first error in the chain for which `end` is true
/// (that one excluded): an adapter ends the attempt's own chain where the caller's errors
/// begin (a request body's stream that failed: its error is the caller's source's, not of
/// the attempt's connection).
///
/// ```
/// use baton_tls::rejection_above;
/// let inner = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
/// let io = std::io::Error::new(std::io::ErrorKind::InvalidData, inner);
/// assert!(rejection_above(&io, &|_| false).is_some());
/// assert_eq!(rejection_above(&io, &|e| e.is::<std::io::Error>()), None);
/// ```
pub fn rejection_above(
    err: &(dyn StdError + 'static),
    end: &dyn Fn(&(dyn StdError + 'static)) -> bool,
) -> Option<Rejection> {
    let mut cur: Option<&(dyn StdError + 'static)> = Some(err);
    let mut depth = 0;
    while let Some(e) = cur {
        if baton_core::Error::is_call_link(e) || end(e) {
            return None;
        }
        if let Some(r) = e.downcast_ref::<rustls::Error>().and_then(of_rustls) {
            return Some(r);
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            // `io::Error::source` skips the error it wraps: an end wrapped in one is
            // looked at here, or the walk would step past it.
            let inner = io.get_ref().map(|i| i as &(dyn StdError + 'static));
            if inner.is_some_and(|i| baton_core::Error::is_call_link(i) || end(i)) {
                return None;
            }
            if let Some(r) = inner.and_then(|inner| rejection_above(inner, end)) {
                return Some(r);
            }
            if let Some(r) = alert_in_text(io) {
                return Some(r);
            }
        }
        depth += 1;
        if depth > 32 {
            return None;
        }
        cur = e.source();
    }
    None
}

/// A handshake alert known only by rustls' own text of it: h2 keeps an I/O error's kind
/// and text but not the error itself, so over HTTP/2 the server's refusal of the client's
/// identity (an alert after the client's side of a TLS 1.3 handshake) reaches the client
/// as `InvalidData` "received fatal alert: CertificateRequired". Only that exact form of
/// a certificate alert counts.
fn alert_in_text(io: &std::io::Error) -> Option<Rejection> {
    if io.kind() != std::io::ErrorKind::InvalidData {
        return None;
    }
    let text = io.get_ref()?.to_string();
    let name = text.strip_prefix("received fatal alert: ")?;
    let alert = [
        AlertDescription::CertificateRequired,
        AlertDescription::BadCertificate,
        AlertDescription::UnsupportedCertificate,
        AlertDescription::CertificateRevoked,
        AlertDescription::CertificateExpired,
        AlertDescription::CertificateUnknown,
        AlertDescription::UnknownCA,
        AlertDescription::AccessDenied,
    ]
    .into_iter()
    .find(|a| format!("{a:?}") == name)?;
    of_rustls(&rustls::Error::AlertReceived(alert))
}

fn of_rustls(e: &rustls::Error) -> Option<Rejection> {
    use CertificateError as C;
    match e {
        rustls::Error::InvalidCertificate(c) => Some(match c {
            C::UnknownIssuer => Rejection::UnknownIssuer,
            C::NotValidForName | C::NotValidForNameContext { .. } => Rejection::NameMismatch,
            C::Expired | C::ExpiredContext { .. } => Rejection::Expired,
            C::NotValidYet | C::NotValidYetContext { .. } => Rejection::NotYetValid,
            C::Revoked => Rejection::Revoked,
            _ => Rejection::BadCertificate,
        }),
        rustls::Error::NoCertificatesPresented => Some(Rejection::BadCertificate),
        rustls::Error::AlertReceived(
            AlertDescription::CertificateRequired
            | AlertDescription::BadCertificate
            | AlertDescription::UnsupportedCertificate
            | AlertDescription::CertificateRevoked
            | AlertDescription::CertificateExpired
            | AlertDescription::CertificateUnknown
            | AlertDescription::UnknownCA
            | AlertDescription::AccessDenied,
        ) => Some(Rejection::ClientIdentityRefused),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str, contents: &[u8]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("baton-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, contents).unwrap();
        path
    }

    fn identity(name: &str) -> (String, String) {
        let cert = rcgen::generate_simple_self_signed(vec![name.to_string()]).unwrap();
        (cert.cert.pem(), cert.signing_key.serialize_pem())
    }

    fn files(cert: &Path, key: &Path) -> Tls {
        Tls {
            client_cert: Some(cert.into()),
            client_key: Some(key.into()),
            ..Tls::default()
        }
    }

    #[test]
    fn a_ca_file_adds_its_certificates_to_the_platform_store() {
        let (pem, _) = identity("ca.test");
        let path = temp("ca.pem", pem.as_bytes());
        let base = TlsConfig::load(&Tls::default()).unwrap().trusted().len();
        let tls = TlsConfig::load(&Tls {
            ca_file: Some(path),
            ..Tls::default()
        })
        .unwrap();
        assert_eq!(tls.trusted().len(), base + 1);
    }

    #[test]
    fn bad_files_are_errors_that_name_the_setting_and_the_file() {
        let not_pem = temp("not.pem", b"hello");
        let err = TlsConfig::load(&Tls {
            ca_file: Some(not_pem.clone()),
            ..Tls::default()
        })
        .unwrap_err();
        assert_eq!(err.setting(), "tls.ca_file");
        assert!(err.to_string().contains("not.pem"), "{err}");
        assert!(err.to_string().contains("no PEM certificate"), "{err}");

        let (cert, key) = identity("client.test");
        let cert = temp("client.pem", cert.as_bytes());
        let missing = Path::new("/nonexistent/key.pem");
        let err = TlsConfig::load(&files(&cert, missing)).unwrap_err();
        assert_eq!(err.setting(), "tls.client_key");
        assert!(err.to_string().contains("no such file"), "{err}");

        let encrypted = temp(
            "enc.key",
            b"-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIB\n-----END ENCRYPTED PRIVATE KEY-----\n",
        );
        let err = TlsConfig::load(&files(&cert, &encrypted)).unwrap_err();
        assert!(err.to_string().contains("encrypted"), "{err}");

        let (_, other_key) = identity("other.test");
        let other_key = temp("other.key", other_key.as_bytes());
        let err = TlsConfig::load(&files(&cert, &other_key)).unwrap_err();
        assert!(err.to_string().contains("does not match"), "{err}");
        // The key's text never appears in a message.
        let key_text = std::fs::read_to_string(&other_key).unwrap();
        let body = key_text.lines().nth(1).unwrap();
        assert!(!err.to_string().contains(body));
        assert!(!format!("{err:?}").contains(body));

        // PEM around bytes that are no certificate, beside a good key: the certificate's
        // setting is named, not the key's.
        let good_key = temp("client.key", key.as_bytes());
        let not_x509 = temp(
            "garbage.pem",
            b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        );
        let err = TlsConfig::load(&files(&not_x509, &good_key)).unwrap_err();
        assert_eq!(err.setting(), "tls.client_cert", "{err}");
        assert!(err.to_string().contains("garbage.pem"), "{err}");
        assert!(err.to_string().contains("cannot be parsed"), "{err}");

        let good = TlsConfig::load(&files(&cert, &good_key)).unwrap();
        assert!(good.has_identity());
        let shown = format!("{good:?}");
        assert!(!shown.contains(key.lines().nth(1).unwrap()), "{shown}");
    }

    /// A handshake run in memory, with the session tickets the server sends after it:
    /// whether the client resumed a session, or the first error either side raised.
    fn handshake(
        client: Arc<ClientConfig>,
        server: Arc<rustls::ServerConfig>,
    ) -> Result<rustls::HandshakeKind, rustls::Error> {
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let mut c = rustls::Connection::from(rustls::ClientConnection::new(client, name)?);
        let mut s = rustls::Connection::from(rustls::ServerConnection::new(server)?);
        let pass = |from: &mut rustls::Connection, to: &mut rustls::Connection| {
            let mut bytes = Vec::new();
            while from.wants_write() {
                from.write_tls(&mut bytes).unwrap();
            }
            let mut rest = &bytes[..];
            while !rest.is_empty() {
                to.read_tls(&mut rest).unwrap();
                to.process_new_packets()?;
            }
            Ok::<_, rustls::Error>(())
        };
        for _ in 0..4 {
            pass(&mut c, &mut s)?;
            pass(&mut s, &mut c)?;
        }
        assert!(!c.is_handshaking() && !s.is_handshaking());
        Ok(c.handshake_kind().unwrap())
    }

    #[test]
    fn a_configuration_without_the_identity_resumes_no_session_made_with_it() {
        let (pki, pem) = testkit::TestPki::temp("resume");
        let tls = TlsConfig::load(&Tls {
            ca_file: Some(pem.ca.clone()),
            ..files(&pem.client_cert, &pem.client_key)
        })
        .unwrap();
        // A server that accepts only clients with a certificate of its CA.
        let server = pki.server_config(&pki.server, &["http/1.1"], true);
        let own = Arc::new(tls.client_config(HttpVersion::Http1));
        let bare = Arc::new(without_client_identity((*own).clone()));
        let full = rustls::HandshakeKind::Full;
        assert_eq!(handshake(own.clone(), server.clone()), Ok(full));
        // The identity's own configuration resumes the session it made, certificate and all.
        let resumed = handshake(own, server.clone());
        assert_eq!(resumed, Ok(rustls::HandshakeKind::Resumed));
        // The same server name, and the same session store: resuming here would present
        // the client certificate again. A full handshake has none to give.
        let refused = handshake(bare, server).unwrap_err();
        assert!(
            matches!(refused, rustls::Error::NoCertificatesPresented),
            "{refused:?}"
        );
    }

    #[test]
    fn alpn_follows_the_http_version() {
        let tls = TlsConfig::load(&Tls::default()).unwrap();
        assert_eq!(
            tls.client_config(HttpVersion::Http1).alpn_protocols,
            [b"http/1.1".to_vec()]
        );
        assert_eq!(
            tls.client_config(HttpVersion::Http2).alpn_protocols,
            [b"h2".to_vec()]
        );
    }

    #[test]
    fn rejections_are_read_from_rustls_errors_and_alerts() {
        let name = rustls::Error::InvalidCertificate(CertificateError::NotValidForName);
        assert_eq!(rejection(&name), Some(Rejection::NameMismatch));
        let alert = rustls::Error::AlertReceived(AlertDescription::CertificateRequired);
        let io = std::io::Error::other(std::io::Error::new(std::io::ErrorKind::InvalidData, alert));
        assert_eq!(rejection(&io), Some(Rejection::ClientIdentityRefused));
        let other = rustls::Error::AlertReceived(AlertDescription::HandshakeFailure);
        assert_eq!(rejection(&other), None);
        // h2 keeps the I/O error's text only.
        let text = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "received fatal alert: CertificateRequired",
        );
        assert_eq!(rejection(&text), Some(Rejection::ClientIdentityRefused));
        let other = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "received fatal alert: DecodeError",
        );
        assert_eq!(rejection(&other), None);
    }
}
