//! asmguardctl: the control CLI of asmguard.
//!
//! Subcommands that change state talk to `asmguardd` over its unix socket; `inspect`
//! is an offline, read-only reader (like `kfed read` or `blkid -p`) that works on a
//! device or an image file without the daemon. Every error is one line on stderr and
//! a documented exit code (see `exit.rs` and the man page).

mod cli;
mod client;
mod commands;
mod exit;
mod inspect;
mod iostat;
mod reclaim;
mod size;

use clap::Parser;

fn main() {
    let cli = cli::Cli::parse();
    match commands::run(&cli) {
        Ok(()) => std::process::exit(exit::OK),
        Err(e) => {
            eprintln!("asmguardctl: {}", e.message);
            std::process::exit(e.code);
        }
    }
}
