#!/bin/bash
# tests/system/pair.sh - the system lab's two-node mode (tests/system/run.sh pair):
# two Debian 12 guests (nodes a and b) booted side by side from the system image,
# each with asmguard installed from the .deb and running under systemd, sharing
# their test disks as RAC nodes share LUNs. The host drives both nodes.
#
#   tests/system/run.sh pair [TEST...]     TEST: watch conflict ansible prometheus reclaim (default: all)
#
# The tests are files of their own, tests/system/pair/<TEST>.sh (the host's side: they
# run commands on the nodes), run in PAIR_ORDER whatever order they are named in.
#
# Environment: PAIR_LINE=6.12 (the kernel line), SYS_BUILD=1 (0: use the built
# binaries), SYS_TIMEOUT=600 (seconds before the guests are killed), PAIR_MEM=1536M.
#
# The shared disks are raw files on the host, each attached to both guests as a
# virtio-blk disk (vda...: one driver, probed in slot order, so the same name on
# both nodes; the root is the NVMe disk nvme0n1, alone on its controller, as more
# namespaces there are named in the order their asynchronous scans finish), with the
# same serial on both (one LUN seen by two hosts), cache=none (O_DIRECT on the host
# file: nothing is cached between the guests) and file.locking=off (QEMU would
# refuse a second writer otherwise):
#   vda  watch: labelled on a, followed on b
#   vdb  conflict: one disk, two names
#   vdc, vdd  conflict: two disks, one name
#   vde  reclaim: a SYNTHETIC ASM disk (asmguard-synth-asm, written here before
#            the boot: label PAIRRC, disk group PAIRDG)
#   vdf-vdi  ansible: four blank disks the collection's role labels
#   vdj  ansible: a disk holding ext4 (made here), which the role must refuse
# The nodes reach each other on a point-to-point link (QEMU dgram netdev over two
# unix sockets, 10.24.0.1 and .2, systemd-networkd): Prometheus runs on a and
# scrapes both daemons (their metrics listen on 0.0.0.0:9465 here). Each node also
# has a user-mode NIC whose only way in is a forward of a host loopback port to its
# sshd (PAIR_SSH_A, PAIR_SSH_B: free ports picked per run), for ansible-playbook
# from the host; root logs in with a key made per run (work/pair/id). Each guest runs
# guest/pair-agent on its second serial port: a line in, a command's status and
# output out. Results follow the labs' contract (tests/vm/results.sh): each check is a
# "VMTEST <test>.<check> PASS|FAIL <detail>" line in work/pair/results.log, which
# vm_results turns into "PASS|FAIL system-pair <test>.<check> <detail>" lines and
# "system-pair: N passed, M failed".
# Logs: tests/system/work/pair/{a,b}.console.log, agent.log, results.log.

set -uo pipefail
SYS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$SYS_DIR/env.sh"

line=${PAIR_LINE:-6.12}
name=system-pair
# the order the tests run in: prometheus turns b's filter off before reclaim (its
# alert's for: runs meanwhile), watch, conflict and ansible want it on (ansible
# rewrites both nodes' configuration through the role, metrics still on 0.0.0.0)
PAIR_ORDER="watch conflict ansible prometheus reclaim"
for t in "$@"; do
	if [[ " $PAIR_ORDER " != *" $t "* ]] || [ ! -f "$SYS_DIR/pair/$t.sh" ]; then
		echo "usage: $0 [${PAIR_ORDER// /|} ...] (no test '$t' in tests/system/pair/)" >&2
		exit 2
	fi
done
tests=""
for t in $PAIR_ORDER; do
	[ $# = 0 ] || [[ " $* " == *" $t "* ]] && tests="$tests $t"
done
tests=${tests# }

SYS_LAB_PKGS="mmdebstrap e2fsprogs"
vm_deps $VM_LAB_PKGS $SYS_LAB_PKGS || summary_fail "could not install the lab's packages"
mkdir -p "$SYS_WORK"
synth=$SYS_ROOT/target/release/asmguard-synth-asm
if [ "${SYS_BUILD:-1}" = 1 ] || [ ! -x "$synth" ]; then
	echo "$name: cargo build --release and the .deb" >&2
	(cd "$SYS_ROOT" && cargo build --release -q -p asmguardd -p asmguardctl -p asmguard-reclaim --bin asmguard-synth-asm) >&2 ||
		summary_fail "cargo build --release failed"
fi
deb=$(cd "$SYS_ROOT" && flock target/.package.lock env BIN=target/release scripts/package.sh) ||
	summary_fail "scripts/package.sh failed"
deb=$SYS_ROOT/$deb

# one pair run at a time in this checkout (its two guests take both of the machine's
# slots once their disks are made: below)
mkdir -p "$SYS_WORK/locks/pair"
lab_checkout_lock "$name" "$SYS_WORK/locks/pair" "system lab pair"
t_start=$SECONDS
image=$(sys_image pair) || summary_fail "could not build the image (tests/system/image.sh)"
vm_fetch_kernel "$line" || summary_fail "could not fetch the $line kernel"
. "$VM_WORK/$line/kernel.env"
kroot=$VM_CACHE/${KPKG}_${KPKG_VERSION//:/%3a}
echo "$name: kernel $KPKG $KPKG_VERSION ($KVER)" >&2

# ---- one root tree, two root disks -------------------------------------------
w=$SYS_WORK/pair
r=$w/root
rm -rf "$w"
mkdir -p "$r"
tar -C "$r" -xf "$image" || summary_fail "could not unpack $image"
mkdir -p "$r/usr/lib/modules/$KVER"
cp -a "$kroot/lib/modules/$KVER/." "$r/usr/lib/modules/$KVER/" || summary_fail "could not copy the modules"
depmod -b "$r" "$KVER" || summary_fail "depmod failed"
cp "$deb" "$r/tmp/"
if ! out=$(chroot "$r" env DEBIAN_FRONTEND=noninteractive PATH=/usr/sbin:/usr/bin:/sbin:/bin \
	apt-get install -y -q "/tmp/${deb##*/}" 2>&1); then
	summary_fail "apt-get install of the package in the image: $(echo "$out" | tail -n 3 | tr '\n' ' ')"
fi
rm -f "$r/tmp/${deb##*/}"
mkdir -p "$r/vmtests"
cp "$VM_DIR/guest/lib.sh" "$r/vmtests/lib.sh"
cp "$SYS_DIR/guest/syslib.sh" "$SYS_DIR/guest/pairlib.sh" "$SYS_DIR/guest/pair-agent" "$r/vmtests/"
chmod 0755 "$r/vmtests/pair-agent"
install -m 0755 "$synth" "$r/usr/local/bin/"
cp "$SYS_DIR/guest/pair-agent.service" "$r/etc/systemd/system/"
systemctl --root="$r" enable pair-agent.service systemd-networkd.service >/dev/null 2>&1
# ansible-playbook from the host: the run's key for root
rm -f "$w/id" "$w/id.pub"
ssh-keygen -q -t ed25519 -N '' -C asmguard-pair -f "$w/id" || summary_fail "ssh-keygen failed"
install -d -m 0700 "$r/root/.ssh"
install -m 0600 "$w/id.pub" "$r/root/.ssh/authorized_keys"
printf '[Match]\nMACAddress=52:54:00:24:01:01\n\n[Network]\nDHCP=ipv4\n' >"$r/etc/systemd/network/30-fwd.network"
systemctl --root="$r" mask systemd-networkd-wait-online.service >/dev/null 2>&1
systemctl --root="$r" disable prometheus.service prometheus-node-exporter.service >/dev/null 2>&1
# the metrics endpoint on every address: Prometheus on node a scrapes both
sed -i 's/^listen = "127.0.0.1:9465"/listen = "0.0.0.0:9465"/' "$r/etc/asmguard/asmguard.toml"
grep -q '^listen = "0.0.0.0:9465"' "$r/etc/asmguard/asmguard.toml" ||
	summary_fail "no metrics listen line to change in the packaged configuration"
size=$(($(du -sm "$r" | cut -f1) + 512))
for n in a b; do
	i=$([ $n = a ] && echo 1 || echo 2)
	echo "pair-$n" >"$r/etc/hostname"
	printf '[Match]\nMACAddress=52:54:00:24:00:0%s\n\n[Network]\nAddress=10.24.0.%s/24\n' "$i" "$i" \
		>"$r/etc/systemd/network/20-pair.network"
	mkfs.ext4 -q -F -L sysroot -d "$r" "$w/$n.img" "${size}M" || summary_fail "mkfs.ext4 -d failed"
done
rm -rf "$r"

# ---- the shared disks ------------------------------------------------------------
SHARED=10
for i in $(seq 1 $SHARED); do truncate -s 64M "$w/sh$i.img"; done
mkfs.ext4 -q -F -L pairdata "$w/sh10.img" || summary_fail "mkfs.ext4 of the ansible test's data disk failed"
truncate -s 96M "$w/sh5.img"
RC_ALLOC=2-10,12-20,30-40,50
if ! synth_out=$("$synth" write "$w/sh5.img" --label PAIRRC --group PAIRDG --aus 96 --allocated $RC_ALLOC --fill 2>&1); then
	summary_fail "asmguard-synth-asm write: $synth_out"
fi
RC_FREE=$(echo "$synth_out" | sed -n 's/.*free_bytes \([0-9]*\).*/\1/p')
[ -n "$RC_FREE" ] || summary_fail "asmguard-synth-asm printed no free_bytes: $synth_out"
t_assembled=$((SECONDS - t_start))
# two guests: both of the machine's slots; held, the VM lab's boots may queue behind
# (LAB_PAIR_STARTED, scripts/test.sh)
t0=$SECONDS
lab_machine_lock "$name" 2
[ -z "${LAB_PAIR_STARTED:-}" ] || : >"$LAB_PAIR_STARTED"
t_slots=$((SECONDS - t0))

# ---- boot both ---------------------------------------------------------------------
timeout_s=${SYS_TIMEOUT:-600}
append="root=/dev/nvme0n1 rootwait rw console=ttyS0 panic=-1 quiet loglevel=3 systemd.show_status=0"
declare -A QPID AGW AGR
# whatever happens to this script, no guest outlives it
trap 'for p in "${QPID[@]}"; do kill "$p" 2>/dev/null; done' EXIT
C=asmguardctl # in the commands sent to the nodes
boot() { # boot NODE
	local n=$1 i other
	i=$([ "$n" = a ] && echo 1 || echo 2)
	other=$([ "$n" = a ] && echo b || echo a)
	mkfifo "$w/$n.agent.in" "$w/$n.agent.out"
	local q=(qemu-system-x86_64 -accel tcg -cpu max -m "${PAIR_MEM:-1536M}" -smp 1
		-display none -no-reboot
		-kernel "$VM_WORK/$line/vmlinuz" -append "$append"
		-drive "file=$w/$n.img,if=none,id=root,format=raw"
		-device "nvme,id=nvme0,serial=pair-$n" -device nvme-ns,bus=nvme0,drive=root,nsid=1
		-netdev "dgram,id=net0,local.type=unix,local.path=$w/$n.net,remote.type=unix,remote.path=$w/$other.net"
		-device "virtio-net-pci,netdev=net0,mac=52:54:00:24:00:0$i"
		-netdev "user,id=net1,restrict=on,hostfwd=tcp:127.0.0.1:${SSHPORT[$n]}-:22"
		-device "virtio-net-pci,netdev=net1,mac=52:54:00:24:01:01"
		-serial "file:$w/$n.console.log"
		-chardev "pipe,id=agent,path=$w/$n.agent" -serial chardev:agent)
	local s
	for s in $(seq 1 $SHARED); do
		q+=(-drive "file=$w/sh$s.img,if=none,id=sh$s,format=raw,cache=none,file.locking=off,discard=unmap"
			-device "virtio-blk-pci,drive=sh$s,serial=pair-shared-$s")
	done
	timeout -k 5 "$timeout_s" "${q[@]}" </dev/null >"$w/$n.qemu.log" 2>&1 &
	QPID[$n]=$!
	exec {fd}<>"$w/$n.agent.in"
	AGW[$n]=$fd
	exec {fd}<>"$w/$n.agent.out"
	AGR[$n]=$fd
}
# a free loopback port per node for its sshd
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
declare -A SSHPORT
SSHPORT[a]=$(free_port) && SSHPORT[b]=$(free_port) || summary_fail "no free loopback port for the nodes' sshd"
[ "${SSHPORT[a]}" != "${SSHPORT[b]}" ] || SSHPORT[b]=$(free_port)
t_boot=$SECONDS
boot a
boot b
AGENT_LOG=$w/agent.log
: >"$AGENT_LOG"

# send NODE CMD: hands CMD (sh text) to NODE's agent.
send() {
	echo "[$(date +%T.%N | cut -c1-12)] $1> $2" >>"$AGENT_LOG"
	printf '%s\n' "$(printf '%s' "$2" | base64 -w0)" >&"${AGW[$1]}"
}
# recv NODE [SECONDS]: the answer: RC (255: none in time) and OUT.
recv() {
	local l rest
	while :; do
		if ! IFS= read -r -t "${2:-120}" -u "${AGR[$1]}" l; then
			RC=255 OUT="node $1 did not answer within ${2:-120} s"
			echo "[$(date +%T.%N | cut -c1-12)] $1< $OUT" >>"$AGENT_LOG"
			return
		fi
		l=${l%$'\r'}
		case $l in
		"AGENT "*)
			rest=${l#AGENT }
			RC=${rest%% *}
			OUT=$(printf '%s' "${rest#* }" | base64 -d 2>/dev/null)
			echo "[$(date +%T.%N | cut -c1-12)] $1< $RC $OUT" >>"$AGENT_LOG"
			return ;;
		esac
	done
}
# on NODE CMD [SECONDS]: runs CMD on NODE (after ". /vmtests/pairlib.sh").
on() {
	send "$1" ". /vmtests/pairlib.sh; $2"
	recv "$1" "${3:-120}"
}
# Matching an answer: `grep -q PATTERN <<<"$OUT"`, never `printf '%s' "$OUT" | grep -q`:
# bash writes a builtin's output a line at a time, and under pipefail the pipe
# fails whenever grep has matched and quit before printf wrote the last line
# (printf dies of SIGPIPE): a flaky FAIL on a loaded machine.
one() { printf '%s' "$*" | tr '\n\r\t' '   ' | cut -c1-300; }
# pass/fail CHECK [DETAIL]: one result line in the labs' contract
RESULTS=$w/results.log
: >"$RESULTS"
pass() { echo "VMTEST $1 PASS $(one "${2:-}")" >>"$RESULTS"; }
fail() { echo "VMTEST $1 FAIL $(one "${2:-}")" >>"$RESULTS"; }
info() { echo "INFO $name $*" >&2; }
# ok CHECK [DETAIL]: PASS when the last command's RC is 0.
ok() { if [ "$RC" = 0 ]; then pass "$1" "${2:-$OUT}"; else fail "$1" "exit $RC: $OUT"; fi; }
# refused CHECK PATTERN: PASS when the last command failed and its output matches PATTERN.
refused() {
	if [ "$RC" != 0 ] && grep -Eq -- "$2" <<<"$OUT"; then pass "$1" "$OUT"; else fail "$1" "want a failure matching /$2/, got exit $RC: $OUT"; fi
}
# same CHECK WANT GOT [DETAIL]
same() { if [ "$3" = "$2" ]; then pass "$1" "${4:-$3}"; else fail "$1" "want '$2', got '$3'${4:+ :: $4}"; fi; }
# within5 CHECK: the last follow's answer ("ok MS") came within 5000 ms (the issue's
# bound); the time goes to an INFO line as well.
within5() {
	local ms=${OUT#ok }
	if [ "$RC" = 0 ] && [ "$ms" -le 5000 ] 2>/dev/null; then
		pass "$1" "$ms ms after the disk showed it"
	else
		fail "$1" "exit $RC: $OUT (bound 5000 ms)"
	fi
	info "$1: ${ms} ms"
}

finish() {
	local n
	for n in a b; do
		kill -0 "${QPID[$n]}" 2>/dev/null && send "$n" "systemctl poweroff --no-block"
	done
	for n in a b; do
		local i=0
		while kill -0 "${QPID[$n]}" 2>/dev/null && [ $i -lt 60 ]; do i=$((i + 1)); sleep 1; done
		kill "${QPID[$n]}" 2>/dev/null
		wait "${QPID[$n]}" 2>/dev/null
	done
	echo "$name: images ${t_assembled}s, waited for the slots ${t_slots}s, boot ${t_booted:-?}s, tests ${t_tests:-?}s, wall $((SECONDS - t_start))s; logs $w" >&2
	rm -f "$w"/*.img
	if grep -q '^VMTEST [^ ]* FAIL' "$RESULTS"; then
		for n in a b; do
			echo "---- $name: node $n, last 30 console lines ----"
			tr -d '\r' <"$w/$n.console.log" | tail -n 30
		done
	fi
	# the drive finished (a boot that failed said so with its own check); after a
	# failure vm_results shows the agent log's last 40 lines
	echo "VMDONE $((SECONDS - t_start))" >>"$RESULTS"
	vm_results "$name" "$RESULTS" "$AGENT_LOG" 0 "$timeout_s"
	exit
}

# both agents up (boot to multi-user.target on both), 300 s at most
for n in a b; do
	while :; do
		if IFS= read -r -t 5 -u "${AGR[$n]}" l; then
			case $l in AGENT-READY*) info "node $n ${l#AGENT-READY }"; break ;; esac
		elif ! kill -0 "${QPID[$n]}" 2>/dev/null || [ $((SECONDS - t_boot)) -ge 300 ]; then
			fail "boot.node-$n" "no agent after $((SECONDS - t_boot)) s: $(tr -d '\r' <"$w/$n.console.log" | tail -n 5)"
			finish
		fi
	done
done
t_booted=$((SECONDS - t_boot))
t0=$SECONDS
pass boot.both-nodes "a and b reached multi-user.target in ${t_booted} s (wall, in parallel)"

# the link and both daemons
on a "i=0; until ping -c1 -W1 10.24.0.2 >/dev/null 2>&1 || curl -fs -o /dev/null http://10.24.0.2:9465/metrics || [ \$i -ge 30 ]; do i=\$((i+1)); sleep 1; done; curl -fsS http://10.24.0.2:9465/metrics | grep -c '^asmguard_protected '" 60
same boot.a-reaches-b-metrics 1 "$OUT" "asmguard_protected lines scraped from b's endpoint: $OUT"
for n in a b; do
	on $n "sys_service_up && $C status | grep -i protection"
	ok "boot.$n-protected"
done

# ---- the tests: tests/system/pair/<test>.sh, in PAIR_ORDER -----------------------
# Each file defines pair_<test>_run and, when it spans the others, pair_<test>_start
# (before every test's run) and pair_<test>_finish (after): the prometheus test
# starts Prometheus first and turns b's filter off before reclaim, so that its
# alert's for: runs during reclaim.
for t in $tests; do . "$SYS_DIR/pair/$t.sh"; done
for stage in start run finish; do
	for t in $tests; do
		! declare -F "pair_${t}_$stage" >/dev/null || "pair_${t}_$stage"
	done
done
t_tests=$((SECONDS - t0))
finish
