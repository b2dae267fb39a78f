//! The write filter: `bpf/guard.bpf.c` (and its ABI header `bpf/guard.h`)
//! loaded, attached and pinned. The submodules mirror the C side by job:
//!
//! - [`types`]: the vocabulary (devices, executables, modes, backends,
//!   coverage), a leaf every other module imports;
//! - [`abi`]: the layouts and codes of `bpf/guard.h` (checked, not retyped);
//! - [`hooks`]: the hook table -- one row per hook;
//! - [`programs`]: the program table -- one row per BPF program, its
//!   section, attach type, sleepability, backend or companion role;
//! - [`ioctls`]: the names of the ioctls the filter reports;
//! - [`commands`]: the SG_IO / NVMe admin commands of the read class;
//! - [`events`]: decoding an `ag_event` record into a [`Denial`];
//! - `guardian`: the daemon's claim on its own objects (`bpf/guardian.h`):
//!   who may get them by id, write them, detach them;
//! - [`pins`]: bpffs, securityfs and cgroup plumbing, and the pin directory;
//! - [`loader`]: [`Guard`]: backend choice, loading, attaching, the maps;
//! - [`ring`]: [`EventReader`], the ring buffer reader;
//! - [`rules`]: the allow rules (`bpf/rules.h`'s twin): [`Rules`] to maps.
//!
//! [`Guard::open`] picks the backend (the BPF LSM programs when `bpf` is an
//! active LSM and they load and attach; otherwise the cgroup-device program on
//! the cgroup-v2 root, open-time only), and pins maps and links under
//! `/sys/fs/bpf/asmguard` (`maps/<name>`, `links/<program>`). Pins keep protection on when
//! the process dies (`kill -9`); the next [`Guard::open`] re-adopts them: it
//! reuses the pinned maps and keeps every pinned link, attaching only what is
//! missing, so there is never a moment without the filter. [`Guard::uninstall`]
//! detaches everything and removes the pins.
//!
//! **Adding an LSM hook** = the C program in `bpf/guard.bpf.c` with its
//! `AG_HOOK_*` code in `bpf/guard.h`, plus one row in [`hooks::HOOKS`] (enum
//! variant, code, metric label, optional BTF symbol, operation name) and one
//! row per program in [`programs::PROGRAMS`] (section, attach type,
//! sleepable, backend): both tables are in `asmguard_filter_types::hooks`,
//! plain data the metrics share. Loading (optional or not), the stats indices, the metric
//! labels, event decoding and the layout tests all follow from that row; a
//! test fails when `guard.h` and the table disagree.
//!
//! Not here: what the daemon knows about labels and disks (the daemon's
//! `filter` module), device numbers ([`crate::KernelDev`]).

pub mod abi;
mod adopt;
pub mod commands;
pub mod events;
mod guardian;
pub mod hooks;
pub mod ioctls;
pub mod loader;
pub mod maps;
mod mapwatch;
pub mod pins;
mod pinwatch;
pub mod programs;
pub mod ring;
pub mod rules;
pub mod types;

pub use asmguard_filter_types::denial::{Command, Denial, DeviceType, Operation};
pub use commands::{CmdSet, PassthroughRule};
pub use hooks::{Hook, HookDef, Op, HOOKS};
pub use ioctls::ioctl_name;
pub use loader::{majors_text, pinned_majors, Guard, Options, Stats};
pub use pins::{
    active_lsms, bpf_lsm_hint, bpf_lsm_hint_for, cgroup2_root, pinned_backend, remove_pins,
};
pub use programs::{Attach, ProgDef, PROGRAMS};
pub use ring::EventReader;
pub use rules::{Rule, Rules, SelfId, Tool, MAX_RULES};
pub use types::{Applied, Backend, BackendName, Coverage, DevKey, ExeId, IdentityReach, Mode};
