//! The stable links follow what the daemon decided, never the label bytes
//! alone: anyone who can write a disk can forge those (a header reading
//! `DATA1` to blkid on a second disk would otherwise take
//! `/dev/asmguard/disks/DATA1`, the link ASM opens, from the real one). After
//! every model the daemon tells udev, with a change uevent carrying
//! `ASMGUARD_LABEL`, the label it manages each device under, and `-` for a
//! device with an ASM label header it manages under none (a header it does not
//! manage, the losers of a label conflict); the rules link only what
//! `ASMGUARD_LABEL` names, and udev keeps it for the device's later events. In
//! a label conflict the claimant that already had the link keeps it.
//!
//! Only where udevd runs (without it nothing makes links).

use crate::model::Model;
use asmguard_devices::{sysfs, udevdb};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;

/// The property the rules link by.
pub const KEY: &str = "ASMGUARD_LABEL";
/// Its value for a device linked under no label.
pub const NONE: &str = "-";

#[derive(Debug, Default)]
pub struct Links {
    /// Kernel name -> the value last sent (or read from udev's database).
    told: Mutex<BTreeMap<String, String>>,
}

impl Links {
    /// Sends `ASMGUARD_LABEL` to every device whose value changed with `m`.
    pub fn follow(&self, sys: &Path, m: &Model) {
        if !udevdb::udevd_running() {
            return;
        }
        let mut told = self.told.lock().unwrap_or_else(|p| p.into_inner());
        let now = |name: &str, told: &mut BTreeMap<String, String>| -> Option<String> {
            if let Some(v) = told.get(name) {
                return Some(v.clone());
            }
            let v = udevdb::property(name, KEY)?;
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
            if sys.join("class/block").join(&n).exists() {
                want.insert(n, NONE.into());
            } else {
                told.remove(&n);
            }
        }
        for (name, v) in want {
            if now(&name, &mut told).as_deref() == Some(v.as_str()) {
                continue;
            }
            match sysfs::announce(sys, &name, KEY, &v) {
                Ok(()) => {
                    tracing::debug!("{name}: udev told {KEY}={v}");
                    told.insert(name, v);
                }
                Err(e) => tracing::warn!("{name}: cannot tell udev {KEY}={v}: {e}"),
            }
        }
    }
}
