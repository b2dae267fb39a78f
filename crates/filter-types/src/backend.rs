//! The write filter's backends ([`Backend`]), what each covers
//! ([`Coverage`]) and a disk's mode as applied ([`Applied`]): plain words
//! the guard, the daemon's views and the metrics share.

use std::fmt;

use crate::Mode;

/// The backend as `status`, `lsdsk`, the filter's answer and the metrics
/// name it: one of the three, or `none` (no filter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BackendName {
    Lsm,
    FmodRet,
    CgroupDevice,
    #[default]
    None,
}

impl BackendName {
    /// `lsm`, `fmod_ret`, `cgroup_device` or `none`.
    pub fn as_str(self) -> &'static str {
        match self {
            BackendName::Lsm => "lsm",
            BackendName::FmodRet => "fmod_ret",
            BackendName::CgroupDevice => "cgroup_device",
            BackendName::None => "none",
        }
    }
}

impl std::fmt::Display for BackendName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<Backend> for BackendName {
    fn from(b: Backend) -> BackendName {
        match b {
            Backend::Lsm => BackendName::Lsm,
            Backend::FmodRet => BackendName::FmodRet,
            Backend::CgroupDevice => BackendName::CgroupDevice,
        }
    }
}

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
    pub fn backend(self) -> BackendName {
        match self {
            Coverage::Full(b) => b.into(),
            Coverage::OpenTimeOnly => BackendName::CgroupDevice,
            Coverage::Disabled | Coverage::Unprotected => BackendName::None,
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

    /// A disk's mode as the filter applies it (the `asmguard_filter_mode`
    /// label): `mode` with a filter, `off` when disabled, unprotected with
    /// none.
    pub fn applied(self, mode: Mode) -> Applied {
        match self {
            Coverage::Full(_) | Coverage::OpenTimeOnly => Applied::Mode(mode),
            Coverage::Disabled => Applied::Mode(Mode::Off),
            Coverage::Unprotected => Applied::Unprotected,
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A disk's mode as the filter applies it: a [`Mode`], or no filter at all
/// (the `asmguard_filter_mode` metric's `mode` label, `lsdsk`'s
/// `filter_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Applied {
    /// The loaded backend applies this mode (`off` also when disabled).
    Mode(Mode),
    /// No backend could load: nothing is filtered.
    Unprotected,
}

impl Applied {
    /// `enforce`, `audit`, `off` or `UNPROTECTED`.
    pub fn as_str(self) -> &'static str {
        match self {
            Applied::Mode(m) => m.as_str(),
            Applied::Unprotected => "UNPROTECTED",
        }
    }
}

impl fmt::Display for Applied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which rule the running filter applies to SG_IO and NVMe passthrough
/// (`status`'s `filter_passthrough`: these words; `asmguardctl` renders what
/// each means).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PassthroughRule {
    /// The sleepable `lsm.s/file_ioctl` program reads each command: the read
    /// class passes, the rest is refused to callers not allow-listed.
    ByClass,
    /// `fmod_ret/security_file_ioctl` reads each command without faulting
    /// (the kernel lets no `fmod_ret` program on a security function sleep):
    /// the read class passes, the rest, and a command not in memory, are
    /// refused to callers not allow-listed.
    ByClassInMemory,
    /// `lsm/file_ioctl`: every SG_IO and NVMe passthrough ioctl on a managed
    /// disk is refused to callers not allow-listed (the kernel cannot read
    /// the command: no sleepable file_ioctl or bpf_copy_from_user).
    AllOrNothing,
    /// The cgroup-device fallback sees opens only: a read-only open passes
    /// and so does every ioctl on it.
    OpenOnly,
}

impl PassthroughRule {
    /// `by_class`, `by_class_in_memory`, `all_or_nothing`, `open_only` (the
    /// wire words of `status --json`).
    pub fn as_str(self) -> &'static str {
        match self {
            PassthroughRule::ByClass => "by_class",
            PassthroughRule::ByClassInMemory => "by_class_in_memory",
            PassthroughRule::AllOrNothing => "all_or_nothing",
            PassthroughRule::OpenOnly => "open_only",
        }
    }
}

impl fmt::Display for PassthroughRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words `status`, `lsdsk` and the metrics show are pinned.
    #[test]
    fn applied_words() {
        let full = Coverage::Full(Backend::Lsm);
        assert_eq!(full.applied(Mode::Audit), Applied::Mode(Mode::Audit));
        assert_eq!(
            Coverage::OpenTimeOnly.applied(Mode::Enforce).as_str(),
            "enforce"
        );
        assert_eq!(Coverage::Disabled.applied(Mode::Enforce).as_str(), "off");
        assert_eq!(
            Coverage::Unprotected.applied(Mode::Enforce),
            Applied::Unprotected
        );
        assert_eq!(Applied::Unprotected.to_string(), "UNPROTECTED");
        let names: Vec<&str> = Backend::ALL.iter().map(|b| b.as_str()).collect();
        assert_eq!(names, ["lsm", "fmod_ret", "cgroup_device"]);
        use PassthroughRule::*;
        for r in [ByClass, ByClassInMemory, AllOrNothing, OpenOnly] {
            let json = serde_json::to_value(r).unwrap();
            assert_eq!(json, r.as_str());
            assert_eq!(serde_json::from_value::<PassthroughRule>(json).unwrap(), r);
        }
    }
}
