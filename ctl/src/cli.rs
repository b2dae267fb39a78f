//! The clap definitions: the single source of the man page and the completions.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "asmguardctl",
    version,
    about = "Label, list, protect and inspect Oracle ASM disks (asmguard control CLI)",
    long_about = "asmguardctl drives asmguardd over its unix socket. `inspect` works offline, \
                  without the daemon, on a block device or an image file.\n\n\
                  Exit codes: 0 success; 1 the operation failed; 2 bad usage; \
                  3 unusable input (no such path, wrong type, too small, permission denied)."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Read a disk or image offline and show its label, ASM disk header and signatures.
    Inspect(InspectArgs),
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// Block device or image file to read (never written).
    pub path: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}
