//! Kernel device numbers (`major << 20 | minor`, what the block tracepoints and
//! asmguard's maps use) and their names in /sys.

use std::fmt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

const MINORBITS: u32 = 20;

/// A device number in the kernel's internal encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KernelDev(u32);

/// Why a path does not name a traceable disk.
#[derive(Debug, thiserror::Error)]
pub enum DevError {
    /// Major or minor does not fit 12/20 bits.
    #[error("device {0}:{1} does not fit the kernel dev_t")]
    OutOfRange(u64, u64),
    /// The path could not be stat'ed.
    #[error("cannot stat {0}: {1}")]
    Stat(String, std::io::Error),
    /// Not a block device.
    #[error("{0} is not a block device")]
    NotBlock(String),
}

impl KernelDev {
    /// From major and minor.
    pub fn new(major: u32, minor: u32) -> Result<KernelDev, DevError> {
        if major >= 1 << (32 - MINORBITS) || minor >= 1 << MINORBITS {
            return Err(DevError::OutOfRange(major.into(), minor.into()));
        }
        Ok(KernelDev(major << MINORBITS | minor))
    }

    /// From the raw kernel encoding.
    pub fn from_raw(raw: u32) -> KernelDev {
        KernelDev(raw)
    }

    /// The raw kernel encoding.
    pub fn raw(self) -> u32 {
        self.0
    }

    /// Major number.
    pub fn major(self) -> u32 {
        self.0 >> MINORBITS
    }

    /// Minor number.
    pub fn minor(self) -> u32 {
        self.0 & ((1 << MINORBITS) - 1)
    }

    /// From a userspace `st_rdev` (glibc encoding).
    pub fn from_user(dev: u64) -> Result<KernelDev, DevError> {
        let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
        let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
        match (u32::try_from(major), u32::try_from(minor)) {
            (Ok(ma), Ok(mi)) => KernelDev::new(ma, mi),
            _ => Err(DevError::OutOfRange(major, minor)),
        }
    }

    /// The whole disk a block device path belongs to: the device itself, or the
    /// parent disk of a partition (requests are counted per whole disk).
    pub fn disk_of_path(path: &Path) -> Result<KernelDev, DevError> {
        let shown = path.display().to_string();
        let md = std::fs::metadata(path).map_err(|e| DevError::Stat(shown.clone(), e))?;
        if !md.file_type().is_block_device() {
            return Err(DevError::NotBlock(shown));
        }
        let dev = KernelDev::from_user(md.rdev())?;
        Ok(dev.whole_disk().unwrap_or(dev))
    }

    /// The parent disk of a partition, from /sys (None for a whole disk).
    pub fn whole_disk(self) -> Option<KernelDev> {
        let sys = format!("/sys/dev/block/{self}");
        if !Path::new(&sys).join("partition").exists() {
            return None;
        }
        let parent = std::fs::read_to_string(format!("{sys}/../dev")).ok()?;
        let (ma, mi) = parent.trim().split_once(':')?;
        KernelDev::new(ma.parse().ok()?, mi.parse().ok()?).ok()
    }

    /// The kernel's name for the device (`sdb`, `dm-3`), from /sys/dev/block,
    /// or `MAJOR:MINOR` when /sys does not know it.
    pub fn sysfs_name(self) -> String {
        std::fs::read_link(format!("/sys/dev/block/{self}"))
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| self.to_string())
    }
}

impl fmt::Display for KernelDev {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.major(), self.minor())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings() {
        let d = KernelDev::new(259, 1 << 19).unwrap();
        assert_eq!(d.raw(), 259 << 20 | 1 << 19);
        assert_eq!((d.major(), d.minor()), (259, 1 << 19));
        assert_eq!(d.to_string(), "259:524288");
        // glibc: minor's low 8 bits, major's 12 bits, minor's high 12 bits
        let user = (0x80000u64 & !0xff) << 12 | (259 << 8);
        assert_eq!(KernelDev::from_user(user).unwrap(), d);
        assert!(KernelDev::new(4096, 0).is_err());
        assert!(KernelDev::new(0, 1 << 20).is_err());
    }

    #[test]
    fn null_is_not_a_block_device() {
        assert!(matches!(
            KernelDev::disk_of_path(Path::new("/dev/null")),
            Err(DevError::NotBlock(_))
        ));
    }
}
