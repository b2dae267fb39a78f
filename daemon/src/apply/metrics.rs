//! The daemon's metrics: the I/O latency tracer (`asmguard-metrics`' BPF block
//! tracepoints) kept on the managed disks' devices, the Prometheus endpoint, and
//! [`LiveCounters`], which reads the filter's kernel counters and reclaim's
//! counters when Prometheus scrapes (nothing copies them in between).
//!
//! Not for: the metric families themselves (`asmguard_metrics::exporter`).
//!
//! Each labelled disk is traced on the request-based devices under it (each path of a
//! multipath device, each hidden path of an NVMe head; else the labelled device or the
//! parent disk of a labelled partition: `model::traced`), and the exporter rolls them
//! up into the disk's series, so a request is counted once. `asmguard_discard_bytes_total{source="oracle"}` is the
//! discard bytes seen on the disk minus reclaim's own: every other caller's discards
//! are denied by the filter before they reach the block layer.

use asmguard_metrics::exporter::{CounterSource, Counters};
use asmguard_metrics::{DiscardSource, DiskInfo, IoLat, KernelDev, Metrics, Op, Snapshot};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use crate::apply::filter::service::FilterService;
use asmguard_reclaim::counters::DiscardCounters;

/// What the exporter reads when Prometheus scrapes: what was applied, the
/// filter's kernel counters and events, reclaim's discards, the labels lost.
#[derive(Clone)]
pub struct Sources {
    pub applied: crate::apply::Published,
    pub filter: Arc<FilterService>,
    pub discards: Arc<DiscardCounters>,
    pub labels_lost: LabelsLost,
}

/// Labels lost to writes the daemon did not make, by label
/// (`asmguard_labels_lost_total`): the label watch counts, the exporter reads.
#[derive(Debug, Clone, Default)]
pub struct LabelsLost(Arc<Mutex<BTreeMap<String, u64>>>);

impl LabelsLost {
    /// Counts a label lost to a write this daemon did not make.
    pub fn count(&self, label: &str) {
        *self
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(label.to_string())
            .or_insert(0) += 1;
    }

    /// Each label lost, and how many times.
    pub fn read(&self) -> BTreeMap<String, u64> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// The HTTP endpoint's share of the process: a few connections, each for a
/// short while, and never more than an eighth of the descriptors, so the
/// control socket, label and scan always have theirs (see `raise_nofile`).
fn http_limits() -> asmguard_metrics::http::Limits {
    let soft = nofile().map(|(s, _)| s).unwrap_or(1024);
    asmguard_metrics::http::Limits {
        max_connections: usize::try_from(soft / 8).unwrap_or(32).clamp(4, 32),
        connection_time: std::time::Duration::from_secs(30),
    }
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit (systemd's default soft
/// limit is 1,024; the unit sets `LimitNOFILE=`). Returns the soft limit now.
pub fn raise_nofile() -> u64 {
    match nofile() {
        Ok((soft, hard)) if soft < hard => {
            let r = libc::rlimit {
                rlim_cur: hard,
                rlim_max: hard,
            };
            // SAFETY: `r` is a valid rlimit the call only reads.
            if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) } == 0 {
                hard
            } else {
                let e = std::io::Error::last_os_error();
                tracing::warn!("raising the open-file limit from {soft} to {hard}: {e}");
                soft
            }
        }
        Ok((soft, _)) => soft,
        Err(_) => 1024,
    }
}

/// The soft and hard `RLIMIT_NOFILE`.
fn nofile() -> std::io::Result<(u64, u64)> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a valid rlimit the call writes.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } == 0 {
        Ok((r.rlim_cur, r.rlim_max))
    } else {
        Err(std::io::Error::last_os_error())
    }
}

pub struct MetricsService {
    pub metrics: Metrics,
    iolat: Option<Arc<IoLat>>,
    /// Attached, or why there are no histograms (`iolat` is `None`).
    pub tracer: asmguard_proto::TracerState,
    trace_all: bool,
    /// Traced disks (the whole disk their I/O is counted on).
    traced: Mutex<std::collections::BTreeSet<KernelDev>>,
    /// Where the endpoint listens, or the configured address and why it
    /// does not (`None`: not served yet).
    address: Mutex<Option<(String, Option<String>)>>,
    /// Whether it accepts connections now (set once it listens).
    health: std::sync::OnceLock<asmguard_metrics::http::Health>,
}

impl MetricsService {
    /// Loads the tracer (best effort: without it the counters are still
    /// exported); I/Os up to `single_block_bytes` are `size="single"`.
    pub fn start(
        paths: &asmguard_paths::Paths,
        trace_all: bool,
        single_block_bytes: u32,
    ) -> MetricsService {
        let (iolat, tracer) = match IoLat::load_sized(paths, single_block_bytes) {
            Ok(t) => {
                let t = Arc::new(t);
                let state = asmguard_proto::TracerState::Attached {
                    attach: t.mode().as_str().into(),
                    stamps: t.stamps().clone(),
                };
                (Some(t), state)
            }
            Err(e) => {
                tracing::error!("I/O latency tracer: {e}: latency histograms are off");
                (
                    None,
                    asmguard_proto::TracerState::Off {
                        reason: e.to_string(),
                    },
                )
            }
        };
        let metrics = match &iolat {
            Some(t) => Metrics::with_source(t.clone(), &paths.sys),
            None => Metrics::new(&paths.sys),
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
            traced: Mutex::default(),
            address: Mutex::new(None),
            health: std::sync::OnceLock::new(),
        }
    }

    /// No tracer (`status` and `iostat` say so): for a daemon under test.
    #[cfg(test)]
    pub fn without_tracer() -> MetricsService {
        MetricsService {
            metrics: Metrics::new(&asmguard_paths::Paths::default().sys),
            iolat: None,
            tracer: asmguard_proto::TracerState::Off {
                reason: "not loaded in this test".into(),
            },
            trace_all: false,
            traced: Mutex::default(),
            address: Mutex::new(None),
            health: std::sync::OnceLock::new(),
        }
    }

    /// Serves `/metrics` on `addr`; never fails the daemon.
    pub async fn serve(&self, addr: &str) {
        let text = match addr.parse::<SocketAddr>() {
            Ok(a) => {
                match asmguard_metrics::http::spawn_limited(a, self.metrics.clone(), http_limits())
                    .await
                {
                    Ok((bound, health)) => {
                        let _ = self.health.set(health);
                        tracing::info!("metrics on http://{bound}/metrics");
                        (format!("http://{bound}/metrics"), None)
                    }
                    Err(e) => {
                        tracing::error!("metrics endpoint {a}: {e}: not served");
                        (a.to_string(), Some(e.to_string()))
                    }
                }
            }
            Err(e) => (addr.to_string(), Some(e.to_string())),
        };
        *self.address.lock().unwrap_or_else(|p| p.into_inner()) = Some(text);
    }

    /// Where the endpoint listens and whether it serves now, or why not;
    /// the tracer's state.
    pub fn endpoint(&self) -> asmguard_proto::MetricsEndpoint {
        use asmguard_proto::EndpointState;
        let served = self
            .address
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let (address, state) = match served {
            None => (None, EndpointState::NotYet),
            Some((a, Some(error))) => (Some(a), EndpointState::NotServed { error }),
            Some((a, None)) => (
                Some(a),
                match self.health.get().map(|h| h.failing()) {
                    Some(Some(e)) => EndpointState::Failing {
                        error: e.to_string(),
                    },
                    _ => EndpointState::Serving,
                },
            ),
        };
        asmguard_proto::MetricsEndpoint {
            address,
            state,
            tracer: self.tracer.clone(),
        }
    }

    /// Trace exactly the disks of `want` (the model's `traced` projection)
    /// and describe them to the exporter.
    pub fn sync(&self, want: BTreeMap<KernelDev, DiskInfo>) {
        let mut traced = self.traced.lock().unwrap_or_else(|p| p.into_inner());
        for dev in traced.iter().copied().collect::<Vec<_>>() {
            if !want.contains_key(&dev) {
                if let Some(t) = &self.iolat {
                    let r = if self.trace_all {
                        Ok(())
                    } else {
                        t.forget_device(dev.raw())
                    };
                    if let Err(e) = r {
                        tracing::warn!("I/O latency tracer: removing {dev}: {e}");
                    }
                }
                self.metrics.remove_disk(dev);
                traced.remove(&dev);
            }
        }
        for (dev, info) in want {
            if traced.insert(dev) {
                if let Some(t) = &self.iolat {
                    if let Err(e) = t.add_device(dev.raw()) {
                        tracing::warn!("I/O latency tracer: adding {}: {e}", info.device);
                    }
                }
            }
            self.metrics.set_disk(dev, info);
        }
        if let (Some(t), true) = (&self.iolat, self.trace_all) {
            if let Err(e) = t.rescan() {
                tracing::warn!("I/O latency tracer: rescan: {e}");
            }
        }
    }

    /// The histograms of every traced disk now, for the `iostat` op.
    pub fn snapshot(&self) -> Result<Snapshot, asmguard_proto::ErrorBody> {
        use asmguard_proto::{ErrorBody, ErrorCode};
        if self.iolat.is_none() {
            return Err(ErrorBody::new(
                ErrorCode::Unavailable,
                format!("the I/O latency tracer is {}", self.tracer),
            ));
        }
        self.metrics
            .snapshot()
            .map_err(|e| ErrorBody::new(ErrorCode::IoError, format!("reading the histograms: {e}")))
    }

    /// Reads the daemon's counters at every scrape from now on.
    pub fn read_counters_from(&self, sources: Sources) {
        self.metrics.set_counter_source(Arc::new(LiveCounters {
            sources,
            oracle: Mutex::default(),
        }));
    }
}

/// The daemon's counters, read at scrape time: the filter's backend, modes
/// and exact kernel denial counts, and the discard bytes of reclaim and of
/// Oracle.
pub struct LiveCounters {
    sources: Sources,
    /// label -> Oracle's discard bytes last exported (the counter never goes
    /// down, even at the moment a reclaim ioctl's bytes are seen on the disk
    /// but not yet counted as reclaim's).
    oracle: Mutex<BTreeMap<String, u64>>,
}

impl std::fmt::Debug for LiveCounters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveCounters").finish_non_exhaustive()
    }
}

impl CounterSource for LiveCounters {
    fn counters(&self, io: &Snapshot) -> Counters {
        let mut c = Counters::default();
        let src = &self.sources;
        let f = &src.filter;
        let a = src
            .applied
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let w = &a.world;
        c.backend = Some(f.status().backend());
        c.filter_modes = crate::world::model::modes(&w.model.disks);
        c.events_dropped = f.events_dropped();
        c.pins_replaced = f.pins_replaced();
        c.labels_lost = src.labels_lost.read();
        c.unmanaged = w.model.unmanaged.iter().map(|u| u.device.clone()).collect();
        c.conflicts = conflicts(&w.model);
        c.exposed = w.exposed.keys().cloned().collect();
        for r in &w.containers.each {
            c.container_cgroups
                .insert(r.config.name.clone(), r.found.cgroups.len() as u64);
            c.container_stalled
                .insert(r.config.name.clone(), u64::from(r.stalled));
        }
        if let Some(r) = &w.rules {
            c.oracle_binaries.clone_from(&r.binaries);
        }
        let counts = f.counts().unwrap_or_else(|e| {
            tracing::warn!("filter counters unreadable: {e}");
            Default::default()
        });
        for ((label, hook, mode), n) in counts {
            if mode == asmguard_guard::Mode::Enforce {
                *c.denied.entry((label, hook)).or_insert(0) += n;
            }
        }
        let counters = &src.discards;
        for (label, r) in counters.all_reclaim() {
            c.discard.insert((label, DiscardSource::Reclaim), r);
        }
        let mut seen: BTreeMap<&str, u64> = BTreeMap::new();
        for e in io.entries.iter().filter(|e| e.op == Op::Discard) {
            if !e.label.is_empty() {
                *seen.entry(e.label.as_str()).or_default() += e.hist.bytes;
            }
        }
        let mut last = self.oracle.lock().unwrap_or_else(|p| p.into_inner());
        for (label, seen) in seen {
            // Read after `seen`, in-flight before done: every reclaim ioctl whose
            // bytes `seen` holds is in one of them (or both, for a moment), so
            // the result never exceeds the database's own discards.
            let r = counters.in_flight(label) + counters.reclaim(label);
            let now = asmguard_reclaim::counters::oracle_bytes(seen, r);
            let v = last.entry(label.to_string()).or_insert(0);
            *v = (*v).max(now);
            c.discard
                .insert((label.to_string(), DiscardSource::Oracle), *v);
        }
        c
    }
}

/// (label, device, role) of every claimant of a label in conflict.
fn conflicts(m: &crate::world::model::Model) -> Vec<(String, String, String)> {
    m.conflicts
        .iter()
        .flat_map(|(label, devs)| {
            let kept = m.kept.get(label);
            devs.iter().map(move |d| {
                let role = match kept {
                    Some(k) if k == d => "kept",
                    Some(_) => "newcomer",
                    None => "unresolved",
                };
                (label.clone(), d.clone(), role.to_string())
            })
        })
        .collect()
}
