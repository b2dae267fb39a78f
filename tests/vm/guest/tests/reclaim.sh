#!/bin/sh
# reclaim: `asmguardctl reclaim` gives the free AUs of a SYNTHETIC ASM disk
# (asmguard-synth-asm: random data in every AU, free ones below the highest
# allocated AU included) back to thin-provisioned storage, through asmguardd
# with the write filter enforcing (the daemon's own discards pass, root's
# blkdiscard is denied):
#   dm-thin   the pool's used data blocks (dmsetup status) drop by the free AUs
#   dm-thin, two strides: a sparse 111 GiB thin volume whose free AUs on both
#             sides of the stride boundary come back
#   dm-thin, above the size: --above-size with the disk held open for writing
#             gives back what lies above the ASM size; a resize up stops it
#   scsi_debug lbpu=1 (the UNMAP path): the mapped blocks (scsi_debug's map)
#             drop, the free AUs read back as zeros (lbprz=1)
# and every AU reclaim must keep (allocated, 0, 1, 11) hashes the same.
# asmguard_discard_bytes_total counts reclaim's bytes as source="reclaim" and
# (on scsi_debug) an allow-listed user's (grid) blkdiscard, which passes the
# filter, as source="oracle". The full allow/deny matrix of discards is in filter.sh.
# Nothing here depends on the filter's backend (the daemon's own discards, the
# kernel's discard paths): once per kernel; the fence, which does, is fence.sh.
# lab-settings: once-per-kernel
. /vmtests/lib.sh

C="asmguardctl --socket /run/asmguard/asmguard.sock"
ALLOC=2-10,12-20,30-40,50 # AU 11 free in the AT but reserved; 50 is the high-water mark
MIB=1048576
pool_used() { dmsetup status vmpool | awk '{split($6, a, "/"); print a[1]}'; }
scsi_mapped() { # mapped 512-byte blocks: scsi_debug's map has one entry per unmap granule
	g=$(cat /sys/module/scsi_debug/parameters/unmap_granularity 2>/dev/null || echo 1)
	tr ',' '\n' </sys/bus/pseudo/drivers/scsi_debug/map | awk -F- -v g="$g" 'NF == 2 {n += $2 - $1 + 1} NF == 1 && $1 != "" {n++} END {print (n + 0) * g}'
}
lo_up
PORT=19870
scrape() { asmguard-iolat scrape --url "http://127.0.0.1:$PORT/metrics" 2>&1; }
sample() { printf '%s\n' "$2" | awk -v n="$1" 'index($0, n" ") == 1 {print $NF}'; }
json_num() { # json_num KEY: first "KEY":N in stdin
	grep -o "\"$1\": *[0-9]*" | head -n 1 | grep -o '[0-9]*$'
}

daemon_start() { # include patterns
	agd_config /tmp/rc.toml "$*" 'filter.allow_groups=[]' "metrics.listen=\"127.0.0.1:$PORT\""
	agd_start /tmp/rc.toml /tmp/rc.log
}
daemon_stop() { # and forget the disable: later tests start with a filter
	$C filter disable >/dev/null 2>&1
	kill "$agd" 2>/dev/null
	wait "$agd" 2>/dev/null
	rm -f /run/asmguard/filter.state
}

# ---- dm-thin -------------------------------------------------------------
if [ -b "${VM_THIN:-}" ]; then
	AUS=96
	w=$(asmguard-synth-asm write "$VM_THIN" --label RTHIN --group RDG --aus $AUS --allocated $ALLOC --fill 2>&1)
	free=$(echo "$w" | sed -n 's/.*free_bytes \([0-9]*\).*/\1/p')
	holds thin-synthetic "$w" [ -n "$free" ]
	h0=$(asmguard-synth-asm hash "$VM_THIN" --aus $AUS --allocated $ALLOC)
	daemon_start mapper/vmthin
	out=$($C lsdsk 2>&1)
	has_line thin-labelled-enforced "^RTHIN *enforce" "$out" "$out :: $(tail -n 5 /tmp/rc.log)"
	expect_fail thin-root-blkdiscard-denied "Operation not permitted" blkdiscard -o $((60 * MIB)) -l $MIB "$VM_THIN"
	dry=$($C reclaim RTHIN --dry-run --json 2>/dev/null)
	pb=$(echo "$dry" | json_num planned_bytes)
	expect thin-dry-run-exact "$free" "$pb" "planned $pb, free $free :: $dry"
	u0=$(pool_used)
	t0=$(date +%s.%N)
	res=$($C reclaim RTHIN --watch 1 --json 2>/tmp/rc.progress)
	rc=$?
	t1=$(date +%s.%N)
	u1=$(pool_used)
	rb=$(echo "$res" | json_num reclaimed_bytes)
	if [ $rc = 0 ] && [ "$rb" = "$free" ]; then
		pass thin-reclaim "$rb bytes in $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}') s (incl. 1 s watch)"
	else
		fail thin-reclaim "exit $rc reclaimed '$rb' free $free :: $res :: $(tail -n 3 /tmp/rc.progress) :: $(tail -n 5 /tmp/rc.log)"
	fi
	has_line thin-progress '"phase":"reclaiming"' "$(cat /tmp/rc.progress)" "$(tail -n 1 /tmp/rc.progress)"
	# 64 KiB pool blocks: the free AUs are whole blocks.
	want=$((free / 65536))
	drop=$((u0 - u1))
	# (free AUs = $want blocks)
	near thin-pool-blocks-drop "pool data blocks $u0 -> $u1" "$drop" "$want" 2
	h1=$(asmguard-synth-asm hash "$VM_THIN" --aus $AUS --allocated $ALLOC)
	expect thin-kept-aus-unchanged "$h0" "$h1"
	grep -q "write denied" /tmp/rc.log && grep -q "reclaim RTHIN: $free of $free bytes" /tmp/rc.log &&
		pass thin-journal "$(grep -m1 'reclaim RTHIN' /tmp/rc.log)" || fail thin-journal "$(tail -n 5 /tmp/rc.log)"
	# the discard counter of reclaim (dm-thin is bio-based: the request
	# tracer sees no discards on it, so source="oracle" is checked on scsi_debug)
	R='asmguard_discard_bytes_total{label="RTHIN",source="reclaim"}'
	i=0
	while [ $i -lt 50 ]; do
		m=$(scrape)
		[ "$(sample "$R" "$m")" = "$free" ] && break
		i=$((i + 1)); sleep 0.1
	done
	r=$(sample "$R" "$m")
	expect thin-metric-reclaim "$free" "$r" "$R $r :: $(echo "$m" | grep discard)"
	daemon_stop
else
	fail thin "no dm-thin fixture"
fi

# ---- dm-thin, two strides: a 111 GiB sparse thin volume ------------------
# 113,792 + 64 AUs of 1 MiB (a stride is 113,792 AUs): every AU allocated but
# ten before the stride boundary and nine after it (AU 113,792 holds the
# second stride's allocation table); only AUs 0-12 and those around the
# boundary hold data (--fill-aus), the rest of the volume stays unprovisioned.
if [ -b "${VM_THIN:-}" ]; then
	M=113792
	AUS=$((M + 64))
	T2=/dev/mapper/vmthin2
	if dmsetup message vmpool 0 "create_thin 1" && dmsetup create vmthin2 --table "0 $((AUS * 2048)) thin /dev/mapper/vmpool 1"; then
		ALLOC2="2-$((M - 11)),$((M + 10))-$((AUS - 1))"
		FILL="0-12,$((M - 20))-$((M + 20))"
		w=$(asmguard-synth-asm write $T2 --label RSTRIDE --group RDG2 --aus $AUS --allocated "$ALLOC2" --fill-aus "$FILL" 2>&1)
		free=$(echo "$w" | sed -n 's/.*free_bytes \([0-9]*\).*/\1/p')
		expect stride-synthetic $((19 * MIB)) "$free" "$w"
		h0=$(asmguard-synth-asm hash $T2 --aus $AUS --allocated "$ALLOC2" --fill-aus "$FILL")
		daemon_start mapper/vmthin2
		dry=$($C reclaim RSTRIDE --dry-run --json 2>/dev/null)
		pb=$(echo "$dry" | json_num planned_bytes)
		expect stride-dry-run-both-strides "$free" "$pb" "$dry"
		u0=$(pool_used)
		res=$($C reclaim RSTRIDE --watch 1 --json 2>/tmp/rc.progress)
		rc=$?
		u1=$(pool_used)
		rb=$(echo "$res" | json_num reclaimed_bytes)
		expect stride-reclaim "0 $free" "$rc $rb" "exit $rc :: $res :: $(tail -n 5 /tmp/rc.log)"
		near stride-pool-blocks-drop "pool data blocks $u0 -> $u1" $((u0 - u1)) $((free / 65536)) 2
		h1=$(asmguard-synth-asm hash $T2 --aus $AUS --allocated "$ALLOC2" --fill-aus "$FILL")
		expect stride-kept-aus-unchanged "$h0" "$h1"
		daemon_stop
		dmsetup remove vmthin2
	else
		fail stride "cannot create a second thin volume"
	fi
fi

# ---- dm-thin, online above the size ---------------------------------------
# A 128 MiB thin volume whose ASM size is 64 AUs (after a resize down), held
# open read-write as ASM holds a mounted disk: --above-size hands back the 64
# MiB above the size; then, with data there again, the disk is resized up to
# 100 AUs during a slow run, which stops before its next chunk (exit 4).
if [ -b "${VM_THIN:-}" ]; then
	T3=/dev/mapper/vmthin3
	if dmsetup message vmpool 0 "create_thin 2" && dmsetup create vmthin3 --table "0 262144 thin /dev/mapper/vmpool 2"; then
		w=$(asmguard-synth-asm write $T3 --label RABOVE --group RDG3 --aus 64 --allocated $ALLOC --fill 2>&1)
		holds above-synthetic "$w" [ -n "$w" ]
		dd if=/dev/urandom of=$T3 bs=$MIB seek=64 count=64 oflag=direct 2>/dev/null
		h0=$(asmguard-synth-asm hash $T3 --aus 64 --allocated $ALLOC)
		daemon_start mapper/vmthin3
		# the filter off: the "ASM" holder and the resize up write the disk
		$C filter disable >/dev/null
		sh -c "exec 7<>$T3; exec sleep 300" & # "mounted": held open for writing
		holder=$!
		u0=$(pool_used)
		res=$($C reclaim RABOVE --above-size --json 2>/tmp/rc.progress)
		rc=$?
		u1=$(pool_used)
		rb=$(echo "$res" | json_num reclaimed_bytes)
		expect above-size-online "0 $((64 * MIB))" "$rc $rb" "exit $rc :: $res :: $(tail -n 5 /tmp/rc.log)"
		near above-pool-blocks-drop "pool data blocks $u0 -> $u1" $((u0 - u1)) 1024 2
		h1=$(asmguard-synth-asm hash $T3 --aus 64 --allocated $ALLOC)
		expect above-kept-aus-unchanged "$h0" "$h1"
		dd if=/dev/urandom of=$T3 bs=$MIB seek=64 count=64 oflag=direct 2>/dev/null
		$C reclaim RABOVE --above-size --rate 8 >/tmp/rc.grow.out 2>/tmp/rc.grow.err &
		rp=$!
		sleep 2
		asmguard-synth-asm write $T3 --label RABOVE --group RDG3 --aus 100 --allocated $ALLOC >/dev/null 2>&1
		wait $rp
		rc=$?
		if [ $rc = 4 ] && grep -q "the disk size changed from 64 to 100 AUs" /tmp/rc.grow.err; then
			pass above-size-grown-stops "$(cat /tmp/rc.grow.err)"
		else
			fail above-size-grown-stops "exit $rc :: $(cat /tmp/rc.grow.out /tmp/rc.grow.err)"
		fi
		kill $holder 2>/dev/null
		wait $holder 2>/dev/null
		daemon_stop
		dmsetup remove vmthin3
	else
		fail above "cannot create a third thin volume"
	fi
fi

# ---- scsi_debug lbpu=1: UNMAP ---------------------------------------------
if [ -b "${VM_SCSI:-}" ] && [ -r /sys/bus/pseudo/drivers/scsi_debug/map ]; then
	AUS=64
	w=$(asmguard-synth-asm write "$VM_SCSI" --label RSCSI --group RDG --aus $AUS --allocated $ALLOC --fill 2>&1)
	free=$(echo "$w" | sed -n 's/.*free_bytes \([0-9]*\).*/\1/p')
	holds scsi-synthetic "$w" [ -n "$free" ]
	h0=$(asmguard-synth-asm hash "$VM_SCSI" --aus $AUS --allocated $ALLOC)
	daemon_start "${VM_SCSI#/dev/}"
	m0=$(scsi_mapped)
	res=$($C reclaim --diskgroup RDG --watch 1 --json 2>/tmp/rc.progress)
	rc=$?
	m1=$(scsi_mapped)
	rb=$(echo "$res" | json_num reclaimed_bytes)
	expect scsi-reclaim "0 $free" "$rc $rb" "exit $rc, $rb bytes (UNMAP) of $free :: $res :: $(tail -n 5 /tmp/rc.log)"
	want=$((free / 512))
	drop=$((m0 - m1))
	near scsi-mapped-blocks-drop "mapped blocks $m0 -> $m1" "$drop" "$want" 16
	# lbprz=1: an unmapped AU reads zeros; AU 21 was free (random data before).
	z=$(dd if="$VM_SCSI" bs=$MIB skip=21 count=1 iflag=direct 2>/dev/null | tr -d '\0' | wc -c)
	expect scsi-free-au-reads-zeros 0 "$z" "$z non-zero bytes in AU 21"
	h1=$(asmguard-synth-asm hash "$VM_SCSI" --aus $AUS --allocated $ALLOC)
	expect scsi-kept-aus-unchanged "$h0" "$h1"
	# the discard counters: reclaim's, then grid's blkdiscard (allowed by the
	# filter) as the database's
	chown grid "$VM_SCSI"
	# grid opens the disk as ASM does, without O_EXCL (the daemon holds the
	# disk's exclusive claim; blkdiscard asks for O_EXCL unless --force)
	expect_ok scsi-grid-blkdiscard-allowed as_user grid "$(command -v blkdiscard)" --force -o $((60 * MIB)) -l $MIB "$VM_SCSI"
	R='asmguard_discard_bytes_total{label="RSCSI",source="reclaim"}'
	O='asmguard_discard_bytes_total{label="RSCSI",source="oracle"}'
	i=0
	while [ $i -lt 50 ]; do
		m=$(scrape)
		[ "$(sample "$R" "$m")" = "$free" ] && [ "$(sample "$O" "$m")" = "$MIB" ] && break
		i=$((i + 1)); sleep 0.1
	done
	r=$(sample "$R" "$m"); o=$(sample "$O" "$m")
	expect scsi-metric-reclaim "$free" "$r" "$R $r :: $(echo "$m" | grep discard)"
	expect scsi-metric-oracle "$MIB" "$o" "$O $o :: $(echo "$m" | grep discard)"
	daemon_stop
else
	fail scsi "no scsi_debug fixture with a provisioning map"
fi

vm_exit
