#!/bin/sh
# lab: the VM lab itself works: tools run (their libraries are in the image),
# users and groups resolve, optional modules load, and the fixtures behave like
# the storage asmguard cares about (thin-provisioned dm-thin and SCSI disks
# that give space back on discard/UNMAP, an sg node, fio on null_blk).
# lab-settings: once-per-kernel
. /vmtests/lib.sh

ZERO_1M=30e14955ebf1352266dc2ff8067e68104607e750abb9d3b36582b8af909fcb58 # sha256 of 1 MiB of zeros

# Every shipped tool starts (no missing shared library) and is not busybox.
bad=""
n=0
for t in fio blkdiscard wipefs losetup blkid blockdev mkfs.ext4 mkfs.xfs xfs_io setpriv dd \
	sha256sum dmsetup sg_raw sg_dd sg_inq sg_unmap sg_vpd timeout env; do
	p=$(command -v "$t") || { bad="$bad $t(absent)"; continue; }
	[ "$(readlink "$p")" = busybox ] && { bad="$bad $t(busybox)"; continue; }
	out=$("$t" --version 2>&1 </dev/null)
	case $out in *"error while loading shared libraries"*) bad="$bad $t($out)" ;; esac
	n=$((n + 1))
done
if [ -z "$bad" ]; then pass tools "$n tools run"; else fail tools "$bad"; fi

# Users and groups.
g=$(as_user grid id 2>&1)
case $g in
"uid=54331(grid) gid=54321(oinstall)"*asmadmin*) pass user-grid "$g" ;;
*) fail user-grid "$g" ;;
esac
o=$(as_user oracle id -u 2>&1)
i=$(as_user intruder id -u 2>&1)
if [ "$o" = 54321 ] && [ "$i" = 1001 ]; then pass users "oracle=$o intruder=$i"; else fail users "oracle=$o intruder=$i"; fi

# Optional modules ship and load.
expect_ok modprobe-xfs modprobe xfs
expect_ok modprobe-multipath modprobe dm-multipath

# dm-thin: written blocks are allocated in the pool, discards give them back.
pool_used() { dmsetup status vmpool | awk '{split($6, a, "/"); print a[1]}'; }
if [ -b "${VM_THIN:-}" ]; then
	u0=$(pool_used)
	dd if=/dev/urandom of="$VM_THIN" bs=1M count=8 oflag=direct conv=notrunc 2>/dev/null
	u1=$(pool_used)
	blkdiscard -o 0 -l $((8 * 1024 * 1024)) "$VM_THIN"
	u2=$(pool_used)
	if [ "$u1" -gt "$u0" ] && [ "$u2" -lt "$u1" ]; then
		pass thin-discard "pool data blocks used: $u0 -> write 8M -> $u1 -> discard -> $u2"
	else
		fail thin-discard "pool data blocks used: $u0 -> write 8M -> $u1 -> discard -> $u2"
	fi
	expect_ok thin-mkfs-ext4 sh -c "mkfs.ext4 -q -F $VM_THIN && mkdir -p /mnt/t && mount $VM_THIN /mnt/t && echo hi >/mnt/t/f && umount /mnt/t"
else
	fail thin-discard "no thin volume fixture"
fi

# scsi_debug: logical block provisioning, UNMAP reads back zeros (LBPRZ), sg node.
if [ -b "${VM_SCSI:-}" ]; then
	v=$(sg_vpd -p lbpv "$VM_SCSI" 2>&1)
	case $v in
	*"Unmap command supported (LBPU): 1"*) pass scsi-lbpu "$(echo "$v" | grep -E 'LBPU|LBPRZ' | tr -s ' ')" ;;
	*) fail scsi-lbpu "$v" ;;
	esac
	dd if=/dev/urandom of="$VM_SCSI" bs=1M count=1 oflag=direct conv=notrunc 2>/dev/null
	s1=$(dd if="$VM_SCSI" bs=1M count=1 iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1)
	u=$(sg_unmap --force --lba=0 --num=2048 "$VM_SCSI" 2>&1)
	s2=$(dd if="$VM_SCSI" bs=1M count=1 iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1)
	if [ "$s1" != "$ZERO_1M" ] && [ "$s2" = "$ZERO_1M" ]; then
		pass scsi-unmap-zeroes "UNMAP of 1 MiB reads back zeros $u"
	else
		fail scsi-unmap-zeroes "before $s1 after $s2 (zeros $ZERO_1M) $u"
	fi
	expect_ok scsi-blkdiscard blkdiscard -o 0 -l 1048576 "$VM_SCSI"
	if [ -c "${VM_SCSI_SG:-}" ]; then
		expect_ok sg-write sg_dd if=/dev/zero of="$VM_SCSI_SG" bs=512 count=8
	else
		fail sg-write "no sg node for $VM_SCSI"
	fi
else
	fail scsi-lbpu "no scsi_debug fixture"
fi

# fio on null_blk (libaio, O_DIRECT).
if [ -b "${VM_NULLB:-}" ]; then
	expect_ok fio-nullb fio --name=lab --filename="$VM_NULLB" --rw=randrw --bs=4k --size=16M \
		--direct=1 --ioengine=libaio --iodepth=4 --minimal
else
	fail fio-nullb "no null_blk fixture"
fi

vm_exit
