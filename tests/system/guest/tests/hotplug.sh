#!/bin/sh
# hotplug: a disk that appears already carrying an ASM label (a memory-backed null_blk
# disk, labelled, powered off and on again: the same data comes back as a new device)
# gets its link from the running udevd, the configured owner, and protection; the
# times from power-on to the link, to the daemon listing it, and to the first refused
# root write (the window before protection) are reported (info, not thresholds).
# Powering it off drops the link and the daemon's disk.
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
holds unplug-drops-link "after $i tenths: $(ls -l /dev/asmguard/disks 2>&1)" [ ! -e /dev/asmguard/disks/HP1 ]
i=0; while $C lsdsk 2>/dev/null | grep -q "^HP1 .*${dev#/dev/}" && [ $i -lt 100 ]; do i=$((i + 1)); sleep 0.1; done
out=$($C lsdsk 2>&1)
echo "$out" | grep -q "^HP1 .*${dev#/dev/}" && fail unplug-drops-disk "$out" || pass unplug-drops-disk "lsdsk: $(echo "$out" | grep HP1)"

# plug it back: it carries the label already. One polling loop records, from
# power-on, when udevd's link appears, when the daemon lists the disk, and when a
# root write to the new node is first refused (the window before protection; root
# is not on the allow-list). Reported as information, never a threshold.
ms() { echo $((($(date +%s%N) - t0) / 1000000)); }
t0=$(date +%s%N)
dev=$(power_on) || { fail plug "no null_blk disk after power-on"; vm_exit; }
t_node=$(ms) t_link="" t_list="" t_prot="" landed=0 other=0 other_err="" i=0
while { [ -z "$t_link" ] || [ -z "$t_list" ] || [ -z "$t_prot" ]; } && [ $i -lt 1000 ]; do
	[ -z "$t_link" ] && [ -e /dev/asmguard/disks/HP1 ] && t_link=$(ms)
	[ -z "$t_list" ] && $C lsdsk 2>/dev/null | grep -q "^HP1 .*${dev#/dev/}" && t_list=$(ms)
	if [ -z "$t_prot" ]; then
		if dd if=/tmp/junk of="$dev" $DDW seek=200 2>/tmp/hp.err; then
			landed=$((landed + 1))
		elif grep -q "Operation not permitted" /tmp/hp.err; then
			t_prot=$(ms)
		else
			other=$((other + 1)) other_err=$(tail -n 1 /tmp/hp.err)
		fi
	fi
	i=$((i + 1))
done
if [ -n "$t_link" ]; then
	pass plug-link "$(ls -l /dev/asmguard/disks/HP1)"
else
	fail plug-link "no /dev/asmguard/disks/HP1 after power-on ($i polls)"
fi
holds plug-listed "HP1 on ${dev#/dev/}: $($C lsdsk 2>&1 | grep '^HP1 ')" [ -n "$t_list" ]
[ -n "$t_prot" ] && pass plug-root-refused "root's write refused after $landed landed" ||
	fail plug-root-refused "root's writes to $dev still land ($landed, last: $(cat /tmp/hp.err))"
info "hotplug: node ${t_node} ms, link ${t_link:-never} ms, listed ${t_list:-never} ms, root write first refused ${t_prot:-never} ms after power-on ($landed writes landed before, $other failed otherwise${other_err:+: $other_err})"
own=$(stat -L -c '%U %G %a' /dev/asmguard/disks/HP1 2>&1)
expect plug-owner "grid asmadmin 660" "$own"
chmod 0666 "$dev"
expect_fail plug-protected "Operation not permitted" as_user_past_modes intruder dd if=/tmp/junk of="$dev" $DDW seek=100
expect_ok plug-grid-writes as_user grid dd if=/tmp/junk of=/dev/asmguard/disks/HP1 $DDW seek=100
echo 0 >"$d/power"
rmdir "$d"
vm_exit
