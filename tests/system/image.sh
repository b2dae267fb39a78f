#!/bin/bash
# tests/system/image.sh - the system lab's Debian 12 base image (the recipe).
#
#   tests/system/image.sh            build it (or reuse the cached one) and print its path
#
# mmdebstrap builds a bookworm root with systemd, udevd, journald, multipathd and the
# test tools into tests/system/cache/bookworm-<hash>.tar, where <hash> is the hash of
# this file: the image is rebuilt only when this recipe changes. The lab's users and
# groups have the VM lab's ids (tests/vm/initramfs.sh), but grid and oracle exist only
# in libnss-extrausers (/var/lib/extrausers), as directory users (LDAP, SSSD) would:
# nothing may find them by reading /etc/passwd. Prometheus gets the project's alert
# rules (dashboards/asmguard-alerts.yml, at /etc/prometheus/asmguard-alerts.yml; the
# image hash covers that file too). Kernel, modules and the project's package are
# added per run by run.sh (they change more often than this).

SYS_DIR=${SYS_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}
SYS_CACHE=${SYS_CACHE:-$SYS_DIR/cache}
SYS_ALERTS=$SYS_DIR/../../dashboards/asmguard-alerts.yml
SYS_USERS=$SYS_DIR/../vm/users.sh
. "$SYS_USERS"

SYS_IMAGE_PKGS="systemd systemd-sysv udev dbus kmod procps util-linux e2fsprogs
 multipath-tools sg3-utils fio prometheus libnss-extrausers curl ca-certificates
 coreutils findutils grep sed gawk
 libelf1 zlib1g libgcc-s1"

# sys_image_customize ROOT: users, groups, NSS, multipath, console (an mmdebstrap hook).
sys_image_customize() {
	local r=$1
	# local groups (members named even where the user itself is a directory user)
	printf '%s\n' "$LAB_GROUPS" >>"$r/etc/group"
	echo 'intruder:x:1001:1001:not an Oracle user:/home/intruder:/bin/sh' >>"$r/etc/passwd"
	echo 'intruder:*:19000:0:99999:7:::' >>"$r/etc/shadow"
	# grid and oracle: only in the directory stand-in
	mkdir -p "$r/var/lib/extrausers"
	cat >"$r/var/lib/extrausers/passwd" <<'PASSWD'
oracle:x:54321:54321:Oracle database owner:/home/oracle:/bin/sh
grid:x:54331:54321:Oracle grid owner:/home/grid:/bin/sh
PASSWD
	: >"$r/var/lib/extrausers/group"
	sed -i -e 's/^passwd:.*/passwd:         files extrausers/' \
		-e 's/^group:.*/group:          files extrausers/' "$r/etc/nsswitch.conf"
	mkdir -p "$r/home/oracle" "$r/home/grid" "$r/home/intruder"
	chown 54321:54321 "$r/home/oracle"
	chown 54331:54321 "$r/home/grid"
	chown 1001:1001 "$r/home/intruder"
	# root login without a password on the console (a throwaway lab image)
	sed -i 's/^root:[^:]*:/root::/' "$r/etc/shadow"
	echo asmguard-sys >"$r/etc/hostname"
	printf '/dev/nvme0n1 / ext4 rw,errors=remount-ro 0 1\n' >"$r/etc/fstab"
	# every SCSI LUN with a WWID is multipathed (the lab's scsi_debug LUN has two paths)
	cat >"$r/etc/multipath.conf" <<'MPATH'
defaults {
	user_friendly_names yes
	find_multipaths no
}
blacklist {
	devnode "^nvme"
}
MPATH
	# the project's alert rules, for the image's Prometheus (rule_files in the test's
	# prometheus.yml)
	install -m 0644 "$SYS_ALERTS" "$r/etc/prometheus/asmguard-alerts.yml"
	# the results go out on the second serial port; the first stays the console
	systemctl --root="$r" mask serial-getty@ttyS0.service getty@tty1.service \
		apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer man-db.timer >/dev/null 2>&1 || true
}

# sys_image: prints the cached image tarball, building it first when needed.
sys_image() {
	local hash tar
	hash=$(cat "$SYS_DIR/image.sh" "$SYS_USERS" "$SYS_ALERTS" | sha256sum | cut -c1-12)
	tar=$SYS_CACHE/bookworm-$hash.tar
	if [ ! -s "$tar" ]; then
		mkdir -p "$SYS_CACHE"
		echo "image: building $tar (mmdebstrap bookworm)" >&2
		local t0=$SECONDS
		# shellcheck disable=SC2086
		mmdebstrap --variant=minbase --format=tar --include="$(echo $SYS_IMAGE_PKGS | tr ' ' ',')" \
			--customize-hook="$SYS_DIR/image.sh customize \"\$1\"" \
			bookworm "$tar.part" >&2 || { rm -f "$tar.part"; return 1; }
		mv "$tar.part" "$tar"
		echo "image: built in $((SECONDS - t0))s ($(du -h "$tar" | cut -f1))" >&2
	fi
	echo "$tar"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	set -euo pipefail
	case ${1:-} in
	customize) sys_image_customize "$2" ;;
	*) sys_image ;;
	esac
fi
