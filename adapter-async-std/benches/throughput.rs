//! Calls per second through `baton_async_std::Client` versus a bare hyper 1.x connection
//! reused on the same runtime, against one local keep-alive `testkit` provider, once under
//! async-std and once under smol.
//!
//! - baselines: one `hyper::client::conn::http1` connection over
//!   `async_io::Async<TcpStream>` (bridged with `smol-hyper`), sequential `GET /` + reading
//!   the 2-byte body, reused for every call, with the same headers on the wire as the
//!   adapter's requests (Host and a 26-character request id); its connection future either spawned on the
//!   runtime (the idiomatic way) or polled inline in the calling task (as the adapter
//!   does); the goal is measured against the faster of the two;
//! - adapter: `Client` with one endpoint and the default policy (consecutive breaker rule,
//!   budget on, no hedging, events off, default features), sequential
//!   `client.get("/").send().await?.bytes().await?`.
//!
//! Each variant runs `ROUNDS` rounds of `CALLS` calls, interleaved in a rotating order,
//! after a warm-up. Reported: the median rate of each variant, and the median over rounds of
//! adapter / baseline within the same round (robust to the machine's load drifting).
//! Goal: adapter / the better baseline >= 0.95.
//!
//! `cargo bench -p baton-async-std --bench throughput` (env `BATON_BENCH_CALLS`,
//! `BATON_BENCH_ROUNDS` override the defaults 300 and 31).

use std::future::Future;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use async_io::Async;
use baton_async_std::Client;
use baton_core::Endpoint;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use smol_hyper::rt::FuturesIo;
use testkit::{Behaviour, Provider};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

type Spawn = fn(std::pin::Pin<Box<dyn Future<Output = ()> + Send>>);

type Conn = hyper::client::conn::http1::Connection<FuturesIo<Async<TcpStream>>, Empty<Bytes>>;

struct Bare {
    sender: hyper::client::conn::http1::SendRequest<Empty<Bytes>>,
    host: String,
    /// The connection future when it is driven inline (not spawned).
    conn: Option<std::pin::Pin<Box<Conn>>>,
}

/// Runs `fut` while polling the connection future alongside (inline baseline).
async fn driven<F: Future>(conn: &mut Option<std::pin::Pin<Box<Conn>>>, fut: F) -> F::Output {
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
    /// `spawn: None` drives the connection inline, in the calling task.
    async fn connect(addr: std::net::SocketAddr, spawn: Option<Spawn>) -> Bare {
        let tcp = Async::<TcpStream>::connect(addr).await.expect("connect");
        tcp.get_ref().set_nodelay(true).expect("nodelay");
        let (sender, conn) = hyper::client::conn::http1::handshake(FuturesIo::new(tcp))
            .await
            .expect("handshake");
        let conn = match spawn {
            Some(spawn) => {
                spawn(Box::pin(async move {
                    let _ = conn.await;
                }));
                None
            }
            None => Some(Box::pin(conn)),
        };
        Bare {
            sender,
            host: addr.to_string(),
            conn,
        }
    }

    async fn call(&mut self) -> Bytes {
        let Bare { sender, host, conn } = self;
        driven(conn, sender.ready()).await.expect("ready");
        let req = http::Request::builder()
            .uri("/")
            .header("host", host.as_str())
            // The same bytes on the wire as the adapter's requests (it always sends one).
            .header("x-request-id", "01JD6Y8Z3W4X5V6T7S8R9Q0P1N")
            .body(Empty::<Bytes>::new())
            .expect("request");
        let resp = driven(conn, sender.send_request(req)).await.expect("send");
        assert_eq!(resp.status(), 200);
        driven(conn, resp.into_body().collect())
            .await
            .expect("body")
            .to_bytes()
    }
}

async fn adapter_round(client: &Client, calls: usize) -> f64 {
    let t0 = Instant::now();
    for _ in 0..calls {
        let b = client
            .get("/")
            .send()
            .await
            .expect("call")
            .bytes()
            .await
            .expect("body");
        assert_eq!(b.len(), 2);
    }
    calls as f64 / t0.elapsed().as_secs_f64()
}

async fn bare_round(bare: &mut Bare, calls: usize) -> f64 {
    let t0 = Instant::now();
    for _ in 0..calls {
        let b = bare.call().await;
        assert_eq!(b.len(), 2);
    }
    calls as f64 / t0.elapsed().as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

async fn run(name: &str, spawn: Spawn, p: &Provider) -> f64 {
    let calls = env("BATON_BENCH_CALLS", 300);
    let rounds = env("BATON_BENCH_ROUNDS", 31).max(1);
    let client =
        Client::new(baton_core::Policy::builder().endpoint(Endpoint::new("local", p.url())))
            .expect("client");
    let mut spawned = Bare::connect(p.addr(), Some(spawn)).await;
    let mut inline = Bare::connect(p.addr(), None).await;
    // Warm-up: connections open, caches warm.
    adapter_round(&client, calls / 4 + 1).await;
    bare_round(&mut spawned, calls / 4 + 1).await;
    bare_round(&mut inline, calls / 4 + 1).await;
    let (mut a, mut s, mut i) = (Vec::new(), Vec::new(), Vec::new());
    // Interleaved, in a rotating order, so load from elsewhere hits all variants alike.
    let only = std::env::var("BATON_BENCH_ONLY").unwrap_or_default();
    for r in 0..rounds {
        for k in 0..3 {
            let v = (r + k) % 3;
            let name = ["spawned", "inline", "adapter"][v];
            if !only.is_empty() && only != name {
                match v {
                    0 => s.push(f64::NAN),
                    1 => i.push(f64::NAN),
                    _ => a.push(f64::NAN),
                }
                continue;
            }
            match v {
                0 => s.push(bare_round(&mut spawned, calls).await),
                1 => i.push(bare_round(&mut inline, calls).await),
                _ => a.push(adapter_round(&client, calls).await),
            }
        }
    }
    // Per-round ratios: each round's variants ran back to back, so slow drifts of the
    // machine's load cancel out better than in a ratio of medians.
    let per_round = |base: &[f64]| -> Vec<f64> {
        a.iter()
            .zip(base)
            .map(|(x, y)| x / y)
            .filter(|r| r.is_finite())
            .collect()
    };
    let best: Vec<f64> = s.iter().zip(&i).map(|(x, y)| x.max(*y)).collect();
    let (rs, ri, rb) = (
        median(per_round(&s)),
        median(per_round(&i)),
        median(per_round(&best)),
    );
    let (ma, ms, mi) = (median(a), median(s), median(i));
    let conns = p.connection_count();
    let line = |what: &str, m: f64| format!("{what} {m:>7.0}/s {:>5.1}us", 1e6 / m);
    println!(
        "{name:<9} | medians: {} | {} | {}\n{:<9} | per-round ratio (median): vs spawned {rs:.3}, vs inline {ri:.3}, vs the better of both {rb:.3} | connections so far {conns}",
        line("bare hyper, conn task spawned:", ms),
        line("bare hyper, conn driven inline:", mi),
        line("adapter:", ma),
        "",
    );
    rb
}

fn main() {
    // `cargo test --benches` runs bench targets with `--bench` absent; keep that quick.
    let quick = !std::env::args().any(|a| a == "--bench");
    if quick {
        std::env::set_var("BATON_BENCH_CALLS", "50");
        std::env::set_var("BATON_BENCH_ROUNDS", "1");
    }
    let p = Provider::start(Behaviour::ok().body("ok"));
    p.set_recording(false);
    println!(
        "{} calls x {} rounds per variant, sequential, one keep-alive connection, provider {}",
        env("BATON_BENCH_CALLS", 300),
        env("BATON_BENCH_ROUNDS", 31),
        p.url()
    );
    let rt = std::env::var("BATON_BENCH_RT").unwrap_or_default();
    let mut r1 = f64::NAN;
    let mut r2 = f64::NAN;
    if rt.is_empty() || rt == "async-std" {
        r1 = async_std::task::block_on(run(
            "async-std",
            |f| {
                async_std::task::spawn(f);
            },
            &p,
        ));
    }
    if rt.is_empty() || rt == "smol" {
        r2 = smol::block_on(run("smol", |f| smol::spawn(f).detach(), &p));
    }
    println!("goal: adapter / best bare hyper >= 0.95 -> async-std {r1:.3}, smol {r2:.3}");
    std::thread::sleep(Duration::from_millis(10));
}
