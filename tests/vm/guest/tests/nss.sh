#!/bin/sh
# nss: the allow-list resolves names through NSS, as enterprises provide users
# (LDAP, SSSD; libnss-extrausers stands in): ldapgrid exists only in
# /var/lib/extrausers, never in /etc/passwd, and may write its disk while root
# may not. A user the directory did not know at start (ldaplate) is allowed
# after SIGHUP, which re-resolves the names and logs what changed.
# Name resolution is the daemon's, the verdict on a uid the same code on every
# backend (allow-groups and containers run on every boot variant): once per kernel.
# lab-settings: once-per-kernel
. /vmtests/lib.sh

RUN=/run/asmguard-nss
rm -rf "$RUN"; mkdir -p "$RUN"
C="asmguardctl --socket $RUN/nss.sock"
DDW="bs=4096 count=1 conv=notrunc"
if ! getent passwd ldapgrid >/dev/null || grep -q '^ldapgrid:' /etc/passwd; then
	fail setup "ldapgrid must come from extrausers only: $(getent passwd ldapgrid) / $(grep ldapgrid /etc/passwd)"
	vm_exit
fi
pass directory-user "$(getent passwd ldapgrid) (not in /etc/passwd)"
L=$(new_loop 16 nss) || { fail setup "losetup"; vm_exit; }
dd if=/dev/zero bs=4096 count=1 2>/dev/null | tr '\0' 'N' >/tmp/nssjunk

agd_config /tmp/nss.toml "${L#/dev/}" "socket.path=\"$RUN/nss.sock\"" 'metrics.listen="127.0.0.1:19466"' \
	'filter.allow_users=["ldapgrid", "ldaplate"]' 'filter.allow_groups=[]'
: >/tmp/nss.log
agd_start /tmp/nss.toml /tmp/nss.log
if grep -q 'user ldapgrid does not exist' /tmp/nss.log; then
	fail resolved-through-nss "$(grep -m1 ldapgrid /tmp/nss.log)"
else
	pass resolved-through-nss "$(grep -m1 'allowed uids' /tmp/nss.log)"
fi
grep -q 'user ldaplate does not exist' /tmp/nss.log && pass unknown-user-warned "$(grep -m1 ldaplate /tmp/nss.log)" ||
	fail unknown-user-warned "$(tail -n 3 /tmp/nss.log)"
# socket peers: grid reaches the admin group (asmadmin) through a supplementary
# group only, which the kernel reports with SO_PEERGROUPS; intruder has none
expect_ok peer-supplementary-admin-group as_user grid $C status
expect_fail peer-not-admin "permission denied" as_user intruder $C status
expect_ok label $C label NSS1 "$L"
chown 54400 "$L"
expect_ok directory-user-writes as_user ldapgrid dd if=/tmp/nssjunk of="$L" $DDW seek=100
expect_fail root-denied "Operation not permitted" dd if=/tmp/nssjunk of="$L" $DDW seek=100

# a user added to the directory after the start: denied until SIGHUP
printf 'ldaplate:x:54402:54400:added later:/tmp:/bin/sh\n' >>/var/lib/extrausers/passwd
chmod 666 "$L"
expect_fail late-user-denied-before-sighup "Operation not permitted" as_user_past_modes ldaplate dd if=/tmp/nssjunk of="$L" $DDW seek=101
kill -HUP "$agd"
if wait_for_line /tmp/nss.log 'SIGHUP: allow-list re-resolved' 10; then
	pass sighup-logged "$(grep -m1 'SIGHUP: allow-list' /tmp/nss.log)"
else
	fail sighup-logged "$(tail -n 3 /tmp/nss.log)"
fi
grep -q 'SIGHUP: allow-list re-resolved: uids \[54400\] -> \[54400, 54402\]' /tmp/nss.log &&
	pass sighup-names-the-change || fail sighup-names-the-change "$(grep 'SIGHUP' /tmp/nss.log)"
expect_ok late-user-writes-after-sighup as_user ldaplate dd if=/tmp/nssjunk of="$L" $DDW seek=101
expect_fail root-still-denied "Operation not permitted" dd if=/tmp/nssjunk of="$L" $DDW seek=100

$C filter disable >/dev/null 2>&1
kill "$agd"; wait "$agd" 2>/dev/null
rm -rf "$RUN"
sed -i '/^ldaplate:/d' /var/lib/extrausers/passwd
losetup -d "$L" 2>/dev/null
vm_exit
