#!/bin/sh
# reboot: after a reboot, the label, the link and the protection are back before a
# stand-in ohasd.service, ordered as Oracle's is (after asmguard.service, which says
# Before=ohasd.service), starts: there it writes as grid (allowed) and as root
# (denied). Runs in two boots: the first labels the persistent data disk (a virtio disk),
# installs the stand-in and reboots (qemu ends; tests/system/run.sh boots it again
# from the same disks: a power cycle); the runner runs
# this test again on the second boot, which reads what the stand-in saw. The data disk
# is the virtio disk with serial sysdata (tests/system/run.sh).
. /vmtests/lib.sh
. /vmtests/syslib.sh

S=/var/lib/sys-lab
# the data disk: a virtio disk (its NVMe namespace's name could swap with the root's)
D=$(readlink -f /dev/disk/by-id/virtio-sysdata)
if [ ! -e $S/rebooted ]; then
	[ -b "$D" ] || { fail setup "no data disk $D: $(ls /dev/disk/by-id | tr '\n' ' ')"; vm_exit; }
	sys_service_up || { fail setup "asmguard does not answer"; vm_exit; }
	expect_ok label $C label BOOT1 "$D"
	sys_wait_link BOOT1 200 || { fail link "no /dev/asmguard/disks/BOOT1"; vm_exit; }
	mkdir -p $S
	cat >/usr/local/sbin/ohasd-standin <<'SH'
#!/bin/sh
# what Oracle's ohasd would find at its start
L=/dev/asmguard/disks/BOOT1
o=/var/lib/sys-lab/ohasd.out
dd if=/dev/zero bs=4096 count=1 2>/dev/null | tr '\0' 'O' >/tmp/ohasd.blk
{
	echo "asmguard=$(systemctl is-active asmguard.service)"
	echo "link=$(readlink -f "$L" 2>/dev/null || echo missing)"
	echo "owner=$(stat -L -c '%U:%G:%a' "$L" 2>&1)"
	if setpriv --reuid=54331 --regid=54321 --init-groups dd if=/tmp/ohasd.blk of="$L" bs=4096 count=1 seek=10 conv=notrunc oflag=direct 2>/tmp/ohasd.err; then
		echo "grid=ok"
	else
		echo "grid=refused $(tr '\n' ' ' </tmp/ohasd.err)"
	fi
	if dd if=/tmp/ohasd.blk of="$L" bs=4096 count=1 seek=11 conv=notrunc oflag=direct 2>/tmp/ohasd.err; then
		echo "root=written"
	else
		echo "root=refused $(tr '\n' ' ' </tmp/ohasd.err)"
	fi
} >$o 2>&1
SH
	chmod 0755 /usr/local/sbin/ohasd-standin
	cat >/etc/systemd/system/ohasd.service <<'UNIT'
[Unit]
Description=stand-in for Oracle High Availability Services
After=asmguard.service
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/ohasd-standin
[Install]
WantedBy=multi-user.target
UNIT
	systemctl enable ohasd.service >/dev/null 2>&1
	touch $S/rebooted
	sync
	info "rebooting"
	# (the runner boots the guest again when qemu ends after a VMREBOOT line)
	echo VMREBOOT
	systemctl reboot
	sleep 600
	fail reboot "the guest did not reboot"
	vm_exit
fi

# the second boot
[ -s $S/ohasd.out ] || { fail ohasd-ran "the stand-in ohasd left no $S/ohasd.out"; vm_exit; }
. $S/ohasd.out 2>/dev/null || true
out=$(tr '\n' ' ' <$S/ohasd.out)
has_line asmguard-active-before-ohasd '^asmguard=active$' "$(cat $S/ohasd.out)" "$out"
has_line link-before-ohasd '^link=/dev/vd' "$(cat $S/ohasd.out)" "$out"
has_line owner-before-ohasd '^owner=grid:asmadmin:660$' "$(cat $S/ohasd.out)" "$out"
has_line grid-writes-at-ohasd '^grid=ok$' "$(cat $S/ohasd.out)" "$out"
has_line root-denied-at-ohasd '^root=refused.*Operation not permitted' "$(cat $S/ohasd.out)" "$out"
a=$(systemctl show -p ActiveEnterTimestampMonotonic --value asmguard.service)
b=$(systemctl show -p ExecMainStartTimestampMonotonic --value ohasd.service)
if [ -n "$a" ] && [ -n "$b" ] && [ "$a" -gt 0 ] && [ "$a" -lt "$b" ]; then
	pass ordered "asmguard ready at ${a}us, ohasd started at ${b}us (monotonic)"
else
	fail ordered "asmguard ready at ${a}us, ohasd started at ${b}us"
fi
vm_exit
