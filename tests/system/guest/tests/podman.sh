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

expect asmguard-programs-unchanged "$ids0" "$(asmguard_prog_ids)"
podman rm -f -t 0 pod1 pod2 pod3 pod4 >/dev/null 2>&1
expect asmguard-programs-unchanged-after-rm "$ids0" "$(asmguard_prog_ids)"
ctr_config_restore
vm_exit
