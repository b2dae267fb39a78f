//! Opening a disk for writing on behalf of the daemon when the kernel's write
//! filter knows callers by their real uid and gid only.
//!
//! On kernels whose cgroup-device programs may not walk the task (5.10), the
//! fallback filter cannot see the executable that opens a disk, so the daemon's
//! own label writes and reclaim cannot be allow-listed by executable. There the
//! daemon opens from a short-lived thread whose *real* gid is an allow-listed
//! group, or, without one, whose *real* uid is an allow-listed user (the filter
//! checks only at open time; the fd is then used as usual).
//! Effective and filesystem ids do not change, so permission checks are the
//! same. Not for anything else: without [`set_writer_gid`], [`open`] is a
//! plain `OpenOptions::open`.

use std::fs::{File, OpenOptions};
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};

const NONE: u32 = u32::MAX;
static WRITER_GID: AtomicU32 = AtomicU32::new(NONE);
static WRITER_UID: AtomicU32 = AtomicU32::new(NONE);

/// Sets (or, with `None`, clears) the real gid write-opens are made with.
pub fn set_writer_gid(gid: Option<u32>) {
    WRITER_GID.store(gid.unwrap_or(NONE), Ordering::SeqCst);
}

/// Sets (or clears) the real uid write-opens are made with when no gid is set.
pub fn set_writer_uid(uid: Option<u32>) {
    WRITER_UID.store(uid.unwrap_or(NONE), Ordering::SeqCst);
}

/// The gid set by [`set_writer_gid`].
pub fn writer_gid() -> Option<u32> {
    match WRITER_GID.load(Ordering::SeqCst) {
        NONE => None,
        g => Some(g),
    }
}

/// `opts.open(path)`, from a thread whose real gid is the writer gid when one
/// is set.
pub fn open(opts: &OpenOptions, path: &Path) -> std::io::Result<File> {
    let opts = opts.clone();
    let path = path.to_path_buf();
    as_writer(move || opts.open(&path))
}

/// Runs `f` as a write-opener: on a thread whose real gid is the writer gid, or
/// right here when none is set.
fn as_writer<T: Send + 'static>(
    f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> std::io::Result<T> {
    let (call, id) = match (writer_gid(), WRITER_UID.load(Ordering::SeqCst)) {
        (Some(g), _) => (libc::SYS_setresgid, g),
        (None, NONE) => return f(),
        (None, u) => (libc::SYS_setresuid, u),
    };
    std::thread::spawn(move || {
        // SAFETY: the raw setresgid/setresuid system call changes the credentials
        // of this thread only (glibc's wrappers would change every thread's); -1
        // keeps the effective and saved ids. The thread ends right after `f`.
        let r = unsafe { libc::syscall(call, id, NONE, NONE) };
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
        f()
    })
    .join()
    .unwrap_or_else(|_| Err(std::io::Error::other("the writer thread panicked")))
}

#[cfg(test)]
mod tests {
    use super::*;

    // The writer gid is process-wide: the tests take turns.
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[test]
    fn without_a_writer_gid_it_is_a_plain_open() {
        let _t = TURN.lock().unwrap_or_else(|p| p.into_inner());
        set_writer_gid(None);
        let f = open(
            OpenOptions::new().read(true),
            Path::new("/proc/self/status"),
        );
        assert!(f.is_ok());
        let e = open(OpenOptions::new().read(true), Path::new("/nonexistent/x")).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    }

    #[test]
    fn the_open_runs_with_the_real_gid_and_leaves_the_caller_alone() {
        // changing a thread's real ids needs root: without it this fails
        // (unless ASMGUARD_HOST_TESTS=skip), never passes silently
        if !asmguard_testkit::require_root() {
            return;
        }
        let _t = TURN.lock().unwrap_or_else(|p| p.into_inner());
        let before = (nix::unistd::getgid(), nix::unistd::getegid());
        set_writer_gid(Some(54329));
        let seen = as_writer(|| Ok((nix::unistd::getgid(), nix::unistd::getegid())));
        let f = open(
            OpenOptions::new().read(true),
            Path::new("/proc/self/status"),
        );
        set_writer_gid(None);
        set_writer_uid(Some(54331));
        let uids = as_writer(|| Ok((nix::unistd::getuid(), nix::unistd::geteuid())));
        set_writer_uid(None);
        let (uid, euid) = uids.unwrap();
        assert_eq!(uid.as_raw(), 54331);
        assert!(euid.is_root(), "the effective uid must not change");
        let (gid, egid) = seen.unwrap();
        assert_eq!(gid.as_raw(), 54329);
        assert_eq!(egid, before.1, "the effective gid must not change");
        assert!(f.is_ok());
        assert_eq!((nix::unistd::getgid(), nix::unistd::getegid()), before);
    }
}
