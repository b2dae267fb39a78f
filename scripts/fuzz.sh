#!/bin/bash
# Run each cargo-fuzz target for FUZZ_SECONDS (default 30). Needs a nightly toolchain
# (`rustup toolchain list`); installs cargo-fuzz from crates.io when it is missing.
# Without nightly it says so and exits 0: fuzzing is a search, not a gate.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
secs=${FUZZ_SECONDS:-30}
if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    echo "fuzz: skipped: no nightly toolchain on this machine"
    exit 0
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked >/dev/null
fi
for t in $(cargo fuzz list); do
    mkdir -p "corpus/$t"
    echo "fuzz: $t for ${secs}s"
    cargo +nightly fuzz run "$t" "corpus/$t" -- -max_total_time="$secs" -max_len=16384 2>&1 \
        | grep -E '^(#[0-9]+ *DONE|Done|==[0-9]+==|SUMMARY|thread .* panicked)' || true
    # cargo fuzz exits non-zero on a crash; re-check for artifacts.
    if ls "artifacts/$t"/crash-* >/dev/null 2>&1; then
        echo "fuzz: $t: crash found: fuzz/artifacts/$t" >&2
        exit 1
    fi
done
echo "fuzz: no crash"
