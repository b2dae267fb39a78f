//! The passthrough command rule: which SCSI (`SG_IO`) and NVMe admin
//! commands are read class, so that anyone who may open a managed disk can
//! send them (`sg_inq`, `sg_readcap`, `smartctl`, `nvme id-ctrl`,
//! `nvme smart-log` ...), while writes, format, sanitize, unknown and vendor
//! commands stay refused for callers that are not allow-listed.
//!
//! [`READ_CLASS`] is the source. `bpf/passthrough.h` carries the same rule as
//! a C switch for the kernel; the host test `tests/commands_host.rs` runs that
//! switch (`bpf/cmdclass.bpf.c`) for every opcode and service action and
//! checks it against [`read_class`]. Adding a command: one row here and one
//! `case` there.
//!
//! Here, in the filter's leaf crate, because an event's operation names
//! its command ([`crate::denial::Operation`]); the guard loads the rule.
//!
//! Not here: reading the command from the caller's memory and the verdict
//! (`bpf/guard.bpf.c`, `ag_file_ioctl_s`), which rule a kernel gets
//! ([`PassthroughRule`], chosen by the loader).

/// A command set (`AG_CMD_*` in `bpf/passthrough.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmdSet {
    /// A SCSI CDB sent with `SG_IO` (sg_io_hdr v3 on sd/sg, sg_io_v4 on bsg).
    Scsi = 1,
    /// An NVMe admin command (`NVME_IOCTL_ADMIN_CMD`, `NVME_IOCTL_ADMIN64_CMD`).
    NvmeAdmin = 2,
}

/// One read-class command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadCommand {
    /// Its command set.
    pub set: CmdSet,
    /// Its opcode (CDB byte 0; NVMe opcode).
    pub opcode: u8,
    /// For SCSI SERVICE ACTION IN: the service action (CDB byte 1, bits 0-4)
    /// that is read class; `None`: any.
    pub service_action: Option<u8>,
    /// Its name.
    pub name: &'static str,
}

const fn scsi(opcode: u8, name: &'static str) -> ReadCommand {
    ReadCommand {
        set: CmdSet::Scsi,
        opcode,
        service_action: None,
        name,
    }
}

const fn nvme(opcode: u8, name: &'static str) -> ReadCommand {
    ReadCommand {
        set: CmdSet::NvmeAdmin,
        opcode,
        service_action: None,
        name,
    }
}

/// The read class: everything else is refused to callers not allow-listed.
pub const READ_CLASS: &[ReadCommand] = &[
    scsi(0x00, "TEST UNIT READY"),
    scsi(0x03, "REQUEST SENSE"),
    scsi(0x08, "READ(6)"),
    scsi(0x12, "INQUIRY"),
    scsi(0x1a, "MODE SENSE(6)"),
    scsi(0x25, "READ CAPACITY(10)"),
    scsi(0x28, "READ(10)"),
    scsi(0x4d, "LOG SENSE"),
    scsi(0x5a, "MODE SENSE(10)"),
    scsi(0x88, "READ(16)"),
    ReadCommand {
        set: CmdSet::Scsi,
        opcode: 0x9e,
        service_action: Some(0x10),
        name: "READ CAPACITY(16)",
    },
    scsi(0xa0, "REPORT LUNS"),
    scsi(0xa3, "MAINTENANCE IN"),
    scsi(0xa8, "READ(12)"),
    nvme(0x02, "GET LOG PAGE"),
    nvme(0x06, "IDENTIFY"),
];

/// Commands that destroy or change a disk without writing a block, named in
/// events (they are refused like every command outside [`READ_CLASS`]; a
/// test pins that none of them ever becomes read class).
pub const DESTRUCTIVE: &[(CmdSet, u8, &str)] = &[
    (CmdSet::NvmeAdmin, 0x0d, "NAMESPACE MANAGEMENT"),
    (CmdSet::NvmeAdmin, 0x15, "NAMESPACE ATTACHMENT"),
    (CmdSet::NvmeAdmin, 0x80, "FORMAT NVM"),
    (CmdSet::NvmeAdmin, 0x81, "SECURITY SEND"),
    (CmdSet::NvmeAdmin, 0x84, "SANITIZE"),
    (CmdSet::Scsi, 0x04, "FORMAT UNIT"),
    (CmdSet::Scsi, 0x48, "SANITIZE"),
    (CmdSet::Scsi, 0xb5, "SECURITY PROTOCOL OUT"),
];

/// Whether command `opcode` (SCSI service action `sa`: CDB byte 1) of `set`
/// is read class.
pub fn read_class(set: CmdSet, opcode: u8, sa: u8) -> bool {
    READ_CLASS.iter().any(|c| {
        c.set == set && c.opcode == opcode && c.service_action.is_none_or(|s| s == sa & 0x1f)
    })
}

/// The name of a passthrough command seen in an event: `opcode 0x2a`, or its
/// name when it is a read-class one.
pub fn command_name(set: CmdSet, opcode: u8, sa: u8) -> String {
    match READ_CLASS.iter().find(|c| {
        c.set == set && c.opcode == opcode && c.service_action.is_none_or(|s| s == sa & 0x1f)
    }) {
        Some(c) => format!("opcode 0x{opcode:02x} ({})", c.name),
        None if set == CmdSet::Scsi && opcode == 0x9e => {
            format!("opcode 0x9e service action 0x{:02x}", sa & 0x1f)
        }
        None => match DESTRUCTIVE
            .iter()
            .find(|(s, op, _)| *s == set && *op == opcode)
        {
            Some((_, _, name)) => format!("opcode 0x{opcode:02x} ({name})"),
            None => format!("opcode 0x{opcode:02x}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_class_rule() {
        for op in [
            0x00, 0x03, 0x08, 0x12, 0x1a, 0x25, 0x28, 0x4d, 0x5a, 0x88, 0xa0, 0xa3, 0xa8,
        ] {
            assert!(read_class(CmdSet::Scsi, op, 0), "0x{op:02x}");
        }
        assert!(read_class(CmdSet::Scsi, 0x9e, 0x10));
        assert!(
            !read_class(CmdSet::Scsi, 0x9e, 0x12),
            "GET LBA STATUS is not listed"
        );
        // writes, WRITE SAME, UNMAP, FORMAT UNIT, SANITIZE, ATA passthrough, vendor
        for op in [
            0x0a, 0x2a, 0xaa, 0x8a, 0x41, 0x93, 0x42, 0x04, 0x48, 0x85, 0xa1, 0xa4, 0xc0,
        ] {
            assert!(!read_class(CmdSet::Scsi, op, 0), "0x{op:02x}");
        }
        assert!(read_class(CmdSet::NvmeAdmin, 0x06, 0));
        assert!(read_class(CmdSet::NvmeAdmin, 0x02, 0));
        for op in [0x80, 0x84, 0x01, 0x09, 0x0d, 0x10, 0x11] {
            assert!(!read_class(CmdSet::NvmeAdmin, op, 0), "0x{op:02x}");
        }
        assert_eq!(command_name(CmdSet::Scsi, 0x12, 0), "opcode 0x12 (INQUIRY)");
        assert_eq!(command_name(CmdSet::Scsi, 0x2a, 0), "opcode 0x2a");
        assert_eq!(
            command_name(CmdSet::NvmeAdmin, 0x84, 0),
            "opcode 0x84 (SANITIZE)"
        );
    }

    /// NVMe admin Format, Sanitize, Namespace Management and Attachment and
    /// Security Send (and the SCSI ones in [`DESTRUCTIVE`]) are never read
    /// class: a caller not allowed by a rule is refused them through the
    /// controller and generic nodes (the C rule is pinned to this table by
    /// tests/commands_host.rs).
    #[test]
    fn destructive_commands_are_not_read_class() {
        for op in [0x80u8, 0x84, 0x0d, 0x15, 0x81] {
            assert!(!read_class(CmdSet::NvmeAdmin, op, 0), "0x{op:02x}");
            assert!(
                DESTRUCTIVE
                    .iter()
                    .any(|(s, o, _)| *s == CmdSet::NvmeAdmin && *o == op),
                "0x{op:02x} has a name"
            );
        }
        for (set, op, name) in DESTRUCTIVE {
            for sa in 0..=255u8 {
                assert!(!read_class(*set, *op, sa), "{name} is read class");
            }
            assert!(command_name(*set, *op, 0).ends_with(&format!("({name})")));
        }
        assert_eq!(
            command_name(CmdSet::Scsi, 0x9e, 0x11),
            "opcode 0x9e service action 0x11"
        );
    }
}
