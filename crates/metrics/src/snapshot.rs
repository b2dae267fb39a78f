//! Snapshots of the latency histograms: what the BPF maps hold at one instant,
//! either read from the maps ([`crate::IoLat::read`]) or parsed back from a
//! scrape of the exporter ([`Snapshot::from_prometheus_text`]).
//!
//! Everything is cumulative since the BPF program was loaded (nothing is ever
//! reset); rates come from the difference of two snapshots ([`OpHist::delta`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::hist::{slot_of_le, EXPORTED_SLOTS, FINITE_SLOTS, NSLOTS};

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
}

/// A scrape that could not be read back.
#[derive(Debug, thiserror::Error)]
#[error("line {line}: {what}")]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    /// What was wrong.
    pub what: String,
}

const LAT: &str = "asmguard_io_latency_seconds";
const QUEUE: &str = "asmguard_io_queue_seconds";
const BYTES: &str = "asmguard_io_bytes_total";

#[derive(Default)]
struct Partial {
    bytes: u64,
    lat_sum: f64,
    queue_sum: f64,
    lat_cum: [Option<u64>; FINITE_SLOTS],
    queue_cum: [Option<u64>; FINITE_SLOTS],
    lat_inf: u64,
    queue_inf: u64,
}

/// Per-slot counts from cumulative buckets at the exported bounds: each
/// bucket's increment goes to the slot of its bound (the exact slot within a
/// merged range is not in a scrape; the Oracle boundaries all are).
fn slots_from_cumulative(
    cum: &[Option<u64>; FINITE_SLOTS],
    inf: u64,
    line: usize,
) -> Result<[u64; NSLOTS], ParseError> {
    let mut out = [0u64; NSLOTS];
    let mut prev = 0u64;
    for &k in &EXPORTED_SLOTS {
        let c = cum[k].ok_or_else(|| ParseError {
            line,
            what: format!("bucket le={} missing", crate::hist::le_decimal(k)),
        })?;
        out[k] = c.checked_sub(prev).ok_or_else(|| ParseError {
            line,
            what: "buckets are not cumulative".into(),
        })?;
        prev = c;
    }
    out[NSLOTS - 1] = inf.checked_sub(prev).ok_or_else(|| ParseError {
        line,
        what: "+Inf bucket below the last bucket".into(),
    })?;
    Ok(out)
}

impl Snapshot {
    /// Sorts the entries by device, then op.
    pub fn sort(&mut self) {
        self.entries
            .sort_by(|a, b| (&a.device, a.op).cmp(&(&b.device, b.op)));
    }

    /// Reads the histograms back from a scrape of the exporter (Prometheus text
    /// or OpenMetrics). Other metrics are ignored.
    pub fn from_prometheus_text(text: &str) -> Result<Snapshot, ParseError> {
        let mut parts: BTreeMap<(String, String, Op), Partial> = BTreeMap::new();
        for (i, line) in text.lines().enumerate() {
            let lineno = i + 1;
            let err = |what: &str| ParseError {
                line: lineno,
                what: what.to_string(),
            };
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (name, rest) = match line.find(['{', ' ']) {
                Some(p) => line.split_at(p),
                None => return Err(err("no value")),
            };
            let (family, suffix) = if let Some(s) = name.strip_prefix(LAT) {
                (LAT, s)
            } else if let Some(s) = name.strip_prefix(QUEUE) {
                (QUEUE, s)
            } else if name == BYTES {
                (BYTES, "")
            } else {
                continue;
            };
            let (labels, value) = parse_labels(rest).map_err(|w| err(&w))?;
            let value = value
                .split_whitespace()
                .next()
                .ok_or_else(|| err("no value"))?;
            let get = |k: &str| labels.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
            let device = get("device").ok_or_else(|| err("no device label"))?;
            let label = get("label").unwrap_or_default();
            let op = get("op")
                .and_then(|o| Op::parse(&o))
                .ok_or_else(|| err("no or unknown op label"))?;
            let p = parts.entry((device, label, op)).or_default();
            let int = || value.parse::<u64>().map_err(|_| err("bad integer"));
            let float = || value.parse::<f64>().map_err(|_| err("bad number"));
            match (family, suffix) {
                (BYTES, _) => p.bytes = int()?,
                (_, "_sum") => {
                    if family == LAT {
                        p.lat_sum = float()?
                    } else {
                        p.queue_sum = float()?
                    }
                }
                (_, "_count") => {}
                (_, "_bucket") => {
                    let le = get("le").ok_or_else(|| err("bucket without le"))?;
                    let n = int()?;
                    let (cum, inf) = if family == LAT {
                        (&mut p.lat_cum, &mut p.lat_inf)
                    } else {
                        (&mut p.queue_cum, &mut p.queue_inf)
                    };
                    if le == "+Inf" {
                        *inf = n;
                    } else {
                        let k = slot_of_le(&le).ok_or_else(|| err("unknown le bound"))?;
                        cum[k] = Some(n);
                    }
                }
                _ => {}
            }
        }
        let mut snap = Snapshot::default();
        for ((device, label, op), p) in parts {
            let to_ns = |s: f64| (s * 1e9).round() as u64;
            snap.entries.push(DiskOpStats {
                device,
                label,
                op,
                hist: OpHist {
                    bytes: p.bytes,
                    lat_sum_ns: to_ns(p.lat_sum),
                    queue_sum_ns: to_ns(p.queue_sum),
                    lat: slots_from_cumulative(&p.lat_cum, p.lat_inf, 0)?,
                    queue: slots_from_cumulative(&p.queue_cum, p.queue_inf, 0)?,
                },
            });
        }
        snap.sort();
        Ok(snap)
    }

    /// The entry of a device (by kernel name or label) and op.
    pub fn find(&self, device_or_label: &str, op: Op) -> Option<&DiskOpStats> {
        self.entries
            .iter()
            .find(|e| e.op == op && (e.device == device_or_label || e.label == device_or_label))
    }
}

/// Label names and values of one sample.
type Labels = Vec<(String, String)>;

/// Parses `{a="x",b="y"} rest` (or ` rest`): the labels and what follows.
fn parse_labels(s: &str) -> Result<(Labels, &str), String> {
    let Some(mut rest) = s.strip_prefix('{') else {
        return Ok((Vec::new(), s));
    };
    let mut labels = Vec::new();
    loop {
        rest = rest.trim_start_matches([' ', ',']);
        if let Some(r) = rest.strip_prefix('}') {
            return Ok((labels, r));
        }
        let eq = rest.find('=').ok_or("label without =")?;
        let name = rest[..eq].trim().to_string();
        rest = rest[eq + 1..]
            .strip_prefix('"')
            .ok_or("label value not quoted")?;
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next() {
                Some((i, '"')) => break i,
                Some((_, '\\')) => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c)) => value.push(c),
                    None => return Err("unterminated escape".into()),
                },
                Some((_, c)) => value.push(c),
                None => return Err("unterminated label value".into()),
            }
        };
        labels.push((name, value));
        rest = &rest[end + 1..];
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

    #[test]
    fn parses_escaped_labels() {
        let (l, rest) = parse_labels(r#"{a="x\"y",b="z\\w\n"} 5"#).unwrap();
        assert_eq!(l[0], ("a".into(), "x\"y".into()));
        assert_eq!(l[1], ("b".into(), "z\\w\n".into()));
        assert_eq!(rest.trim(), "5");
    }
}
