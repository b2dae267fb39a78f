//! Errors of the tracer and the exporter.

/// Errors of the BPF side (and of a histogram source).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// libbpf refused to open, load or attach, or a map operation failed
    /// (asmguard-bpfload's error, shared with the write filter).
    #[cfg(feature = "bpf")]
    #[error(transparent)]
    Bpf(#[from] asmguard_bpfload::Error),
    /// Neither attach mode worked.
    #[error("cannot trace the block layer: tp_btf: {btf}; raw_tp: {raw}")]
    Attach {
        /// Why tp_btf failed.
        btf: Box<Error>,
        /// Why raw_tp failed.
        raw: Box<Error>,
    },
    /// Every disk slot is taken.
    #[error("cannot trace more than {0} disks")]
    Full(u32),
    /// A map value did not have the size of `bpf/iolat.h`'s types.
    #[error("unexpected size {0} of a map value (bpf/iolat.h and the Rust side disagree)")]
    Layout(usize),
}
