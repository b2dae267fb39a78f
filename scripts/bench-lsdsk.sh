#!/usr/bin/env bash
# Benchmark (not a pass/fail test): asmguardd start -> READY=1 and `asmguardctl lsdsk`
# / `scan` times over N labelled loop devices (default 1000).
#
#   sudo scripts/bench-lsdsk.sh [N]
#
# Creates loop devices loop20000.. (new device numbers, so nothing else on the machine
# is touched; the daemon's config includes only those), each on a 64 MiB sparse file
# carrying an ASM label, and removes them all again on exit (also on failure).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-lib.sh
N=${1:-1000}
BASE=${BASE:-20000}
PROFILE=${PROFILE:-release}
[ "$(id -u)" = 0 ] || { echo "bench: needs root" >&2; exit 1; }
command -v python3 >/dev/null || { echo "bench: needs python3" >&2; exit 1; }

cargo build "--$PROFILE" -p asmguardd -p asmguardctl >&2
BIN="target/$PROFILE"
WORK=$(mktemp -d /tmp/asmguard-bench.XXXXXX)
DPID=""
MADE=()
# its own pin directory: the filter's pins outlive the daemon by design
PIN=/sys/fs/bpf/asmguard-lsdsk-$$
cleanup() {
    set +e
    [ -n "$DPID" ] && "$BIN/asmguardctl" --socket "$WORK/asmguard.sock" filter disable >/dev/null 2>&1
    [ -n "$DPID" ] && kill -TERM "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
    [ -e "$PIN" ] && rm -rf "$PIN"
    for n in "${MADE[@]}"; do losetup -d "/dev/loop$n" 2>/dev/null; done
    # Remove the device numbers we created (LOOP_CTL_REMOVE).
    for n in "${MADE[@]}"; do python3 scripts/bench_loops.py remove "$n" 1; done
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "creating $N loop devices (loop$BASE..) ..." >&2
t0=$(date +%s.%N)
# Sparse files, each with a label block (what asmguardctl writes).
python3 scripts/bench_loops.py images "$WORK" "$N" B
for i in $(seq 0 $((N - 1))); do
    n=$((BASE + i))
    if [ -e "/sys/class/block/loop$n" ]; then echo "loop$n exists: choose another BASE" >&2; exit 1; fi
    losetup "/dev/loop$n" "$WORK/d$i.img"
    MADE+=("$n")
done
t1=$(date +%s.%N)
echo "created $N loop devices in $(python3 -c "print(round($t1-$t0,1))") s" >&2

SOCK="$WORK/asmguard.sock"
# Patterns covering exactly loop$BASE..loop$((BASE+N)) (the last one for the hotplug probe).
PATS=$(python3 - "$BASE" "$N" <<'PY'
import sys
b, n = int(sys.argv[1]), int(sys.argv[2])
print(", ".join('"loop%d"' % (b + i) for i in range(n + 1)))
PY
)
bench_config "$WORK/asmguard.toml" "$PATS" "$SOCK"

# start -> READY=1, measured on our own NOTIFY_SOCKET.
READY=$(python3 scripts/bench_loops.py ready "$BIN/asmguardd" "$WORK/notify.sock" "$WORK/pid" \
    "$WORK/asmguard.toml.log" --config "$WORK/asmguard.toml" --bpf-pin-dir "$PIN" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["ready_ms"])')
DPID=$(cat "$WORK/pid")
CTL=("$BIN/asmguardctl" --socket "$SOCK")
disks=$("${CTL[@]}" lsdsk --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["disks"]))')

timeit() { # median of 5 runs, ms
    python3 - "$@" <<'PY'
import subprocess, sys, time
ts = []
for _ in range(5):
    t0 = time.monotonic(); subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True); ts.append((time.monotonic() - t0) * 1000)
ts.sort(); print("%.1f" % ts[2])
PY
}
echo "loop devices:              $N"
echo "labelled disks listed:     $disks"
echo "asmguardd start -> READY:  $READY ms (first scan of all devices included)"
echo "lsdsk --json (median of 5): $(timeit "${CTL[@]}" lsdsk --json) ms"
echo "lsdsk text   (median of 5): $(timeit "${CTL[@]}" lsdsk) ms"
echo "scan (re-read all, median): $(timeit "${CTL[@]}" scan --json) ms"

# Hotplug with N devices present: one more labelled loop device, until lsdsk lists it.
HOT=$((BASE + N))
if [ ! -e "/sys/class/block/loop$HOT" ]; then
    python3 scripts/bench_loops.py image "$WORK/hot.img" HOTPLUG
    MADE+=("$HOT")
    HOTMS=$(python3 - "$HOT" "$WORK/hot.img" "${CTL[@]}" <<'PY'
import json, subprocess, sys, time
n, img, ctl = sys.argv[1], sys.argv[2], sys.argv[3:]
t0 = time.monotonic()
subprocess.run(["losetup", "/dev/loop" + n, img], check=True)
while time.monotonic() - t0 < 10:
    out = subprocess.run(ctl + ["lsdsk", "--json"], capture_output=True, text=True).stdout
    if any(d["label"] == "HOTPLUG" for d in json.loads(out)["disks"]):
        print("%.1f" % ((time.monotonic() - t0) * 1000)); break
else:
    print("not seen within 10 s")
PY
)
    echo "hotplug (losetup -> listed): $HOTMS ms with $N other devices"
fi
