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
# LSM, else the cgroup-device fallback (write-opens only). Tests that exercise the
# filter use it, so every test runs on every lab line.
if grep -qw bpf /sys/kernel/security/lsm 2>/dev/null; then
	VM_BACKEND=lsm
else
	VM_BACKEND=cgroup_device
fi
VM_FALLBACK_WHY="cgroup-device fallback (bpf is not an active LSM: $(cat /sys/kernel/security/lsm 2>/dev/null)) sees write-opens only"

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
as_user() {
	_u=$1; shift
	# through NSS (getent): directory users from extrausers too
	_pw=$(getent passwd "$_u" 2>/dev/null || awk -F: -v u="$_u" '$1 == u' /etc/passwd)
	_uid=$(echo "$_pw" | cut -d: -f3)
	_gid=$(echo "$_pw" | cut -d: -f4)
	[ -n "$_uid" ] || { echo "as_user: no user $_u" >&2; return 127; }
	setpriv --reuid="$_uid" --regid="$_gid" --init-groups --reset-env -- "$@"
}

# sha DEV_OR_FILE: sha256 of the whole content.
sha() { sha256sum "$1" | cut -d' ' -f1; }

# new_loop SIZE_MB NAME: a loop device over a sparse /tmp/NAME.img; prints /dev/loopN.
new_loop() {
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

# vm_run_tests SECONDS TEST...: the runner's loop (the VM lab's init, the system lab's
# runner): each /vmtests/tests/TEST.sh under dash with a SECONDS timeout, its output
# kept in /tmp/vmtest.TEST.out; a test that reports nothing, or exits non-zero without
# a FAIL line, gets one FAIL line. After a failure, the last 60 lines of dmesg.
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
		fi
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

# agd_start CONFIG LOG: starts asmguardd with CONFIG (its output appended to LOG),
# sets $agd to its pid, and waits up to 10 s until its socket answers.
agd_start() {
	asmguardd --config "$1" >>"$2" 2>&1 &
	agd=$!
	_i=0
	while [ $_i -lt 100 ] && ! asmguardctl --socket /run/asmguard/asmguard.sock status >/dev/null 2>&1; do
		_i=$((_i + 1))
		sleep 0.1
	done
}

# agd_config FILE DEVICE [TOML...]: an asmguardd configuration in FILE that manages
# DEVICE (/dev/NAME) in enforce mode with grid allowed; each TOML (more sections,
# e.g. "[metrics]
# listen = ...") is appended.
agd_config() {
	_f=$1 _d=$2
	shift 2
	printf '[devices]\ninclude = ["%s"]\nexclude = []\n[filter]\nmode = "enforce"\nallow_users = ["grid"]\n' \
		"${_d#/dev/}" >"$_f"
	for _t in "$@"; do printf '%s\n' "$_t" >>"$_f"; done
}

# sysfs_write FILE VALUE: writes VALUE to a sysfs/configfs attribute with coreutils dd,
# which names the kernel's errno on failure (dash's echo says "I/O error" for all).
sysfs_write() {
	printf '%s\n' "$2" | dd of="$1" conv=notrunc status=none
}
