//! The on-disk formats asmguard reads and writes, as pure functions over byte slices.
//!
//! Nothing here does I/O and nothing here is `unsafe`: callers (the daemon, the CLI's
//! offline `inspect`, the reclaim engine) read the bytes with the right alignment and
//! hand them in. Every parser accepts input of any length without panicking and treats
//! what it cannot positively recognise as "unknown" (never as "free" or "blank").
//!
//! * [`label`]: the ASMLib/AFD label (`ORCLDISK` at byte 32, label at byte 40).
//! * [`kfbh`]: the 32-byte header of every ASM metadata block and its XOR checksum.
//! * [`header`]: the ASM disk header (kfbh + kfdhdb) in AU 0, block 0.
//! * [`alloc`]: allocation table and free space table blocks; free AUs as extents.
//! * [`probe`]: what a disk already holds (partition tables, filesystems, LVM, ASM...).
//! * [`synth`]: builders for synthetic ASM disks, used by tests and benchmarks only.

#![forbid(unsafe_code)]

pub mod alloc;
pub mod bytes;
pub mod header;
pub mod kfbh;
pub mod label;
pub mod probe;
pub mod synth;

pub use header::DiskHeader;
pub use label::{Label, LabelError, LabelState};
pub use probe::{probe, Signature, SignatureKind};
