#!/bin/bash
# tests/system/pair.sh - the system lab's two-node mode (tests/system/run.sh pair):
# two Debian 12 guests (nodes a and b) booted side by side from the system image,
# each with asmguard installed from the .deb and running under systemd, sharing
# their test disks as RAC nodes share LUNs. The host drives both nodes.
#
#   tests/system/run.sh pair [TEST...]     TEST: watch conflict reclaim prometheus (default: all)
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
# The nodes reach each other on a point-to-point link (QEMU dgram netdev over two
# unix sockets, 10.24.0.1 and .2, systemd-networkd): Prometheus runs on a and
# scrapes both daemons (their metrics listen on 0.0.0.0:9465 here). Each guest runs
# guest/pair-agent on its second serial port: a line in, a command's status and
# output out. Result lines follow the labs' contract: "PASS|FAIL system-pair
# <test>.<check> <detail>", then "system-pair: N passed, M failed".
# Logs: tests/system/work/pair/{a,b}.console.log, agent.log.

set -uo pipefail
SYS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$SYS_DIR/env.sh"

line=${PAIR_LINE:-6.12}
name=system-pair
tests=${*:-watch conflict reclaim prometheus}
for t in $tests; do
	case $t in watch | conflict | reclaim | prometheus) ;; *)
		echo "usage: $0 [watch|conflict|reclaim|prometheus ...] (no test '$t')" >&2
		exit 2 ;;
	esac
done
sys_report_init "$name"

SYS_LAB_PKGS="mmdebstrap e2fsprogs"
vm_deps $VM_LAB_PKGS $SYS_LAB_PKGS || summary_fail "could not install the lab's packages"
mkdir -p "$SYS_WORK"
synth=$SYS_ROOT/target/release/asmguard-synth-asm
if [ "${SYS_BUILD:-1}" = 1 ] || [ ! -x "$synth" ]; then
	echo "$name: cargo build --release and the .deb" >&2
	(cd "$SYS_ROOT" && cargo build --release -q -p asmguardd -p asmguardctl -p asmguard-reclaim --bin asmguard-synth-asm) >&2 ||
		summary_fail "cargo build --release failed"
fi
deb=$(cd "$SYS_ROOT" && BIN=target/release scripts/package.sh) || summary_fail "scripts/package.sh failed"
deb=$SYS_ROOT/$deb

lab_lock "$name" "$SYS_WORK" "system lab"
t_start=$SECONDS
image=$(sys_image) || summary_fail "could not build the image (tests/system/image.sh)"
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
SHARED=5
for i in $(seq 1 $SHARED); do truncate -s 64M "$w/sh$i.img"; done
truncate -s 96M "$w/sh5.img"
RC_ALLOC=2-10,12-20,30-40,50
if ! synth_out=$("$synth" write "$w/sh5.img" --label PAIRRC --group PAIRDG --aus 96 --allocated $RC_ALLOC --fill 2>&1); then
	summary_fail "asmguard-synth-asm write: $synth_out"
fi
RC_FREE=$(echo "$synth_out" | sed -n 's/.*free_bytes \([0-9]*\).*/\1/p')
[ -n "$RC_FREE" ] || summary_fail "asmguard-synth-asm printed no free_bytes: $synth_out"
t_assembled=$((SECONDS - t_start))

# ---- boot both ---------------------------------------------------------------------
timeout_s=${SYS_TIMEOUT:-600}
append="root=/dev/nvme0n1 rw console=ttyS0 panic=-1 quiet loglevel=3 systemd.show_status=0"
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
one() { printf '%s' "$*" | tr '\n\r\t' '   ' | cut -c1-300; }
pass() { sys_pass "$1" "$(one "${2:-}")"; }
fail() { sys_fail "$1" "$(one "${2:-}")"; }
info() { echo "INFO $name $*" >&2; }
# ok CHECK [DETAIL]: PASS when the last command's RC is 0.
ok() { if [ "$RC" = 0 ]; then pass "$1" "${2:-$OUT}"; else fail "$1" "exit $RC: $OUT"; fi; }
# refused CHECK PATTERN: PASS when the last command failed and its output matches PATTERN.
refused() {
	if [ "$RC" != 0 ] && printf '%s' "$OUT" | grep -Eq -- "$2"; then pass "$1" "$OUT"; else fail "$1" "want a failure matching /$2/, got exit $RC: $OUT"; fi
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
	echo "$name: images ${t_assembled}s, boot ${t_booted:-?}s, tests ${t_tests:-?}s, wall $((SECONDS - t_start))s; logs $w" >&2
	rm -f "$w"/*.img
	if [ "$SYS_FAILED" -gt 0 ]; then
		for n in a b; do
			echo "---- $name: node $n, last 30 console lines ----"
			tr -d '\r' <"$w/$n.console.log" | tail -n 30
		done
		echo "---- $name: agent log (last 40 lines) ----"
		tail -n 40 "$AGENT_LOG"
		echo "---- end ----"
	fi
	echo "$name: 0 n/a"
	sys_report_end
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

if [[ " $tests " == *" prometheus "* ]]; then
	# started first: Prometheus takes a while to come up under TCG
	on a "cat >/etc/prometheus/prometheus.yml <<YML
global:
  scrape_interval: 2s
  evaluation_interval: 2s
rule_files:
  - /etc/prometheus/asmguard-alerts.yml
scrape_configs:
  - job_name: asmguard
    static_configs:
      - targets: ['10.24.0.1:9465', '10.24.0.2:9465']
YML
systemctl start prometheus.service"
	ok prometheus.start "Prometheus started on a, scraping 10.24.0.1:9465 and 10.24.0.2:9465"
fi

# ---- 1. a label made on a reaches b with no command --------------------------------
if [[ " $tests " == *" watch "* ]]; then
	D=/dev/vda
	on b "dd if=/dev/zero of=$D bs=4096 count=1 seek=2 conv=notrunc oflag=direct 2>&1"
	ok watch.b-root-writes-before-label "root on b writes the unlabelled shared disk (zeros: the label's data check stays quiet)"
	on b "bg follow follow appear PAIRW1 $D 30"
	on a "$C label PAIRW1 $D"
	ok watch.a-label
	on b "bg_wait follow 40"
	within5 watch.b-lists-label-within-5s
	on b "link_of PAIRW1 10"
	same watch.b-link-owner-mode "$D grid:asmadmin 660" "$OUT" "udevd on b linked it after the daemon's change event: $OUT"
	on b "write_as root $D 2 R"
	refused watch.b-root-denied "Operation not permitted"
	on b "chmod 0666 $D && write_as intruder $D 2 I; rc=\$?; chmod 0660 $D; exit \$rc"
	refused watch.b-intruder-denied "Operation not permitted"
	on a "write_as grid /dev/asmguard/disks/PAIRW1 16 A"
	ok watch.a-grid-writes
	on b "write_as grid /dev/asmguard/disks/PAIRW1 17 B"
	ok watch.b-grid-writes
	on b "block_char $D 16"
	same watch.b-reads-a-block A "$OUT" "b reads a's block 16 as '$OUT' (one disk)"
	on a "block_char $D 17; echo; block_char $D 2"
	same watch.a-reads-b-block-and-no-denied-write B "$OUT" "a reads b's grid block 17, and block 2 as zeros (no refused write landed)"

	on b "bg follow follow appear PAIRW2 $D 30"
	on a "$C rename PAIRW1 PAIRW2"
	ok watch.a-rename
	on b "bg_wait follow 40"
	within5 watch.b-follows-rename-within-5s
	on b "named PAIRW1 && echo 'PAIRW1 still listed'; link_of PAIRW2 10; [ -e /dev/asmguard/disks/PAIRW1 ] && echo 'old link kept'"
	same watch.b-rename-link "$D grid:asmadmin 660" "$OUT"
	on b "write_as root $D 2 R"
	refused watch.b-root-denied-after-rename "Operation not permitted"

	on b "bg follow follow gone PAIRW2 $D 30"
	on a "$C unlabel PAIRW2"
	ok watch.a-unlabel
	on b "bg_wait follow 40"
	within5 watch.b-releases-within-5s
	on b "i=0; while [ -e /dev/asmguard/disks/PAIRW2 ] && [ \$i -lt 100 ]; do i=\$((i+1)); sleep 0.1; done; [ ! -e /dev/asmguard/disks/PAIRW2 ] || { echo 'link kept'; exit 1; }; write_as root $D 2 R"
	ok watch.b-released "no link, root writes again on b: $OUT"
fi

# ---- 2. the same label on two nodes at once ----------------------------------------
if [[ " $tests " == *" conflict "* ]]; then
	D=/dev/vdb
	# one disk, two names, at once: one wins, the other is told, both nodes agree
	send a ". /vmtests/pairlib.sh; $C label PAIRC1 $D"
	send b ". /vmtests/pairlib.sh; $C label PAIRC2 $D"
	recv a; rc_a=$RC out_a=$OUT
	recv b; rc_b=$RC out_b=$OUT
	case $rc_a:$rc_b in
	0:4) win=PAIRC1 lose=PAIRC2 lost=$out_b ;;
	4:0) win=PAIRC2 lose=PAIRC1 lost=$out_a ;;
	*) win="" lose="" lost="" ;;
	esac
	if [ -n "$win" ] && printf '%s' "$lost" | grep -q "$win"; then
		pass conflict.one-disk-two-names-one-refused "$win stands; the other was refused naming it: $lost"
	else
		fail conflict.one-disk-two-names-one-refused "a: exit $rc_a $out_a :: b: exit $rc_b $out_b"
	fi
	info "conflict: one disk two names at once: a exit $rc_a, b exit $rc_b"
	for n in a b; do
		on $n "i=0; until listed ${win:-none} || [ \$i -ge 100 ]; do i=\$((i+1)); sleep 0.1; done; raw_label $D; echo; $C lsdsk | grep '^PAIRC' | cut -d' ' -f1"
		same "conflict.one-disk-$n-agrees" "$(printf 'ORCLDISK%s\n%s' "$win" "$win")" "$OUT" "disk and daemon on $n"
	done

	# one disk, two names, b's forced label landing while a's is being confirmed:
	# a is told (label_conflict), or, had b come later, a's watch reports the change
	on b "bg force label_when_seen PAIRF1 $D PAIRF2"
	on a "$C label PAIRF1 $D --force"
	rc_a=$RC out_a=$OUT
	on b "bg_wait force 30"
	ok conflict.forced-b-label
	if [ "$rc_a" = 4 ] && printf '%s' "$out_a" | grep -q "carries label PAIRF2"; then
		pass conflict.forced-a-told "$out_a"
		info "conflict: b's forced label landed within a's confirmation: a answered label_conflict"
	else
		on a "until_true 10 journal_has 'carries label PAIRF2, not PAIRF1'; journalctl -u asmguard -o cat | grep 'carries label PAIRF2, not PAIRF1'"
		if [ "$rc_a" = 0 ] && [ "$RC" = 0 ]; then
			pass conflict.forced-a-told "a's label answered before b's landed; a's journal: $OUT"
			info "conflict: b's forced label landed after a's confirmation: a's label watch reported it"
		else
			fail conflict.forced-a-told "a: exit $rc_a $out_a; journal: $OUT"
		fi
	fi
	for n in a b; do
		on $n "i=0; until listed PAIRF2 || [ \$i -ge 100 ]; do i=\$((i+1)); sleep 0.1; done; raw_label $D; echo; $C lsdsk | grep '^PAIR[CF]' | cut -d' ' -f1"
		same "conflict.forced-$n-agrees" "$(printf 'ORCLDISKPAIRF2\nPAIRF2')" "$OUT" "disk and daemon on $n"
	done

	# two disks, one name, at once: both stay protected, every node reports the conflict
	D4=/dev/vdc D5=/dev/vdd
	send a ". /vmtests/pairlib.sh; $C label PAIRDUP $D4"
	send b ". /vmtests/pairlib.sh; $C label PAIRDUP $D5"
	recv a; rc_a=$RC out_a=$OUT
	recv b; rc_b=$RC out_b=$OUT
	info "conflict: two disks one name at once: a exit $rc_a, b exit $rc_b"
	if [ "$rc_a:$rc_b" = 0:0 ]; then
		pass conflict.two-disks-one-name-both-written "a: $out_a; b: $out_b"
		for n in a b; do
			on $n "i=0; until $C lsdsk | grep -q 'CONFLICT: label PAIRDUP' || [ \$i -ge 100 ]; do i=\$((i+1)); sleep 0.1; done; $C lsdsk | grep 'CONFLICT: label PAIRDUP'"
			same "conflict.two-disks-$n-reports" "CONFLICT: label PAIRDUP is on $D4 and $D5: neither is used until one is relabelled" "$OUT"
			on $n "$C status | grep -i conflict; journalctl -u asmguard -o cat | grep -c 'label PAIRDUP is on more than one disk'"
			if [ "$RC" = 0 ] && printf '%s' "$OUT" | grep -q "1 label conflicts" && [ "$(printf '%s' "$OUT" | tail -n 1)" -ge 1 ]; then
				pass "conflict.two-disks-$n-status-and-journal" "$OUT"
			else
				fail "conflict.two-disks-$n-status-and-journal" "exit $RC: $OUT"
			fi
			on $n "write_as root $D4 2 R; a=\$?; write_as root $D5 2 R; b=\$?; echo \$a \$b"
			same "conflict.two-disks-$n-both-protected" "1 1" "$(printf '%s' "$OUT" | tail -n 1)" "$OUT"
			on $n "$C unlabel PAIRDUP"
			refused "conflict.two-disks-$n-label-ops-refused" "more than one disk"
		done
		on a "raw_label $D4; echo; raw_label $D5"
		same conflict.two-disks-nothing-lost "$(printf 'ORCLDISKPAIRDUP\nORCLDISKPAIRDUP')" "$OUT"
		# resolved on one node, followed by the other
		on b "bg follow follow appear PAIRDUP2 $D5 30"
		on a "$C label PAIRDUP2 $D5 --force"
		ok conflict.two-disks-relabel-one
		on b "bg_wait follow 40"
		within5 conflict.two-disks-b-follows-within-5s
		for n in a b; do
			on $n "$C lsdsk | grep -c CONFLICT; $C lsdsk | grep '^PAIRDUP' | awk '{print \$1, \$3}' | sort"
			same "conflict.two-disks-$n-resolved" "$(printf '0\nPAIRDUP %s\nPAIRDUP2 %s' $D4 $D5)" "$OUT"
		done
	else
		# b's daemon had already read a's label: one refused, naming the other disk
		if { [ "$rc_a:$rc_b" = 0:4 ] && printf '%s' "$out_b" | grep -q "$D4"; } ||
			{ [ "$rc_a:$rc_b" = 4:0 ] && printf '%s' "$out_a" | grep -q "$D5"; }; then
			pass conflict.two-disks-one-name-both-written "one was refused, naming the other disk: a: $out_a; b: $out_b"
		else
			fail conflict.two-disks-one-name-both-written "a: exit $rc_a $out_a; b: exit $rc_b $out_b"
		fi
	fi
fi

# ---- 4 (first half). protection off on b: the alert's for: runs during reclaim ----------
if [[ " $tests " == *" prometheus "* ]]; then
	on a "until_true 120 prom_up_is 2; prom_up" 150
	same prometheus.both-targets-up 2 "$OUT" "targets up: $OUT"
	on a "until_true 30 prom_series_is asmguard_protected 2; promq asmguard_protected"
	same prometheus.per-node-series "$(printf '10.24.0.1:9465 1\n10.24.0.2:9465 1')" "$OUT" "asmguard_protected by instance: $OUT"
	on a "promq 'asmguard_disk_info{label=\"PAIRRC\"}'"
	same prometheus.per-node-disk-series "$(printf '10.24.0.1:9465 1\n10.24.0.2:9465 1')" "$OUT" "asmguard_disk_info{label=\"PAIRRC\"} by instance: $OUT"
	t_off=$SECONDS
	on b "$C filter disable"
	ok prometheus.b-filter-disable
fi

# ---- 3. reclaim across hosts ---------------------------------------------------------
if [[ " $tests " == *" reclaim "* ]]; then
	D=/dev/vde
	# (b's filter may be off by now: the prometheus test's alert is running)
	for n in a b; do
		on $n "$C lsdsk | grep '^PAIRRC .*$D.*PAIRDG' | awk '{print \$NF}'"
		ok "reclaim.$n-lists-disk" "PAIRRC in disk group PAIRDG on $D, Serial/WWN $OUT"
		eval "wwn_$n=\$OUT"
	done
	same reclaim.same-disk-identity "$wwn_a" "$wwn_b" "both nodes report the disk's serial/WWN as $wwn_b"
	on b "standin_start $D; sleep 3; wc -l </tmp/standin.beats"
	[ "$RC" = 0 ] && [ "${OUT:-0}" -ge 1 ] 2>/dev/null && pass reclaim.b-standin-heartbeats "$OUT heartbeat(s) written by grid on b" ||
		fail reclaim.b-standin-heartbeats "exit $RC: $OUT"
	on a "$C reclaim --diskgroup PAIRDG --watch 6 --json 2>/tmp/rc.err; rc=\$?; grep -v '^{\"phase\"' /tmp/rc.err; exit \$rc"
	refused reclaim.a-refuses-while-b-heartbeats "heartbeat"
	[ "$RC" = 4 ] && pass reclaim.a-refusal-exit-4 "exit 4" || fail reclaim.a-refusal-exit-4 "exit $RC"
	on b "standin_stop"
	[ "$RC" = 0 ] && [ "${OUT:-0}" -ge 3 ] 2>/dev/null && pass reclaim.b-standin-stopped "it wrote $OUT heartbeats" ||
		fail reclaim.b-standin-stopped "exit $RC: $OUT"
	on a "asmguard-synth-asm hash $D --aus 96 --allocated $RC_ALLOC"
	h0=$OUT
	on a "$C reclaim --diskgroup PAIRDG --watch 3 --json 2>/tmp/rc.progress | grep -o '\"reclaimed_bytes\": *[0-9]*' | grep -o '[0-9]*\$' | head -n 1" 180
	same reclaim.a-proceeds-after-b-stops "$RC_FREE" "$OUT" "reclaimed bytes (free AUs $RC_FREE)"
	on a "asmguard-synth-asm hash $D --aus 96 --allocated $RC_ALLOC"
	same reclaim.kept-aus-unchanged "$h0" "$OUT"
	on b "dd if=$D bs=1M skip=21 count=1 iflag=direct 2>/dev/null | tr -d '\0' | wc -c"
	same reclaim.b-reads-freed-au-as-zeros 0 "$OUT" "non-zero bytes b reads in AU 21 (free, reclaimed by a)"
fi

# ---- 4. one Prometheus, two nodes: the alert fires for b only ------------------------
if [[ " $tests " == *" prometheus "* ]]; then
	rules=/etc/prometheus/asmguard-alerts.yml
	on a "awk '/^ *- alert:/ { a = \$3 } /^ *expr: *asmguard_protected *== *0 *\$/ { print a; exit }' $rules"
	alert=$OUT
	[ -n "$alert" ] || fail prometheus.protection-rule "no rule on asmguard_protected == 0"
	on a "until_true 150 alert_firing $alert; prom_alerts $alert" 180
	same prometheus.alert-fires-for-b-only "10.24.0.2:9465 firing" "$OUT" "$alert in /api/v1/alerts $((SECONDS - t_off)) s after b's filter disable: $OUT"
	info "prometheus: $alert firing for b $((SECONDS - t_off)) s after filter disable (for: 1m)"
	on a "promq asmguard_protected"
	same prometheus.per-node-values "$(printf '10.24.0.1:9465 1\n10.24.0.2:9465 0')" "$OUT" "asmguard_protected by instance while b's filter is off"
	on b "$C filter enable"
	ok prometheus.b-filter-enable
	on a "until_true 60 alert_gone $alert; prom_alerts $alert" 90
	same prometheus.alert-resolves "" "$OUT" "$alert gone from /api/v1/alerts after b's filter enable"
fi
t_tests=$((SECONDS - t0))
finish
