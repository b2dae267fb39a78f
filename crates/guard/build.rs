//! Compiles the BPF programs this crate loads (`bpf/<name>.bpf.c` for each name
//! in [`PROGRAMS`]) into CO-RE BPF objects and libbpf-rs skeletons
//! `$OUT_DIR/<name>.skel.rs` (included by `src/lib.rs`); the object itself is
//! kept as `$OUT_DIR/<name>.bpf.o` (embedded by `src/filter.rs`).
//!
//! Programs loaded by other crates are compiled by those crates' build scripts
//! the same way (`bpf/iolat.bpf.c`: crates/metrics), so a change to one of
//! them never breaks this crate's build.
//!
//! Needs `clang` with the BPF target (14 or newer) on `PATH`, or in `$CLANG`.
//! The libbpf headers (`<bpf/bpf_helpers.h>` ...) come from the libbpf that
//! libbpf-sys vendors: libbpf-cargo extracts them and adds them to the include
//! path, so no `libbpf-dev` is needed. libbpf-cargo also passes
//! `-g -O2 -target bpf -D__TARGET_ARCH_<arch>`.

use std::env;
use std::ffi::OsStr;
use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

/// The programs of `bpf/` that this crate loads.
const PROGRAMS: &[&str] = &["smoke", "guard"];

/// Headers of `bpf/` the programs above include.
const HEADERS: &[&str] = &["asmguard_core.h", "guard.h"];

fn main() {
    let manifest_dir =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let bpf_dir = manifest_dir.join("../../bpf");
    let bpf_dir = bpf_dir.canonicalize().unwrap_or(bpf_dir);
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let clang = env::var_os("CLANG").unwrap_or_else(|| "clang".into());

    println!("cargo:rerun-if-env-changed=CLANG");
    for header in HEADERS {
        println!("cargo:rerun-if-changed={}", bpf_dir.join(header).display());
    }

    for name in PROGRAMS {
        let source = bpf_dir.join(format!("{name}.bpf.c"));
        println!("cargo:rerun-if-changed={}", source.display());
        SkeletonBuilder::new()
            .source(&source)
            .obj(out_dir.join(format!("{name}.bpf.o")))
            .clang(&clang)
            .clang_args([
                OsStr::new("-Wall"),
                OsStr::new("-Werror"),
                OsStr::new("-I"),
                bpf_dir.as_os_str(),
            ])
            .build_and_generate(out_dir.join(format!("{name}.skel.rs")))
            .unwrap_or_else(|e| panic!("building BPF program {}: {e:#}", source.display()));
    }
}
