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
# removes the configuration, the enablement and the pinned filter directory. The .rpm:
# its files and scriptlets (rpm -qpl --scripts), rpmlint, and its life cycle in the same root
# with rpm --root --nodeps (install, upgrade with an edited configuration, erase).
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

deb=$(cd "$ROOT" && flock target/.package.lock env BIN=${BIN:-target/release} scripts/package.sh 2>"$tmp/build.err") && deb=$ROOT/$deb
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
# the daemon links libudev (its udev event source): the package must pull it in
dep=$(dpkg-deb -f "$deb" Depends)
case ", $dep," in
*", libudev1"[,\ ]*) sys_pass depends-libudev "Depends: $dep" ;;
*) sys_fail depends-libudev "no libudev1 in Depends: $dep" ;;
esac
if command -v lintian >/dev/null; then
	lint=$(lintian "$deb" 2>/dev/null)
	if grep -q '^E:' <<<"$lint"; then
		sys_fail lintian "$(echo "$lint" | grep '^E:' | paste -sd' ')"
	else
		sys_pass lintian "no errors; $(echo "$lint" | grep -c '^W:') warnings: $(echo "$lint" | grep '^W:' | cut -d' ' -f3 | paste -sd' ')"
	fi
else
	sys_fail lintian "lintian is not installed (scripts/deps.sh installs it)"
fi

# The RPM: the same files, the three scriptlets.
rpmf=$(cd "$ROOT" && flock target/.package.lock env BIN=${BIN:-target/release} scripts/package.sh rpm 2>"$tmp/rpm.err") && rpmf=$ROOT/$rpmf
if [ -s "$rpmf" ]; then
	rpm -qpl "$rpmf" 2>/dev/null | sort >"$tmp/rpm.files"
	grep '[^/]$' "$tmp/listing" | sort >"$tmp/deb.files"
	if cmp -s "$tmp/rpm.files" "$tmp/deb.files"; then
		sys_pass rpm-contents "$(basename "$rpmf"): the .deb's $(wc -l <"$tmp/deb.files") files"
	else
		sys_fail rpm-contents "rpm and deb differ: $(diff "$tmp/deb.files" "$tmp/rpm.files" | grep '^[<>]' | paste -sd' ')"
	fi
	req=$(rpm -qpR "$rpmf" 2>/dev/null | paste -sd' ')
	case " $req " in
	*" libudev.so.1()(64bit) "*) sys_pass rpm-requires-libudev "Requires: $req" ;;
	*) sys_fail rpm-requires-libudev "no libudev.so.1()(64bit) in Requires: $req" ;;
	esac
	# rpmlint (PyPI; Debian has no package of it) in a venv over Debian's python3-rpm.
	# An unsigned local build is its one accepted error: signing is the distributor's.
	lintenv=$SYS_DIR/work/rpmlint-venv
	if [ ! -x "$lintenv/bin/rpmlint" ]; then
		python3 -m venv --system-site-packages "$lintenv" >/dev/null 2>&1 &&
			"$lintenv/bin/pip" install -q rpmlint >/dev/null 2>&1
	fi
	if [ -x "$lintenv/bin/rpmlint" ]; then
		lint=$("$lintenv/bin/rpmlint" "$rpmf" 2>/dev/null)
		errs=$(echo "$lint" | grep ': E: ' | grep -v ': E: no-signature$')
		if [ -z "$errs" ]; then
			sys_pass rpmlint "no errors but no-signature; $(echo "$lint" | grep -c ': W: ') warnings: $(echo "$lint" | sed -n 's/.*: W: \([^ ]*\).*/\1/p' | paste -sd' ')"
		else
			sys_fail rpmlint "$(echo "$errs" | paste -sd' ')"
		fi
	else
		sys_fail rpmlint "could not install rpmlint into $lintenv (python3-venv, python3-rpm, pip)"
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

# The .rpm's life cycle in the same root (clean again after the purge), with rpm's
# own database in it (rpm --root chroots to run the scriptlets with the root's
# /bin/sh and systemctl). --nodeps: a Debian root has no rpm package providing
# systemd or libudev.so.1, so this proves the files and the scriptlets (config
# created only when absent and kept, unit enabled and disabled, pins removed on
# erase, nothing left), not dependency resolution on Oracle Linux.
if [ -s "${rpmf:-}" ]; then
	# (--force-debian: Debian's rpm otherwise warns that dpkg owns the system)
	rpm_in() { rpm --force-debian --root "$r" --nodeps --quiet "$@" 2>&1; }
	rpm --root "$r" --initdb
	if out=$(rpm_in -i "$rpmf") && [ -x "$r/usr/sbin/asmguardd" ] &&
		cmp -s "$r$conf" "$r/usr/share/asmguard/asmguard.toml" && [ -L "$r$wants" ]; then
		sys_pass rpm-install "rpm -i: $(rpm --root "$r" -q asmguard), default $conf, unit enabled"
	else
		sys_fail rpm-install "$out :: asmguardd $([ -x "$r/usr/sbin/asmguardd" ] && echo present || echo missing), config $([ -e "$r$conf" ] && echo present || echo missing), $wants $([ -L "$r$wants" ] && echo present || echo missing)"
	fi
	mkdir -p "$r/etc/asmguard"
	echo '# edited by the administrator' >>"$r$conf"
	edited=$(sha256sum <"$r$conf")
	if out=$(rpm_in -U --replacepkgs "$rpmf") && is_edited && [ -x "$r/usr/sbin/asmguardd" ] && [ -L "$r$wants" ]; then
		sys_pass rpm-upgrade-keeps-config "rpm -U --replacepkgs: edited $conf kept, unit still enabled"
	else
		sys_fail rpm-upgrade-keeps-config "$out :: config $(is_edited && echo kept || echo changed), enabled $([ -L "$r$wants" ] && echo yes || echo no)"
	fi
	mkdir -p "$r/sys/fs/bpf/asmguard/progs" && : >"$r/sys/fs/bpf/asmguard/progs/stand-in"
	out=$(rpm_in -e asmguard)
	left=$(rpm --root "$r" -qa 2>/dev/null | grep -c '^asmguard')
	if [ "$left" = 0 ] && [ ! -e "$r/usr/sbin/asmguardd" ] && [ ! -L "$r$wants" ] &&
		[ ! -e "$r/sys/fs/bpf/asmguard" ] && is_edited; then
		sys_pass rpm-erase "rpm -e: binaries and enablement gone, pins removed, edited $conf kept (rpm has no purge)"
	else
		sys_fail rpm-erase "$out :: rpm -q $left, asmguardd $([ -e "$r/usr/sbin/asmguardd" ] && echo present || echo gone), enabled $([ -L "$r$wants" ] && echo yes || echo no), pins $([ -e "$r/sys/fs/bpf/asmguard" ] && echo present || echo gone), config $(is_edited && echo kept || echo changed)"
	fi
fi
sys_report_end
