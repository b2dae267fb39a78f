# shellcheck shell=sh
# asmguard system lab: helpers shared by tests/system/guest/tests/*.sh (after
# /vmtests/lib.sh). The daemon is the packaged one, run by systemd.

C=asmguardctl
DDW="bs=4096 count=1 conv=notrunc oflag=direct"
dd if=/dev/zero bs=4096 count=1 2>/dev/null | tr '\0' 'X' >/tmp/junk
dd if=/tmp/junk of=/tmp/junk512 bs=512 count=1 2>/dev/null

# sys_service_up: starts asmguard if needed and waits until it answers (20 s).
sys_service_up() {
	systemctl start asmguard.service >/dev/null 2>&1
	_i=0
	while [ $_i -lt 200 ] && ! $C status >/dev/null 2>&1; do _i=$((_i + 1)); sleep 0.1; done
	$C status >/dev/null 2>&1
}

# The multipath fixture's label, shared by the tests (the first to need it labels it).
SYS_LABEL=SYSDISK1
SYS_LINK=/dev/asmguard/disks/$SYS_LABEL

# sys_mpath_label: labels the multipath fixture SYS_LABEL (once) and waits for udevd's
# link SYS_LINK (20 s). Returns non-zero if either did not happen.
sys_mpath_label() {
	if [ "$(blkid -p -o value -s LABEL "$SYS_MPATH" 2>/dev/null)" != "$SYS_LABEL" ]; then
		$C label "$SYS_LABEL" "$SYS_MPATH" >/tmp/label.out 2>&1 || { cat /tmp/label.out; return 1; }
	fi
	sys_wait_link "$SYS_LABEL" 200
}

# sys_wait_link LABEL TENTHS: waits up to TENTHS tenths of a second for the link.
sys_wait_link() {
	_i=0
	while [ $_i -lt "$2" ] && [ ! -e "/dev/asmguard/disks/$1" ]; do _i=$((_i + 1)); sleep 0.1; done
	[ -e "/dev/asmguard/disks/$1" ]
}
