//! The adapter against real fault-injecting providers on 127.0.0.1, over the fault list of
//! `testkit`, each test run once under async-std's executor and once under smol's. Every
//! test asserts what the servers executed, not only what the client saw.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use baton_async_std::{Body, Client, Error, Phase};
use baton_core::{
    AttemptResult, Breaker, BreakerRule, BreakerState, Endpoint, ErrorKind, FailureClass, Hedge,
    StopReason, TimeoutPhase,
};
use bytes::Bytes;
use testkit::{on_both_runtimes, Behaviour, Provider};

/// Short timeouts everywhere (tests must be fast), endpoints named a, b, c ...
fn client(urls: &[String]) -> Client {
    builder(urls).build().unwrap()
}

fn builder(urls: &[String]) -> baton_async_std::ClientBuilder {
    Client::builder(policy(urls))
}

fn policy(urls: &[String]) -> baton_core::PolicyBuilder {
    let mut b = baton_core::Policy::builder()
        .connect_timeout(Duration::from_millis(800))
        .attempt_timeout(Duration::from_secs(3))
        .seed(7);
    for (i, u) in urls.iter().enumerate() {
        let id = ((b'a' + i as u8) as char).to_string();
        b = b.endpoint(Endpoint::new(id, u.as_str()));
    }
    b
}

/// The destination rules' typed reason in an error's source chain, if any.
fn destination_error(
    e: &(dyn std::error::Error + 'static),
) -> Option<baton_core::DestinationError> {
    testkit::in_chain(e).cloned()
}

fn call_error(e: Error) -> Box<baton_async_std::CallError> {
    match e {
        Error::Call(c) => c,
        other => panic!("expected a call error, got {other}"),
    }
}

fn results(r: &baton_core::Report) -> Vec<(String, AttemptResult)> {
    r.attempts
        .iter()
        .map(|a| (a.endpoint_id.to_string(), a.result))
        .collect()
}

/// A tiny raw HTTP server for what testkit does not do: answers each request with
/// `response`, then closes the connection when `close_after` (without saying so).
fn raw_server(response: &'static [u8], close_after: bool) -> (String, Arc<Mutex<usize>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let served = Arc::new(Mutex::new(0));
    let s2 = served.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let served = s2.clone();
            std::thread::spawn(move || loop {
                let mut req = Vec::new();
                let mut buf = [0u8; 1024];
                while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => req.extend_from_slice(&buf[..n]),
                    }
                }
                *served.lock().unwrap() += 1;
                if conn.write_all(response).is_err() {
                    return;
                }
                if close_after {
                    return; // drops (closes) the connection
                }
            });
        }
    });
    (url, served)
}

on_both_runtimes! {
    async fn healthy_get_returns_the_body_and_the_report() {
        let p = Provider::start(Behaviour::ok().body("hello"));
        let c = client(&[p.url()]);
        let resp = c.get("/x").send().await.unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.endpoint(), "a");
        assert_eq!(resp.report().attempts.len(), 1);
        assert_eq!(resp.report().stop_reason, StopReason::Answered);
        let id = resp.request_id().to_string();
        assert_eq!(resp.text().await.unwrap(), "hello");
        assert_eq!(p.count_with_header("x-request-id", &id), 1);
    }

    async fn keep_alive_connections_are_reused_per_endpoint() {
        let p = Provider::start(Behaviour::ok().body("pong"));
        let c = client(&[p.url()]);
        for _ in 0..20 {
            let r = c.get("/").send().await.unwrap();
            assert_eq!(r.bytes().await.unwrap(), Bytes::from_static(b"pong"));
        }
        assert_eq!(p.request_count(), 20);
        assert_eq!(p.connection_count(), 1);
        assert_eq!(c.idle_connections("a"), 1);
    }

    async fn refused_primary_fails_over_for_a_post_as_undelivered() {
        let b = Provider::start(Behaviour::ok());
        let c = client(&[testkit::refused_url(), b.url()]);
        let resp = c.post("/").body("{}").send().await.unwrap();
        assert_eq!(resp.endpoint(), "b");
        let r = results(resp.report());
        assert_eq!(r[0], ("a".into(), AttemptResult::Failed(FailureClass::Undelivered)));
        assert_eq!(b.request_count(), 1);
    }

    async fn dns_failure_is_undelivered() {
        let b = Provider::start(Behaviour::ok());
        let c = client(&[testkit::unresolvable_url(), b.url()]);
        let resp = c.post("/").body("{}").send().await.unwrap();
        assert_eq!(resp.endpoint(), "b");
        assert_eq!(
            resp.report().attempts[0].result,
            AttemptResult::Failed(FailureClass::Undelivered)
        );
        assert!(!resp.report().attempts.is_empty());
    }

    async fn reset_after_a_post_without_key_never_reaches_the_second_provider() {
        let a = Provider::start(Behaviour::reset());
        let b = Provider::start(Behaviour::ok());
        let c = client(&[a.url(), b.url()]);
        let e = call_error(c.post("/").body("{}").send().await.unwrap_err());
        assert_eq!(e.report().stop_reason, StopReason::NotPermitted);
        assert!(e.report().may_have_executed);
        let t = e.transport().expect("the transport error is kept");
        assert_eq!(t.phase(), Phase::Exchange);
        assert_eq!(t.class(), FailureClass::Ambiguous);
        assert!(std::error::Error::source(&*e).is_some());
        assert_eq!((a.request_count(), b.request_count()), (1, 0));
    }

    async fn reset_on_a_get_fails_over() {
        let a = Provider::start(Behaviour::reset());
        let b = Provider::start(Behaviour::ok());
        let c = client(&[a.url(), b.url()]);
        let resp = c.get("/").send().await.unwrap();
        assert_eq!(resp.endpoint(), "b");
        assert_eq!(
            resp.report().attempts[0].result,
            AttemptResult::Failed(FailureClass::Ambiguous)
        );
        assert_eq!((a.request_count(), b.request_count()), (1, 1));
    }

    async fn keyed_post_retries_the_same_endpoint_with_the_same_key() {
        let a = Provider::builder().then(Behaviour::reset()).otherwise(Behaviour::ok()).start();
        let b = Provider::start(Behaviour::ok());
        let c = Client::builder(policy(&[a.url(), b.url()]).backoff(baton_core::Backoff {
                initial: Duration::from_millis(10),
                ..baton_core::Backoff::default()
            }))
            .build()
            .unwrap();
        let resp = c.post("/").body("{}").idempotency_key("charge-42").send().await.unwrap();
        assert_eq!(resp.endpoint(), "a");
        assert_eq!(resp.report().attempts.len(), 2);
        assert_eq!(a.count_with_header("idempotency-key", "charge-42"), 2);
        let ids: Vec<_> = a.requests().iter().map(|r| r.header("x-request-id").unwrap().to_string()).collect();
        assert_eq!(ids[0], ids[1]);
        assert_eq!(b.request_count(), 0);
    }

    async fn black_hole_times_out_in_the_response_phase_and_a_get_fails_over() {
        let a = Provider::start(Behaviour::black_hole());
        let b = Provider::start(Behaviour::ok());
        let c = client(&[a.url(), b.url()]);
        let t0 = Instant::now();
        let resp = c.get("/").attempt_timeout(Duration::from_millis(300)).send().await.unwrap();
        assert_eq!(resp.endpoint(), "b");
        assert_eq!(
            resp.report().attempts[0].result,
            AttemptResult::TimedOut(TimeoutPhase::Response)
        );
        assert!(t0.elapsed() >= Duration::from_millis(290));
        assert!(t0.elapsed() < Duration::from_secs(3));
        assert_eq!((a.request_count(), b.request_count()), (1, 1));
    }

    async fn close_without_answer_is_ambiguous() {
        let a = Provider::start(Behaviour::close());
        let c = client(&[a.url()]);
        let e = call_error(c.post("/").body("x").send().await.unwrap_err());
        assert_eq!(
            e.report().attempts[0].result,
            AttemptResult::Failed(FailureClass::Ambiguous)
        );
        assert_eq!(e.report().attempts.len(), 1);
        assert_eq!(a.request_count(), 1);
    }

    async fn status_503_fails_over_and_a_second_503_is_returned_retained() {
        let a = Provider::start(Behaviour::status(503).body("busy-a"));
        let b = Provider::start(Behaviour::status(503).body("busy-b"));
        let c = client(&[a.url(), b.url()]);
        let resp = c.get("/").send().await.unwrap();
        assert_eq!(resp.status(), 503);
        assert_eq!(resp.report().attempts.len(), 2);
        assert!(matches!(
            resp.report().outcome,
            baton_core::Outcome::Response { retained: true, .. }
        ));
        let body = resp.text().await.unwrap();
        assert!(body.starts_with("busy-"));
        assert_eq!((a.request_count(), b.request_count()), (1, 1));
    }

    async fn retry_after_on_the_same_endpoint_is_honoured() {
        let a = Provider::builder()
            .then(Behaviour::status(503).header("Retry-After", "1"))
            .otherwise(Behaviour::ok())
            .start();
        let c = client(&[a.url()]);
        let t0 = Instant::now();
        let resp = c.get("/").send().await.unwrap();
        assert_eq!(resp.status(), 200);
        assert!(t0.elapsed() >= Duration::from_millis(950), "{:?}", t0.elapsed());
        assert_eq!(a.request_count(), 2);
    }

    async fn stalled_body_is_a_body_error_naming_the_endpoint() {
        let a = Provider::start(Behaviour::ok().body("0123456789").stall_after_headers());
        let c = builder(&[a.url()]).body_timeout(Duration::from_millis(300)).build().unwrap();
        let resp = c.get("/").send().await.unwrap();
        assert_eq!(resp.status(), 200);
        let e = resp.bytes().await.unwrap_err();
        assert!(e.is_body() && e.is_timeout());
        let Error::Body(b) = e else { unreachable!() };
        assert_eq!((b.endpoint(), b.attempt()), ("a", 1));
        assert_eq!(a.request_count(), 1);
    }

    /// A caller that reads on after a body error gets the error again, never a clean end
    /// of a body that was cut (SPEC 1), as reqwest's response does on tokio.
    async fn a_read_after_a_body_timeout_fails_again() {
        let a = Provider::start(Behaviour::ok().body("0123456789").stall_after_headers());
        let c = builder(&[a.url()]).body_timeout(Duration::from_millis(200)).build().unwrap();
        let mut resp = c.get("/").send().await.unwrap();
        let first = resp.chunk().await.unwrap_err();
        assert!(first.is_body() && first.is_timeout(), "{first}");
        let again = resp.chunk().await.unwrap_err();
        assert!(again.is_body() && again.is_timeout(), "{again}");
    }

    async fn truncated_body_is_never_passed_off_as_complete() {
        let a = Provider::start(Behaviour::ok().body("0123456789abcdef").close_after_half_body());
        let c = client(&[a.url()]);
        let resp = c.get("/").send().await.unwrap();
        let e = resp.bytes().await.unwrap_err();
        assert!(e.is_body());
        assert!(e.to_string().contains("\"a\""), "{e}");
        assert!(std::error::Error::source(&e).is_some());
    }

    async fn a_reset_cutting_an_unframed_body_is_a_body_error() {
        let b = Behaviour::ok().body("0123456789abcdef").reset_after_half_unframed_body();
        let a = Provider::start(b);
        let c = client(&[a.url()]);
        let resp = c.get("/").send().await.unwrap();
        assert!(resp.headers().get("content-length").is_none());
        let e = resp.bytes().await.unwrap_err();
        assert!(e.is_body());
        assert!(e.to_string().contains("\"a\""), "{e}");
    }

    async fn deadline_ends_the_call_with_what_it_has() {
        let a = Provider::start(Behaviour::black_hole());
        let c = client(&[a.url()]);
        let t0 = Instant::now();
        let e = call_error(c.get("/").deadline(Duration::from_millis(400)).send().await.unwrap_err());
        assert_eq!(e.kind(), &ErrorKind::Deadline);
        assert_eq!(e.report().stop_reason, StopReason::Deadline);
        let el = t0.elapsed();
        assert!(el >= Duration::from_millis(390) && el < Duration::from_secs(2), "{el:?}");
    }

    async fn an_earlier_attempts_error_is_never_named_as_the_last_attempts() {
        // Attempt 1 is reset (an error); attempt 2 is a 503 asking for an hour (no error),
        // and the call stops there: its last attempt is that response.
        let a = Provider::builder()
            .then(Behaviour::reset())
            .otherwise(Behaviour::status(503).header("Retry-After", "3600"))
            .start();
        let c = client(&[a.url()]);
        let e = call_error(c.get("/").send().await.unwrap_err());
        let hour = Duration::from_secs(3600);
        assert_eq!(e.kind(), &ErrorKind::RetryAfterTooLong(hour), "{e:#}");
        assert_eq!(e.report().attempts.len(), 2, "{e:#}");
        assert!(e.transport().is_none(), "{e:#}");
        let link = std::error::Error::source(&*e).unwrap();
        assert_eq!(link.to_string(), "attempt 2 at \"a\": status 503", "{e:#}");
        assert!(link.source().is_none(), "{e:#}");
    }

    async fn tls_handshake_failure_is_undelivered() {
        // An https URL pointing at a plain-HTTP provider: the handshake fails, no request.
        let a = Provider::start(Behaviour::ok());
        let b = Provider::start(Behaviour::ok());
        let https = a.url().replace("http://", "https://");
        let c = client(&[https, b.url()]);
        let resp = c.post("/").body("{}").send().await.unwrap();
        assert_eq!(resp.endpoint(), "b");
        assert_eq!(
            resp.report().attempts[0].result,
            AttemptResult::Failed(FailureClass::Undelivered)
        );
        assert_eq!((a.request_count(), b.request_count()), (0, 1));
    }

    async fn one_shot_stream_body_allows_no_second_attempt() {
        let b = Provider::start(Behaviour::ok());
        let c = client(&[testkit::refused_url(), b.url()]);
        let chunks = futures_lite::stream::iter(vec![Ok(Bytes::from_static(b"{}"))]);
        let e = call_error(c.post("/").body(Body::stream(chunks)).send().await.unwrap_err());
        assert_eq!(e.report().stop_reason, StopReason::NotReplayable);
        assert_eq!(b.request_count(), 0);
    }

    /// A body streamed from a source that fails on a certificate (a download from another
    /// server): the head and a part were sent (the stream is pending before each part),
    /// so the attempt may have executed; the error is the caller's source's, not of the
    /// attempt's connection.
    async fn a_body_whose_source_fails_on_a_certificate_may_have_executed() {
        use futures_rustls::rustls::{CertificateError, Error as TlsError};
        let a = Provider::start(Behaviour::ok());
        let c = client(&[a.url()]);
        let rejected = TlsError::InvalidCertificate(CertificateError::UnknownIssuer);
        let parts = vec![
            Ok(Bytes::from_static(b"hello ")),
            Err(std::io::Error::new(std::io::ErrorKind::InvalidData, rejected)),
        ];
        let body = Body::stream(Late(parts.into_iter(), false));
        let e = call_error(c.post("/").body(body).send().await.unwrap_err());
        let ambiguous = AttemptResult::Failed(FailureClass::Ambiguous);
        assert_eq!(e.report().attempts[0].result, ambiguous, "{e}");
        assert!(e.report().may_have_executed);
    }

    async fn a_buffered_stream_body_is_replayable() {
        let b = Provider::start(Behaviour::ok());
        let c = client(&[testkit::refused_url(), b.url()]);
        let chunks = futures_lite::stream::iter(vec![
            Ok(Bytes::from_static(b"{\"a\":")),
            Ok(Bytes::from_static(b"1}")),
        ]);
        let resp = c.post("/").body(Body::stream(chunks)).buffer_body(1024).send().await.unwrap();
        assert_eq!(resp.endpoint(), "b");
        assert_eq!(b.requests()[0].body_text(), "{\"a\":1}");
    }

    async fn a_stream_that_fails_while_buffered_is_rejected_before_any_send() {
        let a = Provider::start(Behaviour::ok());
        let c = client(&[a.url()]);
        let chunks = futures_lite::stream::iter(vec![
            Ok(Bytes::from_static(b"{\"a\":")),
            Err(std::io::Error::other("the disk went away")),
        ]);
        let sent = c.post("/").body(Body::stream(chunks)).buffer_body(1024).send().await;
        let e = call_error(sent.unwrap_err());
        assert_eq!(e.report().stop_reason, StopReason::InvalidCall);
        assert!(!e.report().may_have_executed);
        assert!(format!("{e:#}").contains("the body stream failed while buffering"), "{e:#}");
        assert_eq!(a.request_count(), 0);
    }

    async fn a_streamed_body_reaches_the_provider() {
        let a = Provider::start(Behaviour::ok());
        let c = client(&[a.url()]);
        let chunks = futures_lite::stream::iter(vec![
            Ok(Bytes::from_static(b"hello ")),
            Ok(Bytes::from_static(b"world")),
        ]);
        let resp = c.put("/up").body(Body::stream(chunks)).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(a.requests()[0].body_text(), "hello world");
    }

    async fn a_failing_replay_ends_the_call() {
        let b = Provider::start(Behaviour::ok());
        let c = client(&[testkit::refused_url(), b.url()]);
        let n = Arc::new(Mutex::new(0));
        let n2 = n.clone();
        let body = Body::from_fn(move || {
            let mut n = n2.lock().unwrap();
            *n += 1;
            if *n == 1 { Ok(Bytes::from_static(b"{}")) } else { Err(std::io::Error::other("file gone")) }
        });
        let e = call_error(c.post("/").body(body).send().await.unwrap_err());
        assert_eq!(e.report().stop_reason, StopReason::ReplayFailed);
        assert_eq!(b.request_count(), 0);
    }

    async fn invalid_header_is_rejected_locally_before_any_send() {
        let a = Provider::start(Behaviour::ok());
        let c = client(&[a.url()]);
        let e = call_error(c.get("/").header("x-bad", "line\nbreak").send().await.unwrap_err());
        assert_eq!(e.report().stop_reason, StopReason::InvalidCall);
        assert!(!e.report().may_have_executed);
        assert_eq!(a.request_count(), 0);
        // The error names the header, never its value; an invalid name is named too.
        let text = format!("{e:#}");
        assert!(text.contains("x-bad") && !text.contains("break"), "{text}");
        let e = call_error(c.get("/").header("x bad", "v").send().await.unwrap_err());
        assert!(format!("{e:#}").contains("\"x bad\""), "{e:#}");
        assert_eq!(a.request_count(), 0);
    }

    async fn invalid_request_id_is_rejected_before_any_send() {
        let a = Provider::start(Behaviour::ok());
        let c = client(&[a.url()]);
        let e = call_error(c.get("/").request_id("no").send().await.unwrap_err());
        assert!(matches!(e.kind(), ErrorKind::InvalidCall(_)));
        assert_eq!(a.request_count(), 0);
    }

    async fn a_destination_refused_by_the_rules_is_the_typed_error_in_the_chain() {
        use baton_core::DestinationError;
        let a = Provider::start(Behaviour::ok());
        // Refused when the request is built (the URL's scheme).
        let c = client(&[a.url()]);
        let e = c.get("ftp://a.example/x").send().await.unwrap_err();
        assert_eq!(destination_error(&e), Some(DestinationError::Scheme("ftp".into())), "{e}");
        // Refused when the attempt is built (a path that would leave the base path).
        let c = Client::builder(policy(&[a.url()]).url_mode(baton_core::UrlMode::Base))
            .build()
            .unwrap();
        let e = c.get("/v1/%2e%2e/admin").send().await.unwrap_err();
        assert!(matches!(destination_error(&e), Some(DestinationError::Url { .. })), "{e}");
        assert_eq!(a.request_count(), 0);
    }

    async fn endpoint_headers_never_reach_another_endpoint() {
        let a = Provider::start(Behaviour::status(503));
        let b = Provider::start(Behaviour::ok());
        let c = Client::builder(baton_core::Policy::builder()
            .endpoint(Endpoint::new("a", a.url()).header("authorization", "Bearer A"))
            .endpoint(Endpoint::new("b", b.url()).header("authorization", "Bearer B")))
            .build()
            .unwrap();
        let resp = c.get("/").header("authorization", "caller").send().await.unwrap();
        assert_eq!(resp.endpoint(), "b");
        assert_eq!(a.count_with_header("authorization", "Bearer A"), 1);
        assert_eq!(b.count_with_header("authorization", "Bearer B"), 1);
        assert_eq!(b.count_with_header("authorization", "Bearer A"), 0);
        assert_eq!(b.count_with_header("authorization", "caller"), 0);
        let host = b.requests()[0].header("host").unwrap().to_string();
        assert_eq!(host, b.url().trim_start_matches("http://"));
    }

    async fn base_url_mode_joins_the_request_path() {
        let a = Provider::start(Behaviour::ok());
        let c = Client::builder(policy(&[format!("{}/v1?tenant=7", a.url())]).url_mode(baton_core::UrlMode::Base))
            .build()
            .unwrap();
        c.get("/charges?limit=3").send().await.unwrap();
        let r = &a.requests()[0];
        assert_eq!(r.path, "/v1/charges");
        assert_eq!(r.query.as_deref(), Some("tenant=7&limit=3"));
    }

    async fn hedge_starts_the_next_endpoint_and_cancels_the_loser() {
        let a = Provider::start(Behaviour::ok().delay(Duration::from_secs(2)));
        let b = Provider::start(Behaviour::ok().body("fast"));
        let c = Client::builder(policy(&[a.url(), b.url()]).hedge(Some(Hedge::after(Duration::from_millis(100)))))
            .build()
            .unwrap();
        let t0 = Instant::now();
        let resp = c.get("/").send().await.unwrap();
        assert_eq!(resp.endpoint(), "b");
        assert!(t0.elapsed() < Duration::from_millis(1500), "{:?}", t0.elapsed());
        let r = results(resp.report());
        assert_eq!(r.len(), 2);
        assert_eq!(r[0], ("a".into(), AttemptResult::Cancelled));
        assert_eq!(resp.text().await.unwrap(), "fast");
        assert_eq!((a.request_count(), b.request_count()), (1, 1));
    }

    async fn events_reach_the_callback_in_order() {
        let b = Provider::start(Behaviour::ok());
        let seen = Arc::new(Mutex::new(Vec::<String>::new()));
        let s2 = seen.clone();
        let c = builder(&[testkit::refused_url(), b.url()])
            .on_event(move |e| {
                let name = format!("{:?}", e.kind);
                s2.lock().unwrap().push(name.split([' ', '{', '(']).next().unwrap().to_string());
            })
            .build()
            .unwrap();
        c.post("/").body("{}").send().await.unwrap();
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.first().map(String::as_str), Some("AttemptStarted"));
        assert!(seen.contains(&"Failover".to_string()), "{seen:?}");
        assert_eq!(seen.last().map(String::as_str), Some("Result"));
    }

    async fn dropping_a_call_frees_its_half_open_probe_slot() {
        let a = Provider::start(Behaviour::status(503));
        let b = Provider::start(Behaviour::ok());
        let c = Client::builder(policy(&[a.url(), b.url()]).breaker(Breaker {
                rule: BreakerRule::Consecutive { failures: 1 },
                open: Duration::from_millis(200),
                ..Breaker::default()
            }))
            .build()
            .unwrap();
        c.get("/").send().await.unwrap(); // a: 503 opens the breaker; b answers
        assert!(matches!(c.state("a"), Some(BreakerState::Open)));
        async_io::Timer::after(Duration::from_millis(300)).await;
        // Half-open: the next call probes a, which now never answers; drop that call.
        a.set_behaviour(Behaviour::black_hole());
        let probe = c.get("/").send();
        let dropped = futures_lite::future::or(
            async { Some(probe.await) },
            async { async_io::Timer::after(Duration::from_millis(300)).await; None },
        ).await;
        assert!(dropped.is_none(), "the probe call should still be in flight");
        assert!(a.wait_for_requests(2, Duration::from_secs(2)));
        // The slot is free again: the next call probes a at once (and a answers now).
        a.set_behaviour(Behaviour::ok());
        let resp = c.get("/").send().await.unwrap();
        assert_eq!(resp.endpoint(), "a");
        assert_eq!(c.state("a"), Some(BreakerState::Closed));
    }

    async fn pooled_connection_closed_by_the_server_is_replaced_without_an_attempt() {
        let (url, served) = raw_server(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", true);
        let c = client(&[url]);
        for _ in 0..3 {
            let r = c.post("/").body("{}").send().await.unwrap();
            assert_eq!(r.report().attempts.len(), 1);
            assert_eq!(r.text().await.unwrap(), "ok");
            async_io::Timer::after(Duration::from_millis(50)).await;
        }
        assert_eq!(*served.lock().unwrap(), 3);
    }

    /// A provider that restarted leaves every pooled connection dead: however many there
    /// are, the call finds a live one (its last try opens one) without losing an attempt,
    /// as hyper-util's pool never costs tokio one.
    async fn a_pool_of_connections_all_closed_by_the_server_costs_no_attempt() {
        let a = Provider::start(Behaviour::ok().body("x").delay(Duration::from_millis(30)));
        let c = client(&[a.url()]);
        let mut tasks = Vec::new();
        for _ in 0..12 {
            let c = c.clone();
            tasks.push(async_std::task::spawn(async move {
                let r = c.get("/").send().await.unwrap();
                assert_eq!(r.text().await.unwrap(), "x");
            }));
        }
        for t in tasks {
            t.await;
        }
        assert!(c.idle_connections("a") > 8, "{}", c.idle_connections("a"));
        a.set_behaviour(Behaviour::refuse());
        a.set_behaviour(Behaviour::ok().body("x"));
        async_io::Timer::after(Duration::from_millis(50)).await;
        let r = c.get("/").send().await.unwrap();
        assert_eq!(r.report().attempts.len(), 1, "{:?}", r.report().attempts);
        assert_eq!(r.text().await.unwrap(), "x");
    }

    async fn http_1_0_response_without_length_is_read_to_eof() {
        let (url, _) = raw_server(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nold school", true);
        let c = client(&[url]);
        let r = c.get("/").send().await.unwrap();
        assert_eq!(r.version(), http::Version::HTTP_10);
        assert_eq!(r.text().await.unwrap(), "old school");
        assert_eq!(c.idle_connections("a"), 0);
    }

    async fn json_bodies_both_ways() {
        #[derive(serde::Serialize)]
        struct Req { method: &'static str }
        #[derive(serde::Deserialize)]
        struct Resp { result: String }
        let a = Provider::start(
            Behaviour::ok().header("content-type", "application/json").body(r#"{"result":"0x10"}"#),
        );
        let c = client(&[a.url()]);
        let r: Resp = c.post("/").json(&Req { method: "eth_blockNumber" }).send().await.unwrap()
            .json().await.unwrap();
        assert_eq!(r.result, "0x10");
        let got = &a.requests()[0];
        assert_eq!(got.body_text(), r#"{"method":"eth_blockNumber"}"#);
        assert_eq!(got.header("content-type"), Some("application/json"));
        let e = c.get("/").send().await.unwrap().json::<Vec<u8>>().await.unwrap_err();
        assert!(matches!(e, Error::Decode(_)), "{e}");
    }

    async fn concurrent_calls_share_the_pool() {
        let a = Provider::start(Behaviour::ok().body("x").delay(Duration::from_millis(5)));
        let c = client(&[a.url()]);
        let mut tasks = Vec::new();
        for _ in 0..6 {
            let c = c.clone();
            tasks.push(async_std::task::spawn(async move {
                for _ in 0..10 {
                    let r = c.get("/").send().await.unwrap();
                    assert_eq!(r.text().await.unwrap(), "x");
                }
            }));
        }
        for t in tasks {
            t.await;
        }
        assert_eq!(a.request_count(), 60);
        assert!(a.connection_count() <= 6, "{}", a.connection_count());
    }

    async fn a_pool_without_idle_connections_opens_one_per_call() {
        let a = Provider::start(Behaviour::ok());
        let c = builder(&[a.url()]).pool_max_idle_per_endpoint(0).build().unwrap();
        for _ in 0..3 {
            c.get("/").send().await.unwrap().bytes().await.unwrap();
        }
        assert_eq!(a.connection_count(), 3);
    }

    async fn a_response_dropped_unread_closes_its_connection() {
        let a = Provider::start(Behaviour::ok().body("unread body"));
        let c = client(&[a.url()]);
        drop(c.get("/").send().await.unwrap());
        c.get("/").send().await.unwrap().bytes().await.unwrap();
        assert_eq!(a.connection_count(), 2);
        assert_eq!(c.idle_connections("a"), 1);
    }

    async fn a_client_from_a_built_policy_works() {
        let a = Provider::start(Behaviour::ok());
        let policy = baton_core::Policy::builder().endpoint(Endpoint::new("only", a.url())).build().unwrap();
        let c = Client::with_policy(policy).unwrap();
        assert_eq!(c.get("/").send().await.unwrap().endpoint(), "only");
        let c = Client::new(baton_core::Policy::builder().endpoint(Endpoint::new("x", a.url()))).unwrap();
        assert_eq!(c.get(String::from("/")).send().await.unwrap().endpoint(), "x");
    }

    async fn an_over_limit_stream_is_sent_once_with_an_event() {
        let a = Provider::start(Behaviour::ok());
        let seen = Arc::new(Mutex::new(Vec::<String>::new()));
        let s2 = seen.clone();
        let c = builder(&[a.url()])
            .buffer_bodies(4)
            .on_event(move |e| s2.lock().unwrap().push(format!("{:?}", e.kind)))
            .build()
            .unwrap();
        let chunks = futures_lite::stream::iter(vec![
            Ok(Bytes::from_static(b"0123")),
            Ok(Bytes::from_static(b"4567")),
            Ok(Bytes::from_static(b"89")),
        ]);
        let resp = c.post("/").body(Body::stream(chunks)).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(a.requests()[0].body_text(), "0123456789");
        let seen = seen.lock().unwrap();
        assert!(seen.iter().any(|e| e.starts_with("BodyNotBuffered { limit: 4")), "{seen:?}");
    }

    async fn a_retained_response_travels_with_the_error() {
        // A POST: a answers 429 (not processed), so it may fail over; b resets (ambiguous).
        // Returning a's 429 is not allowed (b may have executed, failover is not Always),
        // so the error carries it.
        let a = Provider::start(Behaviour::status(429).body("slow down"));
        let b = Provider::start(Behaviour::reset());
        let c = client(&[a.url(), b.url()]);
        let e = c.post("/").body("{}").send().await.unwrap_err();
        assert_eq!(e.kind(), Some(&ErrorKind::Failover));
        assert!(e.may_have_executed());
        assert_eq!(e.request_id(), e.report().request_id.as_str());
        assert_eq!(e.retained_response().map(|r| r.status().as_u16()), Some(429));
        let resp = e.into_retained_response().unwrap();
        assert_eq!(resp.endpoint(), "a");
        assert_eq!(resp.text().await.unwrap(), "slow down");
        assert_eq!((a.request_count(), b.request_count()), (1, 1));
    }

    async fn the_send_future_runs_on_a_spawned_task() {
        let a = Provider::start(Behaviour::ok().body("spawned"));
        let c = client(&[a.url()]);
        let task = async move { c.get("/").send().await.unwrap().text().await.unwrap() };
        // Spawned on the other runtime's global executor: nothing ties the client to one.
        let text = async_std::task::spawn(task).await;
        assert_eq!(text, "spawned");
    }
}

#[test]
fn client_settings_are_validated_at_build() {
    let e = builder(&["http://127.0.0.1:1".into()])
        .pool_idle_timeout(Duration::ZERO)
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("pool_idle_timeout"), "{e}");
    let e = builder(&["http://127.0.0.1:1".into()])
        .body_timeout(Duration::ZERO)
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("body_timeout"), "{e}");
    let e = Client::builder(baton_core::Policy::builder().endpoint(Endpoint::new("a", "ftp://x/")))
        .build()
        .unwrap_err();
    assert!(matches!(e, baton_async_std::BuildError::Config(_)), "{e}");
}

#[test]
fn errors_and_responses_can_cross_threads() {
    fn send_sync<T: Send + Sync + 'static>() {}
    send_sync::<Error>();
    send_sync::<baton_async_std::Response>();
    send_sync::<Client>();
    fn boxed(e: Error) -> Box<dyn std::error::Error + Send + Sync> {
        Box::new(e)
    }
    let _ = boxed;
}

#[test]
fn send_futures_are_send() {
    fn assert_send<T: Send>(_: &T) {}
    let c = client(&["http://127.0.0.1:1".to_string()]);
    let fut = c.get("/").send();
    assert_send(&fut);
}

/// A stream of `I`'s items, pending once before each.
struct Late<I>(I, bool);

impl<I: Iterator + Unpin> futures_lite::Stream for Late<I> {
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
