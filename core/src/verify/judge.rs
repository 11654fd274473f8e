//! The safety judge: did a call do, or hide, work twice where that could matter?
//!
//! The judge looks only at what happened (the report, plus what a provider received when
//! that is known), never at the permissions that allowed it: a permission function that
//! lets every POST fail over is exactly what it is here to catch. Its rules:
//!
//! - **Repeat-safe pairs.** Two attempts may both have done the work harmlessly when the
//!   method is idempotent by RFC 9110 (GET, HEAD, OPTIONS, TRACE, PUT, DELETE), or when the
//!   call carries an idempotency key, both attempts went to one idempotency group (SPEC
//!   1.1), and the earlier one was not answered 500, 502 or 504 (such an answer may come
//!   after the provider passed the work on, where the key does not reach: SPEC 2.3).
//! - **repeated**: an attempt that may have executed the call (SPEC 1: ambiguous, or a
//!   response outside `not_processed`, or cut by the deadline or cancelled after sending)
//!   followed by a later attempt that reached a provider (anything but an undelivered or
//!   locally rejected failure), the pair not repeat-safe.
//! - **hidden**: the call returned a response although another attempt, not repeat-safe
//!   with the answering one, may have executed it: the caller sees one answer and cannot
//!   tell that a second provider may have done the work. A retained response (SPEC 2.10)
//!   returned after a later attempt that may have executed a non-idempotent call is hidden
//!   too, whatever the endpoints: the caller reads "not done" where it may be done.
//! - **understated**: the result's `may_have_executed` is false although an attempt may
//!   have executed the call, or a provider received the request and did not answer with a
//!   `not_processed` status.
//!
//! The judge trusts the policy's `not_processed` set: it is the provider's promise. PUT and
//! DELETE count as idempotent, as RFC 9110 defines them, so a permission function that lets
//! them fail over is not flagged (the explorer's writes are POSTs); a provider whose PUT
//! does more than replace is better checked with POST-like permissions.

use std::fmt;

use http::Method;

use crate::policy::Policy;
use crate::report::{AttemptRecord, AttemptResult, FailureClass, Outcome, Report, TimeoutPhase};

/// Which safety rule a call broke.
///
/// ```
/// use baton_core::verify::ViolationKind;
/// assert_eq!(ViolationKind::Repeated.as_str(), "repeated");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ViolationKind {
    /// Work that may have been done was sent again where the repeat is not harmless.
    Repeated,
    /// A response was returned while another attempt may have done the work unprotected.
    Hidden,
    /// `may_have_executed` is false although a provider may have done the work.
    Understated,
}

impl ViolationKind {
    /// The name used in `baton check` output and vector expectations.
    pub fn as_str(self) -> &'static str {
        match self {
            ViolationKind::Repeated => "repeated",
            ViolationKind::Hidden => "hidden",
            ViolationKind::Understated => "understated",
        }
    }
}

/// One broken safety rule, with the attempts involved.
///
/// ```
/// use baton_core::verify::{Violation, ViolationKind};
/// let v = Violation { kind: ViolationKind::Repeated, text: "attempt 2 at b".into() };
/// assert_eq!(v.to_string(), "repeated: attempt 2 at b");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The rule.
    pub kind: ViolationKind,
    /// What happened, naming attempts and endpoints.
    pub text: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind.as_str(), self.text)
    }
}

/// Whether a method is idempotent by RFC 9110 section 9.2.2: repeating it has the effect
/// of sending it once.
///
/// ```
/// assert!(baton_core::verify::is_idempotent_method(&http::Method::PUT));
/// assert!(!baton_core::verify::is_idempotent_method(&http::Method::POST));
/// ```
pub fn is_idempotent_method(method: &Method) -> bool {
    crate::permission::is_safe_method(method) || *method == Method::PUT || *method == Method::DELETE
}

/// Judges one finished call from its report: the rules of the module docs, in order,
/// every violation found. `method` is the call's method; the key and the attempts come
/// from the report. The conformance runner uses this for vectors that expect
/// `safe = true`, so a counterexample fails there exactly as `baton check` reported it.
///
/// ```
/// use std::time::Instant;
/// use baton_core::{sim::{Script, Sim}, CallOptions, Endpoint, Permission, Policy};
/// let policy = Policy::builder()
///     .endpoint(Endpoint::new("a", "https://a.example/"))
///     .endpoint(Endpoint::new("b", "https://b.example/"))
///     .build()
///     .unwrap();
/// let mut sim = Sim::new(policy.clone(), Instant::now());
/// sim.script("a", Script::reset());
/// // A call that forces failover for a POST: the reset may have charged at "a".
/// let options = CallOptions { failover: Some(Permission::Always), ..CallOptions::default() };
/// let run = sim.run(http::Method::POST, options);
/// let found = baton_core::verify::judge(&policy, &http::Method::POST, &run.report);
/// assert_eq!(found[0].kind, baton_core::verify::ViolationKind::Repeated);
/// ```
pub fn judge(policy: &Policy, method: &Method, report: &Report) -> Vec<Violation> {
    let judge = Judge {
        policy,
        idempotent: is_idempotent_method(method),
        keyed: report.idempotency_key.is_some(),
    };
    let mut found = Vec::new();
    judge.repeated(&report.attempts, &mut found);
    judge.hidden(report, &mut found);
    if !report.may_have_executed {
        if let Some(a) = report.attempts.iter().find(|a| judge.may_have_executed(a)) {
            found.push(Violation {
                kind: ViolationKind::Understated,
                text: format!(
                    "may_have_executed is false, but attempt {} at {} ended {} and may have executed",
                    a.number,
                    a.endpoint_id,
                    describe(&a.result)
                ),
            });
        }
    }
    found
}

/// The ground-truth half of the understated rule, for a runner that knows how many
/// requests of the call its providers received: `received` requests, of which only those
/// answered with a `not_processed` status did nothing, yet `may_have_executed` is false.
/// `None` when `found` already holds an understated violation (each call reports the rule
/// once).
///
/// ```
/// use std::time::Instant;
/// use baton_core::{sim::{Script, Sim}, CallOptions, Endpoint, Policy};
/// let policy = Policy::builder().endpoint(Endpoint::new("a", "https://a.example/")).build().unwrap();
/// let mut sim = Sim::new(policy.clone(), Instant::now());
/// sim.script("a", Script::refuse());
/// let run = sim.run(http::Method::POST, CallOptions::default());
/// assert!(!run.report.may_have_executed);
/// // Had a provider received one of those requests, the result would understate it.
/// let v = baton_core::verify::understated_by_receipts(&policy, &run.report, 1, &[]);
/// assert!(v.is_some());
/// assert!(baton_core::verify::understated_by_receipts(&policy, &run.report, 0, &[]).is_none());
/// ```
pub fn understated_by_receipts(
    policy: &Policy,
    report: &Report,
    received: usize,
    found: &[Violation],
) -> Option<Violation> {
    if report.may_have_executed || found.iter().any(|v| v.kind == ViolationKind::Understated) {
        return None;
    }
    let not_processed = &policy.settings.not_processed;
    let promised = report
        .attempts
        .iter()
        .filter(|a| a.result.status().is_some_and(|s| not_processed.contains(s)))
        .count();
    (received > promised).then(|| Violation {
        kind: ViolationKind::Understated,
        text: format!(
            "may_have_executed is false, but providers received {received} request(s) of the call and only {promised} answer(s) promised nothing was done"
        ),
    })
}

struct Judge<'p> {
    policy: &'p Policy,
    idempotent: bool,
    keyed: bool,
}

impl Judge<'_> {
    fn may_have_executed(&self, a: &AttemptRecord) -> bool {
        a.result
            .may_have_executed(&self.policy.settings.not_processed)
    }

    /// Whether `later` may do harmlessly what `earlier` may have done.
    fn repeat_safe(&self, earlier: &AttemptRecord, later: &AttemptRecord) -> bool {
        if self.idempotent {
            return true;
        }
        let passed_on = matches!(
            earlier.result.status().map(|s| s.as_u16()),
            Some(500 | 502 | 504)
        );
        self.keyed && !passed_on && self.policy.same_group(earlier.endpoint, later.endpoint)
    }

    fn repeated(&self, attempts: &[AttemptRecord], found: &mut Vec<Violation>) {
        for (k, later) in attempts.iter().enumerate() {
            if !reached(&later.result) {
                continue;
            }
            let earlier = attempts[..k]
                .iter()
                .find(|e| self.may_have_executed(e) && !self.repeat_safe(e, later));
            if let Some(e) = earlier {
                found.push(Violation {
                    kind: ViolationKind::Repeated,
                    text: format!(
                        "attempt {} at {} ended {} and may have executed; attempt {} then reached {}{}",
                        e.number,
                        e.endpoint_id,
                        describe(&e.result),
                        later.number,
                        later.endpoint_id,
                        self.why_not_safe(e, later)
                    ),
                });
                return;
            }
        }
    }

    fn why_not_safe(&self, earlier: &AttemptRecord, later: &AttemptRecord) -> &'static str {
        if !self.keyed {
            " (a non-idempotent method without an idempotency key)"
        } else if !self.policy.same_group(earlier.endpoint, later.endpoint) {
            " (another idempotency group: the key is not shared there)"
        } else {
            " (after a 500, 502 or 504 the provider may have passed the work on)"
        }
    }

    fn hidden(&self, report: &Report, found: &mut Vec<Violation>) {
        let Outcome::Response {
            attempt, retained, ..
        } = report.outcome
        else {
            return;
        };
        let Some(answer) = report.attempts.iter().find(|a| a.number == attempt) else {
            return;
        };
        let later = report
            .attempts
            .iter()
            .find(|o| o.number > attempt && self.may_have_executed(o));
        if let (true, false, Some(o)) = (retained, self.idempotent, later) {
            found.push(Violation {
                kind: ViolationKind::Hidden,
                text: format!(
                    "the call returned the retained response of attempt {} at {}, while the later attempt {} at {} ended {} and may have executed",
                    answer.number,
                    answer.endpoint_id,
                    o.number,
                    o.endpoint_id,
                    describe(&o.result)
                ),
            });
            return;
        }
        let other = report.attempts.iter().find(|o| {
            let (first, second) = if o.number < attempt {
                (*o, answer)
            } else {
                (answer, *o)
            };
            o.number != attempt && self.may_have_executed(o) && !self.repeat_safe(first, second)
        });
        if let Some(o) = other {
            found.push(Violation {
                kind: ViolationKind::Hidden,
                text: format!(
                    "the call returned the response of attempt {} at {}, while attempt {} at {} ended {} and may have executed too",
                    answer.number,
                    answer.endpoint_id,
                    o.number,
                    o.endpoint_id,
                    describe(&o.result)
                ),
            });
        }
    }
}

/// Whether an attempt's request may have reached its provider: anything but a failure
/// proven to have happened before a byte was sent.
pub(crate) fn reached(result: &AttemptResult) -> bool {
    !matches!(
        result,
        AttemptResult::Failed(
            FailureClass::Undelivered | FailureClass::Untrusted | FailureClass::RejectedLocally,
        ) | AttemptResult::TimedOut(TimeoutPhase::Connect)
            | AttemptResult::ReplayFailed
    )
}

fn describe(result: &AttemptResult) -> String {
    match result {
        AttemptResult::Response(s) => format!("with a {}", s.as_u16()),
        AttemptResult::AfterRedirect(s) => format!("with a {} after a redirect", s.as_u16()),
        other => other.as_str().to_string(),
    }
}
