//! One daemon per pin directory: the exclusive `flock` a daemon takes on
//! the lock file of the BPF pin directory it uses, before it claims, pins
//! or scans anything, and holds until it exits. A second daemon on the same
//! pins is refused, told which process holds them (`/proc/locks`).
//!
//! The lock file is not in the pin directory (bpffs holds no regular files,
//! and the directory comes and goes with the filter: `filter disable` and
//! uninstall remove it) but under a runtime directory (`/run/asmguard`,
//! which the unit's sandbox lets the daemon write), named after the pin
//! directory's path alone: every daemon on those pins takes the same lock
//! whatever its socket or runtime directory.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The lock of a pin directory, held while this value lives.
#[derive(Debug)]
pub struct PinLock {
    /// The locked file (`None`: no lock could be taken, see `warning`).
    _file: Option<File>,
    /// Why the directory is not locked after all (the lock file cannot be
    /// made or locked for another reason than another holder): worth a
    /// warning; the daemon goes on.
    pub warning: Option<String>,
}

/// The lock file of pin directory `dir` under `lock_dir`:
/// `<lock_dir>/pins-<path with / as ->.lock`.
pub fn lock_path(lock_dir: &Path, dir: &Path) -> PathBuf {
    let name: String = dir
        .to_string_lossy()
        .trim_matches('/')
        .chars()
        .map(|c| if c == '/' { '-' } else { c })
        .collect();
    lock_dir.join(format!("pins-{name}.lock"))
}

/// Takes the exclusive lock of pin directory `dir` (its file under
/// `lock_dir`, [`lock_path`]). `Err`: another process holds it; the message
/// names the directory and the holder's pid where `/proc/locks` shows it
/// (`proc`: the caller's `Paths::proc`), and says what to do.
pub fn lock(lock_dir: &Path, dir: &Path, proc: &Path) -> Result<PinLock, String> {
    let path = lock_path(lock_dir, dir);
    if let Some(parent) = path.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    let f = match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
    {
        Ok(f) => f,
        Err(e) => {
            return Ok(PinLock {
                _file: None,
                warning: Some(format!(
                    "{}: cannot lock the pin directory {}: {e}",
                    path.display(),
                    dir.display()
                )),
            })
        }
    };
    // SAFETY: `f` is an open descriptor owned by this function; flock takes
    // no pointer.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(PinLock {
            _file: Some(f),
            warning: None,
        });
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
        return Ok(PinLock {
            _file: Some(f),
            warning: Some(format!(
                "{}: cannot lock the pin directory: {e}",
                dir.display()
            )),
        });
    }
    let ino = f.metadata().map(|m| m.ino()).unwrap_or(0);
    let holder = std::fs::read_to_string(proc.join("locks"))
        .ok()
        .and_then(|t| flock_holder(&t, ino))
        .map(|pid| format!(" (pid {pid})"))
        .unwrap_or_default();
    Err(format!(
        "{}: another asmguardd{holder} already uses this BPF pin directory: stop it first, \
         or give this daemon its own --bpf-pin-dir (nothing was changed)",
        dir.display()
    ))
}

/// The pid holding a `flock` on inode `ino`, from the text of `/proc/locks`
/// (`1: FLOCK  ADVISORY  WRITE 1234 00:19:567 0 EOF`).
pub fn flock_holder(locks: &str, ino: u64) -> Option<String> {
    locks.lines().find_map(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        let at = w.iter().position(|x| *x == "FLOCK")?;
        let pid = w.get(at + 3)?;
        let dev_ino = w.get(at + 4)?;
        (dev_ino.rsplit(':').next()? == ino.to_string()).then(|| pid.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lock_file_is_named_after_the_pin_directory_alone() {
        assert_eq!(
            lock_path(
                Path::new("/run/asmguard"),
                Path::new("/sys/fs/bpf/asmguard")
            ),
            PathBuf::from("/run/asmguard/pins-sys-fs-bpf-asmguard.lock")
        );
    }

    #[test]
    fn the_holder_is_read_from_proc_locks() {
        let t = "1: POSIX  ADVISORY  WRITE 99 00:19:567 0 EOF\n\
                 2: FLOCK  ADVISORY  WRITE 1234 00:19:567 0 EOF\n\
                 3: FLOCK  ADVISORY  WRITE 77 fd:01:42 0 EOF\n";
        assert_eq!(flock_holder(t, 567).as_deref(), Some("1234"));
        assert_eq!(flock_holder(t, 42).as_deref(), Some("77"));
        assert_eq!(flock_holder(t, 5), None);
        // a blocked waiter's line (`->`) shifts nothing we read
        let w = "4: -> FLOCK  ADVISORY  WRITE 55 00:19:8 0 EOF\n";
        assert_eq!(flock_holder(w, 8).as_deref(), Some("55"));
    }

    #[test]
    fn a_second_lock_on_the_same_pins_is_refused_and_names_the_holder() {
        let run = tempfile::tempdir().unwrap();
        let pins = Path::new("/sys/fs/bpf/asmguard-unit-test");
        let proc = asmguard_paths::Paths::default().proc;
        let first = lock(run.path(), pins, &proc).unwrap();
        assert!(first.warning.is_none(), "{:?}", first.warning);
        let e = lock(run.path(), pins, &proc).unwrap_err();
        assert!(e.contains("already uses this BPF pin directory"), "{e}");
        assert!(e.contains(&format!("(pid {})", std::process::id())), "{e}");
        // the holder is read from the caller's procfs: none in an empty one
        let empty = tempfile::tempdir().unwrap();
        let e = lock(run.path(), pins, empty.path()).unwrap_err();
        assert!(e.contains("already uses this BPF pin directory"), "{e}");
        assert!(!e.contains("(pid "), "{e}");
        // other pins: another lock
        let other = lock(run.path(), Path::new("/sys/fs/bpf/other"), &proc).unwrap();
        assert!(other.warning.is_none());
        drop(first);
        assert!(
            lock(run.path(), pins, &proc).is_ok(),
            "released with its holder"
        );
    }
}
