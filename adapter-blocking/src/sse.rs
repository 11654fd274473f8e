//! Event streams in ureq's blocking idiom: an [`Iterator`] driven by
//! [`baton_core::sse::EventStream`]. Each connection is one call through the client
//! (breakers, budget, permissions and retries of refused connections apply); the stream's
//! state machine decides where the next one goes.

use std::io::Read;
use std::time::Instant;

use baton_core::sse::{
    self, BlockingTransport, Chunk, Notice, NoticeSink, Opened, StreamInput, StreamItem,
    StreamSettings,
};
use baton_core::{CallOptions, InvalidRequest};
use ureq::http::{HeaderMap, Method, Uri};

use crate::driver::{drive, Prepared, SendData};
use crate::error::Error;
use crate::response::ResponseExt;
use crate::Client;

/// Why an event stream ended with an error (see [`baton_core::sse::EventsError`]).
///
/// ```
/// fn rejected(e: &baton_blocking::EventsError) -> bool {
///     matches!(e, baton_blocking::EventsError::Call(_))
/// }
/// # let _ = rejected;
/// ```
pub type EventsError = sse::EventsError<Error>;

/// A Server-Sent Events stream that resumes across the client's endpoints (SPEC 9), from
/// [`RequestBuilder::events`](crate::RequestBuilder::events): an iterator of events (and
/// `Restarted`) that blocks while it reads, waits or reconnects, and ends (`None`) after a
/// 204, or after yielding its one error.
///
/// The idle timeout is kept by the client's own connector (each read of the body waits at
/// most until the idle deadline); with a connector of your own
/// ([`ClientBuilder::parts`](crate::ClientBuilder::parts) keeps baton's wrapper around
/// it) it holds as well.
///
/// ```no_run
/// use baton_blocking::{Client, Endpoint, Policy};
/// use baton_blocking::baton_core::sse::{StreamItem, StreamSettings};
/// let client = Client::new(Policy::builder().endpoint(Endpoint::new("a", "http://127.0.0.1:8080/events")))?;
/// for item in client.get("/").events(StreamSettings::default()) {
///     if let StreamItem::Event { event, .. } = item? {
///         println!("{}", event.data);
///     }
/// }
/// # Ok::<_, Box<dyn std::error::Error>>(())
/// ```
pub struct EventStream<'c> {
    machine: Result<sse::EventStream, Option<EventsError>>,
    transport: Ureq<'c>,
    connection: sse::Connection<BodyReader, Error>,
    on_notice: Option<NoticeSink>,
    buf: Vec<u8>,
    /// Events returned by `next` so far.
    delivered: u64,
}

type BodyReader = Box<dyn Read + Send>;

/// The stream's request, sent again on every connection.
struct Ureq<'c> {
    client: &'c Client,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Option<Vec<u8>>,
    options: CallOptions,
    invalid: Option<InvalidRequest>,
}

impl std::fmt::Debug for EventStream<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStream")
            .field("method", &self.transport.method)
            .field("delivered", &self.delivered())
            .finish()
    }
}

/// The request a stream sends on every connection.
pub(crate) struct Parts<'c> {
    pub(crate) client: &'c Client,
    pub(crate) method: Method,
    pub(crate) uri: Uri,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Option<Vec<u8>>,
    pub(crate) options: CallOptions,
    pub(crate) invalid: Option<InvalidRequest>,
}

impl<'c> EventStream<'c> {
    pub(crate) fn new(p: Parts<'c>, settings: StreamSettings) -> Self {
        let seed = baton_core::os_entropy();
        let machine = sse::EventStream::new(p.client.policy(), &p.method, settings, seed)
            .map_err(|e| Some(EventsError::Settings(e)));
        let transport = Ureq {
            client: p.client,
            method: p.method,
            uri: p.uri,
            headers: p.headers,
            body: p.body,
            options: p.options,
            invalid: p.invalid,
        };
        EventStream {
            machine,
            transport,
            connection: sse::Connection::default(),
            on_notice: None,
            buf: vec![0; 16 * 1024],
            delivered: 0,
        }
    }

    /// Also tells `f` of every connection opened and every reconnection (with its wait,
    /// reason and whether it fails over).
    pub fn on_notice(mut self, f: impl Fn(&Notice) + Send + Sync + 'static) -> Self {
        self.on_notice = Some(std::sync::Arc::new(f));
        self
    }

    /// Events returned so far (not those parsed and still waiting to be returned).
    pub fn delivered(&self) -> u64 {
        self.delivered
    }
}

impl BlockingTransport for Ureq<'_> {
    type Body = BodyReader;
    type Error = Error;

    fn open(&mut self, c: sse::Connect) -> Opened<BodyReader, Error> {
        let (mut headers, mut options) = (self.headers.clone(), self.options.clone());
        c.apply(&mut headers, &mut options);
        let p = Prepared {
            method: self.method.clone(),
            uri: self.uri.clone(),
            headers,
            body: self.body.clone().map_or(SendData::Empty, SendData::Bytes),
            over_limit: None,
            options,
            invalid: self.invalid.clone(),
        };
        let result = {
            let _endless = crate::classify::endless_body();
            drive(&self.client.inner, p)
        };
        match result {
            Ok(resp) => Opened::Answer {
                endpoint: resp.endpoint().unwrap_or_default().into(),
                status: resp.status(),
                headers: resp.headers().clone(),
                may_have_executed: resp.report().is_none_or(|r| r.may_have_executed),
                body: Box::new(resp.into_body().into_reader()),
            },
            Err(e) => {
                let input = e
                    .kind()
                    .and_then(|k| StreamInput::call_failed(k, e.may_have_executed()));
                Opened::failed(input, e)
            }
        }
    }

    fn read(body: &mut BodyReader, buf: &mut [u8], idle: Option<Instant>) -> Chunk<usize> {
        let read = {
            let _idle = crate::classify::idle_until(idle);
            body.read(buf)
        };
        match read {
            Ok(n) => Chunk::Bytes(n),
            Err(_) if idle.is_some_and(|d| Instant::now() >= d) => Chunk::Idle,
            Err(_) => Chunk::Broken,
        }
    }

    fn sleep_until(at: Instant) {
        std::thread::sleep(at.saturating_duration_since(Instant::now()));
    }

    fn now() -> Instant {
        Instant::now()
    }

    fn wall() -> std::time::SystemTime {
        std::time::SystemTime::now()
    }
}

impl Iterator for EventStream<'_> {
    type Item = Result<StreamItem, EventsError>;

    fn next(&mut self) -> Option<Self::Item> {
        let EventStream {
            machine,
            transport,
            connection,
            on_notice,
            buf,
            delivered,
        } = self;
        let item = sse::drive_blocking(machine, transport, connection, buf, on_notice.as_ref());
        if let Some(Ok(StreamItem::Event { .. })) = &item {
            *delivered += 1;
        }
        item
    }
}
