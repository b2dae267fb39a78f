#!/bin/bash
# tests/system/image.sh - the system lab's Debian 12 base image (the recipe).
#
#   tests/system/image.sh [containers]   build it (or reuse the cached one) and print its path
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
#
# The container tests (guest/tests/{lxc,podman,nspawn}.sh) get a variant of the image
# (bookworm-containers-<hash>.tar) with Debian's lxc, podman (crun) and
# systemd-container (nspawn, machined), uidmap and bpftool, and one
# small container root file system built here from the image's own files:
# /var/lib/ctr-lab/rootfs (sys_ctr_rootfs: the shell and tools the tests run inside a
# container, their libraries, and the container's users and groups). No registry:
# podman imports it from a tarball in the guest.

SYS_DIR=${SYS_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}
SYS_CACHE=${SYS_CACHE:-$SYS_DIR/cache}
SYS_ALERTS=$SYS_DIR/../../dashboards/asmguard-alerts.yml
SYS_USERS=$SYS_DIR/../vm/users.sh
. "$SYS_USERS"

SYS_IMAGE_PKGS="systemd systemd-sysv udev dbus kmod procps util-linux e2fsprogs
 multipath-tools sg3-utils fio prometheus libnss-extrausers curl ca-certificates
 coreutils findutils grep sed gawk
 libelf1 zlib1g libgcc-s1"
# The container variant's packages (SYS_IMAGE_VARIANT=containers: the tests marked
# named-only, guest/tests/{lxc,podman,nspawn}.sh). A variant of its own: a busier
# boot shifts the other tests' timings (the reboot test's link before ohasd races
# udevd's handling of the daemon's change event, which it lost on this image).
SYS_CTR_PKGS="lxc podman crun systemd-container uidmap bpftool"
# The pair's variant (tests/system/pair.sh): what Ansible needs on a managed node
# (sshd, python3), for the rollout test that runs ansible-playbook from the host.
SYS_PAIR_PKGS="openssh-server python3"

# The container root's tools (copied from the image with their libraries).
SYS_CTR_BINS="dash sleep dd cat id ls stat cmp sha256sum head tail tr cut grep sed env
 true false printf readlink mkdir rm mv touch chmod wc od uname mknod date timeout
 blkid blockdev losetup mount umount dmsetup setpriv getent"
# and the libraries of the project's asmguardctl (bound into the containers per run)
SYS_CTR_LIBS="/usr/lib/x86_64-linux-gnu/libgcc_s.so.1"

# sys_ctr_rootfs ROOT: /var/lib/ctr-lab/rootfs in ROOT, a container root file system
# made of ROOT's own files (SYS_CTR_BINS and the libraries ldd names), merged-/usr
# links, os-release (systemd-nspawn wants one), and the users and groups of the spec:
# grid 54331 (oinstall; asmadmin, asmdba, asmoper), oracle 54321 (oinstall; dba,
# asmdba), intruder 1001, all in the container's own /etc/passwd and /etc/group.
sys_ctr_rootfs() {
	local r=$1 c=$1/var/lib/ctr-lab/rootfs b p l
	mkdir -p "$c"/usr/bin "$c"/usr/sbin "$c"/usr/lib/x86_64-linux-gnu "$c"/usr/lib64 "$c"/usr/local/bin
	ln -s usr/bin "$c/bin"
	ln -s usr/sbin "$c/sbin"
	ln -s usr/lib "$c/lib"
	ln -s usr/lib64 "$c/lib64"
	# (mount points exist beforehand: the runtimes may not create them in a root they do
	# not own, user-namespaced)
	mkdir -p "$c"/etc "$c"/proc "$c"/sys "$c"/dev "$c"/run/asmguard "$c"/tmp "$c"/var/tmp "$c"/root \
		"$c"/mnt/bpf "$c"/home/grid "$c"/home/oracle "$c"/home/intruder
	: >"$c/usr/local/bin/asmguardctl"
	chmod 1777 "$c/tmp" "$c/var/tmp"
	for b in $SYS_CTR_BINS; do
		p=/usr/bin/$b
		[ -f "$r$p" ] || p=/usr/sbin/$b
		[ -f "$r$p" ] || { echo "sys_ctr_rootfs: no $b in the image's /usr/bin or /usr/sbin" >&2; return 1; }
		cp -L "$r$p" "$c$p"
		for l in $(chroot "$r" /usr/bin/ldd "$p" | grep -o '/[^ ]*'); do
			[ -e "$c$l" ] && continue
			mkdir -p "$(dirname "$c$l")"
			cp -L "$r$l" "$c$l"
		done
	done
	for l in $SYS_CTR_LIBS; do cp -L "$r$l" "$c$l"; done
	ln -s dash "$c/usr/bin/sh"
	cp -L "$r/usr/lib/os-release" "$c/usr/lib/os-release"
	ln -s ../usr/lib/os-release "$c/etc/os-release"
	printf 'root:x:0:0:root:/root:/bin/sh\n%s\n%s\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n' \
		"$LAB_ORACLE_USERS" "$LAB_INTRUDER" >"$c/etc/passwd"
	{
		echo 'root:x:0:'
		printf '%s\n' "$LAB_GROUPS"
		echo 'nogroup:x:65534:'
	} >"$c/etc/group"
	printf 'passwd: files\ngroup: files\n' >"$c/etc/nsswitch.conf"
	echo ctr >"$c/etc/hostname"
	chown 54321:54321 "$c/home/oracle"
	chown 54331:54321 "$c/home/grid"
	chown 1001:1001 "$c/home/intruder"
}

# sys_image_customize ROOT: users, groups, NSS, multipath, console (an mmdebstrap hook).
sys_image_customize() {
	local r=$1
	# local groups (members named even where the user itself is a directory user)
	printf '%s\n' "$LAB_GROUPS" >>"$r/etc/group"
	printf '%s\n' "$LAB_INTRUDER" >>"$r/etc/passwd"
	echo 'intruder:*:19000:0:99999:7:::' >>"$r/etc/shadow"
	# grid and oracle: only in the directory stand-in
	mkdir -p "$r/var/lib/extrausers"
	printf '%s\n' "$LAB_ORACLE_USERS" >"$r/var/lib/extrausers/passwd"
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
	if [ "${2:-}" = pair ]; then
		# root by key only (pair.sh installs the run's key); no DNS lookups at login
		systemctl --root="$r" enable ssh.service >/dev/null 2>&1 || true
		printf 'PermitRootLogin prohibit-password\nUseDNS no\n' >"$r/etc/ssh/sshd_config.d/lab.conf"
	fi
	[ "${2:-}" = containers ] || return 0
	# containers: no network (lxc-net's bridge and dnsmasq), nothing autostarted, no
	# podman at boot (podman-auto-update.service runs at every boot otherwise)
	systemctl --root="$r" mask lxc-net.service lxc.service lxc-monitord.service \
		podman.service podman.socket podman-restart.service podman-auto-update.timer \
		podman-auto-update.service podman-clean-transient.service >/dev/null 2>&1 || true
	sys_ctr_rootfs "$r"
}

# sys_image [containers|pair]: prints the cached image tarball (the base one, the
# container variant: SYS_CTR_PKGS and the container root file system on top; the
# pair's: SYS_PAIR_PKGS, sshd enabled), building it first when needed.
sys_image() {
	local hash tar v=${1:-} pkgs=$SYS_IMAGE_PKGS
	hash=$(cat "$SYS_DIR/image.sh" "$SYS_USERS" "$SYS_ALERTS" | sha256sum | cut -c1-12)
	tar=$SYS_CACHE/bookworm-$hash.tar
	case $v in
	containers)
		tar=$SYS_CACHE/bookworm-containers-$hash.tar
		pkgs="$pkgs $SYS_CTR_PKGS" ;;
	pair)
		tar=$SYS_CACHE/bookworm-pair-$hash.tar
		pkgs="$pkgs $SYS_PAIR_PKGS" ;;
	esac
	mkdir -p "$SYS_CACHE"
	# one builder per image (the system lab's runs may start side by side)
	exec 6>"$tar.lock"
	flock 6
	if [ ! -s "$tar" ]; then
		mkdir -p "$SYS_CACHE"
		echo "image: building $tar (mmdebstrap bookworm)" >&2
		local t0=$SECONDS
		# (without the labs' lock fds: mmdebstrap's hooks run under dash, which cannot
		# name an fd above 9, and it takes the next free ones)
		# shellcheck disable=SC2086
		mmdebstrap --variant=minbase --format=tar --include="$(echo $pkgs | tr ' ' ',')" \
			--customize-hook="$SYS_DIR/image.sh customize \"\$1\" $v" \
			bookworm "$tar.part" >&2 7>&- 8>&- 9>&- || { rm -f "$tar.part"; return 1; }
		mv "$tar.part" "$tar"
		echo "image: built in $((SECONDS - t0))s ($(du -h "$tar" | cut -f1))" >&2
	fi
	exec 6>&-
	echo "$tar"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	set -euo pipefail
	case ${1:-} in
	customize) sys_image_customize "$2" "${3:-}" ;;
	*) sys_image "${1:-}" ;;
	esac
fi
