//! asmguardctl: the control CLI of asmguard.
//!
//! Subcommands that change state talk to `asmguardd` over its unix socket; `inspect`
//! is an offline, read-only reader (like `kfed read` or `blkid -p`) that works on a
//! device or an image file without the daemon.

mod cli;
mod exit;
mod inspect;

use clap::Parser;

fn main() {
    let cli = cli::Cli::parse();
    let result = match cli.command {
        cli::Command::Inspect(args) => inspect::run(&args),
    };
    match result {
        Ok(()) => std::process::exit(exit::OK),
        Err(e) => {
            eprintln!("asmguardctl: {}", e.message);
            std::process::exit(e.code);
        }
    }
}
