//! TLS behind the layer: the inner service's connector makes every connection, so the
//! policy's TLS files are refused at build, and a certificate rejection in the inner
//! service's error is read by the caller's hook.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use baton_core::{Endpoint, FailureClass, Policy, Report, Tls};
use baton_tower::{BatonLayer, ReplayBody};
use bytes::Bytes;
use http_body_util::Full;
use tower_service::Service;

#[test]
fn tls_files_are_refused_rather_than_left_off_the_inner_connections() {
    let identity = Tls {
        client_cert: Some("client.pem".into()),
        client_key: Some("client.key".into()),
        ..Tls::default()
    };
    let ca = Tls {
        ca_file: Some("ca.pem".into()),
        ..Tls::default()
    };
    let endpoint = |id, tls| Endpoint::new(id, "https://127.0.0.1:1/").tls(tls);
    // An endpoint's own identity, on the layer and on per-endpoint services.
    let own = || {
        Policy::builder()
            .endpoint(endpoint("a", Tls::default()))
            .endpoint(endpoint("b", identity.clone()))
    };
    let layer = BatonLayer::new(own()).map(|_| ());
    let services = BatonLayer::builder(own())
        .services(vec![(), ()])
        .map(|_| ());
    // The policy's trust file, which every endpoint inherits.
    let settings = baton_core::Settings {
        tls: ca,
        ..Default::default()
    };
    let inherited = Policy::builder()
        .settings(settings)
        .endpoint(endpoint("a", Tls::default()));
    let policy_wide = BatonLayer::new(inherited).map(|_| ());
    for (result, endpoint) in [(layer, "b"), (services, "b"), (policy_wide, "a")] {
        let Err(e) = result else {
            panic!("TLS files were accepted, and would not be applied")
        };
        let text = e.to_string();
        assert!(text.contains("tls"), "{text}");
        assert!(text.contains(&format!("{endpoint:?}")), "{text}");
    }
}

type Body = Full<Bytes>;

/// An endpoint's service: one whose connector rejects the server's certificate (rustls'
/// error inside an I/O error, as hyper-rustls hands it on), or one that answers 200.
#[derive(Clone)]
enum Node {
    Rejects(Arc<AtomicUsize>),
    Answers,
}

impl Service<http::Request<ReplayBody<Body>>> for Node {
    type Response = http::Response<Body>;
    type Error = std::io::Error;
    type Future = std::future::Ready<Result<Self::Response, std::io::Error>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), std::io::Error>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, _: http::Request<ReplayBody<Body>>) -> Self::Future {
        std::future::ready(match self {
            Node::Rejects(calls) => {
                calls.fetch_add(1, Ordering::SeqCst);
                let unknown = rustls::CertificateError::UnknownIssuer;
                let rejected = rustls::Error::InvalidCertificate(unknown);
                Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    rejected,
                ))
            }
            Node::Answers => Ok(http::Response::new(Full::new(Bytes::from("ok")))),
        })
    }
}

#[tokio::test]
async fn a_hook_reads_a_rejected_certificate_as_untrusted_and_the_post_moves_on() {
    let calls = Arc::new(AtomicUsize::new(0));
    let policy = Policy::builder()
        .endpoint(Endpoint::new("a", "https://a.example/"))
        .endpoint(Endpoint::new("b", "https://b.example/"))
        .attempts_per_endpoint(2);
    let nodes = vec![Node::Rejects(calls.clone()), Node::Answers];
    let mut svc = BatonLayer::builder(policy)
        .classify_error(|e| baton_tls::rejection(e).map(|_| FailureClass::Untrusted))
        .services(nodes)
        .unwrap();
    let post = http::Request::post("/charges")
        .body(Full::new(Bytes::from("x")))
        .unwrap();
    let resp = svc.call(post).await.unwrap();
    let report = resp.extensions().get::<Report>().unwrap();
    // Undelivered, so the POST fails over; untrusted, so "a" gets no second attempt.
    let results: Vec<_> = report.attempts.iter().map(|a| a.result.as_str()).collect();
    assert_eq!(results, ["untrusted", "response"], "{report:?}");
    assert_eq!(report.result_endpoint(), Some("b"));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}
