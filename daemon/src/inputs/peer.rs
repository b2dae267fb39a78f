//! The process at the other end of a control-socket connection, for kernels
//! without `SO_PEERPIDFD` (before 6.5: Debian 12's 6.1, UEK7's 5.15).
//!
//! There the kernel gives only the peer's pid (`SO_PEERCRED`), recorded at
//! connect: by accept the peer may have exited and its pid been given to
//! another process. So the daemon takes a pidfd of whatever process has that
//! pid now ([`pidfd_open`]), reads it through /proc, and keeps what it read
//! only if, afterwards, that process is still alive (its pidfd does not poll
//! readable: the pid still names it) and holds the other end of the
//! connection ([`holds_peer`]: the peer socket's inode, from the kernel's
//! `unix_diag`, among its open files). A process with a reused pid holds no
//! socket connected to the daemon, so it is never taken for the peer.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;

/// `pidfd_open(2)` (Linux 5.3+).
pub fn pidfd_open(pid: u32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let r = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel gave us this new descriptor; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(r as libc::c_int) })
}

/// `SOCK_DIAG_BY_FAMILY` (linux/sock_diag.h).
const SOCK_DIAG_BY_FAMILY: u16 = 20;
/// `UDIAG_SHOW_PEER` (linux/unix_diag.h): answer with the peer's inode.
const UDIAG_SHOW_PEER: u32 = 0x4;
/// `UNIX_DIAG_PEER`: the attribute that carries it.
const UNIX_DIAG_PEER: u16 = 2;

/// `struct unix_diag_req` (linux/unix_diag.h).
#[repr(C)]
struct UnixDiagReq {
    family: u8,
    protocol: u8,
    pad: u16,
    states: u32,
    ino: u32,
    show: u32,
    cookie: [u32; 2],
}

#[repr(C)]
struct Request {
    nlh: libc::nlmsghdr,
    req: UnixDiagReq,
}

/// The inode of the socket at the other end of the connected unix socket
/// `sock`, asked of the kernel's `unix_diag` (netlink `NETLINK_SOCK_DIAG`).
pub fn peer_socket_inode(sock: BorrowedFd<'_>) -> io::Result<u64> {
    let ino = std::fs::File::from(sock.try_clone_to_owned()?)
        .metadata()?
        .ino();
    let ino = u32::try_from(ino).map_err(|_| io::Error::other("socket inode out of range"))?;
    // SAFETY: socket(2) with constant arguments; returns a new descriptor or -1.
    let nl = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            libc::NETLINK_SOCK_DIAG,
        )
    };
    if nl < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel gave us this new descriptor; nothing else owns it.
    let nl = unsafe { OwnedFd::from_raw_fd(nl) };
    let timeout = libc::timeval {
        tv_sec: 1,
        tv_usec: 0,
    };
    // SAFETY: `timeout` is a timeval and its size is passed.
    unsafe {
        libc::setsockopt(
            nl.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&timeout as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    let req = Request {
        nlh: libc::nlmsghdr {
            nlmsg_len: std::mem::size_of::<Request>() as u32,
            nlmsg_type: SOCK_DIAG_BY_FAMILY,
            nlmsg_flags: libc::NLM_F_REQUEST as u16,
            nlmsg_seq: 1,
            nlmsg_pid: 0,
        },
        req: UnixDiagReq {
            family: libc::AF_UNIX as u8,
            protocol: 0,
            pad: 0,
            states: u32::MAX,
            ino,
            show: UDIAG_SHOW_PEER,
            // INET_DIAG_NOCOOKIE: any socket of that inode
            cookie: [u32::MAX, u32::MAX],
        },
    };
    // SAFETY: `req` is a plain repr(C) value of the size passed; the kernel
    // reads that many bytes (an unbound netlink socket sends to the kernel).
    let n = unsafe {
        libc::send(
            nl.as_raw_fd(),
            (&req as *const Request).cast(),
            std::mem::size_of::<Request>(),
            0,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut buf = vec![0u8; 8192];
    // SAFETY: `buf` has room for its length; recv writes at most that many bytes.
    let n = unsafe { libc::recv(nl.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    parse_peer(&buf[..n as usize])
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// The `UNIX_DIAG_PEER` attribute of the kernel's answer (one message:
/// nlmsghdr, `struct unix_diag_msg`, attributes; or an `NLMSG_ERROR`).
fn parse_peer(b: &[u8]) -> io::Result<u64> {
    let bad = |m: &str| io::Error::other(format!("unix_diag answer: {m}"));
    const NLH: usize = 16;
    const MSG: usize = 16; // struct unix_diag_msg
    let len = u32_at(b, 0).ok_or_else(|| bad("short"))? as usize;
    let ty = u16_at(b, 4).ok_or_else(|| bad("short"))?;
    if ty == libc::NLMSG_ERROR as u16 {
        let err = u32_at(b, NLH).ok_or_else(|| bad("short error"))? as i32;
        return Err(io::Error::from_raw_os_error(-err));
    }
    if ty != SOCK_DIAG_BY_FAMILY || len > b.len() {
        return Err(bad("unexpected message"));
    }
    let mut at = NLH + MSG;
    while at + 4 <= len {
        let alen = u16_at(b, at).ok_or_else(|| bad("short attribute"))? as usize;
        let aty = u16_at(b, at + 2).ok_or_else(|| bad("short attribute"))?;
        if alen < 4 {
            return Err(bad("bad attribute"));
        }
        if aty == UNIX_DIAG_PEER {
            return u32_at(b, at + 4)
                .map(u64::from)
                .ok_or_else(|| bad("short peer"));
        }
        at += (alen + 3) & !3;
    }
    Err(bad("no peer (the connection is closed)"))
}

/// The most open files of a process looked through for the peer socket.
const MAX_FDS: usize = 1 << 16;

/// Whether process `pid` has the socket of inode `ino` open.
pub fn holds_socket(proc: &std::path::Path, pid: u32, ino: u64) -> bool {
    let want = format!("socket:[{ino}]");
    let Ok(rd) = std::fs::read_dir(proc.join(pid.to_string()).join("fd")) else {
        return false;
    };
    rd.flatten()
        .take(MAX_FDS)
        .any(|e| std::fs::read_link(e.path()).is_ok_and(|l| l.as_os_str() == want.as_str()))
}

/// Whether process `pid` holds the other end of the connected socket `sock`.
/// Err: the kernel cannot tell (no `unix_diag`).
pub fn holds_peer(proc: &std::path::Path, pid: u32, sock: BorrowedFd<'_>) -> io::Result<bool> {
    let ino = peer_socket_inode(sock)?;
    Ok(holds_socket(proc, pid, ino))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;
    use std::os::unix::net::{UnixListener, UnixStream};

    #[test]
    fn the_peer_is_the_process_that_holds_the_other_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let l = UnixListener::bind(&path).unwrap();
        let client = UnixStream::connect(&path).unwrap();
        let (server, _) = l.accept().unwrap();
        let me = std::process::id();
        let client_ino = std::fs::File::from(client.as_fd().try_clone_to_owned().unwrap())
            .metadata()
            .unwrap()
            .ino();
        assert_eq!(peer_socket_inode(server.as_fd()).unwrap(), client_ino);
        assert!(holds_peer(std::path::Path::new("/proc"), me, server.as_fd()).unwrap());
        // another process (no descriptor of ours: close-on-exec) does not hold it
        let mut other = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        assert!(!holds_peer(std::path::Path::new("/proc"), other.id(), server.as_fd()).unwrap());
        let pidfd = pidfd_open(other.id()).unwrap();
        assert!(pidfd.as_raw_fd() >= 0);
        let _ = other.kill();
        let _ = other.wait();
        assert!(pidfd_open(other.id()).is_err(), "reaped: no such process");
        // the peer closes its end: no peer to find
        drop(client);
        assert!(!holds_peer(std::path::Path::new("/proc"), me, server.as_fd()).unwrap_or(false));
    }

    #[test]
    fn a_kernel_error_is_an_error() {
        let mut b = vec![0u8; 36];
        b[0..4].copy_from_slice(&36u32.to_ne_bytes());
        b[4..6].copy_from_slice(&(libc::NLMSG_ERROR as u16).to_ne_bytes());
        b[16..20].copy_from_slice(&(-libc::ENOENT).to_ne_bytes());
        let e = parse_peer(&b).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
        assert!(parse_peer(&[1, 2]).is_err());
    }
}
