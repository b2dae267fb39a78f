#!/bin/sh
# nvme-multipath: every path of an NVMe native multipath disk (issue 31). Two
# heads, each labelled: the QEMU subsystem with two controllers sharing one
# namespace (fixture nvme-multipath, a dual-port SSD's shape), and an NVMe/TCP
# (NVMe-oF) namespace that an nvmet target on the guest's loopback exports
# through two ports (ANA: one optimized, one non-optimized), connected twice with
# `nvme connect`. For each head: `lsdsk` lists its hidden paths and controllers;
# through every controller node and every generic node, root (allowed by no
# rule) is refused `nvme format`, `nvme sanitize`, an `io-passthru` write and an
# `admin-passthru` Security Send with EPERM from the filter, and the disk's first
# 3 MiB keep their sha256; an allow-listed copy of nvme writes through each of
# them (the block read back through the head), and its Security Send, sanitize
# and format reach the device (the device answers with an NVMe status, or does
# it: the QEMU disk's format zeroes it, checked last). A controller that goes
# away and comes back (the QEMU one: PCI remove + rescan of its function; the
# TCP one: delete_controller + connect; each time the controller whose number
# its subsystem keeps, so it comes back under another) is dropped from `lsdsk`,
# then managed again under its new number: its node refuses root; the time
# that took is an INFO line. On the cgroup-device fallback, which sees
# opens only (nvme-cli opens read-only), the passthrough checks are n/a.
# Once per kernel: it exercises the kernel's NVMe topology and the daemon's
# model of it; the backend's passthrough refusals are destructive's and
# passthrough's, on every boot variant (5.10 runs it under fmod_ret, 6.x under
# the BPF LSM).
# lab-settings: once-per-kernel
. /vmtests/lib.sh

T_START=$(cut -d' ' -f1 /proc/uptime)
H=${VM_NVMEMP:-}
C="asmguardctl --socket /run/asmguard/asmguard.sock"
NVME=$(command -v nvme)
EPERM="Operation not permitted"
[ -b "$H" ] && [ -n "${VM_NVMEMP_CTRLS:-}" ] || {
	fail setup "no NVMe multipath head (fixture nvme-multipath): '$H' '${VM_NVMEMP_CTRLS:-}'"
	vm_exit
}
# an allow-listed copy of nvme (by executable: NVMe passthrough needs CAP_SYS_ADMIN
# before 6.2, which grid does not have)
mkdir -p /opt/mp && cp "$NVME" /opt/mp/nvme
ALLOWED=/opt/mp/nvme
dd if=/dev/urandom of=/tmp/mp512 bs=512 count=1 2>/dev/null
dd if=/dev/urandom of=/tmp/mp512b bs=512 count=1 2>/dev/null
dd if=/dev/zero of=/tmp/mpzero bs=512 count=1 2>/dev/null

now() { cut -d' ' -f1 /proc/uptime; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
# hsha DEV: sha256 of DEV's first 3 MiB (the label, and the blocks written below)
hsha() { dd if="$1" bs=1M count=3 iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1; }
# block DEV LBA: sha256 of one 512-byte block
block() { dd if="$1" bs=512 skip="$2" count=1 iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1; }
fsha() { sha256sum "$1" | cut -d' ' -f1; }

# the commands, as root or through the allowed copy (NVME= the binary)
format_cmd() { "$1" format "$2" --namespace-id="$3" --force; }
sanitize_cmd() { "$1" sanitize "$2" --sanact=2; }
# io-passthru Write (opcode 0x01) of one block at LBA $4 (cdw10), file $5
iowrite_cmd() {
	"$1" io-passthru "$2" --opcode=0x01 --namespace-id="$3" --data-len=512 --write \
		--cdw10="$4" --cdw11=0 --cdw12=0 --input-file="$5"
}
# admin-passthru Security Send (opcode 0x81): SECP 1, SPSP 1 (cdw10), 512 bytes (cdw11)
secsend_cmd() {
	"$1" admin-passthru "$2" --opcode=0x81 --namespace-id="$3" --data-len=512 --write \
		--cdw10=0x01000100 --cdw11=512 --input-file=/tmp/mpzero
}
# reached CHECK CMD...: the allowed caller's command reached the device: it worked,
# or the device answered it with an NVMe status (it may not implement it); never
# the filter's EPERM
reached() {
	_c=$1; shift
	_o=$("$@" 2>&1)
	_rc=$?
	if printf '%s' "$_o" | grep -q "$EPERM"; then
		fail "$_c" "refused by the filter: $* :: $_o"
	elif [ $_rc = 0 ] || printf '%s' "$_o" | grep -qi 'NVMe status'; then
		pass "$_c" "exit $_rc: $_o"
	else
		fail "$_c" "exit $_rc without an NVMe status: $* :: $_o"
	fi
}

# refusals TAG HEAD NSID NODE...: root's format, sanitize, io-passthru write and
# Security Send through every NODE are refused by the filter; HEAD unchanged
refusals() {
	_tag=$1 _h=$2 _ns=$3
	shift 3
	for _n in "$@"; do
		_t=$_tag-$(basename "$_n")
		if ! vm_full; then
			na "$_t.refused" "$VM_FALLBACK_WHY; nvme-cli opens the node read-only"
			continue
		fi
		_b=$(hsha "$_h")
		expect_fail "$_t.format-refused" "$EPERM" format_cmd "$NVME" "$_n" "$_ns"
		expect_fail "$_t.sanitize-refused" "$EPERM" sanitize_cmd "$NVME" "$_n"
		expect_fail "$_t.io-write-refused" "$EPERM" iowrite_cmd "$NVME" "$_n" "$_ns" 16 /tmp/mp512
		expect_fail "$_t.security-send-refused" "$EPERM" secsend_cmd "$NVME" "$_n" "$_ns"
		expect "$_t.unchanged" "$_b" "$(hsha "$_h")"
	done
}

# allowed_writes TAG HEAD NSID LBA NODE...: the allowed copy writes a block through
# every NODE (LBA, LBA+8, ...), each read back through HEAD; its Security Send
# reaches the device
allowed_writes() {
	_tag=$1 _h=$2 _ns=$3 _lba=$4
	shift 4
	for _n in "$@"; do
		_t=$_tag-$(basename "$_n")
		expect_ok "$_t.io-write-allowed" iowrite_cmd "$ALLOWED" "$_n" "$_ns" "$_lba" /tmp/mp512b
		expect "$_t.io-write-landed" "$(fsha /tmp/mp512b)" "$(block "$_h" "$_lba")"
		reached "$_t.security-send-reaches" secsend_cmd "$ALLOWED" "$_n" "$_ns"
		_lba=$((_lba + 8))
	done
}

# listed CHECK LABEL NAME...: lsdsk's row of LABEL names every NAME
listed() {
	_c=$1 _l=$2
	shift 2
	_row=$($C lsdsk 2>&1 | grep "^$_l ")
	_miss=""
	for _x in "$@"; do
		printf '%s' "$_row" | grep -q "[ ,]$_x(" || _miss="$_miss $_x"
	done
	[ -z "$_miss" ] && pass "$_c" "$_row" || fail "$_c" "not listed:$_miss :: $_row"
}

# ctrls_of HEAD: its subsystem's controllers (nvme1 nvme2); paths_of HEAD: its
# hidden path devices; ngs_of HEAD: its generic nodes (/dev/ng...)
ctrls_of() {
	for _c in /sys/class/block/${1#/dev/}/device/nvme*; do
		_c=${_c##*/}
		case $_c in nvme[0-9]*n* | nvme-*) ;; nvme[0-9]*) echo "$_c" ;; esac
	done
}
paths_of() {
	for _c in $(ctrls_of "$1"); do
		for _p in /sys/class/nvme/$_c/nvme*c*n${1##*n}; do [ -d "$_p" ] && echo "${_p##*/}"; done
	done
}
ngs_of() {
	_sub=$(readlink -f "/sys/class/block/${1#/dev/}/device")
	_dirs=" $_sub"
	for _c in $(ctrls_of "$1"); do _dirs="$_dirs $(readlink -f /sys/class/nvme/$_c)"; done
	for _g in /sys/class/nvme-generic/ng*n${1##*n}; do
		[ -e "$_g/dev" ] || continue
		case "$_dirs " in *" $(readlink -f "$_g/device") "*) echo "/dev/${_g##*/}" ;; esac
	done
}

# ---- NVMe/TCP: an nvmet target on the loopback, two ports, connected twice ----
TNQN=nqn.2026-11.org.asmguard:tcp
HNQN=nqn.2014-08.org.nvmexpress:uuid:6f1d0d4e-31a1-4c6e-9b5c-5a3a4c0d0031
HID=6f1d0d4e-31a1-4c6e-9b5c-5a3a4c0d0031
CFG=/sys/kernel/config
T=""
tcp_connect() { # tcp_connect PORT: one more controller of the TCP subsystem
	# up to three tries: under TCG a connect to the just-enabled loopback port
	# was once reset by the peer (5.10); a failed connect adds no controller
	local i
	for i in 1 2 3; do
		"$NVME" connect -t tcp -a 127.0.0.1 -s "$1" -n "$TNQN" --hostnqn="$HNQN" --hostid="$HID" && return 0
		echo "connect to port $1: try $i failed"
		sleep 1
	done
	return 1
}
tcp_setup() {
	modprobe nvmet-tcp && modprobe nvme-tcp || return 2
	lo_up
	[ -d "$CFG/nvmet" ] || mount -t configfs configfs "$CFG" 2>/dev/null
	[ -d "$CFG/nvmet" ] || { echo "no $CFG/nvmet"; return 1; }
	TLOOP=$(new_loop 64 mptcp) || return 1
	ss=$CFG/nvmet/subsystems/$TNQN
	mkdir -p "$ss/namespaces/1" || return 1
	echo 1 >"$ss/attr_allow_any_host" || return 1
	printf '%s' "$TLOOP" >"$ss/namespaces/1/device_path" || return 1
	echo 1 >"$ss/namespaces/1/enable" || return 1
	for p in 1 2; do
		pd=$CFG/nvmet/ports/$p
		mkdir -p "$pd" || return 1
		echo tcp >"$pd/addr_trtype" && echo ipv4 >"$pd/addr_adrfam" &&
			echo 127.0.0.1 >"$pd/addr_traddr" && echo "442$p" >"$pd/addr_trsvcid" || return 1
		ln -s "$ss" "$pd/subsystems/$TNQN" || return 1
	done
	# ANA: the second port's group non-optimized (both paths stay usable)
	echo non-optimized >"$CFG/nvmet/ports/2/ana_groups/1/ana_state" 2>/dev/null
	tcp_connect 4421 >/dev/null && tcp_connect 4422 >/dev/null || return 1
	i=0
	while [ $i -lt 100 ]; do
		for d in /sys/class/block/nvme*n*; do
			case ${d##*/} in *c*n* | *p[0-9]*) continue ;; esac
			grep -qx "$TNQN" "$d/device/subsysnqn" 2>/dev/null || continue
			[ "$(paths_of "/dev/${d##*/}" | wc -l)" = 2 ] || continue
			T=/dev/${d##*/}
			return 0
		done
		i=$((i + 1))
		sleep 0.1
	done
	echo "no head of $TNQN with two paths: $(ls /sys/class/block | tr '\n' ' ')"
	return 1
}
tcp_teardown() {
	"$NVME" disconnect -n "$TNQN" >/dev/null 2>&1
	"$NVME" disconnect -n nqn.2014-08.org.nvmexpress.discovery >/dev/null 2>&1
	ss=$CFG/nvmet/subsystems/$TNQN
	for p in 1 2; do rm -f "$CFG/nvmet/ports/$p/subsystems/$TNQN" 2>/dev/null; rmdir "$CFG/nvmet/ports/$p" 2>/dev/null; done
	[ -d "$ss" ] && { echo 0 >"$ss/namespaces/1/enable"; rmdir "$ss/namespaces/1" "$ss"; } 2>/dev/null
	[ -n "${TLOOP:-}" ] && losetup -d "$TLOOP" 2>/dev/null
}
t0=$(now)
tcp_setup >/tmp/mptcp.out 2>&1
trc=$?
tout=$(cat /tmp/mptcp.out)
if [ $trc = 0 ]; then
	pass tcp-setup "$T: controllers $(ctrls_of "$T" | tr '\n' ' ')paths $(paths_of "$T" | tr '\n' ' ')generic $(ngs_of "$T" | tr '\n' ' ')($(since "$t0") s)"
elif [ $trc = 2 ]; then
	na tcp "this kernel has no nvmet-tcp/nvme-tcp modules: $tout"
	T=""
else
	fail tcp-setup "$tout"
	T=""
fi

# ---- the daemon, both heads labelled ------------------------------------------
tinfo() { info "at $(since "$T_START") s: $*"; }
tinfo "tcp set up"
inc="\"${H#/dev/}\""
[ -n "$T" ] && inc="$inc, \"${T#/dev/}\""
cat >/tmp/mp.toml <<TOML
[devices]
include = [$inc]
exclude = []
[filter]
mode = "enforce"
allow_users = ["grid"]
allow_executables = ["$ALLOWED"]
TOML
: >/tmp/mp.log
# the first MiB (where the label goes) zeroed, random bytes in the next
dd if=/dev/urandom of=/tmp/mprand bs=64K count=16 2>/dev/null
for d in "$H" $T; do
	dd if=/dev/zero of="$d" bs=1M count=1 oflag=direct 2>/dev/null
	dd if=/tmp/mprand of="$d" bs=1M seek=1 count=1 oflag=direct 2>/dev/null
done
tinfo "data written"
agd_start /tmp/mp.toml /tmp/mp.log
tinfo "daemon started"
expect_ok label-pci $C label MPPCI "$H"
[ -n "$T" ] && expect_ok label-tcp $C label MPTCP "$T"

# ---- the QEMU subsystem -----------------------------------------------------------
HNS=$(cat "/sys/class/block/${H#/dev/}/nsid" 2>/dev/null || echo 1)
PC=$(ctrls_of "$H")
listed pci-lsdsk MPPCI $(paths_of "$H") $PC
info "pci head $H: $($C lsdsk 2>&1 | grep '^MPPCI ')"
NODES=""
for c in $PC; do NODES="$NODES /dev/$c"; done
NODES="$NODES $(ngs_of "$H")"
# generic nodes (ngXnY): from 5.13
NG_NA="no NVMe generic node (the kernel makes them from 5.13; $VM_KVER)"
if [ -z "$(ngs_of "$H")" ]; then
	kmaj=$(echo "$VM_KVER" | cut -d. -f1) kmin=$(echo "$VM_KVER" | cut -d. -f2)
	if [ "$kmaj" -lt 5 ] || { [ "$kmaj" = 5 ] && [ "$kmin" -lt 13 ]; }; then
		na pci-generic "$NG_NA"
	else
		fail pci-generic "no generic node for $H on $VM_KVER: $(ls /sys/class/nvme-generic 2>&1 | tr '\n' ' ')"
	fi
fi
tinfo labelled
refusals pci "$H" "$HNS" $NODES
tinfo "pci refusals done"
if vm_full; then
	allowed_writes pci "$H" "$HNS" 4096 $NODES
fi
tinfo "pci allowed done"

# latency (issue 42): the head is bio-based and issues no requests; its reads
# are issued on its hidden paths (no device number for userspace: the tracer
# keys them by name), traced as the disk's paths. With the subsystem's I/O
# policy round-robin, 300 direct reads through the head count >= 300 reads in
# the disk's series, every hidden path carries some in its own path series,
# and the paths add up to the disk (each request counted once). The default
# exporter, 127.0.0.1:9465.
# rsum NAME LABELS TEXT: the sum of the samples of metric NAME whose label set
# holds every LABELS pattern (space-separated), empty if none
rsum() {
	printf '%s\n' "$3" | awk -v n="$1" -v l="$2" '
		BEGIN { k = split(l, w, " ") }
		index($0, n"{") == 1 { for (i = 1; i <= k; i++) if (index($0, w[i]) == 0) next; s += $NF; seen = 1 }
		END { if (seen) print s }'
}
lo_up
MURL=http://127.0.0.1:9465/metrics
HP=$(paths_of "$H")
pol=""
for f in /sys/class/nvme-subsystem/*/iopolicy; do
	# the head's subsystem: the one whose directory holds the head
	[ -e "${f%/iopolicy}/${H#/dev/}" ] && pol=$f
done
old_pol=$(cat "$pol" 2>/dev/null)
[ -n "$pol" ] && sysfs_write "$pol" round-robin
m0=$(asmguard-iolat scrape --url "$MURL" 2>&1)
dd if="$H" of=/dev/null bs=4096 count=300 iflag=direct status=none
m1=$(asmguard-iolat scrape --url "$MURL" 2>&1)
[ -n "$old_pol" ] && sysfs_write "$pol" "$old_pol"
r0=$(rsum asmguard_io_latency_seconds_count 'label="MPPCI" op="read"' "$m0")
r1=$(rsum asmguard_io_latency_seconds_count 'label="MPPCI" op="read"' "$m1")
nread=$((${r1:-0} - ${r0:-0}))
pdetail=""
pmiss=""
psum=0
for p in $HP; do
	c=$(rsum asmguard_path_io_latency_seconds_count "disk=\"MPPCI\" path=\"$p\" op=\"read\"" "$m1")
	c0=$(rsum asmguard_path_io_latency_seconds_count "disk=\"MPPCI\" path=\"$p\" op=\"read\"" "$m0")
	[ -n "$c" ] && [ $((c - ${c0:-0})) -gt 0 ] || pmiss="$pmiss $p"
	psum=$((psum + ${c:-0}))
	pdetail="$pdetail $p=${c:-none}"
done
[ "$nread" -ge 300 ] && pass pci-iolat.head-counted "$nread reads counted on MPPCI; paths:$pdetail" ||
	fail pci-iolat.head-counted "want >= 300 reads on MPPCI, got $nread; paths:$pdetail :: $(printf '%s\n' "$m1" | grep -E '^asmguard_(path_)?io_latency_seconds_count' | tr '\n' ' ')"
[ -n "$HP" ] && [ -z "$pmiss" ] && pass pci-iolat.paths "every hidden path carried reads (iopolicy ${pol:+round-robin, was $old_pol}):$pdetail" ||
	fail pci-iolat.paths "no reads in the path series of:${pmiss:- (no hidden paths)} ($pdetail; iopolicy file ${pol:-none})"
[ "$psum" = "${r1:-0}" ] && pass pci-iolat.once "the paths' reads add up to the disk's ($psum)" ||
	fail pci-iolat.once "paths' reads $psum, the disk's ${r1:-0}"
# iostat --paths: a row per hidden path, after the disk's
ij=$($C iostat MPPCI --paths --interval 0.2 --count 1 --json 2>&1)
imiss=""
for p in $HP; do
	printf '%s' "$ij" | grep -q "\"path\":\"$p\"" || imiss="$imiss $p"
done
[ -n "$HP" ] && [ -z "$imiss" ] && pass pci-iolat.iostat-paths "a row per path:$HP" ||
	fail pci-iolat.iostat-paths "no row for:${imiss:- (no hidden paths)}: $(printf '%s' "$ij" | head -c 400)"
tinfo "pci latency done"

# reappears TAG HEAD NSID OLD SINCE LABEL: waits for a controller of HEAD that is not
# among OLD; then, as soon as root's Security Send through it is refused (the
# filter manages it: the daemon saw it), checks root's io-passthru write and
# format through it are refused too, HEAD unchanged, lsdsk lists it under LABEL,
# and says how long it took (SINCE: when the rescan or connect began)
reappears() {
	_tag=$1 _h=$2 _ns=$3 _old=$4 _t0=$5
	_new="" _i=0
	while [ $_i -lt 200 ] && [ -z "$_new" ]; do
		for _c in $(ctrls_of "$_h"); do
			case " $_old " in *" $_c "*) ;; *) [ -c "/dev/$_c" ] && _new=$_c ;; esac
		done
		[ -n "$_new" ] || { _i=$((_i + 1)); sleep 0.05; }
	done
	[ -n "$_new" ] || { fail "$_tag.back" "no new controller of $_h after $(since "$_t0") s: $(ctrls_of "$_h" | tr '\n' ' ')"; return 1; }
	_back=$(since "$_t0")
	pass "$_tag.back" "/dev/$_new after ${_back} s (was: $_old)"
	if ! vm_full; then
		na "$_tag.refused" "$VM_FALLBACK_WHY"
		return 0
	fi
	# poll with Security Send, which the devices here do not implement (harmless
	# if it went through): refused = managed
	_tm=$(now) _i=0 _ok=no
	while [ $_i -lt 100 ]; do
		if secsend_cmd "$NVME" "/dev/$_new" "$_ns" 2>&1 | grep -q "$EPERM"; then _ok=yes; break; fi
		_i=$((_i + 1))
		sleep 0.05
	done
	if [ $_ok = yes ]; then
		pass "$_tag.managed" "/dev/$_new refuses root"
		info "$_tag: /dev/$_new managed $(since "$_tm") s after its node appeared (${_back} s after the rescan or connect began)"
	else
		fail "$_tag.managed" "/dev/$_new still not refusing root $(since "$_tm") s after it appeared: $(secsend_cmd "$NVME" "/dev/$_new" "$_ns" 2>&1)"
	fi
	_b=$(hsha "$_h")
	expect_fail "$_tag.io-write-refused" "$EPERM" iowrite_cmd "$NVME" "/dev/$_new" "$_ns" 16 /tmp/mp512
	expect_fail "$_tag.format-refused" "$EPERM" format_cmd "$NVME" "/dev/$_new" "$_ns"
	expect "$_tag.unchanged" "$_b" "$(hsha "$_h")"
	listed "$_tag.lsdsk" "$6" "$_new"
}

# first_gone HEAD: the controller to take away: the one whose number the
# subsystem keeps (nvme-subsysN's nvmeN, the first to come), so that it cannot
# come back under the same number; else the first
first_gone() {
	_s=$(readlink -f "/sys/class/block/${1#/dev/}/device")
	_s=nvme${_s##*nvme-subsys}
	if ctrls_of "$1" | grep -qx "$_s"; then echo "$_s"; else ctrls_of "$1" | head -n 1; fi
}

# dropped TAG LABEL CTRL: lsdsk stops listing CTRL, gone, within 5 s
dropped() {
	_i=0
	while [ $_i -lt 100 ] && $C lsdsk 2>&1 | grep "^$2 " | grep -q "[ ,]$3("; do _i=$((_i + 1)); sleep 0.05; done
	_row=$($C lsdsk 2>&1 | grep "^$2 ")
	case $_row in *[\ ,]$3\(*) fail "$1.dropped" "lsdsk still lists $3 after its removal: $_row" ;;
	*) pass "$1.dropped" "$_row" ;; esac
}

# a controller goes away (PCI remove of its function) and comes back (rescan)
gone=$(first_gone "$H")
pci=$(readlink -f "/sys/class/nvme/$gone/device")
if [ -w "$pci/remove" ] && [ -w /sys/bus/pci/rescan ]; then
	t0=$(now)
	echo 1 >"$pci/remove"
	i=0
	while [ $i -lt 100 ] && [ -e "/sys/class/nvme/$gone" ]; do i=$((i + 1)); sleep 0.05; done
	dropped pci-reattach MPPCI "$gone"
	old="$(ctrls_of "$H" | tr '\n' ' ') $gone"
	t0=$(now)
	echo 1 >/sys/bus/pci/rescan
	reappears pci-reattach "$H" "$HNS" "$old" "$t0" MPPCI
	PC=$(ctrls_of "$H")
else
	na pci-reattach "no PCI remove/rescan in sysfs for $gone ($pci)"
fi

# ---- NVMe/TCP ------------------------------------------------------------------
if [ -n "$T" ]; then
	TNS=$(cat "/sys/class/block/${T#/dev/}/nsid" 2>/dev/null || echo 1)
	TC=$(ctrls_of "$T")
	for c in $TC; do
		expect "tcp-$c.transport" tcp "$(cat /sys/class/nvme/$c/transport 2>&1)"
	done
	listed tcp-lsdsk MPTCP $(paths_of "$T") $TC
	info "tcp head $T: $($C lsdsk 2>&1 | grep '^MPTCP ') ANA: $(for p in $(paths_of "$T"); do printf '%s=%s ' "$p" "$(cat /sys/class/block/$p/ana_state 2>/dev/null)"; done)"
	TNODES=""
	for c in $TC; do TNODES="$TNODES /dev/$c"; done
	TNODES="$TNODES $(ngs_of "$T")"
	if [ -z "$(ngs_of "$T")" ]; then
		if [ -n "$(ngs_of "$H")" ]; then
			fail tcp-generic "no generic node for $T, where $H has one"
		else
			na tcp-generic "$NG_NA"
		fi
	fi
	tinfo "pci reattach done"
	refusals tcp "$T" "$TNS" $TNODES
	tinfo "tcp refusals done"
	if vm_full; then
		allowed_writes tcp "$T" "$TNS" 4096 $TNODES
		# (nvmet implements neither: it answers Invalid Command Opcode)
		n=$(echo $TNODES | cut -d' ' -f1)
		reached "tcp-$(basename "$n").format-reaches" format_cmd "$ALLOWED" "$n" "$TNS"
		reached "tcp-$(basename "$n").sanitize-reaches" sanitize_cmd "$ALLOWED" "$n"
	fi
	# a controller deleted, its number taken by a discovery controller meanwhile,
	# and connected again: it comes back under a new number
	gone=$(first_gone "$T")
	port=$(sed -n 's/.*trsvcid=\([0-9]*\).*/\1/p' "/sys/class/nvme/$gone/address")
	t0=$(now)
	echo 1 >"/sys/class/nvme/$gone/delete_controller"
	i=0
	while [ $i -lt 100 ] && [ -e "/sys/class/nvme/$gone" ]; do i=$((i + 1)); sleep 0.05; done
	dropped tcp-reconnect MPTCP "$gone"
	"$NVME" connect -t tcp -a 127.0.0.1 -s 4421 -n nqn.2014-08.org.nvmexpress.discovery \
		--hostnqn="$HNQN" --hostid="$HID" >/dev/null 2>&1 || info "no persistent discovery controller (the reconnect may reuse $gone)"
	old="$(ctrls_of "$T" | tr '\n' ' ') $gone"
	t0=$(now)
	if out=$(tcp_connect "$port" 2>&1); then
		reappears tcp-reconnect "$T" "$TNS" "$old" "$t0" MPTCP
	else
		fail tcp-reconnect.connect "$out"
	fi
fi

tinfo "tcp done"
# ---- last: the allowed side's format and sanitize of the QEMU disk ------------
if vm_full; then
	n=/dev/$(ctrls_of "$H" | tail -n 1)
	reached pci-sanitize-reaches sanitize_cmd "$ALLOWED" "$n"
	expect_ok pci-format-allowed format_cmd "$ALLOWED" "$n" "$HNS"
	# QEMU's Format NVM zeroes the namespace: the block written above is gone
	expect pci-format-landed "$(fsha /tmp/mpzero)" "$(block "$H" 4096)"
fi

$C filter disable >/dev/null 2>&1 # its pins go too (ends-clean)
kill "$agd"; wait "$agd" 2>/dev/null
[ -n "$T" ] && tcp_teardown
info "took $(since "$T_START") s"
vm_exit
