//! The write filter in the daemon: starting (or re-adopting) it from the
//! configuration, logging each denial as one journal line, and the JSON of
//! events. What it protects is the model's projection (`model::managed_set`).
//!
//! - [`service`]: [`FilterService`], the loaded filter (asmguard-guard's
//!   `Guard`) with the daemon's policy: per-disk modes, the runtime state
//!   file, the event history;
//! - [`events`]: a denial as the daemon keeps it (the protocol's
//!   `FilterEventInfo`, made once when it is read) and its journal line;
//! - [`identity`]: the allow-list's names to ids (NSS);
//! - [`containers`]: the `[[container]]` rules resolved (cgroups, users and
//!   groups as host ids) and kept current as containers come and go.
//!
//! asmguard-guard is the loader, the ABI, the pins and the ring reader; every
//! decision about labels, users and history is made here.

pub mod containers;
pub mod events;
pub mod identity;
pub mod service;

use crate::world::modes::Modes;
use crate::world::HostRules;
use asmguard_config::{Config, OracleHomes};
use asmguard_devices::writer::Writer;
use asmguard_guard::{Coverage, ExeId, IdentityReach, Mode, Options};
use asmguard_guard::{Rule, Rules, SelfId, Tool};
use asmguard_proto::{AllowRule, OracleBinary, OracleHome, RuleNote};
use service::FilterService;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Starts the filter: loads the programs (or re-adopts the pinned ones, with
/// no moment without protection) and resolves the host's allow rules from
/// the configuration (the World's first `Input::Rules`: the apply side puts
/// them in the maps). Never fails: without a filter, `status` says why.
/// Returns it with the [`Writer`] the daemon's own write-opens (labels,
/// reclaim) must use on this filter, and the rules.
pub fn start(
    cfg: &Config,
    paths: &asmguard_paths::Paths,
    pin_dir: Option<PathBuf>,
    state_file: PathBuf,
) -> (FilterService, Writer, HostRules, Modes) {
    let mode: Mode = cfg.filter.mode;
    let opts = Options {
        pin_dir: pin_dir.unwrap_or_else(|| paths.pin_dir()),
        ..Options::new(paths)
    };
    // what an administrator set, kept across restarts (the apply side writes it)
    let modes = Modes::parse(&std::fs::read_to_string(&state_file).unwrap_or_default());
    let svc = FilterService::start(opts, mode, modes.disabled);
    let homes = asmguard_homes::discover(&paths.root, &homes_spec(&cfg.filter));
    let rules = resolve_rules(&svc, cfg, homes, resolve_places(&paths.proc, cfg));
    let (uids, gids) = rules.ids();
    if !cfg.container.is_empty() {
        if containers::cgroup_root(&paths.proc).is_none() {
            tracing::error!("filter: no cgroup2 file system: container rules cannot apply");
        }
        if !svc.containers_enforced() && svc.status().cover != Coverage::Unprotected {
            tracing::warn!(
                "filter: container rules are NOT enforced: this kernel's fallback knows callers \
                 by uid and gid only and cannot read a task's cgroup"
            );
        }
    }
    let st = svc.status();
    // A fallback that knows callers by uid/gid only cannot see the daemon's
    // executable: its own write-opens (labels, reclaim) use an allowed group.
    let mut writer = Writer::default();
    if ids_only(&svc) {
        match (gids.first(), uids.first()) {
            (Some(g), _) => writer = Writer::with_gid(*g),
            (None, Some(u)) => writer = Writer::with_uid(*u),
            (None, None) => {}
        }
        match (gids.first(), uids.first()) {
            (Some(g), _) => tracing::info!(
                "write filter: this kernel's fallback knows callers by uid and gid only; \
                 the daemon opens disks for writing with real gid {g}, and \
                 allow_executables cannot apply"
            ),
            (None, Some(u)) => tracing::info!(
                "write filter: this kernel's fallback knows callers by uid and gid only; \
                 the daemon opens disks for writing with real uid {u}, and \
                 allow_executables cannot apply"
            ),
            (None, None) => tracing::error!(
                "write filter: this kernel's fallback knows callers by uid and gid only and \
                 the allow-list names no user or group: the daemon's own label writes and \
                 reclaim will be refused; allow one"
            ),
        }
    }
    if st.cover == Coverage::Unprotected {
        tracing::error!(
            "UNPROTECTED: no write filter could load: {}; managed disks are open to every writer{}",
            st.reason,
            asmguard_guard::bpf_lsm_hint(paths)
                .map(|h| format!("; {h}"))
                .unwrap_or_default()
        );
    } else if st.cover == Coverage::Disabled {
        tracing::warn!("write filter: off (disabled by an administrator until reboot or `asmguardctl filter enable`)");
    } else {
        tracing::info!(
            "write filter: backend {} ({}){}: {}; allowed uids {:?}, gids {:?}, executables {:?}",
            st.backend(),
            st.coverage(),
            if st.adopted { ", re-adopted" } else { "" },
            st.reason,
            uids,
            gids,
            cfg.filter.allow_executables
        );
        if st.cover == Coverage::OpenTimeOnly {
            tracing::warn!("write filter degraded: open-time only (writes on file descriptors opened before it, ioctls and mappings are not filtered)");
            if let Some(h) = asmguard_guard::bpf_lsm_hint(paths) {
                tracing::warn!("{h}");
            }
        }
    }
    (svc, writer, rules, modes)
}

/// `[filter] oracle_homes` as the homes crate takes it.
pub fn homes_spec(f: &asmguard_config::Filter) -> asmguard_homes::Spec {
    match &f.oracle_homes {
        OracleHomes::Word(w) if w == "off" => asmguard_homes::Spec::Off,
        OracleHomes::Word(_) => asmguard_homes::Spec::Auto,
        OracleHomes::List(l) => asmguard_homes::Spec::List(l.clone()),
    }
}

/// A condition nothing satisfies: an executable with inode 0 (the programs
/// never look one up) or the cgroup id 0 (no cgroup has it). A rule whose
/// executables or places are all missing now keeps such a condition rather
/// than losing it (which would widen it).
const NO_EXE: ExeId = ExeId {
    dev: asmguard_guard::KernelDev::from_raw(0),
    ino: 0,
};
const NO_PLACE: u64 = 0;

/// A user or group of a rule: a name (NSS) or a number.
fn id_of(name: &str, lookup: fn(&str) -> Result<u32, String>) -> Result<u32, String> {
    match name.parse::<u32>() {
        Ok(n) => Ok(n),
        Err(_) => lookup(name),
    }
}

/// The host's rules from the configuration, the Oracle homes found and the
/// places the rules' units and cgroups resolved to (rule name -> cgroup
/// ids): the plain allow-list (one rule for its users and groups, one for
/// its executables), each `[[rule]]`, one rule per owner of Oracle home
/// binaries ("that owner AND one of these binaries"), the disk-query tools
/// and the daemon's own process. Returns the rules and what could not be
/// used (one line each).
pub fn host_rules(
    proc: &Path,
    cfg: &Config,
    homes: &asmguard_homes::Found,
    places: &BTreeMap<String, Vec<u64>>,
    ids_only: bool,
) -> (Rules, Vec<String>) {
    let f = &cfg.filter;
    let (mut uids, gids, exes, mut problems) =
        service::resolve_allow(&f.allow_users, &f.allow_groups, &f.allow_executables);
    // A fallback that knows callers by real uid and gid only cannot see
    // supplementary groups (the LSM programs read them from the task): the
    // allowed groups' listed members are allowed by uid there instead.
    if ids_only {
        let members = members_by_uid(&gids, &uids);
        if !members.is_empty() {
            tracing::info!(
                "filter: this kernel's fallback cannot see supplementary groups; \
                 the allowed groups' members are allowed by uid: {members:?}"
            );
            uids.extend(members);
        }
    }
    let mut r = Rules::from_ids(&uids, &gids, &exes);
    for rc in &cfg.rule {
        let mut rule = Rule::default();
        for u in &rc.users {
            match id_of(u, identity::uid_of) {
                Ok(id) => rule.uids.push(id),
                Err(e) => problems.push(format!("rule {}: {e}", rc.name)),
            }
        }
        for g in &rc.groups {
            match id_of(g, identity::gid_of) {
                Ok(id) => rule.gids.push(id),
                Err(e) => problems.push(format!("rule {}: {e}", rc.name)),
            }
        }
        if (!rc.users.is_empty() || !rc.groups.is_empty())
            && rule.uids.is_empty()
            && rule.gids.is_empty()
        {
            problems.push(format!(
                "rule {}: none of its users and groups exists: it allows nobody",
                rc.name
            ));
            continue;
        }
        for x in &rc.executables {
            match ExeId::of_path(x) {
                Ok(id) => rule.exes.push(id),
                Err(e) => problems.push(format!("rule {}: executable: {e}", rc.name)),
            }
        }
        if !rc.executables.is_empty() && rule.exes.is_empty() {
            rule.exes.push(NO_EXE);
        }
        if !rc.units.is_empty() || !rc.cgroups.is_empty() {
            rule.places = places.get(&rc.name).cloned().unwrap_or_default();
            if rule.places.is_empty() {
                rule.places.push(NO_PLACE);
            }
        }
        r.rules.push(rule);
    }
    // Oracle homes: one rule per owner.
    let mut by_owner: BTreeMap<u32, Vec<ExeId>> = BTreeMap::new();
    for b in homes.allowed() {
        match asmguard_guard::KernelDev::from_dev_t(b.dev) {
            Ok(dev) => by_owner
                .entry(b.owner_uid)
                .or_default()
                .push(ExeId { dev, ino: b.ino }),
            Err(e) => problems.push(format!("{}: {e}", b.path.display())),
        }
    }
    for (owner, exes) in by_owner {
        r.rules.push(Rule {
            uids: vec![owner],
            exes,
            ..Rule::default()
        });
    }
    problems.extend(homes.problems.iter().cloned());
    for t in &f.query_tools {
        if let Ok(exe) = ExeId::of_path(t) {
            let kernel_open = t.file_name().is_some_and(|n| n == "multipathd");
            if !r.tools.iter().any(|x| x.exe == exe) {
                r.tools.push(Tool {
                    exe,
                    query: true,
                    kernel_open,
                });
            }
        }
    }
    match SelfId::current(proc) {
        Ok(me) => r.daemon = Some(me),
        Err(e) => problems.push(format!("cannot allow the daemon's own label writes: {e}")),
    }
    (r, problems)
}

/// Who may write, one rule each, and what to know about the rules (for
/// `status`, `--check-config` and the start-up log).
pub fn describe_rules(
    cfg: &Config,
    homes: &asmguard_homes::Found,
    ids_only: bool,
) -> (Vec<AllowRule>, Vec<RuleNote>) {
    let f = &cfg.filter;
    let mut rules = Vec::new();
    let mut notes = Vec::new();
    if !f.allow_users.is_empty() {
        rules.push(AllowRule::Users {
            users: f.allow_users.clone(),
        });
    }
    if !f.allow_groups.is_empty() {
        rules.push(AllowRule::Groups {
            groups: f.allow_groups.clone(),
        });
    }
    if !f.allow_users.is_empty() || !f.allow_groups.is_empty() {
        notes.push(RuleNote::AnyProcessOfUsers);
    }
    for x in &f.allow_executables {
        rules.push(AllowRule::Executable {
            path: x.display().to_string(),
        });
    }
    if !f.allow_executables.is_empty() {
        notes.push(RuleNote::ExecutablesAlone);
    }
    let text =
        |v: &[PathBuf]| -> Vec<String> { v.iter().map(|p| p.display().to_string()).collect() };
    for r in &cfg.rule {
        rules.push(AllowRule::Rule {
            name: r.name.clone(),
            users: r.users.clone(),
            groups: r.groups.clone(),
            executables: text(&r.executables),
            units: r.units.clone(),
            cgroups: r.cgroups.clone(),
        });
        if r.executables.is_empty() && r.units.is_empty() && r.cgroups.is_empty() {
            notes.push(RuleNote::RuleUsersAlone {
                rule: r.name.clone(),
            });
        }
        if r.users.is_empty()
            && r.groups.is_empty()
            && !r.executables.is_empty()
            && r.units.is_empty()
            && r.cgroups.is_empty()
        {
            notes.push(RuleNote::RuleExecutablesAlone {
                rule: r.name.clone(),
            });
        }
    }
    let mut by_owner: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for b in homes.allowed() {
        by_owner
            .entry(b.owner_uid)
            .or_default()
            .push(b.path.display().to_string());
    }
    for (uid, executables) in by_owner {
        rules.push(AllowRule::OracleHomes { uid, executables });
    }
    rules.push(AllowRule::Daemon);
    if ids_only {
        notes.push(RuleNote::IdsOnly);
    }
    (rules, notes)
}

/// The Oracle homes found and the binaries no home has any more that still
/// run (`status`, `lsdsk`).
pub fn homes_of(found: &asmguard_homes::Found) -> (Vec<OracleHome>, Vec<OracleBinary>) {
    let bin = |b: &asmguard_homes::Binary| OracleBinary {
        path: b.path.display().to_string(),
        uid: b.owner_uid,
    };
    let homes = found
        .homes
        .iter()
        .map(|h| OracleHome {
            kind: h.kind.as_str().into(),
            path: h.path.display().to_string(),
            binaries: h.binaries.iter().map(bin).collect(),
        })
        .collect();
    (homes, found.retired.iter().map(bin).collect())
}

/// Resolves the host's rules (names through NSS) from the configuration,
/// the Oracle homes `found` and the `[[rule]]`s' `places`, with what
/// `status` shows of them; logs what does not resolve. Reads, changes
/// nothing: the World takes them as `Input::Rules`. Used at start, on SIGHUP
/// and when homes or places change (the `rules` thread).
pub fn resolve_rules(
    svc: &FilterService,
    cfg: &Config,
    found: asmguard_homes::Found,
    places: BTreeMap<String, Vec<u64>>,
) -> HostRules {
    let (rules, problems) = host_rules(&svc.paths().proc, cfg, &found, &places, ids_only(svc));
    for p in &problems {
        tracing::warn!("filter allow rules: {p}");
    }
    let tools: Vec<String> = cfg
        .filter
        .query_tools
        .iter()
        .filter(|t| t.exists())
        .map(|t| t.display().to_string())
        .collect();
    tracing::info!(
        "filter: {} allow rule{}; disk-query tools (read-class passthrough only): {}",
        rules.rules.len(),
        if rules.rules.len() == 1 { "" } else { "s" },
        if tools.is_empty() {
            "none".into()
        } else {
            tools.join(", ")
        }
    );
    let (lines, mut notes) = describe_rules(cfg, &found, ids_only(svc));
    notes.extend(
        problems
            .iter()
            .map(|p| RuleNote::Unresolved { problem: p.clone() }),
    );
    let (homes, retired) = homes_of(&found);
    let binaries = found
        .homes
        .iter()
        .flat_map(|h| {
            h.binaries.iter().map(move |b| {
                (
                    h.path.display().to_string(),
                    b.path.display().to_string(),
                    b.owner_uid,
                )
            })
        })
        .collect();
    HostRules {
        rules,
        lines,
        notes,
        homes,
        retired,
        binaries,
        places,
    }
}

/// Whether the loaded filter knows callers by real uid and gid only (no
/// executable, no supplementary groups).
fn ids_only(svc: &FilterService) -> bool {
    svc.status().reach == IdentityReach::IdsOnly
}

/// The uids of the members (NSS) of `gids` that `uids` does not hold yet.
fn members_by_uid(gids: &[u32], uids: &[u32]) -> Vec<u32> {
    let mut out: Vec<u32> = Vec::new();
    for g in gids {
        for u in identity::member_uids(*g) {
            if !uids.contains(&u) && !out.contains(&u) {
                out.push(u);
            }
        }
    }
    out
}

/// SIGHUP: the host's rules resolved again from the reloaded configuration
/// `cfg` (`crate::world::conf`): its allow-list's names (a user added to LDAP
/// or extrausers since the start), the homes and places found again.
pub fn reload_rules(svc: &FilterService, cfg: &Config, paths: &asmguard_paths::Paths) -> HostRules {
    let found = asmguard_homes::discover(&paths.root, &homes_spec(&cfg.filter));
    resolve_rules(svc, cfg, found, resolve_places(&paths.proc, cfg))
}

/// SIGHUP, once its rules are in force: what changed of the allow-list's ids
/// since `before`, in one line.
pub fn log_reloaded_rules(before: Option<&HostRules>, now: &HostRules) {
    let (was, is) = (before.map(HostRules::ids).unwrap_or_default(), now.ids());
    if was == is {
        tracing::info!(
            "SIGHUP: allow-list re-resolved, unchanged: uids {:?}, gids {:?}",
            is.0,
            is.1
        );
    } else {
        tracing::warn!(
            "SIGHUP: allow-list re-resolved: uids {:?} -> {:?}, gids {:?} -> {:?}",
            was.0,
            is.0,
            was.1,
            is.1
        );
    }
}

/// The places of the configuration's `[[rule]]`s: rule name -> the ids of
/// the cgroups its units and cgroup patterns match now (empty without a
/// cgroup2 mount in the procfs `proc`'s mounts).
pub fn resolve_places(proc: &Path, cfg: &Config) -> BTreeMap<String, Vec<u64>> {
    let Some(root) = containers::cgroup_root(proc) else {
        return BTreeMap::new();
    };
    cfg.rule
        .iter()
        .filter(|r| !r.units.is_empty() || !r.cgroups.is_empty())
        .map(|r| {
            let ids = asmguard_containers::cgroups_matching(&root, &r.place_patterns())
                .into_iter()
                .map(|(_, id)| id)
                .collect();
            (r.name.clone(), ids)
        })
        .collect()
}
