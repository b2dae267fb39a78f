#!/usr/bin/env bash
# asmguard demo (make demo): build, make a sparse-file loop device, start asmguardd with
# a throw-away config and socket, label the disk, show lsdsk, status and inspect, show
# the write filter denying root's dd beside an allowed writer's write and the event the
# refusal produced, and clean up after
# itself (trap on EXIT: filter removed, daemon stopped, loop device detached, files
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
# The filter's BPF pins: a directory of the demo's own, never /sys/fs/bpf/asmguard.
PIN=/sys/fs/bpf/asmguard-demo-$$
LOOP=""
DPID=""
cleanup() {
    rc=$?
    trap - EXIT INT TERM
    step "Cleaning up"
    if [ -e "$PIN" ]; then
        # pinned programs outlive the daemon by design: remove them explicitly
        "$BIN/asmguardctl" --socket "$WORK/asmguard.sock" filter disable >/dev/null 2>&1 || true
        rm -rf "$PIN" 2>/dev/null || true
        echo "removed the write filter ($PIN)"
    fi
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
# The one program the filter lets write to managed disks: a copy of dd the demo
# makes (a database's allow-list names its users, groups or executables; the
# demo names only what it creates, so nothing in it is missing on this host).
WRITER="$WORK/asm-writer"
cp "$(command -v dd)" "$WRITER"
# A free port for the metrics endpoint (the default is 127.0.0.1:9465).
MPORT=$(for p in $(seq 19465 19565); do
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; break; }
done)
cat > "$WORK/asmguard.toml" <<TOML
[devices]
include = ["$NAME"]
exclude = []

[paths]
owner = "root"
group = "root"

[socket]
path = "$SOCK"
admin_group = "root"

[metrics]
listen = "127.0.0.1:$MPORT"

[filter]
allow_users = []
allow_groups = []

# who AND what: root running the writer (root's own dd is refused)
[[rule]]
name = "demo-writer"
users = ["root"]
executables = ["$WRITER"]
TOML
cat "$WORK/asmguard.toml"
show "$BIN/asmguardd" --check-config --config "$WORK/asmguard.toml"
"$BIN/asmguardd" --config "$WORK/asmguard.toml" --bpf-pin-dir "$PIN" 2>"$WORK/asmguardd.log" &
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

step "The write filter: root tries to overwrite the labelled disk with dd"
BACKEND=$("${CTL[@]}" status --json | tr -d ' \n' | sed -n 's/.*"filter_backend":"\([^"]*\)".*/\1/p')
if [ "$BACKEND" = cgroup_device ]; then
    echo "(The BPF LSM programs did not load here (status's \`filter:\` line above says why), so"
    echo " asmguardd uses its fallback backend:"
    echo " a cgroup-device program on the cgroup-v2 root that denies write-opens of managed"
    echo " disks. status says \"degraded: open-time only\". The full LSM filter - writes on"
    echo " old file descriptors, discard/SG_IO/partition ioctls, mmap, io_uring - runs in the"
    echo " VM lab: tests/vm/run.sh 6.12 filter.)"
else
    echo "(filter backend: $BACKEND)"
fi
show dd if=/dev/zero of="$LOOP" bs=4096 count=1 conv=notrunc ||
    echo "(refused with exit $?: nothing reached the disk or the page cache)"

step "The allowed writer (a [[rule]]: root AND that executable) writes beside the label (at 1 MiB)"
if show "$WRITER" if=/dev/zero of="$LOOP" bs=4096 count=1 seek=256 conv=notrunc oflag=direct; then
    echo "(allowed: 4096 bytes written at 1 MiB)"
else
    echo "(the allowed writer was refused with exit $?)"
fi

step "The refusal left an event (asmguardctl events; --json and --follow also work)"
# the daemon reads the kernel's events as they come: give a busy machine 5 s
for _ in $(seq 50); do
    "${CTL[@]}" events 2>/dev/null | grep -q DENIED && break
    sleep 0.1
done
show "${CTL[@]}" events

step "A fresh read shows the label, untouched"
show "${CTL[@]}" inspect "$LOOP"

step "Latency, measured as it happens: asmguardctl iostat while a reader runs"
dd if="$LOOP" of=/dev/null bs=16k count=3000 iflag=direct 2>/dev/null &
RPID=$!
show "${CTL[@]}" iostat DEMO1 --interval 1 --count 1
wait "$RPID" 2>/dev/null || true

step "A few lines of the Prometheus scrape (http://127.0.0.1:$MPORT/metrics)"
if command -v curl >/dev/null; then
    curl -s "http://127.0.0.1:$MPORT/metrics" |
        grep -E '^asmguard_(disk_info|backend_info|filter_mode|writes_denied_total|io_bytes_total|io_latency_seconds_count)' |
        head -n 12
fi

step "asmguardd log"
cat "$WORK/asmguardd.log"
