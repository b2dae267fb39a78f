//! Compiles every `bpf/*.bpf.c` of the workspace into a CO-RE BPF object and a
//! libbpf-rs skeleton `$OUT_DIR/<name>.skel.rs` (included by `src/skel.rs`).
//!
//! Needs `clang` (any version with the BPF target, 14 or newer) on `PATH`, or in
//! `$CLANG`. The libbpf headers come from the vendored libbpf (libbpf-cargo puts
//! them on the include path), so no `libbpf-dev` is needed.

use std::env;
use std::ffi::OsStr;
use std::fs;
use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

fn main() {
    let manifest_dir =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let bpf_dir = manifest_dir.join("../../bpf");
    let bpf_dir = bpf_dir.canonicalize().unwrap_or(bpf_dir);
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let clang = env::var_os("CLANG").unwrap_or_else(|| "clang".into());

    println!("cargo:rerun-if-changed={}", bpf_dir.display());
    println!("cargo:rerun-if-env-changed=CLANG");

    let mut sources: Vec<PathBuf> = fs::read_dir(&bpf_dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", bpf_dir.display()))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .collect();
    sources.sort();

    for path in &sources {
        let name = path.file_name().and_then(OsStr::to_str).unwrap_or_default();
        if name.ends_with(".h") || name.ends_with(".bpf.c") {
            println!("cargo:rerun-if-changed={}", path.display());
        }
        let Some(stem) = name.strip_suffix(".bpf.c") else {
            continue;
        };
        let skel = out_dir.join(format!("{stem}.skel.rs"));
        SkeletonBuilder::new()
            .source(path)
            .clang(&clang)
            // libbpf-cargo already passes `-g -O2 -target bpf -D__TARGET_ARCH_<arch>`.
            .clang_args([
                OsStr::new("-Wall"),
                OsStr::new("-Werror"),
                OsStr::new("-I"),
                bpf_dir.as_os_str(),
            ])
            .build_and_generate(&skel)
            .unwrap_or_else(|e| panic!("building BPF program {}: {e:#}", path.display()));
    }
}
