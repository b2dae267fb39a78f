#!/bin/sh
# asmguard %postun ($1: 0 erase, 1 upgrade): on erase, detach the pinned write filter
# (no daemon is left to manage it; as scripts/uninstall.sh does first) and reload
# systemd and udev. /etc/asmguard stays (RPM has no purge).
if [ "$1" = 0 ]; then
	# the oracleasm name, when it is asmguard's
	[ "$(readlink /usr/sbin/oracleasm 2>/dev/null)" != asmguardctl ] || rm -f /usr/sbin/oracleasm
	rm -rf /sys/fs/bpf/asmguard
	if [ -d /run/systemd/system ]; then systemctl daemon-reload || :; fi
	if [ -S /run/udev/control ]; then udevadm control --reload || :; fi
fi
exit 0
