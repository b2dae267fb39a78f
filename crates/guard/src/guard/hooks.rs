//! The hook table (one row per hook of `bpf/guard.bpf.c`: its `AG_HOOK_*`
//! code, metric label, whether it is optional, how its events name the
//! operation) is plain data shared with the metrics: it lives in
//! [`asmguard_filter_types::hooks`], beside the program table. This module
//! names it for the guard; the operation an event names is
//! [`Hook::operation`] (an ioctl's name from [`super::ioctls`]).

pub use asmguard_filter_types::hooks::{Hook, HookDef, Op, HOOKS};

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
