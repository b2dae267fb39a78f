#!/bin/sh
# lab-settings: named-only
# podman: ASM disks in Podman containers (issue 23), rootful, started with podman run
# (crun) from an image imported from the image's root file system (no registry).
# The host allow-list is empty: only the [[container]] rules grant writes.
#   pod1  privileged (no user namespace), --cgroup-parent=db1.slice (rule: grid),
#         --device /dev/asmguard/disks/DATA1:/dev/asmguard/disks/DATA1 (podman follows
#         the link and makes a node with the disk's owner and mode)
#   pod2  user-namespaced (--uidmap/--gidmap 0:100000:65536), --cgroup-parent=db2.slice
#         (rule: grid): the daemon's node directory for it bound on /dev/asmguard/disks
#         (-v DIR:/dev/asmguard/disks:dev) and --device-cgroup-rule for the disk (a
#         --device node there is root's, nobody in the container)
#   pod3  privileged, machine.slice, no rule: "another container" with DATA1, given
#         as --device /dev/asmguard/disks/DATA1 without a destination
#   pod4  rootful, --pid=host --cap-drop=all, the socket bound read-only: reads only
#         (issue 32; removed right after its checks)
. /vmtests/lib.sh
. /vmtests/syslib.sh
. /vmtests/ctrlib.sh

sys_service_up || { fail setup "asmguard does not answer"; vm_exit; }
d1=$(ctr_disk ctrd1 DATA1) || { fail setup "disk DATA1: $d1"; vm_exit; }
d2=$(ctr_disk ctrd2 DATA2) || { fail setup "disk DATA2: $d2"; vm_exit; }
info "disks: DATA1 $d1 ($(ctr_majmin "$d1")), DATA2 $d2 ($(ctr_majmin "$d2"))"
ids0=$(asmguard_prog_ids)

rules="$(ctr_rule pod1 db1.slice 'allow_users = ["grid"]' 'present = ["DATA1", "DATA2"]')
$(ctr_rule pod2 db2.slice 'allow_users = ["grid"]' 'present = ["DATA1"]')"
out=$(ctr_config "$rules") && pass config-container-rules "rules for pod1 pod2 accepted" ||
	fail config-container-rules "the daemon refuses [[container]]: $out"

t0=$SECONDS
out=$(tar -C "$CTR_ROOTFS" -c . | podman import - localhost/ctr-lab 2>&1) &&
	pass import "localhost/ctr-lab from the image's root file system ($((SECONDS - t0)) s)" || { fail import "$out"; vm_exit; }

# podman_run NAME ARGS...: podman run -d, no network, the socket's directory and
# asmguardctl bound, init: sleep.
podman_run() {
	_n=$1
	shift
	podman run -d --name "$_n" --network none \
		-v /run/asmguard:/run/asmguard:ro -v /usr/sbin/asmguardctl:/usr/local/bin/asmguardctl:ro \
		"$@" localhost/ctr-lab /usr/bin/sleep infinity
}
p1=$(ctr_present pod1 0 DATA1 DATA2)
p2=$(ctr_present pod2 1 DATA1)
px=$(ctr_present pod2x 1 DATA1) # (no section: a node the lab makes, owned 154331:154329)
t0=$SECONDS
out=$(podman_run pod1 --cgroup-parent=db1.slice --device /dev/asmguard/disks/DATA1:/dev/asmguard/disks/DATA1 \
	-v "$p1:/mnt/presented:dev" 2>&1) &&
	pass start-pod1-privileged "$out ($((SECONDS - t0)) s)" || fail start-pod1-privileged "$out"
t0=$SECONDS
out=$(podman_run pod2 --cgroup-parent=db2.slice --uidmap 0:$CTR_SHIFT:65536 --gidmap 0:$CTR_SHIFT:65536 \
	-v "$p2:/dev/asmguard/disks:dev" --device-cgroup-rule="b $(ctr_majmin "$d1") rw" \
	--device /dev/asmguard/disks/DATA1:/dev/asmguard-device/DATA1 --device "$px/DATA1:/dev/asmguard-device/SHIFTED" 2>&1) &&
	pass start-pod2-userns "$out ($((SECONDS - t0)) s)" || fail start-pod2-userns "$out"
out=$(podman_run pod3 --device /dev/asmguard/disks/DATA1 2>&1) &&
	pass start-pod3 "$out" || fail start-pod3 "$out"
# without a destination the node is made under the name the link resolves to
out=$(ctr_exec podman pod3 root sh -c "ls -l /dev/${d1#/dev/}; test -b /dev/${d1#/dev/} && ! test -e /dev/asmguard/disks/DATA1" 2>&1) &&
	pass device-without-destination-is-resolved "$out" || fail device-without-destination-is-resolved "$out :: $(ctr_exec podman pod3 root ls -lR /dev 2>&1 | grep '^b')"

cg1=$(ctr_cgroup podman pod1) cg2=$(ctr_cgroup podman pod2)
has_line cgroup-pod1 '^db1.slice/libpod-' "$cg1"
has_line cgroup-pod2 '^db2.slice/libpod-' "$cg2"
info "cgroups: pod1 $cg1, pod2 $cg2, pod3 $(ctr_cgroup podman pod3)"
expect userns-pod2 "0 $CTR_SHIFT 65536" "$(tr -s ' ' <"/proc/$(ctr_pid podman pod2)/uid_map" | sed 's/^ //')"

# ---- presentation and writes ------------------------------------------------------
ctr_check_nodes pod1 DATA1 DATA2
ctr_check_nodes pod2 DATA1
for c in pod1 pod2; do
	expect "node-in-$c" "block special file grid asmadmin 660" \
		"$(ctr_exec podman $c grid stat -c '%F %U %G %a' /dev/asmguard/disks/DATA1 2>&1)"
	expect "label-seen-in-$c" DATA1 "$(ctr_exec podman $c grid blkid -p -o value -s LABEL /dev/asmguard/disks/DATA1 2>&1)"
done
# --device nodes in the user-namespaced pod2: podman gives the node the host node's
# numeric owner as the container's ids. The host's link (grid:asmadmin, 54331:54329,
# the container's grid's numbers too) is grid's inside; a node owned by the
# container's host-side ids (154331, as the daemon makes them) is nobody's inside.
out=$(ctr_exec podman pod2 root stat -c '%F %U %G %a' /dev/asmguard-device/DATA1 2>&1)
has_line userns-device-node-host-numbers '^block special file grid asmadmin' "$out"
expect_ok userns-device-node-grid-writes ctr_write podman pod2 grid /dev/asmguard-device/DATA1 35 Q
expect userns-device-node-shifted-owner-is-nobody "nobody nogroup" \
	"$(ctr_exec podman pod2 root stat -c '%U %G' /dev/asmguard-device/SHIFTED 2>&1)"
blk=30
for c in pod1 pod2; do
	blk=$((blk + 1))
	expect_ok "grid-writes-$c" ctr_write podman $c grid /dev/asmguard/disks/DATA1 $blk P
	expect "grid-write-landed-$c" P "$(host_block "$d1" $blk)"
	chmod 0666 "$d1" "$p2/DATA1"
	ctr_exec podman $c root chmod 0666 /dev/asmguard/disks/DATA1 2>/dev/null
	expect_fail "intruder-denied-$c" "Operation not permitted" ctr_write_past_modes podman $c intruder /dev/asmguard/disks/DATA1 40 I
	chmod 0660 "$d1" "$p2/DATA1"
	ctr_exec podman $c root chmod 0660 /dev/asmguard/disks/DATA1 2>/dev/null
	expect_fail "root-denied-$c" "Operation not permitted" ctr_write podman $c root /dev/asmguard/disks/DATA1 40 R
done
ctr_exec podman pod3 root chmod 0666 "/dev/${d1#/dev/}" 2>/dev/null
expect_fail other-container-grid-denied "Operation not permitted" ctr_write_past_modes podman pod3 grid "/dev/${d1#/dev/}" 40 X
expect_fail host-root-denied "Operation not permitted" host_write "$d1" 40 H
expect nothing-else-landed "" "$(host_block "$d1" 40 | tr -d '\000')"

# ---- crun's device program ---------------------------------------------------------
for c in pod1 pod2; do ctr_check_runtime_prog crun-device-program podman $c; done
# DATA2's node bound into pod1 without --device: crun's program refuses even a read
# (asmguard never refuses reads), and grid's write stays refused although its rule
# would allow it
expect_fail runtime-denied-read-stays-denied "Operation not permitted" \
	ctr_exec podman pod1 grid dd if=/mnt/presented/DATA2 of=/dev/null bs=4096 count=1 iflag=direct
expect_fail runtime-denied-write-stays-denied "Operation not permitted" ctr_write podman pod1 grid /mnt/presented/DATA2 10 G
expect_ok userns-root-sees-no-pins ctr_exec podman pod2 root sh -c 'test ! -e /sys/fs/bpf/asmguard'
expect_fail userns-root-no-loop "Operation not permitted|cannot find an unused loop device|No such file" ctr_exec podman pod2 root losetup -f --show /dev/asmguard/disks/DATA1

# ---- asmguardctl inside -------------------------------------------------------------
ctr_ctl_checks podman pod1
ctr_ctl_checks podman pod2

# ---- a --pid=host --cap-drop=all root container is not the host (issue 32) ---------
# The way monitoring agents run: rootful, in the host's pid namespace, every
# capability dropped, the socket bound read-only. Its root reads (uid 0 outside
# every section: read rights at most) and is refused every state change; its
# intruder (no admin group) is refused even a read. Removed at once: nothing of
# it outlives its checks (its sleep runs in the host's pid namespace).
t0=$SECONDS
out=$(podman_run pod4 --pid=host --cap-drop=all 2>&1) &&
	pass start-pod4-pidhost "$out ($((SECONDS - t0)) s)" || fail start-pod4-pidhost "$out"
p4=$(ctr_pid podman pod4)
expect_fail pidhost-filter-audit-refused "permission denied" podman exec pod4 asmguardctl filter audit DATA1
expect_fail pidhost-label-force-refused "permission denied" podman exec pod4 asmguardctl label --force DATA7 "$d2"
expect_fail pidhost-unlabel-refused "permission denied" podman exec pod4 asmguardctl unlabel DATA2
expect_ok pidhost-root-lsdsk-reads podman exec pod4 asmguardctl lsdsk
expect_fail pidhost-intruder-lsdsk-refused "permission denied" podman exec --user 1001:1001 pod4 asmguardctl lsdsk
j=$($C lsdsk --json 2>&1 | tr -d ' \n')
expect pidhost-nothing-changed "0 DATA1 DATA2" \
	"$(printf '%s' "$j" | grep -o '"filter_mode":"audit"' | wc -l) $(printf '%s' "$j" | grep -o '"label":"DATA[127]"' | cut -d'"' -f4 | sort -u | tr '\n' ' ' | sed 's/ $//')" "$j"
# (undone should any have gone through)
$C filter enable DATA1 >/dev/null 2>&1
$C lsdsk 2>&1 | grep -q DATA7 && $C label DATA2 "$d2" --force >/dev/null 2>&1
$C lsdsk 2>&1 | grep -q DATA2 || $C label DATA2 "$d2" --force >/dev/null 2>&1
t0=$SECONDS
out=$(podman rm -f -t 0 pod4 2>&1)
holds pidhost-removed "podman rm -f: $out ($((SECONDS - t0)) s); its sleep (host pid ${p4:-?}) gone" \
	sh -c "! podman container exists pod4 && [ -n '$p4' ] && ! kill -0 '$p4' 2>/dev/null"

# ---- pod1's /etc/group never answers (FUSE), and its picked process exits --------
# The daemon reads a container's /etc/passwd and /etc/group through one process
# of it (the lowest pid of its outermost user namespace). A process of pod1 with a
# pid below its init's (made so through ns_last_pid) is the one picked; then a FUSE
# mount that never answers covers pod1's /etc/group. The stall is reported
# (status, metric) naming that process; pod1 keeps its nodes and grid its writes,
# across resolutions and after the picked process exits; a hot-plugged labelled
# disk is protected; scan and status answer, from inside pod1 too; a restart
# reaches READY. Times are information.
ms() { echo $((($(date +%s%N) - t0) / 1000000)); }
# hup: SIGHUP to the daemon, which resolves the containers at once (the unit has
# no ExecReload: systemctl reload is refused)
hup() { kill -HUP "$(systemctl show -p MainPID --value asmguard.service)"; }
pctr() { $C status 2>/dev/null | grep -m1 'container pod1:'; } # pod1's status row
d3=$(ctr_disk ctrd3 DATA3) || fail setup "disk DATA3: $d3"
echo 0 >/sys/kernel/config/nullb/ctrd3/power
init1=$(ctr_pid podman pod1)
cg1=$(ctr_cgroup podman pod1)
echo 1 >/proc/sys/kernel/ns_last_pid
sh -c 'echo $$ >"/sys/fs/cgroup/$0/cgroup.procs" && exec nsenter -t "$1" -p -m /usr/bin/sleep infinity' \
	"$cg1" "$init1" >/dev/null 2>&1 &
holder=$! picked=""
i=0
while [ $i -lt 50 ] && [ -z "$picked" ]; do
	picked=$(cat "/proc/$holder/task/$holder/children" 2>/dev/null | tr -d ' ')
	[ "$(cat "/proc/$picked/comm" 2>/dev/null)" = sleep ] || picked=""
	i=$((i + 1))
	sleep 0.1
done
holds picked-below-init "pod1's init: host pid $init1, the new process: ${picked:-none}" \
	[ "${picked:-999999999}" -lt "$init1" ]
info "pod1's processes (pid pidns comm): $(for c in $(find /sys/fs/cgroup/db1.slice -name cgroup.procs); do cat "$c"; done | sort -n |
	while read -r p; do printf '%s %s %s; ' "$p" "$(readlink /proc/$p/ns/pid | tr -dc 0-9)" "$(cat /proc/$p/comm)"; done)"
hup
sleep 1
t0=$(date +%s%N)
# (not in a command substitution: ctr_unstall needs the holder's pid)
if ctr_stall "$init1" /etc/group >/tmp/ctr-stall.msg 2>&1; then
	pass stall-mounted "pod1's /etc/group on a FUSE file system that never answers (holder pid $CTR_STALL_HOLDER)"
else
	fail stall-mounted "$(cat /tmp/ctr-stall.msg)"
fi
expect_fail stall-really-stalls "" timeout 2 nsenter -t "$init1" -m cat /etc/group
hup
i=0
while [ $i -lt 100 ] && ! pctr | grep -q 'did not answer'; do i=$((i + 1)); sleep 0.1; done
v=$(pctr)
has_line stall-reported "did not answer" "$v" "after $(ms) ms: $v"
has_line stall-names-the-picked-process "pod1 (pid $picked)" "$v"
expect stall-metric 'asmguard_container_stalled{container="pod1"} 1' \
	"$(curl -s http://127.0.0.1:9465/metrics 2>&1 | grep '^asmguard_container_stalled{container="pod1"}')"
# the stalled container's resolutions go on (it is resolved again about once a
# second while it has a problem, and on each reload): its last good one stays
hup
sleep 3
v=$(pctr)
has_line stall-keeps-grid "may write: user grid (host uid 54331)" "$v"
holds stall-nodes-kept "$(ls -ln /dev/asmguard/containers/pod1 | tail -n +2 | tr -s ' \n' '  ')" \
	[ -b /dev/asmguard/containers/pod1/DATA1 -a -b /dev/asmguard/containers/pod1/DATA2 ]
expect_ok stall-grid-writes ctr_write enter "$init1" grid /dev/asmguard/disks/DATA1 38 S
# scan, status (host; pod1's root, outside its admin group's members: a read) answer
# (inside pod1 through nsenter: podman exec itself reads the container's /etc/group)
t0=$(date +%s%N)
expect_ok stall-host-scan $C scan
expect_ok stall-host-status $C status
t_host=$(ms)
t0=$(date +%s%N)
expect_ok stall-pod1-root-status ctr_exec enter "$init1" root asmguardctl status
expect_ok stall-pod1-root-scan ctr_exec enter "$init1" root asmguardctl scan
t_in=$(ms)
t0=$(date +%s%N)
out=$(ctr_exec enter "$init1" grid asmguardctl lsdsk 2>&1)
info "stalled: host scan+status ${t_host} ms, pod1's root status+scan ${t_in} ms (nsenter included), pod1's grid lsdsk $(ms) ms: $(echo "$out" | head -n 1)"
# a labelled disk plugged in meanwhile: protected, linked
t0=$(date +%s%N)
echo 1 >/sys/kernel/config/nullb/ctrd3/power
t_prot="" t_link="" landed=0 i=0
while { [ -z "$t_prot" ] || [ -z "$t_link" ]; } && [ $i -lt 500 ]; do
	[ -z "$t_link" ] && [ -e /dev/asmguard/disks/DATA3 ] && t_link=$(ms)
	if [ -z "$t_prot" ] && [ -b "$d3" ]; then
		if dd if=/tmp/junk of="$d3" $DDW seek=200 2>/tmp/hp.err; then
			landed=$((landed + 1))
		elif grep -q "Operation not permitted" /tmp/hp.err; then
			t_prot=$(ms)
		fi
	fi
	i=$((i + 1))
done
holds stall-hotplug-protected "root's write to $d3 refused ${t_prot:-never} ms after power-on ($landed landed before)" [ -n "$t_prot" ]
holds stall-hotplug-linked "$(ls -l /dev/asmguard/disks/DATA3 2>&1)" [ -n "$t_link" ]
info "stalled: hot-plugged DATA3 protected ${t_prot:-never} ms, linked ${t_link:-never} ms after power-on ($landed root writes landed before)"
# the picked process exits: every node of pod1 stays, grid still writes
kill "$picked"
hup
sleep 3
holds picked-exit-nodes-kept "$(ls -ln /dev/asmguard/containers/pod1 | tail -n +2 | tr -s ' \n' '  ')" \
	[ -b /dev/asmguard/containers/pod1/DATA1 -a -b /dev/asmguard/containers/pod1/DATA2 ]
expect_ok picked-exit-grid-writes ctr_write enter "$init1" grid /dev/asmguard/disks/DATA1 39 E
# a restart while pod1 stalls reaches READY
t0=$(date +%s%N)
systemctl restart asmguard.service
rc=$?
t_ready=$(ms)
st=$(systemctl is-active asmguard.service)
holds stall-restart-ready "systemctl restart: exit $rc after $t_ready ms; $st" [ "$rc $st" = "0 active" ]
expect_ok stall-restart-status $C status
info "stalled: systemctl restart reached READY in $t_ready ms; after it: $(pctr | cut -c1-300); pod1's nodes: $(ls /dev/asmguard/containers/pod1 | tr '\n' ' ')"
# the file fails at once again (its FUSE connection ended: ENOTCONN; the lab
# cannot unmount it: umount of an aborted FUSE file mount answers ENOENT on
# 6.12, so the file does not answer *well* again): pod1's rule comes back
# (its /etc/passwd answers), and status says why it has no nodes
ctr_unstall
info "unstall: $(cat /tmp/ctr-unstall.out 2>/dev/null) left: $(grep ' ctrstalled ' "/proc/$init1/mountinfo" | cut -d' ' -f5,9-10)"
hup
i=0
until $C status 2>&1 | grep -q 'not presented: container pod1: group asmadmin: .*ENOTCONN' || [ $i -ge 100 ]; do
	i=$((i + 1))
	sleep 0.1
done
out=$($C status 2>&1)
has_line unstalled-status-names-why-no-nodes 'not presented: container pod1: group asmadmin: .*ENOTCONN' "$out" \
	"after $i tenths: $(echo "$out" | grep -i 'not presented\|container pod1' | tr '\n' ' ' | cut -c1-400)"
i=0
until ctr_write podman pod1 grid /dev/asmguard/disks/DATA1 39 F >/dev/null 2>&1 || [ $i -ge 30 ]; do i=$((i + 1)); sleep 0.2; done
expect unstalled-grid-writes F "$(host_block "$d1" 39)"
echo 0 >/sys/kernel/config/nullb/ctrd3/power
rmdir /sys/kernel/config/nullb/ctrd3 2>/dev/null

expect asmguard-programs-unchanged "$ids0" "$(asmguard_prog_ids)"
podman rm -f -t 0 pod1 pod2 pod3 pod4 >/dev/null 2>&1
expect asmguard-programs-unchanged-after-rm "$ids0" "$(asmguard_prog_ids)"
ctr_config_restore
vm_exit
