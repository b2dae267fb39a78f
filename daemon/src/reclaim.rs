//! `reclaim`: hand free ASM allocation units back to a thin-provisioned array.
//!
//! The request streams progress lines before its response (see the proto crate).
//! The job runs on a blocking thread; the connection is watched meanwhile, and
//! the client closing it (Ctrl-C in `asmguardctl`) cancels the job cleanly: the
//! chunk in flight completes, the checkpoint (next offset + plan hash, under
//! `<socket dir>/reclaim/<LABEL>.json`) stays, and a rerun completes the job.
//!
//! Safety, before any write, for all disks of the request: no process on this host
//! (but this daemon) holds any path of a disk open for writing, and the ASM
//! heartbeat block and mount stamp of every disk stay the same for the watch
//! window (another RAC node with the disk group mounted rewrites them).

use crate::model::Disk;
use crate::state::Daemon;
use asmguard_proto::{
    ErrorBody, ErrorCode, ProgressLine, ReclaimArgs, ReclaimDisk, ReclaimProgress, ReclaimResult,
    Response, VERSION,
};
use asmguard_reclaim::counters::DiscardCounters;
use asmguard_reclaim::disk::{self, DiskPlan};
use asmguard_reclaim::safety::{self, Stamps, WatchResult};
use asmguard_reclaim::{ExecOptions, Method};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::mpsc;

/// `asmguard_discard_bytes_total{label,source="reclaim"}` values (for the exporter).
pub fn counters() -> &'static DiscardCounters {
    static C: OnceLock<DiscardCounters> = OnceLock::new();
    C.get_or_init(DiscardCounters::default)
}

/// Labels with a reclaim under way.
fn running() -> &'static Mutex<HashSet<String>> {
    static R: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    R.get_or_init(|| Mutex::new(HashSet::new()))
}

struct Running(Vec<String>);

impl Drop for Running {
    fn drop(&mut self) {
        let mut s = running().lock().unwrap_or_else(|p| p.into_inner());
        for l in &self.0 {
            s.remove(l);
        }
    }
}

fn err(code: ErrorCode, m: impl Into<String>) -> ErrorBody {
    ErrorBody::new(code, m)
}

/// Serve one `reclaim` request: progress lines, then the response.
pub async fn serve(
    d: Arc<Daemon>,
    id: u64,
    a: ReclaimArgs,
    rd: &mut BufReader<OwnedReadHalf>,
    wr: &mut OwnedWriteHalf,
) -> std::io::Result<()> {
    let cancel = Arc::new(AtomicBool::new(false));
    let (tx, mut rx) = mpsc::unbounded_channel::<ReclaimProgress>();
    let c2 = cancel.clone();
    let mut job = tokio::task::spawn_blocking(move || run(&d, &a, &c2, &tx));
    let mut reading = true;
    let mut connected = true;
    let result = loop {
        tokio::select! {
            r = &mut job => break r,
            Some(p) = rx.recv() => {
                if connected {
                    let line = ProgressLine { version: VERSION, id, progress: p };
                    let mut s = serde_json::to_string(&line).unwrap_or_default();
                    s.push('\n');
                    let w = tokio::time::timeout(Duration::from_secs(10), wr.write_all(s.as_bytes())).await;
                    if !matches!(w, Ok(Ok(()))) {
                        connected = false;
                        cancel.store(true, Ordering::SeqCst);
                    }
                }
            }
            r = rd.fill_buf(), if reading => {
                match r {
                    Ok(b) if !b.is_empty() => {
                        // Nothing is expected while the job runs: ignore it.
                        let n = b.len();
                        rd.consume(n);
                    }
                    _ => {
                        reading = false;
                        connected = false;
                        tracing::info!("reclaim: the client went away: cancelling");
                        cancel.store(true, Ordering::SeqCst);
                    }
                }
            }
        }
    };
    let resp = match result {
        Ok(Ok(r)) => match serde_json::to_value(r) {
            Ok(v) => Response::ok(id, v),
            Err(e) => Response::err(id, err(ErrorCode::Internal, e.to_string())),
        },
        Ok(Err(e)) => {
            tracing::warn!("reclaim refused or failed: {}", e.message);
            Response::err(id, e)
        }
        Err(e) => Response::err(
            id,
            err(
                ErrorCode::Internal,
                format!("`reclaim` failed inside asmguardd (a bug; the daemon keeps running): {e}"),
            ),
        ),
    };
    if !connected {
        return Err(std::io::Error::new(
            std::io::ErrorKind::BrokenPipe,
            "client gone",
        ));
    }
    let mut line = resp.to_line();
    line.push('\n');
    match tokio::time::timeout(Duration::from_secs(30), wr.write_all(line.as_bytes())).await {
        Ok(r) => r,
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "write timeout",
        )),
    }
}

/// The disks a request names, from the model (`disks`): those of a disk group,
/// or those of the labels given; a label on more than one disk is refused.
pub fn select(disks: &[Disk], a: &ReclaimArgs) -> Result<Vec<Disk>, ErrorBody> {
    if let Some(g) = &a.diskgroup {
        let v: Vec<Disk> = disks
            .iter()
            .filter(|x| x.disk_group().is_some_and(|n| n.eq_ignore_ascii_case(g)))
            .cloned()
            .collect();
        if v.is_empty() {
            return Err(err(
                ErrorCode::NotFound,
                format!("reclaim: no managed disk belongs to disk group {g} (`asmguardctl lsdsk` shows the disk groups)"),
            ));
        }
        if let Some(c) = v.iter().find(|x| x.conflict) {
            return Err(err(
                ErrorCode::LabelConflict,
                format!("reclaim: label {} is on more than one disk", c.label),
            ));
        }
        return Ok(v);
    }
    let mut out: Vec<Disk> = Vec::new();
    for l in &a.labels {
        let up = l.to_ascii_uppercase();
        let mut named = disks.iter().filter(|x| x.label.as_str() == up);
        let x = named.next().ok_or_else(|| {
            err(
                ErrorCode::NotFound,
                format!("reclaim: no disk is labelled {up} (`asmguardctl lsdsk` lists them)"),
            )
        })?;
        if x.conflict || named.next().is_some() {
            return Err(err(
                ErrorCode::LabelConflict,
                format!("reclaim: label {up} is on more than one disk: relabel one of them first"),
            ));
        }
        if !out.iter().any(|y| y.label == x.label) {
            out.push(x.clone());
        }
    }
    Ok(out)
}

fn checkpoint_path(d: &Daemon, label: &str) -> PathBuf {
    d.socket
        .parent()
        .unwrap_or(Path::new("/run/asmguard"))
        .join("reclaim")
        .join(format!("{label}.json"))
}

fn run(
    d: &Daemon,
    a: &ReclaimArgs,
    cancel: &AtomicBool,
    tx: &mpsc::UnboundedSender<ReclaimProgress>,
) -> Result<ReclaimResult, ErrorBody> {
    let method = Method::parse(&a.method)
        .ok_or_else(|| err(ErrorCode::BadRequest, "method must be discard or zeroout"))?;
    let disks = select(&d.disks(), a)?;
    let _running = claim_running(&disks)?;
    let plans = plan(d, &disks, method)?;
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
    check_writers(&plans)?;
    watch_quiet(&plans, a, planned, cancel, tx)?;
    check_writers(&plans)?;
    // Execute, disk after disk (the rate limit applies to the whole request).
    let mut out = Vec::new();
    let mut total = 0u64;
    for (x, p) in &plans {
        let r = execute(d, x, p, a, method, cancel, tx)?;
        total += r.reclaimed_bytes;
        out.push(r);
    }
    Ok(ReclaimResult {
        dry_run: false,
        disks: out,
        planned_bytes: planned,
        reclaimed_bytes: total,
    })
}

/// Marks the disks as being reclaimed (until the guard drops); `Busy` if one
/// already is.
fn claim_running(disks: &[Disk]) -> Result<Running, ErrorBody> {
    let mut s = running().lock().unwrap_or_else(|p| p.into_inner());
    if let Some(x) = disks.iter().find(|x| s.contains(x.label.as_str())) {
        return Err(err(
            ErrorCode::Busy,
            format!(
                "reclaim {}: another reclaim of this disk is under way",
                x.label
            ),
        ));
    }
    for x in disks {
        s.insert(x.label.to_string());
    }
    Ok(Running(disks.iter().map(|x| x.label.to_string()).collect()))
}

/// The plans (reads only): each disk's header, allocation table and the
/// aligned ranges of its free allocation units.
fn plan(d: &Daemon, disks: &[Disk], method: Method) -> Result<Vec<(Disk, DiskPlan)>, ErrorBody> {
    let mut plans = Vec::new();
    for x in disks {
        let p =
            disk::prepare(Path::new(&x.top.shown), &d.sys, &x.top.name, method).map_err(|m| {
                let unusable = [
                    "does not accept discards",
                    "use --method",
                    "no ASM disk header",
                    "nothing is known to be free",
                    "not plausible",
                ];
                let code = if unusable.iter().any(|u| m.contains(u)) {
                    ErrorCode::NotManageable
                } else {
                    ErrorCode::IoError
                };
                err(code, format!("reclaim {}: {m}", x.label))
            })?;
        plans.push((x.clone(), p));
    }
    Ok(plans)
}

/// A disk's part of the answer, before anything is executed.
fn disk_result(x: &Disk, p: &DiskPlan, method: Method) -> ReclaimDisk {
    ReclaimDisk {
        label: x.label.to_string(),
        device: p.device.clone(),
        disk_group: p.disk_group.clone(),
        method: method.as_str().into(),
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
    }
}

/// Safety 1: no process on this host but this daemon holds a path of a disk
/// open for writing.
fn check_writers(plans: &[(Disk, DiskPlan)]) -> Result<(), ErrorBody> {
    let me = std::process::id();
    for (x, _) in plans {
        let w = safety::writers(Path::new("/proc"), &x.path_devs(), me);
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
fn watch_quiet(
    plans: &[(Disk, DiskPlan)],
    a: &ReclaimArgs,
    planned: u64,
    cancel: &AtomicBool,
    tx: &mpsc::UnboundedSender<ReclaimProgress>,
) -> Result<(), ErrorBody> {
    let labels: Vec<&str> = plans.iter().map(|(x, _)| x.label.as_str()).collect();
    let _ = tx.send(ReclaimProgress {
        phase: "checking".into(),
        label: labels.join(","),
        done_bytes: 0,
        total_bytes: planned,
        percent: 0.0,
        rate_bytes_per_sec: 0.0,
        eta_seconds: a.watch_seconds,
    });
    let devs: Vec<_> = plans
        .iter()
        .map(|(x, p)| {
            asmguard_devices::Device::open_read(Path::new(&x.top.shown))
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

/// Hands one disk's free allocation units back, with progress lines and a
/// checkpoint; its part of the answer.
fn execute(
    d: &Daemon,
    x: &Disk,
    p: &DiskPlan,
    a: &ReclaimArgs,
    method: Method,
    cancel: &AtomicBool,
    tx: &mpsc::UnboundedSender<ReclaimProgress>,
) -> Result<ReclaimDisk, ErrorBody> {
    let mut r = disk_result(x, p, method);
    if cancel.load(Ordering::SeqCst) {
        r.cancelled = true;
        return Ok(r);
    }
    let f = disk::open_rw(Path::new(&x.top.shown)).map_err(|e| {
        err(
            ErrorCode::IoError,
            format!("reclaim {}: {}: open: {e}", x.label, x.top.shown),
        )
    })?;
    let o = ExecOptions {
        label: x.label.to_string(),
        method,
        rate: Some(a.rate_bytes).filter(|r| *r > 0),
        checkpoint: Some(checkpoint_path(d, x.label.as_str())),
        cancel,
        progress_every: Duration::from_millis(250),
        granularity: p.limits.granularity,
        counters: Some(counters()),
    };
    let mut on_progress = |pr: &asmguard_reclaim::Progress| {
        let _ = tx.send(ReclaimProgress {
            phase: "reclaiming".into(),
            label: pr.label.clone(),
            done_bytes: pr.done_bytes,
            total_bytes: pr.total_bytes,
            percent: pr.percent,
            rate_bytes_per_sec: pr.rate_bytes_per_sec,
            eta_seconds: pr.eta_seconds,
        });
    };
    let oc = asmguard_reclaim::execute(&f, &p.plan, &o, &mut on_progress).map_err(|e| {
        err(
            ErrorCode::IoError,
            format!(
                "reclaim {}: {} failed on {}: {e} (the checkpoint keeps what is done; rerun to continue)",
                x.label,
                if method == Method::Discard { "BLKDISCARD" } else { "BLKZEROOUT" },
                x.top.shown
            ),
        )
    })?;
    tracing::info!(
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
    );
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
    use crate::model::tests::model;

    fn args(labels: &[&str], diskgroup: Option<&str>) -> ReclaimArgs {
        let mut a: ReclaimArgs = serde_json::from_str("{}").unwrap();
        a.labels = labels.iter().map(|l| l.to_string()).collect();
        a.diskgroup = diskgroup.map(str::to_string);
        a
    }

    fn labels(r: Result<Vec<Disk>, ErrorBody>) -> Vec<String> {
        r.unwrap().iter().map(|d| d.label.to_string()).collect()
    }

    #[test]
    fn selection_from_the_model() {
        let m = model();
        assert_eq!(labels(select(&m, &args(&[], Some("data")))), ["MDATA1"]);
        assert_eq!(
            labels(select(&m, &args(&["mpart1", "MDATA1", "MPART1"], None))),
            ["MPART1", "MDATA1"]
        );
        let code = |r: Result<Vec<Disk>, ErrorBody>| r.unwrap_err().code;
        assert_eq!(
            code(select(&m, &args(&["MTWIN"], None))),
            ErrorCode::LabelConflict
        );
        assert_eq!(
            code(select(&m, &args(&["NONE"], None))),
            ErrorCode::NotFound
        );
        assert_eq!(
            code(select(&m, &args(&[], Some("FRA")))),
            ErrorCode::NotFound
        );
        let mut twins_in_group = model();
        let member = twins_in_group[0].header.clone();
        for d in &mut twins_in_group[2..] {
            d.header.clone_from(&member);
        }
        assert_eq!(
            code(select(&twins_in_group, &args(&[], Some("DATA")))),
            ErrorCode::LabelConflict
        );
    }
}
