//! # `baton`: client-side failover from the command line
//!
//! "curl with failover" for shell scripts and ops drills, a JSON-lines batch runner that
//! pushes many calls through one client, and a demo that runs with no network. Every
//! decision (which endpoint, whether another attempt is allowed and safe, when to wait,
//! when to stop) is made by `baton-core`; `--runtime` picks the adapter that sends.
//!
//! ```text
//! baton request [OPTIONS] [PATH]      one call; the response body to stdout, nothing else
//! baton batch   [OPTIONS]             JSON lines on stdin -> one JSON line per call on stdout
//! baton demo    [--runtime R] [--events]   a scripted outage against local providers
//! baton probe   [OPTIONS] [--json]    the health request to every endpoint: a check for scripts
//! baton check   [--config FILE | -e ...] [--calls N] [--seed S] [--json] [--out DIR]
//!                                     prove the policy safe and bound its cost; nothing is sent
//! baton events  [OPTIONS] [PATH]      a Server-Sent Events stream that resumes across providers
//! ```
//!
//! `events` reads one event stream through the client: every connection is one call (the
//! client options and call options apply to each), reconnecting to the same endpoint first
//! with `Last-Event-ID`, then failing over along the order. stdout gets one JSON line per
//! event: `{"endpoint": "a", "id": "41"|null, "event": "message", "data": "..."}` (`id` is
//! the last event ID at dispatch, `event` the type, `data` the joined data lines). With
//! `--events`, stderr gets the engine's events and the stream's: `stream_opened`
//! (`endpoint`, `last_event_id`), `stream_reconnecting` (`from`, `to`, `after_ms`,
//! `reason`, `status`, `failover`) and `stream_restarted` (`endpoint`: the endpoints do not
//! share ids, so events may come again). `--idle-timeout SECS` reconnects after a silence,
//! `--max-events N` stops after N events (exit 0), `--shared-event-ids` carries
//! `Last-Event-ID` to every endpoint; `--max-reconnects N`, `--reconnects-per-endpoint N`
//! and `--max-event-size BYTES` set the other stream settings. Exit status 0 after
//! `--max-events` or a 204, 2 invalid usage, 3 gave up (reconnections without an event),
//! 6 a `Retry-After` too long where the stream could only stay, 9 a fatal answer, 10 an unsafe stream interrupted, 11 an event too large, 23 stdout
//! failed.
//!
//! Tokens (SPEC 9): an `[endpoint.auth]` table (`command` = an argument vector, optional
//! `header` (default `authorization`), `scheme` (default `Bearer`, `""` for none),
//! `refresh_margin`, `refresh_on_403`) or `--auth-command CMD` (run by `sh -c`, for every
//! endpoint without its own table) gives the endpoint a credential slot. The command runs
//! with the endpoint id in `BATON_ENDPOINT` and prints the token, or
//! `{"token": "...", "expires_in": seconds}`; it runs once for all concurrent calls (before
//! the first call, ahead of expiry, after a 401 of the current token), at most 30 s.
//! Its stdout never appears in a message; a failure is named by its status and stderr.
//!
//! `check` explores the policy's calls (safe reads: GET; writes and keyed writes: POST;
//! `[permissions]` for PUT, PATCH and DELETE that allow a repeat are linted; with and without
//! a deadline; replayable and one-shot bodies) against fault scripts on the engine's
//! simulator: every fault at every attempt position for short scripts, then seeded random
//! sessions of several calls (`--calls N`, default 10,000; `--seed S`, default 1). It
//! prints one row per class: calls explored, calls that broke a safety rule (a request
//! that could not safely repeat reaching a provider again, a response hiding another
//! possible execution, `may_have_executed` understated), the worst attempts and worst
//! time to a result computed from the settings beside the worst seen, and the attempts
//! per call while every endpoint answers 503 for a minute (over the window and over its
//! last quarter); then the lints, each naming its setting. `--json` prints one object
//! (`explored`, `systematic`, `scripts`, `seed`, `elapsed_ms`, `classes[]` with
//! `violations`, `by_kind`, `bound`, `observed`, `outage`, `counterexample`, `lints[]`,
//! `status`). A progress bar is drawn on stderr when it is a terminal. Exit status 0
//! clean, 1 lints only, 2 invalid usage or configuration, 23 the report could not be
//! written to stdout, 8 a safety violation: each
//! violating class's shortest counterexample, shrunk, is written to
//! `DIR/baton-check-<class>.toml` (`--out`, default `.`) in the `vectors/` format, where
//! it fails the conformance runner's simulator path with the same rule. The config file's
//! `[permissions.METHOD]` tables (`retry`, `failover`: `never`, `if_undelivered`,
//! `always`) are the policy's permission function, for every command.
//!
//! `probe` sends the policy's `[policy.probe]` request (default `GET` of each endpoint URL,
//! healthy on 2xx) to every endpoint under its breaker and prints one line per endpoint
//! (`id`, `healthy`/`unhealthy`, the status or the error, the breaker state; `--json` for
//! JSON lines). Exit status 0 when all are healthy, 3 when any is not, 2 for invalid usage,
//! 23 when stdout could not be written.
//! In `batch`, a line `{"probe": "due"}` probes the endpoints due a probe at that point
//! (breaker open time passed) with the batch's client.
//!
//! ## Client options (`request` and `batch`)
//! | flag | meaning |
//! |---|---|
//! | `-e, --endpoint ID=URL` | an endpoint, repeatable, in priority order; replaces the file's endpoints |
//! | `--base` | endpoint URLs are bases and PATH is joined onto them (default: each URL is the complete destination, and a PATH, or a batch line's `path`, other than `/` is refused as invalid: it would not be sent) |
//! | `--config FILE` | TOML file with `[[endpoint]]` tables and a `[policy]` table (the serde form of `baton_core::Settings`; see `cli/examples/policy.toml`); flags override it |
//! | `--runtime tokio\|blocking\|async-std` | the adapter (default tokio) |
//! | `--events` | every engine event as a JSON line on stderr |
//! | `--timeout SECS` | attempt timeout (to the end of the response headers) |
//! | `--connect-timeout SECS` | connect timeout |
//! | `--deadline SECS` | deadline of each whole call |
//! | `--body-timeout SECS` | reading a body: at most this long after its headers (default: the attempt timeout); a stalled body exits 7 |
//! | `--attempts-per-endpoint N`, `--max-attempts N` | the schedule |
//! | `--trigger-status CODE` | adds to the trigger set of reads and explicitly allowed calls (repeatable); keyed writes keep theirs |
//! | `--key-trigger-status CODE` | adds to the trigger set of calls relying on an idempotency key (repeatable; only statuses the provider documents as safe to repeat) |
//! | `--not-processed CODE` | adds to `not_processed` (repeatable) |
//! | `--max-redirects N` | redirects followed within one attempt (default 10; 0 returns every 3xx) |
//! | `--no-env-proxies` | ignore `HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`, `NO_PROXY` |
//! | `--cooldown-threshold N` | breaker: open after N consecutive failures |
//! | `--cooldown SECS` | breaker: base open time |
//! | `--cooldown-mode last\|skip` | endpoints in cooldown are tried last (default) or skipped |
//! | `--hedge-after MS` | hedge reads after MS milliseconds (not with `--runtime blocking`, which runs one attempt at a time and refuses it: exit 2) |
//! | `--http1.1` | HTTP/1.1 only (`http_version = "http1"`) |
//! | `--http2` | HTTP/2 where the provider agrees by ALPN on https (the default, `"auto"`); http:// stays HTTP/1.1 |
//! | `--http2-prior-knowledge` | HTTP/2 only (`"http2"`): prior knowledge on http://, ALPN h2 alone on https://; `--runtime blocking` (HTTP/1.1 only) refuses it: exit 2 |
//! | `--cacert FILE` | trust FILE's PEM certificates on top of the platform's store, on every runtime (`[policy.tls] ca_file`) |
//! | `--cert FILE`, `--key FILE` | a client identity (mTLS) for every endpoint (`[policy.tls] client_cert`, `client_key`); an endpoint's `[endpoint.tls]` overrides it |
//!
//! SECS accepts `1.5`, `250ms`, `2s`, `1m`; MS accepts `150` or a value with a unit.
//!
//! ## Call options (`request` flags; the same fields in `batch` lines)
//! `-X, --method` (default GET, POST when a body is given), `-d, --data STRING|@FILE|@-`,
//! `-H, --header 'K: V'` (repeatable), `--failover allow|deny|auto`, `--retry
//! allow|deny|auto` (allow = `Always`, deny = `Never`, auto = the spec's inference: safe
//! methods may retry and fail over freely, a keyed call may retry and fails over only while
//! undelivered, anything else only while undelivered), `--prefer ID`,
//! `--idempotency-key KEY`, `--request-id ID`. `request` also takes `-i, --include`: the
//! status line, the answering endpoint and the response headers to stderr; `-o, --output
//! FILE`: the body to FILE (emptied only when a response head arrives: a call that fails
//! before one leaves the file as it was; a body that breaks after it leaves what arrived,
//! exit 7); `-s, --silent`: no progress meter (one is drawn on stderr when
//! stdout is not a terminal and stderr is); `--compressed`: ask for gzip/deflate and decode
//! the body as it streams. Without `--compressed` the body's bytes are passed through as
//! the provider sent them, on every runtime. The body is written as it arrives, in
//! constant memory.
//!
//! ## Exit status of `request`
//! | code | meaning |
//! |---|---|
//! | 0 | a response was returned (any status) |
//! | 2 | invalid usage, configuration or call settings (nothing sent; a request rejected for a later endpoint after an earlier attempt that may have executed exits 3): bad flag, bad config, invalid request id, unknown `--prefer` endpoint, invalid header, a method in lower case (`get`), a PATH that would not be sent (no `--base`) |
//! | 3 | every attempt failed, or further attempts were not permitted, or the budget / a rate limit stopped the call |
//! | 4 | no usable endpoint: none at the start, or every endpoint still permitted went into cooldown during the call and `--cooldown-mode skip` left nothing to try (the error kind is then `failover`, the stop reason `no_usable_endpoint`) |
//! | 5 | deadline exceeded |
//! | 6 | the provider asked to retry after longer than `max_retry_after` |
//! | 7 | the response head arrived but its body could not be read, decoded (`--compressed`) or was cut short: the body streams to stdout as it arrives, so the part received has been written (as with curl's 18); the status is what says it is incomplete |
//! | 23 | the body could not be written to stdout or the `-o` file |
//!
//! ## `batch`
//! One client for all lines, so endpoint health, cooldown and the retry budget carry from
//! call to call. `--concurrency N` (default 1) runs up to N calls at once; output stays in
//! input order. Input line fields (all optional): `id` (any JSON, echoed back), `method`,
//! `path`, `headers` (object), `body` (string), `failover` and `retry` (`allow`, `deny`,
//! `auto`), `deadline_ms`, and every per-call option of the engine's text form
//! (`baton_core::CallOptions`): `prefer`, `only`, `deny`, `deadline` (`"2s"`; or
//! `deadline_ms`, not both), `attempt_timeout`, `attempts_per_endpoint`, `max_attempts`,
//! `idempotency_key`, `request_id`, `hedge`. Any other field makes the line malformed:
//! reading stops there (exit status 2, below).
//! `--max-body BYTES` (default 8 MiB)
//! bounds each line's (decoded) body: a larger one gives the line the error kind
//! `body_too_large`; `--compressed` as for `request`. Output line:
//!
//! ```text
//! {"id": .., "request_id": "..", "status": 200|null, "endpoint": "a"|null,
//!  "attempts": [{"endpoint": "a", "outcome": "undelivered", "status": null, "elapsed_ms": 0.4,
//!                "http_version": null}],
//!  "error": null | {"kind": "failover", "message": ".."},
//!  "stop_reason": "answered", "may_have_executed": true, "elapsed_ms": 1.2, "body": "..."|null}
//! ```
//!
//! A body that is not valid UTF-8 comes as `"body": null, "body_base64": "..."` (every
//! byte kept); a line that followed redirects also has `"redirects"`.
//!
//! `outcome` is `response` or the failure class (`undelivered`, `ambiguous`,
//! `rejected_locally`, `untrusted`, `timeout`, and also `deadline`, `cancelled`,
//! `replay_failed`);
//! `kind` is `failover`, `no_usable_endpoint`, `unknown_endpoint`, `deadline`,
//! `retry_after_too_long`, `invalid_call`, `budget`, `rate_limited`, `cancelled`,
//! `body` (the head arrived, the body failed: `status` and `endpoint` are set, `body` is
//! null), `body_too_large` (over `--max-body`), or `internal` (the call panicked, a bug:
//! `may_have_executed` is true). `batch` exits 0 when every line was processed (per-call failures are in the
//! output), 2 on a malformed line (reported on stderr with its line number; the lines
//! before it are run and printed; reading stops there) or a bad configuration, and 23
//! when writing its output failed (reported on stderr; no call starts after that, and the
//! lines of calls started before are lost: those calls may have executed).
//!
//! ## Decisions where the spec is silent
//! - `-e` replaces the config file's endpoint list rather than merging with it (mixing two
//!   priority orders would be guesswork).
//! - `--cooldown` raises `breaker.max_open` when it would be shorter than the new base.
//! - `request` writes the response body as it arrives; `batch` reads each body in full
//!   (up to `--max-body`) before it prints the line. In both, reading a body is bounded by
//!   `--body-timeout` (default: the attempt timeout) in every runtime, so a stalled body
//!   cannot hang a script.
//! - `batch` adds `request_id` to each output line (for reconciliation) beside the
//!   documented fields; empty input lines are skipped.
//!
//! ## Dependencies
//! - `baton-core` (feature `serde`): the engine; its `Settings` is the `[policy]` table.
//! - `baton-tokio`, `baton-blocking`, `baton-async-std`: the three `--runtime`s.
//! - `tokio` (runtime for baton-tokio), `async-std` (executor for baton-async-std).
//! - `http`: method and status types shared by the adapters.
//! - `clap`: argument parsing; `serde`, `serde_json`, `toml`: the batch and config formats.
//! - `testkit`: the local fault-injecting providers the demo starts.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod args;
mod auth;
mod batch;
mod body;
mod call;
mod check;
mod config;
mod demo;
mod events;
mod output;
mod probe;
mod request;
mod runner;
mod stream;

use std::process::ExitCode;

use clap::Parser;

use args::{Cli, Command};

/// Reports a usage or configuration error on stderr; returns exit status 2.
pub(crate) fn usage_error(message: &str) -> u8 {
    eprintln!("baton: {message}");
    2
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Request(a) => request::run(a),
        Command::Batch(a) => batch::run(a),
        Command::Demo(a) => demo::run(a),
        Command::Probe(a) => probe::run(a),
        Command::Check(a) => check::run(a),
        Command::Events(a) => stream::run(a),
    };
    ExitCode::from(code)
}
