//! Containers in the daemon: each `[[container]]` resolved -- the cgroups its
//! patterns match, its users and groups translated to host ids through its own
//! `/etc/passwd`, `/etc/group` and id maps (asmguard-containers) -- and handed to
//! the filter ([`super::service::FilterService::set_containers`]). At start, on
//! SIGHUP and whenever the cgroup tree changes (the `containers` thread, an
//! inotify watch): a container started after the daemon is covered within a
//! second.

use super::service::FilterService;
use asmguard_config::Container;
use asmguard_containers::{find, host_gid, host_uid, Found, Watcher};
use asmguard_guard::Rule;
use asmguard_proto::{ContainerAllow, ContainerGroup, ContainerStatus, ContainerUser};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One container's rule as the daemon resolved it: the cgroups that are the
/// container (a task in one of them or below is in it), and who in it may
/// write (host ids, translated through the container's maps).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerRule {
    /// The daemon's number for the container (1..), carried in events.
    pub ctr_id: u32,
    /// Cgroup ids (the cgroup directories' inode numbers).
    pub cgroups: Vec<u64>,
    /// Anything in the container may write.
    pub allow_all: bool,
    /// Host uids allowed as effective or fs uid of a task in the container.
    pub uids: Vec<u32>,
    /// Host gids allowed as effective, fs or supplementary gid.
    pub gids: Vec<u32>,
}

impl ContainerRule {
    /// The filter's rule: "in the container" and, unless it allows all, one
    /// of its users or groups. `None` when nobody in it may write (no
    /// process to translate its names yet, or not running): the container
    /// is still a place of its own then (nothing of an enclosing place
    /// applies to it).
    pub fn rule(&self) -> Option<Rule> {
        if self.cgroups.is_empty()
            || (!self.allow_all && self.uids.is_empty() && self.gids.is_empty())
        {
            return None;
        }
        Some(Rule {
            uids: self.uids.clone(),
            gids: self.gids.clone(),
            places: self.cgroups.clone(),
            ctr_id: self.ctr_id,
            ..Rule::default()
        })
    }
}

/// Tries to read a starting container's id maps: the runtime moves the first
/// process into the cgroup before it writes its uid map.
const TRIES: usize = 5;
const RETRY: Duration = Duration::from_millis(100);

/// One container resolved: the filter's rule and what `status` shows. `wait`:
/// it runs but its maps could not be read yet (worth another try soon).
type Resolved = (ContainerRule, ContainerStatus, bool, Found);

fn resolve_one(root: &Path, c: &Container, ctr_id: u32) -> Resolved {
    let f: Found = find(root, c);
    let mut rule = ContainerRule {
        ctr_id,
        cgroups: f.cgroups.iter().map(|(_, id)| *id).collect(),
        allow_all: c.allow_all,
        uids: vec![],
        gids: vec![],
    };
    let mut problems = Vec::new();
    let mut users = Vec::new();
    let mut groups = Vec::new();
    let running = !f.cgroups.is_empty();
    let wait = running && f.pid.is_none() && !c.allow_all;
    if running && !c.allow_all {
        for u in &c.allow_users {
            match host_uid(&f, u) {
                Ok(id) => {
                    rule.uids.push(id);
                    users.push(ContainerUser {
                        name: u.clone(),
                        host_uid: id,
                    });
                }
                Err(e) => problems.push(e),
            }
        }
        for g in &c.allow_groups {
            match host_gid(&f, g) {
                Ok(id) => {
                    rule.gids.push(id);
                    groups.push(ContainerGroup {
                        name: g.clone(),
                        host_gid: id,
                    });
                }
                Err(e) => problems.push(e),
            }
        }
        // One line for "no process yet" rather than one per user and group.
        problems.dedup();
    }
    let view = ContainerStatus {
        name: c.name.clone(),
        cgroups: f.cgroups.iter().map(|(p, _)| p.clone()).collect(),
        allow: if c.allow_all {
            ContainerAllow::All("all".into())
        } else {
            ContainerAllow::Ids { users, groups }
        },
        problems,
    };
    (rule, view, wait, f)
}

/// Every container of `cs` resolved (container ids 1.. in configuration
/// order), retrying those whose maps are not written yet: the filter's rules,
/// what `status` shows, and what was found (the containers' device nodes
/// follow it, `crate::present`).
pub fn resolve(
    root: &Path,
    cs: &[Container],
) -> (Vec<ContainerRule>, Vec<ContainerStatus>, Vec<Found>) {
    let mut out: Vec<Resolved> = cs
        .iter()
        .enumerate()
        .map(|(i, c)| resolve_one(root, c, i as u32 + 1))
        .collect();
    for _ in 1..TRIES {
        if !out.iter().any(|(_, _, wait, _)| *wait) {
            break;
        }
        std::thread::sleep(RETRY);
        for (i, c) in cs.iter().enumerate() {
            if out[i].2 {
                out[i] = resolve_one(root, c, i as u32 + 1);
            }
        }
    }
    let mut rules = Vec::new();
    let mut views = Vec::new();
    let mut found = Vec::new();
    for (r, v, _, f) in out {
        rules.push(r);
        views.push(v);
        found.push(f);
    }
    (rules, views, found)
}

/// Resolves `cs` and hands the rules to the filter; logs what changed.
/// Returns what was found (`Daemon::resolve_containers` hands it on).
pub fn apply(svc: &FilterService, root: &Path, cs: &[Container]) -> Vec<Found> {
    let (rules, views, found) = resolve(root, cs);
    let before = svc.container_views();
    if let Err(e) = svc.set_containers(rules, views.clone()) {
        tracing::error!("filter: cannot set the container rules: {e}");
    }
    for v in &views {
        if before.iter().any(|b| b == v) {
            continue;
        }
        if v.problems.is_empty() {
            tracing::info!("filter: {}", v.summary());
        } else {
            tracing::warn!("filter: {}", v.summary());
        }
    }
    found
}

/// The cgroup2 mount the patterns are relative to.
pub fn cgroup_root() -> Option<PathBuf> {
    asmguard_guard::guard::cgroup2_root().ok()
}

/// The `containers` thread: re-resolves the configured containers whenever
/// the cgroup tree under their patterns changes (every second while one runs
/// but its users could not be translated yet, every 10 s otherwise), and at once when SIGHUP
/// gave a new configuration ([`FilterService::set_container_config`]).
pub fn spawn(d: Arc<crate::state::Daemon>) {
    let Some(root) = cgroup_root() else {
        if !d.filter.container_config().1.is_empty() {
            tracing::error!("filter: no cgroup2 file system: container rules cannot apply");
        }
        return;
    };
    let spawned = std::thread::Builder::new()
        .name("containers".into())
        .spawn(move || {
            let svc = &d.filter;
            let mut gen = svc.container_config().0;
            let mut cs = svc.container_config().1;
            let mut watcher = watch(&root, &cs);
            let mut last = Instant::now();
            loop {
                let (g, now) = svc.container_config();
                if g != gen {
                    // SIGHUP applied the new list already.
                    (gen, cs) = (g, now);
                    watcher = watch(&root, &cs);
                }
                let changed = match watcher.as_mut() {
                    Some(w) => w.changed(Duration::from_millis(250)),
                    None => {
                        std::thread::sleep(Duration::from_millis(250));
                        false
                    }
                };
                let waiting = svc
                    .container_views()
                    .iter()
                    .any(|v| !v.cgroups.is_empty() && !v.problems.is_empty())
                    || d.containers_pending();
                // And every 10 s anyway: a container's namespaces can change
                // with no cgroup event (its first process unsharing them).
                let due = if waiting { 1 } else { 10 };
                if changed || last.elapsed() >= Duration::from_secs(due) {
                    d.resolve_containers();
                    last = Instant::now();
                }
            }
        });
    if let Err(e) = spawned {
        tracing::error!("filter: cannot start the containers thread: {e}");
    }
}

/// The watch on what `cs`'s patterns can match (`None`: no container, or it
/// cannot be watched: said once).
fn watch(root: &Path, cs: &[Container]) -> Option<Watcher> {
    if cs.is_empty() {
        return None;
    }
    match Watcher::new(root, cs) {
        Ok(w) => Some(w),
        Err(e) => {
            tracing::error!(
                "filter: cannot watch the containers' cgroups (a container started later is \
                 covered only on SIGHUP): {e}"
            );
            None
        }
    }
}
