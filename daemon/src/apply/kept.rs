//! First come, first kept: a disk the daemon manages under a label keeps it
//! (its `/dev/asmguard/disks` link, its container nodes, `rename`/`unlabel`
//! by label) when another device shows up carrying the same label. The
//! newcomer is a label conflict (journal line, `lsdsk`, the
//! `asmguard_label_conflicts` metric), stays under the write filter like
//! every claimant, and is never linked or presented. Without this a loop
//! device planted with a presented disk's label would take that disk from
//! the container and from ASM.
//!
//! Who was first, in this order: the claimant the previous model used under
//! the label; else the one recorded for it in `<runtime_dir>/kept/<LABEL>`
//! (the device number of the label's last usable disk, written whenever it
//! changes: it outlives a daemon restart, not a reboot, as `/run` does);
//! else the one the stable link `/dev/asmguard/disks/<LABEL>` points at now.
//! When none of them names a claimant (two disks with one label found at
//! boot), none is used, as before.
//!
//! A label this daemon saw appear moments ago is not yet anyone's: when two
//! RAC nodes label two shared disks with one name at once, each node sees
//! its own label first and the other's one label-watch round later, so
//! "first" would name a different disk on each node and the nodes would link
//! different disks under one name. A claimant younger than the settle window
//! (two label-watch rounds and the label's own confirmation) keeps nothing:
//! the conflict is judged alike on every node (neither is used until one is
//! relabelled). A claimant found at the daemon's start, or older than the
//! window, is established and keeps its label.

use crate::world::model::Model;
use asmguard_devices::KernelDev;
use std::collections::BTreeMap;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct Kept {
    dir: PathBuf,
    /// label -> device number last recorded (or read back).
    told: Mutex<BTreeMap<String, KernelDev>>,
    /// label -> the claimant that took it during this daemon's life, and when
    /// (claimants found by the first model are not here: established).
    appeared: Mutex<BTreeMap<String, (KernelDev, Instant)>>,
    /// How long a new claimant stays too young to keep its label.
    settle: Duration,
    /// Whether a model was recorded yet (the first one is the start's).
    started: std::sync::atomic::AtomicBool,
    /// The roots (the stable links: `Paths::disk_link`).
    paths: asmguard_paths::Paths,
}

impl Kept {
    /// Records under `<runtime_dir>/kept`; a claimant younger than `settle`
    /// keeps nothing (see the module).
    pub fn new(runtime_dir: &Path, settle: Duration, paths: &asmguard_paths::Paths) -> Kept {
        Kept {
            paths: paths.clone(),
            dir: runtime_dir.join("kept"),
            told: Mutex::default(),
            appeared: Mutex::default(),
            settle,
            started: Default::default(),
        }
    }

    /// The settle window for a label watch of `watch` per round: two rounds
    /// (the other node's label is seen within one, ours within one there)
    /// and the label operation's own confirmation.
    pub fn settle_for(watch: Duration) -> Duration {
        watch * 2 + Duration::from_secs(3)
    }

    /// Whether `dev` took `label` less than the settle window ago.
    fn too_young(&self, label: &str, dev: KernelDev) -> bool {
        let appeared = self.appeared.lock().unwrap_or_else(|p| p.into_inner());
        appeared
            .get(label)
            .is_some_and(|(d, t)| *d == dev && t.elapsed() < self.settle)
    }

    /// The device number recorded for `label`.
    fn recorded(&self, label: &str) -> Option<KernelDev> {
        let mut told = self.told.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(d) = told.get(label) {
            return Some(*d);
        }
        let text = std::fs::read_to_string(self.dir.join(label)).ok()?;
        let (maj, min) = text.trim().split_once(':')?;
        let dev = KernelDev::new(maj.parse().ok()?, min.parse().ok()?).ok()?;
        told.insert(label.to_string(), dev);
        Some(dev)
    }

    /// Marks, for every label of `m` in conflict, the claimant that had it
    /// first (see the module) as not in conflict, and names it in `m.kept`.
    pub fn resolve(&self, prev: &Model, m: &mut Model) {
        let labels: Vec<String> = m.conflicts.keys().cloned().collect();
        for label in labels {
            let before = prev
                .disks
                .iter()
                .find(|d| d.label.as_str() == label && !d.conflict)
                .map(|d| d.top.dev);
            // a race between nodes is judged alike everywhere, and stays so
            // (the record forgotten: a restart does not pick a side either)
            let undecided = prev.conflicts.contains_key(&label) && !prev.kept.contains_key(&label);
            if undecided || before.is_some_and(|dev| self.too_young(&label, dev)) {
                if !undecided {
                    self.forget(&label);
                }
                continue;
            }
            let first = before
                .or_else(|| self.recorded(&label))
                .or_else(|| linked(&self.paths, &label));
            let Some(first) = first else { continue };
            if let Some(d) = m
                .disks
                .iter_mut()
                .find(|d| d.label.as_str() == label && d.top.dev == first)
            {
                d.conflict = false;
                m.kept.insert(label, d.top.shown.clone());
            }
        }
    }

    /// Forgets which disk had `label` (a conflict nobody keeps).
    fn forget(&self, label: &str) {
        let mut told = self.told.lock().unwrap_or_else(|p| p.into_inner());
        told.remove(label);
        match std::fs::remove_file(self.dir.join(label)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(
                "{}: cannot forget which disk had label {label}: {e} (after a restart it \
                 would keep the label)",
                self.dir.display()
            ),
        }
    }

    /// Records the device of every label `m` uses whose record changed (and,
    /// after the first model, when it took the label).
    pub fn record(&self, m: &Model) {
        let first = !self.started.swap(true, std::sync::atomic::Ordering::SeqCst);
        let mut told = self.told.lock().unwrap_or_else(|p| p.into_inner());
        let mut appeared = self.appeared.lock().unwrap_or_else(|p| p.into_inner());
        appeared.retain(|_, (_, t)| t.elapsed() < self.settle);
        for d in m.disks.iter().filter(|d| !d.conflict) {
            let label = d.label.as_str();
            if told.get(label) == Some(&d.top.dev) {
                continue;
            }
            if !first {
                appeared.insert(label.to_string(), (d.top.dev, Instant::now()));
            }
            let write = || -> std::io::Result<()> {
                std::fs::create_dir_all(&self.dir)?;
                let tmp = self.dir.join(format!(".{label}.new"));
                std::fs::write(
                    &tmp,
                    format!("{}:{}\n", d.top.dev.major(), d.top.dev.minor()),
                )?;
                std::fs::rename(&tmp, self.dir.join(label))
            };
            match write() {
                Ok(()) => {
                    told.insert(label.to_string(), d.top.dev);
                }
                Err(e) => tracing::warn!(
                    "{}: cannot record which disk has label {label}: {e} (a newcomer with \
                     that label after a restart would make a conflict)",
                    self.dir.display()
                ),
            }
        }
    }
}

/// The device the stable link of `label` reaches now.
fn linked(paths: &asmguard_paths::Paths, label: &str) -> Option<KernelDev> {
    let l = asmguard_format::label::Label::new(label).ok()?;
    let m = std::fs::metadata(paths.disk_link(l.as_str())).ok()?;
    m.file_type()
        .is_block_device()
        .then(|| KernelDev::from_dev_t(m.rdev()).ok())?
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::model::Disk;

    fn disk_for_tests(label: &str, name: &str, dev: KernelDev) -> Disk {
        crate::world::model::tests::plain_disk(label, name, dev)
    }

    fn model(disks: Vec<Disk>) -> Model {
        let mut conflicts: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut n: BTreeMap<String, usize> = BTreeMap::new();
        for d in &disks {
            *n.entry(d.label.to_string()).or_default() += 1;
        }
        let mut disks = disks;
        for d in &mut disks {
            if n[d.label.as_str()] > 1 {
                d.conflict = true;
                conflicts
                    .entry(d.label.to_string())
                    .or_default()
                    .push(d.top.shown.clone());
            }
        }
        Model {
            disks,
            conflicts,
            ..Model::default()
        }
    }

    #[test]
    fn the_first_claimant_keeps_its_label_across_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let k = Kept::new(
            dir.path(),
            Duration::ZERO,
            &asmguard_paths::Paths::under(Path::new("/nonexistent")),
        );
        let a = disk_for_tests("PLANT1", "loop3", KernelDev::new(7, 3).unwrap());
        let b = disk_for_tests("PLANT1", "loop4", KernelDev::new(7, 4).unwrap());
        // one disk: used and recorded
        let before = model(vec![a.clone()]);
        k.record(&before);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("kept/PLANT1")).unwrap(),
            "7:3\n"
        );
        // a newcomer: the first keeps it, the newcomer is in conflict
        let mut m = model(vec![b.clone(), a.clone()]);
        k.resolve(&before, &mut m);
        assert_eq!(m.kept["PLANT1"], "/dev/loop3");
        assert!(!m.disks[1].conflict && m.disks[0].conflict);
        assert_eq!(m.disk("PLANT1").unwrap().top.name, "loop3");
        // a restart: no previous model; the record says who was first
        let k2 = Kept::new(
            dir.path(),
            Duration::ZERO,
            &asmguard_paths::Paths::under(Path::new("/nonexistent")),
        );
        let mut m = model(vec![b.clone(), a.clone()]);
        k2.resolve(&Model::default(), &mut m);
        assert_eq!(m.kept["PLANT1"], "/dev/loop3");
        // nothing says who was first: neither is used
        let k3 = Kept::new(
            &dir.path().join("elsewhere"),
            Duration::ZERO,
            &asmguard_paths::Paths::under(Path::new("/nonexistent")),
        );
        let mut m = model(vec![b, a]);
        k3.resolve(&Model::default(), &mut m);
        assert!(m.kept.is_empty() && m.disks.iter().all(|d| d.conflict));
        assert!(m.disk("PLANT1").is_none());
    }

    /// Two nodes label two shared disks with one name at once: each sees its
    /// own first, so a young claimant keeps nothing (neither is used, on
    /// every node alike), stays undecided after the window, and its record is
    /// forgotten (a restart does not pick a side); once established, a
    /// claimant keeps its label against a newcomer.
    #[test]
    fn a_young_claimant_keeps_nothing_and_the_conflict_stays_undecided() {
        let dir = tempfile::tempdir().unwrap();
        let k = Kept::new(
            dir.path(),
            Duration::from_millis(300),
            &asmguard_paths::Paths::under(Path::new("/nonexistent")),
        );
        let a = disk_for_tests("PAIRDUP", "vdc", KernelDev::new(254, 32).unwrap());
        let b = disk_for_tests("PAIRDUP", "vdd", KernelDev::new(254, 48).unwrap());
        k.record(&Model::default()); // the daemon's start: nothing yet
        let labelled = model(vec![a.clone()]);
        k.record(&labelled); // labelled here just now
        let mut m = model(vec![a.clone(), b.clone()]);
        k.resolve(&labelled, &mut m);
        assert!(m.kept.is_empty() && m.disks.iter().all(|d| d.conflict));
        assert!(
            !dir.path().join("kept/PAIRDUP").exists(),
            "record forgotten"
        );
        std::thread::sleep(Duration::from_millis(400));
        let mut later = model(vec![a.clone(), b.clone()]);
        k.resolve(&m, &mut later);
        assert!(later.kept.is_empty(), "undecided stays undecided");
        let k2 = Kept::new(
            dir.path(),
            Duration::from_millis(300),
            &asmguard_paths::Paths::under(Path::new("/nonexistent")),
        );
        let mut restarted = model(vec![a.clone(), b.clone()]);
        k2.resolve(&Model::default(), &mut restarted);
        assert!(restarted.kept.is_empty(), "a restart picks no side");

        // established (older than the window): the first keeps it
        let k3 = Kept::new(
            &dir.path().join("other"),
            Duration::from_millis(300),
            &asmguard_paths::Paths::under(Path::new("/nonexistent")),
        );
        k3.record(&Model::default());
        k3.record(&labelled);
        std::thread::sleep(Duration::from_millis(400));
        let mut m = model(vec![b, a]);
        k3.resolve(&labelled, &mut m);
        assert_eq!(m.kept["PAIRDUP"], "/dev/vdc");
    }
}
