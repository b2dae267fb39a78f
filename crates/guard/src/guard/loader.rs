//! [`Guard`]: the filter loaded from the embedded `guard.bpf.o`, its backend
//! chosen, its programs attached (or re-adopted from their pins), and the
//! operations on its maps: the managed set, the allow-list, the counters.
//!
//! Which programs load, and how each attaches, comes from the program table
//! ([`super::programs::PROGRAMS`]): the rows of the chosen backend, those of
//! optional hooks ([`super::hooks::HOOKS`]) only when the kernel's BTF has
//! their symbol.
//!
//! Not here: layouts ([`super::abi`]), pins and mounts ([`super::pins`]),
//! the event ring ([`super::ring`]), what the daemon knows about labels.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::os::fd::AsRawFd;
use std::path::PathBuf;

use libbpf_rs::{Link, MapCore, MapFlags, MapHandle, Object};

use super::abi::{self, read_u32, STAT_RB_DROPS};
use super::adopt;
use super::commands::PassthroughRule;
use super::hooks::{Hook, HOOKS};
use super::pins::{
    active_lsms, cgroup2_root, delete_quiet, ensure_bpffs, io_err, kernel_btf_has, pinned_backend,
    remove_links_of, remove_pins,
};
use super::programs::{self, Attach};
use super::ring::EventReader;
use super::rules::{encode, free_bits, read_all, union, write_add, write_exact, Rules, RULE_MAPS};
use super::types::{Backend, DevKey, ExeId, IdentityReach, Mode};
use crate::{Error, KernelDev};
use asmguard_filter_types::{
    Chosen, FilterReason, LoadNote, LsmList, NoBetter, PinFound, Refused, ReplacedPin,
};

/// The compiled `bpf/guard.bpf.c` (CO-RE: relocated at load time).
pub(crate) static GUARD_OBJ: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/guard.bpf.o"));

/// The program of `programs` (a hook's, preferred first) that variant `pick`
/// loads: 0 the preferred ones, 1 their fallbacks (hooks without one keep
/// theirs).
fn variant(programs: &[&'static str], pick: usize) -> &'static str {
    programs[pick.min(programs.len() - 1)]
}

/// The variant whose links are pinned in `pin_dir` for `backend` (0 when
/// no multi-variant row has a pinned fallback).
fn pinned_variant(pin_dir: &std::path::Path, backend: Backend) -> usize {
    let fallback_pinned = HOOKS
        .iter()
        .map(|d| d.programs_for(backend))
        .filter(|p| p.len() > 1)
        .any(|p| pin_dir.join("links").join(p[1]).exists());
    usize::from(fallback_pinned)
}

/// Counters kept by the programs (since they were loaded).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Denials (enforce), by hook.
    pub denied: BTreeMap<Hook, u64>,
    /// Logged and allowed (audit), by hook.
    pub audited: BTreeMap<Hook, u64>,
    /// Events lost because the ring buffer was full.
    pub ringbuf_drops: u64,
}

impl Stats {
    /// All denials.
    pub fn denied_total(&self) -> u64 {
        self.denied.values().sum()
    }
}

/// How to open the guard: [`Options::new`] with the caller's roots.
#[derive(Debug, Clone)]
pub struct Options {
    /// The system's roots (the caller's: bpffs, securityfs, procfs, BTF, the
    /// record of the pinned links below `/run/asmguard`).
    pub paths: asmguard_paths::Paths,
    /// Pin directory (by default `paths`' [`asmguard_paths::Paths::pin_dir`]).
    pub pin_dir: PathBuf,
    /// Force a backend instead of choosing (tests; `None`: choose).
    pub backend: Option<Backend>,
    /// The cgroup-v2 directory for the fallback (default: the cgroup2 mount
    /// found in /proc/mounts).
    pub cgroup: Option<PathBuf>,
    /// Claim the filter's objects for this process (`ag_guardian`: where the
    /// `bpf` hook is attached, no other task may get them by id, write them
    /// or detach them). The daemon does (the default); a tool that opens the
    /// pins beside it or in turn (the lab's test tool) does not, and where no
    /// daemon holds the claim nothing is refused.
    pub claim: bool,
}

impl Options {
    /// The daemon's way below `paths`: its pin directory, the best backend
    /// that loads, the cgroup2 mount, the claim taken.
    pub fn new(paths: &asmguard_paths::Paths) -> Options {
        Options {
            paths: paths.clone(),
            pin_dir: paths.pin_dir(),
            backend: None,
            cgroup: None,
            claim: true,
        }
    }
}

/// The loaded, attached and pinned filter.
pub struct Guard {
    backend: Backend,
    reason: FilterReason,
    adopted: bool,
    /// The pinned links found not to be the daemon's and replaced at open
    /// ([`Guard::replaced_links`]).
    replaced: Vec<ReplacedPin>,
    upgraded_from: Option<Backend>,
    /// The roots it was opened with ([`Options::paths`]).
    paths: asmguard_paths::Paths,
    pin_dir: PathBuf,
    links: Vec<(String, Link)>,
    blk: MapHandle,
    chr: MapHandle,
    majors: MapHandle,
    /// `ag_rules` and the maps of [`RULE_MAPS`], by name.
    rule_maps: BTreeMap<&'static str, MapHandle>,
    events: MapHandle,
    stats: MapHandle,
    counts: MapHandle,
    pin_dirs: MapHandle,
    /// `ag_guarded` and `ag_guardian` (bpf/guardian.h): asmguard's objects
    /// by id, and the daemon that alone may touch them.
    guarded: MapHandle,
    guardian: MapHandle,
    /// What this process last wrote to each watched map
    /// ([`super::mapwatch::WATCHED`]), for [`Guard::check_maps`].
    desired: super::mapwatch::Desired,
    // Last: the programs' fds (the links hold the programs attached anyway).
    _obj: Object,
}

impl fmt::Debug for Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guard")
            .field("backend", &self.backend)
            .field("reason", &self.reason)
            .field("adopted", &self.adopted)
            .field(
                "links",
                &self
                    .links
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

/// Attaches the LSM backend's companions ([`super::programs::ProgDef::companion`]:
/// `ag_kernel_open`) to the cgroup-v2 root, or re-opens their pinned links.
/// They come from a second load of the object, sharing the pinned maps, so
/// that a kernel refusing them (5.10 gives cgroup-device programs no task
/// helpers) keeps the LSM programs. Err: why they are not attached.
fn attach_companions(
    opts: &Options,
    links: &mut Vec<(String, Link)>,
    record: &adopt::Known,
    replaced: &mut Vec<adopt::Refusal>,
) -> Result<(), String> {
    // loaded even where their links are pinned: what they are checked against
    let todo: Vec<&str> = programs::companions().map(|p| p.name).collect();
    if todo.is_empty() {
        return Ok(());
    }
    let mut open = asmguard_bpfload::open_object(GUARD_OBJ, "opening the guard BPF object")
        .map_err(|e| e.source.to_string())?;
    for mut prog in open.progs_mut() {
        let name = prog.name().to_string_lossy().into_owned();
        prog.set_autoload(todo.contains(&name.as_str()));
    }
    for mut map in open.maps_mut() {
        let name = map.name().to_string_lossy().into_owned();
        if crate::guard::maps::pinned().any(|m| m == name) {
            map.set_pin_path(opts.pin_dir.join("maps").join(&name))
                .map_err(|e| e.to_string())?;
        }
    }
    let obj = asmguard_bpfload::load_object_quiet(open, "loading the companions")
        .map_err(|e| e.source.to_string())?;
    let dir = match &opts.cgroup {
        Some(d) => d.clone(),
        None => cgroup2_root(&opts.paths.proc).map_err(|e| e.to_string())?,
    };
    let cg = std::fs::File::open(&dir).map_err(|e| format!("opening {}: {e}", dir.display()))?;
    let cg_id = cg
        .metadata()
        .ok()
        .map(|m| std::os::unix::fs::MetadataExt::ino(&m));
    for prog in obj.progs_mut() {
        if !prog.autoload() {
            continue;
        }
        let name = prog.name().to_string_lossy().into_owned();
        let pin = opts.pin_dir.join("links").join(&name);
        let link = adopt_or_attach(
            &name,
            &prog,
            Attach::CgroupDevice,
            &pin,
            record,
            cg_id,
            replaced,
            || {
                prog.attach_cgroup(cg.as_raw_fd())
                    .map_err(Error::bpf("attaching a companion"))
            },
        )
        .map_err(|e| format!("{name}: {e}"))?;
        links.push((name, link));
    }
    Ok(())
}

/// The link of `prog` (this build's program `name`, loaded now): the one
/// pinned at `pin` when [`adopt::judge`] finds it the one a daemon of this
/// build pinned there; else a new one from `attach_new`, attached beside the
/// pinned one before it takes its pin (the disks are never unfiltered), and
/// why the pinned one was not adopted goes into `replaced`.
#[allow(clippy::too_many_arguments)]
fn adopt_or_attach(
    name: &str,
    prog: &impl std::os::fd::AsFd,
    attach: Attach,
    pin: &std::path::Path,
    record: &adopt::Known,
    cgroup_id: Option<u64>,
    replaced: &mut Vec<adopt::Refusal>,
    attach_new: impl FnOnce() -> Result<Link, Error>,
) -> Result<Link, Error> {
    // (a pin that is no link, or unreadable, is a foreign one too)
    let pinned = pin.exists();
    let old = match pinned.then(|| Link::open(pin)) {
        Some(Ok(link)) if !record.judge => return Ok(link),
        Some(Ok(link)) => {
            let verdict = match adopt::prog_facts(prog.as_fd()) {
                Some(fresh) => adopt::judge(name, &link, attach, &fresh, record, cgroup_id),
                None => Err(adopt::Refusal::foreign(name, PinFound::CannotCompare)),
            };
            match verdict {
                Ok(()) => return Ok(link),
                Err(r) => replaced.push(r),
            }
            Some(link)
        }
        Some(Err(e)) => {
            replaced.push(adopt::Refusal::foreign(
                name,
                PinFound::NotALink {
                    error: e.to_string(),
                },
            ));
            None
        }
        None => None,
    };
    let mut link = attach_new()?;
    if pinned {
        std::fs::remove_file(pin).map_err(io_err("removing a replaced link pin"))?;
    }
    link.pin(pin).map_err(Error::bpf("pinning a link"))?;
    // the replaced link (ours was attached first) goes with its last fd
    drop(old);
    Ok(link)
}

impl Guard {
    /// Loads the filter, or re-adopts the one pinned in `opts.pin_dir`.
    ///
    /// Backend choice: `opts.backend` if given; else the best that loads and
    /// attaches ([`Guard::best`]): the BPF LSM programs when `bpf` is an active
    /// LSM, else the same rules as `fmod_ret` programs, else the
    /// cgroup-device program ([`Guard::reason`] says why).
    ///
    /// Pins of an earlier run are re-adopted, except a pinned backend worse
    /// than the best this kernel takes (an upgrade from a version without
    /// it): the better one is attached first, beside it, sharing the pinned
    /// maps, and the old links go only once it is ([`Guard::upgraded_from`]),
    /// so the disks are never unfiltered in between.
    pub fn open(opts: &Options) -> Result<Guard, Error> {
        ensure_bpffs(&opts.paths, &opts.pin_dir);
        std::fs::create_dir_all(opts.pin_dir.join("maps"))
            .map_err(io_err("creating the pin directory"))?;
        std::fs::create_dir_all(opts.pin_dir.join("links"))
            .map_err(io_err("creating the pin directory"))?;

        if let Some(pinned) = pinned_backend(&opts.pin_dir) {
            let mut no_better = None;
            // Better than fmod_ret is only the BPF LSM, which no daemon start
            // can activate: only an open-time-only filter is worth replacing.
            if opts.backend.is_none() && pinned == Backend::CgroupDevice {
                match Guard::best(opts, Some(pinned)) {
                    Ok(mut g) if g.backend < pinned => {
                        remove_links_of(&opts.pin_dir, pinned)?;
                        g.reason.notes.push(LoadNote::ReplacedPinned {
                            backend: pinned.into(),
                        });
                        g.upgraded_from = Some(pinned);
                        return Ok(g);
                    }
                    Ok(_) => {}
                    Err(Error::NoBetterBackend(why)) => no_better = Some(why),
                    Err(e) => {
                        no_better = Some(NoBetter::Failed {
                            error: e.to_string(),
                        })
                    }
                }
            }
            // The variants whose links are pinned.
            let pick = pinned_variant(&opts.pin_dir, pinned);
            let why_kept = FilterReason::chosen(Chosen::Readopted { no_better });
            let mut g = Guard::load_with(opts, pinned, pick, why_kept)?;
            g.adopted = true;
            return Ok(g);
        }
        match opts.backend {
            Some(b) => {
                Guard::load(opts, b, FilterReason::chosen(Chosen::Requested)).inspect_err(|_| {
                    let _ = remove_links_of(&opts.pin_dir, b);
                })
            }
            None => Guard::best(opts, None),
        }
    }

    /// The best backend that loads and attaches, trying those better than
    /// `stop` (all when `None`) in turn: the BPF LSM where `bpf` is an
    /// active LSM, `fmod_ret` where the kernel has trampolines, the
    /// cgroup-device program. A try that fails leaves nothing of its own
    /// attached; its error goes into the next one's reason.
    fn best(opts: &Options, stop: Option<Backend>) -> Result<Guard, Error> {
        let worth = |b: Backend| stop.is_none_or(|s| b < s);
        // libbpf's own complaints (a verifier log, "try raising ulimit -l")
        // would only confuse: the reason says it.
        let quiet = |b: Backend, why: FilterReason| {
            let r = {
                let _quiet = asmguard_bpfload::Quiet::new();
                Guard::load(opts, b, why)
            };
            if r.is_err() {
                let _ = remove_links_of(&opts.pin_dir, b);
            }
            r
        };
        let lsm = match active_lsms(&opts.paths) {
            Ok(l) if l.split(',').any(|x| x == "bpf") => LsmList::Active { list: l },
            Ok(l) => LsmList::Inactive { list: l },
            Err(error) => LsmList::Unreadable { error },
        };
        let mut refused: Vec<Refused> = Vec::new();
        let why = |backend: Backend, refused: &[Refused]| {
            FilterReason::chosen(Chosen::Best {
                backend: backend.into(),
                lsm: lsm.clone(),
                refused: refused.to_vec(),
            })
        };
        if matches!(lsm, LsmList::Active { .. }) {
            match quiet(Backend::Lsm, why(Backend::Lsm, &refused)) {
                Ok(g) => return Ok(g),
                Err(e) => refused.push(Refused {
                    backend: Backend::Lsm.into(),
                    error: e.to_string(),
                }),
            }
        }
        if worth(Backend::FmodRet) {
            match quiet(Backend::FmodRet, why(Backend::FmodRet, &refused)) {
                Ok(g) => return Ok(g),
                Err(e) => refused.push(Refused {
                    backend: Backend::FmodRet.into(),
                    error: e.to_string(),
                }),
            }
        }
        if !worth(Backend::CgroupDevice) {
            return Err(Error::NoBetterBackend(NoBetter::Refused { lsm, refused }));
        }
        Guard::load(
            opts,
            Backend::CgroupDevice,
            why(Backend::CgroupDevice, &refused),
        )
    }

    /// Loads `backend` with the preferred programs; where the kernel refuses
    /// one of them, with the fallback variants (the rows' next programs):
    /// - cgroup device: 5.10 allows cgroup-device programs
    ///   bpf_get_current_uid_gid but not the task walk (`ag_cgroup_dev_ids`);
    /// - LSM: a kernel without sleepable `lsm.s/file_ioctl` or
    ///   bpf_copy_from_user gets the all-or-nothing SG_IO rule
    ///   (`ag_file_ioctl`).
    fn load(opts: &Options, backend: Backend, reason: FilterReason) -> Result<Guard, Error> {
        let preferred = {
            let _quiet = asmguard_bpfload::Quiet::new();
            Guard::load_with(opts, backend, 0, reason.clone())
        };
        let e = match preferred {
            Ok(g) => return Ok(g),
            Err(e) => e,
        };
        // Links a half-attached first try pinned belong to programs that
        // are gone with it (a fresh load: nothing was pinned before).
        let _ = remove_links_of(&opts.pin_dir, backend);
        let error = e.to_string();
        let mut why = reason;
        why.notes.push(match backend {
            // one program per row: nothing else to try
            Backend::FmodRet => return Err(e),
            Backend::CgroupDevice => LoadNote::UidGidOnly { error },
            Backend::Lsm => LoadNote::PassthroughAllOrNothing { error },
        });
        Guard::load_with(opts, backend, 1, why)
    }

    /// Loads `backend`; `pick` chooses the variant of the rows that have
    /// more than one program ([`variant`]).
    fn load_with(
        opts: &Options,
        backend: Backend,
        pick: usize,
        mut reason: FilterReason,
    ) -> Result<Guard, Error> {
        let btf = std::fs::read(opts.paths.vmlinux_btf()).unwrap_or_default();
        let mut open = asmguard_bpfload::open_object(GUARD_OBJ, "opening the guard BPF object")?;
        for mut prog in open.progs_mut() {
            let name = prog.name().to_string_lossy().into_owned();
            let load = programs::program(&name).is_some_and(|p| {
                let Some(d) = p.hook.def() else { return false };
                p.loaded_by(backend)
                    && !p.companion
                    && name == variant(&d.programs_for(backend), pick)
                    && d.needs_btf(backend)
                        .is_none_or(|sym| kernel_btf_has(&btf, &sym))
            });
            prog.set_autoload(load);
        }
        for mut map in open.maps_mut() {
            let name = map.name().to_string_lossy().into_owned();
            if crate::guard::maps::pinned().any(|m| m == name) {
                map.set_pin_path(opts.pin_dir.join("maps").join(&name))
                    .map_err(Error::bpf("setting a map pin path"))?;
            }
        }
        // libbpf reuses the pinned maps that exist and pins the ones it creates.
        let obj = asmguard_bpfload::load_object(open, "loading the guard BPF programs")?;

        let handle = |name: &str| -> Result<MapHandle, Error> {
            let map = obj
                .maps()
                .find(|m| m.name() == name)
                .ok_or(Error::MissingMap(name.to_string()))?;
            Ok(asmguard_bpfload::map_handle(&map, "duplicating a map fd")?)
        };
        let blk = handle(crate::guard::maps::BLK)?;
        let chr = handle(crate::guard::maps::CHR)?;
        let majors = handle(crate::guard::maps::MAJORS)?;
        let mut rule_maps = BTreeMap::new();
        for name in std::iter::once(crate::guard::maps::RULES).chain(RULE_MAPS) {
            rule_maps.insert(name, handle(name)?);
        }
        let events = handle(crate::guard::maps::EVENTS)?;
        let stats = handle(crate::guard::maps::STATS)?;
        let counts = handle(crate::guard::maps::COUNTS)?;
        let pin_dirs = handle(crate::guard::maps::PIN_DIRS)?;
        let guarded = handle(crate::guard::maps::GUARDED)?;
        let guardian = handle(crate::guard::maps::GUARDIAN)?;
        // first of all writes: adopted pins guarded for the last daemon are
        // this one's now (its record is vacant once it exited)
        if opts.claim {
            super::guardian::claim(&guardian)?;
        }
        fill_pin_dirs(&pin_dirs, &opts.pin_dir)?;

        let cgroup = match backend {
            Backend::CgroupDevice => {
                let dir = match &opts.cgroup {
                    Some(d) => d.clone(),
                    None => cgroup2_root(&opts.paths.proc)?,
                };
                Some(std::fs::File::open(&dir).map_err(io_err("opening the cgroup2 root"))?)
            }
            Backend::Lsm | Backend::FmodRet => None,
        };

        // what the daemon that pinned the links recorded of them
        let record = adopt::Known {
            judge: opts.claim,
            record: adopt::load_record(&opts.paths, &opts.pin_dir),
            maps: crate::guard::maps::pinned()
                .filter_map(|n| handle(n).ok()?.info().ok().map(|i| i.info.id))
                .collect(),
        };
        let cg_id = cgroup
            .as_ref()
            .and_then(|f| f.metadata().ok())
            .map(|m| std::os::unix::fs::MetadataExt::ino(&m));
        let mut replaced = Vec::new();
        let mut links = Vec::new();
        for prog in obj.progs_mut() {
            if !prog.autoload() {
                continue;
            }
            let name = prog.name().to_string_lossy().into_owned();
            let pin = opts.pin_dir.join("links").join(&name);
            let attach = programs::program(&name).map_or(Attach::Lsm, |p| p.attach);
            let link = adopt_or_attach(
                &name,
                &prog,
                attach,
                &pin,
                &record,
                cg_id,
                &mut replaced,
                || {
                    Ok(match (&cgroup, attach) {
                        (Some(cg), Attach::CgroupDevice) => prog
                            .attach_cgroup(cg.as_raw_fd())
                            .map_err(Error::bpf("attaching the cgroup device program"))?,
                        (_, Attach::FmodRet | Attach::TpBtf) => prog
                            .attach_trace()
                            .map_err(Error::bpf("attaching an fmod_ret or tp_btf program"))?,
                        _ => prog
                            .attach_lsm()
                            .map_err(Error::bpf("attaching an LSM program"))?,
                    })
                },
            )?;
            links.push((name, link));
        }
        if backend.security_hooks() {
            reason.notes.push(
                match attach_companions(opts, &mut links, &record, &mut replaced) {
                    Ok(()) => LoadNote::KernelOpensJudged,
                    Err(e) => LoadNote::KernelOpensNotJudged {
                        error: e.to_string(),
                    },
                },
            );
        }
        let saved = match opts.claim {
            true => adopt::save_record(&opts.paths, &opts.pin_dir, &links),
            false => Ok(()),
        };
        if let Err(e) = saved {
            reason.notes.push(LoadNote::LinksNotRecorded {
                path: adopt::record_path(&opts.paths, &opts.pin_dir)
                    .display()
                    .to_string(),
                error: e.to_string(),
            });
        }
        let (foreign, earlier): (Vec<_>, Vec<_>) = replaced
            .into_iter()
            .partition(|r| matches!(r, adopt::Refusal::Foreign(_)));
        let replaced: Vec<ReplacedPin> = foreign
            .into_iter()
            .map(|r| match r {
                adopt::Refusal::Foreign(s) | adopt::Refusal::Earlier(s) => s,
            })
            .collect();
        if !earlier.is_empty() {
            reason.notes.push(LoadNote::EarlierReplaced {
                programs: earlier.len(),
            });
        }
        let g = Guard {
            backend,
            reason,
            adopted: false,
            replaced,
            upgraded_from: None,
            paths: opts.paths.clone(),
            pin_dir: opts.pin_dir.clone(),
            links,
            blk,
            chr,
            majors,
            rule_maps,
            events,
            stats,
            counts,
            pin_dirs,
            guarded,
            guardian,
            desired: Default::default(),
            _obj: obj,
        };
        // Pins of a version without ag_majors: its bits from the device maps.
        // Only added here, never cleared: another process may be adding a
        // device right now (its bit goes in before the device does).
        let mut words = g.majors()?;
        for (w, add) in words
            .iter_mut()
            .zip(abi::major_bitmap(g.disks()?.into_keys()))
        {
            *w |= add;
        }
        g.write_majors(&words)?;
        super::guardian::fill_guarded(&g.guarded, &g.own_objects())?;
        // what the maps hold now is the baseline (adopted pins: the last
        // daemon's); each setter records its maps again after writing them
        g.record(super::mapwatch::WATCHED);
        Ok(g)
    }

    /// The backend in use.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Why this backend.
    pub fn reason(&self) -> &FilterReason {
        &self.reason
    }

    /// The pins that no longer name this guard's maps and links (another
    /// process unpinned them, or pinned its own at their paths), each pinned
    /// to this guard's object again: one phrase each; empty when all are its.
    pub fn reassert_pins(&self) -> Vec<String> {
        use super::pinwatch::{reassert, Kind};
        use std::os::fd::AsFd;
        let dir = |sub: &str, name: &str| self.pin_dir.join(sub).join(name);
        let mut out: Vec<String> = crate::guard::maps::pinned()
            .filter_map(|n| {
                let m = self.map(n)?;
                reassert(&self.paths.proc, m.as_fd(), &dir("maps", n), Kind::Map)
            })
            .collect();
        out.extend(self.links.iter().filter_map(|(n, l)| {
            reassert(&self.paths.proc, l.as_fd(), &dir("links", n), Kind::Link)
        }));
        out
    }

    /// Records what the maps `names` hold now as what they should hold (the
    /// setters call it right after writing them).
    fn record(&self, names: &[&'static str]) {
        for n in names {
            if let Some(m) = self.map(n) {
                self.desired.record(n, m);
            }
        }
    }

    /// Compares every map the programs read and this daemon fills (the
    /// table [`super::mapwatch::WATCHED`]; the device maps are the daemon's
    /// to compare with its disks) with what this daemon last wrote, and puts
    /// back what another process changed (through a pin or by id): one
    /// phrase per map changed; empty when all hold what was written.
    pub fn check_maps(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.guard_attached() {
            out.extend(super::guardian::recheck(&self.guardian));
        }
        out.extend(self.desired.check(|n| self.map(n)));
        out
    }

    /// Whether the `bpf` rule (`ag_bpf` or `ag_fr_bpf`) is attached.
    fn guard_attached(&self) -> bool {
        self.links
            .iter()
            .any(|(n, _)| Hook::def_of_program(n).map(|d| d.hook) == Some(Hook::Bpf))
    }

    /// Whether the pins and maps are guarded (no other task may get them by
    /// id, write them or detach the links: the `bpf` rule is attached and
    /// names this process) or only watched ([`Guard::check_maps`],
    /// [`Guard::reassert_pins`]: the cgroup-device fallback).
    pub fn pins_guarded(&self) -> bool {
        self.guard_attached() && super::guardian::holder(&self.guardian) == Some(std::process::id())
    }

    /// Whether the kernel refuses every other task an fd onto the filter's
    /// maps and programs (the `bpf_map` and `bpf_prog` rules attached, the
    /// pins guarded); otherwise the periodic check is all there is.
    pub fn map_fds_refused(&self) -> bool {
        let has = |h: Hook| {
            self.links
                .iter()
                .any(|(n, _)| Hook::def_of_program(n).map(|d| d.hook) == Some(h))
        };
        self.pins_guarded() && has(Hook::BpfMap) && has(Hook::BpfProg)
    }

    /// The ids of this guard's maps, programs and links (`ag_guarded`).
    fn own_objects(&self) -> Vec<(u32, u32)> {
        use super::guardian::{OBJ_LINK, OBJ_MAP, OBJ_PROG};
        let mut out = Vec::new();
        for n in crate::guard::maps::pinned() {
            if let Some(id) = self.map(n).and_then(|m| m.info().ok()).map(|i| i.info.id) {
                out.push((OBJ_MAP, id));
            }
        }
        for (_, l) in &self.links {
            if let Ok(i) = l.info() {
                out.push((OBJ_LINK, i.id));
                out.push((OBJ_PROG, i.prog_id));
            }
        }
        // this load's own programs too: where the links were adopted, the
        // attached programs are the last daemon's, and these run nowhere
        for p in self._obj.progs().filter(|p| p.autoload()) {
            use std::os::fd::AsFd;
            if let Ok(id) = libbpf_rs::Program::id_from_fd(p.as_fd()) {
                out.push((OBJ_PROG, id));
            }
        }
        out
    }

    /// The handle of pinned map `name`.
    fn map(&self, name: &str) -> Option<&MapHandle> {
        Some(match name {
            crate::guard::maps::BLK => &self.blk,
            crate::guard::maps::CHR => &self.chr,
            crate::guard::maps::MAJORS => &self.majors,
            crate::guard::maps::EVENTS => &self.events,
            crate::guard::maps::STATS => &self.stats,
            crate::guard::maps::COUNTS => &self.counts,
            crate::guard::maps::PIN_DIRS => &self.pin_dirs,
            crate::guard::maps::GUARDED => &self.guarded,
            crate::guard::maps::GUARDIAN => &self.guardian,
            other => return self.rule_maps.get(other),
        })
    }

    /// The pinned links this open did not adopt because they were not what
    /// a daemon of this build pinned (another program, another place, a
    /// link no record names), one phrase each: each was replaced by this
    /// build's program, attached before its pin was taken over.
    pub fn replaced_links(&self) -> &[ReplacedPin] {
        &self.replaced
    }

    /// Whether pinned programs were re-adopted (rather than attached now).
    pub fn adopted(&self) -> bool {
        self.adopted
    }

    /// The pinned backend this one replaced at start (an upgrade), if any.
    pub fn upgraded_from(&self) -> Option<Backend> {
        self.upgraded_from
    }

    /// The rule SG_IO and NVMe passthrough get: by command class where the
    /// sleepable ioctl program is attached.
    pub fn passthrough_rule(&self) -> PassthroughRule {
        match self.backend {
            Backend::CgroupDevice => PassthroughRule::OpenOnly,
            Backend::FmodRet => PassthroughRule::ByClassInMemory,
            // the sleepable ioctl program is the one that reads commands
            Backend::Lsm if self.attached_sleepable(Hook::FileIoctl) => PassthroughRule::ByClass,
            Backend::Lsm => PassthroughRule::AllOrNothing,
        }
    }

    /// Which variant of `hook`'s row in the hook table is attached (its index
    /// in the row's `programs`; `None`: none is).
    fn variant_of(&self, hook: Hook) -> Option<usize> {
        let programs = hook.def()?.programs_for(self.backend);
        self.links
            .iter()
            .find_map(|(n, _)| programs.iter().position(|p| p == n))
    }

    /// Whether the attached program of `hook` is a sleepable one (the
    /// program table's).
    fn attached_sleepable(&self, hook: Hook) -> bool {
        self.links
            .iter()
            .any(|(n, _)| programs::program(n).is_some_and(|p| p.hook == hook && p.sleepable))
    }

    /// What of the caller the filter can judge: everything the allow-list
    /// names, or (the cgroup-device row's fallback variant, on kernels that
    /// refuse it the task helpers) its real uid and gid only.
    pub fn identity_reach(&self) -> IdentityReach {
        match (self.backend, self.variant_of(Hook::CgroupDevice)) {
            (Backend::CgroupDevice, Some(1)) => IdentityReach::IdsOnly,
            _ => IdentityReach::Full,
        }
    }

    /// The attached programs (their names, e.g. `ag_file_open`).
    pub fn programs(&self) -> Vec<String> {
        self.links.iter().map(|(n, _)| n.clone()).collect()
    }

    /// The attached programs with their ids and hooks (the program table's).
    pub fn attached(&self) -> Vec<asmguard_filter_types::Program> {
        self.links
            .iter()
            .map(|(n, l)| asmguard_filter_types::Program {
                name: n.clone(),
                id: l.info().map_or(0, |i| i.prog_id),
                hook: programs::program(n).map(|p| p.hook),
            })
            .collect()
    }

    /// What each attached program of this filter has run (the kernel
    /// counts only while `kernel.bpf_stats_enabled` is 1). For the lab's
    /// cost benches: where the pins are guarded no other task may open these
    /// programs by id (what `bpftool prog show` does), so the daemon reads
    /// them (a walk of every program: `status` only).
    pub fn program_runs(&self) -> Vec<asmguard_filter_types::ProgramRuns> {
        let own: BTreeMap<u32, &str> = self
            .links
            .iter()
            .filter_map(|(n, l)| Some((l.info().ok()?.prog_id, n.as_str())))
            .collect();
        if own.is_empty() {
            return Vec::new();
        }
        libbpf_rs::query::ProgInfoIter::default()
            .filter_map(|p| {
                Some(asmguard_filter_types::ProgramRuns {
                    name: own.get(&p.id)?.to_string(),
                    run_time_ns: p.run_time_ns,
                    run_cnt: p.run_cnt,
                })
            })
            .collect()
    }

    /// Other BPF programs attached to the kernel functions this filter's LSM
    /// or `fmod_ret` programs sit on (another security tool, a second
    /// instance under another pin directory), by hook (on kernels before
    /// 5.13, which do not report a link's target, every other LSM or
    /// `fmod_ret` program, with no hook: "on a security function").
    /// The kernel runs the programs of one function in turn and stops at the
    /// first non-zero verdict: one of them may refuse an operation before
    /// this filter sees it, none can allow what this filter refuses.
    pub fn other_programs(&self) -> Vec<asmguard_filter_types::Program> {
        // (target BTF object, type id) -> the hook of ours attached there
        let mut ours = BTreeMap::new();
        let mut own_links = BTreeSet::new();
        for (name, link) in &self.links {
            let Ok(info) = link.info() else { continue };
            own_links.insert(info.id);
            if let libbpf_rs::query::LinkTypeInfo::Tracing(t) = info.info {
                let hook = programs::program(name).map(|p| p.hook);
                ours.insert((t.target_obj_id, t.target_btf_id), hook);
            }
        }
        if ours.is_empty() {
            return Vec::new();
        }
        // Kernels before 5.13 report no link's target (all zero): there, every
        // other LSM or fmod_ret program may sit on one of ours.
        let untold = ours.keys().all(|k| *k == (0, 0));
        let names: BTreeMap<u32, String> = libbpf_rs::query::ProgInfoIter::default()
            .map(|p| (p.id, p.name.to_string_lossy().into_owned()))
            .collect();
        let mut out: Vec<asmguard_filter_types::Program> =
            libbpf_rs::query::LinkInfoIter::default()
                .filter(|l| !own_links.contains(&l.id))
                .filter_map(|l| match l.info {
                    libbpf_rs::query::LinkTypeInfo::Tracing(t) => {
                        let hook = if untold {
                            use libbpf_rs::ProgramAttachType as A;
                            matches!(t.attach_type, A::ModifyReturn | A::LsmMac).then_some(None)?
                        } else {
                            *ours.get(&(t.target_obj_id, t.target_btf_id))?
                        };
                        Some(asmguard_filter_types::Program {
                            name: names.get(&l.prog_id).map_or("?", |n| n.as_str()).into(),
                            id: l.prog_id,
                            hook,
                        })
                    }
                    _ => None,
                })
                .collect();
        out.sort_by(|a, b| {
            (a.hook.map(Hook::as_str), &a.name, a.id).cmp(&(
                b.hook.map(Hook::as_str),
                &b.name,
                b.id,
            ))
        });
        out
    }

    fn dev_map(&self, key: DevKey) -> &MapHandle {
        if key.chr {
            &self.chr
        } else {
            &self.blk
        }
    }

    /// Puts devices into the managed set (or changes their mode). Their
    /// majors' bits go in first: the programs never see a managed device
    /// whose major they would skip.
    pub fn set_disk(&self, devs: &[DevKey], mode: Mode, disk_id: u32) -> Result<(), Error> {
        let value = abi::disk_value(disk_id, mode);
        // (a word another process zeroed is put back first: the bits of the
        // other disks are not lost in this write's record)
        self.desired
            .repair(crate::guard::maps::MAJORS, &self.majors);
        let mut words = self.majors()?;
        for d in devs {
            let (w, b) = abi::major_slot(*d);
            words[w as usize] |= 1 << b;
        }
        self.write_majors(&words)?;
        for d in devs {
            self.dev_map(*d)
                .update(&d.dev.raw().to_ne_bytes(), &value, MapFlags::ANY)
                .map_err(Error::bpf("updating the managed set"))?;
        }
        Ok(())
    }

    /// Removes devices from the managed set (absent ones are fine), then
    /// the bits of the majors that have no managed device left.
    pub fn remove_disk(&self, devs: &[DevKey]) -> Result<(), Error> {
        for d in devs {
            delete_quiet(self.dev_map(*d), &d.dev.raw().to_ne_bytes())?;
        }
        self.sync_majors()
    }

    /// `ag_majors` as the kernel has it (one word per entry).
    fn majors(&self) -> Result<Vec<u64>, Error> {
        read_majors(&self.majors)
    }

    /// Writes the words of `ag_majors` that differ from `words` (a word
    /// another process changed since this daemon's last write is put back
    /// and reported by the next check first: no write hides it).
    fn write_majors(&self, words: &[u64]) -> Result<(), Error> {
        self.desired
            .repair(crate::guard::maps::MAJORS, &self.majors);
        for (k, (old, new)) in self.majors()?.iter().zip(words).enumerate() {
            if old != new {
                self.majors
                    .update(&(k as u32).to_ne_bytes(), &new.to_ne_bytes(), MapFlags::ANY)
                    .map_err(Error::bpf("updating the managed majors"))?;
            }
        }
        self.record(&[crate::guard::maps::MAJORS]);
        Ok(())
    }

    /// Sets `ag_majors` to exactly the majors of the device maps.
    fn sync_majors(&self) -> Result<(), Error> {
        let devs = self.disks()?;
        self.write_majors(&abi::major_bitmap(devs.into_keys()))
    }

    /// The majors the programs look up (block, character): those with at
    /// least one managed device.
    pub fn managed_majors(&self) -> Result<(Vec<u32>, Vec<u32>), Error> {
        Ok(abi::majors_of(&self.majors()?))
    }

    /// The managed set: device -> (mode, disk id).
    pub fn disks(&self) -> Result<BTreeMap<DevKey, (Mode, u32)>, Error> {
        let mut out = BTreeMap::new();
        for (map, chr) in [(&self.blk, false), (&self.chr, true)] {
            for key in map.keys() {
                let Some(raw) = read_u32(&key, 0) else {
                    continue;
                };
                let Some(v) = map
                    .lookup(&key, MapFlags::ANY)
                    .map_err(Error::bpf("reading the managed set"))?
                else {
                    continue;
                };
                let Some((id, mode)) = abi::parse_disk_value(&v) else {
                    continue;
                };
                out.insert(
                    DevKey {
                        dev: KernelDev::from_raw(raw),
                        chr,
                    },
                    (Mode::from_code(mode), id),
                );
            }
        }
        Ok(out)
    }

    /// Replaces the allow-list with one rule for `uids`/`gids` and one for
    /// `exes` ([`Rules::from_ids`]): no tools, no daemon process.
    pub fn set_allow(&self, uids: &[u32], gids: &[u32], exes: &[ExeId]) -> Result<(), Error> {
        self.set_rules(&Rules::from_ids(uids, gids, exes))
    }

    /// Replaces the rules, the tools and the daemon's process
    /// ([`super::rules`]): the new rules on bits the rules in force do not
    /// use, their entries beside the old ones, then the new rules in force,
    /// then the old entries out. A task is never judged by half a rule set.
    pub fn set_rules(&self, r: &Rules) -> Result<(), Error> {
        let key0 = 0u32.to_ne_bytes();
        let rules_map = &self.rule_maps[crate::guard::maps::RULES];
        let (old_active, ow, oe, op) = rules_map
            .lookup(&key0, MapFlags::ANY)
            .map_err(Error::bpf("reading the allow rules"))?
            .and_then(|v| abi::parse_rules_value(&v))
            .unwrap_or_default();
        let bits = free_bits(old_active, r.rules.len());
        let new = encode(r, &bits).map_err(Error::Rules)?;
        let (na, nw, ne, np) =
            abi::parse_rules_value(&new[crate::guard::maps::RULES][key0.as_slice()])
                .unwrap_or_default();
        for name in RULE_MAPS {
            let map = &self.rule_maps[name];
            let old = read_all(map)?;
            write_add(map, &union(&old, &new[name], name))?;
        }
        for active in [old_active, na] {
            rules_map
                .update(
                    &key0,
                    &abi::rules_value(active, ow | nw, oe | ne, op | np),
                    MapFlags::ANY,
                )
                .map_err(Error::bpf("updating the allow rules"))?;
        }
        for name in RULE_MAPS {
            write_exact(&self.rule_maps[name], &new[name])?;
        }
        write_exact(rules_map, &new[crate::guard::maps::RULES])?;
        self.record(&[crate::guard::maps::RULES]);
        self.record(&RULE_MAPS);
        Ok(())
    }

    /// The rules in force as the kernel holds them: (active, need_who,
    /// need_exe, need_place) and the place entries (cgroup id -> (rules,
    /// container id)).
    pub fn rules_in_force(&self) -> Result<super::rules::InForce, Error> {
        let head = read_all(&self.rule_maps[crate::guard::maps::RULES])?
            .values()
            .next()
            .and_then(|v| abi::parse_rules_value(v))
            .unwrap_or_default();
        let places = read_all(&self.rule_maps[crate::guard::maps::PLACES])?
            .into_iter()
            .filter_map(|(k, v)| Some((abi::read_u64(&k, 0)?, abi::parse_place_value(&v)?)))
            .collect();
        Ok((head, places))
    }

    /// Whether this filter judges a task by its container (its cgroup): every
    /// backend but the cgroup-device fallback's uid/gid-only variant (5.10),
    /// which cannot read the task.
    pub fn containers_enforced(&self) -> bool {
        self.identity_reach() == IdentityReach::Full
    }

    /// The inodes of the pin directories the pins rule protects
    /// (`ag_pin_dirs`): (inode, kernel dev_t), sorted.
    pub fn pin_dirs(&self) -> Vec<(u64, u32)> {
        let mut v: Vec<(u64, u32)> = self
            .pin_dirs
            .keys()
            .filter_map(|k| abi::parse_exe_key(&k))
            .collect();
        v.sort_unstable();
        v
    }

    /// The ids and executables named by the rules in the kernel's maps:
    /// (uids, gids, executables).
    pub fn allow(&self) -> (Vec<u32>, Vec<u32>, Vec<ExeId>) {
        let ids = |m: &MapHandle| m.keys().filter_map(|k| read_u32(&k, 0)).collect::<Vec<_>>();
        let exes = self.rule_maps[crate::guard::maps::RULE_EXES]
            .keys()
            .filter_map(|k| ExeId::from_key(&k))
            .collect();
        (
            ids(&self.rule_maps[crate::guard::maps::RULE_UIDS]),
            ids(&self.rule_maps[crate::guard::maps::RULE_GIDS]),
            exes,
        )
    }

    /// The kernel's exact counts per disk: (disk id, hook, mode) -> operations
    /// denied (mode enforce) or audited. Never misses one (unlike the events).
    /// Keys are `struct ag_count_key` (bpf/guard.h): disk id, then the stats
    /// index of the hook (`stat_denied` / `stat_audited`).
    pub fn disk_counts(&self) -> Result<BTreeMap<(u32, Hook, Mode), u64>, Error> {
        let mut out = BTreeMap::new();
        for k in self.counts.keys() {
            let (Some(disk), Some(idx)) = (read_u32(&k, 0), read_u32(&k, 4)) else {
                continue;
            };
            let Some(v) = self
                .counts
                .lookup(&k, MapFlags::ANY)
                .map_err(Error::bpf("reading the per-disk counters"))?
            else {
                continue;
            };
            let n = v
                .get(..8)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_ne_bytes)
                .unwrap_or(0);
            let (hook, mode) = if idx >= abi::stat_audited(0) {
                (Hook::from_code(idx - abi::stat_audited(0)), Mode::Audit)
            } else {
                (Hook::from_code(idx), Mode::Enforce)
            };
            *out.entry((disk, hook, mode)).or_insert(0) += n;
        }
        Ok(out)
    }

    /// The programs' counters: denials and audits by hook are the sums of
    /// the per-disk counts ([`Guard::disk_counts`], the one place the
    /// programs count them); the ring buffer's drops.
    pub fn stats(&self) -> Result<Stats, Error> {
        let mut s = Stats::default();
        for ((_, hook, mode), n) in self.disk_counts()? {
            let by_hook = match mode {
                Mode::Enforce | Mode::Fenced => &mut s.denied,
                Mode::Audit => &mut s.audited,
                Mode::Off => continue,
            };
            if n > 0 {
                *by_hook.entry(hook).or_insert(0) += n;
            }
        }
        let v = self
            .stats
            .lookup(&STAT_RB_DROPS.to_ne_bytes(), MapFlags::ANY)
            .map_err(Error::bpf("reading the filter counters"))?
            .unwrap_or_default();
        s.ringbuf_drops = abi::read_u64(&v, 0).unwrap_or(0);
        Ok(s)
    }

    /// A reader of the denial events (its own handle on the ring buffer; move
    /// it to a thread).
    pub fn event_reader(&self) -> Result<EventReader, Error> {
        EventReader::new(&self.paths.proc, &self.events)
    }

    /// Detaches the programs and removes every pin: the filter is off.
    pub fn uninstall(mut self) -> Result<(), Error> {
        // Our own fds go first, so that remove_pins can wait for the last
        // reference (the pins') to go.
        for (_, link) in self.links.drain(..) {
            let _ = link.detach();
        }
        remove_pins(&self.paths, &self.pin_dir)
    }
}

/// Puts the pin directory and its `maps/` and `links/` into `ag_pin_dirs` (by
/// inode and filesystem), replacing what was there: no task outside the host's
/// pid namespace may unlink, remove or rename in them.
fn fill_pin_dirs(map: &MapHandle, pin_dir: &std::path::Path) -> Result<(), Error> {
    use std::os::unix::fs::MetadataExt;
    let mut keys = BTreeSet::new();
    for d in [
        pin_dir.to_path_buf(),
        pin_dir.join("maps"),
        pin_dir.join("links"),
    ] {
        let m = std::fs::metadata(&d).map_err(io_err("reading the pin directory"))?;
        let dev = KernelDev::from_dev_t(m.dev())?;
        keys.insert(abi::exe_key(m.ino(), dev.raw()).to_vec());
    }
    for k in &keys {
        map.update(k, &[1u8], MapFlags::ANY)
            .map_err(Error::bpf("updating the pin directories"))?;
    }
    let stale: Vec<Vec<u8>> = map.keys().filter(|k| !keys.contains(k)).collect();
    for k in stale {
        delete_quiet(map, &k)?;
    }
    Ok(())
}

/// Every word of an `ag_majors` map (absent entries read as 0).
fn read_majors(map: &MapHandle) -> Result<Vec<u64>, Error> {
    (0..abi::MAJOR_ENTRIES)
        .map(|k| {
            let v = map
                .lookup(&k.to_ne_bytes(), MapFlags::ANY)
                .map_err(Error::bpf("reading the managed majors"))?;
            Ok(v.as_deref().and_then(|b| abi::read_u64(b, 0)).unwrap_or(0))
        })
        .collect()
}

/// Managed majors as `status` and the lab tool show them: `blk=7,8 chr=21`.
pub fn majors_text((blk, chr): &(Vec<u32>, Vec<u32>)) -> String {
    let list = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
    format!("blk={} chr={}", list(blk), list(chr))
}

/// [`Guard::managed_majors`] of the filter pinned in `pin_dir`, read from the
/// pinned map alone (no programs loaded: cheap enough for a test's loop).
pub fn pinned_majors(pin_dir: &std::path::Path) -> Result<(Vec<u32>, Vec<u32>), Error> {
    let map = MapHandle::from_pinned_path(pin_dir.join("maps").join(crate::guard::maps::MAJORS))
        .map_err(Error::bpf("opening the pinned managed majors"))?;
    Ok(abi::majors_of(&read_majors(&map)?))
}

#[cfg(test)]
mod tests {
    use super::super::programs::PROGRAMS;
    use super::*;
    use libbpf_rs::{ObjectBuilder, ProgramType};

    /// The text `status --json` (filter_majors) and the lab tool print, which
    /// the lab's filter-daemon test parses.
    #[test]
    fn majors_text_lists_each_kind() {
        assert_eq!(majors_text(&(vec![7, 8], vec![21])), "blk=7,8 chr=21");
        assert_eq!(majors_text(&(vec![], vec![])), "blk= chr=");
    }

    /// The object's programs are exactly the program table's rows, each in
    /// its section and of its type, and the maps have the layouts the
    /// loader assumes (no privilege needed).
    #[test]
    fn guard_object_matches_the_program_table() {
        let open = ObjectBuilder::default().open_memory(GUARD_OBJ).unwrap();
        let progs: BTreeMap<String, (ProgramType, String)> = open
            .progs()
            .map(|p| {
                (
                    p.name().to_string_lossy().into_owned(),
                    (p.prog_type(), p.section().to_string_lossy().into_owned()),
                )
            })
            .collect();
        for name in progs.keys() {
            assert!(
                programs::program(name).is_some(),
                "{name}: no row in PROGRAMS"
            );
        }
        for p in PROGRAMS {
            let ty = match p.attach {
                Attach::Lsm => ProgramType::Lsm,
                Attach::FmodRet | Attach::TpBtf => ProgramType::Tracing,
                Attach::CgroupDevice => ProgramType::CgroupDevice,
            };
            let section = p.section.to_string();
            assert_eq!(
                progs.get(p.name),
                Some(&(ty, section)),
                "{}: not in the object",
                p.name
            );
            assert_eq!(p.sleepable, p.section.starts_with("lsm.s/"), "{}", p.name);
        }
        assert_eq!(progs.len(), PROGRAMS.len());
        let cgroup = programs::programs_of(Hook::CgroupDevice, Backend::CgroupDevice);
        assert_eq!(cgroup, ["ag_cgroup_dev", "ag_cgroup_dev_ids"]);
        assert_eq!(variant(&cgroup, 1), "ag_cgroup_dev_ids");
        assert_eq!(variant(&["ag_file_open"], 1), "ag_file_open");
        let maps: BTreeMap<String, (u32, u32, u32)> = open
            .maps()
            .map(|m| {
                (
                    m.name().to_string_lossy().into_owned(),
                    (m.key_size(), m.value_size(), m.max_entries()),
                )
            })
            .collect();
        let disk = std::mem::size_of::<abi::AgDisk>() as u32;
        let exe = std::mem::size_of::<abi::AgExeKey>() as u32;
        assert_eq!(maps[crate::guard::maps::BLK].0, 4);
        assert_eq!(maps[crate::guard::maps::BLK].1, disk);
        assert_eq!(maps[crate::guard::maps::CHR].1, disk);
        let exe_v = std::mem::size_of::<abi::AgExe>() as u32;
        assert_eq!(
            (
                maps[crate::guard::maps::RULE_EXES].0,
                maps[crate::guard::maps::RULE_EXES].1
            ),
            (exe, exe_v)
        );
        assert_eq!(
            (
                maps[crate::guard::maps::RULE_UIDS].0,
                maps[crate::guard::maps::RULE_UIDS].1
            ),
            (4, 8)
        );
        assert_eq!(maps[crate::guard::maps::RULES].2, 1);
        assert_eq!(maps[crate::guard::maps::STATS], (4, 8, abi::NSTATS));
        assert_eq!(maps[crate::guard::maps::MAJORS], (4, 8, abi::MAJOR_ENTRIES));
        // the map table and the object name the same maps
        let ours: std::collections::BTreeSet<&str> = maps
            .keys()
            .map(String::as_str)
            .filter(|n| n.starts_with("ag_"))
            .collect();
        let table: std::collections::BTreeSet<&str> =
            crate::guard::maps::MAPS.iter().map(|m| m.name).collect();
        assert_eq!(
            ours, table,
            "the map table (guard/maps.rs) differs from the object"
        );
    }
}
