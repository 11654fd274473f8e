//! SPEC 9 on ureq: the one TLS trust rule (a private CA, client identities, rejected
//! certificates) against testkit's TLS front on loopback, and HTTP/2 refused at build.

use baton_blocking::{BuildError, Client, ResponseExt};
use baton_core::{AttemptResult, Endpoint, FailureClass, HttpVersion, Policy, Tls};
use testkit::{Behaviour, PkiFiles, Provider, TestPki, TlsFront};

#[path = "common/wire.rs"]
mod wire;
use wire::{policy, trusting};

fn pki() -> (TestPki, PkiFiles) {
    TestPki::temp("blocking-wire")
}

#[test]
fn a_provider_signed_by_a_private_ca_answers_with_its_ca_file() {
    let (pki, files) = pki();
    let plain = Provider::start(Behaviour::ok());
    let front = TlsFront::start(
        pki.server_config(&pki.server, &["h2", "http/1.1"], false),
        Some(plain.addr()),
        None,
    );
    let c = Client::builder(policy(&[("a", front.url())]).configure(|s| s.tls = trusting(&files)))
        .build()
        .unwrap();
    let r = c.get("/").call().unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.report().unwrap().attempts[0].http_version,
        Some(http::Version::HTTP_11)
    );
    assert_eq!(plain.request_count(), 1);
}

#[test]
fn an_endpoint_that_requires_http2_is_refused_at_build_naming_it() {
    let err = Client::builder(
        Policy::builder()
            .endpoint(Endpoint::new("push", "https://push.test/").http_version(HttpVersion::Http2)),
    )
    .build()
    .unwrap_err();
    assert!(matches!(err, BuildError::Http2Unsupported { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("push") && text.contains("HTTP/2") && text.contains("http_version"),
        "{text}"
    );
}

#[test]
fn a_client_identity_opens_an_mtls_provider_and_without_it_nothing_is_processed() {
    let (pki, files) = pki();
    let plain = Provider::start(Behaviour::ok());
    let front = TlsFront::start(
        pki.server_config(&pki.server, &["http/1.1"], true),
        Some(plain.addr()),
        None,
    );
    let without =
        Client::builder(policy(&[("a", front.url())]).configure(|s| s.tls = trusting(&files)))
            .build()
            .unwrap();
    let e = without.get("/").call().unwrap_err();
    let results: Vec<_> = e.report().attempts.iter().map(|a| a.result).collect();
    assert_eq!(
        results,
        [AttemptResult::Failed(FailureClass::Untrusted)],
        "{e}"
    );
    assert!(!e.may_have_executed());
    assert_eq!(plain.request_count(), 0);

    let identity = Tls {
        client_cert: Some(files.client_cert.clone()),
        client_key: Some(files.client_key.clone()),
        ..trusting(&files)
    };
    let with = Client::builder(policy(&[("a", front.url())]).configure(|s| s.tls = identity))
        .build()
        .unwrap();
    assert_eq!(with.get("/").call().unwrap().status(), 200);
    assert_eq!(plain.request_count(), 1);
}

#[test]
fn a_rejected_certificate_costs_one_handshake_names_the_reason_and_fails_over() {
    let (pki, files) = pki();
    let plain = Provider::start(Behaviour::ok());
    for (identity, reason) in [
        (&pki.untrusted_server, "unknown issuer"),
        (&pki.wrong_name_server, "name mismatch"),
        (&pki.expired_server, "expired"),
    ] {
        let bad = TlsFront::start(
            pki.server_config(identity, &["http/1.1"], false),
            Some(plain.addr()),
            None,
        );
        let c =
            Client::builder(policy(&[("a", bad.url())]).configure(|s| s.tls = trusting(&files)))
                .build()
                .unwrap();
        let e = c.get("/").call().unwrap_err();
        assert!(format!("{e:#}").contains(reason), "{reason}: {e:#}");
        assert_eq!(testkit::repeated_in_chain(&e), None);
        assert_eq!(e.report().attempts.len(), 1, "{e}");
        assert_eq!(bad.connections(), 1, "{reason}: one handshake per call");
    }
    let bad = TlsFront::start(
        pki.server_config(&pki.untrusted_server, &["http/1.1"], false),
        Some(plain.addr()),
        None,
    );
    let good = TlsFront::start(
        pki.server_config(&pki.server, &["http/1.1"], false),
        Some(plain.addr()),
        None,
    );
    let c = Client::builder(
        policy(&[("a", bad.url()), ("b", good.url())]).configure(|s| s.tls = trusting(&files)),
    )
    .build()
    .unwrap();
    let r = c.post("/").send("x").unwrap();
    assert_eq!(r.endpoint(), Some("b"));
    assert_eq!(plain.request_count(), 1);
}

#[test]
fn bad_tls_files_are_build_errors_naming_the_setting_and_the_file() {
    wire::bad_tls_files_are_refused(|b| Client::builder(b).build().err().map(|e| e.to_string()));
}

#[test]
fn a_client_identity_never_follows_a_redirect_to_another_origin() {
    let (pki, files) = pki();
    let target = Provider::start(Behaviour::ok());
    let other = TlsFront::start(
        pki.server_config(&pki.server, &["http/1.1"], true),
        Some(target.addr()),
        None,
    );
    let redirecting = Provider::start(
        Behaviour::status(307).header("location", format!("{}/elsewhere", other.url())),
    );
    let own = TlsFront::start(
        pki.server_config(&pki.server, &["http/1.1"], true),
        Some(redirecting.addr()),
        None,
    );
    let identity = Tls {
        client_cert: Some(files.client_cert.clone()),
        client_key: Some(files.client_key.clone()),
        ..trusting(&files)
    };
    let c = Client::builder(policy(&[("a", own.url())]).configure(|s| s.tls = identity))
        .build()
        .unwrap();
    let r = c.get("/").call();
    assert!(redirecting.request_count() >= 1);
    assert_eq!(other.handshakes(), 0, "{r:?}");
    assert!(other.failed_handshakes() >= 1);
    assert_eq!(target.request_count(), 0);
}
