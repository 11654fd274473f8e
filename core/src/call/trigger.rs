//! The trigger (SPEC 2.3): does this outcome call for another attempt at all? One pure
//! function of the outcome, the call's class and the settings. Whether another attempt is
//! *allowed* is the gate's question, not this one.
//!
//! A transport failure or timeout always triggers. A response triggers when the policy's
//! classifier says so, or, without a verdict, when its status is in the trigger set of the
//! call's class: the wide `trigger_statuses` for calls that may repeat without relying on
//! an idempotency key, the narrow `key_trigger_statuses` for keyed calls and for calls that
//! may repeat nowhere (a 500, 502 or 504 may come after the provider passed the work on),
//! and in every case the `not_processed` statuses.

use http::StatusCode;

use super::class::Class;
use crate::policy::{Settings, Verdict};

/// What a response means for the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Trigger {
    /// Another attempt is called for.
    Yes,
    /// The response is the answer (`success`: the classifier labelled it a success).
    No { success: bool },
}

/// Whether a response with `status` (and the classifier's `verdict`) triggers.
#[inline]
pub(crate) fn response(
    status: StatusCode,
    verdict: Option<Verdict>,
    class: &Class,
    settings: &Settings,
) -> Trigger {
    match verdict {
        Some(Verdict::Trigger) => Trigger::Yes,
        Some(Verdict::Success) => Trigger::No { success: true },
        Some(Verdict::Answer) => Trigger::No { success: false },
        None => {
            let set = if class.repeatable() && !class.key_reliant() {
                &settings.trigger_statuses
            } else {
                &settings.key_trigger_statuses
            };
            if set.contains(status) || settings.not_processed.contains(status) {
                Trigger::Yes
            } else {
                Trigger::No { success: false }
            }
        }
    }
}
