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
cleanup() {
    set +e
    [ -n "$DPID" ] && kill -TERM "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
    for n in "${MADE[@]}"; do losetup -d "/dev/loop$n" 2>/dev/null; done
    # Remove the device numbers we created (LOOP_CTL_REMOVE).
    python3 - "${MADE[@]}" <<'PY'
import fcntl, os, sys, time
fd = os.open("/dev/loop-control", os.O_RDWR)
for n in sys.argv[1:]:
    for _ in range(50):
        try:
            fcntl.ioctl(fd, 0x4C81, int(n)); break
        except OSError as e:
            if e.errno == 16: time.sleep(0.02); continue
            break
PY
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "creating $N loop devices (loop$BASE..) ..." >&2
t0=$(date +%s.%N)
# Sparse files, each with a label block: ORCLDISK + label at byte 32 and the XOR word
# at byte 12 (what asmguardctl writes).
python3 - "$WORK" "$N" <<'PY'
import os, struct, sys
work, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    label = b"B%d" % i
    b = bytearray(4096)
    b[32:40] = b"ORCLDISK"; b[40:40 + len(label)] = label
    x = 0
    for o in range(0, 64, 4):
        if o != 12: x ^= struct.unpack_from("<I", b, o)[0]
    struct.pack_into("<I", b, 12, x)
    with open(os.path.join(work, "d%d.img" % i), "wb") as f:
        f.write(b); f.truncate(64 << 20)
PY
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
cat > "$WORK/asmguard.toml" <<TOML
[devices]
include = [$PATS]
exclude = []
[socket]
path = "$SOCK"
TOML

# start -> READY=1, measured on our own NOTIFY_SOCKET.
READY=$(python3 - "$BIN/asmguardd" "$WORK/asmguard.toml" "$WORK/notify.sock" "$WORK/pid" <<'PY'
import os, socket, subprocess, sys, time
exe, cfg, ns, pidf = sys.argv[1:]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); s.bind(ns); s.settimeout(120)
env = dict(os.environ, NOTIFY_SOCKET=ns)
t0 = time.monotonic()
p = subprocess.Popen([exe, "--config", cfg], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=open(cfg + ".log", "w"), start_new_session=True)
open(pidf, "w").write(str(p.pid))
while True:
    m = s.recv(4096).decode()
    if "READY=1" in m.split("\n"):
        print("%.1f" % ((time.monotonic() - t0) * 1000)); break
PY
)
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
    python3 - "$WORK/hot.img" <<'PY'
import struct, sys
b = bytearray(4096); label = b"HOTPLUG"
b[32:40] = b"ORCLDISK"; b[40:40 + len(label)] = label
x = 0
for o in range(0, 64, 4):
    if o != 12: x ^= struct.unpack_from("<I", b, o)[0]
struct.pack_into("<I", b, 12, x)
with open(sys.argv[1], "wb") as f: f.write(b); f.truncate(64 << 20)
PY
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
