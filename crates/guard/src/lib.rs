//! The BPF side of asmguard in userspace: loading the CO-RE programs built from
//! `bpf/*.bpf.c`, filling their maps and keeping their links alive.
//!
//! Modules mirror the C files: [`guard`] is `bpf/guard.bpf.c` + `bpf/guard.h`
//! (the write filter, [`Guard`]), [`smoke`] is `bpf/smoke.bpf.c`
//! ([`SmokeFilter`]). Device numbers are asmguard-devices' [`KernelDev`].
//!
//! This crate is the loader, the ABI, the pins and the ring reader, nothing
//! else: the daemon's policy (per-disk modes, the allow-list's names, the
//! event history) lives in the daemon (`daemon/src/apply/filter/`).
//!
//! Not here: scanning disks and their generic nodes (asmguard-devices), latency tracing
//! (asmguard-metrics, `bpf/iolat.bpf.c`).

#![deny(missing_docs)]

pub mod guard;
pub mod pins;
pub mod smoke;
pub use asmguard_devices::devt::{DevtError, KernelDev};
pub use asmguard_filter_types::{FilterReason, LsmHint, NoFilter};
pub use guard::{
    bpf_lsm_hint, majors_text, pinned_backend, pinned_majors, remove_pins, Applied, Backend,
    BackendName, Command, Coverage, Denial, DevKey, DeviceType, EventReader, ExeId, Guard, Hook,
    IdentityReach, Mode, Operation, Options, PassthroughRule, Rule, Rules, SelfId, Stats, Tool,
};
pub use smoke::{ObjectStorage, SmokeFilter};

/// Errors of the BPF loader.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// libbpf refused to open, load or attach, or a map operation failed
    /// (asmguard-bpfload's error, shared with the latency tracer).
    #[error(transparent)]
    Bpf(#[from] asmguard_bpfload::Error),
    /// The program is not attached.
    #[error("the program is not attached")]
    NotAttached,
    /// A file system operation failed (pins, cgroup, /proc).
    #[error("{what}: {source}")]
    Io {
        /// What we were doing.
        what: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// No cgroup-v2 mount for the fallback backend.
    #[error("no cgroup2 file system is mounted (needed by the cgroup-device fallback)")]
    NoCgroup2,
    /// The BPF object lacks a map this code expects (a build mismatch).
    #[error("the guard BPF object has no map {0}")]
    MissingMap(String),
    /// A bad device path.
    #[error(transparent)]
    Devt(#[from] DevtError),
    /// A lock was poisoned by a panicking thread.
    #[error("internal lock poisoned")]
    Poisoned,
    /// No backend better than the pinned one loads (its errors).
    #[error("{0}")]
    NoBetterBackend(asmguard_filter_types::NoBetter),
    /// An allow rule set the filter cannot hold.
    #[error("allow rules: {0}")]
    Rules(String),
    /// The filter's objects are guarded for another live process (not a
    /// daemon: it would hold the pin directory's lock).
    #[error(
        "the filter's maps and links are guarded for pid {0}, which is not this daemon: \
         that process claimed them after the last daemon exited; stop it and start again"
    )]
    GuardHeld(u32),
    /// The kernel kept programs attached after their links were released.
    #[error("detaching the filter: {0}")]
    Detach(String),
}

impl Error {
    pub(crate) fn bpf(what: &'static str) -> impl FnOnce(libbpf_rs::Error) -> Self {
        move |source| Self::Bpf(asmguard_bpfload::context(what)(source))
    }
}
