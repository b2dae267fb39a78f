//! The reclaim's fence, as runtime state: which disks are fenced (mode
//! `fenced` in the World, `crate::world`) and by which daemon process.
//!
//! The job runs inside the daemon, so it can run only while the daemon that
//! started it does. The record (`<runtime_dir>/reclaim/fence.json`) names that
//! process (pid and start time, so a reused pid is nobody) and the labels; a
//! restarted daemon keeps the fence only while that process still runs (the
//! job could still be discarding), and drops the record otherwise: the fence
//! never outlives its job.

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// What is recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The daemon process that runs the job.
    pub pid: u32,
    /// Its start time (`/proc/PID/stat` field 22, clock ticks).
    pub start_ticks: u64,
    /// The disks fenced, by label.
    pub labels: BTreeSet<String>,
}

/// Where the record is kept.
pub fn path(runtime_dir: &Path) -> PathBuf {
    runtime_dir.join("reclaim").join("fence.json")
}

/// The start time of process `pid` under `proc` (None: no such process).
pub fn start_ticks(proc: &Path, pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(proc.join(pid.to_string()).join("stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    // rest starts at field 3 (state); starttime is field 22
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Records `labels` as fenced by this process (`proc`: where its stat is
/// read); no labels: the record goes.
pub fn save(file: &Path, proc: &Path, labels: &BTreeSet<String>) -> std::io::Result<()> {
    if labels.is_empty() {
        return match std::fs::remove_file(file) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        };
    }
    let pid = std::process::id();
    let r = Record {
        pid,
        start_ticks: start_ticks(proc, pid).unwrap_or(0),
        labels: labels.clone(),
    };
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = file.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec(&r).map_err(std::io::Error::other)?)?;
    std::fs::rename(&tmp, file)
}

/// At start: the labels whose fence still holds (the process that ran the
/// job still runs), or none, the record then removed (its job is gone).
pub fn load(file: &Path, proc: &Path) -> BTreeSet<String> {
    let Ok(text) = std::fs::read(file) else {
        return BTreeSet::new();
    };
    let alive =
        |r: &Record| r.pid != std::process::id() && start_ticks(proc, r.pid) == Some(r.start_ticks);
    match serde_json::from_slice::<Record>(&text) {
        Ok(r) if alive(&r) => {
            tracing::warn!(
                "reclaim fence of {} kept: the asmguardd process {} that runs its job still runs",
                r.labels.iter().cloned().collect::<Vec<_>>().join(", "),
                r.pid
            );
            r.labels
        }
        r => {
            if let Ok(r) = &r {
                tracing::info!(
                    "reclaim fence of {} dropped: its job ended with asmguardd process {}",
                    r.labels.iter().cloned().collect::<Vec<_>>().join(", "),
                    r.pid
                );
            }
            let _ = std::fs::remove_file(file);
            BTreeSet::new()
        }
    }
}

/// The record of a fence `load` kept: it names another process that still
/// runs (None: no record, or its process is gone).
pub fn kept(file: &Path, proc: &Path) -> Option<Record> {
    let r: Record = serde_json::from_slice(&std::fs::read(file).ok()?).ok()?;
    (r.pid != std::process::id() && start_ticks(proc, r.pid) == Some(r.start_ticks)).then_some(r)
}

/// `status`'s fence: the fenced disks and what the fence refuses on the
/// filter in force (`cover`; `by_task`: the filter can tell the daemon's
/// process apart, not the 5.10 fallback that knows callers by ids alone).
pub fn status(
    fenced: &BTreeSet<String>,
    cover: asmguard_guard::Coverage,
    by_task: bool,
) -> asmguard_proto::ReclaimFence {
    use asmguard_guard::Coverage;
    use asmguard_proto::FenceRefuses;
    asmguard_proto::ReclaimFence {
        disks: fenced.iter().cloned().collect(),
        refuses: (!fenced.is_empty()).then_some(match cover {
            Coverage::Full(_) => FenceRefuses::AllWrites,
            Coverage::OpenTimeOnly if by_task => FenceRefuses::OpensButDaemon,
            Coverage::OpenTimeOnly => FenceRefuses::OpensNotAllowed,
            Coverage::Disabled | Coverage::Unprotected => FenceRefuses::Nothing,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `status` names the fenced disks and what the backend refuses: all
    /// write-class operations in full, opens only under the fallback (ctl
    /// writes the sentence: `fence_line_says_what_the_fence_covers`).
    #[test]
    fn status_says_what_the_fence_covers() {
        use asmguard_guard::{Backend, Coverage};
        use asmguard_proto::FenceRefuses;
        let none = status(&BTreeSet::new(), Coverage::Full(Backend::Lsm), true);
        assert_eq!((none.disks.len(), none.refuses), (0, None));
        let f = set(&["DATA1"]);
        let full = status(&f, Coverage::Full(Backend::Lsm), true);
        assert_eq!(
            (full.disks.clone(), full.refuses),
            (vec!["DATA1".to_string()], Some(FenceRefuses::AllWrites))
        );
        let open = status(&f, Coverage::OpenTimeOnly, true);
        assert_eq!(open.refuses, Some(FenceRefuses::OpensButDaemon));
        let ids = status(&f, Coverage::OpenTimeOnly, false);
        assert_eq!(ids.refuses, Some(FenceRefuses::OpensNotAllowed));
        let unprotected = status(&f, Coverage::Unprotected, true);
        assert_eq!(unprotected.refuses, Some(FenceRefuses::Nothing));
        // the JSON: the disks and a word
        let v = serde_json::to_value(&ids).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"disks": ["DATA1"], "refuses": "opens_not_allowed"})
        );
    }

    fn set(l: &[&str]) -> BTreeSet<String> {
        l.iter().map(|s| s.to_string()).collect()
    }

    /// A restarted daemon drops a fence whose job is gone (the process that
    /// ran it exited, or its pid now names another process), and the record
    /// with it; it keeps one whose process still runs.
    #[test]
    fn a_fence_is_kept_at_start_only_while_its_job_can_run() {
        let dir = tempfile::tempdir().unwrap();
        let proc = Path::new("/proc");
        let f = path(dir.path());
        save(&f, proc, &set(&["DATA1", "DATA2"])).unwrap();
        let r: Record = serde_json::from_slice(&std::fs::read(&f).unwrap()).unwrap();
        assert_eq!(r.pid, std::process::id());
        assert_eq!(r.labels, set(&["DATA1", "DATA2"]));
        assert!(r.start_ticks > 0);

        // a process that still runs (another daemon's job)
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let cpid = child.id();
        let rec = |pid, start_ticks| Record {
            pid,
            start_ticks,
            labels: set(&["DATA1"]),
        };
        let live = rec(cpid, start_ticks(proc, cpid).unwrap());
        std::fs::write(&f, serde_json::to_vec(&live).unwrap()).unwrap();
        assert_eq!(load(&f, proc), set(&["DATA1"]));
        assert!(f.exists());

        // the same pid with another start: a reused pid is not the job
        let reused = rec(cpid, live.start_ticks + 1);
        std::fs::write(&f, serde_json::to_vec(&reused).unwrap()).unwrap();
        assert!(load(&f, proc).is_empty());
        assert!(!f.exists(), "the record of a gone job is removed");

        // the process ended: the fence goes
        std::fs::write(&f, serde_json::to_vec(&live).unwrap()).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(load(&f, proc).is_empty());
        assert!(!f.exists());

        // this very process (the record of a previous run with our pid): gone
        save(&f, proc, &set(&["DATA1"])).unwrap();
        assert!(load(&f, proc).is_empty());

        // unreadable record: dropped; no record: nothing
        std::fs::write(&f, b"{").unwrap();
        assert!(load(&f, proc).is_empty());
        assert!(!f.exists());
        assert!(load(&f, proc).is_empty());

        // saving no labels removes the record
        save(&f, proc, &set(&["DATA1"])).unwrap();
        save(&f, proc, &BTreeSet::new()).unwrap();
        assert!(!f.exists());
    }
}
