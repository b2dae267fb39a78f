//! Containers in the daemon: each `[[container]]` resolved -- the cgroups its
//! patterns match, its users and groups translated to host ids through its own
//! `/etc/passwd`, `/etc/group` and id maps (asmguard-containers), and the owner
//! of its device nodes -- into the World's [`Containers`] ([`resolve`], which
//! only reads, and waits for a container's files at most [`DEADLINE`]: one that
//! does not answer, or whose picked process exited, keeps its last good
//! resolution). `Applier::apply` hands the rules to the filter. The `containers`
//! task (`crate::inputs::tasks`) resolves them at start, on SIGHUP and whenever the
//! cgroup tree changes (an inotify watch, [`watch`]): a container started after
//! the daemon is covered within a second.

use asmguard_config::{Config, Container};
use asmguard_containers::{find, host_gid, host_uid, Found, Watcher};
use asmguard_guard::Rule;
use asmguard_proto::{ContainerAllow, ContainerGroup, ContainerStatus, ContainerUser};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One configured container as last resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// Its `[[container]]` section.
    pub config: Container,
    /// The filter's rule (who in it may write, as host ids).
    pub rule: ContainerRule,
    /// What `status` shows of it.
    pub view: ContainerStatus,
    /// Its cgroups, the process whose id maps translate its ids.
    pub found: Found,
    /// Its device nodes' host uid and gid, or why they are not known
    /// (`crate::apply::present::owner_of`).
    pub owner: Result<(u32, u32), String>,
    /// Its files (`/etc/passwd`, `/etc/group`, the id maps) did not answer
    /// within the deadline the last time: this is the last good resolution
    /// (or, when there never was one, a rule that allows nobody).
    pub stalled: bool,
    /// This is a last good resolution kept through a stall or a failed pick:
    /// its rule, owner and nodes stand, and the next resolution that cannot
    /// read the container keeps it again (a stall is seen at every try).
    pub kept: bool,
}

/// The configured containers as last resolved, in configuration order
/// (container ids 1..).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Containers {
    pub each: Vec<Resolved>,
}

impl Containers {
    /// What was found of container `name`.
    pub fn found(&self, name: &str) -> Option<&Found> {
        self.each
            .iter()
            .find(|r| r.config.name == name)
            .map(|r| &r.found)
    }

    /// The filter's container rules.
    pub fn rules(&self) -> Vec<ContainerRule> {
        self.each.iter().map(|r| r.rule.clone()).collect()
    }

    /// Each container's name, in order.
    pub fn names(&self) -> Vec<String> {
        self.each.iter().map(|r| r.config.name.clone()).collect()
    }

    /// Whether a container runs (has cgroups) but was not found with a
    /// process whose id maps are written, or its users could not be
    /// translated (a runtime may start the first process before the
    /// container's /etc/passwd is in place): worth resolving again soon.
    pub fn pending(&self) -> bool {
        self.each.iter().any(|r| {
            !r.found.cgroups.is_empty()
                && (r.found.pid.is_none() || !r.view.problems.is_empty())
                && !r.config.allow_all
        })
    }
}

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

/// How long one container's files (its `/etc/passwd`, `/etc/group`) are waited
/// for: they may sit on a file system that never answers (FUSE). A container
/// that does not answer in time keeps its last good resolution.
pub const DEADLINE: Duration = Duration::from_secs(2);

/// What reading a container's files gave: who may write, as host ids and as
/// `status` shows them, the owner of its device nodes, and the problems.
struct Translated {
    uids: Vec<u32>,
    gids: Vec<u32>,
    users: Vec<ContainerUser>,
    groups: Vec<ContainerGroup>,
    owner: Result<(u32, u32), String>,
    problems: Vec<String>,
}

impl Translated {
    /// Nobody in the container may write (no process to read it through, or
    /// its files did not answer); its nodes' owner as known.
    fn nobody(owner: Result<(u32, u32), String>, problems: Vec<String>) -> Translated {
        Translated {
            uids: vec![],
            gids: vec![],
            users: vec![],
            groups: vec![],
            owner,
            problems,
        }
    }
}

/// Reads the container's files: its allowed users and groups, and its nodes'
/// owner and group, as host ids (blocking: run it through
/// [`asmguard_containers::within`]).
fn translate(f: &Found, c: &Container, cfg: &Config) -> Translated {
    let mut t = Translated::nobody(Ok((0, 0)), vec![]);
    if !c.allow_all {
        for u in &c.allow_users {
            match host_uid(f, u) {
                Ok(id) => {
                    t.uids.push(id);
                    t.users.push(ContainerUser {
                        name: u.clone(),
                        host_uid: id,
                    });
                }
                Err(e) => t.problems.push(e),
            }
        }
        for g in &c.allow_groups {
            match host_gid(f, g) {
                Ok(id) => {
                    t.gids.push(id);
                    t.groups.push(ContainerGroup {
                        name: g.clone(),
                        host_gid: id,
                    });
                }
                Err(e) => t.problems.push(e),
            }
        }
        // One line for "no process yet" rather than one per user and group.
        t.problems.dedup();
    }
    t.owner = crate::apply::present::owner_of(cfg, c, f);
    t
}

/// One container resolved (container id `ctr_id`); `last`: its resolution
/// before. `.1`: it runs but its maps could not be read yet (worth another
/// try soon).
fn resolve_one(
    proc: &Path,
    root: &Path,
    cfg: &Config,
    c: &Container,
    ctr_id: u32,
    last: Option<&Resolved>,
    deadline: Duration,
) -> (Resolved, bool) {
    let f: Found = find(proc, root, c);
    let running = !f.cgroups.is_empty();
    let picked = f.pid.is_some();
    let wait = running && !picked && (!c.allow_all || !c.present.is_empty());
    // the last good resolution of the same section while it still has
    // processes: what a failed pick or a stall keeps (never a rule or node
    // lost to either, however many resolutions the stall lasts; a container
    // with no process left has neither)
    let good = last.filter(|l| {
        l.config == *c
            && f.tasks > 0
            && l.found.pid.is_some()
            && (l.view.problems.is_empty() || l.kept)
    });
    let mut rule = ContainerRule {
        ctr_id,
        cgroups: f.cgroups.iter().map(|(_, id)| *id).collect(),
        allow_all: c.allow_all,
        uids: vec![],
        gids: vec![],
    };
    let view = |t: &Translated| ContainerStatus {
        name: c.name.clone(),
        cgroups: f.cgroups.iter().map(|(p, _)| p.clone()).collect(),
        allow: if c.allow_all {
            ContainerAllow::All("all".into())
        } else {
            ContainerAllow::Ids {
                users: t.users.clone(),
                groups: t.groups.clone(),
            }
        },
        problems: t.problems.clone(),
    };
    if running && !picked {
        if let Some(g) = good {
            // the picked process exited (or another is being picked): the
            // container keeps its rule and its nodes until a new pick answers
            let mut keep = g.clone();
            keep.kept = true;
            keep.rule.cgroups = rule.cgroups.clone();
            keep.view.cgroups = f.cgroups.iter().map(|(p, _)| p.clone()).collect();
            keep.found.cgroups = f.cgroups.clone();
            return (keep, wait);
        }
    }
    let (t, stalled) = if running && picked {
        let key = format!("container {} (pid {})", c.name, f.pid.unwrap_or(0));
        let (f2, c2, cfg2) = (f.clone(), c.clone(), cfg.clone());
        match asmguard_containers::within(&key, deadline, move || Ok(translate(&f2, &c2, &cfg2))) {
            Ok(t) => (t, false),
            Err(e) => {
                let stalled = format!(
                    "its files did not answer within {} ms ({e}): {}",
                    deadline.as_millis(),
                    if good.is_some() {
                        "its last good resolution is kept"
                    } else {
                        "nobody in it may write and it has no nodes until they answer"
                    }
                );
                if let Some(g) = good {
                    let mut keep = g.clone();
                    keep.stalled = true;
                    keep.kept = true;
                    keep.rule.cgroups = rule.cgroups.clone();
                    keep.view.cgroups = f.cgroups.iter().map(|(p, _)| p.clone()).collect();
                    keep.found.cgroups = f.cgroups.clone();
                    // (a good one has no problem; a kept one its stall line:
                    // replaced by this one)
                    keep.view.problems = vec![stalled];
                    return (keep, false);
                }
                (
                    Translated::nobody(Err(stalled.clone()), vec![stalled]),
                    true,
                )
            }
        }
    } else {
        let why = format!(
            "container {}: no process yet to read its users and id maps from",
            c.name
        );
        let problems = if running && !c.allow_all {
            vec![why]
        } else {
            vec![]
        };
        (
            Translated::nobody(crate::apply::present::owner_of(cfg, c, &f), problems),
            false,
        )
    };
    rule.uids = t.uids.clone();
    rule.gids = t.gids.clone();
    let v = view(&t);
    (
        Resolved {
            config: c.clone(),
            rule,
            view: v,
            found: f,
            owner: t.owner,
            stalled,
            kept: false,
        },
        wait && !stalled,
    )
}

/// Every container of `cs` resolved (container ids 1.. in configuration
/// order) below the cgroup2 mount `root` (their processes in the procfs
/// `proc`), retrying those whose maps are not written yet; `last`: the
/// resolution before (what a stall or a failed pick keeps). Only reads; each container's files are waited for at most
/// `deadline`.
pub fn resolve(
    proc: &Path,
    root: Option<&Path>,
    cfg: &Config,
    last: &Containers,
    deadline: Duration,
) -> Containers {
    let cs = &cfg.container;
    let Some(root) = root else {
        let why = "no cgroup2 file system is mounted: asmguardd cannot find the container";
        return Containers {
            each: cs
                .iter()
                .enumerate()
                .map(|(i, c)| Resolved {
                    config: c.clone(),
                    rule: ContainerRule {
                        ctr_id: i as u32 + 1,
                        allow_all: c.allow_all,
                        ..ContainerRule::default()
                    },
                    view: ContainerStatus {
                        name: c.name.clone(),
                        cgroups: vec![],
                        allow: ContainerAllow::Ids {
                            users: vec![],
                            groups: vec![],
                        },
                        problems: vec![why.into()],
                    },
                    found: Found {
                        name: c.name.clone(),
                        ..Found::default()
                    },
                    owner: Err(why.into()),
                    stalled: false,
                    kept: false,
                })
                .collect(),
        };
    };
    let before = |name: &str| last.each.iter().find(|r| r.config.name == name);
    let mut out: Vec<(Resolved, bool)> = cs
        .iter()
        .enumerate()
        .map(|(i, c)| resolve_one(proc, root, cfg, c, i as u32 + 1, before(&c.name), deadline))
        .collect();
    for _ in 1..TRIES {
        if !out.iter().any(|(_, wait)| *wait) {
            break;
        }
        std::thread::sleep(RETRY);
        for (i, c) in cs.iter().enumerate() {
            if out[i].1 {
                out[i] = resolve_one(proc, root, cfg, c, i as u32 + 1, before(&c.name), deadline);
            }
        }
    }
    Containers {
        each: out.into_iter().map(|(r, _)| r).collect(),
    }
}

/// Logs what changed between two resolutions: a container's line when it
/// changed (a warning when it has problems), and a subordinate id range a
/// host user owns once per new map.
pub fn log_changes(before: &Containers, now: &Containers, etc: &std::path::Path) {
    for r in &now.each {
        let old = before.each.iter().find(|b| b.config.name == r.config.name);
        if old.map(|o| &o.view) != Some(&r.view) {
            if r.view.problems.is_empty() {
                tracing::info!("filter: {}", r.view.summary());
            } else {
                tracing::warn!("filter: {}", r.view.summary());
            }
        }
        let same_map = old.is_some_and(|o| {
            o.found.uid_map == r.found.uid_map && o.found.gid_map == r.found.gid_map
        });
        if r.found.pid.is_some() && !same_map {
            for w in asmguard_containers::subid::host_warnings(&r.found, etc) {
                tracing::warn!("{w}");
            }
        }
    }
}

/// The cgroup2 mount the patterns are relative to (in the procfs `proc`'s
/// mounts).
pub fn cgroup_root(proc: &Path) -> Option<PathBuf> {
    asmguard_guard::guard::cgroup2_root(proc).ok()
}

/// The watch on what `cs`'s patterns can match (`None`: no container, or it
/// cannot be watched: said once).
pub fn watch(root: &Path, cs: &[Container]) -> Option<Watcher> {
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
