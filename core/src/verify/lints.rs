//! Settings that are legal but likely wrong, each with the setting's name and one reason.

use std::fmt;

use crate::backoff::Jitter;
use crate::limit::OnLimit;
use crate::policy::{BreakerRule, Policy, Unavailable};

/// A legal setting that is likely a mistake.
///
/// ```
/// use baton_core::verify::Lint;
/// let l = Lint { setting: "policy.budget".into(), reason: "off".into() };
/// assert_eq!(l.to_string(), "policy.budget: off");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Lint {
    /// The setting, as the config file names it (`policy.key_trigger_statuses`,
    /// `endpoint.backup`).
    pub setting: String,
    /// Why it is likely wrong.
    pub reason: String,
}

impl fmt::Display for Lint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.setting, self.reason)
    }
}

/// What the exploration saw that the lints need.
pub(crate) struct Seen<'a> {
    /// Worst-case attempts of any class.
    pub(crate) worst_attempts: u32,
    /// Whether a write (not a safe method) resolves failover `Always` from the policy's
    /// permission function.
    pub(crate) writes_fail_over_always: bool,
    /// Calls per endpoint that attempted it.
    pub(crate) attempted: &'a [usize],
    /// Calls explored.
    pub(crate) explored: usize,
}

/// Every lint of `policy`, status sets first, then timing, load and reachability.
pub(crate) fn lints(policy: &Policy, seen: &Seen<'_>) -> Vec<Lint> {
    let mut out = Vec::new();
    let mut lint = |setting: &str, reason: String| {
        out.push(Lint {
            setting: setting.to_string(),
            reason,
        })
    };
    status_lints(policy, &mut lint);
    method_lints(policy, &mut lint);
    deadline_lints(policy, &mut lint);
    load_lints(policy, seen, &mut lint);
    for (e, n) in policy.endpoints.iter().zip(seen.attempted) {
        if *n == 0 {
            lint(
                &format!("endpoint.{}", e.id()),
                format!(
                    "never attempted in {} explored calls: always ineligible, or shadowed by the endpoints before it and the attempt cap",
                    seen.explored
                ),
            );
        }
    }
    out
}

/// The status sets: key-reliant 500s, promises a provider cannot keep, client errors.
fn status_lints(policy: &Policy, lint: &mut impl FnMut(&str, String)) {
    let s = &policy.settings;
    let passed_on: Vec<u16> = [500, 502, 504]
        .into_iter()
        .filter(|c| s.key_trigger_statuses.contains_code(*c))
        .collect();
    if !passed_on.is_empty() {
        lint(
            "policy.key_trigger_statuses",
            format!(
                "contains {passed_on:?}: a keyed write is then sent again after an answer that may come after the provider passed the work on, where the key does not reach"
            ),
        );
    }
    let odd_not_processed: Vec<u16> = s
        .not_processed
        .codes()
        .filter(|&c| c < 400 || (c >= 500 && c != 503))
        .collect();
    if !odd_not_processed.is_empty() {
        lint(
            "policy.not_processed",
            format!(
                "contains {odd_not_processed:?}: a provider may have done the work before answering that, yet writes then fail over as if it had not"
            ),
        );
    }
    // A credential slot adds its refusals (401, and 403 where configured) to both sets
    // itself (SPEC 9): those are refreshed and re-sent, not repeated blindly.
    let refusal = |c: u16| {
        (policy
            .endpoints
            .iter()
            .filter_map(|e| e.credential_settings()))
        .any(|cs| c == 401 || (c == 403 && cs.refresh_on_403))
    };
    for (setting, set) in [
        ("policy.trigger_statuses", &s.trigger_statuses),
        ("policy.key_trigger_statuses", &s.key_trigger_statuses),
    ] {
        let client_errors: Vec<u16> = (set.codes())
            .filter(|&c| c < 300 || ((400..500).contains(&c) && ![408, 425, 429].contains(&c)))
            .filter(|&c| !refusal(c))
            .collect();
        if !client_errors.is_empty() {
            lint(
                setting,
                format!(
                    "contains {client_errors:?}: a success or a client error repeats the same answer at every endpoint"
                ),
            );
        }
    }
}

/// Load on providers: budget, breaker, jitter, hedging, a limiter that waits forever.
fn load_lints(policy: &Policy, seen: &Seen<'_>, lint: &mut impl FnMut(&str, String)) {
    let s = &policy.settings;
    if s.deadline.is_none() && matches!(&s.rate_limit, Some(r) if r.on_limit == OnLimit::Wait) {
        lint(
            "policy.rate_limit.on_limit",
            "wait with no deadline: while other calls keep taking the tokens, a call waits without end (set policy.deadline, or fail_fast)".into(),
        );
    }
    if s.budget.is_none() && seen.worst_attempts > 2 {
        lint(
            "policy.budget",
            format!(
                "off with up to {} attempts per call: an outage multiplies the load on every provider by as much",
                seen.worst_attempts
            ),
        );
    }
    if matches!(&s.budget, Some(b) if b.ratio >= 1.0) {
        lint(
            "policy.budget.ratio",
            "1 or more: every first attempt funds a full retry, so the budget no longer limits an outage's load".into(),
        );
    }
    if s.breaker.rule == BreakerRule::Disabled && s.unavailable == Unavailable::Skip {
        lint(
            "policy.breaker.rule",
            "disabled while unavailable endpoints are skipped: only Retry-After ever makes one unavailable, so a dead endpoint is never skipped".into(),
        );
    }
    if s.backoff.jitter == Jitter::None && seen.worst_attempts > 1 {
        lint(
            "policy.backoff.jitter",
            "none: clients that failed together retry together, in lock-step".into(),
        );
    }
    if s.hedge.is_some() && seen.writes_fail_over_always {
        lint(
            "policy.hedge",
            "on while the permission function lets writes fail over always: a write that opts into hedging runs at two providers at once".into(),
        );
    }
}

/// Methods the explorer does not send: it explores GET and POST calls, so a permission
/// function that lets PUT, PATCH or DELETE repeat is named here rather than proven.
fn method_lints(policy: &Policy, lint: &mut impl FnMut(&str, String)) {
    let Some(permission) = &policy.permission else {
        return;
    };
    let (uri, headers) = (http::Uri::from_static("/"), http::HeaderMap::new());
    for method in [http::Method::PUT, http::Method::PATCH, http::Method::DELETE] {
        let info = crate::policy::RequestInfo {
            method: &method,
            uri: &uri,
            headers: &headers,
        };
        let o = permission(&info);
        let always = [("retry", o.retry), ("failover", o.failover)]
            .into_iter()
            .filter(|(_, p)| *p == Some(crate::Permission::Always))
            .map(|(name, _)| name)
            .collect::<Vec<_>>();
        if !always.is_empty() {
            lint(
                &format!("permissions.{method}"),
                format!(
                    "{} always: a {method} that may have executed is sent again, and this check explores GET and POST calls only, so it proves nothing of {method}",
                    always.join(" and ")
                ),
            );
        }
    }
}

fn deadline_lints(policy: &Policy, lint: &mut impl FnMut(&str, String)) {
    let s = &policy.settings;
    let Some(deadline) = s.deadline else {
        return;
    };
    let longest = (0..policy.endpoints.len())
        .map(|e| policy.attempt_timeout_for(e))
        .max()
        .unwrap_or(s.attempt_timeout);
    if longest >= deadline {
        lint(
            "policy.attempt_timeout",
            format!(
                "{longest:?} is at or above the deadline ({deadline:?}): one slow attempt uses the whole call, and no other endpoint is ever tried after it"
            ),
        );
    }
    if s.max_retry_after > deadline {
        lint(
            "policy.max_retry_after",
            format!(
                "{:?} is above the deadline ({deadline:?}): a Retry-After the call accepts to wait for can never be waited out",
                s.max_retry_after
            ),
        );
    }
}
