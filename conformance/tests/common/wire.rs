//! What the SPEC 9 wire tests of every adapter build their clients from: a policy of
//! endpoints with a 5 s attempt timeout, and the TLS settings that trust testkit's test CA
//! (with or without the client identity it issued).

use std::time::Duration;

use baton_core::{Endpoint, Policy, PolicyBuilder, Tls};
use testkit::PkiFiles;

/// Trusts the test CA.
pub fn trusting(files: &PkiFiles) -> Tls {
    Tls {
        ca_file: Some(files.ca.clone()),
        ..Tls::default()
    }
}

/// Trusts the test CA and presents the client identity it issued.
#[allow(dead_code)] // Not every adapter's tests present one this way.
pub fn with_identity(files: &PkiFiles) -> Tls {
    Tls {
        client_cert: Some(files.client_cert.clone()),
        client_key: Some(files.client_key.clone()),
        ..trusting(files)
    }
}

/// A policy of `endpoints` (id, URL) with a 5 s attempt timeout.
pub fn policy(endpoints: &[(&str, String)]) -> PolicyBuilder {
    let mut b = Policy::builder().attempt_timeout(Duration::from_secs(5));
    for (id, url) in endpoints {
        b = b.endpoint(Endpoint::new(*id, url.clone()));
    }
    b
}
