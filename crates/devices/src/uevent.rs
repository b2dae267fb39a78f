//! The kernel's own uevents: a `NETLINK_KOBJECT_UEVENT` socket bound to the kernel's
//! multicast group (1). These arrive whether or not udevd runs (VM lab, containers, minimal hosts), and
//! before udev has processed them; asmguard reads the label sector itself, so it needs
//! nothing udev adds. Only messages from the kernel (netlink port id 0) are accepted.

use nix::errno::Errno;
use nix::sys::socket::{
    bind, recvfrom, setsockopt, socket, sockopt, AddressFamily, NetlinkAddr, SockFlag,
    SockProtocol, SockType,
};
use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd};

/// One kernel uevent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uevent {
    /// `add`, `remove`, `change`, `move`, `online`, `offline`, `bind`, `unbind`.
    pub action: String,
    pub devpath: String,
    pub env: HashMap<String, String>,
}

impl Uevent {
    pub fn subsystem(&self) -> Option<&str> {
        self.env.get("SUBSYSTEM").map(String::as_str)
    }
    /// The kernel name as in /sys/class/block: the last devpath component (`cciss!c0d0`,
    /// where `DEVNAME` says `cciss/c0d0`).
    pub fn name(&self) -> Option<String> {
        self.devpath
            .rsplit('/')
            .next()
            .map(str::to_string)
            .filter(|s| !s.is_empty())
    }
}

/// Parse a kernel uevent message: `ACTION@DEVPATH\0KEY=VALUE\0...`. `None` for
/// anything else (e.g. a libudev message, which starts with `libudev\0`).
pub fn parse(buf: &[u8]) -> Option<Uevent> {
    let mut parts = buf.split(|&b| b == 0).filter(|p| !p.is_empty());
    let head = std::str::from_utf8(parts.next()?).ok()?;
    let (action, devpath) = head.split_once('@')?;
    let mut env = HashMap::new();
    for p in parts {
        if let Ok(s) = std::str::from_utf8(p) {
            if let Some((k, v)) = s.split_once('=') {
                env.insert(k.to_string(), v.to_string());
            }
        }
    }
    if env.get("ACTION").is_some_and(|a| a != action) {
        return None;
    }
    Some(Uevent {
        action: action.to_string(),
        devpath: devpath.to_string(),
        env,
    })
}

/// What [`Monitor::recv`] gives.
#[derive(Debug)]
pub enum Received {
    Event(Uevent),
    /// The socket buffer overflowed: events were lost, rescan everything.
    Overflow,
}

/// A blocking uevent listener.
pub struct Monitor {
    fd: OwnedFd,
    buf: Vec<u8>,
}

impl Monitor {
    /// Open and bind the socket (needs no privilege to receive).
    pub fn open() -> nix::Result<Monitor> {
        let fd = socket(
            AddressFamily::Netlink,
            SockType::Datagram,
            SockFlag::SOCK_CLOEXEC,
            SockProtocol::NetlinkKObjectUEvent,
        )?;
        // A big buffer: 1,000 loop devices set up at once make a burst of events.
        if setsockopt(&fd, sockopt::RcvBufForce, &(8 << 20)).is_err() {
            let _ = setsockopt(&fd, sockopt::RcvBuf, &(8 << 20));
        }
        bind(fd.as_raw_fd(), &NetlinkAddr::new(0, 1))?;
        Ok(Monitor {
            fd,
            buf: vec![0u8; 64 * 1024],
        })
    }

    /// Wait for the next event (blocking).
    pub fn recv(&mut self) -> nix::Result<Received> {
        loop {
            match recvfrom::<NetlinkAddr>(self.fd.as_raw_fd(), &mut self.buf) {
                Ok((n, addr)) => {
                    // Only the kernel (port id 0) may speak here.
                    if addr.map(|a| a.pid()) != Some(0) {
                        continue;
                    }
                    if let Some(e) = parse(&self.buf[..n]) {
                        return Ok(Received::Event(e));
                    }
                }
                Err(Errno::ENOBUFS) => return Ok(Received::Overflow),
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kernel_messages_only() {
        let m = b"change@/devices/virtual/block/loop3\0ACTION=change\0DEVPATH=/devices/virtual/block/loop3\0SUBSYSTEM=block\0MAJOR=7\0MINOR=3\0DEVNAME=loop3\0DEVTYPE=disk\0SEQNUM=4242\0";
        let e = parse(m).unwrap();
        assert_eq!(e.action, "change");
        assert_eq!(e.subsystem(), Some("block"));
        assert_eq!(e.name().as_deref(), Some("loop3"));
        assert!(parse(b"libudev\0\xfe\xed\xca\xfe").is_none());
        assert!(parse(b"").is_none());
        assert!(parse(b"add@/x\0ACTION=remove\0").is_none());
        let c = parse(b"add@/devices/pci0000:00/0000:00:05.0/cciss0/c0d0/block/cciss!c0d0\0SUBSYSTEM=block\0DEVNAME=cciss/c0d0\0").unwrap();
        assert_eq!(c.name().as_deref(), Some("cciss!c0d0"));
    }

    #[test]
    fn monitor_opens() {
        // Receiving kernel uevents needs no privilege; the bind must work anywhere.
        Monitor::open().unwrap();
    }
}
