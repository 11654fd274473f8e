//! Failure classes of an inner service's errors (SPEC 1), by phase, never by text.
//!
//! A generic `Service` says little about when it failed, so the rule is conservative:
//! - *undelivered* only with proof that no request byte was written: `poll_ready` failed
//!   (the request was never handed over); hyper-util's legacy client says the error
//!   happened while connecting (`is_connect()`, feature `hyper-util`); or an
//!   [`io::Error`](std::io::Error) in the chain is a refused connection, an address not
//!   available, or an unreachable host or network, which only a connect can produce;
//! - a caller's hook ([`BatonBuilder::classify_error`](crate::BatonBuilder::classify_error))
//!   decides first, for services whose errors it knows (tonic, alloy transports);
//! - everything else is *ambiguous*: the request may have reached the provider.

use std::error::Error as StdError;
use std::io;

use baton_core::FailureClass;

/// A caller's error classifier: `Some(class)` decides, `None` leaves it to the rules.
pub type ErrorClassifier =
    std::sync::Arc<dyn Fn(&(dyn StdError + 'static)) -> Option<FailureClass> + Send + Sync>;

/// The failure class of an error from the inner service's `call`.
pub(crate) fn classify(
    e: &(dyn StdError + 'static),
    hook: Option<&ErrorClassifier>,
) -> FailureClass {
    if let Some(class) = hook.and_then(|h| h(e)) {
        return class;
    }
    let mut cur: Option<&(dyn StdError + 'static)> = Some(e);
    while let Some(err) = cur {
        #[cfg(feature = "hyper-util")]
        if let Some(h) = err.downcast_ref::<hyper_util::client::legacy::Error>() {
            if h.is_connect() {
                return FailureClass::Undelivered;
            }
        }
        if let Some(io) = err.downcast_ref::<io::Error>() {
            if matches!(
                io.kind(),
                io::ErrorKind::ConnectionRefused
                    | io::ErrorKind::AddrNotAvailable
                    | io::ErrorKind::HostUnreachable
                    | io::ErrorKind::NetworkUnreachable
            ) {
                return FailureClass::Undelivered;
            }
        }
        cur = err.source();
    }
    FailureClass::Ambiguous
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn a_refused_connect_anywhere_in_the_chain_is_undelivered_and_the_rest_ambiguous() {
        let refused = Wrapped(io::Error::from(io::ErrorKind::ConnectionRefused));
        assert_eq!(classify(&refused, None), FailureClass::Undelivered);
        let reset = Wrapped(io::Error::from(io::ErrorKind::ConnectionReset));
        assert_eq!(classify(&reset, None), FailureClass::Ambiguous);
        let text = io::Error::other("connection refused (but only in the text)");
        assert_eq!(classify(&text, None), FailureClass::Ambiguous);
        let hook: ErrorClassifier = std::sync::Arc::new(|_| Some(FailureClass::Undelivered));
        assert_eq!(classify(&reset, Some(&hook)), FailureClass::Undelivered);
    }
}
