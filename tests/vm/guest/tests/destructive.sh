#!/bin/sh
# destructive: commands that destroy or disturb a disk without writing a block
# (issue 31, point 2). On the managed scsi_debug disk (sd and sg nodes) and the
# managed QEMU NVMe disk (namespace, controller and generic nodes), root opens
# each node read-only and tries SG_SCSI_RESET, the Opal revert and erase ioctls
# (IOC_OPAL_PSID_REVERT_TPR, IOC_OPAL_REVERT_TPR, IOC_OPAL_ERASE_LR,
# IOC_OPAL_SECURE_ERASE_LR) and HDIO_DRIVE_CMD (agioctl): each is refused with
# EPERM before the driver sees it, and each refusal is one event in the daemon's
# log naming the ioctl and the node. An Opal read (IOC_OPAL_GET_STATUS) is not
# the filter's to refuse: no event (the driver answers as it likes). NVMe Format and
# Sanitize through the controller node are refused too (admin passthrough,
# bpf/passthrough.h), their events naming the command. On the cgroup-device
# fallback, which sees opens only, the ioctl checks are n/a.
. /vmtests/lib.sh

D=$VM_SCSI
SG=$VM_SCSI_SG
N=${VM_NVME:-}
NC=${VM_NVME_CTRL:-}
NG=${VM_NVME_NG:-}
C="asmguardctl --socket /run/asmguard/asmguard.sock"
NVME=$(command -v nvme)
EPERM="Operation not permitted"
[ -b "$D" ] && [ -c "$SG" ] || { fail setup "no scsi_debug disk/sg node: $D $SG"; vm_exit; }
[ -b "$N" ] && [ -c "$NC" ] || { fail setup "no QEMU NVMe disk (fixture nvme): '$N' '$NC'"; vm_exit; }

cat >/tmp/ds.toml <<TOML
[devices]
include = ["${D#/dev/}", "${N#/dev/}"]
exclude = []
[filter]
mode = "enforce"
allow_users = ["grid"]
allow_groups = ["asmadmin"]
TOML
: >/tmp/ds.log
dd if=/dev/zero of=/tmp/ds512 bs=512 count=1 2>/dev/null
for d in "$D" "$N"; do
	dd if=/dev/zero of="$d" bs=1M count=1 oflag=direct 2>/dev/null
done
agd_start /tmp/ds.toml /tmp/ds.log
expect_ok label-scsi $C label DS1 "$D"
expect_ok label-nvme $C label DS2 "$N"

if ! vm_full; then
	na ioctls "$VM_FALLBACK_WHY; an ioctl on a read-only open"
	$C unlabel DS1 >/dev/null 2>&1
	$C unlabel DS2 >/dev/null 2>&1
	kill "$agd"; wait "$agd" 2>/dev/null
	vm_exit
fi

# devno NODE: MAJ:MIN as the daemon's events print it (b8:0, c21:0)
devno() {
	_k=b
	[ -c "$1" ] && _k=c
	printf '%s%d:%d' $_k "0x$(stat -c %t "$1")" "0x$(stat -c %T "$1")"
}

# events NAME NODE: the number of denial lines of agioctl for NAME on NODE
events() {
	grep "write denied" /tmp/ds.log | grep 'comm="agioctl"' |
		grep -c -- "device=$(devno "$2") .*operation=$1\( \|$\)"
}

IOCTLS="sg_scsi_reset:SG_SCSI_RESET opal_psid_revert:IOC_OPAL_PSID_REVERT_TPR
opal_revert:IOC_OPAL_REVERT_TPR opal_erase_lr:IOC_OPAL_ERASE_LR
opal_secure_erase_lr:IOC_OPAL_SECURE_ERASE_LR hdio_drive_cmd:HDIO_DRIVE_CMD"
# node:disk it reaches
NODES="$D:$D $SG:$D $N:$N $NC:$N"
[ -n "$NG" ] && NODES="$NODES $NG:$N"
for nd in $NODES; do
	n=${nd%%:*}
	disk=${nd#*:}
	t=$(basename "$n")
	b=$(sha "$disk")
	for pair in $IOCTLS; do
		io=${pair%%:*}
		name=${pair#*:}
		expect_fail "$io-$t.refused" "IOCTL $io FAIL 1 $EPERM" agioctl "$n" "$io"
	done
	# the event reader is asynchronous: wait for the last one
	_i=0
	while [ $_i -lt 50 ] && [ "$(events HDIO_DRIVE_CMD "$n")" = 0 ]; do
		_i=$((_i + 1))
		sleep 0.1
	done
	for pair in $IOCTLS; do
		io=${pair%%:*}
		name=${pair#*:}
		expect "$io-$t.one-event" 1 "$(events "$name" "$n")" \
			"$(grep "write denied" /tmp/ds.log | grep -m1 -- "device=$(devno "$n") .*operation=$name")"
	done
	# a read of Opal state is not the filter's to refuse: no event (the driver
	# answers as it likes: sg refuses unknown ioctls on a read-only fd itself)
	e0=$(grep "write denied" /tmp/ds.log | grep -c "device=$(devno "$n") ")
	o=$(agioctl "$n" opal_get_status 2>&1)
	sleep 0.5
	e1=$(grep "write denied" /tmp/ds.log | grep -c "device=$(devno "$n") ")
	expect "opal_get_status-$t.no-event" "$e0" "$e1" "$o"
	expect "sha-unchanged-$t" "$b" "$(sha "$disk")"
done

# NVMe admin Format and Sanitize through the controller and generic nodes
for n in "$NC" $NG; do
	t=$(basename "$n")
	expect_fail "nvme-format-$t.refused" "$EPERM" "$NVME" format "$n" --namespace-id=1 --force
	expect_fail "nvme-sanitize-$t.refused" "$EPERM" "$NVME" sanitize "$n" --sanact=2
	expect_fail "nvme-ns-delete-$t.refused" "$EPERM" "$NVME" delete-ns "$n" --namespace-id=1
	expect_fail "nvme-ns-detach-$t.refused" "$EPERM" "$NVME" detach-ns "$n" --namespace-id=1 --controllers=0
	expect_fail "nvme-security-send-$t.refused" "$EPERM" "$NVME" security-send "$n" --secp=1 --spsp=1 --tl=512 --file=/tmp/ds512
done
sleep 1
# the events name the command only where the filter reads it (not where every
# passthrough is refused unread: 5.10+lsm's all-or-nothing rule)
prule=$($C status 2>&1 | sed -n 's/^sg_io \/ nvme: *//p')
for pat in "opcode 0x80 \(FORMAT NVM\)" "opcode 0x84 \(SANITIZE\)" "opcode 0x0d \(NAMESPACE MANAGEMENT\)" \
	"opcode 0x15 \(NAMESPACE ATTACHMENT\)" "opcode 0x81 \(SECURITY SEND\)"; do
	c=event-names.$(echo "$pat" | sed 's/.*(\(.*\)\\)/\1/' | tr -c 'A-Za-z\n' '_')
	case $prule in
	"all-or-nothing"* | "not filtered"*)
		na "$c" "the filter does not read the command here ($prule)"
		continue ;;
	esac
	if l=$(grep -E -m1 -- "operation=NVME_IOCTL_ADMIN(64)?_CMD $pat" /tmp/ds.log); then
		pass "$c" "$l"
	else
		fail "$c" "no /$pat/ in the daemon's log: $(grep -i denied /tmp/ds.log | tail -n 3)"
	fi
done
expect_ok nvme-answers dd if="$N" of=/dev/null bs=4096 count=16 iflag=direct

expect_ok unlabel-scsi $C unlabel DS1
expect_ok unlabel-nvme $C unlabel DS2
$C filter disable >/dev/null 2>&1 # its pins go too (ends-clean)
kill "$agd"; wait "$agd" 2>/dev/null
vm_exit
