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
    /// An NVMe controller (`nvme3`, class `nvme`) was added, changed (connected,
    /// reset) or removed: a path of a native multipath head may have come or
    /// gone. The head's own block device sends nothing then, and its hidden
    /// path devices never send uevents (the kernel suppresses them for hidden
    /// disks), so this is the only news of a controller reconnecting under a
    /// new number.
    NvmeController { action: String, name: String },
    /// Events were lost (the socket's buffer overflowed): rescan every device.
    Overflow,
}

/// The [`DeviceEvent`] of a uevent of SUBSYSTEM, if the daemon wants it: block
/// devices, and NVMe controllers (not the `nvme-generic` nodes nor the
/// `nvme-subsystem` objects: a controller's own events cover them).
pub fn classify(subsystem: Option<&str>, action: &str, name: &str) -> Option<DeviceEvent> {
    if name.is_empty() {
        return None;
    }
    let (action, name) = (action.to_string(), name.to_string());
    match subsystem? {
        "block" => Some(DeviceEvent::Block { action, name }),
        // nvme-fabrics (the misc device /dev/nvme-fabrics) shares the class
        "nvme" if is_controller(&name) => Some(DeviceEvent::NvmeController { action, name }),
        _ => None,
    }
}

/// `nvme<digits>`: an NVMe controller's name.
fn is_controller(name: &str) -> bool {
    name.strip_prefix("nvme")
        .is_some_and(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()))
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
    /// `paths`: the caller's roots (whether udevd runs).
    pub fn open(paths: &asmguard_paths::Paths) -> nix::Result<EventSource> {
        let mut udev_error = None;
        if udevdb::udevd_running(paths) {
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

    /// Why listening to udevd failed, where it runs but its events are the
    /// kernel's.
    pub fn udev_error(&self) -> Option<&str> {
        self.udev_error.as_deref()
    }

    pub fn kind(&self) -> SourceKind {
        match self.inner {
            Inner::Udev { .. } => SourceKind::Udev,
            Inner::Kernel(_) => SourceKind::Kernel,
        }
    }

    /// Waits for the next block device event.
    pub fn recv(&mut self) -> nix::Result<DeviceEvent> {
        match &mut self.inner {
            Inner::Kernel(m) => loop {
                match m.recv()? {
                    uevent::Received::Overflow => return Ok(DeviceEvent::Overflow),
                    uevent::Received::Event(e) => {
                        let name = e.name().unwrap_or_default();
                        if let Some(ev) = classify(e.subsystem(), &e.action, &name) {
                            return Ok(ev);
                        }
                    }
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
                            let sub = ev.subsystem().map(|s| s.to_string_lossy().into_owned());
                            if let Some(e) = classify(sub.as_deref(), &action, &name) {
                                queue.push_back(e);
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

/// A libudev monitor on udev's netlink group, block devices and NVMe
/// controllers only.
fn open_udev() -> std::io::Result<udev::MonitorSocket> {
    let socket = udev::MonitorBuilder::new()?
        .match_subsystem("block")?
        .match_subsystem("nvme")?
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
    fn block_devices_and_nvme_controllers_are_heard() {
        let block = |a: &str, n: &str| DeviceEvent::Block {
            action: a.into(),
            name: n.into(),
        };
        let ctrl = |a: &str, n: &str| DeviceEvent::NvmeController {
            action: a.into(),
            name: n.into(),
        };
        assert_eq!(
            classify(Some("block"), "add", "nvme1n1"),
            Some(block("add", "nvme1n1"))
        );
        assert_eq!(
            classify(Some("nvme"), "add", "nvme3"),
            Some(ctrl("add", "nvme3"))
        );
        assert_eq!(
            classify(Some("nvme"), "change", "nvme12"),
            Some(ctrl("change", "nvme12"))
        );
        assert_eq!(
            classify(Some("nvme"), "remove", "nvme0"),
            Some(ctrl("remove", "nvme0"))
        );
        // the fabrics misc device, generic nodes, subsystems, other classes: no
        assert_eq!(classify(Some("nvme"), "add", "nvme-fabrics"), None);
        assert_eq!(classify(Some("nvme-generic"), "add", "ng1n1"), None);
        assert_eq!(
            classify(Some("nvme-subsystem"), "add", "nvme-subsys1"),
            None
        );
        assert_eq!(classify(Some("net"), "add", "nvme0"), None);
        assert_eq!(classify(None, "add", "sda"), None);
        assert_eq!(classify(Some("block"), "add", ""), None);
    }

    #[test]
    fn opens_a_source_that_says_which() {
        // Where udevd runs this is udev, elsewhere (this host, the VM lab) the
        // kernel's uevents; either way it opens and names itself accordingly.
        let paths = asmguard_paths::Paths::default();
        let s = EventSource::open(&paths).unwrap();
        match s.kind() {
            SourceKind::Udev => assert_eq!(s.udev_error(), None),
            SourceKind::Kernel => {
                assert_eq!(udevdb::udevd_running(&paths), s.udev_error.is_some());
            }
        }
    }
}
