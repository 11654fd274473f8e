//! What the call did: one record per attempt (attempt `n` is record `n - 1`), the attempts
//! in flight, the triggering response it retains, and the redirects attempts followed.
//! "Attempted", "executed somewhere", "ambiguous", per-endpoint counts and the last
//! outcome are all read from the records, never kept beside them.

use std::time::{Duration, Instant};

use http::StatusCode;
use smallvec::SmallVec;

use crate::health::Ticket;
use crate::id::EndpointId;
use crate::redirect::Redirect;
use crate::report::{AttemptRecord, AttemptResult, FailureClass, TimeoutPhase};
use crate::status::StatusSet;

/// A set of endpoint indexes (the policy has at most 64 endpoints).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Bits(pub(crate) u64);

impl Bits {
    pub(crate) fn has(self, i: usize) -> bool {
        i < 64 && self.0 & (1u64 << i) != 0
    }
    pub(crate) fn set(&mut self, i: usize) {
        if i < 64 {
            self.0 |= 1u64 << i;
        }
    }
    /// Takes the lowest member out.
    pub(crate) fn pop(&mut self) -> Option<usize> {
        (self.0 != 0).then(|| {
            let i = self.0.trailing_zeros() as usize;
            self.0 &= self.0 - 1;
            i
        })
    }
    /// The members, lowest first.
    pub(crate) fn iter(mut self) -> impl Iterator<Item = usize> {
        std::iter::from_fn(move || self.pop())
    }
}

/// An attempt in flight.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Flight {
    pub(crate) number: u32,
    pub(crate) endpoint: u8,
    /// The attempt's timer ends at the call's deadline: its timeout is the deadline's cut.
    pub(crate) clipped: bool,
    pub(crate) started: Instant,
    pub(crate) ticket: Ticket,
}

/// A triggering response kept in case every later attempt fails (SPEC 2.10), or the answer.
#[derive(Debug)]
pub(crate) struct Kept<R> {
    pub(crate) attempt: u32,
    pub(crate) endpoint: u8,
    pub(crate) status: StatusCode,
    pub(crate) response: R,
    /// How many attempts had ended possibly executed when it was retained (itself
    /// included): more later means an attempt may have done the work after this response.
    /// Counted only for a retained response (an answer is returned as it is).
    pub(crate) executed_before: u32,
}

/// How one attempt went, as the call keeps it: the attempt's number is its place in the
/// history, and its endpoint's id is looked up only when the report is written.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rec {
    pub(crate) endpoint: u8,
    pub(crate) result: AttemptResult,
    /// How long it took, in nanoseconds (a Duration takes twice the room).
    pub(crate) elapsed_ns: u64,
    /// The HTTP version of its response, when the adapter says.
    pub(crate) version: Option<http::Version>,
}

#[derive(Debug)]
pub(crate) struct History<R> {
    pub(crate) records: SmallVec<[Rec; 2]>,
    pub(crate) flights: SmallVec<[Flight; 2]>,
    pub(crate) kept: Option<Kept<R>>,
    pub(crate) redirects: Vec<Redirect>,
    /// The endpoint and result of the attempt that ended last.
    pub(crate) last: Option<(u8, AttemptResult)>,
}

impl<R> History<R> {
    pub(crate) fn new() -> Self {
        History {
            records: SmallVec::new(),
            flights: SmallVec::new(),
            kept: None,
            redirects: Vec::new(),
            last: None,
        }
    }

    /// Attempts made so far (sent or asked to be sent).
    pub(crate) fn made(&self) -> u32 {
        self.records.len() as u32
    }

    /// The record of attempt `number`.
    pub(crate) fn record_mut(&mut self, number: u32) -> Option<&mut Rec> {
        self.records.get_mut(number.checked_sub(1)? as usize)
    }

    /// Takes attempt `number` out of flight.
    pub(crate) fn land(&mut self, number: u32) -> Option<Flight> {
        // The newest attempt lands most often (a call without hedges has one in flight).
        if self.flights.last().is_some_and(|f| f.number == number) {
            return self.flights.pop();
        }
        self.land_older(number)
    }

    /// [`land`](Self::land) for an attempt that is not the newest in flight (or none).
    #[cold]
    #[inline(never)]
    fn land_older(&mut self, number: u32) -> Option<Flight> {
        let pos = self.flights.iter().position(|f| f.number == number)?;
        Some(self.flights.remove(pos))
    }

    /// Endpoints the call attempted.
    pub(crate) fn attempted(&self) -> Bits {
        let mut b = Bits(0);
        for r in &self.records {
            b.set(r.endpoint as usize);
        }
        b
    }

    /// Endpoints that may have done the work: an attempt there ended and nothing proves it
    /// did not execute (attempts still in flight are not counted until they end).
    pub(crate) fn executed(&self, not_processed: &StatusSet) -> Bits {
        let mut b = Bits(0);
        for r in self.ended_executed(not_processed) {
            b.set(r.endpoint as usize);
        }
        b
    }

    fn ended_executed<'a>(
        &'a self,
        not_processed: &'a StatusSet,
    ) -> impl Iterator<Item = &'a Rec> + 'a {
        self.records.iter().filter(|r| {
            r.result != AttemptResult::InFlight && r.result.may_have_executed(not_processed)
        })
    }

    /// How many attempts ended possibly executed.
    pub(crate) fn executed_count(&self, not_processed: &StatusSet) -> u32 {
        // At most MAX_ATTEMPTS records.
        self.ended_executed(not_processed).count() as u32
    }

    /// Whether an attempt ended ambiguous (it may have done the work, and no response says
    /// what happened).
    pub(crate) fn any_ambiguous(&self) -> bool {
        self.records.iter().any(|r| {
            matches!(
                r.result,
                AttemptResult::Failed(FailureClass::Ambiguous)
                    | AttemptResult::TimedOut(TimeoutPhase::Response | TimeoutPhase::Unknown)
            )
        })
    }

    /// Endpoints with an attempt in flight.
    pub(crate) fn in_flight(&self) -> Bits {
        let mut b = Bits(0);
        for f in &self.flights {
            b.set(f.endpoint as usize);
        }
        b
    }

    /// Attempts at `endpoint` numbered `from` or later.
    pub(crate) fn count_at(&self, endpoint: usize, from: u32) -> u32 {
        let skip = from.saturating_sub(1) as usize;
        let at = |r: &&Rec| r.endpoint as usize == endpoint;
        self.records.iter().skip(skip).filter(at).count() as u32
    }

    /// Whether the last attempt to end put no load on any provider (nothing was sent).
    pub(crate) fn last_undelivered(&self) -> bool {
        matches!(
            self.last,
            Some((
                _,
                AttemptResult::Failed(FailureClass::Undelivered | FailureClass::Untrusted)
                    | AttemptResult::TimedOut(TimeoutPhase::Connect)
            ))
        )
    }

    /// Endpoints that rejected the call's TLS handshake on a certificate (SPEC 9): each
    /// would fail the same way again, so the call makes no further attempt there.
    pub(crate) fn untrusted(&self) -> Bits {
        let mut b = Bits(0);
        for r in &self.records {
            if r.result == AttemptResult::Failed(FailureClass::Untrusted) {
                b.set(r.endpoint as usize);
            }
        }
        b
    }

    /// Endpoints whose credential the call saw refused after the attempt's own refresh
    /// (SPEC 9): an attempt to an endpoint with a credential slot, not redirected, answered
    /// with a refusal (`refusal`: 401, or 403 where configured, at an endpoint with a
    /// slot). The adapter already refreshed and re-sent once inside that attempt when the
    /// token it sent was one it held, so the refusal came for a token just refreshed (or
    /// no refresh could be had): another attempt there would only run the token provider
    /// again for the same answer.
    pub(crate) fn credential_refused(&self, refusal: impl Fn(usize, StatusCode) -> bool) -> Bits {
        let mut b = Bits(0);
        for (i, r) in self.records.iter().enumerate() {
            if self.refused_credential(i, r, &refusal) {
                b.set(r.endpoint as usize);
            }
        }
        b
    }

    /// Whether record `i` (`r`) is a credential refusal (see
    /// [`credential_refused`](Self::credential_refused)).
    fn refused_credential(
        &self,
        i: usize,
        r: &Rec,
        refusal: &impl Fn(usize, StatusCode) -> bool,
    ) -> bool {
        // 401 and 403 are the only refusals: other answers (the healthy path's) stop here.
        matches!(r.result, AttemptResult::Response(s) if (s == StatusCode::UNAUTHORIZED
            || s == StatusCode::FORBIDDEN) && refusal(r.endpoint as usize, s))
            && !self.redirected(i as u32 + 1)
    }

    /// Whether attempt `number` followed a redirect.
    pub(crate) fn redirected(&self, number: u32) -> bool {
        self.redirects.iter().any(|r| r.attempt == number)
    }

    /// Writes the public records of every attempt into `out` (empty), each with its
    /// endpoint's id (from `ids`); `refusal` tells a credential refusal (see
    /// [`credential_refused`](Self::credential_refused)). The caller fills its list before
    /// the rest of the result, so that its stores are done when the list is moved: a copy
    /// that reads stores still in flight waits for them (`healthy_calls`: 13% of the
    /// engine's time went into building and moving the one record of a healthy call).
    #[inline(always)]
    pub(crate) fn report_records(
        &self,
        ids: &[EndpointId],
        refusal: impl Fn(usize, StatusCode) -> bool,
        out: &mut SmallVec<[AttemptRecord; 2]>,
    ) {
        match &self.records[..] {
            // One attempt, the healthy call: its record is filled in place (pushed, it is
            // built aside and then copied).
            [r] => {
                out.push(AttemptRecord::unused());
                let rec = &mut out[0];
                rec.endpoint = r.endpoint as usize;
                rec.endpoint_id.clone_from(&ids[r.endpoint as usize]);
                rec.number = 1;
                rec.result = r.result;
                rec.elapsed = Duration::from_nanos(r.elapsed_ns);
                rec.http_version = r.version;
                rec.credential_refused = self.refused_credential(0, r, &refusal);
            }
            records => out.extend(
                (records.iter().enumerate()).map(|(i, r)| self.report_record(ids, &refusal, i, r)),
            ),
        }
    }

    /// The public record of record `i` (`r`).
    fn report_record(
        &self,
        ids: &[EndpointId],
        refusal: &impl Fn(usize, StatusCode) -> bool,
        i: usize,
        r: &Rec,
    ) -> AttemptRecord {
        AttemptRecord {
            endpoint: r.endpoint as usize,
            endpoint_id: ids[r.endpoint as usize].clone(),
            number: i as u32 + 1,
            result: r.result,
            elapsed: Duration::from_nanos(r.elapsed_ns),
            http_version: r.version,
            credential_refused: self.refused_credential(i, r, refusal),
        }
    }

    /// Records how a landed attempt ended.
    /// Records how attempt `flight` ended, and returns the result recorded: `result`, or
    /// for a response after redirects, what [`after_redirects`](Self::after_redirects)
    /// makes of it.
    pub(crate) fn close(
        &mut self,
        flight: &Flight,
        mut result: AttemptResult,
        elapsed: Duration,
        not_processed: &StatusSet,
    ) -> AttemptResult {
        if !self.redirects.is_empty() {
            result = self.after_redirects(flight.number, result, not_processed);
        }
        if let Some(rec) = self.record_mut(flight.number) {
            rec.result = result;
            // Every duration the engine computes is capped far below 584 years.
            rec.elapsed_ns = elapsed.as_nanos() as u64;
        }
        result
    }

    /// The result of attempt `number`, which ended with `result`, once the call followed
    /// redirects (SPEC 1, 3). A redirect whose status is not in `not_processed` says the
    /// endpoint may have done the work; a last hop's status in `not_processed` does not
    /// unsay it, so such a response reads [`AttemptResult::AfterRedirect`]. Out of line:
    /// a healthy call follows none.
    #[cold]
    #[inline(never)]
    fn after_redirects(
        &self,
        number: u32,
        result: AttemptResult,
        not_processed: &StatusSet,
    ) -> AttemptResult {
        let AttemptResult::Response(status) = result else {
            return result;
        };
        let executed = (self.redirects.iter())
            .any(|r| r.attempt == number && !not_processed.contains(r.status));
        if executed && not_processed.contains(status) {
            AttemptResult::AfterRedirect(status)
        } else {
            result
        }
    }
}
