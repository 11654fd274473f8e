//! Event streams on tokio: the driver of [`baton_core::sse::EventStream`]. Each connection
//! is one call through the client (breakers, budget, permissions and retries of refused
//! connections apply); the stream's state machine decides where the next one goes.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Instant, SystemTime};

use baton_core::sse::{self, Notice, StreamAction, StreamInput, StreamItem, StreamSettings};
use baton_core::CallOptions;
use bytes::Bytes;
use http::{HeaderMap, Method, Uri, Version};

use crate::client::Client;
use crate::driver::{Body, Prepared};
use crate::error::Error;

/// Why an event stream ended with an error.
///
/// ```
/// use baton_tokio::EventsError;
/// fn gave_up(e: &EventsError) -> bool {
///     matches!(e, EventsError::Stream(baton_tokio::baton_core::sse::StreamError::GaveUp { .. }))
/// }
/// # let _ = gave_up;
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum EventsError {
    /// The stream's rules ended it: a fatal answer, an interruption that would re-send an
    /// unsafe request, the reconnection limit, an oversized event.
    Stream(sse::StreamError),
    /// A connection's call was rejected before anything was sent (an invalid request or
    /// call setting, a body that is a stream): no reconnection can mend it.
    Call(Box<Error>),
    /// A stream setting cannot work (nothing was sent).
    Settings(sse::StreamSettingError),
}

impl std::fmt::Display for EventsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EventsError::Stream(e) => e.fmt(f),
            EventsError::Call(e) => e.fmt(f),
            EventsError::Settings(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for EventsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            EventsError::Stream(e) => Some(e),
            EventsError::Call(e) => Some(e.as_ref()),
            EventsError::Settings(e) => Some(e),
        }
    }
}

type OnNotice = Arc<dyn Fn(&Notice) + Send + Sync>;

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
pub struct EventStream {
    /// The stream, while no step is under way.
    inner: Option<Box<Inner>>,
    /// The step under way: it owns the stream and gives it back with its item.
    pending: Option<Pin<Box<dyn Future<Output = Step> + Send>>>,
    delivered: u64,
}

type Step = (Box<Inner>, Option<Result<StreamItem, EventsError>>);

struct Inner {
    client: Client,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    version: Version,
    body: Option<Bytes>,
    options: CallOptions,
    /// Why the request cannot be sent: its first call is rejected with it (and a report).
    invalid: Option<String>,
    state: State,
    on_notice: Option<OnNotice>,
}

enum State {
    Running(Box<sse::EventStream>, Option<reqwest::Response>),
    /// A setting, body or call was rejected: said once, then the stream is over.
    Rejected(Option<EventsError>),
    Over,
}

impl std::fmt::Debug for EventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStream")
            .field("delivered", &self.delivered)
            .field("reading", &self.pending.is_some())
            .finish()
    }
}

impl EventStream {
    pub(crate) fn new(parts: crate::client::Parts, settings: StreamSettings) -> Self {
        let (body, one_shot) = match parts.body.map(|b| b.as_bytes().map(Bytes::copy_from_slice)) {
            Some(None) => (None, true),
            b => (b.flatten(), false),
        };
        let invalid = parts.error.or_else(|| {
            one_shot
                .then(|| "an event stream's body must be replayable (bytes, not a stream)".into())
        });
        let seed = crate::client::os_seed();
        let state =
            match sse::EventStream::new(parts.client.policy(), &parts.method, settings, seed) {
                Ok(m) => State::Running(Box::new(m), None),
                Err(e) => State::Rejected(Some(EventsError::Settings(e))),
            };
        let inner = Inner {
            client: parts.client,
            method: parts.method,
            uri: parts.uri,
            headers: parts.headers,
            version: parts.version,
            body,
            options: parts.options,
            invalid,
            state,
            on_notice: None,
        };
        EventStream {
            inner: Some(Box::new(inner)),
            pending: None,
            delivered: 0,
        }
    }

    /// Also tells `f` of every connection opened and every reconnection (with its wait,
    /// reason and whether it fails over). Set it before the first read.
    pub fn on_notice(mut self, f: impl Fn(&Notice) + Send + Sync + 'static) -> Self {
        if let Some(inner) = &mut self.inner {
            inner.on_notice = Some(Arc::new(f));
        }
        self
    }

    /// Events delivered so far.
    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// The next event (or `Restarted`), an error once, or `None` when the stream is over.
    pub async fn next(&mut self) -> Option<Result<StreamItem, EventsError>> {
        std::future::poll_fn(|cx| futures_core::Stream::poll_next(Pin::new(&mut *self), cx)).await
    }
}

impl futures_core::Stream for EventStream {
    type Item = Result<StreamItem, EventsError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let mut step = match (this.pending.take(), this.inner.take()) {
            (Some(step), _) => step,
            (None, Some(mut inner)) => Box::pin(async move {
                let item = inner.next().await;
                (inner, item)
            }),
            (None, None) => return Poll::Ready(None),
        };
        match step.as_mut().poll(cx) {
            Poll::Ready((inner, item)) => {
                if let State::Running(m, _) = &inner.state {
                    this.delivered = m.delivered();
                }
                this.inner = Some(inner);
                Poll::Ready(item)
            }
            Poll::Pending => {
                this.pending = Some(step);
                Poll::Pending
            }
        }
    }
}

impl Inner {
    async fn next(&mut self) -> Option<Result<StreamItem, EventsError>> {
        loop {
            let (machine, open) = match &mut self.state {
                State::Running(m, open) => (m, open),
                State::Rejected(e) => return e.take().map(Err),
                State::Over => return None,
            };
            let action = machine.poll(Instant::now());
            if matches!(
                action,
                StreamAction::Connect(_) | StreamAction::WaitUntil(_) | StreamAction::Finished(_)
            ) {
                *open = None; // closes an answer that is not read (a 503, a broken body)
            }
            match action {
                StreamAction::Connect(c) => self.connect(c).await,
                StreamAction::WaitUntil(t) => tokio::time::sleep_until(t.into()).await,
                StreamAction::Read { idle_deadline } => self.read(idle_deadline).await,
                StreamAction::Deliver(item) => return Some(Ok(item)),
                StreamAction::Notice(n) => {
                    if let Some(f) = &self.on_notice {
                        f(&n);
                    }
                }
                StreamAction::Finished(end) => {
                    self.state = State::Over;
                    return end.err().map(|e| Err(EventsError::Stream(e)));
                }
                // AwaitAnswer never comes: `connect` answers before it returns, and a step
                // is never dropped half-way (it lives in `pending`).
                _ => return None,
            }
        }
    }

    fn machine(&mut self) -> Option<(&mut sse::EventStream, &mut Option<reqwest::Response>)> {
        match &mut self.state {
            State::Running(m, open) => Some((m, open)),
            _ => None,
        }
    }

    async fn connect(&mut self, c: sse::Connect) {
        let (mut headers, mut options) = (self.headers.clone(), self.options.clone());
        c.apply(&mut headers, &mut options);
        let prepared = Prepared {
            method: self.method.clone(),
            uri: self.uri.clone(),
            headers,
            version: self.version,
            body: self.body.clone().map_or(Body::None, Body::Bytes),
            buffer_limit: None,
            invalid: self.invalid.clone(),
        };
        let result = self.client.run(prepared, options).await;
        let now = Instant::now();
        match result {
            Ok(resp) => {
                let Some((m, open)) = self.machine() else {
                    return;
                };
                let answered = StreamInput::Answered {
                    endpoint: resp.endpoint(),
                    status: resp.status(),
                    headers: resp.headers(),
                    wall: Some(SystemTime::now()),
                };
                m.handle(answered, now);
                *open = Some(resp.into_reqwest());
            }
            Err(e) => {
                let input = e
                    .kind()
                    .and_then(|k| StreamInput::call_failed(k, e.may_have_executed()));
                match (input, self.machine()) {
                    (Some(input), Some((m, _))) => m.handle(input, now),
                    _ => self.state = State::Rejected(Some(EventsError::Call(Box::new(e)))),
                }
            }
        }
    }

    async fn read(&mut self, idle_deadline: Option<Instant>) {
        let Some((_, open)) = self.machine() else {
            return;
        };
        let chunk = match (open.as_mut(), idle_deadline) {
            (None, _) => Err(()),
            (Some(resp), None) => resp.chunk().await.map_err(drop),
            (Some(resp), Some(d)) => match tokio::time::timeout_at(d.into(), resp.chunk()).await {
                Ok(r) => r.map_err(drop),
                Err(_) => return self.input(StreamInput::Idle),
            },
        };
        match chunk {
            Ok(Some(bytes)) => self.input(StreamInput::Bytes(&bytes)),
            Ok(None) => self.input(StreamInput::Ended),
            Err(()) => self.input(StreamInput::Broken),
        }
    }

    fn input(&mut self, input: StreamInput<'_>) {
        if let Some((m, _)) = self.machine() {
            m.handle(input, Instant::now());
        }
    }
}
