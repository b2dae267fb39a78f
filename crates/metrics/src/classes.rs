//! The classes a traced I/O falls in besides its operation: its size class
//! and, for a failed one, its error kind (`bpf/iolat.h`); the tracer records
//! them and the exporter names them.

/// `size` label of `asmguard_io_latency_seconds` and `asmguard_io_bytes_total`:
/// single-block I/Os (at most `[metrics] single_block_bytes`, the database
/// block size) and multiblock ones (`bpf/iolat.h`, enum iolat_size).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SizeClass {
    /// At most `single_block_bytes`: Oracle's 'db file sequential read'.
    Single = 0,
    /// Larger: 'db file scattered read', direct path reads, backups.
    Multi = 1,
}

impl SizeClass {
    /// Both classes, in `enum iolat_size` order.
    pub const ALL: [SizeClass; 2] = [SizeClass::Single, SizeClass::Multi];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            SizeClass::Single => "single",
            SizeClass::Multi => "multi",
        }
    }
}

/// `kind` label of `asmguard_io_errors_total`: what the block layer's status of
/// an errored request (`blk_status_t`) says (`bpf/iolat.h`, enum iolat_err;
/// the discriminants are its values).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IoErrorKind {
    /// `BLK_STS_IOERR`: an I/O error without more detail.
    Ioerr = 0,
    /// `BLK_STS_MEDIUM`: unrecovered read or write error of the medium.
    Medium = 1,
    /// `BLK_STS_TRANSPORT`: the path failed (link down, transport error).
    Transport = 2,
    /// `BLK_STS_TARGET`: the target refused the command (critical target error).
    Target = 3,
    /// `BLK_STS_TIMEOUT`: the command timed out.
    Timeout = 4,
    /// `BLK_STS_NOSPC`: out of space (a thin-provisioned LUN).
    Nospc = 5,
    /// `BLK_STS_NOTSUPP`: the operation is not supported.
    Notsupp = 6,
    /// Any other status (reservation conflict, protection, resource, ...).
    Other = 7,
}

impl IoErrorKind {
    /// Every kind, in `enum iolat_err` order.
    pub const ALL: [IoErrorKind; 8] = [
        IoErrorKind::Ioerr,
        IoErrorKind::Medium,
        IoErrorKind::Transport,
        IoErrorKind::Target,
        IoErrorKind::Timeout,
        IoErrorKind::Nospc,
        IoErrorKind::Notsupp,
        IoErrorKind::Other,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            IoErrorKind::Ioerr => "ioerr",
            IoErrorKind::Medium => "medium",
            IoErrorKind::Transport => "transport",
            IoErrorKind::Target => "target",
            IoErrorKind::Timeout => "timeout",
            IoErrorKind::Nospc => "nospc",
            IoErrorKind::Notsupp => "notsupp",
            IoErrorKind::Other => "other",
        }
    }
}
