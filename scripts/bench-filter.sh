#!/usr/bin/env bash
# Benchmark (not a pass/fail test): the write filter's cost per call, in the VM
# lab (the host refuses BPF LSM programs), on each kernel line. Boots each line
# with tests/vm/run.sh and the guest benchmark tests/vm/guest/bench/filter-cost.sh,
# which prints its figures as "VMINFO filter-cost bench ..." lines, and turns
# them into Markdown in target/bench/filter/results.md.
#
#   scripts/bench-filter.sh [LINE...]     (default: 5.10+lsm 6.1 6.12 6.12-nobpf newest 5.10)
#
# Per line with the BPF LSM:
#  (a) ns per call (bpf_stats) of each filter program during grid's allowed
#      pwrite and io_uring writes to a managed disk;
#  (b) ns per call of each filter program on files that are not devices
#      (tmpfs, pipe, /dev/zero -> /dev/null), next to the empty LSM program on
#      the same hook and to the filter's old file_permission path (a hash
#      lookup per device write) (bpf/bench.bpf.c), during the same calls;
#  (c) syscall-bench on those files, filter on vs no program attached, 15
#      alternating rounds: median, min and max of the on/off ratio.
# The same on the lines where bpf is not an active LSM (5.10, 6.12-nobpf), with
# the fmod_ret programs (ag_fr_*) and empty fmod_ret programs (bench_fr_*); with
# both 6.12 and 6.12-nobpf, a table of the two attach kinds side by side.
# (d) on every line: ns per call of file_open on the intruder's refused opens.
# The VM runs take turns with other lab runs (flock /tmp/asmguard-vm.lock).
set -uo pipefail
cd "$(dirname "$0")/.."
LINES=${*:-5.10+lsm 6.1 6.12 6.12-nobpf newest 5.10}
OUT=target/bench/filter
mkdir -p "$OUT"
# BENCH_TABLES_ONLY=1: no VM runs, the tables from the figures of earlier runs
[ "${BENCH_TABLES_ONLY:-0}" = 1 ] || cargo build --release --workspace --bins >&2 || exit 1
for line in $LINES; do
    [ "${BENCH_TABLES_ONLY:-0}" = 1 ] && break
    echo "bench-filter: $line ..." >&2
    # one-thread TCG: the bench attaches and detaches programs under load,
    # which multi-threaded TCG has crashed (BENCHMARKS.md); VM_ACCEL=tcg overrides
    VM_ACCEL=${VM_ACCEL:-tcg,thread=single} \
    LAB_GUEST_SLOTS=2 VM_BUILD=0 VM_EXTRA_TOOLS=bpftool VM_TEST_TIMEOUT=500 VM_TIMEOUT=600 \
        flock /tmp/asmguard-vm.lock tests/vm/run.sh "$line" filter-cost >"$OUT/$line.run" 2>&1
    # (a line whose filter is fmod_ret boots every test one-thread: its other log)
    log=tests/vm/work/$line.log
    [ "tests/vm/work/$line.one-thread.log" -nt "$log" ] && log=tests/vm/work/$line.one-thread.log
    tr -d '\r' <"$log" | sed -n 's/^VMINFO filter-cost bench //p' >"$OUT/$line.txt"
    grep -E '^(FAIL|N/A)' "$OUT/$line.run" >&2
done

# field KEY LINE: the value of KEY=... in LINE
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"; }
{
echo "#### Run of $(date -u '+%Y-%m-%d %H:%M UTC') (QEMU -accel ${VM_ACCEL:-tcg,thread=single}, 2 vCPUs, on a $(nproc)-CPU host)"
for line in $LINES; do
    f="$OUT/$line.txt"
    echo
    echo "**$line**: $(sed -n 's/^kernel //p' "$f" | head -n 1)"
    if ! grep -q '^onoff ' "$f"; then
        echo
        echo "no figures (see $OUT/$line.run)"
        continue
    fi
    echo
    echo "| workload | program | calls | ns per call | empty program on the same hook | program - empty | old path (hash lookup per device write) | old - empty |"
    echo "|---|---|---|---|---|---|---|---|"
    while read -r w prog rest; do
        case $prog in ag_*) ;; *) continue ;; esac
        hook=${prog#ag_}
        e=$(field ns_per_call "$(awk -v w="$w" -v p="bench_$hook" '$1 == w && $2 == p' "$f")")
        o=$(field ns_per_call "$(awk -v w="$w" -v p="bench_${hook}_hash" '$1 == w && $2 == p' "$f")")
        ns=$(field ns_per_call "$rest")
        d=$([ -n "$e" ] && awk -v a="$ns" -v b="$e" 'BEGIN {printf "%+.1f", a - b}')
        od=$([ -n "$e" ] && [ -n "$o" ] && awk -v a="$o" -v b="$e" 'BEGIN {printf "%+.1f", a - b}')
        echo "| $w | $prog | $(field calls "$rest") | $ns | ${e:--} | ${d:--} | ${o:--} | ${od:--} |"
    done < <(grep -v '^onoff \|^kernel ' "$f")
    echo
    echo "| workload | ns per call, filter on (median) | no program (median) | on/off median | min | max | rounds |"
    echo "|---|---|---|---|---|---|---|"
    while read -r _ w rest; do
        echo "| $w | $(field on_ns "$rest") | $(field off_ns "$rest") | $(field ratio_median "$rest") | $(field ratio_min "$rest") | $(field ratio_max "$rest") | $(field rounds "$rest") |"
    done < <(grep '^onoff ' "$f")
done

# fmod_ret beside the BPF LSM: the same kernel booted twice (6.12 with bpf in its
# LSM list, 6.12-nobpf without), the same workloads: ns per call of each rule's
# program in the two attach kinds, and of the empty program on the same hook.
lsm_f="$OUT/6.12.txt" fmod_f="$OUT/6.12-nobpf.txt"
if [ -s "$lsm_f" ] && [ -s "$fmod_f" ]; then
    echo
    echo "**fmod_ret vs BPF LSM, 6.12 (two boots of one kernel)**"
    echo
    echo "| workload | hook | calls | LSM ns per call | fmod_ret ns per call | fmod_ret / LSM | empty LSM | empty fmod_ret |"
    echo "|---|---|---|---|---|---|---|---|"
    while read -r w prog rest; do
        case $prog in ag_fr_*) ;; *) continue ;; esac
        hook=${prog#ag_fr_}
        lsm=$(field ns_per_call "$(awk -v w="$w" -v p="ag_$hook" '$1 == w && $2 == p' "$lsm_f")")
        # the sleepable ioctl program is the LSM line's file_ioctl
        [ -n "$lsm" ] || lsm=$(field ns_per_call "$(awk -v w="$w" -v p="ag_${hook}_s" '$1 == w && $2 == p' "$lsm_f")")
        fr=$(field ns_per_call "$rest")
        el=$(field ns_per_call "$(awk -v w="$w" -v p="bench_$hook" '$1 == w && $2 == p' "$lsm_f")")
        ef=$(field ns_per_call "$(awk -v w="$w" -v p="bench_fr_$hook" '$1 == w && $2 == p' "$fmod_f")")
        ratio=$([ -n "$lsm" ] && awk -v a="$fr" -v b="$lsm" 'BEGIN {printf "%.2f", a / b}')
        echo "| $w | $hook | $(field calls "$rest") | ${lsm:--} | $fr | ${ratio:--} | ${el:--} | ${ef:--} |"
    done < <(grep -v '^onoff \|^kernel ' "$fmod_f")
fi
} | tee "$OUT/results.md"
