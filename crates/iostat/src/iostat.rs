//! `iostat`: per disk and op, IOPS, MB/s, average device time, average await
//! (queue + device time) and the share of I/Os in the buckets of Oracle's wait
//! event histograms, microsecond ones included (<128µs, <256µs, <512µs, <1ms,
//! <2ms, <4ms, <8ms, <16ms, <32ms, <=1s, >1s), from two snapshots and the time
//! between them.
//!
//! The buckets are exact slot boundaries (see [`crate::hist`]), each holding the
//! I/Os above the previous bound: "<128µs" is "at most 128 units" (slots 0..=7),
//! "<256µs" is (128, 256] units (slot 8), "<512µs" slot 9, "<1ms" is
//! (512 units, 1 ms] (slot 10), ..., "<32ms" is (16 ms, 32 ms] (slot 15),
//! "<=1s" is (32 ms, 1024 ms] (slots 16..=20, Oracle's "1 s" bucket is 1024 ms
//! too), ">1s" is everything slower. The unit is 1 ms / 1024, the "binary
//! microsecond" of Oracle's microsecond histogram, whose 1 ms is 1024 of them:
//! "<128µs" is at most 125 µs, "<256µs" 250 µs, "<512µs" 500 µs, and every
//! millisecond bound is exact. MB is 2^20 bytes, as in Oracle's reports.

use std::fmt::Write as _;
use std::time::Duration;

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use crate::snapshot::{DiskOpStats, Op, Snapshot};
use crate::NSLOTS;

/// Column titles of the wait histogram, in order.
pub const WAIT_BUCKETS: [&str; 11] = [
    "<128µs", "<256µs", "<512µs", "<1ms", "<2ms", "<4ms", "<8ms", "<16ms", "<32ms", "<=1s", ">1s",
];

/// The wait-histogram bucket (index into [`WAIT_BUCKETS`]) of a latency slot.
pub fn wait_bucket(slot: usize) -> usize {
    match slot {
        0..=7 => 0,
        8..=15 => slot - 7,
        16..=20 => 9,
        _ => 10,
    }
}

/// Share of I/Os per wait bucket ([`WAIT_BUCKETS`] order), in percent (all 0
/// when there was no I/O). In JSON: an object with the bucket titles as keys,
/// in that order.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct WaitShares(pub [f64; 11]);

impl WaitShares {
    /// The shares in [`WAIT_BUCKETS`] order.
    pub fn as_array(&self) -> [f64; 11] {
        self.0
    }
}

impl Serialize for WaitShares {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(WAIT_BUCKETS.len()))?;
        for (name, share) in WAIT_BUCKETS.iter().zip(self.0) {
            map.serialize_entry(name, &share)?;
        }
        map.end()
    }
}

/// One line of the view.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct IostatRow {
    /// Kernel device name.
    pub device: String,
    /// asmguard label (empty: none).
    pub label: String,
    /// The path of the disk this row is of (`sdc`, `nvme0c1n1`; `iostat
    /// --paths`); empty (and absent from JSON) for the disk's own row.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub path: String,
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
    /// Average queue time (request set up -> issue), ms, over all I/Os.
    pub avg_queue_ms: f64,
    /// Average await, ms: queue + device time per I/O (request set up ->
    /// complete, what Linux iostat calls await). Device time is averaged over
    /// every I/O, queue time over the I/Os the kernel stamped a start time on.
    pub await_ms: f64,
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
/// gets a row, idle ones too; with `paths`, so does every (path, op) of the
/// disks traced on their paths, right after its disk's rows.
pub fn iostat(
    previous: &Snapshot,
    current: &Snapshot,
    interval: Duration,
    filter: Option<&str>,
    paths: bool,
) -> IostatReport {
    let secs = interval.as_secs_f64();
    let kept = |e: &&DiskOpStats| filter.is_none_or(|f| e.label == f || e.device == f);
    let mut rows: Vec<IostatRow> = current
        .entries
        .iter()
        .filter(kept)
        .map(|cur| {
            let prev = previous
                .entries
                .iter()
                .find(|p| p.device == cur.device && p.op == cur.op);
            row(cur, prev, secs)
        })
        .collect();
    if paths {
        rows.extend(current.paths.iter().filter(kept).map(|cur| {
            let prev = previous
                .paths
                .iter()
                .find(|p| p.device == cur.device && p.path == cur.path && p.op == cur.op);
            row(cur, prev, secs)
        }));
    }
    rows.sort_by(|a, b| (&a.device, &a.path, a.op).cmp(&(&b.device, &b.path, b.op)));
    IostatReport {
        interval_s: secs,
        rows,
    }
}

/// One row: what `cur` added since `prev` (all of it without one) over
/// `secs` seconds.
fn row(cur: &DiskOpStats, prev: Option<&DiskOpStats>, secs: f64) -> IostatRow {
    let per_s = |n: f64| if secs > 0.0 { n / secs } else { 0.0 };
    let d = match prev {
        Some(prev) => cur.hist.delta(&prev.hist),
        None => cur.hist.clone(),
    };
    let ios = d.count();
    let mut buckets = [0u64; 11];
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
    let queued = d.queue_count();
    let queued_ms = if queued == 0 {
        0.0
    } else {
        d.queue_sum_ns as f64 / queued as f64 / 1e6
    };
    IostatRow {
        device: cur.device.clone(),
        label: cur.label.clone(),
        path: cur.path.clone(),
        op: cur.op,
        ios,
        iops: per_s(ios as f64),
        mb_per_s: per_s(d.bytes as f64 / (1024.0 * 1024.0)),
        avg_ms: avg_ms(d.lat_sum_ns),
        avg_queue_ms: avg_ms(d.queue_sum_ns),
        await_ms: avg_ms(d.lat_sum_ns) + queued_ms,
        wait_pct: WaitShares(buckets.map(pct)),
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
        // a PATH column only when a path has a row (`--paths`)
        let path_w = if self.rows.iter().any(|r| !r.path.is_empty()) {
            width(|r| r.path.len(), 4) + 1
        } else {
            0
        };
        let mut out = String::new();
        let _ = write!(out, "{:<dev_w$} {:<lab_w$} ", "DEVICE", "LABEL");
        if path_w > 0 {
            let _ = write!(out, "{:<path_w$}", "PATH");
        }
        let _ = write!(
            out,
            "{:<7} {:>9} {:>8} {:>8} {:>8}",
            "OP", "IOPS", "MB/s", "AVG ms", "AWAIT ms"
        );
        for b in WAIT_BUCKETS {
            let _ = write!(out, " {b:>7}");
        }
        out.push('\n');
        for r in &self.rows {
            let _ = write!(
                out,
                "{:<dev_w$} {:<lab_w$} ",
                r.device,
                if r.label.is_empty() { "-" } else { &r.label },
            );
            if path_w > 0 {
                let _ = write!(
                    out,
                    "{:<path_w$}",
                    if r.path.is_empty() { "-" } else { &r.path }
                );
            }
            let _ = write!(
                out,
                "{:<7} {:>9.1} {:>8.2} {:>8.3} {:>8.3}",
                r.op.as_str(),
                r.iops,
                r.mb_per_s,
                r.avg_ms,
                r.await_ms
            );
            for p in r.wait_pct.as_array() {
                if r.ios == 0 {
                    let _ = write!(out, " {:>7}", "-");
                } else {
                    let _ = write!(out, " {p:>7.1}");
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
    use crate::snapshot::OpHist;

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
                        path: String::new(),
                        op,
                        hist,
                    }
                })
                .collect(),
            paths: Vec::new(),
        }
    }

    const MS: u64 = 1_000_000;

    const US: u64 = 1_000;

    #[test]
    fn wait_buckets_follow_oracle() {
        let ns = [
            (0, 0),
            (100 * US, 0),
            (125 * US, 0), // 128 binary us = 125 us: the last time under "<128µs"
            (125 * US + 1, 1),
            (250 * US, 1),
            (250 * US + 1, 2),
            (MS / 2, 2),
            (MS / 2 + 1, 3),
            (MS, 3),
            (MS + 1, 4),
            (2 * MS, 4),
            (3 * MS, 5),
            (8 * MS, 6),
            (9 * MS, 7),
            (16 * MS, 7),
            (32 * MS, 8),
            (33 * MS, 9),
            (1000 * MS, 9),
            (1024 * MS, 9),
            (1025 * MS, 10),
            (60_000 * MS, 10),
        ];
        for (t, b) in ns {
            assert_eq!(
                wait_bucket(slot_of_ns(t)),
                b,
                "{t} ns in {}",
                WAIT_BUCKETS[b]
            );
        }
        assert_eq!(
            WAIT_BUCKETS,
            [
                "<128µs", "<256µs", "<512µs", "<1ms", "<2ms", "<4ms", "<8ms", "<16ms", "<32ms",
                "<=1s", ">1s"
            ]
        );
        // every slot is in exactly one bucket, in order
        let b: Vec<usize> = (0..NSLOTS).map(wait_bucket).collect();
        assert!(b.windows(2).all(|w| w[0] <= w[1] && w[1] - w[0] <= 1));
        assert_eq!((b[0], b[NSLOTS - 1]), (0, WAIT_BUCKETS.len() - 1));
    }

    #[test]
    fn flash_latencies_spread_over_the_microsecond_columns() {
        // the seed's comparison: bare metal ~438 us, under a hypervisor ~600 us
        let mut lat = vec![90 * US; 10]; // <128µs
        lat.extend([200 * US; 20]); // <256µs
        lat.extend([438 * US; 30]); // <512µs
        lat.extend([600 * US; 25]); // <1ms
        lat.extend([1500 * US; 10]); // <2ms
        lat.extend([20 * MS; 5]); // <32ms
        let after = snap(vec![("sdb", "DATA1", Op::Read, &lat, 100 * 8192)]);
        let r = iostat(
            &Snapshot::default(),
            &after,
            Duration::from_secs(1),
            None,
            false,
        );
        let row = &r.rows[0];
        assert_eq!(row.ios, 100);
        assert_eq!(
            row.wait_pct.as_array(),
            [10.0, 20.0, 30.0, 25.0, 10.0, 0.0, 0.0, 0.0, 5.0, 0.0, 0.0]
        );
        // the table: one column per bucket, in order, with those shares
        let text = r.to_text();
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
        let line: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
        // the last 11 words of the header and of the row
        let n = WAIT_BUCKETS.len();
        assert_eq!(&header[header.len() - n..], &WAIT_BUCKETS[..], "{text}");
        assert_eq!(
            &line[line.len() - n..],
            ["10.0", "20.0", "30.0", "25.0", "10.0", "0.0", "0.0", "0.0", "5.0", "0.0", "0.0"]
        );
        // --json: the same buckets under the same names, in the same order
        let json = r.to_json();
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        for (name, want) in WAIT_BUCKETS.iter().zip(row.wait_pct.as_array()) {
            assert_eq!(v["rows"][0]["wait_pct"][name], want, "{name}");
        }
        let mut at = 0;
        for name in WAIT_BUCKETS {
            let pos = json[at..].find(&format!("\"{name}\":")).expect(name);
            at += pos;
        }
    }

    #[test]
    fn await_is_queue_plus_device_time_per_io() {
        let mut hist = OpHist::default();
        // 4 I/Os: device 0.5 ms each, queued 0.1, 0.1, 0.3 and 0.3 ms
        for q in [100 * US, 100 * US, 300 * US, 300 * US] {
            hist.lat[slot_of_ns(MS / 2)] += 1;
            hist.lat_sum_ns += MS / 2;
            hist.queue[slot_of_ns(q)] += 1;
            hist.queue_sum_ns += q;
        }
        let entry = |hist: OpHist| Snapshot {
            entries: vec![DiskOpStats {
                device: "sdb".into(),
                label: "DATA1".into(),
                path: String::new(),
                op: Op::Read,
                hist,
            }],
            paths: Vec::new(),
        };
        let r = iostat(
            &Snapshot::default(),
            &entry(hist.clone()),
            Duration::from_secs(1),
            None,
            false,
        );
        let row = &r.rows[0];
        assert!((row.avg_ms - 0.5).abs() < 1e-9, "{}", row.avg_ms);
        assert!(
            (row.avg_queue_ms - 0.2).abs() < 1e-9,
            "{}",
            row.avg_queue_ms
        );
        assert!((row.await_ms - 0.7).abs() < 1e-9, "{}", row.await_ms);
        // I/Os whose queue time the kernel did not stamp add device time only:
        // the queue average is over the I/Os that have one
        let mut partial = hist.clone();
        partial.lat[slot_of_ns(MS / 2)] += 4;
        partial.lat_sum_ns += 4 * MS / 2;
        let r = iostat(
            &Snapshot::default(),
            &entry(partial),
            Duration::from_secs(1),
            None,
            false,
        );
        assert!(
            (r.rows[0].await_ms - 0.7).abs() < 1e-9,
            "{}",
            r.rows[0].await_ms
        );
        // shown in the table and carried by --json
        let text = r.to_text();
        let header: Vec<&str> = text.lines().next().unwrap().split_whitespace().collect();
        let line: Vec<&str> = text.lines().nth(1).unwrap().split_whitespace().collect();
        let at = header.iter().position(|h| *h == "AWAIT").unwrap();
        // "AVG ms" and "AWAIT ms" are two words each in the header
        assert_eq!(header[at + 1], "ms");
        let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!(
            v["rows"][0]["await_ms"].as_f64().map(|x| (x * 1e6).round()),
            Some(700_000.0)
        );
        assert!(line.contains(&"0.700"), "{text}");
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
        let r = iostat(&before, &after, Duration::from_secs(2), None, false);
        assert_eq!(r.rows.len(), 2);
        let read = &r.rows[0];
        assert_eq!(
            (read.device.as_str(), read.op, read.ios),
            ("sdb", Op::Read, 100)
        );
        assert!((read.iops - 50.0).abs() < 1e-9);
        assert!((read.mb_per_s - 100.0 * 16384.0 / 1048576.0 / 2.0).abs() < 1e-9);
        let w = read.wait_pct.as_array();
        assert_eq!(
            w,
            [0.0, 60.0, 0.0, 0.0, 0.0, 30.0, 0.0, 0.0, 0.0, 0.0, 10.0]
        );
        assert_eq!(w[..3].iter().sum::<f64>(), 60.0);
        let avg = (60.0 * 0.25 + 30.0 * 3.0 + 10.0 * 2000.0) / 100.0;
        assert!((read.avg_ms - avg).abs() < 1e-9, "{}", read.avg_ms);
        // a disk absent from the first snapshot counts from zero
        assert_eq!(r.rows[1].ios, 1);

        let only = iostat(
            &before,
            &after,
            Duration::from_secs(2),
            Some("DATA2"),
            false,
        );
        assert_eq!(only.rows.len(), 1);
        assert_eq!(only.rows[0].label, "DATA2");
        assert_eq!(
            iostat(&before, &after, Duration::from_secs(2), Some("sdc"), false)
                .rows
                .len(),
            1
        );
    }

    /// `--paths`: each path of a disk traced on its paths has its own rows,
    /// right after the disk's, a slow path standing out; without it, the
    /// disk's rows only and no PATH column.
    #[test]
    fn paths_have_their_own_rows() {
        let path = |p: &str, lat: &[u64]| {
            let mut e = snap(vec![(
                "dm-2",
                "MDATA1",
                Op::Read,
                lat,
                8192 * lat.len() as u64,
            )])
            .entries
            .remove(0);
            e.path = p.into();
            e
        };
        let mut after = snap(vec![
            (
                "dm-2",
                "MDATA1",
                Op::Read,
                &[MS / 2, MS / 2, 40 * MS],
                3 * 8192,
            ),
            ("sdb", "DATA1", Op::Read, &[MS / 2], 8192),
        ]);
        after.paths = vec![path("sdq", &[40 * MS]), path("sdr", &[MS / 2, MS / 2])];
        let before = Snapshot::default();
        let plain = iostat(&before, &after, Duration::from_secs(1), None, false);
        assert_eq!(plain.rows.len(), 2);
        assert!(!plain.to_text().contains("PATH"));
        assert!(!plain.to_json().contains("\"path\""));
        let r = iostat(&before, &after, Duration::from_secs(1), None, true);
        let names: Vec<(&str, &str)> = r
            .rows
            .iter()
            .map(|r| (r.device.as_str(), r.path.as_str()))
            .collect();
        assert_eq!(
            names,
            [("dm-2", ""), ("dm-2", "sdq"), ("dm-2", "sdr"), ("sdb", "")]
        );
        assert!((r.rows[1].avg_ms - 40.0).abs() < 1e-9);
        assert!((r.rows[2].avg_ms - 0.5).abs() < 1e-9);
        let text = r.to_text();
        assert!(text.lines().next().unwrap().contains("PATH"), "{text}");
        let sdq = text.lines().find(|l| l.contains("sdq")).unwrap();
        assert!(sdq.contains("40.000"), "{text}");
        let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!(v["rows"][1]["path"], "sdq");
        assert!(v["rows"][0].get("path").is_none());
        // a label filter keeps its disk's paths
        let only = iostat(
            &before,
            &after,
            Duration::from_secs(1),
            Some("MDATA1"),
            true,
        );
        assert_eq!(only.rows.len(), 3);
        // an answer from a daemon without paths still reads
        let old: Snapshot = serde_json::from_str(r#"{"entries":[]}"#).unwrap();
        assert!(old.paths.is_empty());
    }

    #[test]
    fn idle_rows_and_output_formats() {
        let s = snap(vec![("sdb", "DATA1", Op::Read, &[MS / 2], 4096)]);
        let r = iostat(&s, &s, Duration::from_secs(1), None, false);
        assert_eq!(r.rows[0].ios, 0);
        assert_eq!(r.rows[0].wait_pct.as_array(), [0.0; 11]);
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
