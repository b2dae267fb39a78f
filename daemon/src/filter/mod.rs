//! The write filter in the daemon: starting (or re-adopting) it from the
//! configuration, logging each denial as one journal line, and the JSON of
//! events. What it protects is the model's projection (`model::managed_set`).
//!
//! - [`service`]: [`FilterService`], the loaded filter (asmguard-guard's
//!   `Guard`) with the daemon's policy: per-disk modes, the runtime state
//!   file, the event history;
//! - [`events`]: a denial as the daemon keeps it ([`events::FilterEvent`]),
//!   its journal line and its protocol view;
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

use asmguard_config::Config;
use asmguard_devices::writer::Writer;
use asmguard_guard::{Coverage, IdentityReach, Mode, Options, PIN_DIR};
use service::FilterService;
use std::path::{Path, PathBuf};

/// System programs that send SCSI commands (SG_IO) to every disk: multipathd's
/// path checkers (TUR, ALUA) and udev's WWID reader. Allowed when present.
const SYSTEM_SG_TOOLS: &[&str] = &[
    "/usr/sbin/multipathd",
    "/sbin/multipathd",
    "/usr/lib/udev/scsi_id",
    "/lib/udev/scsi_id",
];

/// Starts the filter: loads the programs (or re-adopts the pinned ones, with
/// no moment without protection), sets the allow-list from the
/// configuration. Never fails: without a filter, `status` says why. Returns
/// it with the [`Writer`] the daemon's own write-opens (labels, reclaim) must
/// use on this filter.
pub fn start(
    cfg: &Config,
    pin_dir: Option<PathBuf>,
    state_file: PathBuf,
) -> (FilterService, Writer) {
    let mode: Mode = cfg.filter.mode.parse().unwrap_or(Mode::Enforce);
    let opts = Options {
        pin_dir: pin_dir.unwrap_or_else(|| PathBuf::from(PIN_DIR)),
        ..Options::default()
    };
    let svc = FilterService::start(opts, mode, Some(state_file));
    let (uids, gids) = set_allow(&svc, &cfg.filter);
    // resolved by the daemon before its first scan (`Daemon::resolve_containers`)
    svc.set_container_config(cfg.container.clone());
    if !cfg.container.is_empty() {
        if containers::cgroup_root().is_none() {
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
            asmguard_guard::bpf_lsm_hint()
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
            if let Some(h) = asmguard_guard::bpf_lsm_hint() {
                tracing::warn!("{h}");
            }
        }
    }
    (svc, writer)
}

/// Resolves the allow-list of `f` (names through NSS) and hands it to the
/// filter with the daemon's own executable and the system's SG_IO tools.
/// Returns the uids and gids. Used at start and on SIGHUP.
pub fn set_allow(svc: &FilterService, f: &asmguard_config::Filter) -> (Vec<u32>, Vec<u32>) {
    let (mut uids, gids, mut exes, problems) =
        service::resolve_allow(&f.allow_users, &f.allow_groups, &f.allow_executables);
    for p in problems {
        tracing::warn!("filter allow-list: {p}: ignored");
    }
    // A fallback that knows callers by real uid and gid only cannot see
    // supplementary groups (the LSM programs read them from the task): the
    // allowed groups' listed members are allowed by uid there instead.
    if ids_only(svc) {
        let members = members_by_uid(&gids, &uids);
        if !members.is_empty() {
            tracing::info!(
                "filter: this kernel's fallback cannot see supplementary groups; \
                 the allowed groups' members are allowed by uid: {members:?}"
            );
            uids.extend(members);
        }
    }
    // The daemon writes labels itself.
    match asmguard_guard::ExeId::of_path(Path::new("/proc/self/exe")) {
        Ok(me) => exes.push(me),
        Err(e) => tracing::error!("filter: cannot allow the daemon's own label writes: {e}"),
    }
    // SG_IO is refused to every caller not allow-listed (the hook cannot tell a
    // SCSI read from a write): the system's own path checkers and WWID readers
    // must keep working on managed disks, or multipath would fail their paths.
    let mut system = Vec::new();
    for p in SYSTEM_SG_TOOLS {
        if let Ok(id) = asmguard_guard::ExeId::of_path(Path::new(p)) {
            if !exes.contains(&id) {
                exes.push(id);
                system.push(*p);
            }
        }
    }
    if !system.is_empty() {
        tracing::info!(
            "filter: allowing the system tools that query disks through SG_IO: {}",
            system.join(", ")
        );
    }
    if let Err(e) = svc.set_allow(uids.clone(), gids.clone(), exes.clone()) {
        tracing::error!("filter allow-list: {e}");
    }
    (uids, gids)
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

/// SIGHUP: re-reads the configuration's allow-list and re-resolves its names
/// (a user added to LDAP or extrausers since the start), logging what changed.
pub fn reload_allow(svc: &FilterService, source: Option<&Path>, before: &mut (Vec<u32>, Vec<u32>)) {
    let cfg = match asmguard_config::load(source) {
        Ok((c, _)) => c,
        Err(e) => {
            tracing::error!("SIGHUP: configuration not reloaded, the allow-list stays: {e}");
            return;
        }
    };
    let now = set_allow(svc, &cfg.filter);
    // the caller resolves them (`Daemon::resolve_containers`)
    svc.set_container_config(cfg.container.clone());
    if now == *before {
        tracing::info!(
            "SIGHUP: allow-list re-resolved, unchanged: uids {:?}, gids {:?}",
            now.0,
            now.1
        );
    } else {
        tracing::warn!(
            "SIGHUP: allow-list re-resolved: uids {:?} -> {:?}, gids {:?} -> {:?}",
            before.0,
            now.0,
            before.1,
            now.1
        );
    }
    *before = now;
}
