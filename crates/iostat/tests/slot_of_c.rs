//! The BPF tracer's `slot_of()` (bpf/iolat_slot.h, plain C) against its Rust
//! twin, `hist::slot_of_ns`: the header is compiled natively with the C
//! compiler the build already needs (clang), run on every slot boundary, one
//! either side of it, the point where `ns * 1024` would wrap, and a spread of
//! other times, and every answer compared. The Rust twin saturates; the C side
//! must put what would wrap into the overflow slot, not slot 0.

use asmguard_iostat::hist::{slot_max_ns, slot_of_ns, FINITE_SLOTS, NSLOTS};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

const HARNESS: &str = r#"
typedef unsigned int __u32;
typedef unsigned long long __u64;
#include "iolat_slot.h"
#include <stdio.h>
int main(void)
{
	unsigned long long ns;
	while (scanf("%llu", &ns) == 1)
		printf("%llu\n", (unsigned long long)slot_of(ns));
	return 0;
}
"#;

fn bpf_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bpf")
}

fn times() -> Vec<u64> {
    let mut v = vec![0, 1, 2, 15, 16, 975, 976, 977, 1000, 4096, 1 << 20];
    for k in 0..FINITE_SLOTS {
        let max = slot_max_ns(k);
        v.extend([max.saturating_sub(1), max, max + 1, max + 2]);
    }
    // every power of two and its neighbours, to the top of the range
    for s in 0..64u32 {
        let p = 1u64 << s;
        v.extend([p - 1, p, p.saturating_add(1)]);
    }
    // the largest ns whose ns * 1024 + 999_999 does not wrap, and the next
    let last = (u64::MAX - 999_999) / 1024;
    v.extend([last, last + 1, u64::MAX - 1, u64::MAX]);
    // a deterministic spread (xorshift) over 1 ns .. 2^40 ns
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..20_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.push(x >> (24 + x % 20));
    }
    v
}

#[test]
fn c_slot_of_matches_rust_on_every_boundary() {
    let dir = std::env::temp_dir().join(format!("asmguard-slot-of-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("slot_of.c");
    let exe = dir.join("slot_of");
    std::fs::write(&src, HARNESS).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "clang".into());
    let out = Command::new(&cc)
        .args(["-O2", "-Wall", "-Werror", "-I"])
        .arg(bpf_dir())
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .output()
        .unwrap_or_else(|e| panic!("{cc} not runnable ({e}): scripts/deps.sh installs clang"));
    assert!(
        out.status.success(),
        "compiling bpf/iolat_slot.h with {cc} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let ns = times();
    let mut child = Command::new(&exe)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let input: String = ns.iter().map(|n| format!("{n}\n")).collect();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()).unwrap());
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(out.status.success());
    let got: Vec<usize> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(got.len(), ns.len(), "one answer per time");

    let mut seen = [false; NSLOTS];
    for (n, c) in ns.iter().zip(&got) {
        assert_eq!(*c, slot_of_ns(*n), "slot of {n} ns: C says {c}");
        seen[*c] = true;
    }
    // the inputs reach every slot, the overflow one included
    assert!(seen.iter().all(|&s| s), "slots never reached: {seen:?}");
    // and the boundaries are where the exported buckets say they are
    assert_eq!(slot_of_ns(976), 0);
    assert_eq!(slot_of_ns(977), 1);
    assert_eq!(slot_of_ns(1_000_000), 10);
    assert_eq!(slot_of_ns(1_000_001), 11);
    let _ = std::fs::remove_dir_all(&dir);
}
