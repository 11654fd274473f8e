//! baton-tower in front of hyper-util's legacy `Client`, against real providers on
//! 127.0.0.1: the failure classes, permissions, bodies, per-call options, per-endpoint
//! services and the response classifier.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use baton_core::{CallOptions, Endpoint, ErrorKind, Policy, PolicyBuilder, Report, StopReason};
use baton_tower::{Baton, BatonLayer, ReplayBody};
use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use testkit::{Behaviour, Provider};
use tower_layer::Layer;
use tower_service::Service;

type Body = BoxBody<Bytes, baton_tower::BoxError>;
type Inner = Client<HttpConnector, ReplayBody<Body>>;

fn client() -> Inner {
    let mut connector = HttpConnector::new();
    connector.set_connect_timeout(Some(Duration::from_millis(300)));
    Client::builder(TokioExecutor::new()).build(connector)
}

fn two(a: &str, b: &str) -> PolicyBuilder {
    Policy::builder()
        .endpoint(Endpoint::new("a", a))
        .endpoint(Endpoint::new("b", b))
        .attempt_timeout(Duration::from_millis(400))
        .connect_timeout(Duration::from_millis(300))
}

fn service(policy: PolicyBuilder) -> Baton<Inner> {
    BatonLayer::new(policy).unwrap().layer(client())
}

fn full(text: &str) -> Body {
    Full::new(Bytes::from(text.to_string()))
        .map_err(|e| match e {})
        .boxed()
}

/// A body that is not ready at once (a stream): sent once unless buffering is on.
struct Streaming(Option<Bytes>, bool);

impl http_body::Body for Streaming {
    type Data = Bytes;
    type Error = baton_tower::BoxError;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        if !self.1 {
            self.1 = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        Poll::Ready(self.0.take().map(|b| Ok(http_body::Frame::data(b))))
    }
}

fn streaming(text: &str) -> Body {
    Streaming(Some(Bytes::from(text.to_string())), false).boxed()
}

fn request(method: &str, body: Body) -> http::Request<Body> {
    http::Request::builder()
        .method(method)
        .uri("/")
        .body(body)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_call_answers_from_the_first_endpoint_with_its_report() {
    let a = Provider::start(Behaviour::ok().body("from a"));
    let b = Provider::start(Behaviour::ok().body("from b"));
    let mut svc = service(two(&a.url(), &b.url()));
    let resp = svc.call(request("GET", full(""))).await.unwrap();
    assert_eq!(resp.status(), 200);
    let report = resp.extensions().get::<Report>().cloned().unwrap();
    assert_eq!(report.result_endpoint(), Some("a"));
    assert_eq!(report.attempts.len(), 1);
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(&body[..], b"from a");
    assert_eq!((a.request_count(), b.request_count()), (1, 0));
    // The request id is sent, and the Host is the endpoint's.
    let seen = &a.requests()[0];
    assert!(seen.header("x-request-id").is_some());
    assert_eq!(seen.header("host"), Some(&a.url()["http://".len()..]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_primary_lets_a_post_fail_over_and_a_reset_does_not() {
    let b = Provider::start(Behaviour::ok());
    let mut svc = service(two(&testkit::refused_url(), &b.url()));
    let resp = svc.call(request("POST", full("amount=1"))).await.unwrap();
    let report = resp.extensions().get::<Report>().unwrap();
    assert_eq!(report.attempts[0].result.as_str(), "undelivered");
    assert_eq!(report.result_endpoint(), Some("b"));
    assert_eq!(b.requests()[0].body_text(), "amount=1");

    let a = Provider::start(Behaviour::reset());
    let b = Provider::start(Behaviour::ok());
    let mut svc = service(two(&a.url(), &b.url()));
    let err = svc
        .call(request("POST", full("amount=1")))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), &ErrorKind::Failover);
    assert_eq!(err.report().stop_reason, StopReason::NotPermitted);
    assert!(err.may_have_executed());
    assert!(std::error::Error::source(&err).is_some());
    assert_eq!((a.request_count(), b.request_count()), (1, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_black_holed_primary_times_out_ambiguous_reads_move_and_writes_stop() {
    let a = Provider::start(Behaviour::black_hole());
    let b = Provider::start(Behaviour::ok());
    let mut svc = service(two(&a.url(), &b.url()));
    let resp = svc.call(request("GET", full(""))).await.unwrap();
    let report = resp.extensions().get::<Report>().unwrap();
    assert_eq!(report.attempts[0].result.as_str(), "timeout");
    assert_eq!(report.result_endpoint(), Some("b"));
    let err = svc.call(request("POST", full("x"))).await.unwrap_err();
    assert!(err.may_have_executed());
    assert_eq!(err.report().attempts.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_path_the_destination_rules_refuse_is_the_typed_error_in_the_chain() {
    let a = Provider::start(Behaviour::ok());
    let mut svc = service(
        Policy::builder()
            .url_mode(baton_core::UrlMode::Base)
            .endpoint(Endpoint::new("a", a.url())),
    );
    let get = http::Request::builder()
        .uri("/v1/%2e%2e/admin")
        .body(full(""))
        .unwrap();
    let err = svc.call(get).await.unwrap_err();
    assert!(
        matches!(
            testkit::in_chain::<baton_core::DestinationError>(&err),
            Some(baton_core::DestinationError::Url { .. })
        ),
        "{err}"
    );
    assert_eq!(a.request_count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_body_is_sent_once_unless_buffering_is_asked_for() {
    let a = Provider::start(Behaviour::status(503));
    let b = Provider::start(Behaviour::ok());
    let mut svc = service(two(&a.url(), &b.url()));
    let resp = svc.call(request("PUT", streaming("part"))).await.unwrap();
    // The 503 is returned: the stream was spent on the first attempt.
    assert_eq!(resp.status(), 503);
    let report = resp.extensions().get::<Report>().unwrap();
    assert_eq!(report.stop_reason, StopReason::NotReplayable);
    assert_eq!(b.request_count(), 0);

    let buffered = BatonLayer::builder(two(&a.url(), &b.url()))
        .buffer_body(1024)
        .layer()
        .unwrap();
    let mut svc = buffered.layer(client());
    let mut put = request("PUT", streaming("part"));
    // A PUT may move once the provider answered 503: explicit permission.
    put.extensions_mut().insert(CallOptions {
        failover: Some(baton_core::Permission::Always),
        ..CallOptions::default()
    });
    let resp = svc.call(put).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(b.requests()[0].body_text(), "part");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_options_ride_in_the_extensions_a_keyed_post_retries_where_it_may_have_executed() {
    let a = Provider::builder()
        .then(Behaviour::reset())
        .otherwise(Behaviour::ok())
        .start();
    let b = Provider::start(Behaviour::ok());
    let mut svc = service(two(&a.url(), &b.url()));
    let mut post = request("POST", full("amount=1"));
    post.extensions_mut().insert(CallOptions {
        idempotency_key: Some("charge-42".into()),
        ..CallOptions::default()
    });
    let resp = svc.call(post).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!((a.request_count(), b.request_count()), (2, 0));
    assert_eq!(a.count_with_header("idempotency-key", "charge-42"), 2);
}

/// An inner service that answers 200 and counts the requests that still carry
/// `CallOptions` in their extensions. It sends nothing anywhere.
#[derive(Clone, Default)]
struct SawOptions(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl Service<http::Request<ReplayBody<Body>>> for SawOptions {
    type Response = http::Response<Full<Bytes>>;
    type Error = std::convert::Infallible;
    type Future = std::future::Ready<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<ReplayBody<Body>>) -> Self::Future {
        if req.extensions().get::<CallOptions>().is_some() {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        std::future::ready(Ok(http::Response::new(Full::new(Bytes::new()))))
    }
}

/// The call's options are the layer's: the inner service (a nested baton among them)
/// does not see them, or a `prefer` or `only` naming an outer endpoint would fail there.
#[tokio::test]
async fn call_options_stay_with_the_layer_and_do_not_reach_the_inner_service() {
    let saw = SawOptions::default();
    let policy = Policy::builder().endpoint(Endpoint::new("a", "http://127.0.0.1:9/"));
    let mut svc = BatonLayer::new(policy).unwrap().layer(saw.clone());
    let mut get = request("GET", full(""));
    get.extensions_mut().insert(CallOptions {
        prefer: Some("a".into()),
        ..CallOptions::default()
    });
    let resp = svc.call(get).await.unwrap();
    assert_eq!(resp.status(), 200);
    let report = resp.extensions().get::<Report>().unwrap();
    assert_eq!(report.attempts.len(), 1);
    let seen = saw.0.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(seen, 0, "the inner service saw the options");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grpc_unavailable_in_a_trailers_only_response_triggers_through_the_classifier() {
    let a = Provider::start(Behaviour::ok().header("grpc-status", "14"));
    let b = Provider::start(Behaviour::ok().header("grpc-status", "0"));
    let policy = two(&a.url(), &b.url()).classify_fn(|view| {
        let unavailable = view.headers.get("grpc-status").is_some_and(|s| s == "14");
        unavailable.then_some(baton_core::Verdict::Trigger)
    });
    let mut svc = service(policy);
    let resp = svc.call(request("GET", full(""))).await.unwrap();
    assert_eq!(resp.headers()["grpc-status"], "0");
    assert_eq!((a.request_count(), b.request_count()), (1, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_service_per_endpoint_takes_that_endpoints_attempts() {
    let a = Provider::start(Behaviour::status(503));
    let b = Provider::start(Behaviour::ok());
    let mut svc = Baton::from_services(two(&a.url(), &b.url()), vec![client(), client()]).unwrap();
    let resp = svc.call(request("GET", full(""))).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!((a.request_count(), b.request_count()), (1, 1));
    let err = Baton::from_services(two(&a.url(), &b.url()), vec![client()]).unwrap_err();
    assert!(
        err.to_string().contains("1 services for 2 endpoints"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_that_is_never_ready_counts_as_undelivered() {
    #[derive(Clone)]
    struct Broken;
    impl Service<http::Request<ReplayBody<Body>>> for Broken {
        type Response = http::Response<Full<Bytes>>;
        type Error = std::io::Error;
        type Future = std::future::Ready<Result<Self::Response, std::io::Error>>;
        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), std::io::Error>> {
            Poll::Ready(Err(std::io::Error::other("worker gone")))
        }
        fn call(&mut self, _: http::Request<ReplayBody<Body>>) -> Self::Future {
            unreachable!("never called when not ready")
        }
    }
    let b = Provider::start(Behaviour::ok());
    let mut svc =
        Baton::from_services(two("http://a.example/", &b.url()), vec![Broken, Broken]).unwrap();
    let err = svc.call(request("POST", full("x"))).await.unwrap_err();
    assert!(!err.may_have_executed(), "{:?}", err.report());
    assert_eq!(err.report().attempts.len(), 2, "{:?}", err.report());
    assert!(err
        .report()
        .attempts
        .iter()
        .all(|a| a.result.as_str() == "undelivered"));
    assert_eq!(b.request_count(), 0);
}

/// A hyper server on 127.0.0.1 answering every request with `status` and its Host header
/// as the body; returns its URL.
async fn hyper_server(status: u16) -> String {
    use hyper::service::service_fn;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let svc = service_fn(
                    move |req: http::Request<hyper::body::Incoming>| async move {
                        let host = req
                            .headers()
                            .get("host")
                            .map(|h| h.to_str().unwrap_or("").to_string())
                            .unwrap_or_default();
                        let resp = http::Response::builder()
                            .status(status)
                            .body(Full::new(Bytes::from(host)))
                            .unwrap();
                        Ok::<_, std::convert::Infallible>(resp)
                    },
                );
                let io = hyper_util::rt::TokioIo::new(stream);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, svc)
                    .await;
            });
        }
    });
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn against_real_hyper_servers_a_503_fails_over_with_the_backups_host() {
    let a = hyper_server(503).await;
    let b = hyper_server(200).await;
    let mut svc = service(two(&a, &b));
    let resp = svc.call(request("GET", full(""))).await.unwrap();
    assert_eq!(resp.status(), 200);
    let report = resp.extensions().get::<Report>().cloned().unwrap();
    assert_eq!(report.attempts.len(), 2);
    assert_eq!(report.result_endpoint(), Some("b"));
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    let authority = b.trim_start_matches("http://").trim_end_matches('/');
    assert_eq!(&body[..], authority.as_bytes());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirects_follow_the_engines_rules_through_one_service_and_are_answers_per_endpoint() {
    let target = Provider::start(Behaviour::ok().body("moved here"));
    let location = format!("{}/new", target.url());
    let a = Provider::start(Behaviour::status(307).header("location", location.as_str()));
    let b = Provider::start(Behaviour::ok());
    let mut svc = service(two(&a.url(), &b.url()));
    let resp = svc.call(request("POST", full("x"))).await.unwrap();
    assert_eq!(resp.status(), 200);
    let report = resp.extensions().get::<Report>().cloned().unwrap();
    assert_eq!(report.redirects.len(), 1);
    assert_eq!(target.requests()[0].body_text(), "x");
    assert_eq!(b.request_count(), 0);

    // Per-endpoint services cannot be pointed elsewhere: the 3xx is the answer.
    let mut per = Baton::from_services(two(&a.url(), &b.url()), vec![client(), client()]).unwrap();
    let resp = per.call(request("POST", full("x"))).await.unwrap();
    assert_eq!(resp.status(), 307);
    assert_eq!(target.request_count(), 1);
}

/// A stream with an exact size hint that counts down as it is read (as hyper's `Incoming`
/// with a content length does), in two frames, not ready at once.
struct Counted {
    parts: Vec<Bytes>,
    left: u64,
    waited: bool,
}

impl http_body::Body for Counted {
    type Data = Bytes;
    type Error = baton_tower::BoxError;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        if !self.waited {
            self.waited = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        if self.parts.is_empty() {
            return Poll::Ready(None);
        }
        let part = self.parts.remove(0);
        self.left -= part.len() as u64;
        Poll::Ready(Some(Ok(http_body::Frame::data(part))))
    }
    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.left)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_over_the_buffer_limit_is_sent_once_with_its_size_and_nothing_replays() {
    let a = Provider::start(Behaviour::status(503));
    let b = Provider::start(Behaviour::ok());
    let layer = BatonLayer::builder(two(&a.url(), &b.url()))
        .buffer_body(4)
        .layer()
        .unwrap();
    let mut svc = layer.layer(client());
    let body = Counted {
        parts: vec![Bytes::from("0123"), Bytes::from("456789")],
        left: 10,
        waited: false,
    };
    let mut put = request("PUT", body.boxed());
    put.extensions_mut().insert(CallOptions {
        failover: Some(baton_core::Permission::Always),
        ..CallOptions::default()
    });
    let resp = svc.call(put).await.unwrap();
    assert_eq!(resp.status(), 503);
    let report = resp.extensions().get::<Report>().unwrap();
    assert_eq!(report.stop_reason, StopReason::NotReplayable);
    assert_eq!(a.requests()[0].body_text(), "0123456789");
    assert_eq!(b.request_count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_that_never_gets_ready_times_out_undelivered_and_a_post_moves_on() {
    /// An endpoint's service: one that never gets ready, or one that answers 200.
    #[derive(Clone)]
    enum Node {
        Stuck,
        Answers,
    }
    impl Service<http::Request<ReplayBody<Body>>> for Node {
        type Response = http::Response<Full<Bytes>>;
        type Error = std::io::Error;
        type Future = std::future::Ready<Result<Self::Response, std::io::Error>>;
        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), std::io::Error>> {
            match self {
                Node::Stuck => Poll::Pending,
                Node::Answers => Poll::Ready(Ok(())),
            }
        }
        fn call(&mut self, _: http::Request<ReplayBody<Body>>) -> Self::Future {
            std::future::ready(Ok(http::Response::new(Full::new(Bytes::from("ok")))))
        }
    }
    let mut svc = Baton::from_services(
        two("http://a.example/", "http://b.example/"),
        vec![Node::Stuck, Node::Answers],
    )
    .unwrap();
    let resp = svc.call(request("POST", full("x"))).await.unwrap();
    let report = resp.extensions().get::<Report>().unwrap();
    assert_eq!(report.attempts[0].result.as_str(), "timeout");
    assert!(!report.attempts[0]
        .result
        .may_have_executed(&baton_core::StatusSet::new()));
    assert_eq!(report.result_endpoint(), Some("b"));
}

#[test]
fn the_error_is_send_and_sync_for_any_sendable_body() {
    fn sync<T: Send + Sync + 'static>() {}
    // `Cell` is `Send` but not `Sync`: the error is `Sync` all the same.
    sync::<baton_tower::Error<std::cell::Cell<u8>>>();
    let _: fn(baton_tower::Error<Body>) -> baton_tower::BoxError = |e| Box::new(e);
}

#[test]
fn a_credential_slot_is_refused_rather_than_sent_without_its_token() {
    let policy = baton_core::Policy::builder().endpoint(
        baton_core::Endpoint::new("a", "http://127.0.0.1:1/")
            .credential(baton_core::credential::CredentialSettings::default()),
    );
    let Err(e) = baton_tower::BatonLayer::new(policy) else {
        panic!("a credential slot was accepted")
    };
    assert!(e.to_string().contains("credential"), "{e}");
}

#[cfg(feature = "tokio")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempts_end_under_the_builders_own_timers_and_under_tokio_sleep_given() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    /// tokio's timers, counting the ones made.
    struct Counted(Arc<AtomicUsize>);
    impl baton_tower::Sleep for Counted {
        fn sleep_until(&self, deadline: std::time::Instant) -> baton_tower::Sleeping {
            self.0.fetch_add(1, Ordering::SeqCst);
            Box::pin(tokio::time::sleep_until(deadline.into()))
        }
    }
    let a = Provider::start(Behaviour::black_hole());
    let b = Provider::start(Behaviour::ok());
    let made = Arc::new(AtomicUsize::new(0));
    let counted = BatonLayer::builder(two(&a.url(), &b.url())).sleep(Counted(made.clone()));
    let tokio = BatonLayer::builder(two(&a.url(), &b.url())).sleep(baton_tower::TokioSleep);
    for builder in [counted, tokio] {
        let mut svc = builder.layer().unwrap().layer(client());
        let resp = svc.call(request("GET", full(""))).await.unwrap();
        let report = resp.extensions().get::<Report>().unwrap();
        assert_eq!(report.attempts[0].result.as_str(), "timeout");
        assert_eq!(report.result_endpoint(), Some("b"));
    }
    // Both attempts of the first call ran under the given timers, none of the second's
    // (`TokioSleep` given is tokio's timers in place: the unit test in `sleep.rs`).
    assert_eq!(made.load(Ordering::SeqCst), 2);
}

/// A layer in front of a layer (baton inside baton): the inner call's error is what an
/// outer attempt fails with, and the inner call's report decides its class.
type Nested = Baton<Baton<Client<HttpConnector, ReplayBody<ReplayBody<Body>>>>>;

/// An outer layer of two endpoints (one attempt each; every attempt goes through the inner
/// layer, whatever its URL) over an inner one of `a` and `b`.
fn nested(a: &str, b: &str) -> Nested {
    let mut connector = HttpConnector::new();
    connector.set_connect_timeout(Some(Duration::from_millis(300)));
    let client = Client::builder(TokioExecutor::new()).build(connector);
    let once = |p: PolicyBuilder| p.configure(|s| s.attempts_per_endpoint = Some(1));
    let inner = BatonLayer::new(once(two(a, b))).unwrap().layer(client);
    let outer = once(two("http://127.0.0.1:9/", "http://127.0.0.1:9/"));
    BatonLayer::new(outer).unwrap().layer(inner)
}

fn results(report: &Report) -> Vec<baton_core::AttemptResult> {
    report.attempts.iter().map(|a| a.result).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inner_layer_that_sent_nothing_lets_the_outer_post_fail_over() {
    let refused = testkit::refused_url();
    let mut svc = nested(&refused, &refused);
    let err = svc.call(request("POST", full("{}"))).await.unwrap_err();
    let undelivered = baton_core::AttemptResult::Failed(baton_core::FailureClass::Undelivered);
    assert_eq!(results(err.report()), [undelivered, undelivered], "{err}");
    assert!(!err.may_have_executed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inner_layer_that_may_have_executed_is_ambiguous_whatever_its_last_attempt() {
    // The inner call's first endpoint resets the GET after reading it, its second refuses:
    // the refusal alone would read as "nothing was sent".
    let reset = Provider::start(Behaviour::reset());
    let refused = testkit::refused_url();
    let mut svc = nested(&reset.url(), &refused);
    let err = svc.call(request("GET", full(""))).await.unwrap_err();
    let ambiguous = baton_core::AttemptResult::Failed(baton_core::FailureClass::Ambiguous);
    assert_eq!(results(err.report()), [ambiguous, ambiguous], "{err}");
    assert!(err.may_have_executed());
    assert_eq!(reset.request_count(), 2);
    // The outer call's link to its last attempt is the source; that attempt's error,
    // scrubbed of URLs (no source of its own), keeps the inner call's error for programs.
    let source = std::error::Error::source(&err).unwrap();
    let outer = source.downcast_ref::<baton_core::AttemptFailure>().unwrap();
    let scrubbed = outer
        .error()
        .unwrap()
        .downcast_ref::<baton_core::Scrubbed>();
    let inner = scrubbed.unwrap().inner();
    let inner_call = inner.downcast_ref::<baton_tower::Error<hyper::body::Incoming>>();
    assert_eq!(inner_call.unwrap().report().attempts.len(), 2);
    assert!(inner_call.unwrap().may_have_executed());
    // The inner call's link to its second (last) attempt carries that call's verdict.
    let link = testkit::in_chain::<baton_core::AttemptFailure>(inner).unwrap();
    assert_eq!((link.attempt, link.call_may_have_executed()), (2, true));
    assert_eq!(testkit::repeated_in_chain(&err), None);
}
