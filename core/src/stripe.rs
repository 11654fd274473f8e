//! Per-thread stripes of state shared by all calls of one client, so that concurrent
//! healthy calls on different threads write different cache lines.
//!
//! Each thread gets a stripe number the first time it asks (threads are numbered in the
//! order they first ask, so two threads of a client land on different stripes); state
//! that every call updates (seed counters, budget deposits) is kept once per stripe, each
//! on its own cache line, and read across all stripes only on the rare paths.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Stripes per striped value.
pub(crate) const STRIPES: usize = 8;

/// A value on a cache line of its own (128 bytes: adjacent-line prefetchers pull pairs).
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct Padded<T>(pub(crate) T);

static NEXT_THREAD: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static STRIPE: usize = NEXT_THREAD.fetch_add(1, Ordering::Relaxed) % STRIPES;
}

/// Notes a write to state that other threads' calls also write (a lock, a shared atomic).
/// Counted only in this crate's tests, which prove that a healthy call makes none.
#[inline(always)]
pub(crate) fn shared_write() {
    #[cfg(test)]
    writes::SHARED.with(|c| c.set(c.get() + 1));
}

/// Notes a write to the calling thread's own stripe (counted only in tests).
#[inline(always)]
pub(crate) fn own_stripe_write() {
    #[cfg(test)]
    writes::OWN.with(|c| c.set(c.get() + 1));
}

#[cfg(test)]
pub(crate) mod writes {
    use std::cell::Cell;

    thread_local! {
        pub(crate) static SHARED: Cell<u64> = const { Cell::new(0) };
        pub(crate) static OWN: Cell<u64> = const { Cell::new(0) };
    }

    /// (shared writes, own-stripe writes) the calling thread made so far.
    pub(crate) fn counts() -> (u64, u64) {
        (SHARED.with(Cell::get), OWN.with(Cell::get))
    }
}

/// The calling thread's stripe, in `0..STRIPES`.
#[inline]
pub(crate) fn current() -> usize {
    STRIPE.with(|s| *s)
}

#[cfg(test)]
mod tests {
    use super::writes::counts;
    use crate::{BreakerRule, Endpoint, Engine, Policy, RequestInfo};
    use std::time::{Duration, Instant};

    fn healthy_call(engine: &Engine, info: &RequestInfo<'_>, now: Instant) {
        let (_, done) = crate::sim::answered_call(engine, info, http::StatusCode::OK, now);
        assert_eq!(done.report().attempts.len(), 1);
    }

    /// SPEC 6 (scaling): a healthy call on a client shared by threads writes no cache line
    /// that other threads' calls write: no health lock, no shared atomic, no budget
    /// withdrawal lock; only its own thread's stripe (its seed counter and, with the budget
    /// on, its deposit).
    #[test]
    fn a_healthy_call_writes_only_its_own_stripe() {
        let (uri, headers) = ("/".parse::<http::Uri>().unwrap(), http::HeaderMap::new());
        let info = RequestInfo {
            method: &http::Method::GET,
            uri: &uri,
            headers: &headers,
        };
        for (rule, budget) in [
            (BreakerRule::default(), false),
            (BreakerRule::default(), true),
            (BreakerRule::failure_rate(), false),
            (BreakerRule::failure_rate(), true),
        ] {
            let mut b = Policy::builder()
                .endpoint(Endpoint::new("a", "https://a.example/"))
                .endpoint(Endpoint::new("b", "https://b.example/"))
                .endpoint(Endpoint::new("c", "https://c.example/"))
                .configure(|s| s.breaker.rule = rule);
            if !budget {
                b = b.budget(None);
            }
            let engine = Engine::with_entropy(b.build().unwrap(), 7);
            let mut now = Instant::now();
            // A failure-rate window becomes quiet once it is full of successes.
            for _ in 0..64 {
                healthy_call(&engine, &info, now);
            }
            let before = counts();
            const N: u64 = 1000;
            for _ in 0..N {
                now += Duration::from_millis(3);
                healthy_call(&engine, &info, now);
            }
            let (shared, own) = (counts().0 - before.0, counts().1 - before.1);
            assert_eq!(shared, 0, "{rule:?}, budget {budget}: shared writes");
            let per_call = 1 + u64::from(budget);
            assert_eq!(
                own,
                N * per_call,
                "{rule:?}, budget {budget}: own-stripe writes"
            );
        }
    }
}
