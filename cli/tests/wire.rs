//! `baton` on the wire (SPEC 9): HTTP/2 by ALPN and prior knowledge, the one TLS trust
//! rule (`--cacert`, the platform store through `SSL_CERT_FILE`), client identities
//! (`--cert`, `--key`) and rejected certificates, on every runtime, against testkit's HTTP/2
//! provider, HTTP/1.1 provider and TLS front on 127.0.0.1.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use serde_json::Value;
use testkit::{Behaviour, H2Behaviour, H2Provider, Provider, TestPki, TlsFront};

const BATON: &str = env!("CARGO_BIN_EXE_baton");
const RUNTIMES: [&str; 3] = ["tokio", "blocking", "async-std"];

fn run_env(args: &[&str], stdin: &str, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(BATON);
    cmd.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("run baton");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn run(args: &[&str]) -> Output {
    run_env(args, "", &[])
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("exited")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn path(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}

/// A TLS front offering h2 and http/1.1 over an HTTP/2 and an HTTP/1.1 provider that
/// both answer `ok`: every runtime can reach it (blocking over HTTP/1.1).
struct Both {
    h2: H2Provider,
    h1: Provider,
    front: TlsFront,
}

fn both(pki: &TestPki, identity: &testkit::Identity, require_client: bool) -> Both {
    let h2 = H2Provider::start(H2Behaviour::ok());
    let h1 = Provider::start(Behaviour::ok().body("ok"));
    let front = pki.front(
        identity,
        &["h2", "http/1.1"],
        require_client,
        Some(h1.addr()),
        Some(h2.addr()),
    );
    Both { h2, h1, front }
}

impl Both {
    fn processed(&self) -> usize {
        self.h2.processed() + self.h1.request_count()
    }
}

#[test]
fn an_h2_only_provider_answers_over_http2_on_tokio_and_async_std_and_blocking_refuses_naming_http2()
{
    let (pki, files) = TestPki::temp("cli-h2-only");
    let h2 = H2Provider::start(H2Behaviour::ok());
    let front = pki.front(&pki.server, &["h2"], false, None, Some(h2.addr()));
    let endpoint = format!("a={}/", front.url());
    for runtime in ["tokio", "async-std"] {
        let line = r#"{"id": 1}"#;
        let o = run_env(
            &[
                "batch",
                "-e",
                &endpoint,
                "--cacert",
                path(&files.ca),
                "--runtime",
                runtime,
            ],
            line,
            &[],
        );
        let (out, err) = text(&o);
        assert_eq!(code(&o), 0, "{runtime}: {err}");
        let v: Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(v["status"], 200, "{runtime}: {out}");
        assert_eq!(v["attempts"][0]["http_version"], "h2", "{runtime}: {out}");
    }
    let o = run(&[
        "request",
        "-e",
        &endpoint,
        "--cacert",
        path(&files.ca),
        "--runtime",
        "blocking",
        "--http2-prior-knowledge",
    ]);
    let (_, err) = text(&o);
    assert_eq!(code(&o), 2, "{err}");
    assert!(
        err.contains("HTTP/2") && err.contains("http_version"),
        "{err}"
    );
    assert_eq!(h2.processed(), 2);
}

#[test]
fn a_batch_of_200_calls_at_concurrency_32_shares_at_most_4_http2_connections() {
    let (pki, files) = TestPki::temp("cli-h2-batch");
    let h2 = H2Provider::start(H2Behaviour::ok());
    let front = pki.front(&pki.server, &["h2"], false, None, Some(h2.addr()));
    let endpoint = format!("a={}/", front.url());
    let input: String = (0..200).map(|i| format!("{{\"id\": {i}}}\n")).collect();
    for runtime in ["tokio", "async-std"] {
        let before = front.connections();
        let o = run_env(
            &[
                "batch",
                "-e",
                &endpoint,
                "--cacert",
                path(&files.ca),
                "--runtime",
                runtime,
                "--concurrency",
                "32",
            ],
            &input,
            &[],
        );
        let (out, err) = text(&o);
        assert_eq!(code(&o), 0, "{runtime}: {err}");
        assert_eq!(out.lines().count(), 200);
        assert!(
            out.lines().all(|l| l.contains("\"status\":200")),
            "{runtime}"
        );
        let used = front.connections() - before;
        assert!(used <= 4, "{runtime}: {used} connections");
    }
    assert_eq!(h2.processed(), 400);
}

#[test]
fn refused_streams_fail_over_and_resets_after_the_request_may_have_executed() {
    for runtime in ["tokio", "async-std"] {
        // A GOAWAY below the stream is proof only on async-std (its HTTP/2 tasks share
        // one thread); on tokio hyper may hand the connection's GOAWAY to a stream it had
        // just opened, so it is ambiguous there and the POST stops (nothing was processed).
        let goaway_proves = runtime == "async-std";
        for (fault, failover, processed_at_a) in [
            (H2Behaviour::refuse_stream(), true, 0),
            (H2Behaviour::go_away_below(), goaway_proves, 0),
            (H2Behaviour::reset_after_request(), false, 1),
        ] {
            let a = H2Provider::start(fault.clone());
            let b = H2Provider::start(H2Behaviour::ok());
            let o = run_env(
                &[
                    "batch",
                    "-e",
                    &format!("a={}/", a.url()),
                    "-e",
                    &format!("b={}/", b.url()),
                    "--http2-prior-knowledge",
                    "--runtime",
                    runtime,
                ],
                r#"{"method": "POST", "body": "amount=1"}"#,
                &[],
            );
            let (out, err) = text(&o);
            let v: Value =
                serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out} {err}"));
            let first = &v["attempts"][0]["outcome"];
            if failover {
                assert_eq!(first, "undelivered", "{runtime} {fault:?}: {out}");
                assert_eq!(v["status"], 200, "{runtime} {fault:?}: {out}");
                assert_eq!(
                    (a.processed(), b.processed()),
                    (0, 1),
                    "{runtime} {fault:?}"
                );
            } else {
                assert_eq!(first, "ambiguous", "{runtime} {fault:?}: {out}");
                assert_eq!(v["may_have_executed"], true, "{runtime} {fault:?}: {out}");
                assert_eq!(
                    (a.processed(), b.processed()),
                    (processed_at_a, 0),
                    "{runtime} {fault:?}"
                );
            }
        }
    }
}

#[test]
fn with_cacert_a_private_ca_provider_answers_on_every_runtime() {
    let (pki, files) = TestPki::temp("cli-cacert");
    let p = both(&pki, &pki.server, false);
    let endpoint = format!("a={}/", p.front.url());
    for runtime in RUNTIMES {
        let o = run(&[
            "request",
            "-e",
            &endpoint,
            "--cacert",
            path(&files.ca),
            "--runtime",
            runtime,
        ]);
        let (out, err) = text(&o);
        assert_eq!((code(&o), out.as_str()), (0, "ok"), "{runtime}: {err}");
    }
    assert_eq!(p.processed(), 3);
    // Without it, nothing is trusted: exit 3, and the message says why.
    let o = run(&["request", "-e", &endpoint, "--runtime", "tokio"]);
    let (_, err) = text(&o);
    assert_eq!(code(&o), 3, "{err}");
    assert!(err.contains("unknown issuer"), "{err}");
}

#[test]
fn with_the_ca_in_the_platform_store_every_runtime_agrees() {
    let (pki, files) = TestPki::temp("cli-store");
    let p = both(&pki, &pki.server, false);
    let endpoint = format!("a={}/", p.front.url());
    for runtime in RUNTIMES {
        let o = run_env(
            &["request", "-e", &endpoint, "--runtime", runtime],
            "",
            &[("SSL_CERT_FILE", path(&files.ca))],
        );
        let (out, err) = text(&o);
        assert_eq!((code(&o), out.as_str()), (0, "ok"), "{runtime}: {err}");
    }
}

#[test]
fn with_cert_and_key_an_mtls_provider_answers_and_without_them_processes_nothing() {
    let (pki, files) = TestPki::temp("cli-mtls");
    let p = both(&pki, &pki.server, true);
    let endpoint = format!("a={}/", p.front.url());
    for runtime in RUNTIMES {
        let before = p.processed();
        let o = run(&[
            "request",
            "-e",
            &endpoint,
            "--cacert",
            path(&files.ca),
            "--runtime",
            runtime,
        ]);
        let (_, err) = text(&o);
        assert_eq!(code(&o), 3, "{runtime}: {err}");
        assert_eq!(
            p.processed(),
            before,
            "{runtime}: processed without an identity"
        );
        let o = run(&[
            "request",
            "-e",
            &endpoint,
            "--cacert",
            path(&files.ca),
            "--cert",
            path(&files.client_cert),
            "--key",
            path(&files.client_key),
            "--runtime",
            runtime,
        ]);
        let (out, err) = text(&o);
        assert_eq!((code(&o), out.as_str()), (0, "ok"), "{runtime}: {err}");
    }
    assert_eq!(p.processed(), 3);
}

#[test]
fn a_rejected_certificate_costs_one_handshake_per_call_and_the_message_names_the_reason() {
    let (pki, files) = TestPki::temp("cli-reject");
    for (identity, reason) in [
        (&pki.untrusted_server, "unknown issuer"),
        (&pki.wrong_name_server, "name mismatch"),
        (&pki.expired_server, "expired"),
    ] {
        let p = both(&pki, identity, false);
        let endpoint = format!("a={}/", p.front.url());
        for runtime in RUNTIMES {
            let before = p.front.connections();
            let o = run(&[
                "request",
                "-e",
                &endpoint,
                "--cacert",
                path(&files.ca),
                "--runtime",
                runtime,
            ]);
            let (_, err) = text(&o);
            assert_eq!(code(&o), 3, "{runtime}: {err}");
            assert!(err.contains(reason), "{runtime} {reason}: {err}");
            assert_eq!(p.front.connections() - before, 1, "{runtime} {reason}");
        }
        assert_eq!(p.processed(), 0);
    }
}

#[test]
fn bad_tls_files_exit_2_naming_the_file_and_the_setting() {
    let (_pki, files) = TestPki::temp("cli-bad-files");
    for runtime in RUNTIMES {
        let o = run(&[
            "request",
            "-e",
            "a=https://127.0.0.1:1/",
            "--cacert",
            "/nonexistent/ca.pem",
            "--runtime",
            runtime,
        ]);
        let (_, err) = text(&o);
        assert_eq!(code(&o), 2, "{runtime}: {err}");
        assert!(
            err.contains("tls.ca_file") && err.contains("/nonexistent/ca.pem"),
            "{runtime}: {err}"
        );
        let o = run(&[
            "request",
            "-e",
            "a=https://127.0.0.1:1/",
            "--cert",
            path(&files.client_cert),
            "--key",
            path(&files.ca),
            "--runtime",
            runtime,
        ]);
        let (_, err) = text(&o);
        assert_eq!(code(&o), 2, "{runtime}: {err}");
        assert!(err.contains("tls.client_key"), "{runtime}: {err}");
        let o = run(&[
            "request",
            "-e",
            "a=https://127.0.0.1:1/",
            "--cert",
            path(&files.client_cert),
            "--runtime",
            runtime,
        ]);
        let (_, err) = text(&o);
        assert_eq!(code(&o), 2, "{runtime}: {err}");
        assert!(err.contains("client_key"), "{runtime}: {err}");
    }
}
