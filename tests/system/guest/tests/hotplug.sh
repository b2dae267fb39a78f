#!/bin/sh
# hotplug: a disk that appears already carrying an ASM label (a memory-backed null_blk
# disk, labelled, powered off and on again: the same data comes back as a new device)
# gets its link from the running udevd, the configured owner, and protection; the
# time from power-on to the link is reported (info, not a threshold). Powering it off
# drops the link and the daemon's disk.
. /vmtests/lib.sh
. /vmtests/syslib.sh

sys_service_up || { fail setup "asmguard does not answer"; vm_exit; }
modprobe null_blk nr_devices=0 || { fail setup "modprobe null_blk nr_devices=0"; vm_exit; }
[ -d /sys/kernel/config/nullb ] || mount -t configfs configfs /sys/kernel/config 2>/dev/null
d=/sys/kernel/config/nullb/hp1
mkdir "$d" || { fail setup "no null_blk configfs ($d)"; vm_exit; }
echo 64 >"$d/size"
echo 512 >"$d/blocksize"
echo 1 >"$d/memory_backed"
# power_on: powers the configfs disk on; prints its /dev node (waits 5 s for it)
power_on() {
	echo 1 >"$d/power" || return 1
	_i=0
	while [ $_i -lt 50 ]; do
		# (newer kernels name the disk after its configfs directory, older ones nullbN)
		for _b in "/sys/block/${d##*/}" /sys/block/nullb*; do
			[ -e "$_b" ] && [ -b "/dev/${_b##*/}" ] && { echo "/dev/${_b##*/}"; return 0; }
		done
		_i=$((_i + 1))
		sleep 0.1
	done
	return 1
}
dev=$(power_on) || { fail setup "no null_blk disk after power-on of $d: $(ls /sys/block | tr '\n' ' ') $(dmesg | tail -n 3)"; vm_exit; }
expect_ok label $C label HP1 "$dev"
sys_wait_link HP1 100 || { fail link-after-label "$(ls -l /dev/asmguard/disks)"; vm_exit; }

# unplug: the link and the daemon's disk go
echo 0 >"$d/power"
i=0; while [ -e /dev/asmguard/disks/HP1 ] && [ $i -lt 100 ]; do i=$((i + 1)); sleep 0.1; done
[ ! -e /dev/asmguard/disks/HP1 ] && pass unplug-drops-link "after $i tenths" || fail unplug-drops-link "$(ls -l /dev/asmguard/disks)"
i=0; while $C lsdsk 2>/dev/null | grep -q "^HP1 .*${dev#/dev/}" && [ $i -lt 100 ]; do i=$((i + 1)); sleep 0.1; done
out=$($C lsdsk 2>&1)
echo "$out" | grep -q "^HP1 .*${dev#/dev/}" && fail unplug-drops-disk "$out" || pass unplug-drops-disk "lsdsk: $(echo "$out" | grep HP1)"

# plug it back: it carries the label already
t0=$(date +%s%N)
dev=$(power_on) || { fail plug "no null_blk disk after power-on"; vm_exit; }
i=0; while [ ! -e /dev/asmguard/disks/HP1 ] && [ $i -lt 1000 ]; do i=$((i + 1)); sleep 0.01; done
t1=$(date +%s%N)
if [ -e /dev/asmguard/disks/HP1 ]; then
	pass plug-link "$(ls -l /dev/asmguard/disks/HP1)"
	info "hotplug: link $(((t1 - t0) / 1000000)) ms after power-on"
else
	fail plug-link "no /dev/asmguard/disks/HP1 10 s after power-on"
fi
own=$(stat -L -c '%U %G %a' /dev/asmguard/disks/HP1 2>&1)
[ "$own" = "grid asmadmin 660" ] && pass plug-owner "$own" || fail plug-owner "$own, want grid asmadmin 660"
i=0; while ! $C lsdsk 2>/dev/null | grep -q "^HP1 .*${dev#/dev/}" && [ $i -lt 100 ]; do i=$((i + 1)); sleep 0.1; done
t2=$(date +%s%N)
info "hotplug: daemon lists it $(((t2 - t0) / 1000000)) ms after power-on"
chmod 0666 "$dev"
expect_fail plug-protected "Operation not permitted" as_user intruder dd if=/tmp/junk of="$dev" $DDW seek=100
expect_ok plug-grid-writes as_user grid dd if=/tmp/junk of=/dev/asmguard/disks/HP1 $DDW seek=100
echo 0 >"$d/power"
rmdir "$d"
vm_exit
