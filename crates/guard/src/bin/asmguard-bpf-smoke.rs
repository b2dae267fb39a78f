//! `asmguard-bpf-smoke DEVICE... [-- COMMAND [ARG...]]`
//!
//! Loads the smoke LSM program (`bpf/smoke.bpf.c`), puts the given block
//! devices into its map and attaches it: from then on every write-open of those
//! devices fails with EPERM, for every user including root.
//!
//! Without a command it prints `ready <maj:min>...` on stdout and holds the
//! program attached until it is killed (the kernel detaches it when the last
//! reference, this process, goes away). With a command it runs the command
//! while attached, then detaches, prints `denied=<N>` (opens denied meanwhile)
//! and exits with the command's exit status.

use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Command, ExitCode};

use asmguard_guard::{KernelDev, ObjectStorage, SmokeFilter};

const USAGE: &str = "usage: asmguard-bpf-smoke DEVICE... [-- COMMAND [ARG...]]";

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(msg) => {
            eprintln!("asmguard-bpf-smoke: error: {msg}");
            ExitCode::from(1)
        }
    }
}

fn run() -> Result<ExitCode, String> {
    let mut args = std::env::args_os().skip(1);
    let mut devices = Vec::new();
    let mut command = Vec::new();
    for arg in args.by_ref() {
        if arg == "--" {
            command.extend(args.by_ref());
            break;
        }
        if arg == "-h" || arg == "--help" {
            println!("{USAGE}");
            return Ok(ExitCode::SUCCESS);
        }
        devices.push(PathBuf::from(arg));
    }
    if devices.is_empty() {
        return Err(format!("no device given\n{USAGE}"));
    }

    let devs = devices
        .iter()
        .map(|p| KernelDev::of_block_device(p).map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?;

    let mut storage = ObjectStorage::new();
    let mut filter = SmokeFilter::load(&mut storage).map_err(|e| e.to_string())?;
    for dev in &devs {
        filter.protect(*dev).map_err(|e| e.to_string())?;
    }
    filter.attach().map_err(|e| e.to_string())?;

    let list: Vec<String> = devs.iter().map(ToString::to_string).collect();
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready {}", list.join(" ")).map_err(|e| e.to_string())?;
    out.flush().map_err(|e| e.to_string())?;
    drop(out);

    let Some((program, rest)) = command.split_first() else {
        // Hold the link until we are killed.
        loop {
            std::thread::park();
        }
    };

    let status = Command::new(program)
        .args(rest)
        .status()
        .map_err(|e| format!("cannot run {}: {e}", program.to_string_lossy()))?;
    filter.detach();
    let denied = filter.denied().map_err(|e| e.to_string())?;
    println!("denied={denied}");
    let code = match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(sig)) => 128 + sig,
        (None, None) => 1,
    };
    Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
}
