//! The daemon: where it runs, what the scans observed, the one apply task
//! and what it last achieved. Everything here is blocking (sysfs and
//! O_DIRECT reads/writes): the server calls it from `spawn_blocking`.
//!
//! `impl Daemon` is the whole of its interface: construction, then every
//! input goes through [`Daemon::submit`] (or [`Daemon::try_submit`] for an
//! operation the World may refuse): a full scan or a refresh
//! (`Input::Model`), the containers' resolution, a SIGHUP's reload (one
//! `Input::Reload`), a reclaim's fence, the periodic check. `submit` hands it to the
//! [`Applier`] (one holder at a time: the one apply task), which takes it
//! into the World and makes the system match; what it achieved
//! ([`Applied`], [`Daemon::applied`]) is published and every view reads that.
//! The rest are functions of this interface, each where its part is:
//! the views (`lsdsk`, `status`, `events`, the service line) `crate::views`
//! (functions of `&Applied`); the operations (`label`, `unlabel`, `rename`,
//! `filter`) `crate::ops`, a reclaim's fence `crate::ops::reclaim`; the
//! containers' resolution `crate::inputs::containers`; the periodic check of
//! exposed disks `crate::inputs::exposed`; the scans `crate::daemon::scan`;
//! the socket's dispatch `crate::serve`. Read the configuration in force,
//! the containers, the model or the fence from `d.applied().world`.

pub(crate) use crate::apply::filter::service::FilterService;
pub(crate) use crate::apply::inflight::{Busy, Claim, Inflight};
pub(crate) use crate::apply::metrics::MetricsService;
pub(crate) use crate::apply::{Applied, Applier, CLAIM_WAIT};
pub mod scan;
#[cfg(test)]
pub mod testing;

pub(crate) use crate::world::conf::Conf;
pub(crate) use crate::world::model;
pub(crate) use crate::world::{Input, World};
pub(crate) use asmguard_config::Config;
pub(crate) use asmguard_devices::discovery;
pub(crate) use asmguard_devices::labelling::{self, LabelOpError, LabelOptions};
pub(crate) use asmguard_devices::sysfs::{self, SysDev};
pub(crate) use asmguard_devices::writer::{WriteOpen, Writer};
pub(crate) use asmguard_devices::{DevError, KernelDev};
pub(crate) use asmguard_format::label::Label;
pub(crate) use asmguard_proto::{
    Conflict, ErrorBody, ErrorCode, LabelArgs, LabelResult, LsdskResult, RenameArgs, StatusResult,
    UnlabelArgs,
};
pub(crate) use scan::Scans;
pub(crate) use std::collections::BTreeSet;
pub(crate) use std::os::unix::fs::{FileTypeExt, MetadataExt};
pub(crate) use std::path::{Path, PathBuf};
pub(crate) use std::sync::{Arc, Mutex, RwLock};
pub(crate) use std::time::{Duration, Instant};

/// What the daemon starts before its first scan.
pub struct Started {
    /// The write filter.
    pub filter: FilterService,
    /// Who opens disks for the daemon's own writes on that filter.
    pub writer: Writer,
    /// The latency tracer and the exporter.
    pub metrics: MetricsService,
    /// The filter modes an administrator set (read at start).
    pub modes: crate::world::modes::Modes,
}

/// Where and since when the daemon runs.
#[derive(Debug)]
pub struct Site {
    /// Where the configuration came from (a path, or the defaults).
    pub cfg_source: String,
    /// The filesystem roots (sysfs, /dev, /run, /proc): the system's, or a test's.
    pub paths: asmguard_paths::Paths,
    pub socket: PathBuf,
    /// Runtime state: `filter.state`, `reclaim/<LABEL>.json`, `kept/`
    /// (`[daemon] runtime_dir`, default the socket's directory).
    pub runtime_dir: PathBuf,
    /// The cgroup2 mount the `[[container]]` patterns are relative to.
    pub cgroup_root: Option<PathBuf>,
    /// Where device events come from (`status`).
    pub monitor: asmguard_proto::EventSource,
    pub started: Instant,
}

/// Reclaim's running jobs and discard counts.
#[derive(Debug, Default)]
pub struct Reclaims {
    /// Discard bytes by label (`asmguard_discard_bytes_total{source="reclaim"}`).
    pub discards: Arc<asmguard_reclaim::counters::DiscardCounters>,
    /// Labels with a reclaim under way.
    pub running: asmguard_reclaim::job::Running,
}

/// What the periodic check of protected disks remembers between runs
/// (`crate::inputs::exposed`).
#[derive(Debug, Default)]
pub struct ExposedChecks {
    /// Whether it ran once (its first run over a filter re-adopted from pins
    /// names nothing as "before protection").
    pub once: std::sync::atomic::AtomicBool,
    /// When it last walked every process.
    pub walked_all: std::sync::Mutex<Option<std::time::Instant>>,
}

/// What a daemon is made of: its configuration, where it runs, and what
/// it starts before its first scan.
pub struct Parts {
    pub cfg: Config,
    /// Where the configuration came from (a path, or the defaults).
    pub cfg_source: String,
    /// The filesystem roots: the system's, or a test's.
    pub paths: asmguard_paths::Paths,
    pub socket: PathBuf,
    pub runtime_dir: PathBuf,
    /// Where device events come from (`status`).
    pub monitor: asmguard_proto::EventSource,
    pub started: Started,
}

/// The daemon: where it runs, the one apply task, what it achieved, and
/// the services views read.
pub struct Daemon {
    pub site: Site,
    /// The one apply task: whoever holds it applies (`submit`).
    applier: Mutex<Applier>,
    /// What the last apply achieved (every view reads it).
    applied: crate::apply::Published,
    /// The write filter (started before the first scan): its effects are the
    /// applier's; views read its status, events and counters.
    pub filter: Arc<FilterService>,
    /// Who opens disks for the daemon's own writes (labels, reclaim): the
    /// filter's choice at start (`crate::apply::filter::start`).
    pub writer: Writer,
    /// The latency tracer and the exporter (started before the first scan).
    pub metrics: Arc<MetricsService>,
    pub scans: Scans,
    /// Disks and labels being written right now (shared with the applier:
    /// their claims stay as they are meanwhile).
    pub inflight: Inflight,
    /// Labels lost to writes the daemon did not make (the label watch).
    pub labels_lost: crate::apply::metrics::LabelsLost,
    pub reclaims: Reclaims,
    /// What the periodic check of protected disks remembers (`crate::inputs::exposed`).
    pub exposed_checks: ExposedChecks,
}

pub(crate) fn err(code: ErrorCode, m: impl Into<String>) -> ErrorBody {
    ErrorBody::new(code, m)
}

/// The World a daemon starts from: `cfg`, the modes an administrator set,
/// and a fence recorded by an earlier daemon while its job can still run
/// (`crate::apply::fence`).
fn first_world(cfg: Config, modes: crate::world::modes::Modes, site: &Site) -> World {
    let fence = crate::apply::fence::path(&site.runtime_dir);
    let fenced = crate::apply::fence::load(&fence, &site.paths.proc);
    World {
        fenced: Arc::new(fenced.into_iter().collect()),
        modes: Arc::new(modes),
        ..World::empty(Arc::new(Conf::new(cfg)))
    }
}

/// `p` as the configuration, what was started, and the site.
fn split(p: Parts) -> (Config, Started, Site) {
    let site = Site {
        cfg_source: p.cfg_source,
        cgroup_root: asmguard_guard::guard::cgroup2_root(&p.paths.proc).ok(),
        paths: p.paths,
        socket: p.socket,
        runtime_dir: p.runtime_dir,
        monitor: p.monitor,
        started: Instant::now(),
    };
    (p.cfg, p.started, site)
}

impl Daemon {
    /// The daemon over a started filter and tracer; its first scan comes next.
    pub fn new(p: Parts) -> Daemon {
        let (cfg, s, site) = split(p);
        let (filter, metrics) = (Arc::new(s.filter), Arc::new(s.metrics));
        let label_watch = Duration::from_secs(cfg.devices.label_watch_seconds);
        let inflight = Inflight::default();
        let applier = Applier::new(crate::apply::Parts {
            world: first_world(cfg, s.modes, &site),
            filter: filter.clone(),
            metrics: metrics.clone(),
            inflight: inflight.clone(),
            paths: site.paths.clone(),
            runtime_dir: site.runtime_dir.clone(),
            settle: crate::apply::kept::Kept::settle_for(label_watch),
        });
        Daemon {
            applied: Arc::new(RwLock::new(applier.last())),
            applier: Mutex::new(applier),
            filter,
            writer: s.writer,
            metrics,
            scans: Scans::default(),
            inflight,
            labels_lost: Default::default(),
            reclaims: Reclaims::default(),
            exposed_checks: Default::default(),
            site,
        }
    }

    /// Hands `input` to the one apply task (waiting for it while another
    /// input is applied) and publishes what it achieved.
    pub fn submit(&self, input: Input) -> Arc<Applied> {
        // only an operation's input can be refused, and those are sent with
        // `try_submit`
        self.try_submit(input).unwrap_or_else(|r| {
            tracing::error!("an input the World refused: {r}");
            self.applied()
        })
    }

    /// [`Daemon::submit`] for an operation's input the World may refuse
    /// (`filter ACTION LABEL` for a label no disk carries): the refusal
    /// changes nothing and publishes nothing.
    pub fn try_submit(&self, input: Input) -> Result<Arc<Applied>, crate::world::modes::Refused> {
        // published while the applier is held: a later apply publishes later
        let mut a = self.applier.lock().unwrap_or_else(|p| p.into_inner());
        let done = a.apply(input)?;
        *self.applied.write().unwrap_or_else(|p| p.into_inner()) = done.clone();
        Ok(done)
    }

    /// What the last apply achieved (hold this one value while reading several parts).
    pub fn applied(&self) -> Arc<Applied> {
        self.applied
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// What views and the exporter read, as a handle of its own.
    pub fn published(&self) -> crate::apply::Published {
        self.applied.clone()
    }
}

#[cfg(test)]
mod shape {
    /// `impl Daemon` is one block in `daemon.rs`, short enough to read on one
    /// screen (construction, `submit`, `try_submit`, `applied`): views are
    /// functions of what was applied, operations functions of this small
    /// interface (`crate::views`, `crate::ops`), not methods on its fields.
    #[test]
    fn impl_daemon_reads_on_one_screen() {
        fn rs(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            for e in std::fs::read_dir(dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    rs(&p, out);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    out.push(p);
                }
            }
        }
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        rs(&src, &mut files);
        files.sort();
        let mut elsewhere = Vec::new();
        let mut blocks = Vec::new();
        for f in &files {
            let text = std::fs::read_to_string(f).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            for (i, l) in lines.iter().enumerate() {
                // `impl Daemon {`, `impl<'a> crate::daemon::Daemon {`; not `impl X for Daemon`
                let inherent = l.starts_with("impl")
                    && !l.contains(" for ")
                    && l.trim_end()
                        .strip_suffix('{')
                        .is_some_and(|h| h.trim_end().ends_with("Daemon"));
                if !inherent {
                    continue;
                }
                let rel = f.strip_prefix(&src).unwrap().display().to_string();
                let len = lines[i..].iter().position(|l| *l == "}").unwrap_or(0) + 1;
                if rel == "daemon.rs" {
                    blocks.push(len);
                } else {
                    elsewhere.push(format!("{rel}:{} ({len} lines)", i + 1));
                }
            }
        }
        assert!(
            elsewhere.is_empty(),
            "`impl Daemon` outside daemon.rs: {elsewhere:?} (a view is a function of \
             what was applied in crate::views, an operation a function of &Daemon in crate::ops)"
        );
        assert_eq!(
            blocks.len(),
            1,
            "one `impl Daemon` block in daemon.rs: {blocks:?}"
        );
        assert!(
            blocks[0] <= 80,
            "`impl Daemon` in daemon.rs is {} lines (at most 80: construction, submit, \
             try_submit, applied)",
            blocks[0]
        );
    }
}
