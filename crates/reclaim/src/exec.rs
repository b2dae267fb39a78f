//! Carrying out a plan: BLKDISCARD or BLKZEROOUT per range (cut into chunks so the
//! rate limit and cancellation stay responsive), progress callbacks, and a
//! checkpoint file (plan hash + next offset) written after every chunk, so a
//! cancelled run (Ctrl-C in the CLI closes the connection) is completed by a rerun.

use crate::caps::Method;
use crate::pace;
use crate::plan::{Plan, Range};
use crate::sentinel::Stop;
use asmguard_proto::ReclaimProgress;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

nix::ioctl_write_ptr_bad!(blkdiscard, 0x1277, [u64; 2]);
nix::ioctl_write_ptr_bad!(blkzeroout, 0x127f, [u64; 2]);

/// One ioctl on `f` for `[offset, offset + len)`.
pub fn issue(f: &File, m: Method, offset: u64, len: u64) -> std::io::Result<()> {
    let range = [offset, len];
    let fd = f.as_raw_fd();
    let r = match m {
        // SAFETY: `fd` is an open block device owned by `f` for the whole call; the
        // kernel reads exactly two u64 (start, length) from the pointer, which points
        // to `range`, alive on this stack frame until the ioctl returns.
        Method::Discard => unsafe { blkdiscard(fd, &range) },
        // SAFETY: as above; BLKZEROOUT takes the same two-u64 argument.
        Method::Zeroout => unsafe { blkzeroout(fd, &range) },
    };
    r.map(|_| ()).map_err(std::io::Error::from)
}

/// Where a run stands. Written next to nothing else: one small JSON file per disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub version: u32,
    pub label: String,
    pub plan_hash: String,
    pub method: Method,
    /// Every planned byte below this offset has been handed back.
    pub next_offset: u64,
    pub done_bytes: u64,
    pub total_bytes: u64,
}

impl Checkpoint {
    pub fn load(p: &Path) -> Option<Checkpoint> {
        let s = std::fs::read_to_string(p).ok()?;
        serde_json::from_str(&s).ok()
    }
    /// Atomic replace (write a temporary file, rename).
    pub fn save(&self, p: &Path) -> std::io::Result<()> {
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d)?;
        }
        let tmp = p.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_vec(self).unwrap_or_default())?;
        std::fs::rename(&tmp, p)
    }
}

pub struct ExecOptions<'a> {
    pub label: String,
    pub method: Method,
    /// Bytes per second; `None` or 0: unthrottled.
    pub rate: Option<u64>,
    pub checkpoint: Option<PathBuf>,
    pub cancel: &'a AtomicBool,
    /// Minimum time between progress callbacks.
    pub progress_every: Duration,
    /// The device's discard granularity: rate-limited chunks are multiples of it.
    pub granularity: u64,
    /// Where each ioctl is counted as it runs (`None`: not counted).
    pub counters: Option<&'a crate::counters::DiscardCounters>,
    /// Asked before every chunk (the stop rule, [`crate::sentinel`]): an
    /// error stops the run before that chunk's discard; the checkpoint stays.
    pub check: Option<&'a CheckFn<'a>>,
    /// The disk's cumulative read+write latency histogram (the tracer), for
    /// the adaptive rate ([`crate::pace`]); `None`: a fixed rate.
    pub latency: Option<&'a LatencyFn<'a>>,
    /// Halve the rate when the disk's p99 is above this multiple of its p99
    /// before the run (0: never).
    pub p99_multiple: f64,
}

/// The disk's cumulative read+write latency slots now (`None`: not traced).
pub type LatencyFn<'a> = dyn Fn() -> Option<[u64; asmguard_iostat::hist::NSLOTS]> + 'a;

/// The stop rule's question before a chunk.
pub type CheckFn<'a> = dyn Fn(&Range) -> Result<(), Stop> + Sync + 'a;

/// The largest chunk, whatever the rate: one ioctl between two checks of the
/// stop rule (a chunk that takes longer than [`SLOW_CHUNK`] halves it).
pub const MAX_CHUNK: u64 = 128 << 20;
/// A chunk taking longer than this halves the chunk size for the rest of the run.
pub const SLOW_CHUNK: Duration = Duration::from_millis(500);

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    /// Bytes handed back by this run.
    pub bytes: u64,
    /// Bytes of the plan done before this run (from the checkpoint).
    pub resumed_from: u64,
    pub total_bytes: u64,
    pub cancelled: bool,
    pub elapsed_seconds: f64,
    pub ioctls: u64,
    /// Why the run stopped before the plan was done (the stop rule).
    #[serde(skip)]
    pub stopped: Option<Stop>,
}

/// The ranges still to do after `next_offset`.
pub fn remaining(ranges: &[Range], next_offset: u64) -> Vec<Range> {
    ranges
        .iter()
        .filter(|r| r.end() > next_offset)
        .map(|r| {
            if r.offset >= next_offset {
                *r
            } else {
                Range {
                    offset: next_offset,
                    len: r.end() - next_offset,
                }
            }
        })
        .collect()
}

/// Run `plan` on `f`. Resumes from the checkpoint when its plan hash matches;
/// removes the checkpoint when the plan is complete.
pub fn execute(
    f: &File,
    plan: &Plan,
    o: &ExecOptions,
    progress: &mut dyn FnMut(&ReclaimProgress),
) -> std::io::Result<Outcome> {
    let t0 = Instant::now();
    let mut cp = Checkpoint {
        version: 1,
        label: o.label.clone(),
        plan_hash: plan.hash.clone(),
        method: o.method,
        next_offset: 0,
        done_bytes: 0,
        total_bytes: plan.total_bytes,
    };
    if let Some(p) = &o.checkpoint {
        if let Some(old) = Checkpoint::load(p) {
            if old.plan_hash == plan.hash && old.label == o.label {
                cp.next_offset = old.next_offset;
                cp.done_bytes = old.done_bytes.min(plan.total_bytes);
            }
        }
    }
    let resumed_from = cp.done_bytes;
    let ceiling = o.rate.filter(|r| *r > 0);
    let mut pacer = pace::Pacer::new(ceiling);
    // The adaptive rate: the p99 before the run (everything the tracer saw),
    // then one interval at a time.
    let mut lat_then = o.latency.and_then(|f| f());
    let baseline = lat_then.as_ref().and_then(pace::p99);
    let mut note = String::new();
    let mut interval = (Instant::now(), 0u64);
    // Chunks: a quarter second's worth at the rate limit, at most `cap`
    // (MAX_CHUNK, halved after each slow chunk), a multiple of `unit` (a multiple
    // of the granularity of at least 1 MiB): ranges start and end on
    // granularity boundaries, so every chunk does too.
    let g = o.granularity.max(512);
    let unit = g * (1u64 << 20).div_ceil(g);
    let mut cap = (MAX_CHUNK / unit * unit).max(unit);
    let chunk = |r: &Range, cap: u64, rate: Option<u64>| -> u64 {
        let n = match rate {
            Some(rt) => (rt / 4).max(unit) / unit * unit,
            None => cap,
        };
        n.min(cap).min(r.len)
    };
    let mut this_run = 0u64;
    let mut ioctls = 0u64;
    let mut last = Instant::now() - o.progress_every;
    let report = |done: u64,
                  this_run: u64,
                  limit: Option<u64>,
                  note: &str,
                  progress: &mut dyn FnMut(&ReclaimProgress)| {
        let el = t0.elapsed().as_secs_f64();
        let r = if el > 0.0 { this_run as f64 / el } else { 0.0 };
        let left = plan.total_bytes.saturating_sub(done) as f64;
        progress(&ReclaimProgress {
            phase: "reclaiming".into(),
            label: o.label.clone(),
            done_bytes: done,
            total_bytes: plan.total_bytes,
            percent: if plan.total_bytes == 0 {
                100.0
            } else {
                done as f64 * 100.0 / plan.total_bytes as f64
            },
            rate_bytes_per_sec: r,
            eta_seconds: if r > 0.0 { left / r } else { 0.0 },
            rate_limit_bytes_per_sec: limit.unwrap_or(0) as f64,
            rate_note: note.to_string(),
        })
    };
    let mut cancelled = false;
    let mut stopped = None;
    'outer: for r in remaining(&plan.ranges, cp.next_offset) {
        let mut off = r.offset;
        while off < r.end() {
            if o.cancel.load(Ordering::SeqCst) {
                cancelled = true;
                break 'outer;
            }
            let n = chunk(
                &Range {
                    offset: off,
                    len: r.end() - off,
                },
                cap,
                pacer.rate,
            );
            // A chunk that would leave a tail smaller than a unit: take the rest.
            let n = if r.end() - off - n < unit {
                r.end() - off
            } else {
                n
            };
            if let Some(check) = o.check {
                if let Err(s) = check(&Range {
                    offset: off,
                    len: n,
                }) {
                    stopped = Some(s);
                    break 'outer;
                }
            }
            let t_chunk = Instant::now();
            if let Some(c) = o.counters {
                c.begin(&o.label, n);
            }
            let issued = issue(f, o.method, off, n);
            if let Some(c) = o.counters {
                c.end(&o.label, n, issued.is_ok());
            }
            issued?;
            if t_chunk.elapsed() > SLOW_CHUNK && cap > unit {
                cap = (cap / 2 / unit * unit).max(unit);
            }
            ioctls += 1;
            off += n;
            this_run += n;
            cp.next_offset = off;
            cp.done_bytes += n;
            if let Some(p) = &o.checkpoint {
                cp.save(p)?;
            }
            if pacer.rate.is_some() {
                let due = pacer.due(this_run);
                while t0.elapsed() < due {
                    if o.cancel.load(Ordering::SeqCst) {
                        break;
                    }
                    std::thread::sleep((due - t0.elapsed()).min(Duration::from_millis(50)));
                }
            }
            // The adaptive rate, once an interval.
            if let (Some(f), true) = (o.latency, interval.0.elapsed() >= pace::INTERVAL) {
                let now = f();
                let p = match (&now, &lat_then) {
                    (Some(n), Some(t)) => pace::p99(&pace::delta(n, t)),
                    _ => None,
                };
                let secs = interval.0.elapsed().as_secs_f64();
                let observed = ((this_run - interval.1) as f64 / secs) as u64;
                if let Some(ch) =
                    pace::decide(pacer.rate, ceiling, observed, baseline, p, o.p99_multiple)
                {
                    pacer.set(ch.rate, t0.elapsed(), this_run);
                    note = ch.why;
                    last = Instant::now() - o.progress_every;
                }
                lat_then = now.or(lat_then);
                interval = (Instant::now(), this_run);
            }
            if last.elapsed() >= o.progress_every {
                last = Instant::now();
                report(cp.done_bytes, this_run, pacer.rate, &note, progress);
            }
        }
    }
    if !cancelled && stopped.is_none() {
        if let Some(p) = &o.checkpoint {
            let _ = std::fs::remove_file(p);
        }
    }
    report(cp.done_bytes, this_run, pacer.rate, &note, progress);
    Ok(Outcome {
        bytes: this_run,
        resumed_from,
        total_bytes: plan.total_bytes,
        cancelled,
        elapsed_seconds: t0.elapsed().as_secs_f64(),
        ioctls,
        stopped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remaining_cuts_at_offset() {
        let r = [
            Range { offset: 0, len: 10 },
            Range {
                offset: 20,
                len: 10,
            },
        ];
        assert_eq!(remaining(&r, 0), r.to_vec());
        assert_eq!(
            remaining(&r, 5),
            vec![
                Range { offset: 5, len: 5 },
                Range {
                    offset: 20,
                    len: 10
                }
            ]
        );
        assert_eq!(
            remaining(&r, 10),
            vec![Range {
                offset: 20,
                len: 10
            }]
        );
        assert_eq!(remaining(&r, 30), vec![]);
    }

    /// The stop rule is asked before every chunk, with the chunk about to go;
    /// its refusal ends the run before that chunk's ioctl and keeps the
    /// checkpoint. (A regular file refuses BLKDISCARD: had an ioctl been
    /// issued, the run would have failed instead.)
    #[test]
    fn the_stop_rule_ends_the_run_before_the_ioctl() {
        let t = tempfile::tempdir().unwrap();
        let f = File::create(t.path().join("img")).unwrap();
        let cp = t.path().join("S.json");
        let old = Checkpoint {
            version: 1,
            label: "S".into(),
            plan_hash: "h".into(),
            method: Method::Discard,
            next_offset: 1 << 20,
            done_bytes: 1 << 20,
            total_bytes: 600 << 20,
        };
        old.save(&cp).unwrap();
        let plan = Plan {
            ranges: vec![Range {
                offset: 0,
                len: 600 << 20,
            }],
            total_bytes: 600 << 20,
            hash: "h".into(),
            unaligned_bytes: 0,
        };
        let asked = std::sync::Mutex::new(Vec::new());
        let check = |r: &Range| -> Result<(), Stop> {
            asked.lock().unwrap().push(*r);
            Err(Stop {
                what: "heartbeat",
                detail: "heartbeat changed".into(),
                seen_at: "12:03:04".into(),
            })
        };
        let cancel = AtomicBool::new(false);
        let o = ExecOptions {
            label: "S".into(),
            method: Method::Discard,
            rate: None,
            checkpoint: Some(cp.clone()),
            cancel: &cancel,
            progress_every: Duration::from_secs(1),
            granularity: 4096,
            counters: None,
            check: Some(&check),
            latency: None,
            p99_multiple: 0.0,
        };
        let oc = execute(&f, &plan, &o, &mut |_| {}).unwrap();
        assert_eq!(oc.stopped.unwrap().what, "heartbeat");
        assert_eq!((oc.bytes, oc.ioctls, oc.resumed_from), (0, 0, 1 << 20));
        // resumed after the checkpoint, and no larger than MAX_CHUNK
        assert_eq!(
            *asked.lock().unwrap(),
            vec![Range {
                offset: 1 << 20,
                len: MAX_CHUNK
            }]
        );
        assert_eq!(Checkpoint::load(&cp), Some(old), "the checkpoint stays");
    }

    #[test]
    fn checkpoint_round_trip() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("x/DATA1.json");
        let c = Checkpoint {
            version: 1,
            label: "DATA1".into(),
            plan_hash: "ab".into(),
            method: Method::Discard,
            next_offset: 5,
            done_bytes: 4,
            total_bytes: 9,
        };
        c.save(&p).unwrap();
        assert_eq!(Checkpoint::load(&p), Some(c));
    }
}
