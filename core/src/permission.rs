//! Permission (SPEC 2.2): may this call make another attempt, and where.
//!
//! Two permissions, retry and failover, each resolved on its own: call setting, then the
//! policy function, then inference (safe method, idempotency key), then the conservative
//! default. The attempt rule is sticky: it looks at every endpoint that may have executed
//! the call so far, and at idempotency groups. This module decides; it never sends.

use http::Method;

/// How far one permission goes.
///
/// ```
/// use baton_core::Permission;
/// assert!(Permission::Always.allows(true));
/// assert!(Permission::IfUndelivered.allows(false));
/// assert!(!Permission::IfUndelivered.allows(true));
/// assert!(!Permission::Never.allows(false));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Permission {
    /// No attempt of this kind.
    Never,
    /// Only while nothing may have executed the call.
    IfUndelivered,
    /// Always (repeating is harmless, or de-duplicated by the provider).
    Always,
}

impl Permission {
    /// Whether this permission admits an attempt, given whether the attempt would repeat
    /// work that may already have been done.
    pub fn allows(self, may_repeat_work: bool) -> bool {
        match self {
            Permission::Never => false,
            Permission::IfUndelivered => !may_repeat_work,
            Permission::Always => true,
        }
    }
}

/// Retry and failover permissions as set by a call or a policy function; `None` defers to
/// the next source (SPEC 2.2).
///
/// ```
/// use baton_core::{Permission, PermissionOverride};
/// let p = PermissionOverride { retry: Some(Permission::Always), failover: None };
/// assert_eq!(PermissionOverride::deny(), PermissionOverride::both(Permission::Never));
/// # let _ = p;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PermissionOverride {
    /// Retry permission (an attempt at an endpoint the call already attempted).
    pub retry: Option<Permission>,
    /// Failover permission (an attempt at an endpoint the call has not attempted).
    pub failover: Option<Permission>,
}

impl PermissionOverride {
    /// Both permissions set to `p`.
    pub fn both(p: Permission) -> Self {
        PermissionOverride {
            retry: Some(p),
            failover: Some(p),
        }
    }

    /// At most one attempt.
    pub fn deny() -> Self {
        Self::both(Permission::Never)
    }
}

/// Where a resolved permission came from (see [`Call::permission_sources`](crate::Call::permission_sources)).
///
/// ```
/// use baton_core::PermissionSource;
/// assert_ne!(PermissionSource::Call, PermissionSource::Default);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PermissionSource {
    /// Set on the call.
    Call,
    /// Set by the policy function.
    PolicyFn,
    /// Inferred from a safe method.
    SafeMethod,
    /// Inferred from an idempotency key.
    IdempotencyKey,
    /// The conservative default.
    Default,
}

/// The resolved permissions of one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Resolved {
    pub retry: Permission,
    pub failover: Permission,
    pub retry_source: PermissionSource,
    pub failover_source: PermissionSource,
}

/// Whether `method` is safe (GET, HEAD, OPTIONS, TRACE).
#[inline]
pub fn is_safe_method(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE
    )
}

/// Resolves both permissions, each on its own: call setting, policy function, inference,
/// conservative default.
#[inline]
pub(crate) fn resolve(
    call: PermissionOverride,
    policy_fn: Option<PermissionOverride>,
    method: &Method,
    has_key: bool,
) -> Resolved {
    let pf = policy_fn.unwrap_or_default();
    let (inferred_retry, inferred_failover, src) = if is_safe_method(method) {
        (
            Permission::Always,
            Permission::Always,
            PermissionSource::SafeMethod,
        )
    } else if has_key {
        (
            Permission::Always,
            Permission::IfUndelivered,
            PermissionSource::IdempotencyKey,
        )
    } else {
        (
            Permission::IfUndelivered,
            Permission::IfUndelivered,
            PermissionSource::Default,
        )
    };
    let pick = |c: Option<Permission>, f: Option<Permission>, inferred: Permission| match (c, f) {
        (Some(p), _) => (p, PermissionSource::Call),
        (None, Some(p)) => (p, PermissionSource::PolicyFn),
        (None, None) => (inferred, src),
    };
    let (retry, retry_source) = pick(call.retry, pf.retry, inferred_retry);
    let (failover, failover_source) = pick(call.failover, pf.failover, inferred_failover);
    Resolved {
        retry,
        failover,
        retry_source,
        failover_source,
    }
}

/// The sticky rule of SPEC 2.2 for an attempt at endpoint `x`, read as invariant 2 of
/// SPEC 6 states it: with executors both outside and inside `x`'s group, both halves
/// hold, so the attempt needs failover *and* retry `Always` (2.2's "otherwise" alone
/// would let failover `Always` send the call back to an endpoint that may have done it).
///
/// `executed` is the set of endpoints that may have executed the call (bit i = endpoint i),
/// `attempted` the set the call already attempted, `same_group(a, b)` the idempotency-group
/// relation, and `keyed` whether the call carries an idempotency key (groups only
/// de-duplicate keyed calls).
pub(crate) fn attempt_allowed(
    perms: &Resolved,
    x: usize,
    executed: u64,
    attempted: u64,
    keyed: bool,
    same_group: impl Fn(usize, usize) -> bool,
) -> bool {
    if attempted == 0 && executed == 0 {
        // The call's first attempt needs no permission: permissions govern another one.
        return true;
    }
    let in_group = |e: usize| if keyed { same_group(e, x) } else { e == x };
    let mut outside = false;
    let mut inside = false;
    let mut bits = executed;
    while bits != 0 {
        let e = bits.trailing_zeros() as usize;
        bits &= bits - 1;
        if in_group(e) {
            inside = true;
        } else {
            outside = true;
        }
    }
    if outside || inside {
        // Both halves of invariant 2 (SPEC 6) at once: an executor outside X's group needs
        // failover `Always`, and X (or its group) having executed needs retry `Always`.
        // With executors on both sides, a failover `Always` alone does not send the call
        // back to an endpoint that may have done it.
        (!outside || perms.failover == Permission::Always)
            && (!inside || perms.retry == Permission::Always)
    } else if attempted & (1u64 << x) != 0 {
        perms.retry != Permission::Never
    } else {
        perms.failover != Permission::Never
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(retry: Permission, failover: Permission) -> Resolved {
        Resolved {
            retry,
            failover,
            retry_source: PermissionSource::Call,
            failover_source: PermissionSource::Call,
        }
    }

    #[test]
    fn safe_methods_infer_always_always() {
        for m in [Method::GET, Method::HEAD, Method::OPTIONS, Method::TRACE] {
            let p = resolve(PermissionOverride::default(), None, &m, false);
            assert_eq!(
                (p.retry, p.failover),
                (Permission::Always, Permission::Always)
            );
        }
    }

    #[test]
    fn idempotency_key_infers_retry_always_failover_if_undelivered() {
        let p = resolve(PermissionOverride::default(), None, &Method::POST, true);
        assert_eq!(
            (p.retry, p.failover),
            (Permission::Always, Permission::IfUndelivered)
        );
        assert_eq!(p.retry_source, PermissionSource::IdempotencyKey);
    }

    #[test]
    fn unsafe_method_without_key_defaults_to_if_undelivered() {
        let p = resolve(PermissionOverride::default(), None, &Method::PATCH, false);
        assert_eq!(
            (p.retry, p.failover),
            (Permission::IfUndelivered, Permission::IfUndelivered)
        );
        assert_eq!(p.failover_source, PermissionSource::Default);
    }

    #[test]
    fn call_setting_beats_policy_fn_which_beats_inference_each_on_its_own() {
        let call = PermissionOverride {
            retry: Some(Permission::Never),
            failover: None,
        };
        let f = PermissionOverride {
            retry: Some(Permission::Always),
            failover: Some(Permission::Always),
        };
        let p = resolve(call, Some(f), &Method::POST, false);
        assert_eq!(p.retry, Permission::Never);
        assert_eq!(p.retry_source, PermissionSource::Call);
        assert_eq!(p.failover, Permission::Always);
        assert_eq!(p.failover_source, PermissionSource::PolicyFn);
    }

    #[test]
    fn policy_fn_may_defer_one_permission_to_inference() {
        let f = PermissionOverride {
            retry: None,
            failover: Some(Permission::Never),
        };
        let p = resolve(PermissionOverride::default(), Some(f), &Method::GET, false);
        assert_eq!(p.retry, Permission::Always);
        assert_eq!(p.retry_source, PermissionSource::SafeMethod);
        assert_eq!(p.failover, Permission::Never);
    }

    #[test]
    fn nothing_executed_uses_the_permission_of_the_attempt_kind() {
        let p = r(Permission::Never, Permission::IfUndelivered);
        let same = |a: usize, b: usize| a == b;
        assert!(attempt_allowed(&p, 1, 0, 0b01, false, same)); // failover
        assert!(!attempt_allowed(&p, 0, 0, 0b01, false, same)); // retry, Never
    }

    #[test]
    fn executed_elsewhere_needs_failover_always() {
        let same = |a: usize, b: usize| a == b;
        let keyed = r(Permission::Always, Permission::IfUndelivered);
        assert!(!attempt_allowed(&keyed, 1, 0b01, 0b01, true, same));
        assert!(attempt_allowed(&keyed, 0, 0b01, 0b01, true, same));
        let safe = r(Permission::Always, Permission::Always);
        assert!(attempt_allowed(&safe, 1, 0b01, 0b01, false, same));
    }

    #[test]
    fn same_group_failover_of_keyed_call_counts_as_retry() {
        let group = |a: usize, b: usize| a == b || (a < 2 && b < 2);
        let keyed = r(Permission::Always, Permission::IfUndelivered);
        // endpoint 0 may have executed; 1 shares its group, 2 does not.
        assert!(attempt_allowed(&keyed, 1, 0b001, 0b001, true, group));
        assert!(!attempt_allowed(&keyed, 2, 0b001, 0b001, true, group));
        // Without a key, a group de-duplicates nothing.
        let plain = r(Permission::Always, Permission::IfUndelivered);
        assert!(!attempt_allowed(&plain, 1, 0b001, 0b001, false, group));
    }

    #[test]
    fn execution_in_two_groups_is_never_undone_by_returning_home() {
        let group = |a: usize, b: usize| a == b;
        let keyed = r(Permission::Always, Permission::IfUndelivered);
        // 0 and 1 both may have executed (failover was Always earlier, say): an attempt at
        // 0 now has an executor outside its group, so it needs failover Always.
        assert!(!attempt_allowed(&keyed, 0, 0b011, 0b011, true, group));
    }

    /// SPEC 6, invariant 2: with executors inside and outside X's group, the attempt needs
    /// both permissions `Always`. Before, failover `Always` alone sent a call whose retry
    /// is `Never` back to an endpoint that may have done it (a new round after A and B).
    #[test]
    fn executors_on_both_sides_need_both_permissions_always() {
        let same = |a: usize, b: usize| a == b;
        let no_retry = r(Permission::Never, Permission::Always);
        assert!(!attempt_allowed(&no_retry, 0, 0b11, 0b11, false, same));
        let if_undelivered = r(Permission::IfUndelivered, Permission::Always);
        assert!(!attempt_allowed(
            &if_undelivered,
            1,
            0b11,
            0b11,
            false,
            same
        ));
        let both = r(Permission::Always, Permission::Always);
        assert!(attempt_allowed(&both, 0, 0b11, 0b11, false, same));
        // Only outside: failover `Always` is enough, whatever the retry permission.
        assert!(attempt_allowed(&no_retry, 1, 0b01, 0b01, false, same));
    }
}
