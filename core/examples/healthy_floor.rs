//! The floor under a healthy call: the work any engine must do per call to give the same
//! result as [`Call`] on the healthy path, timed on this machine beside the real call.
//!
//! ```text
//! cargo run --release -p baton-core --example healthy_floor [N]
//! ```
//!
//! The floor does, per call, only what the result and the spec require and nothing of the
//! engine's own bookkeeping:
//!
//! - one clock read (an adapter reads the time of every call; scenario 5 of the bench
//!   binary does too);
//! - a per-call random seed from a per-thread counter (one atomic add on memory no other
//!   thread writes) and a 26-character request id drawn from it, two characters per
//!   look-up in a 2 KB table of every pair. `RequestId` looks up one character at a time
//!   in the 32-byte alphabet, which touches fewer cache lines in a real call; in this
//!   loop the table stays cached and is the faster way, so the floor keeps it;
//! - one read of the breaker state of each of the three endpoints (the order), and one of
//!   the first endpoint again when the attempt starts and when its answer is recorded;
//! - the result: a [`Report`] with the request id and one [`AttemptRecord`] (its endpoint
//!   id copied), the status and the response, handed out as [`Done::Answer`] and dropped.
//!
//! It then runs the real healthy call of `healthy_calls` (the same policy: three endpoints,
//! budget off, consecutive rule) with one clock read per call, interleaved in blocks, and
//! prints the median nanoseconds per call of each. The floor leaves out every choice the
//! engine makes (permissions, the gate, timeouts, the trigger), so no engine reaches it;
//! what it shows is how much of a call's time on this machine no design can remove.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use baton_core::{
    AttemptRecord, AttemptResult, Done, Endpoint, EndpointId, Engine, Head, Outcome, Policy,
    Report, RequestId, RequestInfo, StopReason,
};
use smallvec::smallvec;

const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// What the floor reads per call: the breaker flags and the endpoint ids.
struct Floor {
    calm: [AtomicBool; 3],
    ids: [EndpointId; 3],
    counter: AtomicU64,
    pairs: [[u8; 2]; 1024],
    /// A request id to move into each report (its 26 characters are drawn anew per call).
    id: RequestId,
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[inline(never)]
fn floor_call(f: &Floor) -> bool {
    let now = black_box(Instant::now());
    // Seed and request id.
    let n = f.counter.fetch_add(1, Ordering::Relaxed);
    let (a, b) = (mix(n), mix(n ^ 0x9E37_79B9_7F4A_7C15));
    let mut buf = [0u8; 26];
    for (k, word) in [a, b].into_iter().enumerate() {
        for j in 0..6 {
            let pair = f.pairs[((word >> (10 * j)) & 1023) as usize];
            buf[k * 12 + 2 * j..k * 12 + 2 * j + 2].copy_from_slice(&pair);
        }
    }
    buf[24..26].copy_from_slice(&f.pairs[((a >> 60) | ((b >> 60) << 4)) as usize]);
    black_box(&buf);
    // The order, the attempt's start and its record.
    let first = (0..3).find(|&i| f.calm[i].load(Ordering::Acquire));
    let Some(endpoint) = first else {
        return false;
    };
    let started = f.calm[endpoint].load(Ordering::Acquire);
    let response = black_box(Head::new(http::StatusCode::OK));
    let recorded = f.calm[endpoint].load(Ordering::Acquire);
    // The result (the answer's time is the call's one clock read, as in `engine_call`).
    let elapsed = black_box(now).saturating_duration_since(now);
    let report = Report {
        request_id: f.id.clone(),
        idempotency_key: None,
        attempts: smallvec![AttemptRecord {
            endpoint,
            endpoint_id: f.ids[endpoint].clone(),
            number: 1,
            result: AttemptResult::Response(response.status),
            elapsed,
            http_version: None,
            credential_refused: false,
        }],
        redirects: Vec::new(),
        elapsed,
        stop_reason: StopReason::Answered,
        may_have_executed: true,
        outcome: Outcome::Response {
            attempt: 1,
            endpoint,
            status: response.status,
            retained: false,
            classified_success: true,
        },
    };
    let result = Done::Answer { response, report };
    black_box(&result);
    started && recorded
}

#[path = "common/healthy_call.rs"]
mod common;

/// The healthy call of `healthy_calls`, with one clock read.
fn engine_call(engine: &Engine, info: &RequestInfo<'_>) -> bool {
    common::healthy_call(engine, info, Instant::now())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let n: u32 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(200_000);
    let mut pairs = [[0u8; 2]; 1024];
    for (i, p) in pairs.iter_mut().enumerate() {
        *p = [ALPHABET[i & 31], ALPHABET[i >> 5]];
    }
    let floor = Floor {
        calm: [
            AtomicBool::new(true),
            AtomicBool::new(true),
            AtomicBool::new(true),
        ],
        ids: ["a".into(), "b".into(), "c".into()],
        counter: AtomicU64::new(0),
        pairs,
        id: RequestId::parse("0123456789ABCDEFGHJKMNPQRS").expect("a valid id"),
    };
    let policy = Policy::builder()
        .endpoint(Endpoint::new("a", "https://a.example/"))
        .endpoint(Endpoint::new("b", "https://b.example/"))
        .endpoint(Endpoint::new("c", "https://c.example/"))
        .budget(None)
        .build()
        .expect("the policy builds");
    let engine = Engine::with_entropy(policy, 0x5EED);
    let (uri, headers) = (http::Uri::from_static("/"), http::HeaderMap::new());
    let info = RequestInfo {
        method: &http::Method::GET,
        uri: &uri,
        headers: &headers,
    };
    let block = |f: &dyn Fn() -> bool| {
        let start = Instant::now();
        let ok = (0..n).filter(|_| f()).count();
        assert_eq!(ok, n as usize, "every call is answered");
        start.elapsed()
    };
    let ns = |d: Duration| d.as_nanos() as f64 / f64::from(n);
    let (mut floors, mut calls) = (Vec::new(), Vec::new());
    for round in 0..11 {
        let f = ns(block(&|| floor_call(&floor)));
        let c = ns(block(&|| engine_call(&engine, &info)));
        if round > 0 {
            floors.push(f);
            calls.push(c);
        }
    }
    let (f, c) = (median(&mut floors), median(&mut calls));
    println!(
        "floor {f:.1} ns a call, engine {c:.1} ns a call (medians of 10 blocks of {n}); \
         the engine takes {:.2}x the floor",
        c / f
    );
}
