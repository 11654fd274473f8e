//! A virtual-clock simulator: scripted endpoints driving the real engine.
//!
//! Write "primary refuses, backup answers 200 after 30 ms", run calls, and assert on the
//! attempts, the result, the events and the executions each endpoint saw. Time jumps from
//! one wake-up to the next, so a scenario with 30-second timeouts runs in microseconds.
//! Health and budget carry from call to call, as in a real client. Most of baton's own tests
//! use it, and users can property-test their policies with it.
//!
//! What it models as the adapters do: connect and response timeouts, every failure class
//! (refused, reset, black hole, HTTP/2 refusals, certificate rejections), `Retry-After`,
//! redirects followed within the attempt (a `Location` on an endpoint's origin plays that
//! endpoint's next step; any other origin does not resolve), and credentials (SPEC 9: an
//! endpoint's slot is filled by a provider that answers at once, and a refusal of a held
//! token is re-sent once, playing the endpoint's next step). What it does not: a response
//! body (a classifier sees none, as on every adapter but baton-tokio with
//! `classify_body`), a token provider that is slow or fails, and connect time (a connect
//! succeeds at once unless scripted to fail).
//!
//! ```
//! use std::time::{Duration, Instant};
//! use baton_core::{sim::{Script, Sim}, CallOptions, Endpoint, Policy, StopReason};
//!
//! let policy = Policy::builder()
//!     .endpoint(Endpoint::new("a", "https://a.example/"))
//!     .endpoint(Endpoint::new("b", "https://b.example/"))
//!     .build()
//!     .unwrap();
//! let mut sim = Sim::new(policy, Instant::now());
//! sim.script("a", Script::reset());          // reads the request, then drops the connection
//! sim.script("b", Script::status(200));
//! let run = sim.run(http::Method::POST, CallOptions::default());
//! // A POST without a key never reaches a second provider after an ambiguous failure.
//! assert_eq!(run.report.stop_reason, StopReason::NotPermitted);
//! assert_eq!((run.executions("a"), run.executions("b")), (1, 0));
//! ```

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::{Method, StatusCode, Uri};

use crate::call::{Action, AttemptOutcome, BodyKind, Call, CallOptions, Head, Input};
use crate::engine::Engine;
use crate::policy::{Policy, RequestInfo};
use crate::report::{FailureClass, Report, TimeoutPhase};
use crate::time::add;

/// What a scripted endpoint does with one request.
///
/// ```
/// use baton_core::sim::Reply;
/// let r = Reply::Status(503, vec![("retry-after".into(), "1".into())]);
/// assert!(r.delivered());
/// assert!(!Reply::Refuse.delivered());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// Answer with this status and headers.
    Status(u16, Vec<(String, String)>),
    /// Refuse the connection (undelivered).
    Refuse,
    /// Never finish connecting (undelivered, after the connect timeout).
    ConnectTimeout,
    /// Read the request, then reset the connection (ambiguous).
    Reset,
    /// Read the request, never answer (ambiguous, after the attempt timeout).
    BlackHole,
    /// The adapter cannot build the request (rejected locally).
    RejectLocally,
    /// The TLS handshake fails on a certificate (untrusted: undelivered, and no retry at
    /// this endpoint within the call).
    Untrusted,
    /// HTTP/2: the stream is reset with `REFUSED_STREAM` on its HEADERS (undelivered).
    RefusedStream,
    /// HTTP/2: a `GOAWAY` ends the connection; `above_last` when the request's stream is
    /// above its last stream id (undelivered), else the provider read the request and
    /// may have processed it (ambiguous).
    GoAway {
        /// Whether the request's stream id is above the frame's last stream id.
        above_last: bool,
    },
    /// HTTP/2: the whole request is read, then the stream is reset with
    /// `INTERNAL_ERROR` (ambiguous).
    StreamReset,
}

impl Reply {
    /// Whether the request reaches the provider (and so may execute there).
    pub fn delivered(&self) -> bool {
        matches!(
            self,
            Reply::Status(..)
                | Reply::Reset
                | Reply::BlackHole
                | Reply::StreamReset
                | Reply::GoAway { above_last: false }
        )
    }
}

/// One scripted step: a reply after a delay.
///
/// ```
/// use std::time::Duration;
/// use baton_core::sim::{Reply, Script, Step};
///
/// // "Refused, then 200 after 20 ms": explicit steps, or the same through the builders.
/// let steps = vec![
///     Step { reply: Reply::Refuse, after: Duration::ZERO },
///     Step { reply: Reply::Status(200, vec![]), after: Duration::from_millis(20) },
/// ];
/// let built = Script::refuse().then(Script::status(200).after(Duration::from_millis(20)));
/// assert_eq!(Script::steps_of(steps), built);
/// assert!(!built.steps()[0].reply.delivered());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// The reply.
    pub reply: Reply,
    /// How long the provider takes.
    pub after: Duration,
}

/// An endpoint's behaviour per request number: the steps in order, the last one repeating.
///
/// ```
/// use std::time::Duration;
/// use baton_core::sim::Script;
/// // 503 with Retry-After: 1, then 200 after 20 ms forever.
/// let s = Script::status(503).header("retry-after", "1").then(Script::status(200).after(Duration::from_millis(20)));
/// assert_eq!(s.steps().len(), 2);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Script {
    steps: Vec<Step>,
    cycle: bool,
}

impl Script {
    fn one(reply: Reply) -> Self {
        Script {
            steps: vec![Step {
                reply,
                after: Duration::ZERO,
            }],
            cycle: false,
        }
    }

    /// Answer with `status`.
    pub fn status(status: u16) -> Self {
        Self::one(Reply::Status(status, Vec::new()))
    }

    /// Refuse the connection.
    pub fn refuse() -> Self {
        Self::one(Reply::Refuse)
    }

    /// Never finish connecting.
    pub fn connect_timeout() -> Self {
        Self::one(Reply::ConnectTimeout)
    }

    /// Read the request, then reset.
    pub fn reset() -> Self {
        Self::one(Reply::Reset)
    }

    /// Read the request, never answer.
    pub fn black_hole() -> Self {
        Self::one(Reply::BlackHole)
    }

    /// The adapter cannot build the request.
    pub fn reject() -> Self {
        Self::one(Reply::RejectLocally)
    }

    /// The TLS handshake fails on a certificate.
    pub fn untrusted() -> Self {
        Self::one(Reply::Untrusted)
    }

    /// HTTP/2: the stream is refused (`REFUSED_STREAM`).
    pub fn refused_stream() -> Self {
        Self::one(Reply::RefusedStream)
    }

    /// HTTP/2: a `GOAWAY` whose last stream id is below the request's stream (`below`
    /// true), or at it (the request was read).
    pub fn go_away(below: bool) -> Self {
        Self::one(Reply::GoAway { above_last: below })
    }

    /// HTTP/2: the whole request is read, then the stream is reset (`INTERNAL_ERROR`).
    pub fn stream_reset() -> Self {
        Self::one(Reply::StreamReset)
    }

    /// A script from explicit steps (the last repeats; an empty list answers 200).
    pub fn steps_of(steps: Vec<Step>) -> Self {
        if steps.is_empty() {
            return Self::status(200);
        }
        Script {
            steps,
            cycle: false,
        }
    }

    /// Repeats the whole list of steps instead of only the last one (request `n` gets step
    /// `n % len`).
    pub fn cycle(mut self) -> Self {
        self.cycle = true;
        self
    }

    /// Sets the delay of the last step.
    pub fn after(mut self, delay: Duration) -> Self {
        if let Some(s) = self.steps.last_mut() {
            s.after = delay;
        }
        self
    }

    /// Adds a response header to the last step.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        if let Some(Step {
            reply: Reply::Status(_, h),
            ..
        }) = self.steps.last_mut()
        {
            h.push((name.to_string(), value.to_string()));
        }
        self
    }

    /// Appends `next`'s steps.
    pub fn then(mut self, next: Script) -> Self {
        self.steps.extend(next.steps);
        self
    }

    /// The steps.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    fn step(&self, n: usize) -> &Step {
        let len = self.steps.len();
        if self.cycle {
            &self.steps[n % len]
        } else {
            &self.steps[n.min(len - 1)]
        }
    }
}

/// One request that reached a scripted endpoint.
///
/// ```
/// use std::time::{Duration, Instant};
/// use baton_core::sim::{Script, Sim};
/// use baton_core::{CallOptions, Endpoint, Policy};
///
/// let policy = Policy::builder()
///     .endpoint(Endpoint::new("a", "https://a.example/"))
///     .endpoint(Endpoint::new("b", "https://b.example/"))
///     .build()
///     .unwrap();
/// let mut sim = Sim::new(policy, Instant::now());
/// sim.script("a", Script::reset().after(Duration::from_millis(10)));
/// let run = sim.run(http::Method::GET, CallOptions::default());
/// // Both providers received the GET, with the same request id.
/// let (a, b) = (&run.executed[0][0], &run.executed[1][0]);
/// assert_eq!((a.attempt, b.attempt), (1, 2));
/// assert_eq!(a.request_id, b.request_id);
/// assert_eq!(b.at, Duration::from_millis(10));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Execution {
    /// The call's request id.
    pub request_id: String,
    /// The call's idempotency key.
    pub idempotency_key: Option<String>,
    /// Attempt number.
    pub attempt: u32,
    /// Time since the simulator's start.
    pub at: Duration,
}

/// A recorded event: its time since the simulator's start and its debug text (which starts
/// with the event's name, e.g. `Failover { .. }`).
///
/// ```
/// use std::time::{Duration, Instant};
/// use baton_core::sim::{Script, Sim};
/// use baton_core::{CallOptions, Endpoint, Policy};
///
/// let policy = Policy::builder()
///     .endpoint(Endpoint::new("a", "https://a.example/"))
///     .endpoint(Endpoint::new("b", "https://b.example/"))
///     .build()
///     .unwrap();
/// let mut sim = Sim::new(policy, Instant::now());
/// sim.script("a", Script::status(503).after(Duration::from_millis(40)));
/// let run = sim.run(http::Method::GET, CallOptions::default());
/// let failover = run.events_named("Failover");
/// assert_eq!(failover.len(), 1);
/// assert_eq!(failover[0].at, Duration::from_millis(40));
/// assert!(failover[0].text.contains(r#"from: "a", to: "b""#));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimEvent {
    /// Time since the simulator's start.
    pub at: Duration,
    /// `format!("{:?}", kind)` of the event.
    pub text: String,
}

/// A simulated request.
///
/// ```
/// use baton_core::{sim::SimRequest, BodyKind};
/// let r = SimRequest::new(http::Method::POST).header("idempotency-key", "k-1").body(BodyKind::OneShot);
/// assert_eq!(r.method, http::Method::POST);
/// ```
#[derive(Debug, Clone)]
pub struct SimRequest {
    /// Method.
    pub method: Method,
    /// URL (often a path).
    pub uri: Uri,
    /// Headers.
    pub headers: HeaderMap,
    /// Body kind (default: empty for safe methods, replayable otherwise).
    pub body: BodyKind,
}

impl SimRequest {
    /// A request with `method` to `/`.
    pub fn new(method: Method) -> Self {
        let body = if crate::is_safe_method(&method) {
            BodyKind::Empty
        } else {
            BodyKind::Replayable
        };
        SimRequest {
            method,
            uri: Uri::from_static("/"),
            headers: HeaderMap::new(),
            body,
        }
    }

    /// Adds a header (ignored when invalid).
    pub fn header(mut self, name: &str, value: &str) -> Self {
        if let (Ok(n), Ok(v)) = (HeaderName::try_from(name), HeaderValue::try_from(value)) {
            self.headers.append(n, v);
        }
        self
    }

    /// Sets the body kind.
    pub fn body(mut self, body: BodyKind) -> Self {
        self.body = body;
        self
    }
}

/// What one simulated call did.
///
/// ```
/// use std::time::{Duration, Instant};
/// use baton_core::sim::{Script, Sim};
/// use baton_core::{CallOptions, Endpoint, Policy};
///
/// let policy = Policy::builder()
///     .endpoint(Endpoint::new("a", "https://a.example/"))
///     .endpoint(Endpoint::new("b", "https://b.example/"))
///     .build()
///     .unwrap();
/// let mut sim = Sim::new(policy, Instant::now());
/// sim.script("a", Script::refuse().after(Duration::from_millis(5)));
/// sim.script("b", Script::status(200).after(Duration::from_millis(30)));
/// let run = sim.run(http::Method::GET, CallOptions::default());
/// assert_eq!(run.report.status(), Some(http::StatusCode::OK));
/// assert_eq!(run.endpoints_attempted(), ["a", "b"]);
/// assert_eq!(run.providers_executed(), 1); // the refused request never reached "a"
/// assert_eq!(run.elapsed, Duration::from_millis(35));
/// assert!(!run.stuck);
/// ```
#[derive(Debug, Clone)]
pub struct SimRun {
    /// The call's report.
    pub report: Report,
    /// Events, in order.
    pub events: Vec<SimEvent>,
    /// Executions per endpoint (index order) during this call.
    pub executed: Vec<Vec<Execution>>,
    /// Endpoint ids in policy order.
    pub ids: Vec<String>,
    /// Most attempts in flight at once.
    pub max_in_flight: usize,
    /// The call's duration on the virtual clock.
    pub elapsed: Duration,
    /// True when the engine asked to wait with nothing to wait for (a bug; never expected).
    pub stuck: bool,
}

impl SimRun {
    /// Ids of the endpoints attempted, in order.
    pub fn endpoints_attempted(&self) -> Vec<&str> {
        self.report
            .attempts
            .iter()
            .map(|a| &*a.endpoint_id)
            .collect()
    }

    /// How many times the endpoint with `id` received (and so may have executed) the call.
    pub fn executions(&self, id: &str) -> usize {
        self.ids
            .iter()
            .position(|i| i == id)
            .map_or(0, |i| self.executed[i].len())
    }

    /// How many endpoints received the call at least once.
    pub fn providers_executed(&self) -> usize {
        self.executed.iter().filter(|e| !e.is_empty()).count()
    }

    /// Events whose debug text starts with `name` (e.g. `"Failover"`).
    pub fn events_named(&self, name: &str) -> Vec<&SimEvent> {
        self.events
            .iter()
            .filter(|e| e.text.starts_with(name))
            .collect()
    }
}

#[derive(Debug)]
pub(crate) struct Pending {
    pub(crate) number: u32,
    pub(crate) at: Instant,
    pub(crate) outcome: PendingOutcome,
    /// The redirects the attempt followed on its way (SPEC 3).
    pub(crate) redirects: Vec<crate::Redirect>,
}

#[derive(Debug, Clone)]
pub(crate) enum PendingOutcome {
    Response(u16, Vec<(String, String)>),
    Failure(FailureClass),
    Timeout(TimeoutPhase),
}

/// The simulator: a shared [`Engine`], a virtual clock and one script per endpoint.
///
/// Health carries from call to call, and time only moves when the simulator says so:
///
/// ```
/// use std::time::{Duration, Instant};
/// use baton_core::sim::{Script, Sim};
/// use baton_core::{Breaker, BreakerRule, CallOptions, Endpoint, Policy};
///
/// let policy = Policy::builder()
///     .endpoint(Endpoint::new("a", "https://a.example/"))
///     .endpoint(Endpoint::new("b", "https://b.example/"))
///     .breaker(Breaker { rule: BreakerRule::Consecutive { failures: 1 }, ..Breaker::default() })
///     .build()
///     .unwrap();
/// let start = Instant::now();
/// let mut sim = Sim::new(policy, start);
/// sim.script("a", Script::refuse());
/// let first = sim.run(http::Method::GET, CallOptions::default());
/// assert_eq!(first.endpoints_attempted(), ["a", "b"]);
/// // a's breaker is open now: the next call starts at b.
/// let second = sim.run(http::Method::GET, CallOptions::default());
/// assert_eq!(second.endpoints_attempted(), ["b"]);
/// sim.advance(Duration::from_secs(60));
/// assert_eq!(sim.now(), start + Duration::from_secs(60));
/// ```
#[derive(Debug)]
pub struct Sim {
    engine: Arc<Engine>,
    origin: Instant,
    now: Instant,
    wall: SystemTime,
    scripts: Vec<Script>,
    requests: Vec<usize>,
}

impl Sim {
    /// A simulator for `policy` whose clock starts at `start`. Every endpoint answers 200
    /// until scripted otherwise.
    pub fn new(policy: Policy, start: Instant) -> Self {
        let n = policy.endpoints().len();
        Sim {
            engine: Arc::new(Engine::new(policy)),
            origin: start,
            now: start,
            wall: SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
            scripts: vec![Script::status(200); n],
            requests: vec![0; n],
        }
    }

    /// Scripts the endpoint with `id` (request numbering restarts at 1). Unknown ids are
    /// ignored.
    pub fn script(&mut self, id: &str, script: Script) -> &mut Self {
        if let Some(i) = self.engine.policy().endpoint_index(id) {
            self.scripts[i] = script;
            self.requests[i] = 0;
        }
        self
    }

    /// The shared engine (health, budget).
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// The virtual time now.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Moves the virtual clock forward.
    pub fn advance(&mut self, d: Duration) {
        let before = self.now;
        self.now = add(self.now, d);
        // The wall clock moves as far as the virtual one did (`add` caps a move past
        // `MAX_DURATION`): the two stay in step, and a huge `d` does not overflow it.
        self.wall += self.now.saturating_duration_since(before);
    }

    /// Runs one call of `method` to `/` with `options`.
    pub fn run(&mut self, method: Method, options: CallOptions) -> SimRun {
        self.run_request(SimRequest::new(method), options)
    }

    /// Runs one call.
    pub fn run_request(&mut self, request: SimRequest, mut options: CallOptions) -> SimRun {
        let log: Arc<Mutex<Vec<SimEvent>>> = Arc::new(Mutex::new(Vec::new()));
        options.events = Some(self.log_sink(&log, options.events.take()));
        let info = RequestInfo {
            method: &request.method,
            uri: &request.uri,
            headers: &request.headers,
        };
        let start = self.now;
        let engine = self.engine.clone();
        let mut call: Call<'_, Head> = Call::new(&engine, &info, request.body, options, start);
        let mut executed: Vec<Vec<Execution>> = vec![Vec::new(); self.scripts.len()];
        let mut pending: Vec<Pending> = Vec::new();
        let mut max_in_flight = 0;
        let mut stuck = false;
        let report = loop {
            let action = call.poll();
            match action {
                Action::Send(a) => {
                    let execution = Execution {
                        request_id: call.request_id().to_string(),
                        idempotency_key: call.idempotency_key().map(str::to_owned),
                        attempt: a.number,
                        at: self.now.saturating_duration_since(self.origin),
                    };
                    let mut record = |i: usize| executed[i].push(execution.clone());
                    let (after, outcome, redirects) = self.play(&a, &request, &mut record);
                    pending.push(Pending {
                        number: a.number,
                        at: add(self.now, after),
                        outcome,
                        redirects,
                    });
                    max_in_flight = max_in_flight.max(pending.len());
                }
                Action::Discard(number) => pending.retain(|p| p.number != number),
                Action::WaitUntil(t) => stuck |= self.wait(&mut call, &mut pending, Some(t)),
                Action::WaitForAttempt => stuck |= self.wait(&mut call, &mut pending, None),
                Action::Done => break call.take_done().into_report(),
            }
        };
        let events = log.lock().map(|v| v.clone()).unwrap_or_default();
        SimRun {
            report,
            events,
            executed,
            ids: self
                .engine
                .policy()
                .endpoints()
                .iter()
                .map(|e| e.id().to_string())
                .collect(),
            max_in_flight,
            elapsed: self.now.saturating_duration_since(start),
            stuck,
        }
    }

    /// Plays attempt `a` against the scripts: its endpoint's next step and, while that
    /// answers a redirect the policy follows (SPEC 3), the next step of the endpoint the
    /// hop's origin names, all within the attempt's time, as the adapters follow redirects
    /// within an attempt. A hop to an origin no endpoint has does not resolve (undelivered;
    /// the call reads it as ambiguous, after a redirect). `record` is told each endpoint
    /// that received a request. Returns when the attempt ends, how, and the hops followed.
    fn play(
        &mut self,
        a: &crate::Attempt,
        request: &SimRequest,
        record: &mut dyn FnMut(usize),
    ) -> (Duration, PendingOutcome, Vec<crate::Redirect>) {
        let engine = self.engine.clone();
        let policy = engine.policy();
        let (mut endpoint, mut spent) = (a.endpoint, Duration::ZERO);
        let mut redirects: Option<crate::Redirects> = None;
        let mut method = request.method.clone();
        let mut target = crate::attempt_uri(policy, endpoint, &request.uri).unwrap_or_default();
        let followed = |r: Option<crate::Redirects>| r.map(crate::Redirects::into_followed);
        // The endpoint's token for the attempt's own request (SPEC 9), and whether it was
        // already re-sent once after a refusal.
        let mut token = lease_now(&engine, endpoint, self.now);
        let mut resent = false;
        loop {
            let step = self.scripts[endpoint].step(self.requests[endpoint]).clone();
            self.requests[endpoint] += 1;
            if step.reply.delivered() {
                record(endpoint);
            }
            // Hops share the attempt's time, a connect in a hop included.
            let remaining = a.timeout.saturating_sub(spent);
            let left = crate::Attempt {
                timeout: remaining,
                connect_timeout: a.connect_timeout.min(remaining),
                ..a.clone()
            };
            let (after, outcome) = pending_outcome(&step, &left);
            spent += after;
            // A refusal of a token the slot held is re-sent once, to the same endpoint,
            // with a refreshed token, as every adapter does; a refusal of the fresh one
            // invalidates it too, and is the answer. Redirect hops carry no token here.
            if let (Some((slot, held)), PendingOutcome::Response(code, _)) =
                (token.take(), &outcome)
            {
                let status = StatusCode::from_u16(*code).unwrap_or(StatusCode::OK);
                let replayable = request.body != BodyKind::OneShot;
                if slot.answered(&held, status) && !resent && replayable {
                    token = lease_now(&engine, endpoint, self.now);
                    resent = true;
                    continue;
                }
            }
            let hop = match &outcome {
                PendingOutcome::Response(code, headers) => {
                    let state = redirects.get_or_insert_with(|| {
                        crate::Redirects::for_attempt(policy, a, request.body, &target, &method)
                    });
                    let status = StatusCode::from_u16(*code).ok();
                    status.and_then(|s| state.next(s, &header_map(headers)))
                }
                _ => None,
            };
            let Some(hop) = hop else {
                return (spent, outcome, followed(redirects).unwrap_or_default());
            };
            // The endpoint on the hop's origin: the one redirecting when it is on it (two
            // endpoints may share a host), else the first that is.
            let on_origin = |e: &usize| {
                let url = policy.endpoints()[*e].url().parse::<Uri>();
                crate::same_origin(&url.unwrap_or_default(), &hop.uri)
            };
            let all = 0..policy.endpoints().len();
            let named = Some(endpoint)
                .filter(on_origin)
                .or_else(|| all.into_iter().find(on_origin));
            let Some(next) = named else {
                let unresolved = PendingOutcome::Failure(FailureClass::Undelivered);
                return (spent, unresolved, followed(redirects).unwrap_or_default());
            };
            (endpoint, method, target) = (next, hop.method, hop.uri);
        }
    }

    /// The call's own sink: it logs every event (the policy's sink hears the call from the
    /// engine itself) and forwards it to the caller's sink, if any.
    fn log_sink(
        &self,
        log: &Arc<Mutex<Vec<SimEvent>>>,
        user_sink: Option<crate::policy::EventSink>,
    ) -> crate::policy::EventSink {
        let origin = self.origin;
        let log = log.clone();
        Arc::new(move |e: &crate::Event<'_>| {
            if let Some(u) = &user_sink {
                u(e);
            }
            if let Ok(mut v) = log.lock() {
                v.push(SimEvent {
                    at: e.at.saturating_duration_since(origin),
                    text: format!("{:?}", e.kind),
                });
            }
        })
    }

    /// Waits for the earliest pending outcome, or until `until`: whichever comes first is
    /// delivered. Returns true when there is nothing to wait for (the call is cancelled).
    fn wait(
        &mut self,
        call: &mut Call<'_, Head>,
        pending: &mut Vec<Pending>,
        until: Option<Instant>,
    ) -> bool {
        let next = pending
            .iter()
            .enumerate()
            .min_by_key(|(_, p)| (p.at, p.number))
            .map(|(k, p)| (k, p.at));
        match (next, until) {
            (Some((k, at)), u) if u.is_none_or(|u| at <= u) => {
                let p = pending.remove(k);
                self.set_now(p.at);
                deliver(call, p, self.now, self.wall);
                false
            }
            (_, Some(u)) => {
                self.set_now(u);
                call.handle(Input::Timer, self.now);
                false
            }
            _ => {
                call.handle(Input::Cancel, self.now);
                true
            }
        }
    }

    fn set_now(&mut self, t: Instant) {
        if t > self.now {
            self.wall += t.saturating_duration_since(self.now);
            self.now = t;
        }
    }
}

/// When and how a scripted step ends for attempt `a`: a reply slower than the attempt's
/// timeout is a response timeout, a connect that hangs ends at the connect timeout.
pub(crate) fn pending_outcome(step: &Step, a: &crate::Attempt) -> (Duration, PendingOutcome) {
    let timed_out = (a.timeout, PendingOutcome::Timeout(TimeoutPhase::Response));
    match &step.reply {
        Reply::Status(code, headers) if step.after < a.timeout => {
            (step.after, PendingOutcome::Response(*code, headers.clone()))
        }
        Reply::Status(..) | Reply::BlackHole => timed_out,
        Reply::Refuse => (
            step.after.min(a.connect_timeout),
            PendingOutcome::Failure(FailureClass::Undelivered),
        ),
        Reply::ConnectTimeout => (
            a.connect_timeout,
            PendingOutcome::Timeout(TimeoutPhase::Connect),
        ),
        Reply::Reset if step.after < a.timeout => {
            (step.after, PendingOutcome::Failure(FailureClass::Ambiguous))
        }
        Reply::Reset => timed_out,
        Reply::RejectLocally => (
            Duration::ZERO,
            PendingOutcome::Failure(FailureClass::RejectedLocally),
        ),
        Reply::Untrusted => (
            step.after.min(a.connect_timeout),
            PendingOutcome::Failure(FailureClass::Untrusted),
        ),
        Reply::RefusedStream | Reply::GoAway { .. } | Reply::StreamReset
            if step.after < a.timeout =>
        {
            let end = match step.reply {
                Reply::RefusedStream => crate::H2End::Reset {
                    code: crate::REFUSED_STREAM,
                },
                Reply::GoAway { above_last } => crate::H2End::GoAway { above_last },
                _ => crate::H2End::Reset { code: 0x2 },
            };
            (step.after, PendingOutcome::Failure(end.class()))
        }
        Reply::RefusedStream | Reply::GoAway { .. } | Reply::StreamReset => timed_out,
    }
}

/// A token for `endpoint`'s credential slot, when it has one, from a provider that answers
/// at once (the simulator has no identity service): the slot's own rules decide whether
/// it is fresh or held.
fn lease_now(
    engine: &Engine,
    endpoint: usize,
    now: Instant,
) -> Option<(&crate::credential::Credential, crate::credential::Lease)> {
    let slot = engine.credential(endpoint)?;
    let id = engine.policy().endpoints().get(endpoint)?.id().to_string();
    let fetch = || std::future::ready(Ok(crate::credential::Token::new(format!("sim-{id}"))));
    let lease = std::pin::pin!(slot.lease(move || now, fetch));
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match std::future::Future::poll(lease, &mut cx) {
        std::task::Poll::Ready(Ok(lease)) => Some((slot, lease)),
        // Another call's refresh in flight cannot be: the simulator runs one call at once.
        _ => None,
    }
}

/// A scripted step's headers as a header map (a name or value that is not valid is left
/// out).
fn header_map(headers: &[(String, String)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (k, v) in headers {
        if let (Ok(n), Ok(v)) = (HeaderName::try_from(k), HeaderValue::try_from(v)) {
            map.append(n, v);
        }
    }
    map
}

pub(crate) fn deliver(call: &mut Call<'_, Head>, p: Pending, now: Instant, wall: SystemTime) {
    let attempt = p.number;
    if !p.redirects.is_empty() {
        let redirects = p.redirects;
        call.handle(Input::Redirected { attempt, redirects }, now);
    }
    let input = match p.outcome {
        PendingOutcome::Response(code, headers) => {
            let map = header_map(&headers);
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            Input::Response {
                attempt,
                response: Head::with_headers(status, map),
                wall: Some(wall),
            }
        }
        PendingOutcome::Failure(c) => Input::Failed {
            attempt,
            outcome: AttemptOutcome::Failure(c),
        },
        PendingOutcome::Timeout(ph) => Input::Failed {
            attempt,
            outcome: AttemptOutcome::Timeout(ph),
        },
    };
    call.handle(input, now);
}

/// One call on `engine` whose first attempt is answered `status` at `now`: the engine's
/// healthy path with none of the simulator's bookkeeping (for benchmarks and tests of
/// many calls). Returns the endpoint of the first attempt and the call's result.
///
/// ```
/// use std::time::Instant;
/// use baton_core::{Endpoint, Engine, Policy, RequestInfo};
/// let engine = Engine::new(Policy::builder().endpoint(Endpoint::new("a", "https://a.example/")).build().unwrap());
/// let (uri, headers) = ("/".parse().unwrap(), http::HeaderMap::new());
/// let info = RequestInfo { method: &http::Method::GET, uri: &uri, headers: &headers };
/// let (endpoint, done) = baton_core::sim::answered_call(&engine, &info, http::StatusCode::OK, Instant::now());
/// assert_eq!(endpoint, 0);
/// assert_eq!(done.report().status(), Some(http::StatusCode::OK));
/// ```
pub fn answered_call(
    engine: &Engine,
    request: &RequestInfo<'_>,
    status: StatusCode,
    now: Instant,
) -> (usize, crate::Done<Head>) {
    let mut call: Call<'_, Head> = Call::new(
        engine,
        request,
        BodyKind::Empty,
        CallOptions::default(),
        now,
    );
    let mut endpoint = usize::MAX;
    loop {
        match call.poll() {
            Action::Send(a) => {
                if endpoint == usize::MAX {
                    endpoint = a.endpoint;
                }
                let response = Head::new(status);
                call.handle(
                    Input::Response {
                        attempt: a.number,
                        response,
                        wall: None,
                    },
                    now,
                );
            }
            // A triggering status on every endpoint: the call waits or ends; either way
            // there is nothing more to answer at `now`.
            _ => return (endpoint, call.take_done()),
        }
    }
}
