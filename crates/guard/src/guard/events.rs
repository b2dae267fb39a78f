//! Decoding the filter's records: an `ag_event` (bpf/guard.h) into a
//! [`DenialEvent`], and the device and executable identities the maps and
//! events carry ([`DevKey`], [`ExeId`]).
//!
//! Not here: reading the ring buffer ([`super::ring`]), labels (the daemon's
//! `filter` module).

use super::abi::{AgEvent, EV_CHR, EV_CMD};
use super::commands::{command_name, CmdSet};
use super::hooks::{Hook, HookOperation};
use super::types::{DevKey, ExeId, Mode};
use crate::KernelDev;

/// One denied (or, in audit mode, logged) operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DenialEvent {
    /// Kernel monotonic time (ns).
    pub ts_ns: u64,
    /// Process id (thread group).
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Real uid.
    pub uid: u32,
    /// Effective uid.
    pub euid: u32,
    /// Filesystem uid.
    pub fsuid: u32,
    /// Effective gid.
    pub egid: u32,
    /// Command name (kernel `comm`: for display only, never for decisions).
    pub comm: String,
    /// The executable, resolved from `/proc/<pid>/exe` in userspace (best
    /// effort: empty when the process is gone).
    pub exe: String,
    /// The executable's filesystem and inode, as the kernel saw them.
    pub exe_id: ExeId,
    /// The device.
    pub dev: DevKey,
    /// The disk id given with [`super::Guard::set_disk`].
    pub disk_id: u32,
    /// The hook.
    pub hook: Hook,
    /// Hook-specific: f_mode (open), mask (write), ioctl cmd, prot (mmap,
    /// mprotect), uring cmd_op, access_type (cgroup device).
    pub op: u32,
    /// [`Mode::Enforce`] (denied) or [`Mode::Audit`] (logged, allowed).
    pub mode: Mode,
    /// The passthrough command of an SG_IO or NVMe admin ioctl, when the
    /// filter read it: (opcode, SCSI service action).
    pub command: Option<(u8, u8)>,
    /// The container the task is in (the id given with
    /// [`super::Guard::set_containers`]); 0: none (or a program that cannot
    /// read the task's cgroup).
    pub ctr_id: u32,
}

impl DenialEvent {
    /// Decodes a `struct ag_event` record (bpf/guard.h); `None` if short.
    pub fn parse(b: &[u8]) -> Option<DenialEvent> {
        AgEvent::read(b).map(DenialEvent::from)
    }

    /// A short name of the operation: the ioctl's name, `write-open`, `write`,
    /// `mmap-shared-write` ..., with the passthrough command when it was read
    /// (`SG_IO opcode 0x2a`, `NVME_IOCTL_ADMIN_CMD opcode 0x80`).
    pub fn operation(&self) -> String {
        let name = self.hook.operation(self.op);
        match self.command {
            Some((op, sa)) => {
                let set = if self.op == 0x2285 {
                    CmdSet::Scsi
                } else {
                    CmdSet::NvmeAdmin
                };
                format!("{name} {}", command_name(set, op, sa))
            }
            None => name,
        }
    }
}

/// The record's fields, decoded: device numbers, hook and mode codes,
/// the passthrough command in `flags`, `comm` up to its NUL.
impl From<AgEvent> for DenialEvent {
    fn from(e: AgEvent) -> DenialEvent {
        let end = e.comm.iter().position(|&c| c == 0).unwrap_or(e.comm.len());
        DenialEvent {
            ts_ns: e.ts_ns,
            pid: e.pid,
            tid: e.tid,
            uid: e.uid,
            euid: e.euid,
            fsuid: e.fsuid,
            egid: e.egid,
            comm: String::from_utf8_lossy(&e.comm[..end]).into_owned(),
            exe: String::new(),
            exe_id: ExeId {
                ino: e.exe_ino,
                dev: KernelDev::from_raw(e.exe_dev),
            },
            dev: DevKey {
                dev: KernelDev::from_raw(e.dev),
                chr: e.flags & EV_CHR != 0,
            },
            disk_id: e.disk_id,
            hook: Hook::from_code(e.hook),
            op: e.op,
            mode: Mode::from_code(e.mode),
            command: (e.flags & EV_CMD != 0)
                .then_some(((e.flags >> 8) as u8, (e.flags >> 16) as u8)),
            ctr_id: e.ctr_id,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guard::abi::EVENT_SIZE;

    #[test]
    fn event_decoding_follows_the_c_layout() {
        let (at, size) = crate::guard::abi::btf_layout("ag_event");
        assert_eq!(size, EVENT_SIZE, "struct ag_event size");
        let mut b = vec![0u8; size];
        let mut put = |name: &str, v: u32| {
            let o = at[name];
            b[o..o + 4].copy_from_slice(&v.to_ne_bytes());
        };
        put("exe_dev", (8 << 20) | 1);
        put("pid", 42);
        put("tid", 43);
        put("uid", 1000);
        put("euid", 1001);
        put("fsuid", 1002);
        put("egid", 1003);
        put("dev", (7 << 20) | 3);
        put("disk_id", 5);
        put("hook", 3);
        put("op", 0x1277);
        put("mode", 2);
        put("flags", 1);
        let o = at["exe_ino"];
        b[o..o + 8].copy_from_slice(&1234u64.to_ne_bytes());
        let o = at["ts_ns"];
        b[o..o + 8].copy_from_slice(&99u64.to_ne_bytes());
        let o = at["comm"];
        b[o..o + 2].copy_from_slice(b"dd");
        let e = DenialEvent::parse(&b).unwrap();
        assert_eq!(e.ts_ns, 99);
        assert_eq!((e.pid, e.tid), (42, 43));
        assert_eq!((e.uid, e.euid, e.fsuid, e.egid), (1000, 1001, 1002, 1003));
        assert_eq!(e.dev.dev.to_string(), "7:3");
        assert!(e.dev.chr);
        assert_eq!(e.disk_id, 5);
        assert_eq!(e.hook, Hook::FileIoctl);
        assert_eq!(e.operation(), "BLKDISCARD");
        assert_eq!(e.mode, Mode::Enforce);
        assert_eq!(e.comm, "dd");
        assert_eq!(e.exe_id.ino, 1234);
        assert_eq!(e.exe_id.dev.to_string(), "8:1");
        assert!(DenialEvent::parse(&b[..size - 1]).is_none());
        // An SG_IO whose CDB the filter read: WRITE(10).
        let o = at["op"];
        b[o..o + 4].copy_from_slice(&0x2285u32.to_ne_bytes());
        let o = at["flags"];
        b[o..o + 4].copy_from_slice(&(EV_CMD | 0x2a << 8).to_ne_bytes());
        let e = DenialEvent::parse(&b).unwrap();
        assert!(!e.dev.chr);
        assert_eq!(e.command, Some((0x2a, 0)));
        assert_eq!(e.operation(), "SG_IO opcode 0x2a");
    }

    #[test]
    fn exe_keys_round_trip() {
        let id = ExeId {
            dev: KernelDev::new(8, 1).unwrap(),
            ino: 77,
        };
        assert_eq!(ExeId::from_key(&id.key()), Some(id));
        assert_eq!(id.key().len(), 16);
    }
}
