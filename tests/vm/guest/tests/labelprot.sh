#!/bin/sh
# labelprot: a disk is protected when `asmguardctl label` returns (issue 31,
# point 3). Two loop devices owned by the allowed user grid, one labelled over
# an ext4 file system and one holding a swap area grid put back after its label
# (`label --force` erases both signatures). Right after `label` returns:
# grid's `mkfs.ext4 -F`
# (which the filter lets grid write) is refused by the daemon's exclusive claim
# ("apparently in use by the system"), and root's `mount` and `swapon` of the
# disks get EBUSY; the disks' sha256 are unchanged. Three rounds of label,
# attack, unlabel: the window the issue saw (the claim taken some time after
# `label` answered, with no kernel-open program behind it on 5.10) would let
# one through.
. /vmtests/lib.sh

C="asmguardctl --socket /run/asmguard/asmguard.sock"
busy="Device or resource busy|apparently in use|Operation not permitted|permission denied"
L1=$(new_loop 32 lp-ext4)
L2=$(new_loop 32 lp-swap)
[ -b "$L1" ] && [ -b "$L2" ] || { fail setup "no loop devices: '$L1' '$L2'"; vm_exit; }
agd_config /tmp/lp.toml "${L1#/dev/} ${L2#/dev/}"
: >/tmp/lp.log
agd_start /tmp/lp.toml /tmp/lp.log || { fail setup "asmguardd did not answer: $(tail -n 5 /tmp/lp.log)"; vm_exit; }
mkdir -p /mnt/lp
MKFS=$(command -v mkfs.ext4) # (as_user resets PATH)
truncate -s 8M /tmp/lp-swapsrc.img && mkswap /tmp/lp-swapsrc.img >/dev/null 2>&1
for round in 1 2 3; do
	mkfs.ext4 -q -F "$L1" >/dev/null 2>&1
	chown grid "$L1" "$L2"
	# the swap disk first: `label --force` erases the swap signature, which
	# grid (allowed) puts back from a swap image, KiB 0 (the label) left out
	expect_ok "label-swap.$round" $C label LPSWAP "$L2" --force
	as_user grid dd if=/tmp/lp-swapsrc.img of="$L2" bs=1024 skip=1 seek=1 count=7 conv=notrunc oflag=direct 2>/dev/null
	expect_ok "label-ext4.$round" $C label LPEXT "$L1" --force
	# nothing between label's answer and the attacks
	b1=$(sha "$L1")
	b2=$(sha "$L2")
	expect_fail "mkfs-grid.refused.$round" "$busy" as_user grid "$MKFS" -q -F "$L1"
	expect_fail "mount-root.refused.$round" "$busy" mount -t ext4 "$L1" /mnt/lp
	umount /mnt/lp 2>/dev/null
	expect_fail "swapon-root.refused.$round" "$busy" swapon "$L2"
	swapoff "$L2" 2>/dev/null
	expect "ext4-unchanged.$round" "$b1" "$(sha "$L1")"
	expect "swap-unchanged.$round" "$b2" "$(sha "$L2")"
	expect_ok "unlabel-ext4.$round" $C unlabel LPEXT
	expect_ok "unlabel-swap.$round" $C unlabel LPSWAP
done
$C filter disable >/dev/null 2>&1 # its pins go too (ends-clean)
kill "$agd"; wait "$agd" 2>/dev/null
losetup -d "$L1" "$L2" 2>/dev/null
vm_exit
