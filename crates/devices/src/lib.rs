//! Device access and discovery for asmguard.
//!
//! * [`devt`] (from asmguard-filter-types, its leaf home): [`KernelDev`], the one device-number type (`MAJ:MIN`, kernel and
//!   userspace encodings, sysfs `dev` files) of the whole workspace.
//! * [`blockdev`]: opening a block device or an image file, its sizes, and aligned
//!   `O_DIRECT` reads and verified writes of the label sector.
//! * [`sysfs`]: what `/sys/class/block` says (numbers, sizes, holders/slaves, dm).
//! * [`pattern`]: include/exclude rules and scan order.
//! * [`discovery`]: label sectors of all devices, grouped into disks; conflicts.
//! * [`labelling`]: label / rename / unlabel with the refusals.
//! * [`uevent`]: the kernel's own uevents (NETLINK_KOBJECT_UEVENT).
//! * [`udevdb`]: udev's identity properties of a device (serial, WWN, dm uuid/name).
//! * [`events`]: block device events from udev where udevd runs, else the kernel.

pub mod blockdev;
pub use asmguard_filter_types::devt;
pub mod discovery;
pub mod events;
pub mod holders;
pub mod labelling;
pub mod pattern;
pub mod sysfs;
pub mod udevdb;
pub mod uevent;
pub mod writer;

pub use blockdev::{DevError, Device, DeviceKind};
pub use devt::{DevtError, KernelDev};
