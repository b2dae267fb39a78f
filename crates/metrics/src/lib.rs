//! asmguard-metrics: per-disk block I/O latency from BPF tracepoints, exported
//! to Prometheus, and the `iostat` terminal view.
//!
//! - [`IoLat`] loads `bpf/iolat.bpf.c` (tp_btf, raw_tp fallback), keeps the set
//!   of traced disks and reads the histograms;
//! - [`Metrics`] is the `prometheus-client` registry: a collector reads the BPF
//!   maps at scrape time; the daemon adds disk names, labels, filter modes, the
//!   backend and the denied-write / discard counters;
//! - [`http::serve`] serves `/metrics` (default [`http::DEFAULT_LISTEN`]);
//! - [`iostat::iostat`] turns two [`Snapshot`]s into the Oracle-style view.
//!
//! Buckets and units: [`hist`]. Which requests the kernel stamps at issue:
//! [`stamps`].
//!
//! Feature `bpf` (default) builds the BPF program and [`IoLat`]; without it
//! (`default-features = false`) the crate is the exporter, the snapshot parser
//! and the scraping client only: no libbpf, no clang. asmguardctl needs none
//! of this: its `iostat` view is asmguard-iostat's, fed by the daemon's
//! `iostat` op.

#![deny(missing_docs)]

#[cfg(feature = "bpf")]
pub mod bpf;
pub mod classes;
pub mod error;
pub mod exporter;
pub mod http;
pub mod parse;
pub use asmguard_iostat::{hist, iostat, snapshot};
#[cfg(feature = "bpf")]
pub mod stamps;

pub use asmguard_devices::devt::{DevtError, KernelDev};
pub use asmguard_iostat::{
    DiskOpStats, IostatReport, IostatRow, Op, OpHist, RawEntry, Snapshot, NSLOTS,
};
#[cfg(feature = "bpf")]
pub use bpf::{hidden_path_key, AttachMode, IoLat, LoadOptions};
pub use error::Error;
pub use exporter::{
    CounterSource, Counters, DiscardSource, DiskInfo, HistSource, IoErrorKind, Metrics, SizeClass,
};
pub use parse::{FromPrometheusText, ParseError};
#[cfg(feature = "bpf")]
pub use stamps::{StatsBitFrom, TracerStamps};
