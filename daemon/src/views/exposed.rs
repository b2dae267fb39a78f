//! Protected disks still written through a mapping made before protection.
//!
//! The kernel judges a mapping only when it is made (`mmap_file`): a process
//! that mapped a disk shared-writable before the disk became protected (by a
//! label, `filter enable`, the label watch, a hot-plug or the daemon's start)
//! keeps writing through it, and nothing can take that mapping back. Every
//! periodic check (`crate::tasks::filter_verify`) looks for such mappings of
//! every protected disk; a disk with one is "exposed" (`status` exits 7,
//! `lsdsk`, an event, `asmguard_disk_exposed`) until the process or its
//! mapping is gone.

use super::*;
use asmguard_reclaim::safety::{shared_writable_mappings, Opener};

/// The exposed disks found by the last check: label -> the processes.
#[derive(Debug, Default)]
pub struct Exposures(Mutex<BTreeMap<String, Vec<Opener>>>);

/// A process's mapping of a disk (by label).
type Found = (String, Opener);

/// One `status` line.
fn line(label: &str, o: &Opener) -> String {
    format!(
        "{label} mapped shared-writable by pid {} ({}) since before protection",
        o.pid, o.comm
    )
}

impl Exposures {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Vec<Opener>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `status`'s lines, one per (disk, process).
    pub fn lines(&self) -> Vec<String> {
        self.lock()
            .iter()
            .flat_map(|(l, v)| v.iter().map(move |o| line(l, o)))
            .collect()
    }

    /// The exposed labels.
    pub fn labels(&self) -> BTreeSet<String> {
        self.lock().keys().cloned().collect()
    }

    /// Stores `now`; returns what appeared and what went since the last check.
    fn replace(&self, now: BTreeMap<String, Vec<Opener>>) -> (Vec<Found>, Vec<Found>) {
        let mut cur = self.lock();
        let flat = |m: &BTreeMap<String, Vec<Opener>>| -> BTreeSet<(String, u32)> {
            m.iter()
                .flat_map(|(l, v)| v.iter().map(move |o| (l.clone(), o.pid)))
                .collect()
        };
        let (before, after) = (flat(&cur), flat(&now));
        let pick = |m: &BTreeMap<String, Vec<Opener>>, keys: &BTreeSet<(String, u32)>| {
            m.iter()
                .flat_map(|(l, v)| v.iter().map(move |o| (l.clone(), o.clone())))
                .filter(|(l, o)| keys.contains(&(l.clone(), o.pid)))
                .collect::<Vec<_>>()
        };
        let new = pick(&now, &after.difference(&before).cloned().collect());
        let gone = pick(&cur, &before.difference(&after).cloned().collect());
        *cur = now;
        (new, gone)
    }
}

impl Daemon {
    /// Looks for shared-writable mappings of every protected disk (every
    /// path of it, the devices stacked on it too) by any process but this
    /// one; keeps them, logs and records each that appears or goes.
    pub fn check_exposed(&self) {
        let disks: Vec<(String, Vec<KernelDev>)> = {
            let s = self.read_state();
            s.world
                .model
                .disks
                .iter()
                .filter(|d| {
                    !d.conflict
                        && matches!(
                            d.mode.map(|m| m.mode()),
                            Some(asmguard_guard::Mode::Enforce | asmguard_guard::Mode::Fenced)
                        )
                })
                .map(|d| {
                    let mut devs: Vec<KernelDev> = d.paths.iter().map(|p| p.node.dev).collect();
                    devs.extend(d.holders.iter().copied());
                    (d.label.to_string(), devs)
                })
                .collect()
        };
        // one pass over every process's maps for all the disks
        let label_of: BTreeMap<String, &str> = disks
            .iter()
            .flat_map(|(l, devs)| devs.iter().map(move |d| (d.to_string(), l.as_str())))
            .collect();
        let all: Vec<KernelDev> = disks.iter().flat_map(|(_, d)| d.iter().copied()).collect();
        let found = if all.is_empty() {
            Vec::new() // nothing protected: no walk of /proc
        } else {
            shared_writable_mappings(&self.site.paths.proc, &all, std::process::id())
        };
        let mut now: BTreeMap<String, Vec<Opener>> = BTreeMap::new();
        for o in found {
            let Some(l) = label_of.get(&o.device) else {
                continue;
            };
            let v = now.entry(l.to_string()).or_default();
            // a process mapping two paths of one disk: named once
            if !v.iter().any(|x| x.pid == o.pid) {
                v.push(o);
            }
        }
        let (new, gone) = self.exposed.replace(now);
        let proc = &self.site.paths.proc;
        let exe = |pid: u32| {
            std::fs::read_link(proc.join(pid.to_string()).join("exe"))
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        };
        for (l, o) in new {
            tracing::error!(
                "exposed: {}: writes through that mapping land whatever the filter says; \
                 end the process to close it ({})",
                line(&l, &o),
                o.path
            );
            self.filter.note_event(&l, &o, exe(o.pid), "exposed");
        }
        for (l, o) in gone {
            tracing::warn!(
                "no longer exposed: {l}: pid {} ({}) and its shared-writable mapping are gone",
                o.pid,
                o.comm
            );
            self.filter.note_event(&l, &o, exe(o.pid), "exposure ended");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o(pid: u32) -> Opener {
        Opener {
            pid,
            comm: "dd".into(),
            fd: 0,
            path: "shared writable mapping 1-2".into(),
            device: "7:0".into(),
        }
    }

    #[test]
    fn appear_and_go() {
        let e = Exposures::default();
        let (n, g) = e.replace(BTreeMap::from([("DATA1".to_string(), vec![o(12)])]));
        assert_eq!((n.len(), g.len()), (1, 0));
        assert_eq!(
            e.lines(),
            ["DATA1 mapped shared-writable by pid 12 (dd) since before protection"]
        );
        // the same again: nothing new
        let (n, g) = e.replace(BTreeMap::from([("DATA1".to_string(), vec![o(12)])]));
        assert_eq!((n.len(), g.len()), (0, 0));
        let (n, g) = e.replace(BTreeMap::new());
        assert_eq!((n.len(), g[0].1.pid), (0, 12));
        assert!(e.lines().is_empty() && e.labels().is_empty());
    }
}
