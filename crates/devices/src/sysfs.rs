//! What `/sys/class/block` says about a block device: numbers, size, sector sizes,
//! partition parent, holders and slaves (device-mapper, md), dm name/uuid, WWID.
//!
//! Every function takes the sysfs root (`/sys` in production) so tests can point it at
//! a synthetic tree.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// The kernel's dev_t encoding (`major << 20 | minor`), used as BPF map key; glibc's
/// `makedev` differs.
pub fn kdev(major: u32, minor: u32) -> u32 {
    (major << 20) | (minor & 0xfffff)
}

/// One block device as sysfs shows it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SysDev {
    /// Kernel name (`sdb`, `dm-3`, `loop5`, `nvme0n1p1`).
    pub name: String,
    pub major: u32,
    pub minor: u32,
    /// Bytes (sysfs `size` is in 512-byte units whatever the sector size).
    pub size: u64,
    pub logical_block_size: u32,
    pub physical_block_size: u32,
    /// The whole disk of a partition.
    pub parent: Option<String>,
    pub holders: Vec<String>,
    pub slaves: Vec<String>,
    pub dm_name: Option<String>,
    pub dm_uuid: Option<String>,
    /// SCSI/NVMe WWID when the device exposes one (`device/wwid` or `wwid`).
    pub wwid: Option<String>,
    pub read_only: bool,
    /// A suspended device-mapper device (I/O to it blocks until it is resumed).
    pub dm_suspended: bool,
}

impl SysDev {
    /// `/dev/<name>` (a `!` in a kernel name is a `/` in /dev: `cciss!c0d0`).
    pub fn dev_path(&self) -> PathBuf {
        PathBuf::from("/dev").join(self.name.replace('!', "/"))
    }

    /// The name a DBA knows: `/dev/mapper/<dm name>` for a dm device when that node
    /// exists, else `/dev/<name>`.
    pub fn display_path(&self) -> String {
        if let Some(d) = &self.dm_name {
            let p = PathBuf::from("/dev/mapper").join(d);
            if p.exists() {
                return p.display().to_string();
            }
        }
        self.dev_path().display().to_string()
    }

    pub fn devno(&self) -> String {
        format!("{}:{}", self.major, self.minor)
    }

    pub fn kdev(&self) -> u32 {
        kdev(self.major, self.minor)
    }

    /// A device-mapper multipath device (dm uuid `mpath-...`).
    pub fn is_multipath(&self) -> bool {
        self.dm_uuid
            .as_deref()
            .is_some_and(|u| u.starts_with("mpath-"))
    }
}

fn class_block(root: &Path) -> PathBuf {
    root.join("class/block")
}

/// The kernel names of all block devices, sorted.
pub fn list(root: &Path) -> io::Result<Vec<String>> {
    let mut v: Vec<String> = fs::read_dir(class_block(root))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    Ok(v)
}

fn read_trim(p: &Path) -> Option<String> {
    fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

fn read_num<T: std::str::FromStr>(p: &Path) -> Option<T> {
    read_trim(p).and_then(|s| s.parse().ok())
}

fn dir_names(p: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(p)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Read one device. `NotFound` when it is gone.
pub fn read(root: &Path, name: &str) -> io::Result<SysDev> {
    if name.is_empty() || name.contains('/') || name.starts_with('.') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "bad device name",
        ));
    }
    let d = class_block(root).join(name);
    let dev = fs::read_to_string(d.join("dev"))?;
    let (major, minor) = dev
        .trim()
        .split_once(':')
        .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
        .ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidData, format!("{name}: bad dev file"))
        })?;
    let sectors: u64 = read_num(&d.join("size")).unwrap_or(0);
    let partition = d.join("partition").exists();
    let parent = if partition {
        // /sys/class/block/sda1 -> ../../devices/.../block/sda/sda1
        fs::canonicalize(&d).ok().and_then(|p| {
            p.parent()
                .and_then(|q| q.file_name())
                .map(|s| s.to_string_lossy().into_owned())
        })
    } else {
        None
    };
    let qdir = match &parent {
        Some(p) => class_block(root).join(p).join("queue"),
        None => d.join("queue"),
    };
    let lbs = read_num(&qdir.join("logical_block_size")).unwrap_or(512);
    let pbs = read_num(&qdir.join("physical_block_size")).unwrap_or(lbs);
    let wwid = read_trim(&d.join("device/wwid"))
        .or_else(|| read_trim(&d.join("wwid")))
        .filter(|s| !s.is_empty());
    Ok(SysDev {
        name: name.to_string(),
        major,
        minor,
        size: sectors * 512,
        logical_block_size: lbs,
        physical_block_size: pbs,
        parent,
        holders: dir_names(&d.join("holders")),
        slaves: dir_names(&d.join("slaves")),
        dm_name: read_trim(&d.join("dm/name")).filter(|s| !s.is_empty()),
        dm_uuid: read_trim(&d.join("dm/uuid")).filter(|s| !s.is_empty()),
        wwid,
        read_only: read_num::<u8>(&d.join("ro")).unwrap_or(0) == 1,
        dm_suspended: read_num::<u8>(&d.join("dm/suspended")).unwrap_or(0) == 1,
    })
}

/// The kernel name of the block device `major:minor`.
pub fn name_of(root: &Path, major: u32, minor: u32) -> Option<String> {
    let p = fs::read_link(root.join(format!("dev/block/{major}:{minor}"))).ok()?;
    p.file_name().map(|s| s.to_string_lossy().into_owned())
}

/// The partitions of a whole disk (`sda1`, `nvme0n1p2`, ...).
pub fn partitions(root: &Path, name: &str) -> Vec<String> {
    let d = class_block(root).join(name);
    dir_names(&d)
        .into_iter()
        .filter(|c| d.join(c).join("partition").exists())
        .collect()
}

/// Ask the kernel to send a uevent for the device (so udev re-probes it, and our own
/// monitor sees it): writes `change` to `/sys/class/block/<name>/uevent`.
pub fn trigger_change(root: &Path, name: &str) -> io::Result<()> {
    fs::write(class_block(root).join(name).join("uevent"), "change")
}

/// Why a device cannot be written right now: held by dm/md (its holders, or a
/// partition's), mounted (it or a partition, per `/proc/self/mountinfo`), or used as
/// swap. `None` when nothing is seen (the `O_EXCL` open still has the last word).
pub fn in_use(root: &Path, dev: &SysDev) -> Option<String> {
    let parts = partitions(root, &dev.name);
    // "dm-2 (/dev/mapper/mpatha, multipath: label that instead)"
    let holder = |h: &String| {
        let d = class_block(root).join(h);
        match (read_trim(&d.join("dm/name")), read_trim(&d.join("dm/uuid"))) {
            (Some(n), Some(u)) if u.starts_with("mpath-") => {
                format!("{h} (/dev/mapper/{n}, a multipath device: label that instead)")
            }
            (Some(n), _) => format!("{h} (/dev/mapper/{n})"),
            _ => h.clone(),
        }
    };
    if !dev.holders.is_empty() {
        let hs: Vec<String> = dev.holders.iter().map(holder).collect();
        return Some(format!("held by {}", hs.join(", ")));
    }
    for p in &parts {
        let h = dir_names(&class_block(root).join(p).join("holders"));
        if !h.is_empty() {
            let hs: Vec<String> = h.iter().map(holder).collect();
            return Some(format!("its partition {p} is held by {}", hs.join(", ")));
        }
    }
    let mut numbers = vec![(dev.devno(), dev.name.clone())];
    for p in &parts {
        if let Some(s) = read_trim(&class_block(root).join(p).join("dev")) {
            numbers.push((s, p.clone()));
        }
    }
    if let Ok(mi) = fs::read_to_string("/proc/self/mountinfo") {
        for line in mi.lines() {
            // id parent major:minor root mountpoint ...
            let f: Vec<&str> = line.split(' ').collect();
            if f.len() > 4 {
                if let Some((_, who)) = numbers.iter().find(|(n, _)| n == f[2]) {
                    return Some(format!("{who} is mounted on {}", f[4]));
                }
            }
        }
    }
    if let Ok(sw) = fs::read_to_string("/proc/swaps") {
        for line in sw.lines().skip(1) {
            if let Some(path) = line.split_whitespace().next() {
                let base = Path::new(path)
                    .file_name()
                    .map(|s| s.to_string_lossy().into_owned());
                if let Some(b) = base {
                    if b == dev.name || parts.contains(&b) {
                        return Some(format!("{b} is in use as swap"));
                    }
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A synthetic sysfs: sdb and sdc under multipath dm-0, sdd with partition sdd1
    /// held by md0.
    fn fake_sysfs() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        let mk = |rel: &str, files: &[(&str, &str)]| {
            let d = r.join("devices/virtual/block").join(rel);
            fs::create_dir_all(&d).unwrap();
            for (f, v) in files {
                if let Some(parent) = Path::new(f).parent() {
                    fs::create_dir_all(d.join(parent)).unwrap();
                }
                fs::write(d.join(f), v).unwrap();
            }
            d
        };
        fs::create_dir_all(r.join("class/block")).unwrap();
        let link = |name: &str, target: &Path| {
            std::os::unix::fs::symlink(target, r.join("class/block").join(name)).unwrap();
        };
        let dm = mk(
            "dm-0",
            &[
                ("dev", "253:0\n"),
                ("size", "2048\n"),
                ("dm/name", "mpatha\n"),
                ("dm/uuid", "mpath-3600\n"),
            ],
        );
        fs::create_dir_all(dm.join("slaves")).unwrap();
        link("dm-0", &dm);
        for (n, m) in [("sdb", 16), ("sdc", 32)] {
            let d = mk(
                n,
                &[
                    ("dev", &format!("8:{m}\n")),
                    ("size", "2048\n"),
                    ("queue/logical_block_size", "512\n"),
                    ("queue/physical_block_size", "4096\n"),
                ],
            );
            fs::create_dir_all(d.join("holders")).unwrap();
            fs::write(d.join("holders/dm-0"), "").unwrap();
            fs::write(dm.join("slaves").join(n), "").unwrap();
            link(n, &d);
        }
        let sdd = mk(
            "sdd",
            &[
                ("dev", "8:48\n"),
                ("size", "4096\n"),
                ("queue/logical_block_size", "4096\n"),
            ],
        );
        link("sdd", &sdd);
        let p = mk(
            "sdd/sdd1",
            &[("dev", "8:49\n"), ("size", "2048\n"), ("partition", "1\n")],
        );
        fs::create_dir_all(p.join("holders/md0")).unwrap();
        link("sdd1", &p);
        t
    }

    #[test]
    fn topology_and_in_use_from_sysfs() {
        let t = fake_sysfs();
        let r = t.path();
        assert_eq!(list(r).unwrap(), vec!["dm-0", "sdb", "sdc", "sdd", "sdd1"]);
        let dm = read(r, "dm-0").unwrap();
        assert_eq!(dm.slaves, vec!["sdb", "sdc"]);
        assert!(dm.is_multipath());
        assert_eq!(dm.kdev(), kdev(253, 0));
        let sdb = read(r, "sdb").unwrap();
        assert_eq!(
            (sdb.logical_block_size, sdb.physical_block_size),
            (512, 4096)
        );
        assert_eq!(sdb.holders, vec!["dm-0"]);
        let why = in_use(r, &sdb).unwrap();
        assert!(
            why.contains("/dev/mapper/mpatha") && why.contains("label that instead"),
            "{why}"
        );
        let p = read(r, "sdd1").unwrap();
        assert_eq!(p.parent.as_deref(), Some("sdd"));
        assert_eq!(
            p.logical_block_size, 4096,
            "a partition has its disk's sector size"
        );
        assert_eq!(partitions(r, "sdd"), vec!["sdd1"]);
        let why = in_use(r, &read(r, "sdd").unwrap()).unwrap();
        assert!(why.contains("partition sdd1 is held by md0"), "{why}");
        assert!(in_use(r, &dm).is_none());
    }

    #[test]
    fn kernel_devt() {
        assert_eq!(kdev(8, 16), (8 << 20) | 16);
        assert_eq!(kdev(253, 3), 0x0fd0_0003);
    }

    #[test]
    fn real_sysfs_lists_without_error() {
        // Whatever the machine has, reading it must not fail or panic.
        if let Ok(names) = list(Path::new("/sys")) {
            for n in names {
                let _ = read(Path::new("/sys"), &n);
            }
        }
        assert!(read(Path::new("/sys"), "../etc").is_err());
    }
}
