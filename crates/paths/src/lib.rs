//! Where asmguard finds the system: the filesystem roots it reads and writes
//! (sysfs, `/dev`, `/run`, `/proc`, `/etc`, `/boot`) as one [`Paths`] value,
//! and the places under them that several crates share (the pin directory,
//! the stable links, the nodes made for containers).
//!
//! A crate of its own with this one job, because every other crate needs it
//! and none of them is the right home: `devices`, `containers`, `guard`,
//! `metrics`, `reclaim`, the daemon and `asmguardctl` all read the system's
//! roots, and a leaf with no dependencies keeps them from depending on one
//! another for a handful of paths. The defaults here are the only absolute
//! path literals in the Rust sources outside the configuration's defaults
//! and tests (`tests/workspace/tests/literals.rs` holds the sources to that; a literal that
//! is text, not a place on this host, says so with `// literal path: why`);
//! a test gives [`Paths::under`] a directory of its own instead.
//!
//! Each program builds its `Paths` once, where it starts (`main`), and
//! passes it down: the daemon holds one (`Daemon::paths`) and hands its
//! roots to the stable links, the containers' nodes and process lookups, the
//! device reads, the filter (`asmguard_guard::Options::new`), the views and
//! the writers checks. Library code never builds its own
//! (`tests/workspace/tests/literals.rs`).

use std::path::{Path, PathBuf};

/// The roots of the filesystems asmguard uses. `Paths::default()` is the
/// running system's; every other value comes from a test.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Paths {
    /// The root of the host's filesystem (`/`): what other tools keep in
    /// their own places (Oracle homes, oratab, olr.loc).
    pub root: PathBuf,
    /// sysfs (`/sys`): block devices, bpffs, securityfs, BTF.
    pub sys: PathBuf,
    /// The device nodes (`/dev`).
    pub dev: PathBuf,
    /// Runtime state (`/run`): udevd's control socket, asmguard's own
    /// directory (socket, lock, stable links' answers).
    pub run: PathBuf,
    /// procfs (`/proc`): processes, mounts, locks, the kernel's release.
    pub proc: PathBuf,
    /// Host configuration (`/etc`): subordinate ids, other tools' settings.
    pub etc: PathBuf,
    /// Kernel images and their build configuration (`/boot`).
    pub boot: PathBuf,
}

impl Default for Paths {
    fn default() -> Paths {
        Paths {
            root: PathBuf::from("/"),
            sys: PathBuf::from("/sys"),
            dev: PathBuf::from("/dev"),
            run: PathBuf::from("/run"),
            proc: PathBuf::from("/proc"),
            etc: PathBuf::from("/etc"),
            boot: PathBuf::from("/boot"),
        }
    }
}

/// The default socket (`[socket] path`).
pub const DEFAULT_SOCKET: &str = "/run/asmguard/asmguard.sock";

impl Paths {
    /// Every root as the same-named directory below `root` (`root/sys`,
    /// `root/dev`, ...): a test's own tree.
    pub fn under(root: &Path) -> Paths {
        Paths {
            root: root.to_path_buf(),
            sys: root.join("sys"),
            dev: root.join("dev"),
            run: root.join("run"),
            proc: root.join("proc"),
            etc: root.join("etc"),
            boot: root.join("boot"),
        }
    }

    /// `/proc/<pid>`.
    pub fn pid(&self, pid: u32) -> PathBuf {
        self.proc.join(pid.to_string())
    }

    /// `/proc/self`: this process.
    pub fn own(&self) -> PathBuf {
        self.proc.join("self")
    }

    /// The bpf filesystem (`/sys/fs/bpf`).
    pub fn bpffs(&self) -> PathBuf {
        self.sys.join("fs/bpf")
    }

    /// Where the filter pins its maps and links (`/sys/fs/bpf/asmguard`).
    pub fn pin_dir(&self) -> PathBuf {
        self.bpffs().join("asmguard")
    }

    /// securityfs (`/sys/kernel/security`).
    pub fn securityfs(&self) -> PathBuf {
        self.sys.join("kernel/security")
    }

    /// The kernel's own BTF (`/sys/kernel/btf/vmlinux`).
    pub fn vmlinux_btf(&self) -> PathBuf {
        self.sys.join("kernel/btf/vmlinux")
    }

    /// The block devices in sysfs (`/sys/class/block`).
    pub fn class_block(&self) -> PathBuf {
        self.sys.join("class/block")
    }

    /// The running kernel's release (`/proc/sys/kernel/osrelease`).
    pub fn osrelease(&self) -> PathBuf {
        self.proc.join("sys/kernel/osrelease")
    }

    /// asmguard's runtime directory (`/run/asmguard`): the default socket's
    /// directory, the pin-dir lock.
    pub fn run_dir(&self) -> PathBuf {
        self.run.join("asmguard")
    }

    /// The daemon's answer for each device that the udev rules import
    /// (`/run/asmguard/links/<kernel name>`). Fixed, not below a configured
    /// `runtime_dir`: the rules file names this directory.
    pub fn links_dir(&self) -> PathBuf {
        self.run_dir().join("links")
    }

    /// udevd's control socket (`/run/udev/control`): udevd runs while it exists.
    pub fn udevd_control(&self) -> PathBuf {
        self.run.join("udev/control")
    }

    /// The stable links of labelled disks (`/dev/asmguard/disks`).
    pub fn disks_dir(&self) -> PathBuf {
        self.dev.join("asmguard/disks")
    }

    /// The stable link of one labelled disk (`/dev/asmguard/disks/LABEL`).
    pub fn disk_link(&self, label: &str) -> PathBuf {
        self.disks_dir().join(label)
    }

    /// The nodes made for containers (`/dev/asmguard/containers`).
    pub fn containers_dir(&self) -> PathBuf {
        self.dev.join("asmguard/containers")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_tree_moves_every_root_and_the_places_under_them() {
        let p = Paths::under(Path::new("/t"));
        let d = Paths::default();
        for (mine, sys) in [
            (&p.sys, &d.sys),
            (&p.dev, &d.dev),
            (&p.run, &d.run),
            (&p.proc, &d.proc),
            (&p.etc, &d.etc),
            (&p.boot, &d.boot),
        ] {
            assert_eq!(*mine, Path::new("/t").join(sys.strip_prefix("/").unwrap()));
        }
        assert_eq!(p.pin_dir(), Path::new("/t/sys/fs/bpf/asmguard"));
        assert_eq!(p.links_dir(), Path::new("/t/run/asmguard/links"));
        assert_eq!(p.pid(42), Path::new("/t/proc/42"));
        assert_eq!(d.containers_dir(), Path::new("/dev/asmguard/containers"));
        assert_eq!(
            Path::new(DEFAULT_SOCKET).parent(),
            Some(d.run_dir().as_path())
        );
    }
}
