//! Every testkit fault at the primary, for a safe method (GET) and an unsafe one (POST
//! without an idempotency key), with a healthy backup: what the call returns and where the
//! request was executed on the server side.

mod common;

use std::time::Duration;

use baton_core::{ErrorKind, StopReason};
use baton_tokio::{Error, Response};
use http::{Method, StatusCode};
use testkit::{Behaviour, Provider};

/// Where the primary's fault comes from.
enum Primary {
    /// A provider with this behaviour.
    Behaves(Behaviour),
    /// A refused port.
    Refused,
    /// A name that never resolves.
    Unresolvable,
}

struct Run {
    result: Result<Response, Error>,
    primary: Option<Provider>,
    backup: Provider,
}

async fn run(primary: Primary, method: Method) -> Run {
    let backup = Provider::start(Behaviour::status(200).body("from backup"));
    let (primary, url) = match primary {
        Primary::Behaves(b) => {
            let p = Provider::start(b);
            let url = p.url();
            (Some(p), url)
        }
        Primary::Refused => (None, testkit::refused_url()),
        Primary::Unresolvable => (None, testkit::unresolvable_url()),
    };
    let (client, _log) = common::client(common::policy(&[
        ("primary", &url),
        ("backup", &backup.url()),
    ]));
    let result = client
        .request(method, "/")
        .body("payload")
        .attempt_timeout(Duration::from_millis(600))
        .send()
        .await;
    Run {
        result,
        primary,
        backup,
    }
}

fn primary_count(p: &Option<Provider>) -> usize {
    p.as_ref().map_or(0, |p| p.request_count())
}

async fn expect_backup_answer(r: Run, primary_executions: usize) {
    let resp = r.result.expect("the backup answers");
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.endpoint(), "backup");
    assert_eq!(resp.report().attempts.len(), 2);
    assert_eq!(resp.text().await.unwrap(), "from backup");
    assert_eq!(primary_count(&r.primary), primary_executions);
    assert_eq!(r.backup.request_count(), 1);
}

fn expect_ambiguous_stop(r: Run) {
    let err = r
        .result
        .expect_err("an unkeyed POST never moves after an ambiguous failure");
    assert_eq!(err.kind(), Some(&ErrorKind::Failover));
    assert_eq!(err.report().stop_reason, StopReason::NotPermitted);
    assert!(err.may_have_executed());
    assert_eq!(err.report().attempts.len(), 1);
    assert_eq!(primary_count(&r.primary), 1);
    assert_eq!(
        r.backup.request_count(),
        0,
        "never runs on a second provider"
    );
}

async fn expect_body_error(r: Run) {
    let resp = r.result.expect("the head arrived: the call returns it");
    assert_eq!(resp.endpoint(), "primary");
    let err = resp.bytes().await.expect_err("the body cannot complete");
    match &err {
        Error::Body { endpoint, .. } => assert_eq!(&**endpoint, "primary"),
        other => panic!("expected a body error, got {other:?}"),
    }
    assert!(err.to_string().contains("primary"));
    assert_eq!(primary_count(&r.primary), 1);
    assert_eq!(r.backup.request_count(), 0);
}

// ----- refused: undelivered, always fails over -----

#[tokio::test]
async fn refused_primary_get_fails_over() {
    expect_backup_answer(run(Primary::Refused, Method::GET).await, 0).await;
}

#[tokio::test]
async fn refused_primary_post_fails_over() {
    expect_backup_answer(run(Primary::Refused, Method::POST).await, 0).await;
}

#[tokio::test]
async fn refusing_provider_post_fails_over() {
    expect_backup_answer(
        run(Primary::Behaves(Behaviour::refuse()), Method::POST).await,
        0,
    )
    .await;
}

// ----- DNS failure: undelivered -----

#[tokio::test]
async fn unresolvable_primary_get_fails_over() {
    expect_backup_answer(run(Primary::Unresolvable, Method::GET).await, 0).await;
}

#[tokio::test]
async fn unresolvable_primary_post_fails_over() {
    expect_backup_answer(run(Primary::Unresolvable, Method::POST).await, 0).await;
}

// ----- status -----

#[tokio::test]
async fn status_503_get_fails_over() {
    let b = Behaviour::status(503);
    expect_backup_answer(run(Primary::Behaves(b), Method::GET).await, 1).await;
}

#[tokio::test]
async fn status_503_unkeyed_post_returns_the_503_without_moving() {
    let r = run(Primary::Behaves(Behaviour::status(503)), Method::POST).await;
    let resp = r.result.as_ref().expect("the retained 503 is returned");
    assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(resp.endpoint(), "primary");
    assert_eq!(primary_count(&r.primary), 1);
    assert_eq!(r.backup.request_count(), 0);
}

#[tokio::test]
async fn status_500_is_an_answer_for_get_and_post() {
    for method in [Method::GET, Method::POST] {
        let r = run(Primary::Behaves(Behaviour::status(500)), method).await;
        let resp = r.result.as_ref().unwrap();
        assert_eq!(resp.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(resp.report().stop_reason, StopReason::Answered);
        assert_eq!(primary_count(&r.primary), 1);
        assert_eq!(r.backup.request_count(), 0);
    }
}

#[tokio::test]
async fn status_429_not_processed_lets_a_post_fail_over() {
    for method in [Method::GET, Method::POST] {
        let b = Behaviour::status(429);
        expect_backup_answer(run(Primary::Behaves(b), method).await, 1).await;
    }
}

// ----- delay past the attempt timeout: ambiguous -----

#[tokio::test]
async fn delay_past_timeout_get_fails_over() {
    let b = Behaviour::ok().delay(Duration::from_secs(3));
    expect_backup_answer(run(Primary::Behaves(b), Method::GET).await, 1).await;
}

#[tokio::test]
async fn delay_past_timeout_post_stops() {
    let b = Behaviour::ok().delay(Duration::from_secs(3));
    expect_ambiguous_stop(run(Primary::Behaves(b), Method::POST).await);
}

#[tokio::test]
async fn short_delay_is_just_a_slow_answer() {
    for method in [Method::GET, Method::POST] {
        let b = Behaviour::ok().delay(Duration::from_millis(100));
        let r = run(Primary::Behaves(b), method).await;
        assert_eq!(r.result.as_ref().unwrap().endpoint(), "primary");
        assert_eq!(r.backup.request_count(), 0);
    }
}

// ----- head then stall / half body then close: body errors naming the endpoint -----

#[tokio::test]
async fn stall_after_headers_is_a_body_error_for_get_and_post() {
    for method in [Method::GET, Method::POST] {
        let b = Behaviour::status(200)
            .body("0123456789")
            .stall_after_headers();
        expect_body_error(run(Primary::Behaves(b), method).await).await;
    }
}

#[tokio::test]
async fn half_body_then_close_is_a_body_error_for_get_and_post() {
    for method in [Method::GET, Method::POST] {
        let b = Behaviour::status(200)
            .body("0123456789")
            .close_after_half_body();
        expect_body_error(run(Primary::Behaves(b), method).await).await;
    }
}

/// A body framed by the connection's close, cut by a reset: a body error, as on blocking.
#[tokio::test]
async fn a_reset_cutting_an_unframed_body_is_a_body_error() {
    let b = Behaviour::status(200)
        .body("0123456789")
        .reset_after_half_unframed_body();
    expect_body_error(run(Primary::Behaves(b), Method::GET).await).await;
}

#[tokio::test]
async fn a_body_read_chunk_by_chunk_ends_in_a_body_error_naming_the_endpoint() {
    let b = Behaviour::status(200)
        .body("0123456789")
        .close_after_half_body();
    let r = run(Primary::Behaves(b), Method::GET).await;
    let mut resp = r.result.expect("the head arrived: the call returns it");
    let request_id = resp.request_id().to_owned();
    let mut read = Vec::new();
    let err = loop {
        match resp.chunk().await {
            Ok(Some(c)) => read.extend_from_slice(&c),
            Ok(None) => panic!("a short body passed off as complete: {read:?}"),
            Err(e) => break e,
        }
    };
    assert!(read.len() < 10, "{read:?}");
    match &err {
        Error::Body {
            endpoint, report, ..
        } => {
            assert_eq!(&**endpoint, "primary");
            assert_eq!(report.request_id.as_str(), request_id);
        }
        other => panic!("expected a body error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_healthy_body_read_chunk_by_chunk_is_whole() {
    let b = Behaviour::status(200).body("from the primary");
    let r = run(Primary::Behaves(b), Method::GET).await;
    let mut resp = r.result.expect("the primary answers");
    let mut read = Vec::new();
    while let Some(c) = resp.chunk().await.expect("no body error") {
        read.extend_from_slice(&c);
    }
    assert_eq!(read, b"from the primary");
}

// ----- close / reset / black hole: ambiguous -----

#[tokio::test]
async fn close_get_fails_over() {
    expect_backup_answer(
        run(Primary::Behaves(Behaviour::close()), Method::GET).await,
        1,
    )
    .await;
}

#[tokio::test]
async fn close_post_stops() {
    expect_ambiguous_stop(run(Primary::Behaves(Behaviour::close()), Method::POST).await);
}

#[tokio::test]
async fn reset_get_fails_over() {
    expect_backup_answer(
        run(Primary::Behaves(Behaviour::reset()), Method::GET).await,
        1,
    )
    .await;
}

#[tokio::test]
async fn reset_post_stops() {
    expect_ambiguous_stop(run(Primary::Behaves(Behaviour::reset()), Method::POST).await);
}

#[tokio::test]
async fn black_hole_get_fails_over() {
    let b = Behaviour::black_hole();
    expect_backup_answer(run(Primary::Behaves(b), Method::GET).await, 1).await;
}

#[tokio::test]
async fn black_hole_post_stops() {
    expect_ambiguous_stop(run(Primary::Behaves(Behaviour::black_hole()), Method::POST).await);
}
