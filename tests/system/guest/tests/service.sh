#!/bin/sh
# service: the packaged unit under systemd: `systemctl enable --now asmguard` reaches
# active (Type=notify: READY=1 received) with the unit's hardening in force, the journal
# shows no sandbox denials, and a denied write shows up in `journalctl -u asmguard`.
. /vmtests/lib.sh
. /vmtests/syslib.sh

expect_ok enable-now systemctl enable --now asmguard.service
st=$(systemctl show -p Type -p ActiveState -p SubState -p NRestarts asmguard.service | paste -sd' ')
case $st in
*"Type=notify"*"ActiveState=active"*"SubState=running"*) pass active-notify "$st" ;;
*) fail active-notify "$st :: $(journalctl -b -u asmguard --no-pager -n 5)" ;;
esac
pid=$(systemctl show -p MainPID --value asmguard.service)
if grep -q '^NoNewPrivs:[[:space:]]*1' "/proc/$pid/status" && ! grep -q '^CapBnd:[[:space:]]*000001ffffffffff' "/proc/$pid/status"; then
	pass hardening "pid $pid $(grep -E '^(NoNewPrivs|CapBnd)' "/proc/$pid/status" | tr -s '\t\n' '  ')"
else
	fail hardening "pid $pid $(grep -E '^(NoNewPrivs|CapBnd)' "/proc/$pid/status" | tr -s '\t\n' '  ')"
fi
# ProtectSystem=strict: /usr is read-only in the daemon's mount namespace
if nsenter -t "$pid" -m sh -c ': >/usr/.asmguard-probe' 2>/dev/null; then
	rm -f /usr/.asmguard-probe
	fail protect-system "the daemon's /usr is writable"
else
	pass protect-system "the daemon's /usr is read-only"
fi
expect_ok status $C status
info "exposure: $(systemd-analyze security asmguard.service 2>&1 | tail -n 1)"

if sys_mpath_label >/tmp/svc.out 2>&1; then
	pass label-link "$(ls -l "$SYS_LINK")"
else
	fail label-link "$(cat /tmp/svc.out) :: $(ls -l /dev/asmguard/disks 2>&1) :: $(udevadm info -q property "$SYS_MPATH" | grep -E 'ASMGUARD|SYNTH|ID_FS_TYPE|ID_FS_LABEL=|DISABLE' | tr '\n' ' ') :: $(journalctl -b -u asmguard --no-pager -o cat | grep -i 'udev' | tail -n 3)"
fi
# A planted header never moves a link: a loop device (any user may set one up)
# whose header reads $SYS_LABEL to blkid and udev ("$SYS_LABEL\0X") is not even
# looked at under the shipped configuration (loop devices count only when a
# pattern starting with "loop" names them), so it makes no conflict; the link
# stays on the disk the daemon manages, also through a change event of each disk
# (the rules link by what the daemon decided, kept in udev's database). (A
# duplicate the configuration does look at is a conflict the first disk wins:
# host test a_planted_duplicate_label_does_not_take_a_presented_disk.)
target=$(readlink -f "$SYS_LINK")
holds link-before-plant "$SYS_LINK -> ${target:-nothing}" [ -n "$target" ] && [ -b "$target" ]
truncate -s 16M /tmp/plant.img
plant=$(losetup -f --show /tmp/plant.img)
printf 'ORCLDISK%s\000X' "$SYS_LABEL" | dd of="$plant" bs=1 seek=32 conv=notrunc 2>/dev/null
sync
expect planted-reads-as-label "$SYS_LABEL" "$(blkid -p -o value -s LABEL "$plant" 2>&1)"
udevadm trigger --action=change --settle "$plant"
$C scan >/dev/null 2>&1
out=$($C lsdsk 2>&1)
if echo "$out" | grep -q "CONFLICT"; then
	fail planted-loop-not-looked-at "$out"
else
	pass planted-loop-not-looked-at "no conflict: $(echo "$out" | grep -c "$SYS_LABEL") line(s) name $SYS_LABEL"
fi
udevadm settle
expect link-stays-after-plant "$target" "$(readlink -f "$SYS_LINK")" "$(ls -l /dev/asmguard/disks 2>&1)"
udevadm trigger --action=change --settle "$plant" "$SYS_MPATH"
sleep 1
udevadm settle
expect link-stays-after-change-events "$target" "$(readlink -f "$SYS_LINK")" "$(ls -l /dev/asmguard/disks 2>&1); $(udevadm info -q property "$plant" | grep -E 'ASMGUARD|ID_FS_LABEL')"
chmod 0666 "$plant"
expect_ok unplant as_user grid dd if=/dev/zero of="$plant" bs=4096 count=1 conv=notrunc oflag=direct
udevadm trigger --action=change --settle "$plant"
udevadm settle
expect link-stays-after-unplant "$target" "$(readlink -f "$SYS_LINK")"
losetup -d "$plant"
rm -f /tmp/plant.img
expect_fail intruder-denied "Operation not permitted|Permission denied" as_user intruder dd if=/tmp/junk of="$SYS_MPATH" $DDW
chmod 0666 "$SYS_MPATH"
expect_fail intruder-denied-open-node "Operation not permitted" as_user_past_modes intruder dd if=/tmp/junk of="$SYS_MPATH" $DDW
chmod 0660 "$SYS_MPATH" # as udev left it: the tests after this one read the mode
sleep 1
j=$(journalctl -b -u asmguard --no-pager -o cat)
if echo "$j" | grep -q "write denied: .*uid=1001 .*label=$SYS_LABEL"; then
	pass denial-in-journal "$(echo "$j" | grep -m1 "write denied: .*uid=1001 .*label=$SYS_LABEL")"
else
	fail denial-in-journal "$(echo "$j" | tail -n 5)"
fi
# systemctl reload: SIGHUP through the unit's ExecReload, the daemon reads the file again
pid0=$(systemctl show -p MainPID --value asmguard)
expect_ok reload systemctl reload asmguard
sleep 1
j=$(journalctl -b -u asmguard --no-pager -o cat)
has_line reload-read-again "SIGHUP: configuration reloaded from" "$j"
expect reload-same-process "$pid0" "$(systemctl show -p MainPID --value asmguard)"
# sandbox denials: the daemon failing on something the unit's sandbox forbids
bad=$(echo "$j" | grep -v 'write denied:' | grep -Ei 'read-only file system|permission denied|operation not permitted|EACCES|EPERM')
audit=$(journalctl -b -k --no-pager -o cat | grep -Ei 'audit.*asmguardd|apparmor="DENIED".*asmguard|seccomp.*asmguardd')
if [ -z "$bad$audit" ]; then
	pass no-sandbox-denials "$(echo "$j" | wc -l) journal lines of asmguard, none a sandbox denial"
else
	fail no-sandbox-denials "$bad $audit"
fi
vm_exit
