#!/usr/bin/env bash
# Uninstall asmguard (make uninstall): first the write filter (its BPF programs are
# pinned under /sys/fs/bpf/asmguard and outlive the daemon by design: they are
# detached and unpinned here), then the service, the binaries, the unit, the udev
# rules, the man page and the completions. The configuration stays unless PURGE=1.
#
#   sudo scripts/uninstall.sh
#   DESTDIR=/tmp/pkgroot scripts/uninstall.sh   # a staged tree (no systemctl, no BPF)
set -euo pipefail
DESTDIR=${DESTDIR:-}
PIN=${ASMGUARD_PIN_DIR:-/sys/fs/bpf/asmguard}
say() { echo "uninstall: $*"; }

if [ -z "$DESTDIR" ]; then
    if [ -x /usr/sbin/asmguardctl ] && /usr/sbin/asmguardctl filter disable >/dev/null 2>&1; then
        say "write filter disabled through asmguardd"
    fi
    systemctl disable --now asmguard.service 2>/dev/null || true
    if [ -e "$PIN" ]; then
        # unlinking the pins drops the last references: the programs detach
        rm -rf "$PIN"
        say "write filter removed ($PIN)"
    fi
fi
for f in /usr/sbin/asmguardd /usr/sbin/asmguardctl /usr/lib/systemd/system/asmguard.service \
    /etc/udev/rules.d/99-asmguard.rules /usr/share/man/man8/asmguardctl.8 \
    /usr/share/bash-completion/completions/asmguardctl /usr/share/zsh/vendor-completions/_asmguardctl \
    /usr/share/fish/vendor_completions.d/asmguardctl.fish; do
    if [ -e "$DESTDIR$f" ]; then rm -f "$DESTDIR$f"; say "removed $DESTDIR$f"; fi
done
if [ "$(readlink "$DESTDIR/usr/sbin/oracleasm" 2>/dev/null)" = asmguardctl ]; then
    rm -f "$DESTDIR/usr/sbin/oracleasm"
    say "removed $DESTDIR/usr/sbin/oracleasm"
fi
if [ "${PURGE:-0}" = 1 ]; then
    rm -rf "$DESTDIR/etc/asmguard"
    say "removed $DESTDIR/etc/asmguard"
else
    [ -e "$DESTDIR/etc/asmguard" ] && say "kept $DESTDIR/etc/asmguard (PURGE=1 removes it)"
fi
if [ -z "$DESTDIR" ]; then
    systemctl daemon-reload 2>/dev/null || true
    udevadm control --reload 2>/dev/null || true
fi
say "done"
