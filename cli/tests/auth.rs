//! Black-box tests of token commands (`--auth-command`, `[endpoint.auth]`): the built
//! `baton` against token-checking providers on 127.0.0.1.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use testkit::auth::AuthServer;

const BATON: &str = env!("CARGO_BIN_EXE_baton");

fn baton(args: &[&str], stdin: &str) -> Output {
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

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn a_token_command_runs_once_for_a_whole_batch_on_every_runtime() {
    for runtime in ["tokio", "blocking", "async-std"] {
        let a = AuthServer::start("tok-a");
        let dir = std::env::temp_dir().join(format!("baton-auth-{}-{runtime}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let count = dir.join("runs");
        let _ = std::fs::remove_file(&count);
        let cmd = format!(
            "echo run >> {}; printf 'tok-%s' \"$BATON_ENDPOINT\"",
            count.display()
        );
        let lines: String = (0..16).map(|i| format!("{{\"id\": {i}}}\n")).collect();
        let ep = format!("a={}/", a.url());
        let out = baton(
            &[
                "batch",
                "-e",
                &ep,
                "--runtime",
                runtime,
                "--concurrency",
                "8",
                "--auth-command",
                &cmd,
            ],
            &lines,
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "{runtime}: {}",
            text(&out.stderr)
        );
        let statuses = text(&out.stdout)
            .lines()
            .filter(|l| l.contains("\"status\":200"))
            .count();
        assert_eq!(statuses, 16, "{runtime}: {}", text(&out.stdout));
        let runs = std::fs::read_to_string(&count).unwrap().lines().count();
        assert_eq!(runs, 1, "{runtime}: the command ran once for 16 calls");
        assert!(a
            .seen()
            .iter()
            .all(|t| t.as_deref() == Some("Bearer tok-a")));
        assert!(
            !text(&out.stdout).contains("tok-a"),
            "{runtime}: the token is not in the output"
        );
    }
}

#[test]
fn a_revoked_credential_costs_at_most_two_token_runs_and_returns_the_401_on_every_runtime() {
    for runtime in ["tokio", "blocking", "async-std"] {
        // Accepts a token no command ever prints: every token is refused.
        let a = AuthServer::start("revoked-never-issued");
        let dir = std::env::temp_dir().join(format!(
            "baton-auth-revoked-{}-{runtime}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let count = dir.join("runs");
        let _ = std::fs::remove_file(&count);
        let cmd = format!(
            "echo run >> {f}; printf 'tok-%s' \"$(wc -l < {f})\"",
            f = count.display()
        );
        let ep = format!("a={}/", a.url());
        let out = baton(
            &[
                "batch",
                "-e",
                &ep,
                "--runtime",
                runtime,
                "--max-attempts",
                "3",
                "--auth-command",
                &cmd,
            ],
            "{\"id\": 1}\n",
        );
        let stdout = text(&out.stdout);
        let line: serde_json::Value = serde_json::from_str(stdout.trim())
            .unwrap_or_else(|e| panic!("{runtime}: {e}: {stdout} {}", text(&out.stderr)));
        assert_eq!(line["status"], 401, "{runtime}: {line}");
        let runs = std::fs::read_to_string(&count).unwrap().lines().count();
        assert!(
            (1..=2).contains(&runs),
            "{runtime}: {runs} token runs for one call"
        );
        let attempts = line["attempts"].as_array().unwrap();
        assert_eq!(attempts.len(), 1, "{runtime}: {line}");
        assert_eq!(attempts[0]["credential_refused"], true, "{runtime}: {line}");
        assert!(a.seen().len() <= 2, "{runtime}: {:?}", a.seen());
    }
}

#[test]
fn a_config_file_auth_table_with_its_own_scheme() {
    let a = AuthServer::start("abc");
    let dir = std::env::temp_dir().join(format!("baton-auth-cfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("policy.toml");
    let toml = format!(
        "[[endpoint]]\nid = \"a\"\nurl = \"{}/\"\n[endpoint.auth]\ncommand = [\"echo\", \"{{\\\"token\\\": \\\"abc\\\", \\\"expires_in\\\": 60}}\"]\nscheme = \"Bearer\"\n",
        a.url()
    );
    std::fs::write(&cfg, toml).unwrap();
    let out = baton(&["request", "--config", cfg.to_str().unwrap()], "");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "ok");
    assert_eq!(a.seen(), [Some("Bearer abc".to_string())]);
}

#[test]
fn a_failing_command_fails_over_and_its_stdout_never_shows() {
    let a = AuthServer::start("t");
    let b = AuthServer::start("tok-b");
    let cmd = "if [ \"$BATON_ENDPOINT\" = a ]; then echo leaked-stdout; echo 'vault sealed' >&2; exit 3; fi; printf tok-b";
    let (ea, eb) = (format!("a={}/", a.url()), format!("b={}/", b.url()));
    let out = baton(
        &[
            "request",
            "-e",
            &ea,
            "-e",
            &eb,
            "--auth-command",
            cmd,
            "--events",
        ],
        "",
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(a.seen().is_empty(), "nothing sent to a");
    let err = text(&out.stderr);
    assert!(
        !err.contains("leaked-stdout") && !err.contains("tok-b"),
        "{err}"
    );

    let out = baton(&["request", "-e", &ea, "--auth-command", cmd], "");
    assert_eq!(out.status.code(), Some(3));
    let err = text(&out.stderr);
    assert!(
        err.contains("vault sealed") && !err.contains("leaked-stdout"),
        "{err}"
    );
}
