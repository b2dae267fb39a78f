//! The plumbing around the filter's kernel objects: the pin directory
//! (bpffs, mounted when missing), securityfs (the active LSM list), the
//! cgroup-v2 root for the fallback, the kernel BTF test for optional hooks,
//! and removing pins.
//!
//! Not here: loading or attaching ([`super::loader`]).

use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use libbpf_rs::{Link, MapCore, MapHandle};

use super::programs::PROGRAMS;
use super::types::Backend;
use crate::Error;
use asmguard_filter_types::LsmHint;

pub(crate) fn io_err(what: &'static str) -> impl FnOnce(std::io::Error) -> Error {
    move |e| Error::Io { what, source: e }
}

/// Whether `name` (NUL-terminated) is in the kernel BTF's strings (a cheap
/// test for a `bpf_lsm_<hook>` function).
pub fn kernel_btf_has(btf: &[u8], name: &str) -> bool {
    let mut needle = Vec::with_capacity(name.len() + 2);
    needle.push(0);
    needle.extend_from_slice(name.as_bytes());
    needle.push(0);
    // memmem, not a window compare at every offset: the BTF is 5-6 MiB and
    // the loader asks once per optional hook (a window compare took most
    // of a daemon start under emulation)
    memchr::memmem::find(btf, &needle).is_some()
}

/// The active LSM list (`/sys/kernel/security/lsm` in `paths`' sysfs),
/// mounting securityfs if needed.
pub fn active_lsms(paths: &asmguard_paths::Paths) -> Result<String, String> {
    let securityfs = paths.securityfs();
    let path = securityfs.join("lsm");
    if !path.exists() {
        mount_fs("securityfs", &securityfs);
    }
    std::fs::read_to_string(&path)
        .map(|s| s.trim().to_string())
        .map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// How to turn the BPF LSM on, when the kernel has it built in but `bpf` is not
/// in its active LSM list; `None` when it is active or not built in. Built in:
/// `CONFIG_BPF_LSM=y` in `/boot/config-$(uname -r)`, or its hook functions
/// (`bpf_lsm_file_open`) in the kernel's BTF. All read below `paths`.
pub fn bpf_lsm_hint(paths: &asmguard_paths::Paths) -> Option<LsmHint> {
    let lsms = active_lsms(paths).ok()?;
    bpf_lsm_hint_for(&lsms, bpf_lsm_built_in(paths))
}

fn bpf_lsm_built_in(paths: &asmguard_paths::Paths) -> bool {
    let release = std::fs::read_to_string(paths.osrelease()).unwrap_or_default();
    let config = std::fs::read_to_string(paths.boot.join(format!("config-{}", release.trim())))
        .unwrap_or_default();
    if config.lines().any(|l| l.trim() == "CONFIG_BPF_LSM=y") {
        return true;
    }
    let btf = std::fs::read(paths.vmlinux_btf()).unwrap_or_default();
    kernel_btf_has(&btf, "bpf_lsm_file_open")
}

/// The hint for an active list `lsms` (as in `/sys/kernel/security/lsm`).
pub fn bpf_lsm_hint_for(lsms: &str, built_in: bool) -> Option<LsmHint> {
    let list: Vec<&str> = lsms.trim().split(',').filter(|l| !l.is_empty()).collect();
    if !built_in || list.contains(&"bpf") {
        return None;
    }
    // capability is always first and implicit: the lsm= list names the others.
    let mut want: Vec<&str> = list.into_iter().filter(|l| *l != "capability").collect();
    want.push("bpf");
    Some(LsmHint {
        lsm_param: format!("lsm={}", want.join(",")),
    })
}

/// `mount -t FSTYPE FSTYPE TARGET`, best effort.
fn mount_fs(fstype: &str, target: &Path) {
    let Ok(src) = std::ffi::CString::new(fstype) else {
        return;
    };
    let Ok(tgt) = std::ffi::CString::new(target.as_os_str().as_bytes()) else {
        return;
    };
    // SAFETY: mount(2) with valid NUL-terminated strings and a null data pointer.
    unsafe {
        libc::mount(
            src.as_ptr(),
            tgt.as_ptr(),
            src.as_ptr(),
            0,
            std::ptr::null(),
        );
    }
}

/// Makes sure a bpffs is mounted at /sys/fs/bpf (`paths`' bpffs) when the
/// pin directory is below it.
pub(crate) fn ensure_bpffs(paths: &asmguard_paths::Paths, pin_dir: &Path) {
    const BPF_FS_MAGIC: i64 = 0xcafe_4a11;
    let bpffs = paths.bpffs();
    if !pin_dir.starts_with(&bpffs) {
        return;
    }
    let Ok(path) = std::ffi::CString::new(bpffs.as_os_str().as_bytes()) else {
        return;
    };
    let mut st = std::mem::MaybeUninit::<libc::statfs>::zeroed();
    // SAFETY: statfs(2) writes into a buffer of the right type and size.
    let rc = unsafe { libc::statfs(path.as_ptr(), st.as_mut_ptr()) };
    // SAFETY: zero-initialised and, when rc == 0, filled by the kernel.
    #[allow(clippy::unnecessary_cast)] // f_type is not i64 on every target
    let magic = unsafe { st.assume_init() }.f_type as i64;
    if rc != 0 || magic != BPF_FS_MAGIC {
        mount_fs("bpf", &bpffs);
    }
}

/// The first cgroup-v2 mount point in the `mounts` of the procfs `proc` (the
/// caller's `Paths::proc`).
pub fn cgroup2_root(proc: &Path) -> Result<PathBuf, Error> {
    let mounts =
        std::fs::read_to_string(proc.join("mounts")).map_err(io_err("reading /proc/mounts"))?;
    mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let _src = f.next()?;
            let dir = f.next()?;
            let ty = f.next()?;
            (ty == "cgroup2").then(|| PathBuf::from(dir.replace("\\040", " ")))
        })
        .min_by_key(|p| p.components().count())
        .ok_or(Error::NoCgroup2)
}

/// The backend whose links are pinned in `pin_dir`, if any.
pub fn pinned_backend(pin_dir: &Path) -> Option<Backend> {
    let links = std::fs::read_dir(pin_dir.join("links")).ok()?;
    let names: Vec<String> = links
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    // The companions (ag_kernel_open) and the shared tracer (ag_guardian_exit)
    // say nothing: both security backends have them.
    let backend_of = |b: Backend| {
        PROGRAMS
            .iter()
            .any(|p| !p.shared() && p.loaded_by(b) && names.iter().any(|n| n == p.name))
    };
    // The worst pinned one first: an upgrade that stopped half-way (both
    // pinned) is finished by the next start.
    if backend_of(Backend::CgroupDevice) {
        Some(Backend::CgroupDevice)
    } else if backend_of(Backend::FmodRet) {
        Some(Backend::FmodRet)
    } else if backend_of(Backend::Lsm) || !names.is_empty() {
        // the LSM backend's, or links alone that no backend's programs name
        // (a companion, programs an earlier version had)
        Some(Backend::Lsm)
    } else {
        None
    }
}

/// Removes every pin (links first: detaching the programs) under `pin_dir`.
/// The filter is off once this returns. Not an error if nothing was pinned.
/// `paths`: the caller's roots (the record of the links below its `/run`,
/// the links' ids in its procfs).
pub fn remove_pins(paths: &asmguard_paths::Paths, pin_dir: &Path) -> Result<(), Error> {
    // The managed set first: programs that stay attached a moment longer (or,
    // on a kernel that cannot detach them, until reboot) then find no device.
    for name in [crate::guard::maps::BLK, crate::guard::maps::CHR] {
        if let Ok(map) = MapHandle::from_pinned_path(pin_dir.join("maps").join(name)) {
            let keys: Vec<Vec<u8>> = map.keys().collect();
            for k in keys {
                delete_quiet(&map, &k)?;
            }
        }
    }
    // Hold every link while the pins go: dropping a pin defers the release to
    // a kernel work item, closing the last fd releases synchronously. So the
    // programs are detached when this returns, not a moment later.
    let mut held = Vec::new();
    for sub in ["links", "maps"] {
        let dir = pin_dir.join(sub);
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io_err("reading the pin directory")(e)),
        };
        for e in entries.flatten() {
            let p = e.path();
            if sub == "links" {
                if let Ok(link) = Link::open(&p) {
                    held.push(link);
                }
            }
            std::fs::remove_file(&p).map_err(io_err("removing a pin"))?;
        }
        let _ = std::fs::remove_dir(&dir);
    }
    let _ = std::fs::remove_dir(pin_dir);
    // (the record of the links: nothing pinned to adopt any more)
    let _ = std::fs::remove_file(super::adopt::record_path(paths, pin_dir));
    let ids: Vec<u32> = held
        .iter()
        .filter_map(|l| link_id(&paths.proc, l))
        .collect();
    for link in held {
        // Cgroup links detach at once; for LSM (tracing) links the kernel has
        // no detach operation and the close below does it.
        let _ = link.detach();
        drop(link);
    }
    wait_links_gone(&ids, Duration::from_secs(5))
}

/// The kernel's id of a link, from its fd's `/proc/self/fdinfo` (`link_id:`)
/// in the procfs `proc`.
fn link_id(proc: &Path, link: &Link) -> Option<u32> {
    super::pinwatch::fd_id(proc, link.as_fd().as_raw_fd(), super::pinwatch::Kind::Link)
}

/// Whether a link with this id still exists.
fn link_exists(id: u32) -> bool {
    // SAFETY: bpf_link_get_fd_by_id takes a plain id and returns a new fd we own
    // (closed right away) or a negative error.
    let fd = unsafe { libbpf_rs::libbpf_sys::bpf_link_get_fd_by_id(id) };
    if fd >= 0 {
        // SAFETY: fd was just returned to us and is closed once.
        unsafe { libc::close(fd) };
        true
    } else {
        // ENOENT: gone. Anything else (EPERM ...): cannot tell, assume gone.
        false
    }
}

/// Waits until none of the links `ids` exists any more. On some kernels (5.10)
/// the last reference to an unpinned link is the bpffs inode's, dropped after
/// an RCU grace period: the programs stay attached for a moment after the
/// pins are gone. `filter disable` and uninstall return once they are detached.
fn wait_links_gone(ids: &[u32], timeout: Duration) -> Result<(), Error> {
    if ids.is_empty() {
        return Ok(());
    }
    let t0 = Instant::now();
    loop {
        let left: Vec<u32> = ids.iter().copied().filter(|id| link_exists(*id)).collect();
        if left.is_empty() {
            return Ok(());
        }
        if t0.elapsed() > timeout {
            return Err(Error::Detach(format!(
                "the kernel keeps links {left:?} attached {} ms after their pins were \
                 removed; they are inert (the managed set is empty) and go at reboot",
                timeout.as_millis()
            )));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Removes the link pins of `backend`'s own programs (not the companions it
/// shares with another backend), keeping the maps and any other backend's
/// links: after an attempt that failed half-way, and after an upgrade has
/// attached the better backend beside the old one.
pub(crate) fn remove_links_of(pin_dir: &Path, backend: Backend) -> Result<(), Error> {
    let dir = pin_dir.join("links");
    for p in PROGRAMS
        .iter()
        .filter(|p| !p.shared() && p.loaded_by(backend))
    {
        match std::fs::remove_file(dir.join(p.name)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(io_err("removing a link pin")(e))
            }
            _ => {}
        }
    }
    Ok(())
}

/// Deletes a map entry; an absent one is fine.
pub(crate) fn delete_quiet(map: &MapHandle, key: &[u8]) -> Result<(), Error> {
    match map.delete(key) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == libbpf_rs::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::bpf("deleting a map entry")(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cgroup2 mount and the active LSMs are read below the caller's
    /// roots, never the running system's.
    #[test]
    fn cgroup2_and_lsms_are_read_below_the_callers_roots() {
        let d = tempfile::tempdir().unwrap();
        let paths = asmguard_paths::Paths::under(d.path());
        assert!(cgroup2_root(&paths.proc).is_err(), "no mounts: no cgroup2");
        std::fs::create_dir_all(&paths.proc).unwrap();
        std::fs::write(
            paths.proc.join("mounts"),
            "cgroup2 /t/cg\\040x/y cgroup2 rw 0 0\ncgroup2 /t/cg\\040x cgroup2 rw 0 0\n",
        )
        .unwrap();
        assert_eq!(cgroup2_root(&paths.proc).unwrap(), Path::new("/t/cg x"));
        let sec = paths.securityfs();
        std::fs::create_dir_all(&sec).unwrap();
        std::fs::write(sec.join("lsm"), "capability,yama,bpf\n").unwrap();
        assert_eq!(active_lsms(&paths).unwrap(), "capability,yama,bpf");
        assert_eq!(bpf_lsm_hint(&paths), None, "bpf is active");
    }

    #[test]
    fn btf_string_search() {
        let btf = b"\0bpf_lsm_file_open\0bpf_lsm_file_ioctl\0";
        assert!(kernel_btf_has(btf, "bpf_lsm_file_ioctl"));
        assert!(!kernel_btf_has(btf, "bpf_lsm_file_ioctl_compat"));
        assert!(!kernel_btf_has(btf, "file_open"));
    }

    #[test]
    fn backend_of_the_pinned_links() {
        let dir = std::env::temp_dir().join(format!("asmguard-pins-{}", std::process::id()));
        let links = dir.join("links");
        std::fs::create_dir_all(&links).unwrap();
        assert_eq!(pinned_backend(&dir), None);
        // a companion alone says nothing of the backend beside it
        std::fs::write(links.join("ag_kernel_open"), "").unwrap();
        assert_eq!(pinned_backend(&dir), Some(Backend::Lsm));
        std::fs::write(links.join("ag_file_open"), "").unwrap();
        assert_eq!(pinned_backend(&dir), Some(Backend::Lsm));
        std::fs::remove_file(links.join("ag_file_open")).unwrap();
        std::fs::write(links.join("ag_fr_file_open"), "").unwrap();
        assert_eq!(pinned_backend(&dir), Some(Backend::FmodRet));
        // an upgrade that stopped half-way: the old one, to be replaced again
        std::fs::write(links.join("ag_cgroup_dev"), "").unwrap();
        assert_eq!(pinned_backend(&dir), Some(Backend::CgroupDevice));
        // removing the old backend's links keeps the new one's and the companion
        remove_links_of(&dir, Backend::CgroupDevice).unwrap();
        assert_eq!(pinned_backend(&dir), Some(Backend::FmodRet));
        assert!(links.join("ag_kernel_open").exists());
        remove_links_of(&dir, Backend::FmodRet).unwrap();
        assert!(!links.join("ag_fr_file_open").exists());
        assert!(links.join("ag_kernel_open").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bpf_lsm_hint_names_the_list_and_both_tools() {
        let h = bpf_lsm_hint_for("lockdown,capability,yama,apparmor", true).unwrap();
        assert_eq!(h.lsm_param, "lsm=lockdown,yama,apparmor,bpf");
        let h = h.to_string();
        assert!(h.contains("lsm=lockdown,yama,apparmor,bpf"), "{h}");
        assert!(h.contains("grubby --update-kernel=ALL --args=\"lsm=lockdown,yama,apparmor,bpf\""));
        assert!(h.contains("GRUB_CMDLINE_LINUX"));
        assert_eq!(bpf_lsm_hint_for("capability,yama,bpf", true), None);
        assert_eq!(bpf_lsm_hint_for("capability,yama", false), None);
    }
}
