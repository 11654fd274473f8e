//! Test certificates made at run time: a private CA, a server identity for `127.0.0.1`
//! and `localhost` signed by it, a client identity signed by it, and the identities a
//! client must reject (signed by another CA, issued for another name, expired).
//!
//! [`TestPki::write`] puts them in a directory as PEM files, for the settings and flags
//! that take file names (`ca_file`, `--cacert`, `--cert`, `--key`).
//!
//! ```
//! let pki = testkit::TestPki::new();
//! let dir = pki.write(&std::env::temp_dir().join("testkit-pki-doc"));
//! assert!(dir.ca.exists() && dir.client_cert.exists() && dir.client_key.exists());
//! assert!(std::fs::read_to_string(&dir.ca).unwrap().starts_with("-----BEGIN CERTIFICATE-----"));
//! ```

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// A certificate chain and its key, as a server or a client presents them.
#[derive(Clone)]
pub struct Identity {
    /// The certificate, then its issuer's (PEM).
    pub cert_pem: String,
    /// The private key (PKCS #8 PEM).
    pub key_pem: String,
    chain: Vec<CertificateDer<'static>>,
    key_der: Vec<u8>,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity")
            .field("chain", &self.chain.len())
            .finish_non_exhaustive()
    }
}

impl Identity {
    /// The chain, for rustls.
    pub fn chain(&self) -> Vec<CertificateDer<'static>> {
        self.chain.clone()
    }

    /// The key, for rustls.
    pub fn key(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_der.clone()))
    }
}

/// The files [`TestPki::write`] wrote.
#[derive(Debug, Clone)]
pub struct PkiFiles {
    /// The test CA's certificate (trust it with `ca_file` / `--cacert`).
    pub ca: PathBuf,
    /// The client identity's certificate chain (`client_cert` / `--cert`).
    pub client_cert: PathBuf,
    /// The client identity's key (`client_key` / `--key`).
    pub client_key: PathBuf,
    /// A CA nobody trusts (its identities are rejected as "unknown issuer").
    pub other_ca: PathBuf,
}

/// A private CA and the identities of the TLS tests.
pub struct TestPki {
    ca: CertifiedIssuer<'static, KeyPair>,
    other_ca: CertifiedIssuer<'static, KeyPair>,
    /// The server identity for `127.0.0.1` and `localhost`, signed by the CA.
    pub server: Identity,
    /// A client identity signed by the CA.
    pub client: Identity,
    /// A server identity for `127.0.0.1` signed by another CA (unknown issuer).
    pub untrusted_server: Identity,
    /// A server identity signed by the CA for another name (`wrong.test`).
    pub wrong_name_server: Identity,
    /// A server identity signed by the CA that expired in 2020.
    pub expired_server: Identity,
}

fn new_ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::default();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let key = KeyPair::generate().expect("testkit: generate a CA key");
    CertifiedIssuer::self_signed(params, key).expect("testkit: self-sign the CA")
}

fn issue(
    issuer: &CertifiedIssuer<'static, KeyPair>,
    names: &[&str],
    purpose: ExtendedKeyUsagePurpose,
    expired: bool,
) -> Identity {
    let mut params = CertificateParams::default();
    params.distinguished_name.push(
        DnType::CommonName,
        names.first().copied().unwrap_or("client"),
    );
    params.subject_alt_names = names
        .iter()
        .map(|n| match n.parse::<IpAddr>() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) => SanType::DnsName((*n).try_into().expect("testkit: a DNS name")),
        })
        .collect();
    params.extended_key_usages = vec![purpose];
    if expired {
        params.not_before = rcgen::date_time_ymd(2019, 1, 1);
        params.not_after = rcgen::date_time_ymd(2020, 1, 1);
    }
    let key = KeyPair::generate().expect("testkit: generate a key");
    let issuer_ref: &Issuer<'_, KeyPair> = issuer;
    let cert = params
        .signed_by(&key, issuer_ref)
        .expect("testkit: sign a certificate");
    Identity {
        cert_pem: format!("{}{}", cert.pem(), issuer.pem()),
        key_pem: key.serialize_pem(),
        chain: vec![cert.der().clone(), issuer.der().clone()],
        key_der: key.serialize_der(),
    }
}

impl Default for TestPki {
    fn default() -> Self {
        Self::new()
    }
}

impl TestPki {
    /// Makes a new CA and every identity (a few milliseconds).
    pub fn new() -> TestPki {
        let ca = new_ca("baton test CA");
        let other_ca = new_ca("baton untrusted CA");
        let local = ["127.0.0.1", "localhost"];
        let server = ExtendedKeyUsagePurpose::ServerAuth;
        TestPki {
            server: issue(&ca, &local, server.clone(), false),
            client: issue(
                &ca,
                &["client.test"],
                ExtendedKeyUsagePurpose::ClientAuth,
                false,
            ),
            untrusted_server: issue(&other_ca, &local, server.clone(), false),
            wrong_name_server: issue(&ca, &["wrong.test"], server.clone(), false),
            expired_server: issue(&ca, &local, server, true),
            ca,
            other_ca,
        }
    }

    /// A new PKI and its files, written to a directory of its own under the system's
    /// temporary directory (named by `tag`, the process and the thread, so parallel tests
    /// never share one).
    pub fn temp(tag: &str) -> (TestPki, PkiFiles) {
        let pki = TestPki::new();
        let dir = std::env::temp_dir().join(format!(
            "testkit-pki-{tag}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let files = pki.write(&dir);
        (pki, files)
    }

    /// A TLS front presenting `identity` with ALPN `alpn` in front of `h1` and `h2`
    /// upstreams (see [`TlsFront`](crate::TlsFront)); `require_client` asks for a client
    /// certificate this CA signed.
    pub fn front(
        &self,
        identity: &Identity,
        alpn: &[&str],
        require_client: bool,
        h1: Option<std::net::SocketAddr>,
        h2: Option<std::net::SocketAddr>,
    ) -> crate::TlsFront {
        crate::TlsFront::start(self.server_config(identity, alpn, require_client), h1, h2)
    }

    /// The CA's certificate (PEM).
    pub fn ca_pem(&self) -> String {
        self.ca.pem()
    }

    /// The CA's certificate (DER), to trust it in rustls.
    pub fn ca_der(&self) -> CertificateDer<'static> {
        self.ca.der().clone()
    }

    /// Writes the CA, the client identity and the other CA as PEM files into `dir`
    /// (created if needed).
    ///
    /// # Panics
    /// If the directory cannot be written.
    pub fn write(&self, dir: &Path) -> PkiFiles {
        std::fs::create_dir_all(dir).expect("testkit: create the PKI directory");
        let put = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).expect("testkit: write a PEM file");
            path
        };
        PkiFiles {
            ca: put("ca.pem", &self.ca.pem()),
            client_cert: put("client.pem", &self.client.cert_pem),
            client_key: put("client.key", &self.client.key_pem),
            other_ca: put("other-ca.pem", &self.other_ca.pem()),
        }
    }

    /// A server TLS configuration presenting `identity`, offering `alpn` (in order of
    /// preference), and, with `require_client`, accepting only clients whose certificate
    /// this CA signed.
    pub fn server_config(
        &self,
        identity: &Identity,
        alpn: &[&str],
        require_client: bool,
    ) -> Arc<rustls::ServerConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .expect("testkit: TLS versions");
        let builder = if require_client {
            let mut roots = rustls::RootCertStore::empty();
            roots.add(self.ca_der()).expect("testkit: the CA as a root");
            let verifier =
                rustls::server::WebPkiClientVerifier::builder_with_provider(roots.into(), provider)
                    .build()
                    .expect("testkit: client verifier");
            builder.with_client_cert_verifier(verifier)
        } else {
            builder.with_no_client_auth()
        };
        let mut config = builder
            .with_single_cert(identity.chain(), identity.key())
            .expect("testkit: the server identity");
        config.alpn_protocols = alpn.iter().map(|p| p.as_bytes().to_vec()).collect();
        Arc::new(config)
    }
}

/// `127.0.0.1`, the address every test server binds.
pub(crate) const LOOPBACK: Ipv4Addr = Ipv4Addr::LOCALHOST;
