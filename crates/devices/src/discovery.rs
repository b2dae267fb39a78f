//! Discovery: every block device through the include/exclude rules, its label sector
//! read with `O_DIRECT`, and labelled devices grouped into disks.
//!
//! A *disk* is everything that reaches one labelled LUN: the labelled device, the
//! dm-multipath device above it and its `sdX` paths below (the multipath device is the
//! top, always), devices with the same label and the same WWID (paths of one LUN
//! without dm), devices udev says reach the same LUN (`ID_SERIAL`, or the WWID in a
//! multipath device's `DM_UUID`: a path the map does not list, unlabelled or
//! unreadable, still belongs to its disk; see [`crate::udevdb`]), and the parent disk
//! of a labelled partition. The same label on two
//! devices that are not paths of one another is a *conflict*: both are reported and
//! marked, neither is picked.

use crate::blockdev::{DevError, Device, MIN_SIZE};
use crate::pattern::Rules;
use crate::sysfs::{self, SysDev};
use crate::udevdb::{self, UdevProps};
use asmguard_format::header::DiskHeader;
use asmguard_format::label::{self, Label, LabelState};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

/// What the label sector of a device says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelRead {
    pub state: LabelState,
    /// `Some` when block 0 is an ASM disk header.
    pub header: Option<HeaderSummary>,
}

/// The parts of an ASM disk header `lsdsk` shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderSummary {
    pub status: String,
    pub group: String,
    pub disk: String,
    pub checksum_ok: bool,
}

impl LabelRead {
    pub fn label(&self) -> Option<Label> {
        self.state.label()
    }

    /// The ASM disk header of an unlabelled disk ASM knows (see
    /// [`MEMBER_STATUSES`]): what `manage_asm_members` manages it by.
    pub fn asm_member(&self) -> Option<&HeaderSummary> {
        self.header.as_ref().filter(|h| {
            matches!(self.state, LabelState::Marked { label: None, .. })
                && MEMBER_STATUSES.contains(&h.status.as_str())
        })
    }

    /// Whether the daemon manages a disk whose block 0 reads as this: by its
    /// label, or (under `manage_asm_members`) by its ASM disk header.
    pub fn managed(&self) -> bool {
        self.label().is_some() || self.asm_member().is_some()
    }

    /// What block 0 (as read from the device) says.
    pub fn of_block0(b0: &[u8]) -> LabelRead {
        let header = DiskHeader::parse(b0).map(|h| HeaderSummary {
            status: h.status.name(),
            group: h.grpname.clone(),
            disk: h.dskname.clone(),
            checksum_ok: h.checksum_ok(),
        });
        LabelRead {
            state: label::read(b0),
            header,
        }
    }
}

/// One device: sysfs facts and, if it is included and big enough, its label sector.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Observed {
    pub sys: SysDev,
    /// Whether the include/exclude rules let us read it.
    pub included: bool,
    /// `None` when not read (excluded, empty, too small).
    pub read: Option<Result<LabelRead, String>>,
    /// udev's identity properties (`None` where udevd does not run, or on a sysfs
    /// root other than `/sys`).
    pub udev: Option<UdevProps>,
}

impl Observed {
    /// The LUN udev says this device reaches ([`UdevProps::lun`]).
    pub fn lun(&self) -> Option<&str> {
        self.udev.as_ref().and_then(UdevProps::lun)
    }

    /// The number of this partition (`sdb1` -> 1, `nvme0n1p2` -> 2), from its
    /// kernel name after its parent's; `None` for a whole disk.
    pub fn partition_number(&self) -> Option<u32> {
        let parent = self.sys.parent.as_deref()?;
        let rest = self.sys.name.strip_prefix(parent)?;
        rest.strip_prefix('p').unwrap_or(rest).parse().ok()
    }

    /// What one disk is known by across its paths: the LUN for a whole disk,
    /// `<LUN>-part<N>` for partition N of it (udev gives a partition its disk's
    /// `ID_SERIAL`, so two partitions of one LUN share the LUN but are two disks;
    /// the same partition reached through two paths shares the key). The key of
    /// `[devices.member_names]`.
    pub fn lun_key(&self) -> Option<String> {
        let lun = self.lun()?;
        Some(match (self.sys.parent.is_some(), self.partition_number()) {
            (false, _) => lun.to_string(),
            (true, Some(n)) => format!("{lun}-part{n}"),
            // A partition whose number cannot be told: known by nothing shared.
            (true, None) => return None,
        })
    }

    /// The keys a `[devices.member_names]` entry may name this device by, each as
    /// udev reports it (`-partN` added for partition N): its LUN
    /// ([`Observed::lun_key`]), its `ID_WWN`, its `ID_SCSI_SERIAL`.
    pub fn name_keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = self.lun_key().into_iter().collect();
        let Some(u) = &self.udev else { return keys };
        let part = match (self.sys.parent.is_some(), self.partition_number()) {
            (false, _) => String::new(),
            (true, Some(n)) => format!("-part{n}"),
            (true, None) => return keys,
        };
        // A dm device's own ID_WWN or serial is not its identity (see `lun`).
        if u.dm_uuid.is_none() {
            for v in [&u.wwn, &u.scsi_serial].into_iter().flatten() {
                keys.push(format!("{v}{part}"));
            }
        }
        keys
    }
}

/// udev's properties of `name`, read only where udevd runs in `paths`' `/run`:
/// a test's synthetic tree has no udev database behind it.
fn udev_props(paths: &asmguard_paths::Paths, name: &str) -> Option<UdevProps> {
    udevdb::read(paths, name)
}

/// Read the label sector of a device (read-only, `O_DIRECT`, aligned to its logical
/// block size).
pub fn read_label(path: &Path) -> Result<LabelRead, DevError> {
    let dev = Device::open_read(path)?;
    let b0 = dev.read_block0()?;
    Ok(LabelRead::of_block0(&b0))
}

/// How long a label-sector read may take. A suspended dm device, or a multipath
/// device queueing I/O with no path left (`queue_if_no_path`), blocks reads until
/// something changes: the device is then reported unreadable instead of hanging the
/// daemon (the thread stuck in the read is left behind).
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);

fn timed_out(path: &Path, t: Duration) -> String {
    format!(
        "{}: the label sector did not come back within {} s (a suspended dm device, or multipath queueing with no path left?): not used",
        path.display(),
        t.as_secs()
    )
}

/// Run `read` on every item on up to `workers` threads. Items whose read has not
/// answered once no read has finished for `timeout` are reported as timed out.
pub fn run_reads<F>(
    items: Vec<(String, PathBuf)>,
    workers: usize,
    timeout: Duration,
    read: F,
) -> BTreeMap<String, Result<LabelRead, String>>
where
    F: Fn(&Path) -> Result<LabelRead, String> + Send + Sync + 'static,
{
    let mut out = BTreeMap::new();
    if items.is_empty() {
        return out;
    }
    let mut pending: BTreeMap<String, PathBuf> = items.iter().cloned().collect();
    let queue = Arc::new(Mutex::new(items));
    let read = Arc::new(read);
    let (tx, rx) = mpsc::channel();
    for _ in 0..workers.max(1).min(pending.len()) {
        let (queue, read, tx) = (queue.clone(), read.clone(), tx.clone());
        let spawned = std::thread::Builder::new()
            .name("label-read".into())
            .spawn(move || loop {
                let next = queue.lock().unwrap_or_else(|p| p.into_inner()).pop();
                let Some((name, path)) = next else { break };
                let r = read(&path);
                if tx.send((name, r)).is_err() {
                    break;
                }
            });
        if spawned.is_err() {
            break;
        }
    }
    drop(tx);
    while !pending.is_empty() {
        match rx.recv_timeout(timeout) {
            Ok((n, r)) => {
                pending.remove(&n);
                out.insert(n, r);
            }
            // No read finished for `timeout` (or no worker could start).
            Err(_) => break,
        }
    }
    queue.lock().unwrap_or_else(|p| p.into_inner()).clear();
    for (n, p) in pending {
        out.insert(n, Err(timed_out(&p, timeout)));
    }
    out
}

fn wants_read(sys: &SysDev, included: bool) -> Option<Result<(), String>> {
    if !included || sys.size < MIN_SIZE {
        None
    } else if sys.dm_suspended {
        Some(Err(format!(
            "{}: suspended device-mapper device: not read until it is resumed",
            sys.dev_path().display()
        )))
    } else {
        Some(Ok(()))
    }
}

fn read_one(path: &Path) -> Result<LabelRead, String> {
    read_label(path).map_err(|e| e.to_string())
}

/// The label sector of `sys` read again, as a scan would read it (`None`:
/// a scan would not read it; a read that hangs is reported after
/// [`READ_TIMEOUT`]).
pub fn reread(sys: &SysDev) -> Option<Result<LabelRead, String>> {
    match wants_read(sys, true)? {
        Err(e) => Some(Err(e)),
        Ok(()) => run_reads(
            vec![(sys.name.clone(), sys.dev_path())],
            1,
            READ_TIMEOUT,
            read_one,
        )
        .remove(&sys.name),
    }
}

/// Observe one device by kernel name in `paths`' sysfs. `None` when it is gone
/// from sysfs.
pub fn observe(paths: &asmguard_paths::Paths, rules: &Rules, name: &str) -> Option<Observed> {
    let sys = sysfs::read(paths, name).ok()?;
    let included = rules.included(&sys.name, sys.dm_name.as_deref());
    let read = match wants_read(&sys, included) {
        None => None,
        Some(Err(e)) => Some(Err(e)),
        Some(Ok(())) => run_reads(
            vec![(name.to_string(), sys.dev_path())],
            1,
            READ_TIMEOUT,
            read_one,
        )
        .remove(name),
    };
    Some(Observed {
        udev: udev_props(paths, name),
        sys,
        included,
        read,
    })
}

/// Observe every block device: sysfs first, then the label sectors, read in parallel.
pub fn observe_all(
    paths: &asmguard_paths::Paths,
    rules: &Rules,
) -> std::io::Result<BTreeMap<String, Observed>> {
    let mut out = BTreeMap::new();
    let mut todo = Vec::new();
    for n in sysfs::list(&paths.sys)? {
        let Ok(sys) = sysfs::read(paths, &n) else {
            continue;
        };
        let included = rules.included(&sys.name, sys.dm_name.as_deref());
        let read = match wants_read(&sys, included) {
            None => None,
            Some(Err(e)) => Some(Err(e)),
            Some(Ok(())) => {
                todo.push((n.clone(), sys.dev_path()));
                None
            }
        };
        let udev = udev_props(paths, &n);
        out.insert(
            n,
            Observed {
                udev,
                sys,
                included,
                read,
            },
        );
    }
    for (n, r) in run_reads(todo, 16, READ_TIMEOUT, read_one) {
        if let Some(o) = out.get_mut(&n) {
            o.read = Some(r);
        }
    }
    Ok(out)
}

/// The role of a path in a disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// A multipath (dm) device: the top.
    Multipath,
    /// Carries the label (and is not a multipath device).
    Labelled,
    /// A path below a multipath device.
    Path,
    /// The whole disk of a labelled partition.
    Parent,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Multipath => "multipath",
            Role::Labelled => "labelled",
            Role::Path => "path",
            Role::Parent => "parent",
        }
    }
}

/// How a disk is known: by the label on it, or (no label, `[devices]
/// manage_asm_members`) by its ASM disk header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Identity {
    /// The ASMLib/AFD/asmguard label (`ORCLDISK` + label).
    Label,
    /// No label: the ASM disk name in its header.
    AsmHeader,
    /// No label: the name `[devices.member_names]` gives its LUN (the name of
    /// the site's udev rule, as `asmguardctl import udev` wrote it).
    Named,
}

impl Identity {
    pub fn as_str(self) -> &'static str {
        match self {
            Identity::Label => "label",
            Identity::AsmHeader => "asm_header",
            Identity::Named => "udev_name",
        }
    }
}

/// The header statuses of a disk ASM knows (`kfed`'s KFDHDR_* names) that make an
/// unlabelled disk managed under `manage_asm_members`.
pub const MEMBER_STATUSES: [&str; 4] = ["MEMBER", "CANDIDATE", "FORMER", "PROVISIONED"];

/// The name `o` is managed under and how it is known: its label; else, when
/// `rules.asm_members` is on and block 0 is an ASM disk header of a disk ASM
/// knows (see [`MEMBER_STATUSES`]) with no label, the name configured for its
/// LUN, else the header's disk name (when it is a valid label: `DATA_0001`).
pub fn identity(o: &Observed, rules: &Rules) -> Option<(Label, Identity)> {
    let Some(Ok(r)) = &o.read else { return None };
    if let Some(l) = r.label() {
        return Some((l, Identity::Label));
    }
    let h = r.asm_member()?;
    if !rules.asm_members.enabled {
        return None;
    }
    if let Some(n) = o
        .name_keys()
        .iter()
        .find_map(|k| rules.asm_members.names.get(k))
    {
        return Label::new(n).ok().map(|l| (l, Identity::Named));
    }
    Label::new(&h.disk).ok().map(|l| (l, Identity::AsmHeader))
}

/// The paths that reach one label, as grouping found them (the daemon's model
/// builds its `Disk` from this).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelGroup {
    pub label: Label,
    /// Kernel name of the top device.
    pub top: String,
    /// Every path with its role; the top first.
    pub paths: Vec<(String, Role)>,
    pub conflict: bool,
    /// How the top device is known (its label, or its ASM header).
    pub identity: Identity,
}

/// The result of grouping.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grouping {
    pub disks: Vec<LabelGroup>,
    /// label -> top devices of the claimants (two or more).
    pub conflicts: BTreeMap<String, Vec<String>>,
}

impl Grouping {
    /// The disk that owns `label`, unless the label is in conflict.
    pub fn disk(&self, label: &str) -> Option<&LabelGroup> {
        self.disks
            .iter()
            .find(|d| d.label.as_str() == label && !d.conflict)
    }
    /// The disks any of whose paths is `name`.
    pub fn disks_with_path(&self, name: &str) -> Vec<&LabelGroup> {
        self.disks
            .iter()
            .filter(|d| d.paths.iter().any(|(p, _)| p == name))
            .collect()
    }
}

fn closure(devs: &BTreeMap<String, Observed>, start: &str, slaves: bool) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![start.to_string()];
    while let Some(n) = todo.pop() {
        if !seen.insert(n.clone()) {
            continue;
        }
        if let Some(o) = devs.get(&n) {
            let next = if slaves {
                &o.sys.slaves
            } else {
                &o.sys.holders
            };
            todo.extend(next.iter().cloned());
        }
    }
    seen
}

/// Group the labelled devices of `devs` into disks.
pub fn group(devs: &BTreeMap<String, Observed>, rules: &Rules) -> Grouping {
    // label -> labelled device names
    let mut by_label: BTreeMap<Label, Vec<&str>> = BTreeMap::new();
    let mut how: BTreeMap<&str, Identity> = BTreeMap::new();
    for (n, o) in devs {
        if let Some((l, i)) = identity(o, rules) {
            by_label.entry(l).or_default().push(n.as_str());
            how.insert(n.as_str(), i);
        }
    }
    let mut g = Grouping::default();
    for (label, members) in by_label {
        // Union-find over the members: related through dm slaves/holders, one WWID,
        // or one LUN in udev's properties.
        let mut comp: Vec<usize> = (0..members.len()).collect();
        fn root(c: &mut [usize], mut i: usize) -> usize {
            while c[i] != i {
                c[i] = c[c[i]];
                i = c[i];
            }
            i
        }
        let reach: Vec<BTreeSet<String>> = members
            .iter()
            .map(|m| {
                let mut s = closure(devs, m, true);
                s.extend(closure(devs, m, false));
                s
            })
            .collect();
        for i in 0..members.len() {
            for j in i + 1..members.len() {
                let wi = devs[members[i]].sys.wwid.as_deref();
                let wj = devs[members[j]].sys.wwid.as_deref();
                let li = devs[members[i]].lun_key();
                let related = reach[i].contains(members[j])
                    || reach[j].contains(members[i])
                    || (wi.is_some() && wi == wj)
                    || (li.is_some() && li == devs[members[j]].lun_key());
                if related {
                    let (a, b) = (root(&mut comp, i), root(&mut comp, j));
                    comp[a] = b;
                }
            }
        }
        let mut comps: BTreeMap<usize, Vec<&str>> = BTreeMap::new();
        for (i, m) in members.iter().enumerate() {
            let r = root(&mut comp, i);
            comps.entry(r).or_default().push(m);
        }
        let conflict = comps.len() > 1;
        let mut tops = Vec::new();
        for (_, ms) in comps {
            let mut disk = build_disk(devs, rules, &label, &ms, conflict);
            disk.identity = how
                .get(disk.top.as_str())
                .copied()
                .unwrap_or(Identity::Label);
            tops.push(devs[&disk.top].sys.display_path());
            g.disks.push(disk);
        }
        if conflict {
            g.conflicts.insert(label.to_string(), tops);
        }
    }
    g
}

fn build_disk(
    devs: &BTreeMap<String, Observed>,
    rules: &Rules,
    label: &Label,
    members: &[&str],
    conflict: bool,
) -> LabelGroup {
    let set: BTreeSet<&str> = members.iter().copied().collect();
    // The top: a member no other member holds (a dm device over its paths), a
    // multipath device first, then by scan order, then by name.
    let mut cands: Vec<&str> = members
        .iter()
        .copied()
        .filter(|m| {
            !devs[*m]
                .sys
                .holders
                .iter()
                .any(|h| set.contains(h.as_str()))
        })
        .collect();
    if cands.is_empty() {
        cands = members.to_vec();
    }
    cands.sort_by_key(|m| {
        let s = &devs[*m].sys;
        (
            !s.is_multipath(),
            s.dm_uuid.is_none(),
            rules.rank(m),
            m.to_string(),
        )
    });
    let top = cands[0].to_string();
    let mut paths: BTreeMap<String, Role> = BTreeMap::new();
    let top_role = |n: &str| {
        if devs
            .get(n)
            .is_some_and(|o| o.sys.dm_uuid.is_some() && !o.sys.slaves.is_empty())
        {
            Role::Multipath
        } else {
            Role::Labelled
        }
    };
    paths.insert(top.clone(), top_role(&top));
    for m in members {
        if *m != top {
            let r = if closure(devs, &top, true).contains(*m) {
                Role::Path
            } else {
                top_role(m)
            };
            paths.entry(m.to_string()).or_insert(r);
        }
        // Everything below a member (dm slaves, recursively) is a path.
        for s in closure(devs, m, true) {
            paths.entry(s).or_insert(Role::Path);
        }
    }
    // Every device udev says reaches the top's LUN (a path the multipath map does
    // not list right now, unlabelled or unreadable).
    if let Some(lun) = devs.get(&top).and_then(Observed::lun_key) {
        for (n, o) in devs {
            if o.lun_key().as_deref() == Some(lun.as_str())
                && !paths.contains_key(n)
                && closure(devs, n, false).len() == 1
            {
                paths.insert(n.clone(), Role::Path);
            }
        }
    }
    // The whole disk of every partition among them.
    let names: Vec<String> = paths.keys().cloned().collect();
    for n in names {
        if let Some(p) = devs.get(&n).and_then(|o| o.sys.parent.clone()) {
            paths.entry(p).or_insert(Role::Parent);
        }
    }
    let mut list: Vec<(String, Role)> = paths.into_iter().collect();
    list.sort_by_key(|(n, r)| (n != &top, *r, rules.rank(n), n.clone()));
    LabelGroup {
        label: label.clone(),
        top,
        paths: list,
        conflict,
        identity: Identity::Label,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(name: &str, minor: u32) -> SysDev {
        SysDev {
            name: name.into(),
            dev: crate::KernelDev::new(8, minor).unwrap(),
            size: 1 << 30,
            logical_block_size: 512,
            physical_block_size: 4096,
            dev_dir: asmguard_paths::Paths::default().dev,
            ..Default::default()
        }
    }

    fn labelled(sys: SysDev, l: &str) -> Observed {
        let mut b = vec![0u8; 4096];
        label::write(&mut b, &Label::new(l).unwrap()).unwrap();
        Observed {
            sys,
            included: true,
            read: Some(Ok(LabelRead {
                state: label::read(&b),
                header: None,
            })),
            udev: None,
        }
    }

    fn plain(sys: SysDev) -> Observed {
        Observed {
            sys,
            included: false,
            read: None,
            udev: None,
        }
    }

    fn map(v: Vec<Observed>) -> BTreeMap<String, Observed> {
        v.into_iter().map(|o| (o.sys.name.clone(), o)).collect()
    }

    #[test]
    fn a_read_that_never_returns_does_not_hang_discovery() {
        let items: Vec<(String, PathBuf)> = (0..40)
            .map(|i| (format!("d{i}"), PathBuf::from(format!("/dev/d{i}"))))
            .collect();
        let t0 = std::time::Instant::now();
        let r = run_reads(items, 4, Duration::from_millis(300), |p: &Path| {
            if p.ends_with("d7") {
                std::thread::sleep(Duration::from_secs(3600));
            }
            Ok(LabelRead {
                state: LabelState::Unmarked,
                header: None,
            })
        });
        assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
        assert_eq!(r.len(), 40);
        let e = r["d7"].as_ref().unwrap_err();
        assert!(e.contains("did not come back within"), "{e}");
        assert_eq!(r.values().filter(|x| x.is_ok()).count(), 39);
    }

    #[test]
    fn multipath_device_is_the_top_and_paths_are_grouped() {
        let mut dm = dev("dm-2", 2);
        dm.dev = crate::KernelDev::new(253, 2).unwrap();
        dm.slaves = vec!["sdb".into(), "sdc".into()];
        dm.dm_uuid = Some("mpath-3600a0b80".into());
        dm.dm_name = Some("mpatha".into());
        let mut sdb = dev("sdb", 16);
        sdb.holders = vec!["dm-2".into()];
        let mut sdc = dev("sdc", 32);
        sdc.holders = vec!["dm-2".into()];
        // Scan order puts sd first: the multipath device must still be the top.
        let rules = Rules {
            include: vec!["*".into()],
            exclude: vec![],
            scan_order: vec!["sd*".into(), "dm-*".into()],
            ..Rules::default()
        };
        let devs = map(vec![
            labelled(sdb, "DATA1"),
            labelled(dm, "DATA1"),
            labelled(sdc, "DATA1"),
        ]);
        let g = group(&devs, &rules);
        assert!(g.conflicts.is_empty(), "{g:?}");
        assert_eq!(g.disks.len(), 1);
        let d = &g.disks[0];
        assert_eq!(d.top, "dm-2");
        assert_eq!(
            d.paths,
            vec![
                ("dm-2".to_string(), Role::Multipath),
                ("sdb".to_string(), Role::Path),
                ("sdc".to_string(), Role::Path)
            ]
        );
    }

    #[test]
    fn excluded_paths_still_count_as_paths() {
        // SCANEXCLUDE=sd: only the dm device is read, its sd paths still belong to it.
        let mut dm = dev("dm-0", 0);
        dm.slaves = vec!["sdb".into(), "sdc".into()];
        dm.dm_uuid = Some("mpath-x".into());
        let mut sdb = dev("sdb", 16);
        sdb.holders = vec!["dm-0".into()];
        let mut sdc = dev("sdc", 32);
        sdc.holders = vec!["dm-0".into()];
        let devs = map(vec![labelled(dm, "D"), plain(sdb), plain(sdc)]);
        let g = group(&devs, &Rules::default());
        assert_eq!(g.disks[0].paths.len(), 3);
        assert_eq!(g.disks[0].top, "dm-0");
    }

    #[test]
    fn same_label_on_two_disks_is_a_conflict() {
        let devs = map(vec![
            labelled(dev("sdb", 16), "X"),
            labelled(dev("sdc", 32), "X"),
        ]);
        let g = group(&devs, &Rules::default());
        assert_eq!(g.disks.len(), 2);
        assert!(g.disks.iter().all(|d| d.conflict));
        assert_eq!(g.conflicts["X"], vec!["/dev/sdb", "/dev/sdc"]);
        assert!(g.disk("X").is_none(), "a conflicting label picks no disk");
    }

    #[test]
    fn same_wwid_is_one_disk_and_partition_parent_is_a_path() {
        let mut a = dev("sdb", 16);
        a.wwid = Some("naa.6000".into());
        let mut b = dev("sdc", 32);
        b.wwid = Some("naa.6000".into());
        let mut p = dev("sdd1", 49);
        p.parent = Some("sdd".into());
        let devs = map(vec![
            labelled(a, "W"),
            labelled(b, "W"),
            labelled(p, "P"),
            plain(dev("sdd", 48)),
        ]);
        let g = group(&devs, &Rules::default());
        assert!(g.conflicts.is_empty());
        let w = g.disk("W").unwrap();
        assert_eq!(w.paths.len(), 2);
        let p = g.disk("P").unwrap();
        assert_eq!(
            p.paths,
            vec![
                ("sdd1".into(), Role::Labelled),
                ("sdd".into(), Role::Parent)
            ]
        );
        assert_eq!(g.disks_with_path("sdd").len(), 1);
    }

    fn with_udev(mut o: Observed, kv: &[(&str, &str)]) -> Observed {
        o.udev = Some(UdevProps::from_lookup(|k| {
            kv.iter()
                .find(|(kk, _)| *kk == k)
                .map(|(_, v)| v.to_string())
        }));
        o
    }

    /// A device whose block 0 starts with `bytes` (a real dump), zeros after.
    fn carrying(sys: SysDev, bytes: &[u8]) -> Observed {
        let mut b = vec![0u8; 4096];
        b[..bytes.len()].copy_from_slice(bytes);
        Observed {
            sys,
            included: true,
            read: Some(Ok(LabelRead::of_block0(&b))),
            udev: None,
        }
    }

    const MEMBER: &[u8] =
        include_bytes!("../../format/tests/vectors/asm-disk-chk-pl-sdk1-first160.bin");
    const MEMBER_DM39: &[u8] = include_bytes!("../../format/tests/vectors/linux-dm39-first96.bin");
    const AFD_LABEL: &[u8] =
        include_bytes!("../../format/tests/vectors/seed-afd-label-V512DATA1-4096.bin");

    #[test]
    fn asm_members_without_a_label_by_their_header_or_their_udev_name() {
        // A multipath disk (dm-0 over sdb, sdc) whose block 0 is a real member
        // header (disk DISK15 of DATA, no label), a second one (NCAS_DISK1_0000,
        // a real dm dump), and a disk with a real AFD label.
        let w = "36001405aabbccdd";
        let mut dm = dev("dm-0", 0);
        dm.dev = crate::KernelDev::new(253, 0).unwrap();
        dm.slaves = vec!["sdb".into(), "sdc".into()];
        dm.dm_uuid = Some(format!("mpath-{w}"));
        let mut sdb = dev("sdb", 16);
        sdb.holders = vec!["dm-0".into()];
        let mut sdc = dev("sdc", 32);
        sdc.holders = vec!["dm-0".into()];
        let devs = map(vec![
            with_udev(carrying(dm, MEMBER), &[("DM_UUID", &format!("mpath-{w}"))]),
            with_udev(carrying(sdb, MEMBER), &[("ID_SERIAL", w)]),
            with_udev(carrying(sdc, MEMBER), &[("ID_SERIAL", w)]),
            carrying(dev("sdd", 48), MEMBER_DM39),
            carrying(dev("sde", 64), AFD_LABEL),
        ]);
        let labels = |g: &Grouping| -> Vec<(String, Identity, String)> {
            g.disks
                .iter()
                .map(|d| (d.label.to_string(), d.identity, d.top.clone()))
                .collect()
        };
        // off (the default): only the labelled disk
        let g = group(&devs, &Rules::default());
        assert_eq!(
            labels(&g),
            [("V512DATA1".into(), Identity::Label, "sde".into())]
        );
        // on: by the disk name in the header, the multipath device on top
        let mut rules = Rules::default();
        rules.asm_members.enabled = true;
        let g = group(&devs, &rules);
        assert_eq!(
            labels(&g),
            [
                ("DISK15".into(), Identity::AsmHeader, "dm-0".into()),
                ("NCAS_DISK1_0000".into(), Identity::AsmHeader, "sdd".into()),
                ("V512DATA1".into(), Identity::Label, "sde".into()),
            ]
        );
        let d = g.disk("DISK15").unwrap();
        assert_eq!(
            d.paths,
            vec![
                ("dm-0".into(), Role::Multipath),
                ("sdb".into(), Role::Path),
                ("sdc".into(), Role::Path)
            ]
        );
        // a name for its LUN (what `import udev` writes) wins over the header's
        rules.asm_members.names.insert(w.into(), "ASM_DISK1".into());
        let g = group(&devs, &rules);
        assert_eq!(
            labels(&g)[0],
            ("ASM_DISK1".into(), Identity::Named, "dm-0".into())
        );
        assert_eq!(g.disk("ASM_DISK1").unwrap().paths.len(), 3);
        // a header of a status ASM does not own (CONFLICT), or with no disk name,
        // is not managed
        let mut other = MEMBER.to_vec();
        other[0x47] = 5;
        let mut nameless = MEMBER.to_vec();
        nameless[0x47] = 2;
        nameless[0x48..0x68].fill(0);
        let devs = map(vec![
            carrying(dev("sdf", 80), &other),
            carrying(dev("sdg", 96), &nameless),
        ]);
        assert!(group(&devs, &rules).disks.is_empty());
        nameless[0x48..0x4E].copy_from_slice(b"FRA_01");
        let devs = map(vec![carrying(dev("sdg", 96), &nameless)]);
        assert_eq!(
            labels(&group(&devs, &rules)),
            [("FRA_01".into(), Identity::AsmHeader, "sdg".into())]
        );
    }

    #[test]
    fn udev_lun_groups_a_path_the_map_does_not_list() {
        // dm-0 (multipath over sdb only: sdc failed and left the map) carries the
        // label; sdc is unreadable, but udev says it reaches the same LUN.
        let w = "36001405aabbccdd";
        let mut dm = dev("dm-0", 0);
        dm.dev = crate::KernelDev::new(253, 0).unwrap();
        dm.slaves = vec!["sdb".into()];
        dm.dm_uuid = Some(format!("mpath-{w}"));
        let mut sdb = dev("sdb", 16);
        sdb.holders = vec!["dm-0".into()];
        let sdc = dev("sdc", 32);
        let mut sdc = plain(sdc);
        sdc.read = Some(Err("sdc: I/O error".into()));
        let devs = map(vec![
            with_udev(labelled(dm, "MP"), &[("DM_UUID", &format!("mpath-{w}"))]),
            with_udev(plain(sdb), &[("ID_SERIAL", w)]),
            with_udev(sdc, &[("ID_SERIAL", w)]),
            with_udev(plain(dev("sdd", 48)), &[("ID_SERIAL", "other")]),
            plain(dev("sde", 64)),
        ]);
        let g = group(&devs, &Rules::default());
        let d = g.disk("MP").unwrap();
        assert_eq!(
            d.paths,
            vec![
                ("dm-0".to_string(), Role::Multipath),
                ("sdb".to_string(), Role::Path),
                ("sdc".to_string(), Role::Path)
            ]
        );
        // Without udev's properties, sdc is not known to be a path.
        let mut bare = devs.clone();
        bare.values_mut().for_each(|o| o.udev = None);
        assert_eq!(
            group(&bare, &Rules::default())
                .disk("MP")
                .unwrap()
                .paths
                .len(),
            2
        );
    }

    #[test]
    fn udev_lun_joins_labelled_paths_without_sysfs_wwid() {
        // Two labelled sd paths of one LUN, no multipath map, no sysfs wwid: one disk.
        let devs = map(vec![
            with_udev(labelled(dev("sdb", 16), "L"), &[("ID_SERIAL", "3600")]),
            with_udev(labelled(dev("sdc", 32), "L"), &[("ID_SERIAL", "3600")]),
        ]);
        let g = group(&devs, &Rules::default());
        assert!(g.conflicts.is_empty(), "{g:?}");
        assert_eq!(g.disk("L").unwrap().paths.len(), 2);
    }

    /// vdb (one virtio disk, serial `VDB-SER`) cut into vdb1 and vdb2, each an ASM
    /// disk: udev gives both partitions their disk's `ID_SERIAL`.
    fn two_partitions(
        b1: impl Fn(SysDev) -> Observed,
        b2: impl Fn(SysDev) -> Observed,
    ) -> BTreeMap<String, Observed> {
        let s = [("ID_SERIAL", "VDB-SER")];
        let mut p1 = dev("vdb1", 17);
        p1.parent = Some("vdb".into());
        let mut p2 = dev("vdb2", 18);
        p2.parent = Some("vdb".into());
        map(vec![
            with_udev(plain(dev("vdb", 16)), &s),
            with_udev(b1(p1), &s),
            with_udev(b2(p2), &s),
        ])
    }

    #[test]
    fn two_partitions_of_one_disk_are_two_disks() {
        let devs = two_partitions(|d| labelled(d, "DATA1"), |d| labelled(d, "DATA2"));
        let g = group(&devs, &Rules::default());
        assert!(g.conflicts.is_empty(), "{g:?}");
        for (l, me, other) in [("DATA1", "vdb1", "vdb2"), ("DATA2", "vdb2", "vdb1")] {
            let d = g.disk(l).unwrap();
            assert_eq!(d.top, me);
            assert_eq!(
                d.paths,
                vec![(me.into(), Role::Labelled), ("vdb".into(), Role::Parent)],
                "{l} must not list {other}"
            );
        }
        assert_eq!(g.disks_with_path("vdb2").len(), 1);
        assert_eq!(g.disks_with_path("vdb").len(), 2);
    }

    #[test]
    fn one_label_on_two_partitions_of_one_disk_is_a_conflict() {
        let devs = two_partitions(|d| labelled(d, "X"), |d| labelled(d, "X"));
        let g = group(&devs, &Rules::default());
        assert_eq!(g.conflicts["X"], vec!["/dev/vdb1", "/dev/vdb2"]);
    }

    #[test]
    fn member_names_of_partitions_are_keyed_by_lun_and_partition_number() {
        let devs = two_partitions(|d| carrying(d, MEMBER), |d| carrying(d, MEMBER_DM39));
        let mut rules = Rules::default();
        rules.asm_members.enabled = true;
        for (k, v) in [("VDB-SER-part1", "ASM_P1"), ("VDB-SER-part2", "ASM_P2")] {
            rules.asm_members.names.insert(k.into(), v.into());
        }
        let g = group(&devs, &rules);
        assert!(g.conflicts.is_empty(), "{g:?}");
        assert_eq!(g.disk("ASM_P1").unwrap().top, "vdb1");
        assert_eq!(g.disk("ASM_P2").unwrap().top, "vdb2");
        assert_eq!(g.disk("ASM_P1").unwrap().identity, Identity::Named);
        // A bare LUN key names the whole disk only, never its partitions.
        rules.asm_members.names.clear();
        rules
            .asm_members
            .names
            .insert("VDB-SER".into(), "ASM_WHOLE".into());
        let g = group(&devs, &rules);
        assert!(g.disk("ASM_WHOLE").is_none(), "{g:?}");
        assert_eq!(g.disks.len(), 2);
    }

    #[test]
    fn two_paths_of_one_lun_partition_stay_one_disk() {
        // sdb1 and sdc1: partition 1 of one LUN, reached through two paths.
        let s = [("ID_SERIAL", "3600a")];
        let mut a = dev("sdb1", 17);
        a.parent = Some("sdb".into());
        let mut b = dev("sdc1", 33);
        b.parent = Some("sdc".into());
        let devs = map(vec![
            with_udev(labelled(a, "P"), &s),
            with_udev(labelled(b, "P"), &s),
            with_udev(plain(dev("sdb", 16)), &s),
            with_udev(plain(dev("sdc", 32)), &s),
        ]);
        let g = group(&devs, &Rules::default());
        assert!(g.conflicts.is_empty(), "{g:?}");
        let d = g.disk("P").unwrap();
        let names: Vec<&str> = d.paths.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["sdb1", "sdc1", "sdb", "sdc"]);
    }

    #[test]
    fn member_names_by_id_wwn_or_id_scsi_serial_as_udev_reports_them() {
        let mut p = dev("sdb1", 17);
        p.parent = Some("sdb".into());
        let devs = map(vec![
            with_udev(
                carrying(dev("sda", 0), MEMBER),
                &[("ID_SERIAL", "3600a"), ("ID_WWN", "0x600a")],
            ),
            with_udev(
                carrying(p, MEMBER_DM39),
                &[("ID_SERIAL", "3600b"), ("ID_SCSI_SERIAL", "SN-B")],
            ),
        ]);
        let mut rules = Rules::default();
        rules.asm_members.enabled = true;
        rules
            .asm_members
            .names
            .insert("0x600a".into(), "BY_WWN".into());
        rules
            .asm_members
            .names
            .insert("SN-B-part1".into(), "BY_SN".into());
        let g = group(&devs, &rules);
        assert_eq!(g.disk("BY_WWN").unwrap().top, "sda");
        assert_eq!(g.disk("BY_SN").unwrap().top, "sdb1");
        // the serial of the whole disk does not name its partition
        rules.asm_members.names.remove("SN-B-part1");
        rules
            .asm_members
            .names
            .insert("SN-B".into(), "BY_SN".into());
        assert!(group(&devs, &rules).disk("BY_SN").is_none());
    }
}
