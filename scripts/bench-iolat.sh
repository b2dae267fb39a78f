#!/bin/bash
# Benchmarks of asmguard's I/O latency tracer (bpf/iolat.bpf.c + asmguard-iolat).
# Not pass/fail: prints the figures BENCHMARKS.md quotes, as Markdown, and keeps
# the raw fio/bpftool/curl output in target/bench/iolat/.
#
#   sudo scripts/bench-iolat.sh
#
#   RUNTIME=4    seconds per fio run
#   ROUNDS=9     on/off pairs per workload (the order alternates; median ratio)
#   NICE=-10     nice level of fio, the exporter and curl
#   DISKS=1000   synthetic disks for the scrape benchmark
#   SIZE_MIB=2048  size of the tmpfs-backed loop device
#
# What it measures, all against a loop device backed by a file in /dev/shm:
#  1. fio 4 KiB random reads, queue depth 32: IOPS with the tracer attached and
#     tracing the device ("on") vs no tracer loaded ("off"), in the same run.
#  2. An Oracle-like mix (16k random reads, 1M sequential reads, 16k random
#     writes, 768k sequential writes, 64k O_DSYNC redo writes), unthrottled:
#     total IOPS and MB/s on vs off.
#  3. The same mix at fixed rates (a bank's AWR profile, scaled down 10x):
#     mean and p99 completion latency per I/O type on vs off.
#  4. BPF cost per event from kernel.bpf_stats_enabled (run_time_ns / run_cnt
#     per program) on a traced disk (with the kernel's issue stamps, and with
#     our own: --no-kernel-stamps) and on an untraced one (filter miss), with
#     an empty program on the same tracepoint to measure bpf_stats' own cost.
#  5. Scrape time and exporter RSS with DISKS synthetic disks (2 ops each).
#  6. Side by side with libbpf-tools biolatency (-D, and -Q -D) on the same
#     device, in alternation with asmguard-iolat, SIDE_ROUNDS rounds (order
#     rotates each round): BPF ns per I/O (raw and corrected by the empty
#     program) and fio 4k randread IOPS with each tool on and with none.
#
#  7. (not in the default PARTS) A/B: the BPF cost of part 4 for two builds of
#     the tracer, $BIN and $AB_BIN, attached at the same time to the same
#     device (every I/O runs both), AB_ROUNDS rounds per path (kernel stamps,
#     own stamps), the one attached first alternating: corrected ns per I/O of
#     each build per round, their median, min and max, and new/old per round
#     with its geometric mean (in which the attach order cancels out).
#     Build the old one first, e.g. from a worktree of the old commit:
#       AB_BIN=/tmp/iolat-old PARTS=ab scripts/bench-iolat.sh
#
#   PARTS="onoff stats scrape side"   which of the parts to run (1-3, 4, 5, 6; ab: 7)
#   SIDE_ROUNDS=3                      rounds of part 6
#   AB_BIN=  AB_ROUNDS=6               part 7's other binary and rounds
# The write filter is not part of this run (not built yet): "on" means tracing.
set -euo pipefail
cd "$(dirname "$0")/.."

RUNTIME=${RUNTIME:-4}
ROUNDS=${ROUNDS:-9}
# Other work on the host skews single runs: fio, the exporter and curl run at
# a higher priority, and many short alternating rounds are reduced to medians.
NICE=${NICE:--10}
DISKS=${DISKS:-1000}
SIZE_MIB=${SIZE_MIB:-2048}
PARTS=${PARTS:-onoff stats scrape side}
SIDE_ROUNDS=${SIDE_ROUNDS:-3}
AB_BIN=${AB_BIN:-}
AB_ROUNDS=${AB_ROUNDS:-6}
OUT=target/bench/iolat
BIN=target/release/asmguard-iolat

[ "$(id -u)" = 0 ] || { echo "bench-iolat: needs root (BPF, loop devices)" >&2; exit 1; }
for t in fio jq bpftool curl losetup promtool biolatency; do
    command -v "$t" >/dev/null || { echo "bench-iolat: $t is missing (scripts/deps.sh installs it)" >&2; exit 1; }
done
# the program lists below open every program by id: where asmguardd guards its
# filter's pins (the bpf hook) that is refused for its programs
bpftool prog show >/dev/null 2>&1 || { echo "bench-iolat: bpftool prog show fails (asmguard's guarded filter? run 'asmguardctl filter disable' or stop asmguardd first)" >&2; exit 1; }
part() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
if part ab && { [ ! -x "$AB_BIN" ] || [ $((AB_ROUNDS % 2)) = 1 ]; }; then
    echo "bench-iolat: PARTS=ab needs AB_BIN (the other build of asmguard-iolat) and an even AB_ROUNDS (each build first equally often)" >&2; exit 1
fi
mkdir -p "$OUT"
rm -f "$OUT"/*.json "$OUT"/*.txt "$OUT"/*.log "$OUT"/*.ids "$OUT"/*.cost
cargo build --release -p asmguard-metrics >&2

IMG=/dev/shm/asmguard-bench-$$.img
IMG2=/dev/shm/asmguard-bench2-$$.img
LOOP=
LOOP2=
TPID=
BPID=
AB_PIDS=
STATS_WAS=$(sysctl -n kernel.bpf_stats_enabled)
cleanup() {
    [ -n "$TPID" ] && kill "$TPID" 2>/dev/null && wait "$TPID" 2>/dev/null
    [ -n "$BPID" ] && kill "$BPID" 2>/dev/null && wait "$BPID" 2>/dev/null
    for p in $AB_PIDS; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
    sysctl -q kernel.bpf_stats_enabled="$STATS_WAS" || true
    [ -n "$LOOP" ] && losetup -d "$LOOP"
    [ -n "$LOOP2" ] && losetup -d "$LOOP2"
    rm -f "$IMG" "$IMG2"
}
trap cleanup EXIT

# A written (not sparse) backing file, so reads touch real pages.
dd if=/dev/zero of="$IMG" bs=1M count="$SIZE_MIB" status=none
dd if=/dev/zero of="$IMG2" bs=1M count=256 status=none
LOOP=$(losetup -f --show "$IMG")
LOOP2=$(losetup -f --show "$IMG2")
udevadm settle --timeout=10 || true

# start_tracer [ARGS...]: the exporter in the background; waits until it serves.
start_tracer() {
    nice -n "$NICE" "$BIN" --listen 127.0.0.1:0 "$@" 2>"$OUT/tracer.log" &
    TPID=$!
    for _ in $(seq 100); do
        grep -q serving "$OUT/tracer.log" 2>/dev/null && break
        sleep 0.1
    done
    grep -q serving "$OUT/tracer.log" || { cat "$OUT/tracer.log" >&2; exit 1; }
    URL=$(grep -o 'http://[^ ]*' "$OUT/tracer.log")
}
stop_tracer() {
    kill "$TPID"
    wait "$TPID" 2>/dev/null || true
    TPID=
}

FIO=$(type -P fio)
CURL=$(type -P curl)
fio() { nice -n "$NICE" "$FIO" "$@"; }
curl() { nice -n "$NICE" "$CURL" "$@"; }

randread() {
    fio --output-format=json --name=randread --filename="$LOOP" --rw=randread --bs=4k \
        --iodepth=32 --ioengine=libaio --direct=1 --time_based --runtime="$RUNTIME" \
        --size="${SIZE_MIB}M" --randrepeat=0 --norandommap "$@"
}

# mixpart COMMENT NAME RW BS IODEPTH OFFSET SIZE IOPS [LINE]: one job of the mix;
# IOPS (the AWR profile / 10) applies when $rate is "rate".
mixpart() {
    printf '\n; %s\n[%s]\nrw=%s\nbs=%s\niodepth=%s\noffset=%s\nsize=%s\n' "${@:1:7}"
    if [ "$rate" = rate ]; then echo "rate_iops=$8"; fi
    if [ -n "${9:-}" ]; then echo "$9"; fi
}

# The Oracle-like mix; $1: "max" (unthrottled) or "rate" (AWR profile / 10).
mixjob() {
    local rate=$1
    cat <<EOF
[global]
filename=$LOOP
ioengine=libaio
direct=1
time_based
runtime=$RUNTIME
randrepeat=0
norandommap
EOF
    mixpart "db file sequential read: single-block random reads" \
        rand-read-16k randread 16k 8 0 40% 325
    mixpart "db file scattered read / direct path read: multi-block sequential reads" \
        seq-read-1m read 1M 2 40% 20% 250
    mixpart "db file parallel write: DBWR random writes" \
        rand-write-16k randwrite 16k 8 60% 20% 580
    mixpart "direct path write: sequential multi-block writes" \
        seq-write-768k write 768k 2 80% 12% 75
    mixpart "log file parallel write: LGWR, O_DSYNC" \
        redo-64k write 64k 1 92% 8% 5 sync=dsync
}

# run WORKLOAD MODE ROUND: one fio run, JSON to $OUT/WORKLOAD-MODE-ROUND.json
run() {
    local w=$1 mode=$2 r=$3 f="$OUT/$1-$2-$3.json"
    if [ "$mode" = on ]; then start_tracer --device "$LOOP=BENCH"; fi
    case $w in
        randread) randread >"$f" ;;
        mix) mixjob max >"$OUT/mix.fio"; fio --output-format=json "$OUT/mix.fio" >"$f" 2>>"$OUT/fio.log" ;;
        rate) mixjob rate >"$OUT/rate.fio"; fio --output-format=json "$OUT/rate.fio" >"$f" 2>>"$OUT/fio.log" ;;
    esac
    if [ "$mode" = on ]; then
        curl -s "$URL" >"$OUT/$w-on-$r-scrape.txt"
        stop_tracer
    fi
}

part onoff && for w in randread mix rate; do
    for r in $(seq "$ROUNDS"); do
        # alternate the order, so drift (thermal, page cache) does not favour one side
        if [ $((r % 2)) = 1 ]; then run $w off "$r"; run $w on "$r"; else run $w on "$r"; run $w off "$r"; fi
        echo "bench-iolat: $w round $r done" >&2
    done
done

iops() { jq '[.jobs[] | .read.iops + .write.iops] | add' "$1"; }
mbps() { jq '[.jobs[] | .read.bw_bytes + .write.bw_bytes] | add / 1048576' "$1"; }
median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
ratio_of() { # workload metric-fn -> one ratio per round
    for r in $(seq "$ROUNDS"); do
        awk -v on="$($2 "$OUT/$1-on-$r.json")" -v off="$($2 "$OUT/$1-off-$r.json")" 'BEGIN {printf "%.4f\n", on/off}'
    done
}

# ---- BPF cost per event ----
stats_run() { # $1: traced|traced-own|untraced
    if [ "$1" = traced-own ]; then
        start_tracer --device "$LOOP=BENCH" --calibrate --no-kernel-stamps
    else
        start_tracer --device "$LOOP=BENCH" --calibrate
    fi
    sysctl -q kernel.bpf_stats_enabled=1
    if [ "$1" != untraced ]; then randread >"$OUT/stats-$1.json"
    else fio --output-format=json --name=untraced --filename="$LOOP2" --rw=randread --bs=4k \
            --iodepth=32 --ioengine=libaio --direct=1 --time_based --runtime="$RUNTIME" \
            --randrepeat=0 --norandommap >"$OUT/stats-$1.json"
    fi
    bpftool prog show --json >"$OUT/stats-$1-progs.json"
    sysctl -q kernel.bpf_stats_enabled="$STATS_WAS"
    curl -s "$URL" >"$OUT/stats-$1-scrape.txt"
    stop_tracer
}
if part stats; then
    stats_run traced
    stats_run traced-own
    stats_run untraced
fi
# part 7: $BIN ("new") and $AB_BIN ("old") both attached at once, so each
# I/O runs both builds' programs under the same conditions; the one attached
# first runs first on every I/O (and warms the caches for the other), so the
# order flips each round. Program ids tell the builds apart.
iolat_ids() { bpftool prog show --json | jq '.[] | select(.name | startswith("iolat_")) | .id' | sort -n; }
# ab_start BIN TAG [ARGS]: starts BIN on the bench device; its program ids to $OUT/ab-TAG.ids
ab_start() {
    local bin=$1 tag=$2 before pid
    shift 2
    before=$(iolat_ids)
    nice -n "$NICE" "$bin" --listen 127.0.0.1:0 --device "$LOOP=BENCH" --calibrate "$@" 2>"$OUT/ab-$tag.log" &
    pid=$!
    for _ in $(seq 100); do grep -q serving "$OUT/ab-$tag.log" 2>/dev/null && break; sleep 0.1; done
    grep -q serving "$OUT/ab-$tag.log" || { cat "$OUT/ab-$tag.log" >&2; exit 1; }
    comm -13 <(echo "$before") <(iolat_ids) >"$OUT/ab-$tag.ids"
    AB_PIDS="$AB_PIDS $pid"
}
# ab_cost RUN TAG: corrected ns per I/O of TAG's programs (ids in
# $OUT/ab-TAG.ids) in the ab run RUN ($OUT/ab-RUN.json and -progs.json)
ab_cost() {
    local ios
    ios=$(jq '[.jobs[] | .read.total_ios + .write.total_ios] | add' "$OUT/ab-$1.json")
    jq -r --argjson ids "[$(paste -sd, "$OUT/ab-$2.ids")]" --argjson ios "$ios" '
        [.[] | select(.id as $i | $ids | index($i))] as $p
        | ([$p[] | select(.name == "iolat_calibrate") | .run_time_ns / .run_cnt] | add) as $c
        | [$p[] | select(.name != "iolat_calibrate")]
        | (([.[].run_time_ns] | add) - $c * ([.[].run_cnt] | add)) / $ios * 10 | round / 10' \
        "$OUT/ab-$1-progs.json"
}
if part ab; then
    for r in $(seq "$AB_ROUNDS"); do
        if [ $((r % 2)) = 1 ]; then order="old new"; else order="new old"; fi
        for k in traced traced-own; do
            AB_PIDS=
            args=()
            [ "$k" = traced-own ] && args=(--no-kernel-stamps)
            for v in $order; do
                if [ "$v" = old ]; then b=$AB_BIN; else b=$BIN; fi
                ab_start "$b" "$k-$v-$r" "${args[@]}"
            done
            sysctl -q kernel.bpf_stats_enabled=1
            randread >"$OUT/ab-$k-$r.json"
            bpftool prog show --json >"$OUT/ab-$k-$r-progs.json"
            sysctl -q kernel.bpf_stats_enabled="$STATS_WAS"
            for pid in $AB_PIDS; do kill "$pid"; wait "$pid" 2>/dev/null || true; done
            # "old new": corrected ns per I/O of each build in this run
            echo "$(ab_cost "$k-$r" "$k-old-$r") $(ab_cost "$k-$r" "$k-new-$r")" >"$OUT/ab-$k-$r.cost"
        done
        echo "bench-iolat: A/B round $r done ($order)" >&2
    done
fi
prog_table() {
    jq -r '.[] | select(.name | startswith("iolat_")) | select(.run_cnt > 0)
        | "| \(.name) | \(.run_cnt) | \(.run_time_ns) | \((.run_time_ns / .run_cnt * 10 | round) / 10) |"' \
        "$OUT/stats-$1-progs.json"
}
# per_io traced|untraced raw|corrected: ns per I/O of the issue + complete
# programs; "corrected" subtracts the empty program's cost (the measurement's
# own) once per program run.
per_io() {
    local f="$OUT/stats-$1-progs.json" ns cnt calib ios
    ns=$(jq '[.[] | select(.name | startswith("iolat_")) | select(.name != "iolat_calibrate") | .run_time_ns] | add' "$f")
    cnt=$(jq '[.[] | select(.name | startswith("iolat_")) | select(.name != "iolat_calibrate") | .run_cnt] | add' "$f")
    calib=$(jq '[.[] | select(.name == "iolat_calibrate") | .run_time_ns / .run_cnt] | add' "$f")
    ios=$(jq '[.jobs[] | .read.total_ios + .write.total_ios] | add' "$OUT/stats-$1.json")
    if [ "$2" = raw ]; then
        awk -v ns="$ns" -v ios="$ios" 'BEGIN {printf "%.1f", ns/ios}'
    else
        awk -v ns="$ns" -v cnt="$cnt" -v c="$calib" -v ios="$ios" 'BEGIN {printf "%.1f", (ns - c*cnt)/ios}'
    fi
}

# ---- side by side with biolatency ----
# Program ids loaded now, one per line.
prog_ids() { bpftool prog show --json | jq '.[] | select(.name | startswith("block_rq_")) | .id' | sort -n; }
# start_biolat ARGS...: biolatency in the background; waits until its programs
# are loaded (they are the programs that were not there before it started).
start_biolat() {
    local before
    before=$(prog_ids)
    nice -n "$NICE" biolatency "$@" >"$OUT/biolatency.log" 2>&1 &
    BPID=$!
    for _ in $(seq 100); do
        BIDS=$(comm -13 <(echo "$before") <(prog_ids) | paste -sd' ')
        [ "$(wc -w <<<"$BIDS")" -ge 2 ] && sleep 0.3 && break
        sleep 0.1
    done
    BIDS=$(comm -13 <(echo "$before") <(prog_ids) | paste -sd' ')
    [ -n "$BIDS" ] || { cat "$OUT/biolatency.log" >&2; exit 1; }
}
stop_biolat() {
    kill "$BPID"
    wait "$BPID" 2>/dev/null || true
    BPID=
}
# tool_on TOOL: load TOOL (none, asmguard, biolat, biolat-q) on the bench device.
# For biolatency, asmguard-iolat also runs on the other (idle) loop device with
# --calibrate: only its empty program's figure is used, to correct biolatency's.
tool_on() {
    case $1 in
        none) ;;
        asmguard) start_tracer --device "$LOOP=BENCH" --calibrate ;;
        biolat) start_biolat -D; start_tracer --device "$LOOP2=IDLE" --calibrate ;;
        biolat-q) start_biolat -Q -D; start_tracer --device "$LOOP2=IDLE" --calibrate ;;
    esac
}
tool_off() {
    [ -n "$TPID" ] && stop_tracer
    [ -n "$BPID" ] && stop_biolat
    return 0
}
# side_cost TOOL ROUND: one randread run under bpf_stats; prints "raw corrected"
# ns per I/O of TOOL's programs (total run_time_ns / I/Os fio completed;
# corrected subtracts the empty program's per-run cost for each of their runs).
side_cost() {
    local f="$OUT/side-$1-$2" sel
    tool_on "$1"
    sysctl -q kernel.bpf_stats_enabled=1
    randread >"$f.json"
    bpftool prog show --json >"$f-progs.json"
    sysctl -q kernel.bpf_stats_enabled="$STATS_WAS"
    if [ "$1" = asmguard ]; then
        sel='select(.name | startswith("iolat_")) | select(.name != "iolat_calibrate")'
    else
        sel="select(.id as \$i | [$(sed 's/ /,/g' <<<"$BIDS")] | index(\$i))"
    fi
    tool_off
    local ns cnt calib ios
    ns=$(jq "[.[] | $sel | .run_time_ns // 0] | add" "$f-progs.json")
    cnt=$(jq "[.[] | $sel | .run_cnt // 0] | add" "$f-progs.json")
    calib=$(jq '[.[] | select(.name == "iolat_calibrate") | .run_time_ns / .run_cnt] | add' "$f-progs.json")
    ios=$(jq '[.jobs[] | .read.total_ios] | add' "$f.json")
    awk -v ns="$ns" -v cnt="$cnt" -v c="$calib" -v ios="$ios" \
        'BEGIN {printf "%.1f %.1f %.1f\n", ns/ios, (ns - c*cnt)/ios, c}'
}
SIDE_TOOLS="none asmguard biolat biolat-q"
if part side; then
    for r in $(seq "$SIDE_ROUNDS"); do
        # rotate the order each round, so no tool always runs first or last
        order=$(for t in $SIDE_TOOLS; do echo "$t"; done | awk -v r="$r" '{a[NR]=$0} END {for (i=0;i<NR;i++) print a[(i+r-1)%NR+1]}')
        for t in $order; do
            tool_on "$t"
            randread >"$OUT/side-iops-$t-$r.json"
            tool_off
            if [ "$t" != none ]; then side_cost "$t" "$r" >"$OUT/side-cost-$t-$r.txt"; fi
        done
        echo "bench-iolat: side by side round $r done ($(paste -sd' ' <<<"$order"))" >&2
    done
fi
# stat3 [DIGITS]: "median | min | max" of numbers on stdin (1 decimal by default)
stat3() { sort -g | awk -v d="${1:-1}" '{a[NR]=$1} END {m = NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2; f = "%." d "f"; printf f " | " f " | " f, m, a[1], a[NR]}'; }

# ---- scrape time and RSS with many disks ----
if part scrape; then
start_tracer --synthetic-disks "$DISKS"
curl -s "$URL" >"$OUT/scrape-$DISKS.txt"
for _ in $(seq 50); do curl -s -o /dev/null -w '%{time_total}\n' "$URL"; done >"$OUT/scrape-times.txt"
RSS=$(awk '/VmRSS/ {print $2}' "/proc/$TPID/status")
HWM=$(awk '/VmHWM/ {print $2}' "/proc/$TPID/status")
stop_tracer
SCRAPE_MED=$(median <"$OUT/scrape-times.txt")
SCRAPE_MAX=$(sort -g "$OUT/scrape-times.txt" | tail -1)
SCRAPE_BYTES=$(wc -c <"$OUT/scrape-$DISKS.txt")
SCRAPE_SERIES=$(grep -vc '^#' "$OUT/scrape-$DISKS.txt")
if promtool check metrics <"$OUT/scrape-$DISKS.txt" >"$OUT/promtool.txt" 2>&1; then PROMTOOL=clean; else PROMTOOL="NOT clean (see $OUT/promtool.txt)"; fi
fi

# ---- report ----
{
echo "## Results ($(date -u '+%Y-%m-%d %H:%M UTC'), kernel $(uname -r), $(nproc) CPUs, RUNTIME=${RUNTIME}s, ROUNDS=$ROUNDS)"
echo
echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg). Tracer attach mode: $(cat "$OUT"/tracer.log "$OUT"/ab-*.log 2>/dev/null | grep -o 'tp_btf\|raw_tp' | head -1)."
if part onoff; then
echo
echo "| workload | metric | off (median) | on (median) | on/off per round | median on/off |"
echo "|---|---|---|---|---|---|"
for w in randread mix; do
    for m in iops mbps; do
        offs=$(for r in $(seq "$ROUNDS"); do $m "$OUT/$w-off-$r.json"; done | median)
        ons=$(for r in $(seq "$ROUNDS"); do $m "$OUT/$w-on-$r.json"; done | median)
        rs=$(ratio_of $w $m | paste -sd' ')
        echo "| $w | $( [ $m = iops ] && echo IOPS || echo MiB/s) | $(printf %.0f "$offs") | $(printf %.0f "$ons") | $rs | $(ratio_of $w $m | median) |"
    done
done
echo
echo "Fixed-rate Oracle mix (AWR profile / 10): completion latency per I/O type, median over rounds"
echo
echo "| job | IOPS off | IOPS on | mean off (us) | mean on (us) | p99 off (us) | p99 on (us) |"
echo "|---|---|---|---|---|---|---|"
for job in $(jq -r '.jobs[].jobname' "$OUT/rate-off-1.json"); do
    val() { # mode jq-expr -> median over rounds
        for r in $(seq "$ROUNDS"); do
            jq --arg j "$job" ".jobs[] | select(.jobname == \$j) | (if .read.total_ios > 0 then .read else .write end) | $2" "$OUT/rate-$1-$r.json"
        done | median
    }
    printf '| %s | %.0f | %.0f | %.1f | %.1f | %.1f | %.1f |\n' "$job" \
        "$(val off .iops)" "$(val on .iops)" \
        "$(val off '.clat_ns.mean / 1000')" "$(val on '.clat_ns.mean / 1000')" \
        "$(val off '.clat_ns.percentile["99.000000"] / 1000')" "$(val on '.clat_ns.percentile["99.000000"] / 1000')"
done
fi
if part stats; then
echo
echo "BPF cost (kernel.bpf_stats_enabled=1, 4k randread QD32, one run of ${RUNTIME}s each)"
echo
echo "| disk | program | run_cnt | run_time_ns | ns per event |"
echo "|---|---|---|---|---|"
prog_table traced | sed 's/^/| traced (kernel stamps) /'
prog_table traced-own | sed 's/^/| traced (own stamps) /'
prog_table untraced | sed 's/^/| untraced /'
echo
echo "Tracing cost per I/O (issue + complete programs, total run_time_ns / I/Os completed; corrected = minus the measurement's own cost, iolat_calibrate, an empty program on the same tracepoint):"
echo
echo "| disk | raw ns per I/O | corrected ns per I/O |"
echo "|---|---|---|"
for k in traced traced-own untraced; do
    echo "| $k | $(per_io $k raw) | $(per_io $k corrected) |"
done
fi
if part side; then
echo
echo "Side by side with libbpf-tools biolatency $(dpkg-query -W -f '${Version}' libbpf-tools 2>/dev/null), same loop device, $SIDE_ROUNDS rotating rounds of ${RUNTIME}s fio 4k randread QD32 per tool. BPF cost per I/O from bpf_stats (total run_time_ns of the tool's programs / I/Os fio completed; corrected = minus the empty program's per-run cost for each program run). IOPS from separate runs with bpf_stats off."
echo
echo "| tool | programs | raw ns/I/O median | min | max | corrected ns/I/O median | min | max | IOPS median | min | max | IOPS / no tracing (median) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
iops_none=$(for r in $(seq "$SIDE_ROUNDS"); do iops "$OUT/side-iops-none-$r.json"; done | median)
for t in $SIDE_TOOLS; do
    case $t in
        none) name="no tracing"; progs="-" ;;
        asmguard) name="asmguard-iolat"; progs="iolat_btf_issue, iolat_btf_complete" ;;
        biolat) name="biolatency -D"; progs="block_rq_issue_btf, block_rq_complete_btf" ;;
        biolat-q) name="biolatency -Q -D"; progs="block_rq_insert_btf, block_rq_issue_btf, block_rq_complete_btf" ;;
    esac
    if [ "$t" = none ]; then raw="- | - | -"; cor="- | - | -"
    else
        raw=$(for r in $(seq "$SIDE_ROUNDS"); do cut -d' ' -f1 "$OUT/side-cost-$t-$r.txt"; done | stat3)
        cor=$(for r in $(seq "$SIDE_ROUNDS"); do cut -d' ' -f2 "$OUT/side-cost-$t-$r.txt"; done | stat3)
    fi
    io=$(for r in $(seq "$SIDE_ROUNDS"); do iops "$OUT/side-iops-$t-$r.json"; done | stat3)
    rel=$(awk -v a="$(for r in $(seq "$SIDE_ROUNDS"); do iops "$OUT/side-iops-$t-$r.json"; done | median)" -v b="$iops_none" 'BEGIN {printf "%.3f", a/b}')
    echo "| $name | $progs | $raw | $cor | $io | $rel |"
done
echo
echo "Empty program (bpf_stats' own cost per run), median over the runs: $(cat "$OUT"/side-cost-*-*.txt | cut -d' ' -f3 | median) ns."
fi
if part ab; then
echo
echo "A/B: BPF cost per I/O, corrected (as in part 4), of $BIN (new, $(sha256sum "$BIN" | cut -c1-12)) and $AB_BIN (old, $(sha256sum "$AB_BIN" | cut -c1-12)), both attached at once and tracing the same I/Os, $AB_ROUNDS rounds of ${RUNTIME}s fio 4k randread QD32 per path, the build attached first alternating."
echo
echo "| path | round | first | old ns | new ns | new/old |"
echo "|---|---|---|---|---|---|"
for k in traced traced-own; do
    for r in $(seq "$AB_ROUNDS"); do
        read -r o n <"$OUT/ab-$k-$r.cost"
        if [ $((r % 2)) = 1 ]; then first=old; else first=new; fi
        echo "| $k | $r | $first | $o | $n | $(awk -v o="$o" -v n="$n" 'BEGIN {printf "%.3f", n/o}') |"
    done
done
echo
echo "new/old summed up as the geometric mean of the rounds' ratios: the build attached first pays more (it takes the cache misses on the request, queue and disk for both), and with the order alternating that cancels out of the mean but not out of each round's ratio."
echo
echo "| path | old: median / min / max | new: median / min / max | new/old: geometric mean / min / max of the rounds |"
echo "|---|---|---|---|"
for k in traced traced-own; do
    costs=$(for r in $(seq "$AB_ROUNDS"); do cat "$OUT/ab-$k-$r.cost"; done)
    old=$(cut -d' ' -f1 <<<"$costs" | stat3 | sed 's/ | / \/ /g')
    new=$(cut -d' ' -f2 <<<"$costs" | stat3 | sed 's/ | / \/ /g')
    rat=$(awk '{print $2 / $1}' <<<"$costs" | sort -g |
        awk '{l += log($1); a[NR] = $1} END {printf "%.3f / %.3f / %.3f", exp(l/NR), a[1], a[NR]}')
    echo "| $k | $old | $new | $rat |"
done
fi
if part scrape; then
echo
echo "Scrape of $DISKS synthetic disks x 2 ops ($SCRAPE_SERIES samples, $((SCRAPE_BYTES / 1024)) KiB, promtool: $PROMTOOL): median $(awk -v s="$SCRAPE_MED" 'BEGIN {printf "%.1f", s*1000}') ms, max $(awk -v s="$SCRAPE_MAX" 'BEGIN {printf "%.1f", s*1000}') ms over 50 scrapes; exporter RSS $((RSS / 1024)) MiB after them (peak $((HWM / 1024)) MiB)."
fi
} | tee "$OUT/results.md"
