//! What every adapter shares beyond the call itself: the per-call option setters, written
//! once here and expanded into each adapter's request builder, so a user who knows one
//! adapter knows the option names of all three; and the entropy an adapter seeds its
//! engine with.

use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::pin::Pin;
use std::task::{Context, Poll};

/// Polls the future in `slot`, and empties the slot once the future ended, so it is never
/// polled again: the driver kit's way to keep the send of one attempt in flight unboxed,
/// in a pinned slot of the call's own future (an empty slot is `Pending`).
///
/// ```
/// use std::future::{ready, Future};
/// use std::pin::pin;
/// use std::task::{Context, Poll, Waker};
/// let mut slot = pin!(Some(ready(7)));
/// let mut cx = Context::from_waker(Waker::noop());
/// assert_eq!(baton_core::poll_slot(slot.as_mut(), &mut cx), Poll::Ready(7));
/// assert!(slot.is_none());
/// assert_eq!(baton_core::poll_slot(slot.as_mut(), &mut cx), Poll::Pending);
/// ```
pub fn poll_slot<F: Future>(
    mut slot: Pin<&mut Option<F>>,
    cx: &mut Context<'_>,
) -> Poll<F::Output> {
    let Some(fut) = slot.as_mut().as_pin_mut() else {
        return Poll::Pending;
    };
    let out = std::task::ready!(fut.poll(cx));
    slot.set(None);
    Poll::Ready(out)
}

/// Entropy for an engine's random source (backoff jitter, generated request ids, the
/// event streams' jitter): what an adapter passes to
/// [`Engine::with_entropy`](crate::Engine::with_entropy) once per client, so that clients
/// that failed together do not back off in lock-step.
///
/// It comes from std's hashing keys: drawn from the OS's random source once per thread
/// (by std, on the thread's first use), then varied for every draw, so two draws differ
/// within a thread, across threads and across processes. No clock is read. The engine's
/// calls never call this: a call's randomness comes only from its engine, and an engine
/// built with [`Engine::new`](crate::Engine::new) or a policy seed repeats exactly.
///
/// ```
/// use baton_core::{os_entropy, Endpoint, Engine, Policy};
/// let policy = Policy::builder().endpoint(Endpoint::new("a", "https://a.example/")).build().unwrap();
/// let engine = Engine::with_entropy(policy, os_entropy());
/// # let _ = engine;
/// assert_ne!(os_entropy(), os_entropy());
/// ```
pub fn os_entropy() -> u64 {
    // `RandomState::new` advances the thread's keys, so each draw hashes with new keys.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0x6261_746F_6E00_0001);
    h.finish()
}

/// Expands to the per-call option setters of a request builder whose `CallOptions` field
/// is `$field` (an adapter's request builder calls it inside its `impl` block). Each
/// setter takes `self` and returns it, in the builder style of every adapter. With
/// `$buffer` (the `Option<usize>` field of the buffering limit), also `buffer_body`; with
/// `hedge` after it, also `hedge`.
///
/// The setters and the [`CallOptions`](crate::CallOptions) field each one sets:
/// `options` (all of them at once), `retry`, `failover`, `deny`, `prefer`, `deadline`,
/// `attempt_timeout`, `attempts_per_endpoint`, `max_attempts`, `request_id`,
/// `idempotency_key`, `on_event`.
#[doc(hidden)]
#[macro_export]
macro_rules! call_option_setters {
    ($field:ident, $buffer:ident, hedge) => {
        $crate::call_option_setters!($field, $buffer);

        /// Opts a call that is not a safe method in to hedging (when the policy hedges).
        pub fn hedge(mut self, on: bool) -> Self {
            self.$field.hedge = on;
            self
        }
    };
    ($field:ident, $buffer:ident) => {
        $crate::call_option_setters!($field);

        /// Opt-in buffering of a streamed body (SPEC 2.4): before the first attempt, up to
        /// `limit` bytes are read; a stream that fits becomes replayable, a longer one is
        /// sent once (the engine reports `NotReplayable` when it wanted another attempt).
        pub fn buffer_body(mut self, limit: usize) -> Self {
            self.$buffer = Some(limit);
            self
        }
    };
    ($field:ident) => {
        /// Replaces all per-call options at once.
        pub fn options(mut self, options: $crate::CallOptions) -> Self {
            self.$field = options;
            self
        }

        /// Retry permission for this call (SPEC 2.2).
        pub fn retry(mut self, permission: $crate::Permission) -> Self {
            self.$field.retry = Some(permission);
            self
        }

        /// Failover permission for this call (SPEC 2.2).
        pub fn failover(mut self, permission: $crate::Permission) -> Self {
            self.$field.failover = Some(permission);
            self
        }

        /// At most one attempt: both permissions `Never`.
        pub fn deny(mut self) -> Self {
            self.$field.deny = true;
            self
        }

        /// Tries the endpoint with this id first (when it is eligible and available).
        pub fn prefer(mut self, endpoint_id: impl Into<String>) -> Self {
            self.$field.prefer = Some(endpoint_id.into());
            self
        }

        /// A deadline for the whole call, from its start.
        pub fn deadline(mut self, deadline: ::std::time::Duration) -> Self {
            self.$field.deadline = Some(deadline);
            self
        }

        /// This call's attempt timeout (from sending to the end of the response headers,
        /// and through the body read the policy's `classify_body` asks for, where the
        /// adapter reads it).
        pub fn attempt_timeout(mut self, timeout: ::std::time::Duration) -> Self {
            self.$field.attempt_timeout = Some(timeout);
            self
        }

        /// Attempts per endpoint per round for this call (it overrides the endpoints').
        pub fn attempts_per_endpoint(mut self, n: u32) -> Self {
            self.$field.attempts_per_endpoint = Some(n);
            self
        }

        /// Cap on this call's attempts.
        pub fn max_attempts(mut self, n: u32) -> Self {
            self.$field.max_attempts = Some(n);
            self
        }

        /// The request id, sent unchanged on every attempt (8-128 of
        /// `A-Z a-z 0-9 . _ : -`; otherwise the call fails before any send).
        pub fn request_id(mut self, id: impl Into<String>) -> Self {
            self.$field.request_id = Some(id.into());
            self
        }

        /// The idempotency key, sent unchanged on every attempt. A keyed call may be
        /// retried on the same endpoint after an ambiguous failure, and fails over only
        /// while nothing may have executed (SPEC 2.2).
        pub fn idempotency_key(mut self, key: impl Into<String>) -> Self {
            self.$field.idempotency_key = Some(key.into());
            self
        }

        /// Also delivers this call's events to `f`, after the client's event sink.
        pub fn on_event(mut self, f: impl Fn(&$crate::Event<'_>) + Send + Sync + 'static) -> Self {
            self.$field.events = Some(::std::sync::Arc::new(f));
            self
        }
    };
}

/// Expands to a client's constructors (`new`, `builder`: the adapter's `Client`,
/// `ClientBuilder` and `BuildError` in scope), engine accessors (`engine`, `policy`,
/// `health`, `reset`) and its
/// method shortcuts (`get`, `post`, `put`, `patch`, `delete`, `head`, each calling the
/// client's own `request(method, url)`), inside the client's `impl` block: `$builder` is
/// the request builder type, `$($engine).+` the path from `self` to the client's
/// `Arc<Engine>`, `$now` the adapter's clock (core reads none). Written once here, so
/// every adapter's client reads the same.
#[doc(hidden)]
#[macro_export]
macro_rules! client_methods {
    ($builder:ty, $($engine:ident).+, $now:path) => {
        /// A client for this policy with the adapter's default transport; the engine's
        /// random source is seeded from the OS unless the policy sets a seed.
        pub fn new(policy: $crate::PolicyBuilder) -> Result<Client, BuildError> {
            ClientBuilder::new(policy).build()
        }

        /// A builder for this policy, for the transport's settings and events.
        pub fn builder(policy: $crate::PolicyBuilder) -> ClientBuilder {
            ClientBuilder::new(policy)
        }

        /// The engine (policy, endpoint health, budget) shared by this client's calls.
        pub fn engine(&self) -> &::std::sync::Arc<$crate::Engine> {
            &self.$($engine).+
        }

        /// The policy.
        pub fn policy(&self) -> &$crate::Policy {
            self.engine().policy()
        }

        /// A snapshot of the health of the endpoint with `id`, now.
        pub fn health(&self, id: &str) -> Option<$crate::EndpointHealth> {
            self.engine().health_of(id, $now())
        }

        /// Resets the endpoint with `id` to closed, by hand; false for an unknown id.
        pub fn reset(&self, id: &str) -> bool {
            self.engine().reset(id, $now())
        }

        /// A GET call to `url` (a path such as `/v1/charges`, or an absolute URL).
        pub fn get(&self, url: impl AsRef<str>) -> $builder {
            self.request($crate::__http::Method::GET, url.as_ref())
        }

        /// A POST call to `url`.
        pub fn post(&self, url: impl AsRef<str>) -> $builder {
            self.request($crate::__http::Method::POST, url.as_ref())
        }

        /// A PUT call to `url`.
        pub fn put(&self, url: impl AsRef<str>) -> $builder {
            self.request($crate::__http::Method::PUT, url.as_ref())
        }

        /// A PATCH call to `url`.
        pub fn patch(&self, url: impl AsRef<str>) -> $builder {
            self.request($crate::__http::Method::PATCH, url.as_ref())
        }

        /// A DELETE call to `url`.
        pub fn delete(&self, url: impl AsRef<str>) -> $builder {
            self.request($crate::__http::Method::DELETE, url.as_ref())
        }

        /// A HEAD call to `url`.
        pub fn head(&self, url: impl AsRef<str>) -> $builder {
            self.request($crate::__http::Method::HEAD, url.as_ref())
        }
    };
}

/// Expands to a response's report accessors (`report`, `request_id`,
/// `may_have_executed`), inside the response type's `impl` block, whose
/// [`Report`](crate::Report) field is `$report`.
#[doc(hidden)]
#[macro_export]
macro_rules! response_report_methods {
    ($report:ident) => {
        /// The call's report: every attempt, the elapsed time, the stop reason.
        pub fn report(&self) -> &$crate::Report {
            &self.$report
        }

        /// The call's request id.
        pub fn request_id(&self) -> &str {
            self.$report.request_id.as_str()
        }

        /// Whether any attempt may have done the work (SPEC 2.10): true for a response,
        /// except a `not_processed` one (such as 429) when nothing else may have executed.
        pub fn may_have_executed(&self) -> bool {
            self.$report.may_have_executed
        }
    };
}

/// Expands to a client builder's event setters, inside its `impl` block: `on_event`
/// (stored in the `Option<EventSink>` field `$events`) and, with the adapter's `tracing`
/// feature, `tracing` (the `bool` field `tracing`). With `async`, also the setters every
/// async adapter shares: `buffer_bodies` (the `Option<usize>` field `buffer_limit`) and
/// `token_provider` (the `Option<AsyncProvider>` field `tokens`).
#[doc(hidden)]
#[macro_export]
macro_rules! client_builder_setters {
    ($events:ident) => {
        /// Delivers every call's events to `f`, synchronously and in causal order, after
        /// the policy's own sink (a per-call sink gets them after both). Panics in `f` are
        /// not caught.
        pub fn on_event(mut self, f: impl Fn(&$crate::Event<'_>) + Send + Sync + 'static) -> Self {
            self.$events = Some(::std::sync::Arc::new(f));
            self
        }

        /// Whether every event is also forwarded to `tracing` (target `baton`, debug
        /// level), besides the policy's sink and [`on_event`](Self::on_event) (default:
        /// on, with the `tracing` feature).
        #[cfg(feature = "tracing")]
        pub fn tracing(mut self, on: bool) -> Self {
            self.tracing = on;
            self
        }
    };
    ($events:ident, async) => {
        $crate::client_builder_setters!($events);

        /// Buffers streamed request bodies of every call up to `limit` bytes so that they
        /// can be replayed (default: off; a stream is sent once). A body over the limit is
        /// sent once, and the engine's `BodyNotBuffered` event says so. Same as the request
        /// builder's `buffer_body` on every call.
        pub fn buffer_bodies(mut self, limit: usize) -> Self {
            self.buffer_limit = Some(limit);
            self
        }

        /// The token provider of the endpoints with a credential slot
        /// ([`Endpoint::credential`]($crate::Endpoint::credential)), called with the
        /// endpoint id by the one call that refreshes that endpoint's token (SPEC 9): ahead
        /// of expiry, after a 401 of the current token, or when none is held. Its error's
        /// text is kept (never a token); the attempt then fails undelivered and the call
        /// fails over where permitted. The builder's type docs show it in use.
        pub fn token_provider<F, Fut, E>(mut self, provider: F) -> Self
        where
            F: Fn(&str) -> Fut + Send + Sync + 'static,
            Fut: ::std::future::Future<Output = Result<$crate::credential::Token, E>>
                + Send
                + 'static,
            E: ::std::fmt::Display,
        {
            self.tokens = Some($crate::credential::async_provider(provider));
            self
        }
    };
}

/// Expands to an async adapter's event-stream type: a newtype `$name` around
/// [`AsyncDriver`](crate::sse::AsyncDriver)`<$transport>` with `on_notice`, `delivered`,
/// `next`, and a `futures_core::Stream` impl (the adapter depends on `futures-core`).
/// Written once here so the tokio and async-std streams are the same type in two idioms.
#[doc(hidden)]
#[macro_export]
macro_rules! async_event_stream {
    ($(#[$doc:meta])* $name:ident, $transport:ty, $error:ty) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub struct $name($crate::sse::AsyncDriver<$transport>);

        impl $name {
            /// Also tells `f` of every connection opened and every reconnection (with its
            /// wait, reason and whether it fails over). Set it before the first read.
            pub fn on_notice(
                mut self,
                f: impl Fn(&$crate::sse::Notice) + Send + Sync + 'static,
            ) -> Self {
                self.0.on_notice(f);
                self
            }

            /// Events delivered so far.
            pub fn delivered(&self) -> u64 {
                self.0.delivered()
            }

            /// The next event (or `Restarted`), an error once, or `None` when the stream
            /// is over.
            pub async fn next(
                &mut self,
            ) -> Option<Result<$crate::sse::StreamItem, $crate::sse::EventsError<$error>>> {
                self.0.next().await
            }
        }

        impl futures_core::Stream for $name {
            type Item = Result<$crate::sse::StreamItem, $crate::sse::EventsError<$error>>;

            fn poll_next(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
            ) -> ::std::task::Poll<Option<Self::Item>> {
                self.get_mut().0.poll_next(cx)
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::os_entropy;
    use std::collections::HashSet;

    #[test]
    fn every_draw_of_os_entropy_differs_in_a_thread_and_across_threads() {
        let mut seen: HashSet<u64> = (0..1000).map(|_| os_entropy()).collect();
        assert_eq!(seen.len(), 1000, "draws in one thread repeat");
        let other: Vec<u64> = std::thread::spawn(|| (0..1000).map(|_| os_entropy()).collect())
            .join()
            .expect("the thread draws");
        seen.extend(other);
        assert_eq!(seen.len(), 2000, "another thread draws what this one drew");
    }
}
