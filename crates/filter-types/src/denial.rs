//! One denied (or, in audit mode, logged) operation: [`Denial`], the one
//! shape from the guard's decoder (`struct ag_event` in bpf/guard.h, read
//! from the ring buffer) to the protocol's `events` answer, which carries it
//! flattened beside what the daemon adds (sequence number, time, label,
//! container). Its device is a [`KernelDev`] (`"8:0"` on the wire), its
//! operation an [`Operation`] (hook, code, passthrough command) written as
//! one word (`write-open`, `BLKDISCARD`, `SG_IO opcode 0x2a`).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::commands::{command_name, CmdSet};
use crate::devt::KernelDev;
use crate::hooks::Hook;
use crate::Mode;

/// The kind of device node a denial is about (`block`, `char`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceType {
    #[default]
    Block,
    Char,
}

/// The passthrough command of an SG_IO or NVMe admin ioctl, when the filter
/// read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Command {
    /// CDB byte 0; the NVMe opcode.
    pub opcode: u8,
    /// SCSI: CDB byte 1 (the service action in bits 0-4); NVMe: 0.
    pub service_action: u8,
}

/// What was tried, as the hook saw it: on the wire `hook` (`file_ioctl` ...),
/// `operation` (its name, [`Operation`]'s `Display`), and the facts it is
/// named from (`op`, the hook's code: f_mode, mask, ioctl cmd, prot,
/// uring cmd_op, access type; `command`, when read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Operation {
    pub hook: Hook,
    /// Hook-specific: f_mode (open), mask (write), ioctl cmd, prot (mmap,
    /// mprotect), uring cmd_op, access_type (cgroup device).
    pub code: u32,
    /// The passthrough command of an SG_IO or NVMe admin ioctl.
    pub command: Option<Command>,
}

/// `SG_IO`'s ioctl number: its command is a SCSI CDB (else an NVMe admin one).
const SG_IO: u32 = 0x2285;

/// The operation's name: the ioctl's name, `write-open`, `write`,
/// `mmap-shared-write` ..., with the passthrough command when it was read
/// (`SG_IO opcode 0x2a`, `NVME_IOCTL_ADMIN_CMD opcode 0x80 (FORMAT NVM)`).
impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.hook.operation(self.code))?;
        if let Some(c) = self.command {
            let set = if self.code == SG_IO {
                CmdSet::Scsi
            } else {
                CmdSet::NvmeAdmin
            };
            write!(f, " {}", command_name(set, c.opcode, c.service_action))?;
        }
        Ok(())
    }
}

/// The wire's form of [`Operation`] as read back: its facts (`hook`, `op`,
/// `command`); the written name (`operation`) is derived from them again.
/// Written by the protocol's `FilterEventInfo`, in the order its event
/// lines have.
#[derive(Deserialize)]
struct OperationWire {
    hook: Hook,
    #[serde(default)]
    op: u32,
    #[serde(default)]
    command: Option<Command>,
}

impl<'de> Deserialize<'de> for Operation {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = OperationWire::deserialize(d)?;
        Ok(Operation {
            hook: w.hook,
            code: w.op,
            command: w.command,
        })
    }
}

/// One denied (or, in audit mode, logged and allowed) operation.
///
/// The kernel's bookkeeping (its clock, the thread, fsuid, the executable's
/// inode, the disk and container ids the daemon gave the filter) is decoded
/// too but stays off the wire: the daemon turns the ids into a label and a
/// container name.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Denial {
    /// Process id (thread group).
    pub pid: u32,
    /// Real uid.
    pub uid: u32,
    /// Effective uid.
    pub euid: u32,
    /// Effective gid (absent from daemons before it was reported).
    #[serde(default)]
    pub egid: u32,
    /// Command name (kernel `comm`: for display only, never for decisions).
    pub comm: String,
    /// The executable, resolved from `/proc/<pid>/exe` in userspace (best
    /// effort: empty when the process is gone).
    pub exe: String,
    /// The device (`"major:minor"`).
    pub device: KernelDev,
    /// `block` or `char` (block and character devices can share numbers).
    pub device_type: DeviceType,
    /// The hook, the operation's name and facts (`hook`, `operation`, `op`,
    /// `command`).
    #[serde(flatten)]
    pub operation: Operation,
    /// [`Mode::Enforce`] or [`Mode::Fenced`] (denied), [`Mode::Audit`]
    /// (logged, allowed).
    pub mode: Mode,
    /// Kernel monotonic time (ns).
    #[serde(skip)]
    pub ts_ns: u64,
    /// Thread id.
    #[serde(skip)]
    pub tid: u32,
    /// Filesystem uid.
    #[serde(skip)]
    pub fsuid: u32,
    /// The executable's filesystem, as the kernel saw it.
    #[serde(skip)]
    pub exe_dev: KernelDev,
    /// The executable's inode, as the kernel saw it (0: unknown).
    #[serde(skip)]
    pub exe_ino: u64,
    /// The disk id given with the guard's `set_disk`.
    #[serde(skip)]
    pub disk_id: u32,
    /// The container the task is in (the id given with the guard's
    /// `set_containers`); 0: none (or a program that cannot read the task's
    /// cgroup).
    #[serde(skip)]
    pub ctr_id: u32,
}

impl Denial {
    /// The hook.
    pub fn hook(&self) -> Hook {
        self.operation.hook
    }
    /// `b` or `c`: the device's kind as the journal and `asmguardctl events`
    /// prefix its number (`b8:0`).
    pub fn device_kind(&self) -> &'static str {
        match self.device_type {
            DeviceType::Block => "b",
            DeviceType::Char => "c",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(hook: Hook, code: u32, command: Option<(u8, u8)>) -> Operation {
        Operation {
            hook,
            code,
            command: command.map(|(opcode, service_action)| Command {
                opcode,
                service_action,
            }),
        }
    }

    /// The words events have always carried.
    #[test]
    fn operations_are_named_as_before() {
        for (o, word) in [
            (op(Hook::FileOpen, 0x2, None), "write-open"),
            (op(Hook::FileIoctl, 0x1277, None), "BLKDISCARD"),
            (
                op(Hook::FileIoctl, 0x2285, Some((0x2a, 0))),
                "SG_IO opcode 0x2a",
            ),
            (
                op(Hook::FileIoctl, 0xc048_4e41, Some((0x80, 0))),
                "NVME_IOCTL_ADMIN_CMD opcode 0x80 (FORMAT NVM)",
            ),
            (op(Hook::UringCmd, 0x1f, None), "uring-cmd 0x1f"),
            (op(Hook::MmapFile, 3, None), "mmap-shared-write"),
            (op(Hook::Unknown(99), 0x10, None), "op 0x10"),
        ] {
            assert_eq!(o.to_string(), word);
            // read back from its facts as the wire has them (an unknown
            // hook's code is not on the wire: `unknown`)
            if !matches!(o.hook, Hook::Unknown(_)) {
                let j = serde_json::json!({
                    "hook": o.hook, "operation": word, "op": o.code, "command": o.command,
                });
                assert_eq!(serde_json::from_value::<Operation>(j).unwrap(), o);
            }
        }
    }
}
