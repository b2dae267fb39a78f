//! One `reclaim` request, phase by phase: [`Running::claim`] (one reclaim per
//! disk at a time), [`plan`] (reads only), [`check_writers`] (no process of
//! this host holds a path open for writing), [`watch_quiet`] (the ASM
//! heartbeat and mount stamp stay the same for the watch window),
//! [`check_writers`] again, then [`execute`] disk after disk, where the stop
//! rule ([`crate::sentinel`]) re-reads the disk before every chunk and a change
//! stops the request. `--above-size` plans with [`plan_above`] (everything above
//! `dsksize`) and skips the writers check and the watch: the disk group may be
//! mounted. [`run`] chains them; the answer, its progress lines and its errors
//! are the control protocol's.
//!
//! What only the daemon has comes through [`Host`]: the sysfs root, where
//! checkpoints live, the exporter's counters and the set of running reclaims.
//! The disks come in as [`Target`]s, already selected from the daemon's model.
//!
//! Not for: selecting disks, the socket (progress goes to a callback), or the
//! ioctls themselves ([`crate::exec`]).

use crate::counters::DiscardCounters;
use crate::disk::{self, DiskPlan, PrepareError};
use crate::safety::{self, Stamps, WatchResult};
use crate::sentinel::{Sentinel, Watched};
use crate::{ExecOptions, Method};
use asmguard_devices::writer::Writer;
use asmguard_devices::KernelDev;
use asmguard_proto::{
    ErrorBody, ErrorCode, ReclaimArgs, ReclaimDisk, ReclaimProgress, ReclaimResult, ReclaimStop,
};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// A disk to reclaim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Its label.
    pub label: String,
    /// The node read and discarded through (the top device).
    pub node: PathBuf,
    /// The top device's kernel name (its queue limits in sysfs).
    pub name: String,
    /// Every path of the disk (the writers check).
    pub devs: Vec<KernelDev>,
}

/// What only the daemon has.
pub trait Host {
    /// The sysfs root (`/sys`).
    fn sys(&self) -> &Path;
    /// Where the checkpoint of `label`'s reclaim is kept.
    fn checkpoint(&self, label: &str) -> PathBuf;
    /// The exporter's discard counters.
    fn counters(&self) -> &DiscardCounters;
    /// The labels with a reclaim under way.
    fn running(&self) -> &Running;
    /// `/proc`, for the writers check (the caller's `Paths::proc`).
    fn proc(&self) -> PathBuf;
    /// A line for the log (what each disk's execution did).
    fn note(&self, _line: &str) {}
    /// Who opens the disks for the discards (`asmguard_devices::writer`):
    /// by default a plain open.
    fn writer(&self) -> Writer {
        Writer::default()
    }
    /// The disk's cumulative read and write latency histogram slots (the
    /// tracer's), for the adaptive rate; `None` (the default): not traced,
    /// the rate stays fixed.
    fn latency(&self, _label: &str) -> Option<[u64; asmguard_iostat::hist::NSLOTS]> {
        None
    }
    /// Fences the disks of `labels` (by default: nothing to fence): until the
    /// guard drops, only the process that runs the job may write them.
    fn fence(&self, _labels: &[String]) -> Result<FenceGuard, ErrorBody> {
        Ok(FenceGuard::none())
    }
}

/// A fence held for the job ([`Host::fence`]): released when dropped, however
/// the job ends.
pub struct FenceGuard(Option<Box<dyn FnOnce() + Send>>);

impl FenceGuard {
    /// A fence released by `release`.
    pub fn new(release: impl FnOnce() + Send + 'static) -> FenceGuard {
        FenceGuard(Some(Box::new(release)))
    }
    /// No fence.
    pub fn none() -> FenceGuard {
        FenceGuard(None)
    }
}

impl Drop for FenceGuard {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f();
        }
    }
}

impl std::fmt::Debug for FenceGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "FenceGuard(held)"
        } else {
            "FenceGuard(none)"
        })
    }
}

/// Progress lines go here.
pub type OnProgress<'a> = &'a (dyn Fn(ReclaimProgress) + Sync);

fn err(code: ErrorCode, m: impl Into<String>) -> ErrorBody {
    ErrorBody::new(code, m)
}

/// The labels with a reclaim under way.
#[derive(Debug, Default)]
pub struct Running(Mutex<HashSet<String>>);

/// The disks of one request, marked as being reclaimed until it drops.
#[derive(Debug)]
pub struct RunningGuard<'a> {
    running: &'a Running,
    labels: Vec<String>,
}

impl Drop for RunningGuard<'_> {
    fn drop(&mut self) {
        let mut s = self.running.lock();
        for l in &self.labels {
            s.remove(l);
        }
    }
}

impl Running {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Marks the disks as being reclaimed; `Busy` if one already is.
    pub fn claim(&self, targets: &[Target]) -> Result<RunningGuard<'_>, ErrorBody> {
        let mut s = self.lock();
        if let Some(x) = targets.iter().find(|x| s.contains(&x.label)) {
            return Err(err(
                ErrorCode::Busy,
                format!(
                    "reclaim {}: another reclaim of this disk is under way",
                    x.label
                ),
            ));
        }
        let labels: Vec<String> = targets.iter().map(|x| x.label.clone()).collect();
        s.extend(labels.iter().cloned());
        Ok(RunningGuard {
            running: self,
            labels,
        })
    }
}

/// The whole request: every phase in turn, disk after disk.
pub fn run(
    host: &dyn Host,
    targets: &[Target],
    a: &ReclaimArgs,
    cancel: &AtomicBool,
    progress: OnProgress<'_>,
) -> Result<ReclaimResult, ErrorBody> {
    let method = a.method;
    let _running = host.running().claim(targets)?;
    let plans = if a.above_size {
        plan_above(host, targets, method)?
    } else {
        plan(host, targets, method)?
    };
    let planned: u64 = plans.iter().map(|(_, p)| p.plan.total_bytes).sum();
    if a.dry_run {
        return Ok(ReclaimResult {
            dry_run: true,
            disks: plans
                .iter()
                .map(|(x, p)| disk_result(x, p, method))
                .collect(),
            planned_bytes: planned,
            reclaimed_bytes: 0,
        });
    }
    // Safety 1: write openers on this host; 2: heartbeat and mount stamps, all
    // disks over one window; 1 again, for what opened during the window.
    // Above the ASM size the disk group may be mounted everywhere: ASM never
    // allocates there; the stop rule watches `dsksize` instead, and no fence is
    // taken (it would refuse ASM's own writes below the size, with the database up).
    // Otherwise every disk is fenced from the first discard to the last.
    let _fence = if !a.above_size {
        check_writers(host, &plans)?;
        watch_quiet(&plans, a, planned, cancel, progress)?;
        check_writers(host, &plans)?;
        let labels: Vec<String> = plans.iter().map(|(x, _)| x.label.clone()).collect();
        host.fence(&labels)?
    } else {
        FenceGuard::none()
    };
    // Execute, disk after disk (the rate limit applies to the whole request).
    // A disk that stops (the stop rule) stops the request: the disk group is
    // waking up somewhere, the other disks are not started.
    let mut out = Vec::new();
    let mut total = 0u64;
    let mut stopped: Option<String> = None;
    for (x, p) in &plans {
        if let Some(first) = &stopped {
            let mut r = disk_result(x, p, method);
            r.stopped = Some(ReclaimStop {
                what: "not_started".into(),
                message: format!("{}: not started: {first} stopped first", x.label),
                done_bytes: 0,
                seen_at: String::new(),
            });
            out.push(r);
            continue;
        }
        let r = execute(host, x, p, a, method, cancel, progress)?;
        total += r.reclaimed_bytes;
        if r.stopped.is_some() {
            stopped = Some(x.label.clone());
        }
        out.push(r);
    }
    Ok(ReclaimResult {
        dry_run: false,
        disks: out,
        planned_bytes: planned,
        reclaimed_bytes: total,
    })
}

/// The plans (reads only): each disk's header, allocation table and the
/// aligned ranges of its free allocation units.
pub fn plan<'t>(
    host: &dyn Host,
    targets: &'t [Target],
    method: Method,
) -> Result<Vec<(&'t Target, DiskPlan)>, ErrorBody> {
    let mut plans = Vec::new();
    for x in targets {
        let p = disk::prepare(&x.node, host.sys(), &x.name, method).map_err(|e| {
            let code = match e {
                PrepareError::Unusable(_) => ErrorCode::NotManageable,
                PrepareError::Io(_) => ErrorCode::IoError,
            };
            err(code, format!("reclaim {}: {e}", x.label))
        })?;
        plans.push((x, p));
    }
    Ok(plans)
}

/// The plans above each disk's ASM size (reads the header only).
pub fn plan_above<'t>(
    host: &dyn Host,
    targets: &'t [Target],
    method: Method,
) -> Result<Vec<(&'t Target, DiskPlan)>, ErrorBody> {
    targets
        .iter()
        .map(|x| {
            disk::prepare_above(&x.node, host.sys(), &x.name, method)
                .map(|p| (x, p))
                .map_err(|e| {
                    let code = match e {
                        PrepareError::Unusable(_) => ErrorCode::NotManageable,
                        PrepareError::Io(_) => ErrorCode::IoError,
                    };
                    err(code, format!("reclaim {}: {e}", x.label))
                })
        })
        .collect()
}

/// A disk's part of the answer, before anything is executed.
pub fn disk_result(x: &Target, p: &DiskPlan, method: Method) -> ReclaimDisk {
    ReclaimDisk {
        label: x.label.clone(),
        device: p.device.clone(),
        disk_group: p.disk_group.clone(),
        method,
        ausize: p.layout.ausize,
        dsksize_aus: p.layout.dsksize,
        free_aus: p.scan.free_aus,
        at_blocks_read: p.scan.blocks_read,
        at_blocks_valid: p.scan.blocks_valid,
        at_rejected: p.scan.rejected.clone(),
        planned_bytes: p.plan.total_bytes,
        ranges: p.plan.ranges.len() as u64,
        unaligned_bytes: p.plan.unaligned_bytes,
        reclaimed_bytes: 0,
        resumed_from_bytes: 0,
        cancelled: false,
        scan_seconds: p.scan_seconds,
        elapsed_seconds: 0.0,
        rate_bytes_per_sec: 0.0,
        discard_granularity: p.limits.granularity,
        discard_max_bytes: p.limits.max_bytes,
        above_size: p.above_size,
        stopped: None,
    }
}

/// Safety 1: no process on this host but this one holds a path of a disk
/// open for writing.
pub fn check_writers(host: &dyn Host, plans: &[(&Target, DiskPlan)]) -> Result<(), ErrorBody> {
    let me = std::process::id();
    for (x, _) in plans {
        let w = asmguard_devices::holders::writers(&host.proc(), &x.devs, me);
        if !w.is_empty() {
            let list: Vec<String> = w.iter().take(4).map(|o| o.to_string()).collect();
            return Err(err(
                ErrorCode::InUse,
                format!(
                    "reclaim {}: refused: the disk group may be mounted: {} hold{} a path of the disk open for writing; dismount the disk group on this host (or stop that process) and retry",
                    x.label,
                    list.join(", "),
                    if w.len() == 1 { "s" } else { "" }
                ),
            ));
        }
    }
    Ok(())
}

/// Safety 2: the ASM heartbeat block and the mount stamp of every disk stay
/// the same for the watch window (another RAC node with the disk group
/// mounted rewrites them).
pub fn watch_quiet(
    plans: &[(&Target, DiskPlan)],
    a: &ReclaimArgs,
    planned: u64,
    cancel: &AtomicBool,
    progress: OnProgress<'_>,
) -> Result<(), ErrorBody> {
    let labels: Vec<&str> = plans.iter().map(|(x, _)| x.label.as_str()).collect();
    progress(ReclaimProgress {
        phase: "checking".into(),
        label: labels.join(","),
        done_bytes: 0,
        total_bytes: planned,
        percent: 0.0,
        rate_bytes_per_sec: 0.0,
        eta_seconds: a.watch_seconds,
        rate_limit_bytes_per_sec: 0.0,
        rate_note: String::new(),
    });
    let devs: Vec<_> = plans
        .iter()
        .map(|(x, p)| {
            asmguard_devices::Device::open_read(&x.node)
                .map(|dv| (dv, p.layout))
                .map_err(|e| err(ErrorCode::IoError, format!("reclaim {}: {e}", x.label)))
        })
        .collect::<Result<_, _>>()?;
    let mut read = || -> Result<Stamps, String> {
        let mut all = Stamps {
            mntstmp: Vec::new(),
            heartbeat: Vec::new(),
        };
        for (dv, l) in &devs {
            let s = disk::stamps(dv, l)?;
            all.mntstmp.extend(s.mntstmp);
            all.heartbeat.extend(s.heartbeat);
        }
        Ok(all)
    };
    let w = safety::watch(&mut read, Duration::from_secs_f64(a.watch_seconds), cancel).map_err(
        |m| {
            err(
                ErrorCode::IoError,
                format!("reclaim: reading the heartbeat: {m}"),
            )
        },
    )?;
    let labels = labels.join(", ");
    let what = match w {
        WatchResult::Quiet => return Ok(()),
        WatchResult::Cancelled => {
            return Err(err(ErrorCode::Busy, "reclaim: cancelled during the watch"))
        }
        WatchResult::HeartbeatChanged => "the ASM heartbeat block (last block of AU 1) changed during the watch (an ASM instance, maybe on another host, is writing it)",
        WatchResult::MountStampChanged => "the disk header's mount stamp changed during the watch",
    };
    Err(err(
        ErrorCode::InUse,
        format!(
            "reclaim {labels}: refused: the disk group may be mounted: {what} ({} s); dismount the disk group on every node and retry",
            a.watch_seconds
        ),
    ))
}

/// `40.0 GiB`, `16.0 MiB`, `512 bytes`.
pub fn size(b: u64) -> String {
    const U: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if b < 1024 {
        return format!("{b} bytes");
    }
    let mut v = b as f64 / 1024.0;
    let mut i = 0;
    while v >= 1024.0 && i < U.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    format!("{v:.1} {}", U[i])
}

/// Hands one disk's free allocation units back, with progress lines and a
/// checkpoint; its part of the answer.
pub fn execute(
    host: &dyn Host,
    x: &Target,
    p: &DiskPlan,
    a: &ReclaimArgs,
    method: Method,
    cancel: &AtomicBool,
    progress: OnProgress<'_>,
) -> Result<ReclaimDisk, ErrorBody> {
    let mut r = disk_result(x, p, method);
    if cancel.load(Ordering::SeqCst) {
        r.cancelled = true;
        return Ok(r);
    }
    let shown = x.node.display();
    let f = disk::open_rw(&x.node, host.writer()).map_err(|e| {
        err(
            ErrorCode::IoError,
            format!("reclaim {}: {shown}: open: {e}", x.label),
        )
    })?;
    // The stop rule reads through its own O_DIRECT descriptor.
    let sentinel = Sentinel {
        dev: asmguard_devices::Device::open_read(&x.node).map_err(|e| {
            err(
                ErrorCode::IoError,
                format!("reclaim {}: {shown}: open: {e}", x.label),
            )
        })?,
        layout: p.layout,
        baseline: p.baseline.clone(),
        watched: if p.above_size {
            Watched::AboveSize
        } else {
            Watched::Free {
                block_sums: p.scan.block_sums.clone(),
                shrink: p.scan.shrink,
            }
        },
    };
    let check = |r: &crate::Range| sentinel.check(r);
    let latency = || host.latency(&x.label);
    let o = ExecOptions {
        label: x.label.clone(),
        method,
        rate: Some(a.rate_bytes).filter(|r| *r > 0),
        checkpoint: Some(host.checkpoint(&x.label)),
        cancel,
        progress_every: Duration::from_millis(250),
        granularity: p.limits.granularity,
        counters: Some(host.counters()),
        check: Some(&check),
        latency: Some(&latency),
        p99_multiple: a.p99_multiple,
    };
    let mut on_progress = |pr: &ReclaimProgress| progress(pr.clone());
    let oc = crate::execute(&f, &p.plan, &o, &mut on_progress).map_err(|e| {
        err(
            ErrorCode::IoError,
            format!(
                "reclaim {}: {} failed on {shown}: {e} (the checkpoint keeps what is done; rerun to continue)",
                x.label,
                if method == Method::Discard { "BLKDISCARD" } else { "BLKZEROOUT" },
            ),
        )
    })?;
    host.note(&format!(
        "reclaim {}: {} of {} bytes handed back by {} ({} ioctls, {:.1} s{}{})",
        x.label,
        oc.bytes,
        oc.total_bytes,
        method.as_str(),
        oc.ioctls,
        oc.elapsed_seconds,
        if oc.resumed_from > 0 {
            format!(", resumed after {} bytes", oc.resumed_from)
        } else {
            String::new()
        },
        if oc.cancelled { ", cancelled" } else { "" }
    ));
    if let Some(st) = &oc.stopped {
        let message = format!(
            "{}: {}: stopped after {}; nothing was discarded after the change was seen (the checkpoint keeps what is done; {})",
            x.label,
            st.detail,
            size(oc.resumed_from + oc.bytes),
            if p.above_size {
                "a rerun hands back what lies above the new size"
            } else {
                "rerun once the disk group is dismounted everywhere"
            }
        );
        host.note(&format!("reclaim {message}"));
        r.stopped = Some(ReclaimStop {
            what: st.what.into(),
            message,
            done_bytes: oc.bytes,
            seen_at: st.seen_at.clone(),
        });
    }
    r.reclaimed_bytes = oc.bytes;
    r.resumed_from_bytes = oc.resumed_from;
    r.cancelled = oc.cancelled;
    r.elapsed_seconds = oc.elapsed_seconds;
    r.rate_bytes_per_sec = if oc.elapsed_seconds > 0.0 {
        oc.bytes as f64 / oc.elapsed_seconds
    } else {
        0.0
    };
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use asmguard_format::synth::SynthDisk;
    use std::os::unix::fs::FileExt;
    use std::sync::Mutex as StdMutex;

    const MIB: u64 = 1 << 20;

    /// A host of temporary directories: a fake sysfs whose `asmimg` takes
    /// discards of 4 KiB granularity, an empty /proc, checkpoints beside.
    struct TestHost {
        dir: tempfile::TempDir,
        sys: PathBuf,
        counters: DiscardCounters,
        running: Running,
        notes: StdMutex<Vec<String>>,
    }

    impl TestHost {
        fn new() -> TestHost {
            let dir = tempfile::tempdir().unwrap();
            let q = dir.path().join("sys/class/block/asmimg/queue");
            std::fs::create_dir_all(&q).unwrap();
            for (f, v) in [
                ("logical_block_size", "512"),
                ("discard_granularity", "4096"),
                ("discard_max_bytes", "1073741824"),
                ("write_zeroes_max_bytes", "0"),
            ] {
                std::fs::write(q.join(f), format!("{v}\n")).unwrap();
            }
            TestHost {
                sys: dir.path().join("sys"),
                dir,
                counters: DiscardCounters::default(),
                running: Running::default(),
                notes: StdMutex::default(),
            }
        }

        /// A synthetic ASM disk image of 64 AUs, AUs 2..32 allocated.
        fn image(&self, label: &str) -> Target {
            let mut s = SynthDisk::new(64);
            for a in 2..32 {
                s.allocated[a] = true;
            }
            let node = self.dir.path().join(format!("{label}.img"));
            let f = std::fs::File::create(&node).unwrap();
            f.set_len(64 * MIB).unwrap();
            for (off, b) in s.metadata().unwrap() {
                f.write_all_at(&b, off).unwrap();
            }
            Target {
                label: label.into(),
                node,
                name: "asmimg".into(),
                devs: vec![],
            }
        }
    }

    impl Host for TestHost {
        fn sys(&self) -> &Path {
            &self.sys
        }
        fn checkpoint(&self, label: &str) -> PathBuf {
            self.dir.path().join(format!("{label}.json"))
        }
        fn counters(&self) -> &DiscardCounters {
            &self.counters
        }
        fn running(&self) -> &Running {
            &self.running
        }
        fn proc(&self) -> PathBuf {
            // no process directories: nobody holds the images
            self.sys.clone()
        }
        fn note(&self, line: &str) {
            self.notes.lock().unwrap().push(line.into());
        }
    }

    fn args(json: &str) -> ReclaimArgs {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn one_reclaim_per_disk_at_a_time() {
        let h = TestHost::new();
        let (a, b) = (h.image("RA"), h.image("RB"));
        let g = h.running.claim(std::slice::from_ref(&a)).unwrap();
        let e = h.running.claim(&[b.clone(), a.clone()]).unwrap_err();
        assert_eq!(e.code, ErrorCode::Busy);
        assert!(e.message.contains("reclaim RA"), "{}", e.message);
        // the refused request marked nothing
        drop(h.running.claim(std::slice::from_ref(&b)).unwrap());
        drop(g);
        drop(h.running.claim(&[a, b]).unwrap());
    }

    #[test]
    fn a_dry_run_plans_the_free_allocation_units_and_writes_nothing() {
        let h = TestHost::new();
        let host = &h as &dyn Host;
        let t = h.image("DRY1");
        let before = std::fs::read(&t.node).unwrap();
        let lines = StdMutex::new(Vec::new());
        let r = run(
            host,
            std::slice::from_ref(&t),
            &args(r#"{"labels":["DRY1"],"dry_run":true}"#),
            &AtomicBool::new(false),
            &|p| lines.lock().unwrap().push(p),
        )
        .unwrap();
        assert!(r.dry_run);
        assert_eq!(r.disks.len(), 1);
        let d = &r.disks[0];
        assert_eq!((d.label.as_str(), d.disk_group.as_str()), ("DRY1", "DATA"));
        assert_eq!((d.ausize, d.dsksize_aus), (MIB, 64));
        // AUs 32..64 are free (AU 0, 1 and 2..32 are not)
        assert_eq!(d.free_aus, 32);
        assert_eq!(d.planned_bytes, 32 * MIB);
        assert_eq!(r.planned_bytes, 32 * MIB);
        assert_eq!((d.reclaimed_bytes, r.reclaimed_bytes), (0, 0));
        assert_eq!(d.discard_granularity, 4096);
        assert!(lines.lock().unwrap().is_empty(), "no watch, no progress");
        assert_eq!(std::fs::read(&t.node).unwrap(), before);
        // the disk is free again for the next request
        drop(h.running.claim(&[t]).unwrap());
    }

    #[test]
    fn the_phases_run_in_order_up_to_the_ioctl() {
        // No process holds the image; its stamps stay the same over the watch;
        // BLKDISCARD on a regular file is refused, which the answer names.
        let h = TestHost::new();
        let host = &h as &dyn Host;
        let t = h.image("RUN1");
        let lines = StdMutex::new(Vec::new());
        let e = run(
            host,
            std::slice::from_ref(&t),
            &args(r#"{"labels":["RUN1"],"watch_seconds":0.3}"#),
            &AtomicBool::new(false),
            &|p| lines.lock().unwrap().push(p),
        )
        .unwrap_err();
        assert_eq!(e.code, ErrorCode::IoError);
        assert!(
            e.message.contains("BLKDISCARD failed on") && e.message.contains("checkpoint"),
            "{}",
            e.message
        );
        let lines = lines.lock().unwrap();
        assert_eq!(lines[0].phase, "checking");
        assert_eq!(
            (lines[0].label.as_str(), lines[0].total_bytes),
            ("RUN1", 32 * MIB)
        );
        assert_eq!(
            h.counters.reclaim("RUN1"),
            0,
            "a failed ioctl counts nothing"
        );
        assert_eq!(h.counters.in_flight("RUN1"), 0);
    }

    #[test]
    fn a_cancel_stops_the_watch_and_a_changed_heartbeat_refuses() {
        let h = TestHost::new();
        let host = &h as &dyn Host;
        let t = h.image("CAN1");
        let none = |_| {};
        let e = run(
            host,
            std::slice::from_ref(&t),
            &args(r#"{"labels":["CAN1"],"watch_seconds":5}"#),
            &AtomicBool::new(true),
            &none,
        )
        .unwrap_err();
        assert_eq!(e.code, ErrorCode::Busy);
        assert!(
            e.message.contains("cancelled during the watch"),
            "{}",
            e.message
        );
        // A heartbeat rewritten during the watch (another node has it mounted).
        let plans = plan(host, std::slice::from_ref(&t), Method::Discard).unwrap();
        let hb = plans[0].1.layout.heartbeat_offset();
        let node = t.node.clone();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            let f = std::fs::OpenOptions::new().write(true).open(node).unwrap();
            f.write_all_at(b"beat", hb).unwrap();
        });
        let e = watch_quiet(
            &plans,
            // the watch ends at the first change: the window only bounds a
            // writer that never runs
            &args(r#"{"watch_seconds":60}"#),
            0,
            &AtomicBool::new(false),
            &none,
        )
        .unwrap_err();
        writer.join().unwrap();
        assert_eq!(e.code, ErrorCode::InUse);
        assert!(e.message.contains("heartbeat block"), "{}", e.message);
    }

    #[test]
    fn a_disk_that_takes_no_discards_is_not_manageable() {
        let h = TestHost::new();
        std::fs::write(
            h.sys.join("class/block/asmimg/queue/discard_max_bytes"),
            "0\n",
        )
        .unwrap();
        let host = &h as &dyn Host;
        let t = h.image("NOD1");
        let e = plan(host, std::slice::from_ref(&t), Method::Discard).unwrap_err();
        assert_eq!(e.code, ErrorCode::NotManageable);
        assert!(e.message.starts_with("reclaim NOD1: "), "{}", e.message);
        // zeroout needs no discard support: the plan goes on to the device
        let mut gone = t.clone();
        gone.node = h.dir.path().join("gone.img");
        let e = plan(host, std::slice::from_ref(&gone), Method::Zeroout).unwrap_err();
        assert_eq!(e.code, ErrorCode::IoError, "{}", e.message);
        // a header whose allocation unit size is not plausible: no plan
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&t.node)
            .unwrap();
        let mut s = SynthDisk::new(64);
        s.ausize = 3 << 20;
        f.write_all_at(&s.header_block(), 0).unwrap();
        let e = plan(host, std::slice::from_ref(&t), Method::Zeroout).unwrap_err();
        assert_eq!(e.code, ErrorCode::NotManageable, "{}", e.message);
        assert!(e.message.contains("not plausible"), "{}", e.message);
    }
}
