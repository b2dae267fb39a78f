//! Containers as asmguard sees them: the `[[container]]`s of the configuration found
//! in the cgroup-v2 tree by their path patterns, the user-namespace id maps of their
//! processes, user and group names *as the container sees them* translated to host
//! ids, and an inotify watch that says when the cgroups a pattern can match appear,
//! vanish or become populated.
//!
//! The write filter judges by the cgroup ids [`find`] returns and the host ids
//! [`host_uid`]/[`host_gid`] give; the daemon calls them at start, on reload and
//! whenever [`Watcher::changed`] says so.
//!
//! Ids are translated once, from the container's *outermost* user namespace (see
//! [`find`]): a user in the container can make a nested user namespace that maps its
//! own id to any name it likes, so a nested namespace's map is never used when a
//! shallower one exists, and the kernel's host ids are compared with the result.

use asmguard_config::Container;
use nix::fcntl::{openat, OFlag};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use nix::sys::stat::Mode;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub mod subid;
mod watch;
pub use watch::Watcher;

/// A uid_map/gid_map: (inside, outside, count) extents, as /proc/PID/{uid,gid}_map
/// shows them to a reader in the initial user namespace (outside = host id).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IdMap(pub Vec<(u32, u32, u32)>);

impl IdMap {
    /// The initial user namespace's map: every id is itself.
    pub fn identity() -> IdMap {
        IdMap(vec![(0, 0, u32::MAX)])
    }

    /// Parse the text of a `uid_map`/`gid_map` file: one `inside outside count`
    /// extent a line. Empty text is an empty map (the runtime has not written it yet).
    pub fn parse(text: &str) -> Result<IdMap, String> {
        let mut v = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.is_empty() {
                continue;
            }
            let nums: Vec<u32> = f.iter().filter_map(|x| x.parse().ok()).collect();
            if f.len() != 3 || nums.len() != 3 || nums[2] == 0 {
                return Err(format!(
                    "id map line {}: {:?} is not `inside outside count`",
                    n + 1,
                    line.trim()
                ));
            }
            v.push((nums[0], nums[1], nums[2]));
        }
        Ok(IdMap(v))
    }

    /// The host id of `inside`; `None`: not mapped.
    pub fn to_host(&self, inside: u32) -> Option<u32> {
        self.0.iter().find_map(|&(i, o, c)| {
            let off = u64::from(inside).checked_sub(u64::from(i))?;
            (off < u64::from(c)).then(|| u32::try_from(u64::from(o) + off).ok())?
        })
    }

    /// The id inside of host id `host`; `None`: no inside id maps to it.
    pub fn to_inside(&self, host: u32) -> Option<u32> {
        self.0.iter().find_map(|&(i, o, c)| {
            let off = u64::from(host).checked_sub(u64::from(o))?;
            (off < u64::from(c)).then(|| u32::try_from(u64::from(i) + off).ok())?
        })
    }

    /// Whether this is the initial user namespace's map.
    pub fn is_identity(&self) -> bool {
        self.0 == [(0, 0, u32::MAX)]
    }
}

/// A configured container as found in the cgroup tree.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Found {
    /// The container's name (`[[container]] name`).
    pub name: String,
    /// The cgroups its patterns match: path relative to the cgroup2 mount, and the
    /// cgroup id (the directory's inode number, the kernel's `kn->id`).
    pub cgroups: Vec<(String, u64)>,
    /// A process of the container in its outermost non-host user namespace (see
    /// [`find`]); `None`: no process yet (or its id map is not written yet).
    pub pid: Option<u32>,
    /// That process's uid map (host ids outside); empty when `pid` is `None`.
    pub uid_map: IdMap,
    /// That process's gid map.
    pub gid_map: IdMap,
    /// How many processes its cgroups hold (0: stopped, or not started).
    pub tasks: usize,
    /// The procfs `pid` was found in (the caller's `Paths::proc`): where its
    /// container's files are read.
    pub proc: PathBuf,
}

/// Whether `path` matches `pattern`: the same number of `/`-separated components,
/// `*` matching any run of characters within one component.
pub fn glob_match(pattern: &str, path: &str) -> bool {
    let (mut p, mut s) = (pattern.split('/'), path.split('/'));
    loop {
        match (p.next(), s.next()) {
            (None, None) => return true,
            (Some(pc), Some(sc)) if component_match(pc.as_bytes(), sc.as_bytes()) => {}
            _ => return false,
        }
    }
}

/// One path component against one pattern component (`*` only: `?` is itself).
pub(crate) fn component_match(p: &[u8], s: &[u8]) -> bool {
    asmguard_devices::pattern::wildcard(p, s, false)
}

/// The directories below `root` (paths relative to it) that `pattern` matches.
pub(crate) fn expand(root: &Path, pattern: &str) -> Vec<String> {
    let mut level: Vec<String> = vec![String::new()];
    for comp in pattern.split('/') {
        let mut next = Vec::new();
        for rel in &level {
            let dir = root.join(rel);
            let join = |name: &str| {
                if rel.is_empty() {
                    name.to_string()
                } else {
                    format!("{rel}/{name}")
                }
            };
            if !comp.contains('*') {
                if dir.join(comp).is_dir() {
                    next.push(join(comp));
                }
                continue;
            }
            let Ok(rd) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in rd.flatten() {
                let Some(name) = e.file_name().to_str().map(str::to_string) else {
                    continue;
                };
                if e.file_type().is_ok_and(|t| t.is_dir())
                    && component_match(comp.as_bytes(), name.as_bytes())
                {
                    next.push(join(&name));
                }
            }
        }
        level = next;
        if level.is_empty() {
            break;
        }
    }
    level
}

/// The cgroups `c`'s patterns match below `root`, sorted, with their ids.
fn matched_cgroups(root: &Path, c: &Container) -> Vec<(String, u64)> {
    cgroups_matching(root, &c.cgroup)
}

/// The cgroups `patterns` match below `root` (the cgroup2 mount), sorted,
/// with their ids (the directories' inode numbers): a `[[container]]`'s, or
/// a `[[rule]]`'s units and cgroups.
pub fn cgroups_matching(root: &Path, patterns: &[String]) -> Vec<(String, u64)> {
    let paths: BTreeSet<String> = patterns.iter().flat_map(|p| expand(root, p)).collect();
    paths
        .into_iter()
        .filter_map(|p| {
            let ino = std::fs::metadata(root.join(&p)).ok()?.ino();
            Some((p, ino))
        })
        .collect()
}

/// The pids in `dir`'s `cgroup.procs` and those of every cgroup below it.
fn procs_below(dir: &Path, out: &mut BTreeSet<u32>, depth: usize) {
    if let Ok(t) = std::fs::read_to_string(dir.join("cgroup.procs")) {
        out.extend(t.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
    }
    if depth >= 32 {
        return;
    }
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                procs_below(&e.path(), out, depth + 1);
            }
        }
    }
}

/// `<proc>/<pid>`: process `pid` in the procfs `proc` (the caller's
/// `Paths::proc`).
fn proc_of(proc: &Path, pid: u32) -> PathBuf {
    proc.join(pid.to_string())
}

/// `<proc>/self`: this process.
fn own(proc: &Path) -> PathBuf {
    proc.join("self")
}

/// (device, inode) of a namespace file: the namespace's identity.
fn ns_id(path: &Path) -> Option<(u64, u64)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.dev(), m.ino()))
}

/// `NS_GET_PARENT` (linux/nsfs.h): `_IO(0xb7, 0x2)`.
const NS_GET_PARENT: libc::c_ulong = 0xb702;

/// How many levels the user namespace of `pid` is below ours: 0 when it is ours,
/// `None` when it is not below ours (or the process is gone).
fn userns_depth(proc: &Path, pid: u32, ours: (u64, u64)) -> Option<u32> {
    let path = proc_of(proc, pid).join("ns/user");
    if ns_id(&path)? == ours {
        return Some(0);
    }
    let mut fd: OwnedFd = std::fs::File::open(&path).ok()?.into();
    for depth in 1..=33 {
        // SAFETY: NS_GET_PARENT takes no argument and returns a new file
        // descriptor (or -1); `fd` is an open namespace file we own.
        let parent = unsafe { libc::ioctl(fd.as_raw_fd(), NS_GET_PARENT as _) };
        if parent < 0 {
            return None;
        }
        // SAFETY: `parent` is a fresh descriptor the kernel just returned;
        // nothing else owns it.
        fd = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(parent) };
        let m = std::fs::File::from(fd.try_clone().ok()?).metadata().ok()?;
        if (m.dev(), m.ino()) == ours {
            return Some(depth);
        }
    }
    None
}

fn read_map(proc: &Path, pid: u32, which: &str) -> Option<IdMap> {
    let t = std::fs::read_to_string(proc_of(proc, pid).join(which)).ok()?;
    IdMap::parse(&t).ok()
}

/// Find container `c` below the cgroup2 mount `cgroup_root`, its processes in
/// the procfs `proc` (the caller's `Paths::proc`): the cgroups its
/// patterns match, and a process whose maps translate the container's ids.
///
/// Which process: only processes outside the host's (the daemon's) pid
/// namespace are the container's: a runtime's supervisor sharing the cgroup,
/// or the container's first process before it made its namespaces, is in the
/// host's (judging by it would read the host's /etc/passwd with the identity
/// map). Of those, one whose user namespace is the outermost: the host's own
/// (a privileged container: the identity maps, even if a user of the container
/// made a user namespace of its own in which it calls itself grid), else the
/// outermost below it whose maps are written (a map read as empty, not written
/// by the runtime yet, gives no process); never a deeper one.
pub fn find(proc: &Path, cgroup_root: &Path, c: &Container) -> Found {
    let cgroups = matched_cgroups(cgroup_root, c);
    let mut pids = BTreeSet::new();
    for (p, _) in &cgroups {
        procs_below(&cgroup_root.join(p), &mut pids, 0);
    }
    let mut found = Found {
        name: c.name.clone(),
        cgroups,
        pid: None,
        uid_map: IdMap::default(),
        gid_map: IdMap::default(),
        tasks: pids.len(),
        proc: proc.to_path_buf(),
    };
    let Some(ours) = ns_id(&own(proc).join("ns/user")) else {
        return found;
    };
    let our_pid = ns_id(&own(proc).join("ns/pid"));
    // Depth by namespace: a container's processes share a few namespaces.
    let mut depth_of: HashMap<(u64, u64), Option<u32>> = HashMap::new();
    let mut best: Option<(u32, u32)> = None; // (depth, pid)
    for &pid in &pids {
        // A process in the host's pid namespace is a runtime's (nspawn's
        // supervisor, a first process that has not made its namespaces yet),
        // never the container's.
        if ns_id(&proc_of(proc, pid).join("ns/pid")) == our_pid {
            continue;
        }
        let Some(ns) = ns_id(&proc_of(proc, pid).join("ns/user")) else {
            continue;
        };
        let depth = *depth_of
            .entry(ns)
            .or_insert_with(|| userns_depth(proc, pid, ours));
        match depth {
            Some(d) if best.is_none_or(|(bd, _)| d < bd) => best = Some((d, pid)),
            _ => {}
        }
    }
    match best {
        // A privileged container (its processes in the host's user
        // namespace): the identity map, even when one of its users made a
        // user namespace of its own (in which it may call itself grid).
        Some((0, pid)) => {
            found.pid = Some(pid);
            found.uid_map = IdMap::identity();
            found.gid_map = IdMap::identity();
        }
        // Any process at the outermost depth whose maps are written; never a
        // deeper one.
        Some((d, _)) => {
            for &pid in &pids {
                let Some(ns) = ns_id(&proc_of(proc, pid).join("ns/user")) else {
                    continue;
                };
                if depth_of.get(&ns) != Some(&Some(d)) {
                    continue;
                }
                if let (Some(u), Some(g)) = (
                    read_map(proc, pid, "uid_map"),
                    read_map(proc, pid, "gid_map"),
                ) {
                    if !u.0.is_empty() && !g.0.is_empty() {
                        found.pid = Some(pid);
                        found.uid_map = u;
                        found.gid_map = g;
                        return found;
                    }
                }
            }
        }
        None => {}
    }
    found
}

/// The biggest passwd/group file read (a hostile container could offer anything).
const DB_MAX: u64 = 16 << 20;

/// Read `etc/<file>` below the directory `root`, refusing symlinks (which would
/// resolve against the daemon's root) and anything but a regular file (a FIFO
/// would block).
fn read_db(root: &Path, file: &str) -> Result<String, String> {
    let what = || format!("{}/etc/{file}", root.display());
    let open = |dir: &dyn AsFd, name: &str, flags: OFlag| {
        openat(
            dir,
            name,
            flags | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK,
            Mode::empty(),
        )
        .map_err(|e| format!("cannot open {}: {e}", what()))
    };
    let rootfd: OwnedFd = std::fs::File::open(root)
        .map_err(|e| format!("cannot open {}: {e}", root.display()))?
        .into();
    let etc = open(&rootfd, "etc", OFlag::O_DIRECTORY | OFlag::O_RDONLY)?;
    let f = open(&etc, file, OFlag::O_RDONLY)?;
    let mut f = std::fs::File::from(f);
    let m = f.metadata().map_err(|e| format!("{}: {e}", what()))?;
    if !m.file_type().is_file() {
        return Err(format!("{} is not a regular file", what()));
    }
    let mut text = String::new();
    f.by_ref()
        .take(DB_MAX)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read {}: {e}", what()))?;
    Ok(text)
}

/// The id of `name` in the passwd/group `text` (third field).
fn db_id(text: &str, name: &str) -> Option<u32> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let mut f = l.split(':');
        (f.next()? == name).then_some(())?;
        f.nth(1)?.trim().parse().ok()
    })
}

/// How the container files are read (`pid`, `passwd` or `group`): in this
/// process unless [`set_db_reader`] was given another way.
type DbReader = fn(u32, &str) -> Result<String, String>;
static DB_READER: std::sync::OnceLock<DbReader> = std::sync::OnceLock::new();

/// Reads containers' `/etc/passwd` and `/etc/group` with `f` from now on
/// (once per process). The daemon reads them in a child process of its own:
/// a thread waiting on a file system that never answers (FUSE) cannot be
/// killed, and the daemon could not even exit; a child can be left behind.
pub fn set_db_reader(f: DbReader) {
    let _ = DB_READER.set(f);
}

/// `etc/passwd` or `etc/group` (`file`) of the container that process `pid`
/// runs in (in the procfs `proc`), read here (what a [`set_db_reader`] child
/// does): symlinks and anything but a regular file refused, at most 16 MiB.
pub fn read_container_db(proc: &Path, pid: u32, file: &str) -> Result<String, String> {
    if file != "passwd" && file != "group" {
        return Err(format!("{file}: only passwd and group are read"));
    }
    read_db(&proc_of(proc, pid).join("root"), file)
}

/// `name` (or a number) as the container below `root` sees it: its id there.
#[cfg(test)]
pub(crate) fn inside_id(root: &Path, file: &str, name: &str) -> Result<u32, String> {
    if let Ok(n) = name.parse::<u32>() {
        return Ok(n);
    }
    let text = read_db(root, file)?;
    named_id(&text, file, name)
}

/// `name` (or a number) as process `pid`'s container sees it (read through
/// [`set_db_reader`]'s way, else in the procfs `proc`).
fn inside_id_of(proc: &Path, pid: u32, file: &str, name: &str) -> Result<u32, String> {
    if let Ok(n) = name.parse::<u32>() {
        return Ok(n);
    }
    let text = match DB_READER.get() {
        Some(read) => read(pid, file)?,
        None => read_container_db(proc, pid, file)?,
    };
    named_id(&text, file, name)
}

/// The id of `name` in the passwd/group `text` of `file`.
fn named_id(text: &str, file: &str, name: &str) -> Result<u32, String> {
    let what = if file == "passwd" { "user" } else { "group" };
    db_id(text, name).ok_or_else(|| format!("no {what} {name:?} in the container's /etc/{file}"))
}

fn to_host(f: &Found, name: &str, file: &str) -> Result<u32, String> {
    let (what, map) = if file == "passwd" {
        ("uid", &f.uid_map)
    } else {
        ("gid", &f.gid_map)
    };
    let pid = f.pid.ok_or_else(|| {
        format!(
            "container {}: no process yet to read its users and id maps from",
            f.name
        )
    })?;
    let inside =
        inside_id_of(&f.proc, pid, file, name).map_err(|e| format!("container {}: {e}", f.name))?;
    map.to_host(inside).ok_or_else(|| {
        format!(
            "container {}: {name} ({what} {inside} inside) is not mapped to a host {what}",
            f.name
        )
    })
}

/// A user, by name or number as the container sees it, to the host uid (through the
/// container's /etc/passwd and its uid map). Err: a one-line reason (no such user in
/// the container, not mapped, no process).
pub fn host_uid(f: &Found, user: &str) -> Result<u32, String> {
    to_host(f, user, "passwd")
}

/// A group, by name or number as the container sees it, to the host gid (through the
/// container's /etc/group and its gid map).
pub fn host_gid(f: &Found, group: &str) -> Result<u32, String> {
    to_host(f, group, "group")
}

/// Reads in flight, by key, with when they started: at most one thread per key
/// is ever left waiting on a container's file. The condition variable wakes
/// callers waiting for a key's read to end.
type InFlight = BTreeMap<String, std::time::Instant>;
static IN_FLIGHT: (std::sync::Mutex<InFlight>, std::sync::Condvar) = (
    std::sync::Mutex::new(InFlight::new()),
    std::sync::Condvar::new(),
);

/// How long a read of a key may have been in flight and still count as an
/// overlap, not a stall: two resolutions at once (a SIGHUP and a cgroup event)
/// overlap by a few milliseconds, and the later one must not read that as a
/// stall. A read in flight for longer is a stall: the next try fails at once.
const OVERLAP_GRACE: Duration = Duration::from_millis(250);

fn key_done(key: &str) {
    let (set, cv) = &IN_FLIGHT;
    set.lock().unwrap_or_else(|p| p.into_inner()).remove(key);
    cv.notify_all();
}

/// Runs `read` on a thread of its own and waits at most `deadline` for it: a
/// container's files may sit on a file system that never answers (FUSE), and
/// the caller (the socket's accept loop) must not wait for them. While an
/// earlier read of the same `key` is in flight: if it started less than
/// [`OVERLAP_GRACE`] ago, waits for it until then (at most `deadline`); if it
/// is older, or still there after that, fails without starting another, so a
/// stalled container holds one thread, not one per try, and costs a try nothing.
pub fn within<T: Send + 'static>(
    key: &str,
    deadline: Duration,
    read: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    {
        let (set, cv) = &IN_FLIGHT;
        let mut s = set.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(age) = s.get(key).map(|t| t.elapsed()) {
            let wait = OVERLAP_GRACE.saturating_sub(age).min(deadline);
            s = cv
                .wait_timeout_while(s, wait, |s| s.contains_key(key))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        if s.contains_key(key) {
            return Err(format!(
                "{key}: an earlier read has not returned yet (a file that does not answer)"
            ));
        }
        s.insert(key.to_string(), std::time::Instant::now());
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let k = key.to_string();
    let spawned = std::thread::Builder::new()
        .name("ctr-read".into())
        .spawn(move || {
            let r = read();
            key_done(&k);
            let _ = tx.send(r);
        });
    if let Err(e) = spawned {
        key_done(key);
        return Err(format!("{key}: cannot start a reader: {e}"));
    }
    rx.recv_timeout(deadline).unwrap_or_else(|_| {
        Err(format!(
            "{key}: no answer within {} ms (a file that does not answer): skipped",
            deadline.as_millis()
        ))
    })
}

/// [`host_gid`] with a deadline ([`within`]): for callers that must not wait
/// on the container's /etc/group. A read that does not answer in time (a slow
/// or stalled file, or a guest starved of CPU) gets the gid this process of the
/// container last answered for the group ([`within_or_last`]), as a stalled
/// container keeps its last good resolution; an answer that the group is gone
/// forgets it.
pub fn host_gid_within(f: &Found, group: &str, deadline: Duration) -> Result<u32, String> {
    let key = format!(
        "container {} (pid {}) /etc/group",
        f.name,
        f.pid.map_or("none".into(), |p| p.to_string())
    );
    let last = format!("{key} group {group}");
    let (f, group) = (f.clone(), group.to_string());
    within_or_last(&key, &last, deadline, move || host_gid(&f, &group))
}

/// The last value each `last` key answered (see [`within_or_last`]).
static LAST_ANSWER: std::sync::Mutex<BTreeMap<String, u32>> =
    std::sync::Mutex::new(BTreeMap::new());

/// [`within`], remembering what `read` answered under `last` (an answer
/// arriving after the deadline included): when no answer comes in time, the
/// last one is the answer; when `read` answers with an error, the last one is
/// forgotten and the error is the answer. Only silence falls back, never a
/// refusal.
pub fn within_or_last(
    key: &str,
    last: &str,
    deadline: Duration,
    read: impl FnOnce() -> Result<u32, String> + Send + 'static,
) -> Result<u32, String> {
    let remember = last.to_string();
    let answered = within(key, deadline, move || {
        let r = read();
        let mut m = LAST_ANSWER.lock().unwrap_or_else(|p| p.into_inner());
        match &r {
            Ok(v) => m.insert(remember, *v),
            Err(_) => m.remove(&remember),
        };
        Ok(r)
    });
    match answered {
        Ok(r) => r,
        Err(silence) => LAST_ANSWER
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(last)
            .copied()
            .ok_or(silence),
    }
}

/// The cgroup-v2 path of `pid` (relative to the cgroup2 mount), from /proc/PID/cgroup.
fn cgroup_of(proc: &Path, pid: u32) -> Option<String> {
    let t = std::fs::read_to_string(proc_of(proc, pid).join("cgroup")).ok()?;
    t.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(|p| p.trim().trim_start_matches('/').to_string())
}

/// Whether the cgroup `path` or one of its ancestors matches one of `c`'s patterns.
pub fn path_in(c: &Container, path: &str) -> bool {
    let comps: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    (1..=comps.len()).any(|n| {
        let p = comps[..n].join("/");
        c.cgroup.iter().any(|pat| glob_match(pat, &p))
    })
}

/// The configured container a process is in (by /proc/PID/cgroup against the
/// patterns), if any. `cgroup_root` is the cgroup2 mount the patterns are relative
/// to, `proc` the procfs; a process whose cgroup is no longer there (it moved)
/// is in none.
pub fn container_of<'a>(
    proc: &Path,
    cgroup_root: &Path,
    cs: &'a [Container],
    pid: u32,
) -> Option<&'a Container> {
    let path = cgroup_of(proc, pid)?;
    if !cgroup_root.join(&path).is_dir() {
        return None;
    }
    cs.iter().find(|c| path_in(c, &path))
}

/// Whether pid runs outside the host's namespaces (its pid namespace is not the
/// daemon's). A process whose namespace cannot be read counts as in a container:
/// the answer gates rights, and the restrictive one is the safe one.
pub fn in_container(proc: &Path, pid: u32) -> bool {
    match (
        ns_id(&proc_of(proc, pid).join("ns/pid")),
        ns_id(&own(proc).join("ns/pid")),
    ) {
        (Some(a), Some(b)) => a != b,
        _ => true,
    }
}

/// Whether pid runs on the host, outside every container: its pid, user and
/// cgroup namespaces are all the daemon's. A container run with the host's pid
/// namespace (`podman run --pid=host`) still has a cgroup namespace of its own,
/// a user-namespaced one a user namespace of its own. Mount and network
/// namespaces are not asked: systemd gives host services their own
/// (`PrivateTmp=`, `PrivateNetwork=`). A namespace that cannot be read is not
/// the host's (the answer gates rights: the restrictive one is the safe one).
pub fn on_host(proc: &Path, pid: u32) -> bool {
    ["pid", "user", "cgroup"].iter().all(|ns| {
        match (
            ns_id(&proc_of(proc, pid).join("ns").join(ns)),
            ns_id(&own(proc).join("ns").join(ns)),
        ) {
            (Some(a), Some(b)) => a == b,
            _ => false,
        }
    })
}

/// Whether pid holds `CAP_SYS_ADMIN` in its effective set (`CapEff` of
/// /proc/PID/status, a capability of the process's own user namespace: of
/// the host's only when [`on_host`] says so). Unreadable: no.
pub fn has_sys_admin(proc: &Path, pid: u32) -> bool {
    /// linux/capability.h
    const CAP_SYS_ADMIN: u32 = 21;
    std::fs::read_to_string(proc_of(proc, pid).join("status"))
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .is_some_and(|caps| caps & (1 << CAP_SYS_ADMIN) != 0)
}

/// Directories to watch, each with the pattern components a child of it must match
/// to matter, and the matched cgroups' `cgroup.events` files.
pub(crate) type Targets = (BTreeMap<PathBuf, BTreeSet<String>>, BTreeSet<PathBuf>);

pub(crate) fn watch_targets(root: &Path, cs: &[Container]) -> Targets {
    let mut dirs: BTreeMap<PathBuf, BTreeSet<String>> = BTreeMap::new();
    let mut events = BTreeSet::new();
    for pat in cs.iter().flat_map(|c| &c.cgroup) {
        let comps: Vec<&str> = pat.split('/').collect();
        let mut level: Vec<String> = vec![String::new()];
        for (k, comp) in comps.iter().enumerate() {
            for rel in &level {
                dirs.entry(root.join(rel))
                    .or_default()
                    .insert(comp.to_string());
            }
            let prefix = comps[..=k].join("/");
            level = expand(root, &prefix);
            if level.is_empty() {
                break;
            }
        }
        for rel in level {
            events.insert(root.join(rel).join("cgroup.events"));
        }
    }
    (dirs, events)
}

/// Make an inotify instance (non-blocking, close-on-exec).
pub(crate) fn inotify() -> io::Result<Inotify> {
    Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC).map_err(io::Error::from)
}

pub(crate) const DIR_EVENTS: AddWatchFlags = AddWatchFlags::IN_CREATE
    .union(AddWatchFlags::IN_DELETE)
    .union(AddWatchFlags::IN_MOVED_FROM)
    .union(AddWatchFlags::IN_MOVED_TO)
    .union(AddWatchFlags::IN_ONLYDIR);

pub(crate) fn sleep_poll(fd: &Inotify, timeout: Duration) -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let t = PollTimeout::try_from(timeout).unwrap_or(PollTimeout::MAX);
    let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
    matches!(poll(&mut fds, t), Ok(n) if n > 0)
}

#[cfg(test)]
mod tests;
