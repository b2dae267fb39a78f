//! Who holds a disk for writing on this host: processes with a descriptor
//! open for writing on one of its devices (`/proc/PID/fd`, the flags in
//! `/proc/PID/fdinfo/N`), and processes with a shared writable mapping of
//! one (`/proc/PID/maps`, the mapped file through `map_files`). One walk of
//! `/proc` finds both ([`holders`]).
//!
//! Read by the labelling check (a disk held for writing is refused), the
//! reclaim's own check before it discards, and the daemon's periodic check of
//! protected disks (a mapping made before protection keeps writing: the disk
//! is "exposed"; a descriptor opened before it is named).

use crate::KernelDev;
use serde::Serialize;
use std::collections::HashSet;
use std::path::Path;

/// A process holding a path of the disk open for writing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Opener {
    pub pid: u32,
    pub comm: String,
    pub fd: u32,
    pub path: String,
    /// The device it holds (`major:minor`).
    pub device: KernelDev,
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
    // the attributes the kernel has cached (AT_STATX_DONT_SYNC): a descriptor
    // of a file on NFS is not asked of its server (a server that is down
    // would hang the check); a device node's type and number are never stale
    let flags = rustix::fs::AtFlags::STATX_DONT_SYNC;
    let st = rustix::fs::statx(rustix::fs::CWD, path, flags, rustix::fs::StatxFlags::TYPE).ok()?;
    if u32::from(st.stx_mode) & libc::S_IFMT != libc::S_IFBLK {
        return None;
    }
    KernelDev::new(st.stx_rdev_major, st.stx_rdev_minor).ok()
}

/// A process's `comm` (empty when it is gone).
fn comm(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("comm"))
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// What one walk of `/proc` found holding some of the devices for writing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Holders {
    /// Descriptors open for writing (each of their writes is still judged by
    /// the filter, whenever the fd was opened), by pid and fd.
    pub descriptors: Vec<Opener>,
    /// Shared writable mappings (one entry a process and device, `fd` 0).
    /// The kernel judges a mapping only when it is made: one made before the
    /// disk was protected keeps writing through the page cache whatever the
    /// filter says afterwards.
    pub mappings: Vec<Opener>,
}

/// Every process but `exclude_pid` with a write-mode fd on one of `devs`
/// (block devices) or a shared writable mapping of one, in one walk of
/// `proc` (`/proc`). The walk stats every descriptor of every process: on a
/// host with 600 processes of 150 descriptors each it took about 600 ms
/// (measured here); [`holders_among`] looks at named processes only.
pub fn holders(proc: &Path, devs: &[KernelDev], exclude_pid: u32) -> Holders {
    if devs.is_empty() {
        return Holders::default(); // nothing to look for: no walk
    }
    holders_in(proc, &processes(proc, exclude_pid), devs)
}

/// [`holders`] among the processes `pids` only (those still there).
pub fn holders_among(proc: &Path, devs: &[KernelDev], pids: &[u32]) -> Holders {
    if devs.is_empty() || pids.is_empty() {
        return Holders::default();
    }
    let procs: Vec<_> = pids
        .iter()
        .map(|p| (*p, p.to_string(), proc.join(p.to_string())))
        .filter(|(_, _, dir)| dir.is_dir())
        .collect();
    holders_in(proc, &procs, devs)
}

fn holders_in(proc: &Path, procs: &Procs, devs: &[KernelDev]) -> Holders {
    let mut descriptors = write_fds(proc, procs, devs);
    descriptors.sort_by_key(|o| (o.pid, o.fd));
    let mut mappings = mappings(procs, devs);
    mappings.sort_by_key(|o| o.pid);
    Holders {
        descriptors,
        mappings,
    }
}

/// [`holders`], both kinds in one list by pid and fd: what the labelling
/// check and the reclaim refuse on.
pub fn writers(proc: &Path, devs: &[KernelDev], exclude_pid: u32) -> Vec<Opener> {
    let h = holders(proc, devs, exclude_pid);
    let mut out = h.descriptors;
    out.extend(h.mappings);
    out.sort_by_key(|o| (o.pid, o.fd));
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
                device: d,
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
                    device: d,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::OpenOptions;

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
        let got = holders(t.path(), &[d], 0).mappings;
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!((got[0].pid, got[0].comm.as_str()), (4242, "dd"));
        assert_eq!(got[0].device, d);
        assert!(got[0].path.contains("7f00-7f10"));
        // the excluded pid, and another device, find nothing
        assert!(holders(t.path(), &[d], 4242).mappings.is_empty());
        let other = KernelDev::new(7, 4095).unwrap();
        assert!(holders(t.path(), &[other], 0).mappings.is_empty());
        // writers() reports the mapping too (no fd directory: no fds)
        assert_eq!(writers(t.path(), &[d], 0), got);
        // among named processes: the same for a named one, nothing for the
        // others, and a pid that is gone is no error
        assert_eq!(holders_among(t.path(), &[d], &[4242, 9999]).mappings, got);
        assert!(holders_among(t.path(), &[d], &[4343, 4444])
            .mappings
            .is_empty());
        assert!(holders_among(t.path(), &[d], &[]).mappings.is_empty());
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
