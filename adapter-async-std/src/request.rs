//! Building one call: the request (method, URL, headers, body) and its per-call options.
//!
//! Nothing is validated eagerly in a way that could panic: an invalid URL or header is
//! remembered and the call ends as *rejected locally* (no attempt sent, an error carrying
//! the report and request id), exactly as the engine's rules say.

use std::future::Future;

use baton_core::{CallOptions, InvalidRequest};
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::{Method, Uri};

use crate::body::Body;
use crate::driver::{self, Prepared};
use crate::error::Error;
use crate::response::Response;
use crate::Client;

/// One call being built; [`send`](RequestBuilder::send) runs it.
///
/// ```no_run
/// # async fn demo(client: baton_async_std::Client) -> Result<(), baton_async_std::Error> {
/// use std::time::Duration;
/// let resp = client
///     .post("/v1/charges")
///     .header("content-type", "application/json")
///     .body(r#"{"amount":42}"#)
///     .idempotency_key("charge-42")
///     .deadline(Duration::from_secs(5))
///     .send()
///     .await?;
/// # let _ = resp; Ok(()) }
/// ```
#[must_use = "a request does nothing until sent"]
pub struct RequestBuilder {
    client: Client,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
    buffer: Option<usize>,
    options: CallOptions,
    invalid: Option<InvalidRequest>,
}

impl RequestBuilder {
    pub(crate) fn new(client: Client, method: Method, url: &str, buffer: Option<usize>) -> Self {
        let (uri, invalid) = baton_core::request_target(url);
        RequestBuilder {
            client,
            method,
            uri,
            headers: HeaderMap::new(),
            body: Body::empty(),
            buffer,
            options: CallOptions::default(),
            invalid,
        }
    }

    /// Adds a header (appended: several values of one name are kept). An invalid name or
    /// value fails the call before anything is sent, with an error that names the header
    /// (never its value, which may be a secret).
    pub fn header<K, V>(mut self, name: K, value: V) -> Self
    where
        K: TryInto<HeaderName> + std::fmt::Debug,
        K::Error: std::fmt::Display,
        V: TryInto<HeaderValue>,
        V::Error: std::fmt::Display,
    {
        let shown = format!("{name:?}");
        let why = match (name.try_into(), value.try_into()) {
            (Ok(n), Ok(v)) => match baton_core::append_request_header(&mut self.headers, n, v) {
                Ok(()) => return self,
                Err(e) => e.to_string(),
            },
            (Err(e), _) => format!("invalid header name {shown}: {e}"),
            (Ok(n), Err(e)) => format!("invalid value of header {n}: {e}"),
        };
        self.invalid.get_or_insert_with(|| why.into());
        self
    }

    /// Adds all these headers.
    pub fn headers(mut self, headers: HeaderMap) -> Self {
        let mut last = None;
        for (name, value) in headers {
            if let Some(n) = name {
                last = Some(n);
            }
            if let Some(n) = &last {
                if let Err(e) =
                    baton_core::append_request_header(&mut self.headers, n.clone(), value)
                {
                    self.invalid.get_or_insert_with(|| e.to_string().into());
                }
            }
        }
        self
    }

    /// The body (bytes are replayable; see [`Body`] for streams).
    pub fn body(mut self, body: impl Into<Body>) -> Self {
        self.body = body.into();
        self
    }

    /// A JSON body (replayable) and `content-type: application/json` unless set.
    #[cfg(feature = "json")]
    pub fn json<T: serde::Serialize + ?Sized>(mut self, value: &T) -> Self {
        let Ok(bytes) = serde_json::to_vec(value).map_err(|e| {
            let why = format!("the JSON body could not be encoded: {e}");
            self.invalid.get_or_insert_with(|| why.into());
        }) else {
            return self;
        };
        let json = HeaderValue::from_static("application/json");
        self.headers
            .entry(http::header::CONTENT_TYPE)
            .or_insert(json);
        self.body(bytes)
    }

    baton_core::call_option_setters!(options, buffer, hedge);

    /// Opens this request as an event stream that fails over by `settings`, as
    /// [`baton_core::sse`] describes (bytes bodies only: each reconnection resends it).
    pub fn events(self, settings: baton_core::sse::StreamSettings) -> crate::EventStream {
        let RequestBuilder {
            client,
            method,
            uri,
            headers,
            body,
            mut options,
            invalid,
            ..
        } = self;
        options.events = baton_core::join_sinks(client.inner.events.clone(), options.events.take());
        let parts = crate::sse::Parts {
            client,
            method,
            uri,
            headers,
            body,
            options,
            invalid,
        };
        crate::EventStream::new(parts, settings)
    }

    /// Runs the call: the response of the answer, or an error with the report.
    ///
    /// The future is `Send`; dropping it cancels every attempt in flight (their
    /// connections are closed) and frees the half-open probe slots they held.
    // Inlined, so that the future (3,128 bytes) is built where its caller keeps it, not
    // built aside and copied there (callgrind, `callcost smol 2000`: 310 instructions a
    // call fewer).
    #[inline]
    pub fn send(self) -> impl Future<Output = Result<Response, Error>> + Send {
        let RequestBuilder {
            client,
            method,
            uri,
            headers,
            body,
            buffer,
            mut options,
            invalid,
        } = self;
        // The client's sink (when the policy was built elsewhere it travels with each
        // call), then the call's own: a per-call sink never hides a call from the client's.
        options.events = baton_core::join_sinks(client.inner.events.clone(), options.events.take());
        let prepared = Prepared {
            head: baton_core::request_head(method, uri, headers, http::Version::default()),
            body_kind: body.kind(),
            body: body.into_source(),
            invalid,
            buffer,
        };
        driver::run(client.inner, prepared, options)
    }
}

impl std::fmt::Debug for RequestBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestBuilder")
            .field("method", &self.method)
            .field("uri", &baton_core::Target(&self.uri))
            .field("headers", &baton_core::HeaderNames(&self.headers))
            .field("body", &self.body)
            .field("options", &self.options)
            .finish()
    }
}
