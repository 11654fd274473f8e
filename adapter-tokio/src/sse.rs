//! Event streams on tokio: reqwest's I/O for [`baton_core::sse::AsyncDriver`], which runs
//! the stream's state machine. Each connection is one call through the client (breakers,
//! budget, permissions and retries of refused connections apply).

use std::time::Instant;

use baton_core::sse::{self, AsyncDriver, Chunk, Opened, StreamInput, StreamSettings};
use baton_core::CallOptions;
use bytes::Bytes;
use http::{HeaderMap, Method, Uri, Version};

use crate::client::Client;
use crate::driver::{Body, Prepared};
use crate::error::Error;

/// Why an event stream ended with an error (see [`baton_core::sse::EventsError`]).
///
/// ```
/// use baton_tokio::EventsError;
/// fn gave_up(e: &EventsError) -> bool {
///     matches!(e.stream_error(), Some(baton_tokio::baton_core::sse::StreamError::GaveUp { .. }))
/// }
/// # let _ = gave_up;
/// ```
pub type EventsError = sse::EventsError<Error>;

baton_core::async_event_stream!(
    /// A Server-Sent Events stream that resumes across the client's endpoints (SPEC 9), from
    /// [`RequestBuilder::events`](crate::RequestBuilder::events). Read it with
    /// [`next`](Self::next) or as a `futures_core::Stream`; it ends (`None`) after a 204, or
    /// after yielding its one error. Both are cancel-safe: dropping a `next()` that is under
    /// way (a `select!` that took another branch) keeps the connection and its progress for
    /// the next call.
    ///
    /// ```no_run
    /// use baton_core::sse::{StreamItem, StreamSettings};
    /// # async fn demo(client: baton_tokio::Client) -> Result<(), baton_tokio::EventsError> {
    /// let settings = StreamSettings { shared_event_ids: true, ..StreamSettings::default() };
    /// let mut events = client.get("/v1/prices").events(settings);
    /// while let Some(item) = events.next().await {
    ///     match item? {
    ///         StreamItem::Event { endpoint, event } => println!("{endpoint}: {}", event.data),
    ///         StreamItem::Restarted { endpoint } => println!("restarted on {endpoint}"),
    ///         _ => {}
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    EventStream,
    Reqwest,
    Error
);

/// The stream's request, sent again on every connection.
pub(crate) struct Reqwest {
    client: Client,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    version: Version,
    body: Option<Bytes>,
    options: CallOptions,
    /// Why the request cannot be sent: its first call is rejected with it (and a report).
    invalid: Option<crate::InvalidRequest>,
}

impl EventStream {
    pub(crate) fn new(parts: crate::client::Parts, settings: StreamSettings) -> Self {
        let (body, one_shot) = match parts.body.map(|b| b.as_bytes().map(Bytes::copy_from_slice)) {
            Some(None) => (None, true),
            b => (b.flatten(), false),
        };
        let invalid = parts.error.or_else(|| {
            one_shot.then(|| {
                "an event stream's body must be replayable (bytes, not a stream)"
                    .to_string()
                    .into()
            })
        });
        let seed = baton_core::os_entropy();
        let machine = sse::EventStream::new(parts.client.policy(), &parts.method, settings, seed)
            .map_err(EventsError::Settings);
        let transport = Reqwest {
            client: parts.client,
            method: parts.method,
            uri: parts.uri,
            headers: parts.headers,
            version: parts.version,
            body,
            options: parts.options,
            invalid,
        };
        EventStream(AsyncDriver::new(machine, transport))
    }
}

impl sse::Transport for Reqwest {
    type Body = reqwest::Response;
    type Chunk = Bytes;
    type Error = Error;

    async fn open(&mut self, c: sse::Connect) -> Opened<reqwest::Response, Error> {
        let (mut headers, mut options) = (self.headers.clone(), self.options.clone());
        c.apply(&mut headers, &mut options);
        let (method, uri) = (self.method.clone(), self.uri.clone());
        let prepared = Prepared {
            head: baton_core::request_head(method, uri, headers, self.version),
            body: self.body.clone().map_or(Body::None, Body::Bytes),
            buffer_limit: None,
            invalid: self.invalid.clone(),
        };
        match self.client.run(prepared, options).await {
            Ok(resp) => Opened::Answer {
                endpoint: resp.endpoint().into(),
                status: resp.status(),
                headers: resp.headers().clone(),
                may_have_executed: resp.may_have_executed(),
                body: resp.into_reqwest(),
            },
            Err(e) => {
                let input = e
                    .kind()
                    .and_then(|k| StreamInput::call_failed(k, e.may_have_executed()));
                Opened::failed(input, e)
            }
        }
    }

    async fn read(body: &mut reqwest::Response, idle: Option<Instant>) -> Chunk<Bytes> {
        let read = match idle {
            None => body.chunk().await,
            Some(d) => match tokio::time::timeout_at(d.into(), body.chunk()).await {
                Ok(r) => r,
                Err(_) => return Chunk::Idle,
            },
        };
        match read {
            Ok(Some(bytes)) => Chunk::Bytes(bytes),
            Ok(None) => Chunk::End,
            Err(_) => Chunk::Broken,
        }
    }

    async fn sleep_until(at: Instant) {
        tokio::time::sleep_until(at.into()).await;
    }

    fn now() -> Instant {
        Instant::now()
    }

    fn wall() -> std::time::SystemTime {
        std::time::SystemTime::now()
    }
}
