#!/bin/sh
# filter: the write-filter attack matrix (bpf/guard.bpf.c), on the backend the
# kernel gives: the LSM programs, or the cgroup-device fallback where bpf is not
# an active LSM. On the fallback, vectors that never open the disk for writing
# (ioctls on a read-only open, fds opened before the filter) are n/a: the
# fallback cannot see them, and status says "degraded: open-time only".
#
# The managed disk is the scsi_debug disk ($VM_SCSI) and its sg node; a
# partitioned loop device stands for "the parent of a labelled partition".
# The intruder is root (not allow-listed); the database user is grid (uid
# 54331, allow-listed by uid); /opt/ag/{blockdev,delpart} are allow-listed by
# executable (dev + inode) for the root-only ioctls, while byte-identical
# copies under /tmp/evil (same comm) are not. Every intruder vector must fail,
# the allowed half must succeed, and the first 16 MiB of the disk (where every
# intruder aims) must keep its sha256; grid writes at 48 MiB and beyond.
. /vmtests/lib.sh

G=/usr/local/bin/asmguard-guard-test
D=$VM_SCSI
SG=$VM_SCSI_SG
EPERM="Operation not permitted"
[ -x "$G" ] || { fail setup "$G missing"; vm_exit; }
[ -b "$D" ] && [ -c "$SG" ] || { fail setup "no scsi_debug disk/sg node: $D $SG"; vm_exit; }

# ---- content ----------------------------------------------------------------
dd if=/dev/zero bs=1M count=1 2>/dev/null | tr '\0' 'X' >/tmp/junk
dd if=/tmp/junk of=/tmp/junk512 bs=512 count=1 2>/dev/null
dd if=/dev/urandom of="$D" bs=1M count=16 oflag=direct 2>/dev/null
# an ASM label (ORCLDISK + label at byte 32): blkid/wipefs see "oracleasm"
dd if="$D" of=/tmp/sector0 bs=512 count=1 iflag=direct 2>/dev/null
printf 'ORCLDISKDATA1' | dd of=/tmp/sector0 bs=1 seek=32 conv=notrunc 2>/dev/null
dd if=/tmp/sector0 of="$D" bs=512 count=1 oflag=direct conv=notrunc 2>/dev/null
region_sha() { dd if="$D" bs=1M count=16 iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1; }
before=$(region_sha)
dd if="$D" of=/tmp/sector8 bs=512 skip=8 count=8 iflag=direct 2>/dev/null
dd if="$D" of=/tmp/orig512 bs=512 count=1 iflag=direct 2>/dev/null
info "disk $D ($(stat -c %t:%T "$D")) sg $SG ($(stat -c %t:%T "$SG")) sha16M $before blkid=$(blkid -p -o value -s TYPE "$D" 2>&1)"

# the parent of a labelled partition: a loop device with two partitions
truncate -s 32M /tmp/filter-parent.img
P=$(losetup -P -f --show /tmp/filter-parent.img)
printf 'label: dos\n1MiB,12MiB\n,12MiB\n' | sfdisk -q "$P" >/dev/null 2>&1
partx -u "$P" 2>/dev/null
i=0; while [ ! -b "${P}p2" ] && [ $i -lt 50 ]; do i=$((i + 1)); sleep 0.1; done
P1=${P}p1
dd if=/dev/urandom of="$P1" bs=1M count=4 oflag=direct 2>/dev/null
psha_before=$(sha "$P")

# a second managed disk for the allowed user's destructive vectors (mkfs, wipefs, losetup)
S=$(new_loop 16 filter-scratch)
chown grid "$D" "$SG" "$S" "$P"
chmod 660 "$D" "$SG" "$S"

# the tools grid runs (setpriv --reset-env leaves PATH without sbin)
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
for t in blkdiscard wipefs mkfs.ext4 fallocate; do
	eval "$(echo "$t" | tr -d '.')=\$(command -v $t)"
done
# allow-listed executables and identical impostors
mkdir -p /opt/ag /tmp/evil
for t in blockdev delpart losetup; do
	cp "$(command -v $t)" /opt/ag/$t
	cp /opt/ag/$t /tmp/evil/$t
done

# ---- fds opened before the filter starts ----------------------------------------
rm -f /tmp/go
agpoke --preopen /tmp/go "$D" 0 write odirect uring mmap mprotect punch discard zeroout secdiscard uringdiscard >/tmp/pre.out 2>&1 &
pre=$!
# the same from a 32-bit process: its ioctls take the compat path (file_ioctl_compat)
rm -f /tmp/go32
agpoke32 --preopen /tmp/go32 "$D" 0 discard zeroout secdiscard >/tmp/pre32.out 2>&1 &
pre32=$!
sleep 1000 <"$D" &
sleeper=$!
wait_for_line /tmp/pre.out '^opened' 10 || fail setup "agpoke did not open: $(cat /tmp/pre.out)"
wait_for_line /tmp/pre32.out '^opened' 10 || fail setup-32bit "agpoke32 did not open: $(cat /tmp/pre32.out)"

# ---- the filter ----------------------------------------------------------------
devs="$D $SG $P $P1 $S"
for b in /dev/bsg/*; do [ -c "$b" ] && devs="$devs $b"; done
if out=$($G load --backend $VM_BACKEND --uid 54331 --gid 54329 --exe /opt/ag/blockdev --exe /opt/ag/delpart --exe /opt/ag/losetup $devs 2>&1) &&
	printf '%s' "$out" | grep -q "backend=$VM_BACKEND"; then
	pass load "$out"
else
	fail load "$out"
	vm_exit
fi
printf '%s' "$out" | grep -q 'ag_file_ioctl_compat' && info "file_ioctl_compat attached" || info "file_ioctl_compat not in this kernel"
# the 5.10 fallback variant knows callers by uid and gid only: no executables
IDS_ONLY=no
printf '%s' "$out" | grep -q 'ag_cgroup_dev_ids' && IDS_ONLY=yes
# vectors that use no write-open of the disk: beyond an open-time filter
BLIND=" sg_raw-ro-sg-SG_IO sg_raw-ro-sd-SG_IO blkpg blkpg-same-comm blkrrpart blkrrpart-same-comm blkroset "
$G hold >/tmp/events.out 2>&1 &
holder=$!
wait_for_line /tmp/events.out '^ready' 10 || fail events-reader "$(cat /tmp/events.out)"

deny() { # deny VECTOR CMD...: the intruder (root) fails, sector 0 stays
	_v=$1; shift
	if [ "$VM_BACKEND" = cgroup_device ] && [ "${BLIND#* $_v }" != "$BLIND" ]; then
		na "$_v.intruder-denied" "$VM_FALLBACK_WHY; this vector needs no write-open (not run)"
		return 0
	fi
	expect_fail "$_v.intruder-denied" "ermitted|denied|Permission|failed|error" "$@"
	dd if="$D" bs=512 count=1 iflag=direct 2>/dev/null | cmp -s - /tmp/orig512 ||
		fail "$_v.sector0-unchanged" "the first sector changed after: $*"
}
allow() { # allow VECTOR CMD...: the allowed caller succeeds
	_v=$1; shift
	if [ "$IDS_ONLY" = yes ] && [ "$_v" = losetup-backing ]; then
		na "$_v.allowed-ok" "this kernel's fallback knows callers by uid/gid only: executables cannot be allow-listed"
		return 0
	fi
	expect_ok "$_v.allowed-ok" "$@"
}
G48=$((48 * 1024 * 1024))

# buffered and O_DIRECT writes
deny dd-buffered dd if=/tmp/junk of="$D" bs=4096 count=1 conv=notrunc
allow dd-buffered as_user grid dd if=/tmp/junk of="$D" bs=4096 count=1 seek=12288 conv=notrunc
deny dd-odirect dd if=/tmp/junk of="$D" bs=4096 count=1 oflag=direct conv=notrunc
allow dd-odirect as_user grid dd if=/tmp/junk of="$D" bs=4096 count=1 seek=12289 oflag=direct conv=notrunc
# the seed's AFD case: a shell redirection
expect_fail echo-redirect.intruder-denied "$EPERM" sh -c "printf CORRUPTION >$D"
# io_uring, libaio, mmap through fio
for eng in io_uring libaio; do
	deny fio-$eng fio --name=x --filename="$D" --ioengine=$eng --rw=write --bs=4k --size=64k --direct=1
	allow fio-$eng as_user grid fio --name=x --filename="$D" --ioengine=$eng --rw=write --bs=4k --size=64k --offset=$((G48 + 1048576)) --direct=1
done
deny fio-mmap fio --name=x --filename="$D" --ioengine=mmap --rw=write --bs=4k --size=64k
# (fio's mmap engine maps from the start of a block device whatever --offset says:
# the allowed shared writable mapping is agpoke's, at 51 MiB)
out=$(as_user grid agpoke "$D" $((G48 + 3145728)) mmap 2>&1)
expect fio-mmap.allowed-ok "ATTACK mmap OK" "$out"
# discard, zero-out, secure discard
deny blkdiscard blkdiscard "$D"
allow blkdiscard as_user grid $blkdiscard -o $G48 -l 1048576 "$D"
deny blkdiscard-z blkdiscard -z "$D"
allow blkdiscard-z as_user grid $blkdiscard -z -o $G48 -l 1048576 "$D"
deny blkdiscard-s blkdiscard -s "$D"
# scsi_debug has no secure erase: the allowed caller gets past the filter to the driver
expect_fail blkdiscard-s.allowed-reaches-driver "not supported" as_user grid $blkdiscard -s -o $G48 -l 1048576 "$D"
deny fallocate-punch fallocate -p -o 0 -l 1048576 "$D"
allow fallocate-punch as_user grid $fallocate -p -o $G48 -l 1048576 "$D"
# SCSI generic: sg_dd on the sg node, sg_raw WRITE(10) read-write and read-only (SG_IO)
deny sg_dd sg_dd if=/tmp/junk of="$SG" bs=512 count=8
allow sg_dd as_user grid sg_dd if=/tmp/junk of="$SG" bs=512 count=8 seek=98304
W10="2a 00 00 00 00 00 00 00 01 00"
W10G="2a 00 00 01 80 10 00 00 01 00"
deny sg_raw-rw sg_raw -s 512 -i /tmp/junk512 "$SG" $W10
deny sg_raw-ro-sg-SG_IO sg_raw -R -s 512 -i /tmp/junk512 "$SG" $W10
deny sg_raw-ro-sd-SG_IO sg_raw -R -s 512 -i /tmp/junk512 "$D" $W10
allow sg_raw as_user grid sg_raw -s 512 -i /tmp/junk512 "$SG" $W10G
# the parent whole disk of the labelled partition, and the partition itself
deny parent-disk dd if=/tmp/junk of="$P" bs=4096 count=1 conv=notrunc
deny labelled-partition dd if=/tmp/junk of="$P1" bs=4096 count=1 conv=notrunc
allow parent-disk as_user grid dd if=/tmp/junk of="$P" bs=4096 count=1 seek=7000 conv=notrunc
# partition table: BLKPG (delpart) and BLKRRPART (blockdev --rereadpt), on the parent disk
deny blkpg delpart "$P" 1
deny blkpg-same-comm /tmp/evil/delpart "$P" 1
deny blkrrpart blockdev --rereadpt "$P"
deny blkrrpart-same-comm /tmp/evil/blockdev --rereadpt "$P"
allow blkrrpart /opt/ag/blockdev --rereadpt "$P"
i=0; while [ ! -b "${P}p2" ] && [ $i -lt 50 ]; do i=$((i + 1)); sleep 0.1; done
# the re-read partitions may have new numbers: put p1 back (the daemon does it on the uevent)
$G load "$P1" >/dev/null 2>&1 || fail blkrrpart.re-add "$P1"
deny labelled-partition-after-reread dd if=/tmp/junk of="$P1" bs=4096 count=1 conv=notrunc
allow blkpg /opt/ag/delpart "$P" 2
deny blkroset blockdev --setro "$D"
allow blkroset sh -c "/opt/ag/blockdev --setro $D && /opt/ag/blockdev --setrw $D"
# another name for the same device
mknod /tmp/alias b $((0x$(stat -c %t "$D"))) $((0x$(stat -c %T "$D")))
chown grid /tmp/alias
deny mknod-alias dd if=/tmp/junk of=/tmp/alias bs=4096 count=1 conv=notrunc
allow mknod-alias as_user grid dd if=/tmp/junk of=/tmp/alias bs=4096 count=1 seek=12290 conv=notrunc
# reopen through /proc/PID/fd of a process that has it open read-only
deny proc-fd-reopen dd if=/tmp/junk of=/proc/$sleeper/fd/0 bs=4096 count=1 conv=notrunc
setpriv --reuid=54331 --regid=54321 --init-groups sleep 1000 <"$D" &
gsleeper=$!
allow proc-fd-reopen as_user grid dd if=/tmp/junk of=/proc/$gsleeper/fd/0 bs=4096 count=1 seek=12291 conv=notrunc
# tools
deny wipefs wipefs -a "$D"
deny mkfs.ext4 mkfs.ext4 -q -F "$D"
printf 'ORCLDISKSCRATCH' | as_user grid dd of="$S" bs=1 seek=32 conv=notrunc 2>/dev/null
allow wipefs as_user grid $wipefs -a "$S"
allow mkfs.ext4 as_user grid $mkfsext4 -q -F "$S"
# losetup with the managed disk as backing file: at best a read-only loop
if l=$(losetup -f --show "$D" 2>/tmp/losetup.err); then
	deny losetup-backing dd if=/tmp/junk of="$l" bs=4096 count=1 oflag=direct conv=notrunc
	info "losetup made $l read-only=$(cat /sys/class/block/${l#/dev/}/ro): $(cat /tmp/losetup.err)"
	losetup -d "$l"
else
	pass losetup-backing.intruder-denied "$(cat /tmp/losetup.err)"
fi
if [ "$IDS_ONLY" = yes ]; then
	na losetup-backing.allowed-ok "this kernel's fallback knows callers by uid/gid only: executables cannot be allow-listed"
elif vm_full; then
	# binding a loop device to a managed disk is refused to an allowed
	# caller too: the loop device would be anyone's until the daemon adds it
	if l=$(/opt/ag/losetup -f --show "$S" 2>&1); then
		losetup -d "$l"
		fail losetup-backing.allowed-bind-refused "an allowed executable bound $l to the managed disk"
	else
		expect losetup-backing.allowed-bind-refused "Operation not permitted" \
			"$(printf '%s' "$l" | grep -o 'Operation not permitted')" "$l"
	fi
elif l=$(/opt/ag/losetup -f --show "$S" 2>&1); then
	allow losetup-backing dd if=/tmp/junk of="$l" bs=4096 count=1 oflag=direct conv=notrunc
	losetup -d "$l"
else
	fail losetup-backing.allowed-ok "$l"
fi
# Known limit (README "Limits"): a device-mapper table opens the disk inside
# the kernel, without a file open the LSM hooks see. Measured, not asserted:
# the daemon closes it by adding the new holder to the managed set on its uevent.
if dmsetup create agevil --table "0 8 linear $D 8" >/dev/null 2>&1; then
	if dd if=/tmp/junk of=/dev/mapper/agevil bs=4096 count=1 oflag=direct conv=notrunc 2>/dev/null; then
		info "limit dm-linear: a write through a new dm mapping of the disk passed (daemon-less run: nobody added the holder)"
	else
		info "limit dm-linear: the write through a new dm mapping was refused"
	fi
	dmsetup remove agevil >/dev/null 2>&1
	# put sectors 8..15 back, so the sha256 check below is about the other vectors
	as_user grid dd if=/tmp/sector8 of="$D" bs=512 seek=8 count=8 oflag=direct conv=notrunc 2>/dev/null
fi
# a non-root intruder with the mode bits opened
chmod 666 "$D"
deny intruder-uid as_user intruder dd if=/tmp/junk of="$D" bs=4096 count=1 conv=notrunc
chmod 660 "$D"

# fds opened before the filter: every attack through them
if [ "$VM_BACKEND" = cgroup_device ]; then
	# (stopped before they are told to go: the fallback cannot stop them)
	kill "$pre" "$pre32" 2>/dev/null
	wait "$pre" "$pre32" 2>/dev/null
	for a in write odirect uring mmap mprotect punch discard zeroout secdiscard uringdiscard 32bit; do
		na preopened-fd-$a.intruder-denied "$VM_FALLBACK_WHY; fds opened before the filter (not run)"
	done
else
touch /tmp/go
wait_for_line /tmp/pre.out '^ATTACK uringdiscard' 20
for a in write odirect uring mmap mprotect punch discard zeroout secdiscard; do
	line=$(grep "^ATTACK $a " /tmp/pre.out)
	case $line in
	"ATTACK $a FAIL 1 "*) pass preopened-fd-$a.intruder-denied "$line" ;;
	*) fail preopened-fd-$a.intruder-denied "${line:-no result}: $(cat /tmp/pre.out)" ;;
	esac
done
touch /tmp/go32
wait_for_line /tmp/pre32.out '^ATTACK secdiscard' 20
for a in discard zeroout secdiscard; do
	line=$(grep "^ATTACK $a " /tmp/pre32.out)
	case $line in
	"ATTACK $a FAIL 1 "*) pass preopened-fd-32bit-$a.intruder-denied "$line" ;;
	*) fail preopened-fd-32bit-$a.intruder-denied "${line:-no result}: $(cat /tmp/pre32.out)" ;;
	esac
done
out=$(as_user grid agpoke32 "$D" $((G48 + 5242880)) discard zeroout 2>&1)
expect preopened-fd-32bit.allowed-ok 2 "$(printf '%s\n' "$out" | grep -c ' OK$')" "$out"
out=$(as_user grid agpoke "$D" $((G48 + 2097152)) write odirect uring mmap mprotect punch discard zeroout 2>&1)
if [ "$(printf '%s\n' "$out" | grep -c ' OK$')" = 8 ]; then
	pass preopened-fd.allowed-ok "$out"
else
	fail preopened-fd.allowed-ok "$out"
fi
# io_uring passthrough (lsm/uring_cmd): block devices take BLOCK_URING_CMD_DISCARD
# from 6.12; older kernels refuse the command before any LSM hook (EOPNOTSUPP)
gout=$(as_user grid agpoke "$D" $((G48 + 4194304)) uringdiscard 2>&1)
iline=$(grep "^ATTACK uringdiscard " /tmp/pre.out)
case "$gout|$iline" in
"ATTACK uringdiscard OK|ATTACK uringdiscard FAIL 1 "*)
	pass preopened-fd-uringdiscard.intruder-denied "$iline"
	pass preopened-fd-uringdiscard.allowed-ok "$gout" ;;
"ATTACK uringdiscard FAIL 95 "*"|ATTACK uringdiscard FAIL 95 "*)
	na preopened-fd-uringdiscard "io_uring block discard needs 6.12+: the kernel refuses it before any hook (intruder: $iline; grid: $gout)" ;;
"ATTACK uringdiscard FAIL 22 "*"|ATTACK uringdiscard FAIL 22 "*)
	na preopened-fd-uringdiscard "io_uring passthrough (IORING_OP_URING_CMD) needs 5.19+: the kernel refuses the opcode (intruder: $iline; grid: $gout)" ;;
*) fail preopened-fd-uringdiscard "intruder: ${iline:-no result}; grid: $gout" ;;
esac
fi

# ---- nothing changed ----------------------------------------------------------------
after=$(region_sha)
expect sha256-unchanged "$before" "$after"
# the AFD observation must not repeat: a fresh read (page cache, then after dropping it)
if dd if="$D" bs=512 count=1 2>/dev/null | cmp -s - /tmp/orig512; then
	pass fresh-read-original "buffered read shows the original bytes"
else
	fail fresh-read-original "buffered read differs: $(dd if="$D" bs=32 count=1 2>/dev/null | od -An -tx1 | tr -s ' \n' ' ')"
fi
sync; echo 3 >/proc/sys/vm/drop_caches
holds fresh-read-after-drop-caches "block 0 read again, compared" sh -c "dd if='$D' bs=512 count=1 2>/dev/null | cmp -s - /tmp/orig512"
p1after=$(dd if="$P1" bs=1M count=4 iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1)
p1before=$(dd if=/tmp/filter-parent.img bs=1M skip=1 count=4 2>/dev/null | sha256sum | cut -d' ' -f1)
expect partition-unchanged "$p1before" "$p1after"
holds partition-still-there "$P1" [ -b "$P1" ]

# ---- events -------------------------------------------------------------------------
sleep 0.5
if [ "$VM_BACKEND" = cgroup_device ]; then
	for pat in "uid=0 .*hook=cgroup_device" "uid=1001 euid=1001 .*hook=cgroup_device"; do
		if grep -q -- "$pat" /tmp/events.out; then
			pass "event.cgroup_device-uid$(echo "$pat" | sed 's/uid=//; s/ .*//')" "$(grep -m1 -- "$pat" /tmp/events.out)"
		else
			fail "event.cgroup_device-uid$(echo "$pat" | sed 's/uid=//; s/ .*//')" "no event /$pat/: $(tail -n 3 /tmp/events.out)"
		fi
	done
	na event.lsm-hooks "$VM_FALLBACK_WHY: no file_open/file_permission/file_ioctl/mmap events"
else
for pat in "comm=dd exe=.* dev=b8:0 disk=1 hook=file_open op=write-open mode=enforce" \
	"uid=0 .*comm=agpoke exe=/usr/local/bin/agpoke .*hook=file_permission op=write" "hook=file_ioctl op=BLKPG" "hook=file_ioctl op=BLKRRPART" \
	"hook=file_ioctl op=SG_IO" "hook=file_ioctl op=BLKDISCARD" "hook=file_ioctl op=BLKZEROOUT" \
	"hook=file_ioctl op=BLKSECDISCARD" "hook=file_ioctl op=BLKROSET" "hook=mmap_file" "hook=file_mprotect" \
	"hook=file_ioctl_compat op=BLKDISCARD" \
	"uid=1001 euid=1001 .*hook=file_open"; do
	if grep -q -- "$pat" /tmp/events.out; then
		pass "event.$(echo "$pat" | sed 's/.*hook=//; s/ .*//; s/[^a-z_]//g')-$(echo "$pat" | sed 's/.*op=//; s/ .*//')" "$(grep -m1 -- "$pat" /tmp/events.out)"
	else
		fail "event.$(echo "$pat" | tr -c 'a-zA-Z0-9_\n' '_' | cut -c1-40)" "no event /$pat/: $(tail -n 3 /tmp/events.out)"
	fi
done
fi
if grep -q "uid=54331" /tmp/events.out; then
	fail event.none-for-grid "$(grep -m1 uid=54331 /tmp/events.out)"
else
	pass event.none-for-grid
fi
info "stats: $($G stats 2>&1)"
info "events: $(grep -c '^event' /tmp/events.out)"

kill "$pre" "$pre32" "$sleeper" "$gsleeper" 2>/dev/null
kill -9 "$holder" 2>/dev/null
$G unload >/dev/null 2>&1
losetup -d "$P" "$S" 2>/dev/null
vm_exit
