#!/bin/bash
# tests/vm/all.sh - the whole VM lab: every kernel line, one after the other.
#
#   tests/vm/all.sh [TEST...]
#
# Builds the workspace once (cargo build --release; VM_BUILD=0 skips it), then
# runs tests/vm/run.sh for each line in VM_LINES (default "5.10 5.10+lsm 6.1 6.12 6.12-nobpf
# newest"),
# sequentially (TCG wants both host cores). Prints each run's lines and summary,
# then one total line "vm: N passed, M failed". Exit status 0 only if every
# run passed (make-friendly).

set -uo pipefail
VM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
VM_ROOT=$(cd "$VM_DIR/../.." && pwd)
lines=${VM_LINES:-5.10 5.10+lsm 6.1 6.12 6.12-nobpf newest}

. "$VM_DIR/deps.sh"
total_pass=0 total_fail=0 summaries=()
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT

if ! vm_deps; then
	echo "vm: 0 passed, 1 failed (could not install the lab's packages)"
	exit 1
fi
if [ "${VM_BUILD:-1}" = 1 ]; then
	echo "vm: cargo build --release ${VM_CARGO_ARGS:---workspace --bins}" >&2
	# shellcheck disable=SC2086
	if ! (cd "$VM_ROOT" && cargo build --release -q ${VM_CARGO_ARGS:---workspace --bins}) >&2; then
		echo "vm: 0 passed, 1 failed (cargo build --release failed)"
		exit 1
	fi
fi

for line in $lines; do
	VM_BUILD=0 VM_DEPS_SKIP=1 "$VM_DIR/run.sh" "$line" "$@" | tee "$tmp"
	summary=$(grep -E "^vm-${line//+/\\+}: [0-9]+ passed, [0-9]+ failed$" "$tmp" | tail -n 1)
	if [ -z "$summary" ]; then
		summary="vm-$line: 0 passed, 1 failed"
	fi
	summaries+=("$summary")
	p=$(echo "$summary" | sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed/\1/')
	f=$(echo "$summary" | sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed/\2/')
	total_pass=$((total_pass + p))
	total_fail=$((total_fail + f))
done

# The lab's own contract (a panic before /init is retried and reported), when
# the whole lab runs.
if [ $# = 0 ] && [ "${VM_SELFTEST:-1}" = 1 ]; then
	VM_BUILD=0 VM_DEPS_SKIP=1 "$VM_DIR/selftest.sh" "${lines%% *}" | tee "$tmp"
	summary=$(grep -E "^vm-selftest: [0-9]+ passed, [0-9]+ failed$" "$tmp" | tail -n 1)
	[ -n "$summary" ] || summary="vm-selftest: 0 passed, 1 failed"
	summaries+=("$summary")
	total_pass=$((total_pass + $(echo "$summary" | sed -E 's/.*: ([0-9]+) passed.*/\1/')))
	total_fail=$((total_fail + $(echo "$summary" | sed -E 's/.*, ([0-9]+) failed/\1/')))
fi

printf '%s\n' "${summaries[@]}"
echo "vm: $total_pass passed, $total_fail failed"
[ "$total_fail" = 0 ]
