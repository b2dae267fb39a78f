#!/bin/sh
# asmguard %preun ($1: 0 erase, 1 upgrade): on erase, stop and disable the service.
if [ "$1" = 0 ]; then
	if [ -d /run/systemd/system ]; then systemctl stop asmguard.service || :; fi
	systemctl disable asmguard.service >/dev/null 2>&1 || :
fi
exit 0
