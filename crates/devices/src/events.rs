//! Where the daemon hears of block devices coming, changing and going: one
//! [`DeviceEvent`] type over two sources.
//!
//! * **udev** (where udevd runs: its control socket exists and a libudev monitor on
//!   the `udev` netlink group opens): udevd sends an event only after its rules ran,
//!   so `/dev/asmguard/disks/*` links and the udev database's identity properties
//!   ([`crate::udevdb`]) are in place when the daemon acts.
//! * **kernel uevents** ([`crate::uevent`], the fallback where no udevd runs, as in
//!   the VM lab's busybox initramfs): straight from the kernel, before any rule.
//!
//! Both give the same events; the daemon's handling of them is one code path.

use crate::udevdb;
use crate::uevent;
use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{setsockopt, sockopt};
use std::collections::VecDeque;
use std::os::fd::AsFd;

/// One thing that happened to the block devices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceEvent {
    /// A block device was added, changed or removed (`action`: `add`, `change`,
    /// `remove`, ...; `name`: its kernel name as in /sys/class/block).
    Block { action: String, name: String },
    /// Events were lost (the socket's buffer overflowed): rescan every device.
    Overflow,
}

/// Which source an [`EventSource`] listens to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    Udev,
    Kernel,
}

enum Inner {
    Udev {
        socket: udev::MonitorSocket,
        queue: VecDeque<DeviceEvent>,
    },
    Kernel(uevent::Monitor),
}

/// A blocking listener for block device events, from udev where udevd runs, else
/// from the kernel.
pub struct EventSource {
    inner: Inner,
    /// Why the kernel's uevents are used although udevd runs (the udev monitor
    /// could not be opened), if that happened.
    udev_error: Option<String>,
}

/// A big receive buffer: 1,000 loop devices set up at once make a burst of events.
const RCVBUF: usize = 8 << 20;

impl EventSource {
    /// Opens udev's monitor where udevd runs, else (or if that fails) the kernel's.
    pub fn open() -> nix::Result<EventSource> {
        let mut udev_error = None;
        if udevdb::udevd_running() {
            match open_udev() {
                Ok(socket) => {
                    return Ok(EventSource {
                        inner: Inner::Udev {
                            socket,
                            queue: VecDeque::new(),
                        },
                        udev_error: None,
                    })
                }
                Err(e) => udev_error = Some(e.to_string()),
            }
        }
        Ok(EventSource {
            inner: Inner::Kernel(uevent::Monitor::open()?),
            udev_error,
        })
    }

    pub fn kind(&self) -> SourceKind {
        match self.inner {
            Inner::Udev { .. } => SourceKind::Udev,
            Inner::Kernel(_) => SourceKind::Kernel,
        }
    }

    /// What `asmguardctl status` shows as the event source.
    pub fn describe(&self) -> String {
        match (&self.inner, &self.udev_error) {
            (Inner::Udev { .. }, _) => "udev".into(),
            (Inner::Kernel(_), None) => "kernel uevents (no udevd)".into(),
            (Inner::Kernel(_), Some(e)) => {
                format!("kernel uevents (udevd runs, but its monitor failed: {e})")
            }
        }
    }

    /// Waits for the next block device event.
    pub fn recv(&mut self) -> nix::Result<DeviceEvent> {
        match &mut self.inner {
            Inner::Kernel(m) => loop {
                match m.recv()? {
                    uevent::Received::Overflow => return Ok(DeviceEvent::Overflow),
                    uevent::Received::Event(e) if e.subsystem() == Some("block") => {
                        if let Some(name) = e.name() {
                            return Ok(DeviceEvent::Block {
                                action: e.action,
                                name,
                            });
                        }
                    }
                    uevent::Received::Event(_) => {}
                }
            },
            Inner::Udev { socket, queue } => loop {
                if let Some(e) = queue.pop_front() {
                    return Ok(e);
                }
                let mut fds = [PollFd::new(socket.as_fd(), PollFlags::POLLIN)];
                match poll(&mut fds, PollTimeout::NONE) {
                    Ok(_) | Err(Errno::EINTR) => {}
                    Err(e) => return Err(e),
                }
                // The socket is non-blocking: take everything that is there.
                loop {
                    match socket.iter().next() {
                        Some(ev) => {
                            let action = ev
                                .action()
                                .map(|a| a.to_string_lossy().into_owned())
                                .unwrap_or_default();
                            let name = ev.sysname().to_string_lossy().into_owned();
                            if !name.is_empty() {
                                queue.push_back(DeviceEvent::Block { action, name });
                            }
                        }
                        None => {
                            // libudev sets errno: EAGAIN (drained), ENOBUFS (overflow)
                            match Errno::last() {
                                Errno::ENOBUFS => queue.push_back(DeviceEvent::Overflow),
                                Errno::EAGAIN | Errno::EINTR => {}
                                // a message libudev refused (bad sender, filtered):
                                // nothing to report, wait for the next
                                _ => {}
                            }
                            break;
                        }
                    }
                }
            },
        }
    }
}

/// A libudev monitor on udev's netlink group, block devices only.
fn open_udev() -> std::io::Result<udev::MonitorSocket> {
    let socket = udev::MonitorBuilder::new()?
        .match_subsystem("block")?
        .listen()?;
    if setsockopt(&socket.as_fd(), sockopt::RcvBufForce, &RCVBUF).is_err() {
        let _ = setsockopt(&socket.as_fd(), sockopt::RcvBuf, &RCVBUF);
    }
    Ok(socket)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_a_source_that_says_which() {
        // Where udevd runs this is udev, elsewhere (this host, the VM lab) the
        // kernel's uevents; either way it opens and names itself accordingly.
        let s = EventSource::open().unwrap();
        match s.kind() {
            SourceKind::Udev => assert_eq!(s.describe(), "udev"),
            SourceKind::Kernel => {
                assert!(s.describe().starts_with("kernel uevents"));
                assert_eq!(udevdb::udevd_running(), s.udev_error.is_some());
            }
        }
    }
}
