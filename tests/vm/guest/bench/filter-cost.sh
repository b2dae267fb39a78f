#!/bin/sh
# filter-cost: a benchmark, not a test (scripts/bench-filter.sh runs it; the
# lab's test runs never do: it lives outside tests/). Prints its figures as
# "VMINFO filter-cost bench ..." lines. With the BPF LSM or fmod_ret (the same
# rules on the security_* functions, where bpf is not an active LSM):
#  (a) ns per call (bpf_stats) of the filter's programs when grid, allowed,
#      writes a managed disk with pwrite and with io_uring;
#  (b) ns per call of each filter program on files that are not devices (tmpfs,
#      a pipe, /dev/zero -> /dev/null), next to an EMPTY LSM program on the same
#      hook and to the filter's old file_permission path (a hash lookup per
#      device write, bench_file_permission_hash), all loaded by
#      asmguard-bench-empty and attached during the same calls as (a) and (b);
#  (d) ns per call of file_open on the intruder's refused write-opens;
#  (c) syscall-bench on those files with the filter on vs no program attached
#      (asmguardctl filter disable), ROUNDS alternating rounds: per round the
#      on/off ratio of ns per call; median, min and max.
# On the cgroup-device fallback (no BPF LSM): the program runs per open of a
# device node, never per read or write: (a) and (b) become ns per write-open of
# /dev/null (a major with no managed node), of an unmanaged loop device (the
# managed disk's major: a hash lookup) and of the managed disk by grid
# (allowed: the whole verdict), and (c) the on/off ratio of /dev/null opens.
# Under TCG every figure is emulated time: only ratios measured side by side
# in one run say anything (see BENCHMARKS.md).
. /vmtests/lib.sh

ROUNDS=15
N=20000
NOPEN=2000
C="asmguardctl --socket /run/asmguard/asmguard.sock"

command -v bpftool >/dev/null || { fail bench "bpftool missing (VM_EXTRA_TOOLS=bpftool)"; vm_exit; }

D=$(new_loop 64 bench-disk) || { fail bench "losetup: $D"; vm_exit; }
agd_config /tmp/bench.toml "${D#/dev/}" 'filter.allow_groups=[]'
: >/tmp/bench-agd.log
agd_start /tmp/bench.toml /tmp/bench-agd.log
$C label BENCH "$D" >/dev/null 2>&1 || { fail bench "label: $(tail -n 3 /tmp/bench-agd.log)"; vm_exit; }
chown grid "$D"
chmod 666 "$D" # the filter, not the mode bits, must stop the intruder
if as_user intruder dd if=/dev/zero of="$D" bs=4096 count=1 oflag=direct 2>/dev/null; then
	fail bench "the filter does not protect $D: nothing to measure"
	vm_exit
fi
info "bench kernel $(uname -r) backend $($C status | grep -i 'filter backend')"

# stats: "name run_time_ns run_cnt" of the filter's programs and of the other
# programs on its hooks (the reference ones), bpf_stats on. The filter's come
# from the daemon (status --json: where the pins are guarded no other task may
# open them by id, and `bpftool prog show` stops at the first it cannot open);
# the others from bpftool by the ids status names.
stats() {
	_j=$($C status --json 2>/dev/null | tr -d '\n')
	echo "$_j" | sed -n 's/.*"filter_program_runs": *\[\([^]]*\)\].*/\1/p' |
		grep -o '"name": *"[^"]*", *"run_cnt": *[0-9]*, *"run_time_ns": *[0-9]*' |
		sed 's/"name": *"\([^"]*\)", *"run_cnt": *\([0-9]*\), *"run_time_ns": *\([0-9]*\)/\1 \3 \2/'
	for _id in $(echo "$_j" | sed -n 's/.*"filter_other_programs": *\[\([^]]*\)\].*/\1/p' |
		grep -o '"id": *[0-9]*' | tr -dc '0-9\n'); do
		bpftool prog show id "$_id" | awk '/ name /{n="";t=0;c=0
			for(i=1;i<=NF;i++){if($i=="name")n=$(i+1);if($i=="run_time_ns")t=$(i+1);if($i=="run_cnt")c=$(i+1)}
			print n, t, c}'
	done
}
# per_call BEFORE AFTER LABEL: one info line per program that ran in between:
# "bench LABEL PROGRAM calls=N ns_per_call=T"
per_call() {
	awk -v label="$3" 'NR==FNR {t[$1]=$2; c[$1]=$3; next}
		{dc=$3-c[$1]; if (dc > 0) printf "%s %s calls=%d ns_per_call=%.1f\n", label, $1, dc, ($2-t[$1])/dc}' "$1" "$2" |
		while read -r l; do info "bench $l"; done
}
# measure LABEL CMD...: CMD under bpf_stats, then per_call
measure() {
	_l=$1; shift
	stats >/tmp/bench-s0
	"$@" >/tmp/bench-out 2>&1 || fail "bench-$_l" "$(cat /tmp/bench-out)"
	stats >/tmp/bench-s1
	per_call /tmp/bench-s0 /tmp/bench-s1 "$_l"
}

echo 1 >/proc/sys/kernel/bpf_stats_enabled
if vm_full; then
	WORKLOADS="tmpfs pipe null"
	# the reference programs (empty; the old file_permission path) beside the filter's
	asmguard-bench-empty >/tmp/bench-empty.out 2>&1 &
	empty=$!
	wait_for_line /tmp/bench-empty.out '^ready' 30 || fail bench-empty "$(cat /tmp/bench-empty.out)"
	# (a) the allowed writer on the managed disk
	measure disk-pwrite as_user grid syscall-bench pwrite "$D" 2000
	# (past the label, as syscall-bench's pwrite: from block 0 fio wiped it, the
	# daemon let the disk go, and the intruder's open below was not denied)
	measure disk-io_uring as_user grid fio --name=w --filename="$D" --ioengine=io_uring --rw=write \
		--bs=4k --direct=1 --offset=1M --size=8M --iodepth=8
	# (d) a denial: the intruder's write-open refused (the verdict, its event)
	measure disk-denied as_user intruder syscall-bench denied "$D" "$NOPEN"
	# (b) files that are not devices
	measure tmpfs syscall-bench tmpfs /tmp/bench-file "$N"
	measure pipe syscall-bench pipe "$N"
	measure null syscall-bench null "$N"
	# opens of /dev/null: a path walk (inode_permission with MAY_EXEC alone,
	# the guardian's pin rule's early return) and the open's own check
	# (MAY_READ: the superblock compared with bpffs')
	measure open-null syscall-bench open /dev/null "$N"
	kill "$empty" 2>/dev/null
	wait "$empty" 2>/dev/null
else
	WORKLOADS="open-null"
	U=$(new_loop 8 bench-other) || fail bench "losetup: $U"
	chmod 666 "$U"
	measure open-null syscall-bench open /dev/null "$NOPEN"
	measure open-unmanaged syscall-bench open "$U" "$NOPEN"
	measure open-disk-grid as_user grid syscall-bench open "$D" "$NOPEN"
fi
echo 0 >/proc/sys/kernel/bpf_stats_enabled

# (c) filter on vs no program attached, alternating
run_modes() { # MODE: one syscall-bench per workload, "MODE workload ns" lines
	for w in $WORKLOADS; do
		case $w in
		tmpfs) out=$(syscall-bench tmpfs /tmp/bench-file "$N") ;;
		open-null) out=$(syscall-bench open /dev/null "$NOPEN") ;;
		*) out=$(syscall-bench $w "$N") ;;
		esac
		echo "$1 $w ${out##*ns_per_call=}"
	done
}
: >/tmp/bench-rounds
r=1
while [ $r -le $ROUNDS ]; do
	if [ $((r % 2)) = 1 ]; then order="on off"; else order="off on"; fi
	for m in $order; do
		if [ $m = on ]; then $C filter enable >/dev/null; else $C filter disable >/dev/null; fi
		run_modes $m | sed "s/^/$r /" >>/tmp/bench-rounds
	done
	r=$((r + 1))
done
$C filter enable >/dev/null
for w in $WORKLOADS; do
	# per round: on/off; then median, min, max over the rounds
	ratios=$(awk -v w=$w '$3==w {v[$1" "$2]=$4; r[$1]=1}
		END {for (k in r) printf "%.4f\n", v[k" on"]/v[k" off"]}' /tmp/bench-rounds | sort -g)
	n=$(echo "$ratios" | wc -l)
	med=$(echo "$ratios" | awk -v n="$n" '{a[NR]=$1} END {print (n%2) ? a[(n+1)/2] : (a[n/2]+a[n/2+1])/2}')
	on=$(awk -v w=$w '$2=="on" && $3==w {print $4}' /tmp/bench-rounds | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
	off=$(awk -v w=$w '$2=="off" && $3==w {print $4}' /tmp/bench-rounds | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
	info "bench onoff $w rounds=$n on_ns=$on off_ns=$off ratio_median=$med ratio_min=$(echo "$ratios" | head -n 1) ratio_max=$(echo "$ratios" | tail -n 1)"
done
# the filter removed through the daemon (its pins are guarded), then the daemon
$C filter disable >/dev/null 2>&1
kill "$agd" 2>/dev/null; wait "$agd" 2>/dev/null
pass bench "figures printed ($ROUNDS rounds)"
vm_exit
