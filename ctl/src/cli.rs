//! The clap definitions: the single source of the man page and the completions.
//! The global options ([`Global`]) and the subcommands' argument structs are
//! here, importing nothing of the crate; the command line itself (`Cli`) and
//! the list of subcommands (`Command`) sit beside what each does, in
//! `commands.rs`, so that a new socket operation's subcommand is one variant
//! and one arm there.

use clap::builder::TypedValueParser;
use clap::Args;
use std::path::PathBuf;

pub const EXIT_CODES: &str = "Exit codes: 0 success; 1 the operation failed (I/O error, \
     read-back mismatch, daemon bug, or the output could not be written: a full disk; a \
     reader that quits early, as grep -q or head, is no error and keeps the command's \
     code); 2 bad usage; 3 unusable input (no such device or \
     label, not a block device, excluded by the configuration, invalid label, too small, \
     permission denied on a file); 4 refused (the disk holds data, an ASM disk header or \
     another label, is in use, the label is taken, or the socket peer may not do this); \
     5 asmguardd not reachable (not running, wrong --socket, protocol mismatch, timeout); \
     6 busy (another request is labelling that disk or label: try again); 7 (status) the \
     daemon runs but no write filter protects the disks: UNPROTECTED, with the reason, or a \
     protected disk is exposed (a process mapped it shared-writable before it was protected: \
     named with its pid); \
     8 (import) a disk the old configuration gave to ASM is left unprotected (each is \
     named with the command that fixes it; --allow-unprotected when that is intended); \
     9 (import) every disk is protected, but two rules give one disk two names: it is \
     named after its first rule (NAME CONFLICT on its line; --write still writes).";

/// The options every subcommand takes: the daemon's socket and how long to
/// wait for its answer.
#[derive(Debug, Args)]
pub struct Global {
    /// The daemon's socket.
    #[arg(
        long,
        global = true,
        env = "ASMGUARD_SOCKET",
        value_name = "PATH",
        default_value = asmguard_proto::DEFAULT_SOCKET
    )]
    pub socket: PathBuf,
    /// Seconds to wait for the daemon's answer.
    #[arg(long, global = true, value_name = "SECONDS", default_value_t = 120)]
    pub timeout: u64,
}

#[derive(Debug, Args)]
pub struct LabelArgs {
    /// The label: 1 to 24 characters of A-Z, 0-9 and _, starting with a letter
    /// (stored upper-case).
    pub label: String,
    /// The block device (a multipath device rather than one of its paths).
    pub device: PathBuf,
    /// Erase foreign signatures (data!), replace another label, or label a disk
    /// another process holds open for writing.
    #[arg(long)]
    pub force: bool,
    /// Keep an existing ASM disk header and only set the label in it (and in its copy).
    #[arg(long)]
    pub migrate: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct UnlabelArgs {
    pub label: String,
    /// Also when the ASM disk header says the disk is a disk-group member.
    #[arg(long)]
    pub force: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RenameArgs {
    pub old: String,
    pub new: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct IostatArgs {
    /// Only this label's disk.
    pub label: Option<String>,
    /// Seconds between reports.
    #[arg(long, default_value_t = 1.0)]
    pub interval: f64,
    /// Stop after this many reports (0: until interrupted).
    #[arg(long, default_value_t = 0)]
    pub count: u64,
    /// Also one row per path of each disk traced on its paths (the sd paths
    /// of a dm-multipath device, the hidden paths of an NVMe head): a slow
    /// or failing path stands out.
    #[arg(long)]
    pub paths: bool,
    /// Print one JSON object per report.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ViewArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// AFD's view, for AFD runbooks: `lsdsk` as `asmcmd afd_lsdsk`, `status` as
    /// `asmcmd afd_state`.
    #[arg(long, conflicts_with = "json")]
    pub afd: bool,
}

#[derive(Debug, Args)]
pub struct JsonArg {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct FilterArgs {
    /// enable (enforce), disable (off) or audit (log and allow).
    #[arg(value_parser = clap::builder::PossibleValuesParser::new(["enable", "disable", "audit"])
        .try_map(|s| s.parse::<asmguard_proto::FilterAction>()))]
    pub action: asmguard_proto::FilterAction,
    /// One disk's label; all disks when absent.
    pub label: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct EventsArgs {
    /// Keep printing new events as they come (until interrupted).
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// One JSON object per line instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ReclaimArgs {
    /// Labels of the disks (or --diskgroup).
    pub labels: Vec<String>,
    /// Every managed disk of this ASM disk group.
    #[arg(long, value_name = "NAME")]
    pub diskgroup: Option<String>,
    /// Report the bytes that would go back to the array; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// At most this many MiB per second (large UNMAPs hurt array latency).
    #[arg(long, value_name = "MiB/s")]
    pub rate: Option<f64>,
    /// discard (BLKDISCARD: UNMAP/TRIM) or zeroout (BLKZEROOUT: for arrays with
    /// zero detection and no UNMAP).
    #[arg(long, default_value = "discard",
        value_parser = clap::builder::PossibleValuesParser::new(["discard", "zeroout"])
            .try_map(|s| s.parse::<asmguard_proto::ReclaimMethod>()))]
    pub method: asmguard_proto::ReclaimMethod,
    /// Seconds to watch the ASM heartbeat and mount stamp before any write
    /// (ASM rewrites the heartbeat every few seconds while mounted: keep it
    /// above twice that interval).
    #[arg(long, value_name = "SECONDS", default_value_t = 7.0)]
    pub watch: f64,
    /// Online: hand back everything above each disk's ASM size (after
    /// `ALTER DISKGROUP ... RESIZE ALL SIZE n`), with the disk group mounted;
    /// stops if the size grows.
    #[arg(long)]
    pub above_size: bool,
    /// Halve the rate while the disk's p99 latency (the tracer's) is above
    /// this multiple of its p99 before the run, and raise it back (never above
    /// --rate) once it is well under; 0 keeps the rate fixed.
    #[arg(long, value_name = "MULTIPLE", default_value_t = 4.0)]
    pub latency_limit: f64,
    /// Print JSON instead of text (progress as JSON lines on stderr).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// Block device or image file to read (never written).
    pub path: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct UdevRulesArgs {
    /// Configuration file to take owner, group and mode from.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// bash, zsh, fish, elvish or powershell.
    pub shell: clap_complete::Shell,
}
