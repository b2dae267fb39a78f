#!/bin/sh
# nss: grid and oracle exist only in libnss-extrausers (the image's stand-in for
# LDAP/SSSD), never in /etc/passwd; the packaged daemon's allow-list still resolves
# grid, whose writes through the link are allowed while root's are denied.
. /vmtests/lib.sh
. /vmtests/syslib.sh

for u in grid oracle; do
	if getent passwd "$u" >/dev/null && ! grep -q "^$u:" /etc/passwd && grep -q "^$u:" /var/lib/extrausers/passwd; then
		pass "$u-from-extrausers-only" "$(getent passwd "$u")"
	else
		fail "$u-from-extrausers-only" "getent: $(getent passwd "$u"); /etc/passwd: $(grep "^$u:" /etc/passwd)"
	fi
done
sys_service_up || { fail setup "asmguard does not answer"; vm_exit; }
sys_mpath_label >/tmp/nss.out 2>&1 || { fail setup "label/link: $(cat /tmp/nss.out)"; vm_exit; }
link=$SYS_LINK
expect_ok grid-writes-through-link as_user grid dd if=/tmp/junk of="$link" $DDW seek=300
expect_ok grid-reads-status as_user grid /usr/sbin/asmguardctl status
expect_fail root-denied "Operation not permitted" dd if=/tmp/junk of="$link" $DDW seek=300
vm_exit
