//! Device numbers: userspace `st_rdev` (glibc encoding) to the kernel's internal
//! `dev_t` (`major << 20 | minor`), which is what BPF programs see in
//! `inode->i_rdev` and what asmguard's maps are keyed by.

use std::fmt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

const MINORBITS: u32 = 20;
const MAX_MAJOR: u32 = (1 << (32 - MINORBITS)) - 1;
const MAX_MINOR: u32 = (1 << MINORBITS) - 1;

/// A device number in the kernel's internal encoding (`major << 20 | minor`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KernelDev(u32);

/// Why a device number could not be formed.
#[derive(Debug, thiserror::Error)]
pub enum DevtError {
    /// Major or minor does not fit the kernel's 12/20-bit split.
    #[error("device {major}:{minor} does not fit the kernel dev_t (12-bit major, 20-bit minor)")]
    OutOfRange {
        /// Major number.
        major: u32,
        /// Minor number.
        minor: u32,
    },
    /// The path could not be stat'ed.
    #[error("cannot stat {path}: {source}")]
    Stat {
        /// The path.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The path is not a block device.
    #[error("{path} is not a block device")]
    NotBlock {
        /// The path.
        path: String,
    },
}

impl KernelDev {
    /// From a major and a minor number.
    pub fn new(major: u32, minor: u32) -> Result<Self, DevtError> {
        if major > MAX_MAJOR || minor > MAX_MINOR {
            return Err(DevtError::OutOfRange { major, minor });
        }
        Ok(Self((major << MINORBITS) | minor))
    }

    /// From a userspace `st_rdev`/`st_dev` value (glibc's 64-bit encoding,
    /// as returned by `stat(2)` and `MetadataExt::rdev`).
    pub fn from_user(dev: u64) -> Result<Self, DevtError> {
        let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
        let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
        let major = u32::try_from(major).unwrap_or(u32::MAX);
        let minor = u32::try_from(minor).unwrap_or(u32::MAX);
        Self::new(major, minor)
    }

    /// The device number of the block device special file at `path`.
    pub fn of_block_device(path: &Path) -> Result<Self, DevtError> {
        let meta = std::fs::metadata(path).map_err(|source| DevtError::Stat {
            path: path.display().to_string(),
            source,
        })?;
        if !meta.file_type().is_block_device() {
            return Err(DevtError::NotBlock {
                path: path.display().to_string(),
            });
        }
        Self::from_user(meta.rdev())
    }

    /// The device number of the block or character device special file at
    /// `path`, and whether it is a character device.
    pub fn of_device(path: &Path) -> Result<(Self, bool), DevtError> {
        let meta = std::fs::metadata(path).map_err(|source| DevtError::Stat {
            path: path.display().to_string(),
            source,
        })?;
        let ft = meta.file_type();
        if !ft.is_block_device() && !ft.is_char_device() {
            return Err(DevtError::NotBlock {
                path: path.display().to_string(),
            });
        }
        Ok((Self::from_user(meta.rdev())?, ft.is_char_device()))
    }

    /// From the raw kernel encoding (as found in BPF maps and events).
    pub fn from_raw(raw: u32) -> Self {
        Self(raw)
    }

    /// The raw kernel encoding.
    pub fn raw(self) -> u32 {
        self.0
    }

    /// The major number.
    pub fn major(self) -> u32 {
        self.0 >> MINORBITS
    }

    /// The minor number.
    pub fn minor(self) -> u32 {
        self.0 & MAX_MINOR
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

    /// glibc's makedev(), for the tests.
    fn makedev(major: u64, minor: u64) -> u64 {
        ((major & 0xffff_f000) << 32)
            | ((major & 0xfff) << 8)
            | ((minor & 0xffff_ff00) << 12)
            | (minor & 0xff)
    }

    #[test]
    fn kernel_encoding() {
        let d = KernelDev::new(7, 3).unwrap();
        assert_eq!(d.raw(), (7 << 20) | 3);
        assert_eq!((d.major(), d.minor()), (7, 3));
        assert_eq!(d.to_string(), "7:3");
    }

    #[test]
    fn from_user_small_and_large_minors() {
        // loop0, sda, a large minor (dm/nvme namespaces), the largest allowed
        for (ma, mi) in [(7, 0), (8, 0), (259, 70000), (253, 1), (4095, 0xfffff)] {
            let d = KernelDev::from_user(makedev(ma, mi)).unwrap();
            assert_eq!((d.major(), d.minor()), (ma as u32, mi as u32));
            assert_eq!(d.raw(), ((ma as u32) << 20) | mi as u32);
        }
        // the classic 16-bit encoding of 8:16 (sdb) is 0x0810
        assert_eq!(
            KernelDev::from_user(0x0810).unwrap(),
            KernelDev::new(8, 16).unwrap()
        );
    }

    #[test]
    fn out_of_range() {
        assert!(KernelDev::new(4096, 0).is_err());
        assert!(KernelDev::new(0, 1 << 20).is_err());
        assert!(KernelDev::from_user(makedev(5000, 1)).is_err());
    }

    #[test]
    fn stat_errors() {
        assert!(matches!(
            KernelDev::of_block_device(Path::new("/nonexistent/asmguard")),
            Err(DevtError::Stat { .. })
        ));
        assert!(matches!(
            KernelDev::of_block_device(Path::new("/")),
            Err(DevtError::NotBlock { .. })
        ));
    }
}
