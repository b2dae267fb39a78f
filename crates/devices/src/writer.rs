//! Opening a disk for writing on behalf of the daemon when the kernel's write
//! filter knows callers by their real uid and gid only.
//!
//! On kernels whose cgroup-device programs may not walk the task (5.10), the
//! fallback filter cannot see the executable that opens a disk, so the daemon's
//! own label writes and reclaim cannot be allow-listed by executable. There the
//! daemon opens from a short-lived thread whose *real* gid is an allow-listed
//! group, or, without one, whose *real* uid is an allow-listed user (the filter
//! checks only at open time; the fd is then used as usual). Effective and
//! filesystem ids do not change, so permission checks are the same.
//!
//! A [`Writer`] is a value the daemon decides once (from the filter it loaded)
//! and hands to every write-open explicitly ([`WriteOpen`]); nothing here is
//! process-wide. [`Writer::default`] is a plain `OpenOptions::open`.

use std::fs::{File, OpenOptions};
use std::path::Path;

/// Whose real id a write-open is made with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Writer {
    id: Option<RealId>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RealId {
    Gid(u32),
    Uid(u32),
}

impl Writer {
    /// Opens with the real gid `gid`.
    pub fn with_gid(gid: u32) -> Writer {
        Writer {
            id: Some(RealId::Gid(gid)),
        }
    }

    /// Opens with the real uid `uid`.
    pub fn with_uid(uid: u32) -> Writer {
        Writer {
            id: Some(RealId::Uid(uid)),
        }
    }

    /// `opts.open(path)`, from a thread with this writer's real id when it
    /// has one.
    pub fn open(&self, opts: &OpenOptions, path: &Path) -> std::io::Result<File> {
        let opts = opts.clone();
        let path = path.to_path_buf();
        self.run(move || opts.open(&path))
    }

    /// Runs `f` on a thread whose real gid (or uid) is this writer's, or
    /// right here when it has none.
    fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
    ) -> std::io::Result<T> {
        let (call, id) = match self.id {
            None => return f(),
            Some(RealId::Gid(g)) => (libc::SYS_setresgid, g),
            Some(RealId::Uid(u)) => (libc::SYS_setresuid, u),
        };
        std::thread::spawn(move || {
            // The raw setresgid/setresuid system call changes the credentials
            // of this thread only (glibc's wrappers would change every
            // thread's); -1 keeps the effective and saved ids. The thread ends
            // right after `f`.
            // SAFETY: a system call with integer arguments only: no memory is shared.
            let r = unsafe { libc::syscall(call, id, u32::MAX, u32::MAX) };
            if r != 0 {
                return Err(std::io::Error::last_os_error());
            }
            f()
        })
        .join()
        .unwrap_or_else(|_| Err(std::io::Error::other("the writer thread panicked")))
    }
}

/// How a disk is opened for writing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteOpen {
    /// The caller holds the exclusive claim on the device (asmguardd on a
    /// managed disk): open it without `O_EXCL` (see `Device::open_write_as`).
    pub held: bool,
    /// Whose real id the open is made with.
    pub writer: Writer,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_an_id_it_is_a_plain_open() {
        let w = Writer::default();
        let f = w.open(
            OpenOptions::new().read(true),
            Path::new("/proc/self/status"),
        );
        assert!(f.is_ok());
        let e = w
            .open(OpenOptions::new().read(true), Path::new("/nonexistent/x"))
            .unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    }

    #[test]
    fn the_open_runs_with_the_real_id_and_leaves_the_caller_alone() {
        // changing a thread's real ids needs root: without it this fails
        // (unless ASMGUARD_HOST_TESTS=skip), never passes silently
        if !asmguard_testkit::require_root() {
            return;
        }
        let before = (nix::unistd::getgid(), nix::unistd::getegid());
        let g = Writer::with_gid(54329);
        let seen = g.run(|| Ok((nix::unistd::getgid(), nix::unistd::getegid())));
        let f = g.open(
            OpenOptions::new().read(true),
            Path::new("/proc/self/status"),
        );
        let uids =
            Writer::with_uid(54331).run(|| Ok((nix::unistd::getuid(), nix::unistd::geteuid())));
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
