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

# lab_lock NAME DIR WHAT SLOTS: one WHAT run at a time in DIR (lab_checkout_lock) and
# SLOTS of the machine's two guest slots (lab_machine_lock: 1 for a run that boots one
# guest, 2 for one that boots two at once, the system lab's pair).
lab_lock() {
	lab_checkout_lock "$1" "$2" "$3"
	lab_machine_lock "$1" "${4:-2}"
}

# lab_checkout_lock NAME DIR WHAT: one WHAT run at a time on this checkout (they share
# DIR; fd 9, held until the shell exits).
lab_checkout_lock() {
	exec 9>"$2/.lock"
	if ! flock -n 9; then
		echo "$1: waiting for another $3 run in this checkout" >&2
		flock 9
	fi
}

# lab_machine_lock NAME SLOTS: the machine's host cores for guests, whichever checkout
# they come from. A guest, multi-threaded (-smp 2) or one-thread, keeps about one host
# core busy (its tests mostly wait: tests/vm/all.sh has the measurement), so a guest
# takes one slot (SLOTS 1): one of the two slot files (LAB_MACHINE_LOCK.slot1, .slot2,
# default /tmp/asmguard-lab.lock.slotN) exclusively and the lock file shared, and two
# guests run side by side. SLOTS 2 (two guests at once, or a benchmark that wants the
# machine quiet) holds the lock file LAB_MACHINE_LOCK exclusively. Held on fds 7 and 8
# until lab_machine_unlock (or the shell's exit); the guest's qemu inherits them.
# A run waiting for both slots is not starved by the one-slot runs that keep coming
# (flock lets a new shared holder in while an exclusive one waits): it holds the
# turnstile LAB_MACHINE_LOCK.turn (fd 6) while it waits and runs, and a one-slot run
# passes the turnstile before it takes a slot, so the two-slot run starts as soon as
# the guests already running end.
# One-slot runs take the slots in the order of their LAB_EST (the estimated seconds
# of their guest: the longest first), through the directory LAB_MACHINE_LOCK.queue.
#
# LAB_GO (scripts/test.sh): a file; no guest starts before it exists (the labs make
# their disks and images while the host tests compile, and boot once they are
# compiled). At most LAB_GO_WAIT seconds (default 900), then the guest starts anyway.
lab_machine_lock() {
	local a=${LAB_MACHINE_LOCK:-/tmp/asmguard-lab.lock} said="" mode=-x g=0
	if [ -n "${LAB_GO:-}" ] && [ ! -e "$LAB_GO" ]; then
		echo "$1: waiting for the host tests' compile to end ($LAB_GO)" >&2
		while [ ! -e "$LAB_GO" ] && [ $g -lt "${LAB_GO_WAIT:-900}" ]; do sleep 1; g=$((g + 1)); done
	fi
	exec 6>"$a.turn"
	if [ "$2" = 1 ]; then
		# the queue: the run waiting with the longest estimate (LAB_EST, seconds) takes
		# the next free slot, whichever lab it is from (then the earliest; an entry
		# whose run is gone is dropped): the longest first, so the last to end are
		# short. A run joins it before the turnstile: the runs a two-slot run held back
		# are all in it when that run ends (joining after, the first through the
		# turnstile took a slot before the longer ones behind it had joined).
		local q="$a.queue" me first e
		mkdir -p "$q"
		me=$(printf '%06d' "${LAB_EST:-0}").$(date +%s%N).$BASHPID
		: >"$q/$me"
		if ! flock -s -n 6; then
			echo "$1: waiting for a two-slot run to start first" >&2
			flock -s 6
		fi
		exec 6>&-
		mode=-s
		while :; do
			first=""
			for e in $(ls "$q" | sort -t. -k1,1nr -k2,2n); do
				if kill -0 "${e##*.}" 2>/dev/null; then first=$e && break; fi
				rm -f "$q/$e"
			done
			if [ "$first" = "$me" ]; then
				exec 7>"$a.slot1"
				flock -n 7 && break
				exec 7>"$a.slot2"
				flock -n 7 && break
				exec 7>&-
			fi
			[ -n "$said" ] || echo "$1: waiting for a free one-thread guest slot on this machine" >&2
			said=1
			sleep 0.5
		done
		rm -f "$q/$me"
	fi
	[ "$2" = 1 ] || flock -x 6
	exec 8>"$a"
	if ! flock $mode -n 8; then
		echo "$1: waiting for another lab run on this machine" >&2
		flock $mode 8
	fi
	# LAB_GUEST_NICE (scripts/test.sh: 10): the niceness a guest runs at, whatever its
	# preparation ran at (LAB_PREP_NICE); the caller's shell starts the guest's qemu
	[ -z "${LAB_GUEST_NICE:-}" ] || renice -n "$LAB_GUEST_NICE" -p "$BASHPID" >/dev/null 2>&1 || true
}

# lab_prep_nice: the calling shell (a subshell that prepares runs: disks, images)
# runs at LAB_PREP_NICE (scripts/test.sh: 19), below the guests, which it must not
# slow down while they boot; nothing without it.
lab_prep_nice() {
	[ -z "${LAB_PREP_NICE:-}" ] || renice -n "$LAB_PREP_NICE" -p "$BASHPID" >/dev/null 2>&1 || true
}

# lab_machine_unlock: gives back what lab_machine_lock took.
lab_machine_unlock() {
	exec 8>&- 7>&- 6>&-
}

# lab_test_settings FILE KNOWN: the settings FILE (a guest test) declares in its header,
# one per line. The header is the comment block a test starts with (every line from
# the first that begins with "#", up to the first that does not); its settings line is
#     # lab-settings: SETTING [SETTING...]
# KNOWN: the settings of the caller's lab (space-separated; tests/vm/README.md, "Test
# headers"). An unknown setting, a settings line below the header or an old magic
# comment ("# vm-lab: ...", "# system-lab: ...") is a one-line error on stderr naming
# the file, the line and what to write, and status 1: the labs fail that test.
lab_test_settings() {
	local f=$1 known=" $2 " l n=0 header=1 out="" s
	[ -f "$f" ] || { echo "$f: no such test" >&2; return 1; }
	while IFS= read -r l || [ -n "$l" ]; do
		n=$((n + 1))
		[[ $l == '#'* ]] || header=0
		case $l in
		'# lab-settings:'*)
			if [ $header = 0 ]; then
				echo "$f:$n: a '# lab-settings:' line below the header: move it into the comment block at the top" >&2
				return 1
			fi
			for s in ${l#'# lab-settings:'}; do
				if [[ $known != *" $s "* ]]; then
					echo "$f:$n: unknown lab setting '$s' (known here:$(printf ' %s' $2))" >&2
					return 1
				fi
				out="$out$s"$'\n'
			done ;;
		'# vm-lab:'* | '# system-lab:'*)
			echo "$f:$n: '$l' is the old magic comment: declare it in the header as '# lab-settings: ...' (tests/vm/README.md, \"Test headers\")" >&2
			return 1 ;;
		esac
	done <"$f"
	printf '%s' "$out"
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
