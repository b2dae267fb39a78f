//! The one way asmguard's build scripts compile BPF programs: each
//! `bpf/<name>.bpf.c` into a CO-RE object `$OUT_DIR/<name>.bpf.o` and a
//! libbpf-rs skeleton `$OUT_DIR/<name>.skel.rs`, with `-Wall -Werror` and
//! `bpf/` on the include path, rebuilt when the source, a listed header or
//! `$CLANG` changes.
//!
//! Each crate builds only the programs it loads, so a change to one program
//! never breaks another crate's build.
//!
//! Needs `clang` with the BPF target (14 or newer) on `PATH`, or in `$CLANG`.
//! The libbpf headers (`<bpf/bpf_helpers.h>` ...) come from the libbpf that
//! libbpf-sys vendors: libbpf-cargo extracts them and adds them to the include
//! path, so no `libbpf-dev` is needed. libbpf-cargo also passes
//! `-g -O2 -target bpf -D__TARGET_ARCH_<arch>`.
//!
//! Not for: anything at run time (opening and loading: asmguard-bpfload;
//! which programs load: each crate's own tables).

use std::env;
use std::ffi::OsStr;
use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

/// Compiles `bpf/<name>.bpf.c` for each of `programs` (the workspace's `bpf/`
/// directory, found from the calling crate's manifest directory two levels
/// up); `headers` are the files of `bpf/` they include. Panics with the
/// compiler's message on failure (this runs in a build script).
pub fn build_programs(programs: &[&str], headers: &[&str]) {
    build_programs_with(programs, headers, &[]);
}

/// [`build_programs`] with more clang arguments (`-mcpu=v3` for a program
/// that needs the BPF atomics of Linux 5.12 and loads a fallback elsewhere).
pub fn build_programs_with(programs: &[&str], headers: &[&str], extra: &[&str]) {
    let manifest_dir =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let bpf_dir = manifest_dir.join("../../bpf");
    let bpf_dir = bpf_dir.canonicalize().unwrap_or(bpf_dir);
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let clang = env::var_os("CLANG").unwrap_or_else(|| "clang".into());

    println!("cargo:rerun-if-env-changed=CLANG");
    for header in headers {
        println!("cargo:rerun-if-changed={}", bpf_dir.join(header).display());
    }
    for name in programs {
        let source = bpf_dir.join(format!("{name}.bpf.c"));
        println!("cargo:rerun-if-changed={}", source.display());
        SkeletonBuilder::new()
            .source(&source)
            .obj(out_dir.join(format!("{name}.bpf.o")))
            .clang(&clang)
            .clang_args(
                [
                    OsStr::new("-Wall"),
                    OsStr::new("-Werror"),
                    OsStr::new("-I"),
                    bpf_dir.as_os_str(),
                ]
                .into_iter()
                .chain(extra.iter().map(OsStr::new)),
            )
            .build_and_generate(out_dir.join(format!("{name}.skel.rs")))
            .unwrap_or_else(|e| panic!("building BPF program {}: {e:#}", source.display()));
    }
}
