//! asmguard-iostat: the latency histograms as data, and the `iostat` view.
//!
//! - [`hist`]: the log2 slots of `bpf/iolat.h` and their Prometheus bounds;
//! - [`snapshot`]: every traced (disk, op) at one instant ([`Snapshot`]);
//! - [`iostat`](mod@iostat): two snapshots an interval apart, per disk and op,
//!   in the layout of Oracle's wait event histogram.
//!
//! Not for: reading the BPF maps, serving or parsing scrapes (asmguard-metrics).
//! `asmguardctl` links this crate alone: the daemon's `iostat` op sends a
//! [`Snapshot`] as JSON.

#![deny(missing_docs)]

pub mod hist;
pub mod iostat;
pub mod snapshot;

pub use hist::NSLOTS;
pub use iostat::{iostat, IostatReport, IostatRow};
pub use snapshot::{DiskOpStats, Op, OpHist, RawEntry, Snapshot, HIST_BYTES};
