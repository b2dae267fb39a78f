//! The daemon: where it runs, what the scans observed, the one apply task
//! and what it last achieved. Everything here is blocking (sysfs and
//! O_DIRECT reads/writes): the server calls it from `spawn_blocking`.
//!
//! Every input goes through [`Daemon::submit`]: a full scan or a refresh
//! (`Input::Model`), the containers' resolution, SIGHUP's configuration and
//! rules, a reclaim's fence, the periodic check. `submit` hands it to the
//! [`Applier`] (one holder at a time: the one apply task), which takes it
//! into the World and makes the system match; what it achieved
//! ([`Applied`]) is published and every view reads that. The label
//! operations are `crate::ops`, the views (`lsdsk`, `status`) `crate::views`,
//! the scans `crate::inputs::scan`.

pub(crate) use crate::apply::filter::service::FilterService;
pub(crate) use crate::apply::metrics::MetricsService;
pub(crate) use crate::apply::{Applied, Applier, Busy, CLAIM_WAIT};
pub mod scan;

pub(crate) use crate::world::conf::Conf;
pub(crate) use crate::world::model::{self, Disk, Model};
pub(crate) use crate::world::{Containers, Input, World};
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
pub(crate) use std::collections::{BTreeMap, BTreeSet, HashSet};
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
    pub(crate) inflight: Arc<Mutex<HashSet<Busy>>>,
    /// Labels lost to writes the daemon did not make, by label
    /// (`asmguard_labels_lost_total`).
    pub(crate) labels_lost: Arc<Mutex<BTreeMap<String, u64>>>,
    pub reclaims: Reclaims,
    /// Whether the periodic check of protected disks ran once (its first run
    /// over a filter re-adopted from pins names nothing as "before
    /// protection": `crate::inputs::exposed`).
    pub(crate) checked_once: std::sync::atomic::AtomicBool,
    /// When the periodic check last walked every process (`crate::inputs::exposed`).
    pub(crate) walked_all: Mutex<Option<Instant>>,
}

/// Holds claims on disks/labels; released on drop.
pub struct Claim<'a> {
    pub(crate) d: &'a Daemon,
    pub(crate) keys: Vec<Busy>,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        let mut s = self.d.inflight.lock().unwrap_or_else(|p| p.into_inner());
        for k in &self.keys {
            s.remove(k);
        }
    }
}

pub(crate) fn err(code: ErrorCode, m: impl Into<String>) -> ErrorBody {
    ErrorBody::new(code, m)
}

impl Daemon {
    /// The daemon over a started filter and tracer, on the roots `paths`;
    /// its first scan comes next.
    pub fn new(
        cfg: Config,
        cfg_source: String,
        paths: asmguard_paths::Paths,
        socket: PathBuf,
        runtime_dir: PathBuf,
        monitor: asmguard_proto::EventSource,
        started: Started,
    ) -> Daemon {
        let Started {
            filter,
            writer,
            metrics,
            modes,
        } = started;
        let (filter, metrics) = (Arc::new(filter), Arc::new(metrics));
        let settle = crate::apply::kept::Kept::settle_for(Duration::from_secs(
            cfg.devices.label_watch_seconds,
        ));
        let conf = Arc::new(Conf::new(cfg));
        // a fence recorded by an earlier daemon holds only while its job can
        // still run (crate::apply::fence)
        let fenced =
            crate::apply::fence::load(&crate::apply::fence::path(&runtime_dir), &paths.proc);
        let inflight = Arc::new(Mutex::new(HashSet::new()));
        let world = World {
            fenced: Arc::new(fenced.into_iter().collect()),
            modes: Arc::new(modes),
            ..World::empty(conf)
        };
        let applier = Applier::new(crate::apply::Parts {
            world,
            filter: filter.clone(),
            metrics: metrics.clone(),
            inflight: inflight.clone(),
            paths: paths.clone(),
            runtime_dir: runtime_dir.clone(),
            settle,
        });
        Daemon {
            applied: Arc::new(RwLock::new(applier.last())),
            applier: Mutex::new(applier),
            filter,
            writer,
            metrics,
            scans: Scans::default(),
            inflight,
            labels_lost: Arc::default(),
            reclaims: Reclaims::default(),
            checked_once: Default::default(),
            walked_all: Mutex::new(None),
            site: Site {
                cfg_source,
                cgroup_root: asmguard_guard::guard::cgroup2_root(&paths.proc).ok(),
                paths,
                socket,
                runtime_dir,
                monitor,
                started: Instant::now(),
            },
        }
    }

    /// Hands `input` to the one apply task (waiting for it while another
    /// input is applied) and publishes what it achieved.
    pub fn submit(&self, input: Input) -> Arc<Applied> {
        match self.try_submit(input) {
            Ok(done) => done,
            Err(r) => {
                // only an operation's input can be refused, and those are
                // sent with `try_submit`
                tracing::error!("an input the World refused: {r}");
                self.applied()
            }
        }
    }

    /// [`Daemon::submit`] for an operation's input the World may refuse
    /// (`filter ACTION LABEL` for a label no disk carries): the refusal
    /// changes nothing and publishes nothing.
    pub fn try_submit(&self, input: Input) -> Result<Arc<Applied>, crate::world::modes::Refused> {
        let mut a = self.applier.lock().unwrap_or_else(|p| p.into_inner());
        let done = a.apply(input)?;
        *self.applied.write().unwrap_or_else(|p| p.into_inner()) = done.clone();
        Ok(done)
    }

    /// What the last apply achieved.
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

    /// The configuration in force, whole (a reload swaps it: hold this one
    /// value while reading several keys).
    pub fn conf(&self) -> Arc<Conf> {
        self.applied().world.conf.clone()
    }

    /// `[socket] admin_group` resolved, in force.
    pub fn admin_gid(&self) -> Option<u32> {
        self.conf().admin_gid
    }

    /// The configured containers as last resolved.
    pub fn containers(&self) -> Arc<Containers> {
        self.applied().world.containers.clone()
    }

    /// Resolves the configured containers again (their cgroups, a process,
    /// its id maps and files, each container's files waited for at most
    /// [`crate::apply::filter::containers::DEADLINE`]) and sends them to the
    /// World: at start before the first scan, on SIGHUP, and whenever the
    /// cgroup tree changes (the `containers` task, `crate::inputs::tasks`).
    pub fn resolve_containers(&self) {
        let conf = self.conf();
        let last = self.containers();
        let now = crate::apply::filter::containers::resolve(
            &self.site.paths.proc,
            self.site.cgroup_root.as_deref(),
            &conf.cfg,
            &last,
            crate::apply::filter::containers::DEADLINE,
        );
        crate::apply::filter::containers::log_changes(&last, &now, &self.site.paths.etc);
        self.submit(Input::Containers(Arc::new(now)));
    }

    /// Whether a container that runs is not fully resolved yet (no process
    /// whose id maps are written, users or its nodes' owner not translated):
    /// worth resolving again soon.
    pub fn containers_pending(&self) -> bool {
        let a = self.applied();
        let c = &a.world.containers;
        if c.pending() {
            return true;
        }
        let running: Vec<&str> = c
            .each
            .iter()
            .filter(|r| !r.found.cgroups.is_empty() && !r.config.present.is_empty())
            .map(|r| r.config.name.as_str())
            .collect();
        a.presented
            .problems
            .iter()
            .any(|p| p.label.is_none() && running.contains(&p.container.as_str()))
    }

    /// A daemon with no filter, tracer or scan, for unit tests, on the roots
    /// `paths` with runtime state under `runtime_dir`.
    #[cfg(test)]
    pub fn for_tests_at(cfg: Config, paths: asmguard_paths::Paths, runtime_dir: &Path) -> Daemon {
        Daemon::new(
            cfg,
            "test".into(),
            paths,
            PathBuf::from("/nonexistent/asmguard.sock"),
            runtime_dir.to_path_buf(),
            asmguard_proto::EventSource::None {
                reason: "not listened to in this test".into(),
            },
            Started {
                filter: FilterService::inert(),
                writer: Writer::default(),
                metrics: MetricsService::without_tracer(),
                modes: Default::default(),
            },
        )
    }

    /// A daemon with no filter, tracer or scan, for unit tests.
    #[cfg(test)]
    pub fn for_tests(cfg: Config) -> Daemon {
        Daemon::for_tests_at(
            cfg,
            asmguard_paths::Paths::default(),
            Path::new("/nonexistent"),
        )
    }

    /// Counts a label lost to a write this daemon did not make.
    pub fn count_lost_label(&self, label: &str) {
        *self
            .labels_lost
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(label.to_string())
            .or_insert(0) += 1;
    }

    /// A copy of the last applied World's model (each disk's mode as applied).
    pub fn read_model(&self) -> Model {
        self.applied().world.model.clone()
    }

    /// Fences the disks of `labels` (`on`: mode `fenced`, only the daemon's
    /// process writes them) or lifts their fence, through the World (the
    /// apply side records the fenced disks under the runtime directory:
    /// `crate::apply::fence`).
    pub fn set_fence(&self, labels: &[String], on: bool) {
        self.submit(Input::Fence {
            labels: labels.to_vec(),
            on,
        });
        let what = labels.join(", ");
        if !on {
            tracing::info!("reclaim fence of {what} lifted: the job ended");
            return;
        }
        let unfenced: Vec<&str> = labels
            .iter()
            .filter(|l| self.filter.disk_mode(l).mode() != asmguard_guard::Mode::Fenced)
            .map(String::as_str)
            .collect();
        if unfenced.is_empty() {
            tracing::info!(
                "reclaim fence of {what}: only asmguardd writes them until the job ends"
            );
        } else {
            tracing::warn!(
                "reclaim fence of {}: no filter applies it ({}): other writers are not held off",
                unfenced.join(", "),
                self.filter.status().reason
            );
        }
    }

    /// The disks fenced for a reclaim, by label.
    #[cfg(test)]
    pub fn fenced(&self) -> Arc<std::collections::BTreeSet<String>> {
        self.applied().world.fenced.clone()
    }

    /// The labelled disks as last applied.
    pub fn disks(&self) -> Vec<Disk> {
        self.applied().world.model.disks.clone()
    }

    /// Whether a label write is under way.
    pub fn writing(&self) -> bool {
        !self
            .inflight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_empty()
    }
}

#[cfg(test)]
mod fence_tests {
    use super::*;

    fn labels(d: &Daemon) -> Vec<String> {
        d.fenced().iter().cloned().collect()
    }

    fn recorded(run: &Path) -> Option<Vec<String>> {
        let text = std::fs::read(crate::apply::fence::path(run)).ok()?;
        let r: crate::apply::fence::Record = serde_json::from_slice(&text).unwrap();
        assert_eq!(r.pid, std::process::id());
        Some(r.labels.into_iter().collect())
    }

    /// The fence is a part of the World: set and lifted through the one
    /// apply path, kept by scans (a new model keeps it), recorded under the
    /// runtime directory while it holds; a daemon started again once its job
    /// is gone (here: the recorded process is this one, which runs no job
    /// yet) drops it and its record.
    #[test]
    fn the_fence_is_in_the_world_and_recorded_while_it_holds() {
        let sys = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(sys.path().join("class/block")).unwrap();
        let run = tempfile::tempdir().unwrap();
        let paths = asmguard_paths::Paths {
            sys: sys.path().to_path_buf(),
            ..Default::default()
        };
        let d = Daemon::for_tests_at(Config::default(), paths, run.path());
        d.scans.full(&d).unwrap();
        assert!(labels(&d).is_empty());
        assert_eq!(recorded(run.path()), None);

        d.set_fence(&["DATA1".into(), "DATA2".into()], true);
        assert_eq!(labels(&d), ["DATA1", "DATA2"]);
        assert_eq!(recorded(run.path()).unwrap(), ["DATA1", "DATA2"]);
        d.set_fence(&["DATA1".into()], false);
        assert_eq!(labels(&d), ["DATA2"]);
        assert_eq!(recorded(run.path()).unwrap(), ["DATA2"]);
        // a scan brings a new model, not a new fence
        d.scans.full(&d).unwrap();
        assert_eq!(labels(&d), ["DATA2"]);
        let st = crate::views::status(&d.applied(), &d.site, &d.filter, &d.metrics, &d.scans);
        assert_eq!(st.reclaim_fence.disks, ["DATA2"]);
        assert!(st.reclaim_fence.refuses.is_some());

        // restarted with the record of a job that no longer runs
        let again = Daemon::for_tests_at(
            Config::default(),
            asmguard_paths::Paths::default(),
            run.path(),
        );
        assert!(labels(&again).is_empty(), "the fence outlived its job");
        assert_eq!(recorded(run.path()), None, "the record of a gone job stays");

        // lifted: no record
        d.set_fence(&["DATA2".into()], true);
        d.set_fence(&["DATA2".into()], false);
        assert!(labels(&d).is_empty());
        assert_eq!(recorded(run.path()), None);
        let none = crate::views::status(&d.applied(), &d.site, &d.filter, &d.metrics, &d.scans)
            .reclaim_fence;
        assert!(none.disks.is_empty() && none.refuses.is_none(), "{none:?}");
    }
}
