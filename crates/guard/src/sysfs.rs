//! What sysfs says about a disk that the filter needs: the generic character
//! nodes (`sg`, `bsg`, NVMe `ng` and the NVMe controller) through which the
//! same disk can be written.
//!
//! Not here: scanning block devices and labels (asmguard-devices).

use std::path::Path;

use crate::{DevKey, KernelDev};

/// Reads a sysfs `dev` file (`MAJ:MIN`).
fn read_dev(path: &Path) -> Option<KernelDev> {
    let s = std::fs::read_to_string(path).ok()?;
    let (ma, mi) = s.trim().split_once(':')?;
    KernelDev::new(ma.parse().ok()?, mi.parse().ok()?).ok()
}

/// The generic character devices of a whole block device (`sdb`, `nvme0n1`):
/// its SCSI generic node (`sg*`), its bsg node, its NVMe generic node
/// (`ng0n1`) and its NVMe controller's node (`nvme0`). `sys` is normally `/sys`.
pub fn generic_devices(sys: &Path, block_name: &str) -> Vec<DevKey> {
    let mut out = Vec::new();
    let dev_dir = sys.join("class/block").join(block_name).join("device");
    for sub in ["scsi_generic", "bsg"] {
        if let Ok(entries) = std::fs::read_dir(dev_dir.join(sub)) {
            for e in entries.flatten() {
                if let Some(d) = read_dev(&e.path().join("dev")) {
                    out.push(DevKey::char(d));
                }
            }
        }
    }
    if let Some(rest) = block_name.strip_prefix("nvme") {
        // nvme0n1 -> ng0n1 (namespaces only, not partitions)
        if rest.contains('n') && !rest.contains('p') {
            let ng = sys.join("class/nvme-generic").join(format!("ng{rest}"));
            if let Some(d) = read_dev(&ng.join("dev")) {
                out.push(DevKey::char(d));
            }
            // The controller's node (/dev/nvme0): its admin passthrough can
            // format or sanitize the namespace, and its IO passthrough writes
            // to it. (`device` of a namespace is its controller.)
            if let Some(d) = read_dev(&dev_dir.join("dev")) {
                out.push(DevKey::char(d));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generic_devices_from_sysfs() {
        let dir = std::env::temp_dir().join(format!("asmguard-sysfs-{}", std::process::id()));
        let sg = dir.join("class/block/sdb/device/scsi_generic/sg1");
        let bsg = dir.join("class/block/sdb/device/bsg/1:0:0:0");
        let ng = dir.join("class/nvme-generic/ng0n1");
        for d in [&sg, &bsg, &ng] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(sg.join("dev"), "21:1\n").unwrap();
        std::fs::write(bsg.join("dev"), "247:1\n").unwrap();
        std::fs::write(ng.join("dev"), "242:0\n").unwrap();
        let ctrl = dir.join("class/block/nvme0n1/device");
        std::fs::create_dir_all(&ctrl).unwrap();
        std::fs::write(ctrl.join("dev"), "243:0\n").unwrap();
        let got = generic_devices(&dir, "sdb");
        assert_eq!(
            got,
            vec![
                DevKey::char(KernelDev::new(21, 1).unwrap()),
                DevKey::char(KernelDev::new(247, 1).unwrap())
            ]
        );
        assert_eq!(
            generic_devices(&dir, "nvme0n1"),
            vec![
                DevKey::char(KernelDev::new(242, 0).unwrap()),
                DevKey::char(KernelDev::new(243, 0).unwrap())
            ]
        );
        assert!(generic_devices(&dir, "nvme0n1p1").is_empty());
        assert!(generic_devices(&dir, "loop0").is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
