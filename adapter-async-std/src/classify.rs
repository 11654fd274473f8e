//! Transport failures and their class, decided by the phase they happened in (SPEC 1).
//!
//! The adapter owns DNS, TCP connect, the TLS handshake and the HTTP exchange, so it always
//! knows the phase and never guesses from error text:
//!
//! | phase | examples | class |
//! |---|---|---|
//! | [`Phase::Dns`] | name does not resolve | undelivered |
//! | [`Phase::Connect`] | refused, host or network unreachable, connect timeout | undelivered |
//! | [`Phase::Tls`] | handshake failure, TLS alert during the handshake, bad certificate | undelivered |
//! | [`Phase::NotSent`] | the connection closed before hyper wrote a single request byte; an HTTP/2 connection whose server did not agree to HTTP/2 | undelivered |
//! | [`Phase::Refused`] | HTTP/2: the server refused the stream (`REFUSED_STREAM`) or its `GOAWAY` left the stream unprocessed (core's [`H2End`](baton_core::H2End) rule) | undelivered |
//! | [`Phase::Certificate`] | the handshake failed on a certificate: rejected by us (unknown issuer, name mismatch, expired), or our identity refused by the server's alert | untrusted |
//! | [`Phase::Exchange`] | anything once the request started to be written: reset, EOF, timeout waiting for the headers, a TLS alert after the handshake, a protocol error, any other HTTP/2 reset | ambiguous |
//!
//! A certificate or HTTP/2 error is read only from the attempt's own part of an error's
//! chain: not below hyper's error for the request body's own stream (the caller's source
//! failed, a download whose certificate was rejected, say: the head was sent, so the
//! attempt is an exchange failure), nor below a baton call's error.
//!
//! Nothing here decides what happens next: the class goes to the engine.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;

use baton_core::{AttemptOutcome, FailureClass, TimeoutPhase};

/// Where in an attempt a transport failure happened.
///
/// ```
/// use baton_async_std::Phase;
/// use baton_core::FailureClass;
/// assert_eq!(Phase::Tls.class(), FailureClass::Undelivered);
/// assert_eq!(Phase::Exchange.class(), FailureClass::Ambiguous);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Phase {
    /// Resolving the endpoint's host name.
    Dns,
    /// Opening the TCP connection.
    Connect,
    /// The TLS handshake.
    Tls,
    /// Nothing was written: the connection closed before any request byte, or the
    /// request was refused before sending (invalid, or by the destination rules).
    NotSent,
    /// HTTP/2: the server proved it did not process the request (SPEC 9).
    Refused,
    /// The TLS handshake failed on a certificate (SPEC 9).
    Certificate,
    /// Writing the request or waiting for the response headers.
    Exchange,
}

impl Phase {
    /// The failure class of a failure in this phase.
    pub fn class(self) -> FailureClass {
        match self {
            Phase::Dns | Phase::Connect | Phase::Tls | Phase::NotSent | Phase::Refused => {
                FailureClass::Undelivered
            }
            Phase::Certificate => FailureClass::Untrusted,
            Phase::Exchange => FailureClass::Ambiguous,
        }
    }

    /// The phase's name in messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Dns => "dns",
            Phase::Connect => "connect",
            Phase::Tls => "tls handshake",
            Phase::NotSent => "before sending",
            Phase::Refused => "refused before processing (HTTP/2)",
            Phase::Certificate => "tls handshake",
            Phase::Exchange => "request",
        }
    }
}

pub(crate) type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// One attempt's transport failure: the endpoint, the attempt, the phase, whether a timeout
/// fired, and the underlying I/O, TLS or hyper error as its [`source`](StdError::source).
/// It shows the phase and what baton read in it (a certificate rejection, in baton's
/// words): in a call's error chain the link above it names the attempt, and its source
/// says what the transport saw.
///
/// ```
/// use baton_async_std::{Phase, TransportError};
/// use baton_core::FailureClass;
/// let e = TransportError::new("primary", 1, Phase::Connect, false,
///     std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
/// assert_eq!(e.class(), FailureClass::Undelivered);
/// assert_eq!(e.to_string(), "connect failed");
/// let local = TransportError::new("primary", 1, Phase::NotSent, false,
///     std::io::Error::other("invalid header"));
/// assert_eq!(local.to_string(), "failed before sending");
/// assert_eq!((e.endpoint(), e.attempt()), ("primary", 1));
/// assert!(std::error::Error::source(&e).is_some());
/// ```
#[derive(Debug)]
pub struct TransportError {
    endpoint: Arc<str>,
    attempt: u32,
    phase: Phase,
    timed_out: bool,
    source: Option<BoxError>,
}

impl TransportError {
    /// A failure of attempt `attempt` at `endpoint` in `phase`.
    pub fn new(
        endpoint: impl Into<Arc<str>>,
        attempt: u32,
        phase: Phase,
        timed_out: bool,
        source: impl Into<BoxError>,
    ) -> Self {
        TransportError {
            endpoint: endpoint.into(),
            attempt,
            phase,
            timed_out,
            source: Some(source.into()),
        }
    }

    /// A timeout in `phase` (no underlying error).
    pub(crate) fn timeout(endpoint: Arc<str>, attempt: u32, phase: Phase) -> Self {
        TransportError {
            endpoint,
            attempt,
            phase,
            timed_out: true,
            source: None,
        }
    }

    /// The endpoint id.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The attempt number.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The phase.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Whether an attempt or connect timeout fired.
    pub fn is_timeout(&self) -> bool {
        self.timed_out
    }

    /// The failure class (undelivered before the connection was ready, ambiguous after).
    pub fn class(&self) -> FailureClass {
        self.phase.class()
    }

    /// The outcome handed to the engine.
    pub fn outcome(&self) -> AttemptOutcome {
        outcome(self.phase, self.timed_out)
    }
}

/// The phase a failure really happened in, by what its error proves: a certificate
/// rejected in the handshake (our verdict, whatever phase saw it; the server's alert
/// refusing our identity only on a connection this attempt opened, `fresh`), or an
/// HTTP/2 refusal of the request (core's rule) instead of an exchange failure.
pub(crate) fn proven(phase: Phase, err: &(dyn StdError + 'static), fresh: bool) -> Phase {
    let rejected = baton_tls::rejection_above(err, &ends_attempt);
    if rejected.is_some_and(|r| !r.is_server_alert() || fresh) {
        return Phase::Certificate;
    }
    if phase != Phase::Exchange {
        return phase;
    }
    let mut cur: Option<&(dyn StdError + 'static)> = Some(err);
    while let Some(e) = cur {
        if ends_attempt(e) {
            break;
        }
        if let Some(h) = e.downcast_ref::<h2::Error>() {
            let end = baton_core::H2StreamError {
                remote: h.is_remote(),
                go_away: h.is_go_away(),
                reset: h.is_reset(),
                code: h.reason().map(u32::from),
                // hyper's tasks for a connection (its dispatch and h2's connection) both
                // run on the one `baton-h2` thread (`exec`): a GOAWAY is read between two
                // polls of the dispatch task, never inside one, so it reaches a request
                // only through its stream.
                goaway_per_stream: true,
            }
            .end();
            return match end.map(baton_core::H2End::class) {
                Some(FailureClass::Undelivered) => Phase::Refused,
                _ => Phase::Exchange,
            };
        }
        cur = e.source();
    }
    Phase::Exchange
}

/// Where an attempt's own errors end in a chain: at a baton call's error or the link to its
/// last attempt (`is_call_link`: below it are that call's attempts), or at hyper's error for the request body's own stream
/// (`is_user`: below it is the error of the caller's body source, which proves nothing
/// about this connection).
fn ends_attempt(e: &(dyn StdError + 'static)) -> bool {
    baton_core::Error::is_call_link(e)
        || e.downcast_ref::<hyper::Error>()
            .is_some_and(hyper::Error::is_user)
}

/// The engine input for a failure in `phase` (a timeout or not).
pub(crate) fn outcome(phase: Phase, timed_out: bool) -> AttemptOutcome {
    match (timed_out, phase.class()) {
        (true, FailureClass::Undelivered) => AttemptOutcome::Timeout(TimeoutPhase::Connect),
        (true, _) => AttemptOutcome::Timeout(TimeoutPhase::Response),
        (false, class) => AttemptOutcome::Failure(class),
    }
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ended = if self.timed_out {
            "timed out"
        } else {
            "failed"
        };
        match self.phase {
            Phase::NotSent => write!(f, "{ended} before sending")?,
            Phase::Refused => f.write_str(self.phase.as_str())?,
            _ => write!(f, "{} {ended}", self.phase.as_str())?,
        }
        if let Some(r) = self.source.as_deref().and_then(|s| baton_tls::rejection(s)) {
            write!(f, ": {}", r.message())?;
        }
        if f.alternate() {
            baton_core::write_causes(f, self)?;
        }
        Ok(())
    }
}

impl StdError for TransportError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn StdError + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_phase_before_the_connection_is_ready_is_undelivered() {
        for p in [Phase::Dns, Phase::Connect, Phase::Tls, Phase::NotSent] {
            assert_eq!(p.class(), FailureClass::Undelivered, "{p:?}");
            assert!(matches!(
                outcome(p, false),
                AttemptOutcome::Failure(FailureClass::Undelivered)
            ));
            assert!(matches!(
                outcome(p, true),
                AttemptOutcome::Timeout(TimeoutPhase::Connect)
            ));
        }
    }

    #[test]
    fn a_failure_after_the_request_started_is_ambiguous() {
        assert!(matches!(
            outcome(Phase::Exchange, false),
            AttemptOutcome::Failure(FailureClass::Ambiguous)
        ));
        assert!(matches!(
            outcome(Phase::Exchange, true),
            AttemptOutcome::Timeout(TimeoutPhase::Response)
        ));
    }
}
