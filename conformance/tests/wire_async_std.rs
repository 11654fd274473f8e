//! SPEC 9 on async-std and smol: HTTP/2 over hyper (ALPN, prior knowledge, one
//! multiplexed connection, the protocol's own proofs that nothing was processed) and the
//! one TLS trust rule (a private CA, client identities, rejected certificates), against
//! testkit's HTTP/2 provider and TLS front on loopback; each test under both runtimes.

use baton_async_std::{Client, Error};
use baton_core::{AttemptResult, FailureClass, HttpVersion, PolicyBuilder, Tls};
use http::Version;
use testkit::{on_both_runtimes, H2Behaviour, H2Provider, TestPki};

#[path = "common/wire.rs"]
mod wire;
use wire::{policy, trusting, with_identity};

fn client(b: PolicyBuilder) -> Client {
    Client::builder(b).build().unwrap()
}

fn h2c(endpoints: &[(&str, String)]) -> Client {
    client(policy(endpoints).configure(|s| s.http_version = HttpVersion::Http2))
}

fn results(e: &Error) -> Vec<AttemptResult> {
    e.report().attempts.iter().map(|a| a.result).collect()
}

/// The primary ends the POST with `primary`; a healthy backup; both h2c.
async fn post_against(
    primary: H2Behaviour,
    key: Option<&str>,
) -> (Result<u16, Error>, H2Provider, H2Provider) {
    let a = H2Provider::start(primary);
    let b = H2Provider::start(H2Behaviour::ok());
    let c = h2c(&[("a", a.url()), ("b", b.url())]);
    let mut req = c.post("/charges").body("amount=1");
    if let Some(k) = key {
        req = req.idempotency_key(k);
    }
    let result = req.send().await.map(|r| r.status().as_u16());
    (result, a, b)
}

on_both_runtimes! {
    async fn an_h2_only_provider_answers_over_http2_with_a_private_ca() {
        let (pki, files) = TestPki::temp("async-std-h2");
        let h2 = H2Provider::start(H2Behaviour::ok());
        let front = pki.front(&pki.server, &["h2"], false, None, Some(h2.addr()));
        let c = client(policy(&[("a", front.url())]).configure(|s| s.tls = trusting(&files)));
        let r = c.get("/").send().await.unwrap();
        assert_eq!(r.report().attempts[0].http_version, Some(Version::HTTP_2));
        assert_eq!(r.text().await.unwrap(), "ok");
        assert_eq!(h2.processed(), 1);
    }

    async fn concurrent_calls_share_one_multiplexed_connection() {
        let h2 = H2Provider::start(H2Behaviour::ok());
        let c = h2c(&[("a", h2.url())]);
        let calls: Vec<_> = (0..32)
            .map(|_| {
                let c = c.clone();
                async move { c.get("/").send().await.map(|r| r.status()) }
            })
            .collect();
        for status in join_all(calls).await {
            assert_eq!(status.unwrap(), 200);
        }
        assert_eq!(h2.processed(), 32);
        assert_eq!(h2.connection_count(), 1);
    }

    async fn a_refused_stream_or_a_goaway_below_fails_over_and_nothing_was_processed() {
        for fault in [H2Behaviour::refuse_stream(), H2Behaviour::go_away_below()] {
            let (result, a, b) = post_against(fault.clone(), None).await;
            assert_eq!(result.unwrap(), 200, "{fault:?}");
            assert_eq!((a.processed(), b.processed()), (0, 1), "{fault:?}");
        }
    }

    async fn a_goaway_at_the_stream_or_a_reset_after_the_request_may_have_executed() {
        for fault in [H2Behaviour::go_away_at(), H2Behaviour::reset_after_request()] {
            let (result, a, b) = post_against(fault.clone(), None).await;
            let e = result.unwrap_err();
            assert!(e.may_have_executed(), "{fault:?}: {e}");
            assert_eq!(results(&e), [AttemptResult::Failed(FailureClass::Ambiguous)], "{fault:?}");
            assert_eq!((a.processed(), b.processed()), (1, 0), "{fault:?}");
        }
    }

    async fn a_keyed_post_that_may_have_executed_never_moves_to_another_provider() {
        let (result, a, b) = post_against(H2Behaviour::reset_after_request(), Some("k-1")).await;
        assert!(result.unwrap_err().may_have_executed());
        assert_eq!(b.processed(), 0);
        assert!(a.processed() >= 1);
        assert_eq!(a.count_with_header("idempotency-key", "k-1"), a.processed());
    }

    async fn a_client_identity_opens_an_mtls_provider_and_without_it_nothing_is_processed() {
        let (pki, files) = TestPki::temp("async-std-mtls");
        let h2 = H2Provider::start(H2Behaviour::ok());
        let front = pki.front(&pki.server, &["h2", "http/1.1"], true, None, Some(h2.addr()));
        let without = client(policy(&[("a", front.url())]).configure(|s| s.tls = trusting(&files)));
        let e = without.get("/").send().await.unwrap_err();
        assert_eq!(results(&e), [AttemptResult::Failed(FailureClass::Untrusted)], "{e}");
        assert_eq!(h2.processed(), 0);
        let identity = Tls {
            client_cert: Some(files.client_cert.clone()),
            client_key: Some(files.client_key.clone()),
            ..trusting(&files)
        };
        let with = client(policy(&[("a", front.url())]).configure(|s| s.tls = identity));
        assert_eq!(with.get("/").send().await.unwrap().status(), 200);
        assert_eq!(h2.processed(), 1);
    }

    async fn a_client_identity_never_follows_a_redirect_to_another_origin() {
        let (pki, files) = TestPki::temp("async-std-redirect");
        let target = H2Provider::start(H2Behaviour::ok());
        let other = pki.front(&pki.server, &["h2"], true, None, Some(target.addr()));
        let elsewhere = format!("{}/elsewhere", other.url());
        let redirecting = H2Provider::start(H2Behaviour::status(307).header("location", &elsewhere));
        let own = pki.front(&pki.server, &["h2"], true, None, Some(redirecting.addr()));
        let c = client(policy(&[("a", own.url())]).configure(|s| s.tls = with_identity(&files)));
        let r = c.get("/").send().await;
        // The endpoint's own origin took the identity (a GET: each of its attempts followed
        // the redirect); the other origin, the same host on another port, never saw it.
        assert!(redirecting.processed() >= 1);
        assert_eq!(other.handshakes(), 0, "{:?}", r.map(|r| r.status()));
        assert!(other.failed_handshakes() >= 1);
        assert_eq!(target.processed(), 0);
    }

    async fn a_rejected_certificate_costs_one_handshake_and_names_the_reason() {
        let (pki, files) = TestPki::temp("async-std-reject");
        let h2 = H2Provider::start(H2Behaviour::ok());
        for (identity, reason) in [
            (&pki.untrusted_server, "unknown issuer"),
            (&pki.wrong_name_server, "name mismatch"),
            (&pki.expired_server, "expired"),
        ] {
            let bad = pki.front(identity, &["h2"], false, None, Some(h2.addr()));
            let c = client(policy(&[("a", bad.url())]).configure(|s| s.tls = trusting(&files)));
            let e = c.get("/").send().await.unwrap_err();
            assert!(format!("{e:#}").contains(reason), "{reason}: {e:#}");
            assert_eq!(testkit::repeated_in_chain(&e), None);
            assert_eq!(results(&e), [AttemptResult::Failed(FailureClass::Untrusted)]);
            assert_eq!(bad.connections(), 1, "{reason}: one handshake per call");
        }
    }
}

#[test]
fn bad_tls_files_are_build_errors_naming_the_setting_and_the_file() {
    wire::bad_tls_files_are_refused(|b| Client::builder(b).build().err().map(|e| e.to_string()));
}

/// Runs every future to its end, concurrently, in order of results.
async fn join_all<F: std::future::Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut pinned: Vec<_> = futures.into_iter().map(Box::pin).map(Some).collect();
    let mut out: Vec<Option<F::Output>> = (0..pinned.len()).map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (slot, fut) in out.iter_mut().zip(pinned.iter_mut()) {
            if let Some(f) = fut {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => {
                        *slot = Some(v);
                        *fut = None;
                    }
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    out.into_iter().flatten().collect()
}
