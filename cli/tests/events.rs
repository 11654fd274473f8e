//! Black-box tests of `baton events`: the built binary against event-stream providers on
//! 127.0.0.1 (testkit::sse), on every runtime.

use std::process::{Command, Output};

use serde_json::Value;
use testkit::sse::{Conn, EventServer, Ids};
use testkit::{Behaviour, Provider};

const BATON: &str = env!("CARGO_BIN_EXE_baton");

fn baton(args: &[&str]) -> Output {
    Command::new(BATON).args(args).output().expect("run baton")
}

fn json_lines(text: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(text)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn ep(id: &str, s: &str) -> String {
    format!("{id}={s}/")
}

#[test]
fn events_resume_across_providers_on_every_runtime() {
    for runtime in ["tokio", "blocking", "async-std"] {
        let a = EventServer::builder("a", 8)
            .ids(Ids::Shared)
            .then(Conn::MidEvent(3))
            .then(Conn::BlackHole(2))
            .then(Conn::Busy(3600))
            .start();
        let b = EventServer::builder("b", 8).ids(Ids::Shared).start();
        let (ea, eb) = (ep("a", &a.url()), ep("b", &b.url()));
        let out = baton(&[
            "events",
            "-e",
            &ea,
            "-e",
            &eb,
            "--runtime",
            runtime,
            "--shared-event-ids",
            "--idle-timeout",
            "300ms",
            "--events",
            "--timeout",
            "1",
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{runtime}: {stderr}");
        let events = json_lines(&out.stdout);
        let data: Vec<&str> = events.iter().map(|e| e["data"].as_str().unwrap()).collect();
        let want: Vec<String> = (0..8).map(|p| format!("event {p}")).collect();
        assert_eq!(data, want, "{runtime}: every event once, in order");
        assert_eq!(events[0]["endpoint"], "a");
        assert_eq!(events[7]["endpoint"], "b");
        assert_eq!(events[2]["id"], "2");
        assert_eq!(events[2]["event"], "message");
        let notes = json_lines(&out.stderr);
        let kinds: Vec<&str> = notes.iter().filter_map(|n| n["event"].as_str()).collect();
        assert!(kinds.contains(&"stream_opened"), "{runtime}: {kinds:?}");
        // a's 503 with an hour's Retry-After: the connection's call failed over to b,
        // carrying the shared id.
        let on_b = notes
            .iter()
            .find(|n| n["event"] == "stream_opened" && n["endpoint"] == "b")
            .unwrap_or_else(|| panic!("{runtime}: never opened on b: {stderr}"));
        assert_eq!(on_b["last_event_id"], "4");
        assert!(notes
            .iter()
            .any(|n| n["event"] == "stream_reconnecting" && n["reason"] == "idle"));
        // b resumed after the last event a delivered.
        assert_eq!(b.seen()[0].last_event_id.as_deref(), Some("4"), "{runtime}");
    }
}

#[test]
fn max_events_stops_with_exit_0() {
    let a = EventServer::builder("a", 50).start();
    let out = baton(&["events", "-e", &ep("a", &a.url()), "--max-events", "3"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(json_lines(&out.stdout).len(), 3);
}

#[test]
fn without_shared_ids_the_backup_restarts_and_says_so() {
    let a = EventServer::builder("a", 4)
        .ids(Ids::Own)
        .then(Conn::Events(2))
        .then(Conn::Busy(3600))
        .start();
    let b = EventServer::builder("b", 4).ids(Ids::Own).start();
    let out = baton(&[
        "events",
        "-e",
        &ep("a", &a.url()),
        "-e",
        &ep("b", &b.url()),
        "--events",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let data: Vec<String> = json_lines(&out.stdout)
        .iter()
        .map(|e| e["data"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        data,
        ["event 0", "event 1", "event 0", "event 1", "event 2", "event 3"]
    );
    let notes = json_lines(&out.stderr);
    assert!(notes
        .iter()
        .any(|n| n["event"] == "stream_restarted" && n["endpoint"] == "b"));
    assert_eq!(b.seen()[0].last_event_id, None, "a's id never reaches b");
}

#[test]
fn a_fatal_answer_exits_9_and_an_interrupted_post_exits_10() {
    let html = Provider::start(Behaviour::ok().body("<p>hi</p>"));
    let out = baton(&["events", "-e", &ep("a", &html.url())]);
    assert_eq!(out.status.code(), Some(9));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not text/event-stream"));

    let job = EventServer::builder("a", 10)
        .ids(Ids::None)
        .then(Conn::MidEvent(2))
        .start();
    let out = baton(&[
        "events",
        "-e",
        &ep("a", &job.url()),
        "-X",
        "POST",
        "-d",
        "{}",
    ]);
    assert_eq!(
        out.status.code(),
        Some(10),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(json_lines(&out.stdout).len(), 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("after 2 event(s)"));
    assert_eq!(job.seen().len(), 1, "the POST was sent once");
}

#[test]
fn bad_stream_settings_exit_2() {
    let out = baton(&[
        "events",
        "-e",
        "a=http://127.0.0.1:1/",
        "--max-event-size",
        "0",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("max_event_size"));
}

#[test]
fn a_stream_that_gives_up_names_why_its_last_connection_failed_on_every_runtime() {
    let refused = testkit::refused_url();
    for runtime in ["tokio", "blocking", "async-std"] {
        let out = baton(&[
            "events",
            "-e",
            &ep("a", &refused),
            "--runtime",
            runtime,
            "--max-reconnects",
            "1",
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{runtime}: {stderr}");
        let line = stderr.lines().last().unwrap_or_default();
        assert!(
            line.starts_with("baton: gave up after 1 reconnection(s)"),
            "{runtime}: {stderr}"
        );
        // The rule's words, then the last call's error, each said once.
        assert!(
            line.to_lowercase().contains("refused"),
            "{runtime}: {stderr}"
        );
        assert_eq!(line.matches("gave up").count(), 1, "{runtime}: {stderr}");
    }
    // A stream whose last connection was answered has no call error to name.
    let busy = Provider::start(Behaviour::status(503));
    let out = baton(&[
        "events",
        "-e",
        &ep("a", &busy.url()),
        "--max-reconnects",
        "1",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    let line = stderr.lines().last().unwrap_or_default();
    assert!(line.contains("answered 503"), "{stderr}");
    assert!(line.ends_with("0 event(s) delivered"), "{stderr}");
}
