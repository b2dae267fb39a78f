#!/bin/sh
# passthrough: SG_IO and NVMe passthrough by command class (issue 12). On a managed
# scsi_debug disk (sd, sg and bsg nodes) and the managed QEMU NVMe disk (namespace,
# controller and generic nodes), with asmguardd enforcing:
# - read-class commands pass for root (not allow-listed) through the disk-query
#   tools (sg_inq and its VPD pages, sg_readcap (-l too), smartctl -i/-a, nvme
#   id-ctrl, id-ns, smart-log) and for intruder, who may read the nodes, through
#   any program (a READ(10) with sg_raw too); root's READ(10) with sg_raw, a
#   program that is no disk-query tool, is refused: root holds CAP_SYS_RAWIO, and
#   the kernel would not judge a command it changed after the filter read it;
# - writes through SG_IO on a read-only fd, a vendor opcode, sg_write_same, nvme
#   write, format and sanitize are refused before they run (sha256 unchanged, the
#   device still answers), and the daemon's events name the opcode;
# - the allow-listed side still writes: grid with sg_raw WRITE(10), and an
#   allow-listed copy of nvme with nvme write on the generic node (NVMe passthrough
#   needs CAP_SYS_ADMIN before 6.2, which grid does not have).
# - a read-class command in a page not yet in memory (sgio-cold): refused by the
#   fmod_ret program, which reads without faulting (fail closed), and passed by the
#   sleepable LSM program, which faults it in; the same command in memory passes.
# `asmguardctl status` names the rule. Where the kernel cannot read the command
# (all-or-nothing) the read-class checks are n/a and every SG_IO/NVMe passthrough
# must be refused; on the cgroup-device fallback, which sees opens only, checks of
# ioctls on read-only opens are n/a.
. /vmtests/lib.sh

D=$VM_SCSI
SG=$VM_SCSI_SG
N=${VM_NVME:-}
NC=${VM_NVME_CTRL:-}
NG=${VM_NVME_NG:-}
C="asmguardctl --socket /run/asmguard/asmguard.sock"
# (in /usr/sbin: as_user resets PATH)
SMARTCTL=$(command -v smartctl)
NVME=$(command -v nvme)
# an allow-listed copy of it (by executable), for the allowed side
mkdir -p /opt/pt && cp "$NVME" /opt/pt/nvme
EPERM="Operation not permitted"
[ -b "$D" ] && [ -c "$SG" ] || { fail setup "no scsi_debug disk/sg node: $D $SG"; vm_exit; }
[ -b "$N" ] && [ -c "$NC" ] || { fail setup "no QEMU NVMe disk (fixture nvme): '$N' '$NC'"; vm_exit; }
BSG=""
for b in /dev/bsg/*; do
	[ "$(readlink -f "/sys/class/bsg/${b##*/}/device")" = "$(readlink -f "/sys/class/block/${D#/dev/}/device")" ] && BSG=$b
done

cat >/tmp/pt.toml <<TOML
[devices]
include = ["${D#/dev/}", "${N#/dev/}"]
exclude = []
[filter]
mode = "enforce"
allow_users = ["grid"]
allow_groups = ["asmadmin"]
allow_executables = ["/opt/pt/nvme"]
TOML
: >/tmp/pt.log
# random content from 1 MiB on (the first MiB, where the label goes, zeroed)
for d in "$D" "$N"; do
	dd if=/dev/zero of="$d" bs=1M count=1 oflag=direct 2>/dev/null
	dd if=/dev/urandom of="$d" bs=1M seek=1 count=3 oflag=direct 2>/dev/null
done
dd if=/dev/zero bs=512 count=1 2>/dev/null | tr '\0' 'P' >/tmp/pt512
agd_start /tmp/pt.toml /tmp/pt.log
expect_ok label-scsi $C label PT1 "$D"
expect_ok label-nvme $C label PT2 "$N"
# every node readable by intruder ("who may read the device"), writable by grid
# (their owners and modes are restored at the end)
: >/tmp/pt.modes
for n in "$D" "$SG" $BSG "$N" "$NC" $NG; do
	echo "$(stat -c '%u:%g %a' "$n") $n" >>/tmp/pt.modes
	chown grid "$n" && chmod 0604 "$n"
done

# ---- the rule this kernel gets ------------------------------------------------
rule=$($C status 2>&1 | sed -n 's/^sg_io \/ nvme: *//p')
kmaj=$(echo "$VM_KVER" | cut -d. -f1)
kmin=$(echo "$VM_KVER" | cut -d. -f2)
case $rule in
"by command class"*) RULE=class ;;
"all-or-nothing"*) RULE=all ;;
"not filtered"*) RULE=open ;;
*) RULE=unknown ;;
esac
# sleepable file_ioctl and bpf_copy_from_user: 5.11 and later; the fmod_ret
# program reads the command (without faulting) on every kernel
if [ "$VM_BACKEND" = cgroup_device ]; then
	expect status-rule open "$RULE" "fallback: $rule"
elif [ "$VM_BACKEND" = fmod_ret ]; then
	expect status-rule class "$RULE" "fmod_ret reads the CDB: $rule"
	has_line status-rule-in-memory "read without faulting" "$rule"
elif [ "$kmaj" -gt 5 ] || [ "$kmin" -ge 11 ]; then
	expect status-rule class "$RULE" "kernel $VM_KVER can read the CDB: $rule"
else
	case $RULE in class | all) pass status-rule "$rule ($VM_KVER)" ;; *) fail status-rule "$rule" ;; esac
fi
# --json gives the rule's word; the text view says what it means
jrule=$($C status --json 2>&1 | sed -n 's/^ *"filter_passthrough": "\(.*\)",*$/\1/p')
case $RULE/$VM_BACKEND in
class/fmod_ret) jwant=by_class_in_memory ;;
class/*) jwant=by_class ;;
all/*) jwant=all_or_nothing ;;
open/*) jwant=open_only ;;
*) jwant="(no rule in the text view: $rule)" ;;
esac
expect status-json "$jwant" "$jrule"
info "rule: $rule; filter: $($C status 2>&1 | sed -n 's/^filter: *//p')"

# NVMe passthrough from a process without CAP_SYS_ADMIN: 6.2 and later
NVME_UNPRIV=yes
[ "$kmaj" -gt 6 ] || { [ "$kmaj" = 6 ] && [ "$kmin" -ge 2 ]; } || NVME_UNPRIV=no

# reads CHECK WHO CMD...: a read-class command passes (WHO: root or intruder)
reads() {
	_c=$1; _who=$2; shift 2
	case $RULE in
	all)
		na "$_c.$_who" "the kernel cannot read the CDB here: every SG_IO/NVMe passthrough is refused ($rule)"
		return 0 ;;
	esac
	case "$_who:$NVME_UNPRIV:$*" in
	intruder:no:*nvme* | intruder:no:*smartctl*/dev/n*)
		na "$_c.$_who" "before 6.2 the kernel lets only CAP_SYS_ADMIN send NVMe passthrough"
		return 0 ;;
	esac
	if [ "$_who" = root ]; then
		expect_ok "$_c.$_who" "$@"
	else
		expect_ok "$_c.$_who" as_user intruder "$@"
	fi
}

# refused CHECK DEV PATTERN CMD...: refused before it runs (DEV's sha256 unchanged).
# Vectors that never open DEV for writing are beyond the fallback (n/a there).
refused() {
	_c=$1; _d=$2; _p=$3; shift 3
	if [ $RULE = open ]; then
		na "$_c" "$VM_FALLBACK_WHY; an ioctl on a read-only open (not run)"
		return 0
	fi
	_b=$(sha "$_d")
	expect_fail "$_c" "$_p" "$@"
	_a=$(sha "$_d")
	[ "$_a" = "$_b" ] && pass "$_c.sha-unchanged" "$_a" || fail "$_c.sha-unchanged" "$_b -> $_a"
}

# ---- SCSI: sd, sg and bsg nodes ---------------------------------------------
R10="28 00 00 00 00 10 00 00 01 00"
W10="2a 00 00 00 00 10 00 00 01 00"
W10G="2a 00 00 00 10 00 00 00 01 00"
for who in root intruder; do
	for n in "$D" "$SG" $BSG; do
		t=$(basename "$n" | tr -c 'a-z0-9\n' '_')
		reads "sg_inq-$t" $who sg_inq "$n"
		reads "sg_readcap-$t" $who sg_readcap -R "$n"
	done
	reads sg_inq-vpd80 $who sg_inq --page=0x80 "$SG"
	reads sg_inq-vpd83 $who sg_inq --page=0x83 "$D"
	reads sg_readcap16 $who sg_readcap -R -l "$D"
	reads smartctl-i-scsi $who "$SMARTCTL" -i "$D"
done
reads read10 intruder sg_raw -R -r 512 "$D" $R10
if [ "$RULE" = class ]; then
	expect_fail read10-sg_raw.root-refused "$EPERM" sg_raw -R -r 512 "$D" $R10
	# the same READ(10) from a program holding only CAP_SYS_RAWIO
	expect_fail read10-sg_raw.rawio-refused "$EPERM" setpriv --reuid=1001 --regid=1001 --clear-groups \
		--inh-caps=+sys_rawio --ambient-caps=+sys_rawio -- sg_raw -R -r 512 "$D" $R10
fi
# A read-class command whose page is not in memory yet (mapped, never touched):
# the fmod_ret program reads commands without faulting and refuses it (fail
# closed), the sleepable LSM program faults it in and lets it pass; once in
# memory it passes on both.
if [ "$RULE" = class ]; then
	expect_ok sgio-warm.intruder as_user intruder sgio-cold "$D" warm
	if [ "$VM_BACKEND" = fmod_ret ]; then
		expect_fail sgio-cold-refused.intruder "FAIL 1 " as_user intruder sgio-cold "$D" cold
	else
		expect_ok sgio-cold-faulted-in.intruder as_user intruder sgio-cold "$D" cold
	fi
else
	na sgio-cold "no command is read here ($rule)"
fi

# smartctl -a: exit status bits 0 and 1 are "command line" and "open" (bit 2, a
# command failed, and bits 3-7 report what the device supports and its health);
# nothing of it refused by the filter (EPERM)
smart_a() {
	"$SMARTCTL" -a "$1" >/tmp/smart.out 2>&1
	_rc=$?
	if [ $((_rc & 3)) != 0 ] || grep -q "$EPERM" /tmp/smart.out; then
		echo "exit $_rc: $(grep -iE 'fail|error|denied|permitted' /tmp/smart.out | head -n 5)"
		return 1
	fi
	echo "exit $_rc: $(grep -iE 'fail|error|not supported' /tmp/smart.out | head -n 3)"
}
reads smartctl-a-scsi root smart_a "$D"

refused sg_raw-write10-sd "$D" "$EPERM" sg_raw -R -s 512 -i /tmp/pt512 "$D" $W10
refused sg_raw-write10-sg "$D" "$EPERM" sg_raw -R -s 512 -i /tmp/pt512 "$SG" $W10
[ -n "$BSG" ] && refused sg_raw-write10-bsg "$D" "$EPERM" sg_raw -R -s 512 -i /tmp/pt512 "$BSG" $W10
refused sg_raw-vendor-c0 "$D" "$EPERM" sg_raw -R "$D" c0 00 00 00 00 00
refused sg_raw-write-same16 "$D" "$EPERM" sg_raw -R -s 512 -i /tmp/pt512 "$D" 93 00 00 00 00 00 00 00 00 10 00 00 00 08 00 00
# the tools' own write-open is refused by file_open (the fallback sees it too)
b=$(sha "$D")
expect_fail sg_write_same.refused "" sg_write_same --lba=16 --num=8 "$D"
expect_fail sg_dd-sgio.refused "" sg_dd if=/tmp/pt512 of="$SG" bs=512 count=1 seek=16
expect sg-tools.sha-unchanged "$b" "$(sha "$D")"
expect_ok sg_raw-write10.allowed-grid as_user grid sg_raw -s 512 -i /tmp/pt512 "$SG" $W10G
dd if="$D" bs=512 skip=4096 count=1 iflag=direct 2>/dev/null | cmp -s - /tmp/pt512 &&
	pass sg_raw-write10.allowed-landed || fail sg_raw-write10.allowed-landed "grid's block is not at LBA 4096"
if [ $RULE = all ]; then
	expect_fail all-or-nothing.sg_inq-refused "$EPERM" sg_inq "$D"
fi

# ---- NVMe: namespace, controller and generic nodes ----------------------------
for who in root intruder; do
	for n in "$N" "$NC" $NG; do
		t=$(basename "$n")
		reads "nvme-id-ctrl-$t" $who "$NVME" id-ctrl "$n"
		if [ $who = intruder ]; then
			na "nvme-smart-log-$t.$who" "the kernel lets callers without CAP_SYS_ADMIN send only NVMe Identify"
		else
			reads "nvme-smart-log-$t" $who "$NVME" smart-log "$n"
		fi
	done
	reads nvme-id-ns $who "$NVME" id-ns "$N"
	reads smartctl-i-nvme $who "$SMARTCTL" -i "$N"
done
reads smartctl-a-nvme root smart_a "$N"

# (nvme-cli opens the namespace O_EXCL: asmguardd's claim answers EBUSY first)
refused nvme-write "$N" "$EPERM|Device or resource busy" nvme write "$N" --start-block=16 --block-count=0 --data-size=512 --data=/tmp/pt512
[ -n "$NG" ] && refused nvme-write-ng "$N" "$EPERM" nvme write "$NG" --start-block=16 --block-count=0 --data-size=512 --data=/tmp/pt512
refused nvme-format "$N" "$EPERM" nvme format "$N" --force
refused nvme-format-ctrl "$N" "$EPERM" nvme format "$NC" --namespace-id=1 --force
refused nvme-sanitize "$N" "$EPERM" nvme sanitize "$NC" --sanact=2
if [ $RULE != open ]; then
	# refused before it ran: the disk still answers and holds its data
	expect_ok nvme-after-refusals.answers dd if="$N" of=/dev/null bs=4096 count=16 iflag=direct
fi
# the allowed side through the generic node (the block node is claimed O_EXCL)
if [ -n "$NG" ]; then
	expect_ok nvme-write.allowed-exe /opt/pt/nvme write "$NG" --start-block=4096 --block-count=0 --data-size=512 --data=/tmp/pt512
	dd if="$N" bs=512 skip=4096 count=1 iflag=direct 2>/dev/null | cmp -s - /tmp/pt512 &&
		pass nvme-write.allowed-landed || fail nvme-write.allowed-landed "the allowed block is not at LBA 4096"
else
	na nvme-write.allowed-exe "no NVMe generic node (ng) before 5.13, and asmguardd claims the block node (O_EXCL)"
fi

# ---- events: the denials name the opcode --------------------------------------
if [ $RULE = class ]; then
	for pat in "SG_IO opcode 0x2a" "SG_IO opcode 0xc0" "NVME_IOCTL_ADMIN(64)?_CMD opcode 0x80"; do
		c=event.$(echo "$pat" | sed 's/.* //')
		if l=$(grep -E -m1 -- "operation=$pat" /tmp/pt.log); then
			pass "$c" "$l"
		else
			fail "$c" "no /operation=$pat/ in the daemon's log: $(grep -i denied /tmp/pt.log | tail -n 3)"
		fi
	done
fi

expect_ok unlabel-scsi $C unlabel PT1
expect_ok unlabel-nvme $C unlabel PT2
$C filter disable >/dev/null 2>&1 # its pins go too (passthrough.ends-clean)
kill "$agd"; wait "$agd" 2>/dev/null
while read -r own mode n; do
	chown "$own" "$n" && chmod "$mode" "$n"
done </tmp/pt.modes
vm_exit
