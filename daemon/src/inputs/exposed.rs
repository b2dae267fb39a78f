//! Protected disks still written through a mapping made before protection.
//!
//! The kernel judges a mapping only when it is made (`mmap_file`): a process
//! that mapped a disk shared-writable before the disk became protected (by a
//! label, `filter enable`, the label watch, a hot-plug or the daemon's start)
//! keeps writing through it, and nothing can take that mapping back. Every
//! periodic check (`crate::inputs::tasks::filter_verify`) looks for such mappings of
//! every protected disk; a disk with one is "exposed" (`status` exits 7,
//! `lsdsk`, an event, `asmguard_disk_exposed`) until the process or its
//! mapping is gone. Descriptors open for writing before protection are named
//! in `status` too (`writers_before`), without making the disk exposed: the
//! filter judges each of their writes.

use crate::daemon::Daemon;
use crate::world::{Exposed, Input};
use asmguard_devices::KernelDev;
use asmguard_reclaim::safety::{shared_writable_mappings, write_descriptors};
use std::collections::BTreeMap;

/// Whether this daemon checked once.
static CHECKED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

impl Daemon {
    /// Looks for shared-writable mappings of every protected disk (every
    /// path of it, the devices stacked on it too) by any process but this
    /// one, and sends what it found to the World (the apply side logs and
    /// records each that appears or goes).
    pub fn check_exposed(&self) {
        let disks: Vec<(String, Vec<KernelDev>)> = self
            .applied()
            .world
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
            .collect();
        // one pass over every process's maps for all the disks
        let label_of: BTreeMap<String, &str> = disks
            .iter()
            .flat_map(|(l, devs)| devs.iter().map(move |d| (d.to_string(), l.as_str())))
            .collect();
        let all: Vec<KernelDev> = disks.iter().flat_map(|(_, d)| d.iter().copied()).collect();
        let (found, fds) = if all.is_empty() {
            (Vec::new(), Vec::new()) // nothing protected: no walk of /proc
        } else {
            let (proc, me) = (&self.site.paths.proc, std::process::id());
            (
                shared_writable_mappings(proc, &all, me),
                write_descriptors(proc, &all, me),
            )
        };
        let mut now: Exposed = BTreeMap::new();
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
        // descriptors open for writing before protection: each write still
        // judged, so named only. A disk's first check after it became
        // protected (no entry yet) takes every one; later checks keep those
        // still open (a write-open since protection was judged at its open).
        let before = self.applied().world.writers.clone();
        let mut writers: Exposed = disks.iter().map(|(l, _)| (l.clone(), Vec::new())).collect();
        // the daemon's first check over a filter it re-adopted: the disks
        // were protected all along (the pins kept them), so what is open now
        // was judged at its open (an ASM instance's descriptors are not
        // "since before protection")
        let first = !CHECKED.swap(true, std::sync::atomic::Ordering::SeqCst);
        let fds = if first && self.filter.status().adopted {
            Vec::new()
        } else {
            fds
        };
        for o in fds {
            let Some(l) = label_of.get(&o.device) else {
                continue;
            };
            let known = match before.get(*l) {
                None => true,
                Some(v) => v
                    .iter()
                    .any(|x| x.pid == o.pid && x.fd == o.fd && x.device == o.device),
            };
            if known {
                writers.entry(l.to_string()).or_default().push(o);
            }
        }
        // one input for both findings: one apply per check
        self.submit(Input::Found {
            exposed: now,
            writers,
        });
    }
}
