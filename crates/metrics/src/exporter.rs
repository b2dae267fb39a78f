//! The Prometheus side: a `prometheus-client` registry whose collector reads
//! its sources at scrape time: the BPF histograms ([`HistSource`]) and the
//! daemon's counters ([`CounterSource`]: the filter's kernel counters,
//! reclaim's, the backend). A [`CounterSource`] is the only way counters and
//! states get in: the daemon's reads its live counters, tests and the
//! standalone exporter use a fixed [`Counters`] value. Nothing is copied or
//! kept between scrapes; the daemon only describes its disks
//! ([`Metrics::set_disk`]). Each family is one function in `FAMILIES`.
//!
//! Not for: serving HTTP ([`crate::http`]) or parsing scrapes ([`crate::snapshot`]).
//!
//! Metric names (DESIGN.md, "Metrics"):
//!
//! | name | type | labels |
//! |---|---|---|
//! | `asmguard_io_latency_seconds` | histogram | device, label, op, size |
//! | `asmguard_path_io_latency_seconds` | histogram | disk, path, op |
//! | `asmguard_io_queue_seconds` | histogram | device, label, op |
//! | `asmguard_io_bytes_total` | counter | device, label, op, size |
//! | `asmguard_io_dropped_total` | counter | - |
//! | `asmguard_io_errors_total` | counter | disk, path, kind |
//! | `asmguard_writes_denied_total` | counter | label, hook |
//! | `asmguard_discard_bytes_total` | counter | label, source |
//! | `asmguard_disk_info` | gauge (1) | label, device, paths, logical_sector, physical_sector, diskgroup |
//! | `asmguard_filter_mode` | gauge (1) | label, mode |
//! | `asmguard_backend_info` | gauge (1) | backend |
//! | `asmguard_protected` | gauge (0/1) | - |
//! | `asmguard_filter_events_dropped_total` | counter | - |
//! | `asmguard_pins_replaced_total` | counter | - |
//! | `asmguard_labels_lost_total` | counter | label |
//! | `asmguard_asm_header_unmanaged` | gauge (1) | device |
//! | `asmguard_label_conflict` | gauge (1) | label, device, role |
//! | `asmguard_disk_exposed` | gauge (1) | disk |
//! | `asmguard_container_cgroups` | gauge | container |
//! | `asmguard_container_stalled` | gauge (0/1) | container |
//! | `asmguard_oracle_binary_allowed` | gauge (1) | home, binary, uid |

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, RwLock};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

#[cfg(feature = "bpf")]
use crate::bpf::IoLat;
use crate::error::Error;
use crate::hist::prometheus_buckets;
use crate::snapshot::RawEntry;
use crate::snapshot::{DiskOpStats, Op, OpHist, Snapshot};
use crate::KernelDev;
use asmguard_filter_types::{Applied, BackendName, Hook};

/// Where the collector gets the histograms from at scrape time.
pub trait HistSource: Send + Sync + std::fmt::Debug + 'static {
    /// Every (disk, op), cumulative.
    fn read(&self) -> Result<Vec<RawEntry>, Error>;
    /// Completions the kernel side could not count.
    fn dropped(&self) -> u64 {
        0
    }
    /// Every (disk, op) per I/O size class, cumulative; `None`: a source that
    /// does not tell sizes apart (its series have no `size` label).
    fn read_sized(&self) -> Result<Vec<(RawEntry, Option<SizeClass>)>, Error> {
        Ok(self.read()?.into_iter().map(|e| (e, None)).collect())
    }
    /// Errored completions per traced device (dev_t) and kind, cumulative.
    fn errors(&self) -> Result<Vec<(u32, IoErrorKind, u64)>, Error> {
        Ok(Vec::new())
    }
}

pub use crate::classes::{IoErrorKind, SizeClass};

#[cfg(feature = "bpf")]
impl HistSource for IoLat {
    fn read(&self) -> Result<Vec<RawEntry>, Error> {
        IoLat::read(self)
    }
    fn read_sized(&self) -> Result<Vec<(RawEntry, Option<SizeClass>)>, Error> {
        Ok(IoLat::read_sized(self)?
            .into_iter()
            .map(|(e, s)| (e, Some(s)))
            .collect())
    }
    fn errors(&self) -> Result<Vec<(u32, IoErrorKind, u64)>, Error> {
        IoLat::read_errors(self)
    }
    fn dropped(&self) -> u64 {
        IoLat::dropped(self)
    }
}

/// What the daemon knows about a managed disk.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DiskInfo {
    /// Kernel device name of the disk the I/O is counted on (`dm-3`, `sdb`,
    /// `nvme0n1`): the series' `device`, whatever device the requests are
    /// traced on.
    pub device: String,
    /// Kernel name of the request-based path this traced device is when it is
    /// not the disk itself (`sdc` under dm-multipath, `nvme0c1n1` under an NVMe
    /// head), else empty. The histograms of every traced device with one
    /// `device` and `label` roll up into that disk's series.
    pub path: String,
    /// asmguard label (empty: none).
    pub label: String,
    /// Every path of the disk (`/dev/asmguard/disks/DATA1`, `/dev/sdc`, ...).
    pub paths: Vec<String>,
    /// Logical sector size in bytes.
    pub logical_sector: u32,
    /// Physical sector size in bytes.
    pub physical_sector: u32,
    /// The disk group named in the disk's ASM header (`DATA`); empty when the
    /// disk has no ASM header (only an asmguard label, or not yet in a group).
    pub diskgroup: String,
}

/// `source` label of `asmguard_discard_bytes_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DiscardSource {
    /// Discards Oracle issued and the filter let through.
    Oracle,
    /// Discards asmguard's reclaimer issued for free allocation units.
    Reclaim,
}

impl DiscardSource {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            DiscardSource::Oracle => "oracle",
            DiscardSource::Reclaim => "reclaim",
        }
    }
}

/// The daemon's counters and states at one scrape: the write filter's (from
/// the kernel's exact counters), reclaim's, and the backend.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// The write-filter backend (`lsm`, `fmod_ret`, `cgroup_device`,
    /// `none`), if known.
    pub backend: Option<BackendName>,
    /// label -> filter mode as applied (`enforce`, `audit`, `off`,
    /// `UNPROTECTED`).
    pub filter_modes: BTreeMap<String, Applied>,
    /// (label, hook) -> denied writes.
    pub denied: BTreeMap<(String, Hook), u64>,
    /// (label, source) -> discarded bytes.
    pub discard: BTreeMap<(String, DiscardSource), u64>,
    /// Filter events the kernel could not queue (the denials are still counted).
    pub events_dropped: u64,
    /// Pinned links found at a filter start not to be the daemon's (replaced
    /// while no daemon ran) and replaced by its own, since the daemon started.
    pub pins_replaced: u64,
    /// label -> times a managed disk lost that label to a write the daemon
    /// did not make (another host, or a writer the filter let through).
    pub labels_lost: BTreeMap<String, u64>,
    /// Devices with an ASM label header the daemon does not manage.
    pub unmanaged: Vec<String>,
    /// The claimants of labels in conflict: (label, device, role), role
    /// `kept` (had it first, still used), `newcomer` (never linked or
    /// presented) or `unresolved` (none known first: none used).
    pub conflicts: Vec<(String, String, String)>,
    /// Protected disks a process writes through a shared-writable mapping
    /// made before protection (by label).
    pub exposed: Vec<String>,
    /// container -> the cgroups its patterns match now (0: not running).
    pub container_cgroups: BTreeMap<String, u64>,
    /// container -> 1 when its files did not answer in time at its last
    /// resolution (it keeps its last good one), else 0.
    pub container_stalled: BTreeMap<String, u64>,
    /// The Oracle home binaries the filter allows, (home, binary path, the
    /// owner uid a process running it must have).
    pub oracle_binaries: Vec<(String, String, u32)>,
}

/// Where the collector gets [`Counters`] from at scrape time (the daemon reads
/// its filter and reclaim counters then; nothing copies them in between).
pub trait CounterSource: Send + Sync + std::fmt::Debug + 'static {
    /// The counters now; `io` is this scrape's histograms (the bytes Oracle
    /// discarded derive from them).
    fn counters(&self, io: &Snapshot) -> Counters;
}

/// A fixed set of values is a source too (tests, the standalone exporter,
/// which has no filter: `Counters::default()`).
impl CounterSource for Counters {
    fn counters(&self, _io: &Snapshot) -> Counters {
        self.clone()
    }
}

impl Counters {
    /// With the write-filter backend `backend`.
    pub fn with_backend(mut self, backend: BackendName) -> Counters {
        self.backend = Some(backend);
        self
    }

    /// With `label`'s filter mode.
    pub fn with_mode(mut self, label: &str, mode: Applied) -> Counters {
        self.filter_modes.insert(label.to_string(), mode);
        self
    }

    /// With `n` denied writes of (label, hook).
    pub fn with_denied(mut self, label: &str, hook: Hook, n: u64) -> Counters {
        self.denied.insert((label.to_string(), hook), n);
        self
    }

    /// With `bytes` discarded on `label` by `source`.
    pub fn with_discard(mut self, label: &str, source: DiscardSource, bytes: u64) -> Counters {
        self.discard.insert((label.to_string(), source), bytes);
        self
    }
}

#[derive(Debug, Default)]
struct State {
    disks: BTreeMap<KernelDev, DiskInfo>,
}

#[derive(Debug)]
struct Shared {
    state: RwLock<State>,
    source: RwLock<Option<Arc<dyn HistSource>>>,
    counters: RwLock<Arc<dyn CounterSource>>,
    /// Names of disks the daemon did not describe (traced with `--all`),
    /// resolved once from /sys/dev/block.
    sysfs_names: Mutex<HashMap<KernelDev, String>>,
    /// sysfs (the caller's `Paths::sys`), where those names are read.
    sys: std::path::PathBuf,
}

impl Shared {
    fn names(&self, state: &State, dev: KernelDev) -> (String, String) {
        if let Some(d) = state.disks.get(&dev) {
            return (d.device.clone(), d.label.clone());
        }
        let mut cache = self.sysfs_names.lock().unwrap_or_else(|e| e.into_inner());
        let name = cache.entry(dev).or_insert_with(|| {
            asmguard_devices::sysfs::name_of(&self.sys, dev).unwrap_or_else(|| dev.to_string())
        });
        (name.clone(), String::new())
    }

    /// The `disk` and `path` labels of a traced device: the disk's label (its
    /// device name when it has none), and the path's kernel name (the
    /// device's own when it is the disk itself).
    fn disk_path(&self, state: &State, dev: KernelDev) -> (String, String) {
        let (device, label) = self.names(state, dev);
        let path = match state.disks.get(&dev) {
            Some(d) if !d.path.is_empty() => d.path.clone(),
            _ => asmguard_devices::sysfs::name_of(&self.sys, dev).unwrap_or_else(|| device.clone()),
        };
        (if label.is_empty() { device } else { label }, path)
    }

    /// Errored completions per (disk, path, kind); a failed map read shows as
    /// no errors.
    fn errors(&self) -> Vec<((String, String, IoErrorKind), u64)> {
        let source = self
            .source
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let Some(raw) = source.and_then(|s| s.errors().ok()) else {
            return Vec::new();
        };
        let state = self.state.read().unwrap_or_else(|e| e.into_inner());
        let mut out: BTreeMap<(String, String, IoErrorKind), u64> = BTreeMap::new();
        for (dev, kind, n) in raw {
            let (disk, path) = self.disk_path(&state, KernelDev::from_raw(dev));
            *out.entry((disk, path, kind)).or_default() += n;
        }
        out.into_iter().collect()
    }

    /// The BPF histograms with names, as a snapshot.
    fn snapshot(&self) -> Result<Snapshot, Error> {
        self.read_io().map(|r| r.snap)
    }

    /// The BPF histograms with names: rolled up per disk (the snapshot, size
    /// classes added up), per disk and size class, and per path of the disks
    /// traced on their paths (`DiskInfo::path`: the snapshot's `paths`, and
    /// the path series keyed by `disk`, `path` and op made of them).
    fn read_io(&self) -> Result<IoRead, Error> {
        let source = self
            .source
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let Some(source) = source else {
            return Ok(IoRead::default());
        };
        let raw = source.read_sized()?;
        let state = self.state.read().unwrap_or_else(|e| e.into_inner());
        // the traced paths of one disk roll up into the disk's (device, op):
        // each request is issued on exactly one of them, so counted once
        type Key = (String, String, Op);
        let mut disks: BTreeMap<Key, OpHist> = BTreeMap::new();
        let mut sized: BTreeMap<(Key, Option<SizeClass>), OpHist> = BTreeMap::new();
        // per (device, label, path, op): the snapshot's paths, and the path
        // series made of them
        let mut snap_paths: BTreeMap<(String, String, String, Op), OpHist> = BTreeMap::new();
        for (e, size) in raw {
            let dev = KernelDev::from_raw(e.dev);
            let (device, label) = self.names(&state, dev);
            if let Some(d) = state.disks.get(&dev).filter(|d| !d.path.is_empty()) {
                let key = (device.clone(), label.clone(), d.path.clone(), e.op);
                snap_paths.entry(key).or_default().add(&e.hist);
            }
            let key = (device, label, e.op);
            sized.entry((key.clone(), size)).or_default().add(&e.hist);
            disks.entry(key).or_default().add(&e.hist);
        }
        let mut snap = Snapshot {
            entries: disks
                .into_iter()
                .map(|((device, label, op), hist)| DiskOpStats {
                    device,
                    label,
                    path: String::new(),
                    op,
                    hist,
                })
                .collect(),
            paths: snap_paths
                .into_iter()
                .map(|((device, label, path, op), hist)| DiskOpStats {
                    device,
                    label,
                    path,
                    op,
                    hist,
                })
                .collect(),
        };
        snap.sort();
        let sized = sized
            .into_iter()
            .map(|((key, size), hist)| {
                let mut labels = disk_labels(&key);
                if let Some(size) = size {
                    labels.push(("size", size.as_str().to_string()));
                }
                (labels, hist)
            })
            .collect();
        // `disk`: the disk's label, its device name when it has none
        let paths = snap
            .paths
            .iter()
            .map(|e| {
                let disk = if e.label.is_empty() {
                    &e.device
                } else {
                    &e.label
                };
                let labels = vec![
                    ("disk", disk.clone()),
                    ("path", e.path.clone()),
                    ("op", e.op.as_str().to_string()),
                ];
                (labels, e.hist.clone())
            })
            .collect();
        Ok(IoRead { snap, sized, paths })
    }
}

/// The labels of a (disk, op) series: `device`, `label`, `op`.
fn disk_labels((device, label, op): &(String, String, Op)) -> Labels {
    vec![
        ("device", device.clone()),
        ("label", label.clone()),
        ("op", op.as_str().to_string()),
    ]
}

/// A series' label names and values.
type Labels = Vec<(&'static str, String)>;

/// One series' histograms with its labels.
type Series = (Labels, OpHist);

/// The histograms of one read of the source.
#[derive(Default)]
struct IoRead {
    /// Per (disk, op): what iostat shows.
    snap: Snapshot,
    /// Per (disk, op, size class).
    sized: Vec<Series>,
    /// Per (disk, path, op), for the disks traced on their paths.
    paths: Vec<Series>,
}

/// What one scrape encodes: read once, when Prometheus asks.
struct Scrape<'a> {
    io: Snapshot,
    sized: Vec<Series>,
    paths: Vec<Series>,
    labels: Vec<Labels>,
    dropped: u64,
    errors: Vec<((String, String, IoErrorKind), u64)>,
    disks: &'a BTreeMap<KernelDev, DiskInfo>,
    counters: Counters,
}

type Family = fn(&Scrape<'_>, &mut DescriptorEncoder) -> Result<(), std::fmt::Error>;

/// Every metric family, in scrape order: adding a metric is one function here.
const FAMILIES: &[Family] = &[
    io_latency,
    path_io_latency,
    io_queue,
    io_bytes,
    io_dropped,
    io_errors,
    disk_info,
    filter_mode,
    writes_denied,
    discard_bytes,
    backend_info,
    protected,
    filter_events_dropped,
    pins_replaced,
    labels_lost,
    asm_header_unmanaged,
    label_conflict,
    disk_exposed,
    container_cgroups,
    container_stalled,
    oracle_binary_allowed,
];

/// A histogram family: one histogram per (labels, hist) of `series`; `pick`
/// gives a histogram's sum in ns, count and slots.
fn histograms<'x>(
    enc: &mut DescriptorEncoder,
    (name, help): (&str, &str),
    series: impl Iterator<Item = (&'x Labels, &'x OpHist)>,
    pick: fn(&crate::OpHist) -> (u64, u64, &[u64; crate::NSLOTS]),
) -> Result<(), std::fmt::Error> {
    let mut m = enc.encode_descriptor(name, help, Some(&Unit::Seconds), MetricType::Histogram)?;
    for (l, h) in series {
        let (sum_ns, count, slots) = pick(h);
        m.encode_family(l)?.encode_histogram::<NoLabelSet>(
            sum_ns as f64 / 1e9,
            count,
            &prometheus_buckets(slots),
            None,
        )?;
    }
    Ok(())
}

fn io_latency(s: &Scrape<'_>, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    histograms(
        enc,
        (
            "asmguard_io_latency",
            "Device time of block I/Os (issue to completion), per disk, operation and size class (single: at most single_block_bytes)",
        ),
        s.sized.iter().map(|(l, h)| (l, h)),
        |h| (h.lat_sum_ns, h.count(), &h.lat),
    )
}

fn path_io_latency(s: &Scrape<'_>, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    histograms(
        enc,
        (
            "asmguard_path_io_latency",
            "Device time of block I/Os per path of a disk traced on its paths (dm-multipath, NVMe)",
        ),
        s.paths.iter().map(|(l, h)| (l, h)),
        |h| (h.lat_sum_ns, h.count(), &h.lat),
    )
}

fn io_queue(s: &Scrape<'_>, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    histograms(
        enc,
        (
            "asmguard_io_queue",
            "Queue time of block I/Os (request set up to issue to the driver), per disk and operation",
        ),
        s.labels.iter().zip(s.io.entries.iter().map(|e| &e.hist)),
        |h| (h.queue_sum_ns, h.queue_count(), &h.queue),
    )
}

fn io_bytes(s: &Scrape<'_>, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    let mut m = enc.encode_descriptor(
        "asmguard_io_bytes",
        "Bytes of completed block I/Os, per disk, operation and size class",
        None,
        MetricType::Counter,
    )?;
    for (l, h) in &s.sized {
        m.encode_family(l)?
            .encode_counter::<NoLabelSet, _, u64>(&h.bytes, None)?;
    }
    Ok(())
}

fn io_dropped(s: &Scrape<'_>, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    enc.encode_descriptor(
        "asmguard_io_dropped",
        "I/Os of traced disks that could not be tracked (in-flight map insert failed)",
        None,
        MetricType::Counter,
    )?
    .encode_counter::<NoLabelSet, _, u64>(&s.dropped, None)
}

fn io_errors(s: &Scrape<'_>, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    let mut m = enc.encode_descriptor(
        "asmguard_io_errors",
        "Block I/Os that completed with an error, per disk, path and kind (not latency samples)",
        None,
        MetricType::Counter,
    )?;
    for ((disk, path, kind), n) in &s.errors {
        m.encode_family(&[
            ("disk", disk.as_str()),
            ("path", path.as_str()),
            ("kind", kind.as_str()),
        ])?
        .encode_counter::<NoLabelSet, _, u64>(n, None)?;
    }
    Ok(())
}

fn disk_info(s: &Scrape<'_>, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    let mut m = enc.encode_descriptor(
        "asmguard_disk_info",
        "Managed disks: label, device, paths, sector sizes and the disk group of the ASM header (value always 1)",
        None,
        MetricType::Gauge,
    )?;
    // one disk traced on several paths is described once
    let mut seen = std::collections::BTreeSet::new();
    for d in s.disks.values() {
        if !seen.insert((d.label.as_str(), d.device.as_str())) {
            continue;
        }
        let paths = d.paths.join(",");
        let logical = d.logical_sector.to_string();
        let physical = d.physical_sector.to_string();
        let l = [
            ("label", d.label.as_str()),
            ("device", d.device.as_str()),
            ("paths", paths.as_str()),
            ("logical_sector", logical.as_str()),
            ("physical_sector", physical.as_str()),
            ("diskgroup", d.diskgroup.as_str()),
        ];
        m.encode_family(&l)?.encode_gauge(&1i64)?;
    }
    Ok(())
}

/// A family with two labels: a counter of each (a, b), or an info gauge
/// (value 1) when `values` is `None`.
fn two_labels<'x>(
    enc: &mut DescriptorEncoder,
    (name, help, kind): (&str, &str, MetricType),
    labels: [&'static str; 2],
    rows: impl Iterator<Item = (&'x str, &'x str, u64)>,
) -> Result<(), std::fmt::Error> {
    let mut m = enc.encode_descriptor(name, help, None, kind)?;
    for (a, b, n) in rows {
        let l = [(labels[0], a), (labels[1], b)];
        let mut f = m.encode_family(&l)?;
        match kind {
            MetricType::Counter => f.encode_counter::<NoLabelSet, _, u64>(&n, None)?,
            _ => f.encode_gauge(&(n as i64))?,
        }
    }
    Ok(())
}

fn filter_mode(s: &Scrape<'_>, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    two_labels(
        enc,
        (
            "asmguard_filter_mode",
            "Filter mode of each managed label (enforce, audit, off, or fenced while a reclaim runs on it; value always 1)",
            MetricType::Gauge,
        ),
        ["label", "mode"],
        s.counters
            .filter_modes
            .iter()
            .map(|(l, m)| (l.as_str(), m.as_str(), 1)),
    )
}

fn writes_denied(s: &Scrape<'_>, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    two_labels(
        enc,
        (
            "asmguard_writes_denied",
            "Writes to managed disks denied by the filter, per label and hook",
            MetricType::Counter,
        ),
        ["label", "hook"],
        s.counters
            .denied
            .iter()
            .map(|((l, h), n)| (l.as_str(), h.as_str(), *n)),
    )
}

fn discard_bytes(s: &Scrape<'_>, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    two_labels(
        enc,
        (
            "asmguard_discard_bytes",
            "Bytes discarded on managed disks, per label and source (oracle or reclaim)",
            MetricType::Counter,
        ),
        ["label", "source"],
        s.counters
            .discard
            .iter()
            .map(|((l, src), n)| (l.as_str(), src.as_str(), *n)),
    )
}

fn backend_info(s: &Scrape<'_>, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    let mut m = enc.encode_descriptor(
        "asmguard_backend_info",
        "The write-filter backend in use (lsm or cgroup_device; value always 1)",
        None,
        MetricType::Gauge,
    )?;
    if let Some(b) = &s.counters.backend {
        m.encode_family(&[("backend", b.as_str())])?
            .encode_gauge(&1i64)?;
    }
    Ok(())
}

fn protected(s: &Scrape<'_>, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    let on = s.counters.backend.is_some_and(|b| b != BackendName::None);
    enc.encode_descriptor(
        "asmguard_protected",
        "1 while a write filter protects the managed disks (lsm, fmod_ret or cgroup_device), \
         0 when none could load or it is disabled",
        None,
        MetricType::Gauge,
    )?
    .encode_gauge(&i64::from(on))
}

fn filter_events_dropped(
    s: &Scrape<'_>,
    enc: &mut DescriptorEncoder,
) -> Result<(), std::fmt::Error> {
    enc.encode_descriptor(
        "asmguard_filter_events_dropped",
        "Filter events the kernel could not queue for the daemon (ring buffer full); \
         asmguard_writes_denied_total still counts those denials",
        None,
        MetricType::Counter,
    )?
    .encode_counter::<NoLabelSet, _, u64>(&s.counters.events_dropped, None)
}

fn pins_replaced(s: &Scrape<'_>, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    enc.encode_descriptor(
        "asmguard_pins_replaced",
        "Pinned filter links found at a start not to be what asmguardd pinned \
         (replaced while no daemon ran: writes may have landed) and replaced",
        None,
        MetricType::Counter,
    )?
    .encode_counter::<NoLabelSet, _, u64>(&s.counters.pins_replaced, None)
}

fn labels_lost(s: &Scrape<'_>, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    let mut m = enc.encode_descriptor(
        "asmguard_labels_lost",
        "Times a managed disk lost its label to a write asmguardd did not make \
         (another host, or a writer the filter let through), per label",
        None,
        MetricType::Counter,
    )?;
    for (label, n) in &s.counters.labels_lost {
        m.encode_family(&[("label", label.as_str())])?
            .encode_counter::<NoLabelSet, _, u64>(n, None)?;
    }
    Ok(())
}

fn asm_header_unmanaged(
    s: &Scrape<'_>,
    enc: &mut DescriptorEncoder,
) -> Result<(), std::fmt::Error> {
    let mut m = enc.encode_descriptor(
        "asmguard_asm_header_unmanaged",
        "Devices with an ASM label header (ORCLDISK) asmguardd does not manage: not \
         protected, and blkid, udev and ASM may still see a label (value always 1; \
         asmguardctl lsdsk says why)",
        None,
        MetricType::Gauge,
    )?;
    for d in &s.counters.unmanaged {
        m.encode_family(&[("device", d.as_str())])?
            .encode_gauge(&1i64)?;
    }
    Ok(())
}

fn label_conflict(s: &Scrape<'_>, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    let mut m = enc.encode_descriptor(
        "asmguard_label_conflict",
        "Devices carrying a label another device carries too (value always 1): role kept \
         (had it first and keeps its link and nodes), newcomer (never linked or presented), \
         unresolved (none known first: none used)",
        None,
        MetricType::Gauge,
    )?;
    for (label, device, role) in &s.counters.conflicts {
        m.encode_family(&[
            ("label", label.as_str()),
            ("device", device.as_str()),
            ("role", role.as_str()),
        ])?
        .encode_gauge(&1i64)?;
    }
    Ok(())
}

fn disk_exposed(s: &Scrape<'_>, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    let mut m = enc.encode_descriptor(
        "asmguard_disk_exposed",
        "Protected disks a process still writes through a shared-writable mapping made \
         before protection (value always 1, gone with the process; asmguardctl status \
         names it)",
        None,
        MetricType::Gauge,
    )?;
    for d in &s.counters.exposed {
        m.encode_family(&[("disk", d.as_str())])?
            .encode_gauge(&1i64)?;
    }
    Ok(())
}

fn container_cgroups(s: &Scrape<'_>, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    let mut m = enc.encode_descriptor(
        "asmguard_container_cgroups",
        "Cgroups a configured container's patterns match now, per container \
         (0: not running; its rule covers no task)",
        None,
        MetricType::Gauge,
    )?;
    for (name, n) in &s.counters.container_cgroups {
        m.encode_family(&[("container", name.as_str())])?
            .encode_gauge(&(*n as i64))?;
    }
    Ok(())
}

fn container_stalled(s: &Scrape<'_>, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    let mut m = enc.encode_descriptor(
        "asmguard_container_stalled",
        "1 when a configured container's files (its /etc/passwd, /etc/group) did not \
         answer in time at its last resolution: it keeps its last good one",
        None,
        MetricType::Gauge,
    )?;
    for (name, n) in &s.counters.container_stalled {
        m.encode_family(&[("container", name.as_str())])?
            .encode_gauge(&(*n as i64))?;
    }
    Ok(())
}

fn oracle_binary_allowed(
    s: &Scrape<'_>,
    enc: &mut DescriptorEncoder,
) -> Result<(), std::fmt::Error> {
    let mut m = enc.encode_descriptor(
        "asmguard_oracle_binary_allowed",
        "An Oracle home binary the write filter allows when run by its owner uid \
         (oracle_homes: bin/oracle, and ocssd.bin, crsd.bin in the Grid home)",
        None,
        MetricType::Gauge,
    )?;
    for (home, binary, uid) in &s.counters.oracle_binaries {
        let uid = uid.to_string();
        m.encode_family(&[
            ("home", home.as_str()),
            ("binary", binary.as_str()),
            ("uid", uid.as_str()),
        ])?
        .encode_gauge(&1i64)?;
    }
    Ok(())
}

/// The collector registered with the registry: reads everything at scrape time.
#[derive(Debug)]
struct IoCollector(Arc<Shared>);

impl Collector for IoCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        // A failed map read shows as missing histograms, not as a failed scrape.
        let IoRead {
            snap: io,
            sized,
            paths,
        } = self.0.read_io().unwrap_or_default();
        let labels = io
            .entries
            .iter()
            .map(|e| disk_labels(&(e.device.clone(), e.label.clone(), e.op)))
            .collect();
        let dropped = self
            .0
            .source
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map_or(0, |s| s.dropped());
        let source = self
            .0
            .counters
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let counters = source.counters(&io);
        let errors = self.0.errors();
        let state = self.0.state.read().unwrap_or_else(|e| e.into_inner());
        let scrape = Scrape {
            io,
            sized,
            paths,
            labels,
            dropped,
            errors,
            disks: &state.disks,
            counters,
        };
        for family in FAMILIES {
            family(&scrape, &mut encoder)?;
        }
        Ok(())
    }
}

/// The exporter's state and registry; cheap to clone (one shared inner).
///
/// The daemon keeps one, describes disks with [`Metrics::set_disk`], gives it
/// its counters with [`Metrics::set_counter_source`], and serves it with
/// [`crate::http::serve`].
#[derive(Clone, Debug)]
pub struct Metrics {
    shared: Arc<Shared>,
    registry: Arc<Registry>,
    /// Size of the last scrape: the next one's buffer starts that large (a
    /// scrape of 1,000 disks is several MB; growing by doubling costs time).
    size_hint: Arc<std::sync::atomic::AtomicUsize>,
}

impl Metrics {
    /// An exporter with no histogram source yet ([`Metrics::set_source`]) and
    /// zero counters ([`Metrics::set_counter_source`]); `sys`: sysfs (the
    /// caller's `Paths::sys`), where undescribed disks' names are read.
    pub fn new(sys: &std::path::Path) -> Metrics {
        let shared = Arc::new(Shared {
            state: RwLock::default(),
            source: RwLock::new(None),
            counters: RwLock::new(Arc::new(Counters::default())),
            sysfs_names: Mutex::default(),
            sys: sys.to_path_buf(),
        });
        let mut registry = Registry::default();
        registry.register_collector(Box::new(IoCollector(shared.clone())));
        Metrics {
            shared,
            registry: Arc::new(registry),
            size_hint: Arc::default(),
        }
    }

    /// An exporter reading the histograms of `source` (usually an [`IoLat`]).
    /// `sys`: as for [`Metrics::new`].
    pub fn with_source(source: Arc<dyn HistSource>, sys: &std::path::Path) -> Metrics {
        let m = Metrics::new(sys);
        m.set_source(Some(source));
        m
    }

    /// Sets (or clears) the histogram source.
    pub fn set_source(&self, source: Option<Arc<dyn HistSource>>) {
        *self
            .shared
            .source
            .write()
            .unwrap_or_else(|e| e.into_inner()) = source;
    }

    /// Describes a disk (by the kernel dev_t its I/O is counted on). Replaces an
    /// earlier description.
    pub fn set_disk(&self, dev: KernelDev, info: DiskInfo) {
        self.state_mut().disks.insert(dev, info);
    }

    /// Forgets a disk.
    pub fn remove_disk(&self, dev: KernelDev) {
        self.state_mut().disks.remove(&dev);
    }

    /// Reads the daemon's counters from `source` at every scrape.
    pub fn set_counter_source(&self, source: Arc<dyn CounterSource>) {
        *self
            .shared
            .counters
            .write()
            .unwrap_or_else(|e| e.into_inner()) = source;
    }

    /// The histograms now, with device names and labels (for `iostat`).
    pub fn snapshot(&self) -> Result<Snapshot, Error> {
        self.shared.snapshot()
    }

    /// The scrape in OpenMetrics text format (ends with `# EOF`).
    pub fn encode_openmetrics(&self) -> String {
        use std::sync::atomic::Ordering;
        let hint = self.size_hint.load(Ordering::Relaxed);
        let mut out = String::with_capacity((hint + hint / 8).max(16 * 1024));
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        self.size_hint.store(out.len(), Ordering::Relaxed);
        out
    }

    /// The scrape in the Prometheus text format 0.0.4 (what `promtool check
    /// metrics` and scrapers without OpenMetrics read).
    pub fn encode_prometheus_text(&self) -> String {
        openmetrics_to_prometheus_text(&self.encode_openmetrics())
    }

    fn state_mut(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.shared.state.write().unwrap_or_else(|e| e.into_inner())
    }
}

/// Rewrites OpenMetrics text into the Prometheus text format 0.0.4: counter
/// families are named with their `_total` suffix in `# HELP` / `# TYPE`, and
/// `# UNIT` and `# EOF` go away. Samples are the same in both formats.
pub fn openmetrics_to_prometheus_text(om: &str) -> String {
    let counters: std::collections::HashSet<&str> = om
        .match_indices("# TYPE ")
        .filter_map(|(i, _)| {
            let line = &om[i + 7..];
            let line = &line[..line.find('\n').unwrap_or(line.len())];
            line.strip_suffix(" counter")
        })
        .collect();
    let mut out = String::with_capacity(om.len() + 64);
    let mut rest = om;
    while !rest.is_empty() {
        // copy sample lines in one piece, up to the next comment line
        if !rest.starts_with('#') {
            let mut end = rest.len();
            let mut from = 0;
            // memchr for '#', then check it starts a line
            while let Some(i) = rest[from..].find('#') {
                let at = from + i;
                if rest.as_bytes()[at - 1] == b'\n' {
                    end = at;
                    break;
                }
                from = at + 1;
            }
            out.push_str(&rest[..end]);
            rest = &rest[end..];
            continue;
        }
        let end = rest.find('\n').map_or(rest.len(), |i| i + 1);
        let line = rest[..end].trim_end_matches('\n');
        rest = &rest[end..];
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "]
            .into_iter()
            .find_map(|p| line.strip_prefix(p).map(|r| (p, r)));
        if let Some((prefix, r)) = meta {
            let name = r.split(' ').next().unwrap_or("");
            if counters.contains(name) {
                let _ = writeln!(out, "{prefix}{name}_total{}", &r[name.len()..]);
                continue;
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::{Op, OpHist};
    use crate::FromPrometheusText;
    use crate::NSLOTS;
    use asmguard_filter_types::Mode;

    #[derive(Debug)]
    struct Fake(Vec<RawEntry>);
    impl HistSource for Fake {
        fn read(&self) -> Result<Vec<RawEntry>, Error> {
            Ok(self.0.clone())
        }
    }

    fn entry(dev: u32, op: Op, slots: &[(usize, u64)], bytes: u64) -> RawEntry {
        let mut hist = OpHist {
            bytes,
            ..OpHist::default()
        };
        for &(k, n) in slots {
            hist.lat[k] = n;
            hist.queue[0] += n;
            hist.lat_sum_ns += n * crate::hist::slot_max_ns(k.min(NSLOTS - 2));
        }
        RawEntry { dev, op, hist }
    }

    #[derive(Debug)]
    struct FakeErrors(Vec<(u32, IoErrorKind, u64)>);
    impl HistSource for FakeErrors {
        fn read(&self) -> Result<Vec<RawEntry>, Error> {
            Ok(Vec::new())
        }
        fn errors(&self) -> Result<Vec<(u32, IoErrorKind, u64)>, Error> {
            Ok(self.0.clone())
        }
    }

    #[derive(Debug)]
    struct FakeSized(Vec<(RawEntry, SizeClass)>);
    impl HistSource for FakeSized {
        fn read(&self) -> Result<Vec<RawEntry>, Error> {
            unreachable!("the collector reads the size classes")
        }
        fn read_sized(&self) -> Result<Vec<(RawEntry, Option<SizeClass>)>, Error> {
            Ok(self.0.iter().map(|(e, s)| (e.clone(), Some(*s))).collect())
        }
    }

    /// Single-block and multiblock I/Os are two series of the latency and
    /// bytes families; the queue family, the snapshot and a scrape read back
    /// add them up.
    #[test]
    fn size_classes_are_series_of_their_own() {
        let d = KernelDev::new(8, 16).unwrap();
        let m = Metrics::with_source(
            Arc::new(FakeSized(vec![
                (
                    entry(d.raw(), Op::Read, &[(9, 20)], 20 * 8192),
                    SizeClass::Single,
                ),
                (
                    entry(d.raw(), Op::Read, &[(12, 4)], 4 << 20),
                    SizeClass::Multi,
                ),
            ])),
            &asmguard_paths::Paths::default().sys,
        );
        m.set_disk(
            d,
            DiskInfo {
                device: "sdb".into(),
                label: "DATA1".into(),
                ..DiskInfo::default()
            },
        );
        let text = m.encode_prometheus_text();
        for line in [
            "asmguard_io_latency_seconds_count{device=\"sdb\",label=\"DATA1\",op=\"read\",size=\"single\"} 20",
            "asmguard_io_latency_seconds_count{device=\"sdb\",label=\"DATA1\",op=\"read\",size=\"multi\"} 4",
            "asmguard_io_bytes_total{device=\"sdb\",label=\"DATA1\",op=\"read\",size=\"single\"} 163840",
            "asmguard_io_bytes_total{device=\"sdb\",label=\"DATA1\",op=\"read\",size=\"multi\"} 4194304",
            "asmguard_io_queue_seconds_count{device=\"sdb\",label=\"DATA1\",op=\"read\"} 24",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
        }
        let r = m.snapshot().unwrap();
        let r = r.find("DATA1", Op::Read).unwrap();
        assert_eq!((r.hist.count(), r.hist.bytes), (24, 20 * 8192 + (4 << 20)));
        let parsed = Snapshot::from_prometheus_text(&text).unwrap();
        let p = parsed.find("DATA1", Op::Read).unwrap();
        assert_eq!(parsed.entries.len(), 1, "{parsed:?}");
        assert_eq!((p.hist.lat, p.hist.bytes), (r.hist.lat, r.hist.bytes));
        assert_eq!(p.hist.queue_count(), 24);
    }

    /// Errors are per path of the disk, by kind; a disk traced as itself
    /// names itself as the path, and an unlabelled one is named by its device.
    #[test]
    fn errors_are_counted_per_disk_path_and_kind() {
        let (p0, p1, own) = (
            KernelDev::new(8, 16).unwrap(),
            KernelDev::new(8, 32).unwrap(),
            KernelDev::new(4095, 7).unwrap(),
        );
        let m = Metrics::with_source(
            Arc::new(FakeErrors(vec![
                (p0.raw(), IoErrorKind::Medium, 3),
                (p1.raw(), IoErrorKind::Transport, 2),
                (own.raw(), IoErrorKind::Timeout, 1),
            ])),
            &asmguard_paths::Paths::default().sys,
        );
        for (dev, path) in [(p0, "sdb"), (p1, "sdc")] {
            m.set_disk(
                dev,
                DiskInfo {
                    device: "dm-2".into(),
                    path: path.into(),
                    label: "DATA1".into(),
                    ..DiskInfo::default()
                },
            );
        }
        m.set_disk(
            own,
            DiskInfo {
                device: "sdz".into(),
                ..DiskInfo::default()
            },
        );
        let text = m.encode_prometheus_text();
        // a disk traced as itself has no per-path histograms
        assert!(
            !text.contains("asmguard_path_io_latency_seconds_count{"),
            "{text}"
        );
        for line in [
            "asmguard_io_errors_total{disk=\"DATA1\",path=\"sdb\",kind=\"medium\"} 3",
            "asmguard_io_errors_total{disk=\"DATA1\",path=\"sdc\",kind=\"transport\"} 2",
            "asmguard_io_errors_total{disk=\"sdz\",path=\"sdz\",kind=\"timeout\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
        }
        assert_eq!(
            text.matches("asmguard_io_errors_total{").count(),
            3,
            "{text}"
        );
    }

    #[test]
    fn oracle_binaries_are_one_gauge_each() {
        let c = Counters {
            oracle_binaries: vec![(
                "/u01/app/19c/grid".into(),
                "/u01/app/19c/grid/bin/oracle".into(),
                54331,
            )],
            ..Counters::default()
        };
        let m = Metrics::with_source(
            Arc::new(Fake(vec![])),
            &asmguard_paths::Paths::default().sys,
        );
        m.set_counter_source(Arc::new(c));
        let text = m.encode_prometheus_text();
        assert!(
            text.contains(
                "asmguard_oracle_binary_allowed{home=\"/u01/app/19c/grid\",binary=\"/u01/app/19c/grid/bin/oracle\",uid=\"54331\"} 1"
            ),
            "{text}"
        );
    }

    #[test]
    fn an_undescribed_disk_is_named_from_the_callers_sysfs() {
        let dir = tempfile::tempdir().unwrap();
        let sys = asmguard_paths::Paths::under(dir.path()).sys;
        let dev = KernelDev::new(259, 7).unwrap();
        std::fs::create_dir_all(sys.join("dev/block")).unwrap();
        std::os::unix::fs::symlink(
            "../../devices/virtual/block/fakedisk9",
            sys.join(format!("dev/block/{dev}")),
        )
        .unwrap();
        let m = Metrics::with_source(
            Arc::new(Fake(vec![entry(dev.raw(), Op::Read, &[(10, 2)], 2 * 8192)])),
            &sys,
        );
        let text = m.encode_prometheus_text();
        assert!(text.contains("device=\"fakedisk9\""), "{text}");
    }

    #[test]
    fn scrape_round_trips_through_the_parser() {
        let dev = KernelDev::new(8, 16).unwrap();
        let m = Metrics::with_source(
            Arc::new(Fake(vec![
                entry(
                    dev.raw(),
                    Op::Read,
                    &[(3, 5), (10, 2), (NSLOTS - 1, 1)],
                    8 * 4096,
                ),
                entry(dev.raw(), Op::Write, &[(12, 4)], 4 * 8192),
            ])),
            &asmguard_paths::Paths::default().sys,
        );
        m.set_disk(
            dev,
            DiskInfo {
                path: String::new(),
                device: "sdb".into(),
                label: "DATA1".into(),
                paths: vec!["/dev/sdb".into()],
                logical_sector: 512,
                physical_sector: 4096,
                diskgroup: "DATA".into(),
            },
        );
        for text in [m.encode_openmetrics(), m.encode_prometheus_text()] {
            assert!(
                text.contains(
                    "asmguard_disk_info{label=\"DATA1\",device=\"sdb\",paths=\"/dev/sdb\",\
                     logical_sector=\"512\",physical_sector=\"4096\",diskgroup=\"DATA\"} 1"
                ),
                "{text}"
            );
            let snap = Snapshot::from_prometheus_text(&text).unwrap();
            assert_eq!(snap.entries.len(), 2);
            let r = snap.find("DATA1", Op::Read).unwrap();
            assert_eq!(r.device, "sdb");
            assert_eq!(r.hist.count(), 8);
            // slot 3 is not an exported bound: it shows in the next one (4)
            assert_eq!(r.hist.lat[3], 0);
            assert_eq!(r.hist.lat[4], 5);
            assert_eq!(r.hist.lat[10], 2);
            assert_eq!(r.hist.lat[NSLOTS - 1], 1);
            assert_eq!(r.hist.bytes, 8 * 4096);
            assert_eq!(r.hist.queue[4], 8); // slot 0 shows in the first bound
            let w = snap.find("sdb", Op::Write).unwrap();
            assert_eq!((w.hist.count(), w.hist.bytes), (4, 4 * 8192));
        }
    }

    /// Two traced paths of one disk (an NVMe head's hidden paths) make one
    /// series per op: the sum of the paths, and one `asmguard_disk_info`.
    #[test]
    fn paths_of_one_disk_roll_up_to_the_disk() {
        let (p0, p1) = (
            KernelDev::new(259, 3).unwrap(),
            KernelDev::new(259, 4).unwrap(),
        );
        let m = Metrics::with_source(
            Arc::new(Fake(vec![
                entry(p0.raw(), Op::Read, &[(10, 3)], 3 * 8192),
                entry(p1.raw(), Op::Read, &[(10, 1), (12, 2)], 3 * 8192),
                entry(p1.raw(), Op::Write, &[(11, 4)], 4 * 8192),
            ])),
            &asmguard_paths::Paths::default().sys,
        );
        for (dev, path) in [(p0, "nvme0c0n1"), (p1, "nvme0c1n1")] {
            m.set_disk(
                dev,
                DiskInfo {
                    device: "nvme0n1".into(),
                    path: path.into(),
                    label: "DATA1".into(),
                    paths: vec!["/dev/nvme0n1".into()],
                    logical_sector: 512,
                    physical_sector: 512,
                    diskgroup: String::new(),
                },
            );
        }
        let snap = m.snapshot().unwrap();
        assert_eq!(snap.entries.len(), 2, "{snap:?}");
        let r = snap.find("DATA1", Op::Read).unwrap();
        assert_eq!(r.device, "nvme0n1");
        assert_eq!((r.hist.count(), r.hist.bytes), (6, 6 * 8192));
        assert_eq!((r.hist.lat[10], r.hist.lat[12]), (4, 2));
        let w = snap.find("nvme0n1", Op::Write).unwrap();
        assert_eq!(w.hist.count(), 4);
        let text = m.encode_prometheus_text();
        assert_eq!(text.matches("asmguard_disk_info{").count(), 1, "{text}");
        let parsed = Snapshot::from_prometheus_text(&text).unwrap();
        assert_eq!(parsed.find("DATA1", Op::Read).unwrap().hist.count(), 6);
        // and each path keeps its own histogram, each request counted once
        for line in [
            "asmguard_path_io_latency_seconds_count{disk=\"DATA1\",path=\"nvme0c0n1\",op=\"read\"} 3",
            "asmguard_path_io_latency_seconds_count{disk=\"DATA1\",path=\"nvme0c1n1\",op=\"read\"} 3",
            "asmguard_path_io_latency_seconds_count{disk=\"DATA1\",path=\"nvme0c1n1\",op=\"write\"} 4",
            "asmguard_path_io_latency_seconds_bucket{le=\"0.001\",disk=\"DATA1\",path=\"nvme0c1n1\",op=\"read\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
        }
        assert_eq!(
            text.matches("asmguard_path_io_latency_seconds_count{")
                .count(),
            3,
            "{text}"
        );
    }

    #[test]
    fn counters_and_info_metrics() {
        let m = Metrics::new(&asmguard_paths::Paths::default().sys);
        let zero = m.encode_prometheus_text();
        assert!(zero.contains("asmguard_protected 0\n"), "{zero}");
        assert!(zero.contains("asmguard_filter_events_dropped_total 0\n"));
        assert!(zero.contains("asmguard_pins_replaced_total 0\n"), "{zero}");
        assert!(!zero.contains("asmguard_writes_denied_total{"));
        let on = Counters {
            events_dropped: 5,
            pins_replaced: 3,
            ..Counters::default()
        }
        .with_backend(BackendName::Lsm)
        .with_mode("DATA1", Applied::Mode(Mode::Enforce))
        .with_mode("DATA3", Applied::Mode(Mode::Fenced))
        .with_denied("DATA1", Hook::FileOpen, 2)
        .with_denied("DATA2", Hook::FileIoctl, 8)
        .with_discard("DATA1", DiscardSource::Reclaim, 1 << 20)
        .with_discard("DATA1", DiscardSource::Oracle, 4096);
        m.set_counter_source(Arc::new(on.clone()));
        let text = m.encode_prometheus_text();
        assert!(
            text.contains("asmguard_writes_denied_total{label=\"DATA2\",hook=\"file_ioctl\"} 8\n")
        );
        assert!(
            text.contains("asmguard_discard_bytes_total{label=\"DATA1\",source=\"oracle\"} 4096\n")
        );
        assert!(
            text.contains("asmguard_writes_denied_total{label=\"DATA1\",hook=\"file_open\"} 2\n")
        );
        assert!(text.contains(
            "asmguard_discard_bytes_total{label=\"DATA1\",source=\"reclaim\"} 1048576\n"
        ));
        assert!(text.contains("asmguard_backend_info{backend=\"lsm\"} 1\n"));
        assert!(text.contains("asmguard_protected 1\n"));
        assert!(
            text.contains("asmguard_filter_events_dropped_total 5\n"),
            "{text}"
        );
        assert!(text.contains("asmguard_pins_replaced_total 3\n"), "{text}");
        // every backend that loads protects: fmod_ret too (it read 0 while
        // the metric knew only lsm and cgroup_device by name)
        for b in [BackendName::FmodRet, BackendName::CgroupDevice] {
            m.set_counter_source(Arc::new(on.clone().with_backend(b)));
            let t = m.encode_prometheus_text();
            assert!(t.contains("asmguard_protected 1\n"), "{b}: {t}");
            assert!(t.contains(&format!("asmguard_backend_info{{backend=\"{b}\"}} 1\n")));
        }
        m.set_counter_source(Arc::new(on.with_backend(BackendName::None)));
        let off = m.encode_prometheus_text();
        assert!(off.contains("asmguard_protected 0\n"), "{off}");
        assert!(!off.contains("asmguard_backend_info{backend=\"lsm\"}"));
        assert!(text.contains("asmguard_filter_mode{label=\"DATA1\",mode=\"enforce\"} 1\n"));
        // a disk under a reclaim's fence (README: reclaim chapter)
        assert!(
            text.contains("asmguard_filter_mode{label=\"DATA3\",mode=\"fenced\"} 1\n"),
            "{text}"
        );
        assert!(text.contains("# TYPE asmguard_writes_denied_total counter\n"));
        assert!(!text.contains("# EOF"));
        assert!(m.encode_openmetrics().ends_with("# EOF\n"));
    }

    #[test]
    fn conversion_renames_only_counter_metadata() {
        let om = "# HELP a_bytes B.\n# TYPE a_bytes counter\na_bytes_total 1\n\
                  # HELP h_seconds H.\n# TYPE h_seconds histogram\n# UNIT h_seconds seconds\n\
                  h_seconds_count 0\n# EOF\n";
        assert_eq!(
            openmetrics_to_prometheus_text(om),
            "# HELP a_bytes_total B.\n# TYPE a_bytes_total counter\na_bytes_total 1\n\
             # HELP h_seconds H.\n# TYPE h_seconds histogram\nh_seconds_count 0\n"
        );
    }
}
