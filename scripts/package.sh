#!/usr/bin/env bash
# Build the packages (make package): target/package/asmguard_<version>_amd64.deb and,
# where rpmbuild is installed, target/package/asmguard-<version>-1.x86_64.rpm.
#
# The files are what scripts/install.sh installs (run into a staging DESTDIR: one file
# list for both), except the default configuration, which ships as
# /usr/share/asmguard/asmguard.toml and is copied to /etc/asmguard/ by the postinst
# only when absent, so an edited configuration is never overwritten. The maintainer
# scripts are packaging/deb/{postinst,prerm,postrm}, the RPM's scriptlets
# packaging/rpm/{post,preun,postun}.sh (the same life cycle; RPM has no purge: erase
# stops the service and detaches the pinned filter, and keeps /etc/asmguard).
# Prints the path of each package built.
#
#   scripts/package.sh [deb|rpm|all]   # default deb
#   BIN=target/release scripts/package.sh
set -euo pipefail
cd "$(dirname "$0")/.."
format=${1:-deb}
case $format in deb | rpm | all) ;; *) echo "package: unknown format '$format' (deb, rpm or all)" >&2; exit 2 ;; esac
out=${PACKAGE_OUT:-target/package}
version=$(awk -F'"' '/^\[workspace.package\]/ { w = 1 } w && /^version *=/ { print $2; exit }' Cargo.toml)
[ -n "$version" ] || { echo "package: no [workspace.package] version in Cargo.toml" >&2; exit 1; }
arch=$(dpkg --print-architecture)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root=$stage/root
mkdir -p "$root" "$out"

DESTDIR=$root scripts/install.sh >/dev/null
mkdir -p "$root/usr/share/asmguard" "$root/usr/lib/udev/rules.d"
mv "$root/etc/asmguard/asmguard.toml" "$root/usr/share/asmguard/asmguard.toml"
# A package's rules live in /usr/lib/udev/rules.d; a file of the same name in
# /etc/udev/rules.d (`asmguardctl udev-rules > ...` after changing owner/group/mode in
# the configuration) overrides them.
mv "$root/etc/udev/rules.d/99-asmguard.rules" "$root/usr/lib/udev/rules.d/"
rm -r "$root/etc"
strip --strip-unneeded "$root"/usr/sbin/*
gzip -9n "$root/usr/share/man/man8/asmguardctl.8"
doc=$root/usr/share/doc/asmguard
mkdir -p "$doc"
cat >"$doc/copyright" <<COPY
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: asmguard

Files: *
Copyright: 2025-2026 asmguard authors
License: Apache-2.0
 On Debian systems the full text is in /usr/share/common-licenses/Apache-2.0.
COPY
printf 'asmguard (%s) unstable; urgency=medium\n\n  * Package built from the asmguard source tree.\n\n -- asmguard maintainers <asmguard@example.invalid>  %s\n' \
    "$version" "$(date -R -d "@${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}")" |
    gzip -9n >"$doc/changelog.gz"

build_deb() {
# Depends: the packages that provide the binaries' shared libraries.
deps=$(for b in "$root"/usr/sbin/*; do ldd "$b"; done | awk '/=> \// { print $3 }' | sort -u |
    while read -r lib; do dpkg -S "$(realpath "$lib")" 2>/dev/null || dpkg -S "$lib" 2>/dev/null; done |
    cut -d: -f1 | sort -u | while read -r p; do
        if [ "$p" = libc6 ]; then echo "libc6 (>= $(dpkg-query -W -f='${Version}' libc6 | cut -d- -f1))"; else echo "$p"; fi
    done | paste -sd, | sed 's/,/, /g')

mkdir -p "$root/DEBIAN"
cat >"$root/DEBIAN/control" <<CTRL
Package: asmguard
Version: $version
Architecture: $arch
Maintainer: asmguard maintainers <asmguard@example.invalid>
Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)
Depends: $deps
Recommends: udev, systemd
Section: admin
Priority: optional
Homepage: https://example.invalid/asmguard
Description: ASM disk labels, stable device paths and write protection
 asmguard replaces Oracle ASMLib and the ASM Filter Driver: it labels disks
 for Oracle ASM, keeps stable /dev/asmguard/disks/<LABEL> paths through udev,
 and blocks every non-Oracle write to every path of a managed disk with eBPF
 LSM programs (a cgroup-device fallback where the BPF LSM is not active).
CTRL
install -m 0755 packaging/deb/postinst packaging/deb/prerm packaging/deb/postrm "$root/DEBIAN/"
deb=$out/asmguard_${version}_${arch}.deb
# (renamed into place: a concurrent reader never sees a half-written package)
dpkg-deb --root-owner-group -Zxz --build "$root" "$out/.new.$$.deb" >/dev/null
mv "$out/.new.$$.deb" "$deb"
rm -r "$root/DEBIAN"
echo "$deb"
}

build_rpm() {
	command -v rpmbuild >/dev/null || { echo "package: rpmbuild is not installed (apt-get install rpm)" >&2; return 1; }
	local top=$stage/rpm spec f
	mkdir -p "$top"
	spec=$top/asmguard.spec
	{
		cat <<SPEC
Name: asmguard
Version: $version
Release: 1
Summary: ASM disk labels, stable device paths and write protection
License: Apache-2.0
URL: https://example.invalid/asmguard
Group: System Environment/Daemons
Packager: asmguard maintainers <asmguard@example.invalid>
AutoReqProv: no
Requires: systemd, systemd-udev, libudev.so.1()(64bit)

%description
asmguard replaces Oracle ASMLib and the ASM Filter Driver: it labels disks
for Oracle ASM, keeps stable /dev/asmguard/disks/<LABEL> paths through udev,
and blocks every non-Oracle write to every path of a managed disk with eBPF
LSM programs.

%install
cp -a $root/. %{buildroot}/

SPEC
		for f in post preun postun; do
			echo "%$f"
			grep -v '^#!' "packaging/rpm/$f.sh"
			echo
		done
		echo "%files"
		(cd "$root" && find . -type f | sed 's|^\.||' | sort)
		echo
		echo "%changelog"
		echo "* $(LC_ALL=C date -u -d "@${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}" '+%a %b %d %Y') asmguard maintainers <asmguard@example.invalid> - $version-1"
		echo "- Package built from the asmguard source tree."
	} >"$spec"
	rpmbuild -bb --quiet --define "_topdir $top" --define "_build_id_links none" \
		--define "__os_install_post %{nil}" "$spec" >&2 || return 1
	f=$(find "$top/RPMS" -name '*.rpm' | head -n 1)
	cp "$f" "$out/.new.$$.rpm" && mv "$out/.new.$$.rpm" "$out/$(basename "$f")"
	echo "$out/$(basename "$f")"
}

[ "$format" = rpm ] || build_deb
[ "$format" = deb ] || build_rpm
