#!/bin/sh
# watchdog: SIGSTOP the daemon: systemd's watchdog (WatchdogSec) kills and restarts it,
# and an intruder write loop running all along lands 0 writes (the disk region's
# sha256 is unchanged); the same across `systemctl restart`. The shipped unit's
# WatchdogSec (30s) is shortened to 8s by a runtime drop-in for the test (the same
# mechanism, a quarter of the wait; the daemon feeds it every WatchdogSec/2), removed
# at the end.
. /vmtests/lib.sh
. /vmtests/syslib.sh

sys_service_up || { fail setup "asmguard does not answer"; vm_exit; }
dropin=/run/systemd/system/asmguard.service.d
mkdir -p "$dropin"
printf '[Service]\nWatchdogSec=8s\n' >"$dropin/lab-watchdog.conf"
systemctl daemon-reload
expect_ok watchdog-8s systemctl restart asmguard.service
sys_service_up || { fail setup "asmguard does not answer after the drop-in's restart"; vm_exit; }
wd=$(systemctl show -p WatchdogUSec --value asmguard.service)
[ "$wd" = 8s ] || fail setup "WatchdogUSec is '$wd' after the drop-in, not 8s"
sys_mpath_label >/tmp/wd.out 2>&1 || { fail setup "label/link: $(cat /tmp/wd.out)"; vm_exit; }
dm=$(readlink -f "$SYS_MPATH")
chmod 0666 "$dm"
region() { dd if="$dm" bs=4096 skip=400 count=16 iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1; }

# attack_loop FILE: the intruder writes blocks 400..415 until /tmp/wd.stop exists;
# FILE gets one line per attempt: ok or denied.
attack_loop() {
	rm -f /tmp/wd.stop
	: >"$1"
	(
		n=0
		while [ ! -e /tmp/wd.stop ]; do
			n=$((n + 1))
			if as_user intruder dd if=/tmp/junk of="$dm" bs=4096 count=1 seek=$((400 + n % 16)) conv=notrunc oflag=direct 2>/dev/null; then
				echo ok >>"$1"
			else
				echo denied >>"$1"
			fi
		done
	) &
	attacker=$!
}
stop_loop() { touch /tmp/wd.stop; wait "$attacker"; }

# check_round NAME LOG BEFORE: 0 writes landed and the region is unchanged
check_round() {
	after=$(region)
	ok=$(grep -c '^ok' "$2") denied=$(grep -c '^denied' "$2")
	if [ "$ok" = 0 ] && [ "$denied" -gt 0 ] && [ "$after" = "$3" ]; then
		pass "$1-no-write-lands" "$denied attempts denied, 0 landed, region sha256 unchanged"
	else
		fail "$1-no-write-lands" "$ok landed, $denied denied, region $3 -> $after"
	fi
}

before=$(region)
pid=$(systemctl show -p MainPID --value asmguard.service)
n0=$(systemctl show -p NRestarts --value asmguard.service)
attack_loop /tmp/wd.sigstop
kill -STOP "$pid"
t0=$(cut -d' ' -f1 /proc/uptime)
i=0
while [ $i -lt 1500 ]; do
	npid=$(systemctl show -p MainPID --value asmguard.service)
	[ "$npid" != "$pid" ] && [ "$npid" != 0 ] && $C status >/dev/null 2>&1 && break
	i=$((i + 1))
	sleep 0.1
done
t1=$(cut -d' ' -f1 /proc/uptime)
stop_loop
n1=$(systemctl show -p NRestarts --value asmguard.service)
if [ "$npid" != "$pid" ] && [ "$n1" -gt "$n0" ] && journalctl -b -u asmguard --no-pager | grep -q 'Watchdog timeout'; then
	pass watchdog-restart "pid $pid -> $npid, NRestarts $n0 -> $n1, $(journalctl -b -u asmguard --no-pager -o cat | grep -m1 'Watchdog timeout')"
else
	fail watchdog-restart "pid $pid -> $npid, NRestarts $n0 -> $n1: $(journalctl -b -u asmguard --no-pager -n 8 -o cat | tr '\n' ' ')"
fi
info "watchdog: stopped at ${t0}s, answering again at ${t1}s"
check_round sigstop /tmp/wd.sigstop "$before"

attack_loop /tmp/wd.restart
sleep 1
expect_ok systemctl-restart systemctl restart asmguard.service
sys_service_up
sleep 1
stop_loop
check_round restart /tmp/wd.restart "$before"
chmod 0660 "$dm"
rm -f "$dropin/lab-watchdog.conf"
systemctl daemon-reload
systemctl restart asmguard.service
sys_service_up
vm_exit
