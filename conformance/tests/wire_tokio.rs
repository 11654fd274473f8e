//! SPEC 9 on the wire: HTTP/2 (ALPN, prior knowledge, multiplexing, the protocol's own
//! proofs that nothing was processed) and TLS (a private CA, client identities, rejected
//! certificates), against testkit's HTTP/2 provider and TLS front on loopback.

use std::time::Duration;

use baton_core::{AttemptResult, Endpoint, FailureClass, HttpVersion, Policy, PolicyBuilder};
use baton_tokio::{Client, Error, FailureCause};
use http::Version;
use testkit::{H2Behaviour, H2Provider, PkiFiles, TestPki, TlsFront};

#[path = "common/wire.rs"]
mod wire;
use wire::{policy, trusting, with_identity};

fn pki() -> (TestPki, PkiFiles) {
    TestPki::temp("tokio-wire")
}

/// An h2-only TLS front in front of `h2`.
fn h2_front(pki: &TestPki, h2: &H2Provider) -> TlsFront {
    TlsFront::start(
        pki.server_config(&pki.server, &["h2"], false),
        None,
        Some(h2.addr()),
    )
}

fn client(b: PolicyBuilder) -> Client {
    Client::builder(b).build().unwrap()
}

fn results(e: &Error) -> Vec<AttemptResult> {
    e.report().attempts.iter().map(|a| a.result).collect()
}

#[tokio::test]
async fn an_h2_only_provider_answers_over_http2_with_a_private_ca() {
    let (pki, files) = pki();
    let h2 = H2Provider::start(H2Behaviour::ok());
    let front = h2_front(&pki, &h2);
    let c = client(policy(&[("a", front.url())]).configure(|s| s.tls = trusting(&files)));
    let r = c.get("/").send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.report().attempts[0].http_version, Some(Version::HTTP_2));
    assert_eq!(r.text().await.unwrap(), "ok");
    assert_eq!(h2.processed(), 1);
}

#[tokio::test]
async fn http2_prior_knowledge_on_http() {
    let h2 = H2Provider::start(H2Behaviour::ok());
    let c = client(
        Policy::builder().endpoint(Endpoint::new("a", h2.url()).http_version(HttpVersion::Http2)),
    );
    let r = c.get("/").send().await.unwrap();
    assert_eq!(r.report().attempts[0].http_version, Some(Version::HTTP_2));
    assert_eq!(h2.processed(), 1);
}

#[tokio::test]
async fn concurrent_calls_share_one_multiplexed_connection() {
    let h2 = H2Provider::start(H2Behaviour::ok());
    let c = client(
        Policy::builder().endpoint(Endpoint::new("a", h2.url()).http_version(HttpVersion::Http2)),
    );
    let calls = (0..32).map(|_| {
        let c = c.clone();
        tokio::spawn(async move { c.get("/").send().await.map(|r| r.status()) })
    });
    for call in calls {
        assert_eq!(call.await.unwrap().unwrap(), 200);
    }
    assert_eq!(h2.processed(), 32);
    assert!(
        h2.connection_count() <= 2,
        "{} connections",
        h2.connection_count()
    );
}

/// The primary ends the first POST (no key) with `primary`; a healthy backup.
async fn post_against(
    primary: H2Behaviour,
    key: Option<&str>,
) -> (Result<u16, Error>, H2Provider, H2Provider) {
    let a = H2Provider::start(primary);
    let b = H2Provider::start(H2Behaviour::ok());
    let c = client(
        policy(&[("a", a.url()), ("b", b.url())])
            .configure(|s| s.http_version = HttpVersion::Http2),
    );
    let mut req = c.post("/charges").body("amount=1");
    if let Some(k) = key {
        req = req.idempotency_key(k);
    }
    let result = req.send().await.map(|r| r.status().as_u16());
    (result, a, b)
}

#[tokio::test]
async fn a_refused_stream_fails_over_and_the_refusing_provider_processed_nothing() {
    let (result, a, b) = post_against(H2Behaviour::refuse_stream(), None).await;
    assert_eq!(result.unwrap(), 200);
    assert_eq!((a.processed(), b.processed()), (0, 1));
}

/// hyper's HTTP/2 client may hand the connection's GOAWAY to a request whose stream it
/// had just opened (`H2StreamError::goaway_per_stream`), so on this adapter a GOAWAY,
/// even below the stream, is no proof: an unkeyed POST stops there, a read fails over.
#[tokio::test]
async fn a_goaway_below_the_stream_is_no_proof_so_a_post_stops_and_a_read_fails_over() {
    let (result, a, b) = post_against(H2Behaviour::go_away_below(), None).await;
    let e = result.unwrap_err();
    assert!(e.may_have_executed(), "{e}");
    assert_eq!(
        results(&e),
        [AttemptResult::Failed(FailureClass::Ambiguous)]
    );
    // Read as the GOAWAY it was (not as a connection that closed): the rule, not chance.
    let cause = e.last_attempt_error().map(|a| a.cause());
    assert_eq!(cause, Some(FailureCause::GoAway), "{e}");
    assert_eq!((a.processed(), b.processed()), (0, 0));

    let a = H2Provider::start(H2Behaviour::go_away_below());
    let b = H2Provider::start(H2Behaviour::ok());
    let c = client(
        policy(&[("a", a.url()), ("b", b.url())])
            .configure(|s| s.http_version = HttpVersion::Http2),
    );
    let r = c.get("/balance").send().await.unwrap();
    assert_eq!(r.status(), 200);
    let results: Vec<_> = r.report().attempts.iter().map(|a| a.result).collect();
    assert_eq!(results[0], AttemptResult::Failed(FailureClass::Ambiguous));
    assert_eq!((a.processed(), b.processed()), (0, 1));
}

#[tokio::test]
async fn a_goaway_at_the_stream_or_a_reset_after_the_request_may_have_executed() {
    for fault in [
        H2Behaviour::go_away_at(),
        H2Behaviour::reset_after_request(),
    ] {
        let (result, a, b) = post_against(fault.clone(), None).await;
        let e = result.unwrap_err();
        assert!(e.may_have_executed(), "{fault:?}: {e}");
        assert_eq!(
            results(&e),
            [AttemptResult::Failed(FailureClass::Ambiguous)],
            "{fault:?}"
        );
        assert_eq!((a.processed(), b.processed()), (1, 0), "{fault:?}");
    }
}

#[tokio::test]
async fn a_keyed_post_that_may_have_executed_never_moves_to_another_provider() {
    let (result, a, b) = post_against(H2Behaviour::reset_after_request(), Some("k-1")).await;
    let e = result.unwrap_err();
    assert!(e.may_have_executed());
    assert_eq!(b.processed(), 0);
    assert!(a.processed() >= 1);
    assert_eq!(a.count_with_header("idempotency-key", "k-1"), a.processed());
}

#[tokio::test]
async fn a_refused_stream_is_recorded_in_the_report_undelivered() {
    let (result, _a, _b) = post_against(H2Behaviour::refuse_stream(), None).await;
    assert_eq!(result.unwrap(), 200);
    let a = H2Provider::start(H2Behaviour::refuse_stream());
    let c = client(
        Policy::builder().endpoint(Endpoint::new("a", a.url()).http_version(HttpVersion::Http2)),
    );
    let e = c.post("/").body("x").send().await.unwrap_err();
    // One endpoint: three attempts, each one refusal (no silent re-send by reqwest).
    assert_eq!(
        results(&e),
        [AttemptResult::Failed(FailureClass::Undelivered); 3]
    );
    assert!(!e.may_have_executed());
    assert!(format!("{e:#}").contains("REFUSED_STREAM"), "{e:#}");
    assert_eq!(a.processed(), 0);
}

#[tokio::test]
async fn a_client_identity_opens_an_mtls_provider_and_without_it_nothing_is_processed() {
    let (pki, files) = pki();
    let h2 = H2Provider::start(H2Behaviour::ok());
    let front = TlsFront::start(
        pki.server_config(&pki.server, &["h2", "http/1.1"], true),
        None,
        Some(h2.addr()),
    );
    let without = client(policy(&[("a", front.url())]).configure(|s| s.tls = trusting(&files)));
    let e = without.get("/").send().await.unwrap_err();
    // TLS 1.3: the server's alert comes after reqwest's connect phase, and reqwest does not
    // say which connection it came on: ambiguous, but the reason is named.
    assert!(
        format!("{e:#}").contains("client certificate refused"),
        "{e:#}"
    );
    assert!(results(&e).iter().all(|r| r.status().is_none()), "{e}");
    assert_eq!(h2.processed(), 0);

    let with = client(policy(&[("a", front.url())]).configure(|s| s.tls = with_identity(&files)));
    assert_eq!(with.get("/").send().await.unwrap().status(), 200);
    assert_eq!(h2.processed(), 1);
}

#[tokio::test]
async fn a_rejected_certificate_costs_one_handshake_names_the_reason_and_fails_over() {
    let (pki, files) = pki();
    let h2 = H2Provider::start(H2Behaviour::ok());
    for (identity, reason) in [
        (&pki.untrusted_server, "unknown issuer"),
        (&pki.wrong_name_server, "name mismatch"),
        (&pki.expired_server, "expired"),
    ] {
        let bad = TlsFront::start(
            pki.server_config(identity, &["h2"], false),
            None,
            Some(h2.addr()),
        );
        let c = client(policy(&[("a", bad.url())]).configure(|s| s.tls = trusting(&files)));
        let e = c.get("/").send().await.unwrap_err();
        assert!(format!("{e:#}").contains(reason), "{reason}: {e:#}");
        assert_eq!(testkit::repeated_in_chain(&e), None);
        assert_eq!(
            results(&e),
            [AttemptResult::Failed(FailureClass::Untrusted)]
        );
        assert_eq!(bad.connections(), 1, "{reason}: one handshake per call");
    }
    let bad = TlsFront::start(
        pki.server_config(&pki.untrusted_server, &["h2"], false),
        None,
        Some(h2.addr()),
    );
    let good = h2_front(&pki, &h2);
    let c = client(
        policy(&[("a", bad.url()), ("b", good.url())]).configure(|s| s.tls = trusting(&files)),
    );
    let r = c.post("/").body("x").send().await.unwrap();
    assert_eq!(r.endpoint(), "b");
    assert_eq!(h2.processed(), 1);
}

#[test]
fn bad_tls_files_are_build_errors_naming_the_setting_and_the_file() {
    wire::bad_tls_files_are_refused(|b| Client::builder(b).build().err().map(|e| e.to_string()));
}

#[tokio::test]
async fn a_client_identity_never_follows_a_redirect_to_another_origin() {
    let (pki, files) = pki();
    let target = H2Provider::start(H2Behaviour::ok());
    let other = TlsFront::start(
        pki.server_config(&pki.server, &["h2"], true),
        None,
        Some(target.addr()),
    );
    let redirecting = H2Provider::start(
        H2Behaviour::status(307).header("location", &format!("{}/elsewhere", other.url())),
    );
    let own = TlsFront::start(
        pki.server_config(&pki.server, &["h2"], true),
        None,
        Some(redirecting.addr()),
    );
    let identity = with_identity(&files);
    let c = client(policy(&[("a", own.url())]).configure(|s| s.tls = identity));
    let r = c.get("/").send().await;
    // The endpoint's own origin took the identity (a GET: each of its attempts followed
    // the redirect); the other origin never saw it.
    assert!(redirecting.processed() >= 1);
    assert_eq!(other.handshakes(), 0, "{r:?}");
    assert!(other.failed_handshakes() >= 1);
    assert_eq!(target.processed(), 0);
}

#[tokio::test]
async fn a_stream_limit_of_one_queues_concurrent_calls_on_the_one_connection() {
    let h2 = H2Provider::builder()
        .max_concurrent_streams(1)
        .otherwise(H2Behaviour::ok().delay(std::time::Duration::from_millis(5)))
        .start();
    let c = client(
        Policy::builder().endpoint(Endpoint::new("a", h2.url()).http_version(HttpVersion::Http2)),
    );
    let calls = (0..8).map(|_| {
        let c = c.clone();
        tokio::spawn(async move { c.get("/").send().await.map(|r| r.status()) })
    });
    for call in calls {
        assert_eq!(call.await.unwrap().unwrap(), 200);
    }
    assert_eq!(h2.processed(), 8);
    assert_eq!(h2.connection_count(), 1);
}

#[tokio::test]
async fn after_a_graceful_shutdown_new_calls_go_to_the_next_endpoint() {
    let a = H2Provider::start(H2Behaviour::ok());
    let b = H2Provider::start(H2Behaviour::ok());
    let c = client(
        policy(&[("a", a.url()), ("b", b.url())])
            .configure(|s| s.http_version = HttpVersion::Http2),
    );
    assert_eq!(c.post("/").body("1").send().await.unwrap().endpoint(), "a");
    a.shut_down_gracefully();
    tokio::time::sleep(Duration::from_millis(200)).await;
    // The connection was told to go away and a's port is closed: nothing reaches a, and
    // an unkeyed POST may fail over (refused: undelivered).
    let r = c.post("/").body("2").send().await.unwrap();
    assert_eq!(r.endpoint(), "b");
    assert_eq!((a.processed(), b.processed()), (1, 1));
}
