//! What udev knows about a block device: the identity properties its rules put in the
//! udev database (`ID_SERIAL`, `ID_WWN`, `DM_UUID`, `DM_NAME`), read through libudev.
//!
//! They name the LUN behind a device: every SCSI path of one LUN has the same
//! `ID_SERIAL` (scsi_id's WWID, which multipathd also uses), and the multipath device
//! over them has `DM_UUID=mpath-<that WWID>`. [`group_paths`] groups devices by it,
//! and `lsdsk` shows the serial and WWN. Only meaningful where udevd runs
//! ([`udevd_running`]); elsewhere (the VM lab's initramfs) the database is empty and
//! every lookup gives nothing.

use std::collections::BTreeMap;

/// Whether udevd runs on this host (its control socket exists under the
/// caller's `paths`).
pub fn udevd_running(paths: &asmguard_paths::Paths) -> bool {
    paths.udevd_control().exists()
}

/// The identity properties udev's rules gave one device (absent ones are `None`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UdevProps {
    /// `ID_SERIAL` (for SCSI: scsi_id's WWID, e.g. `3600140512345...`).
    pub serial: Option<String>,
    /// `ID_WWN` (e.g. `0x600140512345...`).
    pub wwn: Option<String>,
    /// `ID_SCSI_SERIAL` (the SCSI unit serial number, page 0x80).
    pub scsi_serial: Option<String>,
    /// `DM_UUID` of a device-mapper device (`mpath-<WWID>` for multipath).
    pub dm_uuid: Option<String>,
    /// `DM_NAME` of a device-mapper device (`mpatha`).
    pub dm_name: Option<String>,
}

impl UdevProps {
    /// Builds them from a property lookup (`ID_SERIAL` -> value); empty values count
    /// as absent.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> UdevProps {
        let g = |k: &str| get(k).filter(|v| !v.trim().is_empty());
        UdevProps {
            serial: g("ID_SERIAL"),
            wwn: g("ID_WWN"),
            scsi_serial: g("ID_SCSI_SERIAL"),
            dm_uuid: g("DM_UUID"),
            dm_name: g("DM_NAME"),
        }
    }

    /// The LUN this device reaches: the WWID of a multipath device (`DM_UUID`
    /// `mpath-<WWID>`), else the device's own `ID_SERIAL`. Other dm devices (linear,
    /// LVM, crypt) have their own identity, not their slaves': `None`.
    pub fn lun(&self) -> Option<&str> {
        match &self.dm_uuid {
            Some(u) => u.strip_prefix("mpath-").filter(|w| !w.is_empty()),
            None => self.serial.as_deref(),
        }
    }

    /// Nothing known (no udevd, or a device its rules gave no identity).
    pub fn is_empty(&self) -> bool {
        *self == UdevProps::default()
    }
}

/// Reads the properties of block device `name` (kernel name, as in /sys/class/block)
/// from the udev database. `None` where udevd does not run or the device is unknown
/// to it. `paths`: the caller's roots.
pub fn read(paths: &asmguard_paths::Paths, name: &str) -> Option<UdevProps> {
    if !udevd_running(paths) {
        return None;
    }
    let d = udev::Device::from_subsystem_sysname("block".into(), name.into()).ok()?;
    let p = UdevProps::from_lookup(|k| {
        d.property_value(k)
            .map(|v| v.to_string_lossy().into_owned())
    });
    (!p.is_empty()).then_some(p)
}

/// Groups devices by the LUN they reach ([`UdevProps::lun`]): LUN -> device names
/// (sorted). Devices with no LUN identity are left out. The multipath device and
/// its sd paths land in one group even when the map does not (yet, or any more)
/// list a path as its slave.
pub fn group_paths<'a>(
    devices: impl IntoIterator<Item = (&'a str, &'a UdevProps)>,
) -> BTreeMap<String, Vec<String>> {
    let mut g: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, p) in devices {
        if let Some(l) = p.lun() {
            g.entry(l.to_string()).or_default().push(name.to_string());
        }
    }
    for v in g.values_mut() {
        v.sort();
        v.dedup();
    }
    g
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udevd_runs_where_the_callers_run_has_its_control_socket() {
        let dir = tempfile::tempdir().unwrap();
        let paths = asmguard_paths::Paths::under(dir.path());
        assert!(!udevd_running(&paths));
        assert_eq!(read(&paths, "sda"), None);
        std::fs::create_dir_all(paths.run.join("udev")).unwrap();
        std::fs::write(paths.udevd_control(), "").unwrap();
        assert!(udevd_running(&paths));
    }

    fn props(kv: &[(&str, &str)]) -> UdevProps {
        UdevProps::from_lookup(|k| {
            kv.iter()
                .find(|(kk, _)| *kk == k)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn multipath_and_its_paths_share_one_lun() {
        let w = "333333330000007d0";
        let sda = props(&[("ID_SERIAL", w), ("ID_WWN", "0x333333330000007d0")]);
        let sdb = props(&[("ID_SERIAL", w), ("ID_WWN", "0x333333330000007d0")]);
        let dm = props(&[("DM_UUID", &format!("mpath-{w}")), ("DM_NAME", "mpatha")]);
        let other = props(&[("ID_SERIAL", "QEMU_NVMe_Ctrl_sysroot-1")]);
        // LVM on top of the multipath device: its own identity, not the LUN's
        let lvm = props(&[("DM_UUID", "LVM-abc"), ("DM_NAME", "vg-lv")]);
        let nothing = props(&[("ID_SERIAL", " ")]);
        assert!(nothing.is_empty());
        assert_eq!(dm.lun(), Some(w));
        assert_eq!(lvm.lun(), None);
        let g = group_paths([
            ("sdb", &sdb),
            ("dm-0", &dm),
            ("nvme0n1", &other),
            ("sda", &sda),
            ("dm-1", &lvm),
            ("loop0", &nothing),
        ]);
        assert_eq!(g.len(), 2, "{g:?}");
        assert_eq!(g[w], ["dm-0", "sda", "sdb"]);
        assert_eq!(g["QEMU_NVMe_Ctrl_sysroot-1"], ["nvme0n1"]);
    }

    #[test]
    fn empty_mpath_uuid_is_no_identity() {
        let p = props(&[("DM_UUID", "mpath-"), ("ID_SERIAL", "X")]);
        assert_eq!(p.lun(), None);
        assert!(group_paths([("dm-3", &p)]).is_empty());
    }
}
