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

/// The layer's timers as its calls use them: tokio's, made where the attempt keeps them,
/// or the builder's own [`Sleep`], boxed.
///
/// tokio's attempt timer is built in the attempt's own future, not boxed behind the trait:
/// a healthy call then allocates one block fewer and makes no dynamic call for its timer
/// (the trait's box held 1 allocation and about 140 instructions a call, callgrind on
/// `callcost tower`). [`TokioSleep`] given to the builder is recognised as the same.
pub(crate) enum Timers {
    /// tokio's timers, in place.
    #[cfg(feature = "tokio")]
    Tokio,
    /// The builder's timers.
    Given(std::sync::Arc<dyn Sleep>),
}

/// A timer made in place in an attempt's future: tokio's, or (without the `tokio` feature)
/// one never made.
#[cfg(feature = "tokio")]
pub(crate) type InPlace = tokio::time::Sleep;
/// A timer made in place in an attempt's future: tokio's, or (without the `tokio` feature)
/// one never made.
#[cfg(not(feature = "tokio"))]
pub(crate) type InPlace = std::future::Pending<()>;

impl Timers {
    /// The timers of `sleep`.
    pub(crate) fn of<T: Sleep>(sleep: T) -> Timers {
        #[cfg(feature = "tokio")]
        if std::any::TypeId::of::<T>() == std::any::TypeId::of::<TokioSleep>() {
            return Timers::Tokio;
        }
        Timers::Given(std::sync::Arc::new(sleep))
    }

    /// The time now, on the timers' clock.
    pub(crate) fn now(&self) -> Instant {
        match self {
            #[cfg(feature = "tokio")]
            Timers::Tokio => TokioSleep.now(),
            Timers::Given(s) => s.now(),
        }
    }

    /// A boxed timer that ends at `at` (the driver's waits).
    pub(crate) fn sleep_until(&self, at: Instant) -> Sleeping {
        match self {
            #[cfg(feature = "tokio")]
            Timers::Tokio => TokioSleep.sleep_until(at),
            Timers::Given(s) => s.sleep_until(at),
        }
    }

    /// An attempt's timer that ends at `at`: one made in place (to be pinned where the
    /// attempt keeps it), or a boxed one.
    pub(crate) fn attempt(&self, at: Instant) -> (Option<InPlace>, Option<Sleeping>) {
        match self {
            #[cfg(feature = "tokio")]
            Timers::Tokio => {
                let at = tokio::time::Instant::from_std(at);
                (Some(tokio::time::sleep_until(at)), None)
            }
            Timers::Given(s) => (None, Some(s.sleep_until(at))),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::{Sleep, Sleeping, Timers};

    /// A timer source of one's own.
    struct Own;
    impl Sleep for Own {
        fn sleep_until(&self, _: Instant) -> Sleeping {
            Box::pin(std::future::ready(()))
        }
    }

    #[test]
    fn tokio_sleep_given_is_tokios_timers_in_place_and_any_other_is_the_builders() {
        #[cfg(feature = "tokio")]
        assert!(matches!(Timers::of(super::TokioSleep), Timers::Tokio));
        assert!(matches!(Timers::of(Own), Timers::Given(_)));
        let (in_place, boxed) = Timers::of(Own).attempt(Instant::now());
        assert!(in_place.is_none() && boxed.is_some());
    }
}
