//! The filter as the daemon runs it: a [`Guard`] (the loader of
//! asmguard-guard) plus what the daemon knows (labels, their devices, the
//! modes an administrator set for a disk), the event thread and the recent
//! events.
//!
//! The daemon's one `apply` calls [`FilterService::sync`] with each label's
//! devices after every scan or uevent; the service keeps the kernel's managed
//! set equal to it (new devices in, gone ones out), so a hotplugged path is
//! protected as soon as the daemon has seen it.
//!
//! A mode set with `asmguardctl filter audit|disable|enable LABEL` belongs to
//! the disk that carried the label then (its top device): it moves with a
//! `rename`, ends with an `unlabel` or a new `label`, and is void when the
//! label turns up on another disk. A new label always starts in the
//! configured mode.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::containers::ContainerRule;
use super::events::{noted, received, Noted};
use crate::world::modes::Modes;
use asmguard_guard::{FilterReason, NoFilter};
use asmguard_proto::{FilterEventInfo, ReplacedPin};
use asmguard_proto::{FilterScope, Protection};

use asmguard_guard::{
    remove_pins, Applied, Backend, Coverage, DevKey, Error, ExeId, Guard, Hook, IdentityReach,
    KernelDev, Mode, Options, Rules,
};

/// How many events `recent` keeps.
const RECENT: usize = 1000;

/// How one label's disk is filtered: what `lsdsk` shows, what decides its
/// exclusive claim and what the filter-mode metric exports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskMode {
    /// No backend could load: nothing is filtered.
    Unprotected,
    /// An administrator removed the programs (`filter disable`).
    Disabled,
    /// The loaded backend applies `mode` (`Mode::Off`: this label is not filtered).
    Filtered {
        /// The label's mode.
        mode: Mode,
        /// The backend applying it.
        backend: Backend,
    },
}

impl DiskMode {
    /// The mode in force (`Off` without programs).
    pub fn mode(self) -> Mode {
        match self {
            DiskMode::Filtered { mode, .. } => mode,
            DiskMode::Unprotected | DiskMode::Disabled => Mode::Off,
        }
    }

    /// Whether the disk is to be held by an exclusive claim: every mode but
    /// `off` and `audit` (a disk with no backend at all is claimed too: the
    /// claim is then its only protection).
    pub fn claimed(self) -> bool {
        match self {
            DiskMode::Unprotected => true,
            DiskMode::Disabled => false,
            DiskMode::Filtered { mode, .. } => matches!(mode, Mode::Enforce | Mode::Fenced),
        }
    }
}

impl DiskMode {
    /// What the filter covers for this disk.
    pub fn cover(self) -> Coverage {
        match self {
            DiskMode::Unprotected => Coverage::Unprotected,
            DiskMode::Disabled => Coverage::Disabled,
            DiskMode::Filtered { backend, .. } => backend.coverage(),
        }
    }

    /// The mode as applied: the mode, `off` when disabled, unprotected
    /// without a backend (the `asmguard_filter_mode` label).
    pub fn applied(self) -> Applied {
        self.cover().applied(self.mode())
    }
}

/// `lsdsk`'s `filter_scope` of a coverage (`asmguardctl` renders the
/// Filtering sentence from it, the mode word and the backend).
pub fn scope_of(cover: Coverage) -> FilterScope {
    match cover {
        Coverage::Full(_) => FilterScope::Full,
        Coverage::OpenTimeOnly => FilterScope::OpenTimeOnly,
        Coverage::Disabled => FilterScope::Disabled,
        Coverage::Unprotected => FilterScope::Unprotected,
    }
}

/// What `status` shows. The backend, coverage and protection words all
/// derive from [`FilterStatus::cover`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterStatus {
    /// What the filter covers (which backend, or why none).
    pub cover: Coverage,
    /// Why this backend (or why none).
    pub reason: FilterReason,
    /// The rule SG_IO and NVMe passthrough get (`None`: no filter).
    pub passthrough: Option<asmguard_guard::PassthroughRule>,
    /// Whether pinned programs were re-adopted at start.
    pub adopted: bool,
    /// Attached programs.
    pub programs: Vec<asmguard_proto::Program>,
    /// Devices in the kernel's managed set.
    pub devices: usize,
    /// `ag_majors` as the kernel has it (`None`: no filter).
    pub majors: Option<asmguard_proto::Majors>,
    /// What of a caller the filter can judge (`Full` without a filter).
    pub reach: IdentityReach,
    /// Another process changed the filter's pins or maps (put back since):
    /// protection is `degraded`.
    pub changed: bool,
    /// `guarded`, `watched` (not guarded: compared and put back every 2 s)
    /// or `none` (no filter): `status`'s `filter_pins`.
    pub pins: asmguard_proto::Pins,
    /// `refused by the kernel` (no other task gets an fd onto the filter's
    /// maps or programs), `periodic check only` or `none`: `status`'s
    /// `map_fds`.
    pub map_fds: asmguard_proto::MapFds,
}

impl FilterStatus {
    /// No filter service yet.
    #[cfg(test)]
    pub fn not_started() -> FilterStatus {
        FilterStatus {
            cover: Coverage::Unprotected,
            reason: FilterReason::none(NoFilter::NotStarted),
            passthrough: None,
            adopted: false,
            programs: vec![],
            devices: 0,
            majors: None,
            reach: IdentityReach::Full,
            changed: false,
            pins: asmguard_proto::Pins::None,
            map_fds: asmguard_proto::MapFds::None,
        }
    }

    /// `lsm`, `cgroup_device`, or `none`.
    pub fn backend(&self) -> asmguard_guard::BackendName {
        self.cover.backend()
    }

    /// `full`, `degraded: open-time only`, or why there is no filter.
    pub fn coverage(&self) -> String {
        self.cover.describe(&self.reason.to_string())
    }

    /// The state of protection (`StatusResult::protection`; the reason is
    /// `reason`).
    pub fn protection(&self) -> Protection {
        protection_of(self.cover, self.changed)
    }
}

/// The state of protection of a filter covering `cover`, `changed` by
/// another process (put back since) or not.
fn protection_of(cover: Coverage, changed: bool) -> Protection {
    match cover {
        Coverage::Full(_) if changed => Protection::Degraded,
        Coverage::Full(_) => Protection::Protected,
        Coverage::OpenTimeOnly => Protection::Degraded,
        Coverage::Disabled => Protection::Off,
        Coverage::Unprotected => Protection::Unprotected,
    }
}

/// What `status` says of pinned links a start did not adopt
/// (`Guard::replaced_links`); `None` when all were the daemon's.
fn replaced_at_start(replaced: &[ReplacedPin]) -> Option<String> {
    (!replaced.is_empty()).then(|| {
        format!(
            "{} pinned link{} not what this daemon's build pinned, replaced at start \
             (writes may have landed while they were pinned): {}",
            replaced.len(),
            if replaced.len() == 1 { "" } else { "s" },
            replaced
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        )
    })
}

/// Operation counts by (label, hook, mode).
pub type Counts = BTreeMap<(String, Hook, Mode), u64>;

/// What the filter protects for one label: the top device of its disk (a
/// mode set for the label belongs to it) and every device that reaches it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Managed {
    /// The disk's top device.
    pub top: Option<KernelDev>,
    /// Every block path, stacked device and generic node.
    pub devs: BTreeSet<DevKey>,
}

struct Inner {
    guard: Option<Guard>,
    why_none: NoFilter,
    /// label -> devices, as last synced.
    disks: BTreeMap<String, Managed>,
    /// label -> disk id (stable for the daemon's life).
    ids: HashMap<String, u32>,
    /// The modes an administrator set, as last applied (the World's:
    /// `crate::world::modes`).
    modes: Modes,
    /// `filter disable` with no label, as applied: no programs until
    /// `enable`/`audit`.
    disabled: bool,
    /// The allow-list, once the daemon gave one (until then a re-adopted
    /// map keeps the previous daemon's).
    host: Option<Rules>,
    reader: Option<(Arc<AtomicBool>, JoinHandle<()>)>,
    /// Whether the daemon has synced once (the reader starts then, so that
    /// events queued in the kernel while nobody read name their label).
    synced: bool,
    /// The container rules, once the daemon gave them, and what they resolved
    /// from (for `status`).
    containers: Option<Vec<ContainerRule>>,
    /// What another process changed of this filter's pins or maps, last seen
    /// (`verify`); protection is `degraded` while it is set (until the
    /// programs are loaded again: `filter disable` and `enable`, a restart).
    changed: Option<String>,
    /// The disks a reclaim runs on (the World's `fenced`): mode `fenced`
    /// whatever mode is set for them.
    fenced: std::collections::BTreeSet<String>,
    /// The managed-device maps as this daemon last left them (read back
    /// after each write; `None` until its first write to these programs'
    /// maps: a re-adopted map holds the previous daemon's). Any other
    /// content found before the next write was another process's doing.
    written: Option<BTreeMap<DevKey, (Mode, u32)>>,
}

/// The daemon's filter.
pub struct FilterService {
    opts: Options,
    default_mode: Mode,
    inner: Mutex<Inner>,
    labels: Arc<Mutex<HashMap<u32, String>>>,
    recent: Arc<Mutex<VecDeque<FilterEventInfo>>>,
    seq: Arc<std::sync::atomic::AtomicU64>,
    /// Container id -> name, for events.
    ctr_names: Arc<Mutex<HashMap<u32, String>>>,
    /// Pinned links replaced at a filter start because they were not this
    /// daemon's (`asmguard_pins_replaced_total`), over the daemon's life.
    pins_replaced: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for FilterService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FilterService").finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl FilterService {
    /// Starts the filter (loading or re-adopting the programs) unless the
    /// runtime state file says it was disabled. Every event is logged
    /// ([`super::log_event`]) and kept for `events`. Never fails: without a
    /// filter, [`FilterService::status`] says why.
    ///
    /// `state_file` keeps runtime choices (`filter disable`, per-disk modes)
    /// across daemon restarts (a file under /run: not across reboots).
    pub fn start(opts: Options, default_mode: Mode, disabled: bool) -> FilterService {
        let svc = Self::new(opts, default_mode);
        {
            let mut inner = lock(&svc.inner);
            if disabled {
                inner.disabled = true;
                inner.why_none = NoFilter::Disabled;
            } else {
                svc.install(&mut inner);
            }
        }
        svc
    }

    /// A service that loads nothing (no backend; `status` gives `why`): for a
    /// daemon under test that must not touch the kernel's filter.
    #[cfg(test)]
    pub fn inert() -> FilterService {
        let svc = Self::new(
            Options::new(&asmguard_paths::Paths::default()),
            Mode::Enforce,
        );
        lock(&svc.inner).why_none = NoFilter::NotStarted;
        svc
    }

    /// The roots the filter was opened with (the daemon's).
    pub fn paths(&self) -> &asmguard_paths::Paths {
        &self.opts.paths
    }

    fn new(opts: Options, default_mode: Mode) -> FilterService {
        FilterService {
            opts,
            default_mode,
            inner: Mutex::new(Inner {
                guard: None,
                why_none: NoFilter::NotStarted,
                disks: BTreeMap::new(),
                ids: HashMap::new(),
                modes: Modes::default(),
                disabled: false,
                host: None,
                reader: None,
                synced: false,
                changed: None,
                containers: None,
                fenced: Default::default(),
                written: None,
            }),
            labels: Arc::new(Mutex::new(HashMap::new())),
            recent: Arc::new(Mutex::new(VecDeque::new())),
            seq: Arc::new(std::sync::atomic::AtomicU64::new(0)),
            ctr_names: Arc::new(Mutex::new(HashMap::new())),
            pins_replaced: Default::default(),
        }
    }

    fn install(&self, inner: &mut Inner) {
        match Guard::open(&self.opts) {
            Ok(g) => {
                // Pinned links that were not this daemon's (replaced while
                // no daemon ran): replaced by Guard::open, and protection
                // stays `degraded` with the reason until a reload or restart.
                inner.changed = replaced_at_start(g.replaced_links());
                if let Some(what) = &inner.changed {
                    tracing::error!(
                        "write filter: pinned in {} by another process while no daemon ran: {what}",
                        self.opts.pin_dir.display()
                    );
                }
                // each one an event and a count too (the ERROR line scrolls away)
                for r in g.replaced_links() {
                    self.pins_replaced.fetch_add(1, Ordering::Relaxed);
                    self.keep(self.daemon_event(asmguard_proto::Noticed::PinReplaced(r.clone())));
                }
                inner.guard = Some(g);
                inner.written = None;
                // A re-adopted filter keeps its maps exactly as they are until
                // the daemon knows better: the first sync adds the current
                // devices, then removes the stale ones, so no managed device
                // is ever out of the map (and no allowed user is refused).
                if let (Some(g), Some(r)) = (&inner.guard, compose(inner)) {
                    if let Err(e) = g.set_rules(&r) {
                        tracing::error!("filter: cannot set the allow rules: {e}");
                    }
                }
                if inner.synced {
                    self.write_set(inner, true);
                    self.start_reader(inner);
                }
            }
            Err(e) => {
                inner.guard = None;
                inner.why_none = NoFilter::LoadFailed {
                    error: e.to_string(),
                };
            }
        }
    }

    fn start_reader(&self, inner: &mut Inner) {
        let Some(g) = &inner.guard else { return };
        let mut reader = match g.event_reader() {
            Ok(r) => r,
            Err(e) => {
                tracing::error!("no filter events: {e}");
                return;
            }
        };
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let labels = self.labels.clone();
        let ctr_names = self.ctr_names.clone();
        let recent = self.recent.clone();
        let seq = self.seq.clone();
        let handle = std::thread::Builder::new()
            .name("filter-events".into())
            .spawn(move || {
                while !stop2.load(Ordering::Relaxed) {
                    let Ok(evs) = reader.poll(Duration::from_millis(200)) else {
                        std::thread::sleep(Duration::from_millis(200));
                        continue;
                    };
                    for ev in evs {
                        let label = lock(&labels).get(&ev.disk_id).cloned().unwrap_or_default();
                        let container = match ev.ctr_id {
                            0 => String::new(),
                            id => lock(&ctr_names)
                                .get(&id)
                                .cloned()
                                .unwrap_or_else(|| format!("container-{id}")),
                        };
                        let fe = received(
                            ev,
                            seq.fetch_add(1, Ordering::Relaxed) + 1,
                            label,
                            container,
                        );
                        super::events::log_event(&fe);
                        let mut r = lock(&recent);
                        if r.len() >= RECENT {
                            r.pop_front();
                        }
                        r.push_back(fe);
                    }
                }
            });
        match handle {
            Ok(h) => inner.reader = Some((stop, h)),
            Err(e) => tracing::error!("cannot start the filter event thread: {e}"),
        }
    }

    fn stop_reader(inner: &mut Inner) {
        if let Some((stop, h)) = inner.reader.take() {
            stop.store(true, Ordering::Relaxed);
            let _ = h.join();
        }
    }

    /// The mode of the disk that carries `label` now: the one an
    /// administrator set for that disk, else the configured one; `fenced`
    /// while a reclaim runs on it.
    fn mode_for(&self, inner: &Inner, label: &str) -> Mode {
        let top = inner.disks.get(label).and_then(|m| m.top);
        inner
            .modes
            .mode_for(label, top, self.default_mode, inner.fenced.contains(label))
    }

    /// Writes the managed set into the kernel maps. With `full`, also removes
    /// every map entry that is not a device of a current label (after a
    /// re-adoption the maps hold the previous daemon's set).
    fn write_set(&self, inner: &mut Inner, full: bool) {
        let found = self.write_maps(inner, full, false);
        self.changed_under(inner, found.into_iter().collect());
    }

    /// [`Self::apply`]; with `all_off`, every disk's mode off (the first
    /// step of `filter disable`).
    /// Returns what another process changed since the last write (put right).
    fn write_maps(&self, inner: &mut Inner, full: bool, all_off: bool) -> Option<String> {
        let Some(g) = &inner.guard else { return None };
        let mut wanted = self.wanted(inner);
        if all_off {
            for v in wanted.values_mut() {
                v.0 = Mode::Off;
            }
        }
        // New and changed entries first, then the stale ones leave: a device
        // that stays is never out of the map.
        let current = g.disks().unwrap_or_default();
        // what another process changed since this daemon's last write: put
        // right below like the rest, and said (a write that follows a
        // change at once, a device event's, must not hide it from the check)
        let tampered = inner
            .written
            .as_ref()
            .map(|w| differing(w, &current))
            .filter(|d| !d.is_empty());
        for (d, (mode, id)) in &wanted {
            if current.get(d) != Some(&(*mode, *id)) {
                if let Err(e) = g.set_disk(&[*d], *mode, *id) {
                    tracing::error!("filter: cannot add {d}: {e}");
                }
            }
        }
        let stale: Vec<DevKey> = current
            .keys()
            .filter(|d| !wanted.contains_key(d))
            .copied()
            .collect();
        if full || !stale.is_empty() {
            let _ = g.remove_disk(&stale);
        }
        inner.written = g.disks().ok();
        tampered.map(|d| {
            format!(
                "the managed-device map differs from what this daemon last wrote on {} device{} ({}): written again",
                d.len(),
                if d.len() == 1 { "" } else { "s" },
                d.iter().take(4).map(|d| d.to_string()).collect::<Vec<_>>().join(", ")
            )
        })
    }

    /// What another process changed of this filter (`found`, each a
    /// sentence): an ERROR line, and protection `degraded` with the reason.
    fn changed_under(&self, inner: &mut Inner, found: Vec<String>) {
        if found.is_empty() {
            return;
        }
        let what = found.join("; ");
        tracing::error!(
            "write filter: changed under this daemon by another process (a second filter loader on {}?): {what}",
            self.opts.pin_dir.display()
        );
        inner.changed = Some(what);
    }

    /// The managed set as the kernel maps should hold it: device -> (mode, disk id).
    fn wanted(&self, inner: &Inner) -> BTreeMap<DevKey, (Mode, u32)> {
        let mut wanted = BTreeMap::new();
        for (label, m) in &inner.disks {
            let id = inner.ids.get(label).copied().unwrap_or(0);
            let mode = self.mode_for(inner, label);
            for d in &m.devs {
                wanted.insert(*d, (mode, id));
            }
        }
        wanted
    }

    /// Checks that the filter's kernel objects are still this daemon's: every
    /// pin names the map or link it holds, the managed-device maps hold the
    /// daemon's disks, and every other map the programs read and the daemon
    /// fills holds what it last wrote there (`Guard::check_maps`: the majors,
    /// the allow-list and container maps, the pin directories). What another
    /// process changed (a second loader on the same pins, bpftool, a write by
    /// map id) is an ERROR line, puts protection in `degraded` with the
    /// reason in `status`, and is put back: the pins name this daemon's
    /// objects again and the maps get its content.
    pub fn verify(&self) {
        let mut inner = lock(&self.inner);
        if !inner.synced {
            return;
        }
        let Some(g) = &inner.guard else { return };
        // every finding of this check in one ERROR line and one reason
        let mut found = g.reassert_pins();
        // the managed-device maps: one read; written again (the write says
        // what another process changed) only when they are not what this
        // daemon last wrote or wants
        let current = g.disks().unwrap_or_default();
        if inner.written.as_ref() != Some(&current) || current != self.wanted(&inner) {
            found.extend(self.write_maps(&mut inner, true, false));
        }
        if let Some(g) = &inner.guard {
            found.extend(g.check_maps());
        }
        self.changed_under(&mut inner, found);
    }

    /// Whether the kernel's managed set holds every device of `label` as the
    /// daemon last synced it (true when no filter is loaded: there is nothing
    /// to hold them, and `status` says so).
    pub fn holds(&self, label: &str) -> bool {
        let inner = lock(&self.inner);
        let (Some(g), Some(m)) = (&inner.guard, inner.disks.get(label)) else {
            return true;
        };
        g.disks()
            .is_ok_and(|cur| m.devs.iter().all(|d| cur.contains_key(d)))
    }

    /// The daemon's current disks: label -> its top device and every device
    /// (block and generic character) that reaches it. Devices of labels not
    /// given leave the set. `fenced`: the disks a reclaim runs on (mode
    /// `fenced`, the World's).
    pub fn sync(
        &self,
        disks: BTreeMap<String, Managed>,
        modes: &Modes,
        fenced: &std::collections::BTreeSet<String>,
    ) {
        let mut inner = lock(&self.inner);
        inner.fenced.clone_from(fenced);
        inner.modes.clone_from(modes);
        for label in disks.keys() {
            if !inner.ids.contains_key(label) {
                let id = free_id(label, &inner.ids);
                inner.ids.insert(label.clone(), id);
                lock(&self.labels).insert(id, label.clone());
            }
        }
        inner.disks = disks;
        let full = !inner.synced;
        self.write_set(&mut inner, full);
        if !inner.synced {
            inner.synced = true;
            if inner.guard.is_some() && inner.reader.is_none() {
                self.start_reader(&mut inner);
            }
        }
    }

    /// Replaces the host's rules (the allow-list, `[[rule]]`s, Oracle homes),
    /// the disk-query tools and the daemon's own process.
    pub fn set_host_rules(&self, host: Rules) -> Result<(), Error> {
        let mut inner = lock(&self.inner);
        inner.host = Some(host);
        match (&inner.guard, compose(&inner)) {
            (Some(g), Some(r)) => g.set_rules(&r),
            _ => Ok(()),
        }
    }

    /// Replaces the container rules (`Applier::apply`); `names`: each
    /// rule's container name, for events.
    pub fn set_containers(
        &self,
        rules: Vec<ContainerRule>,
        names: Vec<String>,
    ) -> Result<(), Error> {
        {
            let mut n = lock(&self.ctr_names);
            n.clear();
            for (r, name) in rules.iter().zip(names) {
                n.insert(r.ctr_id, name);
            }
        }
        let mut inner = lock(&self.inner);
        inner.containers = Some(rules);
        match (&inner.guard, compose(&inner)) {
            (Some(g), Some(r)) => g.set_rules(&r),
            _ => Ok(()),
        }
    }

    /// Whether the container rules were never set (the first World sets them).
    pub fn container_rules_unset(&self) -> bool {
        lock(&self.inner).containers.is_none()
    }

    /// Whether the loaded filter judges tasks by their container (not the
    /// 5.10 fallback, which knows callers by uid and gid only). With no
    /// filter: false.
    pub fn containers_enforced(&self) -> bool {
        lock(&self.inner)
            .guard
            .as_ref()
            .is_some_and(|g| g.containers_enforced())
    }

    /// `filter disable` (`disabled`) or `enable`/`audit` with no label: the
    /// programs removed with their pins, or installed again. Disabling sets
    /// every disk's mode off first: the programs stop denying at once, also
    /// where the kernel is slow to detach them (or keeps them attached
    /// until reboot). `Err`: the programs could not be installed or their
    /// pins removed.
    pub fn turn(&self, disabled: bool) -> Result<(), String> {
        let mut inner = lock(&self.inner);
        if !disabled {
            inner.disabled = false;
            if inner.guard.is_none() {
                self.install(&mut inner);
                if inner.guard.is_none() {
                    return Err(inner.why_none.to_string());
                }
            }
            return Ok(());
        }
        if inner.guard.is_some() {
            let found = self.write_maps(&mut inner, false, true);
            self.changed_under(&mut inner, found.into_iter().collect());
        }
        Self::stop_reader(&mut inner);
        inner.written = None;
        if let Some(g) = inner.guard.take() {
            if let Err(e) = g.uninstall() {
                inner.disabled = true;
                inner.why_none = NoFilter::DisabledStillAttached {
                    error: e.to_string(),
                };
                tracing::error!("filter disable: {}", inner.why_none);
                return Ok(());
            }
        } else {
            remove_pins(&self.opts.paths, &self.opts.pin_dir).map_err(|e| e.to_string())?;
        }
        inner.disabled = true;
        inner.why_none = NoFilter::Disabled;
        Ok(())
    }

    /// The mode set for the disk that carries `label` now (the configured
    /// one unless an administrator set another), whether or not a backend
    /// applies it.
    #[cfg(test)]
    pub fn set_for(&self, label: &str) -> Mode {
        self.mode_for(&lock(&self.inner), label)
    }

    /// How the disk of `label` is filtered now.
    pub fn disk_mode(&self, label: &str) -> DiskMode {
        let inner = lock(&self.inner);
        match &inner.guard {
            None if inner.disabled => DiskMode::Disabled,
            None => DiskMode::Unprotected,
            Some(g) => DiskMode::Filtered {
                mode: self.mode_for(&inner, label),
                backend: g.backend(),
            },
        }
    }

    /// What the filter covers now.
    fn cover(inner: &Inner) -> Coverage {
        Coverage::of(inner.guard.as_ref().map(|g| g.backend()), inner.disabled)
    }

    /// Other BPF programs on the kernel functions of the loaded filter
    /// ([`Guard::other_programs`]: a walk of every program and link, so for
    /// `status` only, never the scrape path).
    pub fn other_programs(&self) -> Vec<asmguard_proto::Program> {
        lock(&self.inner)
            .guard
            .as_ref()
            .map_or_else(Vec::new, |g| g.other_programs())
    }

    /// What each of the filter's programs has run ([`Guard::program_runs`]:
    /// a walk of every program, for `status` only).
    pub fn program_runs(&self) -> Vec<asmguard_proto::ProgramRuns> {
        lock(&self.inner)
            .guard
            .as_ref()
            .map_or_else(Vec::new, |g| g.program_runs())
    }

    /// Backend and coverage, for `status` and the backend metric.
    /// The state of protection and the backend, without reading the
    /// kernel's maps and programs as [`FilterService::status`] does (the
    /// service's Status line is compared every 2 s).
    pub fn protection(&self) -> (Protection, asmguard_guard::BackendName) {
        let inner = lock(&self.inner);
        let cover = Self::cover(&inner);
        let changed = inner.guard.is_some() && inner.changed.is_some();
        (protection_of(cover, changed), cover.backend())
    }

    pub fn status(&self) -> FilterStatus {
        let inner = lock(&self.inner);
        let cover = Self::cover(&inner);
        match &inner.guard {
            Some(g) => FilterStatus {
                cover,
                reason: FilterReason {
                    changed: inner.changed.clone(),
                    ..g.reason().clone()
                },
                changed: inner.changed.is_some(),
                passthrough: Some(g.passthrough_rule()),
                adopted: g.adopted(),
                programs: g.attached(),
                devices: g.disks().map(|d| d.len()).unwrap_or(0),
                majors: Some(match g.managed_majors() {
                    Ok((blk, chr)) => asmguard_proto::Majors {
                        blk,
                        chr,
                        unreadable: None,
                    },
                    Err(e) => asmguard_proto::Majors {
                        unreadable: Some(e.to_string()),
                        ..Default::default()
                    },
                }),
                reach: g.identity_reach(),
                pins: if g.pins_guarded() {
                    asmguard_proto::Pins::Guarded
                } else {
                    asmguard_proto::Pins::Watched
                },
                map_fds: if g.map_fds_refused() {
                    asmguard_proto::MapFds::Refused
                } else {
                    asmguard_proto::MapFds::PeriodicCheck
                },
            },
            None => FilterStatus {
                cover,
                reason: FilterReason::none(inner.why_none.clone()),
                changed: false,
                passthrough: None,
                adopted: false,
                programs: vec![],
                devices: 0,
                majors: None,
                reach: IdentityReach::Full,
                pins: asmguard_proto::Pins::None,
                map_fds: asmguard_proto::MapFds::None,
            },
        }
    }

    /// Keeps an event the daemon noticed itself (`Exposed`,
    /// `ExposureEnded`) about `o`'s shared-writable mapping of `label`.
    /// `exe`: the process's executable (`/proc/PID/exe`), read by the caller.
    pub fn note_event(
        &self,
        label: &str,
        o: &asmguard_devices::holders::Opener,
        exe: String,
        noticed: asmguard_proto::Noticed,
    ) {
        let fe = noted(
            Noted {
                label,
                pid: o.pid,
                comm: &o.comm,
                exe,
                device: o.device,
                hook: Hook::MmapFile,
                mode: Mode::Audit,
                noticed,
            },
            self.seq.fetch_add(1, Ordering::Relaxed) + 1,
        );
        self.keep(fe);
    }

    /// Keeps an event the daemon noticed about a loop device over a
    /// protected disk (`LoopBefore`, `LoopGone`): no process to name.
    pub fn note_loop(&self, noticed: asmguard_proto::Noticed) {
        let (label, name, device) = match &noticed {
            asmguard_proto::Noticed::LoopBefore { device: l }
            | asmguard_proto::Noticed::LoopGone { device: l } => {
                (l.label.clone(), l.name.clone(), l.device)
            }
            _ => Default::default(),
        };
        let fe = noted(
            Noted {
                label: &label,
                pid: 0,
                comm: &name,
                exe: String::new(),
                device,
                hook: Hook::Unknown(0),
                mode: Mode::Audit,
                noticed,
            },
            self.seq.fetch_add(1, Ordering::Relaxed) + 1,
        );
        self.keep(fe);
    }

    /// An event the daemon noticed about itself (no process, no disk).
    fn daemon_event(&self, noticed: asmguard_proto::Noticed) -> FilterEventInfo {
        noted(
            Noted {
                label: "",
                pid: std::process::id(),
                comm: "asmguardd",
                exe: String::new(),
                device: Default::default(),
                hook: Hook::Unknown(0),
                mode: Mode::Enforce,
                noticed,
            },
            self.seq.fetch_add(1, Ordering::Relaxed) + 1,
        )
    }

    /// Keeps `fe` among the recent events (`events`), the oldest dropped.
    fn keep(&self, fe: FilterEventInfo) {
        let mut r = lock(&self.recent);
        if r.len() >= RECENT {
            r.pop_front();
        }
        r.push_back(fe);
    }

    /// Pinned links replaced at a filter start since the daemon started
    /// (`asmguard_pins_replaced_total`).
    pub fn pins_replaced(&self) -> u64 {
        self.pins_replaced.load(Ordering::Relaxed)
    }

    /// The kept events with a sequence number above `after` (oldest first).
    pub fn events_after(&self, after: u64) -> Vec<FilterEventInfo> {
        lock(&self.recent)
            .iter()
            .filter(|e| e.seq > after)
            .cloned()
            .collect()
    }

    /// Denied and audited operations by (label, hook, mode): the source of
    /// `asmguard_writes_denied_total{label,hook}` (mode `enforce`). Only from
    /// the kernel's exact per-disk counters (kept across daemon restarts with
    /// the pins): none without a loaded filter, an error when they cannot be
    /// read. Events (which a flood drops) are never counted.
    pub fn counts(&self) -> Result<Counts, Error> {
        let inner = lock(&self.inner);
        let Some(g) = &inner.guard else {
            return Ok(Counts::new());
        };
        Ok(label_counts(g.disk_counts()?, &lock(&self.labels)))
    }

    /// Events the kernel could not queue (ring buffer full); the counts above
    /// still include those operations.
    pub fn events_dropped(&self) -> u64 {
        let inner = lock(&self.inner);
        inner
            .guard
            .as_ref()
            .and_then(|g| g.stats().ok())
            .map(|s| s.ringbuf_drops)
            .unwrap_or(0)
    }
}

impl Drop for FilterService {
    fn drop(&mut self) {
        // The programs stay (pinned); only the event thread stops.
        Self::stop_reader(&mut lock(&self.inner));
    }
}

/// A label's disk id: FNV-1a of the label, never 0. The same in every daemon
/// run, so events recorded by the kernel while the daemon was down (or before
/// its first scan) still name the right label.
pub fn disk_id(label: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in label.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h.max(1)
}

/// The whole rule set: the host's rules with the containers' (`None`
/// until the daemon gave either: a re-adopted filter keeps its maps).
fn compose(inner: &Inner) -> Option<Rules> {
    if inner.host.is_none() && inner.containers.is_none() {
        return None;
    }
    let mut r = inner.host.clone().unwrap_or_default();
    for c in inner.containers.iter().flatten() {
        match c.rule() {
            Some(rule) => r.rules.push(rule),
            None => r.places.extend(c.cgroups.iter().map(|cg| (*cg, c.ctr_id))),
        }
    }
    Some(r)
}

/// The disk id for a new `label`: [`disk_id`], or, when another label
/// already has that id (two labels whose hashes collide), the next free one,
/// so that no two labels ever share counts or events. Labels are taken in
/// order (the sync's map is sorted), so the same labels get the same ids in
/// every run.
fn free_id(label: &str, ids: &HashMap<String, u32>) -> u32 {
    let mut id = disk_id(label);
    while let Some(other) = ids.iter().find(|(_, v)| **v == id).map(|(l, _)| l) {
        tracing::warn!("labels {other} and {label} hash to one disk id {id:#010x}: {label} takes the next free one");
        id = id.wrapping_add(1).max(1);
    }
    id
}

/// Resolves `allow_users`/`allow_groups` names and `allow_executables` paths
/// to ids (unknown names and missing files are reported, not fatal).
pub fn resolve_allow(
    users: &[String],
    groups: &[String],
    exes: &[PathBuf],
) -> (Vec<u32>, Vec<u32>, Vec<ExeId>, Vec<String>) {
    let mut problems = Vec::new();
    let mut keep = |r: Result<_, String>| r.map_err(|e| problems.push(e)).ok();
    let uids = users
        .iter()
        .filter_map(|u| keep(super::identity::uid_of(u)))
        .collect();
    let gids = groups
        .iter()
        .filter_map(|g| keep(super::identity::gid_of(g)))
        .collect();
    let exes = exes
        .iter()
        .filter_map(|p| {
            ExeId::of_path(p)
                .map_err(|e| problems.push(format!("executable: {e}")))
                .ok()
        })
        .collect();
    (uids, gids, exes, problems)
}

/// The kernel's per-disk counts by label (a disk id the daemon has no label
/// for shows as `disk-<id>`).
fn label_counts(kernel: BTreeMap<(u32, Hook, Mode), u64>, labels: &HashMap<u32, String>) -> Counts {
    let mut out = Counts::new();
    for ((disk, hook, mode), n) in kernel {
        let label = labels
            .get(&disk)
            .cloned()
            .unwrap_or_else(|| format!("disk-{disk:08x}"));
        *out.entry((label, hook, mode)).or_insert(0) += n;
    }
    out
}

/// The devices on which two readings of the managed-device maps differ.
fn differing(
    a: &BTreeMap<DevKey, (Mode, u32)>,
    b: &BTreeMap<DevKey, (Mode, u32)>,
) -> BTreeSet<DevKey> {
    a.keys()
        .chain(b.keys())
        .filter(|d| a.get(d) != b.get(d))
        .copied()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use asmguard_proto::FilterAction as Action;
    use asmguard_proto::PinFound;

    /// Links replaced at start leave protection degraded with their names
    /// (`FilterStatus::changed`, which `status` and `asmguard_protected`
    /// read); none replaced changes nothing.
    #[test]
    fn links_replaced_at_start_degrade_protection() {
        assert_eq!(replaced_at_start(&[]), None);
        let pin = |pin: &str, found| ReplacedPin {
            pin: pin.into(),
            found,
        };
        let what = replaced_at_start(&[
            pin(
                "ag_file_open",
                PinFound::Unrecorded {
                    link: 9,
                    program: 4,
                },
            ),
            pin(
                "ag_bpf",
                PinFound::OtherMaps {
                    program: 5,
                    reads: vec![],
                    want: vec![1],
                },
            ),
        ])
        .unwrap();
        assert!(what.starts_with("2 pinned links not what"), "{what}");
        assert!(
            what.ends_with(
                "ag_file_open: link id 9 (program id 4) is in no record of a daemon's; \
                 ag_bpf: program id 5 reads other maps ([], not [1])"
            ),
            "{what}"
        );
        let st = FilterStatus {
            cover: Coverage::Full(Backend::Lsm),
            changed: true,
            ..FilterStatus::not_started()
        };
        assert_eq!(st.protection(), Protection::Degraded);
    }

    #[test]
    fn disk_modes_show_claim_and_export() {
        let f = |mode, backend| DiskMode::Filtered { mode, backend };
        let rows = [
            (
                f(Mode::Enforce, Backend::Lsm),
                "enforce",
                true,
                Mode::Enforce,
            ),
            (
                f(Mode::Audit, Backend::CgroupDevice),
                "audit",
                false,
                Mode::Audit,
            ),
            (f(Mode::Off, Backend::Lsm), "off", false, Mode::Off),
            (DiskMode::Disabled, "off", false, Mode::Off),
            (DiskMode::Unprotected, "UNPROTECTED", true, Mode::Off),
        ];
        for (m, word, claimed, mode) in rows {
            assert_eq!(m.applied().as_str(), word, "{m:?}");
            assert_eq!(m.claimed(), claimed, "{m:?}");
            assert_eq!(m.mode(), mode, "{m:?}");
        }
    }

    #[test]
    fn counts_are_the_kernels_by_label() {
        let hook = asmguard_guard::guard::HOOKS[0].hook;
        let kernel = BTreeMap::from([
            ((7, hook, Mode::Enforce), 3),
            ((7, hook, Mode::Audit), 2),
            ((0xab, hook, Mode::Enforce), 5),
        ]);
        let labels = HashMap::from([(7, "DATA1".to_string())]);
        let c = label_counts(kernel, &labels);
        assert_eq!(
            c,
            Counts::from([
                (("DATA1".into(), hook, Mode::Audit), 2),
                (("DATA1".into(), hook, Mode::Enforce), 3),
                (("disk-000000ab".into(), hook, Mode::Enforce), 5),
            ])
        );
    }

    /// Every (coverage, mode): the words of `status`, `lsdsk` and the metrics
    /// agree, since all come from one [`Coverage`].
    #[test]
    fn status_words_agree_for_every_backend_and_mode() {
        assert_eq!(Backend::Lsm.coverage(), Coverage::Full(Backend::Lsm));
        assert_eq!(
            Backend::FmodRet.coverage(),
            Coverage::Full(Backend::FmodRet)
        );
        assert_eq!(Backend::CgroupDevice.coverage(), Coverage::OpenTimeOnly);
        let why = "no filter: EPERM";
        let rows: [(Coverage, &str, &str, Protection); 5] = [
            (
                Coverage::Full(Backend::Lsm),
                "lsm",
                "full",
                Protection::Protected,
            ),
            (
                Coverage::Full(Backend::FmodRet),
                "fmod_ret",
                "full",
                Protection::Protected,
            ),
            (
                Coverage::OpenTimeOnly,
                "cgroup_device",
                "degraded: open-time only",
                Protection::Degraded,
            ),
            (Coverage::Disabled, "none", why, Protection::Off),
            (Coverage::Unprotected, "none", why, Protection::Unprotected),
        ];
        assert_eq!(rows.map(|r| r.0), Coverage::ALL);
        for (cover, backend, coverage, protection) in rows {
            let st = FilterStatus {
                cover,
                reason: FilterReason::none(NoFilter::LoadFailed {
                    error: "EPERM".into(),
                }),
                ..FilterStatus::not_started()
            };
            assert_eq!(st.backend().as_str(), backend);
            assert_eq!(st.coverage(), coverage);
            assert_eq!(st.protection(), protection);
        }
        // lsdsk's typed filter values (asmguardctl renders the Filtering
        // sentence from them) and the metric's mode word, written out for
        // every (coverage, mode): what a DBA reads, not recomputed
        let lsm = Coverage::Full(Backend::Lsm);
        let fmod = Coverage::Full(Backend::FmodRet);
        let scopes = [
            (lsm, FilterScope::Full, "lsm"),
            (fmod, FilterScope::Full, "fmod_ret"),
            (
                Coverage::OpenTimeOnly,
                FilterScope::OpenTimeOnly,
                "cgroup_device",
            ),
            (Coverage::Disabled, FilterScope::Disabled, "none"),
            (Coverage::Unprotected, FilterScope::Unprotected, "none"),
        ];
        for (cover, scope, backend) in scopes {
            assert_eq!(
                (scope_of(cover), cover.backend().as_str()),
                (scope, backend)
            );
        }
        let words: [(Coverage, Mode, &str); 15] = [
            (lsm, Mode::Enforce, "enforce"),
            (lsm, Mode::Audit, "audit"),
            (lsm, Mode::Off, "off"),
            (fmod, Mode::Enforce, "enforce"),
            (fmod, Mode::Audit, "audit"),
            (fmod, Mode::Off, "off"),
            (Coverage::OpenTimeOnly, Mode::Enforce, "enforce"),
            (Coverage::OpenTimeOnly, Mode::Audit, "audit"),
            (Coverage::OpenTimeOnly, Mode::Off, "off"),
            (Coverage::Disabled, Mode::Enforce, "off"),
            (Coverage::Disabled, Mode::Audit, "off"),
            (Coverage::Disabled, Mode::Off, "off"),
            (Coverage::Unprotected, Mode::Enforce, "UNPROTECTED"),
            (Coverage::Unprotected, Mode::Audit, "UNPROTECTED"),
            (Coverage::Unprotected, Mode::Off, "UNPROTECTED"),
        ];
        for (cover, mode, word) in words {
            assert_eq!(cover.applied(mode).as_str(), word, "{cover:?} {mode:?}");
        }
    }

    fn one(label: &str, top: &str) -> BTreeMap<String, Managed> {
        let top: KernelDev = top.parse().unwrap();
        BTreeMap::from([(
            label.to_string(),
            Managed {
                top: Some(top),
                devs: BTreeSet::from([DevKey::block(top)]),
            },
        )])
    }

    /// A fenced disk (a reclaim runs on it) is in mode `fenced` whatever
    /// mode is set for it, keeps its exclusive claim, and is back in its own
    /// mode once the World lifts the fence.
    #[test]
    fn a_fenced_disk_is_fenced_whatever_its_mode() {
        let f = FilterService::inert();
        let fenced = BTreeSet::from(["R1".to_string()]);
        let tops = BTreeMap::from([("R1".to_string(), "7:1".parse().unwrap())]);
        let audit = Modes::default()
            .with(Some("R1"), Action::Audit, &tops, Mode::Enforce)
            .unwrap();
        f.sync(one("R1", "7:1"), &Modes::default(), &fenced);
        assert_eq!(f.set_for("R1"), Mode::Fenced);
        f.sync(one("R1", "7:1"), &audit, &fenced);
        assert_eq!(f.set_for("R1"), Mode::Fenced);
        f.sync(one("R1", "7:1"), &audit, &BTreeSet::new());
        assert_eq!(f.set_for("R1"), Mode::Audit);
        let m = DiskMode::Filtered {
            mode: Mode::Fenced,
            backend: Backend::Lsm,
        };
        assert!(m.claimed());
        assert_eq!(m.applied().as_str(), "fenced");
    }

    /// Two labels whose FNV-1a hashes collide (found by search) get two ids.
    #[test]
    fn colliding_labels_get_distinct_ids() {
        assert_eq!(disk_id("D689639"), disk_id("D1656782"));
        let f = FilterService::inert();
        let mut disks = one("D689639", "7:1");
        disks.extend(one("D1656782", "7:2"));
        f.sync(disks, &Modes::default(), &Default::default());
        let ids = lock(&f.inner).ids.clone();
        assert_ne!(ids["D689639"], ids["D1656782"]);
        assert_eq!(
            ids["D1656782"],
            disk_id("D1656782"),
            "the first in order keeps its hash"
        );
        assert_eq!(ids["D689639"], disk_id("D689639") + 1);
        let labels = lock(&f.labels).clone();
        assert_eq!(labels.len(), 2, "each id names its own label: {labels:?}");
    }

    #[test]
    fn disk_ids_are_stable_and_distinct() {
        // FNV-1a (32 bit) of "DATA1", worked out independently of this code.
        assert_eq!(disk_id("DATA1"), 0x6c8f_dbbc);
        assert_ne!(disk_id("DATA1"), disk_id("DATA2"));
        assert_ne!(disk_id(""), 0);
    }

    #[test]
    fn ids_from_names_and_numbers() {
        let (u, g, e, p) = resolve_allow(
            &["root".into(), "no-such-user-asmguard".into()],
            &["root".into()],
            &[PathBuf::from("/nonexistent/x")],
        );
        assert_eq!((u, g, e.len()), (vec![0], vec![0], 0));
        assert_eq!(p.len(), 2);
    }
}
