#!/usr/bin/env bash
# asmguard demo (make demo): build, make a sparse-file loop device, start asmguardd with
# a throw-away config and socket, label the disk, show lsdsk, status and inspect, and
# clean up after itself (trap on EXIT: daemon stopped, loop device detached, files
# removed), also when a step fails or on Ctrl-C.
#
# Needs root (loop devices, exclusive opens). Touches no disk but the loop device it
# makes: the daemon's config includes only that device.
set -euo pipefail

cd "$(dirname "$0")/.."
if [ -t 1 ]; then B=$'\e[1m'; N=$'\e[0m'; else B=""; N=""; fi
step() { printf '\n%s==> %s%s\n' "$B" "$*" "$N"; }
show() { printf '%s$ %s%s\n' "$B" "$*" "$N"; "$@"; }

if [ "$(id -u)" != 0 ]; then
    echo "demo: needs root (it creates a loop device)" >&2
    exit 1
fi
for t in losetup truncate; do
    command -v "$t" >/dev/null || { echo "demo: $t is missing" >&2; exit 1; }
done

# BIN=<dir> uses binaries built already (the tests do); otherwise a release build.
if [ -n "${BIN:-}" ]; then
    step "Using the binaries in $BIN"
else
    step "Building asmguardd and asmguardctl (cargo build --release)"
    cargo build --release -p asmguardd -p asmguardctl
    BIN="target/release"
fi

WORK=$(mktemp -d /tmp/asmguard-demo.XXXXXX)
LOOP=""
DPID=""
cleanup() {
    rc=$?
    trap - EXIT INT TERM
    step "Cleaning up"
    if [ -n "$DPID" ] && kill -0 "$DPID" 2>/dev/null; then
        echo "stopping asmguardd (pid $DPID)"
        kill -TERM "$DPID" 2>/dev/null || true
        wait "$DPID" 2>/dev/null || true
    fi
    if [ -n "$LOOP" ]; then
        echo "detaching $LOOP"
        losetup -d "$LOOP" 2>/dev/null || true
    fi
    rm -rf "$WORK"
    echo "removed $WORK"
    if [ "$rc" != 0 ]; then echo "demo FAILED (exit $rc)" >&2; fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step "Creating a 1 GiB sparse file and a loop device on it"
show truncate -s 1G "$WORK/disk1.img"
LOOP=$(losetup -f --show "$WORK/disk1.img")
NAME=$(basename "$LOOP")
echo "loop device: $LOOP"

step "Writing a throw-away config (only $NAME is looked at) and starting asmguardd"
SOCK="$WORK/asmguard.sock"
cat > "$WORK/asmguard.toml" <<TOML
[devices]
include = ["$NAME"]
exclude = []

[socket]
path = "$SOCK"
TOML
cat "$WORK/asmguard.toml"
show "$BIN/asmguardd" --check-config --config "$WORK/asmguard.toml"
"$BIN/asmguardd" --config "$WORK/asmguard.toml" 2>"$WORK/asmguardd.log" &
DPID=$!
CTL=("$BIN/asmguardctl" --socket "$SOCK")
for _ in $(seq 100); do
    if "${CTL[@]}" status >/dev/null 2>&1; then break; fi
    if ! kill -0 "$DPID" 2>/dev/null; then
        echo "asmguardd exited:" >&2; cat "$WORK/asmguardd.log" >&2; exit 1
    fi
    sleep 0.1
done
"${CTL[@]}" status >/dev/null
echo "asmguardd is ready (pid $DPID, socket $SOCK)"

step "Labelling the disk"
show "${CTL[@]}" label DEMO1 "$LOOP"

step "Listing the labelled disks"
show "${CTL[@]}" lsdsk

step "Daemon status"
show "${CTL[@]}" status

step "Reading the disk offline (no daemon involved)"
show "${CTL[@]}" inspect "$LOOP"
if command -v blkid >/dev/null; then
    step "util-linux blkid sees the same label"
    show blkid -p "$LOOP"
fi

step "Refusals keep data safe: a second label without --force"
show "${CTL[@]}" label OTHER "$LOOP" || echo "(refused with exit $?, nothing written)"

step "asmguardd log"
cat "$WORK/asmguardd.log"
