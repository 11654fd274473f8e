//! Token commands (`[endpoint.auth] command = [...]`, `--auth-command CMD`): the CLI's
//! token provider (SPEC 9). The command runs with the endpoint's id in `BATON_ENDPOINT`
//! and prints the token, or JSON `{"token": "...", "expires_in": seconds}`; the engine
//! decides when to run it (before the first call to the endpoint, ahead of expiry, after a
//! 401 of the current token) and runs it once for all concurrent calls.
//!
//! Decisions: `--auth-command` is run by `sh -c` (one string, like a shell line); a
//! TOML `command` is an argument vector, run without a shell. A command that fails (exit
//! status, no output, over [`TIMEOUT`]) is reported by its status and the first line of
//! its stderr; its stdout (which may hold a token) never appears in a message. Output that
//! is not UTF-8 text, or longer than [`MAX_OUTPUT`], is refused by name, never cut or read
//! as no token.

use std::collections::BTreeMap;
use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_core::credential::Token;
use serde::Deserialize;

/// The longest a token command may run.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// The most of a token command's stdout (and stderr) that is read: a token is one line or a
/// small JSON object. Past it the output is read and dropped, so the command can finish,
/// and its token is refused rather than cut.
pub const MAX_OUTPUT: u64 = 1 << 20;

/// One `[endpoint.auth]` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// The command and its arguments (no shell).
    pub command: Vec<String>,
    /// The header that carries the token (default `authorization`).
    #[serde(default)]
    pub header: Option<String>,
    /// The scheme before the token (default `Bearer`; `""` sends the token alone).
    #[serde(default)]
    pub scheme: Option<String>,
    /// Refresh this long before the token expires (default 30 s).
    #[serde(default, deserialize_with = "crate::config::opt_duration")]
    pub refresh_margin: Option<Duration>,
    /// A 403 invalidates and refreshes the token as a 401 does (default false).
    #[serde(default)]
    pub refresh_on_403: bool,
}

impl AuthConfig {
    /// The command given by `--auth-command`, for every endpoint.
    pub fn shell(line: &str) -> AuthConfig {
        AuthConfig {
            command: vec!["sh".into(), "-c".into(), line.into()],
            header: None,
            scheme: None,
            refresh_margin: None,
            refresh_on_403: false,
        }
    }

    /// The endpoint's credential settings; the error names the bad key.
    pub fn settings(
        &self,
        endpoint: &str,
    ) -> Result<baton_core::credential::CredentialSettings, String> {
        let mut s = baton_core::credential::CredentialSettings::default();
        if self.command.is_empty() || self.command[0].is_empty() {
            return Err(format!(
                "[endpoint.auth] of {endpoint:?}: `command` must name a program"
            ));
        }
        if let Some(h) = &self.header {
            s.header = http::HeaderName::try_from(h.as_str()).map_err(|_| {
                format!("[endpoint.auth] of {endpoint:?}: header {h:?} is not a header name")
            })?;
        }
        if let Some(scheme) = &self.scheme {
            s.scheme = (!scheme.is_empty()).then(|| scheme.clone());
        }
        if let Some(m) = self.refresh_margin {
            s.refresh_margin = m;
        }
        s.refresh_on_403 = self.refresh_on_403;
        s.validate()
            .map_err(|e| format!("[endpoint.auth] of {endpoint:?}: {e}"))?;
        Ok(s)
    }
}

/// The commands per endpoint id: the CLI's token provider.
#[derive(Debug, Clone, Default)]
pub struct Commands(Arc<BTreeMap<String, Vec<String>>>);

impl Commands {
    /// The commands of these endpoints.
    pub fn new(by_endpoint: BTreeMap<String, Vec<String>>) -> Self {
        Commands(Arc::new(by_endpoint))
    }

    /// Whether any endpoint has one.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Runs `endpoint`'s command and reads its token.
    pub fn token(&self, endpoint: &str) -> Result<Token, String> {
        let argv = self
            .0
            .get(endpoint)
            .ok_or_else(|| format!("endpoint {endpoint:?} has no token command"))?;
        run(argv, endpoint)
    }
}

/// Runs `argv` with `BATON_ENDPOINT` set; its stdout is the token.
fn run(argv: &[String], endpoint: &str) -> Result<Token, String> {
    let program = &argv[0];
    let mut child = Command::new(program)
        .args(&argv[1..])
        .env("BATON_ENDPOINT", endpoint)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("token command {program:?} could not start: {e}"))?;
    let (out, err) = (child.stdout.take(), child.stderr.take());
    let stdout = Pipe::read(out.map(|p| Box::new(p) as Box<dyn Read + Send>));
    let stderr = Pipe::read(err.map(|p| Box::new(p) as Box<dyn Read + Send>));
    let until = Instant::now() + TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if Instant::now() >= until => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "token command {program:?} ran over {TIMEOUT:?} and was killed"
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(format!("token command {program:?}: {e}")),
        }
    };
    // A process the command left running may hold its pipes open: what was written by
    // the time the command exited (and a moment after) is its output.
    let grace = Instant::now() + PIPE_GRACE;
    let (stdout, stderr) = (stdout.output(grace), stderr.output(grace));
    let stderr = String::from_utf8_lossy(&stderr);
    if !status.success() {
        let why = stderr.lines().next().unwrap_or("").trim();
        return Err(format!(
            "token command {program:?} failed ({status}){}",
            if why.is_empty() {
                String::new()
            } else {
                format!(": {why}")
            }
        ));
    }
    let stdout = match std::str::from_utf8(&stdout) {
        _ if stdout.len() as u64 > MAX_OUTPUT => Err("printed more than 1 MiB".to_string()),
        Ok(text) => parse(text),
        Err(_) => Err("printed output that is not UTF-8 text".to_string()),
    };
    stdout.map_err(|e| format!("token command {program:?}: {e}"))
}

/// How long after a token command exited its pipes may still bring output.
const PIPE_GRACE: Duration = Duration::from_millis(200);

/// One of a token command's pipes, read on a thread of its own (a chatty command cannot
/// block on a full pipe), into a buffer that keeps at most `MAX_OUTPUT + 1` bytes.
struct Pipe {
    bytes: Arc<std::sync::Mutex<Vec<u8>>>,
    ended: std::sync::mpsc::Receiver<()>,
}

impl Pipe {
    fn read(pipe: Option<Box<dyn Read + Send>>) -> Pipe {
        let bytes = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (done, ended) = std::sync::mpsc::channel();
        let into = bytes.clone();
        std::thread::spawn(move || {
            if let Some(mut pipe) = pipe {
                let mut chunk = [0u8; 8192];
                while let Ok(n @ 1..) = pipe.read(&mut chunk) {
                    let mut kept = into.lock().unwrap_or_else(|e| e.into_inner());
                    let room = (MAX_OUTPUT as usize + 1).saturating_sub(kept.len());
                    kept.extend_from_slice(&chunk[..n.min(room)]);
                }
            }
            let _ = done.send(());
        });
        Pipe { bytes, ended }
    }

    /// What was read: everything, once the pipe ended, or by `until`, what came so far.
    fn output(self, until: Instant) -> Vec<u8> {
        let _ = (self.ended).recv_timeout(until.saturating_duration_since(Instant::now()));
        let mut kept = self.bytes.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::take(&mut *kept)
    }
}

/// The token in a command's output: the trimmed text, or a JSON object with `token` and
/// optional `expires_in` (seconds).
pub fn parse(out: &str) -> Result<Token, String> {
    #[derive(Deserialize)]
    struct Json {
        token: String,
        #[serde(default)]
        expires_in: Option<f64>,
    }
    let text = out.trim();
    if text.is_empty() {
        return Err("printed no token".into());
    }
    if !text.starts_with('{') {
        if text.contains(['\n', '\r']) {
            return Err("printed more than one line (print the token alone, or JSON)".into());
        }
        return Ok(Token::new(text));
    }
    let j: Json = serde_json::from_str(text).map_err(|e| {
        format!(
            "its JSON output is not {{\"token\", \"expires_in\"}}: {}",
            e.classify_message()
        )
    })?;
    if j.token.is_empty() {
        return Err("printed an empty token".into());
    }
    let token = Token::new(j.token);
    match j.expires_in {
        None => Ok(token),
        Some(s) => Duration::try_from_secs_f64(s)
            .map(|d| token.expires_in(d))
            .map_err(|_| format!("expires_in {s} is not a number of seconds")),
    }
}

trait Classify {
    fn classify_message(&self) -> &'static str;
}

impl Classify for serde_json::Error {
    /// The kind of JSON error, without its text (which could quote the token).
    fn classify_message(&self) -> &'static str {
        match self.classify() {
            serde_json::error::Category::Io => "unreadable",
            serde_json::error::Category::Syntax => "invalid JSON",
            serde_json::error::Category::Data => "a field has the wrong type or is missing",
            serde_json::error::Category::Eof => "the JSON ends early",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A command that leaves a process holding its stdout (`sleep 5 &`) gives the token it
    /// printed when it exits: baton does not wait for the pipe's end. Before, it waited for
    /// the background process (past the engine's 30 s provider limit, for a longer one).
    #[test]
    fn a_background_process_holding_the_pipe_does_not_hold_the_token() {
        let argv = ["sh", "-c", "sleep 5 & echo tok"].map(String::from);
        let started = Instant::now();
        let token = run(&argv, "a").unwrap();
        assert_eq!(token.secret().expose(), "tok");
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn plain_and_json_output() {
        assert_eq!(parse("abc\n").unwrap().secret().expose(), "abc");
        let t = parse(r#"{"token": "xyz", "expires_in": 300}"#).unwrap();
        assert_eq!(
            (t.secret().expose(), t.valid_for()),
            ("xyz", Some(Duration::from_secs(300)))
        );
        assert!(parse("").is_err());
        assert!(parse("a\nb").is_err());
        let e = parse(r#"{"token": 5, "secret": "sk_live_1"}"#).unwrap_err();
        assert!(!e.contains("sk_live_1"), "{e}");
    }

    #[test]
    fn a_command_gets_its_endpoint_and_its_failure_is_named_without_stdout() {
        let c = Commands::new(BTreeMap::from([
            (
                "a".to_string(),
                vec![
                    "sh".into(),
                    "-c".into(),
                    "printf 'tok-%s' \"$BATON_ENDPOINT\"".into(),
                ],
            ),
            (
                "b".to_string(),
                vec![
                    "sh".into(),
                    "-c".into(),
                    "echo secret-out; echo 'vault sealed' >&2; exit 3".into(),
                ],
            ),
        ]));
        assert_eq!(c.token("a").unwrap().secret().expose(), "tok-a");
        let e = c.token("b").unwrap_err();
        assert!(
            e.contains("vault sealed") && !e.contains("secret-out"),
            "{e}"
        );
    }

    #[test]
    fn output_that_is_not_text_or_too_long_is_named_not_taken_for_no_token() {
        let sh = |line: &str| vec!["sh".to_string(), "-c".to_string(), line.to_string()];
        let c = Commands::new(BTreeMap::from([
            ("bin".to_string(), sh("printf 'tok\\377'")),
            // 2 MiB of one line: drained, so the command ends on its own, then refused.
            (
                "long".to_string(),
                sh("head -c 2097152 /dev/zero | tr '\\0' a"),
            ),
        ]));
        let e = c.token("bin").unwrap_err();
        assert!(e.ends_with("printed output that is not UTF-8 text"), "{e}");
        let e = c.token("long").unwrap_err();
        assert!(e.ends_with("printed more than 1 MiB"), "{e}");
    }
}
