//! The hook table: one row per program of `bpf/guard.bpf.c`. The [`Hook`]
//! enum, which programs load (optional hooks only when the kernel's BTF has
//! their `bpf_lsm_<hook>`), the `ag_stats` indices, the metric labels and the
//! operation names of events are all read from [`HOOKS`].
//!
//! Adding an LSM hook: write the program in `bpf/guard.bpf.c`, give it an
//! `AG_HOOK_*` code in `bpf/guard.h` (below `AG_NHOOKS`, which moves up by
//! one), and add one row to the `hook_table!` below. The tests check the
//! table against the header and the compiled object.
//!
//! Not here: the ioctl names ([`super::ioctls`]), the maps ([`super::loader`]).

use std::fmt;

use super::ioctls::ioctl_name;
use super::types::Backend;

/// How an event of a hook names its operation (`op` is the hook-specific
/// field of the record).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// A fixed name (`write-open`, `write` ...).
    Fixed(&'static str),
    /// `op` is an ioctl command: its name from [`super::ioctls`].
    Ioctl,
    /// A prefix and `op` in hex (`uring-cmd 0x...`).
    Hex(&'static str),
}

/// One row of the hook table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HookDef {
    /// The hook.
    pub hook: Hook,
    /// `AG_HOOK_*` (event.hook, stats index).
    pub code: u32,
    /// The metric label value; also `AG_HOOK_<LABEL>` in guard.h.
    pub label: &'static str,
    /// The program's name in guard.bpf.c (and its link pin's name); more
    /// than one when the C side has variants for older kernels: the first is
    /// preferred, the next one is tried when it fails to load. A variant
    /// whose name ends in `_s` is sleepable (section `lsm.s/...`).
    pub programs: &'static [&'static str],
    /// The program's ELF section.
    pub section: &'static str,
    /// The backend that loads it.
    pub backend: Backend,
    /// For a hook some kernels lack: the kernel BTF symbol that must exist
    /// for the program to load (`None`: always loaded with its backend).
    pub needs_btf: Option<&'static str>,
    /// How its events name the operation.
    pub op: Op,
}

macro_rules! hook_table {
    ($( $(#[$doc:meta])* $variant:ident = $code:literal, $label:literal, [$($program:literal),+],
        $section:literal, $backend:ident, $needs:expr, $op:expr; )*) => {
        /// The hook that saw an operation (one variant per row of [`HOOKS`]).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Hook {
            $( $(#[$doc])* $variant, )*
            /// A code this build does not know.
            Unknown(u32),
        }

        /// The hook table.
        pub const HOOKS: &[HookDef] = &[ $( HookDef {
            hook: Hook::$variant,
            code: $code,
            label: $label,
            programs: &[$($program),+],
            section: $section,
            backend: Backend::$backend,
            needs_btf: $needs,
            op: $op,
        }, )* ];
    };
}

hook_table! {
    /// `lsm/file_open`: a write-open.
    FileOpen = 1, "file_open", ["ag_file_open"], "lsm/file_open", Lsm, None,
        Op::Fixed("write-open");
    /// `lsm/file_permission`: a write on an fd opened earlier.
    FilePermission = 2, "file_permission", ["ag_file_permission"], "lsm/file_permission", Lsm,
        None, Op::Fixed("write");
    /// `lsm/file_ioctl`. `ag_file_ioctl_s` (sleepable, `lsm.s/file_ioctl`)
    /// reads SG_IO and NVMe admin commands and lets the read class through
    /// ([`super::commands`]); `ag_file_ioctl`, all-or-nothing, is its variant
    /// for kernels that refuse it.
    FileIoctl = 3, "file_ioctl", ["ag_file_ioctl_s", "ag_file_ioctl"], "lsm/file_ioctl", Lsm,
        None, Op::Ioctl;
    /// `lsm/file_ioctl_compat` (32-bit callers).
    FileIoctlCompat = 4, "file_ioctl_compat", ["ag_file_ioctl_compat"], "lsm/file_ioctl_compat",
        Lsm, Some("bpf_lsm_file_ioctl_compat"), Op::Ioctl;
    /// `lsm/mmap_file`: a shared writable mapping.
    MmapFile = 5, "mmap_file", ["ag_mmap_file"], "lsm/mmap_file", Lsm, None,
        Op::Fixed("mmap-shared-write");
    /// `lsm/file_mprotect`: a shared mapping made writable.
    FileMprotect = 6, "file_mprotect", ["ag_file_mprotect"], "lsm/file_mprotect", Lsm, None,
        Op::Fixed("mprotect-shared-write");
    /// `lsm/uring_cmd`: io_uring passthrough.
    UringCmd = 7, "uring_cmd", ["ag_uring_cmd"], "lsm/uring_cmd", Lsm,
        Some("bpf_lsm_uring_cmd"), Op::Hex("uring-cmd");
    /// The cgroup-device fallback (write-open); `ag_cgroup_dev_ids` is its
    /// variant for kernels that refuse cgroup-device programs the task
    /// helpers (5.10): identity from uid and gid alone.
    CgroupDevice = 8, "cgroup_device", ["ag_cgroup_dev", "ag_cgroup_dev_ids"], "cgroup/dev", CgroupDevice, None,
        Op::Fixed("write-open");
    /// `cgroup/dev` beside the LSM programs (a companion, loaded best
    /// effort): an in-kernel open by device number that no LSM hook sees
    /// (nvmet's block backend), outside any path walk.
    KernelOpen = 9, "kernel_open", ["ag_kernel_open"], "cgroup/dev", Lsm, None,
        Op::Fixed("kernel-open");
}

impl HookDef {
    /// A companion of the LSM backend: a cgroup-device program attached next
    /// to the LSM programs, loaded on its own and best effort (a kernel that
    /// refuses it keeps the LSM programs).
    pub fn companion(&self) -> bool {
        self.backend == Backend::Lsm && self.section == "cgroup/dev"
    }
}

impl Hook {
    /// The row of a hook code, if this build knows it.
    pub fn def_of_code(code: u32) -> Option<&'static HookDef> {
        HOOKS.iter().find(|d| d.code == code)
    }
    /// The row of a program name, if it is one of ours.
    pub fn def_of_program(program: &str) -> Option<&'static HookDef> {
        HOOKS.iter().find(|d| d.programs.contains(&program))
    }
    /// From an `AG_HOOK_*` code.
    pub fn from_code(code: u32) -> Hook {
        Hook::def_of_code(code).map_or(Hook::Unknown(code), |d| d.hook)
    }
    /// This hook's row (`None` for [`Hook::Unknown`]).
    pub fn def(self) -> Option<&'static HookDef> {
        HOOKS.iter().find(|d| d.hook == self)
    }
    /// The metric label value (`file_open`, `file_ioctl`, `cgroup_device` ...).
    pub fn as_str(self) -> &'static str {
        self.def().map_or("unknown", |d| d.label)
    }
    /// The name of operation `op` seen by this hook (`write-open`, an
    /// ioctl's name ...).
    pub fn operation(self, op: u32) -> String {
        match self.def().map(|d| d.op) {
            Some(Op::Fixed(name)) => name.to_string(),
            Some(Op::Ioctl) => ioctl_name(op),
            Some(Op::Hex(prefix)) => format!("{prefix} 0x{op:x}"),
            None => format!("op 0x{op:x}"),
        }
    }
}

impl fmt::Display for Hook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_consistent() {
        for (i, d) in HOOKS.iter().enumerate() {
            assert_eq!(d.code as usize, i + 1, "codes are 1.. in order");
            assert_eq!(Hook::from_code(d.code), d.hook);
            assert_eq!(d.hook.def(), Some(d));
            for p in d.programs {
                assert_eq!(Hook::def_of_program(p), Some(d));
            }
            assert_eq!(d.hook.as_str(), d.label);
            match d.backend {
                Backend::Lsm if d.companion() => assert!(d.needs_btf.is_none()),
                Backend::Lsm => {
                    assert_eq!(d.section, format!("lsm/{}", d.label));
                    if let Some(sym) = d.needs_btf {
                        assert_eq!(sym, format!("bpf_lsm_{}", d.label));
                    }
                }
                Backend::CgroupDevice => assert!(d.needs_btf.is_none()),
            }
        }
        assert_eq!(Hook::from_code(99), Hook::Unknown(99));
        assert_eq!(Hook::Unknown(99).as_str(), "unknown");
        assert_eq!(Hook::Unknown(99).operation(0x10), "op 0x10");
        assert_eq!(Hook::FileIoctl.operation(0x1277), "BLKDISCARD");
        assert_eq!(Hook::UringCmd.operation(0x1f), "uring-cmd 0x1f");
        assert_eq!(Hook::MmapFile.operation(3), "mmap-shared-write");
    }
}
