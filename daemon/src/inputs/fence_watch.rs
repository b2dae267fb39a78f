//! A fence kept at start ([`crate::apply::fence::kept`]) is watched until the
//! process that made it ends (the daemon's half of the fence record; apart
//! from `fence`, which the state reads, so that neither imports the other).

use crate::apply::fence::{kept, path, start_ticks};
use std::path::PathBuf;

/// How often a kept fence's process is looked for.
pub(crate) const KEPT_POLL: std::time::Duration = std::time::Duration::from_millis(500);

/// A fence kept at start (`load`) lasts only while its process runs: a
/// thread marks its disks as being reclaimed (a reclaim of them is refused
/// as under way) and lifts the fence, with a journal line naming the
/// process, once that process has ended. Nothing kept: nothing to do.
pub fn watch_kept(
    d: &std::sync::Arc<crate::daemon::Daemon>,
) -> Option<std::thread::JoinHandle<()>> {
    let file = path(&d.site.runtime_dir);
    let proc = d.site.paths.proc.clone();
    let r = kept(&file, &proc)?;
    let (who, pid) = (
        r.labels.iter().cloned().collect::<Vec<_>>().join(", "),
        r.pid,
    );
    let d = d.clone();
    let spawned = std::thread::Builder::new()
        .name("fence-kept".into())
        .spawn(move || {
            let labels: Vec<String> = r.labels.iter().cloned().collect();
            let targets: Vec<asmguard_reclaim::job::Target> = labels
                .iter()
                .map(|l| asmguard_reclaim::job::Target {
                    label: l.clone(),
                    node: PathBuf::new(),
                    name: String::new(),
                    devs: Vec::new(),
                })
                .collect();
            let running = d.reclaims.running.claim(&targets).ok();
            while start_ticks(&proc, r.pid) == Some(r.start_ticks) {
                std::thread::sleep(KEPT_POLL);
            }
            tracing::info!(
                "reclaim fence of {} dropped: its job ended with asmguardd process {}",
                labels.join(", "),
                r.pid
            );
            crate::ops::reclaim::set_fence(&d, &labels, false);
            drop(running);
        });
    match spawned {
        Ok(h) => Some(h),
        Err(e) => {
            tracing::error!(
                "reclaim fence of {who}: cannot watch asmguardd process {pid} ({e}): \
                 the fence holds until the next start"
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apply::fence::Record;
    use std::collections::BTreeSet;
    use std::path::Path;

    /// A fence kept at start from a process that still runs holds, and its
    /// disks cannot be reclaimed, until that process ends; then it is lifted
    /// and its record removed.
    #[test]
    fn a_kept_fence_is_lifted_once_its_process_ends() {
        use std::sync::Arc;
        let run = tempfile::tempdir().unwrap();
        let d = Arc::new(crate::daemon::testing::daemon_at(
            asmguard_config::Config::default(),
            asmguard_paths::Paths::default(),
            run.path(),
        ));
        assert!(watch_kept(&d).is_none(), "no record: nothing kept");
        crate::ops::reclaim::set_fence(&d, &["DATA1".to_string()], true);
        let f = path(run.path());
        assert!(
            watch_kept(&d).is_none(),
            "our own record: not another process's"
        );
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let cpid = child.id();
        let rec = Record {
            pid: cpid,
            start_ticks: start_ticks(Path::new("/proc"), cpid).unwrap(),
            labels: set(&["DATA1"]),
        };
        std::fs::write(&f, serde_json::to_vec(&rec).unwrap()).unwrap();
        let h = watch_kept(&d).expect("a live process's fence is watched");
        let target = |l: &str| asmguard_reclaim::job::Target {
            label: l.into(),
            node: PathBuf::new(),
            name: String::new(),
            devs: Vec::new(),
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while d.reclaims.running.claim(&[target("DATA1")]).is_ok() {
            assert!(
                std::time::Instant::now() < deadline,
                "never marked as running"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let e = d.reclaims.running.claim(&[target("DATA1")]).unwrap_err();
        assert!(e.message.contains("under way"), "{}", e.message);
        std::thread::sleep(KEPT_POLL * 2);
        assert!(
            d.applied().world.fenced.contains("DATA1"),
            "held while the process runs"
        );
        assert!(f.exists());
        child.kill().unwrap();
        child.wait().unwrap();
        h.join().unwrap();
        assert!(
            d.applied().world.fenced.is_empty(),
            "lifted once the process ended"
        );
        assert!(!f.exists(), "and its record removed");
        assert!(d.reclaims.running.claim(&[target("DATA1")]).is_ok());
    }

    fn set(l: &[&str]) -> BTreeSet<String> {
        l.iter().map(|s| s.to_string()).collect()
    }
}
