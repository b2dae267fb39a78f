#!/bin/bash
# tests/vm/selftest.sh - the lab's own contract, on a real guest: a kernel that
# panics before /init is booted once more and the retry is reported (a RETRY
# line), and the run then fails with the summary line. The panic is real: the
# kernel is told to start an init that does not exist.
#
#   tests/vm/selftest.sh [LINE]     (default 6.1)
# Prints "PASS|FAIL vm-selftest <check>" lines and "vm-selftest: N passed, M failed".
set -uo pipefail
VM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
line=${1:-6.1}
# VM_SELFTEST_PART (multi or single): boot a line tests/vm/all.sh has prepared, beside
# its other boots (own logs and scratch file: VM_TAG); default: a whole run.sh
out=$(VM_PART=${VM_SELFTEST_PART:-all} VM_TAG=.selftest VM_BUILD=${VM_BUILD:-0} VM_TIMEOUT=120 VM_APPEND="rdinit=/nonexistent-init init=/nonexistent-init" \
	"$VM_DIR/run.sh" "$line" smoke 2>&1)
rc=$?
passed=0 failed=0
check() { # check NAME CONDITION-RESULT DETAIL
	if [ "$2" = 0 ]; then echo "PASS vm-selftest $1"; passed=$((passed + 1)); else
		echo "FAIL vm-selftest $1 $3"; failed=$((failed + 1)); fi
}
grep -q "^RETRY vm-$line guest panicked before /init" <<<"$out"
check panic-retried $? "no RETRY line: $(echo "$out" | tail -n 5 | tr '\n' ' ')"
[ "$(echo "$out" | grep -c '^RETRY ')" = 1 ]
check retried-once $? "$(echo "$out" | grep -c '^RETRY ') RETRY lines"
grep -Eq "^vm-$line: 0 passed, [1-9][0-9]* failed$" <<<"$out"
check summary-fails $? "$(echo "$out" | grep "^vm-$line:")"
[ "$rc" != 0 ]
check exit-non-zero $? "exit $rc"
echo "vm-selftest: $passed passed, $failed failed"
[ "$failed" = 0 ]
