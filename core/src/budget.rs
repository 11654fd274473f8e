//! The retry budget (SPEC 2.7): protects a struggling provider from amplification.
//!
//! Shared by all calls of one client. Each first attempt deposits `ratio` tokens; each extra
//! attempt (retry, failover, hedge) withdraws one; deposits and withdrawals count for
//! `window`; a reserve of `min_per_sec x window` tokens is always available on top. The
//! window is kept as ten fixed slots, so the state is a few words behind one short lock and
//! never allocates. Attempts after an undelivered failure are free and never ask.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::policy::Budget;
use crate::time::since;

const SLOTS: usize = 10;

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    index: u64,
    deposits: u64,
    withdrawals: u64,
}

#[derive(Debug)]
struct Inner {
    origin: Option<Instant>,
    slots: [Slot; SLOTS],
}

/// The budget state of one client.
#[derive(Debug)]
pub(crate) struct BudgetState {
    cfg: Budget,
    slot_width: Duration,
    inner: Mutex<Inner>,
}

impl BudgetState {
    pub(crate) fn new(cfg: Budget) -> Self {
        let slot_width = (cfg.window / SLOTS as u32).max(Duration::from_millis(1));
        BudgetState {
            cfg,
            slot_width,
            inner: Mutex::new(Inner {
                origin: None,
                slots: [Slot::default(); SLOTS],
            }),
        }
    }

    fn slot_index(&self, inner: &mut Inner, now: Instant) -> u64 {
        let origin = *inner.origin.get_or_insert(now);
        (since(now, origin).as_nanos() / self.slot_width.as_nanos().max(1)) as u64 + SLOTS as u64
    }

    fn current(inner: &mut Inner, index: u64) -> &mut Slot {
        let s = &mut inner.slots[(index % SLOTS as u64) as usize];
        if s.index != index {
            *s = Slot {
                index,
                deposits: 0,
                withdrawals: 0,
            };
        }
        s
    }

    fn totals(inner: &Inner, index: u64) -> (u64, u64) {
        inner
            .slots
            .iter()
            .filter(|s| s.index + (SLOTS as u64) > index && s.index <= index)
            .fold((0, 0), |(d, w), s| (d + s.deposits, w + s.withdrawals))
    }

    /// The reserve available in every window.
    fn reserve(&self) -> f64 {
        self.cfg.min_per_sec * self.cfg.window.as_secs_f64()
    }

    /// A first attempt deposits `ratio` tokens.
    pub(crate) fn deposit(&self, now: Instant) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let idx = self.slot_index(&mut inner, now);
        let slot = Self::current(&mut inner, idx);
        slot.deposits = slot.deposits.saturating_add(1);
    }

    /// An extra attempt asks for one token; returns whether it got it.
    pub(crate) fn try_withdraw(&self, now: Instant) -> bool {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let idx = self.slot_index(&mut inner, now);
        Self::current(&mut inner, idx);
        let (deposits, withdrawals) = Self::totals(&inner, idx);
        let balance = self.reserve() + self.cfg.ratio * deposits as f64 - withdrawals as f64;
        if balance >= 1.0 {
            let slot = Self::current(&mut inner, idx);
            slot.withdrawals = slot.withdrawals.saturating_add(1);
            true
        } else {
            false
        }
    }

    /// Tokens available now (for inspection and tests).
    pub(crate) fn balance(&self, now: Instant) -> f64 {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let idx = self.slot_index(&mut inner, now);
        let (d, w) = Self::totals(&inner, idx);
        self.reserve() + self.cfg.ratio * d as f64 - w as f64
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
