//! The program table (one row per BPF program of `bpf/guard.bpf.c`: its
//! hook, section, attach type, sleepable, backends, companion, variant) is
//! plain data shared with the metrics: it lives beside the hook table in
//! [`asmguard_filter_types::hooks`]. This module names it for the loader,
//! the pins and the status, and the loader's tests check it against the compiled object.

pub use asmguard_filter_types::hooks::{
    companions, program, programs_of, Attach, ProgDef, PROGRAMS,
};
