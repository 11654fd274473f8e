//! Failure classification: a reqwest, hyper or std error becomes one of the failure classes
//! of SPEC 1, decided by the phase the error happened in, never by guessing.
//!
//! - *undelivered*: reqwest says the error happened while connecting (`is_connect()`): DNS
//!   failure, connection refused, host or network unreachable, TCP connect timeout, TLS
//!   handshake failure. hyper's connector does DNS, TCP and the TLS handshake before a
//!   single request byte is written, so no request byte can have reached the server.
//!   A connect error that is also a timeout is an attempt timeout in the connect phase.
//! - *ambiguous*: everything else: a timeout while sending or waiting for the response
//!   head, reset, closed, broken pipe, a protocol error, a body error, and any error this
//!   module does not recognise.
//! - *the request body's own stream failed* (hyper's user-body error): a body error,
//!   ambiguous, whatever its source says (the caller's source may fail on a certificate
//!   or a connect of its own, which proves nothing about this connection: the head was
//!   sent). reqwest's `is_connect()` reads the whole chain, so it is not asked then.
//! - *another baton call's error* (a `BatonMiddleware` after this one): its report decides
//!   ([`FailureCause::InnerCall`]), undelivered only when none of its attempts may have
//!   executed; nothing below it in the chain (its attempts' errors) is read.
//! - *HTTP/2* (SPEC 9): an `h2::Error` in the chain of a send (never of a body read) is
//!   read as a [`baton_core::H2End`] and classified by core's one rule: a remote
//!   `RST_STREAM(REFUSED_STREAM)` is undelivered (a reset names its one stream); any
//!   other reset is ambiguous, and so is a remote `GOAWAY`, even one below the stream:
//!   hyper's HTTP/2 client may hand the connection's `GOAWAY` to a request whose stream
//!   it had just opened, when the connection's task runs on another thread, so on this
//!   adapter the error does not prove the request was left unprocessed. A connection
//!   that breaks after the request's HEADERS surfaces as an I/O error (hyper unwraps
//!   h2's I/O errors) and stays ambiguous. reqwest's own re-send of
//!   refused streams is turned off in the clients baton builds, so each refusal is an
//!   attempt in the report.
//! - *untrusted* (SPEC 9): a certificate rejected during the handshake (unknown issuer,
//!   name mismatch, expired), read by [`baton_tls::rejection`] from the rustls error in
//!   the chain, or a client identity the server refused with a handshake alert while
//!   connecting. In TLS 1.3 that alert arrives after the client finished its side of the
//!   handshake, outside reqwest's connect phase; reqwest does not say whether the
//!   connection it came on was opened by this attempt, so it stays ambiguous here (the
//!   async-std and blocking adapters, which know, read it as untrusted).
//!
//! This module never decides whether to retry: it only names what happened. The
//! [`FailureCause`] is a finer label (refused, DNS, TLS, reset, ...) for error messages;
//! the engine only sees the class.

use std::error::Error as StdError;
use std::fmt;
use std::io;

use baton_core::{AttemptOutcome, FailureClass, H2End, TimeoutPhase};

/// What went wrong in one attempt, as far as the error chain tells (a finer label than the
/// failure class; the engine only sees the class).
///
/// ```
/// use baton_tokio::FailureCause;
/// assert_eq!(FailureCause::Refused.as_str(), "connection refused");
/// assert!(!FailureCause::Refused.may_have_executed());
/// assert!(FailureCause::Reset.may_have_executed());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailureCause {
    /// Connection refused (undelivered).
    Refused,
    /// Name resolution failed (undelivered).
    Dns,
    /// Host or network unreachable (undelivered).
    Unreachable,
    /// The connect timeout fired (undelivered).
    ConnectTimeout,
    /// The TLS handshake failed (undelivered).
    Tls,
    /// The TLS handshake failed on a certificate (undelivered, and the endpoint gets no
    /// further attempt in the call). The server's alert refusing our identity is proof
    /// only while connecting; later it is reported with this cause, ambiguous.
    Certificate(baton_tls::Rejection),
    /// HTTP/2: the server refused the stream (`REFUSED_STREAM`; undelivered).
    RefusedStream,
    /// HTTP/2: the server's `GOAWAY` ended the connection before the response head
    /// (ambiguous: hyper may hand it to a stream the server can still process).
    GoAway,
    /// HTTP/2: the server reset the stream after it was sent (ambiguous).
    StreamReset,
    /// Another error while connecting (undelivered).
    Connect,
    /// The call asks for HTTP/2 ([`RequestBuilder::version`](crate::RequestBuilder::version))
    /// and the connection agreed HTTP/1.1 (an `http://` endpoint, or a server whose ALPN
    /// chose `http/1.1`): the client refused before writing the request (undelivered).
    Version,
    /// The attempt timed out after the connection was ready, or in an unknown phase
    /// (ambiguous).
    Timeout,
    /// The connection was reset (ambiguous).
    Reset,
    /// The connection was closed before the response head arrived (ambiguous).
    Closed,
    /// The response could not be parsed (ambiguous).
    Protocol,
    /// A body failed within the attempt (ambiguous): sending the request's, or reading
    /// the response's that the policy's `classify_body` asks for.
    Body,
    /// The request could not be built for the endpoint (rejected locally).
    Rejected,
    /// No token for the endpoint's credential: its provider failed and no unexpired token
    /// was left (undelivered: nothing was sent).
    Credential,
    /// Another baton call failed inside the attempt (baton nested in baton): its report
    /// decides, undelivered only when none of its attempts may have executed.
    InnerCall {
        /// The inner call's `may_have_executed`.
        may_have_executed: bool,
    },
    /// Anything else (ambiguous).
    Other,
}

impl FailureCause {
    /// A short description (`"connection refused"`, `"dns failure"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            FailureCause::Refused => "connection refused",
            FailureCause::Dns => "dns failure",
            FailureCause::Unreachable => "unreachable",
            FailureCause::ConnectTimeout => "connect timeout",
            FailureCause::Tls => "tls handshake failure",
            FailureCause::Certificate(r) => r.message(),
            FailureCause::RefusedStream => "stream refused (HTTP/2 REFUSED_STREAM)",
            FailureCause::GoAway => "connection going away (HTTP/2 GOAWAY)",
            FailureCause::StreamReset => "stream reset (HTTP/2 RST_STREAM)",
            FailureCause::Connect => "connect error",
            FailureCause::Version => "the connection does not speak the HTTP version asked",
            FailureCause::Timeout => "timeout",
            FailureCause::Reset => "connection reset",
            FailureCause::Closed => "connection closed",
            FailureCause::Protocol => "protocol error",
            FailureCause::Body => "body error",
            FailureCause::Rejected => "rejected locally",
            FailureCause::Credential => "no credential",
            FailureCause::InnerCall {
                may_have_executed: false,
            } => "an inner baton call failed, nothing executed",
            FailureCause::InnerCall {
                may_have_executed: true,
            } => "an inner baton call failed, it may have executed",
            FailureCause::Other => "transport error",
        }
    }

    /// Whether an attempt that ended this way may have done the work on the server (the
    /// server's refusal of our identity is read as such only while connecting: the cause
    /// alone cannot prove it).
    pub fn may_have_executed(self) -> bool {
        match self {
            FailureCause::Certificate(r) => return r.is_server_alert(),
            FailureCause::InnerCall { may_have_executed } => return may_have_executed,
            _ => {}
        }
        !matches!(
            self,
            FailureCause::Refused
                | FailureCause::Dns
                | FailureCause::Unreachable
                | FailureCause::ConnectTimeout
                | FailureCause::Tls
                | FailureCause::RefusedStream
                | FailureCause::Connect
                | FailureCause::Version
                | FailureCause::Rejected
                | FailureCause::Credential
        )
    }
}

impl fmt::Display for FailureCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A classified failure: what the engine is told, and the finer cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Classified {
    pub(crate) kind: Kind,
    pub(crate) cause: FailureCause,
}

/// The engine-facing part of a classification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Failure(FailureClass),
    Timeout(TimeoutPhase),
}

impl Classified {
    pub(crate) fn outcome(self) -> AttemptOutcome {
        match self.kind {
            Kind::Failure(c) => AttemptOutcome::Failure(c),
            Kind::Timeout(p) => AttemptOutcome::Timeout(p),
        }
    }
}

/// What the error chain says, independent of reqwest's types (so every case has a unit
/// test, including ones a loopback test cannot produce, such as "unreachable").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Facts {
    /// reqwest: the error happened while connecting.
    pub(crate) connect: bool,
    /// reqwest: a timeout somewhere in the chain.
    pub(crate) timeout: bool,
    /// reqwest: name resolution failed.
    pub(crate) dns: bool,
    /// reqwest: a request- or response-body error.
    pub(crate) body: bool,
    /// The first `io::Error` kind in the chain.
    pub(crate) io: Option<io::ErrorKind>,
    /// hyper: the connection closed before the message completed.
    pub(crate) incomplete: bool,
    /// hyper: the response could not be parsed.
    pub(crate) parse: bool,
    /// The chain mentions TLS (rustls reports handshake failures as `InvalidData` I/O
    /// errors whose text names the TLS problem).
    pub(crate) tls: bool,
    /// A certificate rejected in the handshake (rustls' error in the chain).
    pub(crate) rejected: Option<baton_tls::Rejection>,
    /// How an HTTP/2 stream ended (h2's error in the chain).
    pub(crate) h2: Option<H2End>,
    /// hyper-util refused the request's HTTP version on the connection it got, before
    /// writing anything (its `UserUnsupportedVersion`, known only by its text).
    pub(crate) version: bool,
}

/// Classifies a reqwest error.
pub(crate) fn classify(err: &reqwest::Error) -> Classified {
    let mut facts = chain_facts(err);
    // reqwest's own answers walk the whole chain: past the request body's own stream
    // (`facts.body`: the body is polled only once connected) they would be the body
    // source's, a download that failed to connect, say, and not this attempt's.
    if !facts.body {
        facts.connect = err.is_connect();
        facts.timeout = err.is_timeout();
        facts.dns = err.is_dns();
    }
    facts.body |= err.is_body();
    from_facts(facts)
}

/// Classifies any error: the first in the chain of a credential that could not be had, a
/// baton call's own error (an inner middleware or client that is baton: its report
/// decides, never one of its attempts' errors below it) and a reqwest error decides;
/// otherwise the phase is unknown and the failure is ambiguous (with the I/O kind for the
/// cause).
pub(crate) fn classify_dyn(err: &(dyn StdError + 'static)) -> Classified {
    let decides = |e: &(dyn StdError + 'static)| {
        e.is::<baton_core::credential::Unavailable>() || e.is::<reqwest::Error>()
    };
    if let Some(class) = baton_core::Error::of_inner_call(err, decides) {
        return Classified {
            kind: Kind::Failure(class),
            cause: FailureCause::InnerCall {
                may_have_executed: class != FailureClass::Undelivered,
            },
        };
    }
    let mut cur: Option<&(dyn StdError + 'static)> = Some(err);
    while let Some(e) = cur {
        if e.is::<baton_core::credential::Unavailable>() {
            return Classified {
                kind: Kind::Failure(FailureClass::Undelivered),
                cause: FailureCause::Credential,
            };
        }
        if let Some(r) = e.downcast_ref::<reqwest::Error>() {
            return classify(r);
        }
        cur = e.source();
    }
    let mut facts = chain_facts(err);
    // Without reqwest's phase information nothing proves the request was not sent.
    facts.connect = false;
    from_facts(facts)
}

/// Walks the source chain (the error itself included) down to where the attempt's own
/// errors end ([`ends_attempt`]).
fn chain_facts(err: &(dyn StdError + 'static)) -> Facts {
    let mut facts = Facts {
        rejected: baton_tls::rejection_above(err, &ends_attempt),
        ..Facts::default()
    };
    let mut cur: Option<&(dyn StdError + 'static)> = Some(err);
    while let Some(e) = cur {
        if ends_attempt(e) {
            // The request body's own stream failed (the head was sent): a body error.
            facts.body |= !baton_core::Error::is_call_link(e);
            break;
        }
        if let Some(h) = e.downcast_ref::<h2::Error>() {
            facts.h2 = facts.h2.or(h2_end(h));
        }
        if let Some(io) = e.downcast_ref::<io::Error>() {
            let kind = io_kind(io);
            facts.io.get_or_insert(kind);
            if kind == io::ErrorKind::TimedOut {
                facts.timeout = true;
            }
        }
        if let Some(h) = e.downcast_ref::<hyper::Error>() {
            facts.incomplete |= h.is_incomplete_message();
            facts.parse |= h.is_parse() || h.is_parse_status();
            facts.timeout |= h.is_timeout();
        }
        let text = e.to_string().to_ascii_lowercase();
        facts.version |= text == "client error (userunsupportedversion)";
        if !facts.tls {
            facts.tls = text.contains("tls")
                || text.contains("certificate")
                || text.contains("handshake")
                || text.contains("peer sent");
        }
        cur = e.source();
    }
    facts
}

/// Where an attempt's own errors end in a chain: at a baton call's error or the link to its
/// last attempt (`is_call_link`: below it are that call's attempts, read by its report), or at hyper's error for the request body's
/// own stream (`is_user`: below it is the error of the caller's body source, a download
/// that failed on its certificate, say, which proves nothing about this connection).
fn ends_attempt(e: &(dyn StdError + 'static)) -> bool {
    baton_core::Error::is_call_link(e)
        || e.downcast_ref::<hyper::Error>()
            .is_some_and(hyper::Error::is_user)
}

/// How an HTTP/2 stream ended, from h2's error, by core's reading
/// ([`baton_core::H2StreamError::end`]).
pub(crate) fn h2_end(e: &h2::Error) -> Option<H2End> {
    baton_core::H2StreamError {
        remote: e.is_remote(),
        go_away: e.is_go_away(),
        reset: e.is_reset(),
        code: e.reason().map(u32::from),
        // reqwest's connections are hyper's, driven by tasks on the caller's runtime:
        // on a multi-threaded one, hyper may hand the connection's GOAWAY to a stream it
        // had just opened (see `goaway_per_stream`), so a GOAWAY is no proof here.
        goaway_per_stream: false,
    }
    .end()
}

/// The most specific kind of an I/O error: an `Other` error wrapping another I/O error
/// (as hyper-rustls wraps rustls' `InvalidData`) has the inner kind. `io::Error::source`
/// skips the wrapped error itself, so it is looked at here.
fn io_kind(e: &io::Error) -> io::ErrorKind {
    let mut cur = e;
    for _ in 0..8 {
        if cur.kind() != io::ErrorKind::Other {
            break;
        }
        match cur.get_ref().and_then(|i| i.downcast_ref::<io::Error>()) {
            Some(inner) => cur = inner,
            None => break,
        }
    }
    cur.kind()
}

/// The decision, by phase. Connect-phase errors are undelivered (a connect-phase timeout
/// is an attempt timeout in the connect phase); everything else is ambiguous.
pub(crate) fn from_facts(f: Facts) -> Classified {
    use io::ErrorKind as K;
    // Our own verdict on the server's certificate is proof at any point; the server's
    // alert refusing our identity only while connecting: reqwest cannot tell whether a
    // later error came from a connection this attempt opened (baton_tls::Rejection).
    if let Some(r) = f.rejected {
        let proven = !r.is_server_alert() || f.connect;
        let class = match proven {
            true => FailureClass::Untrusted,
            false => FailureClass::Ambiguous,
        };
        return Classified {
            kind: Kind::Failure(class),
            cause: FailureCause::Certificate(r),
        };
    }
    if let (Some(end), false) = (f.h2, f.body) {
        let cause = match end {
            H2End::Reset { code } if code == baton_core::REFUSED_STREAM => {
                FailureCause::RefusedStream
            }
            H2End::GoAway { .. } => FailureCause::GoAway,
            _ => FailureCause::StreamReset,
        };
        return Classified {
            kind: Kind::Failure(end.class()),
            cause,
        };
    }
    if f.version && !f.body {
        return Classified {
            kind: Kind::Failure(FailureClass::Undelivered),
            cause: FailureCause::Version,
        };
    }
    if f.connect {
        let cause = if f.timeout {
            FailureCause::ConnectTimeout
        } else if f.dns {
            FailureCause::Dns
        } else {
            match f.io {
                Some(K::ConnectionRefused) => FailureCause::Refused,
                Some(K::HostUnreachable | K::NetworkUnreachable | K::AddrNotAvailable) => {
                    FailureCause::Unreachable
                }
                Some(K::InvalidData) => FailureCause::Tls,
                _ if f.tls => FailureCause::Tls,
                _ => FailureCause::Connect,
            }
        };
        let kind = if f.timeout {
            Kind::Timeout(TimeoutPhase::Connect)
        } else {
            Kind::Failure(FailureClass::Undelivered)
        };
        return Classified { kind, cause };
    }
    if f.timeout {
        return Classified {
            kind: Kind::Timeout(TimeoutPhase::Response),
            cause: FailureCause::Timeout,
        };
    }
    let cause = match f.io {
        Some(K::ConnectionReset) => FailureCause::Reset,
        Some(K::ConnectionAborted | K::BrokenPipe | K::UnexpectedEof | K::NotConnected) => {
            FailureCause::Closed
        }
        _ if f.incomplete => FailureCause::Closed,
        _ if f.parse => FailureCause::Protocol,
        _ if f.body => FailureCause::Body,
        _ => FailureCause::Other,
    };
    Classified {
        kind: Kind::Failure(FailureClass::Ambiguous),
        cause,
    }
}

#[cfg(test)]
mod tests {
    //! One test per case of the issue. Where loopback can produce the real error, the test
    //! makes reqwest produce it against a testkit provider (or a refused port, or a `.invalid`
    //! name); "unreachable" cannot be produced without contacting another address, so it is
    //! tested on the facts.
    use super::*;
    use std::time::Duration;
    use testkit::{Behaviour, Provider};

    fn undelivered(c: Classified) -> bool {
        c.kind == Kind::Failure(FailureClass::Undelivered)
    }
    fn ambiguous(c: Classified) -> bool {
        c.kind == Kind::Failure(FailureClass::Ambiguous)
    }

    async fn get(client: &reqwest::Client, url: &str) -> reqwest::Error {
        client.get(url).send().await.expect_err("expected an error")
    }

    fn plain() -> reqwest::Client {
        reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(2))
            .build()
            .unwrap()
    }

    #[tokio::test]
    async fn connection_refused_is_undelivered() {
        let e = get(&plain(), &testkit::refused_url()).await;
        let c = classify(&e);
        assert!(undelivered(c), "{c:?} {e:?}");
        assert_eq!(c.cause, FailureCause::Refused);
    }

    #[tokio::test]
    async fn dns_failure_is_undelivered() {
        let e = get(&plain(), &testkit::unresolvable_url()).await;
        let c = classify(&e);
        assert!(undelivered(c), "{c:?} {e:?}");
        assert_eq!(c.cause, FailureCause::Dns);
    }

    #[test]
    fn unreachable_is_undelivered() {
        for kind in [
            io::ErrorKind::HostUnreachable,
            io::ErrorKind::NetworkUnreachable,
        ] {
            let c = from_facts(Facts {
                connect: true,
                io: Some(kind),
                ..Facts::default()
            });
            assert!(undelivered(c));
            assert_eq!(c.cause, FailureCause::Unreachable);
        }
    }

    /// A resolver that never answers: the connect phase hangs without touching the network.
    struct Hang;
    impl reqwest::dns::Resolve for Hang {
        fn resolve(&self, _: reqwest::dns::Name) -> reqwest::dns::Resolving {
            Box::pin(std::future::pending())
        }
    }

    #[tokio::test]
    async fn connect_timeout_is_a_connect_phase_timeout() {
        let client = reqwest::Client::builder()
            .dns_resolver(std::sync::Arc::new(Hang))
            .connect_timeout(Duration::from_millis(50))
            .build()
            .unwrap();
        let e = get(&client, "http://hangs.invalid/").await;
        let c = classify(&e);
        assert_eq!(c.kind, Kind::Timeout(TimeoutPhase::Connect), "{e:?}");
        assert_eq!(c.cause, FailureCause::ConnectTimeout);
    }

    #[cfg(feature = "rustls")]
    #[tokio::test]
    async fn tls_handshake_failure_is_undelivered() {
        // A plain-HTTP provider answers the ClientHello with a 400: the handshake fails.
        let p = Provider::start(Behaviour::ok());
        let url = p.url().replace("http://", "https://");
        let e = get(&plain(), &url).await;
        let c = classify(&e);
        assert!(undelivered(c), "{c:?} {e:?}");
        assert_eq!(c.cause, FailureCause::Tls, "{e:?}");
        assert_eq!(p.request_count(), 0);
    }

    #[tokio::test]
    async fn read_timeout_is_an_ambiguous_response_timeout() {
        let p = Provider::start(Behaviour::ok().delay(Duration::from_secs(5)));
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_millis(200))
            .read_timeout(Duration::from_millis(300))
            .build()
            .unwrap();
        let e = get(&client, &p.url()).await;
        let c = classify(&e);
        assert_eq!(c.kind, Kind::Timeout(TimeoutPhase::Response), "{e:?}");
        assert_eq!(c.cause, FailureCause::Timeout);
        assert!(c.cause.may_have_executed());
    }

    #[tokio::test]
    async fn reset_is_ambiguous() {
        let p = Provider::start(Behaviour::reset());
        let e = get(&plain(), &p.url()).await;
        let c = classify(&e);
        assert!(ambiguous(c), "{c:?} {e:?}");
        assert!(
            matches!(c.cause, FailureCause::Reset | FailureCause::Closed),
            "{c:?} {e:?}"
        );
        assert_eq!(p.request_count(), 1);
    }

    #[tokio::test]
    async fn closed_is_ambiguous() {
        let p = Provider::start(Behaviour::close());
        let e = get(&plain(), &p.url()).await;
        let c = classify(&e);
        assert!(ambiguous(c), "{c:?} {e:?}");
        assert_eq!(c.cause, FailureCause::Closed, "{e:?}");
    }

    #[tokio::test]
    async fn body_error_is_ambiguous() {
        let p = Provider::start(
            Behaviour::status(200)
                .body("0123456789")
                .close_after_half_body(),
        );
        let resp = plain().get(p.url()).send().await.unwrap();
        let e = resp.bytes().await.unwrap_err();
        let c = classify(&e);
        assert!(ambiguous(c), "{c:?} {e:?}");
    }

    #[test]
    fn request_body_error_facts_are_ambiguous() {
        let c = from_facts(Facts {
            body: true,
            ..Facts::default()
        });
        assert!(ambiguous(c));
        assert_eq!(c.cause, FailureCause::Body);
    }

    #[test]
    fn unknown_error_is_ambiguous() {
        #[derive(Debug)]
        struct Strange;
        impl fmt::Display for Strange {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("something odd")
            }
        }
        impl StdError for Strange {}
        let c = classify_dyn(&Strange);
        assert!(ambiguous(c));
        assert_eq!(c.cause, FailureCause::Other);
        // Even an I/O "refused" without reqwest's phase information stays ambiguous.
        let io = io::Error::from(io::ErrorKind::ConnectionRefused);
        assert!(ambiguous(classify_dyn(&io)));
    }

    #[tokio::test]
    async fn unknown_reqwest_error_is_ambiguous() {
        // A builder error (bad URL) is neither connect nor timeout.
        let e = plain().get("http://[::1").send().await.unwrap_err();
        assert!(ambiguous(classify(&e)), "{e:?}");
    }

    #[tokio::test]
    async fn reqwest_error_inside_another_error_decides() {
        let e = get(&plain(), &testkit::refused_url()).await;
        #[derive(Debug)]
        struct Wrap(reqwest::Error);
        impl fmt::Display for Wrap {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("wrapped")
            }
        }
        impl StdError for Wrap {
            fn source(&self) -> Option<&(dyn StdError + 'static)> {
                Some(&self.0)
            }
        }
        assert!(undelivered(classify_dyn(&Wrap(e))));
    }

    /// A baton call below that made no attempt (an unknown `only` endpoint here; an inner
    /// breaker open, say) sent nothing: the outer attempt is undelivered.
    #[test]
    fn an_inner_call_that_made_no_attempt_is_undelivered() {
        use baton_core::{sim::Sim, CallOptions, Endpoint, Policy};
        let policy = Policy::builder().endpoint(Endpoint::new("a", "http://a.example/"));
        let mut sim = Sim::new(policy.build().unwrap(), std::time::Instant::now());
        let only = CallOptions {
            only: Some("z".into()),
            ..CallOptions::default()
        };
        let run = sim.run(http::Method::POST, only);
        let error = run.report.into_error().expect("no endpoint to call");
        assert!(error.report.attempts.is_empty());
        let inner = crate::Error::Call {
            error,
            retained: None,
        };
        let c = classify_dyn(&inner);
        assert!(undelivered(c), "{inner:#}");
        let nothing = FailureCause::InnerCall {
            may_have_executed: false,
        };
        assert_eq!(c.cause, nothing);
    }

    #[test]
    fn causes_say_whether_work_may_have_been_done() {
        for (cause, executed) in [
            (FailureCause::Dns, false),
            (FailureCause::Tls, false),
            (FailureCause::Version, false),
            (FailureCause::Timeout, true),
            (FailureCause::Closed, true),
            (FailureCause::Other, true),
        ] {
            assert_eq!(cause.may_have_executed(), executed, "{cause}");
        }
    }
}
