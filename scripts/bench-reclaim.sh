#!/bin/sh
# bench-reclaim: figures for `asmguardctl reclaim` (a benchmark, not a pass/fail test).
#
#   sudo scripts/bench-reclaim.sh          # after `cargo build --release --workspace --bins`
#
# Environment:
#   DISKS=100 DISK_GIB=100   the synthetic disk group for the AT scan (10 TiB)
#   THRU_MIB=1024            size of the disk for the throughput figures
#   RATE_MIB=200             the --rate of the throttled run
#   BIN=target/release       where asmguardd, asmguardctl, asmguard-synth-asm are
#   WORK=/var/tmp            where the sparse images go (needs a filesystem with
#                            sparse files and hole punching: ext4, xfs, tmpfs)
#
# 1. AT scan: DISKS sparse images of DISK_GIB GiB, each a SYNTHETIC ASM disk
#    (asmguard-synth-asm: only the metadata is written; 1 MiB AUs, about 70 % of
#    the AUs allocated, free runs below the high-water mark), on loop devices,
#    one disk group. `asmguardctl reclaim --diskgroup BENCH --dry-run` through
#    asmguardd: wall time of the whole request (header + AT read with O_DIRECT,
#    plan, for every disk), cold (page cache dropped) and warm.
# 2. Throughput: one THRU_MIB disk filled with random data, almost all AUs free.
#    Unthrottled reclaim vs `blkdiscard` of the same byte range on the same loop
#    device (refilled in between), then reclaim with --rate RATE_MIB.
set -eu
. "$(dirname "$0")/bench-lib.sh"

DISKS=${DISKS:-100}
DISK_GIB=${DISK_GIB:-100}
THRU_MIB=${THRU_MIB:-1024}
RATE_MIB=${RATE_MIB:-200}
BIN=${BIN:-target/release}
WORK=${WORK:-/var/tmp}

[ "$(id -u)" = 0 ] || { echo "bench-reclaim: needs root (loop devices)" >&2; exit 2; }
for b in asmguardd asmguardctl asmguard-synth-asm; do
	[ -x "$BIN/$b" ] || { echo "bench-reclaim: $BIN/$b missing: cargo build --release --workspace --bins" >&2; exit 2; }
done
BIN=$(cd "$BIN" && pwd)
dir=$(mktemp -d "$WORK/asmguard-bench-reclaim.XXXXXX")
loops=""
agd=""
cleanup() {
	[ -n "$agd" ] && kill "$agd" 2>/dev/null && wait "$agd" 2>/dev/null
	for l in $loops; do losetup -d "$l" 2>/dev/null || true; done
	# The daemon's filter pins outlive it by design: remove them, or a stale
	# cgroup-device program keeps denying writes to reused loop numbers.
	rm -rf "/sys/fs/bpf/asmguard-bench-$$"
	rm -rf "$dir"
}
trap cleanup EXIT INT TERM
C="$BIN/asmguardctl --socket $dir/asmguard.sock"
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", b - a}'; }
num() { grep -o "\"$1\": *[0-9.e+-]*" | head -n 1 | sed 's/.*: *//'; }

echo "bench-reclaim: $(uname -r), $(nproc) CPUs, images in $dir ($(df -T "$dir" | awk 'NR == 2 {print $2}'))"

# ---- the disk group ------------------------------------------------------------
aus=$((DISK_GIB * 1024))
# allocated: 2..(60 % of the disk), a hole, then up to 80 %, then free to the end
a1=$((aus * 60 / 100)); a2=$((aus * 70 / 100)); a3=$((aus * 80 / 100))
names=""
t0=$(now)
i=1
while [ $i -le "$DISKS" ]; do
	img="$dir/d$i.img"
	truncate -s "${DISK_GIB}G" "$img"
	"$BIN/asmguard-synth-asm" write "$img" --label "BR$i" --group BENCH --dsknum "$i" \
		--allocated "2-$a1,$a2-$a3" >/dev/null
	l=$(losetup -f --show "$img")
	loops="$loops $l"
	names="$names\"${l#/dev/}\", "
	i=$((i + 1))
done
# the throughput disk
timg="$dir/thru.img"
truncate -s "${THRU_MIB}M" "$timg"
tl=$(losetup -f --show "$timg")
loops="$loops $tl"
names="$names\"${tl#/dev/}\""
fill() { "$BIN/asmguard-synth-asm" write "$timg" --label BTHRU --group BTHRU --allocated 2-10 --fill >/dev/null; }
fill
echo "setup: $DISKS x $DISK_GIB GiB synthetic ASM disks ($((DISKS * DISK_GIB)) GiB) + a $THRU_MIB MiB one on loop devices in $(secs "$t0" "$(now)") s"

bench_config "$dir/asmguard.toml" "$names" "$dir/asmguard.sock" "[filter]" 'mode = "off"'
"$BIN/asmguardd" --config "$dir/asmguard.toml" --bpf-pin-dir "/sys/fs/bpf/asmguard-bench-$$" >"$dir/agd.log" 2>&1 &
agd=$!
i=0
while [ $i -lt 300 ] && ! $C status >/dev/null 2>&1; do i=$((i + 1)); sleep 0.1; done
n=$($C lsdsk --json | grep -c '"label": "BR')
echo "asmguardd sees $n disks of group BENCH"

# ---- 1. AT scan of the disk group ----------------------------------------------
sync
echo 3 >/proc/sys/vm/drop_caches
t0=$(now)
$C reclaim --diskgroup BENCH --dry-run --json >"$dir/scan.json"
cold=$(secs "$t0" "$(now)")
best=""
for r in 1 2 3; do
	t0=$(now)
	$C reclaim --diskgroup BENCH --dry-run --json >"$dir/scan2.json"
	w=$(secs "$t0" "$(now)")
	best=$(awk -v a="${best:-999}" -v b="$w" 'BEGIN {print (b < a) ? b : a}')
done
planned=$(grep -o '"planned_bytes": *[0-9]*' "$dir/scan.json" | tail -n 1 | sed 's/.*: *//')
free_aus=$(grep -o '"free_aus": *[0-9]*' "$dir/scan.json" | awk -F': *' '{s += $2} END {print s}')
echo "AT scan of $DISKS disks, $((DISKS * DISK_GIB)) GiB (dry run through asmguardd, header + AU 0 of every disk with O_DIRECT, plan): cold $cold s, warm $best s (best of 3); $free_aus free AUs, $planned bytes ($(awk -v b="$planned" 'BEGIN {printf "%.2f", b / 2^40}') TiB) would go back; target <= 5 s"

# ---- 2. throughput ---------------------------------------------------------------
blocks() { stat --format=%b "$timg"; }
$C reclaim BTHRU --dry-run --json >"$dir/t.json"
tp=$(grep -o '"planned_bytes": *[0-9]*' "$dir/t.json" | tail -n 1 | sed 's/.*: *//')
b0=$(blocks)
t0=$(now)
$C reclaim BTHRU --watch 0 --json >"$dir/r1.json" 2>/dev/null
rw=$(secs "$t0" "$(now)")
b1=$(blocks)
rb=$(num reclaimed_bytes <"$dir/r1.json")
re=$(num elapsed_seconds <"$dir/r1.json")
rr=$(awk -v b="$rb" -v s="$re" 'BEGIN {printf "%.0f", b / s / 2^20}')
rwr=$(awk -v b="$rb" -v s="$rw" 'BEGIN {printf "%.0f", b / s / 2^20}')
echo "reclaim unthrottled: $rb bytes in $re s of ioctls and stop-rule checks = $rr MiB/s; the whole request (plan, writers check, execution; process start included) $rw s = $rwr MiB/s (backing file: $b0 -> $b1 512-byte blocks allocated, -$(((b0 - b1) * 512)) bytes)"

fill
sync
# the same byte range as the plan: AU 12 (11 is reserved) to the end of the last whole AU
off=$((12 * 1048576))
len=$(( (THRU_MIB - 12) * 1048576 ))
b2=$(blocks)
t0=$(now)
blkdiscard -f -o "$off" -l "$len" "$tl"
bd=$(secs "$t0" "$(now)")
b3=$(blocks)
br=$(awk -v b="$len" -v s="$bd" 'BEGIN {printf "%.0f", b / s / 2^20}')
echo "blkdiscard of the same range ($len bytes) on the same loop device: $bd s = $br MiB/s (backing file: $b2 -> $b3 blocks); reclaim/blkdiscard = $(awk -v a="$rr" -v b="$br" 'BEGIN {printf "%.2f", a / b}') (execution), $(awk -v a="$rwr" -v b="$br" 'BEGIN {printf "%.2f", a / b}') (whole request vs whole blkdiscard process)"

fill
sync
$C reclaim BTHRU --watch 0 --rate "$RATE_MIB" --json >"$dir/r2.json" 2>/dev/null
tb=$(num reclaimed_bytes <"$dir/r2.json")
te=$(num elapsed_seconds <"$dir/r2.json")
echo "reclaim --rate $RATE_MIB: $tb bytes in $te s = $(awk -v b="$tb" -v s="$te" 'BEGIN {printf "%.1f", b / s / 2^20}') MiB/s (planned $tp bytes)"
