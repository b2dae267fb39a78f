//! The adaptive rate: the reclaim watches its disk's own latency (the tracer's
//! read and write histograms, the database's I/O) and halves its rate when the
//! p99 rises above a configured multiple of what it was before the run;
//! `--rate` stays the ceiling. Pure: the caller supplies the histograms and
//! the clock ([`Pacer`]), the policy is [`decide`].

use asmguard_iostat::hist::{slot_max_ns, FINITE_SLOTS, NSLOTS};
use std::time::Duration;

/// The slowest rate the policy halves to (1 MiB/s).
pub const FLOOR: u64 = 1 << 20;
/// How often the latency is looked at while the reclaim runs.
pub const INTERVAL: Duration = Duration::from_secs(1);
/// I/Os an interval needs for its p99 to count (fewer: no decision).
pub const MIN_IOS: u64 = 20;

/// The p99 of a per-slot latency histogram, in seconds (the upper bound of
/// the slot holding the 99th percentile); `None` under [`MIN_IOS`] I/Os.
pub fn p99(slots: &[u64; NSLOTS]) -> Option<f64> {
    let n: u64 = slots.iter().sum();
    if n < MIN_IOS {
        return None;
    }
    let want = n - n / 100; // at least 99 % of the I/Os at or below
    let mut acc = 0u64;
    for (k, c) in slots.iter().enumerate() {
        acc += c;
        if acc >= want {
            return Some(if k < FINITE_SLOTS {
                slot_max_ns(k) as f64 / 1e9
            } else {
                f64::INFINITY
            });
        }
    }
    None
}

/// Per-slot counts between two cumulative histograms (a counter that went
/// backwards counts from zero).
pub fn delta(now: &[u64; NSLOTS], then: &[u64; NSLOTS]) -> [u64; NSLOTS] {
    let mut d = [0u64; NSLOTS];
    for k in 0..NSLOTS {
        d[k] = if now[k] >= then[k] {
            now[k] - then[k]
        } else {
            now[k]
        };
    }
    d
}

/// A change of rate and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// The new limit, bytes per second (`None`: unthrottled).
    pub rate: Option<u64>,
    pub why: String,
}

fn ms(s: f64) -> String {
    format!("{:.3} ms", s * 1000.0)
}

/// The policy. `rate`: the limit now (`None`: unthrottled, the ceiling too);
/// `ceiling`: `--rate`; `observed`: bytes per second the last interval did;
/// `baseline`/`p99`: the disk's p99 before the run and over the last
/// interval; `multiple`: the configured limit (0: never adapt).
///
/// * p99 above `multiple x baseline`: halve (an unthrottled run takes half of
///   what it did), never below [`FLOOR`];
/// * p99 at or below half that (or the baseline, if higher: a multiple
///   under 2), and below the ceiling: double, up to it;
/// * otherwise, or without both p99s: keep.
pub fn decide(
    rate: Option<u64>,
    ceiling: Option<u64>,
    observed: u64,
    baseline: Option<f64>,
    p99: Option<f64>,
    multiple: f64,
) -> Option<Change> {
    let (Some(b), Some(p)) = (baseline, p99) else {
        return None;
    };
    if multiple <= 0.0 || b <= 0.0 {
        return None;
    }
    let limit = b * multiple;
    if p > limit {
        let from = rate.unwrap_or(observed.max(2 * FLOOR));
        let to = (from / 2).max(FLOOR);
        if rate == Some(to) {
            return None;
        }
        return Some(Change {
            rate: Some(to),
            why: format!(
                "halved: disk p99 {} above {multiple} x {} before the run",
                ms(p),
                ms(b)
            ),
        });
    }
    // (with a multiple under 2, half the limit lies below the baseline: the
    // baseline then)
    if p <= (limit / 2.0).max(b) {
        let r = rate?;
        let up = r.saturating_mul(2);
        let to = match ceiling {
            Some(c) if up >= c => Some(c),
            Some(_) => Some(up),
            // unthrottled ceiling: back to unthrottled after a recovery past
            // what the disk did before the first halving
            None if up >= observed.saturating_mul(4) => None,
            None => Some(up),
        };
        if to == rate {
            return None;
        }
        return Some(Change {
            rate: to,
            why: format!(
                "raised: disk p99 {} back under {multiple} x {} before the run",
                ms(p),
                ms(b)
            ),
        });
    }
    None
}

/// The rate limit over a run whose limit changes: when the next chunk may go.
#[derive(Debug, Clone)]
pub struct Pacer {
    pub rate: Option<u64>,
    /// Since the last change of rate: the time and the bytes done then.
    mark: (Duration, u64),
}

impl Pacer {
    pub fn new(rate: Option<u64>) -> Pacer {
        Pacer {
            rate: rate.filter(|r| *r > 0),
            mark: (Duration::ZERO, 0),
        }
    }

    /// When (since the start) `done` bytes may have been handed back.
    pub fn due(&self, done: u64) -> Duration {
        match self.rate {
            Some(r) => {
                self.mark.0
                    + Duration::from_secs_f64(done.saturating_sub(self.mark.1) as f64 / r as f64)
            }
            None => Duration::ZERO,
        }
    }

    /// A new limit from `now` (since the start), `done` bytes done.
    pub fn set(&mut self, rate: Option<u64>, now: Duration, done: u64) {
        self.rate = rate;
        self.mark = (now, done);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MIB: u64 = 1 << 20;

    fn hist(at: &[(usize, u64)]) -> [u64; NSLOTS] {
        let mut h = [0; NSLOTS];
        for (k, n) in at {
            h[*k] = *n;
        }
        h
    }

    #[test]
    fn p99_is_the_slot_of_the_99th_percentile() {
        // 990 fast (slot 10: ~1 ms), 10 slow (slot 14: ~16 ms)
        assert_eq!(
            p99(&hist(&[(10, 990), (14, 10)])),
            Some(slot_max_ns(10) as f64 / 1e9)
        );
        // 980 fast, 20 slow: the 99th percentile is slow
        assert_eq!(
            p99(&hist(&[(10, 980), (14, 20)])),
            Some(slot_max_ns(14) as f64 / 1e9)
        );
        assert_eq!(p99(&hist(&[(10, 19)])), None, "too few I/Os");
        assert_eq!(p99(&hist(&[(NSLOTS - 1, 50)])), Some(f64::INFINITY));
        assert_eq!(delta(&hist(&[(3, 5)]), &hist(&[(3, 2)])), hist(&[(3, 3)]));
        assert_eq!(delta(&hist(&[(3, 1)]), &hist(&[(3, 2)])), hist(&[(3, 1)]));
    }

    #[test]
    fn halves_above_the_multiple_and_raises_back_to_the_ceiling() {
        let c = Some(64 * MIB);
        let b = Some(0.001);
        let ch = decide(c, c, 60 * MIB, b, Some(0.005), 4.0).unwrap();
        assert_eq!(ch.rate, Some(32 * MIB));
        assert_eq!(
            ch.why,
            "halved: disk p99 5.000 ms above 4 x 1.000 ms before the run"
        );
        // within the multiple: keep
        assert_eq!(decide(Some(32 * MIB), c, 0, b, Some(0.003), 4.0), None);
        // well under: double, capped at the ceiling
        let up = decide(Some(32 * MIB), c, 0, b, Some(0.001), 4.0).unwrap();
        assert_eq!(up.rate, Some(64 * MIB));
        assert!(up.why.starts_with("raised: "), "{}", up.why);
        assert_eq!(
            decide(Some(48 * MIB), c, 0, b, Some(0.001), 4.0)
                .unwrap()
                .rate,
            c
        );
        assert_eq!(decide(c, c, 0, b, Some(0.001), 4.0), None, "at the ceiling");
        // no baseline, no sample, or turned off: keep
        assert_eq!(decide(c, c, 0, None, Some(1.0), 4.0), None);
        assert_eq!(decide(c, c, 0, b, None, 4.0), None);
        assert_eq!(decide(c, c, 0, b, Some(1.0), 0.0), None);
        // never below the floor
        assert_eq!(decide(Some(FLOOR), c, 0, b, Some(1.0), 4.0), None);
        // unthrottled: half of what the last interval did
        let ch = decide(None, None, 200 * MIB, b, Some(1.0), 4.0).unwrap();
        assert_eq!(ch.rate, Some(100 * MIB));
    }

    /// A multiple under 2 (the histogram's slots are powers of two): one slot
    /// of noise above the baseline halves the rate, and once the p99 is back
    /// at the baseline the rate rises again (half the limit lies below the
    /// baseline, which a p99 read from the baseline's slot never reaches: the
    /// lab's bench sat at the floor for the rest of the run).
    #[test]
    fn a_multiple_under_two_rises_again_at_the_baseline() {
        let c = Some(64 * MIB);
        let b = Some(0.000_25);
        let down = decide(c, c, 0, b, Some(0.000_5), 1.5).unwrap();
        assert_eq!(down.rate, Some(32 * MIB));
        let up = decide(Some(32 * MIB), c, 0, b, Some(0.000_25), 1.5).unwrap();
        assert_eq!(up.rate, c, "{}", up.why);
        assert!(up.why.starts_with("raised"), "{}", up.why);
        // between the baseline and the limit: kept
        assert_eq!(decide(Some(32 * MIB), c, 0, b, Some(0.000_3), 1.5), None);
    }

    #[test]
    fn the_pacer_follows_the_changes() {
        let mut p = Pacer::new(Some(10 * MIB));
        assert_eq!(p.due(10 * MIB), Duration::from_secs(1));
        p.set(Some(5 * MIB), Duration::from_secs(1), 10 * MIB);
        // the next 10 MiB take 2 s at the halved rate
        assert_eq!(p.due(20 * MIB), Duration::from_secs(3));
        p.set(None, Duration::from_secs(3), 20 * MIB);
        assert_eq!(p.due(1 << 40), Duration::ZERO);
        assert_eq!(Pacer::new(Some(0)).rate, None);
    }

    proptest! {
        /// Whatever the latencies: the rate never exceeds the ceiling, never
        /// drops under the floor (from at or above it), only halves when the
        /// p99 is above the limit and only rises when it is at most half of it
        /// (or the baseline, with a multiple under 2).
        #[test]
        fn the_policy_keeps_its_bounds(
            ceiling in (2u64..4096).prop_map(|m| m * MIB),
            steps in proptest::collection::vec((0.0001f64..0.1, 0u64..4096), 1..60),
            base in 0.0001f64..0.01,
            multiple in 1.0f64..10.0,
        ) {
            let mut rate = Some(ceiling);
            for (p, obs) in steps {
                let before = rate;
                if let Some(ch) = decide(rate, Some(ceiling), obs * MIB, Some(base), Some(p), multiple) {
                    let r = ch.rate.unwrap();
                    prop_assert!(r <= ceiling);
                    prop_assert!(r >= FLOOR.min(before.unwrap()));
                    if r < before.unwrap() {
                        prop_assert!(p > base * multiple);
                        prop_assert_eq!(r, (before.unwrap() / 2).max(FLOOR));
                    } else {
                        prop_assert!(p <= (base * multiple / 2.0).max(base));
                    }
                    rate = ch.rate;
                } else if p > base * multiple {
                    prop_assert!(before.unwrap() <= FLOOR);
                }
            }
        }
    }
}
