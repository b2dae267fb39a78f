#!/bin/sh
# loopbind (issue 41, point 1): a loop device bound to a managed disk. The
# loop driver writes its backing file from a kernel thread, which the filter
# lets through (file_open judged the opener), so a descriptor opened for
# writing before the disk was protected (here: across `filter disable` and
# `enable`, as after a maintenance window) would give anyone a writable loop
# device over the disk. LOOP_SET_FD, LOOP_CONFIGURE and LOOP_CHANGE_FD onto a
# managed disk's writable descriptor are refused (EPERM, an event naming the
# ioctl) to a caller no rule allows, and nothing lands (sha256 of the first
# block unchanged); a read-only descriptor still binds (a read-only loop
# device), and so does an unmanaged disk's writable one (written through).
# On the cgroup-device fallback (no ioctl hook): n/a. Both backends' ioctl hooks
# are covered by the base lines (5.10: fmod_ret; the others: LSM): once per kernel.
# A loop device set up by path over the managed disk while it was not protected
# (root's `losetup`, across `filter disable` and `enable`) joins the disk's
# devices: a write through it by a user no rule allows is refused, and nothing
# lands (every backend: the loop device is judged at its own open); status
# (text and --json), lsdsk and an event name it as set up before protection.
# lab-settings: once-per-kernel
. /vmtests/lib.sh

C="asmguardctl --socket /run/asmguard/asmguard.sock"
EPERM="FAIL 1 Operation not permitted"
L=$(new_loop 16 lb-disk)
U=$(new_loop 16 lb-free)
[ -b "$L" ] && [ -b "$U" ] || { fail setup "no loop devices"; vm_exit; }
agd_config /tmp/lb.toml "${L#/dev/}"
: >/tmp/lb.log
agd_start /tmp/lb.toml /tmp/lb.log || { fail setup "asmguardd did not answer: $(tail -n 5 /tmp/lb.log)"; vm_exit; }
expect_ok label $C label LBDISK "$L"
first() { dd if="$1" bs=4096 count=1 2>/dev/null | sha256sum | cut -d' ' -f1; }

if ! vm_full; then
	na bind "$VM_FALLBACK_WHY: no ioctl hook sees LOOP_SET_FD"
else
	expect_ok filter-disable $C filter disable
	exec 3<>"$L" 4<"$L" 5<>"$U"
	expect_ok filter-enable $C filter enable
	before=$(first "$L")
	expect_fail set-fd-refused "$EPERM" agloop set_fd 3 write
	expect_fail configure-refused "$EPERM" agloop configure 3 write
	expect_fail change-fd-refused "$EPERM" agloop change_fd 3
	if [ -x /usr/local/bin/agloop32 ]; then
		expect_fail set-fd-refused-32bit "$EPERM" agloop32 set_fd 3 write
	else
		na set-fd-refused-32bit "no 32-bit helper in this guest (gcc-multilib)"
	fi
	expect sha-unchanged "$before" "$(first "$L")"
	ev=$($C events 2>&1 | grep -m 1 LOOP_SET_FD)
	has_line event-names-it "LOOP_SET_FD" "$ev"
	expect_ok read-only-binds agloop set_fd 4
	before_u=$(first "$U")
	expect_ok unmanaged-binds agloop set_fd 5 write
	holds unmanaged-written "written through the loop device" [ "$(first "$U")" != "$before_u" ]
	exec 3<&- 4<&- 5<&-
fi

expect_ok filter-disable $C filter disable
P=$(losetup -f --show "$L")
[ -b "$P" ] || fail setup "no loop over $L: $P"
chmod 666 "$P" # the filter, not the mode bits, must stop the writer
expect_ok filter-enable $C filter enable
sleep 1 # the refresh after the loop device's uevent
before_p=$(first "$L")
expect_fail loop-by-path-refused "Operation not permitted" \
	as_user_past_modes nobody dd if=/dev/urandom of="$P" bs=4096 count=1 conv=notrunc oflag=direct
expect loop-by-path-unchanged "$before_p" "$(first "$L")"
# status, lsdsk and an event name the loop device that predates protection
# (the periodic check, every 2 s, finds it)
PN=${P#/dev/}
st=
for _ in 1 2 3 4 5 6 7 8; do
	st=$($C status 2>&1)
	case "$st" in *"$PN over LBDISK"*) break ;; esac
	sleep 0.5
done
has_line status-names-loop "^ *loop.*$PN over LBDISK (backing file $L), set up before protection" "$st"
# (--json's keys come sorted)
has_line status-json-names-loop '"loops_before":\[{"backing":"'"$L"'","device":"[0-9]*:[0-9]*","label":"LBDISK","name":"'"$PN"'"' "$($C status --json 2>&1 | tr -d ' \n')"
has_line lsdsk-names-loop "^LBDISK .*$PN(loop-before)" "$($C lsdsk 2>&1)"
has_line lsdsk-json-names-loop '"loops_before":\["'"$PN"'"\]' "$($C lsdsk --json 2>&1 | tr -d ' \n')"
has_line event-names-loop "LOOP BEFORE PROTECTION: $PN over LBDISK" "$($C events 2>&1 | grep "$PN")"
losetup -d "$P" 2>/dev/null

# the gap: a user a rule allows (grid) sets up a loop device over the
# protected disk. It would join the disk's devices only at the refresh after
# its uevent; a user no rule allows writes through it from the moment it is
# bound (dd oflag=direct, over and over, until refused or told to stop): the
# bind itself is refused, to grid too, and nothing lands (ioctl hook: full
# backends only)
if vm_full; then
	N=$(losetup -f)
	second() { dd if="$1" bs=4096 skip=1 count=1 2>/dev/null | sha256sum | cut -d' ' -f1; }
	before_g=$(second "$L")
	rm -f /tmp/lb-race-stop
	as_user_past_modes nobody sh -c '
		n=0 landed=0 end=stopped
		while [ $n -lt 100 ] && [ ! -e /tmp/lb-race-stop ]; do
			n=$((n + 1))
			if o=$(dd if=/dev/urandom of='"$N"' bs=4096 seek=1 count=1 conv=notrunc oflag=direct 2>&1); then
				landed=$((landed + 1))
			else
				case $o in *"not permitted"*) end=refused && break ;; esac
			fi
		done
		echo "landed $landed, $end after $n tries"' >/tmp/lb-race 2>&1 &
	race=$!
	sleep 0.1
	expect_fail grid-loop-refused "Operation not permitted" \
		as_user_past_modes grid "$(command -v losetup)" "$N" "$L"
	sleep 0.3 # the writer keeps trying past the refresh a bound device would bring
	touch /tmp/lb-race-stop
	wait "$race"
	expect loop-gap-none-landed "landed 0," "$(cut -d' ' -f1-2 /tmp/lb-race)" "$(cat /tmp/lb-race)"
	expect loop-gap-unchanged "$before_g" "$(second "$L")"
	has_line grid-loop-event "LOOP_CONFIGURE label=LBDISK.*comm=losetup" "$($C events 2>&1 | grep LOOP_CONFIGURE)"
	losetup -d "$N" 2>/dev/null
else
	na loop-gap "$VM_FALLBACK_WHY: no ioctl hook sees LOOP_CONFIGURE"
fi

$C filter disable >/dev/null 2>&1
kill "$agd" 2>/dev/null
wait "$agd" 2>/dev/null
losetup -d "$L" "$U" 2>/dev/null
vm_exit
