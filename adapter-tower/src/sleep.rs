//! Timers through a small trait, so the layer ties core to no runtime.

use std::future::Future;
use std::pin::Pin;
use std::time::Instant;

/// A future that completes at an instant.
pub type Sleeping = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Makes the layer's timers: attempt timeouts, backoff and `Retry-After` waits.
///
/// ```
/// use std::time::Instant;
/// use baton_tower::{Sleep, Sleeping};
/// /// A timer source for an executor with its own clock.
/// struct Ready;
/// impl Sleep for Ready {
///     fn sleep_until(&self, _deadline: Instant) -> Sleeping {
///         Box::pin(std::future::ready(()))
///     }
/// }
/// let _ = Ready.sleep_until(Instant::now());
/// ```
pub trait Sleep: Send + Sync + 'static {
    /// A future that completes at `deadline` (at once when it has passed).
    fn sleep_until(&self, deadline: Instant) -> Sleeping;
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
}
