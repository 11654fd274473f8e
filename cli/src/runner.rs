//! One interface over the three adapters (`--runtime tokio|blocking|async-std`).
//!
//! A [`Runner`] owns one client (so endpoint health, cooldown and the retry budget carry
//! from call to call) and runs a [`CallSpec`] to completion on the calling thread, reading
//! the whole response body. It is `Sync`: `batch --concurrency N` runs calls from N
//! threads through the same client. The tokio runner keeps a multi-thread runtime and
//! blocks on it from each calling thread; the async-std runner blocks with
//! `async_std::task::block_on`; the blocking runner just calls.
//!
//! One code path for every runtime: each runtime only sends the call and hands back a
//! [`Sent`] (the response's head, its report and a way to read its body chunk by chunk,
//! each chunk blocked on in the runtime's own way, or the finished error); the head, the
//! body's sink and the result are handled once, in [`Runner::run_into`].
//!
//! Reading the body: the policy's `body_timeout` bounds it on every runtime (the
//! command's default is the longest attempt timeout, so a provider that stalls after the
//! headers cannot hang it), and so does the call's deadline.

use std::io::Read;
use std::time::{Duration, Instant};

use baton_core::{EndpointHealth, ErrorKind, EventSink, ProbeRefused, ProbeResult, Report};
use http::Method;

use crate::args::RuntimeKind;
use crate::body::{Decoded, Limited, Stop};
use crate::call::{CallResult, CallSpec, Failure, ResponseHead};
use crate::config::ClientConfig;

/// The request builder of `spec` on an async adapter (tokio and async-std take the same
/// calls: options, `&str` headers, a body of bytes).
macro_rules! async_request {
    ($client:expr, $method:expr, $spec:expr) => {{
        let mut rb = $client
            .request($method, &$spec.path)
            .options($spec.options());
        for (k, v) in &$spec.headers {
            rb = rb.header(k.as_str(), v.as_str());
        }
        if let Some(b) = &$spec.body {
            rb = rb.body(b.clone());
        }
        rb
    }};
}

/// A call on an async adapter (tokio and async-std: the same calls), each step run to its
/// end with `$block_on`.
macro_rules! async_sent {
    ($client:expr, $method:expr, $spec:expr, $($block_on:tt)+) => {
        match $($block_on)+(async_request!($client, $method, $spec).send()) {
            Ok(mut resp) => Sent::Response {
                head: ResponseHead {
                    status: resp.status().as_u16(),
                    endpoint: resp.endpoint().to_string(),
                    headers: header_list(resp.headers()),
                },
                report: resp.report().clone(),
                pull: Box::new(move |sink: &mut dyn BodySink| {
                    feed(sink, $($block_on)+(resp.chunk()).map_err(|e| error_chain(&e)))
                }),
            },
            Err(e) => failed(e.kind(), e.report(), &e),
        }
    };
}

enum Inner {
    Tokio {
        client: baton_tokio::Client,
        rt: tokio::runtime::Runtime,
    },
    Blocking(baton_blocking::Client),
    AsyncStd(baton_async_std::Client),
}

/// A client of one runtime.
pub struct Runner {
    inner: Inner,
    /// Whether a call's PATH is joined onto the endpoints (`--base`) or not sent at all.
    url_mode: baton_core::UrlMode,
}

/// The methods of RFC 9110 (and PATCH), which a call may misspell in lower case.
pub const STANDARD_METHODS: [&str; 9] = [
    "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
];

/// The call's method, or why it is refused: not a valid token, or a standard method in
/// the wrong case (methods are case-sensitive: `get` would go out as an unknown method,
/// which most servers refuse and which loses a read's freedom to retry and fail over).
pub fn call_method(name: &str) -> Result<Method, String> {
    let upper = name.to_ascii_uppercase();
    if upper != name && STANDARD_METHODS.contains(&upper.as_str()) {
        return Err(format!(
            "method {name:?}: methods are case-sensitive; write {upper}"
        ));
    }
    Method::from_bytes(name.as_bytes()).map_err(|_| format!("method {name:?}"))
}

/// Refuses a header the client could not send, naming it (its value is not shown: it may
/// be a secret).
pub fn check_headers(headers: &[(String, String)]) -> Result<(), String> {
    for (name, value) in headers {
        if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
            return Err(format!(
                "header name {name:?} is not a valid HTTP header name"
            ));
        }
        if http::HeaderValue::from_str(value).is_err() {
            return Err(format!(
                "header {name}: its value is not a valid HTTP header value (it holds a \
                 control character)"
            ));
        }
    }
    Ok(())
}

/// Refuses a PATH that would not be sent: with complete endpoint URLs (the default) the
/// endpoint's URL is the whole destination, so a PATH other than `/` would be dropped
/// without a word, and a write would go to another resource than the one named.
pub fn check_path(url_mode: baton_core::UrlMode, path: &str) -> Result<(), String> {
    match (url_mode, path) {
        (baton_core::UrlMode::Complete, p) if !p.is_empty() && p != "/" => Err(format!(
            "path {p:?} is not sent: the endpoint URLs are complete destinations; give \
             --base (url_mode = \"base\" in a config file) to join it onto them, or put \
             it in each endpoint's URL"
        )),
        _ => Ok(()),
    }
}

fn header_list(map: &http::HeaderMap) -> Vec<(String, String)> {
    map.iter()
        .map(|(k, v)| (k.to_string(), String::from_utf8_lossy(v.as_bytes()).into()))
        .collect()
}

impl Runner {
    /// The client of the command's options (`--config`, flags, `--runtime`, `--events`
    /// with times from `t0`); the error is the message for a usage error (exit 2).
    pub fn from_args(args: &crate::args::ClientArgs, t0: Instant) -> Result<Runner, String> {
        let config = crate::config::resolve(args)?;
        let sink = args.events.then(|| crate::events::stderr_sink(t0));
        Runner::new(args.runtime, config, sink)
    }

    /// Builds the client; the error is the adapter's build error (it names the setting).
    pub fn new(
        kind: RuntimeKind,
        config: ClientConfig,
        sink: Option<EventSink>,
    ) -> Result<Runner, String> {
        let mut config = config;
        // The command's default body timeout is the longest attempt timeout, so a provider
        // that stalls after the headers cannot hang it (`--body-timeout` sets another).
        if config.settings.body_timeout.is_none() {
            let longest = config
                .endpoints
                .iter()
                .filter_map(|e| e.attempt_timeout_override())
                .fold(config.settings.attempt_timeout, Duration::max);
            config.settings.body_timeout = Some(longest);
        }
        let tokens = std::mem::take(&mut config.auth);
        let url_mode = config.settings.url_mode;
        let policy = config.policy();
        // Every adapter takes the policy the same way; the command's event sink is the
        // policy's.
        let policy = match sink {
            Some(s) => policy.add_event_sink(s),
            None => policy,
        };
        let inner = match kind {
            RuntimeKind::Tokio => {
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .map_err(|e| format!("cannot start the tokio runtime: {e}"))?;
                let client = {
                    let _guard = rt.enter();
                    let mut b = baton_tokio::Client::builder(policy);
                    if !tokens.is_empty() {
                        b = b.token_provider(move |endpoint: &str| {
                            let (t, e) = (tokens.clone(), endpoint.to_owned());
                            async move {
                                tokio::task::spawn_blocking(move || t.token(&e))
                                    .await
                                    .map_err(|e| e.to_string())?
                            }
                        });
                    }
                    b.build().map_err(|e| e.to_string())?
                };
                Inner::Tokio { client, rt }
            }
            RuntimeKind::Blocking => {
                let mut b = baton_blocking::Client::builder(policy);
                if !tokens.is_empty() {
                    b = b.token_provider(move |endpoint: &str| tokens.token(endpoint));
                }
                Inner::Blocking(b.build().map_err(|e| e.to_string())?)
            }
            RuntimeKind::AsyncStd => {
                let mut b = baton_async_std::Client::builder(policy);
                if !tokens.is_empty() {
                    b = b.token_provider(move |endpoint: &str| {
                        let (t, e) = (tokens.clone(), endpoint.to_owned());
                        async_std::task::spawn_blocking(move || t.token(&e))
                    });
                }
                Inner::AsyncStd(b.build().map_err(|e| e.to_string())?)
            }
        };
        Ok(Runner { inner, url_mode })
    }

    /// The health of endpoint `id` now.
    pub fn health(&self, id: &str) -> Option<EndpointHealth> {
        match &self.inner {
            Inner::Tokio { client, .. } => client.health(id),
            Inner::Blocking(c) => c.health(id),
            Inner::AsyncStd(c) => c.health(id),
        }
    }

    /// The endpoint ids, in priority order of the list.
    pub fn endpoint_ids(&self) -> Vec<String> {
        let policy = match &self.inner {
            Inner::Tokio { client, .. } => client.policy(),
            Inner::Blocking(c) => c.policy(),
            Inner::AsyncStd(c) => c.policy(),
        };
        policy
            .endpoints()
            .iter()
            .map(|e| e.id().to_owned())
            .collect()
    }

    /// Sends the policy's health request to endpoint `id`, under its breaker.
    pub fn probe(&self, id: &str) -> Result<ProbeResult, ProbeRefused> {
        match &self.inner {
            Inner::Tokio { client, rt } => rt.block_on(client.probe(id)),
            Inner::Blocking(c) => c.probe(id),
            Inner::AsyncStd(c) => async_std::task::block_on(c.probe(id)),
        }
    }

    /// Probes the endpoints due a probe now.
    pub fn probe_due(&self) -> Vec<ProbeResult> {
        match &self.inner {
            Inner::Tokio { client, rt } => rt.block_on(client.probe_due()),
            Inner::Blocking(c) => c.probe_due(),
            Inner::AsyncStd(c) => async_std::task::block_on(c.probe_due()),
        }
    }

    /// Runs one call to the end, the whole body collected in memory (the demo's calls).
    pub fn run(&self, spec: &CallSpec) -> CallResult {
        let mut sink = Collect::new(usize::MAX, false);
        let mut result = self.run_into(spec, &mut sink);
        result.body = sink.body;
        result
    }

    /// The call's method, once the call is known to be sendable as asked: its path, its
    /// headers and its method (else why not, for an invalid call, nothing sent).
    fn checked(&self, spec: &CallSpec) -> Result<Method, String> {
        check_path(self.url_mode, &spec.path)?;
        check_headers(&spec.headers)?;
        call_method(&spec.method)
    }

    /// Runs one call to the end, each body chunk handed to `sink` as it arrives.
    pub fn run_into(&self, spec: &CallSpec, sink: &mut dyn BodySink) -> CallResult {
        let checked = self.checked(spec);
        let method = match checked {
            Ok(m) => m,
            Err(why) => {
                let mut r = CallResult::invalid(why);
                r.request_id = spec.options.request_id.clone();
                return r;
            }
        };
        let sent = match &self.inner {
            Inner::Tokio { client, rt } => async_sent!(client, method, spec, rt.block_on),
            Inner::Blocking(c) => blocking_sent(c, method, spec),
            Inner::AsyncStd(c) => async_sent!(c, method, spec, async_std::task::block_on),
        };
        match sent {
            Sent::Response {
                head,
                report,
                mut pull,
            } => {
                sink.head(&head, &report);
                let body = loop {
                    if let Some(done) = pull(sink) {
                        break done;
                    }
                };
                CallResult::response(report, head, body)
            }
            Sent::Ended(result) => result,
        }
    }
}

/// Reads a response body's next chunk into the sink (see [`feed`]).
type Pull<'a> = Box<dyn FnMut(&mut dyn BodySink) -> Option<Result<(), Failure>> + 'a>;

/// What a call on any runtime gave, in the one shape [`Runner::run_into`] reads: a
/// response (its head, the report, and its body read chunk by chunk), or the result
/// already complete (an error).
enum Sent<'a> {
    Response {
        head: ResponseHead,
        report: Report,
        /// Reads the next chunk of the body into the sink (see [`feed`]): `Some` when the
        /// body is over.
        pull: Pull<'a>,
    },
    Ended(CallResult),
}

/// The result of a call that ended in an error, the same on every runtime: an error with
/// a kind is the engine's (with the report); without one, the call was rejected before it
/// started.
fn failed(
    kind: Option<&ErrorKind>,
    report: &Report,
    e: &(dyn std::error::Error + 'static),
) -> Sent<'static> {
    Sent::Ended(match kind {
        Some(kind) => CallResult::error(kind, report.clone(), error_chain(e)),
        None => CallResult::invalid(error_chain(e)),
    })
}

/// A call on the blocking adapter: the body is read from the response's reader.
fn blocking_sent(
    client: &baton_blocking::Client,
    method: Method,
    spec: &CallSpec,
) -> Sent<'static> {
    use baton_blocking::ResponseExt;
    let mut rb = client.request(method, &spec.path).options(spec.options());
    for (k, v) in &spec.headers {
        rb = rb.header(k, v);
    }
    let sent = match &spec.body {
        Some(b) => rb.send(b.clone()),
        None => rb.call(),
    };
    let resp = match sent {
        Ok(resp) => resp,
        Err(e) => return failed(e.kind(), e.report(), &e),
    };
    let Some(report) = resp.report().cloned() else {
        let why = "the blocking adapter returned no report".to_string();
        return Sent::Ended(CallResult::invalid(why));
    };
    let head = ResponseHead {
        status: resp.status().as_u16(),
        endpoint: report.endpoint_id().unwrap_or_default().to_string(),
        headers: header_list(resp.headers()),
    };
    let mut reader = resp.into_body().into_reader();
    let mut buf = vec![0u8; 64 * 1024];
    let pull = move |sink: &mut dyn BodySink| loop {
        let next = match reader.read(&mut buf) {
            Ok(0) => Ok(None),
            Ok(n) => Ok(Some(&buf[..n])),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => Err(error_chain(&e)),
        };
        return feed(sink, next);
    };
    Sent::Response {
        head,
        report,
        pull: Box::new(pull),
    }
}

/// How `baton events`' stream ended.
pub enum StreamEnd {
    /// The server ended it (204).
    Ended,
    /// The consumer stopped it, with this exit status (0 after `--max-events`).
    Stopped(u8),
    /// The stream's rules ended it; when it ended on its last connection's failed call,
    /// that call's error (its whole chain, URLs scrubbed).
    Stream {
        /// What the rules decided.
        error: baton_core::sse::StreamError,
        /// Why the last connection failed.
        cause: Option<String>,
    },
    /// A setting or the request was rejected before anything was sent.
    Rejected(String),
}

/// The consumer of a stream's items: `Ok(true)` reads on, `Ok(false)` stops (exit 0),
/// `Err(code)` stops with that exit status.
pub type OnItem<'a> = dyn FnMut(baton_core::sse::StreamItem) -> Result<bool, u8> + 'a;

/// Drains any adapter's stream item by item into `each`.
fn consume<E: std::error::Error + 'static>(
    next: Option<Result<baton_core::sse::StreamItem, baton_core::sse::EventsError<E>>>,
    each: &mut OnItem<'_>,
) -> Option<StreamEnd> {
    use baton_core::sse::EventsError;
    match next {
        None => Some(StreamEnd::Ended),
        Some(Ok(item)) => match each(item) {
            Ok(true) => None,
            Ok(false) => Some(StreamEnd::Stopped(0)),
            Err(code) => Some(StreamEnd::Stopped(code)),
        },
        Some(Err(EventsError::Stream { error, cause })) => Some(StreamEnd::Stream {
            error,
            cause: cause.map(|c| error_chain(&*c)),
        }),
        Some(Err(e)) => Some(StreamEnd::Rejected(error_chain(&e))),
    }
}

impl Runner {
    /// Reads one event stream (`baton events`) to its end, each item handed to `each`.
    pub fn events(
        &self,
        spec: &CallSpec,
        settings: baton_core::sse::StreamSettings,
        notices: Option<baton_core::sse::NoticeSink>,
        each: &mut OnItem<'_>,
    ) -> StreamEnd {
        let checked = self.checked(spec);
        let method = match checked {
            Ok(m) => m,
            Err(why) => return StreamEnd::Rejected(why),
        };
        let notice = move |n: &baton_core::sse::Notice| {
            if let Some(f) = &notices {
                f(n);
            }
        };
        match &self.inner {
            Inner::Tokio { client, rt } => rt.block_on(async {
                let rb = async_request!(client, method, spec);
                let mut s = rb.events(settings).on_notice(notice);
                loop {
                    if let Some(end) = consume(s.next().await, each) {
                        return end;
                    }
                }
            }),
            Inner::Blocking(c) => {
                let mut rb = c.request(method, &spec.path).options(spec.options());
                for (k, v) in &spec.headers {
                    rb = rb.header(k, v);
                }
                let mut s = rb
                    .events_with_body(spec.body.clone(), settings)
                    .on_notice(notice);
                loop {
                    if let Some(end) = consume(s.next(), each) {
                        return end;
                    }
                }
            }
            Inner::AsyncStd(c) => async_std::task::block_on(async {
                let rb = async_request!(c, method, spec);
                let mut s = rb.events(settings).on_notice(notice);
                loop {
                    if let Some(end) = consume(s.next().await, each) {
                        return end;
                    }
                }
            }),
        }
    }
}

/// Hands one step of a body read to `sink`: `Some` when the body is over (ended, broke,
/// or the sink stopped it), with how.
fn feed<B: AsRef<[u8]>>(
    sink: &mut dyn BodySink,
    next: Result<Option<B>, String>,
) -> Option<Result<(), Failure>> {
    match next {
        Ok(Some(chunk)) => sink
            .chunk(chunk.as_ref())
            .err()
            .map(|s| Err(Failure::from_stop(s))),
        Ok(None) => Some(sink.end().map_err(Failure::from_stop)),
        Err(message) => Some(Err(Failure::body(message))),
    }
}

/// Where a response's body goes as it arrives.
pub trait BodySink {
    /// The response head arrived (once, before any chunk).
    fn head(&mut self, head: &ResponseHead, report: &Report);
    /// One chunk of the body as received; `Err` stops reading.
    fn chunk(&mut self, bytes: &[u8]) -> Result<(), Stop>;
    /// The body ended completely.
    fn end(&mut self) -> Result<(), Stop>;
}

/// Collects the (decoded, with `compressed`) body in memory, up to `max` bytes.
pub struct Collect {
    max: usize,
    compressed: bool,
    decoder: Option<Decoded<Limited>>,
    /// The whole body, once it ended within the limit.
    pub body: Option<Vec<u8>>,
}

impl Collect {
    /// A collector refusing more than `max` (decoded) bytes.
    pub fn new(max: usize, compressed: bool) -> Self {
        Collect {
            max,
            compressed,
            decoder: None,
            body: None,
        }
    }
}

/// The response's `content-encoding`, if any.
pub fn content_encoding(head: &ResponseHead) -> Option<&str> {
    head.headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-encoding"))
        .map(|(_, v)| v.as_str())
}

impl BodySink for Collect {
    fn head(&mut self, head: &ResponseHead, _: &Report) {
        let out = Limited::new(self.max);
        self.decoder = Some(Decoded::new(out, self.compressed, content_encoding(head)));
    }

    fn chunk(&mut self, bytes: &[u8]) -> Result<(), Stop> {
        match &mut self.decoder {
            Some(d) => d.chunk(bytes),
            None => Ok(()),
        }
    }

    fn end(&mut self) -> Result<(), Stop> {
        if let Some(d) = self.decoder.take() {
            self.body = Some(d.finish()?.buf);
        }
        Ok(())
    }
}

/// An error and its sources, joined with ": " (skipping repeats).
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let t = s.to_string();
        if !text.contains(&t) {
            text.push_str(": ");
            text.push_str(&t);
        }
        source = s.source();
    }
    // Clients quote URLs in their errors; paths and queries hold keys (SPEC 4).
    baton_core::scrub_urls(&text)
}

/// Milliseconds since `t0`, for event lines.
pub fn ms_since(t0: Instant, at: Instant) -> f64 {
    (at.saturating_duration_since(t0).as_secs_f64() * 1e6).round() / 1e3
}
