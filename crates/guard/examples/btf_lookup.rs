//! What the loader's test for an optional hook costs: whether a symbol is
//! in the kernel's BTF, asked once per optional hook at every daemon start.
//! A compare of the name at every offset of the 5-6 MiB file (what the
//! loader did) beside `kernel_btf_has` (memmem), side by side in one run.
//!
//! `cargo run --release -p asmguard-guard --example btf_lookup -- [ROUNDS]`
//! reads this host's `/sys/kernel/btf/vmlinux` and asks for the optional
//! hooks' symbols, ROUNDS times (default 3).

use asmguard_guard::guard::pins::kernel_btf_has;
use std::time::Instant;

/// The loader's test before: the NUL-framed name compared at every offset.
fn every_offset(btf: &[u8], name: &str) -> bool {
    let needle = [&[0u8][..], name.as_bytes(), &[0u8][..]].concat();
    btf.windows(needle.len()).any(|w| w == needle.as_slice())
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(3);
    let paths = asmguard_paths::Paths::default();
    let btf = match std::fs::read(paths.vmlinux_btf()) {
        Ok(b) => b,
        Err(e) => {
            eprintln!(
                "btf_lookup: cannot read {}: {e}",
                paths.vmlinux_btf().display()
            );
            std::process::exit(1);
        }
    };
    // the symbols one LSM start asks for (its optional hooks), one absent
    let names = [
        "bpf_lsm_file_ioctl_compat",
        "bpf_lsm_uring_cmd",
        "bpf_lsm_bpf_map",
        "bpf_lsm_bpf_prog",
        "bpf_lsm_file_receive",
        "bpf_lsm_ptrace_access_check",
        "bpf_lsm_no_such_hook",
    ];
    println!(
        "kernel BTF: {} bytes; {} names a round",
        btf.len(),
        names.len()
    );
    println!("| round | every offset | memmem | ratio |");
    println!("|---|---|---|---|");
    for r in 1..=rounds {
        let t = Instant::now();
        let a: Vec<bool> = names.iter().map(|n| every_offset(&btf, n)).collect();
        let slow = t.elapsed();
        let t = Instant::now();
        let b: Vec<bool> = names.iter().map(|n| kernel_btf_has(&btf, n)).collect();
        let fast = t.elapsed();
        assert_eq!(a, b, "the two tests disagree");
        println!(
            "| {r} | {:.1} ms | {:.2} ms | {:.0}x |",
            slow.as_secs_f64() * 1e3,
            fast.as_secs_f64() * 1e3,
            slow.as_secs_f64() / fast.as_secs_f64().max(1e-9)
        );
    }
}
