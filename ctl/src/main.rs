//! asmguardctl: the control CLI of asmguard.
//!
//! Subcommands that change state talk to `asmguardd` over its unix socket; `inspect`
//! is an offline, read-only reader (like `kfed read` or `blkid -p`) that works on a
//! device or an image file without the daemon. Every error is one line on stderr and
//! a documented exit code (see `exit.rs` and the man page).

#[macro_use]
mod out;

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
        leave("oracleasm", oracleasm::run_standalone(&a, &paths));
    }
    let cli = commands::parse_args();
    leave("asmguardctl", commands::run(&cli, &paths));
}

/// Exits with the command's code, after its one-line error if it failed; an
/// output that could not be written (but to a reader that quit early) is that
/// error: `NAME: cannot write the output: WHY`, exit 1.
fn leave(name: &str, r: Result<(), exit::CliError>) -> ! {
    if let Some(why) = out::failure() {
        errln!("{name}: cannot write the output: {why}");
        std::process::exit(exit::FAILED);
    }
    match r {
        Ok(()) => std::process::exit(exit::OK),
        Err(e) => {
            if !e.message.is_empty() {
                errln!("{name}: {}", e.message);
            }
            std::process::exit(e.code);
        }
    }
}
