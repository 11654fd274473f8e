//! Retry budget (SPEC 2.7), hedging (2.8) and outbound rate limiting (2.9).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use baton_core::sim::{Script, Sim, SimRun};
use baton_core::strategies::scenario;
use baton_core::*;
use http::Method;
use proptest::prelude::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn policy(ids: &[&str]) -> PolicyBuilder {
    let mut b = Policy::builder().jitter(Jitter::None).seed(11);
    for id in ids {
        b = b.endpoint(Endpoint::new(*id, format!("https://{id}.example/")));
    }
    b
}

/// Calls spaced `gap` apart against endpoints that all answer 503; returns attempts per
/// call and the start time and kind of every attempt.
fn outage(
    budget: Option<Budget>,
    calls: usize,
    gap: Duration,
) -> (f64, Vec<(Instant, AttemptKind)>) {
    let starts = Arc::new(Mutex::new(Vec::new()));
    let s2 = starts.clone();
    let mut sim = Sim::new(
        policy(&["a", "b", "c"])
            .budget(budget)
            .on_event(move |e| {
                if let EventKind::AttemptStarted { kind, .. } = e.kind {
                    s2.lock().unwrap().push((e.at, kind));
                }
            })
            .build()
            .unwrap(),
        Instant::now(),
    );
    for id in ["a", "b", "c"] {
        sim.script(id, Script::status(503));
    }
    let mut attempts = 0;
    for _ in 0..calls {
        attempts += sim
            .run(Method::GET, CallOptions::default())
            .report
            .attempts
            .len();
        sim.advance(gap);
    }
    let starts = starts.lock().unwrap().clone();
    (attempts as f64 / calls as f64, starts)
}

#[test]
fn total_outage_without_budget_amplifies_three_times() {
    let (per_call, _) = outage(None, 2_000, ms(10));
    assert_eq!(per_call, 3.0);
}

#[test]
fn budget_caps_amplification_under_total_outage_to_ratio_plus_floor() {
    // 100 calls per second: the reserve of 10 per second adds 0.1 per call.
    let (per_call, _) = outage(Some(Budget::default()), 3_000, ms(10));
    assert!(per_call <= 1.2 + 0.1 + 0.02, "{per_call} attempts per call");
    assert!(
        per_call >= 1.2,
        "{per_call}: the budget should still allow its share"
    );
}

#[test]
fn budget_refusal_ends_the_call_with_what_it_has_and_an_event() {
    let mut sim = Sim::new(
        policy(&["a", "b"])
            .budget(Some(Budget {
                ratio: 0.0,
                window: Duration::from_secs(10),
                min_per_sec: 0.0,
            }))
            .build()
            .unwrap(),
        Instant::now(),
    );
    sim.script("a", Script::status(503));
    let run = sim.run(Method::GET, CallOptions::default());
    assert_eq!(run.report.attempts.len(), 1);
    assert_eq!(run.report.stop_reason, StopReason::Budget);
    assert_eq!(run.events_named("BudgetRefused").len(), 1);
    // What it has: the 503.
    assert_eq!(
        run.report.status(),
        Some(http::StatusCode::SERVICE_UNAVAILABLE)
    );
}

#[test]
fn failover_after_undelivered_failure_is_free() {
    let mut sim = Sim::new(
        policy(&["a", "b"])
            .budget(Some(Budget {
                ratio: 0.0,
                window: Duration::from_secs(10),
                min_per_sec: 0.0,
            }))
            .build()
            .unwrap(),
        Instant::now(),
    );
    sim.script("a", Script::refuse());
    let run = sim.run(Method::POST, CallOptions::default());
    assert_eq!(run.endpoints_attempted(), ["a", "b"]);
    assert_eq!(run.report.status(), Some(http::StatusCode::OK));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    /// The budget is never exceeded over any window: extra attempts in any 9 s span are at
    /// most the reserve plus `ratio` x first attempts in the 10 s around it.
    #[test]
    fn budget_is_never_exceeded_over_any_window(gap_ms in 1u64..200, calls in 50usize..600, ratio in 0.0f64..0.5, floor in 0.0f64..5.0) {
        let b = Budget { ratio, window: Duration::from_secs(10), min_per_sec: floor };
        let (_, starts) = outage(Some(b), calls, ms(gap_ms));
        for (i, (t, kind)) in starts.iter().enumerate() {
            if *kind == AttemptKind::First {
                continue;
            }
            let extras = starts[..=i]
                .iter()
                .filter(|(s, k)| *k != AttemptKind::First && *t - *s < Duration::from_secs(9))
                .count() as f64;
            let firsts = starts[..=i]
                .iter()
                .filter(|(s, k)| *k == AttemptKind::First && *t - *s <= Duration::from_secs(10))
                .count() as f64;
            let allowed = floor * 10.0 + ratio * firsts + 1e-9;
            prop_assert!(extras <= allowed, "at attempt {i}: {extras} extras > {allowed}");
        }
    }
}

// ---------------------------------------------------------------- hedging

fn hedged(after: u64, max: u32) -> PolicyBuilder {
    policy(&["a", "b", "c"]).hedge(Some(Hedge {
        after: ms(after),
        max_in_flight: max,
    }))
}

#[test]
fn hedges_go_to_distinct_endpoints_within_max_in_flight() {
    let mut sim = Sim::new(hedged(50, 2).build().unwrap(), Instant::now());
    for id in ["a", "b", "c"] {
        sim.script(id, Script::status(200).after(ms(1_000)));
    }
    let run = sim.run(Method::GET, CallOptions::default());
    assert_eq!(run.max_in_flight, 2);
    let mut ids = run.endpoints_attempted();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), run.report.attempts.len(), "distinct endpoints");
    assert_eq!(run.elapsed, ms(1_000));
}

#[test]
fn three_in_flight_when_allowed() {
    let mut sim = Sim::new(hedged(50, 3).build().unwrap(), Instant::now());
    for id in ["a", "b", "c"] {
        sim.script(id, Script::status(200).after(ms(1_000)));
    }
    let run = sim.run(Method::GET, CallOptions::default());
    assert_eq!(run.max_in_flight, 3);
    assert_eq!(run.elapsed, ms(1_000));
}

#[test]
fn first_usable_answer_wins_and_the_others_are_cancelled() {
    let mut sim = Sim::new(hedged(100, 2).build().unwrap(), Instant::now());
    sim.script("a", Script::status(200).after(ms(500)))
        .script("b", Script::status(200).after(ms(50)));
    let run = sim.run(Method::GET, CallOptions::default());
    assert_eq!(run.report.endpoint_id(), Some("b"));
    assert_eq!(run.elapsed, ms(150));
    assert_eq!(run.events_named("AttemptCancelled").len(), 1);
}

#[test]
fn triggering_response_while_another_is_in_flight_starts_the_next_at_once() {
    let mut sim = Sim::new(hedged(100, 2).build().unwrap(), Instant::now());
    sim.script("a", Script::status(200).after(ms(1_000)))
        .script("b", Script::status(503).after(ms(10)))
        .script("c", Script::status(200).after(ms(10)));
    let run = sim.run(Method::GET, CallOptions::default());
    assert_eq!(run.endpoints_attempted(), ["a", "b", "c"]);
    // b's 503 at 110 ms starts c at once; c answers at 120 ms.
    assert_eq!(run.elapsed, ms(120));
    assert_eq!(run.report.endpoint_id(), Some("c"));
}

#[test]
fn hedged_call_never_returns_a_later_worse_answer() {
    let mut sim = Sim::new(hedged(10, 2).build().unwrap(), Instant::now());
    sim.script("a", Script::status(200).after(ms(100)))
        .script("b", Script::status(503).after(ms(200)));
    let run = sim.run(Method::GET, CallOptions::default());
    assert_eq!(run.report.status(), Some(http::StatusCode::OK));
    assert_eq!(run.report.endpoint_id(), Some("a"));
}

#[test]
fn hedges_spend_budget_and_a_refused_hedge_does_not_start() {
    let mut sim = Sim::new(
        hedged(10, 2)
            .budget(Some(Budget {
                ratio: 0.0,
                window: Duration::from_secs(10),
                min_per_sec: 0.0,
            }))
            .build()
            .unwrap(),
        Instant::now(),
    );
    sim.script("a", Script::status(200).after(ms(100)));
    let run = sim.run(Method::GET, CallOptions::default());
    assert_eq!(run.max_in_flight, 1);
    assert_eq!(run.events_named("BudgetRefused").len(), 1);
    assert_eq!(run.report.status(), Some(http::StatusCode::OK));
}

/// A hedge is a later attempt: with less than `MIN_ATTEMPT_TIME` before the deadline it
/// does not start (it would spend a budget and a limiter token on an attempt the deadline
/// cuts before a provider could answer).
#[test]
fn no_hedge_starts_in_the_deadlines_last_moments() {
    let mut sim = Sim::new(hedged(197, 2).build().unwrap(), Instant::now());
    sim.script("a", Script::status(200).after(ms(1_000)))
        .script("b", Script::status(200).after(ms(1)));
    let deadline = CallOptions {
        deadline: Some(ms(200)),
        ..CallOptions::default()
    };
    let run = sim.run(Method::GET, deadline);
    assert_eq!(run.endpoints_attempted(), ["a"]);
    assert_eq!(run.report.stop_reason, StopReason::Deadline);
    // With the time a later attempt needs, the hedge goes.
    let mut sim = Sim::new(hedged(190, 2).build().unwrap(), Instant::now());
    sim.script("a", Script::status(200).after(ms(1_000)))
        .script("b", Script::status(200).after(ms(1)));
    let deadline = CallOptions {
        deadline: Some(ms(200)),
        ..CallOptions::default()
    };
    let run = sim.run(Method::GET, deadline);
    assert_eq!(run.endpoints_attempted(), ["a", "b"]);
    assert_eq!(run.report.endpoint_id(), Some("b"));
}

/// Attempts the deadline cuts finish with it, whether their own clipped timer fired or
/// another attempt's end found the deadline passed: one `AttemptFinished` each (and so
/// one duration sample), never a bare cancel.
#[test]
fn every_attempt_the_deadline_cuts_finishes_with_the_deadline() {
    let mut sim = Sim::new(hedged(50, 2).build().unwrap(), Instant::now());
    sim.script("a", Script::status(200).after(ms(1_000)))
        .script("b", Script::status(200).after(ms(1_000)));
    let deadline = CallOptions {
        deadline: Some(ms(200)),
        ..CallOptions::default()
    };
    let run = sim.run(Method::GET, deadline);
    assert_eq!(run.endpoints_attempted(), ["a", "b"]);
    assert_eq!(run.report.stop_reason, StopReason::Deadline);
    let finished = run.events_named("AttemptFinished");
    assert_eq!(finished.len(), 2, "{finished:?}");
    assert!(
        finished.iter().all(|e| e.text.contains("Deadline")),
        "{finished:?}"
    );
    assert!(run.events_named("AttemptCancelled").is_empty());
}

fn hedged_limited(limiter: Limiter, scope: LimitScope, on_limit: OnLimit) -> PolicyBuilder {
    hedged(50, 2).budget(None).rate_limit(Some(RateLimit {
        limiter,
        scope,
        on_limit,
    }))
}

/// SPEC 2.9 for a hedge: a per-endpoint limiter that says "not before" to the hedge's
/// endpoint moves the hedge to another endpoint its limiter admits now.
#[test]
fn a_hedge_refused_by_its_endpoints_limiter_goes_to_another_endpoint() {
    let bucket = Limiter::TokenBucket {
        capacity: 1,
        per_second: 1.0,
    };
    let policy = hedged_limited(bucket, LimitScope::Endpoint, OnLimit::Wait);
    let mut sim = Sim::new(policy.build().unwrap(), Instant::now());
    sim.script("a", Script::status(200).after(ms(1_000)))
        .script("b", Script::status(200).after(ms(10)))
        .script("c", Script::status(200).after(ms(10)));
    // A call that prefers b spends b's one token.
    let prefer_b = CallOptions {
        prefer: Some("b".into()),
        ..CallOptions::default()
    };
    assert_eq!(sim.run(Method::GET, prefer_b).endpoints_attempted(), ["b"]);
    // a is slow: the hedge at 50 ms finds b's bucket empty and goes to c.
    let run = sim.run(Method::GET, CallOptions::default());
    assert_eq!(run.endpoints_attempted(), ["a", "c"]);
    assert_eq!(run.report.endpoint_id(), Some("c"));
    assert_eq!(run.elapsed, ms(60));
    let limited = run.events_named("RateLimited");
    assert_eq!(limited.len(), 1);
    assert!(
        limited[0].text.contains("waiting: false"),
        "{}",
        limited[0].text
    );
}

/// SPEC 2.9 for a hedge: a limiter that says "not before T" with no other endpoint to go
/// to makes the hedge wait until T (the attempt in flight goes on), or, failing fast, the
/// hedge does not start.
#[test]
fn a_hedge_refused_by_the_clients_limiter_waits_for_its_token_or_fails_fast() {
    let bucket = Limiter::TokenBucket {
        capacity: 1,
        per_second: 10.0,
    };
    let policy = hedged_limited(bucket, LimitScope::Client, OnLimit::Wait);
    let mut sim = Sim::new(policy.build().unwrap(), Instant::now());
    sim.script("a", Script::status(200).after(ms(1_000)))
        .script("b", Script::status(200).after(ms(10)));
    // The first attempt took the token at 0; the next is back at 100 ms.
    let run = sim.run(Method::GET, CallOptions::default());
    assert_eq!(run.endpoints_attempted(), ["a", "b"]);
    assert_eq!(run.report.endpoint_id(), Some("b"));
    assert_eq!(run.elapsed, ms(110));
    let limited = run.events_named("RateLimited");
    assert!(
        limited[0].text.contains("waiting: true"),
        "{}",
        limited[0].text
    );

    // A token back too close to the deadline for a later attempt: the hedge does not wait.
    let policy = hedged_limited(bucket, LimitScope::Client, OnLimit::Wait);
    let mut sim = Sim::new(policy.build().unwrap(), Instant::now());
    sim.script("a", Script::status(200).after(ms(1_000)));
    let deadline = CallOptions {
        deadline: Some(ms(103)),
        ..CallOptions::default()
    };
    let run = sim.run(Method::GET, deadline);
    assert_eq!(run.endpoints_attempted(), ["a"]);
    let limited = run.events_named("RateLimited");
    assert!(
        limited[0].text.contains("waiting: false"),
        "{}",
        limited[0].text
    );

    let policy = hedged_limited(bucket, LimitScope::Client, OnLimit::FailFast);
    let mut sim = Sim::new(policy.build().unwrap(), Instant::now());
    sim.script("a", Script::status(200).after(ms(1_000)))
        .script("b", Script::status(200).after(ms(10)));
    let run = sim.run(Method::GET, CallOptions::default());
    assert_eq!(run.endpoints_attempted(), ["a"]);
    assert_eq!(run.report.stop_reason, StopReason::Answered);
    assert_eq!(run.elapsed, ms(1_000));
    let limited = run.events_named("RateLimited");
    assert!(
        limited[0].text.contains("waiting: false"),
        "{}",
        limited[0].text
    );
}

#[test]
fn explicit_opt_in_hedges_a_post_with_failover_always_but_never_a_keyed_one() {
    let mut sim = Sim::new(hedged(10, 2).build().unwrap(), Instant::now());
    sim.script("a", Script::status(200).after(ms(100)));
    let opt_in = CallOptions {
        hedge: true,
        failover: Some(Permission::Always),
        retry: Some(Permission::Always),
        ..CallOptions::default()
    };
    assert_eq!(sim.run(Method::POST, opt_in.clone()).max_in_flight, 2);
    let keyed = CallOptions {
        idempotency_key: Some("k".into()),
        ..opt_in
    };
    assert_eq!(sim.run(Method::POST, keyed).max_in_flight, 1);
}

/// Simulated latency with one endpoint answering 10 % of calls after 1 s.
fn tail(hedge: bool) -> (Duration, f64) {
    let mut b = policy(&["a", "b"]).budget(None);
    if hedge {
        b = b.hedge(Some(Hedge::after(ms(100))));
    }
    let mut sim = Sim::new(b.build().unwrap(), Instant::now());
    let mut steps = vec![Script::status(200).after(ms(1_000))];
    steps.extend((0..9).map(|_| Script::status(200).after(ms(20))));
    let script = steps.into_iter().reduce(Script::then).unwrap().cycle();
    sim.script("a", script)
        .script("b", Script::status(200).after(ms(30)));
    let mut latencies = Vec::new();
    let mut attempts = 0;
    for _ in 0..1_000 {
        let run: SimRun = sim.run(Method::GET, CallOptions::default());
        latencies.push(run.elapsed);
        attempts += run.report.attempts.len();
        sim.advance(ms(50));
    }
    latencies.sort();
    (latencies[989], attempts as f64 / 1_000.0 - 1.0)
}

#[test]
fn hedging_cuts_p99_to_hedge_after_plus_backup_latency_with_at_most_ten_percent_extra() {
    let (p99_off, extra_off) = tail(false);
    let (p99_on, extra_on) = tail(true);
    assert_eq!(p99_off, ms(1_000));
    assert_eq!(extra_off, 0.0);
    assert!(p99_on <= ms(100 + 30), "p99 with hedging {p99_on:?}");
    assert!(extra_on <= 0.10 + 1e-9, "extra attempts {extra_on}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1_000, failure_persistence: None, ..ProptestConfig::default() })]

    /// Invariant 12 and the in-flight bound: hedging only for safe methods (or explicit
    /// opt-in) whose failover is Always and that carry no key; never more than
    /// `max_in_flight` attempts at once.
    #[test]
    fn hedging_only_for_eligible_calls_and_within_max_in_flight(mut s in scenario(), after in 0u64..500, max in 2u32..4, opt_in in any::<bool>()) {
        s.settings.hedge = Some(Hedge { after: ms(after), max_in_flight: max });
        s.options.hedge = opt_in;
        let mut sim = Sim::new(s.policy(), Instant::now());
        for (id, script) in &s.scripts {
            sim.script(id, script.clone());
        }
        let run = sim.run_request(s.request(), s.options.clone());
        prop_assert!(run.max_in_flight as u32 <= max);
        if run.max_in_flight > 1 {
            let failover = if s.options.deny { Permission::Never } else {
                s.options.failover.unwrap_or(if is_safe_method(&s.method) { Permission::Always } else { Permission::IfUndelivered })
            };
            prop_assert!(is_safe_method(&s.method) || opt_in);
            prop_assert!(s.options.idempotency_key.is_none());
            prop_assert_eq!(failover, Permission::Always);
        }
    }
}

// ---------------------------------------------------------------- rate limiting

fn limited(limiter: Limiter, scope: LimitScope, on_limit: OnLimit) -> PolicyBuilder {
    policy(&["a", "b"]).budget(None).rate_limit(Some(RateLimit {
        limiter,
        scope,
        on_limit,
    }))
}

#[test]
fn client_limiter_makes_calls_wait_until_a_token_is_back() {
    let mut sim = Sim::new(
        limited(
            Limiter::TokenBucket {
                capacity: 1,
                per_second: 10.0,
            },
            LimitScope::Client,
            OnLimit::Wait,
        )
        .build()
        .unwrap(),
        Instant::now(),
    );
    let first = sim.run(Method::GET, CallOptions::default());
    assert_eq!(first.elapsed, Duration::ZERO);
    let second = sim.run(Method::GET, CallOptions::default());
    assert_eq!(second.elapsed, ms(100));
    assert!(second.events_named("RateLimited")[0]
        .text
        .contains("waiting: true"));
}

#[test]
fn fail_fast_limiter_ends_the_call_with_rate_limited() {
    let mut sim = Sim::new(
        limited(
            Limiter::SlidingWindow {
                limit: 1,
                window: Duration::from_secs(1),
            },
            LimitScope::Client,
            OnLimit::FailFast,
        )
        .build()
        .unwrap(),
        Instant::now(),
    );
    sim.run(Method::GET, CallOptions::default());
    let run = sim.run(Method::GET, CallOptions::default());
    assert!(run.report.attempts.is_empty());
    assert_eq!(run.report.stop_reason, StopReason::RateLimited);
    assert_eq!(
        run.report.into_error().unwrap().kind,
        ErrorKind::RateLimited
    );
}

#[test]
fn per_endpoint_limiter_moves_the_call_to_an_available_endpoint() {
    let mut sim = Sim::new(
        limited(
            Limiter::TokenBucket {
                capacity: 1,
                per_second: 1.0,
            },
            LimitScope::Endpoint,
            OnLimit::Wait,
        )
        .build()
        .unwrap(),
        Instant::now(),
    );
    assert_eq!(
        sim.run(Method::GET, CallOptions::default())
            .endpoints_attempted(),
        ["a"]
    );
    let run = sim.run(Method::GET, CallOptions::default());
    assert_eq!(run.endpoints_attempted(), ["b"]);
    assert_eq!(run.elapsed, Duration::ZERO);
    assert!(run.events_named("RateLimited")[0]
        .text
        .contains("waiting: false"));
}

#[test]
fn rate_limit_wait_is_bounded_by_the_deadline() {
    let mut sim = Sim::new(
        limited(
            Limiter::TokenBucket {
                capacity: 1,
                per_second: 1.0,
            },
            LimitScope::Client,
            OnLimit::Wait,
        )
        .build()
        .unwrap(),
        Instant::now(),
    );
    sim.run(Method::GET, CallOptions::default());
    let run = sim.run(
        Method::GET,
        CallOptions {
            deadline: Some(ms(200)),
            ..CallOptions::default()
        },
    );
    assert!(run.report.attempts.is_empty());
    assert_eq!(run.report.stop_reason, StopReason::Deadline);
    // The event says the call did not wait (SPEC 2.9: events say which).
    assert!(run.events_named("RateLimited")[0]
        .text
        .contains("waiting: false"));
}

#[test]
fn rate_limit_settings_are_validated() {
    let e = policy(&["a"])
        .rate_limit(Some(RateLimit {
            limiter: Limiter::TokenBucket {
                capacity: 0,
                per_second: 1.0,
            },
            scope: LimitScope::Client,
            on_limit: OnLimit::Wait,
        }))
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("rate_limit.limiter.capacity"), "{e}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

    /// A limiter never admits more than its rate: a token bucket admits at most
    /// `capacity + rate x span` in any span; a sliding window at most `limit` per window.
    #[test]
    fn limiter_never_admits_more_than_its_rate(
        bucket in any::<bool>(),
        capacity in 1u32..5,
        rate in 1.0f64..50.0,
        gaps in proptest::collection::vec(0u64..120, 20..200),
    ) {
        let limiter = if bucket {
            Limiter::TokenBucket { capacity, per_second: rate }
        } else {
            Limiter::SlidingWindow { limit: capacity, window: ms(500) }
        };
        let starts = Arc::new(Mutex::new(Vec::new()));
        let s2 = starts.clone();
        let mut sim = Sim::new(
            limited(limiter, LimitScope::Client, OnLimit::Wait)
                .on_event(move |e| if let EventKind::AttemptStarted { .. } = e.kind { s2.lock().unwrap().push(e.at) })
                .build()
                .unwrap(),
            Instant::now(),
        );
        for g in gaps {
            sim.run(Method::GET, CallOptions::default());
            sim.advance(ms(g));
        }
        let starts = starts.lock().unwrap().clone();
        for i in 0..starts.len() {
            for j in i..starts.len() {
                let span = starts[j] - starts[i];
                let n = (j - i + 1) as f64;
                if bucket {
                    prop_assert!(n <= f64::from(capacity) + rate * span.as_secs_f64() + 1e-6, "{n} in {span:?}");
                } else if span < ms(500) {
                    prop_assert!(n <= f64::from(capacity), "{n} in {span:?}");
                }
            }
        }
    }
}
