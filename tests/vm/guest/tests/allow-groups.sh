#!/bin/sh
# allow-groups: with allow_groups = ["asmadmin"] and no user listed, a member
# by supplementary group writes (grid: primary group oinstall, asmadmin
# beside, as Oracle installs it), a user outside the group is refused (oracle:
# oinstall, dba, asmdba), and so is root. Root given asmadmin by setgroups
# alone (not a listed member) writes where the programs read the caller's
# groups from the task, and is refused by the 5.10 cgroup-device fallback,
# which knows callers by real uid and gid only and so allows the group's
# listed members by uid. Root with asmadmin as its real and effective gid
# (setpriv --regid) writes on every line.
. /vmtests/lib.sh

C="asmguardctl --socket /run/asmguard/asmguard.sock"
DDW="bs=4096 count=1 conv=notrunc"
dd if=/dev/zero bs=4096 count=1 2>/dev/null | tr '\0' 'G' >/tmp/grpjunk
D=$(new_loop 16 allow-groups) || { fail setup "losetup: $D"; vm_exit; }
agd_config /tmp/groups.toml "${D#/dev/}" 'filter.allow_users=[]' 'filter.allow_groups=["asmadmin"]'
: >/tmp/groups.log
agd_start /tmp/groups.toml /tmp/groups.log
# the daemon's own label write goes through with an allowed group
expect_ok label $C label GROUPS "$D"
chmod 666 "$D" # the filter, not the mode bits, decides
ids_only=no
grep -q 'cannot see supplementary groups' /tmp/groups.log && ids_only=yes
info "ids-only fallback: $ids_only ($(grep -m1 -o 'backend [a-z_]*' /tmp/groups.log))"

expect_ok supplementary-member-writes as_user grid dd if=/tmp/grpjunk of="$D" $DDW seek=1
expect_fail non-member-refused "Operation not permitted" as_user_past_modes oracle dd if=/tmp/grpjunk of="$D" $DDW seek=2
expect_fail root-refused "Operation not permitted" dd if=/tmp/grpjunk of="$D" $DDW seek=3
# root with the group as its real and effective gid (no supplementary groups)
expect_ok regid-writes setpriv --regid=54329 --clear-groups dd if=/tmp/grpjunk of="$D" $DDW seek=7
if [ $ids_only = yes ]; then
	grep -q 'members are allowed by uid: \[54331\]' /tmp/groups.log &&
		pass fallback-allows-members-by-uid "$(grep -m1 'members are allowed' /tmp/groups.log)" ||
		fail fallback-allows-members-by-uid "$(grep 'filter' /tmp/groups.log | tail -n 3)"
	expect_fail setgroups-only-refused-by-fallback "Operation not permitted" \
		setpriv --groups=54329 dd if=/tmp/grpjunk of="$D" $DDW seek=4
else
	expect_ok setgroups-supplementary-writes setpriv --groups=54329 dd if=/tmp/grpjunk of="$D" $DDW seek=4
	# the group is one of many: the walk does not stop at the first
	expect_ok supplementary-among-many setpriv --groups=100,200,300,400,500,600,700,54329 \
		dd if=/tmp/grpjunk of="$D" $DDW seek=5
	expect_fail other-groups-refused "Operation not permitted" setpriv --groups=54321,54322,54327 \
		dd if=/tmp/grpjunk of="$D" $DDW seek=6
fi
# what landed: grid's block (and root's by setgroups where allowed), nothing else
# (block 7: --regid)
got=$(for s in 1 2 3 4 7; do dd if="$D" bs=4096 skip=$s count=1 2>/dev/null | tr -d '\0' | wc -c; done | tr '\n' ' ')
want="4096 0 0 0 4096 "
[ $ids_only = yes ] || want="4096 0 0 4096 4096 "
expect contents "$want" "$got" "bytes written at blocks 1-4 and 7: $got"

$C filter disable >/dev/null 2>&1
kill "$agd"; wait "$agd" 2>/dev/null
losetup -d "$D" 2>/dev/null
vm_exit
