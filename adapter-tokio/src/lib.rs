//! # baton-tokio: baton's failover engine, driven with reqwest on tokio
//!
//! A [`Client`] sends each call to a small, ordered set of endpoints (providers) and lets
//! [`baton_core`] decide everything: which endpoint to try, whether another attempt is
//! allowed and safe, how long to wait, when to stop. This crate only translates: it sends
//! the attempts with reqwest, sleeps with tokio timers, classifies failures by phase
//! (module `classify`: undelivered before the connection was ready, ambiguous after) and
//! builds each attempt's request by the destination rules of SPEC 3.
//!
//! ```no_run
//! use std::time::Duration;
//! use baton_core::{Endpoint, Policy};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let client = baton_tokio::Client::new(
//!     Policy::builder()
//!         .endpoint(Endpoint::new("stripe-eu", "https://eu.pay.example/v1").group("pay"))
//!         .endpoint(Endpoint::new("stripe-us", "https://us.pay.example/v1").group("pay"))
//!         .url_mode(baton_core::UrlMode::Base),
//! )?;
//! let resp = client
//!     .post("/charges")
//!     .idempotency_key("order-1234")
//!     .deadline(Duration::from_secs(5))
//!     .body(r#"{"amount":100}"#)
//!     .send()
//!     .await?;
//! println!("{} from {} ({} attempts)", resp.status(), resp.endpoint(), resp.report().attempts.len());
//! # Ok(()) }
//! ```
//!
//! ## How a call runs
//!
//! One future per call drives a [`baton_core::Call`]: `Send` starts an attempt (a reqwest
//! send under a tokio timer for the attempt timeout, which the engine has already clipped to
//! the deadline), `Wait` sleeps until the engine's time or until an in-flight attempt ends,
//! `Discard` drops an attempt or a kept response, `Done` returns the kept response or an
//! [`Error`]. Several attempts may be in flight at once (hedging); they are futures owned
//! by the call's future, never spawned tasks. Dropping the call's future therefore cancels
//! every attempt (closing its connection), and the call is cancelled in the engine at once:
//! its attempts are reported cancelled (events `AttemptCancelled` and `Result`), count for
//! nothing in health, and a half-open probe slot is freed (SPEC 2.5). Nothing is leaked.
//!
//! The response head is the commit point: the call returns when it arrives, and the body is
//! read afterwards from the [`Response`]; a failure then is an [`Error::Body`] naming the
//! endpoint.
//!
//! ## Decisions (where the spec leaves room)
//!
//! - **Connect timeouts.** reqwest's connect timeout is per client, baton's per endpoint:
//!   by default baton builds one reqwest client per distinct connect timeout, HTTP version
//!   and set of TLS files (see [`ClientBuilder`]; other reqwest settings are adjustable with
//!   [`ClientBuilder::configure_reqwest`]). A connect error that is a timeout is reported
//!   as a connect-phase timeout (undelivered). baton's own attempt timer reports the
//!   response phase when it fires after the endpoint's connect timeout. Fired earlier, it
//!   reports the connect phase (undelivered) only with proof: the request's body was
//!   dropped before hyper looked at it to write the head, so the request never reached a
//!   ready connection (known at once when the send was still connecting; a request already
//!   queued to a connection gets 10 ms for its connection task to discard it). Without
//!   that proof it reports an unknown phase (ambiguous). With a client given through
//!   [`ClientBuilder::reqwest_client`] or inside a middleware stack, baton does not know
//!   the connect timeout, so its timer always reports an unknown phase. reqwest's read
//!   and total timeouts also run during connect, so [`ClientBuilder::read_timeout`] must
//!   be longer than every connect timeout (checked), and a total timeout should not be set
//!   at all (use the deadline).
//! - **TLS early data and TCP Fast Open** stay off: baton-tls never enables TLS 0-RTT,
//!   and neither reqwest nor hyper-util implement TCP Fast Open.
//! - **HTTP/2 and TLS** (SPEC 9). `http_version = "auto"` offers `h2` and `http/1.1` by
//!   ALPN for https and speaks HTTP/1.1 on http; `"http1"` is HTTP/1.1 only; `"http2"` is
//!   h2-only ALPN on https and prior knowledge (h2c) on http. One HTTP/2 connection per
//!   origin carries concurrent calls. Trust is the platform's store plus the policy's or
//!   endpoint's `ca_file`, read by `baton-tls` the same way as on every other adapter; a
//!   client identity (`client_cert`, `client_key`) is presented on its endpoint's
//!   connections only (its own reqwest client, which follows no redirect). The record of
//!   each attempt that got a response says which version it used.
//! - **Bodies.** Bytes, strings, `Vec<u8>` and JSON bodies are replayable (each attempt
//!   sends a cheap copy). A stream (`reqwest::Body::wrap`, `wrap_stream`) is sent once; an
//!   attempt that would need it again is not made. [`RequestBuilder::buffer_body`] (or
//!   [`ClientBuilder::buffer_bodies`]) opts in to buffering a stream up to a limit, before
//!   the call starts (the deadline starts after buffering); over the limit, what was read
//!   is sent ahead of the rest of the stream, once, and a `BodyNotBuffered` event says so.
//! - **Request URLs.** A call takes a path (or an absolute URL, whose path and query are
//!   used and whose host only matters for the Host rule). In complete mode (the default)
//!   each endpoint's URL is parsed once, when the client is built.
//! - **Invalid input** given to the request builder (a bad URL or header) is not an error
//!   of the builder: the call runs, its first attempt is reported rejected locally, and the
//!   call ends as "invalid call" with a report (request id included); nothing is sent.
//! - **Seed.** With a [`PolicyBuilder`], the engine's random seed (jitter, generated
//!   request ids) is drawn from the OS ([`baton_core::os_entropy`], the same on every
//!   adapter) unless the policy sets a seed; the same holds for a prebuilt [`Policy`]
//!   ([`ClientBuilder::from_policy`]).
//! - **Events.** [`ClientBuilder::on_event`] (and, with the `tracing` feature, the
//!   forwarder to `tracing`) runs after a sink set on the policy itself (both see every
//!   event); [`RequestBuilder::on_event`] adds a per-call callback that runs after those. Events are synchronous, in causal order per call, and a
//!   panic in a callback is not caught.
//! - **Response wall time** (for an HTTP-date `Retry-After` without a `Date` header) is
//!   read only for 429 and 503 responses, the only ones whose `Retry-After` counts.
//! - **Redirects** are the engine's decision ([`baton_core::Redirects`], SPEC 3), the same on
//!   every adapter: the reqwest clients baton builds follow none, and the driver follows
//!   what the engine allows within the attempt (never with the endpoint's headers to
//!   another origin, never from https to http). A client given with
//!   [`ClientBuilder::reqwest_client`] and the middleware's inner stack must be built with
//!   `redirect(reqwest::redirect::Policy::none())`: baton cannot switch a given client's
//!   following off, and a client that follows on its own sends the endpoint's headers
//!   wherever it is redirected. Such a client needs `retry(reqwest::retry::never())` too:
//!   reqwest's default retry re-sends after an HTTP/2 `GOAWAY` that does not prove the
//!   request unprocessed, unseen by the report.
//! - **Proxies** come from the environment as core's [`baton_core::ProxyEnv`] routes them
//!   (SPEC 3), the same on every adapter: reqwest's own reading of the environment is off
//!   and each request URL is routed by core (`http` forwarded in absolute form, `https`
//!   through `CONNECT`). `env_proxies = false` in the settings connects directly.
//! - **Errors.** [`Error::Call`] carries the engine's error (kind and [`Report`]) and
//!   shows its text (`{}`: the call and its attempts; `{:#}`: every cause after it). Its
//!   `source()` is the engine's link to the last attempt ([`baton_core::AttemptFailure`];
//!   [`baton_core::NoAttempt`] when none was made), whose own source is that attempt's [`AttemptError`]: its [`FailureCause`] label
//!   (refused, DNS, TLS, reset...) and underlying error (a `reqwest::Error`, baton's
//!   attempt timeout, or why the request could not be built). Each part is said once in
//!   the chain. The link carries the call's verdict, so baton failing inside another
//!   baton's attempt (a `BatonMiddleware` after another) is read by its report: the outer
//!   attempt is undelivered only when no attempt of the inner call may have executed.
//!
//! ## Middleware
//!
//! With the `middleware` feature, [`BatonMiddleware`] applies baton inside a
//! `reqwest-middleware` stack; see its module docs for how it composes.
//!
//! ## Features
//!
//! - `rustls` (default): HTTPS through reqwest's rustls backend, no OpenSSL.
//! - `json` (default): [`RequestBuilder::json`] and [`Response::json`].
//! - `middleware` (default): [`BatonMiddleware`].
//! - `tracing`: forwards every event to `tracing` (target `baton`).
//! - `alloy`: `alloy::BatonTransport`, an alloy JSON-RPC transport that knows which
//!   Ethereum calls are safe to repeat (needs Rust 1.94.1, as alloy 2 does).
//!
//! ## Dependencies
//!
//! - `baton-core`: the engine; every decision lives there.
//! - `reqwest`: the HTTP client that sends each attempt (connection pool, TLS, HTTP/1.1
//!   and HTTP/2); the clients baton builds follow no redirects (the engine does).
//! - `baton-tls`: the one TLS trust rule of every adapter (the platform's roots plus
//!   `ca_file`, client identities, the reason a certificate was rejected).
//! - `h2`: only to read HTTP/2's own proofs in an error chain (`REFUSED_STREAM`; a
//!   `GOAWAY` is recognised, but no proof on this adapter); reqwest already depends on it.
//! - `tokio` (`time` and `sync`): attempt timers, backoff sleeps, and the gate that lets
//!   an endpoint's first requests through one at a time until it has answered (so they
//!   share one HTTP/2 connection); the caller's runtime runs the rest.
//! - `http`: request and response vocabulary shared with reqwest and baton-core.
//! - `hyper`: only to read hyper's error kinds (incomplete message, parse error) when
//!   classifying failures; reqwest already depends on it.
//! - `bytes`, `http-body`, `http-body-util`: cheap body copies for replay and the opt-in
//!   buffering of streaming bodies.
//! - `smallvec`: the in-flight attempts and kept responses of a call, inline.
//! - `futures-core`: the `Stream` trait of event streams (already in reqwest's dependency
//!   tree).
//! - optional `serde`, `serde_json` (`json`), `reqwest-middleware` and `async-trait`
//!   (`middleware`: the trait is declared with `async-trait`), `tracing` (`tracing`),
//!   `alloy-json-rpc`, `alloy-transport`, `alloy-primitives` and `tower-service`
//!   (`alloy`: alloy's packets and error type, keccak-256 for a signed transaction's
//!   hash, and the `Service` trait alloy takes).

#![forbid(unsafe_code)]
// docs.rs (and CI, with nightly) builds with `--cfg docsrs`: every feature-gated item then
// says which feature it needs.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(missing_docs)]

#[cfg(feature = "alloy")]
#[cfg_attr(docsrs, doc(cfg(feature = "alloy")))]
pub mod alloy;
mod body;
mod classify;
mod client;
mod driver;
mod error;
#[cfg(feature = "tracing")]
mod events;
#[cfg(feature = "middleware")]
mod middleware;
mod peek;
mod response;
mod sse;

pub use classify::FailureCause;
pub use client::{Client, ClientBuilder, RequestBuilder};
pub use error::{
    AttemptError, AttemptTimeout, BoxError, BuildError, Error, InvalidRequest, Scrubbed,
};
#[cfg(feature = "middleware")]
pub use middleware::BatonMiddleware;
pub use response::{BodyDeadline, Response};
pub use sse::{EventStream, EventsError};

/// The engine crate, re-exported.
pub use baton_core;
pub use baton_core::{
    CallOptions, Endpoint, Permission, Policy, PolicyBuilder, ProbeRefused, ProbeResult, Report,
    UrlMode,
};
/// The HTTP client crate, re-exported.
pub use reqwest;
