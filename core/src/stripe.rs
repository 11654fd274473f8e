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

/// The calling thread's stripe, in `0..STRIPES`.
#[inline]
pub(crate) fn current() -> usize {
    STRIPE.with(|s| *s)
}
