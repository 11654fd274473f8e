#![allow(missing_docs)] // criterion_group! generates undocumented items
//! The healthy path: three endpoints, a call is created, its first attempt is answered
//! 200, the call is done. Consecutive breaker rule (the default). Measured with the retry
//! budget on (the default: one deposit per call) and off. Also counts heap allocations per
//! call with a counting global allocator.
//!
//! Run: `cargo bench -p baton-core --bench healthy_path`

use std::alloc::System;
use std::sync::Arc;
use std::time::Instant;

use baton_core::{Call, Endpoint, Engine, Head, Policy, RequestInfo};
use criterion::{criterion_group, criterion_main, Criterion};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn engine(budget: bool) -> Arc<Engine> {
    let mut b = Policy::builder()
        .endpoint(Endpoint::new("a", "https://a.example/"))
        .endpoint(Endpoint::new("b", "https://b.example/"))
        .endpoint(Endpoint::new("c", "https://c.example/"));
    if !budget {
        b = b.budget(None);
    }
    // As the adapters build it: seeded once, each thread's calls on their own sequence.
    Arc::new(Engine::with_entropy(b.build().unwrap(), 0x5EED))
}

#[path = "../examples/common/healthy_call.rs"]
mod common;

/// One healthy call (the examples' `healthy_call`); it must be answered.
fn one_call(engine: &Engine, info: &RequestInfo<'_>, t: Instant) {
    assert!(
        common::healthy_call(engine, info, t),
        "the call is answered"
    );
}

fn bench(c: &mut Criterion) {
    let uri: http::Uri = "/".parse().unwrap();
    let headers = http::HeaderMap::new();
    let info = RequestInfo {
        method: &http::Method::GET,
        uri: &uri,
        headers: &headers,
    };
    let t0 = Instant::now();
    println!(
        "size_of::<Call<'_, Head>>() = {} bytes, size_of::<Report>() = {} bytes",
        std::mem::size_of::<Call<'_, Head>>(),
        std::mem::size_of::<baton_core::Report>()
    );
    for budget in [false, true] {
        let e = engine(budget);
        // Warm up, then count allocations over many calls.
        for _ in 0..100 {
            one_call(&e, &info, t0);
        }
        const N: usize = 100_000;
        let region = Region::new(GLOBAL);
        for _ in 0..N {
            one_call(&e, &info, t0);
        }
        let stats = region.change();
        println!(
            "healthy path (budget {}): {:.3} allocations per call, {:.1} bytes per call",
            if budget { "on" } else { "off" },
            stats.allocations as f64 / N as f64,
            stats.bytes_allocated as f64 / N as f64
        );
        c.bench_function(
            &format!(
                "healthy_call_3_endpoints_budget_{}",
                if budget { "on" } else { "off" }
            ),
            |b| b.iter(|| one_call(&e, &info, t0)),
        );
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
