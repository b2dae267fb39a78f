#!/bin/sh
# consumers: no in-kernel consumer can be configured over a managed disk by a caller
# that is not allow-listed. asmguardd holds an O_RDONLY|O_EXCL claim on every
# managed top device, so every consumer that claims the disk (dm tables of any
# target, md, mount, swapon, bcache, zram, LIO iblock/pscsi) gets EBUSY; loop and
# swapon open a file first, which the write filter sees; nvmet's by-path open takes
# no claim and meets the cgroup-device check (the fallback's program, or
# ag_kernel_open beside the LSM programs). One check group per consumer: root
# (not allow-listed) is refused, the allowed user grid still writes the disk, and
# the disk's sha256 is unchanged. The claim is dropped on unlabel and re-acquired
# when the daemon starts again.
. /vmtests/lib.sh

D=$VM_SCSI
C="asmguardctl --socket /run/asmguard/asmguard.sock"
dd if=/dev/zero bs=4096 count=1 2>/dev/null | tr '\0' 'G' >/tmp/grid.blk
# refused by the claim (EBUSY) or, where the kernel checks the caller first, the filter
busy="Device or resource busy|Operation not permitted|permission denied"

mkdir -p /opt/cons && cp "$(command -v dmsetup)" /opt/cons/dmsetup
agd_config /tmp/cons.toml "${D#/dev/}" 'filter.allow_executables=["/opt/cons/dmsetup"]'
: >/tmp/cons.log
dd if=/dev/zero of="$D" bs=1M count=4 oflag=direct 2>/dev/null
# what grid "made on the disk" before it was handed to asmguard: an ext4 file
# system and a swap area (their first KiB, where the label lives, left out)
truncate -s 16M /tmp/fs.img && mkfs.ext4 -q -F /tmp/fs.img >/dev/null 2>&1
agd_start /tmp/cons.toml /tmp/cons.log
expect_ok label $C label CONS1 "$D"
st=$($C status 2>&1 | grep 'exclusive claims')
case $st in
*"1 disk(s)"*"CONS1 $(cat "/sys/class/block/${D#/dev/}/dev")"*"re-taken on start"*) pass status-claims "$st" ;;
*) fail status-claims "$st" ;;
esac
chown grid "$D"
grid_write() { # the allowed user's own path to the disk keeps working
	expect_ok "$1.grid-writes" as_user grid dd if=/tmp/grid.blk of="$D" bs=4096 count=1 seek=2048 conv=notrunc oflag=direct
}
grid_write setup
# grid_puts CHECK IMAGE KIB: grid copies KiB 1..KIB of IMAGE onto the disk (KiB 0,
# with the label, stays); the disk's content from now on is the reference. KiB 1..63
# go one by one, the rest (KIB+1 a multiple of 64) in 64 KiB writes: each write is
# judged under TCG (about 4 ms), 4,095 of them took 18 s a line.
grid_puts() {
	_n=$3
	[ "$_n" -gt 63 ] && _n=63
	_cmd="dd if=$2 of=$D bs=1024 skip=1 seek=1 count=$_n conv=notrunc oflag=direct"
	[ "$3" -gt 63 ] &&
		_cmd="$_cmd && dd if=$2 of=$D bs=65536 skip=1 seek=1 count=$((($3 + 1) / 64 - 1)) conv=notrunc oflag=direct"
	expect_ok "$1" as_user grid sh -c "$_cmd"
	before=$(sha "$D")
}
grid_puts mount.grid-made-ext4 /tmp/fs.img 4095
unchanged() { # unchanged GROUP: the disk's content is what it was
	_s=$(sha "$D")
	[ "$_s" = "$before" ] && pass "$1.sha-unchanged" "$_s" || fail "$1.sha-unchanged" "$before -> $_s"
	grid_write "$1"
}

# spare devices the consumers pair with the managed disk
L1=$(new_loop 64 cons1)
L2=$(new_loop 64 cons2)

# -- device-mapper: every target takes the disk with an exclusive claim
expect_ok dm-linear.spare-works dmsetup create agc-spare --table "0 2048 linear $L1 0"
dmsetup remove agc-spare 2>/dev/null
expect_fail dm-linear.refused "$busy" dmsetup create agc-lin --table "0 2048 linear $D 0"
# the claim alone: an allow-listed executable (a copy of dmsetup) passes the filter
# (the fallback's 5.10 variant knows callers by uid and gid only)
claim_alone() { # claim_alone CHECK NAME
	if [ "$VM_BACKEND" = cgroup_device ]; then
		na "$1" "$VM_FALLBACK_WHY; its program knows callers by uid/gid only: executables cannot be allow-listed"
	else
		expect_fail "$1" "Device or resource busy" /opt/cons/dmsetup create "$2" --table "0 2048 linear $D 0"
	fi
}
claim_alone dm-linear.claim-refuses-allowed agc-lin
# Root with the allowed group as its real and effective gid. The filter must not
# refuse an identity it allows: either the claim alone refuses the table load
# (EBUSY), or the filter refused it and its event shows why, i.e. another gid
# than the caller's. (6.12 runs the dm table load's in-kernel open under other
# credentials: ag_kernel_open sees egid 0 there, not the caller's gid.)
allowed_gid_dm() {
	_g=$(getent group asmadmin 2>/dev/null | cut -d: -f3)
	[ -n "$_g" ] || _g=$(awk -F: '$1 == "asmadmin" {print $3}' /etc/group)
	_n0=$(grep -c "write denied" /tmp/cons.log)
	if _o=$(setpriv --regid="$_g" --clear-groups dmsetup create agc-lin3 --table "0 2048 linear $D 0" 2>&1); then
		fail dm-linear.allowed-gid "the table load succeeded: $_o"
		return
	fi
	case $_o in
	*"Device or resource busy"*) pass dm-linear.allowed-gid "the claim alone refused it: $_o"; return ;;
	*"Operation not permitted"*) ;;
	*) fail dm-linear.allowed-gid "$_o"; return ;;
	esac
	_i=0
	while [ $_i -lt 30 ] && [ "$(grep -c "write denied" /tmp/cons.log)" -le "$_n0" ]; do
		_i=$((_i + 1))
		sleep 0.1
	done
	_l=$(grep "write denied" /tmp/cons.log | tail -n 1)
	case "$(grep -c "write denied" /tmp/cons.log) $_l" in
	"$_n0 "*) fail dm-linear.allowed-gid "EPERM without a filter event: $_o" ;;
	*"egid=$_g "*) fail dm-linear.allowed-gid "the filter refused the allowed gid $_g: $_l" ;;
	*"egid="*'comm="dmsetup"'*) pass dm-linear.allowed-gid "refused under the kernel's credentials, not the caller's (gid $_g): $_l" ;;
	*) fail dm-linear.allowed-gid "$_l" ;;
	esac
}
allowed_gid_dm
expect_fail dm-thin-pool-data.refused "$busy" dmsetup create agc-tp1 --table "0 65536 thin-pool $L1 $D 128 0"
expect_fail dm-thin-pool-meta.refused "$busy" dmsetup create agc-tp2 --table "0 65536 thin-pool $D $L1 128 0"
if modprobe dm-mirror 2>/dev/null; then
	expect_fail dm-mirror.refused "$busy" dmsetup create agc-mir --table "0 2048 mirror core 1 1024 2 $L1 0 $D 0"
else
	na dm-mirror.refused "this kernel has no dm-mirror module"
fi
if modprobe dm-cache 2>/dev/null && modprobe dm-cache-smq 2>/dev/null; then
	expect_fail dm-cache-origin.refused "$busy" dmsetup create agc-c1 --table "0 2048 cache $L1 $L2 $D 512 1 writethrough smq 0"
	expect_fail dm-cache-fast.refused "$busy" dmsetup create agc-c2 --table "0 2048 cache $L1 $D $L2 512 1 writethrough smq 0"
else
	na dm-cache.refused "this kernel has no dm-cache/dm-cache-smq module"
fi
# only this test's maps (the lab's dm-thin fixtures stay for the tests after it)
for m in agc-lin agc-lin3 agc-tp1 agc-tp2 agc-mir agc-c1 agc-c2; do
	dmsetup remove "$m" >/dev/null 2>&1
done
unchanged dm

# -- md: built and created arrays, and a resync onto the disk
if modprobe md-mod 2>/dev/null && modprobe raid1 2>/dev/null; then
	expect_fail md-build.refused "$busy" mdadm --build /dev/md90 --level=1 --raid-devices=2 "$L1" "$D"
	expect_fail md-create.refused "$busy" mdadm --create /dev/md91 --run --level=1 --metadata=1.0 --raid-devices=2 "$L1" "$D"
	if mdadm --create /dev/md92 --run --level=1 --metadata=1.0 --raid-devices=2 "$L2" missing >/dev/null 2>&1; then
		expect_fail md-resync-add.refused "$busy" mdadm /dev/md92 --add "$D"
		mdadm --stop /dev/md92 >/dev/null 2>&1
	else
		fail md-resync-add.setup "a degraded array on a spare loop device could not be made"
	fi
	mdadm --stop /dev/md90 /dev/md91 >/dev/null 2>&1
else
	na md.refused "this kernel has no md-mod/raid1 module"
fi
unchanged md

# -- mount: grid's own ext4 on the disk, read-write and read-only
mkdir -p /mnt/cons
expect_fail mount.refused "$busy" mount -t ext4 "$D" /mnt/cons
expect_fail mount-ro.refused "$busy" mount -t ext4 -o ro "$D" /mnt/cons
umount /mnt/cons 2>/dev/null
unchanged mount

# -- swapon: grid's own swap area on the disk
truncate -s 8M /tmp/swap.img && mkswap /tmp/swap.img >/dev/null 2>&1
grid_puts swapon.grid-made-swap /tmp/swap.img 8
expect_fail swapon.refused "$busy" swapon "$D"
swapoff "$D" 2>/dev/null
unchanged swapon

# -- loop: the loop device takes the file the caller opened; read-only at best
if lo=$(losetup --show -f "$D" 2>&1); then # (losetup may fall back to read-only)
	ro=$(blockdev --getro "$lo")
	losetup -d "$lo"
	expect loop-rw.read-only-fallback 1 "$ro" "$lo: read-only flag $ro"
else
	pass loop-rw.refused "$lo"
fi
if lo=$(losetup --show -f -r "$D" 2>/dev/null); then
	expect loop-ro.read-only 1 "$(blockdev --getro "$lo")" "$lo: read-only flag"
	expect_fail loop-ro.write-refused "" dd if=/tmp/grid.blk of="$lo" bs=4096 count=1 seek=10 conv=notrunc oflag=direct
	losetup -d "$lo"
else
	fail loop-ro.read-only "a read-only loop over the disk could not be made"
fi
unchanged loop

# -- zram: backing device for writeback
if modprobe zram num_devices=1 2>/dev/null && [ -e /sys/block/zram0/backing_dev ]; then
	expect_fail zram-backing.refused "$busy" sysfs_write /sys/block/zram0/backing_dev "$D"
	b=$(cat /sys/block/zram0/backing_dev)
	expect zram-backing.unset none "$b"
else
	na zram-backing.refused "this kernel has no zram with writeback (backing_dev)"
fi
unchanged zram

# -- bcache: registering the disk as a backing or cache device
if modprobe bcache 2>/dev/null && [ -e /sys/fs/bcache/register ]; then
	truncate -s 16M /tmp/bc.img && make-bcache -B /tmp/bc.img >/dev/null 2>&1
	grid_puts bcache.grid-made-backing /tmp/bc.img 15
	# (5.10 answers EINVAL to every failed registration: its log line says why)
	if o=$(sysfs_write /sys/fs/bcache/register "$D" 2>&1); then
		fail bcache-register.refused "registered: $o"
	else
		why=$(dmesg | grep 'register_bcache' | tail -n 1)
		case "$o $why" in
		*"Device or resource busy"* | *"Operation not permitted"* | *"device busy"* | *"failed to open device"*)
			pass bcache-register.refused "$o :: $why" ;;
		*) fail bcache-register.refused "$o :: $why" ;;
		esac
	fi
else
	na bcache-register.refused "this kernel has no bcache module"
fi
unchanged bcache

# configfs, for LIO and nvmet
CFG=/sys/kernel/config
modprobe configfs 2>/dev/null
[ -d "$CFG/target" ] || [ -d "$CFG/nvmet" ] || mount -t configfs configfs "$CFG" 2>/dev/null

# -- LIO: iblock and pscsi backstores (then tcm_loop could export them)
if modprobe target_core_iblock 2>/dev/null && modprobe tcm_loop 2>/dev/null && [ -d "$CFG/target/core" ]; then
	# the same backstore over a spare disk is enabled: the setup itself works
	sp="$CFG/target/core/iblock_91/spare"
	mkdir -p "$sp"
	echo "udev_path=$L2" >"$sp/control"
	expect_ok lio-iblock.spare-works sysfs_write "$sp/enable" 1
	rmdir "$sp" "${sp%/*}" 2>/dev/null
	ib="$CFG/target/core/iblock_90/agc"
	mkdir -p "$ib"
	echo "udev_path=$D" >"$ib/control"
	expect_fail lio-iblock.refused "$busy" sysfs_write "$ib/enable" 1
	rmdir "$ib" "${ib%/*}" 2>/dev/null
	if modprobe target_core_pscsi 2>/dev/null; then
		ps="$CFG/target/core/pscsi_90/agc"
		mkdir -p "$ps"
		hctl=$(basename "$(readlink -f "/sys/class/block/${D#/dev/}/device")")
		echo "$hctl" | awk -F: '{printf "scsi_host_id=%s,scsi_channel_id=%s,scsi_target_id=%s,scsi_lun_id=%s", $1, $2, $3, $4}' >"$ps/control"
		sysfs_write "$ps/udev_path" "$D"
		expect_fail lio-pscsi.refused "$busy" sysfs_write "$ps/enable" 1
		rmdir "$ps" "${ps%/*}" 2>/dev/null
	else
		na lio-pscsi.refused "this kernel has no target_core_pscsi module"
	fi
else
	na lio.refused "this kernel has no target_core_iblock/tcm_loop modules"
fi
unchanged lio

# -- nvmet with the loop transport: its block backend opens by path, without a claim
if modprobe nvmet 2>/dev/null && modprobe nvme-loop 2>/dev/null && [ -d "$CFG/nvmet" ]; then
	ss="$CFG/nvmet/subsystems/agc"
	mkdir -p "$ss/namespaces/1"
	echo 1 >"$ss/attr_allow_any_host"
	printf '%s' "$D" >"$ss/namespaces/1/device_path"
	# its by-path open takes no claim and runs no LSM hook: the device-cgroup check
	# (the fallback's program, or ag_kernel_open beside the LSM programs) refuses it
	k0=$(grep -c "hook=kernel_open" /tmp/cons.log)
	expect_fail nvmet-ns.refused "$busy" sysfs_write "$ss/namespaces/1/enable" 1
	if vm_full; then
		# a new kernel_open denial, of the task that wrote "enable" (dd)
		i=0
		while [ $i -lt 30 ] && [ "$(grep -c "hook=kernel_open" /tmp/cons.log)" -le "$k0" ]; do
			i=$((i + 1))
			sleep 0.1
		done
		l=$(grep "hook=kernel_open" /tmp/cons.log | tail -n 1)
		case "$(grep -c "hook=kernel_open" /tmp/cons.log) $l" in
		"$k0 "*) fail nvmet-ns.event-kernel_open "no new kernel_open denial: $(grep -i denied /tmp/cons.log | tail -n 2)" ;;
		*'comm="dd"'*) pass nvmet-ns.event-kernel_open "$l" ;;
		*) fail nvmet-ns.event-kernel_open "$l" ;;
		esac
	fi
	echo 0 >"$ss/namespaces/1/enable" 2>/dev/null
	rmdir "$ss/namespaces/1" "$ss" 2>/dev/null
else
	na nvmet.refused "this kernel has no nvmet/nvme-loop modules"
fi
unchanged nvmet

# -- the claim across a restart (no systemd fd store here: re-acquired on start)
kill "$agd"; wait "$agd" 2>/dev/null
agd_start /tmp/cons.toml /tmp/cons.log
if [ "$VM_BACKEND" = cgroup_device ]; then
	expect_fail restart.claim-reacquired "$busy" dmsetup create agc-lin2 --table "0 2048 linear $D 0"
else
	claim_alone restart.claim-reacquired agc-lin2
fi
grep -q "claim on .* taken" /tmp/cons.log && pass restart.logged "$(grep -m1 'claim on' /tmp/cons.log)" ||
	fail restart.logged "$(tail -n 5 /tmp/cons.log)"
unchanged restart

# -- unlabel releases the claim: the disk is an ordinary disk again
expect_ok unlabel $C unlabel CONS1
if dmsetup create agc-free --table "0 2048 linear $D 0" >/dev/null 2>&1; then
	pass unlabel.claim-released "dm table loads again"
	dmsetup remove agc-free
else
	fail unlabel.claim-released "still refused after unlabel"
fi

# the daemon and its pins go (the runner's consumers.ends-clean checks it)
$C filter disable >/dev/null 2>&1
kill "$agd"; wait "$agd" 2>/dev/null
losetup -d "$L1" "$L2" 2>/dev/null
rm -f /tmp/cons1.img /tmp/cons2.img /tmp/fs.img /tmp/swap.img /tmp/bc.img
vm_exit
