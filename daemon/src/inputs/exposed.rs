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
//! filter judges each of their writes. So are loop devices set up over a
//! protected disk before its protection (they joined its devices: their
//! writes are judged as the disk's).

use crate::daemon::Daemon;
use crate::world::exposed::{LoopBefore, Loops};
use crate::world::{Exposed, Input};
use asmguard_devices::holders::{holders, holders_among};
use asmguard_devices::KernelDev;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

/// How often the periodic check walks every process even when nothing
/// calls for it: a descriptor or mapping made before protection that
/// reached another process (inherited, passed over a socket) after the
/// disk's first check is named within this.
pub const WALK_ALL_EVERY: Duration = Duration::from_secs(30);

/// What one check reads of `/proc`.
#[derive(Debug, PartialEq, Eq)]
pub enum Walk {
    /// Every process: each of its descriptors stat'ed and its maps read.
    All,
    /// The processes named by the last check only (to see which of their
    /// descriptors and mappings are still there).
    Among(Vec<u32>),
    /// Nothing: nothing made before protection was found at the disks'
    /// first check, so nothing made before it can appear (every open and
    /// mapping since was judged by the filter when it was made).
    Nothing,
}

/// What decides a check's [`Walk`].
#[derive(Debug)]
pub struct Why {
    /// The daemon's first check.
    pub first: bool,
    /// A disk's first check since it became protected (labelled, enabled,
    /// plugged in, reached by the label watch).
    pub newly_protected: bool,
    /// [`WALK_ALL_EVERY`] has passed since the last walk of every process.
    pub due: bool,
    /// A process named by the last check is gone (what it held may live on
    /// in a child: walk every process rather than drop it and name it again
    /// later).
    pub gone: bool,
    /// The processes named by the last check.
    pub known: BTreeSet<u32>,
}

/// The walk a check makes. A walk of every process stats each descriptor
/// of each: about 600 ms on a host with 600 processes of 150 descriptors
/// (measured), which every 2 s is a third of a core on a database host.
pub fn walk(w: Why) -> Walk {
    if w.first || w.newly_protected || w.due || w.gone {
        Walk::All
    } else if w.known.is_empty() {
        Walk::Nothing
    } else {
        Walk::Among(w.known.into_iter().collect())
    }
}

/// Looks for shared-writable mappings of every protected disk (every
/// path of it, the devices stacked on it too) by any process but this
/// one, and sends what it found to the World (the apply side logs and
/// records each that appears or goes).
pub fn check(d: &Daemon) {
    // one snapshot of what was applied for the whole check
    let w = d.applied().world.clone();
    let disks: Vec<(String, Vec<KernelDev>)> = w
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
    let label_of: BTreeMap<KernelDev, &str> = disks
        .iter()
        .flat_map(|(l, devs)| devs.iter().map(move |d| (*d, l.as_str())))
        .collect();
    let all: Vec<KernelDev> = disks.iter().flat_map(|(_, d)| d.iter().copied()).collect();
    let first = !d
        .exposed_checks
        .once
        .swap(true, std::sync::atomic::Ordering::SeqCst);
    let proc = &d.site.paths.proc;
    let known: BTreeSet<u32> = w
        .exposed
        .values()
        .chain(w.writers.values())
        .flatten()
        .map(|o| o.pid)
        .collect();
    let mut walked = d
        .exposed_checks
        .walked_all
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let plan = walk(Why {
        first,
        newly_protected: disks.iter().any(|(l, _)| !w.writers.contains_key(l)),
        due: walked.is_none_or(|t| t.elapsed() >= WALK_ALL_EVERY),
        gone: known.iter().any(|p| !proc.join(p.to_string()).is_dir()),
        known,
    });
    // both kinds in one pass (none when nothing is protected)
    let held = match plan {
        Walk::All => {
            *walked = Some(std::time::Instant::now());
            holders(proc, &all, std::process::id())
        }
        Walk::Among(pids) => holders_among(proc, &all, &pids),
        Walk::Nothing => Default::default(),
    };
    drop(walked);
    let mut now: Exposed = BTreeMap::new();
    for o in held.mappings {
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
    let before = w.writers.clone();
    let mut writers: Exposed = disks.iter().map(|(l, _)| (l.clone(), Vec::new())).collect();
    // the daemon's first check over a filter it re-adopted: the disks
    // were protected all along (the pins kept them), so what is open now
    // was judged at its open (an ASM instance's descriptors are not
    // "since before protection")
    let readopted_first = first && d.filter.status().adopted;
    let fds = if readopted_first {
        Vec::new()
    } else {
        held.descriptors
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
    // loop devices over a protected disk: named when there at the
    // disk's first check after it became protected (set up before), kept
    // while they stay bound to the same file. Read from sysfs here, not
    // the model's holders: a loop set up just before protection may not
    // have reached the model yet.
    let was = w.loops.clone();
    let mut loops: Loops = disks.iter().map(|(l, _)| (l.clone(), Vec::new())).collect();
    let found = if disks.is_empty() || readopted_first {
        Vec::new()
    } else {
        loops_over_disks(&d.site.paths.sys, &disks)
    };
    for lo in found {
        let known = match was.get(&lo.label) {
            None => true,
            Some(v) => v.contains(&lo),
        };
        if known {
            loops.entry(lo.label.clone()).or_default().push(lo);
        }
    }
    // one input for the findings: one apply per check
    d.submit(Input::Found {
        exposed: now,
        writers,
        loops,
    });
}

/// Every loop device whose backing file is one of a disk's devices, or a
/// loop device over one, with the disk's label (one pass over sysfs:
/// `asmguard_devices::sysfs::loop_devices`).
fn loops_over_disks(sys: &Path, disks: &[(String, Vec<KernelDev>)]) -> Vec<LoopBefore> {
    let all = asmguard_devices::sysfs::loop_devices(sys);
    let mut out = Vec::new();
    for (label, devs) in disks {
        let mut devs = devs.clone();
        // a loop over a loop over the disk: until nothing more joins
        loop {
            let more: Vec<KernelDev> = all
                .iter()
                .filter(|l| {
                    l.backing_dev.is_some_and(|u| devs.contains(&u)) && !devs.contains(&l.dev)
                })
                .map(|l| l.dev)
                .collect();
            if more.is_empty() {
                break;
            }
            devs.extend(more);
        }
        out.extend(
            all.iter()
                .filter(|l| l.backing_dev.is_some_and(|u| devs.contains(&u)))
                .map(|l| LoopBefore {
                    label: label.clone(),
                    name: l.name.clone(),
                    device: l.dev,
                    backing: l.backing.clone(),
                    read_only: l.read_only,
                }),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every process is walked when something new may predate protection
    /// (the daemon's or a disk's first check, a named process gone, every
    /// 30 s); else only the named processes, or none.
    #[test]
    fn a_check_walks_every_process_only_when_something_may_be_new() {
        let why = |first, newly_protected, due, gone, known: &[u32]| Why {
            first,
            newly_protected,
            due,
            gone,
            known: known.iter().copied().collect(),
        };
        assert_eq!(walk(why(true, false, false, false, &[])), Walk::All);
        assert_eq!(walk(why(false, true, false, false, &[])), Walk::All);
        assert_eq!(walk(why(false, false, true, false, &[])), Walk::All);
        assert_eq!(walk(why(false, false, false, true, &[7])), Walk::All);
        assert_eq!(walk(why(false, false, false, false, &[])), Walk::Nothing);
        assert_eq!(
            walk(why(false, false, false, false, &[9, 7])),
            Walk::Among(vec![7, 9])
        );
    }

    /// loop4 over the disk loop2 by path, loop5 (read-only) over loop4,
    /// loop6 over a file, loop7 not bound: the first two are over the disk.
    #[test]
    fn loops_over_a_disk_and_over_its_loops() {
        let sys = tempfile::tempdir().unwrap();
        let block = sys.path().join("class/block");
        for (n, dev, backing, ro) in [
            ("loop2", "7:2", Some("/var/tmp/disk.img"), "0"),
            ("loop4", "7:4", Some("/dev/loop2"), "0"),
            ("loop5", "7:5", Some("/dev/loop4"), "1"),
            ("loop6", "7:6", Some("/var/tmp/other.img"), "0"),
            ("loop7", "7:7", None, "0"),
        ] {
            let d = block.join(n);
            std::fs::create_dir_all(d.join("loop")).unwrap();
            std::fs::write(d.join("dev"), format!("{dev}\n")).unwrap();
            std::fs::write(d.join("ro"), format!("{ro}\n")).unwrap();
            if let Some(b) = backing {
                std::fs::write(d.join("loop/backing_file"), format!("{b}\n")).unwrap();
            }
        }
        let disk = vec![("DATA1".to_string(), vec![KernelDev::new(7, 2).unwrap()])];
        let found = loops_over_disks(sys.path(), &disk);
        let named: Vec<(&str, &str, &str, bool)> = found
            .iter()
            .map(|o| {
                (
                    o.label.as_str(),
                    o.name.as_str(),
                    o.backing.as_str(),
                    o.read_only,
                )
            })
            .collect();
        assert_eq!(
            named,
            [
                ("DATA1", "loop4", "/dev/loop2", false),
                ("DATA1", "loop5", "/dev/loop4", true)
            ]
        );
        // another disk: none of them
        let other = vec![("DATA2".to_string(), vec![KernelDev::new(8, 16).unwrap()])];
        assert!(loops_over_disks(sys.path(), &other).is_empty());
    }
}
