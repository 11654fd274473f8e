//! baton's one TLS rule (SPEC 9, `baton-tls`) on a ureq agent: the platform's trust store
//! plus `ca_file` as ureq's root certificates (the same certificates the other adapters
//! trust), the endpoint's client identity, and ring as the crypto provider. ureq offers no
//! ALPN: it speaks HTTP/1.1 only.

use ureq::config::ConfigBuilder;
use ureq::typestate::AgentScope;

use crate::BuildError;

/// Sets baton's TLS on an agent's configuration.
#[cfg(feature = "rustls")]
pub(crate) fn with_tls(
    b: ConfigBuilder<AgentScope>,
    tls: &baton_tls::TlsConfig,
    endpoint: &str,
) -> Result<ConfigBuilder<AgentScope>, BuildError> {
    use ureq::tls::{Certificate, ClientCert, PrivateKey, RootCerts, TlsConfig, TlsProvider};
    let roots: Vec<Certificate<'static>> = tls
        .trusted()
        .iter()
        .map(|der| Certificate::from_der(der.as_ref()).to_owned())
        .collect();
    let mut config = TlsConfig::builder()
        .provider(TlsProvider::Rustls)
        .root_certs(RootCerts::new_with_certs(&roots))
        .unversioned_rustls_crypto_provider(baton_tls::provider());
    if let (Some(chain), Some((_, key_pem))) = (tls.identity_chain(), tls.identity_pem()) {
        let chain: Vec<Certificate<'static>> = chain
            .iter()
            .map(|der| Certificate::from_der(der.as_ref()).to_owned())
            .collect();
        // baton-tls read and checked this key already; ureq parses its own copy.
        let key = PrivateKey::from_pem(key_pem).map_err(|_| {
            let file = tls.files().client_key.clone().unwrap_or_default();
            refused(endpoint, &file, "ureq cannot read this key")
        })?;
        config = config.client_cert(Some(ClientCert::new_with_certs(&chain, key)));
    }
    Ok(b.tls_config(config.build()))
}

#[cfg(feature = "rustls")]
fn refused(endpoint: &str, file: &std::path::Path, reason: &str) -> BuildError {
    BuildError::Tls(baton_tls::EndpointTlsError {
        endpoint: endpoint.to_string(),
        source: baton_tls::TlsError::new("tls.client_key", file, reason),
    })
}

/// Without the `rustls` feature there is no TLS: https endpoints cannot be reached, and
/// TLS files are refused.
#[cfg(not(feature = "rustls"))]
pub(crate) fn with_tls(
    b: ConfigBuilder<AgentScope>,
    tls: &baton_tls::TlsConfig,
    endpoint: &str,
) -> Result<ConfigBuilder<AgentScope>, BuildError> {
    let files = tls.files();
    match files.ca_file.as_ref().or(files.client_cert.as_ref()) {
        Some(file) => Err(refused(
            endpoint,
            file,
            "TLS needs baton-blocking's `rustls` feature",
        )),
        None => Ok(b),
    }
}

#[cfg(not(feature = "rustls"))]
fn refused(endpoint: &str, file: &std::path::Path, reason: &str) -> BuildError {
    BuildError::Tls(baton_tls::EndpointTlsError {
        endpoint: endpoint.to_string(),
        source: baton_tls::TlsError::new("tls", file, reason),
    })
}
