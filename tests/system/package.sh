#!/bin/bash
# tests/system/package.sh - the Debian package, checked on the host.
#
#   tests/system/package.sh
#
# Builds the .deb (scripts/package.sh) and checks: every file scripts/install.sh lays
# down is in it (one file list), the maintainer scripts are there, lintian reports no
# error, and its life cycle in a chroot of the system lab's Debian 12 image
# (tests/system/image.sh): apt installs it offline, the configuration is created and
# the unit enabled; an edited configuration survives a reinstall and a remove; purge
# removes the configuration, the enablement and the pinned filter directory.
# Prints "PASS|FAIL system-package <check> <detail>" lines and one summary line
# "system-package: N passed, M failed"; exits non-zero on any failure.

set -uo pipefail
SYS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$SYS_DIR/../.." && pwd)
. "$SYS_DIR/image.sh"
. "$SYS_DIR/report.sh"
sys_report_init system-package

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

deb=$(cd "$ROOT" && BIN=${BIN:-target/release} scripts/package.sh 2>"$tmp/build.err") && deb=$ROOT/$deb
if [ ! -s "$deb" ]; then
	sys_fail build "scripts/package.sh: $(tail -n 3 "$tmp/build.err")"
	sys_report_end
	exit 1
fi
sys_pass build "$(basename "$deb") $(du -h "$deb" | cut -f1)"

# Every installed file, at its package place (config and rules move, man page gzipped).
(cd "$ROOT" && DESTDIR=$tmp/inst BIN=${BIN:-target/release} scripts/install.sh >/dev/null)
dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|' >"$tmp/listing"
missing=""
while read -r f; do
	case $f in
	/etc/asmguard/asmguard.toml) f=/usr/share/asmguard/asmguard.toml ;;
	/etc/udev/rules.d/*) f=/usr/lib/udev/rules.d/${f##*/} ;;
	*.8) f=$f.gz ;;
	esac
	grep -qxF "$f" "$tmp/listing" || missing="$missing $f"
done < <(cd "$tmp/inst" && find . -type f | sed 's|^\.||')
if [ -z "$missing" ]; then
	sys_pass contents "$(grep -c '[^/]$' "$tmp/listing") files, every file install.sh installs"
else
	sys_fail contents "missing from the package:$missing"
fi
scripts=$(dpkg-deb -I "$deb" | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^(postinst|prerm|postrm)$/) print $i }' | sort | paste -sd' ')
if [ "$scripts" = "postinst postrm prerm" ]; then
	sys_pass maintainer-scripts "$scripts"
else
	sys_fail maintainer-scripts "expected postinst postrm prerm, found: $scripts"
fi
if command -v lintian >/dev/null; then
	lint=$(lintian "$deb" 2>/dev/null)
	if echo "$lint" | grep -q '^E:'; then
		sys_fail lintian "$(echo "$lint" | grep '^E:' | paste -sd' ')"
	else
		sys_pass lintian "no errors; $(echo "$lint" | grep -c '^W:') warnings: $(echo "$lint" | grep '^W:' | cut -d' ' -f3 | paste -sd' ')"
	fi
else
	sys_fail lintian "lintian is not installed (scripts/deps.sh installs it)"
fi

# The RPM: the same files, the three scriptlets.
rpmf=$(cd "$ROOT" && BIN=${BIN:-target/release} scripts/package.sh rpm 2>"$tmp/rpm.err") && rpmf=$ROOT/$rpmf
if [ -s "$rpmf" ]; then
	rpm -qpl "$rpmf" 2>/dev/null | sort >"$tmp/rpm.files"
	grep '[^/]$' "$tmp/listing" | sort >"$tmp/deb.files"
	if cmp -s "$tmp/rpm.files" "$tmp/deb.files"; then
		sys_pass rpm-contents "$(basename "$rpmf"): the .deb's $(wc -l <"$tmp/deb.files") files"
	else
		sys_fail rpm-contents "rpm and deb differ: $(diff "$tmp/deb.files" "$tmp/rpm.files" | grep '^[<>]' | paste -sd' ')"
	fi
	sc=$(rpm -qp --scripts "$rpmf" 2>/dev/null | sed -n 's/^\([a-z]*\) scriptlet.*/\1/p' | paste -sd' ')
	if [ "$sc" = "postinstall preuninstall postuninstall" ]; then
		sys_pass rpm-scriptlets "$sc"
	else
		sys_fail rpm-scriptlets "expected postinstall preuninstall postuninstall, found: $sc"
	fi
else
	sys_fail rpm-build "scripts/package.sh rpm: $(tail -n 3 "$tmp/rpm.err")"
fi

# Life cycle in a chroot of the lab image.
if ! image=$(sys_image); then
	sys_fail image "could not build the system lab image (tests/system/image.sh)"
	sys_report_end
	exit 1
fi
r=$tmp/root
mkdir -p "$r"
tar -C "$r" -xf "$image"
cp "$deb" "$r/tmp/asmguard.deb"
mkdir -p "$r/sys/fs/bpf/asmguard/progs" && : >"$r/sys/fs/bpf/asmguard/progs/stand-in"
in_root() { chroot "$r" env DEBIAN_FRONTEND=noninteractive PATH=/usr/sbin:/usr/bin:/sbin:/bin "$@"; }
conf=/etc/asmguard/asmguard.toml
wants=/etc/systemd/system/multi-user.target.wants/asmguard.service
if out=$(in_root apt-get install -y -q /tmp/asmguard.deb 2>&1); then
	sys_pass install "apt-get install ./$(basename "$deb") (offline: its dependencies are in the image)"
else
	sys_fail install "$(echo "$out" | tail -n 3)"
fi
if cmp -s "$r$conf" "$r/usr/share/asmguard/asmguard.toml"; then
	sys_pass config-created "$conf is the default"
else
	sys_fail config-created "$conf missing or not the default"
fi
if [ -L "$r$wants" ]; then
	sys_pass enabled "$wants -> $(readlink "$r$wants")"
else
	sys_fail enabled "no $wants after install"
fi
mkdir -p "$r/etc/asmguard"
echo '# edited by the administrator' >>"$r$conf"
edited=$(sha256sum <"$r$conf")
is_edited() { [ -f "$r$conf" ] && [ "$(sha256sum <"$r$conf")" = "$edited" ]; }
in_root dpkg -i /tmp/asmguard.deb >/dev/null 2>&1
if is_edited; then
	sys_pass config-kept-on-reinstall "an edited $conf survives dpkg -i of the package again"
else
	sys_fail config-kept-on-reinstall "$conf changed by a reinstall"
fi
in_root apt-get remove -y -q asmguard >/dev/null 2>&1
if [ ! -e "$r/usr/sbin/asmguardd" ] && is_edited &&
	[ -e "$r/sys/fs/bpf/asmguard/progs/stand-in" ]; then
	sys_pass remove "binaries gone, edited configuration and pinned filter kept"
else
	sys_fail remove "after remove: asmguardd $([ -e "$r/usr/sbin/asmguardd" ] && echo present || echo gone), config $([ -e "$r$conf" ] && echo present || echo gone), pins $([ -e "$r/sys/fs/bpf/asmguard" ] && echo present || echo gone)"
fi
in_root apt-get purge -y -q asmguard >/dev/null 2>&1
if [ ! -e "$r/etc/asmguard" ] && [ ! -e "$r/sys/fs/bpf/asmguard" ] && [ ! -L "$r$wants" ]; then
	sys_pass purge "configuration, pinned filter and enablement removed"
else
	sys_fail purge "left behind:$([ -e "$r/etc/asmguard" ] && echo " /etc/asmguard")$([ -e "$r/sys/fs/bpf/asmguard" ] && echo " /sys/fs/bpf/asmguard")$([ -L "$r$wants" ] && echo " $wants")"
fi
sys_report_end
