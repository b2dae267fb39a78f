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
//! operations are `crate::ops`, the views (`lsdsk`, `status`) `crate::views`.

pub(crate) use crate::apply::filter::service::FilterService;
pub(crate) use crate::apply::metrics::MetricsService;
pub(crate) use crate::apply::{Applied, Applier, Busy, CLAIM_WAIT};
pub(crate) use crate::world::conf::Conf;
pub(crate) use crate::world::model::{self, Disk, Model};
pub(crate) use crate::world::{Containers, Input, World};
pub(crate) use asmguard_config::Config;
pub(crate) use asmguard_devices::discovery::{self, Observed};
pub(crate) use asmguard_devices::labelling::{self, LabelOpError, LabelOptions};
pub(crate) use asmguard_devices::sysfs::{self, SysDev};
pub(crate) use asmguard_devices::writer::{WriteOpen, Writer};
pub(crate) use asmguard_devices::{DevError, KernelDev};
pub(crate) use asmguard_format::label::Label;
pub(crate) use asmguard_proto::{
    Conflict, ErrorBody, ErrorCode, LabelArgs, LabelResult, LsdskResult, RenameArgs, StatusResult,
    UnlabelArgs,
};
pub(crate) use std::collections::{BTreeMap, BTreeSet, HashSet};
pub(crate) use std::os::unix::fs::{FileTypeExt, MetadataExt};
pub(crate) use std::path::{Path, PathBuf};
pub(crate) use std::sync::{Arc, Mutex, RwLock};
pub(crate) use std::time::{Duration, Instant};

/// What the label watch found changed on a device: what it read before and
/// now, the label it lost to an overwrite, and (old, new) when one label
/// replaced another.
pub type LabelChange = (String, Option<String>, Option<(String, String)>);

/// What the scans observed (the input side's cache: a refresh re-reads a few).
#[derive(Debug, Default)]
pub struct Observations {
    /// Every block device as last observed.
    pub devices: BTreeMap<String, Observed>,
    pub last_scan_ms: u64,
}

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
    pub monitor: String,
    pub started: Instant,
}

/// Full scans and refreshes, in order.
#[derive(Debug, Default)]
pub struct Scans {
    /// Serialises full scans and refreshes, from reading sysfs to their
    /// apply: a slow scan can never replace what a newer refresh found.
    order: Mutex<()>,
    /// Full scans started and finished (numbered from 1): `scan` requests that
    /// arrive while one runs share the next one instead of each starting its own.
    pub started: std::sync::atomic::AtomicU64,
    pub done: std::sync::atomic::AtomicU64,
    /// Where concurrent `scan` requests wait (asynchronously, no thread each).
    pub gate: tokio::sync::Mutex<()>,
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
    /// What the scans observed.
    observed: RwLock<Observations>,
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
}

/// Test hook: runs inside a full scan between reading the devices and storing
/// them (simulates a slow scan).
#[cfg(test)]
static SCAN_HOOK: Mutex<Option<Box<dyn Fn() + Send>>> = Mutex::new(None);

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
        monitor: String,
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
            world: world.clone(),
            filter: filter.clone(),
            metrics: metrics.clone(),
            inflight: inflight.clone(),
            paths: paths.clone(),
            runtime_dir: runtime_dir.clone(),
            settle,
        });
        Daemon {
            observed: RwLock::default(),
            applied: Arc::new(RwLock::new(Arc::new(Applied::nothing(world)))),
            applier: Mutex::new(applier),
            filter,
            writer,
            metrics,
            scans: Scans::default(),
            inflight,
            labels_lost: Arc::default(),
            reclaims: Reclaims::default(),
            site: Site {
                cfg_source,
                paths,
                socket,
                runtime_dir,
                cgroup_root: asmguard_guard::guard::cgroup2_root().ok(),
                monitor,
                started: Instant::now(),
            },
        }
    }

    /// Hands `input` to the one apply task (waiting for it while another
    /// input is applied) and publishes what it achieved.
    pub fn submit(&self, input: Input) -> Arc<Applied> {
        let mut a = self.applier.lock().unwrap_or_else(|p| p.into_inner());
        let done = Arc::new(a.apply(input));
        *self.applied.write().unwrap_or_else(|p| p.into_inner()) = done.clone();
        done
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
            self.site.cgroup_root.as_deref(),
            &conf.cfg,
            &last,
            crate::apply::filter::containers::DEADLINE,
        );
        crate::apply::filter::containers::log_changes(&last, &now);
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
            "none".into(),
            Started {
                filter: FilterService::inert("not loaded in this test"),
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

    /// What the scans observed, read. Never while holding it already: a
    /// writer waiting in between would leave the second read waiting for ever.
    pub(crate) fn observed(&self) -> std::sync::RwLockReadGuard<'_, Observations> {
        self.observed.read().unwrap_or_else(|p| p.into_inner())
    }

    fn observed_mut(&self) -> std::sync::RwLockWriteGuard<'_, Observations> {
        self.observed.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Re-read every device, and send the World the new model.
    pub fn full_scan(&self) -> std::io::Result<usize> {
        use std::sync::atomic::Ordering::SeqCst;
        let _order = self.scans.order.lock().unwrap_or_else(|p| p.into_inner());
        let number = self.scans.started.fetch_add(1, SeqCst) + 1;
        let t = Instant::now();
        let conf = self.conf();
        let observed = discovery::observe_all(&self.site.paths.sys, &conf.rules);
        let devices = match observed {
            Ok(d) => d,
            Err(e) => {
                self.scans.done.store(number, SeqCst);
                return Err(e);
            }
        };
        let grouping = discovery::group(&devices, &conf.rules);
        let built = model::build(&self.site.paths.sys, &devices, &grouping);
        let n = devices.len();
        #[cfg(test)]
        if let Some(h) = SCAN_HOOK.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            h();
        }
        {
            let mut s = self.observed_mut();
            s.devices = devices;
            s.last_scan_ms = t.elapsed().as_millis() as u64;
        }
        self.submit(Input::Model(built));
        self.scans.done.store(number, SeqCst);
        tracing::debug!(
            "full scan #{number}: {n} devices in {} ms",
            t.elapsed().as_millis()
        );
        Ok(n)
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

    /// The devices the label watch reads (`crate::inputs::watch`): the ones
    /// a scan reads with nothing stacked on them.
    pub fn watched(&self) -> Vec<String> {
        self.observed()
            .devices
            .iter()
            .filter(|(_, o)| o.included && o.read.is_some() && o.sys.holders.is_empty())
            .map(|(n, _)| n.clone())
            .collect()
    }
    /// Reads the label sector of `name` again; `Some((what, lost, replaced))`
    /// when it reads differently from what the last scan or refresh found,
    /// `lost` naming the label it no longer carries (overwritten, no tag),
    /// `replaced` the label another one took the place of (old, new).
    /// A disk this daemon is writing a label on right now is skipped: its
    /// own write is not another host's.
    pub fn label_changed(&self, name: &str) -> Option<LabelChange> {
        let sys = self.observed().devices.get(name)?.sys.clone();
        let busy = Busy::Dev(sys.dev);
        if self
            .inflight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&busy)
        {
            return None;
        }
        let now = discovery::reread(&sys);
        let s = self.observed();
        let before = &s.devices.get(name)?.read;
        if *before == now {
            return None;
        }
        let word = |r: &Option<Result<discovery::LabelRead, String>>| match r {
            None => "not read".to_string(),
            Some(Err(e)) => format!("unreadable: {e}"),
            Some(Ok(l)) => format!("{:?}", l.state),
        };
        let label = |r: &Option<Result<discovery::LabelRead, String>>| match r {
            Some(Ok(l)) => l.state.label().map(|l| l.to_string()),
            _ => None,
        };
        // an unlabel (ORCLCLRD, or ORCLDISK with the label bytes cleared) or a
        // rename leaves a tag; a label sector with no tag was overwritten
        let overwritten = !matches!(
            &now,
            Some(Ok(discovery::LabelRead {
                state: asmguard_format::label::LabelState::Marked { .. }
                    | asmguard_format::label::LabelState::Cleared,
                ..
            }))
        );
        let lost = label(before).filter(|_| overwritten);
        let replaced = match (label(before), label(&now)) {
            (Some(a), Some(b)) if a != b => Some((a, b)),
            _ => None,
        };
        Some((
            format!("{} -> {}", word(before), word(&now)),
            lost,
            replaced,
        ))
    }

    /// Re-read the named devices (gone ones are dropped), the sysfs facts of the
    /// devices they relate to (slaves, holders, partition parent), and regroup.
    pub fn refresh(&self, names: &BTreeSet<String>) {
        let _order = self.scans.order.lock().unwrap_or_else(|p| p.into_inner());
        let mut fresh = Vec::new();
        let mut related = BTreeSet::new();
        let conf = self.conf();
        let rules = &conf.rules;
        for n in names {
            let o = discovery::observe(&self.site.paths.sys, rules, n);
            if let Some(o) = &o {
                related.extend(o.sys.slaves.iter().cloned());
                related.extend(o.sys.holders.iter().cloned());
                related.extend(o.sys.parent.iter().cloned());
            }
            fresh.push((n.clone(), o));
        }
        let rel: Vec<(String, Option<SysDev>)> = related
            .into_iter()
            .filter(|r| !names.contains(r))
            .map(|r| {
                let s = sysfs::read(&self.site.paths.sys, &r).ok();
                (r, s)
            })
            .collect();
        let mut s = self.observed_mut();
        for (n, o) in fresh {
            match o {
                Some(o) => {
                    s.devices.insert(n, o);
                }
                None => {
                    s.devices.remove(&n);
                }
            }
        }
        for (n, sd) in rel {
            match (sd, s.devices.get_mut(&n)) {
                (Some(sd), Some(o)) => o.sys = sd,
                (None, Some(_)) => {
                    s.devices.remove(&n);
                }
                _ => {}
            }
        }
        let grouping = discovery::group(&s.devices, rules);
        let built = model::build(&self.site.paths.sys, &s.devices, &grouping);
        drop(s);
        self.submit(Input::Model(built));
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
mod scan_race_tests {
    use super::*;

    fn fake_dev(root: &Path, name: &str, minor: u32) {
        let d = root.join("class/block").join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("dev"), format!("7:{minor}\n")).unwrap();
        std::fs::write(d.join("size"), "0\n").unwrap();
    }

    /// A full scan that read sysfs before a device appeared, and stores its
    /// result after the refresh that added it, must not lose the device.
    #[test]
    fn a_slow_full_scan_never_replaces_a_newer_refresh() {
        let root = tempfile::tempdir().unwrap();
        fake_dev(root.path(), "fake0", 200);
        let paths = asmguard_paths::Paths {
            sys: root.path().to_path_buf(),
            ..Default::default()
        };
        let d = Arc::new(Daemon::for_tests_at(
            Config::default(),
            paths,
            Path::new("/nonexistent"),
        ));
        let (computed, wait_computed) = std::sync::mpsc::channel::<()>();
        let computed = Mutex::new(computed);
        *SCAN_HOOK.lock().unwrap() = Some(Box::new(move || {
            let _ = computed.lock().unwrap().send(());
            // a slow scan: the refresh below runs (or waits) meanwhile
            std::thread::sleep(std::time::Duration::from_millis(300));
        }));
        let d1 = Arc::clone(&d);
        let scan = std::thread::spawn(move || d1.full_scan().unwrap());
        wait_computed.recv().unwrap();
        fake_dev(root.path(), "fake1", 201);
        d.refresh(&BTreeSet::from(["fake1".to_string()]));
        scan.join().unwrap();
        *SCAN_HOOK.lock().unwrap() = None;
        let s = d.observed();
        assert!(s.devices.contains_key("fake0"));
        assert!(
            s.devices.contains_key("fake1"),
            "the scan replaced the refresh's newer state: {:?}",
            s.devices.keys().collect::<Vec<_>>()
        );
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
        d.full_scan().unwrap();
        assert!(labels(&d).is_empty());
        assert_eq!(recorded(run.path()), None);

        d.set_fence(&["DATA1".into(), "DATA2".into()], true);
        assert_eq!(labels(&d), ["DATA1", "DATA2"]);
        assert_eq!(recorded(run.path()).unwrap(), ["DATA1", "DATA2"]);
        d.set_fence(&["DATA1".into()], false);
        assert_eq!(labels(&d), ["DATA2"]);
        assert_eq!(recorded(run.path()).unwrap(), ["DATA2"]);
        // a scan brings a new model, not a new fence
        d.full_scan().unwrap();
        assert_eq!(labels(&d), ["DATA2"]);
        let st = d.status();
        assert!(
            st.reclaim_fence.starts_with("DATA2: a reclaim runs"),
            "{}",
            st.reclaim_fence
        );

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
        assert_eq!(d.status().reclaim_fence, "none (no reclaim runs)");
    }
}
