//! Histogram buckets: the log2 slots of `bpf/iolat.h` and their Prometheus `le`
//! bounds.
//!
//! The BPF side counts time in units of 1 ms / 1024 (976.5625 ns). Slot `k`
//! (`0 <= k < NSLOTS - 1`) holds I/Os that took at most `2^k` units, i.e. at
//! most `2^k / 1024` ms; the last slot holds everything slower than
//! `2^(NSLOTS - 2)` units (32.768 s) and only appears in `le="+Inf"`. With this
//! unit the boundaries of Oracle's wait event histogram (1, 2, 4, ... 32 ms and
//! 1024 ms, which Oracle prints as "1 s") are slot boundaries exactly.

/// Number of slots per histogram (`IOLAT_NSLOTS` in `bpf/iolat.h`).
pub const NSLOTS: usize = 27;

/// Slots with a finite upper bound (the last slot is the overflow).
pub const FINITE_SLOTS: usize = NSLOTS - 1;

/// Numerator and denominator of the unit in ns (`IOLAT_UNIT_NS_NUM/DEN`).
const UNIT_NS_NUM: u64 = 1_000_000;
const UNIT_NS_DEN: u64 = 1024;

/// The slot a time of `ns` nanoseconds falls in: the smallest `k` with
/// `ns <= 2^k units`, capped at the overflow slot. The same arithmetic as
/// `slot_of()` in `bpf/iolat.bpf.c`.
pub fn slot_of_ns(ns: u64) -> usize {
    let units = ns
        .saturating_mul(UNIT_NS_DEN)
        .saturating_add(UNIT_NS_NUM - 1)
        / UNIT_NS_NUM;
    if units <= 1 {
        return 0;
    }
    let k = 64 - (units - 1).leading_zeros() as usize;
    k.min(NSLOTS - 1)
}

/// The largest time in ns that still falls in slot `k` (`k < FINITE_SLOTS`):
/// `floor(2^k * 10^6 / 1024)`.
pub fn slot_max_ns(k: usize) -> u64 {
    assert!(k < FINITE_SLOTS, "slot {k} has no finite bound");
    ((1u64 << k) * UNIT_NS_NUM) / UNIT_NS_DEN
}

/// The upper bound of slot `k` in seconds, exactly, as a decimal string:
/// `2^k / 1024000` has a finite decimal expansion (`2^(k-10) / 1000`).
pub fn le_decimal(k: usize) -> String {
    assert!(k < FINITE_SLOTS, "slot {k} has no finite bound");
    // 2^k / (2^13 * 125) s = 2^k * 5^13 / (125 * 10^13) s = 2^k * 5^10 / 10^13 s
    let numerator: u128 = (1u128 << k) * 5u128.pow(10);
    let scale: u32 = 13;
    let int = numerator / 10u128.pow(scale);
    let frac = numerator % 10u128.pow(scale);
    if frac == 0 {
        return format!("{int}");
    }
    let mut frac = format!("{frac:0width$}", width = scale as usize);
    while frac.ends_with('0') {
        frac.pop();
    }
    format!("{int}.{frac}")
}

/// The upper bound of slot `k` in seconds as an `f64` (what the exporter hands
/// to the encoder; it prints as [`le_decimal`]).
pub fn le_seconds(k: usize) -> f64 {
    assert!(k < FINITE_SLOTS, "slot {k} has no finite bound");
    (1u64 << k) as f64 / 1_024_000.0
}

/// The slot whose upper bound is `le` seconds (`None` for `+Inf` or a bound that
/// is not one of ours).
pub fn slot_of_le(le: &str) -> Option<usize> {
    let value: f64 = le.parse().ok()?;
    (0..FINITE_SLOTS).find(|&k| {
        let bound = le_seconds(k);
        (value - bound).abs() <= bound * 1e-9
    })
}

/// The slots whose upper bounds are exported as Prometheus `le` buckets:
/// every power of two from 2^4 units (15.625 us) to 2^20 units (1.024 s), then
/// 4.096 s and 32.768 s, then `+Inf`. Coarser than the kernel's slots at the
/// ends (nothing a disk does takes under 15 us, and beyond a second only the
/// order of magnitude matters) to keep a scrape of 1,000 disks small; every
/// Oracle wait-histogram boundary is among them. Cumulative counts at a subset
/// of the boundaries are exact.
pub const EXPORTED_SLOTS: [usize; 19] = [
    4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 22, 25,
];

/// Prometheus buckets `(upper bound, count since the previous bound)` at the
/// [`EXPORTED_SLOTS`] bounds, then `+Inf`; the encoder accumulates them.
pub fn prometheus_buckets(slots: &[u64; NSLOTS]) -> Vec<(f64, u64)> {
    let mut out = Vec::with_capacity(EXPORTED_SLOTS.len() + 1);
    let mut from = 0;
    for &k in &EXPORTED_SLOTS {
        let n = slots[from..=k].iter().fold(0u64, |a, &b| a.wrapping_add(b));
        out.push((le_seconds(k), n));
        from = k + 1;
    }
    let rest = slots[from..].iter().fold(0u64, |a, &b| a.wrapping_add(b));
    out.push((f64::INFINITY, rest));
    out
}

/// Cumulative counts (`le` semantics): entry `k` = I/Os in slots `0..=k`.
pub fn cumulative(slots: &[u64; NSLOTS]) -> [u64; NSLOTS] {
    let mut out = [0u64; NSLOTS];
    let mut sum = 0u64;
    for (k, &n) in slots.iter().enumerate() {
        sum = sum.wrapping_add(n);
        out[k] = sum;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exactly_two_to_the_k_units_is_in_slot_k() {
        for k in 0..FINITE_SLOTS {
            let max = slot_max_ns(k);
            assert_eq!(slot_of_ns(max), k, "max of slot {k} ({max} ns)");
            assert_eq!(
                slot_of_ns(max + 1),
                (k + 1).min(NSLOTS - 1),
                "one ns above slot {k}"
            );
            // 2^k units in ns is an integer from k = 4 on (976.5625 * 16 = 15625)
            if k >= 4 {
                let exact = (1u64 << (k - 4)) * 15625;
                assert_eq!(exact, max);
                assert_eq!(slot_of_ns(exact), k);
            }
        }
    }

    #[test]
    fn zero_and_tiny_times_are_in_slot_0() {
        assert_eq!(slot_of_ns(0), 0);
        assert_eq!(slot_of_ns(1), 0);
        assert_eq!(slot_of_ns(976), 0);
        assert_eq!(slot_of_ns(977), 1);
    }

    #[test]
    fn oracle_boundaries_are_slot_boundaries() {
        let ms = 1_000_000u64;
        assert_eq!(slot_of_ns(ms), 10);
        assert_eq!(slot_of_ns(ms + 1), 11);
        assert_eq!(slot_of_ns(2 * ms), 11);
        assert_eq!(slot_of_ns(32 * ms), 15);
        assert_eq!(slot_of_ns(32 * ms + 1), 16);
        assert_eq!(slot_of_ns(1024 * ms), 20);
        assert_eq!(slot_of_ns(1024 * ms + 1), 21);
    }

    #[test]
    fn overflow_slot_takes_everything_slower() {
        assert_eq!(slot_of_ns(slot_max_ns(FINITE_SLOTS - 1) + 1), NSLOTS - 1);
        assert_eq!(slot_of_ns(3_600 * 1_000_000_000), NSLOTS - 1);
        assert_eq!(slot_of_ns(u64::MAX), NSLOTS - 1);
    }

    #[test]
    fn le_strings_are_exact_and_match_the_encoder() {
        assert_eq!(le_decimal(0), "0.0000009765625");
        assert_eq!(le_decimal(10), "0.001");
        assert_eq!(le_decimal(11), "0.002");
        assert_eq!(le_decimal(15), "0.032");
        assert_eq!(le_decimal(20), "1.024");
        assert_eq!(le_decimal(25), "32.768");
        for k in 0..FINITE_SLOTS {
            // exact: the decimal times 1024000 is 2^k
            let dec = le_decimal(k);
            let (int, frac) = dec.split_once('.').unwrap_or((&dec, ""));
            let digits: u128 = format!("{int}{frac}").parse().unwrap();
            let scale = 10u128.pow(frac.len() as u32);
            assert_eq!(digits * 1_024_000, (1u128 << k) * scale, "slot {k}: {dec}");
            // the f64 handed to the encoder prints (shortest round trip) as that decimal
            assert_eq!(format!("{}", le_seconds(k)), dec, "slot {k}");
            assert_eq!(slot_of_le(&dec), Some(k));
        }
        assert_eq!(slot_of_le("+Inf"), None);
        assert_eq!(slot_of_le("0.0015"), None);
    }

    #[test]
    fn buckets_are_cumulative_with_le_semantics() {
        let mut slots = [0u64; NSLOTS];
        for ns in [
            0,
            1_000_000,
            1_000_001,
            2_000_000,
            40_000_000,
            50_000_000_000,
        ] {
            slots[slot_of_ns(ns)] += 1;
        }
        let cum = cumulative(&slots);
        assert_eq!(cum[9], 1); // <= 0.5 ms: the 0
        assert_eq!(cum[10], 2); // <= 1 ms: + exactly 1 ms
        assert_eq!(cum[11], 4); // <= 2 ms: + 1 ms + 1 ns, 2 ms
        assert_eq!(cum[15], 4); // <= 32 ms
        assert_eq!(cum[16], 5); // <= 64 ms: + 40 ms
        assert_eq!(cum[FINITE_SLOTS - 1], 5);
        assert_eq!(cum[NSLOTS - 1], 6); // +Inf: + 50 s
        let buckets = prometheus_buckets(&slots);
        assert_eq!(buckets.len(), EXPORTED_SLOTS.len() + 1);
        assert!(buckets.last().unwrap().0.is_infinite());
        assert!(buckets.windows(2).all(|w| w[0].0 < w[1].0));
        // what the encoder prints: running sums of the bucket counts
        let mut run = 0;
        for (i, &(bound, n)) in buckets.iter().enumerate() {
            run += n;
            let k = EXPORTED_SLOTS.get(i).copied().unwrap_or(NSLOTS - 1);
            assert_eq!(run, cum[k], "le={bound}");
        }
        // the 0 (slot 0) is counted in the first exported bucket (slot 4)
        assert_eq!(buckets[0], (le_seconds(4), 1));
    }

    #[test]
    fn exported_bounds_include_every_oracle_boundary() {
        for k in [10, 11, 12, 13, 14, 15, 20] {
            assert!(EXPORTED_SLOTS.contains(&k), "slot {k}");
        }
        assert!(EXPORTED_SLOTS.windows(2).all(|w| w[0] < w[1]));
        assert!(*EXPORTED_SLOTS.last().unwrap() < FINITE_SLOTS);
    }
}
