//! The names of the ioctls the filter refuses: one table, [`IOCTLS`]. The
//! decision is `write_ioctl()` in `bpf/ioctls.h`; a host test
//! (tests/commands_host.rs) runs it for every ioctl type and number and checks
//! that it refuses exactly the commands this table names.
//!
//! Adding a name: one row. Commands whose size and direction bits vary
//! (NVMe, persistent reservations, zones) match on type and number only.
//!
//! Not here: the decision (C side), the event record ([`crate::denial`]).

/// How a row matches a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmd {
    /// The whole 32-bit command.
    Exact(u32),
    /// `_IOC_TYPE` and `_IOC_NR` only (size and direction ignored).
    TypeNr(u8, u8),
}

impl Cmd {
    fn matches(self, cmd: u32) -> bool {
        match self {
            Cmd::Exact(c) => c == cmd,
            Cmd::TypeNr(ty, nr) => {
                (cmd >> 8) & 0xff == u32::from(ty) && cmd & 0xff == u32::from(nr)
            }
        }
    }
}

/// The ioctl name table. Exact rows come first: they win over type/number rows.
pub const IOCTLS: &[(Cmd, &str)] = &[
    (Cmd::Exact(0x125d), "BLKROSET"),
    (Cmd::Exact(0x125f), "BLKRRPART"),
    (Cmd::Exact(0x1269), "BLKPG"),
    (Cmd::Exact(0x1277), "BLKDISCARD"),
    (Cmd::Exact(0x127d), "BLKSECDISCARD"),
    (Cmd::Exact(0x127f), "BLKZEROOUT"),
    (Cmd::Exact(0x2285), "SG_IO"),
    (Cmd::Exact(0x1), "SCSI_IOCTL_SEND_COMMAND"),
    (Cmd::Exact(0x2284), "SG_SCSI_RESET"),
    (Cmd::Exact(0x031c), "HDIO_DRIVE_RESET"),
    (Cmd::Exact(0x031d), "HDIO_DRIVE_TASKFILE"),
    (Cmd::Exact(0x031e), "HDIO_DRIVE_TASK"),
    (Cmd::Exact(0x031f), "HDIO_DRIVE_CMD"),
    (Cmd::TypeNr(0x12, 131), "BLKRESETZONE"),
    (Cmd::TypeNr(0x12, 134), "BLKOPENZONE"),
    (Cmd::TypeNr(0x12, 135), "BLKCLOSEZONE"),
    (Cmd::TypeNr(0x12, 136), "BLKFINISHZONE"),
    (Cmd::TypeNr(0x4e, 0x41), "NVME_IOCTL_ADMIN_CMD"),
    (Cmd::TypeNr(0x4e, 0x42), "NVME_IOCTL_SUBMIT_IO"),
    (Cmd::TypeNr(0x4e, 0x43), "NVME_IOCTL_IO_CMD"),
    (Cmd::TypeNr(0x4e, 0x44), "NVME_IOCTL_RESET"),
    (Cmd::TypeNr(0x4e, 0x45), "NVME_IOCTL_SUBSYS_RESET"),
    (Cmd::TypeNr(0x4e, 0x46), "NVME_IOCTL_RESCAN"),
    (Cmd::TypeNr(0x4e, 0x47), "NVME_IOCTL_ADMIN64_CMD"),
    (Cmd::TypeNr(0x4e, 0x48), "NVME_IOCTL_IO64_CMD"),
    (Cmd::TypeNr(0x4e, 0x49), "NVME_IOCTL_IO64_CMD_VEC"),
    (Cmd::TypeNr(0x70, 200), "IOC_PR_REGISTER"),
    (Cmd::TypeNr(0x70, 201), "IOC_PR_RESERVE"),
    (Cmd::TypeNr(0x70, 202), "IOC_PR_RELEASE"),
    (Cmd::TypeNr(0x70, 203), "IOC_PR_PREEMPT"),
    (Cmd::TypeNr(0x70, 204), "IOC_PR_PREEMPT_ABORT"),
    (Cmd::TypeNr(0x70, 205), "IOC_PR_CLEAR"),
    // Opal self-encrypting drives (linux/sed-opal.h): what changes data, keys
    // or locking. GET_STATUS (236), GET_LR_STATUS (237), GET_GEOMETRY (238)
    // and DISCOVERY (239) read and pass.
    (Cmd::TypeNr(0x70, 220), "IOC_OPAL_SAVE"),
    (Cmd::TypeNr(0x70, 221), "IOC_OPAL_LOCK_UNLOCK"),
    (Cmd::TypeNr(0x70, 222), "IOC_OPAL_TAKE_OWNERSHIP"),
    (Cmd::TypeNr(0x70, 223), "IOC_OPAL_ACTIVATE_LSP"),
    (Cmd::TypeNr(0x70, 224), "IOC_OPAL_SET_PW"),
    (Cmd::TypeNr(0x70, 225), "IOC_OPAL_ACTIVATE_USR"),
    (Cmd::TypeNr(0x70, 226), "IOC_OPAL_REVERT_TPR"),
    (Cmd::TypeNr(0x70, 227), "IOC_OPAL_LR_SETUP"),
    (Cmd::TypeNr(0x70, 228), "IOC_OPAL_ADD_USR_TO_LR"),
    (Cmd::TypeNr(0x70, 229), "IOC_OPAL_ENABLE_DISABLE_MBR"),
    (Cmd::TypeNr(0x70, 230), "IOC_OPAL_ERASE_LR"),
    (Cmd::TypeNr(0x70, 231), "IOC_OPAL_SECURE_ERASE_LR"),
    (Cmd::TypeNr(0x70, 232), "IOC_OPAL_PSID_REVERT_TPR"),
    (Cmd::TypeNr(0x70, 233), "IOC_OPAL_MBR_DONE"),
    (Cmd::TypeNr(0x70, 234), "IOC_OPAL_WRITE_SHADOW_MBR"),
    (Cmd::TypeNr(0x70, 235), "IOC_OPAL_GENERIC_TABLE_RW"),
    (Cmd::TypeNr(0x70, 240), "IOC_OPAL_REVERT_LSP"),
    (Cmd::TypeNr(0x70, 241), "IOC_OPAL_SET_SID_PW"),
];

/// The loop ioctls that bind a loop device to an open file, judged when that
/// file is a managed disk opened for writing (`loop_bind_rule` in
/// `bpf/guard.bpf.c`, not `write_ioctl()`: their target is the loop device).
pub const LOOP_BINDS: &[(Cmd, &str)] = &[
    (Cmd::Exact(0x4c00), "LOOP_SET_FD"),
    (Cmd::Exact(0x4c06), "LOOP_CHANGE_FD"),
    (Cmd::Exact(0x4c0a), "LOOP_CONFIGURE"),
];

/// The name of an ioctl command (`ioctl 0x<cmd>` when the tables lack it).
pub fn ioctl_name(cmd: u32) -> String {
    IOCTLS
        .iter()
        .chain(LOOP_BINDS)
        .find(|(m, _)| m.matches(cmd))
        .map_or_else(|| format!("ioctl 0x{cmd:x}"), |(_, n)| (*n).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ioctl_names() {
        assert_eq!(ioctl_name(0x2285), "SG_IO");
        assert_eq!(ioctl_name(0x1277), "BLKDISCARD");
        assert_eq!(ioctl_name(0xc048_4e43), "NVME_IOCTL_IO_CMD");
        assert_eq!(ioctl_name(0x4010_70c8), "IOC_PR_REGISTER");
        assert_eq!(ioctl_name(0xc010_1283), "BLKRESETZONE");
        assert_eq!(ioctl_name(0x1234), "ioctl 0x1234");
        assert_eq!(ioctl_name(0x2284), "SG_SCSI_RESET");
        assert_eq!(ioctl_name(0x031f), "HDIO_DRIVE_CMD");
        // _IOW('p', 232, struct opal_key): 0x4108_70e8
        assert_eq!(ioctl_name(0x4108_70e8), "IOC_OPAL_PSID_REVERT_TPR");
        assert_eq!(ioctl_name(0x4108_70e2), "IOC_OPAL_REVERT_TPR");
        // IOC_OPAL_GET_STATUS (_IOR('p', 236, ...)) reads: not refused
        assert_eq!(ioctl_name(0x8008_70ec), "ioctl 0x800870ec");
        // Exact rows only match their exact command.
        assert_eq!(ioctl_name(0x8000_1277), "ioctl 0x80001277");
        assert_eq!(ioctl_name(0x4c00), "LOOP_SET_FD");
        assert_eq!(ioctl_name(0x4c0a), "LOOP_CONFIGURE");
    }

    #[test]
    fn exact_rows_come_first_and_names_are_unique() {
        let first_typenr = IOCTLS
            .iter()
            .position(|(m, _)| matches!(m, Cmd::TypeNr(..)))
            .unwrap();
        assert!(IOCTLS[first_typenr..]
            .iter()
            .all(|(m, _)| matches!(m, Cmd::TypeNr(..))));
        let mut names: Vec<&str> = IOCTLS.iter().map(|(_, n)| *n).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), IOCTLS.len());
    }
}
