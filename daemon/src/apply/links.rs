//! The stable links follow what the daemon decided, never the label bytes
//! alone: anyone who can write a disk can forge those (a header reading
//! `DATA1` to blkid on a second disk would otherwise take
//! `/dev/asmguard/disks/DATA1`, the link ASM opens, from the real one). After
//! every model the daemon writes, for each device whose answer changed,
//! `/run/asmguard/links/<kernel name>` = `ASMGUARD_LABEL=<the label it manages
//! the device under>`, or `-` for a device with an ASM label header it manages
//! under none (a header it does not manage, the other claimants of a label
//! conflict), and sends the device a change uevent; the rules import that file
//! (`IMPORT{file}`) and link only the label it names. In a label conflict the
//! claimant that had the label first keeps it (`crate::apply::kept`), else the one
//! that already had the link. The files outlive the daemon
//! (until reboot), so the links do too.
//!
//! Only where udevd runs (without it nothing makes links).

use crate::world::model::Model;
use asmguard_devices::{sysfs, udevdb};
use asmguard_paths::Paths;
use std::collections::BTreeMap;
use std::io::Write as _;
use std::sync::Mutex;

/// The property the rules link by.
pub const KEY: &str = "ASMGUARD_LABEL";
/// Its value for a device linked under no label.
pub const NONE: &str = "-";
#[derive(Debug, Default)]
pub struct Links {
    /// Kernel name -> the value last written (or found in its file).
    told: Mutex<BTreeMap<String, String>>,
}

impl Links {
    /// Sends `ASMGUARD_LABEL` to every device whose value changed with `m`.
    pub fn follow(&self, paths: &Paths, m: &Model) {
        let dir = paths.links_dir();
        if !udevdb::udevd_running(paths) {
            return;
        }
        let mut told = self.told.lock().unwrap_or_else(|p| p.into_inner());
        let now = |name: &str, told: &mut BTreeMap<String, String>| -> Option<String> {
            if let Some(v) = told.get(name) {
                return Some(v.clone());
            }
            let text = std::fs::read_to_string(dir.join(name)).ok()?;
            let v = text
                .trim()
                .strip_prefix(KEY)?
                .strip_prefix('=')?
                .to_string();
            told.insert(name.to_string(), v.clone());
            Some(v)
        };
        let mut want: BTreeMap<String, String> = BTreeMap::new();
        for u in &m.unmanaged {
            want.insert(u.name.clone(), NONE.into());
        }
        let mut claimants: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for d in &m.disks {
            if d.conflict {
                claimants
                    .entry(d.label.as_str())
                    .or_default()
                    .push(d.top.name.as_str());
            } else {
                want.insert(d.top.name.clone(), d.label.to_string());
            }
        }
        for (label, tops) in claimants {
            // a label one claimant keeps (`crate::apply::kept`): the others get none
            if m.kept.contains_key(label) {
                for t in tops {
                    want.insert(t.to_string(), NONE.into());
                }
                continue;
            }
            let holder: Vec<&str> = tops
                .iter()
                .copied()
                .filter(|t| now(t, &mut told).as_deref() == Some(label))
                .collect();
            for t in tops {
                let keep = holder.len() == 1 && holder[0] == t;
                want.insert(t.to_string(), if keep { label } else { NONE }.into());
            }
        }
        // devices told a label before that no longer carry it (unlabelled)
        let stale: Vec<String> = told
            .iter()
            .filter(|(n, v)| *v != NONE && !want.contains_key(*n))
            .map(|(n, _)| n.clone())
            .collect();
        for n in stale {
            if paths.class_block().join(&n).exists() {
                want.insert(n, NONE.into());
            } else {
                told.remove(&n);
            }
        }
        for (name, v) in want {
            if now(&name, &mut told).as_deref() == Some(v.as_str()) {
                continue;
            }
            match tell(paths, &name, &v) {
                Ok(()) => {
                    tracing::info!("stable links: told udev {KEY}={v} for {name}");
                    told.insert(name, v);
                }
                Err(e) => tracing::warn!("{name}: cannot tell udev {KEY}={v}: {e}"),
            }
        }
    }
}

/// The labels of `m` (conflicts aside) whose stable link does not reach their
/// disk's top device yet.
fn unlinked(paths: &Paths, m: &Model) -> Vec<String> {
    m.disks
        .iter()
        .filter(|d| !d.conflict)
        .filter(|d| {
            std::fs::metadata(crate::world::model::stable_path(paths, &d.label))
                .map(|md| std::os::unix::fs::MetadataExt::rdev(&md) != d.top.dev.to_dev_t())
                .unwrap_or(true)
        })
        .map(|d| d.label.to_string())
        .collect()
}

/// Waits, at most `limit`, until udevd has made the link of every disk `m`
/// manages (conflicts aside): `READY=1` waits for it, so that a unit ordered
/// after asmguard (ohasd, the database) finds `/dev/asmguard/disks/<LABEL>`.
/// The change events were sent by [`Links::follow`]; udevd handles them
/// asynchronously, later on a busy boot. Returns the labels still without
/// their link (none where udevd does not run).
pub fn wait_linked(paths: &Paths, m: &Model, limit: std::time::Duration) -> Vec<String> {
    if !udevdb::udevd_running(paths) {
        return Vec::new();
    }
    let t0 = std::time::Instant::now();
    loop {
        let missing = unlinked(paths, m);
        if missing.is_empty() || t0.elapsed() >= limit {
            return missing;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Writes `<links dir>/<name>` (whole, by rename; the rules import it by the
/// kernel name, `%k`) and sends `name` a change uevent.
fn tell(paths: &Paths, name: &str, value: &str) -> std::io::Result<()> {
    let dir = paths.links_dir();
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(name);
    let tmp = dir.join(format!(".{name}.new"));
    let mut f = std::fs::File::create(&tmp)?;
    writeln!(f, "{KEY}={value}")?;
    f.sync_all()?;
    std::fs::rename(&tmp, &path)?;
    sysfs::trigger_change(&paths.sys, name)
}
