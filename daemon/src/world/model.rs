//! The daemon's one device model: a [`Model`] (a [`Disk`] per labelled disk,
//! the labels in conflict, the devices that could not be read), built once per
//! scan or refresh ([`build`]) from what discovery observed and grouped, and
//! taken into effect in one place (`Applier::apply`: filter, modes, claims,
//! metrics). The views the rest of the daemon takes of it are each a function
//! of `&[Disk]`:
//! the `lsdsk` rows ([`lsdsk_rows`]), the filter's managed set
//! ([`managed_set`]), the exclusive claims ([`claims`]) and the disks the
//! latency tracer and the exporter describe ([`traced`]). Reclaim selects its
//! disks from the same slice (`crate::ops::reclaim::select`).
//!
//! A new kind of device that reaches a disk goes into [`Disk`] (a field, filled
//! by [`build`] from `asmguard_devices::sysfs`) and into the projections that
//! must see it; a new kind of path is a `discovery::Role`.
//!
//! Not for: reading labels or grouping paths (asmguard-devices' discovery), the
//! wire format (asmguard-proto: [`lsdsk_rows`] turns the model into it), or
//! I/O beyond sysfs.

use crate::apply::claims::Wanted;
use crate::apply::filter::service::{scope_of, DiskMode, Managed};
use asmguard_devices::discovery::{Grouping, HeaderSummary, Identity, Observed, Role};
use asmguard_devices::sysfs::{self, SysDev};
use asmguard_devices::udevdb::UdevProps;
use asmguard_devices::KernelDev;
use asmguard_format::label::Label;
use asmguard_guard::{Applied, DevKey, Mode};
use asmguard_proto::FilterScope;
use asmguard_proto::{DiskInfo, LinkState, PathInfo};
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// One block device node of a disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Kernel name (`sdb`, `dm-3`, `nvme0n1p1`).
    pub name: String,
    /// Its device number.
    pub dev: KernelDev,
    /// `/dev/<name>`.
    pub path: PathBuf,
    /// The name a DBA knows (`/dev/mapper/mpatha` for a dm device).
    pub shown: String,
}

impl Node {
    fn of(sys: &SysDev) -> Node {
        Node {
            name: sys.name.clone(),
            dev: sys.dev,
            path: sys.dev_path(),
            shown: sys.display_path(),
        }
    }
}

/// A path of a disk and what it is to the disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskPath {
    /// The device.
    pub node: Node,
    /// Multipath device, labelled device, path below, or partition parent.
    pub role: Role,
}

/// A labelled disk: everything that reaches one label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disk {
    /// The label.
    pub label: Label,
    /// The top device (the multipath device, or the labelled device).
    pub top: Node,
    /// Every path with its role, the top first.
    pub paths: Vec<DiskPath>,
    /// Generic character nodes (sg, bsg, NVMe ng) of the whole disks among the paths.
    pub generic: Vec<KernelDev>,
    /// Block devices stacked on any path (a dm table or md array loaded over it).
    pub holders: Vec<KernelDev>,
    /// The hidden path devices of an NVMe native multipath head among the
    /// paths (`nvme0c1n1`: the namespace through one controller), with
    /// their names.
    pub nvme_paths: Vec<(String, Option<KernelDev>)>,
    /// The controllers of such a head's subsystem (`nvme0`, `nvme1`): their
    /// nodes are among `generic`.
    pub nvme_controllers: Vec<String>,
    /// Bytes of the top device.
    pub size: u64,
    /// Logical block size of the top device.
    pub logical_block_size: u32,
    /// Physical block size of the top device.
    pub physical_block_size: u32,
    /// The ASM disk header of the top device, if it has one.
    pub header: Option<HeaderSummary>,
    /// Its write filtering (`None` until `Applier::apply` asked the filter).
    pub mode: Option<DiskMode>,
    /// The same label is on another disk too: neither is picked.
    pub conflict: bool,
    /// udev's ID_SERIAL of the first path that has one (the top first).
    pub serial: Option<String>,
    /// udev's ID_WWN of the first path that has one (the top first).
    pub wwn: Option<String>,
    /// How the disk is known: its label, or (no label) its ASM header.
    pub identity: Identity,
}

impl Disk {
    /// The whole disk whose I/O is counted: the parent of a labelled
    /// partition, else the top device.
    pub fn whole(&self) -> &Node {
        self.paths
            .iter()
            .find(|p| p.role == Role::Parent)
            .map_or(&self.top, |p| &p.node)
    }

    /// The device numbers of every path.
    pub fn path_devs(&self) -> Vec<KernelDev> {
        self.paths.iter().map(|p| p.node.dev).collect()
    }

    /// The disk group named in its ASM header.
    pub fn disk_group(&self) -> Option<&str> {
        self.header
            .as_ref()
            .map(|h| h.group.as_str())
            .filter(|g| !g.is_empty())
    }
}

/// What one scan found: the thing every answer, the filter, the claims and
/// the metrics are projections of.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Model {
    /// The labelled disks (both claimants of a label in conflict, marked).
    pub disks: Vec<Disk>,
    /// label -> the top devices of its claimants (two or more): none is used
    /// unless one is in `kept`.
    pub conflicts: BTreeMap<String, Vec<String>>,
    /// label in conflict -> the top device (as shown) of the claimant that had
    /// it first and keeps it (`crate::apply::kept::Kept::resolve`): that disk is not marked
    /// `conflict`, the newcomers are.
    pub kept: BTreeMap<String, String>,
    /// Devices whose label sector could not be read, and why.
    pub unreadable: Vec<String>,
    /// Devices looked at (the ones `devices.include`/`exclude` let in).
    pub devices_scanned: usize,
    /// Devices with an ASM label header (`ORCLDISK`) that no disk is managed
    /// under, and why.
    pub unmanaged: Vec<Unmanaged>,
}

/// A device carrying an ASM label header that asmguardd does not manage: blkid
/// (and so udev and ASM) may still see a label on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unmanaged {
    /// The path a DBA knows (`/dev/mapper/...`, `/dev/sdb`).
    pub device: String,
    /// Its kernel name.
    pub name: String,
    /// The label as blkid reads it (none: the label bytes are empty).
    pub label: Option<String>,
    pub why: String,
}

/// The devices with an ASM label header no disk is managed under: a label
/// that is not one asmguard manages (lower case, other characters), or none.
/// Only devices with nothing stacked on them (a multipath device, not its
/// paths).
fn unmanaged(devices: &BTreeMap<String, Observed>) -> Vec<Unmanaged> {
    use asmguard_format::label::{why_not_managed, LabelState};
    devices
        .values()
        .filter(|o| o.included && o.sys.holders.is_empty())
        .filter_map(|o| {
            let Some(Ok(r)) = &o.read else { return None };
            let (label, why) = match &r.state {
                LabelState::Marked {
                    label: Some(l),
                    valid: false,
                    ..
                } => (
                    Some(l.clone()),
                    why_not_managed(l).unwrap_or_else(|| "not a valid label".into()),
                ),
                LabelState::Marked { label: None, .. } if r.header.is_some() => (
                    None,
                    "an ASM disk header with no label (`asmguardctl label NAME DEVICE --migrate` labels it)"
                        .into(),
                ),
                LabelState::Marked { label: None, .. } => {
                    (None, "the ORCLDISK tag with no label".into())
                }
                _ => return None,
            };
            Some(Unmanaged {
                device: o.sys.display_path(),
                name: o.sys.name.clone(),
                label,
                why,
            })
        })
        .collect()
}

impl Model {
    /// The disk that owns `label`, unless the label is in conflict.
    pub fn disk(&self, label: &str) -> Option<&Disk> {
        self.disks
            .iter()
            .find(|d| d.label.as_str() == label && !d.conflict)
    }

    /// Disks in use (not in conflict).
    pub fn usable(&self) -> usize {
        self.disks.iter().filter(|d| !d.conflict).count()
    }
}

/// Builds the model from one scan: every disk of `grouping`, its devices from
/// `devices`, its generic nodes and holders from sysfs under `sys`. Paths
/// sysfs no longer knows are left out. Modes are the filter's, set by
/// `Applier::apply`.
pub fn build(sys: &Path, devices: &BTreeMap<String, Observed>, grouping: &Grouping) -> Model {
    Model {
        disks: disks(sys, devices, grouping),
        conflicts: grouping.conflicts.clone(),
        kept: BTreeMap::new(),
        unreadable: devices
            .values()
            .filter_map(|o| match &o.read {
                Some(Err(e)) => Some(e.clone()),
                _ => None,
            })
            .collect(),
        devices_scanned: devices.values().filter(|o| o.included).count(),
        unmanaged: unmanaged(devices)
            .into_iter()
            .filter(|u| {
                // managed by its ASM header (`manage_asm_members`): not "unmanaged"
                !grouping.disks.iter().any(|d| {
                    d.identity != Identity::Label && d.paths.iter().any(|(n, _)| *n == u.name)
                })
            })
            .collect(),
    }
}

fn disks(sys: &Path, devices: &BTreeMap<String, Observed>, grouping: &Grouping) -> Vec<Disk> {
    let mut out = Vec::new();
    for d in &grouping.disks {
        let Some(top) = devices.get(&d.top) else {
            continue;
        };
        let paths: Vec<DiskPath> = d
            .paths
            .iter()
            .filter_map(|(name, role)| {
                let o = devices.get(name)?;
                Some(DiskPath {
                    node: Node::of(&o.sys),
                    role: *role,
                })
            })
            .collect();
        let mut generic = BTreeSet::new();
        let mut holders = BTreeSet::new();
        let mut nvme_paths = BTreeSet::new();
        let mut nvme_controllers = BTreeSet::new();
        for p in &paths {
            generic.extend(sysfs::generic_nodes(sys, &p.node.name));
            nvme_paths.extend(sysfs::nvme_paths(sys, &p.node.name));
            nvme_controllers.extend(sysfs::subsystem_controllers(sys, &p.node.name));
            holders.extend(sysfs::stacked(sys, &p.node.name));
        }
        let header = top
            .read
            .as_ref()
            .and_then(|r| r.as_ref().ok())
            .and_then(|r| r.header.clone());
        // a udev property: the first of the paths (the top first) that has it
        let udev = |get: fn(&UdevProps) -> Option<String>| {
            d.paths
                .iter()
                .filter_map(|(n, _)| devices.get(n)?.udev.as_ref())
                .find_map(get)
        };
        out.push(Disk {
            label: d.label.clone(),
            top: Node::of(&top.sys),
            paths,
            generic: generic.into_iter().collect(),
            holders: holders.into_iter().collect(),
            nvme_paths: nvme_paths.into_iter().collect(),
            nvme_controllers: nvme_controllers.into_iter().collect(),
            size: top.sys.size,
            logical_block_size: top.sys.logical_block_size,
            physical_block_size: top.sys.physical_block_size,
            header,
            mode: None,
            conflict: d.conflict,
            serial: udev(|u| u.serial.clone()),
            wwn: udev(|u| u.wwn.clone()),
            identity: d.identity,
        });
    }
    out
}

/// Whether `path` exists and leads to `top`, and where it leads when it does not.
fn stable_link(path: &Path, top: KernelDev) -> (LinkState, Option<String>) {
    let Ok(target) = std::fs::read_link(path) else {
        return (LinkState::Missing, None);
    };
    let same = std::fs::metadata(path).is_ok_and(|m| {
        m.file_type().is_block_device() && KernelDev::from_dev_t(m.rdev()).ok() == Some(top)
    });
    if same {
        (LinkState::Ok, None)
    } else {
        (LinkState::Wrong, Some(target.display().to_string()))
    }
}

/// A path's role as the protocol names it.
fn role(r: Role) -> asmguard_proto::Role {
    match r {
        Role::Multipath => asmguard_proto::Role::Multipath,
        Role::Labelled => asmguard_proto::Role::Labelled,
        Role::Path => asmguard_proto::Role::Path,
        Role::Parent => asmguard_proto::Role::Parent,
    }
}

/// The udev link of a label.
pub fn stable_path(paths: &asmguard_paths::Paths, label: &Label) -> PathBuf {
    paths.disk_link(label.as_str())
}

/// The `lsdsk` rows (the protocol's view of the model).
pub fn lsdsk_rows(disks: &[Disk], paths: &asmguard_paths::Paths) -> Vec<DiskInfo> {
    disks
        .iter()
        .map(|d| {
            let stable = stable_path(paths, &d.label);
            let (link, target) = stable_link(&stable, d.top.dev);
            DiskInfo {
                label: d.label.to_string(),
                top: d.top.shown.clone(),
                stable_link: link,
                stable_link_target: target,
                stable_path: stable.display().to_string(),
                paths: d
                    .paths
                    .iter()
                    .map(|p| PathInfo {
                        name: p.node.name.clone(),
                        dev: p.node.shown.clone(),
                        devno: p.node.dev.to_string(),
                        kdev: p.node.dev.raw(),
                        role: role(p.role),
                    })
                    .collect(),
                nvme_paths: d.nvme_paths.iter().map(|(n, _)| n.clone()).collect(),
                nvme_controllers: d.nvme_controllers.clone(),
                size_bytes: d.size,
                logical_block_size: d.logical_block_size,
                physical_block_size: d.physical_block_size,
                header_status: d.header.as_ref().map_or_else(
                    || "none".into(),
                    |h| {
                        if h.checksum_ok {
                            h.status.clone()
                        } else {
                            format!("{} (checksum BAD)", h.status)
                        }
                    },
                ),
                disk_group: d.disk_group().map(str::to_string),
                asm_disk_name: d
                    .header
                    .as_ref()
                    .map(|h| h.disk.clone())
                    .filter(|n| !n.is_empty()),
                filtering: String::new(),
                filter_mode: applied(d).as_str().into(),
                filter_backend: d
                    .mode
                    .map_or(asmguard_guard::BackendName::None, |m| m.cover().backend()),
                filter_scope: d
                    .mode
                    .map_or(FilterScope::NoFilter, |m| scope_of(m.cover())),
                conflict: d.conflict,
                // the daemon's periodic check sets it (`crate::exposed`)
                exposed: false,
                loops_before: Vec::new(),
                serial: d.serial.clone(),
                wwn: d.wwn.clone(),
                // the daemon adds the containers' nodes (`crate::apply::present`)
                presented: Vec::new(),
                identified_by: d.identity.as_str().into(),
            }
        })
        .collect()
}

/// The filter's managed set: for each label, the top device of its disk
/// (whose mode it takes) and every block path, every device stacked on one,
/// the hidden paths of an NVMe multipath head, and the generic character
/// nodes (NVMe controllers included). Conflicting labels are protected too
/// (both claimants, under the one label, with the first one's top).
pub fn managed_set(disks: &[Disk]) -> BTreeMap<String, Managed> {
    let mut out: BTreeMap<String, Managed> = BTreeMap::new();
    for d in disks {
        let m = out.entry(d.label.to_string()).or_default();
        m.top.get_or_insert(d.top.dev);
        m.devs
            .extend(d.paths.iter().map(|p| DevKey::block(p.node.dev)));
        m.devs.extend(d.holders.iter().copied().map(DevKey::block));
        m.devs.extend(
            d.nvme_paths
                .iter()
                .filter_map(|(_, dev)| dev.map(DevKey::block)),
        );
        m.devs.extend(d.generic.iter().copied().map(DevKey::char));
    }
    out
}

/// The exclusive claims wanted: the top device of every disk whose mode asks
/// for one (a daemon without a filter service claims every disk).
pub fn claims(disks: &[Disk]) -> Vec<Wanted> {
    disks
        .iter()
        .filter(|d| d.mode.is_none_or(DiskMode::claimed))
        .map(|d| Wanted {
            label: d.label.to_string(),
            dev: d.top.dev,
            path: d.top.path.clone(),
        })
        .collect()
}

/// The devices the latency tracer follows, each described with the disk its
/// I/O is counted on (conflicting labels are left out). A disk is traced on
/// the request-based devices under it, where requests are issued: each path
/// of a dm-multipath device, each hidden path of an NVMe head (the head is
/// bio-based and issues none; a hidden path by its name's key,
/// `asmguard_metrics::hidden_path_key`), else its whole disk. The exporter rolls the
/// paths up into the disk's series; a request is issued on one of them only,
/// so it is counted once.
pub fn traced(disks: &[Disk]) -> BTreeMap<KernelDev, asmguard_metrics::DiskInfo> {
    let mut out = BTreeMap::new();
    for d in disks.iter().filter(|d| !d.conflict) {
        let whole = d.whole();
        let info = asmguard_metrics::DiskInfo {
            device: whole.name.clone(),
            path: String::new(),
            label: d.label.to_string(),
            paths: d.paths.iter().map(|p| p.node.shown.clone()).collect(),
            logical_sector: d.logical_block_size,
            physical_sector: d.physical_block_size,
            diskgroup: d.disk_group().unwrap_or_default().to_string(),
        };
        let mut below: Vec<(KernelDev, String)> = d
            .paths
            .iter()
            .filter(|p| p.role == Role::Path)
            .map(|p| (p.node.dev, p.node.name.clone()))
            .collect();
        // a hidden path has no number userspace can read: the tracer keys
        // it by its name
        below.extend(d.nvme_paths.iter().filter_map(|(name, dev)| {
            Some((
                dev.or_else(|| asmguard_metrics::hidden_path_key(name))?,
                name.clone(),
            ))
        }));
        if below.is_empty() {
            out.insert(whole.dev, info);
            continue;
        }
        for (dev, name) in below {
            let mut i = info.clone();
            i.path = name;
            out.insert(dev, i);
        }
    }
    out
}

/// A disk's filter mode as applied (`off` before the filter judged it): the
/// metric's label and `lsdsk`'s `filter_mode`.
fn applied(d: &Disk) -> Applied {
    d.mode.map_or(Applied::Mode(Mode::Off), DiskMode::applied)
}

/// The filter mode of every traced label as applied (the filter-mode
/// metric's `enforce`, `audit`, `off`, `UNPROTECTED`).
pub fn modes(disks: &[Disk]) -> BTreeMap<String, Applied> {
    disks
        .iter()
        .filter(|d| !d.conflict)
        .map(|d| (d.label.to_string(), applied(d)))
        .collect()
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use asmguard_devices::discovery::{self, LabelRead};
    use asmguard_devices::pattern::Rules;
    use asmguard_format::label;
    use asmguard_guard::Backend;
    use asmguard_guard::Mode;

    fn k(s: &str) -> KernelDev {
        s.parse().unwrap()
    }

    /// A disk labelled `label` on one node (`/dev/<name>`), 1 MiB of 512-byte
    /// sectors, no header, no mode: what the other modules' tests start from.
    pub fn plain_disk(label: &str, name: &str, dev: KernelDev) -> Disk {
        let node = Node {
            name: name.into(),
            dev,
            path: PathBuf::from(format!("/dev/{name}")),
            shown: format!("/dev/{name}"),
        };
        Disk {
            label: asmguard_format::label::Label::new(label).unwrap(),
            top: node.clone(),
            paths: vec![DiskPath {
                node,
                role: Role::Labelled,
            }],
            generic: vec![],
            holders: vec![],
            nvme_paths: vec![],
            nvme_controllers: vec![],
            size: 1 << 20,
            logical_block_size: 512,
            physical_block_size: 512,
            header: None,
            mode: None,
            conflict: false,
            serial: None,
            wwn: None,
            identity: asmguard_devices::discovery::Identity::Label,
        }
    }

    fn node(name: &str, dev: &str) -> Node {
        Node {
            name: name.into(),
            dev: k(dev),
            path: PathBuf::from("/dev").join(name),
            shown: format!("/dev/{name}"),
        }
    }

    fn lsm(mode: Mode) -> Option<DiskMode> {
        Some(DiskMode::Filtered {
            mode,
            backend: Backend::Lsm,
        })
    }

    /// One model by hand: a multipath disk in a disk group (dm-2 over sdb and
    /// sdc, each with an sg node, a dm table stacked on it), a labelled
    /// partition in audit mode, and a label on two disks.
    pub fn model() -> Vec<Disk> {
        let mut top = node("dm-2", "253:2");
        top.shown = "/dev/mapper/mpatha".into();
        let mp = Disk {
            label: Label::new("MDATA1").unwrap(),
            top: top.clone(),
            paths: vec![
                DiskPath {
                    node: top,
                    role: Role::Multipath,
                },
                DiskPath {
                    node: node("sdb", "8:16"),
                    role: Role::Path,
                },
                DiskPath {
                    node: node("sdc", "8:32"),
                    role: Role::Path,
                },
            ],
            generic: vec![k("21:1"), k("21:2")],
            holders: vec![k("253:7")],
            // a hidden path as today's kernels register it, without a dev_t
            // (listed, nothing to manage), and one with a number
            nvme_paths: vec![
                ("nvme0c0n1".into(), None),
                ("nvme0c1n1".into(), Some(k("259:4"))),
            ],
            nvme_controllers: vec!["nvme0".into(), "nvme1".into()],
            size: 1 << 30,
            logical_block_size: 512,
            physical_block_size: 4096,
            header: Some(HeaderSummary {
                status: "MEMBER".into(),
                group: "DATA".into(),
                disk: "DATA_0000".into(),
                checksum_ok: true,
            }),
            mode: lsm(Mode::Enforce),
            conflict: false,
            serial: None,
            wwn: None,
            identity: Identity::Label,
        };
        let part = Disk {
            label: Label::new("MPART1").unwrap(),
            top: node("sdd1", "8:49"),
            paths: vec![
                DiskPath {
                    node: node("sdd1", "8:49"),
                    role: Role::Labelled,
                },
                DiskPath {
                    node: node("sdd", "8:48"),
                    role: Role::Parent,
                },
            ],
            generic: vec![k("21:3")],
            holders: vec![],
            nvme_paths: vec![],
            nvme_controllers: vec![],
            size: 1 << 20,
            logical_block_size: 4096,
            physical_block_size: 4096,
            header: Some(HeaderSummary {
                status: "CANDIDATE".into(),
                group: String::new(),
                disk: String::new(),
                checksum_ok: false,
            }),
            mode: lsm(Mode::Audit),
            conflict: false,
            serial: None,
            wwn: None,
            identity: Identity::Label,
        };
        let twin = |name: &str, dev: &str| Disk {
            mode: Some(DiskMode::Unprotected),
            conflict: true,
            ..plain_disk("MTWIN", name, k(dev))
        };
        vec![mp, part, twin("sde", "8:64"), twin("sdf", "8:80")]
    }

    #[test]
    fn lsdsk_rows_from_the_model() {
        let rows = lsdsk_rows(&model(), &asmguard_paths::Paths::default());
        assert_eq!(rows.len(), 4);
        let mp = &rows[0];
        assert_eq!(
            (mp.label.as_str(), mp.top.as_str()),
            ("MDATA1", "/dev/mapper/mpatha")
        );
        assert_eq!(mp.stable_path, "/dev/asmguard/disks/MDATA1");
        let paths: Vec<(&str, &str, &str, u32)> = mp
            .paths
            .iter()
            .map(|p| (p.name.as_str(), p.devno.as_str(), p.role.as_str(), p.kdev))
            .collect();
        assert_eq!(
            paths,
            vec![
                ("dm-2", "253:2", "multipath", (253 << 20) | 2),
                ("sdb", "8:16", "path", (8 << 20) | 16),
                ("sdc", "8:32", "path", (8 << 20) | 32),
            ]
        );
        assert_eq!(mp.nvme_paths, vec!["nvme0c0n1", "nvme0c1n1"]);
        assert_eq!(mp.nvme_controllers, vec!["nvme0", "nvme1"]);
        assert!(rows[1].nvme_paths.is_empty() && rows[1].nvme_controllers.is_empty());
        assert_eq!(mp.header_status, "MEMBER");
        assert_eq!(mp.disk_group.as_deref(), Some("DATA"));
        assert_eq!(mp.asm_disk_name.as_deref(), Some("DATA_0000"));
        assert_eq!(
            (mp.filter_backend.as_str(), mp.filter_scope),
            ("lsm", FilterScope::Full)
        );
        let part = &rows[1];
        assert_eq!(part.header_status, "CANDIDATE (checksum BAD)");
        assert_eq!(
            (part.disk_group.clone(), part.asm_disk_name.clone()),
            (None, None)
        );
        assert_eq!(part.filter_scope, FilterScope::Full);
        assert_eq!(part.paths[1].role, asmguard_proto::Role::Parent);
        assert_eq!(
            (mp.filter_mode.as_str(), part.filter_mode.as_str()),
            ("enforce", "audit")
        );
        assert_eq!(rows[2].filter_mode, "UNPROTECTED");
        assert!(rows[2].conflict && rows[3].conflict);
        assert_eq!(rows[2].filter_scope, FilterScope::Unprotected);
        assert_eq!(rows[2].header_status, "none");
        let mut none = model();
        none[0].mode = None;
        assert_eq!(
            lsdsk_rows(&none, &asmguard_paths::Paths::default())[0].filter_scope,
            FilterScope::NoFilter
        );
    }

    #[test]
    fn managed_set_from_the_model() {
        let set = managed_set(&model());
        let b = |s| DevKey::block(k(s));
        let c = |s| DevKey::char(k(s));
        assert_eq!(set["MDATA1"].top, Some(k("253:2")));
        assert_eq!(set["MPART1"].top, Some(k("8:49")));
        assert_eq!(set["MTWIN"].top, Some(k("8:64")));
        assert_eq!(
            set["MDATA1"].devs,
            BTreeSet::from([
                b("253:2"),
                b("8:16"),
                b("8:32"),
                b("253:7"),
                b("259:4"),
                c("21:1"),
                c("21:2")
            ])
        );
        assert_eq!(
            set["MPART1"].devs,
            BTreeSet::from([b("8:49"), b("8:48"), c("21:3")])
        );
        // both claimants of a conflicting label stay protected
        assert_eq!(set["MTWIN"].devs, BTreeSet::from([b("8:64"), b("8:80")]));
        assert_eq!(set.len(), 3);
    }

    #[test]
    fn claims_from_the_model() {
        let got: Vec<(String, KernelDev, PathBuf)> = claims(&model())
            .into_iter()
            .map(|w| (w.label, w.dev, w.path))
            .collect();
        // enforce: claimed (its top, not its paths); audit: not; no backend: claimed
        assert_eq!(
            got,
            vec![
                ("MDATA1".into(), k("253:2"), PathBuf::from("/dev/dm-2")),
                ("MTWIN".into(), k("8:64"), PathBuf::from("/dev/sde")),
                ("MTWIN".into(), k("8:80"), PathBuf::from("/dev/sdf")),
            ]
        );
        let mut m = model();
        m[0].mode = lsm(Mode::Off);
        m[1].mode = None;
        m[2].mode = Some(DiskMode::Disabled);
        m[3].mode = Some(DiskMode::Disabled);
        let labels: Vec<String> = claims(&m).into_iter().map(|w| w.label).collect();
        assert_eq!(labels, vec!["MPART1"]);
    }

    #[test]
    fn traced_disks_and_modes_from_the_model() {
        let t = traced(&model());
        // the request-based paths under the multipath device (its sd paths, the
        // hidden NVMe path that has a number, and the one without, by its
        // name's key), not the bio-based top, and the parent of the labelled
        // partition; conflicting labels are not described
        let hidden = asmguard_metrics::hidden_path_key("nvme0c0n1").unwrap();
        assert_eq!(
            t.keys().copied().collect::<Vec<_>>(),
            vec![k("8:16"), k("8:32"), k("8:48"), k("259:4"), hidden]
        );
        for (dev, path) in [
            (k("8:16"), "sdb"),
            (k("8:32"), "sdc"),
            (k("259:4"), "nvme0c1n1"),
            (hidden, "nvme0c0n1"),
        ] {
            let mp = &t[&dev];
            // rolled up to the disk: its device and label, each with its path
            assert_eq!((mp.device.as_str(), mp.label.as_str()), ("dm-2", "MDATA1"));
            assert_eq!(mp.path, path);
            assert_eq!(mp.paths, vec!["/dev/mapper/mpatha", "/dev/sdb", "/dev/sdc"]);
            assert_eq!((mp.logical_sector, mp.physical_sector), (512, 4096));
        }
        assert_eq!(t[&k("8:48")].device, "sdd");
        assert_eq!(t[&k("8:48")].path, "");
        assert_eq!(
            modes(&model()),
            BTreeMap::from([
                ("MDATA1".into(), Applied::Mode(Mode::Enforce)),
                ("MPART1".into(), Applied::Mode(Mode::Audit))
            ])
        );
    }

    /// `build` from a synthetic sysfs and discovery's own grouping.
    #[test]
    fn build_reads_generic_nodes_and_holders() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        let mk = |name: &str, dev: &str| {
            let d = r.join("class/block").join(name);
            std::fs::create_dir_all(d.join("holders")).unwrap();
            std::fs::write(d.join("dev"), format!("{dev}\n")).unwrap();
            d
        };
        let sdb = mk("sdb", "8:16");
        mk("dm-9", "253:9");
        std::fs::create_dir_all(sdb.join("holders/dm-9")).unwrap();
        let sg = sdb.join("device/scsi_generic/sg4");
        std::fs::create_dir_all(&sg).unwrap();
        std::fs::write(sg.join("dev"), "21:4\n").unwrap();
        let mut b = vec![0u8; 4096];
        label::write(&mut b, &Label::new("BUILT1").unwrap()).unwrap();
        let sys = SysDev {
            name: "sdb".into(),
            dev: k("8:16"),
            size: 1 << 30,
            logical_block_size: 512,
            physical_block_size: 512,
            ..Default::default()
        };
        let devices = BTreeMap::from([(
            "sdb".to_string(),
            Observed {
                sys,
                included: true,
                read: Some(Ok(LabelRead {
                    state: label::read(&b),
                    header: None,
                })),
                udev: Some(asmguard_devices::udevdb::UdevProps {
                    serial: Some("SQEMU_disk_1".into()),
                    wwn: Some("0x5000c500a1b2c3d4".into()),
                    ..Default::default()
                }),
            },
        )]);
        let g = discovery::group(&devices, &Rules::default());
        let m = build(r, &devices, &g);
        assert_eq!((m.devices_scanned, m.conflicts.len()), (1, 0));
        assert!(m.unreadable.is_empty());
        let disks = m.disks;
        assert_eq!(disks.len(), 1);
        let d = &disks[0];
        assert_eq!(d.top.dev, k("8:16"));
        assert_eq!(d.paths.len(), 1);
        assert_eq!(d.paths[0].role, Role::Labelled);
        assert_eq!(d.generic, vec![k("21:4")]);
        assert_eq!(d.holders, vec![k("253:9")]);
        assert_eq!(d.mode, None, "modes are the filter's, set by apply");
        assert_eq!(d.whole().dev, k("8:16"));
        // udev's identity reaches the disk and lsdsk's columns
        assert_eq!(d.serial.as_deref(), Some("SQEMU_disk_1"));
        let row = &lsdsk_rows(&disks, &asmguard_paths::Paths::default())[0];
        assert_eq!(row.wwn.as_deref(), Some("0x5000c500a1b2c3d4"));
        assert_eq!(row.serial, d.serial);
    }
}
