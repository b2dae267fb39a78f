#!/bin/sh
# asmguard %post ($1: 1 install, 2 upgrade): the configuration only when absent, the
# udev rules reloaded, the unit known to systemd and enabled (restarted on upgrade).
if [ ! -e /etc/asmguard/asmguard.toml ]; then
	mkdir -p /etc/asmguard
	cp /usr/share/asmguard/asmguard.toml /etc/asmguard/asmguard.toml
	chmod 0644 /etc/asmguard/asmguard.toml
fi
# ASMLib's command name, only where oracleasm-support does not provide it.
[ -e /usr/sbin/oracleasm ] || [ -L /usr/sbin/oracleasm ] || ln -s asmguardctl /usr/sbin/oracleasm || :
if [ -S /run/udev/control ]; then udevadm control --reload || :; fi
if [ -d /run/systemd/system ]; then systemctl daemon-reload || :; fi
if [ "$1" = 1 ]; then systemctl enable asmguard.service >/dev/null 2>&1 || :; fi
if [ "$1" -gt 1 ] && [ -d /run/systemd/system ]; then systemctl try-restart asmguard.service || :; fi
exit 0
