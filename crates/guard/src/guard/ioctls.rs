//! The names of the ioctls the filter refuses ([`IOCTLS`]): the table lives
//! in [`asmguard_filter_types::ioctls`], beside the events that name them;
//! the decision is `write_ioctl()` in `bpf/ioctls.h`, pinned to the table by
//! the host test tests/commands_host.rs.

pub use asmguard_filter_types::ioctls::*;
