#![allow(missing_docs)] // criterion_group! generates undocumented items
//! `verify::Check` speed: 10,000 explored calls (every script of one and two faults for
//! each of the ten call variants, then seeded random sessions) on the default policy with
//! three endpoints, and on one with a permission function that lets every POST fail over
//! (so shrinking runs too). Goal: <= 2 s on one core. Also prints the distinct scripts
//! covered, once.
//!
//! Run: `cargo bench -p baton-core --bench verify`

use std::hint::black_box;
use std::time::Instant;

use baton_core::verify::Check;
use baton_core::{Endpoint, Permission, PermissionOverride, Policy, PolicyBuilder};
use criterion::{criterion_group, criterion_main, Criterion};

fn three() -> PolicyBuilder {
    Policy::builder()
        .endpoint(Endpoint::new("a", "https://a.example/"))
        .endpoint(Endpoint::new("b", "https://b.example/"))
        .endpoint(Endpoint::new("c", "https://c.example/"))
}

fn bench(c: &mut Criterion) {
    let safe = three().build().unwrap();
    let risky = three()
        .permission_fn(|_| PermissionOverride::both(Permission::Always))
        .build()
        .unwrap();
    for (name, policy) in [("default", &safe), ("unsafe", &risky)] {
        let f = Check::new().run(policy, Instant::now());
        println!(
            "verify/{name}: {} calls explored, {} systematic, {} distinct scripts, safe: {}",
            f.explored,
            f.systematic,
            f.scripts,
            f.is_safe()
        );
    }
    let mut group = c.benchmark_group("verify");
    group.sample_size(10);
    group.bench_function("10k calls, default policy", |b| {
        b.iter(|| black_box(Check::new().run(&safe, Instant::now())))
    });
    group.bench_function("10k calls, unsafe policy", |b| {
        b.iter(|| black_box(Check::new().run(&risky, Instant::now())))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
