//! Compiles `bpf/iolat.bpf.c` into a CO-RE BPF object and the libbpf-rs skeleton
//! `$OUT_DIR/iolat.skel.rs` (included by `src/bpf.rs`), the same way
//! `crates/guard/build.rs` does for the other programs.
//!
//! Needs `clang` with the BPF target (14 or newer) on `PATH`, or in `$CLANG`. The
//! libbpf headers come from the libbpf that libbpf-sys vendors. Without the
//! `bpf` feature there is nothing to build.

#[cfg(not(feature = "bpf"))]
fn main() {}

#[cfg(feature = "bpf")]
fn main() {
    use libbpf_cargo::SkeletonBuilder;
    use std::env;
    use std::ffi::OsStr;
    use std::path::PathBuf;

    let manifest_dir =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let bpf_dir = manifest_dir.join("../../bpf");
    let bpf_dir = bpf_dir.canonicalize().unwrap_or(bpf_dir);
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let clang = env::var_os("CLANG").unwrap_or_else(|| "clang".into());

    println!("cargo:rerun-if-env-changed=CLANG");
    for file in ["iolat.bpf.c", "iolat.h", "asmguard_core.h"] {
        println!("cargo:rerun-if-changed={}", bpf_dir.join(file).display());
    }

    let source = bpf_dir.join("iolat.bpf.c");
    SkeletonBuilder::new()
        .source(&source)
        .clang(&clang)
        .clang_args([
            OsStr::new("-Wall"),
            OsStr::new("-Werror"),
            OsStr::new("-I"),
            bpf_dir.as_os_str(),
        ])
        .build_and_generate(out_dir.join("iolat.skel.rs"))
        .unwrap_or_else(|e| panic!("building BPF program {}: {e:#}", source.display()));
}
