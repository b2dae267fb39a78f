//! The program table: one row per BPF program of `bpf/guard.bpf.c`, with
//! its properties written down rather than read from its name: the hook it
//! judges for, its ELF section, how it attaches, whether it is sleepable,
//! which backend loads it (or whether it is a companion of the security-hook
//! backends) and which variant of its hook it is. The loader, the pins and
//! the status read [`PROGRAMS`]; a test checks it against the programs
//! actually in the compiled object, both ways, so a program without a row
//! (or a row without a program) fails it.
//!
//! Adding a program: its `SEC(...)` in `bpf/guard.bpf.c` and one row below
//! (a new hook also needs its row in [`super::hooks`]).
//!
//! Not here: what a hook is (code, metric label, operation names:
//! [`super::hooks`]).

use super::hooks::Hook;
use super::types::Backend;

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
    /// The hook it judges for (its row in [`super::hooks::HOOKS`]).
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

#[cfg(test)]
mod tests {
    use super::super::hooks::HOOKS;
    use super::*;

    #[test]
    fn table_is_consistent() {
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
