//! Failure classification (SPEC 1): which phase an attempt failed in, learnt exactly.
//!
//! ureq 3 reports a DNS failure as a plain I/O error, a refused connection and a reset
//! with the same `Error::Io` variant, and a timeout by the budget that expired. Guessing
//! the phase from those would be unreliable, so this module *observes* it instead:
//!
//! - [`ObservedResolver`] wraps the agent's resolver and marks the attempt *resolving*;
//! - [`ObservedConnector`] wraps the whole connector chain (TCP, proxy, TLS): it marks the
//!   attempt *connecting*, and *ready* when the chain hands back a finished transport
//!   (rustls completes the handshake inside the chain, so a TLS failure is still
//!   *connecting*);
//! - every transport it hands out is an [`ObservedTransport`], which marks the attempt
//!   *ready* the first time the attempt uses it: that is how a pooled keep-alive
//!   connection, which skips the connector, is seen.
//!
//! The phase lives in a thread-local slot: a blocking attempt runs entirely on the calling
//! thread (ureq resolves, connects and sends on it), and the slot is only armed between
//! [`begin`] and [`end`]. A failure before *ready* is **undelivered** (no request byte can
//! have left), anything later is **ambiguous**, and a phase that was never observed is
//! ambiguous too. Building errors seen before anything happened on the wire (a bad URL or
//! header) are **rejected locally**.
//!
//! The same wrappers enforce the attempt's budgets exactly, which ureq's separate
//! per-phase budgets cannot: resolving plus connecting share the attempt's connect
//! timeout, and sending plus waiting for the response headers share its attempt timeout
//! (from the moment the connection is ready), both clipped to the call's deadline.
//!
//! A certificate rejected in the handshake is proof at any phase (untrusted), but only in
//! the connection's own errors: a request body's reader that fails (on a certificate of
//! its own download, say) has its error marked ([`BodySource`]), and is read by the phase
//! like any other error.
//!
//! This module decides nothing else: no retry, no endpoint choice.

use std::cell::Cell;
use std::fmt;
use std::io::{self, Read};
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

use baton_core::{AttemptOutcome, FailureClass, TimeoutPhase};
use ureq::config::Config;
use ureq::http::Uri;
use ureq::unversioned::resolver::{ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::time::Duration as UDuration;
use ureq::unversioned::transport::{Buffers, ConnectionDetails, Connector, NextTimeout, Transport};
use ureq::Timeout;

/// How far an attempt got before it ended (ordered: the phase only moves forward).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Phase {
    /// Nothing happened on the wire yet (request being built, pool lookup).
    Idle,
    /// Resolving the host name.
    Resolving,
    /// Connecting (TCP, proxy negotiation, TLS handshake).
    Connecting,
    /// The connection is ready: request bytes may have left.
    Ready,
    /// No observation (the wrappers were not in the path): treated as ambiguous.
    Unknown,
}

#[derive(Debug, Clone, Copy)]
struct Slot {
    armed: bool,
    phase: Phase,
    /// Depth of nested connector runs (a CONNECT proxy runs the chain again inside).
    depth: u32,
    /// The attempt opened its own connection (the connector ran for it).
    fresh: bool,
    /// End of the connect budget (resolve + connect).
    connect_until: Option<Instant>,
    /// Attempt timeout, started when the connection becomes ready.
    response_budget: std::time::Duration,
    /// The call's deadline.
    deadline: Option<Instant>,
    /// End of the response budget (set when ready).
    response_until: Option<Instant>,
}

const DISARMED: Slot = Slot {
    armed: false,
    phase: Phase::Idle,
    depth: 0,
    fresh: false,
    connect_until: None,
    response_budget: std::time::Duration::ZERO,
    deadline: None,
    response_until: None,
};

thread_local! {
    /// In a `RefCell`, changed in place: a `Cell` copied the whole slot out and back on
    /// every look (several times an attempt).
    static SLOT: std::cell::RefCell<Slot> = const { std::cell::RefCell::new(DISARMED) };
    /// While an event stream reads its body on this thread: when the read must give up.
    static IDLE: Cell<Option<Instant>> = const { Cell::new(None) };
    /// While an event stream's connection call runs on this thread: its body gets no
    /// total timeout.
    static ENDLESS: Cell<bool> = const { Cell::new(false) };
    static FORWARD: std::cell::RefCell<Option<Forward>> = const { std::cell::RefCell::new(None) };
}

/// An `http` request forwarded to a proxy in absolute form (SPEC 3): ureq only tunnels
/// (`CONNECT`), so for these the resolver answers with the proxy's address and the
/// connection's transport writes each request line in absolute form.
#[derive(Debug, Clone)]
pub(crate) struct Forward {
    /// The proxy, `http://host:port`.
    pub(crate) proxy: String,
    /// `http://host:port` of the target, put in front of each request line's path.
    pub(crate) absolute: String,
}

/// Routes the attempt armed on this thread through a forwarding proxy (or not).
pub(crate) fn forward_through(forward: Option<Forward>) {
    FORWARD.with(|f| *f.borrow_mut() = forward);
}

fn forwarding() -> Option<Forward> {
    FORWARD.with(|f| f.borrow().clone())
}

/// Runs `f` on this thread's slot. `f` never reaches the slot again itself.
fn with_slot<R>(f: impl FnOnce(&mut Slot) -> R) -> R {
    SLOT.with(|c| f(&mut c.borrow_mut()))
}

fn min_opt(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Arms the slot for one attempt on this thread.
pub(crate) fn begin(
    now: Instant,
    connect_timeout: std::time::Duration,
    timeout: std::time::Duration,
    deadline: Option<Instant>,
) {
    let connect_until = now.checked_add(connect_timeout);
    with_slot(|s| {
        *s = Slot {
            armed: true,
            phase: Phase::Idle,
            depth: 0,
            fresh: false,
            connect_until: min_opt(connect_until, deadline),
            response_budget: timeout,
            deadline,
            response_until: None,
        }
    });
}

/// Disarms the slot and returns how far the attempt got.
pub(crate) fn end() -> Phase {
    end_fresh().0
}

/// [`end`], and whether the attempt opened its own connection.
pub(crate) fn end_fresh() -> (Phase, bool) {
    forward_through(None);
    with_slot(|s| {
        let phase = if s.armed { s.phase } else { Phase::Unknown };
        let fresh = s.armed && s.fresh;
        *s = DISARMED;
        (phase, fresh)
    })
}

fn advance(to: Phase) {
    with_slot(|s| {
        if !s.armed || s.phase >= to {
            return;
        }
        if to == Phase::Ready && s.depth > 0 {
            // A nested connector run (the connection to a CONNECT proxy) is not the
            // attempt's connection.
            return;
        }
        s.phase = to;
        if to == Phase::Connecting && s.depth == 0 {
            s.fresh = true;
        }
        if to == Phase::Ready {
            let now = Instant::now();
            s.response_until = min_opt(now.checked_add(s.response_budget), s.deadline);
        }
    });
}

/// Clips a ureq timeout to `until`, reporting `reason` when the clip is what expires.
fn clip(mut t: NextTimeout, until: Option<Instant>, reason: Timeout) -> NextTimeout {
    if let Some(until) = until {
        let left = until.saturating_duration_since(Instant::now());
        if left < *t.after {
            t.after = UDuration::Exact(left);
            t.reason = reason;
        }
    }
    t
}

fn connect_until() -> Option<Instant> {
    with_slot(|s| if s.armed { s.connect_until } else { None })
}

/// Classifies a ureq error by the phase the attempt reached (SPEC 1).
///
/// Before the connection was ready (resolving or connecting, as baton's resolver and
/// connector saw): a timeout is a connect timeout, anything else is undelivered. After: a
/// timeout is a response timeout, anything else ambiguous. Before anything was seen
/// (idle): a building error is rejected locally; anything else is treated as unobserved,
/// ambiguous (a ureq middleware of the caller's may have sent the request its own way).
/// An unknown phase is ambiguous.
pub(crate) fn classify(err: &ureq::Error, phase: Phase, fresh: bool) -> AttemptOutcome {
    use ureq::Error as E;
    // SPEC 9: a certificate we rejected in the handshake, or a client identity the server
    // refused with a handshake alert on the connection this attempt opened (in TLS 1.3
    // the alert can arrive after the client finished its side): nothing was processed,
    // and the endpoint would fail the same way.
    if rejected(err).is_some_and(|r| !r.is_server_alert() || fresh) {
        return AttemptOutcome::Failure(FailureClass::Untrusted);
    }
    match phase {
        Phase::Idle => match err {
            E::Http(_) | E::BadUri(_) | E::RequireHttpsOnly(_) => {
                AttemptOutcome::Failure(FailureClass::RejectedLocally)
            }
            E::Timeout(_) => AttemptOutcome::Timeout(TimeoutPhase::Unknown),
            _ => AttemptOutcome::Failure(FailureClass::Ambiguous),
        },
        Phase::Ready | Phase::Unknown => match err {
            E::Timeout(_) => AttemptOutcome::Timeout(if phase == Phase::Ready {
                TimeoutPhase::Response
            } else {
                TimeoutPhase::Unknown
            }),
            _ => AttemptOutcome::Failure(FailureClass::Ambiguous),
        },
        Phase::Resolving | Phase::Connecting => match err {
            E::Timeout(_) => AttemptOutcome::Timeout(TimeoutPhase::Connect),
            _ => AttemptOutcome::Failure(FailureClass::Undelivered),
        },
    }
}

/// The certificate rejection in a ureq error (rustls' error inside its I/O error), if any,
/// above an error of the request body's own source ([`BodySource`]): that one is the
/// caller's, and proves nothing about the attempt's connection.
pub(crate) fn rejected(err: &ureq::Error) -> Option<baton_tls::Rejection> {
    let source = |e: &(dyn std::error::Error + 'static)| e.is::<BodySource>();
    match err {
        ureq::Error::Io(io) => baton_tls::rejection_above(io, &source),
        #[cfg(feature = "rustls")]
        ureq::Error::Rustls(e) => baton_tls::rejection(e),
        _ => None,
    }
}

/// A read of the request body's source that failed, as ureq hands it back (inside its
/// I/O error): the caller's reader, not the attempt's connection, failed. A reader that
/// streams from elsewhere (a download whose certificate was rejected) must not read as
/// this connection's proof that nothing was sent: the head went first.
#[derive(Debug)]
pub(crate) struct BodySource(io::Error);

impl fmt::Display for BodySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // ureq's error keeps no source: the reader's error is told here, once, with its
        // causes (URLs reduced to their origins).
        write!(f, "the request body's source failed: {}", self.0)?;
        baton_core::write_causes(f, &self.0)
    }
}

impl std::error::Error for BodySource {}

/// The caller's body reader, its errors marked as [`BodySource`] (their kind kept).
pub(crate) struct SourceRead(pub(crate) Box<dyn Read>);

impl Read for SourceRead {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0
            .read(buf)
            .map_err(|e| io::Error::new(e.kind(), BodySource(e)))
    }
}

/// The socket address of a URL whose host is an IP literal (`http`/`https` only).
fn ip_literal(uri: &Uri) -> Option<SocketAddr> {
    let host = uri.host()?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if !host.starts_with(|c: char| c.is_ascii_digit() || c == ':') {
        return None;
    }
    let ip: IpAddr = host.parse().ok()?;
    let port = match (uri.port_u16(), uri.scheme_str()) {
        (Some(p), _) => p,
        (None, Some("http")) => 80,
        (None, Some("https")) => 443,
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// A resolver that marks the attempt *resolving* and keeps the lookup within the
/// attempt's connect budget. IP literals are answered without a lookup thread.
pub(crate) struct ObservedResolver<R>(pub(crate) R);

impl<R> fmt::Debug for ObservedResolver<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ObservedResolver")
    }
}

impl<R: Resolver> Resolver for ObservedResolver<R> {
    fn resolve(
        &self,
        uri: &Uri,
        config: &Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        advance(Phase::Resolving);
        // Forwarded through a proxy: the proxy is what is connected to.
        let proxy_uri = forwarding().and_then(|f| f.proxy.parse::<Uri>().ok());
        let uri = proxy_uri.as_ref().unwrap_or(uri);
        if let Some(addr) = ip_literal(uri) {
            // Nothing to look up (and no lookup thread, which ureq's resolver spawns to
            // time a lookup).
            let mut addrs = self.0.empty();
            for a in config.ip_family().keep_wanted(std::iter::once(addr)) {
                addrs.push(a);
            }
            return if addrs.is_empty() {
                Err(ureq::Error::HostNotFound)
            } else {
                Ok(addrs)
            };
        }
        let timeout = clip(timeout, connect_until(), Timeout::Resolve);
        if timeout.after.is_zero() {
            return Err(ureq::Error::Timeout(Timeout::Resolve));
        }
        self.0.resolve(uri, config, timeout)
    }

    fn empty(&self) -> ResolvedSocketAddrs {
        self.0.empty()
    }
}

/// The outermost connector: marks *connecting*, then *ready* when the chain returns a
/// finished transport, which it wraps in an [`ObservedTransport`].
pub(crate) struct ObservedConnector<C>(pub(crate) C);

impl<C> fmt::Debug for ObservedConnector<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ObservedConnector")
    }
}

impl<C: Connector<()>> Connector<()> for ObservedConnector<C> {
    type Out = ObservedTransport;

    fn connect(
        &self,
        details: &ConnectionDetails<'_>,
        chained: Option<()>,
    ) -> Result<Option<Self::Out>, ureq::Error> {
        advance(Phase::Connecting);
        with_slot(|s| s.depth += 1);
        let clipped = clip(details.timeout, connect_until(), Timeout::Connect);
        let result = if clipped.after.is_zero() {
            Err(ureq::Error::Timeout(Timeout::Connect))
        } else if clipped == details.timeout {
            self.0.connect(details, chained)
        } else {
            let details = ConnectionDetails {
                uri: details.uri,
                addrs: details.addrs.clone(),
                config: details.config,
                request_level: details.request_level,
                resolver: details.resolver,
                now: details.now,
                timeout: clipped,
                current_time: details.current_time.clone(),
                run_connector: details.run_connector.clone(),
                register_shutdown: details.register_shutdown.clone(),
            };
            self.0.connect(&details, chained)
        };
        with_slot(|s| s.depth = s.depth.saturating_sub(1));
        match result {
            Ok(Some(t)) => {
                advance(Phase::Ready);
                Ok(Some(ObservedTransport {
                    inner: Box::new(t),
                    absolute: forwarding().map(|f| f.absolute),
                    at_head: true,
                }))
            }
            Ok(None) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// A transport that marks the attempt *ready* when the attempt first uses it (a pooled
/// connection) and keeps sending plus waiting for the head within the attempt timeout.
#[derive(Debug)]
pub(crate) struct ObservedTransport {
    inner: Box<dyn Transport>,
    /// For a connection to a forwarding proxy: the target's `http://host:port`, put in
    /// front of every request line's path.
    absolute: Option<String>,
    /// The next output starts a request head.
    at_head: bool,
}

impl ObservedTransport {
    /// Rewrites `METHOD /path HTTP/1.1` at the start of the output into absolute form;
    /// returns the new amount.
    fn absolute_form(&mut self, amount: usize) -> Result<usize, ureq::Error> {
        let Some(prefix) = self.absolute.as_deref() else {
            return Ok(amount);
        };
        if !std::mem::take(&mut self.at_head) {
            return Ok(amount);
        }
        let out = self.inner.buffers().output();
        let head = &out[..amount.min(out.len())];
        let Some(sp) = head.iter().take(33).position(|&b| b == b' ') else {
            return Ok(amount);
        };
        if head.get(sp + 1) != Some(&b'/') {
            return Ok(amount);
        }
        let grown = amount + prefix.len();
        if grown > out.len() {
            return Err(ureq::Error::Other(
                "the request head is too large to forward through the proxy".into(),
            ));
        }
        out.copy_within(sp + 1..amount, sp + 1 + prefix.len());
        out[sp + 1..sp + 1 + prefix.len()].copy_from_slice(prefix.as_bytes());
        Ok(grown)
    }
}

/// A connection reset or cut short (`ConnectionReset`, `ConnectionAborted`, and
/// `UnexpectedEof`, a TLS peer gone without its close) as an error ureq passes on: ureq
/// reads these as the end of a body, and a body framed by the connection's close (no
/// length, not chunked) then read as whole when it was cut (SPEC 1: a body failure is never
/// passed off as a complete body). hyper fails such a read, as baton's async adapters do.
/// The kind becomes `Other` for ureq's sake, the original error inside [`CutShort`], whose
/// kind the body's reader gives back to the caller.
fn cut_is_an_error(e: ureq::Error) -> ureq::Error {
    use io::ErrorKind as K;
    match e {
        ureq::Error::Io(io)
            if matches!(
                io.kind(),
                K::ConnectionReset | K::ConnectionAborted | K::UnexpectedEof
            ) =>
        {
            ureq::Error::Io(io::Error::other(CutShort(io)))
        }
        e => e,
    }
}

/// A connection reset or cut short, hidden from ureq under the kind `Other` (see
/// `cut_is_an_error`); it reads as the error it holds, and the body's reader restores
/// that error's kind.
#[derive(Debug)]
pub(crate) struct CutShort(pub(crate) io::Error);

impl fmt::Display for CutShort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for CutShort {
    // The inner error's own text is this one's: its source is the inner's source.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

fn response_timeout(t: NextTimeout) -> NextTimeout {
    advance(Phase::Ready);
    let until = with_slot(|s| {
        if s.armed && s.depth == 0 {
            s.response_until
        } else {
            None
        }
    });
    if until.is_none() {
        if let Some(idle) = IDLE.with(Cell::get) {
            return quantize(clip(t, Some(idle), Timeout::RecvBody));
        }
    }
    quantize(clip(t, until, Timeout::RecvResponse))
}

/// Marks the calls run on this thread, while the guard lives, as an event stream's
/// connections: their bodies get no total timeout, the stream's idle timeout watches them
/// instead. The mark is lifted when the guard drops, a panic included.
pub(crate) fn endless_body() -> impl Drop {
    ENDLESS.with(|c| c.set(true));
    Lift(|| ENDLESS.with(|c| c.set(false)))
}

/// Runs its closure when dropped: lifts a thread-local mark on every way out.
struct Lift<F: FnMut()>(F);

impl<F: FnMut()> Drop for Lift<F> {
    fn drop(&mut self) {
        (self.0)();
    }
}

pub(crate) fn is_endless_body() -> bool {
    ENDLESS.with(Cell::get)
}

/// Holds every read of a body on this thread to `at` (an event stream's idle deadline)
/// while the guard lives. Reads outside an attempt are clipped only by this.
pub(crate) fn idle_until(at: Option<Instant>) -> impl Drop {
    IDLE.with(|c| c.set(at));
    Lift(|| IDLE.with(|c| c.set(None)))
}

/// Rounds a budget down to whole milliseconds. ureq's TCP transport sets the socket
/// timeout only when the value changes; an exact remaining budget changes on every call
/// (two `setsockopt` per request on a keep-alive connection), a millisecond one does not.
/// The budget ends at most 1 ms early.
fn quantize(mut t: NextTimeout) -> NextTimeout {
    if let UDuration::Exact(d) = t.after {
        if d >= std::time::Duration::from_millis(1) {
            let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
            t.after = UDuration::Exact(std::time::Duration::from_millis(ms));
        }
    }
    t
}

impl Transport for ObservedTransport {
    fn buffers(&mut self) -> &mut dyn Buffers {
        self.inner.buffers()
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), ureq::Error> {
        let timeout = response_timeout(timeout);
        if timeout.after.is_zero() {
            return Err(ureq::Error::Timeout(timeout.reason));
        }
        let amount = self.absolute_form(amount)?;
        self.inner.transmit_output(amount, timeout)
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, ureq::Error> {
        let timeout = response_timeout(timeout);
        if timeout.after.is_zero() {
            return Err(ureq::Error::Timeout(timeout.reason));
        }
        // The request was sent: the next output is the next request's head.
        self.at_head = true;
        self.inner.await_input(timeout).map_err(cut_is_an_error)
    }

    fn is_open(&mut self) -> bool {
        self.inner.is_open()
    }

    fn is_tls(&self) -> bool {
        self.inner.is_tls()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    fn io(kind: io::ErrorKind) -> ureq::Error {
        ureq::Error::Io(io::Error::new(kind, "test"))
    }

    fn class(o: AttemptOutcome) -> String {
        format!("{o:?}")
    }

    const UNDELIVERED: &str = "Failure(Undelivered)";
    const AMBIGUOUS: &str = "Failure(Ambiguous)";

    #[test]
    fn refused_connection_is_undelivered() {
        let e = io(io::ErrorKind::ConnectionRefused);
        assert_eq!(class(classify(&e, Phase::Connecting, false)), UNDELIVERED);
    }

    #[test]
    fn dns_failure_is_undelivered_whatever_its_message() {
        // ureq 3 reports a failed lookup as an uncategorised I/O error (or HostNotFound):
        // the phase, not the text, decides.
        let e = ureq::Error::Io(io::Error::other("failed to lookup address information"));
        assert_eq!(class(classify(&e, Phase::Resolving, false)), UNDELIVERED);
        assert_eq!(
            class(classify(
                &ureq::Error::HostNotFound,
                Phase::Resolving,
                false
            )),
            UNDELIVERED
        );
    }

    #[test]
    fn unreachable_host_or_network_is_undelivered() {
        for kind in [
            io::ErrorKind::HostUnreachable,
            io::ErrorKind::NetworkUnreachable,
        ] {
            assert_eq!(
                class(classify(&io(kind), Phase::Connecting, false)),
                UNDELIVERED
            );
        }
    }

    #[test]
    fn connect_timeout_is_a_connect_phase_timeout() {
        for t in [Timeout::Connect, Timeout::Resolve, Timeout::Global] {
            let e = ureq::Error::Timeout(t);
            assert_eq!(
                class(classify(&e, Phase::Connecting, false)),
                "Timeout(Connect)",
                "{t:?}"
            );
        }
    }

    /// Before baton's resolver and connector saw anything, only a building error proves
    /// nothing was sent: anything else (a caller's ureq middleware that sent the request
    /// its own way and failed) is unobserved, ambiguous. Before, it read undelivered.
    #[test]
    fn an_unobserved_failure_is_ambiguous_and_a_build_error_rejected_locally() {
        let reset = io(io::ErrorKind::ConnectionReset);
        assert_eq!(class(classify(&reset, Phase::Idle, false)), AMBIGUOUS);
        assert_eq!(
            class(classify(&reset, Phase::Connecting, false)),
            UNDELIVERED
        );
        let e = ureq::Error::Timeout(Timeout::RecvResponse);
        assert_eq!(class(classify(&e, Phase::Idle, false)), "Timeout(Unknown)");
        let e = ureq::Error::BadUri("no host".into());
        assert_eq!(
            class(classify(&e, Phase::Idle, false)),
            "Failure(RejectedLocally)"
        );
    }

    #[test]
    fn tls_handshake_failure_is_undelivered() {
        let e = ureq::Error::Tls("handshake alert");
        assert_eq!(class(classify(&e, Phase::Connecting, false)), UNDELIVERED);
        let e = io(io::ErrorKind::InvalidData);
        assert_eq!(class(classify(&e, Phase::Connecting, false)), UNDELIVERED);
    }

    #[test]
    fn read_timeout_after_ready_is_a_response_timeout() {
        for t in [
            Timeout::RecvResponse,
            Timeout::SendRequest,
            Timeout::PerRead,
        ] {
            let e = ureq::Error::Timeout(t);
            assert_eq!(
                class(classify(&e, Phase::Ready, false)),
                "Timeout(Response)"
            );
        }
    }

    #[test]
    fn reset_closed_and_broken_pipe_after_ready_are_ambiguous() {
        for kind in [
            io::ErrorKind::ConnectionReset,
            io::ErrorKind::UnexpectedEof,
            io::ErrorKind::BrokenPipe,
            io::ErrorKind::ConnectionAborted,
        ] {
            assert_eq!(class(classify(&io(kind), Phase::Ready, false)), AMBIGUOUS);
        }
    }

    #[test]
    fn tls_alert_or_protocol_error_after_ready_is_ambiguous() {
        assert_eq!(
            class(classify(&ureq::Error::Tls("alert"), Phase::Ready, false)),
            AMBIGUOUS
        );
        assert_eq!(
            class(classify(
                &ureq::Error::LargeResponseHeader(1, 2),
                Phase::Ready,
                false
            )),
            AMBIGUOUS
        );
    }

    #[test]
    fn body_errors_are_ambiguous() {
        // A body failure is after the head: the connection was ready.
        let e = ureq::Error::Timeout(Timeout::RecvBody);
        assert_eq!(
            class(classify(&e, Phase::Ready, false)),
            "Timeout(Response)"
        );
        assert_eq!(
            class(classify(
                &io(io::ErrorKind::UnexpectedEof),
                Phase::Ready,
                false
            )),
            AMBIGUOUS
        );
    }

    #[test]
    fn unknown_phase_is_ambiguous() {
        assert_eq!(
            class(classify(
                &ureq::Error::ConnectionFailed,
                Phase::Unknown,
                false
            )),
            AMBIGUOUS
        );
        assert_eq!(
            class(classify(
                &ureq::Error::Timeout(Timeout::Global),
                Phase::Unknown,
                false
            )),
            "Timeout(Unknown)"
        );
    }

    #[test]
    fn building_errors_before_the_wire_are_rejected_locally() {
        let e = ureq::Error::BadUri("no host".into());
        assert_eq!(
            class(classify(&e, Phase::Idle, false)),
            "Failure(RejectedLocally)"
        );
        // The same error after resolving started is not a building error.
        assert_eq!(class(classify(&e, Phase::Resolving, false)), UNDELIVERED);
    }

    #[test]
    fn budgets_are_whole_milliseconds_so_socket_timeouts_stay_put() {
        let t = NextTimeout {
            after: UDuration::Exact(std::time::Duration::from_micros(29_999_987)),
            ..NextTimeout::default()
        };
        assert_eq!(*quantize(t).after, std::time::Duration::from_millis(29_999));
        let tiny = NextTimeout {
            after: UDuration::Exact(std::time::Duration::from_micros(400)),
            ..NextTimeout::default()
        };
        assert_eq!(*quantize(tiny).after, std::time::Duration::from_micros(400));
        assert!(quantize(NextTimeout::default()).after.is_not_happening());
    }

    #[test]
    fn ip_literals_need_no_lookup() {
        let a = |u: &str| ip_literal(&u.parse().unwrap());
        assert_eq!(
            a("http://127.0.0.1:8080/x"),
            Some("127.0.0.1:8080".parse().unwrap())
        );
        assert_eq!(a("https://[::1]/"), Some("[::1]:443".parse().unwrap()));
        assert_eq!(a("http://10.0.0.1/"), Some("10.0.0.1:80".parse().unwrap()));
        assert_eq!(a("http://example.com/"), None);
        assert_eq!(a("http://1.example/"), None);
    }

    #[test]
    fn phase_only_moves_forward_and_ends_disarmed() {
        begin(
            Instant::now(),
            std::time::Duration::from_secs(1),
            std::time::Duration::from_secs(1),
            None,
        );
        advance(Phase::Connecting);
        advance(Phase::Resolving);
        assert_eq!(end(), Phase::Connecting);
        // Not armed: nothing observed.
        advance(Phase::Ready);
        assert_eq!(end(), Phase::Unknown);
    }

    #[test]
    fn nested_connector_run_does_not_make_the_attempt_ready() {
        begin(
            Instant::now(),
            std::time::Duration::from_secs(1),
            std::time::Duration::from_secs(1),
            None,
        );
        advance(Phase::Connecting);
        with_slot(|s| s.depth = 1);
        advance(Phase::Ready);
        with_slot(|s| s.depth = 0);
        assert_eq!(end(), Phase::Connecting);
    }
}
