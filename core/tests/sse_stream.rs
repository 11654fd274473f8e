//! The event stream state machine against simulated providers: faults at random points,
//! with and without shared event ids, safe and unsafe methods.
//!
//! Each simulated endpoint serves the same feed of events. With shared ids the ids are the
//! feed's positions everywhere; without, each endpoint writes its own (`a-3`, `b-3`), so an
//! id that reaches the wrong endpoint is seen. A server replays from the event after
//! `Last-Event-ID` when it knows the id, else from the start.

use std::time::{Duration, Instant};

use baton_core::sse::{
    Connect, EventStream, Notice, Reason, StreamAction, StreamError, StreamInput, StreamItem,
    StreamSettings,
};
use baton_core::{Endpoint, Jitter, Policy};
use http::{HeaderMap, Method, StatusCode};
use proptest::prelude::*;

const NAMES: [&str; 3] = ["a", "b", "c"];
const FEED: usize = 12;

/// What one connection to an endpoint meets.
#[derive(Debug, Clone, Copy)]
enum Fault {
    /// Refused before anything was sent.
    Refused,
    /// Answered 503 with a Retry-After of this many seconds.
    Busy(u64),
    /// Opens, sends `n` events, then breaks in the middle of the next.
    MidEvent(usize),
    /// Opens, sends `n` events, then the server ends the body.
    Ends(usize),
    /// Opens, sends `n` events, then goes silent.
    Silent(usize),
    /// Opens and sends the rest of the feed, then ends; a connection that resumes after
    /// the feed's last event is answered 204.
    Healthy,
}

fn fault() -> impl Strategy<Value = Fault> {
    prop_oneof![
        Just(Fault::Refused),
        (0u64..3).prop_map(Fault::Busy),
        (0usize..4).prop_map(Fault::MidEvent),
        (0usize..4).prop_map(Fault::Ends),
        (0usize..4).prop_map(Fault::Silent),
        Just(Fault::Healthy),
    ]
}

fn policy(n: usize) -> Policy {
    let mut b = Policy::builder();
    for (i, name) in NAMES.iter().take(n).enumerate() {
        b = b.endpoint(Endpoint::new(*name, format!("http://127.0.0.1:{}", 10 + i)));
    }
    b.build().unwrap()
}

fn settings(shared: bool) -> StreamSettings {
    StreamSettings {
        shared_event_ids: shared,
        idle_timeout: Some(Duration::from_secs(5)),
        max_reconnects: 50,
        backoff: baton_core::Backoff {
            jitter: Jitter::None,
            ..StreamSettings::default().backoff
        },
        ..StreamSettings::default()
    }
}

fn event_stream_headers() -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(
        "content-type",
        "text/event-stream; charset=utf-8".parse().unwrap(),
    );
    h
}

fn id_of(endpoint: usize, pos: usize, shared: bool) -> String {
    if shared {
        pos.to_string()
    } else {
        format!("{}-{pos}", NAMES[endpoint])
    }
}

/// Where a server resumes for `last`: after the event it names, when it issued it.
fn resume_at(endpoint: usize, last: Option<&str>, shared: bool) -> usize {
    let Some(last) = last else { return 0 };
    (0..FEED)
        .find(|p| id_of(endpoint, *p, shared) == last)
        .map_or(0, |p| p + 1)
}

fn bytes_of(endpoint: usize, from: usize, to: usize, shared: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for p in from..to.min(FEED) {
        out.extend_from_slice(
            format!(
                "id: {}\ndata: event {p}\n: beat\n\n",
                id_of(endpoint, p, shared)
            )
            .as_bytes(),
        );
    }
    out
}

/// What a run saw.
#[derive(Debug, Default)]
struct Run {
    /// Delivered event data, with `None` marking a `Restarted`.
    items: Vec<Option<String>>,
    connects: Vec<Connect>,
    /// (endpoint the id was sent to, the id).
    ids_sent: Vec<(usize, String)>,
    /// A request sent again without `Last-Event-ID` after it may have executed (at any
    /// earlier connection): a blind re-send.
    blind_resends: usize,
    end: Option<Result<(), StreamError>>,
    waited: Duration,
}

/// Drives one stream through `faults` (the n-th connection meets the n-th fault, the last
/// repeating), simulating the call's own failover over refused endpoints.
fn run(n: usize, shared: bool, method: Method, faults: &[Fault]) -> Run {
    let policy = policy(n);
    let mut stream = EventStream::new(&policy, &method, settings(shared), 9).unwrap();
    let start = Instant::now();
    let mut now = start;
    let mut run = Run::default();
    let mut conn = 0usize;
    let mut open: Option<(usize, Fault)> = None;
    // The request may have done its work at some point (a connection opened, or a 503).
    let mut ran = false;
    let ok = event_stream_headers();
    for _ in 0..10_000 {
        match stream.poll(now) {
            StreamAction::Connect(c) => {
                if ran && c.last_event_id.is_none() {
                    run.blind_resends += 1;
                }
                let first = c
                    .prefer
                    .as_deref()
                    .map_or(0, |p| NAMES.iter().position(|x| *x == p).unwrap());
                // After the script, the provider is healthy: every stream can end.
                let fault = faults.get(conn).copied().unwrap_or(Fault::Healthy);
                conn += 1;
                run.connects.push(c.clone());
                // The call itself: a refused endpoint fails over unless pinned.
                let landed = match fault {
                    Fault::Refused if c.only_preferred || n == 1 => None,
                    Fault::Refused => Some((first + 1) % n),
                    _ => Some(first),
                };
                let Some(at) = landed else {
                    stream.handle(
                        StreamInput::Failed {
                            may_have_executed: false,
                            retry_after: None,
                        },
                        now,
                    );
                    continue;
                };
                if let Some(id) = &c.last_event_id {
                    run.ids_sent.push((at, id.clone()));
                }
                if let Fault::Busy(secs) = fault {
                    let mut h = HeaderMap::new();
                    h.insert("retry-after", secs.to_string().parse().unwrap());
                    let status = StatusCode::SERVICE_UNAVAILABLE;
                    stream.handle(
                        StreamInput::Answered {
                            endpoint: NAMES[at],
                            status,
                            headers: &h,
                            may_have_executed: true,
                            wall: None,
                        },
                        now,
                    );
                    ran = true;
                    continue;
                }
                let from = resume_at(at, c.last_event_id.as_deref(), shared);
                if from == FEED {
                    // The feed is over: the server says so.
                    let h = HeaderMap::new();
                    let status = StatusCode::NO_CONTENT;
                    stream.handle(
                        StreamInput::Answered {
                            endpoint: NAMES[at],
                            status,
                            headers: &h,
                            may_have_executed: true,
                            wall: None,
                        },
                        now,
                    );
                    continue;
                }
                stream.handle(
                    StreamInput::Answered {
                        endpoint: NAMES[at],
                        status: StatusCode::OK,
                        headers: &ok,
                        may_have_executed: true,
                        wall: None,
                    },
                    now,
                );
                let upto = match fault {
                    Fault::MidEvent(k) | Fault::Ends(k) | Fault::Silent(k) => from + k,
                    _ => FEED,
                };
                let mut body = bytes_of(at, from, upto, shared);
                if let Fault::MidEvent(_) = fault {
                    let next = bytes_of(at, upto, upto + 1, shared);
                    body.extend_from_slice(&next[..next.len() / 2]);
                }
                // Split the body at every 7th byte: events cross chunk boundaries.
                for chunk in body.chunks(7) {
                    stream.handle(StreamInput::Bytes(chunk), now);
                }
                open = Some((at, fault));
            }
            StreamAction::Read { idle_deadline } => {
                let (_, fault) = open.take().expect("a read with a connection open");
                ran = true;
                match fault {
                    Fault::Silent(_) => {
                        now = idle_deadline.expect("the idle timeout is set");
                        stream.handle(StreamInput::Idle, now);
                    }
                    Fault::MidEvent(_) => stream.handle(StreamInput::Broken, now),
                    _ => stream.handle(StreamInput::Ended, now),
                }
            }
            StreamAction::WaitUntil(t) => {
                run.waited += t - now;
                now = t;
            }
            StreamAction::Deliver(StreamItem::Event { event, .. }) => {
                run.items.push(Some(event.data))
            }
            StreamAction::Deliver(StreamItem::Restarted { .. }) => run.items.push(None),
            StreamAction::Notice(_) => {}
            StreamAction::Finished(r) => {
                run.end = Some(r);
                return run;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    panic!("the stream never ended: {run:?}");
}

fn data(p: usize) -> String {
    format!("event {p}")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Shared ids and servers that replay: every event exactly once, in order, whatever
    /// breaks; a stream that ends by 204 has delivered the whole feed.
    #[test]
    fn shared_ids_lose_nothing_and_repeat_nothing(n in 1usize..=3, faults in prop::collection::vec(fault(), 1..12)) {
        let run = run(n, true, Method::GET, &faults);
        let want: Vec<Option<String>> = (0..run.items.len()).map(|p| Some(data(p))).collect();
        prop_assert_eq!(&run.items, &want);
        if run.end == Some(Ok(())) {
            prop_assert_eq!(run.items.len(), FEED);
        }
        prop_assert!(run.connects.iter().all(|c| !c.only_preferred));
    }

    /// Without shared ids, an id reaches only the endpoint that issued it, a connection
    /// that carries one never fails over inside its call, and after each `Restarted` the
    /// events start over from the feed's beginning, in order, without a gap.
    #[test]
    fn unshared_ids_stay_home(n in 1usize..=3, faults in prop::collection::vec(fault(), 1..12)) {
        let run = run(n, false, Method::GET, &faults);
        for (at, id) in &run.ids_sent {
            prop_assert!(id.starts_with(&format!("{}-", NAMES[*at])), "{id} sent to {}", NAMES[*at]);
        }
        for c in &run.connects {
            prop_assert_eq!(c.only_preferred, c.last_event_id.is_some());
        }
        for segment in run.items.split(Option::is_none) {
            let want: Vec<Option<String>> = (0..segment.len()).map(|p| Some(data(p))).collect();
            prop_assert_eq!(segment, &want[..]);
        }
    }

    /// A stream opened by POST is never re-sent after a connection that may have executed
    /// unless it resumes from an event id.
    #[test]
    fn unsafe_streams_are_never_resent_blind(n in 1usize..=3, shared in any::<bool>(), faults in prop::collection::vec(fault(), 1..12)) {
        let run = run(n, shared, Method::POST, &faults);
        prop_assert_eq!(run.blind_resends, 0);
        if let Some(Err(StreamError::Interrupted { delivered, .. })) = &run.end {
            prop_assert_eq!(*delivered as usize, run.items.iter().flatten().count());
        }
    }
}

#[test]
fn a_limit_that_counts_connections_without_events() {
    let policy = policy(1);
    let s = StreamSettings {
        max_reconnects: 3,
        ..settings(true)
    };
    let mut stream = EventStream::new(&policy, &Method::GET, s, 1).unwrap();
    let ok = event_stream_headers();
    let mut now = Instant::now();
    let mut connects = 0;
    let end = loop {
        match stream.poll(now) {
            StreamAction::Connect(_) => {
                connects += 1;
                // Opens, then ends before the first event: the count is not reset.
                stream.handle(
                    StreamInput::Answered {
                        endpoint: "a",
                        status: StatusCode::OK,
                        headers: &ok,
                        may_have_executed: true,
                        wall: None,
                    },
                    now,
                );
                stream.handle(StreamInput::Bytes(b": hello\n\n"), now);
                stream.handle(StreamInput::Ended, now);
            }
            StreamAction::WaitUntil(t) => now = t,
            StreamAction::Finished(r) => break r,
            _ => {}
        }
    };
    assert_eq!(connects, 4);
    assert_eq!(
        end,
        Err(StreamError::GaveUp {
            reconnects: 3,
            delivered: 0,
            reason: Reason::Ended
        })
    );
}

fn answer_first(stream: &mut EventStream, status: StatusCode, headers: &HeaderMap, now: Instant) {
    assert!(matches!(stream.poll(now), StreamAction::Connect(_)));
    stream.handle(
        StreamInput::Answered {
            endpoint: "a",
            status,
            headers,
            may_have_executed: true,
            wall: None,
        },
        now,
    );
}

#[test]
fn answers_that_end_or_cannot_be_a_stream() {
    let policy = policy(2);
    let now = Instant::now();
    let cases: [(StatusCode, HeaderMap, Option<&str>); 4] = [
        (StatusCode::NO_CONTENT, HeaderMap::new(), None),
        (StatusCode::NOT_FOUND, HeaderMap::new(), Some("404")),
        (StatusCode::UNAUTHORIZED, HeaderMap::new(), Some("401")),
        (
            StatusCode::OK,
            {
                let mut h = HeaderMap::new();
                h.insert("content-type", "text/html".parse().unwrap());
                h
            },
            Some("text/html"),
        ),
    ];
    for (status, headers, fatal) in cases {
        let mut s = EventStream::new(&policy, &Method::GET, settings(false), 1).unwrap();
        answer_first(&mut s, status, &headers, now);
        let StreamAction::Finished(r) = s.poll(now) else {
            panic!("{status}: not finished")
        };
        match fatal {
            None => assert_eq!(r, Ok(())),
            Some(text) => {
                let e = r.unwrap_err();
                assert!(matches!(e, StreamError::Fatal { .. }), "{e:?}");
                assert!(e.to_string().contains(text), "{e}");
            }
        }
        // Every later poll says so again.
        assert!(matches!(s.poll(now), StreamAction::Finished(_)));
    }
}

#[test]
fn retry_after_is_waited_and_a_too_long_one_moves_on() {
    let policy = policy(2);
    let now = Instant::now();
    let mut s = EventStream::new(&policy, &Method::GET, settings(false), 1).unwrap();
    let ok = event_stream_headers();
    answer_first(&mut s, StatusCode::OK, &ok, now);
    s.handle(StreamInput::Bytes(b"data: x\n\n"), now);
    s.handle(StreamInput::Ended, now);
    let mut busy = HeaderMap::new();
    busy.insert("retry-after", "7".parse().unwrap());
    let next = next_connect(&mut s, now);
    assert_eq!(next.1.prefer.as_deref(), Some("a"));
    s.handle(
        StreamInput::Answered {
            endpoint: "a",
            status: StatusCode::SERVICE_UNAVAILABLE,
            headers: &busy,
            may_have_executed: true,
            wall: None,
        },
        next.0,
    );
    let again = next_connect(&mut s, next.0);
    assert_eq!(
        again.0 - next.0,
        Duration::from_secs(7),
        "the Retry-After is the wait"
    );
    assert_eq!(again.1.prefer.as_deref(), Some("a"));
    busy.insert("retry-after", "3600".parse().unwrap());
    s.handle(
        StreamInput::Answered {
            endpoint: "a",
            status: StatusCode::SERVICE_UNAVAILABLE,
            headers: &busy,
            may_have_executed: true,
            wall: None,
        },
        again.0,
    );
    let moved = next_connect(&mut s, again.0);
    assert_eq!(
        moved.1.prefer.as_deref(),
        Some("b"),
        "an hour's Retry-After moves the stream on"
    );
    assert!(moved.0 - again.0 < Duration::from_secs(60));
}

#[test]
fn the_server_retry_is_the_floor_of_the_wait_and_the_idle_deadline_follows_bytes() {
    let policy = policy(1);
    let t0 = Instant::now();
    let mut s = EventStream::new(&policy, &Method::GET, settings(true), 1).unwrap();
    answer_first(&mut s, StatusCode::OK, &event_stream_headers(), t0);
    let _opened = s.poll(t0);
    assert_eq!(
        s.poll(t0),
        StreamAction::Read {
            idle_deadline: Some(t0 + Duration::from_secs(5))
        }
    );
    let t1 = t0 + Duration::from_secs(2);
    s.handle(StreamInput::Bytes(b"retry: 4000\n: beat\n"), t1);
    assert_eq!(
        s.poll(t1),
        StreamAction::Read {
            idle_deadline: Some(t1 + Duration::from_secs(5))
        }
    );
    s.handle(StreamInput::Idle, t1 + Duration::from_secs(5));
    let (at, _) = next_connect(&mut s, t1 + Duration::from_secs(5));
    assert_eq!(at - (t1 + Duration::from_secs(5)), Duration::from_secs(4));
}

#[test]
fn an_oversized_event_ends_the_stream() {
    let policy = policy(1);
    let now = Instant::now();
    let st = StreamSettings {
        max_event_size: 16,
        ..settings(true)
    };
    let mut s = EventStream::new(&policy, &Method::GET, st, 1).unwrap();
    answer_first(&mut s, StatusCode::OK, &event_stream_headers(), now);
    s.handle(
        StreamInput::Bytes(b"data: short\n\ndata: this one is far too long\n\n"),
        now,
    );
    let mut got = Vec::new();
    let end = loop {
        match s.poll(now) {
            StreamAction::Deliver(StreamItem::Event { event, .. }) => got.push(event.data),
            StreamAction::Finished(r) => break r,
            StreamAction::Notice(_) => {}
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(got, ["short"]);
    assert_eq!(
        end,
        Err(StreamError::EventTooLarge {
            endpoint: "a".into(),
            limit: 16
        })
    );
}

#[test]
fn a_restart_is_announced_and_the_failover_noticed() {
    let policy = policy(2);
    let now = Instant::now();
    let st = StreamSettings {
        reconnects_per_endpoint: 1,
        ..settings(false)
    };
    let mut s = EventStream::new(&policy, &Method::GET, st, 1).unwrap();
    let ok = event_stream_headers();
    answer_first(&mut s, StatusCode::OK, &ok, now);
    s.handle(StreamInput::Bytes(b"id: a-0\ndata: x\n\n"), now);
    s.handle(StreamInput::Broken, now);
    let mut notices = Vec::new();
    let mut connect = None;
    let mut now = now;
    while connect.is_none() {
        match s.poll(now) {
            StreamAction::Notice(n) => notices.push(n),
            StreamAction::WaitUntil(t) => now = t,
            StreamAction::Connect(c) => connect = Some(c),
            StreamAction::Deliver(_) => {}
            other => panic!("{other:?}"),
        }
    }
    // One reconnection to a (pinned, with its id); it is refused.
    let c = connect.unwrap();
    assert_eq!(
        (
            c.prefer.as_deref(),
            c.last_event_id.as_deref(),
            c.only_preferred
        ),
        (Some("a"), Some("a-0"), true)
    );
    s.handle(
        StreamInput::Failed {
            may_have_executed: false,
            retry_after: None,
        },
        now,
    );
    let (at, c) = next_connect(&mut s, now);
    assert_eq!(
        (c.prefer.as_deref(), c.last_event_id.as_deref()),
        (Some("b"), None)
    );
    s.handle(
        StreamInput::Answered {
            endpoint: "b",
            status: StatusCode::OK,
            headers: &ok,
            may_have_executed: true,
            wall: None,
        },
        at,
    );
    assert_eq!(
        s.poll(at),
        StreamAction::Notice(Notice::Opened {
            endpoint: "b".into(),
            last_event_id: None
        })
    );
    assert_eq!(
        s.poll(at),
        StreamAction::Deliver(StreamItem::Restarted {
            endpoint: "b".into()
        })
    );
    assert!(notices.iter().any(|n| matches!(
        n,
        Notice::Reconnecting {
            reason: Reason::Broken,
            failover: false,
            ..
        }
    )));
}

/// Polls through notices and waits to the next `Connect`: when it comes, and what.
fn next_connect(s: &mut EventStream, mut now: Instant) -> (Instant, Connect) {
    loop {
        match s.poll(now) {
            StreamAction::Connect(c) => return (now, c),
            StreamAction::WaitUntil(t) => now = t,
            StreamAction::Notice(_) | StreamAction::Deliver(_) => {}
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn bad_settings_name_themselves() {
    let policy = policy(1);
    let bad = StreamSettings {
        reconnects_per_endpoint: 0,
        ..StreamSettings::default()
    };
    let e = EventStream::new(&policy, &Method::GET, bad, 1).unwrap_err();
    assert_eq!(e.setting, "reconnects_per_endpoint");
    let mut bad = StreamSettings::default();
    bad.backoff.initial = Duration::ZERO;
    let e = EventStream::new(&policy, &Method::GET, bad, 1).unwrap_err();
    assert_eq!(e.setting, "backoff.initial");
    let bad = StreamSettings {
        idle_timeout: Some(Duration::ZERO),
        ..StreamSettings::default()
    };
    assert!(EventStream::new(&policy, &Method::GET, bad, 1)
        .unwrap_err()
        .to_string()
        .contains("idle_timeout"));
}

#[test]
fn an_unsafe_stream_whose_endpoint_refuses_never_moves_to_another_without_its_id() {
    let policy = policy(2);
    let now = Instant::now();
    let mut s = EventStream::new(&policy, &Method::POST, settings(false), 1).unwrap();
    let ok = event_stream_headers();
    answer_first(&mut s, StatusCode::OK, &ok, now);
    s.handle(StreamInput::Bytes(b"id: a-5\ndata: x\n\n"), now);
    s.handle(StreamInput::Broken, now);
    // a refuses every resumption: the stream may only try a again, with its id, or stop.
    let mut at = now;
    loop {
        match s.poll(at) {
            StreamAction::Connect(c) => {
                assert_eq!(c.prefer.as_deref(), Some("a"), "{c:?}");
                assert_eq!(c.last_event_id.as_deref(), Some("a-5"));
                s.handle(
                    StreamInput::Failed {
                        may_have_executed: false,
                        retry_after: None,
                    },
                    at,
                );
            }
            StreamAction::WaitUntil(t) => at = t,
            StreamAction::Notice(_) | StreamAction::Deliver(_) => {}
            StreamAction::Finished(r) => {
                assert!(matches!(r, Err(StreamError::GaveUp { .. })), "{r:?}");
                break;
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn huge_waits_are_setting_errors_and_a_server_retry_is_capped() {
    let policy = policy(1);
    let bad = StreamSettings {
        idle_timeout: Some(Duration::from_secs(u64::MAX / 4)),
        ..StreamSettings::default()
    };
    assert_eq!(
        EventStream::new(&policy, &Method::GET, bad, 1)
            .unwrap_err()
            .setting,
        "idle_timeout"
    );
    let now = Instant::now();
    let mut s = EventStream::new(&policy, &Method::GET, settings(true), 1).unwrap();
    answer_first(&mut s, StatusCode::OK, &event_stream_headers(), now);
    s.handle(
        StreamInput::Bytes(b"retry: 99999999999999999999\n: hi\n"),
        now,
    );
    s.handle(StreamInput::Ended, now);
    let (at, _) = next_connect(&mut s, now);
    assert!(
        at - now <= StreamSettings::default().max_retry_after,
        "{:?}",
        at - now
    );
}

/// SPEC 1, 9: a POST stream whose first connection's call answered 429 (in `not_processed`)
/// after an attempt that may have done the work (a timeout, then the 429 on the retry) is
/// interrupted, not re-sent blind: the call's `may_have_executed` counts, not the status
/// alone. Before, the 429 read "nothing done" and the stream opened a new call.
#[test]
fn a_not_processed_answer_after_a_possible_execution_interrupts_an_unsafe_stream() {
    let policy = policy(2);
    let now = Instant::now();
    let mut s = EventStream::new(&policy, &Method::POST, settings(false), 1).unwrap();
    assert!(matches!(s.poll(now), StreamAction::Connect(_)));
    let busy = HeaderMap::new();
    let answer = |may_have_executed| StreamInput::Answered {
        endpoint: "a",
        status: StatusCode::TOO_MANY_REQUESTS,
        headers: &busy,
        may_have_executed,
        wall: None,
    };
    s.handle(answer(true), now);
    let later = now + Duration::from_secs(60);
    let end = next_decision(&mut s, later);
    assert!(
        matches!(
            end,
            StreamAction::Finished(Err(StreamError::Interrupted { delivered: 0, .. }))
        ),
        "{end:?}"
    );
    // The same 429 when nothing may have been done: the stream tries again.
    let mut s = EventStream::new(&policy, &Method::POST, settings(false), 1).unwrap();
    assert!(matches!(s.poll(now), StreamAction::Connect(_)));
    s.handle(answer(false), now);
    let later = now + Duration::from_secs(60);
    let next = next_decision(&mut s, later);
    assert!(matches!(next, StreamAction::Connect(_)), "{next:?}");
}

/// SPEC 2.6: a `Retry-After` over `max_retry_after` where the stream can go on only at
/// the endpoint that asked ends the stream at once with the delay. Before, the header was
/// dropped (the stream reconnected after its backoff) or cut to `max_retry_after`.
#[test]
fn a_too_long_retry_after_where_the_stream_must_stay_ends_it() {
    let now = Instant::now();
    let mut busy = HeaderMap::new();
    busy.insert("retry-after", "600".parse().unwrap());
    let ok = event_stream_headers();
    // One endpoint: nowhere else to go.
    let one = policy(1);
    let mut s = EventStream::new(&one, &Method::GET, settings(false), 1).unwrap();
    answer_first(&mut s, StatusCode::SERVICE_UNAVAILABLE, &busy, now);
    let end = next_decision(&mut s, now);
    let Some(StreamAction::Finished(Err(StreamError::RetryAfterTooLong {
        retry_after,
        delivered: 0,
        ..
    }))) = Some(end.clone())
    else {
        panic!("{end:?}")
    };
    assert_eq!(retry_after, Duration::from_secs(600));
    // A POST stream that resumes at a (ids not shared) must stay there.
    let two = policy(2);
    let mut s = EventStream::new(&two, &Method::POST, settings(false), 1).unwrap();
    answer_first(&mut s, StatusCode::OK, &ok, now);
    s.handle(StreamInput::Bytes(b"id: 1\ndata: x\n\n"), now);
    s.handle(StreamInput::Ended, now);
    let next = next_connect(&mut s, now);
    assert_eq!(next.1.prefer.as_deref(), Some("a"));
    s.handle(
        StreamInput::Answered {
            endpoint: "a",
            status: StatusCode::SERVICE_UNAVAILABLE,
            headers: &busy,
            may_have_executed: true,
            wall: None,
        },
        next.0,
    );
    let end = next_decision(&mut s, next.0);
    assert!(
        matches!(
            end,
            StreamAction::Finished(Err(StreamError::RetryAfterTooLong { delivered: 1, .. }))
        ),
        "{end:?}"
    );
}

/// SPEC 9: an unsafe stream that cannot resume is interrupted, also when its reconnection
/// limit is reached at the same break. Before, `max_reconnects = 0` said "gave up".
#[test]
fn an_unsafe_stream_at_its_reconnect_limit_is_interrupted() {
    let policy = policy(2);
    let now = Instant::now();
    let st = StreamSettings {
        max_reconnects: 0,
        ..settings(false)
    };
    let mut s = EventStream::new(&policy, &Method::POST, st, 1).unwrap();
    answer_first(&mut s, StatusCode::OK, &event_stream_headers(), now);
    s.handle(StreamInput::Bytes(b"data: x\n\n"), now);
    s.handle(StreamInput::Ended, now);
    let end = next_decision(&mut s, now);
    assert!(
        matches!(
            end,
            StreamAction::Finished(Err(StreamError::Interrupted { delivered: 1, .. }))
        ),
        "{end:?}"
    );
}

/// The same rule when the wait comes as the first connection's call error (the engine's
/// call ended `RetryAfterTooLong` at the only endpoint): the stream ends with the delay,
/// also at its reconnection limit.
#[test]
fn a_first_call_that_ended_on_a_too_long_wait_ends_a_one_endpoint_stream() {
    let one = policy(1);
    let now = Instant::now();
    for max_reconnects in [0, 50] {
        let st = StreamSettings {
            max_reconnects,
            ..settings(false)
        };
        let mut s = EventStream::new(&one, &Method::GET, st, 1).unwrap();
        assert!(matches!(s.poll(now), StreamAction::Connect(_)));
        let kind = baton_core::ErrorKind::RetryAfterTooLong(Duration::from_secs(600));
        s.handle(StreamInput::call_failed(&kind, false).unwrap(), now);
        let end = next_decision(&mut s, now);
        assert!(
            matches!(
                &end,
                StreamAction::Finished(Err(StreamError::RetryAfterTooLong { retry_after, .. }))
                    if *retry_after == Duration::from_secs(600)
            ),
            "{max_reconnects}: {end:?}"
        );
    }
}

/// An interruption names the endpoint whose answer broke the stream: here the first
/// connection's call landed on b (the engine failed over inside it) and b answered 503.
/// Before, it named the last opened connection's endpoint: none here.
#[test]
fn an_interruption_names_the_endpoint_that_answered() {
    let policy = policy(2);
    let now = Instant::now();
    let mut s = EventStream::new(&policy, &Method::POST, settings(false), 1).unwrap();
    assert!(matches!(s.poll(now), StreamAction::Connect(_)));
    let busy = HeaderMap::new();
    s.handle(
        StreamInput::Answered {
            endpoint: "b",
            status: StatusCode::SERVICE_UNAVAILABLE,
            headers: &busy,
            may_have_executed: true,
            wall: None,
        },
        now,
    );
    let end = next_decision(&mut s, now);
    let StreamAction::Finished(Err(StreamError::Interrupted { endpoint, .. })) = &end else {
        panic!("{end:?}")
    };
    assert_eq!(endpoint.as_deref(), Some("b"));
}

/// The stream's next action at `now` that is neither a notice nor an event handed out.
fn next_decision(s: &mut EventStream, now: Instant) -> StreamAction {
    loop {
        match s.poll(now) {
            StreamAction::Notice(_) | StreamAction::Deliver(_) => {}
            other => return other,
        }
    }
}
