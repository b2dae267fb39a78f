//! The hook table: one row per hook of `bpf/guard.bpf.c`. The [`Hook`]
//! enum, which hooks are optional (their programs load only when the
//! kernel's BTF has their `bpf_lsm_<hook>` or `security_<hook>`), the
//! `ag_stats` indices, the metric labels and the operation names of events
//! are all read from [`HOOKS`]; a hook's programs and their properties are
//! rows of the program table ([`super::programs`]).
//!
//! Adding a security hook: write its rule in `bpf/guard.bpf.c` with
//! `AG_TWIN` (its `lsm/` and `fmod_ret/security_` programs), give it an
//! `AG_HOOK_*` code in `bpf/guard.h` (below `AG_NHOOKS`, which moves up by
//! one; a hook that judges disks needs a code below `AG_DISK_HOOKS`, the
//! fixed count layout), add one row to the `hook_table!` below and one row
//! per program to `program_table!` ([`super::programs`]). The tests check
//! the tables against the header and the compiled object.
//!
//! Not here: the ioctl names ([`super::ioctls`]), the maps ([`super::loader`]).

use std::fmt;

use super::ioctls::ioctl_name;
use super::programs::{self, PROGRAMS};
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
    /// A hook some kernels lack: its programs load only when the kernel BTF
    /// has `bpf_lsm_<label>` (LSM) or `security_<label>` (`fmod_ret`).
    pub optional: bool,
    /// How its events name the operation.
    pub op: Op,
}

macro_rules! hook_table {
    ($( $(#[$doc:meta])* $variant:ident = $code:literal, $label:literal, $optional:literal,
        $op:expr; )*) => {
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
            optional: $optional,
            op: $op,
        }, )* ];
    };
}

hook_table! {
    /// `lsm/file_open`: a write-open.
    FileOpen = 1, "file_open", false, Op::Fixed("write-open");
    /// `lsm/file_permission`: a write on an fd opened earlier.
    FilePermission = 2, "file_permission", false, Op::Fixed("write");
    /// `lsm/file_ioctl`. `ag_file_ioctl_s` (sleepable, `lsm.s/file_ioctl`)
    /// reads SG_IO and NVMe admin commands and lets the read class through
    /// ([`super::commands`]); `ag_file_ioctl`, all-or-nothing, is its variant
    /// for kernels that refuse it. `ag_fr_file_ioctl` (`fmod_ret`, never
    /// sleepable there) reads them without faulting and refuses a command
    /// not in memory.
    FileIoctl = 3, "file_ioctl", false, Op::Ioctl;
    /// `lsm/file_ioctl_compat` (32-bit callers).
    FileIoctlCompat = 4, "file_ioctl_compat", true, Op::Ioctl;
    /// `lsm/mmap_file`: a shared writable mapping.
    MmapFile = 5, "mmap_file", false, Op::Fixed("mmap-shared-write");
    /// `lsm/file_mprotect`: a shared mapping made writable.
    FileMprotect = 6, "file_mprotect", false, Op::Fixed("mprotect-shared-write");
    /// `lsm/uring_cmd`: io_uring passthrough.
    UringCmd = 7, "uring_cmd", true, Op::Hex("uring-cmd");
    /// The cgroup-device fallback (write-open); `ag_cgroup_dev_ids` is its
    /// variant for kernels that refuse cgroup-device programs the task
    /// helpers (5.10): identity from uid and gid alone.
    CgroupDevice = 8, "cgroup_device", false, Op::Fixed("write-open");
    /// `cgroup/dev` beside the LSM or `fmod_ret` programs (a companion,
    /// loaded best effort): an in-kernel open by device number that no
    /// security hook sees (nvmet's block backend), outside any path walk.
    KernelOpen = 9, "kernel_open", false, Op::Fixed("kernel-open");
    /// `lsm/inode_unlink`: a pin removed by a task outside the host's pid
    /// namespace (denied, not reported: no disk is involved).
    InodeUnlink = 10, "inode_unlink", false, Op::Fixed("unlink-pin");
    /// `lsm/inode_rmdir`: a pin directory removed from a container.
    InodeRmdir = 11, "inode_rmdir", false, Op::Fixed("rmdir-pin");
    /// `lsm/inode_rename`: a pin moved from a container.
    InodeRename = 12, "inode_rename", false, Op::Fixed("rename-pin");
    /// `lsm/bpf`: asmguard's maps, programs and links got by id, written or
    /// detached by a task that is not the daemon (denied, not reported).
    Bpf = 13, "bpf", false, Op::Fixed("bpf-command");
    /// `tp_btf/sched_process_exit` beside the `bpf` rule: the daemon's exit
    /// frees its record (one program for both security-hook backends).
    TaskExit = 14, "task_exit", false, Op::Fixed("exit");
}

impl HookDef {
    /// A companion of the security-hook backends: its programs are
    /// ([`programs::ProgDef::companion`]).
    pub fn companion(&self) -> bool {
        PROGRAMS.iter().any(|p| p.hook == self.hook && p.companion)
    }

    /// The programs `backend` loads for this row (preferred first; empty:
    /// none), from the program table.
    pub fn programs_for(&self, backend: Backend) -> Vec<&'static str> {
        programs::programs_of(self.hook, backend)
    }

    /// For an optional hook, the kernel BTF symbol that must exist for
    /// `backend` to load its programs.
    pub fn needs_btf(&self, backend: Backend) -> Option<String> {
        match backend {
            _ if !self.optional => None,
            Backend::FmodRet => Some(format!("security_{}", self.label)),
            _ => Some(format!("bpf_lsm_{}", self.label)),
        }
    }
}

impl Hook {
    /// The row of a hook code, if this build knows it.
    pub fn def_of_code(code: u32) -> Option<&'static HookDef> {
        HOOKS.iter().find(|d| d.code == code)
    }
    /// The row of a program name, if it is one of ours.
    pub fn def_of_program(program: &str) -> Option<&'static HookDef> {
        programs::program(program).and_then(|p| p.hook.def())
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
            for b in Backend::ALL {
                for p in d.programs_for(b) {
                    assert_eq!(Hook::def_of_program(p), Some(d));
                }
            }
            assert_eq!(d.hook.as_str(), d.label);
            let lsm = d.programs_for(Backend::Lsm);
            let fmod = d.programs_for(Backend::FmodRet);
            let cgroup = d.programs_for(Backend::CgroupDevice);
            let traced = lsm
                .iter()
                .chain(&fmod)
                .any(|p| programs::program(p).map(|p| p.attach) == Some(programs::Attach::TpBtf));
            if d.companion() || traced {
                assert!(!d.optional && cgroup.is_empty());
                assert_eq!(lsm, fmod);
            } else if cgroup.is_empty() {
                // every security hook has its fmod_ret twin, one program
                assert_eq!(fmod, [format!("ag_fr_{}", d.label)]);
                assert!(!lsm.is_empty());
                if d.optional {
                    let lsm = d.needs_btf(Backend::Lsm);
                    assert_eq!(lsm, Some(format!("bpf_lsm_{}", d.label)));
                    let fmod = d.needs_btf(Backend::FmodRet);
                    assert_eq!(fmod, Some(format!("security_{}", d.label)));
                }
            } else {
                assert!(!d.optional && lsm.is_empty() && fmod.is_empty());
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
