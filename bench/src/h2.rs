//! Scenario 6: healthy calls over HTTP/2, every caller on one multiplexed connection (h2c
//! with prior knowledge to testkit's HTTP/2 provider, recording off), 1 and 8 callers.
//!
//! - baton-tokio against the same `reqwest::Client` (built with `http2_prior_knowledge`)
//!   sending the same request bytes, and a plain request beside it: baton sends through
//!   that very client, so the connection is the same.
//! - baton-async-std against a bare hyper 1.x HTTP/2 connection over async-io, its
//!   connection task spawned on the runtime (async-std's or smol's), the usual way to run
//!   hyper's HTTP/2 client; baton's own connection task runs on its `baton-h2` thread.
//!
//! The rows keep scenario 1's format (three rows per runtime and caller count: the raw
//! client with baton's request bytes as the baseline, a plain request, baton).

use std::future::Future;
use std::net::{SocketAddr, TcpStream};
use std::pin::Pin;

use async_io::Async;
use baton_core::HttpVersion;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use smol_hyper::rt::FuturesIo;
use testkit::{H2Behaviour, H2Provider};

use crate::bare::REQUEST_ID;
use crate::interleave::{self, push_rows, Interleaved, TURN};
use crate::{Charts, Row, Scale};

const SCENARIO: &str = "6 healthy over HTTP/2";

fn provider() -> H2Provider {
    H2Provider::builder()
        .recording(false)
        .otherwise(H2Behaviour::ok())
        .start()
}

/// The rows of one runtime and caller count, in scenario 1's format, under scenario 6.
fn rows_of(rows: &mut Vec<Row>, names: [&str; 3], setup: &str, m: &Interleaved) {
    let start = rows.len();
    // Scenario 1's chart is about HTTP/1.1: these ratios stay in the table.
    push_rows(rows, &mut Charts::default(), names, setup, m);
    for r in &mut rows[start..] {
        r.scenario = SCENARIO;
    }
}

fn setup(n: usize, rounds: usize) -> String {
    format!(
        "{n} task(s) on one HTTP/2 connection, {} GETs each, interleaved",
        rounds * n * TURN
    )
}

/// baton-tokio against the same reqwest client, over HTTP/2.
pub(crate) async fn tokio(scale: Scale, rows: &mut Vec<Row>) {
    let p = provider();
    let url = format!("{}/", p.url());
    let http = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .expect("reqwest client");
    let client = baton_tokio::Client::builder(
        crate::endpoints(std::slice::from_ref(&url))
            .configure(|s| s.http_version = HttpVersion::Http2),
    )
    .reqwest_client(http.clone())
    .build()
    .expect("baton-tokio client");
    for (n, calls) in [(1, scale.healthy_calls), (8, scale.healthy_calls_8)] {
        let rounds = calls * scale.reps / n / TURN;
        let call = |who: usize| {
            let (http, client, url) = (&http, &client, url.as_str());
            async move {
                match who {
                    0 => crate::same_bytes_get(http, url).await,
                    1 => crate::plain_get(http, url, None).await,
                    _ => crate::baton_get(client).await,
                }
            }
        };
        interleave::tasks(rounds / 10 + 1, n, 3, call).await;
        let m = interleave::tasks(rounds, n, 3, call).await;
        let names = [
            "plain reqwest over HTTP/2, same request bytes",
            "plain reqwest over HTTP/2, plain request",
            "baton-tokio over HTTP/2",
        ];
        rows_of(rows, names, &setup(n, rounds), &m);
    }
}

type Spawn = fn(Pin<Box<dyn Future<Output = ()> + Send>>);

/// hyper's executor: the runtime's own spawn.
#[derive(Clone, Copy)]
struct Exec(Spawn);

impl<F: Future<Output = ()> + Send + 'static> hyper::rt::Executor<F> for Exec {
    fn execute(&self, fut: F) {
        (self.0)(Box::pin(fut));
    }
}

/// A bare hyper HTTP/2 connection, its task on the runtime.
#[derive(Clone)]
struct BareH2 {
    sender: hyper::client::conn::http2::SendRequest<Empty<Bytes>>,
    uri: http::Uri,
}

impl BareH2 {
    async fn connect(addr: SocketAddr, spawn: Spawn) -> BareH2 {
        let tcp = Async::<TcpStream>::connect(addr).await.expect("connect");
        tcp.get_ref().set_nodelay(true).expect("nodelay");
        let (sender, conn) =
            hyper::client::conn::http2::handshake(Exec(spawn), FuturesIo::new(tcp))
                .await
                .expect("h2 handshake");
        spawn(Box::pin(async move {
            let _ = conn.await;
        }));
        BareH2 {
            sender,
            uri: format!("http://{addr}/").parse().expect("uri"),
        }
    }

    /// One `GET /` (with the request id, or a plain one), its body read.
    async fn call(&self, request_id: bool) -> bool {
        let mut sender = self.sender.clone();
        if sender.ready().await.is_err() {
            return false;
        }
        let mut req = http::Request::builder().uri(self.uri.clone());
        if request_id {
            req = req.header("x-request-id", REQUEST_ID);
        }
        let req = req.body(Empty::<Bytes>::new()).expect("request");
        match sender.send_request(req).await {
            Ok(resp) => resp.status().is_success() && resp.into_body().collect().await.is_ok(),
            Err(_) => false,
        }
    }
}

/// One runtime's rows: `block_on` and `spawn` are async-std's or smol's.
fn async_runtime(
    name: &str,
    block_on: fn(Pin<Box<dyn Future<Output = ()> + '_>>),
    spawn: Spawn,
    scale: Scale,
    rows: &mut Vec<Row>,
) {
    let p = provider();
    let url = format!("{}/", p.url());
    let addr = p.addr();
    let client = baton_async_std::Client::new(
        crate::endpoints(std::slice::from_ref(&url))
            .configure(|s| s.http_version = HttpVersion::Http2),
    )
    .expect("baton-async-std client");
    let mut out: Vec<(String, Interleaved)> = Vec::new();
    block_on(Box::pin(async {
        let bare = BareH2::connect(addr, spawn).await;
        for (n, calls) in [(1, scale.healthy_calls), (8, scale.healthy_calls_8)] {
            let rounds = calls * scale.reps / n / TURN;
            let call = |who: usize| {
                let (bare, client) = (&bare, &client);
                async move {
                    match who {
                        0 => bare.call(true).await,
                        1 => bare.call(false).await,
                        _ => match client.get("/").send().await {
                            Ok(r) => r.status().is_success() && r.bytes().await.is_ok(),
                            Err(_) => false,
                        },
                    }
                }
            };
            interleave::tasks(rounds / 10 + 1, n, 3, call).await;
            let m = interleave::tasks(rounds, n, 3, call).await;
            out.push((setup(n, rounds), m));
        }
    }));
    for (setup, m) in out {
        let names = [
            &*format!("bare hyper HTTP/2 on {name}, same request bytes"),
            &*format!("bare hyper HTTP/2 on {name}, plain request"),
            &*format!("baton-async-std over HTTP/2 on {name}"),
        ];
        rows_of(rows, names, &setup, &m);
    }
}

/// baton-async-std against bare hyper HTTP/2, on async-std and on smol.
pub(crate) fn async_std_and_smol(scale: Scale, rows: &mut Vec<Row>) {
    async_runtime(
        "async-std",
        |f| async_std::task::block_on(f),
        |f| {
            async_std::task::spawn(f);
        },
        scale,
        rows,
    );
    async_runtime(
        "smol",
        |f| smol::block_on(f),
        |f| smol::spawn(f).detach(),
        scale,
        rows,
    );
}
