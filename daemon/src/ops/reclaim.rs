//! `reclaim`: hand free ASM allocation units back to a thin-provisioned array.
//!
//! The request streams progress lines before its response (see the proto crate).
//! The job runs on a blocking thread; the connection is watched meanwhile, and
//! the client closing it (Ctrl-C in `asmguardctl`) cancels the job cleanly: the
//! chunk in flight completes, the checkpoint (next offset + plan hash, under
//! `<socket dir>/reclaim/<LABEL>.json`) stays, and a rerun completes the job.
//!
//! This module is the glue: the socket, the disks selected from the model
//! ([`select`]) and what the daemon hands the job ([`Host`]). The phases (claim,
//! plan, writers, heartbeat watch, execute) are `asmguard_reclaim::job`.

use crate::daemon::Daemon;
use crate::world::model::Disk;
use asmguard_proto::{
    ErrorBody, ErrorCode, ProgressLine, ReclaimArgs, ReclaimProgress, ReclaimResult, Response,
    VERSION,
};
use asmguard_reclaim::counters::DiscardCounters;
use asmguard_reclaim::job::{self, Host, Running, Target};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::mpsc;

/// What the reclaim job takes from the daemon.
struct DaemonHost(Arc<Daemon>);

impl Host for DaemonHost {
    fn sys(&self) -> &Path {
        &self.0.site.paths.sys
    }
    fn proc(&self) -> PathBuf {
        self.0.site.paths.proc.clone()
    }
    fn checkpoint(&self, label: &str) -> PathBuf {
        self.0
            .site
            .runtime_dir
            .join("reclaim")
            .join(format!("{label}.json"))
    }
    fn counters(&self) -> &DiscardCounters {
        &self.0.reclaims.discards
    }
    fn running(&self) -> &Running {
        &self.0.reclaims.running
    }
    fn note(&self, line: &str) {
        tracing::info!("{line}");
    }
    fn writer(&self) -> asmguard_devices::writer::Writer {
        self.0.writer
    }
    fn latency(&self, label: &str) -> Option<[u64; asmguard_iostat::hist::NSLOTS]> {
        use asmguard_iostat::snapshot::Op;
        let snap = self.0.metrics.snapshot().ok()?;
        let mut out = [0u64; asmguard_iostat::hist::NSLOTS];
        let mut found = false;
        for e in snap
            .entries
            .iter()
            .filter(|e| e.label == label && matches!(e.op, Op::Read | Op::Write))
        {
            found = true;
            for (o, n) in out.iter_mut().zip(e.hist.lat.iter()) {
                *o += n;
            }
        }
        found.then_some(out)
    }
    fn fence(&self, labels: &[String]) -> Result<job::FenceGuard, ErrorBody> {
        set_fence(&self.0, labels, true);
        let d = self.0.clone();
        let labels = labels.to_vec();
        Ok(job::FenceGuard::new(move || set_fence(&d, &labels, false)))
    }
}

/// Fences the disks of `labels` (`on`: mode `fenced`, only the daemon's
/// process writes them) or lifts their fence, through the World (the
/// apply side records the fenced disks under the runtime directory:
/// `crate::apply::fence`).
pub fn set_fence(d: &Daemon, labels: &[String], on: bool) {
    d.submit(crate::world::Input::Fence {
        labels: labels.to_vec(),
        on,
    });
    let what = labels.join(", ");
    if !on {
        tracing::info!("reclaim fence of {what} lifted: the job ended");
        return;
    }
    let unfenced: Vec<&str> = labels
        .iter()
        .filter(|l| d.filter.disk_mode(l).mode() != asmguard_guard::Mode::Fenced)
        .map(String::as_str)
        .collect();
    if unfenced.is_empty() {
        tracing::info!("reclaim fence of {what}: only asmguardd writes them until the job ends");
    } else {
        tracing::warn!(
            "reclaim fence of {}: no filter applies it ({}): other writers are not held off",
            unfenced.join(", "),
            d.filter.status().reason
        );
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
    let mut job = tokio::task::spawn_blocking(move || run(d, &a, &c2, &tx));
    let mut reading = true;
    let mut connected = true;
    let result = loop {
        tokio::select! {
            r = &mut job => break r,
            Some(p) = rx.recv() => {
                if connected {
                    let line = ProgressLine { version: VERSION, id, progress: p };
                    let s = serde_json::to_string(&line).unwrap_or_default();
                    let w = crate::inputs::wire::send_line(wr, &s, Duration::from_secs(10)).await;
                    if w.is_err() {
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
    crate::inputs::wire::send(wr, &resp).await
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

/// The target of the job for a disk of the model.
fn target(x: &Disk) -> Target {
    Target {
        label: x.label.to_string(),
        node: PathBuf::from(&x.top.shown),
        name: x.top.name.clone(),
        devs: x.path_devs(),
    }
}

fn run(
    d: Arc<Daemon>,
    a: &ReclaimArgs,
    cancel: &AtomicBool,
    tx: &mpsc::UnboundedSender<ReclaimProgress>,
) -> Result<ReclaimResult, ErrorBody> {
    let targets: Vec<Target> = select(&d.applied().world.model.disks, a)?
        .iter()
        .map(target)
        .collect();
    let progress = |p| {
        let _ = tx.send(p);
    };
    job::run(&DaemonHost(d), &targets, a, cancel, &progress)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The job's fence is the daemon's for as long as the guard lives: it is
    /// in the World while held and gone once dropped (the job ended, however).
    #[test]
    fn the_job_fence_holds_until_its_guard_drops() {
        let run = tempfile::tempdir().unwrap();
        let d = Arc::new(crate::daemon::testing::daemon_at(
            asmguard_config::Config::default(),
            asmguard_paths::Paths::default(),
            run.path(),
        ));
        let host = DaemonHost(d.clone());
        let g = host.fence(&["DATA1".to_string()]).unwrap();
        assert!(d.applied().world.fenced.contains("DATA1"));
        assert!(crate::apply::fence::path(run.path()).exists());
        drop(g);
        assert!(d.applied().world.fenced.is_empty());
        assert!(!crate::apply::fence::path(run.path()).exists());
    }
    use crate::world::model::tests::model;

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

/// `reclaim` is served on its connection ([`serve`]: progress lines, then
/// the response), before the dispatch.
impl asmguard_proto::serve::Reclaim for Daemon {
    fn reclaim(
        &self,
        _: &asmguard_proto::ReclaimArgs,
        _: &str,
    ) -> Result<impl serde::Serialize, asmguard_proto::ErrorBody> {
        crate::serve::on_its_connection("reclaim")
    }
}

#[cfg(test)]
mod fence_tests {
    use super::set_fence;
    use crate::daemon::testing::{daemon_at, status};
    use crate::daemon::*;

    fn labels(d: &Daemon) -> Vec<String> {
        d.applied().world.fenced.iter().cloned().collect()
    }

    fn recorded(run: &Path) -> Option<Vec<String>> {
        let text = std::fs::read(crate::apply::fence::path(run)).ok()?;
        let r: crate::apply::fence::Record = serde_json::from_slice(&text).unwrap();
        assert_eq!(r.pid, std::process::id());
        Some(r.labels.into_iter().collect())
    }

    /// The fence is a part of the World: set and lifted through the one
    /// apply path, kept by scans (a new model keeps it), recorded under the
    /// runtime directory while it holds; a daemon started again once its job
    /// is gone (here: the recorded process is this one, which runs no job
    /// yet) drops it and its record.
    #[test]
    fn the_fence_is_in_the_world_and_recorded_while_it_holds() {
        let sys = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(sys.path().join("class/block")).unwrap();
        let run = tempfile::tempdir().unwrap();
        let paths = asmguard_paths::Paths {
            sys: sys.path().to_path_buf(),
            ..Default::default()
        };
        let d = daemon_at(Config::default(), paths, run.path());
        d.scans.full(&d).unwrap();
        assert!(labels(&d).is_empty());
        assert_eq!(recorded(run.path()), None);

        set_fence(&d, &["DATA1".into(), "DATA2".into()], true);
        assert_eq!(labels(&d), ["DATA1", "DATA2"]);
        assert_eq!(recorded(run.path()).unwrap(), ["DATA1", "DATA2"]);
        set_fence(&d, &["DATA1".into()], false);
        assert_eq!(labels(&d), ["DATA2"]);
        assert_eq!(recorded(run.path()).unwrap(), ["DATA2"]);
        // a scan brings a new model, not a new fence
        d.scans.full(&d).unwrap();
        assert_eq!(labels(&d), ["DATA2"]);
        let st = status(&d);
        assert_eq!(st.reclaim_fence.disks, ["DATA2"]);
        assert!(st.reclaim_fence.refuses.is_some());

        // restarted with the record of a job that no longer runs
        let again = daemon_at(
            Config::default(),
            asmguard_paths::Paths::default(),
            run.path(),
        );
        assert!(labels(&again).is_empty(), "the fence outlived its job");
        assert_eq!(recorded(run.path()), None, "the record of a gone job stays");

        // lifted: no record
        set_fence(&d, &["DATA2".into()], true);
        set_fence(&d, &["DATA2".into()], false);
        assert!(labels(&d).is_empty());
        assert_eq!(recorded(run.path()), None);
        let none = status(&d).reclaim_fence;
        assert!(none.disks.is_empty() && none.refuses.is_none(), "{none:?}");
    }
}
