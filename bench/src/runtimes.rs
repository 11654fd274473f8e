//! Scenario 1 on the other adapters: baton-blocking against a stock `ureq::Agent` with the
//! same timeouts (the client a user would use without baton, not the adapter's own
//! phase-observing agent), and baton-async-std against a bare hyper 1.x connection over
//! async-io polled in the calling task (the adapter's own way of driving connections), on
//! async-std and on smol. 1 and 8 concurrent callers (threads for blocking).
//!
//! Each raw client sends the same request bytes as baton (the same headers, a request id
//! included), so the ratio is baton's cost alone; a plain request (no request id) is
//! measured beside it as a reference.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use testkit::Behaviour;

use crate::bare::{Bare, REQUEST_ID};
use crate::interleave::{self, order, push_rows, Interleaved, TURN};
use crate::{provider, Charts, Row, Scale};

fn read_all(body: ureq::Body) -> bool {
    let mut body = body;
    body.read_to_vec().is_ok()
}

/// baton-blocking against a stock ureq Agent with the policy's timeouts.
pub(crate) fn blocking(scale: Scale, rows: &mut Vec<Row>, charts: &mut Charts) {
    let p = provider(Behaviour::ok());
    let url = format!("{}/", p.url());
    let agent = crate::bare::stock_ureq();
    let client = baton_blocking::Client::new(crate::endpoints(std::slice::from_ref(&url)))
        .expect("baton-blocking client");
    let same = || match agent.get(&url).header("x-request-id", REQUEST_ID).call() {
        Ok(r) => r.status().is_success() && read_all(r.into_body()),
        Err(_) => false,
    };
    let plain = || match agent.get(&url).call() {
        Ok(r) => r.status().is_success() && read_all(r.into_body()),
        Err(_) => false,
    };
    let baton = || match client.get("/").call() {
        Ok(r) => r.status().is_success() && read_all(r.into_body()),
        Err(_) => false,
    };
    let call = |who: usize| match who {
        0 => same(),
        1 => plain(),
        _ => baton(),
    };
    for (n, calls) in [(1, scale.healthy_calls), (8, scale.healthy_calls_8)] {
        let rounds = calls * scale.reps / n / TURN;
        interleave::threads(rounds / 10 + 1, n, 3, &call);
        let m = interleave::threads(rounds, n, 3, &call);
        let names = [
            "stock ureq Agent, same request bytes",
            "stock ureq Agent, plain request",
            "baton-blocking",
        ];
        let setup = format!(
            "{n} thread(s), {} GETs each, interleaved",
            rounds * n * TURN
        );
        push_rows(rows, charts, names, &setup, &m);
    }
}

// ---------------------------------------------------------------------- async-std, smol

/// One caller's turn of contender `who`: a bare connection with baton's request bytes
/// (0), one with a plain request (1), or baton-async-std (2).
async fn caller_turn(
    conns: &mut (Bare, Bare),
    client: &baton_async_std::Client,
    who: usize,
) -> [Duration; TURN] {
    let mut lat = [Duration::ZERO; TURN];
    for l in &mut lat {
        let t = Instant::now();
        let ok = match who {
            0 => conns.0.call(true).await,
            1 => conns.1.call(false).await,
            _ => match client.get("/").send().await {
                Ok(r) => r.status().is_success() && r.bytes().await.is_ok(),
                Err(_) => false,
            },
        };
        *l = t.elapsed();
        assert!(ok, "scenario 1: every call answered (contender {who})");
    }
    lat
}

/// `rounds` rounds of the three contenders, every caller (one per pair of connections)
/// making each turn at once, joined in this task (see [`interleave`]).
async fn mixed(
    conns: &mut [(Bare, Bare)],
    client: &baton_async_std::Client,
    rounds: usize,
) -> Interleaved {
    let mut m = Interleaved::new(3, rounds, conns.len());
    for round in 0..rounds {
        for who in order(round, 3) {
            let t = Instant::now();
            let turns = conns.iter_mut().map(|c| caller_turn(c, client, who));
            let lat = futures_util::future::join_all(turns).await;
            m.record(who, t.elapsed(), lat.into_iter().flatten());
        }
    }
    m
}

/// One runtime's rows: `block_on` is async-std's or smol's.
fn async_runtime(
    name: &str,
    block_on: fn(Pin<Box<dyn Future<Output = ()> + '_>>),
    scale: Scale,
    rows: &mut Vec<Row>,
    charts: &mut Charts,
) {
    let p = provider(Behaviour::ok());
    let url = format!("{}/", p.url());
    let addr = p.addr();
    let client = baton_async_std::Client::new(crate::endpoints(std::slice::from_ref(&url)))
        .expect("baton-async-std client");
    let mut out: Vec<(String, Interleaved)> = Vec::new();
    block_on(Box::pin(async {
        for (n, calls) in [(1, scale.healthy_calls), (8, scale.healthy_calls_8)] {
            let mut conns = Vec::new();
            for _ in 0..n {
                conns.push((Bare::connect(addr).await, Bare::connect(addr).await));
            }
            let rounds = calls * scale.reps / n / TURN;
            mixed(&mut conns, &client, rounds / 10 + 1).await;
            let m = mixed(&mut conns, &client, rounds).await;
            out.push((
                format!("{n} task(s), {} GETs each, interleaved", rounds * n * TURN),
                m,
            ));
        }
    }));
    for (setup, m) in out {
        let names = [
            &*format!("bare hyper on {name}, same request bytes"),
            &*format!("bare hyper on {name}, plain request"),
            &*format!("baton-async-std on {name}"),
        ];
        push_rows(rows, charts, names, &setup, &m);
    }
}

/// baton-async-std against bare hyper, on async-std and on smol.
pub(crate) fn async_std_and_smol(scale: Scale, rows: &mut Vec<Row>, charts: &mut Charts) {
    async_runtime(
        "async-std",
        |f| async_std::task::block_on(f),
        scale,
        rows,
        charts,
    );
    async_runtime("smol", |f| smol::block_on(f), scale, rows, charts);
}
