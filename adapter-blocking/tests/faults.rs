//! The blocking adapter against real fault-injecting providers on loopback (testkit),
//! asserting what the call returned and what each provider actually executed.

use std::error::Error as _;
use std::io::Read;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use baton_blocking::baton_core::{AttemptResult, FailureClass, TimeoutPhase};
use baton_blocking::{
    BodyError, BreakerState, Client, ClientBuilder, Endpoint, ErrorKind, EventKind, Policy,
    ResponseExt, StopReason, UrlMode,
};
use testkit::{Behaviour, Provider};

/// Short timeouts, tiny backoff, no proxy from the environment.
fn builder(endpoints: &[(&str, &str)]) -> ClientBuilder {
    let mut policy = Policy::builder().configure(|s| {
        s.connect_timeout = Duration::from_secs(2);
        s.attempt_timeout = Duration::from_secs(2);
        s.backoff.initial = Duration::from_millis(10);
        s.backoff.max = Duration::from_millis(50);
    });
    for (id, url) in endpoints {
        policy = policy.endpoint(Endpoint::new(*id, *url));
    }
    builder_for(policy)
}

/// The test agent (no proxy, a short body timeout) for `policy`.
fn builder_for(policy: baton_blocking::PolicyBuilder) -> ClientBuilder {
    let config = ureq::Agent::config_builder()
        .proxy(None)
        .timeout_recv_body(Some(Duration::from_millis(500)))
        .build();
    Client::builder(policy).config(config)
}

fn client(endpoints: &[(&str, &str)]) -> Client {
    builder(endpoints).build().expect("valid client")
}

fn results(report: &baton_blocking::Report) -> Vec<(String, AttemptResult)> {
    report
        .attempts
        .iter()
        .map(|a| (a.endpoint_id.to_string(), a.result))
        .collect()
}

const UNDELIVERED: AttemptResult = AttemptResult::Failed(FailureClass::Undelivered);
const AMBIGUOUS: AttemptResult = AttemptResult::Failed(FailureClass::Ambiguous);

fn ok200() -> AttemptResult {
    AttemptResult::Response(ureq::http::StatusCode::OK)
}

/// The destination rules' typed reason in an error's source chain, if any.
fn destination_error(
    e: &(dyn std::error::Error + 'static),
) -> Option<baton_blocking::baton_core::DestinationError> {
    testkit::in_chain(e).cloned()
}

#[test]
fn a_destination_refused_by_the_rules_is_the_typed_error_in_the_chain() {
    use baton_blocking::baton_core::DestinationError;
    let a = Provider::start(Behaviour::ok());
    // Refused when the request is built (the URL's scheme).
    let c = client(&[("a", &a.url())]);
    let e = c.get("ftp://a.example/x").call().unwrap_err();
    assert_eq!(
        destination_error(&e),
        Some(DestinationError::Scheme("ftp".into())),
        "{e}"
    );
    // Refused when the attempt is built (a path that would leave the base path).
    let c = builder_for(
        Policy::builder()
            .url_mode(UrlMode::Base)
            .endpoint(Endpoint::new("a", a.url())),
    )
    .build()
    .unwrap();
    let e = c.get("/v1/%2e%2e/admin").call().unwrap_err();
    assert!(
        matches!(destination_error(&e), Some(DestinationError::Url { .. })),
        "{e}"
    );
    assert_eq!(a.request_count(), 0);
}

#[test]
fn healthy_call_returns_the_response_with_its_report() {
    let p = Provider::start(Behaviour::ok());
    let c = client(&[("a", &p.url())]);
    let mut resp = c.get("/").call().unwrap();
    assert_eq!(resp.status(), 200);
    let report = resp.report().unwrap().clone();
    assert_eq!(report.stop_reason, StopReason::Answered);
    assert_eq!(report.endpoint_id(), Some("a"));
    assert_eq!(resp.body_mut().read_to_string().unwrap(), "ok");
    let reqs = p.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(
        reqs[0].header("x-request-id"),
        Some(report.request_id.as_str())
    );
}

#[test]
fn client_errors_and_server_errors_are_responses() {
    let p = Provider::start(Behaviour::status(404).body("nope"));
    let c = client(&[("a", &p.url())]);
    let mut resp = c.post("/").send("x").unwrap();
    assert_eq!(resp.status(), 404);
    assert_eq!(resp.body_mut().read_to_string().unwrap(), "nope");
    let p500 = Provider::start(Behaviour::status(500));
    let c = client(&[("a", &p500.url())]);
    assert_eq!(c.get("/").call().unwrap().status(), 500);
}

#[test]
fn refused_primary_is_undelivered_so_a_post_fails_over() {
    let refused = testkit::refused_url();
    let b = Provider::start(Behaviour::ok());
    let c = client(&[("a", &refused), ("b", &b.url())]);
    let resp = c.post("/pay").send("{}").unwrap();
    let report = resp.report().unwrap();
    assert_eq!(
        results(report),
        [("a".into(), UNDELIVERED), ("b".into(), ok200())]
    );
    assert_eq!(b.request_count(), 1);
    assert_eq!(b.requests()[0].body_text(), "{}");
}

#[test]
fn dns_failure_is_undelivered_so_a_post_fails_over() {
    let b = Provider::start(Behaviour::ok());
    let c = client(&[("a", &testkit::unresolvable_url()), ("b", &b.url())]);
    let resp = c.post("/").send("{}").unwrap();
    assert_eq!(
        results(resp.report().unwrap()),
        [("a".into(), UNDELIVERED), ("b".into(), ok200())]
    );
}

#[cfg(feature = "rustls")]
#[test]
fn tls_handshake_failure_is_undelivered_so_a_post_fails_over() {
    // An https endpoint on a plain HTTP provider: the handshake fails, nothing is executed.
    let plain = Provider::start(Behaviour::ok());
    let https = format!("https://127.0.0.1:{}", plain.port());
    let b = Provider::start(Behaviour::ok());
    let c = client(&[("a", &https), ("b", &b.url())]);
    let resp = c.post("/").send("{}").unwrap();
    assert_eq!(
        results(resp.report().unwrap()),
        [("a".into(), UNDELIVERED), ("b".into(), ok200())]
    );
    assert_eq!(plain.request_count(), 0);
    assert_eq!(b.request_count(), 1);
}

#[test]
fn reset_after_read_is_ambiguous_so_a_post_without_key_stops() {
    let a = Provider::start(Behaviour::reset());
    let b = Provider::start(Behaviour::ok());
    let c = client(&[("a", &a.url()), ("b", &b.url())]);
    let err = c.post("/").send("{}").unwrap_err();
    assert_eq!(err.kind(), Some(&ErrorKind::Failover));
    assert_eq!(err.report().stop_reason, StopReason::NotPermitted);
    assert!(err.report().may_have_executed);
    assert_eq!(results(err.report()), [("a".into(), AMBIGUOUS)]);
    assert_eq!((a.request_count(), b.request_count()), (1, 0));
    // The chain: the call, its last attempt (the engine's link), the ureq error, each
    // said once.
    let ureq_error = err.client_error().unwrap();
    let attempt = err.source().unwrap();
    let link = attempt.downcast_ref::<baton_blocking::baton_core::AttemptFailure>();
    assert_eq!(link.map(|l| (l.attempt, &*l.endpoint_id)), Some((1, "a")));
    assert_eq!(
        attempt.source().unwrap().to_string(),
        ureq_error.to_string()
    );
    assert_eq!(testkit::repeated_in_chain(&err), None);
    assert!(err.to_string().contains(err.report().request_id.as_str()));
}

#[test]
fn reset_after_read_fails_a_get_over() {
    let a = Provider::start(Behaviour::reset());
    let b = Provider::start(Behaviour::ok());
    let c = client(&[("a", &a.url()), ("b", &b.url())]);
    let resp = c.get("/").call().unwrap();
    assert_eq!(
        results(resp.report().unwrap()),
        [("a".into(), AMBIGUOUS), ("b".into(), ok200())]
    );
}

#[test]
fn close_without_answer_is_ambiguous() {
    let a = Provider::start(Behaviour::close());
    let b = Provider::start(Behaviour::ok());
    let c = client(&[("a", &a.url()), ("b", &b.url())]);
    let err = c.post("/").send("{}").unwrap_err();
    assert_eq!(results(err.report()), [("a".into(), AMBIGUOUS)]);
    assert_eq!(
        a.connection_count(),
        1,
        "the second request used the pooled connection"
    );
    assert_eq!(b.request_count(), 0);
}

#[test]
fn black_hole_times_out_waiting_which_is_ambiguous() {
    let a = Provider::start(Behaviour::black_hole());
    let b = Provider::start(Behaviour::ok());
    let c = client(&[("a", &a.url()), ("b", &b.url())]);
    let t0 = Instant::now();
    let err = c
        .post("/")
        .attempt_timeout(Duration::from_millis(400))
        .send("{}")
        .unwrap_err();
    let took = t0.elapsed();
    assert_eq!(
        results(err.report()),
        [("a".into(), AttemptResult::TimedOut(TimeoutPhase::Response))]
    );
    assert!(took >= Duration::from_millis(350), "{took:?}");
    assert!(took < Duration::from_secs(3), "{took:?}");
    assert_eq!((a.request_count(), b.request_count()), (1, 0));
}

#[test]
fn slow_answer_past_the_attempt_timeout_fails_a_get_over() {
    let a = Provider::start(Behaviour::ok().delay(Duration::from_secs(3)));
    let b = Provider::start(Behaviour::ok());
    let c = client(&[("a", &a.url()), ("b", &b.url())]);
    let resp = c
        .get("/")
        .attempt_timeout(Duration::from_millis(300))
        .call()
        .unwrap();
    assert_eq!(resp.report().unwrap().endpoint_id(), Some("b"));
}

#[test]
fn deadline_cuts_the_attempt_and_ends_the_call() {
    let a = Provider::start(Behaviour::black_hole());
    let c = client(&[("a", &a.url())]);
    let t0 = Instant::now();
    let err = c
        .get("/")
        .deadline(Duration::from_millis(500))
        .call()
        .unwrap_err();
    assert_eq!(err.kind(), Some(&ErrorKind::Deadline));
    assert_eq!(err.report().stop_reason, StopReason::Deadline);
    let took = t0.elapsed();
    assert!(took >= Duration::from_millis(450), "{took:?}");
    assert!(took < Duration::from_secs(2), "{took:?}");
}

#[test]
fn status_503_fails_a_get_over_and_both_providers_executed() {
    let a = Provider::start(Behaviour::status(503));
    let b = Provider::start(Behaviour::ok());
    let c = client(&[("a", &a.url()), ("b", &b.url())]);
    let resp = c.get("/").call().unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!((a.request_count(), b.request_count()), (1, 1));
}

#[test]
fn keyed_post_after_503_is_retried_on_the_same_endpoint_with_the_same_key() {
    let a = Provider::builder()
        .then(Behaviour::status(503))
        .otherwise(Behaviour::ok())
        .start();
    let b = Provider::start(Behaviour::ok());
    let c = client(&[("a", &a.url()), ("b", &b.url())]);
    let resp = c.post("/").idempotency_key("charge-42").send("{}").unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(a.count_with_header("idempotency-key", "charge-42"), 2);
    assert_eq!(b.request_count(), 0);
    let ids: Vec<_> = a
        .requests()
        .iter()
        .map(|r| r.header("x-request-id").unwrap().to_string())
        .collect();
    assert_eq!(ids[0], ids[1], "one request id on every attempt");
}

#[test]
fn retry_after_on_429_is_waited_for_with_a_sleep() {
    let a = Provider::builder()
        .then(Behaviour::status(429).header("Retry-After", "1"))
        .otherwise(Behaviour::ok())
        .start();
    let c = client(&[("a", &a.url())]);
    let t0 = Instant::now();
    let resp = c.get("/").call().unwrap();
    assert_eq!(resp.status(), 200);
    let took = t0.elapsed();
    assert!(took >= Duration::from_millis(800), "{took:?}");
    assert!(took < Duration::from_secs(3), "{took:?}");
    assert_eq!(a.request_count(), 2);
}

#[test]
fn retained_503_is_returned_when_the_backup_is_refused() {
    let a = Provider::start(Behaviour::status(503).body("busy"));
    let c = client(&[("a", &a.url()), ("b", &testkit::refused_url())]);
    let mut resp = c.get("/").call().unwrap();
    assert_eq!(resp.status(), 503);
    assert_eq!(resp.body_mut().read_to_string().unwrap(), "busy");
    let report = resp.report().unwrap();
    assert!(matches!(
        report.outcome,
        baton_blocking::Outcome::Response { retained: true, .. }
    ));
}

#[test]
fn body_stall_after_the_head_is_a_body_error_naming_the_endpoint() {
    let a = Provider::start(Behaviour::ok().stall_after_headers());
    let c = client(&[("primary", &a.url())]);
    let mut resp = c.get("/").call().unwrap();
    assert_eq!(resp.status(), 200);
    let mut buf = Vec::new();
    let err = resp
        .body_mut()
        .as_reader()
        .read_to_end(&mut buf)
        .unwrap_err();
    let body = err
        .get_ref()
        .and_then(|e| e.downcast_ref::<BodyError>())
        .expect("a BodyError inside");
    assert_eq!(body.endpoint(), "primary");
    assert_eq!(body.attempt(), 1);
    // SPEC 2.6: past the deadline or the body timeout, the body error keeps the call's
    // may_have_executed, and says that a timeout ended the read.
    assert!(body.may_have_executed());
    assert!(body.is_timeout(), "{body}");
    assert!(body.to_string().contains("timed out"), "{body}");
}

#[test]
fn half_body_then_close_is_never_a_complete_body() {
    let a = Provider::start(
        Behaviour::status(200)
            .body("0123456789")
            .close_after_half_body(),
    );
    let c = client(&[("primary", &a.url())]);
    let mut resp = c.get("/").call().unwrap();
    let err = resp.body_mut().read_to_string().unwrap_err();
    assert!(err.to_string().contains("\"primary\""), "{err}");
}

#[test]
fn destination_rules_base_mode_endpoint_headers_host_and_attempt_number() {
    let a = Provider::start(Behaviour::status(503));
    let b = Provider::start(Behaviour::ok());
    let c = builder_for(
        Policy::builder()
            .url_mode(UrlMode::Base)
            .configure(|s| s.attempt_header = Some("x-attempt".into()))
            .endpoint(
                Endpoint::new("a", format!("{}/v1?tenant=7", a.url())).header("authorization", "A"),
            )
            .endpoint(Endpoint::new("b", format!("{}/v2", b.url())).header("authorization", "B")),
    )
    .build()
    .unwrap();
    let host_a = a.url().trim_start_matches("http://").to_string();
    let resp = c
        .get("/users/7?x=1")
        .header("authorization", "caller")
        .header("host", &host_a)
        .request_id("req-fixed-0001")
        .call()
        .unwrap();
    assert_eq!(resp.status(), 200);
    let ra = &a.requests()[0];
    let rb = &b.requests()[0];
    assert_eq!(ra.path, "/v1/users/7");
    assert_eq!(ra.query.as_deref(), Some("tenant=7&x=1"));
    assert_eq!(rb.path, "/v2/users/7");
    assert_eq!(ra.header("authorization"), Some("A"));
    assert_eq!(rb.header("authorization"), Some("B"));
    assert_eq!(ra.header("host"), Some(host_a.as_str()));
    let host_b = b.url().trim_start_matches("http://").to_string();
    assert_eq!(rb.header("host"), Some(host_b.as_str()));
    assert_eq!(ra.header("x-attempt"), Some("1"));
    assert_eq!(rb.header("x-attempt"), Some("2"));
    assert_eq!(rb.header("x-request-id"), Some("req-fixed-0001"));
}

#[test]
fn one_shot_stream_is_not_replayed_unless_buffering_is_opted_in() {
    let refused = testkit::refused_url();
    let b = Provider::start(Behaviour::ok());
    let c = client(&[("a", &refused), ("b", &b.url())]);
    let err = c
        .post("/")
        .send_reader(std::io::Cursor::new(b"stream".to_vec()))
        .unwrap_err();
    assert_eq!(err.report().stop_reason, StopReason::NotReplayable);
    assert!(!err.report().may_have_executed);
    assert_eq!(b.request_count(), 0);

    let resp = c
        .post("/")
        .buffer_body(1024)
        .send_reader(std::io::Cursor::new(b"stream".to_vec()))
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(b.requests()[0].body_text(), "stream");

    // Over the limit: sent once, unreplayable.
    let err = c
        .post("/")
        .buffer_body(3)
        .send_reader(std::io::Cursor::new(b"stream".to_vec()))
        .unwrap_err();
    assert_eq!(err.report().stop_reason, StopReason::NotReplayable);
    assert!(!err.report().may_have_executed);
    assert_eq!(b.request_count(), 1, "only the buffered call reached b");
}

/// A body read from a source that fails on a certificate (a download from another
/// server): the head and a part were sent, so the attempt may have executed; the error is
/// the caller's reader's, not of the attempt's connection. A body the caller can make
/// again does not go on to the next endpoint either (before, the POST ran on both).
#[test]
fn a_body_whose_source_fails_on_a_certificate_may_have_executed() {
    let a = Provider::start(Behaviour::ok());
    let b = Provider::start(Behaviour::ok());
    let c = client(&[("a", &a.url())]);
    let err = c.post("/").send_reader(FailingSource(false)).unwrap_err();
    assert_eq!(results(err.report()), [("a".into(), AMBIGUOUS)], "{err}");
    assert!(err.report().may_have_executed);
    let c = client(&[("a", &a.url()), ("b", &b.url())]);
    let err = c
        .post("/")
        .send_with(|| Ok(FailingSource(false)))
        .unwrap_err();
    assert_eq!(results(err.report()), [("a".into(), AMBIGUOUS)], "{err}");
    assert_eq!(err.report().stop_reason, StopReason::NotPermitted);
    assert_eq!(b.request_count(), 0);
}

/// A reader that gives a part, then fails with a certificate rejected by its own source.
struct FailingSource(bool);

impl std::io::Read for FailingSource {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if std::mem::replace(&mut self.0, true) {
            let rejected =
                rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                rejected,
            ));
        }
        buf[..6].copy_from_slice(b"hello ");
        Ok(6)
    }
}

#[test]
fn body_factory_failure_on_a_later_attempt_is_a_replay_failure() {
    let refused = testkit::refused_url();
    let b = Provider::start(Behaviour::ok());
    let c = client(&[("a", &refused), ("b", &b.url())]);
    let mut n = 0;
    let err = c
        .post("/")
        .send_with(move || {
            n += 1;
            if n == 1 {
                Ok(std::io::Cursor::new(b"body".to_vec()))
            } else {
                Err(std::io::Error::other("file gone"))
            }
        })
        .unwrap_err();
    assert_eq!(err.report().stop_reason, StopReason::ReplayFailed);
    assert_eq!(b.request_count(), 0);

    // A factory that works is called again for the failover.
    let resp = c
        .post("/")
        .send_with(|| Ok(std::io::Cursor::new(b"again".to_vec())))
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(b.requests().last().unwrap().body_text(), "again");
}

#[cfg(feature = "json")]
#[test]
fn send_json_sets_the_content_type_and_replays_the_bytes() {
    #[derive(serde::Serialize)]
    struct Rpc {
        method: &'static str,
    }
    let b = Provider::start(Behaviour::ok());
    let c = client(&[("a", &testkit::refused_url()), ("b", &b.url())]);
    c.post("/").send_json(&Rpc { method: "eth_call" }).unwrap();
    let r = &b.requests()[0];
    assert_eq!(r.body_text(), r#"{"method":"eth_call"}"#);
    assert!(r
        .header("content-type")
        .unwrap()
        .starts_with("application/json"));
}

#[test]
fn invalid_header_fails_the_call_before_any_send() {
    let a = Provider::start(Behaviour::ok());
    let c = client(&[("a", &a.url())]);
    let err = c.get("/").header("bad header", "x").call().unwrap_err();
    assert!(matches!(err.kind(), Some(ErrorKind::InvalidCall(_))));
    assert!(!err.report().may_have_executed);
    assert_eq!(a.request_count(), 0);
}

#[test]
fn unknown_preferred_endpoint_is_an_error_before_any_send() {
    let a = Provider::start(Behaviour::ok());
    let c = client(&[("a", &a.url())]);
    let err = c.get("/").prefer("nope").call().unwrap_err();
    assert!(matches!(err.kind(), Some(ErrorKind::UnknownEndpoint(_))));
    assert_eq!(a.request_count(), 0);
}

#[test]
fn preferred_endpoint_goes_first_and_deny_allows_one_attempt() {
    let a = Provider::start(Behaviour::ok());
    let b = Provider::start(Behaviour::status(503));
    let c = client(&[("a", &a.url()), ("b", &b.url())]);
    let resp = c.get("/").prefer("b").deny().call().unwrap();
    // 503 with no further attempt allowed: the retained response is returned.
    assert_eq!(resp.status(), 503);
    assert_eq!((a.request_count(), b.request_count()), (0, 1));
}

#[test]
fn events_are_delivered_in_order_per_call() {
    let log: Arc<Mutex<Vec<String>>> = Arc::default();
    let l2 = log.clone();
    let b = Provider::start(Behaviour::ok());
    let c = builder(&[("a", &testkit::refused_url()), ("b", &b.url())])
        .on_event(move |e| {
            let name = match &e.kind {
                EventKind::AttemptStarted { .. } => "started",
                EventKind::AttemptFinished { .. } => "finished",
                EventKind::Failover { .. } => "failover",
                EventKind::Result { .. } => "result",
                _ => return,
            };
            l2.lock().unwrap().push(name.to_string());
        })
        .build()
        .unwrap();
    c.get("/").call().unwrap();
    assert_eq!(
        *log.lock().unwrap(),
        ["started", "finished", "failover", "started", "finished", "result"]
    );
}

#[test]
fn breaker_is_shared_by_all_threads_of_one_client() {
    let b = Provider::start(Behaviour::ok());
    let c = client(&[("a", &testkit::refused_url()), ("b", &b.url())]);
    let threads: Vec<_> = (0..3)
        .map(|_| {
            let c = c.clone();
            std::thread::spawn(move || c.get("/").call().map(|r| r.status()))
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap().unwrap(), 200);
    }
    assert_eq!(c.health("a").unwrap().state, BreakerState::Open);
    // The open primary is tried last: the next call goes straight to the backup.
    let resp = c.get("/").call().unwrap();
    assert_eq!(resp.report().unwrap().attempts.len(), 1);
    assert!(c.reset("a"));
    assert_eq!(c.health("a").unwrap().state, BreakerState::Closed);
}

#[test]
fn keep_alive_connection_is_reused_across_calls() {
    let a = Provider::start(Behaviour::ok());
    let c = client(&[("a", &a.url())]);
    for _ in 0..5 {
        let mut r = c.get("/").call().unwrap();
        r.body_mut().read_to_string().unwrap();
    }
    assert_eq!(a.request_count(), 5);
    assert_eq!(a.connection_count(), 1);
}

#[test]
fn server_closing_a_pooled_connection_is_ambiguous_not_undelivered() {
    // The first request leaves a keep-alive connection in the pool; the second one is
    // reset on it. The attempt used a ready connection, so it may have executed.
    let a = Provider::builder()
        .then(Behaviour::ok())
        .then(Behaviour::reset())
        .otherwise(Behaviour::ok())
        .start();
    let b = Provider::start(Behaviour::ok());
    let c = client(&[("a", &a.url()), ("b", &b.url())]);
    let mut r = c.post("/").send("1").unwrap();
    r.body_mut().read_to_string().unwrap();
    let err = c.post("/").send("2").unwrap_err();
    assert_eq!(results(err.report()), [("a".into(), AMBIGUOUS)]);
    assert_eq!(
        a.connection_count(),
        1,
        "the second request used the pooled connection"
    );
    assert_eq!(b.request_count(), 0);
}

/// An empty body is no body, as on the other adapters: a POST of "" answered 307 goes to
/// the new location without a body and without the body's headers (before, blocking kept
/// Content-Type on the hop, where tokio and async-std drop it).
#[test]
fn an_empty_body_is_no_body_on_a_307_hop() {
    let p = Provider::builder()
        .then(Behaviour::status(307).header("location", "/moved"))
        .otherwise(Behaviour::ok())
        .start();
    let c = client(&[("a", &p.url())]);
    let r = c
        .post("/")
        .header("content-type", "application/json")
        .send("")
        .unwrap();
    assert_eq!(r.status(), 200);
    let requests = p.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].header("content-type"), None);
}

/// An extension method (`PURGE`) is sent as on every adapter, with the client's own agent
/// and with one configured by the caller. Before, ureq refused it after the connection was
/// made: the refusal read as a transport failure (ambiguous on a new connection) and
/// counted against the endpoint.
#[test]
fn an_extension_method_is_sent() {
    let p = Provider::start(Behaviour::ok());
    let purge = ureq::http::Method::from_bytes(b"PURGE").unwrap();
    let policy = Policy::builder().endpoint(Endpoint::new("a", p.url()));
    let own = Client::new(policy).expect("valid client");
    let configured = client(&[("a", &p.url())]);
    for c in [&own, &configured, &own, &configured] {
        let resp = c.request(purge.clone(), "/").call();
        let resp = resp.unwrap_or_else(|e| panic!("PURGE failed: {e}"));
        assert_eq!(resp.status(), 200);
    }
    let methods: Vec<String> = p.requests().into_iter().map(|r| r.method).collect();
    assert_eq!(methods, ["PURGE"; 4]);
}

/// A stream over its buffering limit is sent once, with the event that says so (SPEC 2.4),
/// before the call's result, as on every async adapter.
#[test]
fn a_stream_over_its_buffering_limit_is_sent_once_with_the_event() {
    let log: Arc<Mutex<Vec<String>>> = Arc::default();
    let l2 = log.clone();
    let b = Provider::start(Behaviour::ok());
    let c = builder(&[("b", &b.url())])
        .on_event(move |e| {
            let name = match &e.kind {
                EventKind::BodyNotBuffered { limit } => format!("not buffered {limit}"),
                EventKind::AttemptStarted { .. } => "started".into(),
                EventKind::Result { .. } => "result".into(),
                _ => return,
            };
            l2.lock().unwrap().push(name);
        })
        .build()
        .unwrap();
    let resp = c
        .post("/")
        .buffer_body(3)
        .send_reader(std::io::Cursor::new(b"stream".to_vec()))
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(b.requests()[0].body_text(), "stream");
    assert_eq!(
        *log.lock().unwrap(),
        ["not buffered 3", "started", "result"]
    );
}

/// A response head within baton's limit table (names and values at most 64 KiB) is an
/// answer here as on every adapter: ureq's own limit, which counts the whole head, failed
/// it as a protocol error.
#[test]
fn a_response_head_within_the_limit_table_is_an_answer() {
    let mut behaviour = Behaviour::ok();
    for i in 0..90 {
        behaviour = behaviour.header(format!("x-h{i:02}"), "v".repeat(720));
    }
    let p = Provider::start(behaviour);
    let c = client(&[("a", &p.url())]);
    let resp = c.get("/").call().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(resp.status(), 200);
    let bytes: usize = (resp.headers().iter())
        .map(|(n, v)| n.as_str().len() + v.len())
        .sum();
    assert!(bytes > 65_000 && bytes <= baton_blocking::baton_core::MAX_RESPONSE_HEADER_BYTES);
}

/// A body that ends with the connection (no length, not chunked) and is cut by a reset is
/// a body error naming the endpoint, never the half passed off as the whole (SPEC 1). ureq
/// read the reset as the body's end.
#[test]
fn a_reset_cutting_an_unframed_body_is_a_body_error() {
    let body = "0123456789abcdefghij";
    let p = Provider::start(
        Behaviour::status(200)
            .body(body)
            .reset_after_half_unframed_body(),
    );
    let c = client(&[("primary", &p.url())]);
    let mut resp = c.get("/").call().unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp.headers().get("content-length").is_none());
    let mut read = String::new();
    let err = resp.body_mut().as_reader().read_to_string(&mut read);
    let err = err.expect_err("a cut body must not read as whole");
    assert!(err.to_string().contains("primary"), "{err}");
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionReset, "{err}");
    assert_eq!(read, &body[..body.len() / 2]);
}

/// The deadline passes before an attempt can start (here a slow event callback): nothing
/// is sent, and the report says nothing may have executed, as on tokio. Before, ureq's
/// global timeout failed the send before it connected, a timeout of no phase, and the
/// report said the call may have executed.
#[test]
fn an_attempt_the_deadline_overtook_before_it_started_sent_nothing() {
    let p = Provider::start(Behaviour::ok());
    let c = builder(&[("a", &p.url())])
        .on_event(|e| {
            if matches!(e.kind, EventKind::AttemptStarted { .. }) {
                std::thread::sleep(Duration::from_millis(150));
            }
        })
        .build()
        .unwrap();
    let err = c
        .post("/")
        .idempotency_key("k-overtaken")
        .deadline(Duration::from_millis(100))
        .send(b"{}".to_vec())
        .unwrap_err();
    assert_eq!(p.request_count(), 0);
    assert!(!err.report().may_have_executed, "{err}");
}

/// With ureq's `charset` switched on by another crate of the application (this crate's
/// tests do): a Latin-1 text body comes back converted once ("café", not "cafÃ©"), and no
/// encoding is asked for.
#[test]
fn ureq_features_switched_on_elsewhere_change_nothing_sent_or_read() {
    let a = Provider::start(
        Behaviour::status(200)
            .header("content-type", "text/plain; charset=iso-8859-1")
            .body(&b"caf\xe9"[..]),
    );
    let c = client(&[("primary", &a.url())]);
    let mut resp = c.get("/").call().unwrap();
    assert_eq!(resp.body_mut().read_to_string().unwrap(), "café");
    let asked = a.requests()[0].headers.clone();
    assert!(
        !asked.iter().any(|(n, _)| n == "accept-encoding"),
        "an encoding was asked for: {asked:?}"
    );
}
