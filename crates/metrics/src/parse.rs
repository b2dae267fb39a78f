//! Reading a scrape of the exporter back into a [`Snapshot`] (Prometheus text
//! or OpenMetrics): what `asmguard-iolat iostat` and the tests do with an
//! endpoint. Kept out of asmguard-iostat so that clients of the daemon's
//! `iostat` op link no Prometheus parser.

use std::collections::BTreeMap;

use crate::hist::{slot_of_le, EXPORTED_SLOTS, FINITE_SLOTS, NSLOTS};
use crate::snapshot::{DiskOpStats, Op, OpHist, Snapshot};

/// A snapshot read back from a scrape.
pub trait FromPrometheusText: Sized {
    /// Reads the histograms back from a scrape of the exporter (Prometheus
    /// text or OpenMetrics). Other metrics are ignored.
    fn from_prometheus_text(text: &str) -> Result<Self, ParseError>;
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
    has_lat: bool,
    has_queue: bool,
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

impl FromPrometheusText for Snapshot {
    fn from_prometheus_text(text: &str) -> Result<Snapshot, ParseError> {
        // one per series: (device, label, op, size); the size classes of a
        // (device, op) are added up, the queue histogram has no size
        let mut parts: BTreeMap<(String, String, Op, String), Partial> = BTreeMap::new();
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
            let size = get("size").unwrap_or_default();
            let p = parts.entry((device, label, op, size)).or_default();
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
                        p.has_lat = true;
                        (&mut p.lat_cum, &mut p.lat_inf)
                    } else {
                        p.has_queue = true;
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
        let mut merged: BTreeMap<(String, String, Op), OpHist> = BTreeMap::new();
        for ((device, label, op, _), p) in parts {
            let to_ns = |s: f64| (s * 1e9).round() as u64;
            let slots = |has: bool, cum, inf| {
                if has {
                    slots_from_cumulative(cum, inf, 0)
                } else {
                    Ok([0; NSLOTS])
                }
            };
            let hist = OpHist {
                bytes: p.bytes,
                lat_sum_ns: to_ns(p.lat_sum),
                queue_sum_ns: to_ns(p.queue_sum),
                lat: slots(p.has_lat, &p.lat_cum, p.lat_inf)?,
                queue: slots(p.has_queue, &p.queue_cum, p.queue_inf)?,
            };
            merged.entry((device, label, op)).or_default().add(&hist);
        }
        let mut snap = Snapshot::default();
        for ((device, label, op), hist) in merged {
            snap.entries.push(DiskOpStats {
                device,
                label,
                path: String::new(),
                op,
                hist,
            });
        }
        snap.sort();
        Ok(snap)
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
    fn parses_escaped_labels() {
        let (l, rest) = parse_labels(r#"{a="x\"y",b="z\\w\n"} 5"#).unwrap();
        assert_eq!(l[0], ("a".into(), "x\"y".into()));
        assert_eq!(l[1], ("b".into(), "z\\w\n".into()));
        assert_eq!(rest.trim(), "5");
    }
}
