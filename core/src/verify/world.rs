//! The explored world: a fault alphabet, call classes, and a driver that answers the
//! `n`-th attempt of a call with its script's `n`-th fault, whichever endpoint the engine
//! picked.

use std::time::{Duration, Instant, SystemTime};

use http::{HeaderMap, Method, Uri};

use crate::call::{Action, BodyKind, Call, CallOptions, Head};
use crate::engine::Engine;
use crate::permission::{Permission, PermissionSource};
use crate::policy::{Policy, RequestInfo};
use crate::report::Report;
use crate::sim::{self, Pending, Reply, Step};
use crate::time::add;

use super::judge::{judge, understated_by_receipts, Violation};

/// What a provider does with one attempt: every failure class of SPEC 1, the statuses of
/// SPEC 2.3 and 2.6, slow answers, and the HTTP/2 ends of SPEC 9.
///
/// ```
/// use baton_core::verify::Fault;
/// assert_eq!(Fault::ALL.len(), 22);
/// assert_eq!(Fault::Reset.as_str(), "reset");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fault {
    /// 200 at once.
    Ok,
    /// Connection refused (undelivered).
    Refused,
    /// The host does not resolve (undelivered).
    Dns,
    /// The TCP connect never completes (undelivered, after the connect timeout).
    ConnectTimeout,
    /// Reads the request, then resets (ambiguous).
    Reset,
    /// Reads the request, never answers (ambiguous, after the attempt timeout).
    BlackHole,
    /// 200 whose body breaks after the headers (the headers are the commit point).
    BrokenBody,
    /// 500.
    Status500,
    /// 502.
    Status502,
    /// 503.
    Status503,
    /// 504.
    Status504,
    /// 429 with `Retry-After: 1`.
    Limited,
    /// 503 with `Retry-After: 1`.
    Busy,
    /// 429 asking for longer than `max_retry_after`.
    LimitedLong,
    /// 503 asking for longer than `max_retry_after`.
    BusyLong,
    /// 429 with `Retry-After` as an HTTP-date two seconds after the response's `Date`.
    LimitedDate,
    /// 503 with `Retry-After` as an HTTP-date two seconds after the response's `Date`.
    BusyDate,
    /// 200 after three quarters of the attempt timeout.
    Slow,
    /// HTTP/2: `RST_STREAM(REFUSED_STREAM)` on the request's HEADERS (undelivered).
    RefusedStream,
    /// HTTP/2: `GOAWAY` below the request's stream (undelivered).
    GoAwayBelow,
    /// HTTP/2: the whole request read, then `GOAWAY` at its stream (ambiguous).
    GoAwayAt,
    /// HTTP/2: the whole request read, then `RST_STREAM(INTERNAL_ERROR)` (ambiguous).
    StreamReset,
}

const DATE: &str = "Wed, 21 Oct 2015 07:28:00 GMT";
const DATE_PLUS_2: &str = "Wed, 21 Oct 2015 07:28:02 GMT";

impl Fault {
    /// Every fault, simplest first (shrinking replaces a fault with an earlier one).
    pub const ALL: [Fault; 22] = [
        Fault::Ok,
        Fault::Refused,
        Fault::Dns,
        Fault::ConnectTimeout,
        Fault::Reset,
        Fault::BlackHole,
        Fault::BrokenBody,
        Fault::Status500,
        Fault::Status502,
        Fault::Status503,
        Fault::Status504,
        Fault::Limited,
        Fault::Busy,
        Fault::LimitedLong,
        Fault::BusyLong,
        Fault::LimitedDate,
        Fault::BusyDate,
        Fault::Slow,
        Fault::RefusedStream,
        Fault::GoAwayBelow,
        Fault::GoAwayAt,
        Fault::StreamReset,
    ];

    /// The fault's name in `baton check` output.
    pub fn as_str(self) -> &'static str {
        match self {
            Fault::Ok => "ok",
            Fault::Refused => "refused",
            Fault::Dns => "dns",
            Fault::ConnectTimeout => "connect_timeout",
            Fault::Reset => "reset",
            Fault::BlackHole => "black_hole",
            Fault::BrokenBody => "broken_body",
            Fault::Status500 => "500",
            Fault::Status502 => "502",
            Fault::Status503 => "503",
            Fault::Status504 => "504",
            Fault::Limited => "429_retry_after",
            Fault::Busy => "503_retry_after",
            Fault::LimitedLong => "429_retry_after_long",
            Fault::BusyLong => "503_retry_after_long",
            Fault::LimitedDate => "429_retry_after_date",
            Fault::BusyDate => "503_retry_after_date",
            Fault::Slow => "slow",
            Fault::RefusedStream => "refused_stream",
            Fault::GoAwayBelow => "goaway_below",
            Fault::GoAwayAt => "goaway_at",
            Fault::StreamReset => "stream_reset",
        }
    }

    /// Whether the request reaches the provider.
    pub fn delivered(self) -> bool {
        !matches!(
            self,
            Fault::Refused
                | Fault::Dns
                | Fault::ConnectTimeout
                | Fault::RefusedStream
                | Fault::GoAwayBelow
        )
    }

    /// The status and headers of a fault that answers.
    pub(crate) fn response(self, w: &World) -> Option<(u16, Vec<(String, String)>)> {
        let ra = |v: String| vec![("retry-after".to_string(), v)];
        let dated = || {
            vec![
                ("date".to_string(), DATE.to_string()),
                ("retry-after".to_string(), DATE_PLUS_2.to_string()),
            ]
        };
        Some(match self {
            Fault::Ok | Fault::BrokenBody | Fault::Slow => (200, Vec::new()),
            Fault::Status500 => (500, Vec::new()),
            Fault::Status502 => (502, Vec::new()),
            Fault::Status503 => (503, Vec::new()),
            Fault::Status504 => (504, Vec::new()),
            Fault::Limited => (429, ra("1".into())),
            Fault::Busy => (503, ra("1".into())),
            Fault::LimitedLong => (429, ra(w.long_retry_after.to_string())),
            Fault::BusyLong => (503, ra(w.long_retry_after.to_string())),
            Fault::LimitedDate => (429, dated()),
            Fault::BusyDate => (503, dated()),
            Fault::Refused
            | Fault::Dns
            | Fault::ConnectTimeout
            | Fault::Reset
            | Fault::BlackHole
            | Fault::RefusedStream
            | Fault::GoAwayBelow
            | Fault::GoAwayAt
            | Fault::StreamReset => return None,
        })
    }

    /// The simulator step: what happens, after how long.
    fn step(self, w: &World) -> Step {
        let (reply, after) = match self {
            Fault::Refused | Fault::Dns => (Reply::Refuse, Duration::ZERO),
            Fault::ConnectTimeout => (Reply::ConnectTimeout, Duration::ZERO),
            Fault::Reset => (Reply::Reset, Duration::ZERO),
            Fault::BlackHole => (Reply::BlackHole, Duration::ZERO),
            Fault::RefusedStream => (Reply::RefusedStream, Duration::ZERO),
            Fault::GoAwayBelow => (Reply::GoAway { above_last: true }, Duration::ZERO),
            Fault::GoAwayAt => (Reply::GoAway { above_last: false }, Duration::ZERO),
            Fault::StreamReset => (Reply::StreamReset, Duration::ZERO),
            Fault::Slow => (Reply::Status(200, Vec::new()), w.slow),
            other => {
                let (status, headers) = other.response(w).unwrap_or((200, Vec::new()));
                (Reply::Status(status, headers), Duration::ZERO)
            }
        };
        Step { reply, after }
    }
}

/// The kinds of call `baton check` explores (each with and without a deadline, and writes
/// with replayable and one-shot bodies).
///
/// ```
/// use baton_core::verify::CallClass;
/// assert_eq!(CallClass::KeyedWrite.as_str(), "keyed writes");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CallClass {
    /// A GET.
    SafeRead,
    /// A POST without an idempotency key.
    Write,
    /// A POST with an idempotency key.
    KeyedWrite,
}

impl CallClass {
    /// Every class, in report order.
    pub const ALL: [CallClass; 3] = [CallClass::SafeRead, CallClass::Write, CallClass::KeyedWrite];

    /// The name in `baton check` output.
    pub fn as_str(self) -> &'static str {
        match self {
            CallClass::SafeRead => "safe reads",
            CallClass::Write => "writes",
            CallClass::KeyedWrite => "keyed writes",
        }
    }

    /// The method of its calls.
    pub fn method(self) -> Method {
        match self {
            CallClass::SafeRead => Method::GET,
            CallClass::Write | CallClass::KeyedWrite => Method::POST,
        }
    }
}

/// One explored kind of call: a class, a deadline or none, a body that replays or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Variant {
    pub(crate) class: CallClass,
    pub(crate) deadline: Option<Duration>,
    pub(crate) one_shot: bool,
}

impl Variant {
    fn body(self) -> BodyKind {
        match (self.class, self.one_shot) {
            (CallClass::SafeRead, _) => BodyKind::Empty,
            (_, true) => BodyKind::OneShot,
            (_, false) => BodyKind::Replayable,
        }
    }
}

/// One call of a session: its kind, the faults of its attempts in order (200 past the
/// end), and the time that passes before it starts.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Planned {
    pub(crate) variant: Variant,
    pub(crate) faults: Vec<Fault>,
    pub(crate) wait_before: Duration,
}

/// One attempt as sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sent {
    pub(crate) endpoint: usize,
    pub(crate) fault: Fault,
    /// The attempt's connect timeout (a connect timeout fault ends then).
    pub(crate) connect_timeout: Duration,
}

/// What one call did.
#[derive(Debug, Clone)]
pub(crate) struct Traced {
    pub(crate) report: Report,
    pub(crate) sent: Vec<Sent>,
    pub(crate) permissions: (Permission, Permission),
    pub(crate) sources: (PermissionSource, PermissionSource),
    pub(crate) eligible: Vec<bool>,
    pub(crate) key: Option<String>,
    pub(crate) violations: Vec<Violation>,
}

/// The fixed parts of the explored world for one policy.
#[derive(Debug, Clone)]
pub(crate) struct World {
    pub(crate) policy: Policy,
    /// A slow answer's delay.
    pub(crate) slow: Duration,
    /// Seconds of a Retry-After longer than `max_retry_after`.
    pub(crate) long_retry_after: u64,
}

impl World {
    /// The world of `policy`; its engines draw from `seed` when the policy sets none.
    pub(crate) fn new(mut policy: Policy, seed: u64) -> Self {
        policy.settings.seed = Some(policy.settings.seed.unwrap_or(seed));
        // Simulated calls are no traffic: the caller's event sink and metrics hear none.
        policy.events = None;
        #[cfg(feature = "metrics")]
        {
            policy.metric_labels = None;
        }
        let s = &policy.settings;
        World {
            slow: s.attempt_timeout.mul_f64(0.75),
            long_retry_after: s.max_retry_after.as_secs().saturating_add(1),
            policy,
        }
    }

    /// The idempotency key of the `k`-th call of a session.
    pub(crate) fn key(k: usize) -> String {
        format!("check-{}", k + 1)
    }

    /// Runs a session of calls on a fresh engine (health and budget carry from call to
    /// call), from `start`.
    pub(crate) fn run(&self, calls: &[Planned], start: Instant) -> Vec<Traced> {
        let engine = Engine::new(self.policy.clone());
        let mut now = start;
        calls
            .iter()
            .enumerate()
            .map(|(k, c)| {
                now = add(now, c.wait_before);
                let (traced, end) = self.run_call(&engine, k, c, now, start);
                now = end;
                traced
            })
            .collect()
    }

    fn run_call(
        &self,
        engine: &Engine,
        k: usize,
        planned: &Planned,
        start: Instant,
        origin: Instant,
    ) -> (Traced, Instant) {
        let (method, uri, headers) = (
            planned.variant.class.method(),
            Uri::from_static("/"),
            HeaderMap::new(),
        );
        let info = RequestInfo {
            method: &method,
            uri: &uri,
            headers: &headers,
        };
        let key = (planned.variant.class == CallClass::KeyedWrite).then(|| World::key(k));
        let options = CallOptions {
            deadline: planned.variant.deadline,
            idempotency_key: key.clone(),
            ..CallOptions::default()
        };
        let mut call: Call<'_, Head> =
            Call::new(engine, &info, planned.variant.body(), options, start);
        let (permissions, sources) = (call.permissions(), call.permission_sources());
        let eligible = call.eligible_endpoints();
        let mut now = start;
        let mut sent = Vec::new();
        let mut pending: Vec<Pending> = Vec::new();
        let report = loop {
            match call.poll() {
                Action::Send(a) => {
                    let fault = planned.faults.get(sent.len()).copied().unwrap_or(Fault::Ok);
                    sent.push(Sent {
                        endpoint: a.endpoint,
                        fault,
                        connect_timeout: a.connect_timeout,
                    });
                    let (after, outcome) = sim::pending_outcome(&fault.step(self), &a);
                    // The explorer's faults hold no redirect.
                    pending.push(Pending {
                        number: a.number,
                        at: add(now, after),
                        outcome,
                        redirects: Vec::new(),
                    });
                }
                Action::Discard(n) => pending.retain(|p| p.number != n),
                Action::WaitUntil(t) => wait(&mut call, &mut pending, Some(t), &mut now, origin),
                Action::WaitForAttempt => wait(&mut call, &mut pending, None, &mut now, origin),
                Action::Done => break call.take_done().into_report(),
            }
        };
        let mut violations = judge(&self.policy, &method, &report);
        let received = sent.iter().filter(|s| s.fault.delivered()).count();
        violations.extend(understated_by_receipts(
            &self.policy,
            &report,
            received,
            &violations,
        ));
        let traced = Traced {
            report,
            sent,
            permissions,
            sources,
            eligible,
            key,
            violations,
        };
        (traced, now)
    }
}

/// Delivers the earliest pending outcome, or the timer at `until`, whichever is first;
/// with neither, cancels the call (the engine asked to wait for nothing).
fn wait(
    call: &mut Call<'_, Head>,
    pending: &mut Vec<Pending>,
    until: Option<Instant>,
    now: &mut Instant,
    origin: Instant,
) {
    let next = pending
        .iter()
        .enumerate()
        .min_by_key(|(_, p)| (p.at, p.number))
        .map(|(k, p)| (k, p.at));
    let wall = |t: Instant| {
        SystemTime::UNIX_EPOCH
            + Duration::from_secs(1_700_000_000)
            + t.saturating_duration_since(origin)
    };
    match (next, until) {
        (Some((k, at)), u) if u.is_none_or(|u| at <= u) => {
            let p = pending.remove(k);
            *now = (*now).max(p.at);
            sim::deliver(call, p, *now, wall(*now));
        }
        (_, Some(u)) => {
            *now = (*now).max(u);
            call.handle(crate::call::Input::Timer, *now);
        }
        _ => call.handle(crate::call::Input::Cancel, *now),
    }
}
