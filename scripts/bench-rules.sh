#!/usr/bin/env bash
# Benchmark (not a pass/fail test): the allowed writer's cost per I/O under a
# conjunction rule (user AND executable, and AND a cgroup) beside a user-only
# rule, measured side by side in one boot per line (tests/vm/guest/bench/rule-cost.sh).
# Writes target/bench/rules/results.md.
#
#   scripts/bench-rules.sh [LINE...]     (default: 6.12 6.12-nobpf)
set -uo pipefail
cd "$(dirname "$0")/.."
LINES=${*:-6.12 6.12-nobpf}
OUT=target/bench/rules
mkdir -p "$OUT"
cargo build --release --workspace --bins >&2 || exit 1
{
    echo "| line | rule | pwrite ns per call (median) | ratio to user | file_permission ns per call (median) | ratio to user |"
    echo "|---|---|---|---|---|---|"
} >"$OUT/results.md"
for line in $LINES; do
    echo "bench-rules: $line ..." >&2
    LAB_GUEST_SLOTS=2 VM_BUILD=0 VM_EXTRA_TOOLS=bpftool VM_TEST_TIMEOUT=500 VM_TIMEOUT=600 \
        tests/vm/run.sh "$line" rule-cost >"$OUT/$line.run" 2>&1
    log=tests/vm/work/$line.log
    grep -h 'VMINFO rule-cost bench' "$log" tests/vm/work/"$line".one-thread.log 2>/dev/null >"$OUT/$line.txt"
    row() { # row MEASURE RULE: "ns | ratio (median, min-max)"
        ns=$(sed -n "s/.*bench $1 rule $2 ns_per_call_median=\([^ ]*\).*/\1/p" "$OUT/$line.txt" | head -n 1)
        case $2 in
        user) r="1" ;;
        *) r=$(sed -n "s/.*bench $1 ratio $2\/user median=\([^ ]*\) min=\([^ ]*\) max=\([^ ]*\).*/\1 (\2-\3)/p" "$OUT/$line.txt" | head -n 1) ;;
        esac
        echo "${ns:-?} | ${r:-?}"
    }
    for k in user exe cgroup; do
        echo "| $line | $k | $(row sys $k) | $(row prog $k) |" >>"$OUT/results.md"
    done
done
cat "$OUT/results.md"
