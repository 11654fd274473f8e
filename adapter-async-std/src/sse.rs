//! Event streams on async-std and smol: this adapter's I/O for
//! [`baton_core::sse::AsyncDriver`], which runs the stream's state machine. Each connection
//! is one call through the client (breakers, budget, permissions and retries of refused
//! connections apply).

use std::time::Instant;

use baton_core::sse::{self, AsyncDriver, Chunk, Opened, StreamInput, StreamSettings};
use baton_core::{BodyKind, CallOptions, InvalidRequest};
use bytes::Bytes;
use http::{HeaderMap, Method, Uri};

use crate::body::Body;
use crate::driver::{self, Prepared};
use crate::error::Error;
use crate::response::Response;
use crate::Client;

/// Why an event stream ended with an error (see [`baton_core::sse::EventsError`]).
///
/// ```
/// fn rejected(e: &baton_async_std::EventsError) -> bool {
///     matches!(e, baton_async_std::EventsError::Call(_))
/// }
/// # let _ = rejected;
/// ```
pub type EventsError = sse::EventsError<Error>;

baton_core::async_event_stream!(
    /// A Server-Sent Events stream that resumes across the client's endpoints (SPEC 9), from
    /// [`RequestBuilder::events`](crate::RequestBuilder::events), on async-std or smol. Read
    /// it with [`next`](Self::next) or as a `futures_core::Stream`; it ends (`None`) after a
    /// 204, or after yielding its one error. Both are cancel-safe: dropping a `next()` that is
    /// under way keeps the connection and its progress for the next call.
    ///
    /// ```no_run
    /// use baton_core::sse::{StreamItem, StreamSettings};
    /// # async fn demo(client: baton_async_std::Client) -> Result<(), baton_async_std::EventsError> {
    /// let mut events = client.get("/v1/notifications").events(StreamSettings::default());
    /// while let Some(item) = events.next().await {
    ///     if let StreamItem::Event { event, .. } = item? {
    ///         println!("{}", event.data);
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    EventStream,
    Hyper,
    Error
);

/// The request a stream sends on every connection.
pub(crate) struct Parts {
    pub(crate) client: Client,
    pub(crate) method: Method,
    pub(crate) uri: Uri,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Body,
    pub(crate) options: CallOptions,
    pub(crate) invalid: Option<InvalidRequest>,
}

/// The stream's request, sent again on every connection.
pub(crate) struct Hyper {
    client: Client,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Option<Body>,
    options: CallOptions,
    invalid: Option<InvalidRequest>,
}

impl EventStream {
    pub(crate) fn new(p: Parts, settings: StreamSettings) -> Self {
        let body = p.body.try_clone();
        let invalid = p.invalid.or_else(|| {
            body.is_none().then(|| {
                "an event stream's body must be replayable (not a one-shot stream)"
                    .to_string()
                    .into()
            })
        });
        let seed = baton_core::os_entropy();
        let machine = sse::EventStream::new(p.client.policy(), &p.method, settings, seed)
            .map_err(EventsError::Settings);
        let transport = Hyper {
            client: p.client,
            method: p.method,
            uri: p.uri,
            headers: p.headers,
            body,
            options: p.options,
            invalid,
        };
        EventStream(AsyncDriver::new(machine, transport))
    }
}

impl sse::Transport for Hyper {
    type Body = Response;
    type Chunk = Bytes;
    type Error = Error;

    async fn open(&mut self, c: sse::Connect) -> Opened<Response, Error> {
        let (mut headers, mut options) = (self.headers.clone(), self.options.clone());
        c.apply(&mut headers, &mut options);
        let body = self
            .body
            .as_ref()
            .and_then(Body::try_clone)
            .unwrap_or_default();
        let (method, uri) = (self.method.clone(), self.uri.clone());
        let prepared = Prepared {
            head: baton_core::request_head(method, uri, headers, http::Version::default()),
            body_kind: body.kind(),
            body: body.into_source(),
            invalid: self.invalid.clone(),
            buffer: None,
        };
        debug_assert!(prepared.body_kind != BodyKind::OneShot);
        match driver::run(self.client.inner.clone(), prepared, options).await {
            Ok(resp) => Opened::Answer {
                endpoint: resp.endpoint().into(),
                status: resp.status(),
                headers: resp.headers().clone(),
                may_have_executed: resp.may_have_executed(),
                body: resp.endless(),
            },
            Err(e) => {
                let input = e
                    .kind()
                    .and_then(|k| StreamInput::call_failed(k, e.may_have_executed()));
                Opened::failed(input, e)
            }
        }
    }

    async fn read(body: &mut Response, idle: Option<Instant>) -> Chunk<Bytes> {
        let read = match idle {
            None => body.chunk().await,
            Some(d) => match crate::attempt::timeout_at(d, body.chunk()).await {
                Some(r) => r,
                None => return Chunk::Idle,
            },
        };
        match read {
            Ok(Some(bytes)) => Chunk::Bytes(bytes),
            Ok(None) => Chunk::End,
            Err(_) => Chunk::Broken,
        }
    }

    async fn sleep_until(at: Instant) {
        async_io::Timer::at(at).await;
    }

    fn now() -> Instant {
        Instant::now()
    }

    fn wall() -> std::time::SystemTime {
        std::time::SystemTime::now()
    }
}
