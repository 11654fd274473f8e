//! Scenario 1's method: contenders measured side by side, interleaved in turns.
//!
//! A run is made of rounds. In each round every contender has a turn: all callers (tasks,
//! or threads for blocking) make [`TURN`] calls each of that contender at once, and the
//! turn is timed as a whole (and each call on its own, for the latency quantiles). So
//! every contender meets the same machine within a few milliseconds: a stall of this
//! 2-core VM, another VM on the host, a frequency change, the provider's own work, all
//! land on the contenders alike instead of on one long batch.
//!
//! - All callers run the same contender at once: with callers on different contenders at
//!   the same moment, each call's time would mostly be the other callers' work, the same
//!   mix for everyone, and differences would shrink toward 1 with the number of callers.
//! - A turn of several calls rather than one keeps each contender's code and data as
//!   warm as in a loop of its own: alternating single calls charged the contender with
//!   the most code for the cache misses the others caused.
//! - The order of the turns in round `r` is permutation `r mod n!` (lexicographic, see
//!   [`order`]): over `n!` rounds every contender opens a round, and follows each other
//!   contender, equally often. A rotation would make each contender follow the same
//!   neighbour in most rounds, and inherit its cache misses.
//!
//! From the turns:
//! - a contender's calls/s is its calls over the sum of its turns' times;
//! - the ratio of contender `c` to its raw client `b` is paired: the rounds are cut into
//!   blocks of [`BLOCK`], each block gives `sum(b's turns) / sum(c's turns)` (the calls/s
//!   ratio over those rounds: both made the same calls), and the ratio is the median
//!   block's. A block hit by a stall is one outlier among many, and a drift of the machine
//!   across the run cancels inside each block.
//!
//! This is the paired-benchmark idea (alternate the programs under test, compare
//! neighbours) applied to whole HTTP calls.

use std::future::Future;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use crate::{fmt_d, median, quantile, verdict, Charts, Row};

/// Calls of one contender by each caller, in each turn.
pub(crate) const TURN: usize = 10;

/// Rounds per block of the paired ratio.
pub(crate) const BLOCK: usize = 6;

fn factorial(n: usize) -> usize {
    (1..=n).product()
}

/// The order of the `n` contenders' turns in round `round`: permutation number
/// `round mod n!` in lexicographic order.
pub(crate) fn order(round: usize, n: usize) -> Vec<usize> {
    let mut pool: Vec<usize> = (0..n).collect();
    let mut k = round % factorial(n);
    let mut out = Vec::with_capacity(n);
    for i in (0..n).rev() {
        let f = factorial(i);
        out.push(pool.remove(k / f));
        k %= f;
    }
    out
}

/// What an interleaved run measured, per contender: each round's turn time and every
/// call's latency.
pub(crate) struct Interleaved {
    turns: Vec<Vec<Duration>>,
    lat: Vec<Vec<Duration>>,
    /// Calls per turn (callers x [`TURN`]).
    per_turn: usize,
}

impl Interleaved {
    /// Room for `rounds` rounds of `n` contenders by `callers` callers, allocated before
    /// the first call is timed.
    pub(crate) fn new(n: usize, rounds: usize, callers: usize) -> Interleaved {
        let per_turn = callers * TURN;
        Interleaved {
            turns: (0..n).map(|_| Vec::with_capacity(rounds)).collect(),
            lat: (0..n)
                .map(|_| Vec::with_capacity(rounds * per_turn))
                .collect(),
            per_turn,
        }
    }

    /// Records contender `who`'s turn: its time and its calls' latencies.
    pub(crate) fn record(
        &mut self,
        who: usize,
        turn: Duration,
        lat: impl IntoIterator<Item = Duration>,
    ) {
        self.turns[who].push(turn);
        self.lat[who].extend(lat);
    }

    /// Calls per second of contender `who`.
    pub(crate) fn rate(&self, who: usize) -> f64 {
        let t = &self.turns[who];
        let secs: f64 = t.iter().map(Duration::as_secs_f64).sum();
        (t.len() * self.per_turn) as f64 / secs
    }

    /// The `p`-quantile of contender `who`'s latencies.
    pub(crate) fn quantile(&self, who: usize, p: f64) -> Duration {
        quantile(&self.lat[who], p)
    }

    /// The paired calls/s ratio of `who` to `base` (see the module docs).
    pub(crate) fn ratio(&self, who: usize, base: usize) -> f64 {
        let (c, b) = (&self.turns[who], &self.turns[base]);
        let sum = |v: &[Duration]| v.iter().map(Duration::as_secs_f64).sum::<f64>();
        // A run shorter than a block (a quick run) is one block.
        let block = BLOCK.min(c.len()).max(1);
        let ratios: Vec<f64> = c
            .chunks_exact(block)
            .zip(b.chunks_exact(block))
            .map(|(c, b)| sum(b) / sum(c))
            .collect();
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

    /// The table row of contender `who`, named `name`, with its ratio and goal columns.
    pub(crate) fn row(
        &self,
        who: usize,
        name: &str,
        setup: &str,
        ratio: String,
        goal: String,
    ) -> Row {
        Row {
            scenario: "1 healthy",
            contender: name.into(),
            setup: setup.into(),
            result: self.result(who),
            ratio,
            goal,
        }
    }

    /// `who`'s p99 over `base`'s.
    pub(crate) fn p99_ratio(&self, who: usize, base: usize) -> f64 {
        self.quantile(who, 0.99).as_secs_f64() / self.quantile(base, 0.99).as_secs_f64()
    }
}

/// One caller's turn: [`TURN`] calls of `f`, each timed.
async fn turn<Fut: Future<Output = bool>>(mut f: impl FnMut() -> Fut) -> [Duration; TURN] {
    let mut lat = [Duration::ZERO; TURN];
    for l in &mut lat {
        let t = Instant::now();
        let ok = f().await;
        *l = t.elapsed();
        assert!(ok, "scenario 1: every call answered");
    }
    lat
}

/// Runs `rounds` rounds of the `n` contenders with `tasks` concurrent callers joined in
/// the current task; `f(who)` makes one call of contender `who` and says whether it was
/// answered with a 2xx whose body was read.
pub(crate) async fn tasks<F, Fut>(rounds: usize, tasks: usize, n: usize, f: F) -> Interleaved
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = bool>,
{
    let f = &f;
    let mut m = Interleaved::new(n, rounds, tasks);
    for round in 0..rounds {
        for who in order(round, n) {
            let t = Instant::now();
            let lat = futures_util::future::join_all((0..tasks).map(|_| turn(|| f(who)))).await;
            m.record(who, t.elapsed(), lat.into_iter().flatten());
        }
    }
    m
}

/// [`tasks`] for blocking clients: `threads` threads, which start and end every turn
/// together (a barrier on each side of it).
pub(crate) fn threads(
    rounds: usize,
    threads: usize,
    n: usize,
    f: &(dyn Fn(usize) -> bool + Sync),
) -> Interleaved {
    let gate = Barrier::new(threads);
    let per_thread: Vec<(Vec<Duration>, Vec<[Duration; TURN]>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let gate = &gate;
                s.spawn(move || {
                    // This thread's view of each turn's time, and its calls, in turn order.
                    let mut turns = Vec::with_capacity(rounds * n);
                    let mut lat = Vec::with_capacity(rounds * n);
                    for round in 0..rounds {
                        for who in order(round, n) {
                            gate.wait();
                            let t = Instant::now();
                            // A fixed array: nothing is allocated inside the timed turn.
                            let mut l = [Duration::ZERO; TURN];
                            for d in &mut l {
                                let c = Instant::now();
                                let ok = f(who);
                                *d = c.elapsed();
                                assert!(ok, "scenario 1: every call answered");
                            }
                            gate.wait();
                            turns.push(t.elapsed());
                            lat.push(l);
                        }
                    }
                    (turns, lat)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("call thread"))
            .collect()
    });
    let mut m = Interleaved::new(n, rounds, threads);
    let mut k = 0;
    for round in 0..rounds {
        for who in order(round, n) {
            // The turn ends when the last thread is done: the longest view of it.
            let turn = per_thread.iter().map(|p| p.0[k]).max().unwrap_or_default();
            m.record(
                who,
                turn,
                per_thread.iter().flat_map(|p| p.1[k].iter().copied()),
            );
            k += 1;
        }
    }
    m
}

/// The chart's label of a baton row, short enough for the chart's margin ("baton-async-std
/// on smol vs bare hyper, 8 task(s)"): the rows' names and setup, each cut at its first
/// qualifier.
pub(crate) fn chart_label(baton: &str, raw: &str, setup: &str) -> String {
    let cut = |s: &'static str, t: &str| t.split(s).next().unwrap_or(t).to_string();
    let raw = cut(" on ", &cut(",", raw));
    format!("{} vs {raw}, {}", cut(" over ", baton), cut(",", setup))
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
                .push((chart_label(names[2], names[0], setup), q));
        }
        rows.push(m.row(who, names[who], setup, ratio, goal));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn over_n_factorial_rounds_every_contender_follows_every_other_equally_often() {
        let n = 3;
        let mut opens = [0; 3];
        let mut follows = [[0; 3]; 3];
        for round in 0..factorial(n) {
            let o = order(round, n);
            let mut sorted = o.clone();
            sorted.sort();
            assert_eq!(sorted, [0, 1, 2], "round {round}: {o:?} is a permutation");
            opens[o[0]] += 1;
            for w in o.windows(2) {
                follows[w[1]][w[0]] += 1;
            }
        }
        assert_eq!(opens, [2, 2, 2]);
        for (c, row) in follows.iter().enumerate() {
            for (p, &k) in row.iter().enumerate() {
                assert_eq!(k, if c == p { 0 } else { 2 }, "{c} after {p}");
            }
        }
        assert_eq!(order(0, 5), [0, 1, 2, 3, 4]);
        assert_eq!(order(119, 5), [4, 3, 2, 1, 0]);
    }

    #[test]
    fn the_ratio_is_the_median_block_and_ignores_a_stalled_block() {
        // Contender 1's turns take 1.1 ms where the base's take 1 ms, except in one block
        // where a stall made them 10 ms.
        let mut m = Interleaved::new(2, 3 * BLOCK, 1);
        for round in 0..3 * BLOCK {
            let slow = if round / BLOCK == 1 { 10_000 } else { 1_100 };
            m.record(
                0,
                Duration::from_micros(1_000),
                [Duration::from_micros(100); TURN],
            );
            m.record(
                1,
                Duration::from_micros(slow),
                [Duration::from_micros(slow / 10); TURN],
            );
        }
        assert!((m.ratio(1, 0) - 1.0 / 1.1).abs() < 1e-9);
        assert!((m.ratio(0, 0) - 1.0).abs() < 1e-12);
        // TURN calls per 1 ms turn.
        assert!((m.rate(0) - TURN as f64 / 1e-3).abs() < 1e-6);
    }
}
