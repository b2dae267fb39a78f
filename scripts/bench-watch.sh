#!/bin/bash
# bench-watch.sh - the label watch's I/O cost: reads per second that asmguardd's
# label watch ([devices] label_watch_seconds) puts on idle disks. Counts the reads
# completed (/sys/block/<loop>/stat) on N sparse loop disks over a window, with the
# watch at INTERVAL seconds, and prints reads/s per 1,000 disks, measured and
# expected (1,000 / INTERVAL). Root; needs target/release/asmguardd (make build).
#
#   DISKS=4 INTERVAL=2 WINDOW=20 scripts/bench-watch.sh
set -euo pipefail
cd "$(dirname "$0")/.."
DISKS=${DISKS:-4} INTERVAL=${INTERVAL:-2} WINDOW=${WINDOW:-20}
work=$(mktemp -d /tmp/asmguard-bench-watch.XXXXXX)
pins=/sys/fs/bpf/asmguard-bench-watch
loops=()
cleanup() {
	[ -n "${pid:-}" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	for l in "${loops[@]}"; do losetup -d "$l" 2>/dev/null || true; done
	rm -rf "$work" "$pins"
}
trap cleanup EXIT
inc=""
for i in $(seq "$DISKS"); do
	truncate -s 64M "$work/d$i.img"
	l=$(losetup -f --show "$work/d$i.img")
	loops+=("$l")
	inc="$inc\"$(basename "$l")\","
done
cat >"$work/asmguard.toml" <<CFG
[devices]
include = [${inc%,}]
exclude = []
label_watch_seconds = $INTERVAL
[socket]
path = "$work/asmguard.sock"
[filter]
mode = "off"
[metrics]
listen = "127.0.0.1:0"
CFG
target/release/asmguardd --config "$work/asmguard.toml" --bpf-pin-dir "$pins" >"$work/d.log" 2>&1 &
pid=$!
sleep $((INTERVAL + 1))
reads() { for l in "${loops[@]}"; do awk '{print $1}' "/sys/block/$(basename "$l")/stat"; done | paste -sd+ | bc; }
r0=$(reads)
sleep "$WINDOW"
r1=$(reads)
n=$((r1 - r0))
echo "label watch at ${INTERVAL} s, $DISKS disks, ${WINDOW} s: $n reads"
awk -v n="$n" -v d="$DISKS" -v w="$WINDOW" -v i="$INTERVAL" 'BEGIN {
	printf "reads/s per 1,000 disks: measured %.0f, expected %.0f (1,000 / %s s)\n", n / w / d * 1000, 1000 / i, i }'
