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

/// Which kernel mechanism enforces the filter, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Backend {
    /// BPF LSM programs: open, write, ioctl, mmap, io_uring passthrough.
    Lsm,
    /// The same rules as `fmod_ret` programs on the kernel's `security_*`
    /// functions: the same coverage where `bpf` is not an active LSM.
    FmodRet,
    /// A cgroup-device program on the cgroup-v2 root: write-opens only.
    CgroupDevice,
}

impl Backend {
    /// Every backend, best first.
    pub const ALL: [Backend; 3] = [Backend::Lsm, Backend::FmodRet, Backend::CgroupDevice];

    /// `lsm`, `fmod_ret` or `cgroup_device` (the metric's label value).
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Lsm => "lsm",
            Backend::FmodRet => "fmod_ret",
            Backend::CgroupDevice => "cgroup_device",
        }
    }

    /// Whether its programs sit on the kernel's security hooks (the BPF LSM
    /// or `fmod_ret` on `security_*`): the hook table's security rows.
    pub fn security_hooks(self) -> bool {
        matches!(self, Backend::Lsm | Backend::FmodRet)
    }

    /// What it covers.
    pub fn coverage(self) -> Coverage {
        Coverage::of(Some(self), false)
    }
}

/// What the write filter covers now: the one fact that `status`'s backend,
/// coverage and protection, the `filter_mode` metric and `lsdsk`'s Filtering
/// column are derived from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coverage {
    /// The BPF LSM or `fmod_ret` backend (which one): opens, writes, ioctls,
    /// mappings.
    Full(Backend),
    /// The cgroup-device fallback: write-opens only.
    OpenTimeOnly,
    /// No filter: an administrator disabled it (`asmguardctl filter disable`).
    Disabled,
    /// No filter: none could load.
    Unprotected,
}

impl Coverage {
    /// Every value (for tests that go over all of them).
    pub const ALL: [Coverage; 5] = [
        Coverage::Full(Backend::Lsm),
        Coverage::Full(Backend::FmodRet),
        Coverage::OpenTimeOnly,
        Coverage::Disabled,
        Coverage::Unprotected,
    ];

    /// From the loaded backend (if any) and whether an administrator disabled the filter.
    pub fn of(backend: Option<Backend>, disabled: bool) -> Coverage {
        match (backend, disabled) {
            (Some(b @ (Backend::Lsm | Backend::FmodRet)), _) => Coverage::Full(b),
            (Some(Backend::CgroupDevice), _) => Coverage::OpenTimeOnly,
            (None, true) => Coverage::Disabled,
            (None, false) => Coverage::Unprotected,
        }
    }

    /// The backend's name (`lsm`, `fmod_ret`, `cgroup_device`, `none`):
    /// `status` and the `asmguard_backend_info` label.
    pub fn backend(self) -> &'static str {
        match self {
            Coverage::Full(b) => b.as_str(),
            Coverage::OpenTimeOnly => Backend::CgroupDevice.as_str(),
            Coverage::Disabled | Coverage::Unprotected => "none",
        }
    }

    /// `status`'s coverage: `full`, `degraded: open-time only`, or why there
    /// is no filter.
    pub fn describe(self, why_none: &str) -> String {
        match self {
            Coverage::Full(_) => "full".into(),
            Coverage::OpenTimeOnly => "degraded: open-time only".into(),
            Coverage::Disabled | Coverage::Unprotected => why_none.into(),
        }
    }

    /// `status`'s protection: `protected`, `degraded: open-time only`,
    /// `off (disabled by an administrator)` or `UNPROTECTED: <why>`.
    pub fn protection(self, why_none: &str) -> String {
        match self {
            Coverage::Full(_) => "protected".into(),
            Coverage::OpenTimeOnly => self.describe(why_none),
            Coverage::Disabled => "off (disabled by an administrator)".into(),
            Coverage::Unprotected => format!("UNPROTECTED: {why_none}"),
        }
    }

    /// A disk's mode as the filter applies it (the `asmguard_filter_mode` label):
    /// `mode` with a filter, `off` when disabled, `UNPROTECTED` with none.
    pub fn mode_word(self, mode: Mode) -> &'static str {
        match self {
            Coverage::Full(_) | Coverage::OpenTimeOnly => mode.as_str(),
            Coverage::Disabled => Mode::Off.as_str(),
            Coverage::Unprotected => "UNPROTECTED",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What of a caller the loaded filter can judge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdentityReach {
    /// Its uids, gids, supplementary groups and executable.
    Full,
    /// Its real uid and gid only (no executable, no supplementary groups):
    /// the 5.10 cgroup-device fallback.
    IdsOnly,
}
