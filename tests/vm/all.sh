#!/bin/bash
# tests/vm/all.sh - the whole VM lab: every kernel line, its boots scheduled so that
# both host cores stay busy.
#
#   tests/vm/all.sh [TEST...]
#
# Builds the workspace once (cargo build --release; VM_BUILD=0 skips it), then for the
# lines in VM_LINES (default "5.10 5.10+lsm 6.1 6.12 6.12-nobpf newest"; VM_SELFTEST=0
# leaves out the lab's self-test, =always runs it with named tests too) runs
# tests/vm/run.sh in parts (VM_PART, README "How the lab schedules boots"):
#   1. prepare, line after line, in the background: the kernel download and the
#      initramfs, once per line, and the line's plan (which tests boot
#      multi-threaded, which one-thread), the lines that boot everything one-thread
#      first;
#   2. every boot, multi-threaded (-smp 2) and one-thread (-accel tcg,thread=single),
#      from one queue as soon as its line is prepared, two at a time (VM_SLOTS), the
#      longest waiting first: a multi-threaded
#      guest keeps about one host core busy (its tests wait on the daemon, udev and
#      sleeps far more than they compute: 45-50 % of the two cores measured with one
#      guest running), so two guests side by side finish in the time of the longer
#      one (6.1 and 6.12 together: 410 s wall, against 364 s + 427 s one after the
#      other).
# Then prints each line's result lines and its summary lines ("vm-<line>: K n/a",
# "vm-<line>: N passed, M failed", as run.sh prints them for a whole line), in line
# order, and one total line "vm: N passed, M failed". Console logs: tests/vm/work/<line>.log
# and <line>.one-thread.log, as run.sh keeps them. Exit status 0 only if every run
# passed (make-friendly).

set -uo pipefail
VM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
VM_ROOT=$(cd "$VM_DIR/../.." && pwd)
VM_WORK=${VM_WORK:-$VM_DIR/work}
lines=${VM_LINES:-5.10 5.10+lsm 6.1 6.12 6.12-nobpf newest}

. "$VM_DIR/deps.sh"
. "$VM_DIR/results.sh"
total_pass=0 total_fail=0 summaries=()
parts=$(mktemp -d)
trap 'rm -rf "$parts"' EXIT

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
# The runs' parts share work/ (common.cpio.gz, the kernel cache): this run holds the
# checkout's lock for all of them; run.sh takes the machine's guest slots per boot.
mkdir -p "$VM_WORK"
lab_checkout_lock vm "$VM_WORK" "VM lab"
export VM_BUILD=0 VM_DEPS_SKIP=1 VM_WORK

# part LINE PART: run.sh's PART of LINE, its output in $parts/LINE.PART (its progress
# on stderr as it comes: every line names its line).
part() {
	VM_PART=$2 "$VM_DIR/run.sh" "$1" "${@:3}" >"$parts/$1.$2"
}

# 0. With LAB_PAIR_STARTED (scripts/test.sh), nothing before that file exists (900 s
# at most): the system lab's pair needs both slots at once and goes first, while they
# are both free (asked for later, it would hold the turnstile with one slot idle until
# the VM guest in the other ended: a one-thread line, about 400 s); and the lines'
# preparations (initramfs images) wait too: made while the pair makes its disks, they
# took the cores the pair needed, and the slots stayed idle until it could start. The
# pair's run leaves them minutes to be made before a slot is free.
if [ -n "${LAB_PAIR_STARTED:-}" ]; then
	echo "vm: boots wait until the system lab's pair holds both slots ($LAB_PAIR_STARTED)" >&2
	w=0
	while [ ! -e "$LAB_PAIR_STARTED" ] && [ $w -lt 900 ]; do sleep 1; w=$((w + 1)); done
	echo "vm: boots start (after ${w}s)" >&2
fi
# 1. prepare, line after line, in the background: the lines that boot every test
# one-thread first (their boots are the longest, and the queue starts them while the
# others prepare); each prepared line's boots go into the queue file with their
# estimate (the queue's order only, longest first: a multi-threaded boot's tests take
# about 25 s each; a one-thread boot counts 120 s per test, so the lines that boot
# everything one-thread, about 380-400 s measured, go first). The initramfs's common
# part (busybox, tools, our binaries) is built for the first line and reused by the
# others (VM_COMMON_REUSE: this run holds the checkout's lock, nothing else builds it).
t0=$SECONDS
queue=$parts/queue
: >"$queue"
order=$(for l in $lines; do
	case $l in 5.10* | *-nobpf) echo "0 $l" ;; *) echo "1 $l" ;; esac
done | sort -s -n -k1,1 | cut -d' ' -f2)
(
	# below the guests' priority (lab_prep_nice): the pair's are booting
	lab_prep_nice
	reuse=0
	for line in $order; do
		VM_COMMON_REUSE=$reuse part "$line" prepare "$@" || continue
		plan=$VM_WORK/$line/plan
		# the lab's own contract (tests/vm/selftest.sh: a panic before /init is
		# retried and reported), when the whole lab runs: two short boots of the first
		# line prepared, queued with the rest
		if [ $reuse = 0 ] && { [ $# = 0 ] && [ "${VM_SELFTEST:-1}" = 1 ] || [ "${VM_SELFTEST:-1}" = always ]; }; then
			echo "30 $line selftest" >>"$queue"
		fi
		reuse=1
		n=$(sed -n 's/^multi=//p' "$plan" | tr ',' '\n' | grep -c .)
		[ "$n" = 0 ] || echo "$((n * 25)) $line multi" >>"$queue"
		n=$(sed -n 's/^single=//p' "$plan" | tr ',' '\n' | grep -c .)
		[ "$n" = 0 ] || echo "$((n * 120)) $line single" >>"$queue"
	done
	echo "$((SECONDS - t0))" >"$parts/prepared"
) &

# 2. the boots: each as soon as its line is prepared and one of VM_SLOTS is free,
# the longest of those waiting first.
declare -A started=()
running=()
while :; do
	alive=()
	for pid in "${running[@]}"; do kill -0 "$pid" 2>/dev/null && alive+=("$pid"); done
	running=("${alive[@]}")
	next=""
	while read -r _ line kind; do
		[ -n "${started["$line $kind"]:-}" ] || { next="$line $kind"; break; }
	done < <(sort -rn "$queue")
	if [ -z "$next" ]; then
		# every boot queued so far has started: done once every line is prepared
		[ -f "$parts/prepared" ] && break
		sleep 1
		continue
	fi
	if [ ${#running[@]} -ge "${VM_SLOTS:-2}" ]; then
		sleep 1
		continue
	fi
	started["$next"]=1
	read -r line kind <<<"$next"
	echo "vm: $line: the $kind boot" >&2
	if [ "$kind" = selftest ]; then
		sp=multi
		grep -Eq '^single=(.*,)?smoke(,|$)' "$VM_WORK/$line/plan" && sp=single
		VM_SELFTEST_PART=$sp "$VM_DIR/selftest.sh" "$line" >"$parts/selftest" &
	else
		part "$line" "$kind" "$@" &
	fi
	running+=("$!")
done
wait
t_prepare=$(cat "$parts/prepared")
t_boots=$((SECONDS - t0))
echo "vm: prepare ${t_prepare}s, prepare and boots (${VM_SLOTS:-2} at a time) ${t_boots}s" >&2

sum() {
	local p=$1 re=$2
	shift 2
	cat "$@" 2>/dev/null | awk -v p="$p: " -v re="^[0-9]+$re\$" \
		'index($0, p) == 1 { r = substr($0, length(p) + 1); if (r ~ re) n += r + 0 } END { print n + 0 }'
}

# Each line as run.sh prints a whole one: its parts' result lines, then the summaries.
for line in $lines; do
	name=vm-$line
	files=()
	for p in prepare multi single; do [ -f "$parts/$line.$p" ] && files+=("$parts/$line.$p"); done
	cat "${files[@]}" | awk -v p="$name: " 'index($0, p) != 1'
	passed=0 failed=0
	for f in "${files[@]}"; do
		s=$(grep -E "^${name//+/\\+}: [0-9]+ passed, [0-9]+ failed$" "$f" | tail -n 1)
		if [ -z "$s" ]; then
			# a part that printed no summary (killed, or a bug) counts as a failure
			echo "FAIL $name ${f##*.} part printed no summary"
			failed=$((failed + 1))
			continue
		fi
		passed=$((passed + $(echo "$s" | sed -E 's/.*: ([0-9]+) passed.*/\1/')))
		failed=$((failed + $(echo "$s" | sed -E 's/.*, ([0-9]+) failed$/\1/')))
	done
	echo "$name: $(sum "$name" ' n/a' "${files[@]}") n/a"
	xfail=$(sum "$name" ' known gaps.*' "${files[@]}")
	[ "$xfail" = 0 ] || echo "$name: $xfail known gaps (XFAIL: protection missing, issue open)"
	summary="$name: $passed passed, $failed failed"
	echo "$summary"
	summaries+=("$summary")
	total_pass=$((total_pass + passed))
	total_fail=$((total_fail + failed))
done

# The lab's own contract (its boots ran in the queue), when the whole lab runs.
if [ $# = 0 ] && [ "${VM_SELFTEST:-1}" = 1 ] || [ "${VM_SELFTEST:-1}" = always ]; then
	cat "$parts/selftest" 2>/dev/null
	summary=$(grep -E "^vm-selftest: [0-9]+ passed, [0-9]+ failed$" "$parts/selftest" | tail -n 1)
	[ -n "$summary" ] || summary="vm-selftest: 0 passed, 1 failed"
	summaries+=("$summary")
	total_pass=$((total_pass + $(echo "$summary" | sed -E 's/.*: ([0-9]+) passed.*/\1/')))
	total_fail=$((total_fail + $(echo "$summary" | sed -E 's/.*, ([0-9]+) failed/\1/')))
fi

printf '%s\n' "${summaries[@]}"
echo "vm: $total_pass passed, $total_fail failed"
[ "$total_fail" = 0 ]
