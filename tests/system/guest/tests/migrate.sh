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
# (b) AFD: the same through /etc/oracleafd.conf and /dev/oracleafd/disks. (c) udev
# rules: the multipath disk carries a real ASM member header and no label, a
# null_blk disk another (a real dm dump); the site's rules file is kept and
# `import udev` turns its rules into `manage_asm_members` + `member_names`: the
# multipath disk is managed as ASM_DISK1 (its rule's symlink name), its rule's
# link, owner, group and mode stay; the null_blk disk by the disk name in its
# header; lsdsk says how each is identified; every path refuses the intruder.
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
afd_diskstring='/dev/mapper/mpath*'
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

# put everything back
$C filter disable >/dev/null
dd if=/tmp/mg.head of="$SYS_MPATH" bs=1M count=1 conv=notrunc oflag=direct 2>/dev/null
echo 0 >"$nb/power"
rmdir "$nb"
rm -f "$RULES" "$AG_RULES" /etc/sysconfig/oracleasm /etc/oracleafd.conf "$CFG".bak.*
[ -z "$sysconfig_made" ] || rmdir /etc/sysconfig
cp /tmp/mg.toml.orig "$CFG"
udevadm control --reload
systemctl stop asmguard.service
rm -f /run/asmguard/filter.state
sys_service_up
udevadm trigger --settle --action=change "/sys/class/block/${dm#/dev/}"
chmod 0660 "$dm" "/dev/$p1" "/dev/$p2"
vm_exit
