#!/bin/sh
# lab-settings: named-only
# nspawn: ASM disks in systemd-nspawn containers (issue 23), registered with machined
# (machine.slice/machine-NAME.scope), from the image's root file system (read-only,
# shared), with and without a user namespace (--private-users=100000:65536). The
# presentation: --bind of the daemon's node directory for the container onto its
# /dev/asmguard/disks, and the scope's DeviceAllow= for the disk (--property).
# The host allow-list is empty: only the [[container]] rules grant writes.
#   ns1  privileged (rule: grid)    ns2  user-namespaced (rule: grid)
#   ns3  privileged, no rule: "another container" with DATA1
. /vmtests/lib.sh
. /vmtests/syslib.sh
. /vmtests/ctrlib.sh

sys_service_up || { fail setup "asmguard does not answer"; vm_exit; }
d1=$(ctr_disk ctrd1 DATA1) || { fail setup "disk DATA1: $d1"; vm_exit; }
d2=$(ctr_disk ctrd2 DATA2) || { fail setup "disk DATA2: $d2"; vm_exit; }
ids0=$(asmguard_prog_ids)

rules="$(ctr_rule ns1 machine.slice/machine-ns1.scope 'allow_users = ["grid"]' 'present = ["DATA1", "DATA2"]')
$(ctr_rule ns2 machine.slice/machine-ns2.scope 'allow_users = ["grid"]' 'present = ["DATA1"]')"
out=$(ctr_config "$rules") && pass config-container-rules "rules for ns1 ns2 accepted" ||
	fail config-container-rules "the daemon refuses [[container]]: $out"

# nspawn_start NAME DIR [ARGS...]: systemd-nspawn in the background, DIR bound on
# /dev/asmguard/disks, DATA1 allowed by the scope's device policy (DeviceAllow= names
# the host's link: the container's node may not exist before the container runs);
# waits until machined knows its leader.
nspawn_start() {
	_n=$1 _p=$2
	shift 2
	systemd-nspawn -q -D "$CTR_ROOTFS" --read-only -M "$_n" --private-network --console=passive \
		--bind="$_p:/dev/asmguard/disks" --property="DeviceAllow=/dev/asmguard/disks/DATA1 rw" \
		--bind-ro=/run/asmguard --bind-ro=/usr/sbin/asmguardctl:/usr/local/bin/asmguardctl \
		"$@" /usr/bin/sleep infinity >"/tmp/nspawn-$_n.log" 2>&1 &
	_i=0
	while [ $_i -lt 300 ]; do
		_l=$(ctr_pid nspawn "$_n")
		[ -n "$_l" ] && [ "$_l" != 0 ] && [ "$(cat "/proc/$_l/comm" 2>/dev/null)" = sleep ] && return 0
		kill -0 $! 2>/dev/null || break
		_i=$((_i + 1))
		sleep 0.1
	done
	echo "machine $_n did not come up: $(tail -n 5 "/tmp/nspawn-$_n.log")"
	return 1
}
p1=$(ctr_present ns1 0 DATA1 DATA2)
p2=$(ctr_present ns2 1 DATA1)
po=$(ctr_present ns3 0 DATA1)
t0=$SECONDS
out=$(nspawn_start ns1 "$p1") && pass start-ns1-privileged "leader $(ctr_pid nspawn ns1) ($((SECONDS - t0)) s)" || fail start-ns1-privileged "$out"
t0=$SECONDS
out=$(nspawn_start ns2 "$p2" --private-users=$CTR_SHIFT:65536) &&
	pass start-ns2-userns "leader $(ctr_pid nspawn ns2) ($((SECONDS - t0)) s)" || fail start-ns2-userns "$out"
out=$(nspawn_start ns3 "$po") && pass start-ns3 "leader $(ctr_pid nspawn ns3)" || fail start-ns3 "$out"
ctr_check_nodes ns1 DATA1 DATA2
ctr_check_nodes ns2 DATA1
expect cgroup-ns1 machine.slice/machine-ns1.scope "$(ctr_cgroup nspawn ns1 | sed 's|/payload$||')"
expect userns-ns2 "0 $CTR_SHIFT 65536" "$(tr -s ' ' <"/proc/$(ctr_pid nspawn ns2)/uid_map" | sed 's/^ //')"

for c in ns1 ns2; do
	expect "node-in-$c" "block special file grid asmadmin 660" \
		"$(ctr_exec nspawn $c grid stat -c '%F %U %G %a' /dev/asmguard/disks/DATA1 2>&1)"
	expect "label-seen-in-$c" DATA1 "$(ctr_exec nspawn $c grid blkid -p -o value -s LABEL /dev/asmguard/disks/DATA1 2>&1)"
done
blk=50
for c in ns1 ns2; do
	blk=$((blk + 1))
	expect_ok "grid-writes-$c" ctr_write nspawn $c grid /dev/asmguard/disks/DATA1 $blk N
	expect "grid-write-landed-$c" N "$(host_block "$d1" $blk)"
	chmod 0666 "$p1/DATA1" "$p2/DATA1"
	expect_fail "intruder-denied-$c" "Operation not permitted" ctr_write_past_modes nspawn $c intruder /dev/asmguard/disks/DATA1 60 I
	chmod 0660 "$p1/DATA1" "$p2/DATA1"
	expect_fail "root-denied-$c" "Operation not permitted" ctr_write nspawn $c root /dev/asmguard/disks/DATA1 60 R
	ctr_check_runtime_prog systemd-device-program nspawn $c
done
expect_fail other-container-grid-denied "Operation not permitted" ctr_write_past_modes nspawn ns3 grid /dev/asmguard/disks/DATA1 60 X
expect_fail host-root-denied "Operation not permitted" host_write "$d1" 60 H
expect nothing-else-landed "" "$(host_block "$d1" 60 | tr -d '\000')"
# DATA2 is presented to ns1 but not in its scope's DeviceAllow=: systemd's program
# refuses even a read (asmguard never refuses reads), and grid's write stays refused
# although its rule would allow it
expect_fail runtime-denied-read-stays-denied "Operation not permitted" \
	ctr_exec nspawn ns1 grid dd if=/dev/asmguard/disks/DATA2 of=/dev/null bs=4096 count=1 iflag=direct
expect_fail runtime-denied-write-stays-denied "Operation not permitted" ctr_write nspawn ns1 grid /dev/asmguard/disks/DATA2 10 G
expect_ok userns-root-sees-no-pins ctr_exec nspawn ns2 root sh -c 'test ! -e /sys/fs/bpf/asmguard'

ctr_ctl_checks nspawn ns1
ctr_ctl_checks nspawn ns2

expect asmguard-programs-unchanged "$ids0" "$(asmguard_prog_ids)"
for c in ns1 ns2 ns3; do machinectl terminate $c >/dev/null 2>&1; done
ctr_config_restore
vm_exit
