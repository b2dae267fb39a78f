#!/bin/sh
# containers: the container rules and the pins under the LSM and fmod_ret
# backends (the host tests run the cgroup-device one). A cgroup-v2 directory is
# the container "rac1" (allow_users = ["grid"]), a user namespace made by host
# uid 100000 + N whose maps (0..65535 -> 100000..) the test writes, as a
# runtime does: grid in rac1 (host 154331) writes, intruder in rac1 and grid
# outside the cgroup are refused. A task in a new pid namespace cannot unlink,
# rename or rmdir the pins; the host's root still removes them.
. /vmtests/lib.sh

C="asmguardctl --socket /run/asmguard/asmguard.sock"
D=$(new_loop 16 containers) || { fail setup "losetup: $D"; vm_exit; }
CG=/sys/fs/cgroup/ctrtest
mkdir -p $CG/rac1
agd_config /tmp/ctr.toml "${D#/dev/}" 'filter.allow_users=[]' 'filter.allow_groups=[]'
printf '\n[[container]]\nname = "rac1"\ncgroup = ["ctrtest/rac1"]\nallow_users = ["grid"]\n' >>/tmp/ctr.toml
: >/tmp/ctr.log
agd_start /tmp/ctr.toml /tmp/ctr.log || { fail setup "asmguardd: $(tail -n 3 /tmp/ctr.log)"; vm_exit; }
expect_ok label $C label CTR1 "$D"
chmod 666 "$D"

W=/tmp/ctrw
mkdir -p $W && chmod 755 $W
printf 'while [ ! -e %s/mapped.$AG_TOKEN ]; do sleep 0.02; done\nwhile [ ! -e %s/go ]; do sleep 0.02; done\nexec dd if=/dev/zero of=%s bs=4096 count=1 seek=$1 conv=notrunc\n' \
	$W $W "$D" >$W/ns.sh
# ns_writer CGROUP|- INSIDE_UID SEEK OUT: a writer as INSIDE_UID of new user and
# pid namespaces (a container's process is never in the host's pid namespace) (host uid 100000 + it), in CGROUP; its output to OUT, its pid in $wpid.
ns_writer() {
	_h=$((100000 + $2))
	if [ "$1" = - ]; then _j=""; else _j="echo \$\$ >$1/cgroup.procs && "; fi
	sh -c "${_j}exec setpriv --reuid=$_h --regid=$_h --clear-groups unshare --user --pid --fork -- env AG_TOKEN=\$\$ sh $W/ns.sh $3" >"$4" 2>&1 &
	wpid=$!
	_i=0
	while [ "$(readlink /proc/$wpid/ns/user)" = "$(readlink /proc/self/ns/user)" ] && [ $_i -lt 200 ]; do
		sleep 0.02; _i=$((_i + 1))
	done
	echo "0 100000 65536" >/proc/$wpid/uid_map
	echo "0 100000 65536" >/proc/$wpid/gid_map
	: >$W/mapped.$wpid
}
ns_writer $CG/rac1 54331 1 $W/grid.out; grid=$wpid
ns_writer $CG/rac1 1001 2 $W/intruder.out; intruder=$wpid
ns_writer - 54331 3 $W/outside.out; outside=$wpid
# the daemon reads grid through rac1's map
_i=0
until $C status --json 2>/dev/null | grep -q '"host_uid": *154331'; do
	_i=$((_i + 1)); [ $_i -lt 50 ] || break; sleep 0.1
done
st=$($C status --json 2>/dev/null)
if echo "$st" | grep -q '"host_uid": *154331' && echo "$st" | grep -q '"containers_enforced": *true'; then
	pass status-resolves-grid "rac1: grid = host uid 154331, enforced"
else
	fail status-resolves-grid "$($C status 2>&1 | grep container)"
fi
: >$W/go
wait $grid && pass grid-in-rac1-writes || fail grid-in-rac1-writes "$(cat $W/grid.out)"
wait $intruder && fail intruder-in-rac1-refused "wrote: $(cat $W/intruder.out)" ||
	{ grep -q "Operation not permitted" $W/intruder.out && pass intruder-in-rac1-refused ||
		fail intruder-in-rac1-refused "$(cat $W/intruder.out)"; }
wait $outside && fail grid-outside-rac1-refused "wrote: $(cat $W/outside.out)" ||
	{ grep -q "Operation not permitted" $W/outside.out && pass grid-outside-rac1-refused ||
		fail grid-outside-rac1-refused "$(cat $W/outside.out)"; }
# the denial in rac1 names it (LSM/fmod_ret read the task's cgroup)
_i=0
until $C events --json 2>/dev/null | grep -q '"container":"rac1"'; do
	_i=$((_i + 1)); [ $_i -lt 50 ] || break; sleep 0.1
done
$C events --json 2>/dev/null | grep -q '"container":"rac1"' &&
	pass event-names-container || fail event-names-container "$($C events 2>&1 | tail -n 2)"

# The pins: closed to a task in another pid namespace, open to the host's root.
P=/sys/fs/bpf/asmguard
expect_fail pin-unlink-from-pidns "Operation not permitted" \
	unshare -p -f --mount-proc rm -f $P/maps/ag_stats
expect_fail pin-rename-from-pidns "Operation not permitted" \
	unshare -p -f --mount-proc mv $P/maps/ag_stats $P/ag_stats.moved
expect_fail pin-rmdir-from-pidns "Operation not permitted" \
	unshare -p -f --mount-proc rmdir $P/links
holds pins-kept "$(ls $P/maps | wc -l) maps pinned" test -e $P/maps/ag_stats
$C filter disable >/dev/null 2>&1
holds host-root-removes-pins "filter disable as the host's root" test ! -e $P

kill "$agd"; wait "$agd" 2>/dev/null
rmdir $CG/rac1 $CG 2>/dev/null
losetup -d "$D" 2>/dev/null
vm_exit
