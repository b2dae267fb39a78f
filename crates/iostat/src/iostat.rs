//! `iostat`: per disk and op, IOPS, MB/s, average latency, and the share of I/Os
//! in the buckets of Oracle's wait event histogram (<1ms, <2ms, <4ms, <8ms,
//! <16ms, <32ms, <=1s, >1s), from two snapshots and the time between them.
//!
//! The buckets are exact slot boundaries (see [`crate::hist`]): "<1ms" is
//! "at most 1 ms" (slots 0..=10), ..., "<32ms" is (16 ms, 32 ms] (slot 15),
//! "<=1s" is (32 ms, 1024 ms] (slots 16..=20, Oracle's "1 s" bucket is 1024 ms
//! too), ">1s" is everything slower. MB is 2^20 bytes, as in Oracle's reports.

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use crate::snapshot::{Op, Snapshot};
use crate::NSLOTS;

/// Column titles of the wait histogram, in order.
pub const WAIT_BUCKETS: [&str; 8] = [
    "<1ms", "<2ms", "<4ms", "<8ms", "<16ms", "<32ms", "<=1s", ">1s",
];

/// The wait-histogram bucket (index into [`WAIT_BUCKETS`]) of a latency slot.
pub fn wait_bucket(slot: usize) -> usize {
    match slot {
        0..=10 => 0,
        11..=15 => slot - 10,
        16..=20 => 6,
        _ => 7,
    }
}

/// Share of I/Os per wait bucket, in percent (all 0 when there was no I/O).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct WaitShares {
    /// At most 1 ms.
    #[serde(rename = "<1ms")]
    pub lt_1ms: f64,
    /// (1, 2] ms.
    #[serde(rename = "<2ms")]
    pub lt_2ms: f64,
    /// (2, 4] ms.
    #[serde(rename = "<4ms")]
    pub lt_4ms: f64,
    /// (4, 8] ms.
    #[serde(rename = "<8ms")]
    pub lt_8ms: f64,
    /// (8, 16] ms.
    #[serde(rename = "<16ms")]
    pub lt_16ms: f64,
    /// (16, 32] ms.
    #[serde(rename = "<32ms")]
    pub lt_32ms: f64,
    /// (32, 1024] ms.
    #[serde(rename = "<=1s")]
    pub le_1s: f64,
    /// Over 1024 ms.
    #[serde(rename = ">1s")]
    pub gt_1s: f64,
}

impl WaitShares {
    /// The shares in [`WAIT_BUCKETS`] order.
    pub fn as_array(&self) -> [f64; 8] {
        [
            self.lt_1ms,
            self.lt_2ms,
            self.lt_4ms,
            self.lt_8ms,
            self.lt_16ms,
            self.lt_32ms,
            self.le_1s,
            self.gt_1s,
        ]
    }

    fn from_array(a: [f64; 8]) -> WaitShares {
        WaitShares {
            lt_1ms: a[0],
            lt_2ms: a[1],
            lt_4ms: a[2],
            lt_8ms: a[3],
            lt_16ms: a[4],
            lt_32ms: a[5],
            le_1s: a[6],
            gt_1s: a[7],
        }
    }
}

/// One line of the view.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct IostatRow {
    /// Kernel device name.
    pub device: String,
    /// asmguard label (empty: none).
    pub label: String,
    /// Operation class.
    pub op: Op,
    /// I/Os completed in the interval.
    pub ios: u64,
    /// I/Os per second.
    pub iops: f64,
    /// MB (2^20 bytes) per second.
    pub mb_per_s: f64,
    /// Average device time (issue -> complete), ms.
    pub avg_ms: f64,
    /// Average queue time (request set up -> issue), ms.
    pub avg_queue_ms: f64,
    /// Wait histogram of the device time, percent of `ios`.
    pub wait_pct: WaitShares,
}

/// The view over one interval.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct IostatReport {
    /// Seconds between the two snapshots.
    pub interval_s: f64,
    /// Sorted by device, then op.
    pub rows: Vec<IostatRow>,
}

/// Builds the view from two snapshots `interval` apart. `filter` keeps the
/// disks whose label or device name equals it. Every (disk, op) of `current`
/// gets a row, idle ones too.
pub fn iostat(
    previous: &Snapshot,
    current: &Snapshot,
    interval: Duration,
    filter: Option<&str>,
) -> IostatReport {
    let secs = interval.as_secs_f64();
    let per_s = |n: f64| if secs > 0.0 { n / secs } else { 0.0 };
    let mut rows = Vec::new();
    for cur in &current.entries {
        if let Some(f) = filter {
            if cur.label != f && cur.device != f {
                continue;
            }
        }
        let d = match previous
            .entries
            .iter()
            .find(|p| p.device == cur.device && p.op == cur.op)
        {
            Some(prev) => cur.hist.delta(&prev.hist),
            None => cur.hist.clone(),
        };
        let ios = d.count();
        let mut buckets = [0u64; 8];
        for (k, &n) in d.lat.iter().enumerate().take(NSLOTS) {
            buckets[wait_bucket(k)] += n;
        }
        let pct = |n: u64| {
            if ios == 0 {
                0.0
            } else {
                100.0 * n as f64 / ios as f64
            }
        };
        let avg_ms = |sum_ns: u64| {
            if ios == 0 {
                0.0
            } else {
                sum_ns as f64 / ios as f64 / 1e6
            }
        };
        rows.push(IostatRow {
            device: cur.device.clone(),
            label: cur.label.clone(),
            op: cur.op,
            ios,
            iops: per_s(ios as f64),
            mb_per_s: per_s(d.bytes as f64 / (1024.0 * 1024.0)),
            avg_ms: avg_ms(d.lat_sum_ns),
            avg_queue_ms: avg_ms(d.queue_sum_ns),
            wait_pct: WaitShares::from_array(buckets.map(pct)),
        });
    }
    rows.sort_by(|a, b| (&a.device, a.op).cmp(&(&b.device, b.op)));
    IostatReport {
        interval_s: secs,
        rows,
    }
}

impl IostatReport {
    /// The terminal table.
    pub fn to_text(&self) -> String {
        let width = |f: fn(&IostatRow) -> usize, min: usize| {
            self.rows.iter().map(f).max().unwrap_or(0).max(min)
        };
        let dev_w = width(|r| r.device.len(), 6);
        let lab_w = width(|r| r.label.len(), 5);
        let mut out = String::new();
        let _ = write!(
            out,
            "{:<dev_w$} {:<lab_w$} {:<7} {:>9} {:>8} {:>8}",
            "DEVICE", "LABEL", "OP", "IOPS", "MB/s", "AVG ms"
        );
        for b in WAIT_BUCKETS {
            let _ = write!(out, " {b:>6}");
        }
        out.push('\n');
        for r in &self.rows {
            let _ = write!(
                out,
                "{:<dev_w$} {:<lab_w$} {:<7} {:>9.1} {:>8.2} {:>8.3}",
                r.device,
                if r.label.is_empty() { "-" } else { &r.label },
                r.op.as_str(),
                r.iops,
                r.mb_per_s,
                r.avg_ms
            );
            for p in r.wait_pct.as_array() {
                if r.ios == 0 {
                    let _ = write!(out, " {:>6}", "-");
                } else {
                    let _ = write!(out, " {p:>6.1}");
                }
            }
            out.push('\n');
        }
        out
    }

    /// One JSON object (no trailing newline).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("the report serialises")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hist::slot_of_ns;
    use crate::snapshot::{DiskOpStats, OpHist};

    fn snap(entries: Vec<(&str, &str, Op, &[u64], u64)>) -> Snapshot {
        Snapshot {
            entries: entries
                .into_iter()
                .map(|(device, label, op, lat_ns, bytes)| {
                    let mut hist = OpHist {
                        bytes,
                        ..OpHist::default()
                    };
                    for &ns in lat_ns {
                        hist.lat[slot_of_ns(ns)] += 1;
                        hist.queue[0] += 1;
                        hist.lat_sum_ns += ns;
                    }
                    DiskOpStats {
                        device: device.into(),
                        label: label.into(),
                        op,
                        hist,
                    }
                })
                .collect(),
        }
    }

    const MS: u64 = 1_000_000;

    #[test]
    fn wait_buckets_follow_oracle() {
        let ns = [
            (MS / 2, 0),
            (MS, 0),
            (MS + 1, 1),
            (2 * MS, 1),
            (3 * MS, 2),
            (8 * MS, 3),
            (9 * MS, 4),
            (32 * MS, 5),
            (33 * MS, 6),
            (1000 * MS, 6),
            (1024 * MS, 6),
            (1025 * MS, 7),
            (60_000 * MS, 7),
        ];
        for (t, b) in ns {
            assert_eq!(wait_bucket(slot_of_ns(t)), b, "{t} ns");
        }
    }

    #[test]
    fn rates_and_shares_over_an_interval() {
        let before = snap(vec![("sdb", "DATA1", Op::Read, &[MS / 2; 10], 10 * 16384)]);
        let mut lat = vec![MS / 2; 10];
        lat.extend([MS / 4; 60]); // +60 under 1 ms
        lat.extend([3 * MS; 30]); // +30 in <4ms
        lat.extend([2000 * MS; 10]); // +10 over 1 s
        let after = snap(vec![
            ("sdb", "DATA1", Op::Read, &lat, 110 * 16384),
            ("sdc", "DATA2", Op::Write, &[MS / 2], 4096),
        ]);
        let r = iostat(&before, &after, Duration::from_secs(2), None);
        assert_eq!(r.rows.len(), 2);
        let read = &r.rows[0];
        assert_eq!(
            (read.device.as_str(), read.op, read.ios),
            ("sdb", Op::Read, 100)
        );
        assert!((read.iops - 50.0).abs() < 1e-9);
        assert!((read.mb_per_s - 100.0 * 16384.0 / 1048576.0 / 2.0).abs() < 1e-9);
        let w = read.wait_pct.as_array();
        assert_eq!(w, [60.0, 0.0, 30.0, 0.0, 0.0, 0.0, 0.0, 10.0]);
        let avg = (60.0 * 0.25 + 30.0 * 3.0 + 10.0 * 2000.0) / 100.0;
        assert!((read.avg_ms - avg).abs() < 1e-9, "{}", read.avg_ms);
        // a disk absent from the first snapshot counts from zero
        assert_eq!(r.rows[1].ios, 1);

        let only = iostat(&before, &after, Duration::from_secs(2), Some("DATA2"));
        assert_eq!(only.rows.len(), 1);
        assert_eq!(only.rows[0].label, "DATA2");
        assert_eq!(
            iostat(&before, &after, Duration::from_secs(2), Some("sdc"))
                .rows
                .len(),
            1
        );
    }

    #[test]
    fn idle_rows_and_output_formats() {
        let s = snap(vec![("sdb", "DATA1", Op::Read, &[MS / 2], 4096)]);
        let r = iostat(&s, &s, Duration::from_secs(1), None);
        assert_eq!(r.rows[0].ios, 0);
        assert_eq!(r.rows[0].wait_pct.as_array(), [0.0; 8]);
        let text = r.to_text();
        let mut lines = text.lines();
        let header = lines.next().unwrap();
        for b in WAIT_BUCKETS {
            assert!(header.contains(b), "{header}");
        }
        assert!(lines.next().unwrap().trim_end().ends_with('-'));
        let json: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!(json["rows"][0]["op"], "read");
        assert_eq!(json["rows"][0]["wait_pct"]["<=1s"], 0.0);
        assert_eq!(json["interval_s"], 1.0);
    }
}
