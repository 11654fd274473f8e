//! The retry budget (SPEC 2.7): protects a struggling provider from amplification.
//!
//! Shared by all calls of one client. Each first attempt deposits `ratio` tokens; each extra
//! attempt (retry, failover, hedge) withdraws one; deposits and withdrawals count for
//! `window`; a reserve of `min_per_sec x window` tokens is always available on top. The
//! window is kept as ten fixed slots, so the state is a few words behind short locks and
//! never allocates. Attempts after an undelivered failure are free and never ask.
//!
//! Deposits are made by every call, so they are striped per thread (`stripe.rs`): a
//! healthy call locks only its own thread's stripe. Withdrawals are rare (only calls that
//! repeat) and are serialized by one lock, under which every stripe's deposits are summed:
//! two withdrawals never both spend the last token.

use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use crate::policy::Budget;
use crate::stripe::{Padded, STRIPES};
use crate::time::since;

const SLOTS: usize = 10;

/// Counts per window slot, each tagged with the slot's index in time.
#[derive(Debug, Clone, Copy, Default)]
struct Ring([(u64, u64); SLOTS]);

impl Ring {
    fn add(&mut self, index: u64) {
        let s = &mut self.0[(index % SLOTS as u64) as usize];
        if s.0 != index {
            *s = (index, 0);
        }
        s.1 = s.1.saturating_add(1);
    }

    /// The count over the window that ends with slot `index`.
    fn total(&self, index: u64) -> u64 {
        self.0
            .iter()
            .filter(|(i, _)| i + (SLOTS as u64) > index && *i <= index)
            .map(|(_, n)| n)
            .sum()
    }
}

/// The budget state of one client.
#[derive(Debug)]
pub(crate) struct BudgetState {
    cfg: Budget,
    slot_width: Duration,
    /// The time slot indexes count from (the first use).
    origin: OnceLock<Instant>,
    deposits: Box<[Padded<Mutex<Ring>>; STRIPES]>,
    withdrawals: Mutex<Ring>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing inside the lock can panic; recover the data if it ever did.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl BudgetState {
    pub(crate) fn new(cfg: Budget) -> Self {
        let slot_width = (cfg.window / SLOTS as u32).max(Duration::from_millis(1));
        BudgetState {
            cfg,
            slot_width,
            origin: OnceLock::new(),
            deposits: Box::default(),
            withdrawals: Mutex::new(Ring::default()),
        }
    }

    fn slot_index(&self, now: Instant) -> u64 {
        let origin = *self.origin.get_or_init(|| now);
        // In u64 nanoseconds (584 years), not u128: a u128 division is a call into the
        // compiler's runtime on every first attempt.
        let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        ns(since(now, origin)) / ns(self.slot_width).max(1) + SLOTS as u64
    }

    /// The reserve available in every window.
    fn reserve(&self) -> f64 {
        self.cfg.min_per_sec * self.cfg.window.as_secs_f64()
    }

    fn balance_at(&self, withdrawals: &Ring, index: u64) -> f64 {
        // Locking every stripe writes to them: the rare path (an extra attempt) only.
        crate::stripe::shared_write();
        let deposits: u64 = self.deposits.iter().map(|d| lock(&d.0).total(index)).sum();
        self.reserve() + self.cfg.ratio * deposits as f64 - withdrawals.total(index) as f64
    }

    /// A first attempt deposits `ratio` tokens (on the calling thread's stripe).
    pub(crate) fn deposit(&self, now: Instant) {
        let idx = self.slot_index(now);
        crate::stripe::own_stripe_write();
        lock(&self.deposits[crate::stripe::current()].0).add(idx);
    }

    /// An extra attempt asks for one token; returns whether it got it.
    pub(crate) fn try_withdraw(&self, now: Instant) -> bool {
        let idx = self.slot_index(now);
        crate::stripe::shared_write();
        let mut withdrawals = lock(&self.withdrawals);
        if self.balance_at(&withdrawals, idx) >= 1.0 {
            withdrawals.add(idx);
            true
        } else {
            false
        }
    }

    /// Tokens available now (for inspection and tests).
    pub(crate) fn balance(&self, now: Instant) -> f64 {
        let idx = self.slot_index(now);
        let withdrawals = lock(&self.withdrawals);
        self.balance_at(&withdrawals, idx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(ratio: f64, min_per_sec: f64) -> BudgetState {
        BudgetState::new(Budget {
            ratio,
            window: Duration::from_secs(10),
            min_per_sec,
        })
    }

    #[test]
    fn budget_allows_ratio_of_first_attempts_plus_reserve() {
        let b = budget(0.2, 0.0);
        let t = Instant::now();
        for _ in 0..100 {
            b.deposit(t);
        }
        let granted = (0..100).filter(|_| b.try_withdraw(t)).count();
        assert_eq!(granted, 20);
    }

    #[test]
    fn budget_reserve_is_min_per_sec_times_window() {
        let b = budget(0.0, 1.0);
        let t = Instant::now();
        let granted = (0..100).filter(|_| b.try_withdraw(t)).count();
        assert_eq!(granted, 10);
    }

    #[test]
    fn budget_deposits_and_withdrawals_expire_after_the_window() {
        let b = budget(1.0, 0.0);
        let t = Instant::now();
        for _ in 0..5 {
            b.deposit(t);
        }
        assert_eq!((0..10).filter(|_| b.try_withdraw(t)).count(), 5);
        let later = t + Duration::from_secs(11);
        assert!(!b.try_withdraw(later), "old deposits expired");
        b.deposit(later);
        assert!(b.try_withdraw(later));
        assert!(b.balance(later) < 1.0);
    }
}
