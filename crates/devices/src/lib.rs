//! Device access and discovery for asmguard.
//!
//! * [`blockdev`]: opening a block device or an image file, its sizes, and aligned
//!   `O_DIRECT` reads and verified writes of the label sector.

pub mod blockdev;

pub use blockdev::{DevError, Device, DeviceKind};
