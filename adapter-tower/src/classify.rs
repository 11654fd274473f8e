//! Failure classes of an inner service's errors (SPEC 1), by phase, never by text.
//!
//! A generic `Service` says little about when it failed, so the rule is conservative:
//! - an error of the request body's own stream, anywhere in the chain, is *ambiguous*
//!   before anything else is read: the caller's body source failed (a download refused
//!   over HTTP/2 or rejected on its certificate, say), and its errors below are no proof
//!   about this attempt, whose head had gone; no rule and no hook reads them;
//! - an error of a baton call below the layer (a `Baton` service inside another, or a
//!   client built on baton inside the service) decides first: that call's report,
//!   undelivered only when none of its attempts may have executed; the errors of its
//!   attempts below it are read by no rule and no hook
//!   ([`baton_core::Error::of_inner_call`]);
//! - *undelivered* only with proof that no request byte was written: `poll_ready` failed
//!   or never finished (the request was never handed over), or hyper-util's legacy client
//!   says the error happened while connecting (`is_connect()`, feature `hyper-util`);
//! - a caller's hook ([`BatonBuilder::classify_error`](crate::BatonBuilder::classify_error))
//!   decides next, for services whose errors it knows (alloy transports, ...);
//! - HTTP/2's own proofs (feature `h2`, SPEC 9): an `h2::Error` anywhere in the chain is
//!   read by core's rule ([`baton_core::H2StreamError`]): a remote `REFUSED_STREAM` is
//!   undelivered (a reset names its one stream); any other reset is ambiguous, and so is
//!   a remote `GOAWAY`, even one below the stream: hyper's HTTP/2 client (under
//!   hyper-util's client and tonic's `Channel`) may hand the connection's `GOAWAY` to a
//!   request whose stream it had just opened, when its connection task runs on another
//!   thread, so the error does not prove which side of the last stream id the request
//!   was. This holds for hyper's and hyper-util's HTTP/2 clients and for tonic's
//!   `Channel`, whose errors keep h2's as their source;
//! - everything else is *ambiguous*: the request may have reached the provider. An
//!   [`io::Error`](std::io::Error) of kind "refused" or "unreachable" is no proof: on an
//!   established connection the kernel reports a stored ICMP error the same way, after the
//!   request was sent.

use std::error::Error as StdError;

use baton_core::FailureClass;

/// A caller's error classifier: `Some(class)` decides, `None` leaves it to the rules.
pub type ErrorClassifier =
    std::sync::Arc<dyn Fn(&(dyn StdError + 'static)) -> Option<FailureClass> + Send + Sync>;

/// The failure class of an error from the inner service's `call`.
pub(crate) fn classify(
    e: &(dyn StdError + 'static),
    hook: Option<&ErrorClassifier>,
) -> FailureClass {
    let chain = || std::iter::successors(Some(e), |e| (*e).source());
    // The request body's own stream failed: its source's errors below (a download refused
    // or rejected) are the caller's, and read by no rule and no hook.
    if chain().any(is_body_source) {
        return FailureClass::Ambiguous;
    }
    // A baton call's error in the chain decides before the caller's hook: below it are
    // the inner call's attempts' errors, which a hook written for the transport would
    // read as proof (a connect error) while an earlier inner attempt may have executed.
    if let Some(class) = baton_core::Error::of_inner_call(e, |_| false) {
        return class;
    }
    if let Some(class) = hook.and_then(|h| h(e)) {
        return class;
    }
    #[cfg(feature = "h2")]
    if let Some(end) = h2_end(e) {
        return end.class();
    }
    #[cfg(feature = "hyper-util")]
    for err in chain() {
        if let Some(h) = err.downcast_ref::<hyper_util::client::legacy::Error>() {
            // hyper-util knows the phase: its answer is final either way.
            return if h.is_connect() {
                FailureClass::Undelivered
            } else {
                FailureClass::Ambiguous
            };
        }
    }
    FailureClass::Ambiguous
}

/// Whether `e` is the error of the request body's own stream
/// ([`BodySource`](crate::body::BodySource)), also inside an `io::Error` (whose `source()`
/// skips the error it wraps), as a service that reads the body as bytes may hand it back.
fn is_body_source(e: &(dyn StdError + 'static)) -> bool {
    let wrapped = e
        .downcast_ref::<std::io::Error>()
        .and_then(|io| io.get_ref());
    e.is::<crate::body::BodySource>() || wrapped.is_some_and(|w| w.is::<crate::body::BodySource>())
}

/// The HTTP/2 end an error chain proves, if any.
#[cfg(feature = "h2")]
fn h2_end(e: &(dyn StdError + 'static)) -> Option<baton_core::H2End> {
    for err in std::iter::successors(Some(e), |e| (*e).source()) {
        if let Some(h) = err.downcast_ref::<h2::Error>() {
            return baton_core::H2StreamError {
                remote: h.is_remote(),
                go_away: h.is_go_away(),
                reset: h.is_reset(),
                code: h.reason().map(u32::from),
                // The inner service's HTTP/2 connection may run on any executor; hyper's
                // may hand the connection's GOAWAY to a stream it just opened (see
                // `goaway_per_stream`), so a GOAWAY is no proof here.
                goaway_per_stream: false,
            }
            .end();
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    /// A baton call below that made no attempt sent nothing: undelivered, before any hook.
    /// Here the inner call's settings were invalid (a zero deadline); an inner breaker
    /// open or an unknown `only` endpoint end the same way.
    #[test]
    fn an_inner_call_that_made_no_attempt_is_undelivered() {
        use baton_core::{sim::Sim, CallOptions, Endpoint, Policy};
        let one = Policy::builder().endpoint(Endpoint::new("a", "http://a.example/"));
        let zero = CallOptions {
            deadline: Some(std::time::Duration::ZERO),
            ..CallOptions::default()
        };
        let mut sim = Sim::new(one.build().unwrap(), std::time::Instant::now());
        let error = (sim.run(http::Method::POST, zero).report.into_error()).expect("invalid");
        assert!(error.report.attempts.is_empty());
        let inner = crate::Error::<()>::new(error, None, None);
        let hook: ErrorClassifier = std::sync::Arc::new(|_| Some(FailureClass::Ambiguous));
        assert_eq!(classify(&inner, Some(&hook)), FailureClass::Undelivered);
    }

    #[derive(Debug)]
    struct Wrapped(io::Error);
    impl std::fmt::Display for Wrapped {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("wrapped")
        }
    }
    impl StdError for Wrapped {
        fn source(&self) -> Option<&(dyn StdError + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn without_proof_of_the_phase_every_error_is_ambiguous_and_the_hook_decides_first() {
        // A "refused" I/O error proves nothing on its own (a stored ICMP error on an
        // established connection reads the same).
        let refused = Wrapped(io::Error::from(io::ErrorKind::ConnectionRefused));
        assert_eq!(classify(&refused, None), FailureClass::Ambiguous);
        let text = io::Error::other("connection refused (but only in the text)");
        assert_eq!(classify(&text, None), FailureClass::Ambiguous);
        let hook: ErrorClassifier = std::sync::Arc::new(|_| Some(FailureClass::Undelivered));
        assert_eq!(classify(&refused, Some(&hook)), FailureClass::Undelivered);
    }
}
