#!/bin/bash
# tests/prefetch.sh - the labs' inputs that need no build of ours, made ahead: the
# labs' Debian packages, every kernel line of both labs (downloaded, unpacked, its
# modules selected) and the system lab's images. scripts/test.sh starts it first
# thing, beside lint and the build (this is network and disk more than CPU), so the
# labs' first guests boot as soon as the host tests are compiled instead of after
# minutes of downloads and mmdebstrap with both guest slots idle.
#
#   tests/prefetch.sh
#
# Idempotent and safe beside the labs themselves: every step is the labs' own
# (vm_deps, vm_fetch_kernel under the kernel cache's lock, sys_image under the
# images' lock), which the labs run again as cheap checks. Prints one line per step
# with its seconds; exit status 0 only if every step succeeded (a lab that then
# misses something reports it itself).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
rc=0

# step NAME CMD...: run, say how long it took and whether it worked.
step() {
	local name=$1 t0=$SECONDS
	shift
	if "$@"; then
		echo "prefetch: $name ($((SECONDS - t0))s)"
	else
		echo "prefetch: $name FAILED ($((SECONDS - t0))s)"
		rc=1
		return 1
	fi
}

vm_lines=${VM_LINES:-5.10 5.10+lsm 6.1 6.12 6.12-nobpf newest}
sys_lines="${SYS_LINES:-6.1 6.12} ${PAIR_LINE:-6.12}"

# shellcheck disable=SC1091,SC2086
step packages bash -c ". '$root/tests/vm/deps.sh' && vm_deps \$VM_BUILD_PKGS \$VM_LAB_PKGS mmdebstrap e2fsprogs lintian rpm"
# The VM lab's kernels (its work dir), then the system lab's (its own work dir, the
# same cache: no second download); the system lab's images.
fetch_vm() {
	local l
	(
		VM_WORK=$root/tests/vm/work
		. "$root/tests/vm/kernels.sh"
		for l in $vm_lines; do vm_fetch_kernel "$l" >/dev/null || exit 1; done
	)
}
sys_image_of() { # sys_image_of [VARIANT]
	(
		SYS_DIR=$root/tests/system
		. "$SYS_DIR/env.sh"
		sys_image "$@" >/dev/null
	)
}
sys_kernels() {
	(
		SYS_DIR=$root/tests/system
		. "$SYS_DIR/env.sh"
		for l in $sys_lines; do vm_fetch_kernel "$l" >/dev/null || exit 1; done
	)
}
# Three streams side by side (each step's output kept whole, then printed): the
# kernels (downloads and unpacking), and the system lab's images in two (mmdebstrap
# waits on the network and dpkg more than on a core). The pair's image first: the
# pair is the labs' first guest run.
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
stream() { # stream NAME: its steps, its output in $out/NAME, its status in $out/NAME.rc
	local n=$1 r=0
	shift
	case $n in
	kernels)
		step "VM lab kernels ($vm_lines)" fetch_vm || r=1
		[ "${ASMGUARD_SKIP_SYSTEM:-0}" = 1 ] || step "system lab kernels ($sys_lines)" sys_kernels || r=1
		;;
	images1)
		[ "${SYS_PAIR:-1}" = 1 ] && { step "system lab image: pair" sys_image_of pair || r=1; }
		[ "${SYS_CONTAINERS:-1}" = 1 ] && { step "system lab image: containers" sys_image_of containers || r=1; }
		;;
	images2) step "system lab image: base" sys_image_of || r=1 ;;
	esac
	echo $r >"$out/$n.rc"
}
streams=(kernels)
[ "${ASMGUARD_SKIP_SYSTEM:-0}" = 1 ] || streams+=(images1 images2)
for n in "${streams[@]}"; do stream "$n" >"$out/$n" 2>&1 & done
wait
for n in "${streams[@]}"; do
	cat "$out/$n"
	[ "$(cat "$out/$n.rc" 2>/dev/null)" = 0 ] || rc=1
done
exit $rc
