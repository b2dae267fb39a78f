#!/bin/sh
# filter-toggle: the filter switched off and on (`asmguardctl filter disable` /
# `enable`, TOGGLES times: the programs detached and attached again) while
# writers loop: grid (allowed) in a tight O_DIRECT pwrite loop on a managed
# disk, root in a tight pwrite/pread loop on a tmpfs file (file_permission on
# every call), and root's write-opens of the managed disk; on the LSM backend
# another program shares the hooks' trampolines for the first half (empty LSM
# programs, asmguard-bench-empty) and leaves in the middle. Then: no soft lockup, hung task
# or RCU stall in dmesg; the daemon still answers; neither allowed writer was
# ever refused; every enable denied at once; denials are exact afterwards.
#
# Runs in a boot of its own under one-thread TCG (its header says one-thread):
# multi-threaded TCG executed a breakpoint of the kernel's text_poke_bp after
# the kernel had put the nop back (int3 Oops at bpf_lsm_file_permission+0x5 on
# 6.12, the nop back in memory; soft lockups on 5.10+lsm and 6.1): the
# emulator, as far as the lab can tell (README "One-thread boots").
# lab-settings: one-thread
. /vmtests/lib.sh

# Each toggle detaches and re-attaches every program: 5-13 s under TCG (5.10+lsm
# the slowest; 6.12: about 7 s a round). 2 rounds (the other program sharing the
# trampolines in the first, leaving between them) run on all six lines, so each
# round costs the lab six times over (4 rounds until the fifth wave's budget); the
# same test with TOGGLES=10 passed on 5.10+lsm and 6.12 (BENCHMARKS.md), and a lab
# run can ask for more (asmguard.toggles=N on the kernel command line: VM_APPEND).
TOGGLES=$(sed -n 's/.*asmguard\.toggles=\([0-9][0-9]*\).*/\1/p' /proc/cmdline)
TOGGLES=${TOGGLES:-2}
PORT=19473
C="asmguardctl --socket /run/asmguard/asmguard.sock"
DDW="bs=4096 count=1 conv=notrunc"
dd if=/dev/zero bs=4096 count=1 2>/dev/null | tr '\0' 'X' >/tmp/junk
D=$(new_loop 16 toggle-disk) || { fail setup "losetup: $D"; vm_exit; }
agd_config /tmp/toggle.toml "${D#/dev/}" 'filter.allow_groups=[]' "metrics.listen=\"127.0.0.1:$PORT\""
# the metrics (denial counts, below) are served over loopback
lo_up
agd_start /tmp/toggle.toml /tmp/toggle-agd.log
expect_ok label $C label TOGGLE "$D"
chown grid "$D"
chmod 666 "$D" # the filter, not the mode bits, must stop the intruder
expect_fail denied-before "Operation not permitted" dd if=/tmp/junk of="$D" $DDW
dmesg_before=$(dmesg | wc -l)

# writers (never on block 0: root's writes land while the filter is off, and a
# label overwritten there is seen by the daemon's label watch, which then lets
# the disk go): each records a failed run in /tmp/toggle.errors; they and the
# daemon stop with the test, also when it is timed out (SIGTERM)
rm -f /tmp/toggle.stop /tmp/toggle.errors
w1= w2= w3= empty=
cleanup() {
	touch /tmp/toggle.stop
	for p in $empty $w1 $w2 $w3; do kill "$p" 2>/dev/null; done
	# (never a bare wait: it would wait for the daemon too)
	[ -z "$empty$w1$w2$w3" ] || wait $empty $w1 $w2 $w3 2>/dev/null
	$C filter disable >/dev/null 2>&1
	kill "$agd" 2>/dev/null
	wait "$agd" 2>/dev/null
	losetup -d "$D" 2>/dev/null
}
trap 'cleanup; exit 1' TERM INT
writer() { # writer NAME CMD...: runs CMD until /tmp/toggle.stop exists
	_n=$1; shift
	while [ ! -e /tmp/toggle.stop ]; do
		_o=$("$@" 2>&1) || echo "$_n: $_o" >>/tmp/toggle.errors
	done
}
# (niced: the daemon and asmguardctl must still get a CPU under TCG)
writer grid-on-managed as_user grid nice -n 10 syscall-bench pwrite "$D" 500 &
w1=$!
writer root-on-tmpfs nice -n 10 syscall-bench tmpfs /tmp/toggle-file 20000 &
w2=$!
(while [ ! -e /tmp/toggle.stop ]; do nice -n 10 dd if=/tmp/junk of="$D" $DDW seek=8 2>/dev/null; done) &
w3=$!
if [ "$VM_BACKEND" = lsm ]; then
	asmguard-bench-empty >/tmp/toggle-empty.out 2>&1 &
	empty=$!
	wait_for_line /tmp/toggle-empty.out '^ready' 30 || fail empty-programs "$(cat /tmp/toggle-empty.out)"
fi
sleep 1

late=0
t=1
while [ $t -le $TOGGLES ]; do
	a=$(cut -d' ' -f1 /proc/uptime)
	$C filter disable >/tmp/toggle.ctl 2>&1 || fail toggle-$t.disable "$(cat /tmp/toggle.ctl)"
	b=$(cut -d' ' -f1 /proc/uptime)
	$C filter enable >/tmp/toggle.ctl 2>&1 || fail toggle-$t.enable "$(cat /tmp/toggle.ctl)"
	info "toggle $t: disable $(echo "$a $b" | awk '{print $2 - $1}') s, enable $(echo "$b $(cut -d' ' -f1 /proc/uptime)" | awk '{print $2 - $1}') s"
	# protection is back when enable returns: the first write-open is refused
	dd if=/tmp/junk of="$D" $DDW seek=8 2>/dev/null && late=$((late + 1))
	if [ -n "$empty" ] && [ $t = $((TOGGLES / 2)) ]; then
		kill "$empty"
		wait "$empty" 2>/dev/null
	fi
	t=$((t + 1))
done
touch /tmp/toggle.stop
wait "$w1" "$w2" "$w3"
w1= w2= w3= empty=

[ "$late" = 0 ] && pass enable-denies-at-once "$TOGGLES toggles" ||
	fail enable-denies-at-once "$late of $TOGGLES enables let the next write-open through"
if [ -s /tmp/toggle.errors ]; then
	fail allowed-writers-never-refused "$(head -n 3 /tmp/toggle.errors)"
else
	pass allowed-writers-never-refused "grid on the managed disk, root on tmpfs"
fi
# the kernel's complaints since the toggles began
stalls=$(dmesg | tail -n +$((dmesg_before + 1)) |
	grep -E "soft lockup|hung_task|blocked for more than|rcu.*(stall|self-detected)" | head -n 3)
expect no-lockup-in-dmesg "" "$stalls" "$TOGGLES toggles"
st=$($C status 2>&1)
case $st in
*"filter backend: $VM_BACKEND"*) pass daemon-answers "$(echo "$st" | grep 'filter backend')" ;;
*) fail daemon-answers "$st :: $(tail -n 5 /tmp/toggle-agd.log)" ;;
esac

# exact after the toggles: 5 write-opens by root, 5 denials counted, on every
# backend (the daemon exports the kernel's per-disk counters)
denied() {
	asmguard-iolat scrape --url "http://127.0.0.1:$PORT/metrics" 2>&1 |
		awk '/^asmguard_writes_denied_total\{.*label="TOGGLE"/ {s += $NF} END {print s + 0}'
}
d0=$(denied)
n=0
for i in 1 2 3 4 5; do
	# block 0 and no seek: dd with seek= opens twice (O_RDWR, then
	# O_WRONLY) and each refused open counts; these are all refused
	dd if=/tmp/junk of="$D" $DDW 2>/dev/null || n=$((n + 1))
done
d1=$(denied)
expect denials-exact "5 refused, 5 counted" "$n refused, $((d1 - d0)) counted"
expect_ok grid-writes-after as_user grid dd if=/tmp/junk of="$D" $DDW seek=1
expect_fail intruder-denied-after "Operation not permitted" as_user_past_modes intruder dd if=/tmp/junk of="$D" $DDW

trap - TERM INT
cleanup
vm_exit
