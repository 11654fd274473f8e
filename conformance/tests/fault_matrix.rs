//! The fault matrix: every testkit fault x {GET, POST without key, POST with key} x {fault
//! at the first endpoint, at the second}, 20 randomized rounds each, on every adapter path
//! (tokio, blocking, async-std, smol, and the tower layer over hyper-util), against real
//! loopback providers.
//!
//! Each round starts three providers and one client, and sends two calls (the second
//! reuses the client's pool and health after the first met the fault). Randomized per
//! round: which of the three providers is the faulty one (the endpoint order), the healthy
//! providers' delays, the fault's delay, the leading failure when the fault is at the
//! second endpoint (refused, or a 429 that promises nothing was processed), each call's
//! deadline (300 ms to 1.5 s), and the policy's seed (jitter). Asserted for every call:
//!
//! - no provider received more requests of the call than the call made attempts there
//!   (no hidden re-send by an HTTP client);
//! - a POST without key was executed at most once, on at most one provider;
//! - a keyed POST was executed on at most one provider (repeats only within it), at most
//!   `pinned_attempts` (3) times; a GET at most once per attempt of its one round;
//! - the call returned by its deadline plus 100 ms.
//!
//! The same matrix runs over HTTP/2 (SPEC 9) on every path that speaks it (tokio,
//! async-std, smol, tower): every endpoint is testkit's HTTP/2 provider (h2c, prior
//! knowledge), and the faults are the protocol's own (`REFUSED_STREAM`, `GOAWAY` below and
//! at the stream, a reset after the whole request) beside a black hole, a delay past the
//! attempt timeout, a 503 and a refused port. A request counts as executed when the
//! provider processed it (its whole body arrived).
//!
//! The totals (calls, faults injected, duplicates found) are printed per path. Set
//! `FAULT_MATRIX_SEED` to replay a run, `FAULT_MATRIX_ROUNDS` to change the rounds.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use baton_core::{
    AttemptResult, Backoff, CallOptions, Endpoint, HttpVersion, Jitter, Policy, PolicyBuilder,
    Report,
};
use testkit::{Behaviour, H2Behaviour, H2Provider, Provider};

const ATTEMPT_TIMEOUT: Duration = Duration::from_millis(200);
const CONNECT_TIMEOUT: Duration = Duration::from_millis(150);
const BODY_TIMEOUT: Duration = Duration::from_millis(200);
const SLACK: Duration = Duration::from_millis(100);
const ROUNDS: usize = 20;
const WORKERS: usize = 24;
/// Default `pinned_attempts` (SPEC 8): what a keyed POST may spend at one provider.
const PINNED: usize = 3;

/// One path at a time: the matrix is timing-checked, and paths running side by side on two
/// cores would only measure each other.
static ONE_PATH: Mutex<()> = Mutex::new(());

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    Refuse,
    Dns,
    Reset,
    Close,
    BlackHole,
    Stall,
    HalfBody,
    DelayPastTimeout,
    Status503,
    RefusedStream,
    GoAwayBelow,
    GoAwayAt,
    StreamReset,
}

/// The HTTP/2 matrix's faults.
const H2_FAULTS: [Fault; 8] = [
    Fault::RefusedStream,
    Fault::GoAwayBelow,
    Fault::GoAwayAt,
    Fault::StreamReset,
    Fault::BlackHole,
    Fault::DelayPastTimeout,
    Fault::Status503,
    Fault::Refuse,
];

const FAULTS: [Fault; 9] = [
    Fault::Refuse,
    Fault::Dns,
    Fault::Reset,
    Fault::Close,
    Fault::BlackHole,
    Fault::Stall,
    Fault::HalfBody,
    Fault::DelayPastTimeout,
    Fault::Status503,
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Get,
    Post,
    KeyedPost,
}

const KINDS: [Kind; 3] = [Kind::Get, Kind::Post, Kind::KeyedPost];

/// A small deterministic generator (splitmix64), so a printed seed replays a run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn ms(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.below(hi - lo + 1))
    }
}

/// What one round plays.
#[derive(Debug, Clone, Copy)]
struct Job {
    fault: Fault,
    kind: Kind,
    second: bool,
    round: usize,
    seed: u64,
    h2: bool,
}

/// One endpoint's provider (or the unresolvable name).
enum Backend {
    Provider(Provider),
    H2(H2Provider),
    Dns,
}

impl Backend {
    fn url(&self) -> String {
        match self {
            Backend::Provider(p) => p.url(),
            Backend::H2(p) => p.url(),
            Backend::Dns => testkit::unresolvable_url(),
        }
    }
    fn count(&self, request_id: &str) -> usize {
        match self {
            Backend::Provider(p) => p.count_with_header("x-request-id", request_id),
            Backend::H2(p) => p.count_with_header("x-request-id", request_id),
            Backend::Dns => 0,
        }
    }
}

/// The provider of a faulty HTTP/2 endpoint.
fn faulty_h2(fault: Fault, rng: &mut Rng) -> Backend {
    let small = rng.ms(0, 40);
    let b = match fault {
        Fault::Refuse => return Backend::Provider(Provider::start(Behaviour::refuse())),
        Fault::RefusedStream => H2Behaviour::refuse_stream(),
        Fault::GoAwayBelow => H2Behaviour::go_away_below(),
        Fault::GoAwayAt => H2Behaviour::go_away_at(),
        Fault::StreamReset => H2Behaviour::reset_after_request(),
        Fault::BlackHole => H2Behaviour::black_hole(),
        // Its own delay, not the small one below (a behaviour's delay is set, not added).
        Fault::DelayPastTimeout => {
            let late = H2Behaviour::ok().delay(ATTEMPT_TIMEOUT + rng.ms(50, 300));
            return Backend::H2(H2Provider::start(late));
        }
        _ => H2Behaviour::status(503),
    };
    Backend::H2(H2Provider::start(b.delay(small)))
}

/// A healthy provider, answering after `delay`.
fn healthy(h2: bool, delay: Duration) -> Backend {
    match h2 {
        true => Backend::H2(H2Provider::start(H2Behaviour::ok().delay(delay))),
        false => Backend::Provider(Provider::start(Behaviour::ok().delay(delay))),
    }
}

fn faulty(fault: Fault, rng: &mut Rng) -> Backend {
    let small = rng.ms(0, 40);
    let b = match fault {
        Fault::Refuse => Behaviour::refuse(),
        Fault::Dns => return Backend::Dns,
        Fault::Reset => Behaviour::reset().delay(small),
        Fault::Close => Behaviour::close().delay(small),
        Fault::BlackHole => Behaviour::black_hole(),
        Fault::Stall => Behaviour::ok().stall_after_headers().delay(small),
        Fault::HalfBody => Behaviour::status(200)
            .body("0123456789abcdefghijklmnopqrstuv")
            .close_after_half_body()
            .delay(small),
        Fault::DelayPastTimeout => Behaviour::ok().delay(ATTEMPT_TIMEOUT + rng.ms(50, 300)),
        Fault::Status503 => Behaviour::status(503).delay(small),
        Fault::RefusedStream | Fault::GoAwayBelow | Fault::GoAwayAt | Fault::StreamReset => {
            unreachable!("HTTP/2 faults run in the HTTP/2 matrix")
        }
    };
    Backend::Provider(Provider::start(b))
}

/// One call of a round.
struct CallPlan {
    method: http::Method,
    body: Option<String>,
    options: CallOptions,
    deadline: Duration,
}

/// What an adapter gives back for one call: its report and how long the call took (to the
/// response headers or the error).
type Sent = Result<(Report, Duration), String>;

/// One adapter path: sends a round's calls, in order, through one client.
type Sender<'a> = dyn Fn(PolicyBuilder, &[CallPlan]) -> Vec<Sent> + Sync + 'a;

#[derive(Default)]
struct Totals {
    calls: AtomicUsize,
    faults: AtomicUsize,
    duplicates: AtomicUsize,
    failures: Mutex<Vec<String>>,
}

fn run_round(job: Job, send: &Sender<'_>, totals: &Totals) {
    let mut rng = Rng(job.seed);
    // Positions 0..3 in priority order; the faulty provider at 0 (first) or 1 (second).
    let fault_at = usize::from(job.second);
    let leader_429 = rng.below(2) == 0;
    let mut backends = Vec::new();
    for pos in 0..3 {
        let b = if pos == fault_at && job.h2 {
            faulty_h2(job.fault, &mut rng)
        } else if pos == fault_at {
            faulty(job.fault, &mut rng)
        } else if pos == 0 {
            // The fault is at the second endpoint: the first fails in a way every call may
            // fail over from.
            // Over HTTP/2 the 429 comes from an h2 provider: an HTTP/1.1 one would refuse
            // the h2 preface with a 400 and the leader's "nothing done" would go untested.
            if leader_429 && job.h2 {
                Backend::H2(H2Provider::start(H2Behaviour::status(429)))
            } else if leader_429 {
                Backend::Provider(Provider::start(Behaviour::status(429)))
            } else {
                Backend::Provider(Provider::start(Behaviour::refuse()))
            }
        } else {
            healthy(job.h2, rng.ms(0, 30))
        };
        backends.push(b);
    }
    // Which of the three providers is the faulty one: a random endpoint naming and order
    // of ids, so ids never hint at roles.
    let mut ids = ["p0", "p1", "p2"];
    for i in (1..ids.len()).rev() {
        ids.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let seed = rng.next();
    let mut policy = Policy::builder()
        .attempt_timeout(ATTEMPT_TIMEOUT)
        .connect_timeout(CONNECT_TIMEOUT)
        .configure(|s| {
            s.seed = Some(seed);
            if job.h2 {
                s.http_version = HttpVersion::Http2;
            }
            s.backoff = Backoff {
                initial: Duration::from_millis(10),
                multiplier: 2.0,
                max: Duration::from_millis(100),
                jitter: Jitter::Full,
            };
        });
    for (pos, b) in backends.iter().enumerate() {
        policy = policy.endpoint(Endpoint::new(ids[pos], b.url()));
    }
    let calls: Vec<CallPlan> = (0..2)
        .map(|n| {
            let deadline = rng.ms(300, 1500);
            let request_id = format!("fm-{:016x}-{n}", job.seed);
            let (method, body, key) = match job.kind {
                Kind::Get => (http::Method::GET, None, None),
                Kind::Post => (http::Method::POST, Some("amount=1".to_string()), None),
                Kind::KeyedPost => (
                    http::Method::POST,
                    Some("amount=1".to_string()),
                    Some(format!("key-{:016x}-{n}", job.seed)),
                ),
            };
            CallPlan {
                method,
                body,
                options: CallOptions {
                    deadline: Some(deadline),
                    request_id: Some(request_id),
                    idempotency_key: key,
                    ..CallOptions::default()
                },
                deadline,
            }
        })
        .collect();
    let results = send(policy, &calls);
    // Let providers finish reading requests already on the wire.
    std::thread::sleep(Duration::from_millis(50));
    let what = format!(
        "{:?} {:?} at the {} endpoint, round {} (seed {:#x})",
        job.fault,
        job.kind,
        if job.second { "second" } else { "first" },
        job.round,
        job.seed
    );
    let mut bad = Vec::new();
    if results.len() != calls.len() {
        bad.push(format!(
            "{what}: {} calls, {} results",
            calls.len(),
            results.len()
        ));
    }
    for (n, (plan, sent)) in calls.iter().zip(results).enumerate() {
        totals.calls.fetch_add(1, Ordering::Relaxed);
        let (report, took) = match sent {
            Ok(x) => x,
            Err(e) => {
                bad.push(format!("{what}, call {}: {e}", n + 1));
                continue;
            }
        };
        let rid = plan.options.request_id.as_deref().unwrap_or_default();
        let mut attempts_at: BTreeMap<&str, usize> = BTreeMap::new();
        for a in &report.attempts {
            *attempts_at.entry(&a.endpoint_id).or_default() += 1;
            // An answer proves its provider read the request: the counts below, made by
            // request id, must see it (or every count here could be zero and pass).
            let answered_at = ids.iter().position(|id| *id == &*a.endpoint_id);
            if let (AttemptResult::Response(_), Some(pos)) = (&a.result, answered_at) {
                if backends[pos].count(rid) == 0 {
                    bad.push(format!(
                        "{what}, call {}: {} answered, but no request with its id was recorded there",
                        n + 1,
                        a.endpoint_id
                    ));
                }
            }
        }
        if attempts_at.contains_key(ids[fault_at]) {
            totals.faults.fetch_add(1, Ordering::Relaxed);
        }
        // Executions: requests received, except at a leader that answers 429 (a provider's
        // promise that nothing was processed).
        let mut executed: Vec<(usize, usize)> = Vec::new();
        for (pos, b) in backends.iter().enumerate() {
            let got = b.count(rid);
            let attempts = attempts_at.get(ids[pos]).copied().unwrap_or(0);
            if got > attempts {
                bad.push(format!(
                    "{what}, call {}: {} received {got} requests for {attempts} attempts",
                    n + 1,
                    ids[pos]
                ));
                totals.duplicates.fetch_add(1, Ordering::Relaxed);
            }
            let not_processed = pos == 0 && fault_at == 1 && leader_429;
            if got > 0 && !not_processed {
                executed.push((pos, got));
            }
        }
        let total: usize = executed.iter().map(|e| e.1).sum();
        let providers = executed.len();
        let over = match job.kind {
            Kind::Post => (total > 1 || providers > 1).then(|| {
                format!("POST without key executed {total} times on {providers} providers")
            }),
            Kind::KeyedPost => (providers > 1 || total > PINNED)
                .then(|| format!("keyed POST executed {total} times on {providers} providers")),
            Kind::Get => (total > 3).then(|| format!("GET executed {total} times in one round")),
        };
        if let Some(o) = over {
            bad.push(format!(
                "{what}, call {}: {o}; attempts {:?}",
                n + 1,
                report.attempts
            ));
            totals.duplicates.fetch_add(1, Ordering::Relaxed);
        }
        if took > plan.deadline + SLACK {
            bad.push(format!(
                "{what}, call {}: returned after {took:?}, deadline {:?} + {SLACK:?}",
                n + 1,
                plan.deadline
            ));
        }
    }
    if !bad.is_empty() {
        totals.failures.lock().unwrap().extend(bad);
    }
}

fn base_seed() -> u64 {
    match std::env::var("FAULT_MATRIX_SEED") {
        Ok(s) => {
            let s = s.trim_start_matches("0x");
            u64::from_str_radix(s, 16).expect("FAULT_MATRIX_SEED: hex")
        }
        Err(_) => SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64),
    }
}

fn run_matrix(path: &str, send: &Sender<'_>) {
    run_faults(path, &FAULTS, false, send);
}

/// The matrix over HTTP/2 (see the module docs).
fn run_h2_matrix(path: &str, send: &Sender<'_>) {
    run_faults(&format!("{path} over HTTP/2"), &H2_FAULTS, true, send);
}

fn run_faults(path: &str, faults: &[Fault], h2: bool, send: &Sender<'_>) {
    let _one = ONE_PATH.lock().unwrap_or_else(|e| e.into_inner());
    let rounds = std::env::var("FAULT_MATRIX_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(ROUNDS);
    let seed = base_seed();
    let mut rng = Rng(seed);
    let mut jobs = Vec::new();
    for &fault in faults {
        for kind in KINDS {
            for second in [false, true] {
                for round in 0..rounds {
                    jobs.push(Job {
                        fault,
                        kind,
                        second,
                        round,
                        seed: rng.next(),
                        h2,
                    });
                }
            }
        }
    }
    let started = Instant::now();
    let totals = Totals::default();
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..WORKERS {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(job) = jobs.get(i) else { break };
                run_round(*job, send, &totals);
            });
        }
    });
    let failures = totals.failures.into_inner().unwrap();
    println!(
        "fault matrix, {path}: {} faults x {} call kinds x 2 positions x {rounds} rounds = {} rounds, \
         {} calls, {} faults injected (calls that attempted the faulty endpoint), {} duplicates found, \
         {} violations, {:.1?} (seed {seed:#x})",
        faults.len(),
        KINDS.len(),
        jobs.len(),
        totals.calls.load(Ordering::Relaxed),
        totals.faults.load(Ordering::Relaxed),
        totals.duplicates.load(Ordering::Relaxed),
        failures.len(),
        started.elapsed()
    );
    assert!(
        totals.faults.load(Ordering::Relaxed) > 0,
        "fault matrix, {path}: no call attempted a faulty endpoint"
    );
    assert!(
        failures.is_empty(),
        "fault matrix, {path}: {} violations:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

// ----- the four paths -----

fn send_tokio(
    rt: &tokio::runtime::Runtime,
    policy: PolicyBuilder,
    calls: &[CallPlan],
) -> Vec<Sent> {
    rt.block_on(async {
        // Loopback http only: no root certificates to load (loading the platform's roots
        // costs ~90 ms per reqwest client in a debug build, and the matrix builds 1080).
        let client = match baton_tokio::Client::builder(policy)
            .configure_reqwest(|b| {
                b.tls_certs_only(Vec::<baton_tokio::reqwest::Certificate>::new())
            })
            .build()
        {
            Ok(c) => c,
            Err(e) => return vec![Err(format!("build: {e}"))],
        };
        let mut out = Vec::new();
        for c in calls {
            let mut req = client
                .request(c.method.clone(), "/")
                .options(c.options.clone());
            if let Some(b) = &c.body {
                req = req.body(b.clone());
            }
            let start = Instant::now();
            let r = req.send().await;
            let took = start.elapsed();
            out.push(Ok(match r {
                Ok(resp) => {
                    let report = resp.report().clone();
                    let _ = tokio::time::timeout(BODY_TIMEOUT, resp.bytes()).await;
                    (report, took)
                }
                Err(e) => (e.report().clone(), took),
            }));
        }
        out
    })
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn fault_matrix_tokio() {
    let rt = runtime();
    run_matrix("tokio", &|p, c| send_tokio(&rt, p, c));
}

#[test]
fn fault_matrix_over_http2() {
    let rt = runtime();
    run_h2_matrix("tokio", &|p, c| send_tokio(&rt, p, c));
    run_h2_matrix("async-std", &|p, c| {
        async_std::task::block_on(send_async_io(p, c))
    });
    run_h2_matrix("smol", &|p, c| smol::block_on(send_async_io(p, c)));
    run_h2_matrix("tower", &|p, c| send_tower(&rt, p, c));
}

fn send_blocking(policy: PolicyBuilder, calls: &[CallPlan]) -> Vec<Sent> {
    let config = ureq::Agent::config_builder()
        .timeout_recv_body(Some(BODY_TIMEOUT))
        .build();
    let client = match baton_blocking::Client::builder(policy)
        .config(config)
        .build()
    {
        Ok(c) => c,
        Err(e) => return vec![Err(format!("build: {e}"))],
    };
    calls
        .iter()
        .map(|c| {
            let req = client
                .request(c.method.clone(), "/")
                .options(c.options.clone());
            let start = Instant::now();
            let r = match &c.body {
                Some(b) => req.send(b.clone()),
                None => req.call(),
            };
            let took = start.elapsed();
            match r {
                Ok(mut resp) => {
                    use baton_blocking::ResponseExt;
                    let report = resp.report().cloned().ok_or("response without a report")?;
                    let _ = std::io::copy(&mut resp.body_mut().as_reader(), &mut std::io::sink());
                    Ok((report, took))
                }
                Err(e) => Ok((e.report().clone(), took)),
            }
        })
        .collect()
}

#[test]
fn fault_matrix_blocking() {
    run_matrix("blocking", &send_blocking);
}

async fn send_async_io(policy: PolicyBuilder, calls: &[CallPlan]) -> Vec<Sent> {
    let client = match baton_async_std::Client::builder(policy)
        .body_timeout(BODY_TIMEOUT)
        .build()
    {
        Ok(c) => c,
        Err(e) => return vec![Err(format!("build: {e}"))],
    };
    let mut out = Vec::new();
    for c in calls {
        let mut req = client
            .request(c.method.clone(), "/")
            .options(c.options.clone());
        if let Some(b) = &c.body {
            req = req.body(b.clone());
        }
        let start = Instant::now();
        let r = req.send().await;
        let took = start.elapsed();
        out.push(match r {
            Ok(resp) => {
                let report = resp.report().clone();
                let _ = resp.bytes().await;
                Ok((report, took))
            }
            Err(e) => Ok((e.report().clone(), took)),
        });
    }
    out
}

#[test]
fn fault_matrix_async_std() {
    run_matrix("async-std", &|p, c| {
        async_std::task::block_on(send_async_io(p, c))
    });
}

#[test]
fn fault_matrix_smol() {
    run_matrix("smol", &|p, c| smol::block_on(send_async_io(p, c)));
}

fn send_tower(
    rt: &tokio::runtime::Runtime,
    policy: PolicyBuilder,
    calls: &[CallPlan],
) -> Vec<Sent> {
    use http_body_util::{BodyExt, Full};
    use tower_layer::Layer;
    use tower_service::Service;
    rt.block_on(async {
        let mut connector = hyper_util::client::legacy::connect::HttpConnector::new();
        connector.set_connect_timeout(Some(policy.settings_ref().connect_timeout));
        let h2 = policy.settings_ref().http_version == HttpVersion::Http2;
        let client: hyper_util::client::legacy::Client<
            _,
            baton_tower::ReplayBody<Full<bytes::Bytes>>,
        > = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .http2_only(h2)
            .build(connector);
        let mut svc = match baton_tower::BatonLayer::new(policy) {
            Ok(l) => l.layer(client),
            Err(e) => return vec![Err(format!("build: {e}"))],
        };
        let mut out = Vec::new();
        for c in calls {
            let body = Full::new(bytes::Bytes::from(c.body.clone().unwrap_or_default()));
            let mut req = http::Request::builder()
                .method(c.method.clone())
                .uri("/")
                .body(body)
                .expect("a valid request");
            req.extensions_mut().insert(c.options.clone());
            let start = Instant::now();
            let r = svc.call(req).await;
            let took = start.elapsed();
            out.push(Ok(match r {
                Ok(resp) => {
                    let report = resp.extensions().get::<Report>().cloned();
                    let _ = tokio::time::timeout(BODY_TIMEOUT, resp.into_body().collect()).await;
                    match report {
                        Some(r) => (r, took),
                        None => {
                            out.push(Err("no report in the response".into()));
                            continue;
                        }
                    }
                }
                Err(e) => (e.report().clone(), took),
            }));
        }
        out
    })
}

#[test]
fn fault_matrix_tower() {
    let rt = runtime();
    run_matrix("tower", &|p, c| send_tower(&rt, p, c));
}
