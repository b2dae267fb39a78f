//! Compiles `bpf/iolat.bpf.c` into a CO-RE object and the libbpf-rs skeleton
//! `$OUT_DIR/iolat.skel.rs` (included by `src/bpf.rs`) with asmguard-bpf-build,
//! like every crate that loads a program. Without the `bpf` feature there is
//! nothing to build.

fn main() {
    #[cfg(feature = "bpf")]
    // v3: the in-flight cells' cmpxchg/xchg (Linux 5.12); the loader falls
    // back to programs without them on older kernels.
    asmguard_bpf_build::build_programs_with(
        &["iolat"],
        &["iolat.h", "iolat_slot.h", "asmguard_core.h"],
        &["-mcpu=v3"],
    );
}
