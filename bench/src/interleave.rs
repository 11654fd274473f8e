//! Scenario 1's method: contenders measured call by call, interleaved.
//!
//! Every caller (a task, or a thread for blocking) makes rounds; in each round it gives
//! every contender a turn of [`TURN`] calls, in an order that rotates with the round and
//! differs between callers, and times each call on its own. So every contender meets the
//! same machine within a millisecond or two: a stall of this 2-core VM, another VM on the
//! host, a frequency change, the provider's own work, all land on the contenders alike
//! instead of on one batch. A turn of several calls rather than one keeps each
//! contender's code and data as warm as in a loop of its own: alternating single calls
//! charged the contender with the most code for the cache misses the others caused.
//!
//! From the latencies:
//! - a contender's calls/s is `callers / mean latency` (Little's law: each caller has one
//!   call in flight at a time);
//! - the ratio of contender `c` to its raw client `b` is paired: the calls are cut into
//!   blocks of [`BLOCK`] rounds of one caller, each block gives `sum(b) / sum(c)` (the
//!   calls/s ratio over those rounds), and the ratio is the median block's. A block hit by
//!   a stall is one outlier among hundreds, and a drift of the machine across the run
//!   cancels inside each block.
//!
//! This is the paired-benchmark idea (alternate the two programs under test, compare
//! neighbours) applied to whole HTTP calls.

use std::future::Future;
use std::time::{Duration, Instant};

use crate::{fmt_d, median, quantile, verdict, Charts, Row};

/// Calls of one contender in a row, in each round.
pub(crate) const TURN: usize = 10;

/// Rounds per block of the paired ratio.
pub(crate) const BLOCK: usize = 5;

/// The order in which caller `caller` calls the `n` contenders in round `round`.
pub(crate) fn order(round: usize, caller: usize, n: usize) -> impl Iterator<Item = usize> {
    (0..n).map(move |k| (round + caller + k) % n)
}

/// Room for the latencies of `n` contenders over `rounds` rounds, allocated before the
/// first call is timed.
pub(crate) fn lanes(n: usize, rounds: usize) -> Vec<Vec<Duration>> {
    (0..n).map(|_| Vec::with_capacity(rounds * TURN)).collect()
}

/// Per-call latencies of `n` contenders measured interleaved: `lat[who][i]`, where the
/// calls with the same `i` were made by one caller in one round.
pub(crate) struct Interleaved {
    lat: Vec<Vec<Duration>>,
    callers: usize,
}

impl Interleaved {
    /// Joins the callers' latencies (`loops[caller][who]`, in call order).
    pub(crate) fn from_loops(loops: Vec<Vec<Vec<Duration>>>) -> Interleaved {
        let callers = loops.len();
        let n = loops.first().map_or(0, Vec::len);
        let mut lat = vec![Vec::new(); n];
        for per_caller in loops {
            for (who, l) in per_caller.into_iter().enumerate() {
                lat[who].extend(l);
            }
        }
        Interleaved { lat, callers }
    }

    /// Calls per second of contender `who`.
    pub(crate) fn rate(&self, who: usize) -> f64 {
        let l = &self.lat[who];
        let mean = l.iter().map(Duration::as_secs_f64).sum::<f64>() / l.len().max(1) as f64;
        self.callers as f64 / mean
    }

    /// The `p`-quantile of contender `who`'s latencies.
    pub(crate) fn quantile(&self, who: usize, p: f64) -> Duration {
        quantile(&self.lat[who], p)
    }

    /// The paired calls/s ratio of `who` to `base` (see the module docs).
    pub(crate) fn ratio(&self, who: usize, base: usize) -> f64 {
        let (c, b) = (&self.lat[who], &self.lat[base]);
        let per_caller = c.len() / self.callers.max(1);
        let block = BLOCK * TURN;
        let mut ratios = Vec::new();
        for caller in 0..self.callers {
            let start = caller * per_caller;
            let mut i = start;
            while i + block <= start + per_caller {
                let sum = |v: &[Duration]| {
                    v[i..i + block]
                        .iter()
                        .map(Duration::as_secs_f64)
                        .sum::<f64>()
                };
                ratios.push(sum(b) / sum(c));
                i += block;
            }
        }
        median(&ratios)
    }

    /// The table's result column for `who`.
    pub(crate) fn result(&self, who: usize) -> String {
        format!(
            "{:.0} calls/s, p50 {}, p99 {}",
            self.rate(who),
            fmt_d(self.quantile(who, 0.5)),
            fmt_d(self.quantile(who, 0.99))
        )
    }

    /// `who`'s p99 over `base`'s.
    pub(crate) fn p99_ratio(&self, who: usize, base: usize) -> f64 {
        self.quantile(who, 0.99).as_secs_f64() / self.quantile(base, 0.99).as_secs_f64()
    }
}

/// Runs `rounds` rounds of the `n` contenders (a turn of [`TURN`] calls each) in `tasks`
/// concurrent loops joined in the current task; `f(who)` makes one call of contender `who` and says whether it was
/// answered with a 2xx whose body was read.
pub(crate) async fn tasks<F, Fut>(rounds: usize, tasks: usize, n: usize, f: F) -> Interleaved
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = bool>,
{
    let f = &f;
    let loops = (0..tasks).map(|caller| async move {
        let mut lat = lanes(n, rounds);
        for round in 0..rounds {
            for who in order(round, caller, n) {
                for _ in 0..TURN {
                    let t = Instant::now();
                    let ok = f(who).await;
                    lat[who].push(t.elapsed());
                    assert!(ok, "scenario 1: every call answered (contender {who})");
                }
            }
        }
        lat
    });
    Interleaved::from_loops(futures_util::future::join_all(loops).await)
}

/// [`tasks`] on `threads` threads at once, for blocking clients.
pub(crate) fn threads(
    rounds: usize,
    threads: usize,
    n: usize,
    f: &(dyn Fn(usize) -> bool + Sync),
) -> Interleaved {
    let loops = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|caller| {
                s.spawn(move || {
                    let mut lat = lanes(n, rounds);
                    for round in 0..rounds {
                        for who in order(round, caller, n) {
                            for _ in 0..TURN {
                                let t = Instant::now();
                                let ok = f(who);
                                lat[who].push(t.elapsed());
                                assert!(ok, "scenario 1: every call answered (contender {who})");
                            }
                        }
                    }
                    lat
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("call thread"))
            .collect()
    });
    Interleaved::from_loops(loops)
}

/// The rows of one runtime and caller count, where `names[0]` is the raw client sending
/// baton's request bytes (the baseline), `names[1]` the same client with a plain request
/// and `names[2]` baton.
pub(crate) fn push_rows(
    rows: &mut Vec<Row>,
    charts: &mut Charts,
    names: [&str; 3],
    setup: &str,
    m: &Interleaved,
) {
    for who in 0..3 {
        let q = m.ratio(who, 0);
        let (ratio, goal) = match who {
            0 => ("1 (baseline)".to_string(), String::new()),
            1 => (
                format!("calls/s {q:.3}; p99 {:.2}x", m.p99_ratio(1, 0)),
                String::new(),
            ),
            _ => (
                format!(
                    "calls/s {q:.3}; p99 {:.2}x; vs a plain request {:.3}",
                    m.p99_ratio(2, 0),
                    m.ratio(2, 1)
                ),
                format!("calls/s ratio >= 0.98: {}", verdict(q >= 0.98)),
            ),
        };
        if who == 2 {
            charts
                .healthy
                .push((format!("{} vs {}, {setup}", names[2], names[0]), q));
        }
        rows.push(Row {
            scenario: "1 healthy",
            contender: names[who].into(),
            setup: setup.into(),
            result: m.result(who),
            ratio,
            goal,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: &[u64]) -> Vec<Duration> {
        v.iter().map(|&x| Duration::from_micros(x)).collect()
    }

    #[test]
    fn every_caller_calls_every_contender_once_a_round_in_a_rotating_order() {
        let a: Vec<usize> = order(0, 0, 3).collect();
        let b: Vec<usize> = order(1, 0, 3).collect();
        let c: Vec<usize> = order(0, 1, 3).collect();
        assert_eq!(a, [0, 1, 2]);
        assert_eq!(b, [1, 2, 0]);
        assert_eq!(c, [1, 2, 0]);
    }

    #[test]
    fn the_ratio_is_the_median_block_and_ignores_a_stalled_block() {
        // Two callers, 3 blocks each: the contender takes 110 µs a call where the base
        // takes 100 µs, except in one block where a stall made its calls 1 ms.
        let mut base = Vec::new();
        let mut slow = Vec::new();
        for block in 0..6 {
            base.extend(ms(&[100; BLOCK * TURN]));
            slow.extend(ms(&[if block == 4 { 1000 } else { 110 }; BLOCK * TURN]));
        }
        let m = Interleaved {
            lat: vec![base, slow],
            callers: 2,
        };
        assert!((m.ratio(1, 0) - 100.0 / 110.0).abs() < 1e-9);
        assert!((m.ratio(0, 0) - 1.0).abs() < 1e-12);
        // Two callers, each with one call in flight: calls/s = 2 / mean latency.
        assert!((m.rate(0) - 2.0 / 100e-6).abs() < 1e-3);
    }
}
