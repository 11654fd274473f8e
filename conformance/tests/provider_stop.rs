//! A provider that stops under load (issue: "fewer false alarms after a restart").
//!
//! Keyed POSTs run from 16 concurrent callers through one client against a primary and a
//! backup; 300 ms in, the primary stops (its port closes and every open connection is shut
//! down, like a crashed process). A call whose request never reached the primary and that
//! still ends "may have executed" is a false alarm: a provable "not sent" lost. The primary
//! records every request it read before the stop, so each such call can be checked.
//!
//! Asserted on every adapter: no keyed POST executed on both providers, and no call that
//! says "nothing was executed" was received by a provider (the dangerous direction).
//! Printed per path: the calls that ended "possibly executed", and how many of those the
//! stopped primary never read. Those are not wrong by the spec: the client wrote the
//! request before the connection died, so it cannot prove the provider did not read it;
//! only a request that provably never left (refused connect, a pooled connection known to
//! be closed, a request hyper hands back unsent) may be called undelivered.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use baton_core::{Endpoint, Policy, PolicyBuilder, Report};
use testkit::{Behaviour, Provider};

const CALLERS: usize = 16;
const RUN: Duration = Duration::from_millis(900);
const STOP_AT: Duration = Duration::from_millis(300);

fn policy(a: &Provider, b: &Provider) -> PolicyBuilder {
    Policy::builder()
        .endpoint(Endpoint::new("a", a.url()))
        .endpoint(Endpoint::new("b", b.url()))
        .configure(|s| {
            s.attempt_timeout = Duration::from_secs(2);
            s.connect_timeout = Duration::from_millis(500);
            s.budget = None;
        })
}

/// One call's result: its key, whether it errored, `may_have_executed`.
type Seen = Arc<Mutex<Vec<(String, bool, bool)>>>;

/// How a call ended: whether it was an error, and its report.
type Ended = (bool, Report);

fn record(seen: &Seen, key: String, (err, report): Ended) {
    seen.lock()
        .unwrap()
        .push((key, err, report.may_have_executed));
}

fn check(path: &str, a: &Provider, b: &Provider, seen: &Seen) {
    let seen = seen.lock().unwrap();
    // Requests per idempotency key at each provider, counted once.
    let counts = |p: &Provider| {
        let mut m = std::collections::HashMap::<String, usize>::new();
        for r in p.requests() {
            if let Some(k) = r.header("idempotency-key") {
                *m.entry(k.to_string()).or_default() += 1;
            }
        }
        m
    };
    let (ca, cb) = (counts(a), counts(b));
    let at = |p: &Provider, key: &str| {
        let m = if std::ptr::eq(p, a) { &ca } else { &cb };
        m.get(key).copied().unwrap_or(0)
    };
    let (mut maybe, mut unread) = (0, 0);
    for (key, err, may) in seen.iter() {
        let (in_a, in_b) = (at(a, key), at(b, key));
        assert!(
            in_a == 0 || in_b == 0,
            "{path}: {key} executed on both providers"
        );
        if !*may {
            assert_eq!(
                in_a + in_b,
                0,
                "{path}: {key} said 'not executed' but a provider received it"
            );
        }
        if !*err {
            // Answered, so a provider read it: the counts above see the key.
            assert!(
                in_a + in_b >= 1,
                "{path}: {key} was answered but no provider has it"
            );
        }
        if *err && *may {
            maybe += 1;
            if in_a + in_b == 0 {
                unread += 1;
            }
        }
    }
    println!(
        "{path}: {} calls, {maybe} ended possibly executed ({unread} of them never read by the \
         stopped primary)",
        seen.len()
    );
    assert!(
        seen.len() > 100,
        "{path}: the run made too few calls to mean anything"
    );
    assert!(
        !cb.is_empty(),
        "{path}: no call reached the backup: the stop was not hit"
    );
}

/// Runs `call` from the callers until the run ends, stopping `a` on the way.
fn drive(path: &str, a: &Provider, b: &Provider, call: impl Fn(String) -> Ended + Sync) {
    let seen: Seen = Arc::default();
    let next = AtomicUsize::new(0);
    let done = AtomicBool::new(false);
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..CALLERS {
            s.spawn(|| {
                while !done.load(Ordering::Relaxed) {
                    let key = format!("{path}-{}", next.fetch_add(1, Ordering::Relaxed));
                    let r = call(key.clone());
                    record(&seen, key, r);
                }
            });
        }
        std::thread::sleep(STOP_AT);
        a.set_behaviour(Behaviour::refuse());
        std::thread::sleep(RUN.saturating_sub(t0.elapsed()));
        done.store(true, Ordering::Relaxed);
    });
    check(path, a, b, &seen);
}

fn providers() -> (Provider, Provider) {
    (
        Provider::start(Behaviour::ok().delay(Duration::from_millis(2))),
        Provider::start(Behaviour::ok()),
    )
}

#[test]
fn tokio_keeps_not_sent_provable_when_a_provider_stops() {
    let (a, b) = providers();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let client = {
        let _g = rt.enter();
        baton_tokio::Client::new(policy(&a, &b)).unwrap()
    };
    drive("tokio", &a, &b, |key| {
        rt.block_on(async {
            match client.post("/").idempotency_key(key).body("x").send().await {
                Ok(r) => (false, r.report().clone()),
                Err(e) => (true, e.report().clone()),
            }
        })
    });
}

#[test]
fn blocking_keeps_not_sent_provable_when_a_provider_stops() {
    let (a, b) = providers();
    let client = baton_blocking::Client::builder(policy(&a, &b))
        .build()
        .unwrap();
    drive("blocking", &a, &b, |key| {
        match client.post("/").idempotency_key(key).send("x") {
            Ok(r) => (
                false,
                baton_blocking::ResponseExt::report(&r).cloned().unwrap(),
            ),
            Err(e) => (true, e.report().clone()),
        }
    });
}

#[test]
fn async_std_keeps_not_sent_provable_when_a_provider_stops() {
    let (a, b) = providers();
    let client = baton_async_std::Client::new(policy(&a, &b)).unwrap();
    drive("async-std", &a, &b, |key| {
        async_std::task::block_on(async {
            match client.post("/").idempotency_key(key).body("x").send().await {
                Ok(r) => (false, r.report().clone()),
                Err(e) => (true, e.report().clone()),
            }
        })
    });
}
