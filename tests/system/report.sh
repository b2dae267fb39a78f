# shellcheck shell=bash
# tests/system/report.sh - result lines of host-side lab steps, in the labs' contract:
# "PASS|FAIL <name> <check> <detail>" lines, then one "<name>: N passed, M failed".

sys_report_init() { SYS_NAME=$1; SYS_PASSED=0; SYS_FAILED=0; }
sys_pass() { SYS_PASSED=$((SYS_PASSED + 1)); echo "PASS $SYS_NAME $1 ${2:-}"; }
sys_fail() { SYS_FAILED=$((SYS_FAILED + 1)); echo "FAIL $SYS_NAME $1 ${2:-}"; }
# sys_report_end: the summary line; returns non-zero on any failure
sys_report_end() {
	echo "$SYS_NAME: $SYS_PASSED passed, $SYS_FAILED failed"
	[ "$SYS_FAILED" = 0 ]
}
