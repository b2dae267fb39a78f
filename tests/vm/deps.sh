#!/bin/bash
# tests/vm/deps.sh - install (idempotently) what the BPF build and the VM lab need
# on a fresh Debian 12 machine. Source it and call vm_deps, or run it directly.
#
#   VM_DEPS_SKIP=1   do not check or install anything (offline use)

# Build: clang compiles bpf/*.bpf.c; libbpf-sys builds the vendored libbpf with
# make/gcc/pkg-config against libelf and zlib; gcc + libc6-dev build the lab's
# static test helpers (tests/vm/helpers/*.c), gcc-multilib their 32-bit builds.
VM_BUILD_PKGS="clang llvm libelf-dev zlib1g-dev pkg-config make gcc libc6-dev linux-libc-dev gcc-multilib"
# Lab: the emulator, the kernel packages' tools, the initramfs tools and the test tools.
VM_LAB_PKGS="qemu-system-x86 busybox-static dash binutils diffutils findutils cpio gzip xz-utils zstd kmod dpkg apt
 fio sg3-utils util-linux e2fsprogs xfsprogs dmsetup coreutils libaio1 liburing2 libnss-extrausers mdadm bcache-tools
 smartmontools nvme-cli"

vm_missing_pkgs() {
	local p missing=""
	for p in "$@"; do
		if ! dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
			missing="$missing $p"
		fi
	done
	echo "$missing"
}

vm_apt() {
	if [ "$(id -u)" = 0 ]; then
		DEBIAN_FRONTEND=noninteractive apt-get "$@"
	else
		sudo DEBIAN_FRONTEND=noninteractive apt-get "$@"
	fi
}

# vm_deps [PKG...]: installs the missing ones among PKG (default: build + lab).
vm_deps() {
	[ "${VM_DEPS_SKIP:-0}" = 1 ] && return 0
	local pkgs="$*" missing
	[ -n "$pkgs" ] || pkgs="$VM_BUILD_PKGS $VM_LAB_PKGS"
	# shellcheck disable=SC2086
	missing=$(vm_missing_pkgs $pkgs)
	[ -z "${missing// /}" ] && return 0
	echo "deps: installing:$missing" >&2
	vm_apt_updated || { vm_apt update -qq >&2 || return 1; VM_APT_UPDATED=1; }
	# shellcheck disable=SC2086
	vm_apt install -y -qq --no-install-recommends $missing >&2
}

vm_apt_updated() { [ "${VM_APT_UPDATED:-0}" = 1 ]; }

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	set -euo pipefail
	vm_deps "$@"
fi
