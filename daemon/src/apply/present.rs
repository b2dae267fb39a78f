//! Device nodes for containers: `/dev/asmguard/containers/<name>/<LABEL>`, a
//! real block-device node (the dev_t of the disk's top device: the multipath
//! device, the one `/dev/asmguard/disks/<LABEL>` leads to) for every label a
//! `[[container]]` section presents, owned by the container's `owner`/`group`
//! as its own user namespace maps them to host ids, with the configured mode.
//! A container bind-mounts its directory; the directory stays when its nodes
//! go, so the bind mount keeps working across container and daemon restarts.
//!
//! [`sync`] makes the directory match what is wanted: it makes missing nodes,
//! fixes drifted ones (owner or mode in place; another device number by a
//! fresh node renamed over the old one), removes the block-device nodes of
//! labels not presented (or no longer managed, or of a container it cannot
//! resolve) and stats every node it made or fixed back. It never follows a
//! symlink and never replaces or removes anything but a block-device node: a
//! file, directory, symlink or character device an administrator put there is
//! left alone and reported. Only the directories of the configured containers
//! are touched (another asmguardd on this host may present its own).
//!
//! `Applier::apply` calls it with every World (a new model, the containers
//! resolved again: a container started, stopped, SIGHUP); [`Presenter`] keeps the last outcome for `lsdsk` and `status`, logs
//! each problem once, and removes the nodes of a container a SIGHUP took out
//! of the configuration.
//!
//! Not for: finding containers or translating ids (`asmguard-containers`), the
//! write filter's container rules (`crate::apply::filter`).

use asmguard_devices::KernelDev;
use nix::sys::stat::{FchmodatFlags, Mode, SFlag};
use nix::unistd::{FchownatFlags, Gid, Uid};
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// What one container is to be presented: resolved from its `[[container]]`
/// section and what `asmguard-containers` found of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The container's name (its directory).
    pub name: String,
    /// The labels presented to it, or `*`.
    pub present: Vec<String>,
    /// The nodes' host uid and gid, or why they are not known (no process
    /// yet, no such user in the container, not mapped): then it has no node.
    pub owner: Result<(u32, u32), String>,
    /// The nodes' permission bits.
    pub mode: u32,
}

impl Target {
    /// Whether `label` is presented to this container.
    pub fn presents(&self, label: &str) -> bool {
        self.present.iter().any(|p| p == "*" || p == label)
    }
}

/// A node that is in place as wanted (stat'ed back).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub container: String,
    pub label: String,
    pub path: PathBuf,
    pub uid: u32,
    pub gid: u32,
    pub mode: u32,
}

/// Why a container (`label: None`) or one of its labels has no node.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Problem {
    pub container: String,
    pub label: Option<String>,
    pub reason: String,
}

impl Node {
    /// As `lsdsk` shows it.
    pub fn info(&self) -> asmguard_proto::Presentation {
        asmguard_proto::Presentation {
            container: self.container.clone(),
            path: self.path.display().to_string(),
            uid: self.uid,
            gid: self.gid,
            mode: format!("{:04o}", self.mode),
        }
    }
}

impl Problem {
    /// As `lsdsk` and `status` show it.
    pub fn info(&self) -> asmguard_proto::NotPresented {
        asmguard_proto::NotPresented {
            container: self.container.clone(),
            label: self.label.clone(),
            reason: self.reason.clone(),
        }
    }
}

/// The host uid and gid of container `c`'s device nodes (its `owner` and
/// `group`, default `[paths]`, as the container sees them) through what was
/// found of it, or why they are not known. Reads the container's
/// `/etc/passwd` and `/etc/group`: resolution time only
/// (`crate::apply::filter::containers::resolve`), never on the scan path.
pub fn owner_of(
    cfg: &asmguard_config::Config,
    c: &asmguard_config::Container,
    f: &asmguard_containers::Found,
) -> Result<(u32, u32), String> {
    let owner = c.owner.as_deref().unwrap_or(&cfg.paths.owner);
    let group = c.group.as_deref().unwrap_or(&cfg.paths.group);
    match f {
        _ if c.present.is_empty() => Ok((0, 0)), // nothing is presented: no ids needed
        f if f.pid.is_some() => asmguard_containers::host_uid(f, owner)
            .map_err(|e| format!("owner {owner}: {e}"))
            .and_then(|u| {
                asmguard_containers::host_gid(f, group)
                    .map(|g| (u, g))
                    .map_err(|e| format!("group {group}: {e}"))
            }),
        _ => Err(format!(
            "no process of the container found yet (cgroup {}): its nodes are made when it \
             runs (its id maps give their owner)",
            c.cgroup.join(", ")
        )),
    }
}

/// What container `c` is to be presented: its nodes' `owner` (from
/// [`owner_of`], at resolution time) and its mode (default `[paths]`).
pub fn target(
    cfg: &asmguard_config::Config,
    c: &asmguard_config::Container,
    owner: Result<(u32, u32), String>,
) -> Target {
    let mode = c.mode.and_then(|m| m.value()).unwrap_or_else(|| cfg.mode());
    Target {
        name: c.name.clone(),
        present: c.present.clone(),
        owner,
        mode,
    }
}

/// What a [`sync`] left in place and what it could not do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    pub nodes: Vec<Node>,
    pub problems: Vec<Problem>,
}

impl Outcome {
    /// The nodes of `label`, one per container it is presented to.
    pub fn of_label<'a>(&'a self, label: &'a str) -> impl Iterator<Item = &'a Node> + 'a {
        self.nodes.iter().filter(move |n| n.label == label)
    }
}

/// What a directory entry is, as `lstat` sees it.
enum Entry {
    Absent,
    /// A block-device node: (dev_t, uid, gid, permission bits).
    Block(u64, u32, u32, u32),
    /// A directory (not a symlink to one).
    Dir,
    /// Anything else, and what it is.
    Other(&'static str),
}

fn entry(p: &Path) -> std::io::Result<Entry> {
    let m = match std::fs::symlink_metadata(p) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Entry::Absent),
        Err(e) => return Err(e),
    };
    let t = m.file_type();
    Ok(if t.is_block_device() {
        Entry::Block(m.rdev(), m.uid(), m.gid(), m.mode() & 0o7777)
    } else if t.is_symlink() {
        Entry::Other("a symlink")
    } else if t.is_dir() {
        Entry::Dir
    } else if t.is_char_device() {
        Entry::Other("a character device")
    } else if t.is_file() {
        Entry::Other("a regular file")
    } else {
        Entry::Other("a socket, fifo or other special file")
    })
}

/// A real directory at `p` (made 0755 when missing), never a symlink.
fn real_dir(p: &Path) -> Result<(), String> {
    match entry(p) {
        Ok(Entry::Absent) => {
            std::fs::create_dir_all(p)
                .map_err(|e| format!("{}: cannot create: {e}", p.display()))?;
            let _ = nix::sys::stat::fchmodat(
                nix::fcntl::AT_FDCWD,
                p,
                Mode::from_bits_truncate(0o755),
                FchmodatFlags::NoFollowSymlink,
            );
            match entry(p) {
                Ok(Entry::Dir) => Ok(()),
                _ => Err(format!("{}: could not be made a directory", p.display())),
            }
        }
        Ok(Entry::Dir) => Ok(()),
        Ok(Entry::Other(what)) => Err(format!(
            "{} is {what}, not a directory: refusing to follow or replace it (remove it to let \
             asmguardd make the directory)",
            p.display()
        )),
        Ok(Entry::Block(..)) => Err(format!(
            "{} is a block device, not a directory: refusing to replace it",
            p.display()
        )),
        Err(e) => Err(format!("{}: {e}", p.display())),
    }
}

/// What `sync` did to one node, for the journal.
#[derive(Debug, PartialEq, Eq)]
enum Done {
    Kept,
    Made,
    Fixed(String),
}

/// Puts the node `path` in place: `dev`, `uid`, `gid`, `mode`, verified by a
/// stat. A block-device node already there is fixed (owner and mode in place,
/// another device number by a fresh node renamed over it); anything else is
/// left alone and is the error.
fn place(path: &Path, dev: KernelDev, uid: u32, gid: u32, mode: u32) -> Result<Done, String> {
    let shown = path.display();
    let want_rdev = dev.to_dev_t();
    let done = match entry(path).map_err(|e| format!("{shown}: {e}"))? {
        Entry::Other(what) => return Err(not_ours(&shown, what)),
        Entry::Dir => return Err(not_ours(&shown, "a directory")),
        Entry::Block(rdev, u, g, m) if rdev == want_rdev => {
            if (u, g, m) == (uid, gid, mode) {
                return Ok(Done::Kept);
            }
            set_owner_mode(path, uid, gid, mode)?;
            Done::Fixed(format!("owner {u}:{g} mode {m:04o}"))
        }
        Entry::Block(rdev, ..) => {
            let tmp = temp_of(path);
            make(&tmp, dev, uid, gid, mode)?;
            std::fs::rename(&tmp, path).map_err(|e| {
                let _ = std::fs::remove_file(&tmp);
                format!("{shown}: cannot replace it: {e}")
            })?;
            let was = KernelDev::from_dev_t(rdev)
                .map_or_else(|_| format!("{rdev:#x}"), |d| d.to_string());
            Done::Fixed(format!("device {was}"))
        }
        Entry::Absent => {
            // made under a temporary name and renamed, so the node never
            // shows with another owner or mode
            let tmp = temp_of(path);
            make(&tmp, dev, uid, gid, mode)?;
            std::fs::rename(&tmp, path).map_err(|e| {
                let _ = std::fs::remove_file(&tmp);
                format!("{shown}: cannot rename the new node into place: {e}")
            })?;
            Done::Made
        }
    };
    verify(path, dev, uid, gid, mode)?;
    Ok(done)
}

/// Something in the way that asmguardd did not make.
fn not_ours(shown: &impl std::fmt::Display, what: &str) -> String {
    format!(
        "{shown} is {what}, not a node asmguardd made: left alone (remove it to let asmguardd \
         make the device node)"
    )
}

/// `.<name>.asmguard-new` beside `path`.
fn temp_of(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.asmguard-new"))
}

/// A fresh node at `tmp` (a leftover block node of an earlier attempt is
/// replaced; anything else there is an error).
fn make(tmp: &Path, dev: KernelDev, uid: u32, gid: u32, mode: u32) -> Result<(), String> {
    let shown = tmp.display();
    match entry(tmp).map_err(|e| format!("{shown}: {e}"))? {
        Entry::Absent => {}
        Entry::Block(..) => {
            std::fs::remove_file(tmp).map_err(|e| format!("{shown}: cannot remove: {e}"))?
        }
        Entry::Other(what) => return Err(not_ours(&shown, what)),
        Entry::Dir => return Err(not_ours(&shown, "a directory")),
    }
    nix::sys::stat::mknod(
        tmp,
        SFlag::S_IFBLK,
        Mode::from_bits_truncate(0o600),
        dev.to_dev_t(),
    )
    .map_err(|e| format!("{shown}: mknod {dev}: {e}"))?;
    if let Err(e) =
        set_owner_mode(tmp, uid, gid, mode).and_then(|()| verify(tmp, dev, uid, gid, mode))
    {
        let _ = std::fs::remove_file(tmp);
        return Err(e);
    }
    Ok(())
}

/// chown and chmod without following a symlink.
fn set_owner_mode(path: &Path, uid: u32, gid: u32, mode: u32) -> Result<(), String> {
    let shown = path.display();
    nix::unistd::fchownat(
        nix::fcntl::AT_FDCWD,
        path,
        Some(Uid::from_raw(uid)),
        Some(Gid::from_raw(gid)),
        FchownatFlags::AT_SYMLINK_NOFOLLOW,
    )
    .map_err(|e| format!("{shown}: chown {uid}:{gid}: {e}"))?;
    nix::sys::stat::fchmodat(
        nix::fcntl::AT_FDCWD,
        path,
        Mode::from_bits_truncate(mode),
        FchmodatFlags::NoFollowSymlink,
    )
    .map_err(|e| format!("{shown}: chmod {mode:04o}: {e}"))
}

/// The node at `path` is a block device `dev` owned `uid:gid` with `mode`.
fn verify(path: &Path, dev: KernelDev, uid: u32, gid: u32, mode: u32) -> Result<(), String> {
    let shown = path.display();
    match entry(path).map_err(|e| format!("{shown}: stat after making it: {e}"))? {
        Entry::Block(r, u, g, m) if (r, u, g, m) == (dev.to_dev_t(), uid, gid, mode) => Ok(()),
        Entry::Block(r, u, g, m) => Err(format!(
            "{shown}: reads back as device {} owner {u}:{g} mode {m:04o}, not {dev} {uid}:{gid} \
             {mode:04o}",
            KernelDev::from_dev_t(r).map_or_else(|_| format!("{r:#x}"), |d| d.to_string())
        )),
        Entry::Absent => Err(format!("{shown}: gone right after it was made")),
        Entry::Dir => Err(format!("{shown}: is a directory right after it was made")),
        Entry::Other(what) => Err(format!("{shown}: is {what} right after it was made")),
    }
}

/// Removes every block-device node in `dir` whose name is not in `keep`
/// (leftover temporary nodes included); nothing else is touched.
fn remove_unwanted(dir: &Path, keep: &BTreeSet<&str>, container: &str) -> Vec<Problem> {
    let mut problems = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return problems;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if keep.contains(name.as_str()) {
            continue;
        }
        let p = e.path();
        if let Ok(Entry::Block(..)) = entry(&p) {
            match std::fs::remove_file(&p) {
                Ok(()) => tracing::info!("container {container}: removed {}", p.display()),
                Err(err) => problems.push(Problem {
                    container: container.to_string(),
                    label: Some(name),
                    reason: format!("{}: cannot remove it: {err}", p.display()),
                }),
            }
        }
    }
    problems
}

/// Whether `name` is one path component (the configuration allows no other
/// container names): never a path out of the containers' directory.
fn one_component(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\0'])
}

/// Makes `root`'s container directories match `targets` for the managed
/// `disks` (label, top device; labels in conflict left out by the caller).
pub fn sync(root: &Path, disks: &[(String, KernelDev)], targets: &[Target]) -> Outcome {
    let mut out = Outcome::default();
    if targets.is_empty() {
        return out;
    }
    if let Err(e) = real_dir(root) {
        for t in targets {
            out.problems.push(Problem {
                container: t.name.clone(),
                label: None,
                reason: e.clone(),
            });
        }
        return out;
    }
    for t in targets {
        if !one_component(&t.name) {
            out.problems.push(Problem {
                container: t.name.clone(),
                label: None,
                reason: format!("{:?} cannot name a directory", t.name),
            });
            continue;
        }
        let dir = root.join(&t.name);
        if t.present.is_empty() && matches!(entry(&dir), Ok(Entry::Absent)) {
            continue; // presents nothing and never did: no directory
        }
        if let Err(e) = real_dir(&dir) {
            out.problems.push(Problem {
                container: t.name.clone(),
                label: None,
                reason: e,
            });
            continue;
        }
        let (uid, gid) = match &t.owner {
            Ok(ids) => *ids,
            Err(why) => {
                out.problems
                    .extend(remove_unwanted(&dir, &BTreeSet::new(), &t.name));
                out.problems.push(Problem {
                    container: t.name.clone(),
                    label: None,
                    reason: why.clone(),
                });
                continue;
            }
        };
        let wanted: BTreeMap<&str, KernelDev> = disks
            .iter()
            .filter(|(l, _)| t.presents(l))
            .map(|(l, d)| (l.as_str(), *d))
            .collect();
        out.problems.extend(remove_unwanted(
            &dir,
            &wanted.keys().copied().collect(),
            &t.name,
        ));
        for (label, dev) in wanted {
            let path = dir.join(label);
            match place(&path, dev, uid, gid, t.mode) {
                Ok(done) => {
                    match done {
                        Done::Kept => {}
                        Done::Made => tracing::info!(
                            "container {}: made {} (block {dev}, owner {uid}:{gid}, mode {:04o})",
                            t.name,
                            path.display(),
                            t.mode
                        ),
                        Done::Fixed(was) => tracing::warn!(
                            "container {}: fixed {} ({was} -> block {dev}, owner {uid}:{gid}, \
                             mode {:04o}): something else changed it",
                            t.name,
                            path.display(),
                            t.mode
                        ),
                    }
                    out.nodes.push(Node {
                        container: t.name.clone(),
                        label: label.to_string(),
                        path,
                        uid,
                        gid,
                        mode: t.mode,
                    });
                }
                Err(reason) => out.problems.push(Problem {
                    container: t.name.clone(),
                    label: Some(label.to_string()),
                    reason,
                }),
            }
        }
    }
    out
}

/// The presentations as last made, the problems already logged, and the
/// containers this daemon presented to (one a SIGHUP removed from the
/// configuration loses its nodes; its directory stays).
#[derive(Debug)]
pub struct Presenter {
    root: PathBuf,
    last: Mutex<Outcome>,
    managed: Mutex<BTreeSet<String>>,
}

impl Presenter {
    /// Containers' directories under `root` (the system's: `Paths::containers_dir`).
    pub fn at(root: PathBuf) -> Presenter {
        Presenter {
            root,
            last: Mutex::default(),
            managed: Mutex::default(),
        }
    }

    /// [`sync`], logging each new problem once (an error for something in
    /// the way, a warning otherwise) and each one that went away.
    pub fn sync(&self, disks: &[(String, KernelDev)], targets: &[Target]) {
        let mut now = sync(&self.root, disks, targets);
        {
            let mut managed = self.managed.lock().unwrap_or_else(|p| p.into_inner());
            let names: BTreeSet<String> = targets
                .iter()
                .filter(|t| one_component(&t.name))
                .map(|t| t.name.clone())
                .collect();
            for gone in managed.difference(&names) {
                let dir = self.root.join(gone);
                if matches!(entry(&dir), Ok(Entry::Dir)) {
                    now.problems
                        .extend(remove_unwanted(&dir, &BTreeSet::new(), gone));
                }
            }
            *managed = names;
        }
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        for p in now.problems.iter().filter(|p| !last.problems.contains(p)) {
            let what = match &p.label {
                Some(l) => format!("container {}: no node for {l}", p.container),
                None => format!("container {}: no device nodes", p.container),
            };
            if p.reason.contains("left alone") || p.reason.contains("refusing") {
                tracing::error!("{what}: {}", p.reason);
            } else {
                tracing::warn!("{what}: {}", p.reason);
            }
        }
        for p in last.problems.iter().filter(|p| !now.problems.contains(p)) {
            tracing::info!(
                "container {}{}: resolved: {}",
                p.container,
                p.label
                    .as_deref()
                    .map(|l| format!(" {l}"))
                    .unwrap_or_default(),
                p.reason
            );
        }
        *last = now;
    }

    /// Whether the last sync had a container to present to (a sync with
    /// none removes their nodes).
    pub fn presented_any(&self) -> bool {
        !self
            .managed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_empty()
    }

    /// What the last sync left.
    pub fn outcome(&self) -> Outcome {
        self.last.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> Option<tempfile::TempDir> {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("SKIPPED: mknod needs root");
            return None;
        }
        Some(tempfile::tempdir().unwrap())
    }

    fn target(name: &str, present: &[&str], owner: Result<(u32, u32), String>) -> Target {
        Target {
            name: name.into(),
            present: present.iter().map(|s| s.to_string()).collect(),
            owner,
            mode: 0o660,
        }
    }

    fn dev(minor: u32) -> KernelDev {
        KernelDev::new(7, minor).unwrap()
    }

    fn stat(p: &Path) -> (u64, u32, u32, u32) {
        match entry(p).unwrap() {
            Entry::Block(r, u, g, m) => (r, u, g, m),
            _ => panic!("{} is not a block node", p.display()),
        }
    }

    #[test]
    fn nodes_are_made_fixed_and_removed() {
        let Some(tmp) = root() else { return };
        let r = tmp.path().join("containers");
        let disks = vec![
            ("DATA1".to_string(), dev(901)),
            ("DATA2".to_string(), dev(902)),
        ];
        let ts = vec![
            target("rac1", &["*"], Ok((154331, 154329))),
            target("rac2", &["DATA2"], Ok((254331, 254329))),
        ];
        let o = sync(&r, &disks, &ts);
        assert!(o.problems.is_empty(), "{o:?}");
        assert_eq!(o.nodes.len(), 3);
        assert_eq!(
            stat(&r.join("rac1/DATA1")),
            (dev(901).to_dev_t(), 154331, 154329, 0o660)
        );
        assert_eq!(
            stat(&r.join("rac2/DATA2")),
            (dev(902).to_dev_t(), 254331, 254329, 0o660)
        );
        assert!(matches!(
            entry(&r.join("rac2/DATA1")).unwrap(),
            Entry::Absent
        ));
        // tampered: owner, mode, and another device number
        let p = r.join("rac1/DATA1");
        set_owner_mode(&p, 0, 0, 0o666).unwrap();
        std::fs::remove_file(r.join("rac1/DATA2")).unwrap();
        nix::sys::stat::mknod(
            &r.join("rac1/DATA2"),
            SFlag::S_IFBLK,
            Mode::from_bits_truncate(0o660),
            dev(999).to_dev_t(),
        )
        .unwrap();
        let o2 = sync(&r, &disks, &ts);
        assert_eq!(o2, o);
        assert_eq!(stat(&p), (dev(901).to_dev_t(), 154331, 154329, 0o660));
        assert_eq!(stat(&r.join("rac1/DATA2")).0, dev(902).to_dev_t());
        // DATA1 no longer managed, rac2 no longer resolvable: their nodes go,
        // the directories stay
        let ts2 = vec![
            ts[0].clone(),
            target("rac2", &["DATA2"], Err("no process yet".into())),
        ];
        let o3 = sync(&r, &disks[1..], &ts2);
        assert!(matches!(entry(&p).unwrap(), Entry::Absent));
        assert!(matches!(
            entry(&r.join("rac2/DATA2")).unwrap(),
            Entry::Absent
        ));
        assert!(r.join("rac2").is_dir());
        assert_eq!(o3.nodes.len(), 1);
        assert_eq!(
            o3.problems,
            vec![Problem {
                container: "rac2".into(),
                label: None,
                reason: "no process yet".into()
            }]
        );
    }

    #[test]
    fn what_an_administrator_put_there_is_left_alone() {
        let Some(tmp) = root() else { return };
        let r = tmp.path().join("containers");
        std::fs::create_dir_all(r.join("rac1")).unwrap();
        let elsewhere = tmp.path().join("elsewhere");
        std::fs::write(&elsewhere, "keep").unwrap();
        // a symlink where a node goes, a file where another goes, a file of
        // another name
        std::os::unix::fs::symlink(&elsewhere, r.join("rac1/DATA1")).unwrap();
        std::fs::write(r.join("rac1/DATA2"), "admin's").unwrap();
        std::fs::write(r.join("rac1/README"), "admin's").unwrap();
        // a symlinked container directory
        std::os::unix::fs::symlink(tmp.path(), r.join("rac2")).unwrap();
        let disks = vec![
            ("DATA1".to_string(), dev(901)),
            ("DATA2".to_string(), dev(902)),
        ];
        let ts = vec![
            target("rac1", &["*"], Ok((1, 1))),
            target("rac2", &["*"], Ok((1, 1))),
        ];
        let o = sync(&r, &disks, &ts);
        assert!(o.nodes.is_empty(), "{o:?}");
        assert_eq!(o.problems.len(), 3, "{o:?}");
        assert!(o
            .problems
            .iter()
            .all(|p| p.reason.contains("left alone") || p.reason.contains("refusing")));
        assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), "keep");
        assert!(std::fs::symlink_metadata(r.join("rac1/DATA1"))
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(
            std::fs::read_to_string(r.join("rac1/DATA2")).unwrap(),
            "admin's"
        );
        assert_eq!(
            std::fs::read_to_string(r.join("rac1/README")).unwrap(),
            "admin's"
        );
        // nothing was made through the symlinked directory
        assert!(!tmp.path().join("DATA1").exists());
    }

    #[test]
    fn a_container_no_longer_configured_loses_its_nodes() {
        let Some(tmp) = root() else { return };
        let r = tmp.path().join("containers");
        let p = Presenter::at(r.clone());
        let disks = vec![("DATA1".to_string(), dev(901))];
        let ts = vec![
            target("rac1", &["*"], Ok((1, 1))),
            target("rac2", &["*"], Ok((2, 2))),
        ];
        p.sync(&disks, &ts);
        assert_eq!(p.outcome().nodes.len(), 2);
        // a SIGHUP drops rac2: its node goes, its directory stays
        p.sync(&disks, &ts[..1]);
        assert!(matches!(
            entry(&r.join("rac2/DATA1")).unwrap(),
            Entry::Absent
        ));
        assert!(r.join("rac2").is_dir());
        assert_eq!(stat(&r.join("rac1/DATA1")).1, 1);
        // a directory of a container this daemon never presented to is not touched
        std::fs::create_dir_all(r.join("other")).unwrap();
        nix::sys::stat::mknod(
            &r.join("other/DATA1"),
            SFlag::S_IFBLK,
            Mode::from_bits_truncate(0o600),
            dev(901).to_dev_t(),
        )
        .unwrap();
        p.sync(&disks, &ts[..1]);
        assert_eq!(stat(&r.join("other/DATA1")).0, dev(901).to_dev_t());
    }

    #[test]
    fn a_target_takes_the_paths_defaults_and_waits_for_a_process() {
        let cfg = asmguard_config::parse(
            "[paths]\nmode = \"0640\"\n\
             [[container]]\nname = \"rac1\"\ncgroup = [\"lxc.payload.rac1\"]\npresent = [\"*\"]\n\
             [[container]]\nname = \"rac2\"\ncgroup = [\"lxc.payload.rac2\"]\nmode = \"0600\"\n",
            "t",
        )
        .unwrap();
        let none = asmguard_containers::Found {
            name: "rac1".into(),
            ..Default::default()
        };
        let t = super::target(
            &cfg,
            &cfg.container[0],
            super::owner_of(&cfg, &cfg.container[0], &none),
        );
        assert_eq!(t.mode, 0o640);
        let why = t.owner.unwrap_err();
        assert!(
            why.contains("no process") && why.contains("lxc.payload.rac1"),
            "{why}"
        );
        // a process not found (empty maps) is no process either
        let f = asmguard_containers::Found {
            name: "rac1".into(),
            cgroups: vec![("lxc.payload.rac1".into(), 7)],
            pid: None,
            uid_map: Default::default(),
            gid_map: Default::default(),
            tasks: 1,
            proc: Default::default(),
        };
        assert!(super::owner_of(&cfg, &cfg.container[0], &f).is_err());
        // presenting nothing needs no ids
        let owner = super::owner_of(&cfg, &cfg.container[1], &none);
        let t = super::target(&cfg, &cfg.container[1], owner);
        assert_eq!((t.mode, &t.owner), (0o600, &Ok((0, 0))));
        assert!(!t.presents("DATA1"));
    }

    #[test]
    fn container_names_never_leave_the_directory() {
        for bad in ["", ".", "..", "a/b", "../x"] {
            assert!(!one_component(bad), "{bad:?}");
        }
        assert!(one_component("rac1.example-2_b"));
    }

    #[test]
    fn presents_matches_labels_or_all() {
        let t = target("x", &["DATA1"], Ok((0, 0)));
        assert!(t.presents("DATA1"));
        assert!(!t.presents("DATA10"));
        assert!(target("x", &["*"], Ok((0, 0))).presents("ANY"));
        assert!(!target("x", &[], Ok((0, 0))).presents("ANY"));
    }
}
