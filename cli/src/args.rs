//! The command-line grammar (clap derive). Parsing only: what the values mean is decided in
//! `config` (client settings) and `call` (per-call options).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// `baton`: client-side failover for HTTP calls, from the shell.
#[derive(Debug, Parser)]
#[command(
    name = "baton",
    version,
    about = "curl with failover: one call, a JSON-lines batch through one client, or a local outage demo",
    after_help = "Exit status of `request`: 0 response (any status), 2 invalid usage/configuration/call \
                  (nothing sent), 3 every attempt failed (or budget / rate limit stopped the call), \
                  4 no usable endpoint, 5 deadline exceeded, 6 retry-after too long, 7 the response \
                  body could not be read (part of it may already have been written, as with curl's \
                  18), 23 the body could not be written to stdout or the -o file."
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// One call: the response body to stdout, nothing else on stdout.
    Request(RequestArgs),
    /// Calls as JSON lines on stdin, run through one client; one JSON line per call on stdout.
    Batch(BatchArgs),
    /// Starts local providers on 127.0.0.1 and runs a scripted outage through a client.
    Demo(DemoArgs),
    /// Sends the policy's health request (`[policy.probe]`) to every endpoint and prints
    /// each one's result and breaker state: a health check for scripts.
    #[command(
        after_help = "Exit status of `probe`: 0 every endpoint healthy, 2 invalid usage or \
                      configuration (nothing sent), 3 at least one endpoint unhealthy, 23 \
                      stdout could not be written."
    )]
    Probe(ProbeArgs),
    /// Proves the policy safe and bounds its cost before it ships: explores calls of each
    /// class against fault scripts on the engine's simulator (nothing is sent) and prints,
    /// per class, the safety count, the worst attempts and time (computed and observed),
    /// the attempts per call in a total outage, and the lints.
    #[command(
        after_help = "Exit status of `check`: 0 clean, 1 lints only, 2 invalid usage or \
                      configuration, 8 a safety violation (each violating class's shortest \
                      counterexample is written as a vector file, and its path printed), \
                      23 the report could not be written to stdout."
    )]
    Check(CheckArgs),
    /// Reads a Server-Sent Events stream that resumes across the endpoints: one JSON line
    /// per event on stdout (`endpoint`, `id`, `event`, `data`); with `--events`, the
    /// connections, reconnections, failovers and restarts as JSON lines on stderr.
    #[command(
        after_help = "Exit status of `events`: 0 after --max-events events, or when the \
                      server ended the stream (204); 2 invalid usage, configuration or call \
                      settings (nothing sent); 3 gave up: --max-reconnects reconnections in a \
                      row brought no event; 6 the only endpoint the stream could go on at \
                      asked to wait longer than max_retry_after (Retry-After); 9 a fatal answer (a status other than 200, 204, \
                      408, 429 and 5xx, or a content type that is not text/event-stream); 10 \
                      interrupted: a stream opened by a method that is not safe broke and \
                      could only go on by sending its request again; 11 an event over \
                      --max-event-size; 23 stdout could not be written."
    )]
    Events(EventsArgs),
}

/// Which adapter drives the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum RuntimeKind {
    /// `baton-tokio` (reqwest on a tokio runtime).
    #[default]
    Tokio,
    /// `baton-blocking` (ureq on the calling thread).
    Blocking,
    /// `baton-async-std` (hyper over async-io, driven by async-std).
    AsyncStd,
}

impl RuntimeKind {
    /// The name used on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            RuntimeKind::Tokio => "tokio",
            RuntimeKind::Blocking => "blocking",
            RuntimeKind::AsyncStd => "async-std",
        }
    }
}

/// What to do with endpoints whose breaker is open (`--cooldown-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CooldownMode {
    /// Try them after the available ones (the default).
    Last,
    /// Skip them.
    Skip,
}

/// A per-call permission word (`--failover`, `--retry`, batch `failover` / `retry`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Choice {
    /// `Always`: repeating is harmless (or de-duplicated by the provider).
    Allow,
    /// `Never`: no attempt of this kind.
    Deny,
    /// The spec's inference (safe method, idempotency key, or only while undelivered).
    #[default]
    Auto,
}

/// Options shared by `request` and `batch`: where the endpoints are and the client policy.
#[derive(Debug, Args, Default)]
pub struct ClientArgs {
    /// An endpoint, in priority order (repeatable). Given at least once, these replace the
    /// endpoints of `--config`.
    #[arg(short = 'e', long = "endpoint", value_name = "ID=URL")]
    pub endpoints: Vec<String>,
    /// Endpoint URLs are bases: PATH is joined onto them (REST style). Default: each
    /// endpoint URL is the complete destination (JSON-RPC style), and a PATH other than
    /// "/" is refused, since it would not be sent.
    #[arg(long)]
    pub base: bool,
    /// A TOML file holding endpoints and the whole policy (see cli/examples/policy.toml);
    /// flags override it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Which adapter drives the calls.
    #[arg(long, value_enum, default_value = "tokio")]
    pub runtime: RuntimeKind,
    /// Every engine event as a JSON line on stderr.
    #[arg(long)]
    pub events: bool,
    /// A token command for every endpoint without its own `[endpoint.auth]`: run by `sh -c`
    /// with the endpoint id in BATON_ENDPOINT, it prints the token (sent as
    /// `authorization: Bearer <token>`) or JSON {"token": ..., "expires_in": seconds}.
    /// It runs once for all concurrent calls, ahead of expiry and after a 401.
    #[arg(long, value_name = "CMD")]
    pub auth_command: Option<String>,
    /// Attempt timeout, from sending to the end of the response headers (seconds, or "250ms").
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    pub timeout: Option<Duration>,
    /// Connect timeout per attempt (seconds, or "250ms").
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    pub connect_timeout: Option<Duration>,
    /// Deadline for each whole call (seconds, or "250ms").
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    pub deadline: Option<Duration>,
    /// Reading a response body: at most this long after its headers (default: the attempt
    /// timeout); a body that stalls past it exits 7.
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    pub body_timeout: Option<Duration>,
    /// Attempts per endpoint per round.
    #[arg(long, value_name = "N")]
    pub attempts_per_endpoint: Option<u32>,
    /// Cap on a call's attempts (more than one round when larger than the endpoint count).
    #[arg(long, value_name = "N")]
    pub max_attempts: Option<u32>,
    /// Ignore HTTP_PROXY, HTTPS_PROXY, ALL_PROXY and NO_PROXY: connect directly.
    #[arg(long)]
    pub no_env_proxies: bool,
    /// Redirects followed within one attempt (default 10; 0 returns every 3xx as the
    /// answer). Redirects to another origin never carry the endpoint's headers.
    #[arg(long, value_name = "N")]
    pub max_redirects: Option<u32>,
    /// Adds a status to the trigger set of reads and explicitly allowed calls (repeatable;
    /// extends {502, 503, 504}). Keyed writes keep their own set.
    #[arg(long, value_name = "CODE", value_parser = clap::value_parser!(u16).range(100..=999))]
    pub trigger_status: Vec<u16>,
    /// Adds a status to the trigger set of calls relying on an idempotency key (repeatable;
    /// extends {503}): only for statuses the provider documents as safe to repeat.
    #[arg(long, value_name = "CODE", value_parser = clap::value_parser!(u16).range(100..=999))]
    pub key_trigger_status: Vec<u16>,
    /// Adds a status the provider promises means "nothing done" (repeatable; extends {429}).
    #[arg(long, value_name = "CODE", value_parser = clap::value_parser!(u16).range(100..=999))]
    pub not_processed: Vec<u16>,
    /// Consecutive failures that put an endpoint in cooldown (breaker opens).
    #[arg(long, value_name = "N")]
    pub cooldown_threshold: Option<u32>,
    /// Base cooldown (breaker open time; seconds, or "250ms").
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    pub cooldown: Option<Duration>,
    /// Endpoints in cooldown are tried last (default) or skipped.
    #[arg(long, value_enum, value_name = "last|skip")]
    pub cooldown_mode: Option<CooldownMode>,
    /// Hedge reads: start the next endpoint after this many milliseconds (or "150ms", "1s").
    #[arg(long, value_name = "MS", value_parser = parse_millis)]
    pub hedge_after: Option<Duration>,
    /// HTTP/1.1 only (the policy's `http_version = "http1"`; an endpoint's own
    /// `http_version` in the config file still wins).
    #[arg(long = "http1.1", group = "http_version")]
    pub http1_1: bool,
    /// HTTP/2 where the provider agrees, as curl's flag: https offers h2 and http/1.1 by
    /// ALPN (`http_version = "auto"`, the default; http:// stays HTTP/1.1: no Upgrade).
    #[arg(long = "http2", group = "http_version")]
    pub http2: bool,
    /// HTTP/2 only (`http_version = "http2"`): h2 with prior knowledge on http://, ALPN
    /// h2 alone on https://. The blocking runtime (HTTP/1.1 only) refuses it.
    #[arg(long = "http2-prior-knowledge", group = "http_version")]
    pub http2_prior_knowledge: bool,
    /// Trust the PEM certificates of FILE on top of the platform's trust store, for every
    /// endpoint (`[policy.tls] ca_file`) but one whose `[endpoint.tls]` names its own.
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,
    /// Present the PEM client certificate (chain) of FILE to every endpoint (mTLS;
    /// `[policy.tls] client_cert`) but one whose `[endpoint.tls]` names its own identity;
    /// needs --key.
    #[arg(long, value_name = "FILE")]
    pub cert: Option<PathBuf>,
    /// The unencrypted PEM private key of --cert (`[policy.tls] client_key`).
    #[arg(long, value_name = "FILE")]
    pub key: Option<PathBuf>,
}

/// Per-call options of `request` (the batch line fields mirror them).
#[derive(Debug, Args, Default)]
pub struct CallArgs {
    /// Method (default GET, or POST when --data is given).
    #[arg(short = 'X', long, value_name = "METHOD")]
    pub method: Option<String>,
    /// Request body: a string, `@FILE`, or `@-` for stdin.
    #[arg(short = 'd', long, value_name = "DATA")]
    pub data: Option<String>,
    /// A header 'Name: value' (repeatable).
    #[arg(short = 'H', long = "header", value_name = "'K: V'")]
    pub headers: Vec<String>,
    /// Failover permission: allow (Always), deny (Never), auto (the spec's inference).
    #[arg(long, value_enum, default_value = "auto")]
    pub failover: Choice,
    /// Retry permission: allow (Always), deny (Never), auto (the spec's inference).
    #[arg(long, value_enum, default_value = "auto")]
    pub retry: Choice,
    /// Try this endpoint first (when available).
    #[arg(long, value_name = "ID")]
    pub prefer: Option<String>,
    /// Idempotency key, sent unchanged on every attempt.
    #[arg(long, value_name = "KEY")]
    pub idempotency_key: Option<String>,
    /// Request id (8-128 of A-Z a-z 0-9 . _ : -), sent unchanged on every attempt.
    #[arg(long, value_name = "ID")]
    pub request_id: Option<String>,
}

/// `baton probe`.
#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// Client options.
    #[command(flatten)]
    pub client: ClientArgs,
    /// One JSON line per endpoint instead of the text table.
    #[arg(long)]
    pub json: bool,
}

/// `baton check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Client options (the policy checked: `--config`, `-e`, the policy flags).
    #[command(flatten)]
    pub client: ClientArgs,
    /// Calls to explore: every fault script up to the longest length that fits, then
    /// seeded random sessions.
    #[arg(long, default_value_t = 10_000, value_name = "N",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub calls: usize,
    /// Seed of the random sessions (and of the engine, when the policy sets none).
    #[arg(long, default_value_t = 1, value_name = "S")]
    pub seed: u64,
    /// One JSON object on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Where counterexample vector files are written (created, as `mkdir -p` would, when
    /// missing).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub out: PathBuf,
}

/// `baton request [PATH]`.
#[derive(Debug, Args)]
pub struct RequestArgs {
    /// Client options.
    #[command(flatten)]
    pub client: ClientArgs,
    /// Per-call options.
    #[command(flatten)]
    pub call: CallArgs,
    /// Print the status line and response headers to stderr.
    #[arg(short = 'i', long)]
    pub include: bool,
    /// Write the body to FILE instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// No progress meter (it is shown on stderr when stdout is not a terminal and stderr
    /// is).
    #[arg(short = 's', long)]
    pub silent: bool,
    /// Ask for a compressed body (gzip, deflate) and decode it as it streams.
    #[arg(long)]
    pub compressed: bool,
    /// The request path (and query); joined onto base endpoints with --base.
    #[arg(value_name = "PATH", default_value = "/")]
    pub path: String,
}

/// `baton events [PATH]`.
#[derive(Debug, Args)]
pub struct EventsArgs {
    /// Client options.
    #[command(flatten)]
    pub client: ClientArgs,
    /// Per-call options (of every connection).
    #[command(flatten)]
    pub call: CallArgs,
    /// No byte (heartbeat comments count) for this long closes the connection and
    /// reconnects (seconds, or "250ms"; default: none).
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    pub idle_timeout: Option<Duration>,
    /// Stop after N events (at least 1), exit 0.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_events: Option<u64>,
    /// The endpoints share event ids (one feed behind several providers): `Last-Event-ID`
    /// goes along to another endpoint, and the stream resumes there instead of restarting.
    #[arg(long)]
    pub shared_event_ids: bool,
    /// Reconnections in a row without an event before giving up (default 10).
    #[arg(long, value_name = "N")]
    pub max_reconnects: Option<u32>,
    /// Reconnections in a row to one endpoint without an event before moving to the next
    /// (default 2).
    #[arg(long, value_name = "N")]
    pub reconnects_per_endpoint: Option<u32>,
    /// The largest event, in bytes (default 1 MiB).
    #[arg(long, value_name = "BYTES")]
    pub max_event_size: Option<usize>,
    /// The request path (and query); joined onto base endpoints with --base.
    #[arg(value_name = "PATH", default_value = "/")]
    pub path: String,
}

/// `baton batch`.
#[derive(Debug, Args)]
pub struct BatchArgs {
    /// Client options.
    #[command(flatten)]
    pub client: ClientArgs,
    /// Calls in flight at once (output stays in input order).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub concurrency: u16,
    /// The largest (decoded) body a line may return; a larger one gives that line the
    /// error kind `body_too_large`.
    #[arg(long, value_name = "BYTES", default_value_t = 8 * 1024 * 1024)]
    pub max_body: usize,
    /// Ask for compressed bodies (gzip, deflate) and decode them; decoded bytes count
    /// against --max-body.
    #[arg(long)]
    pub compressed: bool,
}

/// `baton demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Which adapter drives the calls.
    #[arg(long, value_enum, default_value = "tokio")]
    pub runtime: RuntimeKind,
    /// Also print every engine event as a JSON line on stderr.
    #[arg(long)]
    pub events: bool,
}

/// Seconds (`1.5`) or a duration with a unit (`250ms`, `2s`, `1m`).
pub fn parse_secs(text: &str) -> Result<Duration, String> {
    baton_core::serde_duration::parse(text)
}

/// Milliseconds (`150`, and any other number without a unit: `1e3`, `+150`) or a duration
/// with a unit (`150ms`, `1s`).
pub fn parse_millis(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if let Ok(ms) = t.parse::<f64>() {
        if !ms.is_finite() || ms < 0.0 {
            return Err(format!("{text:?} is not a number of milliseconds"));
        }
        return Duration::try_from_secs_f64(ms / 1000.0)
            .map_err(|_| format!("{text:?} is out of range"));
    }
    baton_core::serde_duration::parse(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_accept_seconds_and_units() {
        assert_eq!(parse_secs("1.5").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_secs("250ms").unwrap(), Duration::from_millis(250));
        assert!(parse_secs("-1").is_err());
        assert!(parse_secs("soon").is_err());
        assert_eq!(parse_millis("150").unwrap(), Duration::from_millis(150));
        assert_eq!(parse_millis("2s").unwrap(), Duration::from_secs(2));
        // A number without a unit is milliseconds whatever its notation.
        assert_eq!(parse_millis("1e3").unwrap(), Duration::from_secs(1));
        assert_eq!(parse_millis("+150").unwrap(), Duration::from_millis(150));
        assert!(parse_millis("-5").is_err());
        assert!(parse_millis("inf").is_err());
    }

    #[test]
    fn command_line_grammar_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
