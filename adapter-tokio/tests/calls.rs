//! Whole calls against testkit providers: idempotency keys and where the work may run,
//! hedging, deadlines, cancellation by dropping the call, events, bodies and replay.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_core::{Breaker, BreakerRule, BreakerState, ErrorKind, Hedge, Permission, StopReason};
use baton_tokio::Error;
use http::StatusCode;
use testkit::{Behaviour, Provider};

// ----- idempotency keys: where a POST may run again -----

#[tokio::test]
async fn keyed_post_after_ambiguous_failure_runs_again_only_on_the_same_provider() {
    let primary = Provider::builder()
        .then(Behaviour::reset())
        .otherwise(Behaviour::ok())
        .start();
    let backup = Provider::start(Behaviour::ok());
    let (client, _) = common::client(common::policy(&[
        ("primary", &primary.url()),
        ("backup", &backup.url()),
    ]));
    let resp = client
        .post("/charges")
        .idempotency_key("charge-42")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.endpoint(), "primary");
    assert_eq!(primary.count_with_header("idempotency-key", "charge-42"), 2);
    assert_eq!(backup.request_count(), 0);
}

#[tokio::test]
async fn keyed_post_that_keeps_failing_ambiguously_never_reaches_the_backup() {
    let primary = Provider::start(Behaviour::reset());
    let backup = Provider::start(Behaviour::ok());
    let (client, _) = common::client(common::policy(&[
        ("primary", &primary.url()),
        ("backup", &backup.url()),
    ]));
    let err = client
        .post("/charges")
        .idempotency_key("charge-43")
        .body("{}")
        .send()
        .await
        .unwrap_err();
    assert!(err.may_have_executed());
    assert_eq!(primary.count_with_header("idempotency-key", "charge-43"), 3);
    assert_eq!(backup.request_count(), 0);
    // The source is the last reqwest error.
    assert!(err.reqwest().is_some());
    assert!(std::error::Error::source(&err).is_some());
}

#[tokio::test]
async fn unkeyed_post_never_runs_on_a_second_provider_after_an_ambiguous_failure() {
    let primary = Provider::start(Behaviour::black_hole());
    let backup = Provider::start(Behaviour::ok());
    let (client, _) = common::client(common::policy(&[
        ("primary", &primary.url()),
        ("backup", &backup.url()),
    ]));
    let err = client
        .post("/")
        .body("{}")
        .attempt_timeout(Duration::from_millis(300))
        .send()
        .await
        .unwrap_err();
    assert_eq!(err.report().stop_reason, StopReason::NotPermitted);
    assert_eq!(primary.request_count(), 1);
    assert_eq!(backup.request_count(), 0);
}

#[tokio::test]
async fn refused_primary_always_fails_over_whatever_the_call() {
    let backup = Provider::start(Behaviour::ok());
    let refused = testkit::refused_url();
    let (client, _) = common::client(
        common::policy(&[("primary", &refused), ("backup", &backup.url())]).breaker(Breaker {
            rule: BreakerRule::Disabled,
            ..Breaker::default()
        }),
    );
    let calls = [
        client.get("/"),
        client.post("/").body("a"),
        client.post("/").body("b").idempotency_key("k-refused-1"),
        client.delete("/"),
        client
            .post("/")
            .body("c")
            .failover(Permission::IfUndelivered),
    ];
    for call in calls {
        let resp = call.send().await.unwrap();
        assert_eq!(resp.endpoint(), "backup");
        assert!(resp.report().attempts[0].result.as_str() == "undelivered");
    }
    assert_eq!(backup.request_count(), 5);
}

#[tokio::test]
async fn denied_call_makes_one_attempt() {
    let backup = Provider::start(Behaviour::ok());
    let refused = testkit::refused_url();
    let (client, _) = common::client(common::policy(&[
        ("primary", &refused),
        ("backup", &backup.url()),
    ]));
    let err = client.get("/").deny().send().await.unwrap_err();
    assert_eq!(err.report().attempts.len(), 1);
    assert!(!err.may_have_executed());
    assert_eq!(backup.request_count(), 0);
}

// ----- hedging -----

#[tokio::test]
async fn hedged_get_takes_the_fast_provider_and_cancels_the_slow_one() {
    let slow = Provider::start(Behaviour::ok().delay(Duration::from_secs(3)));
    let fast = Provider::start(Behaviour::status(200).body("fast"));
    let (client, log) = common::client(
        common::policy(&[("slow", &slow.url()), ("fast", &fast.url())])
            .attempt_timeout(Duration::from_secs(5))
            .hedge(Some(Hedge::after(Duration::from_millis(100)))),
    );
    let t0 = Instant::now();
    let resp = client.get("/").send().await.unwrap();
    let took = t0.elapsed();
    assert_eq!(resp.endpoint(), "fast");
    assert_eq!(resp.text().await.unwrap(), "fast");
    assert!(took < Duration::from_millis(1500), "took {took:?}");
    assert_eq!(slow.request_count(), 1);
    assert_eq!(fast.request_count(), 1);
    let names = log.names();
    assert!(names.contains(&"HedgeStarted".to_string()), "{names:?}");
    assert!(names.contains(&"AttemptCancelled".to_string()), "{names:?}");
}

// ----- deadline -----

#[tokio::test]
async fn deadline_ends_the_call_in_time() {
    let hole = Provider::start(Behaviour::black_hole());
    let (client, _) = common::client(
        common::policy(&[("a", &hole.url())]).attempt_timeout(Duration::from_secs(5)),
    );
    let t0 = Instant::now();
    let err = client
        .get("/")
        .deadline(Duration::from_millis(400))
        .send()
        .await
        .unwrap_err();
    let took = t0.elapsed();
    assert_eq!(err.kind(), Some(&ErrorKind::Deadline));
    assert!(took >= Duration::from_millis(380), "took {took:?}");
    assert!(took < Duration::from_millis(1200), "took {took:?}");
}

// ----- cancellation by dropping the call -----

#[tokio::test]
async fn dropping_the_call_cancels_the_attempt_and_frees_the_probe_slot() {
    let primary = Provider::start(Behaviour::refuse());
    let backup = Provider::start(Behaviour::ok());
    let (client, log) = common::client(
        common::policy(&[("primary", &primary.url()), ("backup", &backup.url())])
            .attempt_timeout(Duration::from_secs(5))
            .breaker(Breaker {
                rule: BreakerRule::Consecutive { failures: 1 },
                open: Duration::from_millis(200),
                ..Breaker::default()
            }),
    );
    // Open the primary's breaker.
    client.get("/").send().await.unwrap();
    assert_eq!(client.health("primary").unwrap().state, BreakerState::Open);
    // Let it become half-open, with a provider that swallows the probe.
    primary.set_behaviour(Behaviour::black_hole());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let c2 = client.clone();
    let task = tokio::spawn(async move { c2.get("/").send().await });
    let t0 = Instant::now();
    while primary.request_count() == 0 && t0.elapsed() < Duration::from_secs(3) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(primary.request_count(), 1, "{:?}", log.texts());
    let h = client.health("primary").unwrap();
    assert_eq!((h.state, h.probes_in_flight), (BreakerState::HalfOpen, 1));
    task.abort();
    let _ = task.await;
    // The probe slot is free at once: the next call probes the primary again.
    let h = client.health("primary").unwrap();
    assert_eq!((h.state, h.probes_in_flight), (BreakerState::HalfOpen, 0));
    assert!(h.available);
    let names = log.names();
    assert!(names.contains(&"AttemptCancelled".to_string()), "{names:?}");
    assert!(log.texts().iter().any(|t| t.contains("Cancelled")));
    // Nothing leaks: the engine is only held by the client.
    assert_eq!(Arc::strong_count(client.engine()), 1);
    primary.set_behaviour(Behaviour::ok());
    let resp = client.get("/").send().await.unwrap();
    assert_eq!(resp.endpoint(), "primary");
    assert_eq!(
        client.health("primary").unwrap().state,
        BreakerState::Closed
    );
}

// ----- events -----

#[tokio::test]
async fn events_arrive_in_causal_order() {
    let backup = Provider::start(Behaviour::ok());
    let refused = testkit::refused_url();
    let (client, log) = common::client(common::policy(&[
        ("primary", &refused),
        ("backup", &backup.url()),
    ]));
    let call_log = common::Log::default();
    let l = call_log.clone();
    client
        .get("/")
        .on_event(move |e| l.0.lock().unwrap().push(format!("{:?}", e.kind)))
        .send()
        .await
        .unwrap();
    let expected = [
        "AttemptStarted",
        "AttemptFinished",
        "Failover",
        "AttemptStarted",
        "AttemptFinished",
        "Result",
    ];
    assert_eq!(log.names(), expected);
    assert_eq!(call_log.names(), expected, "the call's own callback too");
}

#[tokio::test]
async fn policy_sink_and_client_callback_both_see_every_event() {
    let backup = Provider::start(Behaviour::ok());
    let policy_log = common::Log::default();
    let pl = policy_log.clone();
    let client_log = common::Log::default();
    let cl = client_log.clone();
    let policy = baton_core::Policy::builder()
        .endpoint(baton_core::Endpoint::new("primary", testkit::refused_url()))
        .endpoint(baton_core::Endpoint::new("backup", backup.url()))
        .on_event(move |e| pl.0.lock().unwrap().push(format!("{:?}", e.kind)));
    let client = baton_tokio::Client::builder(policy)
        .on_event(move |e| cl.0.lock().unwrap().push(format!("{:?}", e.kind)))
        .build()
        .unwrap();
    client.get("/").send().await.unwrap();
    assert_eq!(policy_log.names().len(), 6);
    assert_eq!(policy_log.names(), client_log.names());
}

// ----- bodies -----

fn stream(parts: &'static [&'static str]) -> reqwest::Body {
    use http_body_util::{BodyExt, StreamBody};
    let frames = parts
        .iter()
        .map(|p| Ok::<_, std::io::Error>(http_body::Frame::data(bytes::Bytes::from(*p))));
    reqwest::Body::wrap(StreamBody::new(futures_iter(frames)).boxed())
}

/// A tiny `Stream` over an iterator (no futures crate needed).
fn futures_iter<I: Iterator + Unpin>(it: I) -> IterStream<I> {
    IterStream(it)
}
struct IterStream<I>(I);
impl<I: Iterator + Unpin> futures_core::Stream for IterStream<I> {
    type Item = I::Item;
    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<I::Item>> {
        std::task::Poll::Ready(self.0.next())
    }
}

#[tokio::test]
async fn streaming_body_is_sent_once_and_never_replayed() {
    let backup = Provider::start(Behaviour::ok());
    let refused = testkit::refused_url();
    let (client, log) = common::client(common::policy(&[
        ("primary", &refused),
        ("backup", &backup.url()),
    ]));
    let err = client
        .post("/")
        .body(stream(&["hello ", "world"]))
        .send()
        .await
        .unwrap_err();
    assert_eq!(err.report().stop_reason, StopReason::NotReplayable);
    assert!(!err.may_have_executed());
    assert_eq!(backup.request_count(), 0);
    assert!(log.names().contains(&"NotReplayable".to_string()));
}

/// A request body streamed from a source that fails (a download from another server): the
/// head and the first part were sent (the stream is not ready at first, nor between
/// parts), so the attempt may have executed. The error in the body's source is the
/// caller's, not this attempt's connection: it proves nothing about the provider, be it a
/// certificate rejected or a connection refused to the source.
#[tokio::test]
async fn a_body_whose_source_fails_may_have_executed() {
    let provider = Provider::start(Behaviour::ok());
    let (client, _) = common::client(common::policy(&[("a", &provider.url())]));
    let rejected = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
    let certificate = std::io::Error::new(std::io::ErrorKind::InvalidData, rejected);
    let refused = reqwest::get(testkit::refused_url()).await.unwrap_err();
    assert!(refused.is_connect());
    let errors: [BoxError; 2] = [Box::new(certificate), Box::new(refused)];
    for error in errors {
        let text = error.to_string();
        let body = late_body(vec![Ok(bytes::Bytes::from("hello ")), Err(error)]);
        let err = client.post("/").body(body).send().await.unwrap_err();
        let ambiguous = baton_core::AttemptResult::Failed(baton_core::FailureClass::Ambiguous);
        assert_eq!(err.report().attempts[0].result, ambiguous, "{text}: {err}");
        assert!(err.may_have_executed(), "{text}");
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A streamed body of `parts`, pending once before each.
fn late_body(parts: Vec<Result<bytes::Bytes, BoxError>>) -> reqwest::Body {
    use http_body_util::{BodyExt, StreamBody};
    let frames = parts.into_iter().map(|p| p.map(http_body::Frame::data));
    reqwest::Body::wrap(StreamBody::new(Late(frames, false)).boxed())
}

/// A stream of `I`'s items, pending once before each.
struct Late<I>(I, bool);
impl<I: Iterator + Unpin> futures_core::Stream for Late<I> {
    type Item = I::Item;
    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<I::Item>> {
        if !std::mem::replace(&mut self.1, true) {
            cx.waker().wake_by_ref();
            return std::task::Poll::Pending;
        }
        self.1 = false;
        std::task::Poll::Ready(self.0.next())
    }
}

#[tokio::test]
async fn buffered_streaming_body_is_replayed_within_the_limit() {
    let backup = Provider::start(Behaviour::ok());
    let refused = testkit::refused_url();
    let (client, _) = common::client(common::policy(&[
        ("primary", &refused),
        ("backup", &backup.url()),
    ]));
    let resp = client
        .post("/")
        .body(stream(&["hello ", "world"]))
        .buffer_body(1024)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.endpoint(), "backup");
    assert_eq!(backup.requests()[0].body, b"hello world");
}

#[tokio::test]
async fn streaming_body_over_the_buffer_limit_is_sent_once_whole() {
    let primary = Provider::start(Behaviour::ok());
    let (client, log) = common::client(common::policy(&[("primary", &primary.url())]));
    let resp = client
        .post("/")
        .body(stream(&["0123456789", "abcdef"]))
        .buffer_body(4)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(primary.requests()[0].body, b"0123456789abcdef");
    assert!(log.names().contains(&"BodyNotBuffered".to_string()));
}

#[cfg(feature = "json")]
#[tokio::test]
async fn json_body_is_replayed_to_the_backup() {
    #[derive(serde::Serialize)]
    struct Charge {
        amount: u32,
    }
    let backup = Provider::start(Behaviour::status(200).body(r#"{"ok":true}"#));
    let refused = testkit::refused_url();
    let (client, _) = common::client(common::policy(&[
        ("primary", &refused),
        ("backup", &backup.url()),
    ]));
    let resp = client
        .post("/")
        .json(&Charge { amount: 100 })
        .send()
        .await
        .unwrap();
    let v: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(v["ok"], true);
    let r = &backup.requests()[0];
    assert_eq!(r.body_text(), r#"{"amount":100}"#);
    assert_eq!(r.header("content-type"), Some("application/json"));
}

// ----- invalid input: rejected locally, nothing sent -----

#[tokio::test]
async fn invalid_header_is_rejected_locally_with_a_request_id() {
    let p = Provider::start(Behaviour::ok());
    let (client, _) = common::client(common::policy(&[("a", &p.url())]));
    let err = client
        .get("/")
        .header("x-bad", "line\nbreak")
        .send()
        .await
        .unwrap_err();
    assert!(matches!(err.kind(), Some(ErrorKind::InvalidCall(_))));
    assert!(!err.may_have_executed());
    assert_eq!(err.request_id().len(), baton_core::GENERATED_ID_LEN);
    assert_eq!(p.request_count(), 0);
    // The error's chain names the header, never its value; an invalid name is named too.
    let text = chain_text(&err);
    assert!(text.contains("x-bad") && !text.contains("break"), "{text}");
    let err = client
        .get("/")
        .header("x bad", "v")
        .send()
        .await
        .unwrap_err();
    assert!(chain_text(&err).contains("\"x bad\""), "{err}");
    assert_eq!(p.request_count(), 0);
}

/// An error's text and its sources', joined.
fn chain_text(e: &(dyn std::error::Error + 'static)) -> String {
    let chain = std::iter::successors(Some(e), |e| e.source());
    chain.map(|e| e.to_string()).collect::<Vec<_>>().join(": ")
}

#[tokio::test]
async fn invalid_request_id_is_rejected_before_sending() {
    let p = Provider::start(Behaviour::ok());
    let (client, _) = common::client(common::policy(&[("a", &p.url())]));
    let err = client
        .get("/")
        .request_id("short")
        .send()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Call { .. }));
    assert!(matches!(err.kind(), Some(ErrorKind::InvalidCall(_))));
    assert_eq!(p.request_count(), 0);
}

#[tokio::test]
async fn unknown_preferred_endpoint_is_an_error_before_any_attempt() {
    let p = Provider::start(Behaviour::ok());
    let (client, _) = common::client(common::policy(&[("a", &p.url())]));
    let err = client.get("/").prefer("nope").send().await.unwrap_err();
    assert!(matches!(err.kind(), Some(ErrorKind::UnknownEndpoint(_))));
    assert_eq!(p.request_count(), 0);
}

#[tokio::test]
async fn preferred_endpoint_goes_first() {
    let a = Provider::start(Behaviour::ok());
    let b = Provider::start(Behaviour::ok());
    let (client, _) = common::client(common::policy(&[("a", &a.url()), ("b", &b.url())]));
    let resp = client.get("/").prefer("b").send().await.unwrap();
    assert_eq!(resp.endpoint(), "b");
    assert_eq!(a.request_count(), 0);
}

// ----- the client is shared -----

#[tokio::test]
async fn clones_share_endpoint_health() {
    fn assert_send_sync<T: Clone + Send + Sync>() {}
    assert_send_sync::<baton_tokio::Client>();
    let backup = Provider::start(Behaviour::ok());
    let refused = testkit::refused_url();
    let (client, _) = common::client(
        common::policy(&[("primary", &refused), ("backup", &backup.url())]).breaker(Breaker {
            rule: BreakerRule::Consecutive { failures: 2 },
            ..Breaker::default()
        }),
    );
    let other = client.clone();
    client.get("/").send().await.unwrap();
    other.get("/").send().await.unwrap();
    assert_eq!(client.health("primary").unwrap().state, BreakerState::Open);
    // Both clones now start with the backup.
    let resp = other.get("/").send().await.unwrap();
    assert_eq!(resp.report().attempts[0].endpoint_id.as_ref(), "backup");
    assert!(client.reset("primary"));
    assert_eq!(other.health("primary").unwrap().state, BreakerState::Closed);
}

// ----- a body read ahead for the classifier (`classify_body`) -----

#[tokio::test]
async fn the_classifier_sees_short_bodies_and_every_body_reaches_the_caller_whole() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let s = seen.clone();
    let short = Provider::start(Behaviour::status(200).body("tiny"));
    let long = Provider::start(Behaviour::status(200).body("0123456789abcdef".repeat(64)));
    for (provider, want) in [
        (&short, "tiny".to_string()),
        (&long, "0123456789abcdef".repeat(64)),
    ] {
        let s = s.clone();
        let policy = common::policy(&[("a", &provider.url())])
            .configure(|c| c.classify_body = 16)
            .classify_fn(move |v| {
                s.lock().unwrap().push(v.body.map(<[u8]>::to_vec));
                None
            });
        let (client, _) = common::client(policy);
        let resp = client.get("/").send().await.unwrap();
        assert_eq!(resp.text().await.unwrap(), want);
    }
    // The short body was handed to the classifier; the long one (past 16 bytes) was not,
    // and still reached the caller whole (the bytes read ahead, then the rest).
    assert_eq!(*seen.lock().unwrap(), [Some(b"tiny".to_vec()), None]);
}

/// An event stream is never read ahead for the classifier: its body ends only when the
/// stream does. Read ahead, a stream quieter than the limit held its own opening until the
/// attempt timer fired (ambiguous), and the stream reconnected forever.
#[tokio::test]
async fn an_event_stream_opens_at_once_under_a_policy_that_reads_bodies_ahead() {
    use testkit::sse::{Conn, EventServer};
    let server = EventServer::builder("a", 3)
        .then(Conn::BlackHole(1))
        .start();
    let url = server.url();
    let policy = common::policy(&[("a", &url)]).configure(|c| c.classify_body = 1024);
    let (client, log) = common::client(policy);
    let mut events = client
        .get("/feed")
        .events(baton_core::sse::StreamSettings::default());
    let first = tokio::time::timeout(Duration::from_secs(3), events.next()).await;
    let first = first.expect("the first event, before the attempt timer");
    let Some(Ok(baton_core::sse::StreamItem::Event { event, .. })) = first else {
        panic!("not an event: {first:?}");
    };
    assert_eq!(event.data, "event 0");
    assert_eq!(
        server.seen().len(),
        1,
        "one connection: {:?}",
        log.0.lock().unwrap()
    );
}

/// An endpoint URL the policy accepts but reqwest cannot use (a host that reads as an
/// IPv4 address out of range) is refused when the client is built, naming the endpoint.
/// Found only when sent, every call ended there as invalid and never failed over.
#[test]
fn an_endpoint_url_reqwest_cannot_use_is_refused_when_the_client_is_built() {
    let policy = || {
        common::policy(&[
            ("a", "http://256.0.0.1:1/k/SECRET"),
            ("b", "http://127.0.0.1:1/"),
        ])
    };
    assert!(policy().build().is_ok(), "the policy alone accepts it");
    let e = baton_tokio::Client::new(policy()).unwrap_err().to_string();
    assert!(e.contains("\"a\"") && e.contains("256.0.0.1"), "{e}");
    assert!(!e.contains("SECRET"), "{e}");
}

/// A stream that fails while it is buffered (`buffer_body`) is not sent: the call is
/// rejected locally, nothing reaches the provider and nothing may have executed, as on
/// every adapter. Before, it was reported over the limit and sent, and broke partway.
#[tokio::test]
async fn a_stream_that_fails_while_buffered_is_not_sent() {
    let provider = Provider::start(Behaviour::ok());
    let (client, log) = common::client(common::policy(&[("a", &provider.url())]));
    let broken: BoxError = "the source went away".into();
    let body = late_body(vec![Ok(bytes::Bytes::from("hello ")), Err(broken)]);
    let err = client.post("/").body(body).buffer_body(1024).send().await;
    let err = err.unwrap_err();
    assert!(
        matches!(err.kind(), Some(ErrorKind::InvalidCall(_))),
        "{err}"
    );
    assert!(!err.may_have_executed(), "{err}");
    assert!(
        format!("{err:#}").contains("the source went away"),
        "{err:#}"
    );
    assert_eq!(provider.request_count(), 0);
    assert!(!log.names().contains(&"BodyNotBuffered".to_string()));
}

/// HTTP/2 asked of endpoints whose connections agreed HTTP/1.1 (plain `http://`): each
/// attempt is refused by the client before anything is written, so it is undelivered and
/// a POST fails over; nothing reaches a provider and nothing may have executed. A version
/// baton-tokio does not send (HTTP/3) is an invalid call. Before, the refusal read as an
/// ambiguous transport error.
#[tokio::test]
async fn a_version_the_connection_does_not_speak_is_undelivered() {
    let (a, b) = (
        Provider::start(Behaviour::ok()),
        Provider::start(Behaviour::ok()),
    );
    let (client, _) = common::client(common::policy(&[("a", &a.url()), ("b", &b.url())]));
    let h2 = client.post("/").body("{}").version(http::Version::HTTP_2);
    let err = h2.send().await.unwrap_err();
    let undelivered = baton_core::AttemptResult::Failed(baton_core::FailureClass::Undelivered);
    let results: Vec<_> = err.report().attempts.iter().map(|a| a.result).collect();
    assert!(
        results.len() >= 2 && results.iter().all(|r| *r == undelivered),
        "{err:#}"
    );
    assert!(!err.may_have_executed(), "{err:#}");
    let h3 = client.get("/").version(http::Version::HTTP_3).send().await;
    let err = h3.unwrap_err();
    assert!(
        matches!(err.kind(), Some(ErrorKind::InvalidCall(_))),
        "{err:#}"
    );
    assert!(err
        .report()
        .attempts
        .iter()
        .all(|a| !matches!(a.result, baton_core::AttemptResult::Response(_))));
    assert_eq!((a.request_count(), b.request_count()), (0, 0));
    let fine = client.get("/").version(http::Version::HTTP_11).send().await;
    assert_eq!(fine.unwrap().status(), 200);
}
