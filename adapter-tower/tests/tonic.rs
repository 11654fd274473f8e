//! A real gRPC client through baton-tower: tonic's `Channel`, one per endpoint, behind the
//! layer; a unary, non-idempotent RPC (`pay.Payments/Charge`, a POST without a key).
//!
//! The primary is testkit's HTTP/2 provider, which can refuse a stream or reset it after
//! the whole request (a tonic server cannot be made to do either); the backup is a tonic
//! service served by hyper's HTTP/2 server. Messages are prost structs written by hand
//! (no protoc in the build).
//!
//! - The primary refuses the stream: the RPC fails over exactly once and the backup
//!   processes it once; the primary processed nothing.
//! - The primary resets after receiving the request: the RPC does not fail over, and the
//!   call reports it may have executed.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use baton_core::{AttemptResult, Endpoint, EventKind, FailureClass, Policy, UrlMode};
use baton_tower::{Baton, BatonBuilder, ReplayBody};
use testkit::{H2Behaviour, H2Provider};
use tonic::transport::Channel;
use tower_service::Service;

#[derive(Clone, PartialEq, prost::Message)]
struct ChargeRequest {
    #[prost(string, tag = "1")]
    order: String,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ChargeReply {
    #[prost(string, tag = "1")]
    charged_by: String,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// The backup's gRPC service: `Charge` answers with its name and counts the charges.
#[derive(Clone)]
struct Payments {
    charges: Arc<AtomicUsize>,
}

/// The unary method, as tonic's `UnaryService`.
struct Charge(Payments);

impl Service<tonic::Request<ChargeRequest>> for Charge {
    type Response = tonic::Response<ChargeReply>;
    type Error = tonic::Status;
    type Future = BoxFuture<Result<Self::Response, Self::Error>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, req: tonic::Request<ChargeRequest>) -> Self::Future {
        self.0.charges.fetch_add(1, Ordering::SeqCst);
        let order = req.into_inner().order;
        Box::pin(async move {
            Ok(tonic::Response::new(ChargeReply {
                charged_by: format!("backup for {order}"),
            }))
        })
    }
}

impl<B> Service<http::Request<B>> for Payments
where
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>> + Send,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = BoxFuture<Result<Self::Response, Self::Error>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let svc = Charge(self.clone());
        Box::pin(async move {
            if req.uri().path() != "/pay.Payments/Charge" {
                return Ok(tonic::Status::unimplemented("no such method").into_http());
            }
            let codec = tonic_prost::ProstCodec::<ChargeReply, ChargeRequest>::default();
            Ok(tonic::server::Grpc::new(codec).unary(svc, req).await)
        })
    }
}

/// Serves `Payments` over HTTP/2 (prior knowledge) on 127.0.0.1; its address.
async fn serve(payments: Payments) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let svc = hyper_util::service::TowerToHyperService::new(payments.clone());
            tokio::spawn(async move {
                let _ =
                    hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                        .await;
            });
        }
    });
    addr
}

/// tonic's `Channel` under the layer: the layer hands it a replayable body.
#[derive(Clone)]
struct ToChannel(Channel);

impl<B> Service<http::Request<ReplayBody<B>>> for ToChannel
where
    ReplayBody<B>: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    <ReplayBody<B> as http_body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = tonic::transport::Error;
    type Future = <Channel as Service<http::Request<tonic::body::Body>>>::Future;
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }
    fn call(&mut self, req: http::Request<ReplayBody<B>>) -> Self::Future {
        self.0.call(req.map(tonic::body::Body::new))
    }
}

fn channel(url: &str) -> ToChannel {
    ToChannel(
        Channel::from_shared(url.to_string())
            .unwrap()
            .connect_lazy(),
    )
}

/// One `Charge` RPC through the layer to `primary` (a fault) and the tonic backup: the
/// RPC's result, the attempt results, and each side's count of processed charges.
async fn charge(
    primary: H2Behaviour,
) -> (
    Result<String, tonic::Status>,
    Vec<AttemptResult>,
    usize,
    usize,
) {
    let faulty = H2Provider::start(primary);
    let charges = Arc::new(AtomicUsize::new(0));
    let backup = serve(Payments {
        charges: charges.clone(),
    })
    .await;
    let backup_url = format!("http://{backup}");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let policy = Policy::builder()
        .endpoint(Endpoint::new("primary", faulty.url()))
        .endpoint(Endpoint::new("backup", backup_url.clone()))
        .attempt_timeout(Duration::from_secs(3))
        // gRPC names the method in the path: the endpoint URLs are bases it joins.
        .url_mode(UrlMode::Base)
        .on_event(move |e| {
            if let EventKind::AttemptFinished { result, .. } = &e.kind {
                log.lock().unwrap().push(*result);
            }
        });
    // A unary request body is a stream to tonic: buffered so a later attempt can send it.
    let layered: Baton<ToChannel> = BatonBuilder::new(policy)
        .buffer_body(64 * 1024)
        .services(vec![channel(&faulty.url()), channel(&backup_url)])
        .unwrap();
    let mut client = tonic::client::Grpc::new(layered);
    client.ready().await.unwrap();
    let codec = tonic_prost::ProstCodec::<ChargeRequest, ChargeReply>::default();
    let reply = client
        .unary(
            tonic::Request::new(ChargeRequest {
                order: "o-1".into(),
            }),
            http::uri::PathAndQuery::from_static("/pay.Payments/Charge"),
            codec,
        )
        .await
        .map(|r| r.into_inner().charged_by);
    let results = seen.lock().unwrap().clone();
    (
        reply,
        results,
        faulty.processed(),
        charges.load(Ordering::SeqCst),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_stream_fails_the_rpc_over_exactly_once() {
    let (reply, results, primary, backup) = charge(H2Behaviour::refuse_stream()).await;
    assert_eq!(reply.unwrap(), "backup for o-1");
    assert_eq!(
        results,
        [
            AttemptResult::Failed(FailureClass::Undelivered),
            AttemptResult::Response(http::StatusCode::OK)
        ]
    );
    assert_eq!((primary, backup), (0, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_after_the_request_does_not_fail_over_and_may_have_executed() {
    let (reply, results, primary, backup) = charge(H2Behaviour::reset_after_request()).await;
    let status = reply.unwrap_err();
    assert_eq!(
        results,
        [AttemptResult::Failed(FailureClass::Ambiguous)],
        "{status:?}"
    );
    assert_eq!((primary, backup), (1, 0));
    // The status carries baton's error, which says the charge may have gone through.
    let text = format!("{status:?}");
    assert!(text.contains("may have executed"), "{text}");
}
