//! `asmguard-bench-empty`: a benchmark tool, never used by the product.
//!
//! Loads the empty LSM programs of `bpf/bench.bpf.c` on the write filter's
//! hooks (file_open, file_permission, file_ioctl, mmap_file, file_mprotect),
//! attaches them, prints `ready` and holds them until it is killed. Their
//! bpf_stats figures are the floor a filter program is compared with
//! (`scripts/bench-filter.sh`).

use std::io::Write;
use std::mem::MaybeUninit;
use std::process::ExitCode;

use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};

#[allow(missing_docs, clippy::all, clippy::pedantic)]
mod skel {
    include!(concat!(env!("OUT_DIR"), "/bench.skel.rs"));
}

fn run() -> Result<(), String> {
    if std::env::args().len() > 1 {
        return Err("takes no arguments (usage: asmguard-bench-empty)".into());
    }
    let mut storage = MaybeUninit::uninit();
    let open = skel::BenchSkelBuilder::default()
        .open(&mut storage)
        .map_err(|e| format!("opening the bench BPF object: {e}"))?;
    let mut skel = open
        .load()
        .map_err(|e| format!("loading the empty LSM programs: {e}"))?;
    skel.attach()
        .map_err(|e| format!("attaching the empty LSM programs (is bpf in the LSM list?): {e}"))?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready").map_err(|e| e.to_string())?;
    out.flush().map_err(|e| e.to_string())?;
    drop(out);
    // Hold the links until we are killed.
    loop {
        std::thread::park();
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("asmguard-bench-empty: error: {msg}");
            ExitCode::from(1)
        }
    }
}
