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
mod import;
mod inspect;
mod iostat;
mod oracleasm;
mod reclaim;
mod size;

use clap::Parser;

fn main() {
    // The system's roots: built here once, passed down.
    let paths = asmguard_paths::Paths::default();
    // Run as `oracleasm` (a symlink /usr/sbin/oracleasm): ASMLib's command line.
    let argv0 = std::env::args_os().next().unwrap_or_default();
    if std::path::Path::new(&argv0).file_name() == Some(std::ffi::OsStr::new("oracleasm")) {
        let a = oracleasm::Standalone::parse();
        match oracleasm::run_standalone(&a, &paths) {
            Ok(()) => std::process::exit(exit::OK),
            Err(e) => {
                if !e.message.is_empty() {
                    eprintln!("oracleasm: {}", e.message);
                }
                std::process::exit(e.code);
            }
        }
    }
    let cli = commands::parse_args();
    match commands::run(&cli, &paths) {
        Ok(()) => std::process::exit(exit::OK),
        Err(e) => {
            if !e.message.is_empty() {
                eprintln!("asmguardctl: {}", e.message);
            }
            std::process::exit(e.code);
        }
    }
}
