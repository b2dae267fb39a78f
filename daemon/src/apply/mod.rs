//! The apply side: [`Applier`], the one holder of every effector (the
//! filter's maps and links, the stable links, the containers' nodes, the
//! exclusive claims, the first-labelled and fence records, the latency
//! tracer's device set), and [`Applied`], what it achieved, which every view
//! reads.
//!
//! An input hands the applier an [`Input`]; the applier computes the next
//! World ([`crate::world::next`], pure) and makes the system match it, in
//! this order: the host's rules; then, once a scan has run, the filter's
//! managed set (a new path is protected before anything else looks at it)
//! and each disk's mode, the container rules, the stable links, the
//! containers' device nodes, the first-labelled record, the exclusive claims
//! and the tracer; the fence record; the events of exposures that began or
//! ended. It reads no disk and no container file; it never changes the World
//! it was given.

pub mod claims;
pub mod fence;
pub mod filter;
pub mod inflight;
pub mod kept;
pub mod links;
pub mod metrics;
pub mod present;

use crate::world::model::{self, Model};
use crate::world::modes::Refused;
use crate::world::{next, Input, World};
use asmguard_devices::KernelDev;
use filter::service::FilterService;
use metrics::MetricsService;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the claim of a disk newly wanted (just labelled, hot-plugged)
/// is tried again before `label` answers or the scan ends: another exclusive
/// opener (udev's probe, a writer still closing) may hold it a moment, and
/// nothing else keeps the kernel's consumers off a disk on 5.10.
pub const CLAIM_WAIT: Duration = Duration::from_secs(5);

/// Taking the claims this long or longer is logged and shown in `status`.
const CLAIM_SLOW: Duration = Duration::from_millis(500);

/// Where the modes an administrator set are kept across restarts.
pub fn modes_file(runtime_dir: &std::path::Path) -> PathBuf {
    runtime_dir.join("filter.state")
}

pub use inflight::Inflight;

/// What the views read: the last [`Applied`], replaced whole by each apply.
pub type Published = Arc<std::sync::RwLock<Arc<Applied>>>;

/// What the last apply achieved: the World it applied, each disk's mode as
/// the filter applies it, and what the effectors report.
#[derive(Debug, Clone)]
pub struct Applied {
    /// What the input applied could not do (the filter's programs could
    /// not be installed or their pins removed).
    pub last_error: Option<String>,
    /// The World applied, with each disk's `mode` as the filter applies it
    /// (the World given has none: modes are the filter's).
    pub world: World,
    /// The containers' device nodes made, and the ones that could not be.
    pub presented: present::Outcome,
    /// `status`: the exclusive claims held, how they are kept, and the last
    /// time taking them was slow (empty when never).
    pub claims: Vec<asmguard_proto::Claim>,
    pub claims_kept: asmguard_proto::ClaimsKept,
    pub claims_slow: Option<asmguard_proto::ClaimsSlow>,
    /// The devices whose exclusive claim is held.
    pub claimed: BTreeSet<KernelDev>,
}

impl Applied {
    /// Before anything was applied.
    pub fn nothing(world: World) -> Applied {
        Applied {
            last_error: None,
            world,
            presented: present::Outcome::default(),
            claims: Vec::new(),
            claims_kept: asmguard_proto::ClaimsKept::OnStart,
            claims_slow: None,
            claimed: BTreeSet::new(),
        }
    }
}

/// The one apply task's state: the World as last applied and every effector.
pub struct Applier {
    world: World,
    /// What the last input achieved (the World's model with each disk's
    /// mode as the filter applies it): the value the daemon publishes.
    last: Arc<Applied>,
    filter: Arc<FilterService>,
    metrics: Arc<MetricsService>,
    links: links::Links,
    presenter: present::Presenter,
    kept: kept::Kept,
    claims: claims::Claims,
    /// Devices whose claim failed through a whole [`CLAIM_WAIT`] (not waited
    /// for again until taken or no longer wanted).
    failing: BTreeSet<KernelDev>,
    /// Whether the claims were synced once: the first sync (the daemon's
    /// start) waits for none (a disk that is mounted or mapped now stays so,
    /// and a restart must not wait for each).
    synced: bool,
    claims_slow: Option<asmguard_proto::ClaimsSlow>,
    /// Disks and labels being written right now (shared with the label
    /// operations: their disk keeps its claim as it is meanwhile).
    inflight: Inflight,
    paths: asmguard_paths::Paths,
    /// The fence record (`crate::apply::fence`).
    fence_file: PathBuf,
    /// The modes' record (`<runtime_dir>/filter.state`).
    modes_file: PathBuf,
}

/// What the applier is made of.
pub struct Parts {
    pub world: World,
    pub filter: Arc<FilterService>,
    pub metrics: Arc<MetricsService>,
    pub inflight: Inflight,
    pub paths: asmguard_paths::Paths,
    pub runtime_dir: PathBuf,
    /// How long a new claimant of a label stays too young to keep it.
    pub settle: Duration,
}

impl Applier {
    pub fn new(p: Parts) -> Applier {
        Applier {
            last: Arc::new(Applied::nothing(p.world.clone())),
            world: p.world,
            filter: p.filter,
            metrics: p.metrics,
            links: Default::default(),
            presenter: present::Presenter::at(p.paths.containers_dir()),
            kept: kept::Kept::new(&p.runtime_dir, p.settle, &p.paths),
            claims: claims::Claims::from_environment(),
            failing: BTreeSet::new(),
            synced: false,
            claims_slow: None,
            inflight: p.inflight,
            fence_file: fence::path(&p.runtime_dir),
            modes_file: modes_file(&p.runtime_dir),
            paths: p.paths,
        }
    }

    /// What the last input achieved.
    pub fn last(&self) -> Arc<Applied> {
        self.last.clone()
    }

    /// Takes `input` into the World and makes the system match it; returns
    /// what was achieved. An input the World refuses (a mode for a label no
    /// disk carries) changes nothing and is answered with why.
    pub fn apply(&mut self, input: Input) -> Result<Arc<Applied>, Refused> {
        let input = match input {
            // first come, first kept: the label conflicts' keepers resolved
            // against the World as last applied (the record is read here)
            Input::Model(mut m) => {
                m.kept.clear();
                self.kept.resolve(&self.world.model, &mut m);
                Input::Model(m)
            }
            i => i,
        };
        let verify = matches!(input, Input::Verify);
        let relinked = match &input {
            Input::Relink(n) => Some(n.clone()),
            _ => None,
        };
        let disks = input.touches_disks();
        // the whole filter on or off
        let turn = matches!(input, Input::Mode { label: None, .. });
        let w = next(&self.world, input)?;
        let before = std::mem::replace(&mut self.world, w.clone());
        let mut shown = w.clone();
        let mut last_error = None;
        if turn {
            if let Err(e) = self.filter.turn(w.modes.disabled) {
                last_error = Some(e);
            }
        }
        if !Arc::ptr_eq(&before.modes, &w.modes) {
            self.save_modes(&w.modes);
        }
        if !rules_same(&before, &w) {
            if let Some(r) = &w.rules {
                if let Err(e) = self.filter.set_host_rules(r.rules.clone()) {
                    tracing::error!("filter allow rules: {e}");
                }
            }
        }
        // before the first scan there is no model: an empty one would remove
        // every node, link and claim a previous run made
        if w.scanned && disks {
            self.disks(&before, &w, &mut shown.model);
        } else {
            // the modes as last applied
            shown.model = self.last.world.model.clone();
        }
        if !Arc::ptr_eq(&before.fenced, &w.fenced) {
            if let Err(e) = fence::save(&self.fence_file, &self.paths.proc, &w.fenced) {
                tracing::error!(
                    "reclaim fence: cannot record it in {}: {e}",
                    self.fence_file.display()
                );
            }
        }
        if !Arc::ptr_eq(&before.exposed, &w.exposed) {
            self.exposures(&before, &w);
        }
        if !Arc::ptr_eq(&before.loops, &w.loops) {
            self.loops_before(&before, &w);
        }
        if verify {
            self.filter.verify();
        }
        if let Some(name) = relinked {
            relink(&self.paths, &name);
        }
        self.last = Arc::new(Applied {
            last_error,
            presented: self.presenter.outcome(),
            claims: self.claims.list(),
            claims_kept: self.claims.kept(),
            claims_slow: self.claims_slow.clone(),
            claimed: model::claims(&shown.model.disks)
                .iter()
                .map(|c| c.dev)
                .filter(|d| self.claims.holds(*d))
                .collect(),
            world: shown,
        });
        Ok(self.last.clone())
    }

    /// The disks' part: the filter's set and modes, the container rules, the
    /// links, the nodes, the record, the claims, the tracer. `shown` gets
    /// each disk's mode as applied.
    fn disks(&mut self, before: &World, w: &World, shown: &mut Model) {
        self.filter
            .sync(model::managed_set(&w.model.disks), &w.modes, &w.fenced);
        for d in &mut shown.disks {
            d.mode = Some(self.filter.disk_mode(d.label.as_str()));
        }
        if !Arc::ptr_eq(&before.containers, &w.containers) || self.filter.container_rules_unset() {
            let c = &w.containers;
            if let Err(e) = self.filter.set_containers(c.rules(), c.names()) {
                tracing::error!("filter: cannot set the container rules: {e}");
            }
        }
        for u in w
            .model
            .unmanaged
            .iter()
            .filter(|u| !before.model.unmanaged.contains(u))
        {
            tracing::warn!(
                "{}: carries an ASM label header asmguardd does not manage ({}): {}; it is not protected and gets no /dev/asmguard link (rules of other tools that match the label bytes may still link it)",
                u.device,
                u.label
                    .as_deref()
                    .map_or("no label".to_string(), |l| format!("LABEL={l} to blkid and udev")),
                u.why
            );
        }
        log_conflicts(&before.model, &w.model);
        self.links.follow(&self.paths, &w.model);
        self.present(w);
        self.kept.record(&w.model);
        self.sync_claims(&model::claims(&shown.disks));
        self.metrics.sync(model::traced(&shown.disks));
    }

    /// Writes the modes to the runtime state file (they outlive a restart,
    /// not a reboot).
    fn save_modes(&self, m: &crate::world::modes::Modes) {
        let p = &self.modes_file;
        if let Some(dir) = p.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        if let Err(e) = std::fs::write(p, m.text()) {
            tracing::error!("cannot save the filter state {}: {e}", p.display());
        }
    }

    /// Makes the containers' device nodes match World `w`. Nothing to do
    /// with no container configured.
    fn present(&self, w: &World) {
        let each = &w.containers.each;
        if each.is_empty() && !self.presenter.presented_any() {
            return;
        }
        let disks: Vec<(String, KernelDev)> = w
            .model
            .disks
            .iter()
            .filter(|d| !d.conflict)
            .map(|d| (d.label.to_string(), d.top.dev))
            .collect();
        let targets: Vec<present::Target> = each
            .iter()
            .map(|r| present::target(&w.conf.cfg, &r.config, r.owner.clone()))
            .collect();
        self.presenter.sync(&disks, &targets);
    }

    /// Takes and releases the exclusive claims to match `wanted` (the top
    /// device of every disk whose filter mode asks for one). A disk being
    /// labelled right now keeps its claim as it is (the label write decided
    /// how to open it from that).
    fn sync_claims(&mut self, wanted: &[claims::Wanted]) {
        let t0 = Instant::now();
        let first = !std::mem::replace(&mut self.synced, true);
        // the disks waited for (for the slow line)
        let mut waited: BTreeSet<asmguard_proto::Claim> = BTreeSet::new();
        loop {
            let busy: Vec<KernelDev> = self.inflight.disks();
            let failed = self.claims.sync(wanted, &busy);
            let failing = &mut self.failing;
            // a disk newly wanted (just labelled, hot-plugged) is waited for:
            // another exclusive opener (udev's probe, a writer closing) may
            // hold it a moment; one that failed a whole wait before is not
            let new = !first && failed.iter().any(|(w, _)| !failing.contains(&w.dev));
            waited.extend(
                failed
                    .iter()
                    .filter(|(w, _)| !failing.contains(&w.dev))
                    .map(|(w, _)| asmguard_proto::Claim {
                        label: w.label.clone(),
                        major: w.dev.major(),
                        minor: w.dev.minor(),
                    }),
            );
            if failed.is_empty() || !new || t0.elapsed() >= CLAIM_WAIT {
                let ms = t0.elapsed().as_millis();
                if ms >= CLAIM_SLOW.as_millis() {
                    let slow = asmguard_proto::ClaimsSlow {
                        disks: waited.iter().cloned().collect(),
                        ms: u64::try_from(ms).unwrap_or(u64::MAX),
                        all_taken: failed.is_empty(),
                    };
                    let disks: Vec<String> = slow
                        .disks
                        .iter()
                        .map(|c| format!("{} {}:{}", c.label, c.major, c.minor))
                        .collect();
                    tracing::warn!(
                        "the exclusive claim of {} took {ms} ms{}",
                        disks.join(", "),
                        if slow.all_taken {
                            " to take"
                        } else {
                            ": not all taken"
                        }
                    );
                    self.claims_slow = Some(slow);
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
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Logs and records (the filter's event history) each loop device set
    /// up before protection that was found or went between `before` and `w`.
    fn loops_before(&self, before: &World, w: &World) {
        let (new, gone) = crate::world::exposed::loop_changes(&before.loops, &w.loops);
        for lo in new {
            tracing::warn!("{lo}");
            self.filter
                .note_loop(asmguard_proto::Noticed::LoopBefore { device: lo });
        }
        for lo in gone {
            tracing::info!(
                "{} over {} (backing file {}): detached, or the disk is no longer protected",
                lo.name,
                lo.label,
                lo.backing
            );
            self.filter
                .note_loop(asmguard_proto::Noticed::LoopGone { device: lo });
        }
    }

    /// Logs and records (the filter's event history) each exposure that
    /// began or ended between `before` and `w`.
    fn exposures(&self, before: &World, w: &World) {
        let (new, gone) = crate::world::exposed::changes(&before.exposed, &w.exposed);
        let proc = &self.paths.proc;
        let exe = |pid: u32| {
            std::fs::read_link(proc.join(pid.to_string()).join("exe"))
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        };
        for (l, o) in new {
            tracing::error!(
                "exposed: {}: writes through that mapping land whatever the filter says; \
                 end the process to close it ({})",
                crate::world::exposed::line(&l, &o),
                o.path
            );
            self.filter
                .note_event(&l, &o, exe(o.pid), asmguard_proto::Noticed::Exposed);
        }
        for (l, o) in gone {
            tracing::warn!(
                "no longer exposed: {l}: pid {} ({}) and its shared-writable mapping are gone",
                o.pid,
                o.comm
            );
            self.filter
                .note_event(&l, &o, exe(o.pid), asmguard_proto::Noticed::ExposureEnded);
        }
    }
}

/// Lets udev make the link of what the disk now carries: the cached pages of
/// the device hold the label as this host last read it (a disk the daemon
/// holds open keeps them), so they are dropped, then a change event makes
/// udev probe the disk again (its rules link `/dev/asmguard/disks/<LABEL>`
/// and set owner, group and mode, as after a label written here).
fn relink(paths: &asmguard_paths::Paths, name: &str) {
    let Ok(sd) = asmguard_devices::sysfs::read(paths, name) else {
        return; // gone: its remove event takes the link
    };
    let path = sd.dev_path();
    let dropped = std::fs::File::open(&path)
        .map_err(|e| e.to_string())
        .and_then(|f| {
            nix::fcntl::posix_fadvise(
                &f,
                0,
                0,
                nix::fcntl::PosixFadviseAdvice::POSIX_FADV_DONTNEED,
            )
            .map_err(|e| e.to_string())
        });
    if let Err(e) = dropped {
        tracing::warn!(
            "{}: could not drop its cached pages ({e}): udev may link it by \
             the label this host read before",
            path.display()
        );
    }
    if let Err(e) = asmguard_devices::sysfs::trigger_change(&paths.sys, name) {
        tracing::warn!("{name}: could not send a change uevent: {e}");
    }
}

/// Whether two Worlds hold the same host rules (the same resolution).
fn rules_same(a: &World, b: &World) -> bool {
    match (&a.rules, &b.rules) {
        (Some(x), Some(y)) => Arc::ptr_eq(x, y),
        (None, None) => true,
        _ => false,
    }
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
