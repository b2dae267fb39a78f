#!/usr/bin/env bash
# Install asmguard (make install): binaries, systemd unit, udev rules, default config
# (never overwritten), man page and shell completions.
#
#   sudo scripts/install.sh                 # builds a release first
#   DESTDIR=/tmp/pkgroot scripts/install.sh # stage for a package (no systemctl/udevadm)
#   BIN=target/debug scripts/install.sh     # use already built binaries
#
# Then: systemctl enable --now asmguard
set -euo pipefail
cd "$(dirname "$0")/.."
DESTDIR=${DESTDIR:-}
if [ -z "${BIN:-}" ]; then
    cargo build --release -p asmguardd -p asmguardctl
    BIN=target/release
fi
for b in asmguardd asmguardctl; do
    [ -x "$BIN/$b" ] || { echo "install: $BIN/$b is missing (build first)" >&2; exit 1; }
done
say() { echo "install: $*"; }

install -D -m 0755 "$BIN/asmguardd" "$DESTDIR/usr/sbin/asmguardd"
install -D -m 0755 "$BIN/asmguardctl" "$DESTDIR/usr/sbin/asmguardctl"
say "binaries in $DESTDIR/usr/sbin"
install -D -m 0644 systemd/asmguard.service "$DESTDIR/usr/lib/systemd/system/asmguard.service"
say "unit $DESTDIR/usr/lib/systemd/system/asmguard.service"
CONF="$DESTDIR/etc/asmguard/asmguard.toml"
if [ -e "$CONF" ]; then
    say "keeping the existing $CONF"
else
    install -D -m 0644 daemon/asmguard.toml "$CONF"
    say "default config $CONF"
fi
"$BIN/asmguardctl" udev-rules --config "$CONF" > "$DESTDIR/.asmguard-rules.tmp"
install -D -m 0644 "$DESTDIR/.asmguard-rules.tmp" "$DESTDIR/etc/udev/rules.d/99-asmguard.rules"
rm -f "$DESTDIR/.asmguard-rules.tmp"
say "udev rules $DESTDIR/etc/udev/rules.d/99-asmguard.rules (owner/group/mode from $CONF)"
mkdir -p "$DESTDIR/usr/share/man/man8" "$DESTDIR/usr/share/bash-completion/completions" \
    "$DESTDIR/usr/share/zsh/vendor-completions" "$DESTDIR/usr/share/fish/vendor_completions.d"
"$BIN/asmguardctl" man > "$DESTDIR/usr/share/man/man8/asmguardctl.8"
"$BIN/asmguardctl" completions bash > "$DESTDIR/usr/share/bash-completion/completions/asmguardctl"
"$BIN/asmguardctl" completions zsh > "$DESTDIR/usr/share/zsh/vendor-completions/_asmguardctl"
"$BIN/asmguardctl" completions fish > "$DESTDIR/usr/share/fish/vendor_completions.d/asmguardctl.fish"
say "man page and completions in $DESTDIR/usr/share"
if [ -z "$DESTDIR" ]; then
    # ASMLib's command name (asmguardctl oracleasm ...), only where oracleasm-support
    # does not provide it.
    if [ ! -e /usr/sbin/oracleasm ] && [ ! -L /usr/sbin/oracleasm ]; then
        ln -s asmguardctl /usr/sbin/oracleasm
        say "oracleasm -> asmguardctl in /usr/sbin"
    fi
    systemctl daemon-reload 2>/dev/null || true
    udevadm control --reload 2>/dev/null || true
    say "done: review /etc/asmguard/asmguard.toml, then: systemctl enable --now asmguard"
fi
