//! The one async call driver: the loop that turns a [`Call`]'s actions into sends and
//! waits, and what happened into its inputs, for every async adapter (tokio, async-std and
//! smol, the tower layer). It decides nothing (which endpoint, whether to retry, how long
//! to wait all come from the [`Call`]) and does no I/O of its own: an adapter's
//! [`CallTransport`] builds each attempt's request, sends it under the attempt's timer,
//! says how it ended, and makes the wait's timer. The blocking adapter keeps a loop of its
//! own over the same [`Call`].
//!
//! What the driver owns, once for every adapter:
//! - the attempts in flight, each a future owned by the call's future (never spawned), so
//!   several run at once (hedging) and dropping the call's future cancels them all and
//!   drops the [`Call`] (which reports them cancelled and frees any half-open probe slot);
//! - one unboxed, pinned slot in the call's own future for the send of one attempt: a
//!   healthy call (one attempt in flight, no credential) allocates no future of its own;
//!   a hedge beside it, or an endpoint with a credential, is boxed;
//! - redirects (SPEC 3): each attempt's [`Redirects`], the hop's headers, and handing the
//!   hops to the call when the attempt lands;
//! - the last attempt's error, handed to [`CallTransport::finish`] when that attempt ended
//!   with one.
//!
//! The driver's future is an `async` block returned as is, not an `async fn`: an `async
//! fn` keeps a second copy of its arguments (the request and the options) in its state.
//!
//! ```
//! use std::future::{ready, Future, Ready};
//! use std::time::{Duration, Instant};
//! use baton_core::drive::{self, Built, CallTransport, Landed, NotBuilt, Sent};
//! use baton_core::{Attempt, BodyKind, Call, CallOptions, DestinationError, Done, Endpoint,
//!     Engine, Head, Hop, IdentityHeaders, Policy};
//! use http::request::Parts;
//!
//! /// A transport whose every send is answered 200 at once.
//! struct Instant200(Engine);
//!
//! /// A request as this transport keeps it: its head only.
//! struct Get(Parts);
//!
//! impl AsRef<Parts> for Get {
//!     fn as_ref(&self) -> &Parts { &self.0 }
//! }
//!
//! impl CallTransport for Instant200 {
//!     type Prepared = Get;
//!     type Answer = Head;
//!     type Request = usize;
//!     type Ticket = ();
//!     type Ended = Head;
//!     type Error = String;
//!     type Timer = std::future::Pending<()>;
//!     type Output = Result<(usize, u16), String>;
//!     fn engine(&self) -> &Engine { &self.0 }
//!     fn now(&self) -> Instant { Instant::now() }
//!     fn body_kind(&self, _: &Get) -> BodyKind { BodyKind::Empty }
//!     fn build(&self, _: &mut Get, _: &Call<'_, Head>,
//!         _: &Result<IdentityHeaders, DestinationError>, a: &Attempt, _: Instant)
//!         -> Result<Built<usize, ()>, NotBuilt<String>> {
//!         Ok(Built { request: a.endpoint, spare: None, ticket: () })
//!     }
//!     fn send(&self, _: usize, _: usize, _: Instant) -> impl Future<Output = Head> + Send {
//!         ready(Head::new(http::StatusCode::OK))
//!     }
//!     fn land(&self, ended: Head, _: &Sent<()>) -> Landed<Head, String> {
//!         Landed::Response(ended)
//!     }
//!     fn hop(&self, _: &mut Get, _: &Sent<()>, _: &Hop, _: http::HeaderMap) -> Option<usize> {
//!         None // this transport follows no redirect: a 3xx is the answer
//!     }
//!     fn timer(&self, _: Instant) -> Self::Timer { std::future::pending() }
//!     fn finish(&self, done: Done<Head>, _: Option<String>, _: Option<Instant>)
//!         -> Self::Output {
//!         match done.into_result() {
//!             Ok((head, report)) => Ok((report.attempts.len(), head.status.as_u16())),
//!             Err((e, _)) => Err(e.to_string()),
//!         }
//!     }
//! }
//!
//! let policy = Policy::builder().endpoint(Endpoint::new("a", "http://a.example/")).build().unwrap();
//! let (get, ()) = http::Request::get("/").body(()).unwrap().into_parts();
//! let t = Instant200(Engine::new(policy));
//! let mut call = std::pin::pin!(drive::drive(t, Get(get), CallOptions::default()));
//! let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
//! assert_eq!(call.as_mut().poll(&mut cx), std::task::Poll::Ready(Ok((1, 200))));
//! ```

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant, SystemTime};

use http::{HeaderMap, Uri};
use smallvec::SmallVec;

use crate::{
    Action, Answer, Attempt, AttemptOutcome, BodyKind, Call, CallOptions, DestinationError, Done,
    Engine, FailureClass, Hop, IdentityHeaders, Input, Redirects, RequestInfo,
};

/// A send in flight, boxed: a hedge beside the slot's send, or one with a credential.
pub type Flight<'a, E> = Pin<Box<dyn Future<Output = E> + Send + 'a>>;

/// An attempt's request, ready to send.
///
/// ```
/// use baton_core::drive::Built;
///
/// // A transport's `build`: the attempt's request, a spare copy when the endpoint has a
/// // credential (for the one re-send after a 401), and what it keeps beside the attempt.
/// fn build(url: &str, body: &[u8], credential: bool, attempt: u32) -> Built<(String, Vec<u8>), u32> {
///     let request = (url.to_string(), body.to_vec());
///     let spare = credential.then(|| Box::new(request.clone()));
///     Built { request, spare, ticket: attempt }
/// }
/// let plain = build("https://a.example/pay", b"{}", false, 1);
/// assert!(plain.spare.is_none());
/// let with_token = build("https://b.example/pay", b"{}", true, 2);
/// assert_eq!(with_token.spare.as_deref(), Some(&with_token.request));
/// assert_eq!(with_token.ticket, 2);
/// ```
#[derive(Debug)]
pub struct Built<R, K> {
    /// The request of the attempt's first hop.
    pub request: R,
    /// A copy for the one re-send after a credential refusal (SPEC 9), when the endpoint
    /// has a credential slot and the request can be copied (boxed: the healthy call,
    /// without one, moves only an empty pointer).
    pub spare: Option<Box<R>>,
    /// What the transport keeps beside the attempt ([`Sent::ticket`]).
    pub ticket: K,
}

/// Why no request could be built for an attempt.
///
/// ```
/// use baton_core::drive::NotBuilt;
///
/// // A transport's `build`: a bad header is the request's own fault; a one-shot body
/// // already sent cannot go to a later attempt.
/// fn build(token: &str, body: &mut Option<Vec<u8>>) -> Result<Vec<u8>, NotBuilt<String>> {
///     http::HeaderValue::from_str(token).map_err(|e| NotBuilt::Rejected(e.to_string()))?;
///     body.take().ok_or(NotBuilt::Replay(None))
/// }
/// let mut body = Some(b"{}".to_vec());
/// assert_eq!(build("t1", &mut body).unwrap(), b"{}");
/// assert!(matches!(build("t1", &mut body), Err(NotBuilt::Replay(None))));
/// assert!(matches!(build("t1\n", &mut Some(vec![])), Err(NotBuilt::Rejected(_))));
/// ```
#[derive(Debug)]
pub enum NotBuilt<E> {
    /// The request is invalid: the attempt fails as rejected locally, with this error.
    Rejected(E),
    /// No copy of the body could be made for this attempt (a one-shot body already
    /// sent); the error, when there is one, is kept as the call's last.
    Replay(Option<E>),
}

/// How a request of an attempt ended, as the driver hands it on.
///
/// ```
/// use std::io::{Error, ErrorKind};
/// use baton_core::drive::Landed;
/// use baton_core::{AttemptOutcome, FailureClass, Head};
///
/// // A transport's `land`: a response, or the failure classified by how far it got.
/// fn land(ended: Result<u16, Error>) -> Landed<Head, Error> {
///     match ended {
///         Ok(status) => Landed::Response(Head::new(status.try_into().unwrap())),
///         Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
///             Landed::Failed(AttemptOutcome::Failure(FailureClass::Undelivered), e)
///         }
///         Err(e) => Landed::Failed(AttemptOutcome::Failure(FailureClass::Ambiguous), e),
///     }
/// }
/// assert!(matches!(land(Ok(503)), Landed::Response(h) if h.status == 503));
/// let refused = land(Err(ErrorKind::ConnectionRefused.into()));
/// assert!(matches!(refused, Landed::Failed(AttemptOutcome::Failure(FailureClass::Undelivered), _)));
/// let reset = land(Err(ErrorKind::ConnectionReset.into()));
/// assert!(matches!(reset, Landed::Failed(AttemptOutcome::Failure(c), _) if c.may_have_executed()));
/// ```
#[derive(Debug)]
pub enum Landed<A, E> {
    /// Response headers arrived (the commit point).
    Response(A),
    /// The attempt failed, classified, with the error kept for the caller.
    Failed(AttemptOutcome, E),
}

/// An attempt in flight, as its transport is told about it.
///
/// ```
/// use std::time::{Duration, Instant};
/// use baton_core::drive::Sent;
/// use baton_core::{AttemptOutcome, TimeoutPhase};
///
/// // A transport reads it in `land`: here, whether a send that ended at `now` without an
/// // answer ran out of the attempt's time.
/// fn timed_out(sent: &Sent<&str>, now: Instant) -> Option<AttemptOutcome> {
///     (now >= sent.at).then_some(AttemptOutcome::Timeout(TimeoutPhase::Response))
/// }
/// let t0 = Instant::now();
/// let timeout = Duration::from_secs(30);
/// let sent = Sent { number: 2, endpoint: 1, timeout, at: t0 + timeout, ticket: "conn-7" };
/// assert_eq!(timed_out(&sent, t0 + Duration::from_secs(1)), None);
/// assert!(timed_out(&sent, t0 + timeout).is_some());
/// ```
#[derive(Debug)]
pub struct Sent<K> {
    /// The attempt's number.
    pub number: u32,
    /// Its endpoint's index.
    pub endpoint: usize,
    /// The attempt timeout it was given.
    pub timeout: Duration,
    /// When its timer ends (every redirect hop shares it).
    pub at: Instant,
    /// What the transport keeps beside it.
    pub ticket: K,
}

/// What one adapter gives the driver: its request, its sends and their classification,
/// its timer, and what a call ends as. Everything here is the adapter's client; every
/// decision is the [`Call`]'s.
///
/// A transport whose first endpoint refuses every connection and whose second answers
/// 200 at once, driven once to its end (the module docs show another):
///
/// ```
/// # use std::future::{ready, Future, Pending};
/// # use std::time::Instant;
/// # use baton_core::drive::{drive, Built, CallTransport, Landed, NotBuilt, Sent};
/// # use baton_core::{Attempt, AttemptOutcome, BodyKind, Call, CallOptions, DestinationError,
/// #     Done, Endpoint, Engine, FailureClass, Head, Hop, IdentityHeaders, Policy};
/// # struct Get(http::request::Parts);
/// # impl AsRef<http::request::Parts> for Get { fn as_ref(&self) -> &http::request::Parts { &self.0 } }
/// struct RefusedThenOk(Engine);
///
/// impl CallTransport for RefusedThenOk {
///     type Prepared = Get; // the request's head
///     type Answer = Head;
///     type Request = usize; // a request is only its endpoint here
///     type Ticket = ();
///     type Ended = usize;
///     type Error = &'static str;
///     type Timer = Pending<()>;
///     type Output = (Vec<String>, Option<u16>);
///     fn engine(&self) -> &Engine { &self.0 }
///     fn now(&self) -> Instant { Instant::now() }
///     fn body_kind(&self, _: &Get) -> BodyKind { BodyKind::Empty }
///     fn build(&self, _: &mut Get, _: &Call<'_, Head>, _: &Result<IdentityHeaders, DestinationError>,
///         a: &Attempt, _: Instant) -> Result<Built<usize, ()>, NotBuilt<&'static str>> {
///         Ok(Built { request: a.endpoint, spare: None, ticket: () })
///     }
///     fn send(&self, _: usize, to: usize, _: Instant) -> impl Future<Output = usize> + Send {
///         ready(to)
///     }
///     fn land(&self, to: usize, _: &Sent<()>) -> Landed<Head, &'static str> {
///         match to {
///             0 => Landed::Failed(AttemptOutcome::Failure(FailureClass::Undelivered), "refused"),
///             _ => Landed::Response(Head::new(http::StatusCode::OK)),
///         }
///     }
///     fn hop(&self, _: &mut Get, _: &Sent<()>, _: &Hop, _: http::HeaderMap) -> Option<usize> { None }
///     fn timer(&self, _: Instant) -> Pending<()> { std::future::pending() }
///     fn finish(&self, done: Done<Head>, _: Option<&'static str>, _: Option<Instant>)
///         -> Self::Output {
///         let report = done.report();
///         let ids = report.attempts.iter().map(|a| a.endpoint_id.to_string()).collect();
///         (ids, report.status().map(|s| s.as_u16()))
///     }
/// }
///
/// let policy = Policy::builder()
///     .endpoint(Endpoint::new("a", "http://a.example/"))
///     .endpoint(Endpoint::new("b", "http://b.example/"))
///     .build()
///     .unwrap();
/// let (head, ()) = http::Request::get("/").body(()).unwrap().into_parts();
/// let call = drive(RefusedThenOk(Engine::new(policy)), Get(head), CallOptions::default());
/// let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
/// let std::task::Poll::Ready((ids, status)) = std::pin::pin!(call).poll(&mut cx) else { panic!() };
/// assert_eq!((ids, status), (vec!["a".to_string(), "b".to_string()], Some(200)));
/// ```
pub trait CallTransport {
    /// The caller's request, as the adapter keeps it for the whole call: its head (method,
    /// URL, headers) is what the engine reads of it.
    type Prepared: AsRef<http::request::Parts>;
    /// A response as the engine reads it.
    type Answer: Answer;
    /// The request of one hop of an attempt.
    type Request;
    /// What the transport keeps beside each attempt in flight.
    type Ticket;
    /// What a send's future ends with (before [`land`](CallTransport::land)).
    type Ended;
    /// An attempt's error, kept for the caller's error.
    type Error;
    /// The driver's wait timer (what it ends with is not read).
    type Timer: Future + Unpin;
    /// What a call ends as.
    type Output;

    /// The engine the calls run on.
    fn engine(&self) -> &Engine;
    /// The time now, on the clock the timers use (core reads no clock of its own).
    fn now(&self) -> Instant;
    /// The kind of the request's body.
    fn body_kind(&self, prepared: &Self::Prepared) -> BodyKind;
    /// The body kind a redirect's rules see (by default the request's).
    fn redirect_body_kind(&self, prepared: &Self::Prepared) -> BodyKind {
        self.body_kind(prepared)
    }
    /// Makes the request ready before the call starts (buffering a streamed body, SPEC
    /// 2.4): `Some(limit)` when a streamed body was over its buffering limit.
    fn prepare<'p>(
        &'p self,
        prepared: &'p mut Self::Prepared,
    ) -> impl Future<Output = Option<usize>> + Send + 'p {
        let _ = prepared;
        std::future::ready(None)
    }
    /// Builds the request of attempt `a` (`identity`: the call's request id and key as
    /// header values, or why they cannot be made), which starts at `now`: the time of the
    /// call's last input, when the engine decided the attempt (its timer runs from then;
    /// the clock read for that input serves the request and the timer too).
    #[allow(clippy::type_complexity)]
    fn build(
        &self,
        prepared: &mut Self::Prepared,
        call: &Call<'_, Self::Answer>,
        identity: &Result<IdentityHeaders, DestinationError>,
        a: &Attempt,
        now: Instant,
    ) -> Result<Built<Self::Request, Self::Ticket>, NotBuilt<Self::Error>>;
    /// Sends `request` to `endpoint` under the attempt's timer, which ends at `at`.
    fn send<'a>(
        &'a self,
        endpoint: usize,
        request: Self::Request,
        at: Instant,
    ) -> impl Future<Output = Self::Ended> + Send + 'a;
    /// Sends `request` with the endpoint's credential (SPEC 9), `spare` being the copy
    /// for one re-send after a refusal. By default, a plain send.
    fn send_authorized<'a>(
        &'a self,
        endpoint: usize,
        request: Self::Request,
        spare: Option<Box<Self::Request>>,
        at: Instant,
    ) -> Flight<'a, Self::Ended> {
        let _ = spare;
        Box::pin(self.send(endpoint, request, at))
    }
    /// What must happen after a send ended and was dropped, before it is classified (the
    /// tokio adapter's grace to learn whether a timed-out request was ever written).
    /// By default nothing.
    ///
    /// Boxed: it is the rare path (a timer that fired during connect), and an unboxed
    /// future here would grow every call's future by its size.
    fn settle<'a>(
        &'a self,
        ended: &Self::Ended,
        sent: &'a mut Sent<Self::Ticket>,
    ) -> Option<Flight<'a, ()>> {
        let _ = (ended, sent);
        None
    }
    /// How the send of `sent` ended: its response, or its classified failure.
    fn land(
        &self,
        ended: Self::Ended,
        sent: &Sent<Self::Ticket>,
    ) -> Landed<Self::Answer, Self::Error>;
    /// Whether this call's redirects may be followed at all (by default, yes).
    fn follows(&self, prepared: &Self::Prepared) -> bool {
        let _ = prepared;
        true
    }
    /// The URL the first request of an attempt at `endpoint` went to, which `answer`
    /// answered (by default the engine's [`attempt_uri`](crate::attempt_uri)); `None`:
    /// the redirect is not followed.
    fn first_uri(
        &self,
        prepared: &Self::Prepared,
        endpoint: usize,
        answer: &Self::Answer,
    ) -> Option<Uri> {
        let _ = answer;
        let uri = &prepared.as_ref().uri;
        crate::attempt_uri(self.engine().policy(), endpoint, uri).ok()
    }
    /// The request of redirect hop `hop` of attempt `sent`, with its `headers` already
    /// made; `None`: the redirect cannot be followed, and the 3xx is the answer.
    fn hop(
        &self,
        prepared: &mut Self::Prepared,
        sent: &Sent<Self::Ticket>,
        hop: &Hop,
        headers: HeaderMap,
    ) -> Option<Self::Request>;
    /// A timer that ends at `at`.
    fn timer(&self, at: Instant) -> Self::Timer;
    /// Sets `timer` to end at `at` (by default, a new timer).
    fn reset(&self, timer: &mut Self::Timer, at: Instant) {
        *timer = self.timer(at);
    }
    /// What the call ends as: `done`, the error of its last attempt (`None` when that
    /// attempt ended without one: a response, a timer, the deadline), and when body reads
    /// must end.
    fn finish(
        &self,
        done: Done<Self::Answer>,
        last: Option<Self::Error>,
        read_by: Option<Instant>,
    ) -> Self::Output;
}

/// Drives one call of `prepared` with `options` through `transport`, to its end.
// Not `async fn`, on purpose: see the module's docs.
#[allow(clippy::manual_async_fn)]
// Inlined, so that the future is built where its caller keeps it (baton-tower's box:
// built aside, its 2,800 bytes were copied in; 236 instructions a call with callgrind).
#[inline]
pub fn drive<T: CallTransport>(
    transport: T,
    mut prepared: T::Prepared,
    options: CallOptions,
) -> impl Future<Output = T::Output> {
    async move {
        let t = &transport;
        let over_limit = t.prepare(&mut prepared).await;
        let kind = t.body_kind(&prepared);
        // Dropping the driver's future drops the call, which cancels it (SPEC 2.5).
        let now = t.now();
        let mut call: Call<'_, T::Answer> =
            Call::new(t.engine(), &prepared.as_ref().into(), kind, options, now);
        if let Some(limit) = over_limit {
            call.handle(Input::BodyNotBuffered { limit }, now);
        }
        // Declared after the call: sends in flight are dropped before it.
        let slot = std::pin::pin!(None);
        let mut driver = Driver {
            t,
            now,
            identity: call.identity_headers(),
            flights: SmallVec::new(),
            last: None,
            timer: None,
            slot,
            make: T::send,
        };
        loop {
            match call.poll() {
                Action::Send(a) => driver.send(&mut prepared, &mut call, &a),
                Action::Discard(n) => driver.discard(n),
                Action::WaitUntil(at) => driver.wait(&mut prepared, &mut call, Some(at)).await,
                Action::WaitForAttempt => driver.wait(&mut prepared, &mut call, None).await,
                Action::Done => break,
            }
        }
        driver.clear();
        let read_by = call.body_read_by();
        let done = call.take_done();
        // The driver (its timer, the identity's values) is dropped where it is, after the
        // output is made: dropped here by `drop`, it was first moved out (360 bytes).
        // The error of the last attempt only: an earlier one's would be named as the last's.
        let last_number = done.report().attempts.last().map(|a| a.number);
        let last = (driver.last.take()).and_then(|(n, e)| (Some(n) == last_number).then_some(e));
        transport.finish(done, last, read_by)
    }
}

/// One attempt in flight.
struct InFlight<'a, T: CallTransport + 'a> {
    sent: Sent<T::Ticket>,
    /// The attempt's redirects, once it met one.
    redirects: Option<Box<Redirects>>,
    /// The send; `None`: it is the driver's unboxed slot.
    fut: Option<Flight<'a, T::Ended>>,
}

/// The state of one call's driver besides the call's.
struct Driver<'a, 's, T: CallTransport, F, M> {
    t: &'a T,
    /// The time of the call's last input. An attempt the call decides then starts then:
    /// every action follows an input with no wait between, so one clock read serves the
    /// input, the attempt's request and its timer (as in baton-blocking's loop).
    now: Instant,
    /// The call's request id and key as header values, made once for all its attempts.
    identity: Result<IdentityHeaders, DestinationError>,
    flights: SmallVec<[InFlight<'a, T>; 2]>,
    /// The error of the latest attempt (the highest number) that ended with one, and its
    /// number: hedged attempts may end out of order ([`Driver::failed`]).
    last: Option<(u32, T::Error)>,
    /// The wait's timer, kept between waits.
    timer: Option<T::Timer>,
    /// The send of one attempt, unboxed, in the call's own future.
    slot: Pin<&'s mut Option<F>>,
    /// Makes the slot's send: [`CallTransport::send`] itself, whose future's type has no
    /// name. Its own type (not a function pointer) keeps the call direct, so the send is
    /// built where the slot keeps it.
    make: M,
}

impl<'a, T, F, M> Driver<'a, '_, T, F, M>
where
    T: CallTransport,
    F: Future<Output = T::Ended>,
    M: Fn(&'a T, usize, T::Request, Instant) -> F,
{
    /// Builds and starts attempt `a`, or tells the call why it could not be sent.
    fn send(&mut self, prepared: &mut T::Prepared, call: &mut Call<'_, T::Answer>, a: &Attempt) {
        let now = self.now;
        let input = match self.t.build(prepared, call, &self.identity, a, now) {
            Ok(built) => {
                // The engine clipped the timeout to the call's deadline from the time of
                // its last input, which is `now` (its time never runs behind the
                // driver's), so the timer ends at the deadline at the latest: with the
                // driver's deadline wait, not a hair after it, and an attempt the deadline
                // cuts in its connect reports that phase rather than losing the proof to
                // the deadline's wake (SPEC 2.6). The bound is also stated here as an
                // instant, so that it does not rest on that reasoning alone.
                let at = now + a.timeout;
                let at = call.deadline().map_or(at, |d| at.min(d));
                let fut = self.start(a.endpoint, built.request, built.spare, at, true);
                let sent = Sent {
                    number: a.number,
                    endpoint: a.endpoint,
                    timeout: a.timeout,
                    at,
                    ticket: built.ticket,
                };
                self.flights.push(InFlight {
                    sent,
                    redirects: None,
                    fut,
                });
                return;
            }
            Err(NotBuilt::Rejected(e)) => {
                self.failed(a.number, e);
                Input::Failed {
                    attempt: a.number,
                    outcome: AttemptOutcome::Failure(FailureClass::RejectedLocally),
                }
            }
            Err(NotBuilt::Replay(e)) => {
                if let Some(e) = e {
                    self.failed(a.number, e);
                }
                Input::ReplayFailed { attempt: a.number }
            }
        };
        call.handle(input, now);
    }

    /// Starts a send to `endpoint`: in the slot when it is free and no credential goes
    /// with it (`None`), else boxed.
    fn start(
        &mut self,
        endpoint: usize,
        request: T::Request,
        spare: Option<Box<T::Request>>,
        at: Instant,
        credential: bool,
    ) -> Option<Flight<'a, T::Ended>> {
        let t = self.t;
        if credential && t.engine().credential(endpoint).is_some() {
            return Some(t.send_authorized(endpoint, request, spare, at));
        }
        if self.slot.is_some() {
            return Some(Box::pin(t.send(endpoint, request, at)));
        }
        self.slot.set(Some((self.make)(t, endpoint, request, at)));
        None
    }

    /// Cancels in-flight attempt `n` (its send is dropped).
    fn discard(&mut self, n: u32) {
        if let Some(p) = self.flights.iter().position(|f| f.sent.number == n) {
            if self.flights.remove(p).fut.is_none() {
                self.slot.set(None);
            }
        }
    }

    /// Drops every send in flight.
    fn clear(&mut self) {
        self.flights.clear();
        self.slot.set(None);
    }

    /// Waits until `until` (or, without it, for an attempt) and hands the call what
    /// happened: an attempt's end, or the timer.
    async fn wait(
        &mut self,
        prepared: &mut T::Prepared,
        call: &mut Call<'_, T::Answer>,
        until: Option<Instant>,
    ) {
        if let Some(at) = until {
            match self.timer.as_mut() {
                Some(timer) => self.t.reset(timer, at),
                None => self.timer = Some(self.t.timer(at)),
            }
        }
        if self.flights.is_empty() && until.is_none() {
            self.hand(call, Input::Cancel);
            return;
        }
        let (flights, slot, timer) = (&mut self.flights, &mut self.slot, &mut self.timer);
        // Matched in place, not bound: a binding would keep its own copy of the ended send
        // in the future across the settle below.
        let (i, ended) = match poll_fn(|cx| {
            for (i, f) in flights.iter_mut().enumerate() {
                let ended = match f.fut.as_mut() {
                    Some(fut) => fut.as_mut().poll(cx),
                    None => crate::poll_slot(slot.as_mut(), cx),
                };
                if let Poll::Ready(ended) = ended {
                    return Poll::Ready(Some((i, ended)));
                }
            }
            match (until, timer.as_mut()) {
                (Some(_), Some(timer)) => Pin::new(timer).poll(cx).map(|_| None),
                _ => Poll::Pending,
            }
        })
        .await
        {
            Some(next) => next,
            None => {
                self.hand(call, Input::Timer);
                return;
            }
        };
        // The ended send is gone (the slot empties itself) before it is settled.
        let mut f = self.flights.swap_remove(i);
        f.fut = None;
        let number = f.sent.number;
        if let Some(settling) = self.t.settle(&ended, &mut f.sent) {
            self.hand_redirects(call, &mut f.redirects, number);
            settling.await;
        }
        let landed = self.t.land(ended, &f.sent);
        self.landed(prepared, call, f, landed);
    }

    /// An attempt's request ended: follow a redirect, or hand the call the response or
    /// the classified failure.
    fn landed(
        &mut self,
        prepared: &mut T::Prepared,
        call: &mut Call<'_, T::Answer>,
        mut f: InFlight<'a, T>,
        landed: Landed<T::Answer, T::Error>,
    ) {
        if let Landed::Response(r) = &landed {
            if r.status().is_redirection() {
                if let Some((request, cross_origin)) = self.next_hop(prepared, &mut f, r) {
                    drop(landed);
                    let (endpoint, at) = (f.sent.endpoint, f.sent.at);
                    f.fut = self.start(endpoint, request, None, at, !cross_origin);
                    self.flights.push(f);
                    return;
                }
            }
        }
        let attempt = f.sent.number;
        self.hand_redirects(call, &mut f.redirects, attempt);
        let input = match landed {
            Landed::Response(r) => Input::response(attempt, r, SystemTime::now),
            Landed::Failed(outcome, e) => {
                self.failed(attempt, e);
                Input::Failed { attempt, outcome }
            }
        };
        self.hand(call, input);
    }

    /// Keeps `error` of attempt `number` as the call's last error, unless a later attempt's
    /// is kept already (a hedge's ended first).
    fn failed(&mut self, number: u32, error: T::Error) {
        if self.last.as_ref().is_none_or(|(kept, _)| number >= *kept) {
            self.last = Some((number, error));
        }
    }

    /// Hands the call `input` at the time read now, kept as its last input's.
    fn hand(&mut self, call: &mut Call<'_, T::Answer>, input: Input<T::Answer>) {
        self.now = self.t.now();
        call.handle(input, self.now);
    }

    /// The next request of attempt `f` when `response` is a redirect the engine's rules
    /// follow, and whether it leaves the endpoint's origin; `None`: the response is the
    /// attempt's answer.
    fn next_hop(
        &self,
        prepared: &mut T::Prepared,
        f: &mut InFlight<'a, T>,
        response: &T::Answer,
    ) -> Option<(T::Request, bool)> {
        let t = self.t;
        let policy = t.engine().policy();
        let identity = self.identity.as_ref().ok()?;
        if policy.settings().max_redirects == 0 || !t.follows(prepared) {
            return None;
        }
        let state = match &mut f.redirects {
            Some(state) => state,
            None => {
                let first = t.first_uri(prepared, f.sent.endpoint, response)?;
                let info = RequestInfo::from(prepared.as_ref());
                let kind = t.redirect_body_kind(prepared);
                let (endpoint, number) = (f.sent.endpoint, f.sent.number);
                let state = Redirects::new(policy, endpoint, number, kind, &first, info.method);
                f.redirects.insert(Box::new(state))
            }
        };
        let hop = state.next(response.status(), response.headers())?;
        let info = RequestInfo::from(prepared.as_ref());
        let request = match state.hop_headers(policy, &hop, info.uri, identity, info.headers) {
            Ok(headers) => t.hop(prepared, &f.sent, &hop, headers),
            Err(_) => None,
        };
        match request {
            Some(r) => Some((r, hop.cross_origin)),
            None => {
                state.unfollow();
                None
            }
        }
    }

    /// Hands the call the redirects attempt `number` followed, once.
    // Inlined, so that an attempt without redirects (nearly every one) only tests the
    // option; the hand-over itself stays out of line.
    #[inline]
    fn hand_redirects(
        &mut self,
        call: &mut Call<'_, T::Answer>,
        redirects: &mut Option<Box<Redirects>>,
        number: u32,
    ) {
        if let Some(r) = redirects.take() {
            self.hand_followed(call, r, number);
        }
    }

    /// Hands the call the redirects `r` attempt `number` followed.
    #[inline(never)]
    fn hand_followed(&mut self, call: &mut Call<'_, T::Answer>, r: Box<Redirects>, number: u32) {
        self.hand(call, r.into_input(number));
    }
}
