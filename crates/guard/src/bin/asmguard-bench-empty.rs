//! `asmguard-bench-empty`: a benchmark tool, never used by the product.
//!
//! Loads the empty programs of `bpf/bench.bpf.c` on the write filter's
//! hooks (file_open, file_permission, file_ioctl, mmap_file, file_mprotect,
//! inode_permission):
//! the LSM ones where `bpf` is an active LSM, else the `fmod_ret` ones on the
//! `security_*` functions (the filter's backend there); attaches them, prints
//! `ready` and holds them until it is killed. Their bpf_stats figures are the
//! floor a filter program is compared with (`scripts/bench-filter.sh`).

use std::io::Write;
use std::mem::MaybeUninit;
use std::process::ExitCode;

use libbpf_rs::skel::{OpenSkel, Skel};

#[allow(missing_docs, clippy::all, clippy::pedantic)]
mod skel {
    include!(concat!(env!("OUT_DIR"), "/bench.skel.rs"));
}

fn run() -> Result<(), String> {
    if std::env::args().len() > 1 {
        return Err("takes no arguments (usage: asmguard-bench-empty)".into());
    }
    let mut storage = MaybeUninit::uninit();
    let mut open = asmguard_bpfload::open_skel(
        skel::BenchSkelBuilder::default(),
        &mut storage,
        "opening the bench BPF object",
    )
    .map_err(|e| e.to_string())?;
    let lsm = std::fs::read_to_string(asmguard_paths::Paths::default().securityfs().join("lsm"))
        .is_ok_and(|l| l.trim().split(',').any(|x| x == "bpf"));
    for mut prog in open.open_object_mut().progs_mut() {
        let fmod_ret = prog.name().to_string_lossy().starts_with("bench_fr_");
        prog.set_autoload(fmod_ret != lsm);
    }
    let mut skel = asmguard_bpfload::load_skel(open, "loading the empty LSM programs")
        .map_err(|e| e.to_string())?;
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
