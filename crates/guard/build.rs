//! Compiles the BPF programs this crate loads into CO-RE objects and
//! skeletons (see asmguard-bpf-build): `smoke` (src/smoke.rs) and `guard`
//! (src/guard/: the skeleton's types in abi.rs, the object embedded by
//! loader.rs), and `bench` (empty LSM programs, loaded only by the
//! asmguard-bench-empty benchmark tool), and `cmdclass` (the passthrough
//! command rule alone, run by the commands_host test).

fn main() {
    asmguard_bpf_build::build_programs(
        &["smoke", "guard", "bench", "cmdclass"],
        &[
            "asmguard_core.h",
            "guard.h",
            "passthrough.h",
            "identity.h",
            "devices.h",
            "pins.h",
            "guardian.h",
            "ioctls.h",
            "rules.h",
        ],
    );
}
