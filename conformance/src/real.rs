//! What every real-socket runner shares: one `testkit` provider per endpoint on 127.0.0.1
//! playing the endpoint's script, the policy pointed at them (with the per-call `eligible`
//! lists), the requests each provider saw during a call, and the tally a runner prints.
//!
//! The runners (`tests/tokio.rs`, `blocking.rs`, `async_std.rs`, `smol.rs`) only send the
//! calls through their adapter and hand back the adapter's report; they never decide
//! anything here, so a mismatch always points at an adapter or at the engine.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use baton_core::{HttpVersion, PolicyBuilder, Report};
use testkit::{Behaviour, H2Behaviour, H2Provider, Provider};

use crate::{check, CallSpec, Fault, Observed, SeenRequest, Slack, StepSpec, Vector};

/// How far elapsed times may stray on real sockets (scheduling, connects, two cores
/// shared with other work).
pub const TOLERANCE: Duration = Duration::from_millis(250);

/// How long a runner waits for a stalled body before calling it a body error.
pub const BODY_TIMEOUT: Duration = Duration::from_millis(300);

/// The body a `stall` or `half_body` step sends when its script names none (an empty body
/// would be complete at the headers, and no fault at all).
pub const FAULT_BODY: &str = "0123456789abcdefghijklmnopqrstuv";

/// After a call returns, how long to let providers finish reading requests already on the
/// wire before their logs are read.
const SETTLE: Duration = Duration::from_millis(15);

/// One endpoint's real counterpart.
enum Backend {
    /// A provider playing the script (also the refusing state: the port is closed).
    Provider(Provider),
    /// An HTTP/2 provider (h2c, prior knowledge) playing the script: the vector's policy
    /// says `http_version = "http2"`.
    H2(H2Provider),
    /// A URL whose host never resolves.
    Dns,
}

/// A vector's providers, started on loopback.
pub struct Scenario {
    /// The vector, with `{authority:ID}` resolved to the providers' addresses.
    pub vector: Vector,
    backends: Vec<Backend>,
    current: Arc<AtomicUsize>,
}

/// Request counts per endpoint when a call began.
#[derive(Debug, Clone)]
pub struct Mark(Vec<usize>);

/// The testkit behaviour for one scripted step, or why it has none (`refuse` and `dns`
/// are states of the whole endpoint, not per-request faults).
pub fn behaviour(step: &StepSpec) -> Result<Behaviour, String> {
    let answer = |default_body: &str| {
        let mut b = Behaviour::status(step.status.unwrap_or(200));
        for (k, v) in &step.headers {
            b = b.header(k.clone(), v.clone());
        }
        b.body(
            step.body
                .clone()
                .unwrap_or_else(|| default_body.to_string()),
        )
    };
    let b = match step.fault {
        None => answer(""),
        Some(Fault::Reset) => Behaviour::reset(),
        Some(Fault::Close) => Behaviour::close(),
        Some(Fault::BlackHole) => Behaviour::black_hole(),
        Some(Fault::Stall) => answer(FAULT_BODY).stall_after_headers(),
        Some(Fault::HalfBody) => answer(FAULT_BODY).close_after_half_body(),
        Some(f @ (Fault::Refuse | Fault::Dns)) => {
            return Err(format!(
                "{f:?} is a state of the whole endpoint, not one request's fault"
            ))
        }
        Some(f) => {
            return Err(format!(
                "{f:?} is an HTTP/2 fault: the vector's policy needs http_version = \"http2\""
            ))
        }
    };
    Ok(match step.delay {
        Some(d) => b.delay(d),
        None => b,
    })
}

/// The HTTP/2 provider's behaviour for one scripted step, or why it has none.
pub fn h2_behaviour(step: &StepSpec) -> Result<H2Behaviour, String> {
    let b = match step.fault {
        None => {
            let mut b = H2Behaviour::status(step.status.unwrap_or(200));
            for (k, v) in &step.headers {
                b = b.header(k, v);
            }
            b.body(step.body.clone().unwrap_or_default())
        }
        Some(Fault::RefusedStream) => H2Behaviour::refuse_stream(),
        Some(Fault::GoawayBelow) => H2Behaviour::go_away_below(),
        Some(Fault::GoawayAt) => H2Behaviour::go_away_at(),
        Some(Fault::StreamReset) => H2Behaviour::reset_after_request(),
        Some(Fault::BlackHole) => H2Behaviour::black_hole(),
        Some(f) => return Err(format!("{f:?} is not played by the HTTP/2 provider")),
    };
    Ok(match step.delay {
        Some(d) => b.delay(d),
        None => b,
    })
}

fn backend_url(b: &Backend) -> String {
    match b {
        Backend::Provider(p) => p.url(),
        Backend::H2(p) => p.url(),
        Backend::Dns => testkit::unresolvable_url(),
    }
}

/// An HTTP/2 provider playing endpoint `e`'s script.
fn start_h2(e: &crate::EndpointSpec) -> Result<Backend, String> {
    let mut b = H2Provider::builder();
    let n = e.script.len();
    for (i, step) in e.script.iter().enumerate() {
        let beh = h2_behaviour(step).map_err(|why| format!("endpoint {}: {why}", e.id))?;
        b = if i + 1 == n {
            b.otherwise(beh)
        } else {
            b.then(beh)
        };
    }
    Ok(Backend::H2(b.start()))
}

/// The real counterpart of one endpoint's (or host's) script.
fn start_backend(e: &crate::EndpointSpec) -> Result<Backend, String> {
    let whole = |f: Fault| !e.script.is_empty() && e.script.iter().all(|s| s.fault == Some(f));
    if whole(Fault::Refuse) {
        return Ok(Backend::Provider(Provider::start(Behaviour::refuse())));
    }
    if whole(Fault::Dns) {
        return Ok(Backend::Dns);
    }
    let mut b = Provider::builder();
    if let Some(ip) = e.ip {
        b = b.ip(ip);
    }
    let n = e.script.len();
    for (i, step) in e.script.iter().enumerate() {
        let beh = behaviour(step).map_err(|why| format!("endpoint {}: {why}", e.id))?;
        b = if i + 1 == n {
            b.otherwise(beh)
        } else {
            b.then(beh)
        };
    }
    Ok(Backend::Provider(b.start()))
}

impl Scenario {
    /// Starts one provider per endpoint and per host. `Err` says why the vector cannot be expressed
    /// with real providers (a script that mixes `refuse` or `dns` with other steps).
    pub fn start(vector: &Vector) -> Result<Scenario, String> {
        // Hosts first: endpoint scripts may redirect to them (`{authority:HOST}`).
        let hosts = vector
            .hosts
            .iter()
            .map(start_backend)
            .collect::<Result<Vec<_>, _>>()?;
        let authority = |b: &Backend| {
            let url = backend_url(b);
            url.strip_prefix("http://").unwrap_or(&url).to_string()
        };
        let pre = vector.resolve(|id| {
            let i = vector.hosts.iter().position(|h| h.id == id)?;
            Some(authority(&hosts[i]))
        });
        let h2 = vector.policy.http_version == HttpVersion::Http2;
        let mut backends = pre
            .endpoints
            .iter()
            .map(|e| if h2 { start_h2(e) } else { start_backend(e) })
            .collect::<Result<Vec<_>, _>>()?;
        backends.extend(hosts);
        let vector = pre.resolve(|id| {
            let i = pre.endpoints.iter().position(|e| e.id == id)?;
            Some(authority(&backends[i]))
        });
        Ok(Scenario {
            vector,
            backends,
            current: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// The base URL of endpoint `i` (before the endpoint's `base`).
    pub fn url(&self, i: usize) -> String {
        backend_url(&self.backends[i])
    }

    /// The vector's policy pointed at the providers, with an eligible predicate that reads
    /// the current call's `eligible` list (set by [`begin`](Self::begin)).
    pub fn policy(&self) -> Result<PolicyBuilder, String> {
        let sets: Vec<Option<Vec<String>>> = self
            .vector
            .calls
            .iter()
            .map(|c| c.eligible.clone())
            .collect();
        let cur = self.current.clone();
        let urls: BTreeMap<String, String> = self
            .vector
            .endpoints
            .iter()
            .enumerate()
            .map(|(i, e)| (e.id.clone(), self.url(i)))
            .collect();
        Ok(self
            .vector
            .policy(|e| urls[&e.id].clone())?
            .eligible_fn(move |e, _| {
                let k = cur.load(Ordering::Relaxed);
                sets.get(k)
                    .and_then(|s| s.as_ref())
                    .is_none_or(|s| s.iter().any(|id| id == e.id()))
            }))
    }

    /// Marks the start of call `k` (its `eligible` list applies from now on).
    pub fn begin(&self, k: usize) -> Mark {
        self.current.store(k, Ordering::Relaxed);
        Mark(
            self.backends
                .iter()
                .map(|b| match b {
                    Backend::Provider(p) => p.requests().len(),
                    Backend::H2(p) => p.processed(),
                    Backend::Dns => 0,
                })
                .collect(),
        )
    }

    /// What the call did: the decision fields from the adapter's report, `body_error`
    /// from reading the returned body (`None` when no response was returned), and the
    /// requests each provider received since `mark`.
    pub fn observe(&self, mark: &Mark, report: &Report, body_error: Option<bool>) -> Observed {
        std::thread::sleep(SETTLE);
        let mut o = Observed::from_report(report);
        o.body_error = body_error;
        let all = self.vector.endpoints.iter().chain(&self.vector.hosts);
        for (i, e) in all.enumerate() {
            let reqs: Vec<SeenRequest> = match &self.backends[i] {
                Backend::Provider(p) => p
                    .requests()
                    .into_iter()
                    .skip(mark.0[i])
                    .map(|r| SeenRequest {
                        target: match &r.query {
                            Some(q) => format!("{}?{q}", r.path),
                            None => r.path.clone(),
                        },
                        method: r.method,
                        headers: r.headers,
                    })
                    .collect(),
                // The requests an HTTP/2 provider processed (a refused stream never was).
                Backend::H2(p) => p
                    .requests()
                    .into_iter()
                    .skip(mark.0[i])
                    .map(|r| SeenRequest {
                        target: r.path,
                        method: r.method,
                        headers: r.headers,
                    })
                    .collect(),
                Backend::Dns => Vec::new(),
            };
            if !reqs.is_empty() {
                o.seen.insert(e.id.clone(), reqs);
            }
        }
        o
    }
}

/// Runs every vector on one path and collects the verdicts.
#[derive(Debug)]
pub struct Tally {
    path: &'static str,
    ran: usize,
    not_expressible: Vec<String>,
    failures: Vec<String>,
}

impl Tally {
    /// An empty tally for `path` (one of [`PATHS`](crate::PATHS)).
    pub fn new(path: &'static str) -> Tally {
        Tally {
            path,
            ran: 0,
            not_expressible: Vec::new(),
            failures: Vec::new(),
        }
    }

    /// Runs `vectors` with `run`, which starts nothing itself: it gets the started
    /// [`Scenario`] and returns one observation per call (or an error that fails the
    /// vector). Vectors whose `paths` leave this path out are counted, with their
    /// `why_not`.
    pub fn run_all(
        &mut self,
        vectors: &[Vector],
        mut run: impl FnMut(&Scenario) -> Result<Vec<Observed>, String>,
    ) {
        for v in vectors {
            if !v.runs_on(self.path) {
                self.not_expressible.push(format!(
                    "{} ({}): {}",
                    v.name,
                    file_name(v),
                    v.why_not.as_deref().unwrap_or("(no reason given)")
                ));
                continue;
            }
            self.ran += 1;
            let sc = match Scenario::start(v) {
                Ok(sc) => sc,
                Err(e) => {
                    self.failures.push(format!(
                        "{} ({}): cannot be expressed with real providers and does not say so in `paths`: {e}",
                        v.name,
                        file_name(v)
                    ));
                    continue;
                }
            };
            match run(&sc) {
                Err(e) => self
                    .failures
                    .push(format!("{} ({}): {e}", v.name, file_name(v))),
                Ok(observed) => {
                    // What the simulator did with the vector, when it runs there.
                    let model = v.runs_on("sim").then(|| crate::run_sim(&v.for_sim()).ok());
                    let model = model.flatten().unwrap_or_default();
                    self.compare(&sc.vector, &observed, &model);
                    self.agree_with_sim(v, &observed, &model);
                }
            }
        }
    }

    /// Each call against its `expect`; `model` (what the simulator did, or nothing) says
    /// how long each call takes in the vector's own time.
    fn compare(&mut self, v: &Vector, observed: &[Observed], model: &[Observed]) {
        if observed.len() != v.calls.len() {
            self.failures.push(format!(
                "{} ({}): {} calls observed, {} expected",
                v.name,
                file_name(v),
                observed.len(),
                v.calls.len()
            ));
        }
        let mut before = Duration::ZERO;
        for (i, (c, o)) in v.calls.iter().zip(observed).enumerate() {
            for bad in check(v, c, o, Slack::real(before)) {
                self.failures.push(format!(
                    "{} ({}) call {}: {bad}",
                    v.name,
                    file_name(v),
                    i + 1
                ));
            }
            // The real time the call took beyond the vector's model of it (the whole call
            // where the simulator does not run the vector), and the pause after it before
            // its requests are read.
            let modelled = model.get(i).map_or(Duration::ZERO, |m| m.elapsed);
            before += o.elapsed.saturating_sub(modelled) + SETTLE;
        }
    }

    /// What every call did, beside what the simulator did with the same vector: the
    /// decisions (stop reason, error kind, `may_have_executed`, each attempt's endpoint
    /// and outcome) must be the same on every path, whether or not the vector states
    /// them (SPEC 7: one behaviour on every runtime). Vectors the simulator cannot run
    /// (`model` empty) are left to their own `expect`.
    fn agree_with_sim(&mut self, v: &Vector, observed: &[Observed], model: &[Observed]) {
        for (i, (m, o)) in model.iter().zip(observed).enumerate() {
            let fields = [
                ("stop reason", &m.stop_reason, &o.stop_reason),
                (
                    "error",
                    &format!("{:?}", m.error),
                    &format!("{:?}", o.error),
                ),
                (
                    "may_have_executed",
                    &m.may_have_executed.to_string(),
                    &o.may_have_executed.to_string(),
                ),
                (
                    "attempts",
                    &format!("{:?}", m.attempts),
                    &format!("{:?}", o.attempts),
                ),
            ];
            for (field, sim, real) in fields {
                if sim != real {
                    self.failures.push(format!(
                        "{} ({}) call {}: {field} differs from the simulator's: sim {sim}, {} {real}",
                        v.name,
                        file_name(v),
                        i + 1,
                        self.path
                    ));
                }
            }
        }
    }

    /// Prints `N vectors ran, M not expressible on this path` (with every reason) and
    /// panics listing every mismatch.
    pub fn finish(self) {
        println!(
            "{}: {} vectors ran, {} not expressible on this path",
            self.path,
            self.ran,
            self.not_expressible.len()
        );
        for n in &self.not_expressible {
            println!("  not expressible: {n}");
        }
        assert!(self.ran > 0, "{}: no vector ran", self.path);
        assert!(
            self.failures.is_empty(),
            "{}: {} mismatches:\n{}",
            self.path,
            self.failures.len(),
            self.failures.join("\n")
        );
    }
}

fn file_name(v: &Vector) -> String {
    v.file
        .file_name()
        .map_or_else(String::new, |f| f.to_string_lossy().into_owned())
}

impl CallSpec {
    /// The request method.
    pub fn http_method(&self) -> Result<http::Method, String> {
        self.method
            .parse()
            .map_err(|_| format!("bad method {}", self.method))
    }
}
