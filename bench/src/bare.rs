//! A bare hyper 1.x HTTP/1.1 connection over async-io (bridged by smol-hyper), its
//! connection future polled in the calling task: the raw client the async-std and smol
//! rows measure baton-async-std against, the blocking rows' stock ureq agent, and
//! reqwest-retry's middleware (shared by the `bench`, `allocs` and `callcost` binaries).

use std::future::Future;
use std::net::{SocketAddr, TcpStream};
use std::pin::Pin;

use async_io::Async;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use smol_hyper::rt::FuturesIo;

/// The request id the raw clients send: 26 characters, as baton's generated ones.
pub const REQUEST_ID: &str = "01JD6Y8Z3W4X5V6T7S8R9Q0P1N";

/// The raw client of the blocking rows: a stock ureq Agent with the policy's default
/// connect and attempt timeouts, answering 4xx and 5xx as responses.
pub fn stock_ureq() -> ureq::Agent {
    let d = baton_core::Settings::default();
    ureq::Agent::config_builder()
        .timeout_connect(Some(d.connect_timeout))
        .timeout_recv_response(Some(d.attempt_timeout))
        .http_status_as_error(false)
        .build()
        .into()
}

type Conn = hyper::client::conn::http1::Connection<FuturesIo<Async<TcpStream>>, Empty<Bytes>>;

/// One bare hyper connection, its connection future polled in the calling task.
pub struct Bare {
    sender: hyper::client::conn::http1::SendRequest<Empty<Bytes>>,
    host: String,
    conn: Option<Pin<Box<Conn>>>,
}

/// Runs `fut` while polling the connection future alongside.
async fn driven<F: Future>(conn: &mut Option<Pin<Box<Conn>>>, fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    std::future::poll_fn(|cx| {
        if let Some(c) = conn.as_mut() {
            if c.as_mut().poll(cx).is_ready() {
                *conn = None;
            }
        }
        fut.as_mut().poll(cx)
    })
    .await
}

impl Bare {
    /// Opens one connection to `addr`.
    pub async fn connect(addr: SocketAddr) -> Bare {
        let tcp = Async::<TcpStream>::connect(addr).await.expect("connect");
        tcp.get_ref().set_nodelay(true).expect("nodelay");
        let (sender, conn) = hyper::client::conn::http1::handshake(FuturesIo::new(tcp))
            .await
            .expect("handshake");
        Bare {
            sender,
            host: addr.to_string(),
            conn: Some(Box::pin(conn)),
        }
    }

    /// One `GET /` (with the request id, or a plain one), its body read.
    pub async fn call(&mut self, request_id: bool) -> bool {
        let Bare { sender, host, conn } = self;
        if driven(conn, sender.ready()).await.is_err() {
            return false;
        }
        let mut req = http::Request::builder()
            .uri("/")
            .header("host", host.as_str());
        if request_id {
            req = req.header("x-request-id", REQUEST_ID);
        }
        let req = req.body(Empty::<Bytes>::new()).expect("request");
        match driven(conn, sender.send_request(req)).await {
            Ok(resp) => {
                resp.status().is_success() && driven(conn, resp.into_body().collect()).await.is_ok()
            }
            Err(_) => false,
        }
    }
}

/// reqwest-retry's middleware: `retries` retries, exponential backoff within `bounds`.
pub fn reqwest_retry(
    http: &reqwest::Client,
    retries: u32,
    bounds: (std::time::Duration, std::time::Duration),
) -> reqwest_middleware::ClientWithMiddleware {
    let policy = reqwest_retry::policies::ExponentialBackoff::builder()
        .retry_bounds(bounds.0, bounds.1)
        .build_with_max_retries(retries);
    reqwest_middleware::ClientBuilder::new(http.clone())
        .with(reqwest_retry::RetryTransientMiddleware::new_with_policy(
            policy,
        ))
        .build()
}
