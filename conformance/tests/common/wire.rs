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

/// Bad TLS files are build errors that name the setting and the file (and the endpoint
/// whose files they are): `build` builds the adapter's client and gives its error's text.
#[allow(dead_code)] // Not every adapter's tests build clients this way.
pub fn bad_tls_files_are_refused(build: impl Fn(PolicyBuilder) -> Option<String>) {
    let (_pki, files) = testkit::TestPki::temp("bad-files");
    let missing = Tls {
        ca_file: Some("/nonexistent/ca.pem".into()),
        ..Tls::default()
    };
    let err = build(policy(&[("a", "https://a.test/".into())]).configure(|s| s.tls = missing))
        .expect("a missing ca_file was accepted");
    assert!(
        err.contains("tls.ca_file") && err.contains("/nonexistent/ca.pem"),
        "{err}"
    );
    let mismatched = Tls {
        client_cert: Some(files.client_cert.clone()),
        client_key: Some(files.ca.clone()),
        ..Tls::default()
    };
    let bank = Endpoint::new("bank", "https://bank.test/").tls(mismatched);
    let err =
        build(Policy::builder().endpoint(bank)).expect("a certificate as the key was accepted");
    assert!(
        err.contains("bank") && err.contains("tls.client_key"),
        "{err}"
    );
}
