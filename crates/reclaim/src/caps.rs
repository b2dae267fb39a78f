//! Does the device take discards (or write-zeroes)? From sysfs: the queue limits
//! (`discard_granularity`, `discard_max_bytes`, `write_zeroes_max_bytes`,
//! `logical_block_size`), the device's `discard_alignment`, and for SCSI disks the
//! `provisioning_mode` (`full` and `disabled` mean no UNMAP/WRITE SAME unmap).
//! A partition's queue is its parent disk's.

use crate::plan::Limits;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// How free space goes back to the array (the protocol's type: the request
/// carries it as it is).
pub use asmguard_proto::ReclaimMethod as Method;

/// What sysfs says about the device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct Caps {
    pub name: String,
    pub logical_block_size: u64,
    pub discard_granularity: u64,
    pub discard_max_bytes: u64,
    pub discard_alignment: u64,
    pub write_zeroes_max_bytes: u64,
    /// SCSI `provisioning_mode` (`unmap`, `writesame_16`, `full`, ...), when SCSI.
    pub provisioning_mode: Option<String>,
}

fn num(p: &Path) -> Option<u64> {
    std::fs::read_to_string(p).ok()?.trim().parse().ok()
}

/// The queue directory of `name` (its parent's for a partition).
fn queue_dir(sys: &Path, name: &str) -> Option<PathBuf> {
    let d = sys.join("class/block").join(name);
    if d.join("queue").is_dir() {
        return Some(d.join("queue"));
    }
    let real = std::fs::canonicalize(&d).ok()?;
    let p = real.parent()?.join("queue");
    p.is_dir().then_some(p)
}

/// The SCSI disk's provisioning mode (`device/scsi_disk/*/provisioning_mode`).
fn provisioning_mode(sys: &Path, name: &str) -> Option<String> {
    let d = sys.join("class/block").join(name);
    let base = if d.join("device/scsi_disk").is_dir() {
        d.join("device/scsi_disk")
    } else {
        let real = std::fs::canonicalize(&d).ok()?;
        real.parent()?.join("device/scsi_disk")
    };
    let e = std::fs::read_dir(base)
        .ok()?
        .filter_map(|e| e.ok())
        .next()?;
    std::fs::read_to_string(e.path().join("provisioning_mode"))
        .ok()
        .map(|s| s.trim().to_string())
}

/// Read the device's limits. `sys` is `/sys` (a fake tree in tests).
pub fn read(sys: &Path, name: &str) -> Result<Caps, String> {
    let q = queue_dir(sys, name)
        .ok_or_else(|| format!("{name}: no queue limits in sysfs (not a block device?)"))?;
    Ok(Caps {
        name: name.to_string(),
        logical_block_size: num(&q.join("logical_block_size")).unwrap_or(512),
        discard_granularity: num(&q.join("discard_granularity")).unwrap_or(0),
        discard_max_bytes: num(&q.join("discard_max_bytes")).unwrap_or(0),
        discard_alignment: num(&sys.join("class/block").join(name).join("discard_alignment"))
            .unwrap_or(0),
        write_zeroes_max_bytes: num(&q.join("write_zeroes_max_bytes")).unwrap_or(0),
        provisioning_mode: provisioning_mode(sys, name),
    })
}

/// Without write-zeroes offload the kernel writes zero pages: chunks of this size
/// keep the rate limit and cancellation responsive.
pub const ZEROOUT_CHUNK: u64 = 64 << 20;

/// The limits to plan with, or a refusal that says what to do.
pub fn check(c: &Caps, m: Method) -> Result<Limits, String> {
    let lbs = c.logical_block_size.max(512);
    match m {
        Method::Discard => {
            if let Some(pm) = c.provisioning_mode.as_deref() {
                if matches!(pm, "full" | "disabled") {
                    return Err(format!(
                        "{}: the device does not accept discards (SCSI provisioning_mode is {pm}: the array reports no UNMAP); if the array detects zeros, use --method zeroout",
                        c.name
                    ));
                }
            }
            if c.discard_max_bytes == 0 {
                return Err(format!(
                    "{}: the device does not accept discards (queue/discard_max_bytes is 0); if the array detects zeros, use --method zeroout",
                    c.name
                ));
            }
            let g = c.discard_granularity.max(lbs);
            if c.discard_max_bytes < g {
                return Err(format!(
                    "{}: the device takes at most {} bytes per discard, less than its granularity {g}; use --method zeroout",
                    c.name, c.discard_max_bytes
                ));
            }
            Ok(Limits {
                logical_block_size: lbs,
                granularity: g,
                alignment: c.discard_alignment,
                max_bytes: c.discard_max_bytes,
            })
        }
        Method::Zeroout => Ok(Limits {
            logical_block_size: lbs,
            granularity: lbs,
            alignment: 0,
            max_bytes: if c.write_zeroes_max_bytes >= lbs {
                c.write_zeroes_max_bytes.min(1 << 30)
            } else {
                ZEROOUT_CHUNK
            },
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake(dir: &Path, name: &str, max: u64, gran: u64, pm: Option<&str>) {
        let d = dir.join("devices/virtual").join(name);
        let q = d.join("queue");
        std::fs::create_dir_all(&q).unwrap();
        std::fs::write(q.join("logical_block_size"), "512\n").unwrap();
        std::fs::write(q.join("discard_granularity"), format!("{gran}\n")).unwrap();
        std::fs::write(q.join("discard_max_bytes"), format!("{max}\n")).unwrap();
        std::fs::write(q.join("write_zeroes_max_bytes"), "0\n").unwrap();
        std::fs::write(d.join("discard_alignment"), "0\n").unwrap();
        if let Some(pm) = pm {
            let s = d.join("device/scsi_disk/2:0:0:0");
            std::fs::create_dir_all(&s).unwrap();
            std::fs::write(s.join("provisioning_mode"), format!("{pm}\n")).unwrap();
        }
        std::fs::create_dir_all(dir.join("class/block")).unwrap();
        std::os::unix::fs::symlink(&d, dir.join("class/block").join(name)).unwrap();
    }

    #[test]
    fn refusals_name_zeroout() {
        let t = tempfile::tempdir().unwrap();
        fake(t.path(), "sda", 0, 0, None);
        fake(t.path(), "sdb", 1 << 30, 4096, Some("full"));
        fake(t.path(), "sdc", 1 << 30, 4096, Some("unmap"));
        fake(t.path(), "loop3", 4294966784, 4096, None);
        let a = read(t.path(), "sda").unwrap();
        let e = check(&a, Method::Discard).unwrap_err();
        assert!(
            e.contains("--method zeroout") && e.contains("discard_max_bytes is 0"),
            "{e}"
        );
        let z = check(&a, Method::Zeroout).unwrap();
        assert_eq!(z.max_bytes, ZEROOUT_CHUNK);
        let b = read(t.path(), "sdb").unwrap();
        assert_eq!(b.provisioning_mode.as_deref(), Some("full"));
        let e = check(&b, Method::Discard).unwrap_err();
        assert!(
            e.contains("provisioning_mode is full") && e.contains("--method zeroout"),
            "{e}"
        );
        let c = check(&read(t.path(), "sdc").unwrap(), Method::Discard).unwrap();
        assert_eq!(c.granularity, 4096);
        let l = check(&read(t.path(), "loop3").unwrap(), Method::Discard).unwrap();
        assert_eq!(l.max_bytes, 4294966784);
        assert!(read(t.path(), "nope").is_err());
        assert_eq!("zeroout".parse(), Ok(Method::Zeroout));
        assert!("trim".parse::<Method>().is_err());
    }
}
