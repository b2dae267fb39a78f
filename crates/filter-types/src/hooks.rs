//! The hook table: one row per hook of `bpf/guard.bpf.c`. The [`Hook`]
//! enum, which hooks are optional (their programs load only when the
//! kernel's BTF has their `bpf_lsm_<hook>` or `security_<hook>`), the
//! `ag_stats` indices, the metric labels and how events name their
//! operation are all read from [`HOOKS`]; a hook's programs and their
//! properties are rows of the program table ([`PROGRAMS`], below). Plain
//! data: the guard loads from it, the metrics key their counters by
//! [`Hook`].
//!
//! Adding a security hook: write its rule in `bpf/guard.bpf.c` with
//! `AG_TWIN` (its `lsm/` and `fmod_ret/security_` programs), give it an
//! `AG_HOOK_*` code in `bpf/guard.h` (below `AG_NHOOKS`, which moves up by
//! one; a hook that judges disks needs a code below `AG_DISK_HOOKS`, the
//! fixed count layout), add one row to the `hook_table!` below and one row
//! per program to `program_table!` below. The
//! guard's tests check the tables against the header and the compiled
//! object.
//!
//! Not here: the ioctl names an event's operation may be
//! ([`crate::ioctls`]), the maps (the guard's loader).

use std::fmt;

use crate::backend::Backend;

/// How an event of a hook names its operation (`op` is the hook-specific
/// field of the record).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// A fixed name (`write-open`, `write` ...).
    Fixed(&'static str),
    /// `op` is an ioctl command: its name from the guard's ioctl table.
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
    /// (the guard's `commands`); `ag_file_ioctl`, all-or-nothing, is its variant
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
    /// `lsm/bpf_map`: an fd onto one of asmguard's maps made for a task that
    /// is not the daemon (a pin's `BPF_OBJ_GET`, by id; denied, not reported).
    BpfMap = 15, "bpf_map", true, Op::Fixed("bpf-map-fd");
    /// `lsm/bpf_prog`: the same for its programs.
    BpfProg = 16, "bpf_prog", true, Op::Fixed("bpf-prog-fd");
    /// `lsm/file_receive`: an fd onto one of its maps, programs or links
    /// installed from elsewhere (`pidfd_getfd` on the daemon, `SCM_RIGHTS`).
    FileReceive = 17, "file_receive", true, Op::Fixed("bpf-fd-receive");
    /// `lsm/ptrace_access_check`: another task got attach-level access to a
    /// root task running an allowed executable (ptrace attach,
    /// `pidfd_getfd`): recorded, that task's rules of executables no longer
    /// hold (never denies).
    PtraceAccessCheck = 18, "ptrace_access_check", true, Op::Fixed("ptrace-attach");
    /// `lsm/inode_permission`: a pin of one of asmguard's links opened by a
    /// task that is not the daemon (`BPF_OBJ_GET`; denied, not reported).
    InodePermission = 19, "inode_permission", false, Op::Fixed("open-link-pin");
}

impl HookDef {
    /// A companion of the security-hook backends: its programs are
    /// ([`ProgDef::companion`]).
    pub fn companion(&self) -> bool {
        PROGRAMS.iter().any(|p| p.hook == self.hook && p.companion)
    }

    /// The programs `backend` loads for this row (preferred first; empty:
    /// none), from the program table.
    pub fn programs_for(&self, backend: Backend) -> Vec<&'static str> {
        programs_of(self.hook, backend)
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
    pub fn def_of_program(name: &str) -> Option<&'static HookDef> {
        program(name).and_then(|p| p.hook.def())
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
}

impl Hook {
    /// The name of operation `op` seen by this hook (`write-open`, an
    /// ioctl's name, `uring-cmd 0x1f` ...).
    pub fn operation(self, op: u32) -> String {
        match self.def().map(|d| d.op) {
            Some(Op::Fixed(name)) => name.to_string(),
            Some(Op::Ioctl) => crate::ioctls::ioctl_name(op),
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

/// On the wire a hook is its label (`file_open` ...), as in the metrics.
impl serde::Serialize for Hook {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// A label this build does not know reads as [`Hook::Unknown`] (0).
impl<'de> serde::Deserialize<'de> for Hook {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Hook, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Ok(HOOKS
            .iter()
            .find(|h| h.label == s)
            .map_or(Hook::Unknown(0), |h| h.hook))
    }
}

// ---- The program table: one row per BPF program of `bpf/guard.bpf.c`,
// with its properties written down rather than read from its name: the hook
// it judges for, its ELF section, how it attaches, whether it is sleepable,
// which backend loads it (or whether it is a companion of the security-hook
// backends) and which variant of its hook it is. The guard's loader, pins
// and status read [`PROGRAMS`]; a guard test checks it against the programs
// actually in the compiled object, both ways.

/// How a program attaches (its BPF program type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attach {
    /// `lsm/<hook>` or `lsm.s/<hook>`: the BPF LSM.
    Lsm,
    /// `fmod_ret/security_<hook>`: a trampoline on the kernel's security
    /// function (a tracing program).
    FmodRet,
    /// `cgroup/dev`: a cgroup-device program on the cgroup-v2 root.
    CgroupDevice,
    /// `tp_btf/<tracepoint>`: a BTF tracepoint (a tracing program, no
    /// trampoline), beside either security-hook backend.
    TpBtf,
}

/// One row of the program table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProgDef {
    /// The program's name in `guard.bpf.c` (and its link pin's name).
    pub name: &'static str,
    /// The hook it judges for (its row in [`HOOKS`]).
    pub hook: Hook,
    /// Its ELF section.
    pub section: &'static str,
    /// How it attaches.
    pub attach: Attach,
    /// Sleepable (`lsm.s/`): may fault user memory in.
    pub sleepable: bool,
    /// The backends that load it.
    pub backends: &'static [Backend],
    /// A companion of the security-hook backends: a cgroup-device program
    /// attached beside the LSM or `fmod_ret` programs, loaded on its own and
    /// best effort (a kernel that refuses it keeps the others).
    pub companion: bool,
    /// Which of its hook's programs for a backend it is: 0 the preferred
    /// one, 1 the one tried when that fails to load (older kernels).
    pub variant: usize,
}

const LSM: &[Backend] = &[Backend::Lsm];
const FMOD_RET: &[Backend] = &[Backend::FmodRet];
const CGROUP: &[Backend] = &[Backend::CgroupDevice];
const SECURITY: &[Backend] = &[Backend::Lsm, Backend::FmodRet];

macro_rules! program_table {
    ($( $name:literal: $hook:ident, $section:literal, $attach:ident, sleepable $sleepable:literal,
        $backends:ident, companion $companion:literal, variant $variant:literal; )*) => {
        /// The program table.
        pub const PROGRAMS: &[ProgDef] = &[ $( ProgDef {
            name: $name,
            hook: Hook::$hook,
            section: $section,
            attach: Attach::$attach,
            sleepable: $sleepable,
            backends: $backends,
            companion: $companion,
            variant: $variant,
        }, )* ];
    };
}

program_table! {
    "ag_file_open": FileOpen, "lsm/file_open", Lsm, sleepable false, LSM, companion false, variant 0;
    "ag_fr_file_open": FileOpen, "fmod_ret/security_file_open", FmodRet, sleepable false,
        FMOD_RET, companion false, variant 0;
    "ag_file_permission": FilePermission, "lsm/file_permission", Lsm, sleepable false, LSM,
        companion false, variant 0;
    "ag_fr_file_permission": FilePermission, "fmod_ret/security_file_permission", FmodRet,
        sleepable false, FMOD_RET, companion false, variant 0;
    // file_ioctl: the sleepable program reads SG_IO and NVMe admin commands
    // and lets the read class through; the plain one (all-or-nothing) is its
    // variant for kernels that refuse it; the fmod_ret one reads them without
    // faulting.
    "ag_file_ioctl_s": FileIoctl, "lsm.s/file_ioctl", Lsm, sleepable true, LSM,
        companion false, variant 0;
    "ag_file_ioctl": FileIoctl, "lsm/file_ioctl", Lsm, sleepable false, LSM, companion false,
        variant 1;
    "ag_fr_file_ioctl": FileIoctl, "fmod_ret/security_file_ioctl", FmodRet, sleepable false,
        FMOD_RET, companion false, variant 0;
    "ag_file_ioctl_compat": FileIoctlCompat, "lsm/file_ioctl_compat", Lsm, sleepable false, LSM,
        companion false, variant 0;
    "ag_fr_file_ioctl_compat": FileIoctlCompat, "fmod_ret/security_file_ioctl_compat", FmodRet,
        sleepable false, FMOD_RET, companion false, variant 0;
    "ag_mmap_file": MmapFile, "lsm/mmap_file", Lsm, sleepable false, LSM, companion false,
        variant 0;
    "ag_fr_mmap_file": MmapFile, "fmod_ret/security_mmap_file", FmodRet, sleepable false,
        FMOD_RET, companion false, variant 0;
    "ag_file_mprotect": FileMprotect, "lsm/file_mprotect", Lsm, sleepable false, LSM,
        companion false, variant 0;
    "ag_fr_file_mprotect": FileMprotect, "fmod_ret/security_file_mprotect", FmodRet,
        sleepable false, FMOD_RET, companion false, variant 0;
    "ag_uring_cmd": UringCmd, "lsm/uring_cmd", Lsm, sleepable false, LSM, companion false,
        variant 0;
    "ag_fr_uring_cmd": UringCmd, "fmod_ret/security_uring_cmd", FmodRet, sleepable false,
        FMOD_RET, companion false, variant 0;
    // The cgroup-device fallback; its `_ids` variant for kernels that refuse
    // cgroup-device programs the task helpers (5.10).
    "ag_cgroup_dev": CgroupDevice, "cgroup/dev", CgroupDevice, sleepable false, CGROUP,
        companion false, variant 0;
    "ag_cgroup_dev_ids": CgroupDevice, "cgroup/dev", CgroupDevice, sleepable false, CGROUP,
        companion false, variant 1;
    // Beside either security-hook backend: in-kernel opens by device number.
    "ag_kernel_open": KernelOpen, "cgroup/dev", CgroupDevice, sleepable false, SECURITY,
        companion true, variant 0;
    "ag_inode_unlink": InodeUnlink, "lsm/inode_unlink", Lsm, sleepable false, LSM,
        companion false, variant 0;
    "ag_fr_inode_unlink": InodeUnlink, "fmod_ret/security_inode_unlink", FmodRet,
        sleepable false, FMOD_RET, companion false, variant 0;
    "ag_inode_rmdir": InodeRmdir, "lsm/inode_rmdir", Lsm, sleepable false, LSM, companion false,
        variant 0;
    "ag_fr_inode_rmdir": InodeRmdir, "fmod_ret/security_inode_rmdir", FmodRet, sleepable false,
        FMOD_RET, companion false, variant 0;
    "ag_inode_rename": InodeRename, "lsm/inode_rename", Lsm, sleepable false, LSM,
        companion false, variant 0;
    "ag_fr_inode_rename": InodeRename, "fmod_ret/security_inode_rename", FmodRet,
        sleepable false, FMOD_RET, companion false, variant 0;
    // The pins guarded (bpf/guardian.h): asmguard's objects the daemon's alone.
    "ag_bpf": Bpf, "lsm/bpf", Lsm, sleepable false, LSM, companion false, variant 0;
    "ag_fr_bpf": Bpf, "fmod_ret/security_bpf", FmodRet, sleepable false, FMOD_RET,
        companion false, variant 0;
    "ag_bpf_map": BpfMap, "lsm/bpf_map", Lsm, sleepable false, LSM, companion false, variant 0;
    "ag_fr_bpf_map": BpfMap, "fmod_ret/security_bpf_map", FmodRet, sleepable false, FMOD_RET,
        companion false, variant 0;
    "ag_bpf_prog": BpfProg, "lsm/bpf_prog", Lsm, sleepable false, LSM, companion false,
        variant 0;
    "ag_fr_bpf_prog": BpfProg, "fmod_ret/security_bpf_prog", FmodRet, sleepable false,
        FMOD_RET, companion false, variant 0;
    "ag_file_receive": FileReceive, "lsm/file_receive", Lsm, sleepable false, LSM,
        companion false, variant 0;
    "ag_fr_file_receive": FileReceive, "fmod_ret/security_file_receive", FmodRet,
        sleepable false, FMOD_RET, companion false, variant 0;
    "ag_ptrace_access_check": PtraceAccessCheck, "lsm/ptrace_access_check", Lsm,
        sleepable false, LSM, companion false, variant 0;
    "ag_fr_ptrace_access_check": PtraceAccessCheck, "fmod_ret/security_ptrace_access_check",
        FmodRet, sleepable false, FMOD_RET, companion false, variant 0;
    "ag_inode_permission": InodePermission, "lsm/inode_permission", Lsm, sleepable false, LSM,
        companion false, variant 0;
    "ag_fr_inode_permission": InodePermission, "fmod_ret/security_inode_permission", FmodRet,
        sleepable false, FMOD_RET, companion false, variant 0;
    "ag_guardian_exit": TaskExit, "tp_btf/sched_process_exit", TpBtf, sleepable false,
        SECURITY, companion false, variant 0;
}

/// The row of program `name`, if it is one of ours.
pub fn program(name: &str) -> Option<&'static ProgDef> {
    PROGRAMS.iter().find(|p| p.name == name)
}

impl ProgDef {
    /// Whether `backend` loads it.
    pub fn loaded_by(&self, backend: Backend) -> bool {
        self.backends.contains(&backend)
    }

    /// Loaded by more than one backend (a companion, or a tracing program
    /// both security-hook backends attach): its pin says nothing about
    /// which backend is pinned, and belongs to none of them alone.
    pub fn shared(&self) -> bool {
        self.companion || self.backends.len() > 1
    }
}

/// The programs of `hook` that `backend` loads, preferred first (empty:
/// none).
pub fn programs_of(hook: Hook, backend: Backend) -> Vec<&'static str> {
    let mut rows: Vec<&ProgDef> = PROGRAMS
        .iter()
        .filter(|p| p.hook == hook && p.loaded_by(backend))
        .collect();
    rows.sort_by_key(|p| p.variant);
    rows.into_iter().map(|p| p.name).collect()
}

/// The companion programs ([`ProgDef::companion`]).
pub fn companions() -> impl Iterator<Item = &'static ProgDef> {
    PROGRAMS.iter().filter(|p| p.companion)
}

/// A BPF program attached to a security function: one of the filter's
/// (`status`'s `filter_programs`) or another tool's on the same function
/// (`filter_other_programs`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Program {
    /// Its name (`ag_file_open`; another tool's as the kernel has it).
    pub name: String,
    /// The kernel's program id (0: not known).
    pub id: u32,
    /// The hook it sits on; `null` where the kernel does not say which
    /// security function (before 5.13: every other LSM or `fmod_ret` program).
    pub hook: Option<Hook>,
}

/// What one of the filter's programs has run (`status`'s
/// `filter_program_runs`; counted while `kernel.bpf_stats_enabled` is 1).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProgramRuns {
    /// The program's name.
    pub name: String,
    /// Its total run time, in nanoseconds.
    pub run_time_ns: u64,
    /// How many times it ran.
    pub run_cnt: u64,
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
                .any(|p| program(p).map(|p| p.attach) == Some(Attach::TpBtf));
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
    }
    #[test]
    fn program_table_is_consistent() {
        for (i, p) in PROGRAMS.iter().enumerate() {
            assert!(
                PROGRAMS[..i].iter().all(|q| q.name != p.name),
                "{} twice",
                p.name
            );
            assert_eq!(program(p.name), Some(p));
            assert!(p.hook.def().is_some(), "{}: its hook has a row", p.name);
            let label = p.hook.as_str();
            match p.attach {
                Attach::Lsm if p.sleepable => assert_eq!(p.section, format!("lsm.s/{label}")),
                Attach::Lsm => assert_eq!(p.section, format!("lsm/{label}")),
                Attach::FmodRet => {
                    assert!(!p.sleepable, "no fmod_ret program on security_* may sleep");
                    assert_eq!(p.section, format!("fmod_ret/security_{label}"));
                }
                Attach::CgroupDevice => {
                    assert!(!p.sleepable);
                    assert_eq!(p.section, "cgroup/dev");
                }
                Attach::TpBtf => {
                    assert!(!p.sleepable);
                    assert!(p.section.starts_with("tp_btf/"), "{}", p.section);
                }
            }
            if p.companion {
                assert_eq!(p.attach, Attach::CgroupDevice);
                assert_eq!(p.backends, SECURITY);
            } else if p.attach == Attach::TpBtf {
                assert_eq!(p.backends, SECURITY, "{}", p.name);
            } else {
                let b = match p.attach {
                    Attach::Lsm => Backend::Lsm,
                    Attach::FmodRet => Backend::FmodRet,
                    Attach::CgroupDevice | Attach::TpBtf => Backend::CgroupDevice,
                };
                assert_eq!(p.backends, [b], "{}", p.name);
            }
        }
        // every hook has programs, variants 0.. without gaps, for each backend
        for d in HOOKS {
            let mut any = false;
            for b in Backend::ALL {
                let mut v: Vec<usize> = PROGRAMS
                    .iter()
                    .filter(|p| p.hook == d.hook && p.loaded_by(b))
                    .map(|p| p.variant)
                    .collect();
                v.sort_unstable();
                assert!(v.iter().copied().eq(0..v.len()), "{} {b:?}: {v:?}", d.label);
                any |= !v.is_empty();
            }
            assert!(any, "{}: no program", d.label);
        }
        assert_eq!(
            programs_of(Hook::FileIoctl, Backend::Lsm),
            ["ag_file_ioctl_s", "ag_file_ioctl"]
        );
        assert_eq!(
            programs_of(Hook::CgroupDevice, Backend::CgroupDevice),
            ["ag_cgroup_dev", "ag_cgroup_dev_ids"]
        );
        assert_eq!(
            programs_of(Hook::KernelOpen, Backend::FmodRet),
            ["ag_kernel_open"]
        );
        assert!(programs_of(Hook::KernelOpen, Backend::CgroupDevice).is_empty());
        assert_eq!(
            companions().map(|p| p.name).collect::<Vec<_>>(),
            ["ag_kernel_open"]
        );
        let shared: Vec<&str> = PROGRAMS
            .iter()
            .filter(|p| p.shared())
            .map(|p| p.name)
            .collect();
        assert_eq!(shared, ["ag_kernel_open", "ag_guardian_exit"]);
    }
}
