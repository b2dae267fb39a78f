#!/bin/sh
# unitrule: a rule scoped to a systemd unit under the packaged service (issue 29):
# with `[[rule]] users = ["grid"], units = ["oracle-ohasd.service"]` and no plain
# allow-list, grid's writes from that unit (a transient unit systemd-run makes,
# in system.slice) land, and the same user's `dd` from a login session
# (`runuser -l grid`: su's login shell, without a password for root) is refused; multipathd still checks the paths of the managed
# multipath disk (read-class SG_IO as a disk-query tool), and the WWID that udev's
# scsi_id reads stays in udev's database. The configuration is put back at the end.
. /vmtests/lib.sh
. /vmtests/syslib.sh

CFG=/etc/asmguard/asmguard.toml
cp "$CFG" /tmp/unitrule.orig
t0=$(date +%s)
sys_service_up || { fail setup "asmguard does not answer: $(journalctl -b -u asmguard --no-pager -n 5)"; vm_exit; }
sys_mpath_label >/tmp/ur.out 2>&1 || { fail setup "label: $(cat /tmp/ur.out)"; vm_exit; }
D=$SYS_MPATH
# only the filter may refuse (the node's mode lets grid reach it)
chmod 666 "$D"

# the rule: grid, in oracle-ohasd.service; no plain allow-list
sed -e '/^allow_users/d' -e '/^allow_groups/d' "$CFG" >/tmp/unitrule.new
sed -i 's/^\[filter\]$/[filter]\nallow_users = []\nallow_groups = []\noracle_homes = "off"/' /tmp/unitrule.new
printf '\n[[rule]]\nname = "ohasd"\nusers = ["grid"]\nunits = ["oracle-ohasd.service"]\n' >>/tmp/unitrule.new
cp /tmp/unitrule.new "$CFG"
expect_ok check-config asmguardd --check-config --config "$CFG"
systemctl restart asmguard.service
sys_service_up || { fail restart "$(journalctl -b -u asmguard --no-pager -n 5)"; cp /tmp/unitrule.orig "$CFG"; vm_exit; }
rules=$($C status 2>&1 | grep -i 'who may write')
case $rules in
*"rule ohasd: user grid AND unit oracle-ohasd.service"*) pass status-names-the-rule "$rules" ;;
*) fail status-names-the-rule "$rules" ;;
esac

before=$(sha "$D")
# a login session of grid: refused
if runuser -l grid -s /bin/sh -c "dd if=/tmp/junk of=$D seek=300 $DDW" >/tmp/ur.su 2>&1; then
	fail su-grid-refused "grid's dd from su - grid wrote: $(cat /tmp/ur.su)"
else
	case $(cat /tmp/ur.su) in
	*"Operation not permitted"*) pass su-grid-refused "$(tail -n 1 /tmp/ur.su)" ;;
	*) fail su-grid-refused "not the filter's refusal: $(cat /tmp/ur.su)" ;;
	esac
fi
expect sha-unchanged-after-su "$before" "$(sha "$D")"

# the unit: its cgroup is made when it starts; the rule follows within a second,
# so its first write waits 2 s
systemd-run --unit=oracle-ohasd.service --uid=grid --wait --collect -q \
	sh -c "sleep 2; dd if=/tmp/junk of=$D seek=300 $DDW" >/tmp/ur.unit 2>&1
rc=$?
got=$(dd if="$D" bs=4096 skip=300 count=1 iflag=direct 2>/dev/null | cmp -s - /tmp/junk && echo landed || echo absent)
if [ $rc = 0 ] && [ "$got" = landed ]; then
	pass unit-writes "grid in oracle-ohasd.service wrote block 300"
else
	fail unit-writes "rc $rc, block 300 $got: $(cat /tmp/ur.unit) :: $(journalctl -b --no-pager -n 5 -u oracle-ohasd.service 2>&1)"
fi

# the system's disk-query tools keep working on the managed disk
st=$(timeout 5 multipathd show paths raw format "%d %t %T" 2>&1)
case $st in
*active*ready*) pass multipathd-checks-paths "$(echo "$st" | tr '\n' ';')" ;;
*) fail multipathd-checks-paths "$st" ;;
esac
for p in $SYS_MPATH_PATHS; do
	w=$(udevadm info -q property -n "/dev/$p" 2>/dev/null | sed -n 's/^ID_SERIAL=//p')
	holds "wwid-$p" "ID_SERIAL=$w" [ -n "$w" ]
done
journalctl -u asmguard --since "@$t0" --no-pager -o cat | grep -E 'write denied' |
	grep -E 'comm="(multipathd|scsi_id)"' >/tmp/ur.denied
info "query-tool denials since boot (earlier tests): $(journalctl -b -u asmguard --no-pager -o cat | grep -E 'write denied' | grep -E 'comm="(multipathd|scsi_id)"' | head -n 3)"
expect no-denial-of-query-tools 0 "$(wc -l </tmp/ur.denied)" "$(head -n 3 /tmp/ur.denied)"

cp /tmp/unitrule.orig "$CFG"
chmod 660 "$D"
systemctl restart asmguard.service
sys_service_up || fail restore "$(journalctl -b -u asmguard --no-pager -n 5)"
vm_exit
