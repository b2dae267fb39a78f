# shellcheck shell=bash
# tests/vm/results.sh - the labs' result contract, shared by tests/vm/run.sh and
# tests/system/run.sh: a guest prints "VMTEST <check> PASS|FAIL|NA <detail>" lines and
# "VMDONE <uptime>" when it finished; the host turns them into "PASS|FAIL|N/A|XFAIL <name>
# <check> <detail>" lines, "<name>: K n/a", "<name>: G known gaps" (when there are
# any) and exactly one "<name>: N passed, M failed".

# vm_results NAME RESULTS_LOG CONSOLE_LOG QEMU_STATUS TIMEOUT: prints the lines and the
# summary; returns 0 only if every check passed and the guest finished.
vm_results() {
	local name=$1 log=$2 console=$3 qrc=$4 timeout_s=$5 passed=0 failed=0 na=0 xfail=0 l done_line
	while IFS= read -r l; do
		l=${l%$'\r'}
		if [[ $l =~ ^VMTEST\ ([^ ]+)\ (PASS|FAIL|NA|XFAIL)\ ?(.*)$ ]]; then
			case ${BASH_REMATCH[2]} in
			XFAIL) xfail=$((xfail + 1)); echo "XFAIL $name ${BASH_REMATCH[1]} ${BASH_REMATCH[3]}" ;;
			PASS) passed=$((passed + 1)); echo "PASS $name ${BASH_REMATCH[1]} ${BASH_REMATCH[3]}" ;;
			FAIL) failed=$((failed + 1)); echo "FAIL $name ${BASH_REMATCH[1]} ${BASH_REMATCH[3]}" ;;
			NA)
				na=$((na + 1))
				echo "N/A $name ${BASH_REMATCH[1]} ${BASH_REMATCH[3]}"
				# n/a needs a reason
				if [ -z "${BASH_REMATCH[3]}" ]; then
					failed=$((failed + 1)); echo "FAIL $name ${BASH_REMATCH[1]} n/a without a reason"
				fi ;;
			esac
		fi
	done <"$log"

	done_line=$(tr -d '\r' <"$log" | grep -a -m1 '^VMDONE' || true)
	if [ -z "$done_line" ]; then
		if [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then
			echo "FAIL $name guest did not finish within ${timeout_s}s (qemu killed)"
		else
			echo "FAIL $name guest did not finish (qemu exit status $qrc)"
		fi
		failed=$((failed + 1))
	elif [ $((passed + failed)) = 0 ]; then
		echo "FAIL $name the guest reported no results"
		failed=$((failed + 1))
	fi
	if [ "$failed" -gt 0 ]; then
		echo "---- $name: last 40 console lines ($console) ----"
		tr -d '\r' <"$console" | tail -n 40
		echo "---- end ----"
	fi
	echo "$name: $na n/a"
	[ "$xfail" = 0 ] || echo "$name: $xfail known gaps (XFAIL: protection missing, issue open)"
	echo "$name: $passed passed, $failed failed"
	[ "$failed" = 0 ]
}

# vm_tally NAME OUTPUT_FILE: adds the "<NAME>: N passed, M failed" summary in
# OUTPUT_FILE to TALLY_PASS / TALLY_FAIL and TALLY_LINES (a run that printed none
# counts as one failure).
TALLY_PASS=0 TALLY_FAIL=0 TALLY_LINES=()
vm_tally() {
	local s
	s=$(grep -E "^${1//+/\\+}: [0-9]+ passed, [0-9]+ failed$" "$2" | tail -n 1)
	[ -n "$s" ] || s="$1: 0 passed, 1 failed"
	TALLY_LINES+=("$s")
	TALLY_PASS=$((TALLY_PASS + $(echo "$s" | sed -E 's/.*: ([0-9]+) passed.*/\1/')))
	TALLY_FAIL=$((TALLY_FAIL + $(echo "$s" | sed -E 's/.*, ([0-9]+) failed$/\1/')))
}

# lab_lock NAME DIR WHAT: one WHAT run at a time on this checkout (they share DIR;
# fd 9) and one guest at a time on this machine, whichever checkout it comes from
# (fd 8): two TCG guests on two cores slow each other past the lab's timeouts.
lab_lock() {
	exec 9>"$2/.lock"
	if ! flock -n 9; then
		echo "$1: waiting for another $3 run in this checkout" >&2
		flock 9
	fi
	exec 8>"${LAB_MACHINE_LOCK:-/tmp/asmguard-lab.lock}"
	if ! flock -n 8; then
		echo "$1: waiting for another lab run on this machine" >&2
		flock 8
	fi
}

# lab_line PREFIX LINES WHICH ARG: sets line=ARG and name=PREFIX-ARG when ARG
# matches the regex LINES; else prints the usage (WHICH: the lines to name) and
# exits 2. The caller shifts ARG off.
lab_line() {
	if [[ ! ${4:-} =~ $2 ]]; then
		echo "usage: $0 LINE [TEST...]   (LINE: $3)" >&2
		exit 2
	fi
	line=$4
	name="$1-$line"
}

# summary_fail REASON: a lab run that could not even start (one failed setup check).
summary_fail() {
	echo "FAIL $name setup $*"
	echo "$name: 0 passed, 1 failed"
	exit 1
}
