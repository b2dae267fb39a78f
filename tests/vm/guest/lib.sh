# shellcheck shell=sh
# asmguard VM lab: helpers for guest tests (tests/vm/guest/tests/*.sh).
#
# A guest test is a POSIX sh script (run by dash) that starts with
#     . /vmtests/lib.sh
# and reports each check as one console line "VMTEST <name> PASS|FAIL <detail>"
# through pass/fail/expect_ok/expect_fail. Names have no spaces; prefix them
# with the test's name (done by the helpers: "smoke.read-allowed").
#
# Fixtures from the init, in /run/vm.env (sourced here):
#   VM_KVER             uname -r
#   VM_THIN, VM_THIN_POOL   dm-thin volume (512 MiB virtual) and its pool (256 MiB)
#   VM_SCSI, VM_SCSI_SG     thin-provisioned scsi_debug disk (64 MiB) and its sg node
#   VM_NULLB            null_blk disk (1 GiB, memory backed)
#   VM_NVME, VM_NVME_CTRL, VM_NVME_NG   QEMU NVMe disk (64 MiB), its controller's
#                       node and its generic node (ng, 5.13 and later)
#   VM_NVMEMP           NVMe native multipath head (64 MiB, a QEMU subsystem with
#                       two controllers sharing namespace 1); VM_NVMEMP_CTRLS its
#                       controller nodes, VM_NVMEMP_PATHS its hidden path devices
#                       (names), VM_NVMEMP_NGS its generic nodes (5.13 and later)
# Users: root, grid (54331, oinstall/asmadmin/asmdba/asmoper), oracle (54321,
# oinstall/dba/asmdba), intruder (1001). Project binaries are in /usr/local/bin.

[ -f /run/vm.env ] && . /run/vm.env
VMTEST_PREFIX=${VMTEST_PREFIX:-$(basename "$0" .sh)}
VMTEST_FAILED=0

_vm_detail() { # one line, at most 300 characters
	printf '%s' "$*" | tr '\n\r\t' '   ' | cut -c1-300
}

pass() { # pass CHECK [DETAIL]
	echo "VMTEST $VMTEST_PREFIX.$1 PASS $(_vm_detail "${2:-}")"
}

fail() { # fail CHECK [DETAIL]
	echo "VMTEST $VMTEST_PREFIX.$1 FAIL $(_vm_detail "${2:-}")"
	VMTEST_FAILED=1
}

# The filter backend this kernel gives: the BPF LSM programs when bpf is an active
# LSM; else the same rules as fmod_ret programs on the kernel's security_*
# functions (any x86_64 kernel with BTF: trampolines since 5.7); else the
# cgroup-device fallback (write-opens only). Tests that exercise the filter use it,
# so every test runs on every lab line. vm_full: the backend covers every vector.
if grep -qw bpf /sys/kernel/security/lsm 2>/dev/null; then
	VM_BACKEND=lsm
elif [ -e /sys/kernel/btf/vmlinux ]; then
	VM_BACKEND=fmod_ret
else
	VM_BACKEND=cgroup_device
fi
vm_full() { [ "$VM_BACKEND" != cgroup_device ]; }
VM_FALLBACK_WHY="cgroup-device fallback (bpf is not an active LSM: $(cat /sys/kernel/security/lsm 2>/dev/null), and no BTF for fmod_ret) sees write-opens only"

# na CHECK REASON: CHECK cannot apply on this kernel, for REASON (required). Counted
# apart by run.sh, never as a pass. Use it only where the kernel lacks the feature the
# check exercises: a protection that is missing is a fail.
na() {
	echo "VMTEST $VMTEST_PREFIX.$1 NA $(_vm_detail "${2:-}")"
}

info() { echo "VMINFO $VMTEST_PREFIX $*"; }

# known_gap CHECK REASON CMD...: a protection known to be missing (REASON names the
# open issue): CMD, which a closed gap would refuse, still succeeds. Prints XFAIL,
# counted apart by the labs' results (never as a pass, and `make test` lists every
# one). Strict: once CMD is refused the gap is closed and the check FAILs until it
# becomes an expect_fail.
known_gap() {
	_c=$1; _why=$2; shift 2
	if _o=$("$@" 2>&1); then
		echo "VMTEST $VMTEST_PREFIX.$_c XFAIL $(_vm_detail "$_why")"
	else
		fail "$_c" "the known gap is closed ($* was refused: $_o): make this check an expect_fail"
	fi
}

# expect CHECK WANT GOT [DETAIL]: PASS if GOT is WANT (its detail: DETAIL, else
# GOT), else FAIL saying both. The check is named once.
expect() {
	if [ "$3" = "$2" ]; then
		pass "$1" "${4:-$3}"
	else
		fail "$1" "want '$2', got '$3'${4:+ :: $4}"
	fi
}

# holds CHECK DETAIL CMD...: PASS if CMD (a test, a grep -q ...) succeeds, else
# FAIL; DETAIL says what was seen either way. The check is named once.
holds() {
	_c=$1; _d=$2; shift 2
	if "$@"; then pass "$_c" "$_d"; else fail "$_c" "$_d"; fi
}

# has_line CHECK PATTERN TEXT [DETAIL]: PASS if a line of TEXT matches the grep
# PATTERN, else FAIL; DETAIL (else TEXT) says what was seen.
has_line() {
	if printf '%s\n' "$3" | grep -q -- "$2"; then
		pass "$1" "${4:-$3}"
	else
		fail "$1" "no line matches '$2' :: ${4:-$3}"
	fi
}

# expect_ok CHECK CMD...: PASS if CMD exits 0.
expect_ok() {
	_c=$1; shift
	if _o=$("$@" 2>&1); then
		pass "$_c" "$_o"
	else
		fail "$_c" "exit $?: $* :: $_o"
	fi
}

# expect_fail CHECK PATTERN CMD...: PASS if CMD exits non-zero and its output
# matches the grep -E PATTERN (empty: any output).
expect_fail() {
	_c=$1; _p=$2; shift 2
	if _o=$("$@" 2>&1); then
		fail "$_c" "succeeded but must fail: $* :: $_o"
	elif [ -n "$_p" ] && ! printf '%s' "$_o" | grep -Eq -- "$_p"; then
		fail "$_c" "failed without /$_p/: $* :: $_o"
	else
		pass "$_c" "$_o"
	fi
}

# as_user USER CMD...: runs CMD as USER with USER's groups (setpriv, no PAM).
as_user() { _vm_as_user "" "$@"; }

# VM_PAST_MODES: setpriv options that take a command past the file mode bits
# (CAP_DAC_OVERRIDE, inheritable and ambient: kept across exec, as the user). A check
# that means the filter's refusal runs its command with them, so that only the filter
# can answer (EPERM, "Operation not permitted"): never the node's mode bits (EACCES,
# "Permission denied"), which the daemon (presented nodes) and udevd set back at any
# time. The filter judges identities, never capabilities: root is refused too.
VM_PAST_MODES="--inh-caps=+dac_override --ambient-caps=+dac_override"

# as_user_past_modes USER CMD...: as_user, past the file mode bits (VM_PAST_MODES).
as_user_past_modes() { _vm_as_user "$VM_PAST_MODES" "$@"; }

_vm_as_user() { # _vm_as_user SETPRIV_OPTIONS USER CMD...
	_opts=$1 _u=$2; shift 2
	# through NSS (getent): directory users from extrausers too
	_pw=$(getent passwd "$_u" 2>/dev/null || awk -F: -v u="$_u" '$1 == u' /etc/passwd)
	_uid=$(echo "$_pw" | cut -d: -f3)
	_gid=$(echo "$_pw" | cut -d: -f4)
	[ -n "$_uid" ] || { echo "as_user: no user $_u" >&2; return 127; }
	# shellcheck disable=SC2086
	setpriv --reuid="$_uid" --regid="$_gid" --init-groups $_opts --reset-env -- "$@"
}

# sha DEV_OR_FILE: sha256 of the whole content.
sha() { sha256sum "$1" | cut -d' ' -f1; }

# new_loop SIZE_MB NAME: a loop device over a sparse /tmp/NAME.img; prints /dev/loopN.
new_loop() {
	rm -f "/tmp/$2.img" # a fresh zero file, also when a test runs twice in a boot
	truncate -s "${1}M" "/tmp/$2.img" && losetup -f --show "/tmp/$2.img"
}

# wait_for_line FILE PATTERN SECONDS: waits until FILE has a line matching PATTERN.
wait_for_line() {
	_i=0
	while [ $_i -lt $(($3 * 10)) ]; do
		grep -Eq -- "$2" "$1" 2>/dev/null && return 0
		_i=$((_i + 1))
		sleep 0.1
	done
	return 1
}

# ---- isolation: the runner's begin/end pair -------------------------------------
# Every guest test starts from a clean filter state by construction: vm_test_begin
# runs before it, vm_test_end after it (tests/vm/README.md, "Isolation"). A test
# needs no clean-up of an earlier test's leftovers; it must stop what it started.
# The system lab's runner replaces the pair with its own (sys_test_begin/_end).

# vm_pids NAME: the pids of the live (not zombie) processes whose command is NAME
# (shell builtins only: a fork per process costs milliseconds under TCG).
vm_pids() {
	for _d in /proc/[0-9]*; do
		{ read -r _c <"$_d/comm"; } 2>/dev/null || continue
		[ "$_c" = "$1" ] || continue
		{ read -r _s <"$_d/stat"; } 2>/dev/null || continue
		_s=${_s##*) }
		[ "${_s%% *}" = Z ] || echo "${_d#/proc/}"
	done
}

# vm_stop NAME: stops every NAME process (TERM, then KILL after 5 s).
vm_stop() {
	_ps=$(vm_pids "$1")
	[ -n "$_ps" ] || return 0
	kill $_ps 2>/dev/null
	_i=0
	while [ -n "$(vm_pids "$1")" ] && [ $_i -lt 50 ]; do _i=$((_i + 1)); sleep 0.1; done
	_ps=$(vm_pids "$1")
	[ -z "$_ps" ] || kill -9 $_ps 2>/dev/null
}

# vm_bpf_pins: what is pinned in the guest's bpffs (/sys/fs/bpf: only the tests pin
# there, /sys/fs/bpf/asmguard, asmguard-other, ...), one entry per line.
vm_bpf_pins() { ls -A /sys/fs/bpf 2>/dev/null; }

# vm_test_begin TEST: no asmguardd, no pins, no filter state ("disabled" is kept in
# /run/asmguard/filter.state until reboot): whatever the tests before left.
vm_test_begin() {
	vm_stop asmguardd
	for _e in $(vm_bpf_pins); do rm -rf "/sys/fs/bpf/$_e"; done
	rm -f /run/asmguard/filter.state
	_left=$(vm_bpf_pins | tr '\n' ' ')
	[ -z "$_left" ] || echo "VMTEST $1.begins-clean FAIL could not remove the pins in /sys/fs/bpf: $_left"
}

# vm_test_end TEST: the check TEST.ends-clean: the test stopped its daemons and took
# its filter away (asmguardctl filter disable, or its loader's exit): no asmguardd
# runs and nothing is pinned in /sys/fs/bpf.
vm_test_end() {
	_left=""
	_ps=$(vm_pids asmguardd | tr '\n' ' ')
	[ -z "$_ps" ] || _left="asmguardd still runs (pid ${_ps% })"
	_pins=$(vm_bpf_pins | tr '\n' ' ')
	[ -z "$_pins" ] || _left="${_left:+$_left; }pinned in /sys/fs/bpf: ${_pins% }"
	if [ -n "$_left" ]; then
		echo "VMTEST $1.ends-clean FAIL $_left: a test stops the daemon it started and removes its filter (asmguardctl filter disable) before it ends"
	else
		echo "VMTEST $1.ends-clean PASS no asmguardd left, nothing pinned"
	fi
}

# vm_run_tests SECONDS TEST...: the runner's loop (the VM lab's init, the system lab's
# runner): each /vmtests/tests/TEST.sh under dash with a SECONDS timeout, between
# vm_test_begin and vm_test_end, its output kept in /tmp/vmtest.TEST.out; a test that
# reports nothing, or exits non-zero without a FAIL line, gets one FAIL line. After a
# failure, the last 60 lines of dmesg.
vm_run_tests() {
	_per=$1; shift
	for _t in "$@"; do
		_f=/vmtests/tests/$_t.sh
		# benchmarks (scripts/bench-*.sh) only run when named
		[ -f "$_f" ] || [ ! -f "/vmtests/bench/$_t.sh" ] || _f=/vmtests/bench/$_t.sh
		if [ ! -f "$_f" ]; then
			echo "VMTEST $_t FAIL no such test ($_f)"
			continue
		fi
		vm_test_begin "$_t" | tee /tmp/vmtest.$_t.begin
		echo "VMINFO start $_t $(cut -d' ' -f1 /proc/uptime)"
		(
			timeout "$_per" /usr/bin/sh "$_f" </dev/null 2>&1
			echo "VMRC $?"
		) | tee /tmp/vmtest.$_t.out
		_rc=$(sed -n 's/^VMRC //p' /tmp/vmtest.$_t.out | tail -n 1)
		if ! grep -q "^VMTEST " /tmp/vmtest.$_t.out; then
			echo "VMTEST $_t FAIL no results (exit status $_rc)"
		elif [ "$_rc" != 0 ] && ! grep -q "^VMTEST [^ ]* FAIL" /tmp/vmtest.$_t.out; then
			case $_rc in
			124 | 143) echo "VMTEST $_t FAIL timed out after ${_per}s" ;;
			*) echo "VMTEST $_t FAIL exit status $_rc" ;;
			esac
		fi | tee -a /tmp/vmtest.$_t.out
		cat /tmp/vmtest.$_t.begin >>/tmp/vmtest.$_t.out
		vm_test_end "$_t" | tee -a /tmp/vmtest.$_t.out
		echo "VMINFO end $_t $(cut -d' ' -f1 /proc/uptime)"
	done
	if grep -q "^VMTEST [^ ]* FAIL" /tmp/vmtest.*.out 2>/dev/null; then
		echo "---- dmesg (last 60 lines) ----"
		dmesg | tail -n 60
		echo "---- end of dmesg ----"
	fi
}

# vm_exit: exits with 1 if any check failed (call at the end of a test).
vm_exit() { exit "$VMTEST_FAILED"; }

# agd_config FILE "PATTERN..." [SECTION.KEY=VALUE...]: writes an asmguardd config to
# FILE: [devices] include = the PATTERNs (space-separated), exclude = []; [filter]
# mode = "enforce", allow_users = ["grid"], allow_groups = ["asmadmin"]; each further
# argument sets one key of [socket], [metrics] or [filter] (VALUE in TOML, as
# 'filter.allow_groups=[]' or "socket.path=\"$RUN/x.sock\"").
agd_config() {
	_f=$1 _inc="" _sock="" _met="" _fil=""
	case $- in *f*) _nf=1 ;; *) _nf=0 ;; esac
	set -f # patterns are the daemon's, not the shell's
	for _p in $2; do _inc="$_inc\"$_p\", "; done
	[ $_nf = 1 ] || set +f
	shift 2
	_users='["grid"]' _groups='["asmadmin"]'
	for _kv in "$@"; do
		_v=${_kv#*=} _k=${_kv%%=*}
		case $_k in
		filter.allow_users) _users=$_v ;;
		filter.allow_groups) _groups=$_v ;;
		filter.*) _fil="$_fil${_k#filter.} = $_v
" ;;
		socket.*) _sock="$_sock${_k#socket.} = $_v
" ;;
		metrics.*) _met="$_met${_k#metrics.} = $_v
" ;;
		*) echo "agd_config: $_kv: give SECTION.KEY=VALUE (socket, metrics, filter)" >&2; return 1 ;;
		esac
	done
	{
		printf '[devices]\ninclude = [%s]\nexclude = []\n' "${_inc%, }"
		[ -z "$_sock" ] || printf '[socket]\n%s' "$_sock"
		[ -z "$_met" ] || printf '[metrics]\n%s' "$_met"
		printf '[filter]\nmode = "enforce"\nallow_users = %s\nallow_groups = %s\n%s' \
			"$_users" "$_groups" "$_fil"
	} >"$_f"
}

# agd_start CONFIG LOG [PREFIX...]: starts asmguardd with CONFIG (run under PREFIX,
# e.g. setpriv ..., if given; its output appended to LOG), sets $agd to its pid, and
# waits up to 10 s, while it runs, until its socket (CONFIG's [socket] path, or the
# default) answers `status` (exit 0, or 7: answering but unprotected).
agd_start() {
	_conf=$1 _log=$2
	shift 2
	_sock=$(sed -n 's/^path = "\(.*\)"$/\1/p' "$_conf" | head -n 1)
	"$@" asmguardd --config "$_conf" >>"$_log" 2>&1 &
	agd=$!
	_i=0
	while [ $_i -lt 100 ] && kill -0 "$agd" 2>/dev/null; do
		asmguardctl --socket "${_sock:-/run/asmguard/asmguard.sock}" status >/dev/null 2>&1
		case $? in 0 | 7) return 0 ;; esac
		_i=$((_i + 1))
		sleep 0.1
	done
	return 1
}

# lo_up: the loopback interface up (tests that scrape the daemon's metrics port).
lo_up() { ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up; }

# sysfs_write FILE VALUE: writes VALUE to a sysfs/configfs attribute with coreutils dd,
# which names the kernel's errno on failure (dash's echo says "I/O error" for all).
sysfs_write() {
	printf '%s\n' "$2" | dd of="$1" conv=notrunc status=none
}

# attacker_start DEV: a loop that tries a write-open of DEV (root's dd of /tmp/junk)
# every few ms until attacker_stop; its successes go to /tmp/attacker.ok.
attacker_start() {
	: >/tmp/attacker.ok
	rm -f /tmp/attacker.stop
	(
		while [ ! -e /tmp/attacker.stop ]; do
			dd if=/tmp/junk of="$1" $DDW 2>/dev/null && echo hit >>/tmp/attacker.ok
		done
	) &
	attacker=$!
}

# attacker_stop CHECK: stops the loop; CHECK passes when none of its write-opens
# got through.
attacker_stop() {
	touch /tmp/attacker.stop
	wait "$attacker" 2>/dev/null
	_hits=$(wc -l </tmp/attacker.ok)
	if [ "$_hits" = 0 ]; then
		pass "$1" "attacker loop: 0 successful write-opens"
	else
		fail "$1" "$_hits write-opens got through"
	fi
}

# near CHECK WHAT GOT WANT TOL: CHECK passes when GOT is within TOL of WANT.
near() {
	if [ "$3" -ge $(($4 - $5)) ] && [ "$3" -le $(($4 + $5)) ]; then
		pass "$1" "$2 (-$3, expected -$4 +-$5)"
	else
		fail "$1" "$2 (-$3), expected -$4 +-$5"
	fi
}
