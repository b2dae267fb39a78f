#!/usr/bin/env bash
# Benchmark (not a pass/fail test): asmguardd with many labelled disks, traced
# (latency histograms) and filtered (the LSM where it loads, else the
# cgroup-device fallback). Prints a Markdown report and keeps it, with the
# daemon's log, in target/bench/scale/.
#
#   sudo scripts/bench-scale.sh
#
#   DISKS=1000     labelled loop devices (64 MiB sparse files in /dev/shm)
#   BASE=30000     first loop device number: new numbers only, so nothing else
#                  on the machine is touched (the daemon's config includes
#                  exactly these names)
#   SECONDS_IDLE=30  length of the idle and of the scraped measurement
#   PERF_IDLE=0    1: also profile the idle daemon with perf (call graphs), the
#                  report in target/bench/scale/idle.perf.txt
#
# Measured: start -> READY=1 (on our own NOTIFY_SOCKET, first scan and filter
# load included); `asmguardctl scan` (a full re-read, median of 5); RSS and CPU
# idle, and with a scrape of /metrics every second; then every device is
# removed, and created again one after the other as fast as possible (the
# kernel's add uevent), attached to its labelled file (change) and sent one
# more "add" uevent: a storm of 2 x DISKS adds. Per disk, the time from its
# attach until its dev_t is a key of the filter's pinned map (protected),
# p50/p99/max, and the time until the last disk is protected.
# Every loop device (and device number) it made is removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-lib.sh
N=${DISKS:-1000}
BASE=${BASE:-30000}
IDLE=${SECONDS_IDLE:-30}
OUT=target/bench/scale
HELP=scripts/bench_loops.py
[ "$(id -u)" = 0 ] || { echo "bench-scale: needs root (loop devices, BPF)" >&2; exit 1; }
for t in python3 bpftool curl; do
    command -v "$t" >/dev/null || { echo "bench-scale: $t is missing (scripts/deps.sh installs it)" >&2; exit 1; }
done
cargo build --release -p asmguardd -p asmguardctl >&2
BIN=target/release
mkdir -p "$OUT"
WORK=$(mktemp -d /dev/shm/asmguard-scale.XXXXXX)
PIN=/sys/fs/bpf/asmguard-scale-$$
DPID=""
cleanup() {
    set +e
    # pinned programs outlive the daemon by design: remove them first
    [ -n "$DPID" ] && "$BIN/asmguardctl" --socket "$WORK/asmguard.sock" filter disable >/dev/null 2>&1
    [ -n "$DPID" ] && kill -TERM "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
    [ -e "$PIN" ] && rm -rf "$PIN"
    python3 "$HELP" remove "$BASE" "$((N + 1))"
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "bench-scale: $N labelled loop devices loop$BASE.. ..." >&2
python3 "$HELP" images "$WORK" "$N" SCALE
t0=$(date +%s%N)
python3 "$HELP" attach "$BASE" "$WORK" "$N"
ATTACH_MS=$((($(date +%s%N) - t0) / 1000000))
udevadm settle --timeout=60 || true

SOCK="$WORK/asmguard.sock"
MPORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
PATS=$(seq -f '"loop%.0f"' "$BASE" "$((BASE + N - 1))" | paste -sd,)
bench_config "$WORK/asmguard.toml" "$PATS" "$SOCK" \
    "[metrics]" "listen = \"127.0.0.1:$MPORT\"" "[filter]" 'mode = "enforce"'
READY=$(python3 "$HELP" ready "$BIN/asmguardd" "$WORK/notify.sock" "$WORK/pid" "$OUT/asmguardd.log" \
    --config "$WORK/asmguard.toml" --bpf-pin-dir "$PIN")
DPID=$(cat "$WORK/pid")
CTL=("$BIN/asmguardctl" --socket "$SOCK")
"${CTL[@]}" status --json >"$OUT/status.json"
jqs() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }
DISKS_SEEN=$(jqs "$OUT/status.json" 'd["disks"]')
BACKEND=$(jqs "$OUT/status.json" 'd["filter_backend"]')
MAP=$PIN/maps/ag_blk
PROTECTED=$(bpftool map dump pinned "$MAP" --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
# one read per disk, so every disk has a latency histogram in the scrapes
for i in $(seq 0 $((N - 1))); do
    dd if="/dev/loop$((BASE + i))" of=/dev/null bs=4096 count=1 iflag=direct status=none
done
sleep 1
curl -s "http://127.0.0.1:$MPORT/metrics" >"$OUT/scrape.txt"
TRACED=$(grep -c '^asmguard_io_latency_seconds_count{' "$OUT/scrape.txt" || true)
SCRAPE_KIB=$(($(wc -c <"$OUT/scrape.txt") / 1024))

SCAN_MS=$(python3 - "${CTL[@]}" scan --json <<'PY'
import subprocess, sys, time
ts = []
for _ in range(5):
    t0 = time.monotonic()
    subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True)
    ts.append((time.monotonic() - t0) * 1000)
ts.sort()
print("%.1f | %.1f | %.1f" % (ts[2], ts[0], ts[-1]))
PY
)
echo "bench-scale: idle ${IDLE}s ..." >&2
sleep 5 # let the scans' work settle
if [ "${PERF_IDLE:-0}" = 1 ]; then
    # where the idle CPU goes: a call-graph profile of the daemon alongside
    perf record -q -F 999 -g -p "$DPID" -o "$OUT/idle.perf.data" -- sleep "$IDLE" 2>/dev/null &
    PERFPID=$!
fi
IDLE_U=$(python3 "$HELP" usage "$DPID" "$IDLE")
if [ "${PERF_IDLE:-0}" = 1 ]; then
    wait "$PERFPID" || true
    perf report -i "$OUT/idle.perf.data" --no-children --stdio --percent-limit 2 >"$OUT/idle.perf.txt" 2>/dev/null || true
fi
echo "bench-scale: scraped every second for ${IDLE}s ..." >&2
SCRAPE_U=$(python3 "$HELP" usage "$DPID" "$IDLE" "http://127.0.0.1:$MPORT/metrics")

echo "bench-scale: removing the devices, then the storm ..." >&2
# The daemon holds an O_EXCL claim on every enforced disk, so the loop driver
# would only mark them for removal on its last close. Audit mode lets the
# claims go and keeps the programs and the map; enforce comes back before the
# storm, so every disk of the storm is claimed and mapped as it appears.
"${CTL[@]}" filter audit >/dev/null
python3 "$HELP" remove "$BASE" "$N"
for _ in $(seq 60); do
    left=$(bpftool map dump pinned "$MAP" --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
    [ "$left" = 0 ] && break
    sleep 0.5
done
[ "$left" = 0 ] || { echo "bench-scale: $left disks still in the map 30 s after their removal" >&2; exit 1; }
"${CTL[@]}" filter enable >/dev/null
STORM=$(python3 "$HELP" storm "$BASE" "$WORK" "$N" "$MAP")
STORM_U=$(python3 "$HELP" usage "$DPID" 1)

{
echo "#### Run of $(date -u '+%Y-%m-%d %H:%M UTC'), kernel $(uname -r), $(nproc) CPUs"
echo
echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg). $N loop devices attached in ${ATTACH_MS} ms before the start; the daemon saw $DISKS_SEEN disks, filter backend $BACKEND, $PROTECTED in the filter's map, $TRACED disk/op latency histograms in a scrape of $SCRAPE_KIB KiB (after one 4 KiB read per disk)."
echo
echo "| figure | result |"
echo "|---|---|"
echo "| start -> READY=1 (first scan, tracer and filter load) | $(jqs <(echo "$READY") 'd["ready_ms"]') ms |"
echo "| \`asmguardctl scan\` (full re-read), median / min / max of 5 | $SCAN_MS ms |"
echo "| idle ${IDLE} s: CPU, RSS (peak) | $(jqs <(echo "$IDLE_U") '"%s %% of one CPU, %s MiB (%s MiB)" % (d["cpu_percent"], d["rss_mib"], d["hwm_mib"])') |"
echo "| a scrape every second for ${IDLE} s: CPU, RSS (peak), scrape median / max | $(jqs <(echo "$SCRAPE_U") '"%s %% of one CPU, %s MiB (%s MiB), %s / %s ms" % (d["cpu_percent"], d["rss_mib"], d["hwm_mib"], d["scrape_ms_median"], d["scrape_ms_max"])') |"
echo "| storm: $N attaches + add uevents sent in | $(jqs <(echo "$STORM") 'd["storm_ms"]') ms |"
echo "| storm: disks protected | $(jqs <(echo "$STORM") 'd["protected"]') of $N |"
echo "| storm: attach -> protected, p50 / p99 / max | $(jqs <(echo "$STORM") '"%s / %s / %s ms" % (d["latency_ms_p50"], d["latency_ms_p99"], d["latency_ms_max"])') |"
echo "| storm: first attach -> last disk protected | $(jqs <(echo "$STORM") 'd["last_protected_ms"]') ms |"
echo "| storm: resolution (one dump of the map, median) | $(jqs <(echo "$STORM") 'd["map_poll_ms_median"]') ms |"
echo "| RSS after the storm (peak) | $(jqs <(echo "$STORM_U") '"%s MiB (%s MiB)" % (d["rss_mib"], d["hwm_mib"])') |"
} | tee "$OUT/results.md"
