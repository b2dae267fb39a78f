#!/bin/sh
# VM-lab guest test of the latency tracer (asmguard-iolat) on a real Debian
# kernel: tp_btf and raw_tp, with the kernel's issue stamps and with our own,
# on scsi_debug (mq-deadline: requests are inserted), null_blk and a loop
# device. The kernel's stamps must be in use (and verified by the tracer's
# probe read) on every line, 5.10 and 6.1 included. Each case: N O_DIRECT reads and M writes of 4 KiB must show as
# exactly N and M I/Os and N*4096 / M*4096 bytes in the scrape, and the
# scrape's histograms must be cumulative. A dm-multipath device over a fast
# and a slow null_blk path has a latency series per path; a dm-striped volume
# over two traced disks counts each disk's share. On scsi_debug, reads of its
# medium-error sector must count as medium errors and not as latencies.
#
# To run it alone:
#   tests/vm/run.sh 6.1 iolat; tests/vm/run.sh 6.12 iolat
# lab-settings: once-per-kernel
. /vmtests/lib.sh

port=19790
# the exporter and its scrapes talk over loopback
lo_up
# sample NAME{LABELS TEXT: the sum of the sample lines of a scrape with those
# labels first (and maybe more: size="single"|"multi"); empty if none
sample() {
	printf '%s\n' "$2" | awk -v n="$1" '
		index($0, n"} ") == 1 || index($0, n",") == 1 { s += $NF; seen = 1 }
		END { if (seen) print s }'
}

# case NAME DEV FLAGS...: trace DEV with asmguard-iolat FLAGS, check exact counts
check_case() {
	name=$1 dev=$2
	shift 2
	port=$((port + 1))
	url="http://127.0.0.1:$port/metrics"
	asmguard-iolat --listen "127.0.0.1:$port" --device "$dev=VMT" "$@" 2>/tmp/iolat-$name.log &
	pid=$!
	i=0
	while ! grep -q serving /tmp/iolat-$name.log 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	if ! grep -q serving /tmp/iolat-$name.log; then
		fail "$name.start" "$(cat /tmp/iolat-$name.log)"
		kill $pid 2>/dev/null
		return
	fi
	pass "$name.start" "$(cat /tmp/iolat-$name.log)"
	# which stamps: the kernel's wherever the queue keeps stats (a #define
	# on 5.10 and 6.1, from the tracer's table; an enum in the BTF later),
	# verified by the tracer's probe read at load
	case " $* " in
	*" --no-kernel-stamps "*) want="own stamps (turned off)" ;;
	*) want="kernel stamps (QUEUE_FLAG_STATS = " ;;
	esac
	if ! grep -qF "$want" /tmp/iolat-$name.log; then
		fail "$name.stamps" "want '$want': $(cat /tmp/iolat-$name.log)"
	elif [ "$want" != "own stamps (turned off)" ] && ! grep -q "verified on " /tmp/iolat-$name.log; then
		fail "$name.stamps" "kernel stamps not verified by the probe read: $(cat /tmp/iolat-$name.log)"
	else
		pass "$name.stamps" "$(sed -n 's/.*(\(.*stamps[^)]*)\).*/\1/p' /tmp/iolat-$name.log)"
	fi
	# where own stamps are kept: the in-flight cells need BPF cmpxchg (5.12)
	case $(uname -r) in
	5.10.*) want="in-flight LRU map" ;;
	*) want="in-flight cells" ;;
	esac
	grep -qF "$want" /tmp/iolat-$name.log && pass "$name.in-flight" "$want" \
		|| fail "$name.in-flight" "want '$want': $(cat /tmp/iolat-$name.log)"
	d=$(basename "$(readlink -f "$dev")")
	key_r="{device=\"$d\",label=\"VMT\",op=\"read\""
	key_w="{device=\"$d\",label=\"VMT\",op=\"write\""
	if ! before=$(asmguard-iolat scrape --url "$url" 2>&1); then
		fail "$name.scrape" "$before"
		kill $pid
		return
	fi
	dd if="$dev" of=/dev/null bs=4096 count=37 iflag=direct status=none
	mid=$(asmguard-iolat scrape --url "$url")
	dd if=/dev/zero of="$dev" bs=4096 seek=256 count=23 oflag=direct status=none
	after=$(asmguard-iolat scrape --url "$url")
	r0=$(sample "asmguard_io_latency_seconds_count$key_r" "$before"); r0=${r0:-0}
	r1=$(sample "asmguard_io_latency_seconds_count$key_r" "$mid")
	b0=$(sample "asmguard_io_bytes_total$key_r" "$before"); b0=${b0:-0}
	b1=$(sample "asmguard_io_bytes_total$key_r" "$mid")
	w1=$(sample "asmguard_io_latency_seconds_count$key_w" "$mid"); w1=${w1:-0}
	w2=$(sample "asmguard_io_latency_seconds_count$key_w" "$after")
	wb1=$(sample "asmguard_io_bytes_total$key_w" "$mid"); wb1=${wb1:-0}
	wb2=$(sample "asmguard_io_bytes_total$key_w" "$after")
	[ "$((r1 - r0))" = 37 ] && [ "$((b1 - b0))" = $((37 * 4096)) ] \
		&& pass "$name.reads" "37 reads, $((b1 - b0)) bytes" \
		|| fail "$name.reads" "counted $((r1 - r0)) reads, $((b1 - b0)) bytes (want 37, $((37 * 4096)))"
	[ "$((w2 - w1))" = 23 ] && [ "$((wb2 - wb1))" = $((23 * 4096)) ] \
		&& pass "$name.writes" "23 writes, $((wb2 - wb1)) bytes" \
		|| fail "$name.writes" "counted $((w2 - w1)) writes, $((wb2 - wb1)) bytes (want 23, $((23 * 4096)))"
	# 4 KiB reads are single-block I/Os, in their own class
	key_rs="$key_r,size=\"single\""
	rs0=$(sample "asmguard_io_latency_seconds_count$key_rs" "$before"); rs0=${rs0:-0}
	rs1=$(sample "asmguard_io_latency_seconds_count$key_rs" "$mid"); rs1=${rs1:-0}
	[ "$((rs1 - rs0))" = 37 ] && pass "$name.single" "37 reads of 4 KiB with size=\"single\"" \
		|| fail "$name.single" "$((rs1 - rs0)) reads with size=\"single\" (want 37): $(printf '%s\n' "$mid" | grep "^asmguard_io_latency_seconds_count$key_r")"
	# buckets never decrease and +Inf equals _count
	bad=$(printf '%s\n' "$after" | awk -v k="$key_rs}" '
		index($0, "asmguard_io_latency_seconds_bucket{le=") == 1 && index($0, substr(k, 2)) {
			if ($NF + 0 < prev + 0) bad = 1; prev = $NF; last = $NF }
		END { print bad + 0, last }')
	count=$(sample "asmguard_io_latency_seconds_count$key_rs" "$after")
	[ "${count:-0}" -gt 0 ] && [ "${bad%% *}" = 0 ] && [ "${bad#* }" = "$count" ] \
		&& pass "$name.cumulative" "+Inf = count = $count" \
		|| fail "$name.cumulative" "bad buckets: $bad, count $count"
	[ "$dev" = "$VM_SCSI" ] && check_errors "$name" "$dev" "$url" "$after" "$key_r"
	[ "$name" = "$(basename "$VM_SCSI")-tp_btf" ] && check_sizes "$name" "$dev" "$url" "$key_r"
	kill $pid
	wait $pid 2>/dev/null
}

# check_errors NAME DEV URL SCRAPE KEY_R: reads of scsi_debug's medium-error
# sector (opts bit 2) fail with BLK_STS_MEDIUM: each one is counted in
# asmguard_io_errors_total{kind="medium"} of the disk's path and not as a
# latency sample
check_errors() {
	name=$1 dev=$2 url=$3 before=$4 key_r=$5
	d=$(basename "$(readlink -f "$dev")")
	key_e="{disk=\"VMT\",path=\"$d\",kind=\"medium\""
	opts=/sys/bus/pseudo/drivers/scsi_debug/opts
	bad=$(cat /sys/module/scsi_debug/parameters/medium_error_start 2>/dev/null || echo 4660)
	ss=$(blockdev --getss "$dev")
	e0=$(sample "asmguard_io_errors_total$key_e" "$before"); e0=${e0:-0}
	r0=$(sample "asmguard_io_latency_seconds_count$key_r" "$before"); r0=${r0:-0}
	old=$(cat $opts)
	echo 2 >$opts
	failed=0
	for i in 1 2 3; do
		dd if="$dev" of=/dev/null bs="$ss" skip="$bad" count=1 iflag=direct status=none 2>/dev/null \
			|| failed=$((failed + 1))
	done
	echo "$old" >$opts
	after=$(asmguard-iolat scrape --url "$url")
	e1=$(sample "asmguard_io_errors_total$key_e" "$after"); e1=${e1:-0}
	r1=$(sample "asmguard_io_latency_seconds_count$key_r" "$after"); r1=${r1:-0}
	[ "$failed" = 3 ] && [ "$((e1 - e0))" = 3 ] && [ "$((r1 - r0))" = 0 ] \
		&& pass "$name.errors" "3 failed reads: 3 medium errors, no latency sample" \
		|| fail "$name.errors" "$failed of 3 reads failed; counted $((e1 - e0)) medium errors (want 3), $((r1 - r0)) latency samples (want 0): $(printf '%s\n' "$after" | grep '^asmguard_io_errors_total')"
}

# check_sizes NAME DEV URL KEY_R: 8 KiB direct reads land in size="single"
# (at most [metrics] single_block_bytes, default 8192) and 1 MiB ones in
# size="multi", in the latency histograms and the byte counters
check_sizes() {
	name=$1 dev=$2 url=$3 key_r=$4
	s0=$(asmguard-iolat scrape --url "$url")
	dd if="$dev" of=/dev/null bs=8192 count=20 iflag=direct status=none
	s1=$(asmguard-iolat scrape --url "$url")
	dd if="$dev" of=/dev/null bs=1M count=4 iflag=direct status=none
	s2=$(asmguard-iolat scrape --url "$url")
	for v in s0 s1 s2; do
		eval "t=\$$v"
		for c in single multi; do
			cnt=$(sample "asmguard_io_latency_seconds_count$key_r,size=\"$c\"" "$t")
			byt=$(sample "asmguard_io_bytes_total$key_r,size=\"$c\"" "$t")
			eval "${v}_$c=${cnt:-0} ${v}_${c}_b=${byt:-0}"
		done
	done
	# 1 MiB may be split into several requests (max_sectors_kb), each > 8 KiB
	[ "$((s1_single - s0_single))" = 20 ] && [ "$((s1_multi - s0_multi))" = 0 ] \
		&& [ "$((s1_single_b - s0_single_b))" = $((20 * 8192)) ] \
		&& [ "$((s2_single - s1_single))" = 0 ] && [ "$((s2_multi - s1_multi))" -ge 4 ] \
		&& [ "$((s2_multi_b - s1_multi_b))" = $((4 << 20)) ] \
		&& pass "$name.sizes" "20 reads of 8 KiB single, 4 of 1 MiB in $((s2_multi - s1_multi)) multi-block I/Os" \
		|| fail "$name.sizes" "8 KiB reads: single +$((s1_single - s0_single)) ($((s1_single_b - s0_single_b)) B), multi +$((s1_multi - s0_multi)); 1 MiB reads: single +$((s2_single - s1_single)), multi +$((s2_multi - s1_multi)) ($((s2_multi_b - s1_multi_b)) B)"
}

# check_sizes_config: --single-block-bytes 4096 ([metrics] single_block_bytes
# in the daemon) moves 8 KiB reads to size="multi"
check_sizes_config() {
	port=$((port + 1))
	url="http://127.0.0.1:$port/metrics"
	asmguard-iolat --listen "127.0.0.1:$port" --device "$VM_NULLB=VMT" --single-block-bytes 4096 \
		2>/tmp/iolat-sizes.log &
	pid=$!
	i=0
	while ! grep -q serving /tmp/iolat-sizes.log 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	d=$(basename "$(readlink -f "$VM_NULLB")")
	k="asmguard_io_latency_seconds_count{device=\"$d\",label=\"VMT\",op=\"read\""
	dd if="$VM_NULLB" of=/dev/null bs=4096 count=5 iflag=direct status=none
	dd if="$VM_NULLB" of=/dev/null bs=8192 count=7 iflag=direct status=none
	t=$(asmguard-iolat scrape --url "$url" 2>&1)
	single=$(sample "$k,size=\"single\"" "$t")
	multi=$(sample "$k,size=\"multi\"" "$t")
	[ "${single:-0}" = 5 ] && [ "${multi:-0}" = 7 ] \
		&& pass sizes-config "single_block_bytes 4096: 5 single, 7 multi" \
		|| fail sizes-config "single_block_bytes 4096: ${single:-0} single (want 5), ${multi:-0} multi (want 7): $(cat /tmp/iolat-sizes.log)"
	kill $pid
	wait $pid 2>/dev/null
}

# check_paths: a dm-multipath device over two null_blk paths, one answering
# in 10 us and one in 20 ms (irqmode 2, completion_nsec), round-robin one
# request each: asmguard-iolat traces it on its paths; each path has its own
# asmguard_path_io_latency_seconds series, the slow one's mean stands out, the
# disk's series holds both, and each read is counted once in each family
check_paths() {
	cfs=/sys/kernel/config
	mountpoint -q $cfs || mount -t configfs none $cfs
	[ -d $cfs/nullb ] || { fail paths.setup "null_blk has no configfs"; return; }
	for p in fast slow; do
		n=$cfs/nullb/ag$p
		mkdir $n || { fail paths.setup "mkdir $n"; return; }
		echo 64 >$n/size
		echo 2 >$n/queue_mode
		echo 2 >$n/irqmode
		[ $p = slow ] && echo 20000000 >$n/completion_nsec || echo 10000 >$n/completion_nsec
		echo 1 >$n/power
	done
	# the disk is named after its configfs directory on newer kernels, else
	# nullb<index>
	pf=agfast ps=agslow
	[ -e /sys/block/$pf ] || pf=nullb$(cat $cfs/nullb/agfast/index)
	[ -e /sys/block/$ps ] || ps=nullb$(cat $cfs/nullb/agslow/index)
	i=0
	while { [ ! -b /dev/$pf ] || [ ! -b /dev/$ps ]; } && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
	if [ ! -b /dev/$pf ] || [ ! -b /dev/$ps ]; then
		fail paths.setup "no /dev/$pf or /dev/$ps: $(ls /sys/block | tr '\n' ' ')"
	fi
	if ! out=$(dmsetup create agmp --uuid mpath-agmp --table \
		"0 $(blockdev --getsz /dev/$pf) multipath 0 0 1 1 round-robin 0 2 1 /dev/$pf 1 /dev/$ps 1" 2>&1); then
		fail paths.setup "dmsetup create: $out"
	else
		port=$((port + 1))
		url="http://127.0.0.1:$port/metrics"
		asmguard-iolat --listen "127.0.0.1:$port" --device /dev/mapper/agmp=MPT 2>/tmp/iolat-paths.log &
		pid=$!
		i=0
		while ! grep -q serving /tmp/iolat-paths.log 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
		dm=dm-$(dmsetup info -c --noheadings -o minor agmp | tr -d ' ')
		t0=$(asmguard-iolat scrape --url "$url" 2>&1)
		dd if=/dev/mapper/agmp of=/dev/null bs=4096 count=40 iflag=direct status=none
		t1=$(asmguard-iolat scrape --url "$url" 2>&1)
		k="asmguard_path_io_latency_seconds"
		kd="asmguard_io_latency_seconds_count{device=\"$dm\",label=\"MPT\",op=\"read\""
		for p in pf ps; do
			eval "pn=\$$p"
			c0=$(sample "${k}_count{disk=\"MPT\",path=\"$pn\",op=\"read\"" "$t0")
			c1=$(sample "${k}_count{disk=\"MPT\",path=\"$pn\",op=\"read\"" "$t1")
			s0=$(sample "${k}_sum{disk=\"MPT\",path=\"$pn\",op=\"read\"" "$t0")
			s1=$(sample "${k}_sum{disk=\"MPT\",path=\"$pn\",op=\"read\"" "$t1")
			eval "${p}_n=$((${c1:-0} - ${c0:-0}))"
			# mean in microseconds
			eval "${p}_us=$(awk -v a="${s0:-0}" -v b="${s1:-0}" -v n="$((${c1:-0} - ${c0:-0}))" \
				'BEGIN { printf "%d", n ? (b - a) * 1e6 / n : 0 }')"
		done
		d0=$(sample "$kd" "$t0") d1=$(sample "$kd" "$t1")
		disk_n=$((${d1:-0} - ${d0:-0}))
		detail="$pf $pf_n reads mean $pf_us us, $ps $ps_n reads mean $ps_us us, disk $disk_n reads"
		[ "$pf_n" -gt 0 ] && [ "$ps_n" -gt 0 ] && [ "$((pf_n + ps_n))" = 40 ] && [ "$disk_n" = 40 ] \
			&& pass paths.counted "$detail" || fail paths.counted "want 40 reads on the disk, split over both paths: $detail: $(printf '%s\n' "$t1" | grep -E "^(${k}|asmguard_io_latency_seconds)_count")"
		[ "$ps_us" -ge 10000 ] && [ "$ps_us" -gt $((10 * pf_us)) ] \
			&& pass paths.slow-stands-out "$detail" || fail paths.slow-stands-out "want the slow path's mean >= 10 ms and > 10x the fast one's: $detail"
		kill $pid
		wait $pid 2>/dev/null
		dmsetup remove agmp
	fi
	check_stripe
	for p in fast slow; do
		echo 0 >$cfs/nullb/ag$p/power
		rmdir $cfs/nullb/ag$p
	done
}

# check_stripe (from check_paths, on its two null_blk disks): a dm-striped
# volume (LVM's striping; bio-based, it issues no requests) over two traced
# disks, 4 KiB chunks: 16 direct reads of 4 KiB through it count 8 on each disk
check_stripe() {
	if ! out=$(dmsetup create agst --table \
		"0 $(($(blockdev --getsz /dev/$pf) / 16 * 16)) striped 2 8 /dev/$pf 0 /dev/$ps 0" 2>&1); then
		fail stripe.setup "dmsetup create: $out"
		return
	fi
	port=$((port + 1))
	url="http://127.0.0.1:$port/metrics"
	asmguard-iolat --listen "127.0.0.1:$port" --device "/dev/$pf=ST1" --device "/dev/$ps=ST2" \
		2>/tmp/iolat-stripe.log &
	pid=$!
	i=0
	while ! grep -q serving /tmp/iolat-stripe.log 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	t0=$(asmguard-iolat scrape --url "$url" 2>&1)
	dd if=/dev/mapper/agst of=/dev/null bs=4096 count=16 iflag=direct status=none
	t1=$(asmguard-iolat scrape --url "$url" 2>&1)
	k1="asmguard_io_latency_seconds_count{device=\"$pf\",label=\"ST1\",op=\"read\""
	k2="asmguard_io_latency_seconds_count{device=\"$ps\",label=\"ST2\",op=\"read\""
	a0=$(sample "$k1" "$t0") a1=$(sample "$k1" "$t1") b0=$(sample "$k2" "$t0") b1=$(sample "$k2" "$t1")
	na=$((${a1:-0} - ${a0:-0})) nb=$((${b1:-0} - ${b0:-0}))
	[ "$na" = 8 ] && [ "$nb" = 8 ] && pass stripe.shares "16 reads through the stripe: $na on ST1, $nb on ST2" \
		|| fail stripe.shares "16 reads through the stripe: $na on ST1, $nb on ST2 (want 8 and 8): $(cat /tmp/iolat-stripe.log)"
	kill $pid
	wait $pid 2>/dev/null
	dmsetup remove agst
}

loopf=/tmp/iolat-loop.img
dd if=/dev/zero of=$loopf bs=1M count=32 status=none
loopdev=$(losetup -f --show $loopf)

for dev in "$VM_SCSI" "$VM_NULLB" "$loopdev"; do
	n=$(basename "$dev")
	check_case "$n-tp_btf" "$dev"
	check_case "$n-tp_btf-own" "$dev" --no-kernel-stamps
	check_case "$n-raw_tp" "$dev" --raw-tp
	check_case "$n-raw_tp-own" "$dev" --raw-tp --no-kernel-stamps
done
losetup -d "$loopdev"
check_sizes_config
check_paths

vm_exit
