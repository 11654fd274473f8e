//! Circuit breakers usable on their own (SPEC 2.5): guard any send, a gRPC call, an SMTP
//! delivery, a push notification, with the same rules as a baton call's endpoints.
//!
//! [`Circuit::allow`] asks whether a send may go now: a [`Permit`], or [`CircuitOpen`]
//! with the time to ask again. The permit records how the send ended
//! ([`Permit::success`], [`Permit::failure`]); a permit dropped unreported counts for
//! nothing and frees its probe slot at once. While half-open exactly `probe_quota` permits
//! (one by default) are out at a time; the others are refused until the probe reports, or
//! until a full open time passed without a report. As on the call path, a closed circuit
//! allows and records a success with one atomic read, writing nothing other threads write.
//!
//! There are no timers: time is the `now` each method is given.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use baton_core::{Breaker, BreakerRule, BreakerState, Breakers};
//!
//! let settings = Breaker {
//!     rule: BreakerRule::Consecutive { failures: 1 },
//!     open: Duration::from_secs(5),
//!     ..Breaker::default()
//! };
//! let breakers = Breakers::new(settings, ["apns", "fcm"]).unwrap();
//! let apns = breakers.circuit("apns").unwrap();
//! let t0 = Instant::now();
//!
//! apns.allow(t0).unwrap().failure(t0); // the push failed: the circuit opens
//! let open = apns.allow(t0).unwrap_err();
//! assert_eq!(open.retry_at, Some(t0 + Duration::from_secs(5)));
//!
//! let t1 = t0 + Duration::from_secs(5);
//! let probe = apns.allow(t1).unwrap(); // half-open: one probe
//! assert!(probe.is_probe());
//! assert!(apns.allow(t1).is_err()); // the others wait for it
//! probe.success(t1);
//! assert_eq!(apns.state(t1), BreakerState::Closed);
//! ```

use std::time::Instant;

use crate::event::{Event, EventKind};
use crate::health::{EndpointHealth, Health, Record, Ticket, Transitions};
use crate::policy::{check_breaker, Breaker, ConfigError, EventSink};
use crate::time::since;
use crate::BreakerState;

/// A set of circuit breakers by key, for sends that are not baton calls. The keys are
/// fixed when the set is made, so asking for a circuit takes no lock.
///
/// ```
/// use baton_core::{Breaker, Breakers};
/// let breakers = Breakers::new(Breaker::default(), ["smtp-primary", "smtp-backup"]).unwrap();
/// assert!(breakers.circuit("smtp-backup").is_some());
/// assert!(breakers.circuit("other").is_none());
/// assert!(Breakers::new(Breaker::default(), ["a", "a"]).is_err());
/// ```
#[derive(Debug)]
pub struct Breakers {
    health: Health,
    keys: Vec<String>,
}

impl Breakers {
    /// Breakers for `keys` with the `settings` (validated like a policy's: the error names
    /// the setting). Keys must be non-empty and distinct.
    pub fn new(
        settings: Breaker,
        keys: impl IntoIterator<Item = impl Into<String>>,
    ) -> Result<Breakers, ConfigError> {
        check_breaker(&settings)?;
        let keys: Vec<String> = keys.into_iter().map(Into::into).collect();
        for (i, k) in keys.iter().enumerate() {
            if k.is_empty() {
                return Err(ConfigError::EmptyId { index: i });
            }
            if keys[..i].contains(k) {
                return Err(ConfigError::DuplicateId { id: k.clone() });
            }
        }
        Ok(Breakers {
            health: Health::new(settings, keys.len()),
            keys,
        })
    }

    /// The circuit of `key`, if the set has it.
    pub fn circuit(&self, key: &str) -> Option<Circuit<'_>> {
        let index = self.keys.iter().position(|k| k == key)?;
        Some(Circuit {
            health: &self.health,
            index,
            key: &self.keys[index],
            sink: None,
        })
    }

    /// The keys, in the order given.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.keys.iter().map(String::as_str)
    }
}

/// One breaker: of a [`Breakers`] key, or of an engine's endpoint
/// ([`Engine::circuit`](crate::Engine::circuit), which shares the breaker with the calls
/// and reports its transitions to the policy's event sink).
///
/// ```
/// use std::time::Instant;
/// use baton_core::{Breaker, BreakerState, Breakers};
/// let breakers = Breakers::new(Breaker::default(), ["push"]).unwrap();
/// let push = breakers.circuit("push").unwrap();
/// assert_eq!(push.key(), "push");
/// assert_eq!(push.state(Instant::now()), BreakerState::Closed);
/// ```
#[derive(Clone, Copy)]
pub struct Circuit<'a> {
    health: &'a Health,
    index: usize,
    key: &'a str,
    sink: Option<&'a EventSink>,
}

impl std::fmt::Debug for Circuit<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Circuit").field("key", &self.key).finish()
    }
}

impl<'a> Circuit<'a> {
    pub(crate) fn of_endpoint(
        health: &'a Health,
        index: usize,
        key: &'a str,
        sink: Option<&'a EventSink>,
    ) -> Self {
        Circuit {
            health,
            index,
            key,
            sink,
        }
    }

    /// The circuit's key (or endpoint id).
    pub fn key(&self) -> &'a str {
        self.key
    }

    /// Whether a send may go at `now`: a permit to report back, or when to ask again. An
    /// open circuit refuses at once; a half-open one hands out its probe permits and
    /// refuses the rest.
    pub fn allow(&self, now: Instant) -> Result<Permit<'a>, CircuitOpen> {
        let mut transitions = Transitions::new();
        let admitted = self.health.admit(self.index, now, &mut transitions);
        self.report(&transitions, now);
        match admitted {
            Ok(ticket) => Ok(Permit {
                circuit: *self,
                ticket,
                started: now,
                reported: false,
            }),
            Err(retry_at) => Err(CircuitOpen {
                key: self.key.to_owned(),
                retry_at,
            }),
        }
    }

    /// The breaker's state at `now`.
    pub fn state(&self, now: Instant) -> BreakerState {
        self.health
            .snapshot(self.index, now)
            .map_or(BreakerState::Closed, |s| s.state)
    }

    /// A snapshot of the breaker at `now` (counts, open time, probes in flight).
    pub fn snapshot(&self, now: Instant) -> Option<EndpointHealth> {
        self.health.snapshot(self.index, now)
    }

    /// Closes the breaker by hand; outcomes of permits handed out before are ignored.
    pub fn reset(&self, now: Instant) {
        let (_, transitions) = self.health.reset(self.index);
        self.report(&transitions, now);
    }

    fn finish(&self, ticket: Ticket, record: Record, now: Instant) {
        let mut transitions = Transitions::new();
        let probe = self
            .health
            .finish(self.index, ticket, record, now, &mut transitions);
        // A half-open probe's end is an event, as in a call (SPEC 4, 9).
        if let (Some(success), Some(sink)) = (probe, self.sink) {
            sink(&Event {
                request_id: "",
                idempotency_key: None,
                at: now,
                kind: EventKind::ProbeResult {
                    endpoint: self.key,
                    success,
                },
            });
        }
        self.report(&transitions, now);
    }

    fn report(&self, transitions: &Transitions, at: Instant) {
        #[cfg(feature = "metrics")]
        for t in transitions {
            crate::telemetry::transition(self.key, t.from, t.to);
        }
        let Some(sink) = self.sink else {
            return;
        };
        for t in transitions {
            sink(&Event {
                request_id: "",
                idempotency_key: None,
                at,
                kind: EventKind::BreakerTransition {
                    endpoint: self.key,
                    from: t.from,
                    to: t.to,
                },
            });
        }
    }
}

/// Leave to send once, handed out by [`Circuit::allow`]. Report how the send ended; a
/// permit dropped unreported counts for nothing (and frees its probe slot).
///
/// ```
/// use std::time::{Duration, Instant};
/// use baton_core::{Breaker, BreakerRule, BreakerState, Breakers};
///
/// let settings = Breaker { rule: BreakerRule::Consecutive { failures: 2 }, ..Breaker::default() };
/// let breakers = Breakers::new(settings, ["smtp"]).unwrap();
/// let smtp = breakers.circuit("smtp").unwrap();
/// let now = Instant::now();
/// let permit = smtp.allow(now).unwrap();
/// assert!(!permit.is_probe()); // closed: an ordinary send
/// permit.failure(now); // one failure of two
/// drop(smtp.allow(now).unwrap()); // dropped unreported: counts for nothing
/// assert_eq!(smtp.state(now), BreakerState::Closed);
/// smtp.allow(now).unwrap().failure(now + Duration::from_millis(1));
/// assert_eq!(smtp.state(now + Duration::from_millis(1)), BreakerState::Open);
/// ```
#[must_use = "report the send's outcome with success() or failure()"]
#[derive(Debug)]
pub struct Permit<'a> {
    circuit: Circuit<'a>,
    ticket: Ticket,
    started: Instant,
    reported: bool,
}

impl Permit<'_> {
    /// Whether this permit is the half-open breaker's probe: its outcome closes or reopens
    /// the breaker.
    pub fn is_probe(&self) -> bool {
        self.ticket.probe().is_some()
    }

    /// The send succeeded (at `now`: with a failure-rate rule's `slow_call`, a send slower
    /// than that counts as a failure).
    pub fn success(mut self, now: Instant) {
        self.reported = true;
        let took = since(now, self.started);
        self.circuit.finish(self.ticket, Record::Success(took), now);
    }

    /// The send was answered with a wait (a `Retry-After` on a 429 or 503): the circuit
    /// refuses sends until `until`, separately from its breaker (SPEC 2.5). Call it before
    /// [`success`](Self::success) or [`failure`](Self::failure): the answer's own outcome
    /// may move the breaker, and a permit from before a state change changes nothing.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use baton_core::{Breaker, Breakers};
    /// let breakers = Breakers::new(Breaker::default(), ["fcm"]).unwrap();
    /// let fcm = breakers.circuit("fcm").unwrap();
    /// let t0 = Instant::now();
    /// let permit = fcm.allow(t0).unwrap();
    /// permit.cool_down(t0 + Duration::from_secs(20)); // "Retry-After: 20"
    /// permit.success(t0);
    /// let refused = fcm.allow(t0).unwrap_err();
    /// assert_eq!(refused.retry_at, Some(t0 + Duration::from_secs(20)));
    /// assert!(fcm.allow(t0 + Duration::from_secs(20)).is_ok());
    /// ```
    pub fn cool_down(&self, until: Instant) {
        (self.circuit.health).set_not_before(self.circuit.index, until, self.ticket.epoch);
    }

    /// The send failed.
    pub fn failure(mut self, now: Instant) {
        self.reported = true;
        self.circuit.finish(self.ticket, Record::Failure, now);
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        if !self.reported {
            self.circuit
                .finish(self.ticket, Record::Nothing, self.started);
        }
    }
}

/// The circuit refused a send: open, or half-open with its probes out, or cooling down
/// after a `Retry-After`.
///
/// ```
/// use std::time::{Duration, Instant};
/// use baton_core::{Breaker, BreakerRule, Breakers};
///
/// let settings = Breaker {
///     rule: BreakerRule::Consecutive { failures: 1 },
///     open: Duration::from_secs(5),
///     ..Breaker::default()
/// };
/// let breakers = Breakers::new(settings, ["fcm"]).unwrap();
/// let fcm = breakers.circuit("fcm").unwrap();
/// let t0 = Instant::now();
/// fcm.allow(t0).unwrap().failure(t0);
/// let open = fcm.allow(t0 + Duration::from_secs(1)).unwrap_err();
/// assert_eq!(open.key, "fcm");
/// assert_eq!(open.retry_at, Some(t0 + Duration::from_secs(5)));
/// assert_eq!(open.to_string(), r#"the circuit of "fcm" is open"#);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the circuit of {key:?} is open")]
#[non_exhaustive]
pub struct CircuitOpen {
    /// The circuit's key.
    pub key: String,
    /// When asking again may be allowed (an open breaker's end, a lost probe's expiry, a
    /// cooldown's end).
    pub retry_at: Option<Instant>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BreakerRule;
    use std::time::Duration;

    fn one(rule: BreakerRule) -> Breakers {
        let settings = Breaker {
            rule,
            open: Duration::from_secs(1),
            ..Breaker::default()
        };
        Breakers::new(settings, ["k"]).unwrap()
    }

    #[test]
    fn half_open_hands_out_one_probe_until_it_reports_or_expires() {
        let b = one(BreakerRule::Consecutive { failures: 1 });
        let c = b.circuit("k").unwrap();
        let t0 = Instant::now();
        c.allow(t0).unwrap().failure(t0);
        let open = c.allow(t0).unwrap_err();
        assert_eq!(open.retry_at, Some(t0 + Duration::from_secs(1)));
        let t1 = t0 + Duration::from_secs(1);
        let probe = c.allow(t1).unwrap();
        assert!(probe.is_probe());
        let refused = c.allow(t1 + Duration::from_millis(10)).unwrap_err();
        // The probe never reports: a new one after a full open time.
        assert_eq!(refused.retry_at, Some(t1 + Duration::from_secs(1)));
        std::mem::forget(probe);
        let t2 = t1 + Duration::from_secs(1);
        let second = c.allow(t2).unwrap();
        assert!(second.is_probe());
        second.failure(t2);
        assert_eq!(c.state(t2), BreakerState::Open);
    }

    #[test]
    fn a_dropped_probe_frees_its_slot_at_once() {
        let b = one(BreakerRule::Consecutive { failures: 1 });
        let c = b.circuit("k").unwrap();
        let t0 = Instant::now();
        c.allow(t0).unwrap().failure(t0);
        let t1 = t0 + Duration::from_secs(1);
        drop(c.allow(t1).unwrap());
        let again = c.allow(t1).unwrap();
        assert!(again.is_probe());
        again.success(t1);
        assert_eq!(c.state(t1), BreakerState::Closed);
        assert!(!c.allow(t1).unwrap().is_probe());
    }

    #[test]
    fn failure_rate_rule_and_reset() {
        let b = one(BreakerRule::FailureRate {
            window: 4,
            min_calls: 4,
            rate: 0.5,
            slow_call: Some(Duration::from_millis(100)),
        });
        let c = b.circuit("k").unwrap();
        let t0 = Instant::now();
        for _ in 0..2 {
            c.allow(t0).unwrap().success(t0);
        }
        // Two slow successes count as failures: 2 of 4 fail, the breaker opens.
        for _ in 0..2 {
            c.allow(t0)
                .unwrap()
                .success(t0 + Duration::from_millis(150));
        }
        assert_eq!(c.state(t0), BreakerState::Open);
        c.reset(t0);
        assert_eq!(c.state(t0), BreakerState::Closed);
        assert!(c.allow(t0).is_ok());
    }

    #[test]
    fn a_healthy_permit_writes_nothing_shared() {
        let b = one(BreakerRule::Consecutive { failures: 3 });
        let c = b.circuit("k").unwrap();
        let t0 = Instant::now();
        let before = crate::stripe::writes::counts();
        for _ in 0..100 {
            c.allow(t0).unwrap().success(t0);
        }
        assert_eq!(crate::stripe::writes::counts().0, before.0);
    }

    #[test]
    fn invalid_settings_name_the_setting() {
        let bad = Breaker {
            rule: BreakerRule::Consecutive { failures: 0 },
            ..Breaker::default()
        };
        let e = Breakers::new(bad, ["k"]).unwrap_err();
        assert!(e.to_string().contains("breaker.rule.failures"), "{e}");
        assert!(Breakers::new(Breaker::default(), [""]).is_err());
    }
}
