//! Compiles `bpf/iolat.bpf.c` into a CO-RE object and the libbpf-rs skeleton
//! `$OUT_DIR/iolat.skel.rs` (included by `src/bpf.rs`) with asmguard-bpf-build,
//! like every crate that loads a program. Without the `bpf` feature there is
//! nothing to build.

fn main() {
    #[cfg(feature = "bpf")]
    asmguard_bpf_build::build_programs(&["iolat"], &["iolat.h", "asmguard_core.h"]);
}
