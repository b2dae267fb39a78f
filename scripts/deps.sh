#!/bin/bash
# Install, idempotently, everything the build, the host tests and the VM lab need on
# a fresh Debian 12 machine (apt-get only runs when something is missing).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=../tests/vm/deps.sh
. "$here/tests/vm/deps.sh"

# Host tests: real tools that make the foreign signatures inspect must recognise, the
# reference blkid, udev and systemd tools for the rules and unit tests, promtool.
HOST_TEST_PKGS="util-linux fdisk e2fsprogs xfsprogs btrfs-progs cryptsetup-bin lvm2
 ansible-core ansible-lint
 udev systemd prometheus
 mmdebstrap lintian rpm python3-rpm python3-venv"

# Build: libudev for the daemon's udev event source and database reads (udev crate).
BUILD_PKGS="libudev-dev"

# Benchmarks (scripts/bench-*.sh): BPF stats, libbpf-tools' biolatency, JSON.
BENCH_PKGS="bpftool libbpf-tools jq curl"

vm_deps $VM_BUILD_PKGS $BUILD_PKGS $VM_LAB_PKGS $HOST_TEST_PKGS $BENCH_PKGS

if ! command -v cargo >/dev/null; then
    echo "deps: cargo (Rust 1.82 or newer) is required and not on PATH" >&2
    exit 1
fi
