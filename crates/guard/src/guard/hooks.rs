//! The hook table (one row per hook of `bpf/guard.bpf.c`: its `AG_HOOK_*`
//! code, metric label, whether it is optional, how its events name the
//! operation) is plain data shared with the metrics: it lives in
//! [`asmguard_filter_types::hooks`], beside the program table. This module
//! names it for the guard and adds what needs the guard's own tables: the
//! operation an event names ([`HookOperation`], an ioctl's name from
//! [`super::ioctls`]).

pub use asmguard_filter_types::hooks::{Hook, HookDef, Op, HOOKS};

use super::ioctls::ioctl_name;

/// The name of the operation an event of a hook records.
pub trait HookOperation {
    /// The name of operation `op` seen by this hook (`write-open`, an
    /// ioctl's name ...).
    fn operation(self, op: u32) -> String;
}

impl HookOperation for Hook {
    fn operation(self, op: u32) -> String {
        match self.def().map(|d| d.op) {
            Some(Op::Fixed(name)) => name.to_string(),
            Some(Op::Ioctl) => ioctl_name(op),
            Some(Op::Hex(prefix)) => format!("{prefix} 0x{op:x}"),
            None => format!("op 0x{op:x}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_are_named() {
        assert_eq!(Hook::Unknown(99).operation(0x10), "op 0x10");
        assert_eq!(Hook::FileIoctl.operation(0x1277), "BLKDISCARD");
        assert_eq!(Hook::UringCmd.operation(0x1f), "uring-cmd 0x1f");
        assert_eq!(Hook::MmapFile.operation(3), "mmap-shared-write");
        assert_eq!(Hook::FileOpen.operation(0), "write-open");
    }
}
