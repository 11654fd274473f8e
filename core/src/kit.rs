//! What every adapter shares beyond the call itself: the per-call option setters, written
//! once here and expanded into each adapter's request builder, so a user who knows one
//! adapter knows the option names of all three.

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
