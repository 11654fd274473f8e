//! The async call driver's attempt timer and the call's deadline (SPEC 2.6): the timer of
//! an attempt the deadline clips ends at the deadline itself, never after the driver's
//! own deadline wait, on a clock that moves on at every reading; and an attempt starts
//! when the call decides it, at its last input, as the engine counts it. The transport is
//! handed the error of the call's last attempt, also when an earlier one ends after it.

use std::future::{ready, Future};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use baton_core::drive::{self, Built, CallTransport, Landed, NotBuilt, Sent};
use baton_core::{
    Attempt, BodyKind, Call, CallOptions, DestinationError, Done, Endpoint, Engine, Head, Hop,
    IdentityHeaders, Policy,
};
use http::request::Parts;

/// A transport on a clock that moves 3 ms each time it is read, answering 200 at once and
/// keeping the end of every attempt timer the driver asked for.
struct SlowClock {
    engine: Engine,
    clock: Mutex<Instant>,
    timers: Mutex<Vec<Instant>>,
}

/// Reads a test clock that moves on 3 ms at every reading.
fn tick(clock: &Mutex<Instant>) -> Instant {
    let mut clock = clock.lock().unwrap();
    *clock += Duration::from_millis(3);
    *clock
}

struct Get(Parts);

impl AsRef<Parts> for Get {
    fn as_ref(&self) -> &Parts {
        &self.0
    }
}

impl CallTransport for &SlowClock {
    type Prepared = Get;
    type Answer = Head;
    type Request = ();
    type Ticket = ();
    type Ended = Head;
    type Error = String;
    type Timer = std::future::Pending<()>;
    type Output = Done<Head>;

    fn engine(&self) -> &Engine {
        &self.engine
    }
    fn now(&self) -> Instant {
        tick(&self.clock)
    }
    fn body_kind(&self, _: &Get) -> BodyKind {
        BodyKind::Empty
    }
    fn build(
        &self,
        _: &mut Get,
        _: &Call<'_, Head>,
        _: &Result<IdentityHeaders, DestinationError>,
        _: &Attempt,
        _: Instant,
    ) -> Result<Built<(), ()>, NotBuilt<String>> {
        Ok(Built {
            request: (),
            spare: None,
            ticket: (),
        })
    }
    fn send(&self, _: usize, _: (), at: Instant) -> impl Future<Output = Head> + Send {
        self.timers.lock().unwrap().push(at);
        ready(Head::new(http::StatusCode::OK))
    }
    fn land(&self, ended: Head, _: &Sent<()>) -> Landed<Head, String> {
        Landed::Response(ended)
    }
    fn hop(&self, _: &mut Get, _: &Sent<()>, _: &Hop, _: http::HeaderMap) -> Option<()> {
        None
    }
    fn timer(&self, _: Instant) -> Self::Timer {
        std::future::pending()
    }
    fn finish(&self, done: Done<Head>, _: Option<String>, _: Option<Instant>) -> Done<Head> {
        done
    }
}

/// One GET on a fresh [`SlowClock`] that starts at `t0`, driven to its end with `options`:
/// the transport (its clock and the timers asked of it) and the call's result.
fn call_once(t0: Instant, options: CallOptions) -> (SlowClock, Done<Head>) {
    let policy = Policy::builder()
        .endpoint(Endpoint::new("a", "http://a.example/"))
        .build()
        .unwrap();
    let t = SlowClock {
        engine: Engine::new(policy),
        clock: Mutex::new(t0),
        timers: Mutex::new(Vec::new()),
    };
    let (get, ()) = http::Request::get("/").body(()).unwrap().into_parts();
    let done = {
        let mut call = std::pin::pin!(drive::drive(&t, Get(get), options));
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let std::task::Poll::Ready(done) = call.as_mut().poll(&mut cx) else {
            panic!("the call answers at once");
        };
        done
    };
    (t, done)
}

#[test]
fn an_attempt_timer_the_deadline_clips_ends_at_the_deadline() {
    let t0 = Instant::now();
    let options = CallOptions {
        deadline: Some(Duration::from_millis(100)),
        ..CallOptions::default()
    };
    let (t, done) = call_once(t0, options);
    assert!(matches!(done, Done::Answer { .. }));
    let timers = t.timers.lock().unwrap().clone();
    assert_eq!(timers.len(), 1);
    // The call started at the clock's first reading and the attempt with it; the clock
    // moves on at every reading, so a timer counted from a reading of its own at the
    // send would end past the deadline.
    let deadline = t0 + Duration::from_millis(3) + Duration::from_millis(100);
    assert_eq!(
        timers[0], deadline,
        "the attempt timer ends at the deadline"
    );
}

#[test]
fn an_attempt_starts_at_the_input_the_call_decided_it_on() {
    let t0 = Instant::now();
    let options = CallOptions {
        attempt_timeout: Some(Duration::from_secs(1)),
        ..CallOptions::default()
    };
    let (t, done) = call_once(t0, options);
    let Done::Answer { report, .. } = done else {
        panic!("the call is answered");
    };
    // The first attempt is decided at the call's start (the clock's first reading): its
    // timer runs from then, with no reading of its own.
    let started = t0 + Duration::from_millis(3);
    assert_eq!(
        *t.timers.lock().unwrap(),
        [started + Duration::from_secs(1)]
    );
    // Two readings in all: the call's start and the answer's arrival.
    assert_eq!(*t.clock.lock().unwrap(), t0 + Duration::from_millis(6));
    assert_eq!(report.elapsed, Duration::from_millis(3));
}

/// A transport of two endpoints whose attempts both fail: `a`'s (the first) only once
/// `b`'s (a hedge) has failed, so they end out of order. Its output is the error the
/// driver handed to `finish`.
struct OutOfOrder {
    engine: Engine,
    clock: Mutex<Instant>,
    b_ended: std::sync::atomic::AtomicBool,
}

impl CallTransport for &OutOfOrder {
    type Prepared = Get;
    type Answer = Head;
    type Request = usize;
    type Ticket = ();
    type Ended = String;
    type Error = String;
    type Timer = std::future::Ready<()>;
    type Output = (Done<Head>, Option<String>);

    fn engine(&self) -> &Engine {
        &self.engine
    }
    fn now(&self) -> Instant {
        tick(&self.clock)
    }
    fn body_kind(&self, _: &Get) -> BodyKind {
        BodyKind::Empty
    }
    fn build(
        &self,
        _: &mut Get,
        _: &Call<'_, Head>,
        _: &Result<IdentityHeaders, DestinationError>,
        a: &Attempt,
        _: Instant,
    ) -> Result<Built<usize, ()>, NotBuilt<String>> {
        Ok(Built {
            request: a.endpoint,
            spare: None,
            ticket: (),
        })
    }
    fn send(&self, _: usize, to: usize, _: Instant) -> impl Future<Output = String> + Send {
        use std::sync::atomic::Ordering::SeqCst;
        std::future::poll_fn(move |_| match to {
            0 if !self.b_ended.load(SeqCst) => std::task::Poll::Pending,
            0 => std::task::Poll::Ready("a reset".to_string()),
            _ => {
                self.b_ended.store(true, SeqCst);
                std::task::Poll::Ready("b refused".to_string())
            }
        })
    }
    fn land(&self, ended: String, _: &Sent<()>) -> Landed<Head, String> {
        let class = baton_core::FailureClass::Undelivered;
        Landed::Failed(baton_core::AttemptOutcome::Failure(class), ended)
    }
    fn hop(&self, _: &mut Get, _: &Sent<()>, _: &Hop, _: http::HeaderMap) -> Option<usize> {
        None
    }
    fn timer(&self, _: Instant) -> Self::Timer {
        ready(())
    }
    fn finish(&self, done: Done<Head>, last: Option<String>, _: Option<Instant>) -> Self::Output {
        (done, last)
    }
}

#[test]
fn the_last_attempts_error_is_kept_when_an_earlier_attempt_ends_after_it() {
    let policy = Policy::builder()
        .endpoint(Endpoint::new("a", "http://a.example/"))
        .endpoint(Endpoint::new("b", "http://b.example/"))
        .configure(|s| s.attempts_per_endpoint = Some(1))
        .hedge(Some(baton_core::Hedge {
            after: Duration::from_millis(5),
            max_in_flight: 2,
        }))
        .build()
        .unwrap();
    let t = OutOfOrder {
        engine: Engine::new(policy),
        clock: Mutex::new(Instant::now()),
        b_ended: false.into(),
    };
    let (get, ()) = http::Request::get("/").body(()).unwrap().into_parts();
    let mut call = std::pin::pin!(drive::drive(&t, Get(get), CallOptions::default()));
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    // Every timer is ready at once and the clock moves on at each reading: the hedge's
    // time comes within a few polls.
    let (done, last) = (0..1000)
        .find_map(|_| match call.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(out) => Some(out),
            std::task::Poll::Pending => None,
        })
        .expect("the call ends");
    let attempts: Vec<_> = (done.report().attempts.iter())
        .map(|a| (a.number, a.endpoint_id.to_string()))
        .collect();
    assert_eq!(attempts, [(1, "a".to_string()), (2, "b".to_string())]);
    // b's attempt (#2, the last) failed first; a's (#1) after it.
    assert_eq!(last.as_deref(), Some("b refused"));
}
