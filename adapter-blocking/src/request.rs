//! One call, in ureq's idiom: `client.get(path).header(..).call()`,
//! `client.post(path).idempotency_key(..).send_json(&value)`.
//!
//! The builder collects the request (method, URL or path, headers, body) and the call's
//! options (SPEC 2.2, 2.6, 3). A bad header or URL does not fail here: the call fails
//! before any send, as an invalid call with a report, like every other call error.

use std::io::{self, Read};

use baton_core::{CallOptions, InvalidRequest};
use ureq::http::header::{HeaderName, HeaderValue};
use ureq::http::{HeaderMap, Method, Response, Uri};
use ureq::Body;

use crate::driver::{drive, Prepared, SendData};
use crate::error::Error;
use crate::Client;

/// A call being built. Finish it with [`call`](Self::call) (no body) or one of the
/// `send*` methods.
///
/// The path (or URL) is joined to each endpoint by the policy's URL mode: ignored in the
/// default complete mode (JSON-RPC style), appended to the base in base mode (REST style).
///
/// ```no_run
/// use std::time::Duration;
/// use baton_blocking::{Client, Endpoint, Policy};
/// let client = Client::new(
///     Policy::builder()
///         .endpoint(Endpoint::new("primary", "http://127.0.0.1:8080/rpc"))
///         .endpoint(Endpoint::new("backup", "http://127.0.0.1:8081/rpc")),
/// )?;
/// let mut response = client
///     .post("/")
///     .header("content-type", "application/json")
///     .idempotency_key("transfer-7f3a")
///     .deadline(Duration::from_secs(5))
///     .send(r#"{"jsonrpc":"2.0","id":1,"method":"send"}"#)?;
/// let text = response.body_mut().read_to_string()?;
/// # let _ = text;
/// # Ok::<_, Box<dyn std::error::Error>>(())
/// ```
#[must_use = "a request does nothing until `call()` or a `send*` method runs it"]
pub struct RequestBuilder<'c> {
    client: &'c Client,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    options: CallOptions,
    buffer_limit: Option<usize>,
    invalid: Option<InvalidRequest>,
}

impl std::fmt::Debug for RequestBuilder<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestBuilder")
            .field("method", &self.method)
            .field("uri", &baton_core::Target(&self.uri))
            .field("headers", &baton_core::HeaderNames(&self.headers))
            .field("options", &self.options)
            .field("invalid", &self.invalid)
            .finish()
    }
}

impl<'c> RequestBuilder<'c> {
    pub(crate) fn new(client: &'c Client, method: Method, path: &str) -> Self {
        let (uri, invalid) = baton_core::request_target(path);
        RequestBuilder {
            client,
            method,
            uri,
            headers: HeaderMap::new(),
            options: CallOptions::default(),
            buffer_limit: None,
            invalid,
        }
    }

    fn invalid(&mut self, why: impl Into<InvalidRequest>) {
        self.invalid.get_or_insert_with(|| why.into());
    }

    /// Appends a header (sent on every attempt; per-endpoint headers of the same name
    /// override it). An invalid name or value makes the call fail before any send.
    pub fn header(mut self, name: impl AsRef<str>, value: impl AsRef<str>) -> Self {
        let (name, value) = (name.as_ref(), value.as_ref());
        match (HeaderName::try_from(name), HeaderValue::try_from(value)) {
            (Ok(n), Ok(v)) => {
                if let Err(e) = baton_core::append_request_header(&mut self.headers, n, v) {
                    self.invalid(e.to_string());
                }
            }
            _ => self.invalid(format!("invalid header {name:?}")),
        }
        self
    }

    baton_core::call_option_setters!(options, buffer_limit);

    fn run(self, body: SendData) -> Result<Response<Body>, Error> {
        self.run_over(body, None)
    }

    /// [`run`](Self::run) with a stream that was over the buffering limit (`over_limit`,
    /// the limit): sent once, with the `BodyNotBuffered` event (SPEC 2.4).
    fn run_over(self, body: SendData, over_limit: Option<usize>) -> Result<Response<Body>, Error> {
        let p = Prepared {
            method: self.method,
            uri: self.uri,
            headers: self.headers,
            body,
            over_limit,
            options: self.options,
            invalid: self.invalid,
        };
        drive(&self.client.inner, p)
    }

    /// Opens this request as an event stream that fails over by `settings`, as
    /// [`baton_core::sse`] describes (bytes bodies only: each reconnection resends it).
    pub fn events(self, settings: baton_core::sse::StreamSettings) -> crate::EventStream<'c> {
        self.events_with_body(None, settings)
    }

    /// [`events`](Self::events) with a body (a `POST` that starts a job and streams its
    /// progress, say).
    pub fn events_with_body(
        self,
        body: Option<Vec<u8>>,
        settings: baton_core::sse::StreamSettings,
    ) -> crate::EventStream<'c> {
        let parts = crate::sse::Parts {
            client: self.client,
            method: self.method,
            uri: self.uri,
            headers: self.headers,
            body,
            options: self.options,
            invalid: self.invalid,
        };
        crate::EventStream::new(parts, settings)
    }

    /// Runs the call without a body.
    pub fn call(self) -> Result<Response<Body>, Error> {
        self.run(SendData::Empty)
    }

    /// Runs the call with these bytes as the body (replayable: every attempt sends the same
    /// bytes, nothing is copied).
    pub fn send(self, body: impl Into<Vec<u8>>) -> Result<Response<Body>, Error> {
        self.run(SendData::Bytes(body.into()))
    }

    /// Runs the call with `value` serialised as JSON once (replayable), with
    /// `content-type: application/json` unless a content type was set.
    #[cfg(feature = "json")]
    pub fn send_json(mut self, value: &impl serde::Serialize) -> Result<Response<Body>, Error> {
        match serde_json::to_vec(value) {
            Ok(bytes) => {
                if !self.headers.contains_key(ureq::http::header::CONTENT_TYPE) {
                    self.headers.insert(
                        ureq::http::header::CONTENT_TYPE,
                        HeaderValue::from_static("application/json; charset=utf-8"),
                    );
                }
                self.run(SendData::Bytes(bytes))
            }
            Err(e) => {
                self.invalid(format!("the JSON body could not be serialised: {e}"));
                self.run(SendData::Empty)
            }
        }
    }

    /// Runs the call with a stream as the body. The stream is sent once, so there is no
    /// later attempt, unless [`buffer_body`](Self::buffer_body) was set and
    /// the stream fits.
    pub fn send_reader(mut self, mut reader: impl Read + 'static) -> Result<Response<Body>, Error> {
        let Some(limit) = self.buffer_limit else {
            return self.run(SendData::OneShot(Some(Box::new(reader))));
        };
        let mut buf = Vec::new();
        let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
        match reader.by_ref().take(cap).read_to_end(&mut buf) {
            Ok(n) if n <= limit => self.run(SendData::Bytes(buf)),
            Ok(_) => {
                let stream = io::Cursor::new(buf).chain(reader);
                self.run_over(SendData::OneShot(Some(Box::new(stream))), Some(limit))
            }
            Err(e) => {
                self.invalid(format!("reading the request body failed: {e}"));
                self.run(SendData::Empty)
            }
        }
    }

    /// Runs the call with a body the caller can produce again (re-open a file, rewind a
    /// source): `make` is called once per attempt. If it fails for a later attempt, no
    /// later attempt can be made and the call ends with what it has (SPEC 2.4).
    pub fn send_with<R, F>(mut self, mut make: F) -> Result<Response<Body>, Error>
    where
        R: Read + 'static,
        F: FnMut() -> io::Result<R> + 'static,
    {
        match make() {
            Ok(first) => {
                let factory = Box::new(move || make().map(|r| Box::new(r) as Box<dyn Read>));
                self.run(SendData::Factory(Some(Box::new(first)), factory))
            }
            Err(e) => {
                self.invalid(format!("producing the request body failed: {e}"));
                self.run(SendData::Empty)
            }
        }
    }
}
