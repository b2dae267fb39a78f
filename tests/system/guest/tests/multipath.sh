#!/bin/sh
# multipath: one LUN on two paths (scsi_debug, two hosts, one WWID) assembled by the
# real multipathd. Labelled through the multipath device, the running udevd makes
# /dev/asmguard/disks/LABEL point at the dm device with the configured owner, group
# and mode; the intruder's writes through the link, the mapper node, each sd path and
# each sg node are denied; lsdsk shows the disk once with both paths; grid's fio
# through the link runs with 0 errors while one path is failed and brought back, and
# the returning path is protected. The daemon hears of devices through udev (`status`:
# `events: udev`), and lsdsk shows the LUN's serial and WWN as udev's database has
# them for each sd path (text and --json).
. /vmtests/lib.sh
. /vmtests/syslib.sh

[ -n "${SYS_MPATH:-}" ] || { fail setup "no multipath fixture"; vm_exit; }
sys_service_up || { fail setup "asmguard does not answer: $(systemctl status asmguard --no-pager 2>&1 | tail -n 5)"; vm_exit; }
dm=$(readlink -f "$SYS_MPATH")
info "multipath $SYS_MPATH ($dm) paths $SYS_MPATH_PATHS: $(multipath -ll 2>&1 | tr '\n' ' ')"

if sys_mpath_label >/tmp/mp.out 2>&1; then
	pass udev-link "$(ls -l "$SYS_LINK")"
else
	fail udev-link "$(cat /tmp/mp.out) :: $(ls -l /dev/asmguard/disks 2>&1)"
fi
link=$SYS_LINK
t=$(readlink -f "$link")
expect link-to-dm "$dm" "$t" "$link -> $t"
own=$(stat -L -c '%U %G %a' "$link" 2>&1)
expect owner-group-mode "grid asmadmin 660" "$own"

out=$($C lsdsk 2>&1)
n=$(echo "$out" | grep -c "^$SYS_LABEL ")
set -- $SYS_MPATH_PATHS
if [ "$n" = 1 ] && echo "$out" | grep -q "$1" && echo "$out" | grep -q "$2"; then
	pass lsdsk-once-both-paths "$(echo "$out" | grep -A3 "^$SYS_LABEL ")"
else
	fail lsdsk-once-both-paths "$n lines for $SYS_LABEL: $out"
fi

st=$($C status 2>&1)
if echo "$st" | grep -Eq '^events: +udev$'; then
	pass events-udev "$(echo "$st" | grep '^events')"
else
	fail events-udev "want 'events: udev': $(echo "$st" | grep -i event)"
fi
# the serial and WWN udev's rules found on each sd path, in lsdsk and lsdsk --json
js=$($C lsdsk --json 2>&1)
jserial=$(echo "$js" | grep -o '"serial": *"[^"]*"' | head -n 1 | cut -d'"' -f4)
jwwn=$(echo "$js" | grep -o '"wwn": *"[^"]*"' | head -n 1 | cut -d'"' -f4)
for p in $SYS_MPATH_PATHS; do
	userial=$(udevadm info -q property -n "/dev/$p" | sed -n 's/^ID_SERIAL=//p')
	uwwn=$(udevadm info -q property -n "/dev/$p" | sed -n 's/^ID_WWN=//p')
	if [ -n "$userial" ] && [ "$jserial" = "$userial" ] && [ "$jwwn" = "$uwwn" ]; then
		pass "lsdsk-json-serial-wwn-$p" "serial $jserial wwn ${jwwn:-none}"
	else
		fail "lsdsk-json-serial-wwn-$p" "lsdsk --json serial '$jserial' wwn '$jwwn'; udev of $p: ID_SERIAL '$userial' ID_WWN '$uwwn'"
	fi
done
line=$(echo "$out" | grep "^$SYS_LABEL ")
case $line in
*" $jserial/${jwwn:--}"*) pass lsdsk-serial-wwn-column "$(echo "$out" | head -n 1 | awk '{print $(NF)}'): $jserial/${jwwn:--}" ;;
*) fail lsdsk-serial-wwn-column "no '$jserial/${jwwn:--}' in: $line" ;;
esac

# the filter, not DAC, must refuse: every node opened up to everyone
chmod 0666 "$dm"
expect_fail intruder-link "Operation not permitted" as_user_past_modes intruder dd if=/tmp/junk of="$link" $DDW
expect_fail intruder-mapper "Operation not permitted" as_user_past_modes intruder dd if=/tmp/junk of="$SYS_MPATH" $DDW
for p in $SYS_MPATH_PATHS; do
	chmod 0666 "/dev/$p"
	expect_fail "intruder-$p" "Operation not permitted" as_user_past_modes intruder dd if=/tmp/junk of="/dev/$p" $DDW
	sg=$(ls "/sys/block/$p/device/scsi_generic" 2>/dev/null | head -n 1)
	if [ -n "$sg" ]; then
		chmod 0666 "/dev/$sg"
		expect_fail "intruder-$sg" "Operation not permitted" as_user_past_modes intruder sg_raw -s 512 -i /tmp/junk512 "/dev/$sg" 2a 00 00 00 00 00 00 00 01 00
	else
		fail "sg-of-$p" "no sg node for $p"
	fi
done
chmod 0660 "$dm"

# grid's fio through the link while the first path fails and comes back
bad=$1
# path_state DEV: multipathd's view, "<dm state> <checker state>" (no device I/O)
path_state() { timeout 5 multipathd show paths raw format "%d %t %T" 2>/dev/null | awk -v d="$1" '$1 == d {print $2, $3}'; }
as_user grid timeout 60 fio --name=mp --filename="$link" --rw=randwrite --bs=4k --direct=1 --ioengine=psync \
	--offset=1M --size=32M --time_based --runtime=20 --verify=0 >/tmp/fio.out 2>&1 &
fio=$!
sleep 4
timeout 10 sh -c "echo offline >/sys/block/$bad/device/state"
i=0
while [ $i -lt 100 ] && ! path_state "$bad" | grep -q '^failed'; do i=$((i + 1)); sleep 0.1; done
info "path $bad offline; multipathd: $(path_state "$bad") after $i tenths"
sleep 4
timeout 10 sh -c "echo running >/sys/block/$bad/device/state"
i=0
while [ $i -lt 300 ] && ! path_state "$bad" | grep -q '^active ready'; do i=$((i + 1)); sleep 0.1; done
info "path $bad running; multipathd: $(path_state "$bad") after $i tenths"
wait $fio
frc=$?
errs=$(sed -n 's/.*err= *\([0-9]*\).*/\1/p' /tmp/fio.out | head -n 1)
if [ "$frc" = 0 ] && [ "$errs" = 0 ]; then
	pass fio-path-failover "err=$errs $(grep -m1 'WRITE:' /tmp/fio.out)"
else
	fail fio-path-failover "exit $frc err=${errs:-?}: $(tail -n 5 /tmp/fio.out)"
fi
expect_fail returned-path-protected "Operation not permitted" as_user_past_modes intruder dd if=/tmp/junk of="/dev/$bad" $DDW
vm_exit
