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
/// setter takes `self` and returns it, in the builder style of every adapter.
///
/// The setters and the [`CallOptions`](crate::CallOptions) field each one sets:
/// `options` (all of them at once), `retry`, `failover`, `deny`, `prefer`, `deadline`,
/// `attempt_timeout`, `attempts_per_endpoint`, `max_attempts`, `request_id`,
/// `idempotency_key`, `on_event`.
#[doc(hidden)]
#[macro_export]
macro_rules! call_option_setters {
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

        /// This call's attempt timeout (from sending to the end of the response headers).
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
