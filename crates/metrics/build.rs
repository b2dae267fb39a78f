//! Compiles `bpf/iolat.bpf.c` (and the benchmarks' `iolat_calibrate.bpf.c`)
//! into CO-RE objects and the libbpf-rs skeletons `$OUT_DIR/<name>.skel.rs`
//! (included by `src/bpf.rs`) with asmguard-bpf-build,
//! like every crate that loads a program. Without the `bpf` feature there is
//! nothing to build.

fn main() {
    #[cfg(feature = "bpf")]
    // v3: the in-flight cells' cmpxchg/xchg (Linux 5.12); the loader falls
    // back to programs without them on older kernels.
    asmguard_bpf_build::build_programs_with(
        &["iolat", "iolat_calibrate"],
        &[
            "iolat.h",
            "iolat_attach.h",
            "iolat_slot.h",
            "asmguard_core.h",
        ],
        &["-mcpu=v3"],
    );
}
