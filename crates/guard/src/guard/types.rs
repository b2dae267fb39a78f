//! The filter's vocabulary, used by every other module of [`super`] and
//! importing none of them: the devices and executables its maps are keyed by
//! ([`DevKey`], [`ExeId`]), the modes ([`Mode`], `AG_MODE_*`), the backends
//! ([`Backend`]) and what each covers ([`Coverage`]).

use std::fmt;
use std::path::Path;

use crate::KernelDev;

/// A device in the managed set: its kernel dev_t and whether it is a character
/// device (block and character devices can share numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DevKey {
    /// Kernel dev_t.
    pub dev: KernelDev,
    /// A character device (sg, bsg, NVMe generic) rather than a block device.
    pub chr: bool,
}

impl DevKey {
    /// A block device.
    pub fn block(dev: KernelDev) -> Self {
        DevKey { dev, chr: false }
    }
    /// A character device.
    pub fn char(dev: KernelDev) -> Self {
        DevKey { dev, chr: true }
    }
    /// The device special file at `path` (block or character).
    pub fn of_path(path: &Path) -> Result<Self, crate::DevtError> {
        let (dev, chr) = KernelDev::of_device(path)?;
        Ok(DevKey { dev, chr })
    }
}

impl fmt::Display for DevKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", if self.chr { "c" } else { "b" }, self.dev)
    }
}

/// An executable in the allow-list: its filesystem (kernel dev_t) and inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExeId {
    /// Kernel dev_t of the filesystem holding it.
    pub dev: KernelDev,
    /// Inode number.
    pub ino: u64,
}

impl ExeId {
    /// The executable at `path` (symlinks followed).
    pub fn of_path(path: &Path) -> Result<Self, crate::DevtError> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path).map_err(|source| crate::DevtError::Stat {
            path: path.display().to_string(),
            source,
        })?;
        Ok(ExeId {
            dev: KernelDev::from_dev_t(meta.dev())?,
            ino: meta.ino(),
        })
    }
}

/// What the filter does on one disk (`AG_MODE_*`): the one mode type,
/// shared with the configuration and the metrics.
pub use asmguard_filter_types::Mode;

/// Which kernel mechanism enforces the filter and what it covers: shared
/// with the metrics (`asmguard_backend_info`, `asmguard_filter_mode`).
pub use asmguard_filter_types::backend::{Applied, Backend, BackendName, Coverage};

/// What of a caller the loaded filter can judge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdentityReach {
    /// Its uids, gids, supplementary groups and executable.
    Full,
    /// Its real uid and gid only (no executable, no supplementary groups):
    /// the 5.10 cgroup-device fallback.
    IdsOnly,
}
