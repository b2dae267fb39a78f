//! Thin-provisioning reclaim for ASM disks.
//!
//! Oracle ASM never issues TRIM/UNMAP. This crate turns the free allocation units
//! an ASM disk's allocation table (AT) positively reports into byte ranges and gives
//! them back to the array:
//!
//! * [`plan`]: the AT blocks of every stride (the first AU of each holds its
//!   own) -> free AU extents (conservative: only V = 0 entries of AT blocks whose
//!   kfbh type, checksum, block number, disk number and `aunum` all hold; never
//!   AU 0, AU 1, AU 11, voting-file AUs, the spfile AU, the first AU of any
//!   stride, nor AUs at or past `dsksize`), or everything above `dsksize`
//!   (`--above-size`) -> byte ranges aligned to the device's discard
//!   granularity/alignment and split by `discard_max_bytes`, with a plan hash.
//! * [`caps`]: whether the device takes discards (queue limits, SCSI provisioning
//!   mode) or write-zeroes, read from sysfs.
//! * [`exec`]: BLKDISCARD / BLKZEROOUT with a rate limit, progress callbacks,
//!   cancellation and a resumable checkpoint file (next offset + plan hash).
//! * [`safety`]: refuse while the disk group may be mounted: a process on this host
//!   holding a path of the disk open for writing, or the ASM heartbeat block / disk
//!   header mount stamp changing during a watch window (other RAC nodes).
//! * [`sentinel`]: the stop rule: before each chunk the heartbeat block, the mount
//!   stamp and the AT blocks covering the chunk (or, above the disk size, the
//!   header's `dsksize`) are read again; any change stops the run before the next
//!   discard.
//! * [`pace`]: the adaptive rate: the disk's p99 (the tracer's histograms)
//!   against a multiple of its value before the run halves the rate; `--rate`
//!   is the ceiling.
//! * [`counters`]: `asmguard_discard_bytes_total{label,source}` values.
//! * [`job`]: one `reclaim` request's phases (claim, plan, writers, heartbeat
//!   watch, execute), with what only the daemon has behind [`job::Host`].

pub mod caps;
pub mod counters;
pub mod disk;
pub mod exec;
pub mod job;
pub mod pace;
pub mod plan;
pub mod safety;
pub mod sentinel;

pub use caps::{Caps, Method};
pub use exec::{execute, Checkpoint, ExecOptions, Outcome};
pub use plan::{plan_disk, AtScan, Layout, Plan, Range};
