//! Black-box tests: the built `baton` binary against `testkit` providers on 127.0.0.1.
//!
//! Timeouts are short (hundreds of milliseconds) so the suite stays fast; nothing here
//! needs the network.

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use testkit::{Behaviour, Provider};

const BATON: &str = env!("CARGO_BIN_EXE_baton");

fn run(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(BATON)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run baton");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("exited")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn ep(id: &str, url: &str) -> String {
    format!("{id}={url}/")
}

fn lines(o: &Output) -> Vec<Value> {
    stdout(o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn ok(body: &str) -> Behaviour {
    Behaviour::ok().body(body.to_string())
}

// ------------------------------------------------------------------------- request

#[test]
fn request_prints_only_the_body_and_exits_0_for_any_status() {
    let p = Provider::start(Behaviour::status(404).body("no such thing"));
    let o = run(&["request", "--base", "-e", &ep("a", &p.url()), "/x"], "");
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o), "no such thing");
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));
    assert_eq!(p.requests()[0].path, "/x");
}

#[test]
fn a_path_that_would_not_be_sent_or_a_lower_case_method_is_refused_before_sending() {
    let p = Provider::start(ok("x"));
    // Complete endpoint URLs (the default) are the whole destination: the PATH would be
    // dropped, and the call go to another resource than the one named.
    let o = run(
        &[
            "request",
            "-e",
            &ep("a", &p.url()),
            "-d",
            "{}",
            "/v1/refunds",
        ],
        "",
    );
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("\"/v1/refunds\" is not sent"),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("--base"), "{}", stderr(&o));
    let o = run(
        &["batch", "-e", &ep("a", &p.url())],
        "{\"id\": 1, \"path\": \"/v1/refunds\"}\n",
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(
        lines(&o)[0]["error"]["kind"],
        "invalid_call",
        "{}",
        stdout(&o)
    );
    // `get` would go out as an unknown method (no longer a read free to fail over).
    let o = run(&["request", "-e", &ep("a", &p.url()), "-X", "get"], "");
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("write GET"), "{}", stderr(&o));
    // A header name the client cannot send is named (its value never is: it may be a secret).
    let o = run(
        &["request", "-e", &ep("a", &p.url()), "-H", "X Bad: secret-1"],
        "",
    );
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("\"X Bad\""), "{}", stderr(&o));
    let o = run(
        &[
            "request",
            "-e",
            &ep("a", &p.url()),
            "-H",
            "X-Token: secret-1\u{7}",
        ],
        "",
    );
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("header X-Token"), "{}", stderr(&o));
    assert!(!stderr(&o).contains("secret-1"), "{}", stderr(&o));
    // A header without its colon, and a batch line whose `headers` is a string: the value
    // is never quoted either.
    let o = run(
        &[
            "request",
            "-e",
            &ep("a", &p.url()),
            "-H",
            "Authorization Bearer secret-2",
        ],
        "",
    );
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("\"Authorization\""), "{}", stderr(&o));
    assert!(!stderr(&o).contains("secret-2"), "{}", stderr(&o));
    for bad in [
        "X-Api-Key=secret-4",
        "apikey;secret-4",
        "Authorization\tsecret-4",
    ] {
        let o = run(&["request", "-e", &ep("a", &p.url()), "-H", bad], "");
        assert_eq!(code(&o), 2, "{}", stderr(&o));
        assert!(!stderr(&o).contains("secret-4"), "{}", stderr(&o));
    }
    let o = run(
        &["batch", "-e", &ep("a", &p.url())],
        "{\"headers\": \"Bearer secret-3\"}\n",
    );
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("`headers`"), "{}", stderr(&o));
    assert!(!stderr(&o).contains("secret-3"), "{}", stderr(&o));
    assert_eq!(p.request_count(), 0, "a refused call was sent");
}

#[test]
fn request_fails_over_from_a_refused_endpoint() {
    let b = Provider::start(ok("from b"));
    let refused = testkit::refused_url();
    let o = run(
        &[
            "request",
            "-X",
            "POST",
            "-d",
            "{}",
            "-e",
            &ep("a", &refused),
            "-e",
            &ep("b", &b.url()),
        ],
        "",
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o), "from b");
    assert_eq!(b.request_count(), 1);
}

#[test]
fn request_include_prints_status_and_endpoint_to_stderr() {
    let p = Provider::start(Behaviour::status(201).header("x-k", "v").body("made"));
    let o = run(&["request", "-i", "-e", &ep("a", &p.url())], "");
    assert_eq!(code(&o), 0);
    assert_eq!(stdout(&o), "made");
    let err = stderr(&o);
    assert!(err.contains("HTTP 201") && err.contains("\"a\""), "{err}");
    assert!(err.contains("x-k: v"), "{err}");
}

#[test]
fn request_sends_method_headers_body_and_keys() {
    let p = Provider::start(ok("done"));
    let o = run(
        &[
            "request",
            "--base",
            "-e",
            &ep("a", &p.url()),
            "-X",
            "PUT",
            "-H",
            "X-Team: payments",
            "-d",
            "amount=1",
            "--idempotency-key",
            "key-123",
            "--request-id",
            "req-abcdefgh",
            "/v1/things?q=1",
        ],
        "",
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let reqs = p.requests();
    assert_eq!(reqs.len(), 1);
    let r = &reqs[0];
    assert_eq!(r.method, "PUT");
    assert_eq!(r.path, "/v1/things");
    assert_eq!(r.header("x-team"), Some("payments"));
    assert_eq!(r.header("idempotency-key"), Some("key-123"));
    assert_eq!(r.header("x-request-id"), Some("req-abcdefgh"));
    assert_eq!(r.body_text(), "amount=1");
}

#[test]
fn request_exit_3_when_every_attempt_fails() {
    let o = run(
        &[
            "request",
            "-e",
            &ep("a", &testkit::refused_url()),
            "-e",
            &ep("b", &testkit::refused_url()),
        ],
        "",
    );
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    assert!(stdout(&o).is_empty());
    let err = stderr(&o);
    assert!(
        err.contains("all attempts failed") && err.contains("undelivered"),
        "{err}"
    );
}

#[test]
fn request_exit_3_when_an_ambiguous_post_may_not_move() {
    let a = Provider::start(Behaviour::reset());
    let b = Provider::start(ok("b"));
    let o = run(
        &[
            "request",
            "-d",
            "{}",
            "-e",
            &ep("a", &a.url()),
            "-e",
            &ep("b", &b.url()),
        ],
        "",
    );
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    assert_eq!(a.request_count(), 1);
    assert_eq!(
        b.request_count(),
        0,
        "an ambiguous POST was repeated elsewhere"
    );
}

#[test]
fn request_exit_4_when_no_endpoint_is_left_to_try() {
    let o = run(
        &[
            "request",
            "-e",
            &ep("a", &testkit::refused_url()),
            "-e",
            &ep("b", &testkit::refused_url()),
            "--cooldown-threshold",
            "1",
            "--cooldown-mode",
            "skip",
            "--max-attempts",
            "4",
        ],
        "",
    );
    assert_eq!(code(&o), 4, "{}", stderr(&o));
    assert!(stderr(&o).contains("no_usable_endpoint"), "{}", stderr(&o));
}

#[test]
fn request_exit_5_on_deadline() {
    let p = Provider::start(ok("late").delay(Duration::from_secs(3)));
    for runtime in ["tokio", "blocking", "async-std"] {
        let started = Instant::now();
        let o = run(
            &[
                "request",
                "--runtime",
                runtime,
                "-e",
                &ep("a", &p.url()),
                "--deadline",
                "300ms",
            ],
            "",
        );
        assert_eq!(code(&o), 5, "{runtime}: {}", stderr(&o));
        assert!(stdout(&o).is_empty());
        assert!(started.elapsed() < Duration::from_secs(3), "{runtime}");
    }
}

#[test]
fn request_exit_6_when_retry_after_is_too_long() {
    let p = Provider::start(Behaviour::status(503).header("Retry-After", "120"));
    for runtime in ["tokio", "blocking", "async-std"] {
        let o = run(
            &["request", "--runtime", runtime, "-e", &ep("a", &p.url())],
            "",
        );
        assert_eq!(code(&o), 6, "{runtime}: {}", stderr(&o));
    }
    assert_eq!(p.request_count(), 3);
}

/// The body streams to stdout as it arrives: when it breaks, what was received has been
/// written (never more than the provider sent, never the whole), and the exit status 7
/// says the body is incomplete (like curl's 18), on every runtime.
#[test]
fn request_exit_7_when_the_body_breaks_after_part_of_it_was_written() {
    let full = "0123456789abcdef";
    let p = Provider::start(ok(full).close_after_half_body());
    for runtime in ["tokio", "blocking", "async-std"] {
        let o = run(
            &[
                "request",
                "--runtime",
                runtime,
                "-e",
                &ep("a", &p.url()),
                "--timeout",
                "2",
            ],
            "",
        );
        assert_eq!(code(&o), 7, "{runtime}: {}", stderr(&o));
        let out = stdout(&o);
        assert!(
            full.starts_with(&out) && out.len() < full.len(),
            "{runtime}: written {out:?}"
        );
    }
}

#[test]
fn invalid_request_id_exits_2_before_anything_is_sent() {
    let p = Provider::start(ok("x"));
    for runtime in ["tokio", "blocking", "async-std"] {
        let o = run(
            &[
                "request",
                "--runtime",
                runtime,
                "-e",
                &ep("a", &p.url()),
                "--request-id",
                "bad id!",
            ],
            "",
        );
        assert_eq!(code(&o), 2, "{runtime}: {}", stderr(&o));
        assert!(stderr(&o).contains("invalid"), "{runtime}: {}", stderr(&o));
    }
    assert_eq!(p.request_count(), 0, "an invalid call reached the provider");
}

#[test]
fn usage_and_configuration_errors_exit_2() {
    let p = Provider::start(ok("x"));
    let url = ep("a", &p.url());
    for args in [
        vec!["request"],                                        // no endpoints
        vec!["request", "-e", "nourl"],                         // bad -e
        vec!["request", "-e", "a=ftp://x/"],                    // bad URL
        vec!["request", "-e", &url, "--timeout", "0"],          // zero timeout
        vec!["request", "-e", &url, "--trigger-status", "200"], // cannot trigger
        vec!["request", "-e", &url, "--prefer", "zz"],          // unknown endpoint
        vec!["request", "-e", &url, "-H", "bad header: v"],     // invalid header
        vec!["request", "-e", &url, "-X", "GE T"],              // invalid method
        vec!["request", "-e", &url, "--config", "/nonexistent.toml"],
        vec![
            "request",
            "-e",
            &url,
            "--runtime",
            "blocking",
            "--hedge-after",
            "50",
        ],
        vec!["request", "--no-such-flag"],
    ] {
        let o = run(&args, "");
        assert_eq!(code(&o), 2, "{args:?}: {}", stderr(&o));
        assert!(stdout(&o).is_empty(), "{args:?}");
    }
    assert_eq!(p.request_count(), 0);
}

#[test]
fn hedge_after_starts_the_next_endpoint_for_a_slow_read() {
    let a = Provider::start(ok("slow a").delay(Duration::from_millis(1500)));
    let b = Provider::start(ok("b"));
    for runtime in ["tokio", "async-std"] {
        let started = Instant::now();
        let o = run(
            &[
                "request",
                "--runtime",
                runtime,
                "--hedge-after",
                "100",
                "-e",
                &ep("a", &a.url()),
                "-e",
                &ep("b", &b.url()),
            ],
            "",
        );
        assert_eq!(code(&o), 0, "{runtime}: {}", stderr(&o));
        assert_eq!(stdout(&o), "b", "{runtime}");
        assert!(started.elapsed() < Duration::from_millis(1400), "{runtime}");
    }
}

#[test]
fn events_are_json_lines_on_stderr() {
    let p = Provider::start(ok("x"));
    let o = run(&["request", "--events", "-e", &ep("a", &p.url())], "");
    assert_eq!(code(&o), 0);
    assert_eq!(stdout(&o), "x");
    let evs: Vec<Value> = stderr(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds: Vec<&str> = evs.iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["attempt_started", "attempt_finished", "result"]);
    assert_eq!(evs[2]["status"], 200);
    assert_eq!(evs[2]["stop_reason"], "answered");
    assert!(evs.iter().all(|e| e["request_id"] == evs[0]["request_id"]));
}

#[test]
fn config_file_supplies_endpoints_and_policy_and_flags_override_it() {
    let a = Provider::start(Behaviour::status(500));
    let b = Provider::start(ok("from b"));
    let path = std::env::temp_dir().join(format!("baton-cli-test-{}.toml", std::process::id()));
    std::fs::write(
        &path,
        format!(
            "[[endpoint]]\nid = \"a\"\nurl = \"{}/\"\n[endpoint.headers]\nauthorization = \"Bearer t\"\n\n\
             [[endpoint]]\nid = \"b\"\nurl = \"{}/\"\n\n[policy]\nattempt_timeout = \"2s\"\n",
            a.url(),
            b.url()
        ),
    )
    .unwrap();
    let cfg = path.to_str().unwrap();
    // 500 is not a trigger by default: the answer is a's 500.
    let o = run(&["request", "--config", cfg], "");
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(a.requests()[0].header("authorization"), Some("Bearer t"));
    assert_eq!(b.request_count(), 0);
    // --trigger-status 500 extends the file's policy: the GET moves on to b.
    let o = run(&["request", "--config", cfg, "--trigger-status", "500"], "");
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o), "from b");
    std::fs::remove_file(&path).ok();
}

// --------------------------------------------------------------------------- batch

#[test]
fn batch_writes_one_line_per_call_in_the_documented_format() {
    let a = Provider::start(ok("hello"));
    let refused = testkit::refused_url();
    let input = concat!(
        r#"{"id": 1, "path": "/a"}"#,
        "\n\n",
        r#"{"id": "two", "method": "POST", "body": "{}", "headers": {"x-y": "z"}, "idempotency_key": "k-1", "request_id": "batch-req-0002"}"#,
        "\n",
        r#"{"id": 3, "prefer": "nope"}"#,
        "\n",
        r#"{"id": 4, "request_id": "bad"}"#,
        "\n",
    );
    let o = run(
        &[
            "batch",
            "--base",
            "-e",
            &ep("r", &refused),
            "-e",
            &ep("a", &a.url()),
        ],
        input,
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = lines(&o);
    assert_eq!(out.len(), 4, "{}", stdout(&o));

    let l = &out[0];
    assert_eq!(l["id"], 1);
    assert_eq!(l["status"], 200);
    assert_eq!(l["endpoint"], "a");
    assert_eq!(l["body"], "hello");
    assert_eq!(l["error"], Value::Null);
    assert_eq!(l["stop_reason"], "answered");
    assert_eq!(l["may_have_executed"], true);
    assert!(l["elapsed_ms"].as_f64().unwrap() >= 0.0);
    let att = l["attempts"].as_array().unwrap();
    assert_eq!(att.len(), 2);
    assert_eq!(att[0]["endpoint"], "r");
    assert_eq!(att[0]["outcome"], "undelivered");
    assert_eq!(att[0]["status"], Value::Null);
    assert_eq!(att[1]["outcome"], "response");
    assert_eq!(att[1]["status"], 200);
    assert!(att[1]["elapsed_ms"].is_number());

    let l = &out[1];
    assert_eq!(l["id"], "two");
    assert_eq!(l["status"], 200);
    assert_eq!(l["request_id"], "batch-req-0002");
    let req = &a.requests()[1];
    assert_eq!(req.method, "POST");
    assert_eq!(req.header("x-y"), Some("z"));
    assert_eq!(req.header("idempotency-key"), Some("k-1"));

    let l = &out[2];
    assert_eq!(l["status"], Value::Null);
    assert_eq!(l["endpoint"], Value::Null);
    assert_eq!(l["error"]["kind"], "unknown_endpoint");
    assert_eq!(l["body"], Value::Null);
    assert_eq!(l["may_have_executed"], false);

    let l = &out[3];
    assert_eq!(l["error"]["kind"], "invalid_call");
    assert_eq!(l["attempts"], serde_json::json!([]));
    assert_eq!(a.request_count(), 2, "invalid calls reached the provider");
}

#[test]
fn batch_malformed_line_exits_2_with_its_number_and_keeps_earlier_lines() {
    let a = Provider::start(ok("x"));
    let input = "{\"id\": 1}\n{\"id\": 2}\n{\"id\": 3, \"methd\": \"GET\"}\n{\"id\": 4}\n";
    let o = run(&["batch", "-e", &ep("a", &a.url())], input);
    assert_eq!(code(&o), 2);
    let out = lines(&o);
    assert_eq!(out.len(), 2, "{}", stdout(&o));
    assert_eq!(out[0]["id"], 1);
    assert_eq!(out[1]["id"], 2);
    assert!(stderr(&o).contains("line 3"), "{}", stderr(&o));
    assert_eq!(a.request_count(), 2, "a line after the malformed one ran");

    let o = run(
        &["batch", "-e", &ep("a", &a.url())],
        "{\"id\": 1}\nnot json\n",
    );
    assert_eq!(code(&o), 2);
    assert_eq!(lines(&o).len(), 1);
    assert!(stderr(&o).contains("line 2"), "{}", stderr(&o));
}

#[test]
fn batch_stops_running_lines_when_its_output_fails_and_exits_23() {
    let a = Provider::start(ok("x"));
    let input: String = (1..=20)
        .map(|i| format!("{{\"id\": {i}, \"method\": \"POST\"}}\n"))
        .collect();
    // Every write to /dev/full fails (no space left on device).
    let mut child = Command::new(BATON)
        .args(["batch", "-e", &ep("a", &a.url())])
        .stdin(Stdio::piped())
        .stdout(std::fs::File::create("/dev/full").expect("/dev/full"))
        .stderr(Stdio::piped())
        .spawn()
        .expect("run baton");
    // The input stays open, as a driver that writes more later keeps it: baton must not
    // wait for it once its output failed. (Lines it no longer reads may be refused.)
    let mut stdin = child.stdin.take().unwrap();
    let _ = stdin.write_all(input.as_bytes());
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "waited for input after its output failed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(stdin);
    let o = child.wait_with_output().unwrap();
    assert_eq!(code(&o), 23, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("writing the output failed"),
        "{}",
        stderr(&o)
    );
    // The first call ran and its line could not be written; at most one more had been
    // taken by then. Before, every line ran and the batch exited 0 with no output.
    let ran = a.request_count();
    assert!(
        (1..=2).contains(&ran),
        "{ran} calls ran after the output failed"
    );
}

#[test]
fn batch_cooldown_carries_from_line_to_line() {
    let b = Provider::start(ok("b"));
    let refused = testkit::refused_url();
    let input = "{\"id\": 1}\n{\"id\": 2}\n{\"id\": 3}\n";
    let o = run(
        &[
            "batch",
            "-e",
            &ep("a", &refused),
            "-e",
            &ep("b", &b.url()),
            "--cooldown-threshold",
            "1",
            "--cooldown",
            "60",
        ],
        input,
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = lines(&o);
    let endpoints = |l: &Value| -> Vec<String> {
        l["attempts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["endpoint"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(endpoints(&out[0]), ["a", "b"]);
    // a's breaker opened on line 1: lines 2 and 3 go straight to b.
    assert_eq!(endpoints(&out[1]), ["b"]);
    assert_eq!(endpoints(&out[2]), ["b"]);
    assert!(out.iter().all(|l| l["status"] == 200));

    // With skip mode and every endpoint in cooldown, a later line has no usable endpoint.
    let o = run(
        &[
            "batch",
            "-e",
            &ep("a", &refused),
            "--cooldown-threshold",
            "1",
            "--cooldown",
            "60",
            "--cooldown-mode",
            "skip",
        ],
        "{\"id\": 1}\n{\"id\": 2}\n",
    );
    let out = lines(&o);
    assert_eq!(out[0]["error"]["kind"], "failover");
    assert_eq!(out[1]["error"]["kind"], "no_usable_endpoint");
    assert_eq!(out[1]["attempts"], serde_json::json!([]));
}

#[test]
fn batch_concurrency_overlaps_calls_and_keeps_input_order() {
    // Sequentially this takes 800 + 3 x 600 ms; concurrently about 800 ms, and lines 2-4
    // finish before line 1 but are printed after it.
    let slow = Provider::start(ok("slow").delay(Duration::from_millis(800)));
    let fast = Provider::start(ok("fast").delay(Duration::from_millis(600)));
    let mut input = String::from("{\"id\": 1, \"prefer\": \"s\"}\n");
    for i in 2..=4 {
        input.push_str(&format!("{{\"id\": {i}, \"prefer\": \"f\"}}\n"));
    }
    let started = Instant::now();
    let o = run(
        &[
            "batch",
            "--concurrency",
            "4",
            "-e",
            &ep("s", &slow.url()),
            "-e",
            &ep("f", &fast.url()),
        ],
        &input,
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = lines(&o);
    let ids: Vec<i64> = out.iter().map(|l| l["id"].as_i64().unwrap()).collect();
    assert_eq!(ids, [1, 2, 3, 4]);
    assert_eq!(out[0]["body"], "slow");
    assert!(out[1..].iter().all(|l| l["body"] == "fast"));
    assert!(
        started.elapsed() < Duration::from_millis(2200),
        "calls did not overlap: {:?}",
        started.elapsed()
    );
}

/// The decision fields of a batch output line (no timings, no request ids).
fn decisions(l: &Value) -> Value {
    let attempts: Vec<Value> = l["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| serde_json::json!([a["endpoint"], a["outcome"], a["status"]]))
        .collect();
    serde_json::json!({
        "id": l["id"],
        "status": l["status"],
        "endpoint": l["endpoint"],
        "attempts": attempts,
        "error": l["error"]["kind"],
        "stop_reason": l["stop_reason"],
        "may_have_executed": l["may_have_executed"],
        "body": l["body"],
    })
}

#[test]
fn the_same_scenario_gives_the_same_decisions_on_every_runtime() {
    let input = concat!(
        // a read: a refused, b 503 (trigger), c answers
        "{\"id\": 1, \"path\": \"/read\"}\n",
        // a keyed POST: a refused (undelivered: may move), b resets (ambiguous): b is
        // retried (same endpoint, keyed) and answers
        "{\"id\": 2, \"method\": \"POST\", \"body\": \"{}\", \"idempotency_key\": \"k-2\"}\n",
        // a POST without key: b answers 500 (not a trigger for it): returned as is
        "{\"id\": 3, \"method\": \"POST\", \"body\": \"{}\", \"prefer\": \"b\"}\n",
        // deny: one attempt only
        "{\"id\": 4, \"retry\": \"deny\", \"failover\": \"deny\", \"prefer\": \"b\"}\n",
        // a read preferring c: c answers
        "{\"id\": 5, \"prefer\": \"c\"}\n",
    );
    let mut results = Vec::new();
    for runtime in ["tokio", "blocking", "async-std"] {
        let refused = testkit::refused_url();
        let b = Provider::builder()
            .then(Behaviour::status(503).header("connection", "close"))
            .then(Behaviour::reset())
            .then(ok("b-2").header("connection", "close"))
            .then(
                Behaviour::status(500)
                    .body("b-3")
                    .header("connection", "close"),
            )
            .otherwise(Behaviour::status(502).header("connection", "close"))
            .start();
        let c = Provider::start(ok("c").header("connection", "close"));
        let o = run(
            &[
                "batch",
                "--base",
                "--runtime",
                runtime,
                "--timeout",
                "2",
                "-e",
                &ep("a", &refused),
                "-e",
                &ep("b", &b.url()),
                "-e",
                &ep("c", &c.url()),
            ],
            input,
        );
        assert_eq!(code(&o), 0, "{runtime}: {}", stderr(&o));
        let out: Vec<Value> = lines(&o).iter().map(decisions).collect();
        assert_eq!(out.len(), 5, "{runtime}: {}", stdout(&o));
        results.push((runtime, out, b.request_count(), c.request_count()));
    }
    let (_, first, b_count, c_count) = &results[0];
    // Spot-check the expected decisions once, then require identity.
    assert_eq!(first[0]["endpoint"], "c");
    assert_eq!(
        first[1]["attempts"],
        serde_json::json!([
            ["a", "undelivered", null],
            ["b", "ambiguous", null],
            ["b", "response", 200]
        ]),
        "a keyed POST moves only while undelivered, then stays pinned to b"
    );
    assert_eq!(first[2]["status"], 500);
    assert_eq!(first[3]["stop_reason"], "answered");
    for (runtime, out, b, c) in &results[1..] {
        for (x, y) in first.iter().zip(out) {
            assert_eq!(x, y, "tokio vs {runtime}");
        }
        assert_eq!((b, c), (b_count, c_count), "tokio vs {runtime}: executions");
    }
}

// ---------------------------------------------------------------------------- demo

#[test]
fn demo_runs_the_outage_locally_and_prints_a_table() {
    let started = Instant::now();
    let o = run(&["demo"], "");
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    for needle in [
        "primary undelivered, backup 200",
        "primary timeout",
        "may have executed",
        "primary half_open -> closed",
        "summary: 9 calls",
    ] {
        assert!(out.contains(needle), "missing {needle:?} in:\n{out}");
    }
    assert!(started.elapsed() < Duration::from_secs(30));
}

// ------------------------------------------------------------------------- redirects

/// A provider on 127.0.0.1 that redirects to another host (127.0.0.2): on every runtime
/// the redirect is followed by the engine's rules, and the endpoint's credential headers
/// never reach the other host; `--max-redirects 0` returns the 302 itself.
#[test]
fn redirect_to_another_host_never_carries_endpoint_headers_on_any_runtime() {
    let other = Provider::builder()
        .ip([127, 0, 0, 2].into())
        .otherwise(ok("landed"))
        .start();
    let a = Provider::start(
        Behaviour::status(302)
            .header("location", format!("{}/landing", other.url()))
            .body("moved"),
    );
    let dir = std::env::temp_dir().join(format!("baton-redirect-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("policy.toml");
    std::fs::write(
        &config,
        format!(
            "[[endpoint]]\nid = \"a\"\nurl = \"{}/\"\n[endpoint.headers]\n\
             x-api-key = \"SECRET-A\"\nauthorization = \"Bearer SECRET-A\"\n",
            a.url()
        ),
    )
    .unwrap();
    let config = config.to_str().unwrap();
    for runtime in ["tokio", "blocking", "async-std"] {
        other.clear();
        let o = run(
            &["request", "--runtime", runtime, "--config", config, "-i"],
            "",
        );
        assert_eq!(code(&o), 0, "{runtime}: {}", stderr(&o));
        assert_eq!(stdout(&o), "landed", "{runtime}");
        let seen = other.requests();
        assert_eq!(seen.len(), 1, "{runtime}");
        assert_eq!(seen[0].path, "/landing", "{runtime}");
        assert!(
            seen[0].header("x-api-key").is_none(),
            "{runtime}: {:?}",
            seen[0].headers
        );
        assert!(seen[0].header("authorization").is_none(), "{runtime}");
        assert!(seen[0].header("x-request-id").is_some(), "{runtime}");

        other.clear();
        let o = run(
            &[
                "request",
                "--runtime",
                runtime,
                "--config",
                config,
                "--max-redirects",
                "0",
            ],
            "",
        );
        assert_eq!(code(&o), 0, "{runtime}: {}", stderr(&o));
        assert_eq!(stdout(&o), "moved", "{runtime}: the 302 is the answer");
        assert_eq!(other.request_count(), 0, "{runtime}");
    }
    let o = run(
        &["request", "--config", config, "--max-redirects", "99"],
        "",
    );
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("max_redirects"), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------- secrets in URLs

/// Every failure class, on every runtime, against an endpoint URL holding a password and
/// keys (and, in base mode, a request path holding an id): neither `request` (with `-i`
/// and `--events`) nor `batch --events` prints any of them.
#[test]
fn url_secrets_never_appear_in_any_output_on_any_runtime() {
    const SECRETS: [&str; 4] = ["SECRETPW", "SECRETKEY", "SECRETQ", "SECRETPATH"];
    let secret_url =
        |authority: &str| format!("a=http://user:SECRETPW@{authority}/v2/SECRETKEY?key=SECRETQ");
    let black_hole = Provider::start(Behaviour::black_hole());
    let reset = Provider::start(Behaviour::reset());
    let busy = Provider::start(Behaviour::status(503).body("busy"));
    let broken = Provider::start(
        Behaviour::ok()
            .body("0123456789abcdefghijklmnopqrstuv")
            .close_after_half_body(),
    );
    let dns = testkit::unresolvable_url();
    let refused = testkit::refused_url();
    let targets = [
        ("refused", refused.trim_start_matches("http://").to_string()),
        ("dns", dns.trim_start_matches("http://").to_string()),
        ("timeout", black_hole.addr().to_string()),
        ("reset", reset.addr().to_string()),
        ("503", busy.addr().to_string()),
        ("body", broken.addr().to_string()),
    ];
    for runtime in ["tokio", "blocking", "async-std"] {
        for (fault, authority) in &targets {
            let e = secret_url(authority);
            let common = [
                "--runtime",
                runtime,
                "-e",
                &e,
                "--base",
                "--timeout",
                "200ms",
                "--connect-timeout",
                "200ms",
                "--events",
            ];
            let mut args = vec!["request", "-i"];
            args.extend(common);
            args.push("/customers/SECRETPATH");
            let o = run(&args, "");
            let mut b = vec!["batch"];
            b.extend(common);
            let batch = run(&b, "{\"id\": 1, \"path\": \"/customers/SECRETPATH\"}\n");
            for (what, text) in [
                ("request stdout", stdout(&o)),
                ("request stderr", stderr(&o)),
                ("batch stdout", stdout(&batch)),
                ("batch stderr", stderr(&batch)),
            ] {
                for secret in SECRETS {
                    assert!(
                        !text.contains(secret),
                        "{runtime} {fault}: {secret} in {what}: {text}"
                    );
                }
            }
            assert!(
                stderr(&o).contains("attempt_finished"),
                "{runtime} {fault}: events were printed: {}",
                stderr(&o)
            );
        }
    }
}

// ------------------------------------------------------------ hardening at the edges

/// A batch line with 25,000 headers gets a named error; the POSTs around it execute once
/// each and are printed, at concurrency 1 and 2, on every runtime.
#[test]
fn a_line_with_too_many_headers_is_an_error_and_every_other_line_runs_once() {
    let mut headers = serde_json::Map::new();
    for i in 0..25_000 {
        headers.insert(format!("x-h{i}"), Value::from("v"));
    }
    let big = serde_json::json!({"id": "big", "method": "POST", "headers": headers}).to_string();
    for runtime in ["tokio", "blocking", "async-std"] {
        for concurrency in ["1", "2"] {
            let p = Provider::start(ok("paid"));
            let input = format!(
                "{}\n{big}\n{}\n",
                r#"{"id": 1, "method": "POST", "idempotency_key": "pay-1"}"#,
                r#"{"id": 2, "method": "POST", "idempotency_key": "pay-2"}"#
            );
            let o = run(
                &[
                    "batch",
                    "--runtime",
                    runtime,
                    "--concurrency",
                    concurrency,
                    "-e",
                    &ep("a", &p.url()),
                ],
                &input,
            );
            assert_eq!(code(&o), 0, "{runtime}: {}", stderr(&o));
            let out = lines(&o);
            assert_eq!(out.len(), 3, "{runtime} c={concurrency}: {}", stdout(&o));
            assert_eq!(out[0]["status"], 200);
            assert_eq!(out[1]["error"]["kind"], "invalid_call", "{}", out[1]);
            assert!(
                out[1]["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("at most 256"),
                "{}",
                out[1]
            );
            assert_eq!(out[2]["status"], 200);
            assert_eq!(
                p.request_count(),
                2,
                "{runtime}: each POST once, the big one never"
            );
        }
    }
    let many_h: Vec<String> = (0..300).map(|i| format!("x-h{i}: v")).collect();
    let p = Provider::start(ok("x"));
    let url = ep("a", &p.url());
    let mut args = vec!["request", "-e", url.as_str()];
    for h in &many_h {
        args.push("-H");
        args.push(h);
    }
    let o = run(&args, "");
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert_eq!(p.request_count(), 0);
}

/// Ports outside 1-65535 are rejected when the client is built, naming the endpoint and
/// the value, on every runtime; nothing is sent anywhere.
#[test]
fn endpoint_ports_out_of_range_are_rejected_on_every_runtime() {
    for runtime in ["tokio", "blocking", "async-std"] {
        for port in ["65536", "65616", "99999"] {
            let e = format!("pay=http://127.0.0.1:{port}/");
            let o = run(&["request", "--runtime", runtime, "-e", &e], "");
            assert_eq!(code(&o), 2, "{runtime} {port}: {}", stderr(&o));
            let err = stderr(&o);
            assert!(
                err.contains("\"pay\"") && err.contains(port),
                "{runtime}: {err}"
            );
        }
    }
}

/// A caller's framing header (a short Content-Length would truncate the body) is rejected
/// before anything is sent, on every runtime; so is one configured per endpoint.
#[test]
fn framing_headers_are_rejected_before_anything_is_sent() {
    let p = Provider::start(ok("paid"));
    for runtime in ["tokio", "blocking", "async-std"] {
        for h in [
            "Content-Length: 8",
            "Transfer-Encoding: chunked",
            "Connection: close",
        ] {
            let o = run(
                &[
                    "request",
                    "--runtime",
                    runtime,
                    "-e",
                    &ep("a", &p.url()),
                    "-X",
                    "POST",
                    "-H",
                    h,
                    "-d",
                    "amount=1000000",
                ],
                "",
            );
            assert_eq!(code(&o), 2, "{runtime} {h}: {}", stderr(&o));
        }
    }
    assert_eq!(
        p.request_count(),
        0,
        "a framing header reached the provider"
    );
    let dir = std::env::temp_dir().join(format!("baton-framing-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for name in ["content-length", "host", "x-request-id"] {
        let config = dir.join(format!("{name}.toml"));
        std::fs::write(
            &config,
            format!(
                "[[endpoint]]\nid = \"a\"\nurl = \"{}/\"\n[endpoint.headers]\n{name} = \"8\"\n",
                p.url()
            ),
        )
        .unwrap();
        let o = run(&["request", "--config", config.to_str().unwrap()], "");
        assert_eq!(code(&o), 2, "{name}: {}", stderr(&o));
        assert!(stderr(&o).contains(name), "{}", stderr(&o));
    }
    assert_eq!(p.request_count(), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--base`: dot segments (also percent-encoded) and backslashes are rejected before any
/// send; a relative path joins the base with one slash; the same on every runtime.
#[test]
fn base_paths_never_escape_their_base_on_any_runtime() {
    let p = Provider::start(ok("in base"));
    let base = format!("a={}/api/v1", p.url());
    for runtime in ["tokio", "blocking", "async-std"] {
        for path in ["/../../x", "/%2e%2e/x", "/a/./b", "/\\evil"] {
            let o = run(
                &["request", "--runtime", runtime, "--base", "-e", &base, path],
                "",
            );
            assert_eq!(code(&o), 2, "{runtime} {path}: {}", stderr(&o));
        }
        assert_eq!(p.request_count(), 0, "{runtime}: a path left its base");
        let o = run(
            &["request", "--runtime", runtime, "--base", "-e", &base, "x"],
            "",
        );
        assert_eq!(code(&o), 0, "{runtime}: {}", stderr(&o));
        let seen = p.requests();
        assert_eq!(seen.last().unwrap().path, "/api/v1/x", "{runtime}");
        p.clear();
    }
}

/// Reading the body is held to the call's deadline: a body that never comes ends with
/// exit status 7 soon after the deadline, not after the attempt timeout, on every runtime.
#[test]
fn the_deadline_covers_reading_the_body_on_every_runtime() {
    let p = stalled_body_provider();
    assert_stalled_body_exits_7(&p, &["--deadline", "500ms", "--timeout", "10s"]);
}

/// A provider that sends its headers and never its body.
fn stalled_body_provider() -> Provider {
    Provider::start(Behaviour::ok().body("0123456789").stall_after_headers())
}

/// On every runtime, `request` with `extra` against the stalled body `p` exits 7 within
/// a few seconds (the 10 s attempt timeout is not what ends it).
fn assert_stalled_body_exits_7(p: &Provider, extra: &[&str]) {
    for runtime in ["tokio", "blocking", "async-std"] {
        let e = ep("a", &p.url());
        let mut args = vec!["request", "--runtime", runtime, "-e", &e];
        args.extend_from_slice(extra);
        let t0 = Instant::now();
        let o = run(&args, "");
        let took = t0.elapsed();
        assert_eq!(code(&o), 7, "{runtime}: {}", stderr(&o));
        assert!(
            took < Duration::from_secs(4),
            "{runtime}: the body read took {took:?}"
        );
    }
}

/// A batch line with an invalid method keeps the request id it gave.
#[test]
fn an_invalid_method_line_keeps_its_request_id() {
    let p = Provider::start(ok("x"));
    let o = run(
        &["batch", "-e", &ep("a", &p.url())],
        "{\"id\": 1, \"method\": \"BAD METHOD\", \"request_id\": \"req-kept-0001\"}\n",
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = lines(&o);
    assert_eq!(out[0]["request_id"], "req-kept-0001");
    assert_eq!(out[0]["error"]["kind"], "invalid_call");
}

// ------------------------------------------------------- bodies as a real tool would

fn gzip(data: &[u8]) -> Vec<u8> {
    use flate2::write::GzEncoder;
    let mut e = GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// `-o FILE` gets the whole body; stdout gets nothing; the same on every runtime.
#[test]
fn request_output_file_gets_the_body() {
    let body: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    let p = Provider::start(Behaviour::ok().body(body.clone()));
    let dir = std::env::temp_dir().join(format!("baton-out-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for runtime in ["tokio", "blocking", "async-std"] {
        let file = dir.join(format!("{runtime}.bin"));
        let o = run(
            &[
                "request",
                "--runtime",
                runtime,
                "-e",
                &ep("a", &p.url()),
                "-o",
                file.to_str().unwrap(),
            ],
            "",
        );
        assert_eq!(code(&o), 0, "{runtime}: {}", stderr(&o));
        assert!(o.stdout.is_empty(), "{runtime}");
        assert_eq!(std::fs::read(&file).unwrap(), body, "{runtime}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn request_output_file_is_left_as_it_was_when_the_call_fails() {
    let dir = std::env::temp_dir().join(format!("baton-keep-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kept = dir.join("kept.json");
    std::fs::write(&kept, "the last good answer").unwrap();
    let fresh = dir.join("fresh.json");
    let refused = ep("a", &testkit::refused_url());
    for file in [&kept, &fresh] {
        let o = run(
            &["request", "-e", &refused, "-o", file.to_str().unwrap()],
            "",
        );
        assert_eq!(code(&o), 3, "{}", stderr(&o));
    }
    assert_eq!(
        std::fs::read_to_string(&kept).unwrap(),
        "the last good answer",
        "a failed call emptied the file"
    );
    assert!(!fresh.exists(), "a failed call left a file it created");
    // A call that answers replaces what was there, whole.
    let p = Provider::start(ok("new"));
    let o = run(
        &[
            "request",
            "-e",
            &ep("a", &p.url()),
            "-o",
            kept.to_str().unwrap(),
        ],
        "",
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), "new");
    // A device is written, not emptied (it cannot be).
    let o = run(
        &["request", "-e", &ep("a", &p.url()), "-o", "/dev/null"],
        "",
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    // A client that cannot be built sends nothing and leaves no file behind.
    let o = run(
        &[
            "request",
            "--runtime",
            "blocking",
            "--hedge-after",
            "100",
            "-e",
            &ep("a", &p.url()),
            "-o",
            fresh.to_str().unwrap(),
        ],
        "",
    );
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(!fresh.exists(), "a refused command left a file");
    // A dangling symlink is the user's: a failed call does not remove it.
    let link = dir.join("link.json");
    std::os::unix::fs::symlink(dir.join("nowhere.json"), &link).unwrap();
    let o = run(
        &["request", "-e", &refused, "-o", link.to_str().unwrap()],
        "",
    );
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    assert!(
        std::fs::symlink_metadata(&link).is_ok(),
        "the symlink was removed"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Content encoding is the same on every runtime: without `--compressed` nothing asks for
/// an encoding and the bytes come through as sent; with it, gzip is asked for and decoded.
#[test]
fn content_encoding_is_passed_through_unless_compressed_on_every_runtime() {
    let packed = gzip(b"the real body");
    let p = Provider::start(
        Behaviour::ok()
            .header("content-encoding", "gzip")
            .body(packed.clone()),
    );
    for runtime in ["tokio", "blocking", "async-std"] {
        p.clear();
        let o = run(
            &["request", "--runtime", runtime, "-e", &ep("a", &p.url())],
            "",
        );
        assert_eq!(code(&o), 0, "{runtime}: {}", stderr(&o));
        assert_eq!(o.stdout, packed, "{runtime}: bytes not passed through");
        assert!(
            p.requests()[0].header("accept-encoding").is_none(),
            "{runtime}: asked for an encoding"
        );
        let o = run(
            &[
                "request",
                "--runtime",
                runtime,
                "-e",
                &ep("a", &p.url()),
                "--compressed",
            ],
            "",
        );
        assert_eq!(code(&o), 0, "{runtime}: {}", stderr(&o));
        assert_eq!(stdout(&o), "the real body", "{runtime}");
        assert_eq!(
            p.requests()[1].header("accept-encoding"),
            Some("gzip, deflate"),
            "{runtime}"
        );
    }
}

/// `batch --max-body`: a larger body (also a decompression bomb, counted decoded) gives
/// that line `body_too_large`, the others go on; a body that is not UTF-8 comes back whole
/// as `body_base64`.
#[test]
fn batch_bounds_bodies_and_keeps_binary_ones_whole() {
    let big = Provider::start(Behaviour::ok().body(vec![b'x'; 200_000]));
    let bomb = Provider::start(
        Behaviour::ok()
            .header("content-encoding", "gzip")
            .body(gzip(&vec![0u8; 5_000_000])),
    );
    let binary = Provider::start(Behaviour::ok().body(vec![0xff, 0x00, 0xfe, b'a']));
    for runtime in ["tokio", "blocking", "async-std"] {
        let eps = [
            ep("big", &big.url()),
            ep("bomb", &bomb.url()),
            ep("bin", &binary.url()),
        ];
        let input = "{\"id\": 1, \"prefer\": \"big\"}\n{\"id\": 2, \"prefer\": \"bomb\"}\n{\"id\": 3, \"prefer\": \"bin\"}\n";
        let o = run(
            &[
                "batch",
                "--runtime",
                runtime,
                "-e",
                &eps[0],
                "-e",
                &eps[1],
                "-e",
                &eps[2],
                "--max-body",
                "100000",
                "--compressed",
            ],
            input,
        );
        assert_eq!(code(&o), 0, "{runtime}: {}", stderr(&o));
        let out = lines(&o);
        assert_eq!(out.len(), 3, "{runtime}");
        assert_eq!(
            out[0]["error"]["kind"], "body_too_large",
            "{runtime}: {}",
            out[0]
        );
        assert_eq!(
            out[1]["error"]["kind"], "body_too_large",
            "{runtime}: {}",
            out[1]
        );
        assert_eq!(out[2]["status"], 200, "{runtime}");
        assert_eq!(out[2]["body"], Value::Null, "{runtime}");
        assert_eq!(out[2]["body_base64"], "/wD+YQ==", "{runtime}: {}", out[2]);
    }
}

/// The progress meter goes to stderr when stderr is a terminal and stdout is not, never to
/// stdout; `--silent` turns it off.
#[test]
fn progress_meter_on_a_terminal_stderr_only() {
    // `script` (util-linux; Debian's essential bsdutils) gives the command a terminal.
    let p = Provider::start(Behaviour::ok().body(vec![b'y'; 1_000_000]));
    let dir = std::env::temp_dir().join(format!("baton-meter-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let body_file = dir.join("body");
    for (extra, meter) in [("", true), ("-s", false)] {
        // `script` gives the command a terminal; stdout goes to a file.
        let cmd = format!(
            "{BATON} request -e {} {extra} > {}",
            ep("a", &p.url()),
            body_file.display()
        );
        let o = Command::new("script")
            .args(["-qec", &cmd, "/dev/null"])
            .output()
            .unwrap();
        let terminal = String::from_utf8_lossy(&o.stdout);
        assert_eq!(std::fs::read(&body_file).unwrap().len(), 1_000_000);
        assert_eq!(
            terminal.contains("KiB"),
            meter,
            "meter={meter}: {terminal:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--body-timeout`: a body that stalls after its headers exits 7 soon after the body
/// timeout, on every runtime, though the attempt timeout is long.
#[test]
fn body_timeout_bounds_a_stalled_body_on_every_runtime() {
    let p = stalled_body_provider();
    assert_stalled_body_exits_7(&p, &["--timeout", "10s", "--body-timeout", "300ms"]);
    let o = run(
        &["request", "-e", &ep("a", &p.url()), "--body-timeout", "0"],
        "",
    );
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("body_timeout"), "{}", stderr(&o));
}

// --------------------------------------------------------------------------- probe

#[test]
fn probe_checks_every_endpoint_and_exits_3_when_one_is_unhealthy() {
    let a = Provider::start(ok("up"));
    let b = Provider::start(Behaviour::status(503));
    let args = ["probe", "-e", &ep("a", &a.url()), "-e", &ep("b", &b.url())];
    let o = run(&args, "");
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    let text = stdout(&o);
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split('\t').collect()).collect();
    assert_eq!(rows[0], ["a", "healthy", "200", "closed"]);
    assert_eq!(rows[1], ["b", "unhealthy", "503", "closed"]);
    for runtime in ["tokio", "blocking", "async-std"] {
        let mut args = args.to_vec();
        args.extend(["--json", "--runtime", runtime]);
        let o = run(&args, "");
        let out = lines(&o);
        assert_eq!(out[0]["healthy"], true, "{runtime}");
        assert_eq!(out[1]["status"], 503, "{runtime}");
    }
    assert_eq!(a.request_count(), 4);
    let only_a = run(&["probe", "-e", &ep("a", &a.url())], "");
    assert_eq!(code(&only_a), 0);
}

/// Probes route as calls do (SPEC 3): with `HTTP_PROXY` set, every runtime's probe of an
/// http endpoint goes through the proxy, in absolute form; with `--no-env-proxies`, straight.
#[test]
fn probe_goes_through_http_proxy_on_every_runtime() {
    let a = Provider::start(ok("up"));
    let proxy = testkit::ProxyServer::start();
    let target = format!("{}/", a.url());
    for runtime in ["tokio", "blocking", "async-std"] {
        let before = proxy.requests().len();
        let args = [
            "probe",
            "-e",
            &ep("a", &a.url()),
            "--json",
            "--runtime",
            runtime,
        ];
        let mut cmd = Command::new(BATON);
        cmd.args(args).stdin(Stdio::null());
        for var in [
            "http_proxy",
            "HTTPS_PROXY",
            "https_proxy",
            "ALL_PROXY",
            "all_proxy",
        ] {
            cmd.env_remove(var);
        }
        let o = cmd
            .env("HTTP_PROXY", proxy.url())
            .env_remove("NO_PROXY")
            .env_remove("no_proxy")
            .output()
            .unwrap();
        assert_eq!(code(&o), 0, "{runtime}: {}", stderr(&o));
        assert_eq!(lines(&o)[0]["healthy"], true, "{runtime}");
        let seen = proxy.requests();
        assert_eq!(seen.len(), before + 1, "{runtime}: {seen:?}");
        assert_eq!(seen[before].method, "GET", "{runtime}");
        assert_eq!(seen[before].target, target, "{runtime}: absolute form");
        let direct = Command::new(BATON)
            .args(args)
            .arg("--no-env-proxies")
            .env("HTTP_PROXY", proxy.url())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(code(&direct), 0, "{runtime}: {}", stderr(&direct));
        assert_eq!(
            proxy.requests().len(),
            before + 1,
            "{runtime}: --no-env-proxies"
        );
    }
}

#[test]
fn batch_probe_due_probes_endpoints_whose_open_time_passed() {
    let a = Provider::builder()
        .then(Behaviour::status(503))
        .otherwise(ok("a"))
        .start();
    let b = Provider::start(ok("b"));
    let mut child = Command::new(BATON)
        .args([
            "batch",
            "-e",
            &ep("a", &a.url()),
            "-e",
            &ep("b", &b.url()),
            "--cooldown-threshold",
            "1",
            "--cooldown",
            "0.3",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run baton");
    let mut stdin = child.stdin.take().unwrap();
    // The call opens a's breaker; right after it nothing is due.
    writeln!(
        stdin,
        "{{\"id\": 1}}\n{{\"probe\": \"due\", \"id\": \"p1\"}}"
    )
    .unwrap();
    stdin.flush().unwrap();
    std::thread::sleep(Duration::from_millis(600));
    writeln!(
        stdin,
        "{{\"probe\": \"due\", \"id\": \"p2\"}}\n{{\"id\": 2}}"
    )
    .unwrap();
    drop(stdin);
    let o = child.wait_with_output().unwrap();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = lines(&o);
    assert_eq!(out[0]["endpoint"], "b");
    assert_eq!(out[1]["probe"], "due");
    assert_eq!(out[1]["results"], serde_json::json!([]));
    assert_eq!(out[2]["id"], "p2");
    let results = out[2]["results"].as_array().unwrap();
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0]["endpoint"], "a");
    assert_eq!(results[0]["healthy"], true);
    assert_eq!(results[0]["state"], "closed");
    // The probe closed a's breaker: the next call goes there first.
    assert_eq!(out[3]["endpoint"], "a");
    let bad = run(
        &["batch", "-e", &ep("b", &b.url())],
        "{\"probe\": \"all\"}\n",
    );
    assert_eq!(code(&bad), 2);
    assert!(stderr(&bad).contains("probe"), "{}", stderr(&bad));
}

// --------------------------------------------------------------------------- check

fn check_in(dir: &std::path::Path, args: &[&str]) -> Output {
    let mut all = vec!["check", "--out", dir.to_str().unwrap()];
    all.extend_from_slice(args);
    run(&all, "")
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("baton-check-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn check_of_the_example_policy_exits_1_with_its_one_lint() {
    let dir = temp_dir("example");
    let o = check_in(&dir, &["--config", "examples/policy.toml"]);
    assert_eq!(code(&o), 1, "{}{}", stdout(&o), stderr(&o));
    let out = stdout(&o);
    // Its rate limiter waits and it has no deadline: that is the lint, and the reason
    // every class's time is unbounded.
    assert!(out.contains("policy.rate_limit.on_limit"), "{out}");
    assert_eq!(
        out.matches("no bound on the time to a result").count(),
        3,
        "{out}"
    );
    assert!(out.contains("10000 calls explored"), "{out}");
    for class in ["safe reads", "writes", "keyed writes"] {
        let row = out.lines().find(|l| l.starts_with(class)).unwrap();
        let cols: Vec<&str> = row[13..].split_whitespace().collect();
        assert_eq!(cols[1], "0", "{class}: safety count {row}");
        assert!(
            cols[2].parse::<u32>().unwrap() >= cols[3].parse::<u32>().unwrap(),
            "{row}"
        );
    }
    assert!(
        std::fs::read_dir(&dir).unwrap().next().is_none(),
        "no counterexample written"
    );
}

#[test]
fn check_of_the_demo_policy_exits_0_and_json_has_the_figures() {
    let dir = temp_dir("demo");
    let o = check_in(
        &dir,
        &[
            "--config",
            "examples/demo.toml",
            "--json",
            "--calls",
            "4000",
        ],
    );
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["status"], 0);
    assert_eq!(v["explored"], 4000);
    assert_eq!(v["lints"].as_array().unwrap().len(), 0);
    let classes = v["classes"].as_array().unwrap();
    assert_eq!(classes.len(), 3);
    for c in classes {
        assert_eq!(c["violations"], 0, "{c}");
        assert!(c["bound"]["attempts"].as_u64() >= c["observed"]["attempts"].as_u64());
        assert!(c["bound"]["time_ms"].as_f64() >= c["observed"]["time_ms"].as_f64());
        assert!(c["outage"]["per_call"].as_f64().unwrap() >= 1.0);
        assert!(c["counterexample"].is_null());
    }
    // The demo's two endpoints, one attempt each: reads and unkeyed writes make at most 2;
    // a keyed write pinned at the second endpoint gets 1 + 3.
    assert_eq!(classes[0]["bound"]["attempts"], 2);
    assert_eq!(classes[2]["bound"]["attempts"], 4);
}

const UNSAFE: &str = r#"
[[endpoint]]
id = "a"
url = "https://a.pay.example/"

[[endpoint]]
id = "b"
url = "https://b.pay.example/"

[policy]
attempt_timeout = "500ms"
key_trigger_statuses = [500, 503]

[permissions.POST]
retry = "always"
failover = "always"
"#;

#[test]
fn check_of_an_unsafe_policy_exits_8_with_counterexamples_that_fail_the_conformance_runner() {
    let dir = temp_dir("unsafe");
    let config = dir.join("unsafe.toml");
    std::fs::write(&config, UNSAFE).unwrap();
    let o = check_in(&dir, &["--config", config.to_str().unwrap()]);
    assert_eq!(code(&o), 8, "{}{}", stdout(&o), stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("SAFETY writes"), "{out}");
    assert!(out.contains("SAFETY keyed writes"), "{out}");
    assert!(out.contains("policy.key_trigger_statuses"), "{out}");
    let paths: Vec<&str> = out
        .lines()
        .filter_map(|l| l.trim().strip_prefix("counterexample: "))
        .collect();
    assert_eq!(paths.len(), 2, "{out}");
    for path in paths {
        let text = std::fs::read_to_string(path).unwrap();
        let vector: conformance::Vector = toml::from_str(&text).unwrap();
        let observed = conformance::run_sim(&vector).unwrap();
        let last = vector.calls.last().unwrap();
        let bad = conformance::check(
            &vector,
            last,
            observed.last().unwrap(),
            conformance::Slack::NONE,
        );
        // Exactly the rules the check printed for this class, and nothing else.
        assert!(!bad.is_empty());
        for b in &bad {
            let rule = b.strip_prefix("safety: ").expect("only safety fails");
            assert!(out.contains(rule), "{rule} not reported in\n{out}");
        }
    }
}

#[test]
fn check_creates_its_out_directory_as_mkdir_p_would() {
    let dir = temp_dir("mkdir");
    let config = dir.join("unsafe.toml");
    std::fs::write(&config, UNSAFE).unwrap();
    let nested = dir.join("new").join("dir");
    let o = check_in(&nested, &["--config", config.to_str().unwrap()]);
    assert_eq!(code(&o), 8, "{}{}", stdout(&o), stderr(&o));
    assert!(
        nested.join("baton-check-writes.toml").exists(),
        "{}",
        stderr(&o)
    );
}

#[test]
fn check_rejects_a_bad_configuration_with_exit_2() {
    let dir = temp_dir("bad");
    let config = dir.join("bad.toml");
    std::fs::write(&config, "[[endpoint]]\nid = \"a\"\nurl = \"https://a.example/\"\n[permissions.\"P OST\"]\nretry = \"always\"\n").unwrap();
    let o = check_in(&dir, &["--config", config.to_str().unwrap()]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("[permissions.P OST]"), "{}", stderr(&o));
    let o = check_in(&dir, &[]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("no endpoints"), "{}", stderr(&o));
}

#[test]
fn check_stays_8_when_its_counterexample_cannot_be_written_and_refuses_zero_calls() {
    let dir = temp_dir("unwritable");
    let config = dir.join("unsafe.toml");
    std::fs::write(&config, UNSAFE).unwrap();
    // A file where the directory should be: the report stands, the error says why.
    let in_the_way = dir.join("a-file");
    std::fs::write(&in_the_way, "not a directory").unwrap();
    let o = run(
        &[
            "check",
            "--config",
            config.to_str().unwrap(),
            "--out",
            in_the_way.to_str().unwrap(),
        ],
        "",
    );
    assert_eq!(code(&o), 8, "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("SAFETY writes"), "{}", stdout(&o));
    assert!(
        stderr(&o).contains("cannot create the directory") && stderr(&o).contains("--out"),
        "{}",
        stderr(&o)
    );
    let o = run(
        &[
            "check",
            "--config",
            config.to_str().unwrap(),
            "--calls",
            "0",
        ],
        "",
    );
    assert_eq!(code(&o), 2, "{}", stderr(&o));
}

/// A config file's syntax or type error names where it is (line and column) and what is
/// wrong, never the line itself: it may hold an endpoint URL's key or a header's secret,
/// whatever the typo on it (SPEC 4). Before, the parser's text quoted the whole line.
#[test]
fn a_config_file_error_names_the_line_without_quoting_it() {
    let dir = temp_dir("toml-secrets");
    let files = [
        "[[endpoint]]\nid = \"a\"\nurl = \"http://user:SECRETPW@127.0.0.1:1/v2/SECRETKEY\"\nurl = \"x\"\n",
        "[[endpoint]]\nid = \"a\"\nurl = \"http://127.0.0.1:1/\"\nheaders = { authorization = \"Bearer SECRETTOKEN\", x = 1 }\n",
        "[[endpoint]]\nid = \"a\"\nurl = \"http://127.0.0.1:1/\"\nheaders = { authorization = \"Bearer SECRETTOKEN }\n",
        "[[endpoint]]\nid = \"a\"\nurl = \"http://127.0.0.1:1/\"\nheaders = \"Bearer SECRETTOKEN\"\n",
    ];
    for (i, text) in files.iter().enumerate() {
        let path = dir.join(format!("c{i}.toml"));
        std::fs::write(&path, text).unwrap();
        let o = run(&["request", "--config", path.to_str().unwrap()], "");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains("line 4"), "{err}");
        for secret in ["SECRETPW", "SECRETKEY", "SECRETTOKEN"] {
            assert!(!err.contains(secret), "{secret} in: {err}");
        }
    }
}

/// `baton check` refuses what the client of `--runtime` refuses, as `request` does (exit
/// 2, naming the setting): a CA file that does not exist, hedging or HTTP/2 on the
/// blocking runtime. Before, it checked the policy alone and passed them.
#[test]
fn check_refuses_what_the_runtime_refuses() {
    let dir = temp_dir("runtime-refusals");
    let cases: [&[&str]; 3] = [
        &["--cacert", "/nonexistent-baton-ca.pem"],
        &["--hedge-after", "5", "--runtime", "blocking"],
        &["--http2-prior-knowledge", "--runtime", "blocking"],
    ];
    for extra in cases {
        let mut args = vec!["-e", "a=http://127.0.0.1:1/", "--calls", "10"];
        args.extend_from_slice(extra);
        let checked = check_in(&dir, &args);
        let mut request = vec!["request"];
        request.extend_from_slice(&args[..2]);
        request.extend_from_slice(extra);
        let requested = run(&request, "");
        let err = String::from_utf8_lossy(&checked.stderr);
        assert_eq!(requested.status.code(), Some(2), "{extra:?}");
        assert_eq!(checked.status.code(), Some(2), "{extra:?}: {err}");
    }
}
