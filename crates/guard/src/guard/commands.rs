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
//! Not here: reading the command from the caller's memory and the verdict
//! (`bpf/guard.bpf.c`, `ag_file_ioctl_s`), which rule a kernel gets
//! ([`PassthroughRule`], chosen by the loader).

pub use asmguard_filter_types::commands::*;
pub use asmguard_filter_types::PassthroughRule;

/// The compiled `bpf/cmdclass.bpf.c` (the C rule alone, for the host test
/// that compares it with [`READ_CLASS`]).
#[doc(hidden)]
pub static CMDCLASS_OBJ: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/cmdclass.bpf.o"));
