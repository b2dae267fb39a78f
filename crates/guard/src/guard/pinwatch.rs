//! Whether a pin still names the object this process holds: another process
//! with the same pin directory (a second loader, `bpftool`, an older daemon)
//! can unpin a map or link and pin its own at the same path, and the daemon
//! would go on writing a map no program reads. Ids come from `fdinfo`
//! (`map_id:`, `link_id:`); a pin that names something else (or nothing) is
//! pinned again to the held object.
//!
//! Not here: what the maps hold (the daemon compares that with its own set).

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// What a held object is, for its fdinfo key and messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Map,
    Link,
}

impl Kind {
    fn key(self) -> &'static str {
        match self {
            Kind::Map => "map_id:",
            Kind::Link => "link_id:",
        }
    }
    fn word(self) -> &'static str {
        match self {
            Kind::Map => "map",
            Kind::Link => "link",
        }
    }
}

/// The kernel id of the map or link behind this process's `fd`.
pub(crate) fn fd_id(proc: &Path, fd: RawFd, kind: Kind) -> Option<u32> {
    std::fs::read_to_string(proc.join("self/fdinfo").join(fd.to_string()))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix(kind.key()))
        .and_then(|v| v.trim().parse().ok())
}

/// The id of the map or link pinned at `pin` (`None`: no pin, or another
/// kind of object).
fn pinned_id(proc: &Path, pin: &Path, kind: Kind) -> Option<u32> {
    match kind {
        Kind::Map => {
            let map = libbpf_rs::MapHandle::from_pinned_path(pin).ok()?;
            fd_id(proc, map.as_fd().as_raw_fd(), kind)
        }
        // (an opened pinned link only closes its fd when dropped)
        Kind::Link => {
            let link = libbpf_rs::Link::open(pin).ok()?;
            fd_id(proc, link.as_fd().as_raw_fd(), kind)
        }
    }
}

/// `None` when `pin` names the object behind `fd`; else it is pinned there
/// again and the answer says what was found (one phrase).
pub(crate) fn reassert(proc: &Path, fd: BorrowedFd<'_>, pin: &Path, kind: Kind) -> Option<String> {
    let own = fd_id(proc, fd.as_raw_fd(), kind)?;
    let found = pinned_id(proc, pin, kind);
    if found == Some(own) {
        return None;
    }
    let was = match found {
        Some(f) => format!("named {} {f}", kind.word()),
        None if pin.exists() => "named another object".to_string(),
        None => "was removed".to_string(),
    };
    let _ = std::fs::remove_file(pin);
    if let Some(dir) = pin.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let again = match CString::new(pin.as_os_str().as_bytes()) {
        // SAFETY: bpf_obj_pin reads the fd and a NUL-terminated path.
        Ok(p) => match unsafe { libbpf_rs::libbpf_sys::bpf_obj_pin(fd.as_raw_fd(), p.as_ptr()) } {
            0 => "pinned this daemon's again".to_string(),
            e => format!(
                "could not pin this daemon's again: {}",
                std::io::Error::from_raw_os_error(-e)
            ),
        },
        Err(_) => "could not pin this daemon's again: a NUL in the path".to_string(),
    };
    Some(format!(
        "{} {was} instead of this daemon's {} {own}: {again}",
        pin.display(),
        kind.word()
    ))
}
