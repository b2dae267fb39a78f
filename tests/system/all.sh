#!/bin/bash
# tests/system/all.sh - the whole system lab: the package's host checks
# (tests/system/package.sh), then the booted Debian 12 host on each kernel line of
# SYS_LINES (default "6.12 6.1": the longest run first), the container tests (lxc, podman, nspawn: their own
# 6.12 boot, "system-6.12-containers"; SYS_CONTAINERS=0 skips them) and the two-node mode
# (run.sh pair, two guests sharing disks; SYS_PAIR=0 skips it), in two streams side by
# side (below).
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
out=$(mktemp -d)
trap 'rm -rf "$tmp" "$out"' EXIT
# The runs: two streams side by side, one guest each (a guest keeps about one host
# core busy; each takes one of the machine's two guest slots: tests/vm/results.sh
# lab_machine_lock): the package checks (no guest) then the container boot in one,
# the kernel lines one after the other in the other; and the pair beside them (two
# guests: both slots; it asks for them first, and the lock's turnstile lets it start
# as soon as the guests already running end, the VM lab's too when scripts/test.sh
# runs the labs side by side: last, it would wait for every other guest and then run
# alone). Each run's output is kept and printed in this order when all are done.
runs_a=(package) runs_b=() last=()
# 6.12 first: with the reboot test's two boots and `migrate` it is the longest run
# of either lab (501 s); asked for last, it ran alone after the VM lab had ended
# (about 5 minutes with a slot idle, 2026-11-27)
lines_=(${SYS_LINES:-6.12 6.1})
if [ "${SYS_CONTAINERS:-1}" = 1 ] && [ $# = 0 ]; then runs_a+=(containers); fi
for l in "${lines_[@]}"; do runs_b+=("line:$l"); done
# no container run: the lines share the two streams
if [ ${#runs_a[@]} = 1 ] && [ ${#runs_b[@]} -gt 1 ]; then
	runs_a+=("${runs_b[0]}")
	runs_b=("${runs_b[@]:1}")
fi
if [ "${SYS_PAIR:-1}" = 1 ] && [ $# = 0 ]; then last+=(pair); fi
order=("${runs_a[@]}" "${runs_b[@]}" "${last[@]}")

# the packages, images and kernels first, once (the streams would race to make them)
. "$SYS_DIR/env.sh"
vm_deps $VM_LAB_PKGS mmdebstrap e2fsprogs lintian rpm ||
	echo "system: could not install the lab's packages (each run reports it)" >&2
sys_image >/dev/null || echo "system: could not build the base image (each run reports it)" >&2
if [ "${SYS_CONTAINERS:-1}" = 1 ] && [ $# = 0 ]; then
	sys_image containers >/dev/null || echo "system: could not build the container image" >&2
fi
if [ "${SYS_PAIR:-1}" = 1 ] && [ $# = 0 ]; then
	sys_image pair >/dev/null || echo "system: could not build the pair's image" >&2
fi
for l in "${lines_[@]}" ${PAIR_LINE:-6.12}; do vm_fetch_kernel "$l" >/dev/null 2>&1 || true; done

# run_one RUN: one run, its output in $out/RUN (name: the tally's)
run_one() {
	local r=$1 f=$out/${1//[:\/]/_}
	shift
	case $r in
	package) "$SYS_DIR/package.sh" >"$f" 2>&1 ;;
	containers)
		SYS_BUILD=0 SYS_RUN=6.12-containers SYS_TEST_TIMEOUT=${SYS_TEST_TIMEOUT:-300} \
			SYS_TIMEOUT=${SYS_TIMEOUT:-900} "$SYS_DIR/run.sh" 6.12 lxc podman nspawn >"$f" ;;
	line:*) SYS_BUILD=0 "$SYS_DIR/run.sh" "${r#line:}" "$@" >"$f" ;;
	pair) SYS_BUILD=0 "$SYS_DIR/run.sh" pair >"$f" ;;
	esac
}
tally_name() {
	case $1 in
	package) echo system-package ;;
	containers) echo system-6.12-containers ;;
	line:*) echo "system-${1#line:}" ;;
	pair) echo system-pair ;;
	esac
}
t0=$SECONDS
# (LAB_PAIR_STARTED: the pair says it holds both slots, or, here, that it ended;
# scripts/test.sh names it for the VM lab too)
if [ ${#last[@]} -gt 0 ] && [ -z "${LAB_PAIR_STARTED:-}" ]; then export LAB_PAIR_STARTED=$out/pair.started; fi
for r in "${last[@]}"; do (run_one "$r" "$@"; [ -z "${LAB_PAIR_STARTED:-}" ] || : >"$LAB_PAIR_STARTED"
	echo "system: $r done at $((SECONDS - t0))s" >&2) & done
# the streams' guests queue behind the pair (it asked first), and so do their disks:
# made while the pair's disks are, they took the cores the pair's needed, and the
# slots stayed idle until the pair could start (below the pair's wait for its slots,
# theirs is the pair's whole run)
if [ ${#last[@]} -gt 0 ]; then
	w=0
	while [ ! -e "$LAB_PAIR_STARTED" ] && [ $w -lt 900 ]; do sleep 1; w=$((w + 1)); done
fi
# (each stream prepares below the guests' priority: lab_prep_nice; its guests run at
# theirs: lab_machine_lock)
(lab_prep_nice; for r in "${runs_a[@]}"; do run_one "$r" "$@"; done; echo "system: ${runs_a[*]} done at $((SECONDS - t0))s" >&2) &
(lab_prep_nice; for r in "${runs_b[@]}"; do run_one "$r" "$@"; done; echo "system: ${runs_b[*]} done at $((SECONDS - t0))s" >&2) &
wait
echo "system: all runs $((SECONDS - t0))s" >&2
for r in "${order[@]}"; do
	f=$out/${r//[:\/]/_}
	cat "$f"
	vm_tally "$(tally_name "$r")" "$f"
done
printf '%s\n' "${TALLY_LINES[@]}"
echo "system: $TALLY_PASS passed, $TALLY_FAIL failed"
[ "$TALLY_FAIL" = 0 ]
