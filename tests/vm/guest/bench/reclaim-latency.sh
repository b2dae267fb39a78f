#!/bin/sh
# reclaim-latency: a benchmark, not a test (run only when named:
# `VM_BUILD=0 LAB_GUEST_SLOTS=2 tests/vm/run.sh 6.12 reclaim-latency`; the lab's
# test runs never do: it lives outside tests/). Prints its figures as
# "VMINFO reclaim-latency bench ..." lines.
#
# A foreground fio job (4 KiB random reads, O_DIRECT, queue depth 1, over the
# allocated AUs only: the database's reads) on a thin disk of its own whose
# discards cost the reads latency. DEV=scsi (the default): scsi_debug loaded
# again as a SIZE_MIB thin LUN (UNMAP), one command at a time, each taking
# NDELAY ns, UNMAPs of at most 1 MiB and no I/O scheduler, so a chunk's
# BLKDISCARD goes out as a burst of UNMAPs that the reads queue behind, longer
# the higher the rate (a chunk is a quarter second's worth). DEV=thin: a dm-thin
# volume (64 KiB blocks, the pool's data on a sparse tmpfs file: boot with
# VM_MEM=3G), whose discards remove the mappings under the pool's lock and
# punch the data file (the guest's environment is the script's: edit the
# defaults below to switch). Measured: the fio p99 with no reclaim, then
# during a reclaim of the free AUs at a fixed --rate (--latency-limit 0), then
# during the same reclaim with the adaptive rate (--latency-limit MULT for each
# of MULTS, the same --rate as ceiling), ROUNDS rounds rotating the order, the
# disk refilled and the daemon restarted before each reclaim; a run still going
# after CAP seconds is stopped as Ctrl-C stops it (the bytes done by then are
# its figure). fio runs for exactly as long as each reclaim (stopped with
# SIGINT when it ends), so each p99 covers the reclaim's whole run and nothing
# else. Under TCG every figure is emulated time: only the ratios measured side
# by side in one run say anything (BENCHMARKS.md).
. /vmtests/lib.sh

ROUNDS=${ROUNDS:-2}
RATE=${RATE:-64}          # MiB/s: the fixed rate, and the adaptive runs' ceiling
CAP=${CAP:-40}            # seconds: a run still going then is stopped (SIGINT, as Ctrl-C)
MULTS=${MULTS:-"1.5 2 4"} # --latency-limit of the adaptive runs (4: the default)
SIZE_MIB=${SIZE_MIB:-480} # the thin volume; 1 MiB AUs: 32 allocated (2..33), the rest free
AUS=$SIZE_MIB
ALLOC=2-33
C="asmguardctl --socket /run/asmguard/asmguard.sock"
M=$((1024 * 1024))
command -v fio >/dev/null || { fail bench "no fio"; vm_exit; }

DEV=${DEV:-scsi} # scsi: scsi_debug, one command at a time, each NDELAY ns; thin: dm-thin
NDELAY=${NDELAY:-500000}
if [ "$DEV" = scsi ]; then
	# scsi_debug again, as a thin LUN whose UNMAPs cost the reads their turn: one
	# command at a time (max_queue=1), each taking NDELAY, UNMAPs of at most 1 MiB
	# (a chunk's BLKDISCARD goes out as a burst of them), no I/O scheduler (the
	# reads queue behind the burst, as on an array's busy port)
	modprobe -r scsi_debug 2>/dev/null
	modprobe scsi_debug dev_size_mb=$SIZE_MIB sector_size=512 lbpu=1 lbprz=1 \
		unmap_max_blocks=2048 unmap_max_desc=1 max_queue=1 ndelay=$NDELAY num_tgts=1 max_luns=1 ||
		{ fail bench "modprobe scsi_debug"; vm_exit; }
	D=""
	i=0
	while [ -z "$D" ] && [ $i -lt 100 ]; do
		for d in /sys/class/block/sd*; do
			grep -q scsi_debug "$d/device/model" 2>/dev/null && [ -b "/dev/${d##*/}" ] && D=/dev/${d##*/}
		done
		i=$((i + 1)); sleep 0.1
	done
	[ -b "$D" ] || { fail bench "no scsi_debug disk"; vm_exit; }
	echo none >/sys/block/${D#/dev/}/queue/scheduler
	PAT=${D#/dev/}
	pool_used() { echo "-"; }
	info "reclaim-latency bench device $D ndelay=${NDELAY}ns discard_max=$(cat /sys/block/${D#/dev/}/queue/discard_max_bytes) scheduler=$(cat /sys/block/${D#/dev/}/queue/scheduler)"
else
# the pool: data as large as the volume (every AU filled), 64 KiB blocks
truncate -s 32M /tmp/rl-meta.img && truncate -s $((SIZE_MIB + 64))M /tmp/rl-data.img
meta=$(losetup -f --show /tmp/rl-meta.img) && data=$(losetup -f --show /tmp/rl-data.img) ||
	{ fail bench "losetup"; vm_exit; }
dd if=/dev/zero of="$meta" bs=4096 count=1 conv=notrunc 2>/dev/null
dmsetup create rlpool --table "0 $(blockdev --getsz "$data") thin-pool $meta $data 128 0" &&
	dmsetup message /dev/mapper/rlpool 0 "create_thin 0" &&
	dmsetup create rlthin --table "0 $((SIZE_MIB * 2048)) thin /dev/mapper/rlpool 0" ||
	{ fail bench "dm-thin: $(dmsetup ls 2>&1)"; vm_exit; }
D=/dev/mapper/rlthin
PAT=mapper/rlthin
pool_used() { dmsetup status rlpool | awk '{print $6}'; } # used/total data blocks
fi

# (as grid, whom the filter lets write: the daemon runs from the first fill on)
chown grid "$D"
fill() {
	as_user grid timeout 120 asmguard-synth-asm write "$D" --label RLAT --group RLDG --aus $AUS --allocated $ALLOC --fill >/tmp/rl.fill 2>&1 ||
		info "reclaim-latency bench fill failed: $(tail -n 2 /tmp/rl.fill)"
}
fill
info "reclaim-latency bench filled pool=$(pool_used)"
agd_config /tmp/rl.toml "$PAT" 'filter.allow_groups=[]'
: >/tmp/rl.log
agd_start /tmp/rl.toml /tmp/rl.log || { fail bench "asmguardd: $(tail -n 3 /tmp/rl.log)"; vm_exit; }
# a daemon started afresh: the tracer's histograms hold only what comes next
# (the adaptive rate's baseline is everything the tracer saw before the run:
# without this, the fill's large writes would be that p99)
alive() { [ -e /proc/$1/stat ] && [ "$(sed 's/.*) //' /proc/$1/stat | cut -d' ' -f1)" != Z ]; }
restart() {
	kill "$agd"
	i=0
	while [ $i -lt 100 ] && alive "$agd"; do i=$((i + 1)); sleep 0.1; done
	if alive "$agd"; then
		info "reclaim-latency bench asmguardd did not stop in 10 s: killed ($(tail -n 2 /tmp/rl.log | tr '\n' ' '))"
		kill -9 "$agd"
	fi
	wait "$agd" 2>/dev/null
	agd_start /tmp/rl.toml /tmp/rl.log || info "reclaim-latency bench asmguardd: $(tail -n 3 /tmp/rl.log)"
}

# fio_start OUT: random reads of the allocated AUs until SIGINT (at most 300 s)
fio_start() {
	fio --name=fg --filename="$D" --rw=randread --bs=4k --direct=1 --ioengine=psync \
		--offset=$((2 * M)) --size=$((32 * M)) --time_based --runtime=300 \
		--output-format=json --output="$1" >/dev/null 2>&1 &
	fio_pid=$!
	sleep 1 # fio's start, and a baseline for the reclaim's adaptive rate
}
fio_stop() { kill -INT $fio_pid 2>/dev/null; wait $fio_pid 2>/dev/null; }
# p99 in microseconds, and the reads done, from fio's JSON
p99_us() { tr -d ' \n' <"$1" | grep -o '"clat_ns":{[^}]*"percentile":{[^}]*}' | grep -o '"99.000000":[0-9]*' | head -n 1 | awk -F: '{printf "%.1f", $2 / 1000}'; }
ios() { tr -d ' \n' <"$1" | grep -o '"read":{"io_bytes":[0-9]*,"io_kbytes":[0-9]*,"bw_bytes":[0-9]*,"bw":[0-9]*,"iops":[0-9.]*' | head -n 1 | sed 's/.*"iops"://'; }
now() { date +%s.%N; }

# run LIMIT ROUND: one reclaim with --latency-limit LIMIT (0: a fixed rate) under fio
run() {
	info "reclaim-latency bench step fill"
	fill
	info "reclaim-latency bench step restart"
	restart
	info "reclaim-latency bench step run"
	lim=$1
	before=$(pool_used)
	rm -f /run/asmguard/reclaim/RLAT.json
	fio_start /tmp/rl.fio.$lim.$2
	$C iostat RLAT --interval 1 --count 30 --json >/tmp/rl.iostat.$lim.$2 2>&1 &
	iostat_pid=$!
	t0=$(now)
	timeout -s INT $CAP $C reclaim RLAT --watch 0.5 --rate $RATE --latency-limit $lim --json >/tmp/rl.res.$lim.$2 2>/tmp/rl.prog.$lim.$2
	rc=$?
	t1=$(now)
	fio_stop
	kill $iostat_pid 2>/dev/null
	wait $iostat_pid 2>/dev/null
	secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}')
	bytes=$(grep '"phase":"reclaiming"' /tmp/rl.prog.$lim.$2 | tail -n 1 | grep -o '"done_bytes":[0-9]*' | sed 's/.*://')
	changes=$(grep -o '"rate_note":"[^"]*"' /tmp/rl.prog.$lim.$2 | uniq | wc -l)
	low=$(grep '"phase":"reclaiming"' /tmp/rl.prog.$lim.$2 | grep -o '"rate_limit_bytes_per_sec":[0-9.e+]*' | sed 's/.*://' | sort -g | head -n 1)
	note=$(grep -o '"rate_note":"[^"]*"' /tmp/rl.prog.$lim.$2 | grep -v '""' | tail -n 1)
	info "reclaim-latency bench latency_limit=$lim round=$2 rc=$rc pool=$before->$(pool_used) seconds=$secs discarded=${bytes:-?} p99_us=$(p99_us /tmp/rl.fio.$lim.$2) iops=$(ios /tmp/rl.fio.$lim.$2) rate_changes=$changes lowest_limit_mib=$(awk -v b="${low:-0}" 'BEGIN {printf "%.1f", b / 1048576}') last_note=$note"
	info "reclaim-latency bench latency_limit=$lim round=$2 iostat: $(head -c 600 /tmp/rl.iostat.$lim.$2 | tr '\n' ' ')"
	[ $rc = 0 ] || info "reclaim-latency bench latency_limit=$lim round=$2 not done: $(head -c 400 /tmp/rl.res.$lim.$2 | tr '\n' ' ') :: $(grep -v '^{' /tmp/rl.prog.$lim.$2 | tail -n 3)"
}

info "reclaim-latency bench setup dev=$DEV rate=${RATE}MiB/s latency_limits=0,$MULTS free=$((AUS - 34))MiB kernel=$(uname -r) cpus=$(nproc)"
r=1
while [ $r -le "$ROUNDS" ]; do
	fio_start /tmp/rl.fio.base.$r
	sleep 4
	fio_stop
	info "reclaim-latency bench baseline round=$r p99_us=$(p99_us /tmp/rl.fio.base.$r) iops=$(ios /tmp/rl.fio.base.$r)"
	# the order rotates from round to round
	set -- 0 $MULTS
	i=1
	while [ $i -lt $r ]; do first=$1; shift; set -- "$@" "$first"; i=$((i + 1)); done
	for l in "$@"; do run "$l" $r; done
	r=$((r + 1))
done
pass bench "$ROUNDS rounds"
$C filter disable >/dev/null 2>&1
kill "$agd" 2>/dev/null
wait "$agd" 2>/dev/null
rm -f /run/asmguard/filter.state
if [ "$DEV" = thin ]; then
	dmsetup remove rlthin; dmsetup remove rlpool
	losetup -d "$meta" "$data"
	rm -f /tmp/rl-meta.img /tmp/rl-data.img
fi
vm_exit
