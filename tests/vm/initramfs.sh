#!/bin/bash
# tests/vm/initramfs.sh - build the guest initramfs for one kernel line.
#
#   tests/vm/initramfs.sh LINE        (after kernels.sh LINE)
#
# Output: tests/vm/work/LINE/initramfs.cpio.gz, the concatenation of
#   work/common.cpio.gz   busybox, test tools + their libraries, the project's
#                         binaries from target/release, users, guest scripts
#   work/LINE/modules.cpio.gz   the kernel's modules picked by kernels.sh
# (the kernel unpacks concatenated cpio archives in order).
#
# Project binaries: every executable file directly in $CARGO_TARGET_DIR/release
# (default target/release) goes to /usr/local/bin, stripped of debug info, with
# its shared libraries. Add host tools to the guest with VM_EXTRA_TOOLS="a b".

VM_DIR=${VM_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}
VM_ROOT=${VM_ROOT:-$(cd "$VM_DIR/../.." && pwd)}
VM_WORK=${VM_WORK:-$VM_DIR/work}
. "$VM_DIR/users.sh"

# Host tools copied into the guest (missing optional ones are skipped with a note).
VM_TOOLS="dash fio blkdiscard wipefs losetup blkid blockdev lsblk fallocate fstrim
 mkfs.ext4 mke2fs mkfs.xfs xfs_io setpriv dd sha256sum cmp stat
 timeout env nohup nice xargs find flock
 dmsetup sg_raw sg_dd sg_inq sg_readcap sg_unmap sg_write_same sg_get_lba_status sg_vpd
 sfdisk partx delpart addpart od getent mdadm mkswap swapon swapoff make-bcache
 smartctl nvme unshare strace bpftool bash"
# Tools the tests cannot do without.
VM_REQUIRED_TOOLS="dash fio blkdiscard wipefs losetup blkid mkfs.ext4 dd sha256sum dmsetup sg_raw sg_dd setpriv
 timeout env xargs"
# (Debian's static busybox runs its own applets in preference to PATH, also when
# one of its applets starts a command: timeout/env/xargs come from coreutils and
# findutils so that "timeout 10 losetup ..." runs util-linux losetup.)

ir_log() { echo "initramfs: $*" >&2; }

# ir_copy_file SRC DST_IN_STAGE: copies a file (following symlinks), keeps mode.
ir_copy_file() {
	local src=$1 dst=$2
	[ -e "$ir_stage$dst" ] && return 0
	mkdir -p "$ir_stage$(dirname "$dst")"
	cp -L --preserve=mode "$src" "$ir_stage$dst"
}

# ir_copy_libs BIN: copies the shared libraries BIN needs (ldd) and the loader.
ir_copy_libs() {
	local bin=$1 lib
	# "libx.so => /path (0x..)" and the loader's "/lib64/ld-linux-x86-64.so.2 (0x..)"
	for lib in $(ldd "$bin" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'); do
		ir_copy_file "$lib" "$lib" || return 1
	done
}

# ir_copy_bin SRC DST: a binary plus its libraries.
ir_copy_bin() {
	ir_copy_file "$1" "$2" && ir_copy_libs "$1"
}

ir_build_common() {
	local out=$1
	ir_stage=$VM_WORK/common.stage
	rm -rf "$ir_stage"
	mkdir -p "$ir_stage"/{usr/bin,usr/sbin,usr/lib,usr/lib64,usr/local/bin,etc,dev,proc,sys,tmp,run,root,home,mnt,vmtests/tests}
	# Debian's merged /usr layout, so ldd's paths (/lib/x86_64-linux-gnu/...) work as is.
	ln -s usr/bin "$ir_stage/bin"
	ln -s usr/sbin "$ir_stage/sbin"
	ln -s usr/lib "$ir_stage/lib"
	ln -s usr/lib64 "$ir_stage/lib64"

	# Test tools first, so busybox does not shadow them.
	local t p missing=""
	for t in $VM_TOOLS ${VM_EXTRA_TOOLS:-}; do
		p=$(PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH command -v "$t" 2>/dev/null) || p=""
		if [ -z "$p" ]; then
			case " $VM_REQUIRED_TOOLS " in *" $t "*) missing="$missing $t" ;; esac
			ir_log "note: $t not found on the host, not in the guest"
			continue
		fi
		# keep the tool's own directory (usr/bin or usr/sbin), resolved through usrmerge
		case $p in /bin/* | /sbin/*) p=/usr$p ;; esac
		ir_copy_bin "$p" "$p" || return 1
	done
	[ -z "$missing" ] || { ir_log "required tools missing:$missing (run tests/vm/deps.sh)"; return 1; }
	[ -f /etc/mke2fs.conf ] && cp /etc/mke2fs.conf "$ir_stage/etc/"

	# /bin/sh is dash: Debian's static busybox prefers its own applets to PATH
	# in its shell (losetup --show, dd oflag=... would silently be busybox's).
	ln -s dash "$ir_stage/usr/bin/sh"

	# Static busybox and its applets (where no real tool sits already).
	local bb
	bb=$(command -v busybox) || { ir_log "busybox missing"; return 1; }
	ldd "$bb" >/dev/null 2>&1 && ir_log "warning: $bb is not static (install busybox-static)"
	cp -L "$bb" "$ir_stage/usr/bin/busybox"
	local applet
	for applet in $("$bb" --list); do
		[ "$applet" = busybox ] && continue
		if [ ! -e "$ir_stage/usr/bin/$applet" ] && [ ! -e "$ir_stage/usr/sbin/$applet" ]; then
			ln -s busybox "$ir_stage/usr/bin/$applet"
		fi
	done

	# The project's binaries.
	local target=${CARGO_TARGET_DIR:-$VM_ROOT/target}/release f n=0
	if [ -d "$target" ]; then
		for f in "$target"/*; do
			[ -f "$f" ] && [ -x "$f" ] || continue
			case $f in *.so | *.d | *.rlib | *.a) continue ;; esac
			head -c 4 "$f" | grep -q 'ELF' || continue
			strip --strip-debug -o "$ir_stage/usr/local/bin/$(basename "$f")" "$f" || return 1
			ir_copy_libs "$f" || return 1
			n=$((n + 1))
		done
	fi
	ir_log "$n project binaries from $target: $(ls "$ir_stage/usr/local/bin" | tr '\n' ' ')"

	# Test helpers (tests/vm/helpers/*.c): small static C programs.
	local c
	# Also as 32-bit programs (<name>32), for the compat ioctl path; needs gcc-multilib.
	for c in "$VM_DIR"/helpers/*.c; do
		[ -f "$c" ] || continue
		case $c in *.so.c) continue ;; esac
		gcc -static -O2 -Wall -D_FILE_OFFSET_BITS=64 -o "$ir_stage/usr/local/bin/$(basename "$c" .c)" "$c" || return 1
		grep -q 'x86_64 only' "$c" && continue # (the register-level helpers)
		gcc -m32 -static -O2 -Wall -D_FILE_OFFSET_BITS=64 -o "$ir_stage/usr/local/bin/$(basename "$c" .c)32" "$c" 2>/dev/null ||
			ir_log "note: no 32-bit $(basename "$c" .c)32 (install gcc-multilib)"
	done

	# Preload libraries (tests/vm/helpers/NAME.so.c): shared objects in
	# /usr/local/lib/NAME.so, for the dynamically linked programs in the guest.
	mkdir -p "$ir_stage/usr/local/lib"
	for c in "$VM_DIR"/helpers/*.so.c; do
		[ -f "$c" ] || continue
		gcc -shared -fPIC -O2 -Wall -o "$ir_stage/usr/local/lib/$(basename "$c" .c)" "$c" || return 1
	done

	# ld.so cache (the loader's built-in multiarch paths would do, this is belt and braces).
	printf '/usr/lib/x86_64-linux-gnu\n/usr/local/lib\n' >"$ir_stage/etc/ld.so.conf"
	ldconfig -r "$ir_stage" 2>/dev/null || true

	# Users: the Oracle grid and oracle owners, and an outsider.
	printf 'root:x:0:0:root:/root:/bin/sh\n%s\n%s\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' \
		"$LAB_ORACLE_USERS" "$LAB_INTRUDER" >"$ir_stage/etc/passwd"
	printf 'root:x:0:\n%s\nnogroup:x:65534:\n' "$LAB_GROUPS" >"$ir_stage/etc/group"
	printf 'root:*:19000:0:99999:7:::\n' >"$ir_stage/etc/shadow"
	chmod 600 "$ir_stage/etc/shadow"
	# Directory users (LDAP/SSSD stand-in): only in libnss-extrausers, never in
	# /etc/passwd; the daemon must resolve them through NSS.
	printf 'passwd: files extrausers\ngroup: files extrausers\nshadow: files\n' >"$ir_stage/etc/nsswitch.conf"
	local nss
	nss=$(ls /usr/lib/x86_64-linux-gnu/libnss_extrausers.so.2 /usr/lib/libnss_extrausers.so.2 2>/dev/null | head -n 1)
	if [ -n "$nss" ]; then
		ir_copy_file "$nss" "/usr/lib/x86_64-linux-gnu/libnss_extrausers.so.2" && ir_copy_libs "$nss" || return 1
	else
		ir_log "warning: no libnss_extrausers.so.2 (install libnss-extrausers): directory users will not resolve"
	fi
	mkdir -p "$ir_stage/var/lib/extrausers"
	printf 'ldapgrid:x:54400:54400:directory user:/tmp:/bin/sh\n' >"$ir_stage/var/lib/extrausers/passwd"
	printf 'ldapgrid:x:54400:\nldapdba:x:54401:ldapgrid\n' >"$ir_stage/var/lib/extrausers/group"
	: >"$ir_stage/var/lib/extrausers/shadow"
	mkdir -p "$ir_stage/home/oracle" "$ir_stage/home/grid" "$ir_stage/home/intruder"
	chown 54321:54321 "$ir_stage/home/oracle"
	chown 54331:54321 "$ir_stage/home/grid"
	chown 1001:1001 "$ir_stage/home/intruder"
	chmod 1777 "$ir_stage/tmp"

	# Guest scripts.
	cp "$VM_DIR/guest/init" "$ir_stage/init"
	chmod 755 "$ir_stage/init"
	cp "$VM_DIR/guest/lib.sh" "$ir_stage/vmtests/lib.sh"
	cp "$VM_DIR"/guest/tests/*.sh "$ir_stage/vmtests/tests/"
	mkdir -p "$ir_stage/vmtests/bench" && cp "$VM_DIR"/guest/bench/*.sh "$ir_stage/vmtests/bench/"
	# make uninstall's script, as installed (pinguard.sh runs it)
	cp "$VM_ROOT/scripts/uninstall.sh" "$ir_stage/vmtests/uninstall.sh"

	# (no -R: the home directories keep their owners; we run as root)
	(cd "$ir_stage" && find . -mindepth 1 | LC_ALL=C sort | cpio --quiet -o -H newc) | gzip -1 >"$out.tmp" || return 1
	mv "$out.tmp" "$out"
}

ir_build_modules() {
	local line=$1 out=$2 dir=$VM_WORK/$1/modules
	[ -d "$dir/lib/modules" ] || { ir_log "no modules for $line; run tests/vm/kernels.sh $line"; return 1; }
	# modules live under /lib/modules, i.e. /usr/lib/modules in the merged layout
	local stage=$VM_WORK/$line/modules.stage
	rm -rf "$stage"
	mkdir -p "$stage/usr/lib"
	cp -a "$dir/lib/modules" "$stage/usr/lib/"
	(cd "$stage" && find . -mindepth 1 | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0) | gzip -1 >"$out.tmp" || return 1
	mv "$out.tmp" "$out"
}

# ir_cpio_entry NAME MODE(octal) RDEV_MAJOR RDEV_MINOR: one newc header for a
# data-less entry (directory or device node), so /dev/console exists when the
# kernel starts /init, without needing mknod (root) on the host.
ir_cpio_entry() {
	local name=$1 mode=$2 ino=$5 namesize=$((${#1} + 1)) pad
	printf '070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X' \
		"$ino" "$((8#$mode))" 0 0 1 0 0 0 0 "$3" "$4" "$namesize" 0
	printf '%s\0' "$name"
	pad=$(((4 - (110 + namesize) % 4) % 4))
	[ $pad -gt 0 ] && head -c "$pad" /dev/zero
	return 0
}

ir_devnodes_cpio() {
	{
		ir_cpio_entry dev 040755 0 0 1
		ir_cpio_entry dev/console 020600 5 1 2
		ir_cpio_entry dev/null 020666 1 3 3
		ir_cpio_entry dev/ttyS0 020600 4 64 4
		ir_cpio_entry TRAILER!!! 0 0 0 0
	} | gzip -1
}

# vm_initramfs LINE: builds work/LINE/initramfs.cpio.gz.
vm_initramfs() {
	local line=$1
	mkdir -p "$VM_WORK/$line"
	# the common part once per tests/vm/all.sh run (it sets VM_COMMON_REUSE=1 for the
	# lines after the first, under the checkout's lock)
	if [ "${VM_COMMON_REUSE:-0}" != 1 ] || [ ! -s "$VM_WORK/common.cpio.gz" ] ||
		[ ! -s "$VM_WORK/devnodes.cpio.gz" ]; then
		ir_build_common "$VM_WORK/common.cpio.gz" || return 1
		ir_devnodes_cpio >"$VM_WORK/devnodes.cpio.gz" || return 1
	fi
	ir_build_modules "$line" "$VM_WORK/$line/modules.cpio.gz" || return 1
	cat "$VM_WORK/common.cpio.gz" "$VM_WORK/devnodes.cpio.gz" "$VM_WORK/$line/modules.cpio.gz" \
		>"$VM_WORK/$line/initramfs.cpio.gz"
	ir_log "$line: $(du -h "$VM_WORK/$line/initramfs.cpio.gz" | cut -f1) $VM_WORK/$line/initramfs.cpio.gz"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	set -euo pipefail
	[ $# -eq 1 ] || { echo "usage: $0 LINE" >&2; exit 2; }
	vm_initramfs "$1"
fi
