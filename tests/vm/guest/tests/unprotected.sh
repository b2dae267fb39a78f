#!/bin/sh
# unprotected: asmguardd never looks healthy when no filter backend can load.
#
# The condition is real, not simulated: the daemon runs as root without
# CAP_SYS_ADMIN and CAP_BPF in its bounding set (a unit with a wrong
# CapabilityBoundingSet), so neither the BPF LSM programs nor the cgroup-device
# fallback can load, on every kernel. Then: status says UNPROTECTED with the
# reason, `asmguardctl status` exits 7 (also with --json), lsdsk shows no
# filtering, asmguard_protected is 0, the log has the error line, and
# [filter] require_protection = true makes the daemon refuse to start.
# Also: where the kernel has the BPF LSM built in but not active, status says how
# to turn it on (the lsm= list plus bpf, grubby and GRUB_CMDLINE_LINUX).
. /vmtests/lib.sh

# its own run directory: no filter state of an earlier test (a "disabled" kept until reboot)
RUN=/run/asmguard-unprot
rm -rf "$RUN"; mkdir -p "$RUN"
C="asmguardctl --socket $RUN/unprot.sock"
PORT=19465
lo_up
L=$(new_loop 16 unprot) || { fail setup "losetup"; vm_exit; }

conf() { # conf REQUIRE
	agd_config /tmp/unprot.toml "${L#/dev/}" "socket.path=\"$RUN/unprot.sock\"" \
		"metrics.listen=\"127.0.0.1:$PORT\"" "filter.require_protection=$1"
}
# CAP_BPF and CAP_PERFMON exist from 5.8 (cap_last_cap >= 39)
drop=-sys_admin
[ "$(cat /proc/sys/kernel/cap_last_cap)" -ge 39 ] && drop="$drop,-bpf,-perfmon"
start() {
	: >/tmp/unprot.log
	agd_start /tmp/unprot.toml /tmp/unprot.log setpriv --bounding-set="$drop" --
}

conf false
start
st=$($C status 2>&1)
rc=$?
case $st in
*"protection:     UNPROTECTED: "*) pass status-says-unprotected "$(echo "$st" | grep -E '^(protection|filter backend):')" ;;
*) fail status-says-unprotected "$st :: $(tail -n 5 /tmp/unprot.log)" ;;
esac
expect status-exit-7 7 "$rc" "$(echo "$st" | tail -n 1)"
$C status --json >/tmp/unprot.json 2>&1
rc=$?
if [ "$rc" = 7 ] && grep -q '"protection": *"unprotected"' /tmp/unprot.json; then
	pass status-json-exit-7 "$(grep -o '"protection": *"[^"]*"' /tmp/unprot.json)"
else
	fail status-json-exit-7 "exit $rc: $(cat /tmp/unprot.json)"
fi
expect_ok label $C label UNPROT1 "$L"
out=$($C lsdsk 2>&1)
case $out in
*UNPROT1*UNPROTECTED*) pass lsdsk-no-filtering "$(echo "$out" | grep UNPROT1)" ;;
*) fail lsdsk-no-filtering "$out" ;;
esac
m=$(asmguard-iolat scrape --url "http://127.0.0.1:$PORT/metrics" 2>&1)
case $m in
*"asmguard_protected 0"*) pass metric-protected-0 "$(echo "$m" | grep -E '^asmguard_(protected|backend_info)')" ;;
*) fail metric-protected-0 "$(echo "$m" | grep -E 'asmguard_(protected|backend)' | head -n 3) :: $(echo "$m" | head -n 2)" ;;
esac
if grep -q 'ERROR.*UNPROTECTED: no write filter could load' /tmp/unprot.log; then
	pass log-error-line "$(grep -m1 UNPROTECTED /tmp/unprot.log)"
else
	fail log-error-line "$(tail -n 5 /tmp/unprot.log)"
fi
# the truth status told: nothing stops a write
expect_ok write-goes-through dd if=/dev/zero of="$L" bs=4096 count=1 seek=100 conv=notrunc
kill "$agd"; wait "$agd" 2>/dev/null

conf true
start
wait "$agd" 2>/dev/null
rc=$?
if [ "$rc" != 0 ] && grep -q 'refusing to start: no write filter could load' /tmp/unprot.log; then
	pass require-protection-refuses-start "exit $rc: $(grep -m1 'refusing to start' /tmp/unprot.log)"
else
	fail require-protection-refuses-start "exit $rc: $(tail -n 5 /tmp/unprot.log)"
	kill "$agd" 2>/dev/null
fi
[ -S $RUN/unprot.sock ] && $C status >/dev/null 2>&1 &&
	fail require-protection-no-socket "a daemon answers" || pass require-protection-no-socket

# With its capabilities, on this kernel: protected or degraded, never exit 7; and
# the BPF LSM hint exactly where the kernel has it built in but not active.
conf false
: >/tmp/unprot.log
agd_start /tmp/unprot.toml /tmp/unprot.log
st=$($C status 2>&1)
rc=$?
expect protected-status-exit-0 0 "$rc" "$st"
built_in=no
grep -aq bpf_lsm_file_open /sys/kernel/btf/vmlinux && built_in=yes
lsms=$(cat /sys/kernel/security/lsm)
if [ "$VM_BACKEND" = cgroup_device ] && [ "$built_in" = yes ]; then
	want="lsm=$(echo "$lsms" | sed 's/^capability,//; s/,capability,/,/; s/,capability$//'),bpf"
	if echo "$st" | grep -q "^hint: .*boot with $want" && echo "$st" | grep -q 'grubby --update-kernel=ALL' &&
		echo "$st" | grep -q GRUB_CMDLINE_LINUX; then
		pass lsm-hint "$(echo "$st" | grep '^hint:')"
	else
		fail lsm-hint "want $want: $st"
	fi
	has_line lsm-hint-logged "boot with $want" "$(cat /tmp/unprot.log)" "$(tail -n 5 /tmp/unprot.log)"
elif vm_full; then
	echo "$st" | grep -q '^hint:' && fail lsm-hint-absent "$VM_BACKEND covers everything, yet: $(echo "$st" | grep '^hint:')" || pass lsm-hint-absent "$VM_BACKEND: full coverage ($lsms)"
else
	na lsm-hint "this kernel has no BPF LSM built in (no bpf_lsm_file_open in its BTF)"
fi
$C filter disable >/dev/null 2>&1
kill "$agd"; wait "$agd" 2>/dev/null
rm -rf "$RUN"
losetup -d "$L" 2>/dev/null
vm_exit
