//! Refuse while the disk group may be mounted.
//!
//! 1. This host: any process (other than the caller) with a file descriptor on any
//!    path of the disk (any of its dev_t) opened for writing (`/proc/PID/fdinfo/N`
//!    `flags:` with O_WRONLY or O_RDWR), or a shared writable mapping of it
//!    (`/proc/PID/maps`). ASM opens its disks read-write while the disk group is
//!    mounted.
//! 2. Other hosts (RAC): the ASM heartbeat block (the last block of AU 1) or the
//!    disk header's mount stamp (`mntstmp`) changes during a watch window. ASM
//!    rewrites the heartbeat every few seconds while any instance has the disk
//!    group mounted. Both are read bypassing the page cache (`O_DIRECT`).

use asmguard_devices::KernelDev;
use serde::Serialize;
use std::collections::HashSet;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// A process holding a path of the disk open for writing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Opener {
    pub pid: u32,
    pub comm: String,
    pub fd: u32,
    pub path: String,
    /// `major:minor`.
    pub device: String,
}

impl std::fmt::Display for Opener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "pid {} ({}) fd {} on {} ({})",
            self.pid, self.comm, self.fd, self.path, self.device
        )
    }
}

fn fd_flags(proc: &Path, pid: &str, fd: &str) -> Option<u32> {
    let s = std::fs::read_to_string(proc.join(pid).join("fdinfo").join(fd)).ok()?;
    let l = s.lines().find(|l| l.starts_with("flags:"))?;
    u32::from_str_radix(l["flags:".len()..].trim(), 8).ok()
}

/// Every process in `proc` but `exclude_pid`: (pid, its name, its directory).
fn processes(proc: &Path, exclude_pid: u32) -> Vec<(u32, String, std::path::PathBuf)> {
    let Ok(rd) = std::fs::read_dir(proc) else {
        return Vec::new();
    };
    rd.filter_map(|e| e.ok())
        .filter_map(|e| {
            let pid = e.file_name().to_string_lossy().into_owned();
            let p = pid.parse::<u32>().ok().filter(|p| *p != exclude_pid)?;
            Some((p, pid, e.path()))
        })
        .collect()
}

/// The block device `path` leads to, if it is one.
fn block_dev(path: &Path) -> Option<KernelDev> {
    let m = std::fs::metadata(path).ok()?;
    if !m.file_type().is_block_device() {
        return None;
    }
    let r = m.rdev();
    KernelDev::from_dev_t(r).ok()
}

/// A process's `comm` (empty when it is gone).
fn comm(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("comm"))
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Every process but `exclude_pid` with a write-mode fd on one of `devs`
/// (block devices) or a shared writable mapping of one. `proc` is `/proc`.
pub fn writers(proc: &Path, devs: &[KernelDev], exclude_pid: u32) -> Vec<Opener> {
    let procs = processes(proc, exclude_pid);
    let mut out = write_fds(proc, &procs, devs);
    out.extend(mappings(&procs, devs));
    out.sort_by_key(|o| (o.pid, o.fd));
    out
}

/// Every process but `exclude_pid` with a write-mode fd on one of `devs`
/// (block devices), mappings aside: each of its writes is still judged
/// (`file_permission`), whenever the fd was opened.
pub fn write_descriptors(proc: &Path, devs: &[KernelDev], exclude_pid: u32) -> Vec<Opener> {
    let mut out = write_fds(proc, &processes(proc, exclude_pid), devs);
    out.sort_by_key(|o| (o.pid, o.fd));
    out
}

/// Every process but `exclude_pid` holding a shared writable mapping of one
/// of `devs` (one entry a process, `fd` 0). The kernel judges a mapping only
/// when it is made: one made before the disk was protected keeps writing
/// through the page cache whatever the filter says afterwards.
pub fn shared_writable_mappings(proc: &Path, devs: &[KernelDev], exclude_pid: u32) -> Vec<Opener> {
    let mut out = mappings(&processes(proc, exclude_pid), devs);
    out.sort_by_key(|o| o.pid);
    out
}

type Procs = [(u32, String, std::path::PathBuf)];

/// The write-mode fds of `procs` on one of `devs`.
fn write_fds(proc: &Path, procs: &Procs, devs: &[KernelDev]) -> Vec<Opener> {
    let want: HashSet<KernelDev> = devs.iter().copied().collect();
    let mut out = Vec::new();
    for (p, pid, dir) in procs {
        let Ok(fds) = std::fs::read_dir(dir.join("fd")) else {
            continue;
        };
        for fd in fds.filter_map(|x| x.ok()) {
            let Some(d) = block_dev(&fd.path()).filter(|d| want.contains(d)) else {
                continue;
            };
            let fdn = fd.file_name().to_string_lossy().into_owned();
            let Some(flags) = fd_flags(proc, pid, &fdn) else {
                continue;
            };
            if flags & libc::O_ACCMODE as u32 == libc::O_RDONLY as u32 {
                continue;
            }
            out.push(Opener {
                pid: *p,
                comm: comm(dir),
                fd: fdn.parse().unwrap_or(0),
                path: std::fs::read_link(fd.path())
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
                device: d.to_string(),
            });
        }
    }
    out
}

/// The shared writable mappings of `procs` of one of `devs` (`rw-s` in
/// /proc/PID/maps). The dev field there is the device node's filesystem
/// (devtmpfs), not the disk: the mapped file is looked up through
/// map_files (root only), in this mount namespace.
fn mappings(procs: &Procs, devs: &[KernelDev]) -> Vec<Opener> {
    let want: HashSet<KernelDev> = devs.iter().copied().collect();
    let mut out = Vec::new();
    for (p, _, dir) in procs {
        let Ok(maps) = std::fs::read_to_string(dir.join("maps")) else {
            continue;
        };
        // one entry per (process, device): a process may map several disks
        let mut seen = HashSet::new();
        for l in maps.lines() {
            let mut f = l.split_whitespace();
            let (Some(range), Some(perms)) = (f.next(), f.next()) else {
                continue;
            };
            let pb = perms.as_bytes();
            if pb.len() < 4 || pb[1] != b'w' || pb[3] != b's' {
                continue;
            }
            let path = dir.join("map_files").join(range);
            if let Some(d) = block_dev(&path).filter(|d| want.contains(d) && seen.insert(*d)) {
                out.push(Opener {
                    pid: *p,
                    comm: comm(dir),
                    fd: 0,
                    path: format!("shared writable mapping {range}"),
                    device: d.to_string(),
                });
            }
        }
    }
    out
}

/// What the watch compares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamps {
    /// kfdhdb.mntstmp (hi, lo) from block 0 (one per disk watched together).
    pub mntstmp: Vec<(u32, u32)>,
    /// The heartbeat block's bytes (concatenated when several disks are watched).
    pub heartbeat: Vec<u8>,
}

/// Why the watch refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum WatchResult {
    Quiet,
    HeartbeatChanged,
    MountStampChanged,
    Cancelled,
}

/// Read the stamps twice, `window` apart (checking every 250 ms so a change is
/// seen early). `read` returns the stamps from the device (uncached).
pub fn watch(
    read: &mut dyn FnMut() -> Result<Stamps, String>,
    window: Duration,
    cancel: &AtomicBool,
) -> Result<WatchResult, String> {
    let first = read()?;
    let t0 = Instant::now();
    loop {
        let left = window.saturating_sub(t0.elapsed());
        std::thread::sleep(left.min(Duration::from_millis(250)));
        if cancel.load(Ordering::SeqCst) {
            return Ok(WatchResult::Cancelled);
        }
        let now = read()?;
        if now.mntstmp != first.mntstmp {
            return Ok(WatchResult::MountStampChanged);
        }
        if now.heartbeat != first.heartbeat {
            return Ok(WatchResult::HeartbeatChanged);
        }
        if t0.elapsed() >= window {
            return Ok(WatchResult::Quiet);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::OpenOptions;

    #[test]
    fn watch_sees_changes() {
        let c = AtomicBool::new(false);
        let mut n = 0u32;
        let mut quiet = || -> Result<Stamps, String> {
            Ok(Stamps {
                mntstmp: vec![(1, 2)],
                heartbeat: vec![0; 8],
            })
        };
        assert_eq!(
            watch(&mut quiet, Duration::from_millis(300), &c).unwrap(),
            WatchResult::Quiet
        );
        let mut hb = || -> Result<Stamps, String> {
            n += 1;
            Ok(Stamps {
                mntstmp: vec![(1, 2)],
                heartbeat: vec![n as u8; 8],
            })
        };
        assert_eq!(
            watch(&mut hb, Duration::from_millis(300), &c).unwrap(),
            WatchResult::HeartbeatChanged
        );
        let mut m = 0u32;
        let mut ms = || -> Result<Stamps, String> {
            m += 1;
            Ok(Stamps {
                mntstmp: vec![(1, m)],
                heartbeat: vec![0; 8],
            })
        };
        assert_eq!(
            watch(&mut ms, Duration::from_millis(300), &c).unwrap(),
            WatchResult::MountStampChanged
        );
    }

    /// A fake /proc: pid 4242 maps a block device shared-writable, pid 4343
    /// privately and read-only shared; pid 4444 maps another file.
    #[test]
    fn shared_writable_mappings_of_the_disk_only() {
        let Some(bdev) = ["/dev/loop0", "/dev/loop1", "/dev/sda", "/dev/vda"]
            .iter()
            .map(Path::new)
            .find(|p| block_dev(p).is_some())
        else {
            return; // no block device node here to point at
        };
        let d = block_dev(bdev).unwrap();
        let t = tempfile::tempdir().unwrap();
        let fake = |pid: &str, comm: &str, maps: &[(&str, &str, &Path)]| {
            let dir = t.path().join(pid);
            std::fs::create_dir_all(dir.join("map_files")).unwrap();
            std::fs::write(dir.join("comm"), format!("{comm}\n")).unwrap();
            let mut text = String::new();
            for (range, perms, target) in maps {
                text.push_str(&format!(
                    "{range} {perms} 00000000 00:05 123 {}\n",
                    target.display()
                ));
                std::os::unix::fs::symlink(target, dir.join("map_files").join(range)).unwrap();
            }
            std::fs::write(dir.join("maps"), text).unwrap();
        };
        fake(
            "4242",
            "dd",
            &[
                ("1000-2000", "r--p", Path::new("/etc/hostname")),
                ("7f00-7f10", "rw-s", bdev),
            ],
        );
        fake(
            "4343",
            "reader",
            &[("7f00-7f10", "rw-p", bdev), ("8f00-8f10", "r--s", bdev)],
        );
        fake(
            "4444",
            "other",
            &[("7f00-7f10", "rw-s", Path::new("/etc/hostname"))],
        );
        let got = shared_writable_mappings(t.path(), &[d], 0);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!((got[0].pid, got[0].comm.as_str()), (4242, "dd"));
        assert_eq!(got[0].device, d.to_string());
        assert!(got[0].path.contains("7f00-7f10"));
        // the excluded pid, and another device, find nothing
        assert!(shared_writable_mappings(t.path(), &[d], 4242).is_empty());
        let other = KernelDev::new(7, 4095).unwrap();
        assert!(shared_writable_mappings(t.path(), &[other], 0).is_empty());
        // writers() reports the mapping too (no fd directory: no fds)
        assert_eq!(writers(t.path(), &[d], 0), got);
    }

    #[test]
    fn writers_finds_write_fds_only() {
        // /dev/null is a char device: never a match. Use a fake /proc with a
        // symlink to a real block device if there is one readable; otherwise the
        // flags parser alone.
        let t = tempfile::tempdir().unwrap();
        let me = std::process::id();
        let k = |ma, mi| KernelDev::new(ma, mi).unwrap();
        assert!(writers(t.path(), &[k(7, 0)], me).is_empty());
        // The real /proc: this test process opens nothing on loop 7:4095.
        assert!(writers(Path::new("/proc"), &[k(7, 4095)], 0).is_empty());
        let _f = OpenOptions::new().write(true).open("/dev/null").unwrap();
        let (null, _) = KernelDev::of_device(Path::new("/dev/null")).unwrap();
        // A char device is not a block device: not reported.
        assert!(writers(Path::new("/proc"), &[null], 0).is_empty());
    }
}
