#!/bin/bash
# tests/vm/run.sh - boot one Debian cloud kernel under QEMU (TCG) and run guest tests.
#
#   tests/vm/run.sh KERNEL_LINE [TEST...]
#       KERNEL_LINE  5.10      Debian bullseye's cloud kernel, Debian's default boot options
#                    5.10+lsm  the same kernel with bpf appended to its LSM list (lsm=)
#                    6.1 | 6.12  the newest Debian 12 cloud kernel of that line
#                    6.12-nobpf  the 6.12 kernel booted with its LSM list without bpf
#                              (as Oracle's UEK8 ships: the fmod_ret backend protects)
#                    newest    the newest Debian cloud kernel of any suite the lab knows
#                    (any other "<major>.<minor>[+lsm|-nobpf]" works too)
#       TEST         names of tests/vm/guest/tests/<TEST>.sh (default: all)
#
# Environment:
#   VM_TIMEOUT=1200      seconds before qemu is killed (guest did not finish)
#   VM_TEST_TIMEOUT=240  seconds per guest test (inside the guest)
#   VM_BUILD=1           0: do not run cargo build --release first
#   VM_CARGO_ARGS="--workspace --bins"   what cargo build --release builds
#   VM_VERBOSE=0         1: stream the guest console to stderr as it runs
#   VM_MEM=2G VM_SMP=2   guest size
#   VM_APPEND=""         more kernel command line (the lab's self-test uses it)
#   VM_SHELL=1           after the tests, give an interactive shell on this
#                        terminal (no timeout; "exit" powers the guest off)
#   VM_PART=all          all: the whole run. tests/vm/all.sh runs a line in parts, under
#                        its own checkout lock: "prepare" (the kernel, the initramfs and
#                        the plan work/<line>/plan: which tests boot multi-threaded,
#                        which one-thread), then "multi" and "single" (that boot only,
#                        with its result lines and its own summary lines)
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

lab_line vm '^([0-9]+\.[0-9]+|newest)(\+lsm|-nobpf)?$' '5.10, 5.10+lsm, 6.1, 6.12, 6.12-nobpf, newest' "${1:-}"
shift
tests=$(echo "$*" | tr ' ' ',')

vm_deps || summary_fail "could not install the lab's packages (tests/vm/deps.sh)"

if [ "${VM_BUILD:-1}" = 1 ]; then
	echo "$name: cargo build --release ${VM_CARGO_ARGS:---workspace --bins}" >&2
	# shellcheck disable=SC2086
	(cd "$VM_ROOT" && cargo build --release -q ${VM_CARGO_ARGS:---workspace --bins}) >&2 ||
		summary_fail "cargo build --release failed"
fi

part=${VM_PART:-all}
case $part in all | prepare | multi | single) ;; *)
	echo "$0: VM_PART=$part: give all, prepare, multi or single" >&2
	exit 2 ;;
esac
mkdir -p "$VM_WORK"
# all.sh holds the checkout lock itself while it runs a line in parts
[ "$part" != all ] || lab_checkout_lock "$name" "$VM_WORK" "VM lab"

# (the machine's guest slots are taken per boot, in boot_tests: the kernel and the
# initramfs are host work, like a cargo build)
if [ "$part" = all ] || [ "$part" = prepare ]; then
	vm_fetch_kernel "$line" || summary_fail "could not fetch the $line kernel"
	vm_initramfs "$line" || summary_fail "could not build the initramfs"
fi
[ -f "$VM_WORK/$line/kernel.env" ] || summary_fail "no $VM_WORK/$line/kernel.env: run VM_PART=prepare first"
. "$VM_WORK/$line/kernel.env"
echo "$name: kernel $KPKG $KPKG_VERSION ($KVER)" >&2

timeout_s=${VM_TIMEOUT:-1200}
base_append="console=ttyS0 panic=-1 quiet loglevel=3 asmguard.test_timeout=${VM_TEST_TIMEOUT:-240}"
[ -n "${VM_APPEND:-}" ] && base_append="$base_append $VM_APPEND"
# "+lsm": the kernel's own default LSM list (CONFIG_LSM) with bpf appended.
if [[ $line == *+lsm ]]; then
	lsms=$(sed -n 's/^CONFIG_LSM="\(.*\)"$/\1/p' "$VM_WORK/$line/config")
	[ -n "$lsms" ] || summary_fail "the $line kernel's config names no CONFIG_LSM list"
	case ",$lsms," in *,bpf,*) ;; *) lsms="$lsms,bpf" ;; esac
	base_append="$base_append lsm=$lsms"
	echo "$name: booting with lsm=$lsms" >&2
fi
# "-nobpf": the kernel's own default LSM list without bpf (Oracle's UEK7/UEK8,
# Ubuntu and SLES ship the BPF LSM built but not in the list).
if [[ $line == *-nobpf ]]; then
	lsms=$(sed -n 's/^CONFIG_LSM="\(.*\)"$/\1/p' "$VM_WORK/$line/config")
	[ -n "$lsms" ] || summary_fail "the $line kernel's config names no CONFIG_LSM list"
	lsms=$(echo ",$lsms," | sed 's/,bpf,/,/; s/^,//; s/,$//')
	base_append="$base_append lsm=$lsms"
	echo "$name: booting with lsm=$lsms" >&2
fi

# Each test declares its settings in its header (lab_test_settings, README "Test
# headers"): "one-thread" and "once-per-kernel" here.
# one-thread: tests that re-attach BPF programs while other vCPUs run through the
# patched kernel text get a boot of their own under one-thread TCG (-accel
# tcg,thread=single): multi-threaded TCG has been seen executing a breakpoint that
# the kernel's text_poke_bp had already replaced (an int3 Oops at
# bpf_lsm_file_permission+0x5 with the nop back in memory, README "One-thread
# boots"). Every other test runs in the first boot.
explicit_tests=$tests
[ -n "$tests" ] || tests=$(cd "$VM_DIR/guest/tests" && ls -- *.sh | sed 's/\.sh$//' | paste -sd,)
# Where bpf is not an active LSM (5.10, "-nobpf") the filter is fmod_ret
# trampolines on security_file_permission and the other security_* functions,
# which every read and write runs through: every test that attaches or detaches
# them patches hot kernel text, so the whole line boots under one-thread TCG
# (multi-threaded TCG was seen leaving a vCPU looping on the patched site: soft
# lockups in a process writing a file, none under one-thread TCG).
# 5.10 with bpf in its LSM list ("5.10+lsm") too: a fresh-clone run with the two
# labs side by side saw its multi-threaded boot end in soft lockups on both vCPUs
# (the guest runner, from the detach at filter-daemon's end, until qemu was killed
# at 1200 s), the failure its filter-toggle boot exists to avoid.
# And every other line too, by default: with two guests side by side on the two host
# cores (tests/vm/all.sh), one-thread TCG ran the same tests faster than
# multi-threaded TCG (16 tests on every line, 2026-11-26 fresh-clone run: 328 s
# one-thread against 396 s multi-threaded, 1.21x; each guest has one host core
# anyway, and multi-threaded TCG pays for keeping two vCPU threads coherent).
# VM_MULTI=1 boots the lines that allow it multi-threaded (faster for one guest
# alone on the machine), their one-thread tests in a second boot.
all_single=yes
if [ "${VM_MULTI:-0}" = 1 ] && [[ $line != *-nobpf ]] && [[ $line != 5.10* ]] &&
	{ [[ $line == *+lsm ]] || grep -Eq '^CONFIG_LSM=".*bpf' "$VM_WORK/$line/config"; }; then
	all_single=no
fi
# once-per-kernel: a test that exercises the kernel, not the filter's backend (the
# latency tracer, the lab's own fixtures): a boot variant of a kernel ("+lsm",
# "-nobpf") skips it when the whole line runs, its base line runs it.
# A test whose header does not parse is not booted: one FAIL line (the "prepare"
# part or the whole run prints it).
multi="" single="" once="" bad=()
for t in ${tests//,/ }; do
	f=$VM_DIR/guest/tests/$t.sh
	[ -f "$f" ] || [ ! -f "$VM_DIR/guest/bench/$t.sh" ] || f=$VM_DIR/guest/bench/$t.sh
	settings=""
	if [ -f "$f" ] && ! settings=$(lab_test_settings "$f" "one-thread once-per-kernel" 2>&1); then
		bad+=("FAIL $name $t.header $settings")
		continue
	fi
	if [ -z "$explicit_tests" ] && [[ $line == *[+-]* ]] && [[ $'\n'$settings == *$'\n'once-per-kernel* ]]; then
		once="$once $t"
		continue
	fi
	if [ $all_single = yes ] || [[ $'\n'$settings == *$'\n'one-thread* ]]; then
		single="$single,$t"
	else
		multi="$multi,$t"
	fi
done
multi=${multi#,} single=${single#,}
[ -z "$once" ] || [ "$part" = multi ] || [ "$part" = single ] || echo "$name: once-per-kernel tests left to the ${line%%[+-]*} line:$once" >&2
# prepare: the plan for all.sh, and the tests whose header did not parse (the
# part's own summary lines: all.sh adds up every part's)
if [ "$part" = prepare ]; then
	printf 'multi=%s\nsingle=%s\n' "$multi" "$single" >"$VM_WORK/$line/plan"
	[ ${#bad[@]} = 0 ] || printf '%s\n' "${bad[@]}"
	echo "$name: 0 n/a"
	echo "$name: 0 passed, ${#bad[@]} failed"
	exit 0
fi

# A QEMU NVMe disk (serial agnvme0) on a fresh sparse scratch file, for the NVMe
# passthrough tests.
# One per boot: the two boots of a line may run at once (tests/vm/all.sh).
# VM_TAG: a suffix for this run's logs and scratch file, so a run beside another boot
# of the same line keeps its own (the self-test's boot in tests/vm/all.sh's queue).
tag=${VM_TAG:-}
nvme_img=$VM_WORK/$line/nvme.$part$tag.img
# And an NVMe subsystem with two controllers (serial agmpath: QEMU wants the same) sharing one
# namespace (nsid 1) on a scratch file of its own: the guest's kernel
# (CONFIG_NVME_MULTIPATH=y) makes it a native multipath head with two hidden paths,
# as a dual-port SSD (guest fixture nvme-multipath, test nvme-multipath).
nvmemp_img=$VM_WORK/$line/nvmemp.$part$tag.img
# scratch_imgs: both scratch files fresh and sparse (64 MiB each)
scratch_imgs() {
	rm -f "$nvme_img" "$nvmemp_img" && truncate -s 64M "$nvme_img" && truncate -s 64M "$nvmemp_img" ||
		summary_fail "could not make $nvme_img and $nvmemp_img"
}

# qemu_cmd ACCEL APPEND: the guest's command line in the array qemu.
qemu_cmd() {
	qemu=(qemu-system-x86_64 -accel "$1" -cpu max -m "${VM_MEM:-2G}" -smp "${VM_SMP:-2}"
		-nographic -no-reboot
		-drive "if=none,file=$nvme_img,id=nv0,format=raw" -device nvme,serial=agnvme0,drive=nv0
		-device nvme-subsys,id=agsub,nqn=nqn.2026-11.org.asmguard:mpath
		-device nvme,id=agmp0,serial=agmpath,subsys=agsub
		-device nvme,id=agmp1,serial=agmpath,subsys=agsub
		-drive "if=none,file=$nvmemp_img,id=mp0,format=raw"
		-device nvme-ns,bus=agmp0,drive=mp0,nsid=1,shared=on
		-kernel "$VM_WORK/$line/vmlinuz" -initrd "$VM_WORK/$line/initramfs.cpio.gz"
		-append "$2")
}

if [ "${VM_SHELL:-0}" = 1 ]; then
	scratch_imgs
	append="$base_append asmguard.shell=1"
	[ -n "$tests" ] && append="$append asmguard.tests=$tests"
	qemu_cmd "${VM_ACCEL:-tcg}" "$append"
	lab_machine_lock "$name" 2
	exec "${qemu[@]}"
fi

vm_boot() {
	if [ "${VM_VERBOSE:-0}" = 1 ]; then
		timeout -k 5 "$timeout_s" "${qemu[@]}" </dev/null 2>&1 | tee "$log" | tr -d '\r' >&2
		qrc=${PIPESTATUS[0]}
	else
		timeout -k 5 "$timeout_s" "${qemu[@]}" </dev/null >"$log" 2>&1
		qrc=$?
	fi
}
# boot_tests ACCEL TESTS LOG: one boot running TESTS (comma-separated), console in
# LOG; prints its result lines (vm_results) and adds its counts to TALLY_PASS and
# TALLY_FAIL (vm_tally: a boot with no summary counts as a failure), t_na and t_xfail.
boot_tests() {
	local accel=$1 list=$2 start end wall done_line boot out
	log=$3
	scratch_imgs
	qemu_cmd "$accel" "$base_append asmguard.tests=$list"
	# one of the machine's two guest slots, multi-threaded or not (a multi-threaded
	# guest keeps about one host core busy: tests/vm/all.sh); LAB_GUEST_SLOTS=2 gives
	# a guest the machine alone (a benchmark)
	# (its place in the machine's queue: about 21 s a test, one-thread, measured)
	LAB_EST=$(($(echo "$list" | tr ',' '\n' | grep -c .) * 21)) lab_machine_lock "$name" "${LAB_GUEST_SLOTS:-1}"
	start=$(date +%s.%N)
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
	lab_machine_unlock
	rm -f "$nvme_img" "$nvmemp_img"
	wall=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
	done_line=$(tr -d '\r' <"$log" | grep -a -m1 '^VMDONE' || true)
	boot=$(tr -d '\r' <"$log" | sed -n 's/^VMINFO boot-seconds //p' | head -n 1)
	echo "$name: -accel $accel: boot ${boot:-?}s (kernel start to /init), guest uptime at end ${done_line#VMDONE }s, wall ${wall}s; log $log" >&2
	# Results: "VMTEST <name> PASS|FAIL <detail>" lines (console lines end in \r).
	# the result lines as they are; pass/fail counted by vm_tally, n/a and
	# known gaps from the other "NAME: ..." lines
	out=$(vm_results "$name" "$log" "$log" "$qrc" "$timeout_s")
	printf '%s\n' "$out" | awk -v p="$name: " 'index($0, p) != 1'
	printf '%s\n' "$out" >"$log.results"
	vm_tally "$name" "$log.results"
	t_na=$((t_na + $(summed "$out" ' n/a$')))
	t_xfail=$((t_xfail + $(summed "$out" ' known gaps')))
}

# summed OUTPUT SUFFIX: N of OUTPUT's "NAME: N<SUFFIX>" line (0 without one).
summed() {
	printf '%s\n' "$1" | awk -v p="$name: " -v re="^[0-9]+$2" \
		'index($0, p) == 1 { r = substr($0, length(p) + 1); if (r ~ re) n += r + 0 } END { print n + 0 }'
}

t_na=0 t_xfail=0
if [ "$part" = all ] && [ ${#bad[@]} -gt 0 ]; then
	printf '%s\n' "${bad[@]}"
	TALLY_FAIL=$((TALLY_FAIL + ${#bad[@]}))
fi
if [ -n "$multi" ] && [ "$part" != single ]; then
	boot_tests "${VM_ACCEL:-tcg}" "$multi" "$VM_WORK/$line$tag.log"
fi
if [ -n "$single" ] && [ "$part" != multi ]; then
	boot_tests "tcg,thread=single" "$single" "$VM_WORK/$line$tag.one-thread.log"
fi
echo "$name: $t_na n/a"
[ "$t_xfail" = 0 ] || echo "$name: $t_xfail known gaps (XFAIL: protection missing, issue open)"
echo "$name: $TALLY_PASS passed, $TALLY_FAIL failed"
[ "$TALLY_FAIL" = 0 ]
