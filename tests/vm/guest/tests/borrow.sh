#!/bin/sh
# borrow: no one borrows an allow-listed identity (issue 29). A user in group
# `disk` (diskuser, allowed by no rule) who may open the managed loop disk by
# its mode, and whose own dd is refused, runs each executable the daemon
# allow-lists by file identity (its own /usr/local/bin/asmguardd,
# /usr/sbin/multipathd, /usr/lib/udev/scsi_id: the lab has neither tool, so a
# dynamically linked coreutils program is copied there before the daemon
# starts) and writes the disk from inside it three ways:
# - ag-ptrace-write: PTRACE_TRACEME, then an injected openat + pwrite64 at the
#   stop after execve;
# - LD_PRELOAD of ag-preload-write.so, whose constructor writes;
# - ag-mmmap-write: in a user namespace of its own, prctl(PR_SET_MM_MAP)
#   points its /proc/self/exe at the executable.
# Each must not land (the disk's sha256 unchanged) and the daemon logs one
# denial for it. The SG_IO double read: ag-sgio-race issues READ(10) through
# SG_IO on a read-only descriptor of the managed scsi_debug disk while a
# second process sharing the CDB page flips it to WRITE(10); run by root and
# by diskuser given only CAP_SYS_RAWIO (ambient): no WRITE lands. Root's
# sg_inq, sg_readcap and smartctl -i and diskuser's sg_inq (no CAP_SYS_RAWIO)
# still work. On main before issue 29 the borrowing writes land: these checks
# fail there, by design.
. /vmtests/lib.sh

C="asmguardctl --socket /run/asmguard/asmguard.sock"
EPERM="Operation not permitted"
LOG=/tmp/borrow.log
[ ! -e /sys/fs/bpf/asmguard ] || { fail setup "a filter is pinned from an earlier test"; vm_exit; }

# ---- the user in group disk -------------------------------------------------------
grep -q '^disk:' /etc/group || echo 'disk:x:6:diskuser' >>/etc/group
grep -q '^diskuser:' /etc/group || echo 'diskuser:x:1002:' >>/etc/group
grep -q '^diskuser:' /etc/passwd || echo 'diskuser:x:1002:1002:member of group disk:/tmp:/bin/sh' >>/etc/passwd
ids=$(as_user diskuser id -G 2>&1)
holds user-in-disk "diskuser's groups: $ids" [ "$ids" = "1002 6" ]
# (Debian's kernel knob for unprivileged user namespaces: the guest is throwaway)
[ -w /proc/sys/kernel/unprivileged_userns_clone ] && echo 1 >/proc/sys/kernel/unprivileged_userns_clone

# ---- the built-in executables: present, dynamically linked ----------------------------
DYN=$(command -v sha256sum)
made=""
for p in /usr/sbin/multipathd /usr/lib/udev/scsi_id; do
	if [ ! -e "$p" ]; then
		# multipathd's stand-in is dd: root running it writes nvmet's enable
		# below (a dynamically linked coreutils program like the other)
		src=$DYN
		[ "$p" = /usr/sbin/multipathd ] && src=$(command -v dd)
		mkdir -p "$(dirname "$p")" && cp "$src" "$p" && made="$made $p"
	fi
done
info "copied $DYN to:${made:- (none: the tools are here)}"
TARGETS="/usr/local/bin/asmguardd /usr/sbin/multipathd /usr/lib/udev/scsi_id"

# ---- the managed disks: a loop disk and the scsi_debug disk -----------------------------
D=$(new_loop 8 borrow) || { fail setup "losetup: $D"; vm_exit; }
S=$VM_SCSI
[ -b "$S" ] || { fail setup "no scsi_debug disk (fixture scsi_debug): '$S'"; vm_exit; }
dd if=/dev/urandom of="$D" bs=1M seek=1 count=3 conv=notrunc 2>/dev/null
# the scsi_debug disk blank whatever ran before in this boot (filter-daemon
# leaves it labelled DATA1): this test labels it itself
dd if=/dev/zero of="$S" bs=4096 count=1 conv=notrunc oflag=direct 2>/dev/null
dd if=/dev/zero bs=4096 count=1 2>/dev/null | tr '\0' 'B' >/tmp/borrow.junk
agd_config /tmp/borrow.toml "${D#/dev/} ${S#/dev/}"
: >$LOG
agd_start /tmp/borrow.toml $LOG || { fail setup "asmguardd did not start: $(tail -n 3 $LOG)"; vm_exit; }
expect_ok label $C label BORROW "$D"
expect_ok label-scsi $C label BORROWS "$S"
info "backend $VM_BACKEND: $(grep -m1 -o 'backend [a-z_]*' $LOG)"
S_MODE="$(stat -c '%u:%g %a' "$S")"
chgrp disk "$D" "$S" && chmod 660 "$D" && chmod 640 "$S"

# shad DEV: sha256 of DEV read with O_DIRECT
shad() { dd if="$1" bs=1M iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1; }
# elapsed: seconds since boot (the test's time per part)
elapsed() { cut -d' ' -f1 /proc/uptime; }

# denials: the daemon's denial lines so far
denials() { grep -c 'write denied' $LOG; }
# new_denials BEFORE: waits up to 2 s for the count to pass BEFORE, a moment
# more for stragglers, prints how many came
new_denials() {
	_i=0
	while [ "$(denials)" -le "$1" ] && [ $_i -lt 20 ]; do
		sleep 0.1
		_i=$((_i + 1))
	done
	sleep 0.3
	echo $(($(denials) - $1))
}

# borrowed CHECK CMD...: an attack by diskuser (CMD) must be refused: it fails
# saying "write refused", the loop disk's sha256 is unchanged, one denial logged.
borrowed() {
	_bc=$1
	shift
	_b=$(sha "$D")
	_e=$(denials)
	expect_fail "$_bc" "write refused" as_user diskuser "$@"
	expect "$_bc.sha-unchanged" "$_b" "$(sha "$D")"
	_n=$(new_denials "$_e")
	expect "$_bc.one-denial" 1 "$_n" "$_n denial(s): $(grep 'write denied' $LOG | tail -n 1)"
}

e=$(denials)
expect_fail diskuser-dd-refused "$EPERM" as_user diskuser dd if=/tmp/borrow.junk of="$D" bs=4096 count=1 seek=300 conv=notrunc
n=$(new_denials "$e")
# (dd with seek= tries O_RDWR, then O_WRONLY: two refused opens)
holds diskuser-dd-denied "$n denial(s): $(grep 'write denied' $LOG | tail -n 1)" [ "$n" -ge 1 ]

info "attacks start at $(elapsed)"
off=$((1024 * 1024))
for t in $TARGETS; do
	name=$(basename "$t")
	off=$((off + 4096))
	borrowed "ptrace.$name" /usr/local/bin/ag-ptrace-write "$t" "$D" $off --version
	off=$((off + 4096))
	if grep -q 'ld-linux' "$t"; then
		borrowed "preload.$name" env LD_PRELOAD=/usr/local/lib/ag-preload-write.so AG_DEV="$D" AG_OFF=$off "$t" --version
	else
		fail "preload.$name" "$t is statically linked: LD_PRELOAD cannot apply (copy a dynamically linked program there)"
	fi
	off=$((off + 4096))
	borrowed "mmmap.$name" /usr/local/bin/ag-mmmap-write "$t" "$D" $off
done

# ---- SG_IO: the command read twice ----------------------------------------------------------
rule=$($C status 2>&1 | sed -n 's/^sg_io \/ nvme: *//p')
info "passthrough rule: $rule; the race starts at $(elapsed)"
if ! vm_full; then
	na sgio-race "$VM_FALLBACK_WHY; SG_IO on a read-only open (not run)"
else
	# (SG_IO bypasses the page cache: the disk is read with O_DIRECT)
	b=$(shad "$S")
	expect_fail sgio-race.root "landed=no" ag-sgio-race "$S" 3000 20000 10
	caps=$(setpriv --reuid=1002 --regid=1002 --init-groups --inh-caps=+sys_rawio --ambient-caps=+sys_rawio \
		awk '/^CapEff/ { print $2 }' /proc/self/status 2>&1)
	expect sgio-race.rawio-only-caps 0000000000020000 "$caps" "CapEff $caps: CAP_SYS_RAWIO alone"
	expect_fail sgio-race.rawio-nonroot "landed=no" setpriv --reuid=1002 --regid=1002 --init-groups \
		--inh-caps=+sys_rawio --ambient-caps=+sys_rawio /usr/local/bin/ag-sgio-race "$S" 3008 20000 10
	expect sgio-race.sha-unchanged "$b" "$(shad "$S")"
fi
info "the race ended at $(elapsed)"
case $rule in
"all-or-nothing"*)
	# (5.10+lsm: no sleepable file_ioctl program reads the command)
	for c in sg_inq.root sg_readcap.root smartctl-i.root sg_inq.diskuser; do
		na "$c" "the kernel cannot read the CDB here: every SG_IO is refused ($rule)"
	done ;;
*)
	expect_ok sg_inq.root sg_inq "$S"
	expect_ok sg_readcap.root sg_readcap "$S"
	expect_ok smartctl-i.root smartctl -i "$S"
	expect_ok sg_inq.diskuser as_user diskuser sg_inq "$S" ;;
esac

# ---- multipathd borrowed for an in-kernel open (issue 41, point 4) -------------------
# root running the multipathd executable enables an nvmet namespace over the
# managed loop disk: nvmet's block backend opens it by path, in the kernel,
# read-write. multipathd's allowance is the dm multipath target's opens of the
# paths (a table load through /dev/mapper/control), never an nvmet one.
CFG=/sys/kernel/config
if ! vm_full; then
	na kopen-nvmet "$VM_FALLBACK_WHY: no in-kernel open is told apart there"
elif [ ! -e /sys/fs/bpf/asmguard/links/ag_kernel_open ]; then
	na kopen-nvmet "no ag_kernel_open beside the security-hook programs on this kernel (5.10: cgroup-device programs get no task helpers): in-kernel opens are not judged"
elif ! case $made in *multipathd*) true ;; *) false ;; esac; then
	na kopen-nvmet "the guest has a real /usr/sbin/multipathd: the stand-in (dd) is not there"
elif modprobe nvmet 2>/dev/null && modprobe nvme-loop 2>/dev/null &&
	{ [ -d "$CFG/nvmet" ] || mount -t configfs configfs "$CFG" 2>/dev/null; } && [ -d "$CFG/nvmet" ]; then
	ss="$CFG/nvmet/subsystems/agborrow"
	mkdir -p "$ss/namespaces/1"
	echo 1 >"$ss/attr_allow_any_host"
	printf '%s' "$D" >"$ss/namespaces/1/device_path"
	expect_fail kopen-nvmet.root-refused "Device or resource busy|Operation not permitted" \
		sh -c "echo 1 | dd of=$ss/namespaces/1/enable conv=notrunc status=none"
	expect_fail kopen-nvmet.multipathd-refused "Device or resource busy|Operation not permitted" \
		sh -c "echo 1 | /usr/sbin/multipathd of=$ss/namespaces/1/enable conv=notrunc status=none"
	expect kopen-nvmet.not-enabled 0 "$(cat "$ss/namespaces/1/enable" 2>&1)"
	echo 0 >"$ss/namespaces/1/enable" 2>/dev/null
	rmdir "$ss/namespaces/1" "$ss" 2>/dev/null
	# what multipathd keeps: its dm table loads. The stand-in's inode made dmsetup
	# (its identity stays the tool's); a multipath table over the managed loop
	# disk passes the filter (it is in a table load on /dev/mapper/control) and
	# stops at the daemon's exclusive claim (EBUSY); root's own dmsetup, not a
	# tool, is refused by the filter first (EPERM)
	if command -v dmsetup >/dev/null && modprobe dm-multipath 2>/dev/null; then
		cat "$(command -v dmsetup)" >/usr/sbin/multipathd
		mm=$(printf '%d:%d' 0x$(stat -c %t "$D") 0x$(stat -c %T "$D"))
		tbl="0 $(blockdev --getsz "$D") multipath 0 0 1 1 round-robin 0 1 1 $mm 1000"
		expect_fail kopen-dm.root-refused "Operation not permitted" dmsetup create agborrow-r --table "$tbl"
		dmsetup remove agborrow-r 2>/dev/null
		out=$(/usr/sbin/multipathd create agborrow-m --table "$tbl" 2>&1)
		holds kopen-dm.multipathd-table-load-passes "$out" \
			sh -c "printf '%s' \"\$1\" | grep -q 'Device or resource busy' && ! printf '%s' \"\$1\" | grep -q 'not permitted'" _ "$out"
		/usr/sbin/multipathd remove agborrow-m 2>/dev/null
	else
		na kopen-dm "no dmsetup or dm-multipath in this guest"
	fi
else
	na kopen-nvmet "this kernel has no nvmet/nvme-loop modules"
fi

$C unlabel BORROW >/dev/null 2>&1
$C unlabel BORROWS >/dev/null 2>&1
$C filter disable >/dev/null 2>&1
kill "$agd"
wait "$agd" 2>/dev/null
rm -f /run/asmguard/filter.state
losetup -d "$D" 2>/dev/null
chown "${S_MODE% *}" "$S" && chmod "${S_MODE#* }" "$S"
for p in $made; do rm -f "$p"; done
vm_exit
