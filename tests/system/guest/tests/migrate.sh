#!/bin/sh
# migrate: a host switched onto asmguard from what it ran, by `asmguardctl import
# ... --write`, with no byte of any disk written by the switch (sha256 of every disk
# before and after). (a) ASMLib: the multipath disk carries a real ORCLDISK label
# sector (the seed's V512DATA1), /etc/sysconfig/oracleasm says SCANORDER="dm",
# SCANEXCLUDE="sd": /dev/oracleasm/disks/V512DATA1 is on the multipath device with
# ASMLib's owner, the intruder's write is refused on the multipath device and on each
# sd path (excluded from the scan, still its paths); the package's /usr/sbin/oracleasm
# answers what an ansible-oracle orahost_storage run asks (querydisk DEVICE,
# scandisks, listdisks, querydisk -p LABEL, status), and on a new blank disk its
# createdisk (ASMLib's lines, the link with ASMLib's owner, refused to the intruder)
# and a runbook's deletedisk (link gone).
# (b) AFD: the same through /etc/oracleafd.conf (its diskstring naming udev symlinks,
# /dev/disk/by-id/dm-name-*) and /dev/oracleafd/disks. (c) udev
# rules: the multipath disk carries a real ASM member header and no label, a
# null_blk disk another (a real dm dump); the site's rules file is kept and
# `import udev` turns its rules into `manage_asm_members` + `member_names`: the
# multipath disk is managed as ASM_DISK1 (its rule's symlink name), its rule's
# link, owner, group and mode stay; the null_blk disk by the disk name in its
# header; lsdsk says how each is identified; every path refuses the intruder.
# (d) the other udev shapes in one rules file and one switch: the multipath
# recipe (DM_NAME, owner/group/mode, no link: named after its alias), scsi_id's
# RESULT on the sd paths and an ID_WWN rule (no link), NAME= on the null_blk disk
# (no identity: its ASM header protects it), and two partitions of the data disk
# as two ASM disks (p1 by SYMLINK+=, p2 by the RUN+= mknod recipe), each keeping
# its own name; and, on the lab's ATA disk (the 6.12 line), scsi_id's RESULT
# 1ATA_<model>_<serial> (udev's ID_SERIAL is <model>_<serial>, from ata_id) with a
# link: managed under the link's name; every device refuses the intruder (the
# partitions' parent too), no byte changed.
# Everything (disks' first MiB, configuration, rules) is put back at the end.
# lab-settings: one-line
. /vmtests/lib.sh
. /vmtests/syslib.sh

[ -n "${SYS_MPATH:-}" ] || { fail setup "no multipath fixture"; vm_exit; }
sys_service_up || { fail setup "asmguard does not answer"; vm_exit; }
V=/vmtests/vectors
CFG=/etc/asmguard/asmguard.toml
RULES=/etc/udev/rules.d/99-oracle-asmdevices.rules
AG_RULES=/etc/udev/rules.d/99-asmguard.rules
dm=$(readlink -f "$SYS_MPATH")
set -- $SYS_MPATH_PATHS
p1=$1 p2=$2
wwid=$(udevadm info -q property -n "$dm" | sed -n 's/^DM_UUID=mpath-//p')
cp "$CFG" /tmp/mg.toml.orig
dd if="$SYS_MPATH" of=/tmp/mg.head bs=1M count=1 iflag=direct 2>/dev/null
sysconfig_made=""
[ -d /etc/sysconfig ] || { mkdir /etc/sysconfig && sysconfig_made=1; }

modprobe null_blk nr_devices=0 2>/dev/null
[ -d /sys/kernel/config/nullb ] || mount -t configfs configfs /sys/kernel/config 2>/dev/null
# nullb_up NAME MIB [EXCEPT]: a memory-backed null_blk disk made through configfs
# (/sys/kernel/config/nullb/NAME); prints its node (named NAME, or nullbN on kernels
# that number them; not EXCEPT) once it is there (5 s at most), nothing otherwise
nullb_up() {
	_nb=/sys/kernel/config/nullb/$1
	mkdir "$_nb" && echo "$2" >"$_nb/size" && echo 512 >"$_nb/blocksize" &&
		echo 1 >"$_nb/memory_backed" && echo 1 >"$_nb/power" || return 1
	_i=0
	while [ $_i -lt 50 ]; do
		for _b in "/sys/block/$1" /sys/block/nullb*; do
			[ -e "$_b" ] && [ -b "/dev/${_b##*/}" ] && [ "/dev/${_b##*/}" != "${3:-}" ] &&
				{ echo "/dev/${_b##*/}"; return 0; }
		done
		_i=$((_i + 1)); sleep 0.1
	done
	return 1
}
nb=/sys/kernel/config/nullb/mg1
nbdev=$(nullb_up mg1 16) || { fail setup "no null_blk disk ($nb)"; vm_exit; }
[ -n "$nbdev" ] || { fail setup "no null_blk node"; vm_exit; }
info "multipath $SYS_MPATH ($dm, wwid $wwid) over $p1 $p2; null_blk $nbdev"

# put VECTOR DEV: the real block-0 dump, zero-padded to 4 KiB, on DEV (filter off)
put() {
	dd if=/dev/zero of=/tmp/mg.blk bs=4096 count=1 2>/dev/null
	dd if="$V/$1" of=/tmp/mg.blk conv=notrunc 2>/dev/null
	dd if=/tmp/mg.blk of="$2" bs=4096 count=1 conv=notrunc oflag=direct 2>/dev/null
}
# sums: sha256 of every byte of both disks
sums() {
	for d in "$SYS_MPATH" "$nbdev"; do
		dd if="$d" bs=1M iflag=direct 2>/dev/null | sha256sum | cut -c1-16
	done | tr '\n' ' '
}
# switch KIND FILE: what a site does: import --write (over the packaged
# configuration: --force, which keeps it as .bak.N), the rules for it, the service
# (re)started protecting
switch() {
	systemctl stop asmguard.service
	if ! out=$($C import "$1" "$2" --write --force 2>&1); then
		fail "$1-import" "$out"
		return 1
	fi
	pass "$1-import" "$(echo "$out" | tail -n 1)"
	$C udev-rules >"$AG_RULES"
	udevadm control --reload
	rm -f /run/asmguard/filter.state
	sys_service_up || { fail "$1-service" "$(systemctl status asmguard --no-pager 2>&1 | tail -n 3)"; return 1; }
	udevadm trigger --settle --action=change "/sys/class/block/${dm#/dev/}" "/sys/class/block/${nbdev#/dev/}"
}
# link_to CHECK LINK DEV: LINK appears (10 s) and leads to DEV
link_to() {
	i=0
	while [ $i -lt 100 ] && [ "$(readlink -f "$2")" != "$3" ]; do i=$((i + 1)); sleep 0.1; done
	expect "$1" "$3" "$(readlink -f "$2")" "$2 -> $(readlink "$2")"
}
# refused PREFIX DEV...: the intruder's write (past the mode bits) is refused on each
# (names of its own: expect_fail sets _c and _p)
refused() {
	_pre=$1; shift
	for _rd in "$@"; do
		chmod 0666 "/dev/$_rd"
		expect_fail "$_pre-refused-$_rd" "Operation not permitted" as_user_past_modes intruder dd if=/tmp/junk of="/dev/$_rd" $DDW seek=100
	done
}

$C filter disable >/dev/null
put seed-afd-label-V512DATA1-4096.bin "$SYS_MPATH"
put linux-dm39-first96.bin "$nbdev"
before=$(sums)

# (a) ASMLib
cat >/etc/sysconfig/oracleasm <<EOF
ORACLEASM_ENABLED=true
ORACLEASM_UID=grid
ORACLEASM_GID=asmadmin
ORACLEASM_SCANBOOT=true
ORACLEASM_SCANORDER="dm"
ORACLEASM_SCANEXCLUDE="sd"
EOF
if switch oracleasm /etc/sysconfig/oracleasm; then
	holds asmlib-backup "$(ls /etc/asmguard)" [ -e "$CFG.bak.1" ]
	link_to asmlib-link /dev/oracleasm/disks/V512DATA1 "$dm"
	expect asmlib-owner "grid asmadmin 660" "$(stat -L -c '%U %G %a' /dev/oracleasm/disks/V512DATA1 2>&1)"
	expect asmlib-listdisks "V512DATA1" "$($C oracleasm listdisks 2>&1)"
	out=$($C lsdsk 2>&1)
	has_line asmlib-lsdsk-paths "^V512DATA1 .*$p1.*$p2" "$out"
	# what an ansible-oracle orahost_storage run asks asmlib_binary (the package's
	# /usr/sbin/oracleasm), read-only: is the disk labelled, rescan, the labels
	expect asmlib-oracleasm-querydisk "Device \"$SYS_MPATH\" is marked an ASM disk with the label \"V512DATA1\"" \
		"$(/usr/sbin/oracleasm querydisk "$SYS_MPATH" 2>&1)"
	expect_ok asmlib-oracleasm-scandisks /usr/sbin/oracleasm scandisks
	expect asmlib-oracleasm-listdisks "V512DATA1" "$(/usr/sbin/oracleasm listdisks 2>&1)"
	has_line asmlib-oracleasm-querydisk-p "LABEL=\"V512DATA1\" TYPE=\"oracleasm\"" "$(/usr/sbin/oracleasm querydisk -p V512DATA1 2>&1)"
	expect_ok asmlib-oracleasm-status /usr/sbin/oracleasm status
	# (this opens the nodes to everyone: status would rightly say the mode is wrong)
	refused asmlib "${dm#/dev/}" "$p1" "$p2"
	expect asmlib-no-byte-changed "$before" "$(sums)"
	# what orahost_storage runs on a new disk (a blank null_blk one the site asked
	# for: createdisk), and a runbook's deletedisk: ASMLib's lines, udevd's link
	nb2=/sys/kernel/config/nullb/mg2
	if nb2dev=$(nullb_up mg2 8 "$nbdev") && [ -n "$nb2dev" ]; then
		expect asmlib-oracleasm-createdisk "Writing disk header: done
Instantiating disk: done" "$(/usr/sbin/oracleasm createdisk newdata1 "$nb2dev" 2>&1)"
		link_to asmlib-createdisk-link /dev/oracleasm/disks/NEWDATA1 "$nb2dev"
		expect asmlib-createdisk-owner "grid asmadmin 660" "$(stat -L -c '%U %G %a' /dev/oracleasm/disks/NEWDATA1 2>&1)"
		expect asmlib-createdisk-listdisks "NEWDATA1
V512DATA1" "$(/usr/sbin/oracleasm listdisks 2>&1)"
		refused asmlib-createdisk "${nb2dev#/dev/}"
		expect asmlib-oracleasm-deletedisk "Clearing disk header: done
Dropping disk: done" "$(/usr/sbin/oracleasm deletedisk NEWDATA1 2>&1)"
		i=0
		while [ -e /dev/oracleasm/disks/NEWDATA1 ] && [ $i -lt 100 ]; do i=$((i + 1)); sleep 0.1; done
		expect asmlib-deletedisk-no-link "gone" "$([ -e /dev/oracleasm/disks/NEWDATA1 ] && echo kept || echo gone)"
		expect asmlib-deletedisk-listdisks "V512DATA1" "$(/usr/sbin/oracleasm listdisks 2>&1)"
		echo 0 >"$nb2/power"
	else
		fail asmlib-createdisk-setup "no second null_blk disk ($nb2)"
	fi
	rmdir "$nb2" 2>/dev/null
fi

# (b) AFD
cat >/etc/oracleafd.conf <<EOF
afd_diskstring='/dev/disk/by-id/dm-name-*'
afd_filtering=enable
EOF
if switch afd /etc/oracleafd.conf; then
	link_to afd-link /dev/oracleafd/disks/V512DATA1 "$dm"
	expect afd-owner "grid asmadmin 660" "$(stat -L -c '%U %G %a' /dev/oracleafd/disks/V512DATA1 2>&1)"
	has_line afd-lsdsk "V512DATA1" "$($C lsdsk --afd 2>&1)"
	refused afd "${dm#/dev/}" "$p1" "$p2"
	expect afd-no-byte-changed "$before" "$(sums)"
fi

# (c) udev rules: ASM member headers, no labels; the site's rules file stays
$C filter disable >/dev/null
put asm-disk-chk-pl-sdk1-first160.bin "$SYS_MPATH"
cat >"$RULES" <<EOF
KERNEL=="dm-*", ENV{DM_UUID}=="mpath-$wwid", SYMLINK+="oracleasm/asm-disk1", OWNER="grid", GROUP="asmdba", MODE="0640"
KERNEL=="sd*", ENV{ID_SERIAL}=="36000c29e5f6a7b801", SYMLINK+="oracleasm/asm-disk2", OWNER="grid", GROUP="asmadmin", MODE="0660"
KERNEL=="sd*", ENV{ID_SERIAL}=="36000c29e5f6a7b802", SYMLINK+="oracleasm/asm-disk3", OWNER="grid", GROUP="asmadmin", MODE="0660"
EOF
before=$(sums)
if switch udev "$RULES"; then
	has_line udev-member-names "ASM_DISK1" "$(grep -A3 manage_asm_members "$CFG")"
	js=$($C lsdsk --json 2>&1)
	out=$($C lsdsk 2>&1)
	has_line udev-named-on-mpath "^ASM_DISK1 .* $SYS_MPATH .*$p1(path),$p2(path)" "$out"
	has_line udev-identified "\"identified_by\": *\"udev_name\"" "$js" "ASM_DISK1 by its rule's name"
	has_line header-identified "\"identified_by\": *\"asm_header\"" "$js" "NCAS_DISK1_0000 by its header"
	has_line udev-lsdsk-says "^NO LABEL: ASM_DISK1 ($SYS_MPATH) is managed by the name" "$out"
	has_line header-lsdsk-says "^NO LABEL: NCAS_DISK1_0000 ($nbdev) is managed by the disk name in its ASM header" "$out"
	link_to udev-asmguard-link /dev/asmguard/disks/ASM_DISK1 "$dm"
	link_to udev-site-link /dev/oracleasm/asm-disk1 "$dm"
	expect udev-rule-owner-kept "grid asmdba 640" "$(stat -L -c '%U %G %a' /dev/oracleasm/asm-disk1 2>&1)"
	link_to header-link /dev/asmguard/disks/NCAS_DISK1_0000 "$nbdev"
	expect header-owner "grid asmadmin 660" "$(stat -L -c '%U %G %a' "$nbdev" 2>&1)"
	refused udev "${dm#/dev/}" "$p1" "$p2" "${nbdev#/dev/}"
	expect udev-no-byte-changed "$before" "$(sums)"
fi

# (d) the other shapes of udev rules, one file, one switch: the multipath recipe
# (DM_NAME, OWNER/GROUP/MODE, no link), a KERNEL+RESULT scsi_id rule on the sd paths
# and an ID_WWN one (no link), a NAME= rule on the null_blk disk, two partitions
# p1/p2 of one disk (the data disk, ID_SERIAL sysdata) as two ASM disks, p1 by
# SYMLINK+=, p2 by the RUN+= mknod recipe. The import resolves the DM_NAME rule
# against udev's database (the multipath device, named after its alias); the sd
# paths' rules name no link (the disk name in its header); the null_blk disk has no
# identity, and its ASM header protects it: every disk protected, exit 0.
t_d=$(cut -d' ' -f1 /proc/uptime)
vd=$(readlink -f /dev/disk/by-id/virtio-sysdata)
dd if="$vd" of=/tmp/mg.vd bs=1M count=1 iflag=direct 2>/dev/null
# an MBR: p1 at 1 MiB, p2 at 17 MiB, 16 MiB each (type 83)
{
	dd if=/dev/zero bs=446 count=1 2>/dev/null
	printf '\000\000\000\000\203\000\000\000\000\010\000\000\000\200\000\000'
	printf '\000\000\000\000\203\000\000\000\000\210\000\000\000\200\000\000'
	dd if=/dev/zero bs=32 count=1 2>/dev/null
	printf '\125\252'
} >/tmp/mg.mbr
dd if=/tmp/mg.mbr of="$vd" bs=512 count=1 conv=notrunc oflag=direct 2>/dev/null
blockdev --rereadpt "$vd"
udevadm settle
vd1=${vd}1 vd2=${vd}2
dmname=${SYS_MPATH##*/}
wwn=$(udevadm info -q property -n "/dev/$p1" | sed -n 's/^ID_WWN=//p')
# the ATA disk (tests/system/run.sh gives the 6.12 line one): a rule on scsi_id's
# 1ATA_ answer, as VirtualBox and SATA sites write it
ata=$(readlink -f /dev/disk/by-id/ata-QEMU_HARDDISK_sysata 2>/dev/null) ata_rule="" ataid=""
if [ -b "$ata" ]; then
	ataid=$(/usr/lib/udev/scsi_id -g -u -d "$ata" 2>&1)
	expect shapes-ata-scsi-id "1ATA_$(udevadm info -q property -n "$ata" | sed -n 's/^ID_SERIAL=//p')" "$ataid" \
		"scsi_id $ataid, udev ID_SERIAL (ata_id) the same after 1ATA_"
	put linux-dm39-first96.bin "$ata"
	ata_rule="KERNEL==\"sd*\", PROGRAM==\"scsi_id -g -u -d /dev/%k\", RESULT==\"$ataid\", SYMLINK+=\"asm-ata1\", OWNER=\"grid\", GROUP=\"asmadmin\", MODE=\"0660\""
else
	na shapes-ata "no ATA disk on this line (tests/system/run.sh gives the ${SYS_ONE_LINE:-6.12} line one)"
fi
if [ -b "$vd1" ] && [ -b "$vd2" ]; then
	put asm-disk-chk-pl-sdk1-first160.bin "$vd1"
	put linux-dm39-first96.bin "$vd2"
	cat >"$RULES" <<EOF
ENV{DM_NAME}=="$dmname", OWNER:="grid", GROUP:="asmdba", MODE:="0640"
KERNEL=="sd*", SUBSYSTEM=="block", PROGRAM=="/usr/lib/udev/scsi_id -g -u -d /dev/\$name", RESULT=="$wwid", OWNER="grid", GROUP="asmadmin", MODE="0660"
KERNEL=="${nbdev#/dev/}", NAME="asm-nullb", OWNER="grid", GROUP="asmadmin", MODE="0660"
KERNEL=="vd?1", ENV{ID_SERIAL}=="sysdata", SYMLINK+="asm-shared-p1", OWNER="grid", GROUP="asmadmin", MODE="0660"
KERNEL=="vd?2", ENV{ID_SERIAL}=="sysdata", RUN+="/bin/sh -c 'mknod /dev/asm-shared2 b \$major \$minor; chown grid:asmadmin /dev/asm-shared2; chmod 0660 /dev/asm-shared2'"
KERNEL=="sd*", ENV{ID_WWN}=="$wwn", OWNER="grid", GROUP="asmadmin", MODE="0660"
$ata_rule
EOF
	# the old rules active first, as on the site
	udevadm control --reload
	udevadm trigger --settle --action=change "/sys/class/block/${dm#/dev/}" "/sys/class/block/${vd2#/dev/}" ${ata_rule:+"/sys/class/block/${ata#/dev/}"}
	[ -z "$ata_rule" ] || link_to shapes-ata-old-link /dev/asm-ata1 "$ata"
	expect shapes-old-rules-active "grid asmdba 640 grid asmadmin 660" \
		"$(stat -c '%U %G %a' "$dm" 2>&1) $(stat -c '%U %G %a' /dev/asm-shared2 2>&1)"
	# sumsd: sums, and both partitions
	sumsd() {
		echo "$(sums)$(for d in "$vd1" "$vd2" ${ata_rule:+"$ata"}; do dd if="$d" bs=1M iflag=direct 2>/dev/null | sha256sum | cut -c1-16; done | tr '\n' ' ')"
	}
	before=$(sumsd)
	imp=$($C import udev "$RULES" 2>&1; echo "exit $?")
	expect shapes-import-exit "exit 0" "$(echo "$imp" | tail -n 1)"
	has_line shapes-import-dm-name "line 1: .*DM_NAME.*protected as $(echo "$dmname" | tr a-z A-Z) (by rule)" "$imp" "$(echo "$imp" | grep '^line 1:')"
	has_line shapes-import-result "line 2: .*RESULT==\"$wwid\": protected as the disk name in its ASM header" "$imp" "$(echo "$imp" | grep '^line 2:')"
	has_line shapes-import-name "line 3: .*asm-nullb.*: protected as the disk name in its ASM header" "$imp" "$(echo "$imp" | grep '^line 3:')"
	has_line shapes-import-p1 "line 4: .*protected as ASM_SHARED_P1 (by rule)" "$imp" "$(echo "$imp" | grep '^line 4:')"
	has_line shapes-import-p2 "line 5: .*protected as ASM_SHARED2 (by rule)" "$imp" "$(echo "$imp" | grep '^line 5:')"
	has_line shapes-import-wwn "line 6: .*ID_WWN}==\"$wwn\": protected as" "$imp" "$(echo "$imp" | grep '^line 6:')"
	[ -z "$ata_rule" ] || has_line shapes-import-ata "line 7: .*RESULT==\"$ataid\": protected as ASM_ATA1 (by rule)" "$imp" "$(echo "$imp" | grep '^line 7:')"
	if switch udev "$RULES"; then
		out=$($C lsdsk 2>&1)
		has_line shapes-p1-managed "^ASM_SHARED_P1 .* $vd1" "$out"
		has_line shapes-p2-managed "^ASM_SHARED2 .* $vd2" "$out"
		has_line shapes-mpath-by-alias "^$(echo "$dmname" | tr a-z A-Z) .* $SYS_MPATH .*$p1(path),$p2(path)" "$out"
		has_line shapes-nullb-by-header "^NCAS_DISK1_0000 .* $nbdev" "$out"
		if [ -n "$ata_rule" ]; then
			has_line shapes-ata-managed "^ASM_ATA1 .* $ata " "$out"
			link_to shapes-ata-link /dev/asmguard/disks/ASM_ATA1 "$ata"
		fi
		link_to shapes-p1-link /dev/asmguard/disks/ASM_SHARED_P1 "$vd1"
		link_to shapes-p2-link /dev/asmguard/disks/ASM_SHARED2 "$vd2"
		expect shapes-dm-rule-owner-kept "grid asmdba 640" "$(stat -c '%U %G %a' "$dm" 2>&1)"
		refused shapes "${dm#/dev/}" "$p1" "$p2" "${nbdev#/dev/}" "${vd1#/dev/}" "${vd2#/dev/}" "${vd#/dev/}" ${ata_rule:+"${ata#/dev/}"}
		expect shapes-no-byte-changed "$before" "$(sumsd)"
		[ -n "$out" ] && info "lsdsk: $out"
	fi
else
	fail shapes-setup "no partitions $vd1 $vd2 on $vd"
fi
info "shapes (d): $(awk -v a="$t_d" '{printf "%.1f", $1 - a}' /proc/uptime) s"

# put everything back
$C filter disable >/dev/null
dd if=/tmp/mg.head of="$SYS_MPATH" bs=1M count=1 conv=notrunc oflag=direct 2>/dev/null
if [ -b "$vd1" ] && [ -b "$vd2" ]; then
	dd if=/dev/zero of="$vd1" bs=4096 count=1 oflag=direct 2>/dev/null
	dd if=/dev/zero of="$vd2" bs=4096 count=1 oflag=direct 2>/dev/null
fi
dd if=/tmp/mg.vd of="$vd" bs=1M count=1 conv=notrunc oflag=direct 2>/dev/null
[ -z "$ata_rule" ] || dd if=/dev/zero of="$ata" bs=4096 count=1 oflag=direct 2>/dev/null
rm -f /dev/asm-shared2
echo 0 >"$nb/power"
rmdir "$nb"
rm -f "$RULES" "$AG_RULES" /etc/sysconfig/oracleasm /etc/oracleafd.conf "$CFG".bak.*
[ -z "$sysconfig_made" ] || rmdir /etc/sysconfig
cp /tmp/mg.toml.orig "$CFG"
udevadm control --reload
systemctl stop asmguard.service
# the data disk's partitions go once nothing holds them open
blockdev --rereadpt "$vd"
udevadm settle
expect shapes-partitions-gone "none" "$(ls "$vd"[0-9] 2>/dev/null || echo none)"
rm -f /run/asmguard/filter.state
sys_service_up
udevadm trigger --settle --action=change "/sys/class/block/${dm#/dev/}"
chmod 0660 "$dm" "/dev/$p1" "/dev/$p2"
vm_exit
