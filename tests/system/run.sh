#!/bin/bash
# tests/system/run.sh - the system lab: a booted Debian 12 host with systemd, udevd,
# journald and multipathd, asmguard installed from its .deb, on a lab kernel.
#
#   tests/system/run.sh LINE [TEST...]
#       LINE   a VM lab kernel line (6.1, 6.12, ...: tests/vm/kernels.sh picks the newest
#              Debian cloud kernel of it)
#       TEST   names of tests/system/guest/tests/<TEST>.sh (default: all)
#   tests/system/run.sh pair [TEST...]
#       the two-node mode (tests/system/pair.sh): two guests sharing disks, on 6.12
#
# Environment:
#   SYS_TIMEOUT=600      seconds before qemu is killed (guest did not finish)
#   SYS_TEST_TIMEOUT=180 seconds per guest test (inside the guest; 300 for the
#                        container tests)
#   SYS_BUILD=1          0: do not build the release binaries and the .deb first
#   SYS_MEM=2G SYS_SMP=2 guest size
#   SYS_ACCEL=tcg,thread=single  the accelerator (tcg: multi-threaded TCG)
#   SYS_RUN=LINE         the run's name: results "system-<SYS_RUN>", logs
#                        work/<SYS_RUN>.{console,results}.log (all.sh: 6.12-containers)
#
# How: the cached base image (tests/system/image.sh, mmdebstrap) is unpacked, the
# kernel's whole module tree is added (depmod), the project's .deb is installed with
# apt in a chroot, the guest runner (guest/init, started by sys-lab.service after
# multi-user.target) and the tests go to /vmtests with the VM lab's lib.sh, and the
# tree becomes an ext4 image booted from a QEMU NVMe disk (root=/dev/nvme0n1, no
# initramfs: NVMe is built into the cloud kernels), the only NVMe namespace: a second
# one's name can take n1 (the kernel names a namespace in the order its scans end,
# and they run in parallel: the root then was the empty data disk and the boot
# panicked). The data disk that keeps its data across the reboot test's reboot is a
# virtio disk (64 MiB, serial sysdata: /dev/disk/by-id/virtio-sysdata). Results come out on the second
# serial port in the VM lab's contract (tests/vm/results.sh): "PASS|FAIL|N/A
# system-<line> <check> <detail>" lines, then "system-<line>: N passed, M failed".
# Logs: tests/system/work/<line>.{console,results}.log.

set -uo pipefail
SYS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ "${1:-}" = pair ]; then
	shift
	exec "$SYS_DIR/pair.sh" "$@"
fi
. "$SYS_DIR/env.sh"

lab_line system '^([0-9]+\.[0-9]+|newest)$' '6.1, 6.12, ...' "${1:-}"
shift
run=${SYS_RUN:-$line}
name=system-$run
tests=$(echo "$*" | tr ' ' ',')

# host tools of the system lab, besides the VM lab's
SYS_LAB_PKGS="mmdebstrap e2fsprogs lintian rpm"
vm_deps $VM_LAB_PKGS $SYS_LAB_PKGS || summary_fail "could not install the lab's packages"
mkdir -p "$SYS_WORK"
if [ "${SYS_BUILD:-1}" = 1 ]; then
	echo "$name: cargo build --release and the .deb" >&2
	(cd "$SYS_ROOT" && cargo build --release -q -p asmguardd -p asmguardctl) >&2 ||
		summary_fail "cargo build --release failed"
fi
deb=$(cd "$SYS_ROOT" && flock target/.package.lock env BIN=target/release scripts/package.sh) ||
	summary_fail "scripts/package.sh failed"
deb=$SYS_ROOT/$deb

# one run of this name at a time in this checkout (its guest takes one of the
# machine's slots once its disk is made: below)
mkdir -p "$SYS_WORK/locks/$run"
lab_checkout_lock "$name" "$SYS_WORK/locks/$run" "system lab $run"

t0=$SECONDS
# Each test's header settings (lab_test_settings, tests/vm/README.md "Test headers"):
# "named-only" (the container tests) runs only when named, and in the container
# variant of the image; "one-line" (a test of the package's userspace that no kernel
# line changes, e.g. migrate) runs on SYS_ONE_LINE (default 6.12) alone when the whole
# lab runs, and wherever it is named. A test whose header does not parse fails
# without a boot.
variant="" listed="" bad=()
for t in ${*:-$(cd "$SYS_DIR/guest/tests" && ls -- *.sh | sed 's/\.sh$//')}; do
	f=$SYS_DIR/guest/tests/$t.sh
	settings=""
	if [ -f "$f" ] && ! settings=$(lab_test_settings "$f" "named-only one-line" 2>&1); then
		bad+=("$t.header $settings")
		continue
	fi
	if [[ $'\n'$settings == *$'\n'one-line* ]] && [ $# = 0 ] && [ "$line" != "${SYS_ONE_LINE:-6.12}" ]; then
		echo "$name: $t runs on the ${SYS_ONE_LINE:-6.12} line only (one-line)" >&2
		continue
	fi
	if [[ $'\n'$settings == *$'\n'named-only* ]]; then
		[ $# -gt 0 ] || continue
		variant=containers
	fi
	listed="$listed,$t"
done
tests=${listed#,}
[ ${#bad[@]} = 0 ] || [ -n "$tests" ] || summary_fail "${bad[*]}"
image=$(sys_image $variant) || summary_fail "could not build the image (tests/system/image.sh)"
t_image=$((SECONDS - t0))
vm_fetch_kernel "$line" || summary_fail "could not fetch the $line kernel"
. "$VM_WORK/$line/kernel.env"
kroot=$VM_CACHE/${KPKG}_${KPKG_VERSION//:/%3a}
echo "$name: kernel $KPKG $KPKG_VERSION ($KVER)" >&2

# ---- the guest's root: image + modules + package + tests ---------------------
t0=$SECONDS
w=$SYS_WORK/$run
r=$w/root
rm -rf "$w"
mkdir -p "$r"
tar -C "$r" -xf "$image" || summary_fail "could not unpack $image"
mkdir -p "$r/usr/lib/modules/$KVER"
cp -a "$kroot/lib/modules/$KVER/." "$r/usr/lib/modules/$KVER/" || summary_fail "could not copy the modules"
depmod -b "$r" "$KVER" || summary_fail "depmod failed"
cp "$deb" "$r/tmp/"
t_assemble=$((SECONDS - t0))
t0=$SECONDS
if ! out=$(chroot "$r" env DEBIAN_FRONTEND=noninteractive PATH=/usr/sbin:/usr/bin:/sbin:/bin \
	apt-get install -y -q "/tmp/${deb##*/}" 2>&1); then
	summary_fail "apt-get install of the package in the image: $(echo "$out" | tail -n 3 | tr '\n' ' ')"
fi
t_install=$((SECONDS - t0))
rm -f "$r/tmp/${deb##*/}"
mkdir -p "$r/vmtests/tests"
cp "$VM_DIR/guest/lib.sh" "$r/vmtests/lib.sh"
cp "$SYS_DIR/guest/syslib.sh" "$r/vmtests/syslib.sh"
cp "$SYS_DIR/guest/ctrlib.sh" "$r/vmtests/ctrlib.sh"
cp "$SYS_DIR/guest/init" "$r/vmtests/init"
cp "$SYS_DIR"/guest/tests/*.sh "$r/vmtests/tests/"
# the real ASM block-0 dumps (the format crate's test vectors) for the migrate test
mkdir -p "$r/vmtests/vectors"
cp "$SYS_ROOT"/crates/format/tests/vectors/*.bin "$r/vmtests/vectors/"
cp "$SYS_DIR/guest/sys-lab.service" "$r/etc/systemd/system/"
# a single SATA disk is no multipath device (the ATA disk of the one-line tests' line)
mkdir -p "$r/etc/multipath/conf.d"
printf 'blacklist {\n\tdevice {\n\t\tvendor "ATA"\n\t\tproduct ".*"\n\t}\n}\n' >"$r/etc/multipath/conf.d/lab-ata.conf"
chmod 0755 "$r/vmtests/init"
systemctl --root="$r" enable sys-lab.service >/dev/null 2>&1
# Prometheus is started by the test that needs it (TCG time is scarce)
systemctl --root="$r" disable prometheus.service prometheus-node-exporter.service >/dev/null 2>&1
t0=$SECONDS
size=$(($(du -sm "$r" | cut -f1) + 512))
mkfs.ext4 -q -F -L sysroot -d "$r" "$w/disk.img" "${size}M" || summary_fail "mkfs.ext4 -d failed"
t_mkfs=$((SECONDS - t0))
rm -rf "$r"
echo "$name: image ${t_image}s (cached unless the recipe changed), modules ${t_assemble}s, apt install ${t_install}s, ext4 ${t_mkfs}s" >&2

# ---- boot ---------------------------------------------------------------------
console=$SYS_WORK/$run.console.log
results=$SYS_WORK/$run.results.log
: >"$results"
timeout_s=${SYS_TIMEOUT:-600}
# rootwait: the NVMe namespace is scanned asynchronously
append="root=/dev/nvme0n1 rootwait rw console=ttyS0 panic=-1 quiet loglevel=3 systemd.show_status=0"
# (the container tests take longer: all.sh gives them 300 s each, and so does a run
# that names them)
per_test=${SYS_TEST_TIMEOUT:-180}
[ "$variant" != containers ] || per_test=${SYS_TEST_TIMEOUT:-300}
append="$append asmguard.test_timeout=$per_test"
[ -n "$tests" ] && append="$append asmguard.tests=$tests"
# -no-reboot: a guest that reboots (the reboot test) ends qemu, and the loop below
# boots it again from the same disks: a power cycle. (QEMU's warm reset under TCG
# left the 6.12 guest's next boot in soft lockups in clear_page for two minutes, one
# boot panicking: its nvme0n1 was then the data disk, see the header.)
truncate -s 64M "$w/data.img"
# one-thread TCG (SYS_ACCEL): with two guests on the two host cores, as the VM lab
# measured (tests/vm/README.md "One-thread boots"), the two vCPUs taking turns on
# one host thread run the same tests faster than two threads
qemu=(qemu-system-x86_64 -accel "${SYS_ACCEL:-tcg,thread=single}" -cpu max -m "${SYS_MEM:-2G}" -smp "${SYS_SMP:-2}"
	-display none -nic none -no-reboot
	-kernel "$VM_WORK/$line/vmlinuz" -append "$append"
	-drive "file=$w/disk.img,if=none,id=root,format=raw" -drive "file=$w/data.img,if=none,id=data,format=raw"
	-device nvme,id=nvme0,serial=sysroot -device nvme-ns,bus=nvme0,drive=root,nsid=1
	-device virtio-blk-pci,drive=data,serial=sysdata)
# the one-line tests' line (migrate) also has a real ATA disk (ata_piix, the default
# IDE bus): udev's ID_SERIAL from ata_id, scsi_id's 1ATA_<model>_<serial>
if [ "$line" = "${SYS_ONE_LINE:-6.12}" ]; then
	truncate -s 1M "$w/ata.img"
	qemu+=(-drive "file=$w/ata.img,if=none,id=ata,format=raw" -device ide-hd,drive=ata,bus=ide.0,serial=sysata)
fi
# the guest's two serial ports go to one pair of files per boot, then to the run's
# logs, in boot order
: >"$console"
# one guest: one of the machine's slots (held until the shell exits); its place in
# the machine's queue (measured: the container boot about 340 s, a line about 35 s a
# test)
est=$(($(echo "$tests" | tr ',' '\n' | grep -c .) * 35))
[ "$variant" != containers ] || est=340
LAB_EST=$est lab_machine_lock "$name" 1
start=$SECONDS
boots=0
while :; do
	boots=$((boots + 1))
	bc=$w/console.$boots br=$w/results.$boots
	left=$((timeout_s - (SECONDS - start)))
	[ $left -gt 10 ] || left=10
	timeout -k 5 "$left" "${qemu[@]}" -serial "file:$bc" -serial "file:$br" </dev/null >"$w/qemu.log" 2>&1 &
	qpid=$!
	# A guest that finished (VMDONE: its results are written and synced) and is not
	# off 5 s later is stopped: nothing of a run outlives it, and the shutdown is no
	# test's (the container boot's waited on its containers' units: 30 s and more)
	(
		while kill -0 "$qpid" 2>/dev/null; do
			if grep -aq '^VMDONE' "$br" 2>/dev/null; then
				for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$qpid" 2>/dev/null || break; sleep 0.5; done
				kill -0 "$qpid" 2>/dev/null && echo "$name: the guest finished but was not off 5 s later: qemu stopped" >&2 &&
					kill "$qpid" 2>/dev/null
				break
			fi
			sleep 1
		done
	) &
	watcher=$!
	wait "$qpid"
	qrc=$?
	kill "$watcher" 2>/dev/null
	wait "$watcher" 2>/dev/null
	cat "$bc" >>"$console" 2>/dev/null
	cat "$br" >>"$results" 2>/dev/null
	# the guest rebooted (VMREBOOT, before `systemctl reboot`) and has more to run
	if [ "$qrc" = 0 ] && [ $boots -lt 3 ] && grep -aq '^VMREBOOT' "$br" && ! grep -aq '^VMDONE' "$br"; then
		echo "$name: the guest rebooted after $((SECONDS - start))s: booting it again from its disks" >&2
		continue
	fi
	break
done
wall=$((SECONDS - start))
boot=$(sed -n 's/^VMINFO boot-seconds //p' "$results" | head -n 1)
done_line=$(grep -a -m1 '^VMDONE' "$results" || true)
echo "$name: multi-user.target at ${boot:-?}s uptime, tests done at ${done_line#VMDONE }s, wall ${wall}s; logs $console $results" >&2
grep -a '^VMINFO' "$results" | sed "s/^VMINFO /INFO $name /" >&2
rm -f "$w/disk.img" "$w/data.img"
# the tests whose header did not parse: one failure each, in the results' own count
for b in "${bad[@]}"; do echo "VMTEST ${b%% *} FAIL ${b#* }" >>"$results"; done
vm_results "$name" "$results" "$console" "$qrc" "$timeout_s"
