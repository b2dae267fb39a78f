//! The daemon's view of the disks and the operations on them. Everything here is
//! blocking (sysfs and O_DIRECT reads/writes): the server calls it from
//! `spawn_blocking`.
//!
//! Every scan and refresh builds one [`Model`] and hands it to
//! [`Daemon::apply`], the one place a model takes effect: the filter's managed
//! set, each disk's mode, the exclusive claims and the metrics follow from it
//! there and nowhere else. Answers (`lsdsk`, `status`, the label operations'
//! checks) read the stored model: the label operations are [`ops`], the
//! views (`lsdsk`, `status`, the metrics' readings) [`views`].

use crate::conf::Conf;
use crate::filter::service::FilterService;
use crate::metrics::MetricsService;
use crate::model::{self, Disk, Model};
use crate::world::{Containers, World};
use asmguard_config::Config;
use asmguard_devices::discovery::{self, Observed};
use asmguard_devices::labelling::{self, LabelOpError, LabelOptions};
use asmguard_devices::sysfs::{self, SysDev};
use asmguard_devices::writer::{WriteOpen, Writer};
use asmguard_devices::{DevError, KernelDev};
use asmguard_format::label::Label;
use asmguard_proto::{
    Conflict, ErrorBody, ErrorCode, LabelArgs, LabelResult, LsdskResult, RenameArgs, StatusResult,
    UnlabelArgs,
};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

mod exposed;
mod ops;
mod views;

/// How long the claim of a disk newly wanted (just labelled, hot-plugged)
/// is tried again before `label` answers or the scan ends: another exclusive
/// opener (udev's probe, a writer still closing) may hold it a moment, and
/// nothing else keeps the kernel's consumers off a disk on 5.10.
const CLAIM_WAIT: Duration = Duration::from_secs(5);

/// Taking the claims this long or longer is logged and shown in `status`.
const CLAIM_SLOW: Duration = Duration::from_millis(500);

/// What the label watch found changed on a device: what it read before and
/// now, the label it lost to an overwrite, and (old, new) when one label
/// replaced another.
pub type LabelChange = (String, Option<String>, Option<(String, String)>);

/// What is known about the devices.
#[derive(Debug)]
pub struct State {
    /// Every block device as last observed (a refresh re-reads a few).
    pub devices: BTreeMap<String, Observed>,
    /// The World as last applied (`crate::world`).
    pub world: World,
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
    /// Serialises full scans, refreshes and every apply, from reading sysfs
    /// to the filter's sync: a slow scan can never replace what a newer
    /// refresh found.
    order: Mutex<()>,
    /// Full scans started and finished (numbered from 1): `scan` requests that
    /// arrive while one runs share the next one instead of each starting its own.
    pub started: std::sync::atomic::AtomicU64,
    pub done: std::sync::atomic::AtomicU64,
    /// Where concurrent `scan` requests wait (asynchronously, no thread each).
    pub gate: tokio::sync::Mutex<()>,
}

/// The exclusive claims on managed disks, kept in step with the filter's set.
struct Claiming {
    claims: crate::claims::Claims,
    /// Devices whose claim failed through a whole [`CLAIM_WAIT`] (not waited
    /// for again until taken or no longer wanted).
    failing: Mutex<BTreeSet<KernelDev>>,
    /// Whether the claims were synced once: the first sync (the daemon's
    /// start) waits for none (a disk that is mounted or mapped now stays
    /// so, and a restart must not wait for each).
    synced: std::sync::atomic::AtomicBool,
    /// The last time taking the claims took [`CLAIM_SLOW`] or longer (for
    /// `status`): empty when it never did.
    slow: Mutex<String>,
}

/// Reclaim's running jobs and discard counts.
#[derive(Debug, Default)]
pub struct Reclaims {
    /// Discard bytes by label (`asmguard_discard_bytes_total{source="reclaim"}`).
    pub discards: asmguard_reclaim::counters::DiscardCounters,
    /// Labels with a reclaim under way.
    pub running: asmguard_reclaim::job::Running,
}

/// What applying a World makes outside the daemon and must remember.
struct Made {
    /// What udev was told of each device's label (the stable links).
    links: crate::links::Links,
    /// The containers' device nodes (`/dev/asmguard/containers`).
    presenter: crate::present::Presenter,
    /// Which claimant of a label had it first (`crate::kept`).
    kept: crate::kept::Kept,
}

/// The daemon: the configuration in force, the World as last applied, and
/// the services that make the system match it. Scans, container resolution
/// and SIGHUP build the next World; [`Daemon::apply`] takes it into effect;
/// label operations are [`ops`], answers [`views`].
pub struct Daemon {
    /// The configuration in force (`crate::conf`): swapped whole on SIGHUP.
    conf: RwLock<Arc<Conf>>,
    pub site: Site,
    state: RwLock<State>,
    /// The write filter (started before the first scan).
    pub filter: FilterService,
    /// Who opens disks for the daemon's own writes (labels, reclaim): the
    /// filter's choice at start (`crate::filter::start`).
    pub writer: Writer,
    /// The latency tracer and the exporter (started before the first scan).
    pub metrics: MetricsService,
    pub scans: Scans,
    /// Disks and labels being written right now.
    inflight: Mutex<HashSet<Busy>>,
    /// Labels lost to writes the daemon did not make, by label
    /// (`asmguard_labels_lost_total`).
    labels_lost: Mutex<BTreeMap<String, u64>>,
    claiming: Claiming,
    pub reclaims: Reclaims,
    made: Made,
    /// Protected disks written through a mapping made before protection.
    exposed: exposed::Exposures,
}

/// Test hook: runs inside a full scan between reading the devices and storing
/// them (simulates a slow scan).
#[cfg(test)]
static SCAN_HOOK: Mutex<Option<Box<dyn Fn() + Send>>> = Mutex::new(None);

/// What a label write holds while it runs: the device written, and the labels
/// it writes or removes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Busy {
    Dev(KernelDev),
    Label(Label),
}

/// Holds claims on disks/labels; released on drop.
pub struct Claim<'a> {
    d: &'a Daemon,
    keys: Vec<Busy>,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        let mut s = self.d.inflight.lock().unwrap_or_else(|p| p.into_inner());
        for k in &self.keys {
            s.remove(k);
        }
    }
}

fn err(code: ErrorCode, m: impl Into<String>) -> ErrorBody {
    ErrorBody::new(code, m)
}

/// Journal lines for the label conflicts a model brings (the same label on
/// two disks, as when two hosts label different disks with one name, or a
/// device planted with a managed disk's label) and the ones it resolves.
fn log_conflicts(before: &Model, after: &Model) {
    for (label, devs) in &after.conflicts {
        let kept = after.kept.get(label);
        if before.conflicts.get(label) == Some(devs) && before.kept.get(label) == kept {
            continue;
        }
        match kept {
            Some(k) => tracing::error!(
                "label {label} is on more than one disk: {}: {k} had it first and keeps it \
                 (its link, nodes and rules); the others are newcomers, protected but never \
                 linked or presented until relabelled (`asmguardctl label NEWLABEL DEVICE --force`)",
                devs.join(", ")
            ),
            None => tracing::error!(
                "label {label} is on more than one disk: {}: both stay protected, neither is \
                 used by label, rename, unlabel or reclaim until one is relabelled \
                 (`asmguardctl label NEWLABEL DEVICE --force`)",
                devs.join(", ")
            ),
        }
    }
    for label in before
        .conflicts
        .keys()
        .filter(|l| !after.conflicts.contains_key(*l))
    {
        tracing::info!("label {label} is on one disk again: its conflict is resolved");
    }
}

impl Daemon {
    /// The daemon over a started filter and tracer; its first scan comes next.
    pub fn new(
        cfg: Config,
        cfg_source: String,
        socket: PathBuf,
        runtime_dir: PathBuf,
        monitor: String,
        started: Started,
    ) -> Daemon {
        let Started {
            filter,
            writer,
            metrics,
        } = started;
        let paths = asmguard_paths::Paths::default();
        let settle =
            crate::kept::Kept::settle_for(Duration::from_secs(cfg.devices.label_watch_seconds));
        let conf = Arc::new(Conf::new(cfg));
        // a fence recorded by an earlier daemon holds only while its job can
        // still run (crate::fence)
        let fenced = crate::fence::load(&crate::fence::path(&runtime_dir), &paths.proc);
        let world =
            World::empty(conf.clone()).with_fence(&fenced.into_iter().collect::<Vec<_>>(), true);
        Daemon {
            conf: RwLock::new(conf.clone()),
            state: RwLock::new(State {
                devices: BTreeMap::new(),
                world,
                last_scan_ms: 0,
            }),
            filter,
            writer,
            metrics,
            scans: Scans::default(),
            inflight: Mutex::new(HashSet::new()),
            labels_lost: Mutex::default(),
            claiming: Claiming {
                claims: crate::claims::Claims::from_environment(),
                failing: Mutex::default(),
                synced: Default::default(),
                slow: Mutex::default(),
            },
            reclaims: Reclaims::default(),
            exposed: Default::default(),
            made: Made {
                links: Default::default(),
                presenter: crate::present::Presenter::at(paths.containers_dir()),
                kept: crate::kept::Kept::new(&runtime_dir, settle),
            },
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

    /// The configuration in force, whole (a reload swaps it: hold this one
    /// value while reading several keys).
    pub fn conf(&self) -> Arc<Conf> {
        self.conf.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// `[socket] admin_group` resolved, in force.
    pub fn admin_gid(&self) -> Option<u32> {
        self.conf().admin_gid
    }

    /// Puts `c` in force (`crate::conf`); the next World is built with it.
    pub fn set_conf(&self, c: Conf) {
        *self.conf.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(c);
    }

    /// The configured containers as last resolved.
    pub fn containers(&self) -> Arc<Containers> {
        self.read_state().world.containers.clone()
    }

    /// Resolves the configured containers again (their cgroups, a process,
    /// its id maps and files, each container's files waited for at most
    /// [`crate::filter::containers::DEADLINE`]) and applies the World with
    /// them: at start before the first scan, on SIGHUP, and whenever the
    /// cgroup tree changes (the `containers` task, `crate::tasks`).
    pub fn resolve_containers(&self) {
        let conf = self.conf();
        let last = self.containers();
        let now = crate::filter::containers::resolve(
            self.site.cgroup_root.as_deref(),
            &conf.cfg,
            &last,
            crate::filter::containers::DEADLINE,
        );
        crate::filter::containers::log_changes(&last, &now);
        let _order = self.scans.order.lock().unwrap_or_else(|p| p.into_inner());
        let next = self.read_state().world.with_containers(conf, Arc::new(now));
        // before the first scan there is no model: an empty one would remove
        // every node a previous run made, so the World is only stored (the
        // first scan applies it)
        if self.scans.done.load(std::sync::atomic::Ordering::SeqCst) > 0 {
            self.apply(next);
        } else {
            self.write_state().world = next;
        }
    }

    /// Whether a container that runs is not fully resolved yet (no process
    /// whose id maps are written, users or its nodes' owner not translated):
    /// worth resolving again soon.
    pub fn containers_pending(&self) -> bool {
        let c = self.containers();
        if c.pending() {
            return true;
        }
        let running: Vec<&str> = c
            .each
            .iter()
            .filter(|r| !r.found.cgroups.is_empty() && !r.config.present.is_empty())
            .map(|r| r.config.name.as_str())
            .collect();
        self.made
            .presenter
            .outcome()
            .problems
            .iter()
            .any(|p| p.label.is_none() && running.contains(&p.container.as_str()))
    }

    /// A daemon with no filter, tracer or scan, for unit tests.
    #[cfg(test)]
    pub fn for_tests(cfg: Config) -> Daemon {
        Daemon::new(
            cfg,
            "test".into(),
            PathBuf::from("/nonexistent/asmguard.sock"),
            PathBuf::from("/nonexistent"),
            "none".into(),
            Started {
                filter: FilterService::inert("not loaded in this test"),
                writer: Writer::default(),
                metrics: MetricsService::without_tracer(),
            },
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

    /// A copy of the last applied World's model.
    pub fn read_model(&self) -> Model {
        self.read_state().world.model.clone()
    }

    /// The state, read. Never while holding it already: a writer waiting in
    /// between would leave the second read waiting for ever.
    fn read_state(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write_state(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Re-read every device, and apply the World with the new model.
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
        let mut s = self.write_state();
        s.devices = devices;
        s.last_scan_ms = t.elapsed().as_millis() as u64;
        let next = s.world.with_model(conf, built);
        drop(s);
        self.apply(next);
        self.scans.done.store(number, SeqCst);
        tracing::debug!(
            "full scan #{number}: {n} devices in {} ms",
            t.elapsed().as_millis()
        );
        Ok(n)
    }

    /// The one place a World takes effect (the caller holds the scans'
    /// order): the filter's managed set first (a new path is protected
    /// before anything else looks at it), then each disk's mode as the filter
    /// applies it, the container rules, the stable links, the containers'
    /// device nodes, the stored World, the exclusive claims, and the tracer
    /// and exporter. Reads no disk and no container file.
    fn apply(&self, mut next: World) {
        let m = &mut next.model;
        // the World as last applied, read in place (the caller holds the
        // scans' order: nothing else stores one meanwhile)
        let (containers_before, new_unmanaged) = {
            let s = self.read_state();
            let before = &s.world;
            // first come, first kept: before anything looks at which disk is used
            m.kept.clear();
            self.made.kept.resolve(&before.model, m);
            let new: Vec<model::Unmanaged> = m
                .unmanaged
                .iter()
                .filter(|u| !before.model.unmanaged.contains(u))
                .cloned()
                .collect();
            (before.containers.clone(), new)
        };
        self.filter.sync(model::managed_set(&m.disks), &next.fenced);
        for d in &mut m.disks {
            d.mode = Some(self.filter.disk_mode(d.label.as_str()));
        }
        if !Arc::ptr_eq(&containers_before, &next.containers) || self.filter.container_rules_unset()
        {
            let c = &next.containers;
            if let Err(e) = self.filter.set_containers(c.rules(), c.names()) {
                tracing::error!("filter: cannot set the container rules: {e}");
            }
        }
        for u in &new_unmanaged {
            tracing::warn!(
                "{}: carries an ASM label header asmguardd does not manage ({}): {}; it is not protected and gets no /dev/asmguard link (rules of other tools that match the label bytes may still link it)",
                u.device,
                u.label
                    .as_deref()
                    .map_or("no label".to_string(), |l| format!("LABEL={l} to blkid and udev")),
                u.why
            );
        }
        let m = &next.model;
        self.made.links.follow(&self.site.paths, m);
        self.present(&next);
        self.made.kept.record(m);
        let traced = model::traced(&m.disks);
        let mut st = self.write_state();
        log_conflicts(&st.world.model, &next.model);
        st.world = next;
        drop(st);
        self.sync_claims();
        self.metrics.sync(traced);
    }

    /// Makes the containers' device nodes match World `w` (the caller holds
    /// the scans' order). Nothing to do with no container configured.
    fn present(&self, w: &World) {
        let each = &w.containers.each;
        if each.is_empty() && !self.made.presenter.presented_any() {
            return;
        }
        let disks: Vec<(String, KernelDev)> = w
            .model
            .disks
            .iter()
            .filter(|d| !d.conflict)
            .map(|d| (d.label.to_string(), d.top.dev))
            .collect();
        let targets: Vec<crate::present::Target> = each
            .iter()
            .map(|r| crate::present::target(&w.conf.cfg, &r.config, r.owner.clone()))
            .collect();
        self.made.presenter.sync(&disks, &targets);
    }

    /// Fences the disks of `labels` (`on`: mode `fenced`, only the daemon's
    /// process writes them) or lifts their fence, through the World, and
    /// records the fenced disks under the runtime directory (`crate::fence`).
    pub fn set_fence(&self, labels: &[String], on: bool) {
        let _order = self.scans.order.lock().unwrap_or_else(|p| p.into_inner());
        let next = self.read_state().world.with_fence(labels, on);
        let fenced = next.fenced.clone();
        if self.scans.done.load(std::sync::atomic::Ordering::SeqCst) > 0 {
            self.apply(next);
        } else {
            self.write_state().world = next;
        }
        let file = crate::fence::path(&self.site.runtime_dir);
        if let Err(e) = crate::fence::save(&file, &self.site.paths.proc, &fenced) {
            tracing::error!("reclaim fence: cannot record it in {}: {e}", file.display());
        }
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
        self.read_state().world.fenced.clone()
    }

    /// Applies the World as last applied again: after a filter mode changed.
    pub fn reapply(&self) {
        let _order = self.scans.order.lock().unwrap_or_else(|p| p.into_inner());
        let current = self.read_state().world.clone();
        self.apply(current);
    }

    /// The labelled disks as last scanned.
    pub fn disks(&self) -> Vec<Disk> {
        self.read_state().world.model.disks.clone()
    }

    /// Each label's filter mode as applied (the metric), read under the state
    /// lock: the scrape path copies no disk.
    pub fn applied_modes(&self) -> std::collections::BTreeMap<String, asmguard_guard::Applied> {
        crate::model::modes(&self.read_state().world.model.disks)
    }

    /// Takes and releases the exclusive claims to match the disks and their filter
    /// modes. A disk being labelled right now keeps its claim as it is (the label
    /// write decided how to open it from that).
    pub fn sync_claims(&self) {
        let c = &self.claiming;
        let t0 = Instant::now();
        let first = !c.synced.swap(true, std::sync::atomic::Ordering::SeqCst);
        // the disks waited for, `LABEL MAJ:MIN` (for the slow line)
        let mut waited = BTreeSet::new();
        loop {
            let busy: Vec<KernelDev> = self
                .inflight
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .filter_map(|k| match k {
                    Busy::Dev(d) => Some(*d),
                    Busy::Label(_) => None,
                })
                .collect();
            let failed = c.claims.sync(&self.wanted_claims(), &busy);
            let mut failing = c.failing.lock().unwrap_or_else(|p| p.into_inner());
            // a disk newly wanted (just labelled, hot-plugged) is waited for:
            // another exclusive opener (udev's probe, a writer closing) may
            // hold it a moment; one that failed a whole wait before is not
            let new = !first && failed.iter().any(|(w, _)| !failing.contains(&w.dev));
            waited.extend(
                failed
                    .iter()
                    .filter(|(w, _)| !failing.contains(&w.dev))
                    .map(|(w, _)| format!("{} {}", w.label, w.dev)),
            );
            if failed.is_empty() || !new || t0.elapsed() >= CLAIM_WAIT {
                let ms = t0.elapsed().as_millis();
                if ms >= CLAIM_SLOW.as_millis() {
                    let m = format!(
                        "the exclusive claim of {} took {ms} ms{}",
                        waited.iter().cloned().collect::<Vec<_>>().join(", "),
                        if failed.is_empty() {
                            " to take"
                        } else {
                            ": not all taken"
                        }
                    );
                    tracing::warn!("{m}");
                    *c.slow.lock().unwrap_or_else(|p| p.into_inner()) = m;
                }
                for (w, e) in &failed {
                    if failing.insert(w.dev) {
                        tracing::warn!(
                            "{} ({}): cannot take the exclusive claim: {e}: the kernel's consumers \
                             (dm, md, mount, swap ...) are not kept off it",
                            w.path.display(),
                            w.label
                        );
                    }
                }
                failing.retain(|d| failed.iter().any(|(w, _)| w.dev == *d));
                return;
            }
            drop(failing);
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The top device of every disk whose filter mode asks for a claim.
    fn wanted_claims(&self) -> Vec<crate::claims::Wanted> {
        model::claims(&self.read_state().world.model.disks)
    }

    /// The devices the label watch reads (`crate::watch`): the ones a scan
    /// reads with nothing stacked on them.
    pub fn watched(&self) -> Vec<String> {
        self.read_state()
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
        let sys = self.read_state().devices.get(name)?.sys.clone();
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
        let s = self.read_state();
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
        let mut s = self.write_state();
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
        let next = s.world.with_model(conf.clone(), built);
        drop(s);
        self.apply(next);
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
        let mut d = Daemon::for_tests(Config::default());
        d.site.paths.sys = root.path().to_path_buf();
        let d = Arc::new(d);
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
        let s = d.read_state();
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
        let text = std::fs::read(crate::fence::path(run)).ok()?;
        let r: crate::fence::Record = serde_json::from_slice(&text).unwrap();
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
        let mut d = Daemon::for_tests(Config::default());
        d.site.paths.sys = sys.path().to_path_buf();
        d.site.runtime_dir = run.path().to_path_buf();
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
        let mut again = Daemon::for_tests(Config::default());
        again.site.runtime_dir = run.path().to_path_buf();
        let again = Daemon::new(
            Config::default(),
            "test".into(),
            again.site.socket.clone(),
            run.path().to_path_buf(),
            "none".into(),
            Started {
                filter: FilterService::inert("not loaded in this test"),
                writer: Writer::default(),
                metrics: MetricsService::without_tracer(),
            },
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
