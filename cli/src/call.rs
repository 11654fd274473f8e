//! One call as the CLI describes it (`request` flags or a `batch` line), and what came of it.
//!
//! A [`CallSpec`] is runtime-neutral; `runner` hands it to an adapter. A [`CallResult`]
//! holds the report, the response (status, headers, body) or the error, and maps to the
//! exit status of `request` and the output line of `batch`.

use std::collections::BTreeMap;
use std::io::Read;
use std::time::Duration;

use baton_core::{CallOptions, ErrorKind, Permission, Report, StopReason};
use serde::Deserialize;

use crate::args::{CallArgs, Choice};

/// One call, before it is handed to a runtime.
#[derive(Debug, Clone, Default)]
pub struct CallSpec {
    /// The method as given (checked when the call runs: an invalid one is an invalid call).
    pub method: String,
    /// Path (and query), or an absolute URL.
    pub path: String,
    /// Headers in order.
    pub headers: Vec<(String, String)>,
    /// The body (replayable bytes), if any.
    pub body: Option<Vec<u8>>,
    /// The engine's per-call options (permissions, preference, deadline, identity...).
    pub options: CallOptions,
}

fn permission(c: Choice) -> Option<Permission> {
    match c {
        Choice::Allow => Some(Permission::Always),
        Choice::Deny => Some(Permission::Never),
        Choice::Auto => None,
    }
}

impl CallSpec {
    /// The engine's per-call options.
    pub fn options(&self) -> CallOptions {
        self.options.clone()
    }

    /// The call described by `request`'s flags. `stdin` is read for `-d @-`.
    pub fn from_args(args: &CallArgs, path: &str) -> Result<CallSpec, String> {
        let body = match &args.data {
            None => None,
            Some(d) if d == "@-" => {
                let mut buf = Vec::new();
                std::io::stdin()
                    .read_to_end(&mut buf)
                    .map_err(|e| format!("--data @-: cannot read stdin: {e}"))?;
                Some(buf)
            }
            Some(d) => match d.strip_prefix('@') {
                Some(file) => Some(
                    std::fs::read(file).map_err(|e| format!("--data @{file}: cannot read: {e}"))?,
                ),
                None => Some(d.clone().into_bytes()),
            },
        };
        let method = match &args.method {
            Some(m) => m.clone(),
            None if body.is_some() => "POST".into(),
            None => "GET".into(),
        };
        let headers = args
            .headers
            .iter()
            .map(|h| parse_header(h))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(CallSpec {
            method,
            path: path.to_string(),
            headers,
            body,
            options: CallOptions {
                retry: permission(args.retry),
                failover: permission(args.failover),
                prefer: args.prefer.clone(),
                idempotency_key: args.idempotency_key.clone(),
                request_id: args.request_id.clone(),
                ..CallOptions::default()
            },
        })
    }
}

/// Parses `-H 'Name: value'`.
pub fn parse_header(text: &str) -> Result<(String, String), String> {
    match text.split_once(':') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.trim().to_string())),
        // Only a leading header name is quoted (its token characters, at most 40): the
        // rest may be a secret (`Authorization Bearer ...`, `X-Api-Key=...`, a token
        // passed alone).
        _ => {
            let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
            let name: String = text
                .trim()
                .chars()
                .take_while(|&c| token(c))
                .take(40)
                .collect();
            Err(format!(
                "--header starting {name:?}: expected 'Name: value' (the rest is not shown)"
            ))
        }
    }
}

/// One line of `batch` input: the call's own keys, and any per-call option of the
/// engine's text form ([`CallOptions`]: `prefer`, `only`, `deny`, `deadline`,
/// `attempt_timeout`, `attempts_per_endpoint`, `max_attempts`, `request_id`,
/// `idempotency_key`, `hedge`). `retry` and `failover` take the CLI's words
/// (`allow`, `deny`, `auto`), and `deadline_ms` is a deadline in milliseconds (give it or
/// `deadline`, not both). Any other key is an error.
#[derive(Debug, Deserialize)]
pub struct BatchLine {
    /// Echoed back in the output line (any JSON value).
    #[serde(default)]
    pub id: serde_json::Value,
    /// Method (default GET, or POST with a body).
    #[serde(default)]
    pub method: Option<String>,
    /// Path (default `/`).
    #[serde(default)]
    pub path: Option<String>,
    /// Headers (a name given twice is an error: one of its values would be lost).
    #[serde(default, deserialize_with = "unique_headers")]
    pub headers: BTreeMap<String, String>,
    /// Body text.
    #[serde(default)]
    pub body: Option<String>,
    /// Failover permission word.
    #[serde(default)]
    pub failover: Choice,
    /// Retry permission word.
    #[serde(default)]
    pub retry: Choice,
    /// Deadline of this call, in milliseconds.
    #[serde(default)]
    pub deadline_ms: Option<u64>,
    /// The engine's per-call options (its `retry` and `failover` are the words above).
    #[serde(flatten)]
    pub options: CallOptions,
    /// Keys that are neither the line's nor an option (a line with one is rejected).
    #[serde(flatten)]
    unknown: BTreeMap<String, serde_json::Value>,
}

/// A batch line's `headers` object, refusing a name given twice (JSON keeps only one of
/// a repeated key, silently).
fn unique_headers<'de, D>(d: D) -> Result<BTreeMap<String, String>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    struct Headers;
    impl<'de> serde::de::Visitor<'de> for Headers {
        type Value = BTreeMap<String, String>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an object of header names and string values")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out = BTreeMap::new();
            while let Some((name, value)) = map.next_entry::<String, String>()? {
                if out.contains_key(&name) {
                    return Err(serde::de::Error::custom(format!(
                        "header {name:?} is given twice in `headers` (one value would be lost); \
                         give its values in one, comma-separated"
                    )));
                }
                out.insert(name, value);
            }
            Ok(out)
        }
    }
    d.deserialize_map(Headers)
}

/// The key of a line that fails to parse, with why (serde cannot name a key inside the
/// flattened call options, and points past the object instead): each key is parsed
/// alone. `None`: no single key is at fault (the line is not an object, or keys clash).
fn the_bad_key(line: &str) -> Option<String> {
    let serde_json::Value::Object(map) = serde_json::from_str(line).ok()? else {
        return None;
    };
    map.into_iter().find_map(|(key, value)| {
        // `headers` that is not an object is refused without quoting it (serde's message
        // would): it is likely a header's value, and values may be secrets.
        if key == "headers" && !value.is_object() {
            let why = "expected an object of header names and string values (not shown)";
            return Some(format!("`headers`: {why}"));
        }
        let alone = serde_json::Value::Object([(key.clone(), value)].into_iter().collect());
        serde_json::from_value::<BatchLine>(alone)
            .err()
            .map(|e| format!("`{key}`: {e}"))
    })
}

impl BatchLine {
    /// Parses one input line.
    pub fn parse(line: &str) -> Result<BatchLine, String> {
        let l: BatchLine = serde_json::from_str(line)
            .map_err(|e| the_bad_key(line).unwrap_or_else(|| e.to_string()))?;
        if let Some(key) = l.unknown.keys().next() {
            return Err(format!(
                "unknown field `{key}` (not a batch key nor a call option)"
            ));
        }
        if l.deadline_ms == Some(0) {
            return Err("deadline_ms must be at least 1".into());
        }
        if l.deadline_ms.is_some() && l.options.deadline.is_some() {
            return Err("give deadline_ms or deadline, not both".into());
        }
        Ok(l)
    }

    /// The call it describes.
    pub fn spec(&self) -> CallSpec {
        let body = self.body.clone().map(String::into_bytes);
        let mut options = self.options.clone();
        options.retry = permission(self.retry);
        options.failover = permission(self.failover);
        if let Some(ms) = self.deadline_ms {
            options.deadline = Some(Duration::from_millis(ms));
        }
        CallSpec {
            method: self.method.clone().unwrap_or_else(|| {
                if body.is_some() {
                    "POST".into()
                } else {
                    "GET".into()
                }
            }),
            path: self.path.clone().unwrap_or_else(|| "/".into()),
            headers: self
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            body,
            options,
        }
    }
}

/// What a call ended with, whatever the runtime.
#[derive(Debug, Clone)]
pub struct CallResult {
    /// The engine's report (absent only when the CLI rejected the call before an adapter
    /// saw it, e.g. an invalid method).
    pub report: Option<Report>,
    /// The response head, when a response was returned.
    pub response: Option<ResponseHead>,
    /// The whole response body, when it was read completely.
    pub body: Option<Vec<u8>>,
    /// The failure, if the call did not return a complete response.
    pub failure: Option<Failure>,
    /// The request id the call was given, for a call rejected before an adapter saw it
    /// (otherwise the report's).
    pub request_id: Option<String>,
}

/// Status and headers of the returned response.
#[derive(Debug, Clone)]
pub struct ResponseHead {
    /// Status code.
    pub status: u16,
    /// The endpoint that answered.
    pub endpoint: String,
    /// Response headers, in order.
    pub headers: Vec<(String, String)>,
}

/// Why a call has no complete response.
#[derive(Debug, Clone)]
pub struct Failure {
    /// `failover`, `no_usable_endpoint`, ... (the engine's error kind), or `body` when the
    /// response head arrived but its body could not be read.
    pub kind: String,
    /// A human-readable message (attempts, request id, last cause).
    pub message: String,
    /// The exit status of `request` for this failure.
    pub exit: u8,
}

/// Exit status of `request` for an engine error kind, the call's stop reason, and whether
/// the call may have executed (`sent`: the report's `may_have_executed`).
///
/// The kind decides, except that:
/// - a failover error whose stop reason is `no_usable_endpoint` (every endpoint left went
///   into cooldown during the call and `--cooldown-mode skip` left nothing to try) exits 4
///   like a call that found no usable endpoint at its start: in both cases nothing was
///   left to try;
/// - an invalid call exits 2 ("nothing sent", fix the input and run it again) only when
///   nothing may have executed: a request rejected for a later endpoint after an earlier
///   attempt that may have executed exits 3, as any call that tried and failed.
pub fn exit_for(kind: &ErrorKind, stop: StopReason, sent: bool) -> u8 {
    match kind {
        ErrorKind::InvalidCall(_) | ErrorKind::UnknownEndpoint(_) if !sent => 2,
        ErrorKind::NoUsableEndpoint => 4,
        ErrorKind::Failover if stop == StopReason::NoUsableEndpoint => 4,
        ErrorKind::Deadline => 5,
        ErrorKind::RetryAfterTooLong(_) => 6,
        // Failover, Budget, RateLimited, Cancelled and kinds added later: the call ended
        // without a usable answer after trying.
        _ => 3,
    }
}

/// Exit status when the response head arrived but the body could not be read (or decoded,
/// or was over `--max-body`).
pub const EXIT_BODY: u8 = 7;

/// Exit status when the body could not be written to stdout or the `-o` file (curl's 23).
pub const EXIT_OUTPUT: u8 = 23;

impl Failure {
    /// Reading the body failed after the head arrived (`message`: the error chain).
    pub fn body(message: String) -> Failure {
        Failure {
            kind: "body".into(),
            message,
            exit: EXIT_BODY,
        }
    }

    /// A sink stopped the body.
    pub fn from_stop(stop: crate::body::Stop) -> Failure {
        use crate::body::Stop;
        match stop {
            Stop::TooLarge(max) => Failure {
                kind: "body_too_large".into(),
                message: format!("the response body is larger than --max-body {max} bytes"),
                exit: EXIT_BODY,
            },
            Stop::Decode(e) => Failure::body(format!("the body could not be decoded: {e}")),
            Stop::Output(e) => Failure {
                kind: "output".into(),
                message: format!("writing the body failed: {e}"),
                exit: EXIT_OUTPUT,
            },
        }
    }
}

impl CallSpec {
    /// With `--compressed`: asks for gzip and deflate, unless the call names an encoding.
    pub fn ask_compressed(&mut self) {
        if !self
            .headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("accept-encoding"))
        {
            self.headers.push((
                "accept-encoding".into(),
                crate::body::ACCEPT_ENCODING.into(),
            ));
        }
    }
}

impl CallResult {
    /// A call that failed in the engine (or adapter), with its report.
    pub fn error(kind: &ErrorKind, report: Report, message: String) -> CallResult {
        CallResult {
            failure: Some(Failure {
                kind: kind.as_str().to_string(),
                message,
                exit: exit_for(kind, report.stop_reason, report.may_have_executed),
            }),
            report: Some(report),
            response: None,
            body: None,
            request_id: None,
        }
    }

    /// A call the CLI rejected before any adapter saw it (nothing sent).
    pub fn invalid(message: String) -> CallResult {
        CallResult {
            report: None,
            response: None,
            body: None,
            failure: Some(Failure {
                kind: "invalid_call".into(),
                message: format!("invalid call: {message}"),
                exit: 2,
            }),
            request_id: None,
        }
    }

    /// A response whose body went to a sink completely (`Ok`) or stopped (`Err`). The
    /// body itself, if collected, is the sink's.
    pub fn response(report: Report, head: ResponseHead, body: Result<(), Failure>) -> CallResult {
        CallResult {
            report: Some(report),
            response: Some(head),
            body: None,
            failure: body.err(),
            request_id: None,
        }
    }

    /// The exit status `request` ends with.
    pub fn exit_code(&self) -> u8 {
        self.failure.as_ref().map_or(0, |f| f.exit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_flag_splits_on_the_first_colon() {
        assert_eq!(
            parse_header("X-A: b: c").unwrap(),
            ("X-A".into(), "b: c".into())
        );
        assert!(parse_header("nocolon").is_err());
        assert!(parse_header(": v").is_err());
    }

    #[test]
    fn batch_line_defaults_and_unknown_fields() {
        let l = BatchLine::parse(r#"{"id":7,"body":"x","retry":"deny","deadline_ms":50}"#).unwrap();
        let s = l.spec();
        assert_eq!((s.method.as_str(), s.path.as_str()), ("POST", "/"));
        assert_eq!(s.options().retry, Some(Permission::Never));
        assert_eq!(s.options().failover, None);
        assert_eq!(s.options.deadline, Some(Duration::from_millis(50)));
        assert!(BatchLine::parse(r#"{"methd":"GET"}"#).is_err());
        assert!(BatchLine::parse(r#"{"retry":"sometimes"}"#).is_err());
        assert!(BatchLine::parse("not json").is_err());
    }

    #[test]
    fn a_bad_line_names_its_key_and_a_repeated_header_is_refused() {
        let e = BatchLine::parse(r#"{"id":1,"max_attempts":"two"}"#).unwrap_err();
        assert!(e.starts_with("`max_attempts`:"), "{e}");
        let e = BatchLine::parse(r#"{"deadline":"soon","id":1}"#).unwrap_err();
        assert!(e.starts_with("`deadline`:"), "{e}");
        let e = BatchLine::parse(r#"{"headers":{"X-Tag":"a","X-Tag":"b"}}"#).unwrap_err();
        assert!(e.contains("\"X-Tag\" is given twice"), "{e}");
        let ok = BatchLine::parse(r#"{"headers":{"X-Tag":"a, b","X-Other":"c"}}"#).unwrap();
        assert_eq!(ok.headers.len(), 2);
    }

    #[test]
    fn batch_lines_take_every_call_option_of_the_engine() {
        let l = BatchLine::parse(
            r#"{"deny":true,"only":"b","attempt_timeout":"250ms","max_attempts":1,"hedge":true,"idempotency_key":"k-1"}"#,
        )
        .unwrap();
        let o = l.spec().options;
        assert!(o.deny && o.hedge);
        assert_eq!(o.only.as_deref(), Some("b"));
        assert_eq!(o.attempt_timeout, Some(Duration::from_millis(250)));
        assert_eq!(o.max_attempts, Some(1));
        assert_eq!(o.idempotency_key.as_deref(), Some("k-1"));
        let d = BatchLine::parse(r#"{"deadline":"2s"}"#).unwrap().spec();
        assert_eq!(d.options.deadline, Some(Duration::from_secs(2)));
        let both = BatchLine::parse(r#"{"deadline":"2s","deadline_ms":5}"#).unwrap_err();
        assert!(both.contains("not both"), "{both}");
        let typo = BatchLine::parse(r#"{"max_attempt":1}"#).unwrap_err();
        assert!(typo.contains("unknown field `max_attempt`"), "{typo}");
        assert!(BatchLine::parse(r#"{"max_attempts":"two"}"#).is_err());
    }

    #[test]
    fn exit_codes_follow_the_error_kind() {
        let e = |k: ErrorKind| exit_for(&k, StopReason::AttemptsExhausted, false);
        assert_eq!(e(ErrorKind::Failover), 3);
        assert_eq!(e(ErrorKind::Budget), 3);
        assert_eq!(e(ErrorKind::RateLimited), 3);
        assert_eq!(e(ErrorKind::NoUsableEndpoint), 4);
        assert_eq!(e(ErrorKind::Deadline), 5);
        assert_eq!(e(ErrorKind::RetryAfterTooLong(Duration::from_secs(60))), 6);
        assert_eq!(
            e(ErrorKind::InvalidCall(baton_core::CallRejection::NotBuilt)),
            2
        );
        assert_eq!(e(ErrorKind::UnknownEndpoint("x".into())), 2);
        assert_eq!(
            exit_for(&ErrorKind::Failover, StopReason::NoUsableEndpoint, true),
            4
        );
        // Rejected for a later endpoint after an attempt that may have executed.
        let late = ErrorKind::InvalidCall(baton_core::CallRejection::NotBuilt);
        assert_eq!(exit_for(&late, StopReason::InvalidCall, true), 3);
    }
}
