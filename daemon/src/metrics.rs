//! The daemon's metrics: the I/O latency tracer (`asmguard-metrics`' BPF block
//! tracepoints) kept on the managed disks' devices, the Prometheus endpoint, and the
//! filter's and reclaim's counters copied into the exporter.
//!
//! Each labelled disk is traced on the whole disk under its top device (the multipath
//! device, or the labelled device; the parent disk of a labelled partition), so a
//! request is counted once. `asmguard_discard_bytes_total{source="oracle"}` is the
//! discard bytes seen on the disk minus reclaim's own: every other caller's discards
//! are denied by the filter before they reach the block layer.

use asmguard_metrics::{DiscardSource, DiskInfo, IoLat, KernelDev, Metrics, Op};
use asmguard_proto::LsdskResult;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

pub struct MetricsService {
    pub metrics: Metrics,
    iolat: Option<Arc<IoLat>>,
    /// Why there are no histograms, when `iolat` is `None`.
    pub tracer: String,
    trace_all: bool,
    /// Traced disks: kernel dev_t -> label.
    traced: Mutex<BTreeMap<u32, String>>,
    /// Where the endpoint listens, or why it does not.
    pub address: Mutex<String>,
}

impl MetricsService {
    /// Loads the tracer (best effort: without it the counters are still exported).
    pub fn start(trace_all: bool) -> MetricsService {
        let (iolat, tracer) = match IoLat::load() {
            Ok(t) => {
                let t = Arc::new(t);
                let desc = format!("block tracepoints ({}, {})", t.mode().as_str(), t.stamps());
                (Some(t), desc)
            }
            Err(e) => {
                tracing::error!("I/O latency tracer: {e}: latency histograms are off");
                (None, format!("off ({e})"))
            }
        };
        let metrics = match &iolat {
            Some(t) => Metrics::with_source(t.clone()),
            None => Metrics::new(),
        };
        if let (Some(t), true) = (&iolat, trace_all) {
            if let Err(e) = t.set_trace_all(true) {
                tracing::error!("I/O latency tracer: tracing every disk: {e}");
            }
        }
        MetricsService {
            metrics,
            iolat,
            tracer,
            trace_all,
            traced: Mutex::new(BTreeMap::new()),
            address: Mutex::new("not served yet".into()),
        }
    }

    /// Serves `/metrics` on `addr`; never fails the daemon.
    pub async fn serve(&self, addr: &str) {
        let text = match addr.parse::<SocketAddr>() {
            Ok(a) => match asmguard_metrics::http::spawn(a, self.metrics.clone()).await {
                Ok(bound) => {
                    tracing::info!("metrics on http://{bound}/metrics");
                    format!("http://{bound}/metrics")
                }
                Err(e) => {
                    tracing::error!("metrics endpoint {a}: {e}: not served");
                    format!("{a} (not served: {e})")
                }
            },
            Err(e) => format!("{addr} (not served: {e})"),
        };
        *self.address.lock().unwrap_or_else(|p| p.into_inner()) = text;
    }

    pub fn address(&self) -> String {
        self.address
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Trace exactly the disks of `ls` and describe them to the exporter.
    pub fn sync(&self, ls: &LsdskResult, filtering: impl Fn(&str) -> String, backend: &str) {
        self.metrics.set_backend(backend);
        let mut want: BTreeMap<u32, (String, DiskInfo)> = BTreeMap::new();
        for d in ls.disks.iter().filter(|d| !d.conflict) {
            // The whole disk under the top device: the parent of a labelled partition.
            let top = d
                .paths
                .iter()
                .find(|p| p.role == "parent")
                .or_else(|| d.paths.iter().find(|p| p.dev == d.top))
                .or_else(|| d.paths.first());
            let Some(top) = top else { continue };
            let info = DiskInfo {
                device: top.name.clone(),
                label: d.label.clone(),
                paths: d.paths.iter().map(|p| p.dev.clone()).collect(),
                logical_sector: d.logical_block_size,
                physical_sector: d.physical_block_size,
            };
            want.insert(top.kdev, (d.label.clone(), info));
            self.metrics
                .set_filter_mode(&d.label, mode_word(&filtering(&d.label)));
        }
        let mut traced = self.traced.lock().unwrap_or_else(|p| p.into_inner());
        for (dev, label) in traced.clone() {
            if !want.contains_key(&dev) {
                if let Some(t) = &self.iolat {
                    let r = if self.trace_all {
                        Ok(())
                    } else {
                        t.forget_device(dev)
                    };
                    if let Err(e) = r {
                        tracing::warn!("I/O latency tracer: removing {dev:#x}: {e}");
                    }
                }
                self.metrics.remove_disk(KernelDev::from_raw(dev));
                self.metrics.remove_filter_mode(&label);
                traced.remove(&dev);
            }
        }
        for (dev, (label, info)) in want {
            if let std::collections::btree_map::Entry::Vacant(v) = traced.entry(dev) {
                if let Some(t) = &self.iolat {
                    if let Err(e) = t.add_device(dev) {
                        tracing::warn!("I/O latency tracer: adding {}: {e}", info.device);
                    }
                }
                v.insert(label);
            }
            self.metrics.set_disk(KernelDev::from_raw(dev), info);
        }
        if let (Some(t), true) = (&self.iolat, self.trace_all) {
            if let Err(e) = t.rescan() {
                tracing::warn!("I/O latency tracer: rescan: {e}");
            }
        }
    }

    /// Re-read the filter's mode of every traced label and its backend (they change
    /// with `asmguardctl filter`, between scans).
    pub fn refresh_modes(&self, filtering: impl Fn(&str) -> String, backend: &str) {
        self.metrics.set_backend(backend);
        let labels: Vec<String> = self
            .traced
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect();
        for l in labels {
            self.metrics.set_filter_mode(&l, mode_word(&filtering(&l)));
        }
    }

    /// Copy the filter's denial counts and the discard totals into the exporter.
    /// `denied`: (label, hook) -> count of enforced denials; `reclaim`: label -> bytes.
    /// Filter events the kernel dropped (the denial counts stay exact).
    pub fn set_events_dropped(&self, n: u64) {
        self.metrics.set_events_dropped(n);
    }

    pub fn update_counters(
        &self,
        denied: &BTreeMap<(String, String), u64>,
        reclaim: &BTreeMap<String, u64>,
    ) {
        for ((label, hook), n) in denied {
            self.metrics.set_denied_total(label, hook, *n);
        }
        let mut discard: BTreeMap<String, u64> = BTreeMap::new();
        if self.iolat.is_some() {
            if let Ok(snap) = self.metrics.snapshot() {
                for e in snap.entries.iter().filter(|e| e.op == Op::Discard) {
                    if !e.label.is_empty() {
                        *discard.entry(e.label.clone()).or_default() += e.hist.bytes;
                    }
                }
            }
        }
        for (label, r) in reclaim {
            self.metrics
                .set_discard_total(label, DiscardSource::Reclaim, *r);
        }
        for (label, seen) in discard {
            // Read after `seen`, in-flight before done: every reclaim ioctl whose
            // bytes `seen` holds is in one of them (or both, for a moment), so
            // the result never exceeds the database's own discards.
            let c = crate::reclaim::counters();
            let in_flight = c.in_flight(&label);
            let r = in_flight + c.reclaim(&label);
            self.metrics.set_discard_total(
                &label,
                DiscardSource::Oracle,
                asmguard_reclaim::counters::oracle_bytes(seen, r),
            );
        }
    }
}

/// `enforce (lsm)` -> `enforce`.
fn mode_word(filtering: &str) -> &str {
    filtering.split_whitespace().next().unwrap_or("off")
}
