#!/bin/bash
# tests/vm/run.sh - boot one Debian cloud kernel under QEMU (TCG) and run guest tests.
#
#   tests/vm/run.sh KERNEL_LINE [TEST...]
#       KERNEL_LINE  5.10      Debian bullseye's cloud kernel, Debian's default boot options
#                    5.10+lsm  the same kernel with bpf appended to its LSM list (lsm=)
#                    6.1 | 6.12  the newest Debian 12 cloud kernel of that line
#                    newest    the newest Debian cloud kernel of any suite the lab knows
#                    (any other "<major>.<minor>[+lsm]" works too)
#       TEST         names of tests/vm/guest/tests/<TEST>.sh (default: all)
#
# Environment:
#   VM_TIMEOUT=720       seconds before qemu is killed (guest did not finish)
#   VM_TEST_TIMEOUT=120  seconds per guest test (inside the guest)
#   VM_BUILD=1           0: do not run cargo build --release first
#   VM_CARGO_ARGS="--workspace --bins"   what cargo build --release builds
#   VM_VERBOSE=0         1: stream the guest console to stderr as it runs
#   VM_MEM=2G VM_SMP=2   guest size
#   VM_APPEND=""         more kernel command line (the lab's self-test uses it)
#   VM_SHELL=1           after the tests, give an interactive shell on this
#                        terminal (no timeout; "exit" powers the guest off)
#
# Prints one "PASS|FAIL vm-<line> <test> <detail>" line per guest check, one
# "N/A vm-<line> <test> <reason>" line per check that cannot apply on this kernel
# (never counted as a pass), then "vm-<line>: K n/a" and exactly one summary line
# "vm-<line>: N passed, M failed". Exits 0 only if every check passed and the guest
# finished. A guest that panics before /init (seen under TCG) is booted once more,
# and a "RETRY vm-<line> ..." line says so. The console log is kept in
# tests/vm/work/<line>.log.

set -uo pipefail
VM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
VM_ROOT=$(cd "$VM_DIR/../.." && pwd)
export VM_DIR VM_ROOT
VM_WORK=${VM_WORK:-$VM_DIR/work}

. "$VM_DIR/deps.sh"
. "$VM_DIR/kernels.sh"
. "$VM_DIR/initramfs.sh"
. "$VM_DIR/results.sh"

lab_line vm '^([0-9]+\.[0-9]+|newest)(\+lsm)?$' '5.10, 5.10+lsm, 6.1, 6.12, newest' "${1:-}"
shift
tests=$(echo "$*" | tr ' ' ',')

vm_deps || summary_fail "could not install the lab's packages (tests/vm/deps.sh)"

if [ "${VM_BUILD:-1}" = 1 ]; then
	echo "$name: cargo build --release ${VM_CARGO_ARGS:---workspace --bins}" >&2
	# shellcheck disable=SC2086
	(cd "$VM_ROOT" && cargo build --release -q ${VM_CARGO_ARGS:---workspace --bins}) >&2 ||
		summary_fail "cargo build --release failed"
fi

mkdir -p "$VM_WORK"
lab_lock "$name" "$VM_WORK" "VM lab"

vm_fetch_kernel "$line" || summary_fail "could not fetch the $line kernel"
vm_initramfs "$line" || summary_fail "could not build the initramfs"
. "$VM_WORK/$line/kernel.env"
echo "$name: kernel $KPKG $KPKG_VERSION ($KVER)" >&2

log=$VM_WORK/$line.log
timeout_s=${VM_TIMEOUT:-720}
append="console=ttyS0 panic=-1 quiet loglevel=3 asmguard.test_timeout=${VM_TEST_TIMEOUT:-120}"
[ -n "$tests" ] && append="$append asmguard.tests=$tests"
[ -n "${VM_APPEND:-}" ] && append="$append $VM_APPEND"
# "+lsm": the kernel's own default LSM list (CONFIG_LSM) with bpf appended.
if [[ $line == *+lsm ]]; then
	lsms=$(sed -n 's/^CONFIG_LSM="\(.*\)"$/\1/p' "$VM_WORK/$line/config")
	[ -n "$lsms" ] || summary_fail "the $line kernel's config names no CONFIG_LSM list"
	case ",$lsms," in *,bpf,*) ;; *) lsms="$lsms,bpf" ;; esac
	append="$append lsm=$lsms"
	echo "$name: booting with lsm=$lsms" >&2
fi

# A QEMU NVMe disk (serial agnvme0) on a fresh sparse scratch file, for the NVMe
# passthrough tests.
nvme_img=$VM_WORK/$line/nvme.img
rm -f "$nvme_img" && truncate -s 64M "$nvme_img" || summary_fail "could not make $nvme_img"
qemu=(qemu-system-x86_64 -accel tcg -cpu max -m "${VM_MEM:-2G}" -smp "${VM_SMP:-2}"
	-nographic -no-reboot
	-drive "if=none,file=$nvme_img,id=nv0,format=raw" -device nvme,serial=agnvme0,drive=nv0
	-kernel "$VM_WORK/$line/vmlinuz" -initrd "$VM_WORK/$line/initramfs.cpio.gz"
	-append "$append")

if [ "${VM_SHELL:-0}" = 1 ]; then
	qemu[${#qemu[@]} - 1]="$append asmguard.shell=1"
	exec "${qemu[@]}"
fi

start=$(date +%s.%N)
vm_boot() {
	if [ "${VM_VERBOSE:-0}" = 1 ]; then
		timeout -k 5 "$timeout_s" "${qemu[@]}" </dev/null 2>&1 | tee "$log" | tr -d '\r' >&2
		qrc=${PIPESTATUS[0]}
	else
		timeout -k 5 "$timeout_s" "${qemu[@]}" </dev/null >"$log" 2>&1
		qrc=$?
	fi
}
vm_boot
# A kernel panic before /init ran (no boot-seconds line) is the emulator's or the
# kernel's early-boot trouble, not a result: boot once more, and say so.
if ! grep -aq '^VMINFO boot-seconds' "$log" && grep -aq 'Kernel panic' "$log"; then
	why=$(tr -d '\r' <"$log" | grep -a -m1 'Kernel panic' | cut -c1-160)
	mv "$log" "$log.panic"
	echo "RETRY $name guest panicked before /init ($why); booting once more (first console log: $log.panic)"
	vm_boot
fi
end=$(date +%s.%N)
wall=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')

done_line=$(tr -d '\r' <"$log" | grep -a -m1 '^VMDONE' || true)
boot=$(tr -d '\r' <"$log" | sed -n 's/^VMINFO boot-seconds //p' | head -n 1)
echo "$name: boot ${boot:-?}s (kernel start to /init), guest uptime at end ${done_line#VMDONE }s, wall ${wall}s; log $log" >&2
# Results: "VMTEST <name> PASS|FAIL <detail>" lines (console lines end in \r).
vm_results "$name" "$log" "$log" "$qrc" "$timeout_s"
