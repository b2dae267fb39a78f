#!/bin/sh
# lab-settings: named-only
# lxc: ASM disks in LXC containers (issue 23), started with lxc-start from the image's
# root file system, privileged and user-namespaced (lxc.idmap 0..65535 -> 100000).
# The presentation is the README's: the node directory the daemon makes for a
# container (/dev/asmguard/containers/<name>) bound as the container's
# /dev/asmguard/disks, by lxc.mount.fstab (the source document's fstab line) or by
# lxc.mount.entry, with lxc.cgroup2.devices.allow for the disk. The host allow-list
# is empty: only the [[container]] rules grant writes.
#   rac1, rac2  user-namespaced "RAC nodes" sharing DATA1 and DATA2 (rules: grid;
#               rac2 also admin = true)
#   lxpriv      privileged (rule: grid); also binds the host's /dev/asmguard/disks
#               (the links), the host's bpffs, a loop device and dm's control node
#   lxother     privileged, no rule: "another container" with the same disks
# Loop devices are opted in (include "loop*"): a planted one below (issue 32).
. /vmtests/lib.sh
. /vmtests/syslib.sh
. /vmtests/ctrlib.sh

sys_service_up || { fail setup "asmguard does not answer"; vm_exit; }
ctr_subids
d1=$(ctr_disk ctrd1 DATA1) || { fail setup "disk DATA1: $d1"; vm_exit; }
d2=$(ctr_disk ctrd2 DATA2) || { fail setup "disk DATA2: $d2"; vm_exit; }
mm1=$(ctr_majmin "$d1") mm2=$(ctr_majmin "$d2")
info "disks: DATA1 $d1 ($mm1), DATA2 $d2 ($mm2)"
ids0=$(asmguard_prog_ids)
holds setup-asmguard-programs "asmguard's programs (ids): $ids0" [ -n "$ids0" ]

rules="$(ctr_rule rac1 lxc.payload.rac1 'allow_users = ["grid"]' 'present = ["DATA1", "DATA2"]')
$(ctr_rule rac2 lxc.payload.rac2 'allow_users = ["grid"]' 'present = ["DATA1", "DATA2"]' 'admin = true')
$(ctr_rule lxpriv lxc.payload.lxpriv 'allow_users = ["grid"]' 'present = ["DATA1", "DATA2"]')
[devices]
include = [\"*\", \"loop*\"]"
out=$(ctr_config "$rules") && pass config-container-rules "rules for rac1 rac2 lxpriv accepted" ||
	fail config-container-rules "the daemon refuses [[container]]: $out"

# ---- start: two user-namespaced RAC nodes, a privileged one, another -------
ctl_lines='lxc.mount.entry = /run/asmguard run/asmguard none bind,ro 0 0
lxc.mount.entry = /usr/sbin/asmguardctl usr/local/bin/asmguardctl none bind,ro 0 0'
p1=$(ctr_present rac1 1 DATA1 DATA2) || { fail setup "presentation rac1: $p1"; vm_exit; }
# rac1: the source document's way, an fstab of the container
printf '%s dev/asmguard/disks none bind,create=dir 0 0\n' "$p1" >/var/lib/lxc-rac1.fstab
out=$(ctr_lxc_start rac1 1 "lxc.mount.fstab = /var/lib/lxc-rac1.fstab
lxc.cgroup2.devices.allow = b $mm1 rw
lxc.cgroup2.devices.allow = b $mm2 rw
$ctl_lines") && pass start-rac1-userns "$(lxc-info -n rac1 -s -p -H | tr '\n' ' ')" || fail start-rac1-userns "$out"
p2=$(ctr_present rac2 1 DATA1 DATA2)
out=$(ctr_lxc_start rac2 1 "lxc.mount.entry = $p2 dev/asmguard/disks none bind,create=dir 0 0
lxc.cgroup2.devices.allow = b $mm1 rw
lxc.cgroup2.devices.allow = b $mm2 rw
$ctl_lines") && pass start-rac2-userns "$(lxc-info -n rac2 -s -p -H | tr '\n' ' ')" || fail start-rac2-userns "$out"
pp=$(ctr_present lxpriv 0 DATA1 DATA2)
modprobe loop 2>/dev/null
loopdev=$(losetup -f)
out=$(ctr_lxc_start lxpriv 0 "lxc.mount.entry = $pp dev/asmguard/disks none bind,create=dir 0 0
lxc.mount.entry = /dev/asmguard/disks dev/asmguard/links none bind,create=dir 0 0
lxc.cgroup2.devices.allow = b $mm1 rw
lxc.mount.entry = /sys/fs/bpf mnt/bpf none bind 0 0
lxc.mount.entry = $loopdev dev/lab-loop none bind,create=file 0 0
lxc.cgroup2.devices.allow = b 7:* rwm
lxc.mount.entry = /dev/mapper/control dev/mapper/control none bind,create=file 0 0
lxc.cgroup2.devices.allow = c 10:236 rwm
$ctl_lines") && pass start-lxpriv-privileged "$(lxc-info -n lxpriv -s -p -H | tr '\n' ' ')" || fail start-lxpriv-privileged "$out"
# another container: the same disks, its own nodes (made like the daemon's; it has no rule)
po=$(ctr_present lxother 0 DATA1)
out=$(ctr_lxc_start lxother 0 "lxc.mount.entry = $po dev/asmguard/disks none bind,create=dir 0 0
lxc.cgroup2.devices.allow = b $mm1 rw") && pass start-lxother "$(lxc-info -n lxother -s -p -H | tr '\n' ' ')" ||
	fail start-lxother "$out"

expect cgroup-rac1 lxc.payload.rac1 "$(ctr_cgroup lxc rac1)"
pid1=$(ctr_pid lxc rac1)
expect userns-rac1 "0 $CTR_SHIFT 65536" "$(tr -s ' ' <"/proc/$pid1/uid_map" | sed 's/^ //')"
expect userns-lxpriv "0 0 4294967295" "$(tr -s ' ' <"/proc/$(ctr_pid lxc lxpriv)/uid_map" | sed 's/^ //')"

# ---- presentation -------------------------------------------------------------
for c in rac1 rac2 lxpriv; do ctr_check_nodes $c DATA1 DATA2; done
for c in rac1 rac2 lxpriv; do
	expect "node-in-$c" "block special file grid asmadmin 660" \
		"$(ctr_exec lxc $c grid stat -c '%F %U %G %a' /dev/asmguard/disks/DATA1 2>&1)"
done
for c in rac1 rac2; do
	expect "label-seen-in-$c" "DATA1 DATA2" \
		"$(for l in DATA1 DATA2; do ctr_exec lxc $c grid blkid -p -o value -s LABEL /dev/asmguard/disks/$l; done 2>&1 | tr '\n' ' ' | sed 's/ $//')"
done
# the source document's bind of the host's link directory: the links point into the
# host's /dev (../../nullb0), which is not the container's /dev
out=$(ctr_exec lxc lxpriv root sh -c 'ls -l /dev/asmguard/links/DATA1 && test -L /dev/asmguard/links/DATA1 && ! test -e /dev/asmguard/links/DATA1' 2>&1) &&
	pass host-links-dangle-in-container "$out" || fail host-links-dangle-in-container "$out"

# ---- writes: grid through its rule; nobody else -------------------------------
for c in rac1 lxpriv; do
	expect_ok "grid-writes-$c" ctr_write lxc $c grid /dev/asmguard/disks/DATA1 10 G
	expect "grid-write-landed-$c" G "$(host_block "$d1" 10)"
	host_write "$d1" 11 z >/dev/null 2>&1 # (root's write is refused; the block stays zero)
	# the node opened to 0666 on the host: the filter, not the mode, must refuse
	chmod 0666 "$p1/DATA1" "$pp/DATA1"
	expect_fail "intruder-denied-$c" "Operation not permitted" ctr_write_past_modes lxc $c intruder /dev/asmguard/disks/DATA1 11 I
	expect_fail "oracle-denied-$c" "Operation not permitted" ctr_write_past_modes lxc $c oracle /dev/asmguard/disks/DATA1 11 O
	chmod 0660 "$p1/DATA1" "$pp/DATA1"
	expect_fail "root-denied-$c" "Operation not permitted" ctr_write lxc $c root /dev/asmguard/disks/DATA1 11 R
done
expect_fail other-container-grid-denied "Operation not permitted" ctr_write_past_modes lxc lxother grid /dev/asmguard/disks/DATA1 11 X
expect_fail host-root-denied "Operation not permitted" host_write "$d1" 11 H
chmod 0666 "$d1"
expect_fail host-intruder-denied "Operation not permitted" host_write "$d1" 11 H intruder
expect_fail host-grid-denied "Operation not permitted" host_write "$d1" 11 H grid
chmod 0660 "$d1"
expect nothing-else-landed "" "$(host_block "$d1" 11 | tr -d '\000')"

# ---- the runtime's device cgroup ------------------------------------------------
for c in rac1 lxpriv; do ctr_check_runtime_prog lxc-device-program lxc $c; done
# DATA2 is presented to lxpriv but not allowed by its lxc.cgroup2.devices: LXC's
# program refuses even a read (asmguard never refuses reads), and grid's write
# stays refused although its rule would allow it
expect_fail runtime-denied-read-stays-denied "Operation not permitted" \
	ctr_exec lxc lxpriv grid dd if=/dev/asmguard/disks/DATA2 of=/dev/null bs=4096 count=1 iflag=direct
expect_fail runtime-denied-write-stays-denied "Operation not permitted" ctr_write lxc lxpriv grid /dev/asmguard/disks/DATA2 10 G

# ---- container root against the pins and the kernel's consumers ----------------
expect_ok userns-root-sees-no-pins ctr_exec lxc rac1 root sh -c 'test ! -e /sys/fs/bpf/asmguard && ls -A /sys/fs/bpf'
expect_ok priv-root-own-bpffs-empty ctr_exec lxc lxpriv root sh -c 'mkdir -p /tmp/b && mount -t bpf bpf /tmp/b && test ! -e /tmp/b/asmguard && ls -A /tmp/b'
pin=$(ls /sys/fs/bpf/asmguard/links | head -n 1)
if ctr_exec lxc lxpriv root sh -c "test -e /mnt/bpf/asmguard/links/$pin"; then
	expect_fail priv-root-pin-rename-denied "Operation not permitted" \
		ctr_exec lxc lxpriv root mv "/mnt/bpf/asmguard/links/$pin" "/mnt/bpf/asmguard/links/$pin.moved"
	[ -e "/sys/fs/bpf/asmguard/links/$pin.moved" ] && mv "/sys/fs/bpf/asmguard/links/$pin.moved" "/sys/fs/bpf/asmguard/links/$pin"
	expect_fail priv-root-pin-unlink-denied "Operation not permitted" ctr_exec lxc lxpriv root rm "/mnt/bpf/asmguard/links/$pin"
	# (a removed pin: the restart pins the filter again)
	[ -e "/sys/fs/bpf/asmguard/links/$pin" ] || { systemctl restart asmguard.service; sys_service_up; }
else
	fail priv-root-pin-visible "the host's bpffs bound at /mnt/bpf shows no asmguard/links/$pin: $(ctr_exec lxc lxpriv root sh -c 'ls -la /mnt/bpf; grep -w bpf /proc/self/mountinfo' 2>&1)"
fi
out=$(ctr_exec lxc lxpriv root sh -c 'losetup /dev/lab-loop /dev/asmguard/disks/DATA1 && blockdev --getro /dev/lab-loop && dd if=/dev/zero of=/dev/lab-loop bs=4096 count=1 oflag=direct' 2>&1)
rc=$?
losetup -d "$loopdev" 2>/dev/null
if [ $rc != 0 ]; then
	pass priv-root-no-writable-loop "$out"
else
	fail priv-root-no-writable-loop "a loop device over DATA1 took a write: $out"
fi
expect_fail priv-root-no-dm-table "Device or resource busy|Operation not permitted" \
	ctr_exec lxc lxpriv root dmsetup create ctrlab --noudevsync --table "0 8 linear /dev/asmguard/disks/DATA1 0"
dmsetup remove ctrlab >/dev/null 2>&1
expect_fail userns-root-no-loop "Operation not permitted|cannot find an unused loop device|No such file" ctr_exec lxc rac1 root losetup -f --show /dev/asmguard/disks/DATA1

# ---- asmguardctl inside, over the bound socket -----------------------------------
ctr_ctl_checks lxc rac1
ctr_ctl_checks lxc lxpriv

# admin = true (rac2): its root and its admin group's members may change state; its
# intruder still may not even read
expect_ok admin-root-filter-audit-rac2 ctr_exec lxc rac2 root asmguardctl filter audit DATA2
expect_ok admin-grid-filter-enable-rac2 ctr_exec lxc rac2 grid asmguardctl filter enable DATA2
expect_fail admin-intruder-refused-rac2 "permission denied" ctr_exec lxc rac2 intruder asmguardctl filter audit DATA2
$C filter enable DATA2 >/dev/null 2>&1

# ---- two RAC nodes ----------------------------------------------------------------
expect_ok rac1-grid-writes-data2 ctr_write lxc rac1 grid /dev/asmguard/disks/DATA2 20 A
expect_ok rac2-grid-writes-data2 ctr_write lxc rac2 grid /dev/asmguard/disks/DATA2 21 B
expect rac1-reads-rac2s-block B "$(ctr_read lxc rac1 grid /dev/asmguard/disks/DATA2 21 2>&1)"
expect rac2-reads-rac1s-block A "$(ctr_read lxc rac2 grid /dev/asmguard/disks/DATA2 20 2>&1)"
expect_fail rac-third-container-denied "Operation not permitted" ctr_write_past_modes lxc lxother grid /dev/asmguard/disks/DATA1 22 X
expect_fail rac-host-root-denied "Operation not permitted" host_write "$d2" 22 H
t0=$(date +%s%N)
lxc-stop -n rac1 -k
expect rac1-stopped STOPPED "$(lxc-info -n rac1 -s -H)"
expect_ok rac2-writes-with-rac1-stopped ctr_write lxc rac2 grid /dev/asmguard/disks/DATA1 23 C
expect rac2-write-landed C "$(host_block "$d1" 23)"
expect_ok rac2-lsdsk-with-rac1-stopped ctr_exec lxc rac2 grid asmguardctl lsdsk
# rac1 started again after the daemon: a new cgroup, covered again
lxc-start -n rac1 -d -l INFO -o /tmp/lxc-rac1.log && lxc-wait -n rac1 -s RUNNING -t 30
# (tries for 10 s at most; the time is reported, never a threshold)
t0=$(date +%s%N) i=0 ok=0 ms=0
while [ $ms -lt 10000 ]; do
	ctr_write lxc rac1 grid /dev/asmguard/disks/DATA1 24 D >/tmp/rac1.out 2>&1 && { ok=1; break; }
	i=$((i + 1))
	sleep 0.1
	ms=$((($(date +%s%N) - t0) / 1000000))
done
ms=$((($(date +%s%N) - t0) / 1000000))
holds rac1-restarted-covered "after ${ms} ms ($i refused tries; last: $(tail -n 1 /tmp/rac1.out))" [ $ok = 1 ]
info "rac1 restarted: grid's first allowed write ${ms} ms after lxc-start returned ($i refused before)"
expect_fail rac1-restarted-root-denied "Operation not permitted" ctr_write lxc rac1 root /dev/asmguard/disks/DATA1 25 R

# ---- a host user owning the container's subordinate ids (issue 32) ----------------
# rac1 and rac2 map their ids to 100000.. (the lab's range). No host user of the image owns
# it, nor the README recipes' 1000000000:65536 (root's own lines aside); a host
# user given a range that reaches rac1's (as Debian's useradd gives its first
# user 100000:65536) is named by --check-config and status, and the warning goes
# with the line.
subid_users() { # subid_users START COUNT: owners other than root whose ranges reach it
	cat /etc/subuid /etc/subgid 2>/dev/null | awk -F: -v s="$1" -v n="$2" \
		'$1 != "root" && $1 != "0" && $2 < s + n && s < $2 + $3 { print $1 }' | sort -u | tr '\n' ' '
}
expect subid-recipe-range-no-host-users "" "$(subid_users 1000000000 65536)"
expect subid-lab-range-no-host-users "" "$(subid_users $CTR_SHIFT 65536)"
out=$($C status 2>&1)
holds subid-no-warning-before "status: $(echo "$out" | grep -i subuid)" sh -c "! echo \"\$0\" | grep -q 'host user .* owns'" "$out"
cp /etc/subuid /tmp/subuid.orig
cp /etc/subgid /tmp/subgid.orig
echo "intruder:$((CTR_SHIFT + 60000)):65536" >>/etc/subuid
echo "intruder:$((CTR_SHIFT + 60000)):65536" >>/etc/subgid
out=$(asmguardd --check-config --config "$CTR_CONF" 2>&1)
rc=$?
has_line subid-overlap-check-config "rac1.*subuid.*host user intruder owns" "$out" "exit $rc: $(echo "$out" | grep -i 'intruder' | head -n 2)"
expect subid-overlap-check-config-exit 0 "$rc" "$out"
out=$($C status 2>&1)
has_line subid-overlap-status "rac1.*host user intruder owns" "$out" "$(echo "$out" | grep -i 'intruder')"
cp /tmp/subuid.orig /etc/subuid
cp /tmp/subgid.orig /etc/subgid
out=$($C status 2>&1)
holds subid-warning-gone-with-the-line "status: $(echo "$out" | grep -i 'intruder')" sh -c "! echo \"\$0\" | grep -q 'intruder'" "$out"

# ---- a planted loop device with a presented disk's label (issue 32) -------------
# The test's configuration opts loop devices in (include "loop*"). A loop device
# carrying DATA1's label sector comes after DATA1: DATA1 keeps its link, rac1's
# and lxpriv's nodes and grid's writes; the newcomer is a conflict (lsdsk, metric).
truncate -s 64M /tmp/plant.img
dd if="$d1" of=/tmp/plant.img bs=4096 count=1 conv=notrunc iflag=direct 2>/dev/null
plant=$(losetup -f --show /tmp/plant.img 2>&1)
info "planted $plant with DATA1's block 0"
i=0
while [ $i -lt 100 ] && ! $C lsdsk 2>/dev/null | grep -q "CONFLICT: label DATA1"; do i=$((i + 1)); sleep 0.1; done
out=$($C lsdsk 2>&1)
has_line loop-conflict-listed "CONFLICT: label DATA1 is also on .*${plant#/dev/}.*keeps it" "$out" "after $i tenths: $(echo "$out" | grep CONFLICT)"
m=$(curl -s http://127.0.0.1:9465/metrics 2>&1 | grep '^asmguard_label_conflict{')
has_line loop-conflict-metric "label=\"DATA1\".*newcomer\|newcomer.*label=\"DATA1\"" "$m"
expect loop-link-kept "$d1" "$(readlink -f /dev/asmguard/disks/DATA1)"
expect loop-nodes-kept "$mm1 $mm1" \
	"$(ctr_majmin /dev/asmguard/containers/rac1/DATA1) $(ctr_majmin /dev/asmguard/containers/lxpriv/DATA1)"
expect_ok loop-grid-writes-rac1 ctr_write lxc rac1 grid /dev/asmguard/disks/DATA1 36 K
expect_ok loop-grid-writes-lxpriv ctr_write lxc lxpriv grid /dev/asmguard/disks/DATA1 37 L
expect loop-grid-writes-landed "K L" "$(host_block "$d1" 36) $(host_block "$d1" 37)"
losetup -d "$plant" 2>/dev/null
rm -f /tmp/plant.img

# ---- asmguard's programs: untouched by LXC's device programs -------------------
expect asmguard-programs-unchanged "$ids0" "$(asmguard_prog_ids)"
st=$($C status --json 2>&1)
has_line still-protected '"protection": *"protected"' "$st" "$(echo "$st" | grep -o '"protection":[^,]*')"

for c in rac1 rac2 lxpriv lxother; do lxc-stop -n $c -k >/dev/null 2>&1; done
ctr_config_restore
vm_exit
