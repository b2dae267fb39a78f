#!/bin/bash
# tests/system/all.sh - the whole system lab: the package's host checks
# (tests/system/package.sh), then the booted Debian 12 host on each kernel line of
# SYS_LINES (default "6.1 6.12"), one after the other (TCG wants both host cores), then
# the container tests (lxc, podman, nspawn: their own 6.12 boot, "system-6.12-containers";
# SYS_CONTAINERS=0 skips them), then the two-node mode (run.sh pair, two guests sharing
# disks; SYS_PAIR=0 skips it).
#
#   tests/system/all.sh [TEST...]
#
# Prints each run's lines and summary, then one total line "system: N passed, M failed".
# Exit status 0 only if everything passed.

set -uo pipefail
SYS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$SYS_DIR/../vm/results.sh"
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT

if [ "${SYS_BUILD:-1}" = 1 ]; then
	echo "system: cargo build --release" >&2
	if ! (cd "$SYS_DIR/../.." && cargo build --release -q -p asmguardd -p asmguardctl) >&2; then
		echo "system: 0 passed, 1 failed (cargo build --release failed)"
		exit 1
	fi
fi
"$SYS_DIR/package.sh" | tee "$tmp"
vm_tally system-package "$tmp"
for line in ${SYS_LINES:-6.1 6.12}; do
	SYS_BUILD=0 "$SYS_DIR/run.sh" "$line" "$@" | tee "$tmp"
	vm_tally "system-$line" "$tmp"
done
# the container tests (issue 23: their header says named-only, so the runs above leave them out)
if [ "${SYS_CONTAINERS:-1}" = 1 ] && [ $# = 0 ]; then
	SYS_BUILD=0 SYS_RUN=6.12-containers SYS_TEST_TIMEOUT=${SYS_TEST_TIMEOUT:-300} \
		SYS_TIMEOUT=${SYS_TIMEOUT:-900} "$SYS_DIR/run.sh" 6.12 lxc podman nspawn | tee "$tmp"
	vm_tally system-6.12-containers "$tmp"
fi
# the two-node mode (its own tests; SYS_PAIR=0 skips it)
if [ "${SYS_PAIR:-1}" = 1 ] && [ $# = 0 ]; then
	SYS_BUILD=0 "$SYS_DIR/run.sh" pair | tee "$tmp"
	vm_tally system-pair "$tmp"
fi
printf '%s\n' "${TALLY_LINES[@]}"
echo "system: $TALLY_PASS passed, $TALLY_FAIL failed"
[ "$TALLY_FAIL" = 0 ]
