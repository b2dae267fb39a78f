//! Snapshots of the latency histograms: what the BPF maps hold at one instant,
//! read from the maps by asmguard-metrics' tracer, sent by the daemon's
//! `iostat` op as JSON, or parsed back from a scrape of the exporter
//! (asmguard-metrics' `FromPrometheusText`).
//!
//! Everything is cumulative since the BPF program was loaded (nothing is ever
//! reset); rates come from the difference of two snapshots ([`OpHist::delta`]).

use serde::{Deserialize, Serialize};

use crate::hist::NSLOTS;

/// The operation classes of the `op` label (`enum iolat_op` in `bpf/iolat.h`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// REQ_OP_READ.
    Read,
    /// REQ_OP_WRITE.
    Write,
    /// REQ_OP_DISCARD, REQ_OP_SECURE_ERASE and REQ_OP_WRITE_ZEROES.
    Discard,
    /// REQ_OP_FLUSH.
    Flush,
}

impl Op {
    /// All classes, in the BPF program's numbering.
    pub const ALL: [Op; 4] = [Op::Read, Op::Write, Op::Discard, Op::Flush];

    /// From the BPF program's number.
    pub fn from_raw(raw: u32) -> Option<Op> {
        Op::ALL.get(usize::try_from(raw).ok()?).copied()
    }

    /// The BPF program's number.
    pub fn raw(self) -> u32 {
        match self {
            Op::Read => 0,
            Op::Write => 1,
            Op::Discard => 2,
            Op::Flush => 3,
        }
    }

    /// The `op` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Discard => "discard",
            Op::Flush => "flush",
        }
    }

    /// From the `op` label value.
    pub fn parse(s: &str) -> Option<Op> {
        Op::ALL.into_iter().find(|op| op.as_str() == s)
    }
}

impl std::fmt::Display for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The histograms of one (disk, op): `struct iolat_hist` of `bpf/iolat.h`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpHist {
    /// Bytes completed.
    pub bytes: u64,
    /// Sum of device times (issue -> complete), ns.
    pub lat_sum_ns: u64,
    /// Sum of queue times (request set up -> issue), ns.
    pub queue_sum_ns: u64,
    /// Device time per slot (not cumulative), see [`crate::hist`].
    pub lat: [u64; NSLOTS],
    /// Queue time per slot (not cumulative).
    pub queue: [u64; NSLOTS],
}

/// Size of `struct iolat_hist` in bytes.
pub const HIST_BYTES: usize = 8 * (3 + 2 * NSLOTS);

impl OpHist {
    /// Number of completed I/Os (every I/O is in exactly one latency slot).
    pub fn count(&self) -> u64 {
        self.lat.iter().fold(0u64, |a, &b| a.wrapping_add(b))
    }

    /// Number of I/Os in the queue-time histogram (the same I/Os, unless a
    /// snapshot raced an update).
    pub fn queue_count(&self) -> u64 {
        self.queue.iter().fold(0u64, |a, &b| a.wrapping_add(b))
    }

    /// Decodes a `struct iolat_hist` map value (native endian).
    pub fn from_bytes(raw: &[u8]) -> Option<OpHist> {
        if raw.len() < HIST_BYTES {
            return None;
        }
        let word = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&raw[i * 8..i * 8 + 8]);
            u64::from_ne_bytes(b)
        };
        let mut hist = OpHist {
            bytes: word(0),
            lat_sum_ns: word(1),
            queue_sum_ns: word(2),
            ..OpHist::default()
        };
        for k in 0..NSLOTS {
            hist.lat[k] = word(3 + k);
            hist.queue[k] = word(3 + NSLOTS + k);
        }
        Some(hist)
    }

    /// Encodes as a `struct iolat_hist` map value (native endian).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HIST_BYTES);
        for w in [self.bytes, self.lat_sum_ns, self.queue_sum_ns]
            .iter()
            .chain(&self.lat)
            .chain(&self.queue)
        {
            out.extend_from_slice(&w.to_ne_bytes());
        }
        out
    }

    /// Adds `other`'s counts to these (the paths of one disk rolled up).
    pub fn add(&mut self, other: &OpHist) {
        self.bytes = self.bytes.wrapping_add(other.bytes);
        self.lat_sum_ns = self.lat_sum_ns.wrapping_add(other.lat_sum_ns);
        self.queue_sum_ns = self.queue_sum_ns.wrapping_add(other.queue_sum_ns);
        for k in 0..NSLOTS {
            self.lat[k] = self.lat[k].wrapping_add(other.lat[k]);
            self.queue[k] = self.queue[k].wrapping_add(other.queue[k]);
        }
    }

    /// What happened between `earlier` and `self` (both cumulative). Counters
    /// that went backwards (the program was reloaded) count from zero.
    pub fn delta(&self, earlier: &OpHist) -> OpHist {
        let d = |now: u64, then: u64| now.checked_sub(then).unwrap_or(now);
        let mut out = OpHist {
            bytes: d(self.bytes, earlier.bytes),
            lat_sum_ns: d(self.lat_sum_ns, earlier.lat_sum_ns),
            queue_sum_ns: d(self.queue_sum_ns, earlier.queue_sum_ns),
            ..OpHist::default()
        };
        for k in 0..NSLOTS {
            out.lat[k] = d(self.lat[k], earlier.lat[k]);
            out.queue[k] = d(self.queue[k], earlier.queue[k]);
        }
        out
    }
}

/// One (disk, op) as the kernel counts it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawEntry {
    /// Kernel dev_t of the whole disk (`major << 20 | minor`).
    pub dev: u32,
    /// Operation class.
    pub op: Op,
    /// Cumulative histograms.
    pub hist: OpHist,
}

/// One (disk, op) of a snapshot, with the disk's names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskOpStats {
    /// Kernel device name (`sdb`, `dm-3`, `loop0`).
    pub device: String,
    /// asmguard label, empty for a disk that has none.
    pub label: String,
    /// In [`Snapshot::paths`]: the kernel name of the path of the disk
    /// (`sdc` under dm-multipath, `nvme0c1n1` under an NVMe head) these
    /// histograms are of; empty for the disk itself.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub path: String,
    /// Operation class.
    pub op: Op,
    /// The histograms.
    #[serde(flatten)]
    pub hist: OpHist,
}

/// The histograms of every traced (disk, op) at one instant.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Sorted by device, then op.
    pub entries: Vec<DiskOpStats>,
    /// The same per path of the disks traced on their paths (each path's
    /// share of its disk's entry), sorted by device, path, then op. Absent
    /// from the answers of daemons before it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<DiskOpStats>,
}

impl Snapshot {
    /// Sorts the entries by device, then op, and the paths by device, path,
    /// then op.
    pub fn sort(&mut self) {
        self.entries
            .sort_by(|a, b| (&a.device, a.op).cmp(&(&b.device, b.op)));
        self.paths
            .sort_by(|a, b| (&a.device, &a.path, a.op).cmp(&(&b.device, &b.path, b.op)));
    }

    /// The entry of a device (by kernel name or label) and op.
    pub fn find(&self, device_or_label: &str, op: Op) -> Option<&DiskOpStats> {
        self.entries
            .iter()
            .find(|e| e.op == op && (e.device == device_or_label || e.label == device_or_label))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_numbering_matches_bpf() {
        for op in Op::ALL {
            assert_eq!(Op::from_raw(op.raw()), Some(op));
            assert_eq!(Op::parse(op.as_str()), Some(op));
        }
        assert_eq!(Op::from_raw(4), None);
    }

    #[test]
    fn decodes_a_map_value() {
        let mut raw = Vec::new();
        for i in 0..(3 + 2 * NSLOTS) as u64 {
            raw.extend_from_slice(&(i * 10).to_ne_bytes());
        }
        let h = OpHist::from_bytes(&raw).unwrap();
        assert_eq!(h.to_bytes(), raw);
        assert_eq!((h.bytes, h.lat_sum_ns, h.queue_sum_ns), (0, 10, 20));
        assert_eq!(h.lat[0], 30);
        assert_eq!(h.queue[NSLOTS - 1], 10 * (2 + 2 * NSLOTS as u64));
        assert!(OpHist::from_bytes(&raw[..HIST_BYTES - 1]).is_none());
    }

    #[test]
    fn delta_subtracts_and_survives_a_reset() {
        let mut a = OpHist::default();
        let mut b = OpHist::default();
        a.bytes = 100;
        a.lat[3] = 5;
        b.bytes = 300;
        b.lat[3] = 7;
        let d = b.delta(&a);
        assert_eq!((d.bytes, d.lat[3], d.count()), (200, 2, 2));
        let reset = a.delta(&b);
        assert_eq!(reset.bytes, 100);
    }
}
