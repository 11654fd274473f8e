//! Timers through a small trait, so the layer ties core to no runtime.

use std::future::Future;
use std::pin::Pin;
use std::time::Instant;

/// A future that completes at an instant.
pub type Sleeping = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Makes the layer's timers (attempt timeouts, backoff and `Retry-After` waits) and reads
/// the clock the engine decides by: both from the same source, so an executor with its own
/// (or a paused) clock keeps the engine's times and its timers in step.
///
/// ```
/// use std::time::Instant;
/// use baton_tower::{Sleep, Sleeping};
/// /// tokio's timers, written out (what `TokioSleep` does).
/// struct MyTimers;
/// impl Sleep for MyTimers {
///     fn sleep_until(&self, deadline: Instant) -> Sleeping {
///         Box::pin(tokio::time::sleep_until(deadline.into()))
///     }
///     fn now(&self) -> Instant {
///         tokio::time::Instant::now().into_std()
///     }
/// }
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// MyTimers.sleep_until(MyTimers.now()).await;
/// # }
/// ```
pub trait Sleep: Send + Sync + 'static {
    /// A future that completes at `deadline` (at once when it has passed).
    fn sleep_until(&self, deadline: Instant) -> Sleeping;

    /// The time now, on the clock `sleep_until` counts by (default: the OS's monotonic
    /// clock).
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// tokio's timers (feature `tokio`, on by default).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use baton_tower::{Sleep, TokioSleep};
/// TokioSleep.sleep_until(std::time::Instant::now()).await;
/// # }
/// ```
#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioSleep;

#[cfg(feature = "tokio")]
impl Sleep for TokioSleep {
    fn sleep_until(&self, deadline: Instant) -> Sleeping {
        Box::pin(tokio::time::sleep_until(tokio::time::Instant::from_std(
            deadline,
        )))
    }

    fn now(&self) -> Instant {
        // tokio's clock, which a paused test runtime moves by hand.
        tokio::time::Instant::now().into_std()
    }
}
