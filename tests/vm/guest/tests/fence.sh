#!/bin/sh
# fence: from its first discard to its last, a disk being reclaimed is in mode
# "fenced": only asmguardd writes it. Root's and an allow-listed user's (grid)
# write-opens are refused with the fence's event while the job runs and pass
# (grid's) again after it; lsdsk and status show the fence. A client killed with
# SIGKILL mid-run leaves no fence: the daemon cancels the job and the fence
# drops with it. A daemon killed (-9) mid-reclaim ends its job (the job is a
# thread of asmguardd): while no daemon runs the pinned filter keeps the disk
# fenced (nothing is there to tell the job is gone), and the restarted daemon
# drops the fence at start, naming the ended process; a record naming a
# process that still runs (an old asmguardd still exiting) keeps the fence,
# and the restarted daemon lifts it once that process is gone and refuses a
# reclaim of the disk meanwhile. During a whole run the Oracle-home stand-in
# (an allow rule's executable) is refused, and so is "a mount on this host":
# ASM mounting the disk group opens every disk for writing, and that open
# fails with the allocated AUs' sha256 unchanged; after the job the stand-in
# writes again. The fenced verdict is one branch of the verdict every hook
# shares; the base lines cover both backends (5.10: fmod_ret, the others: LSM):
# once per kernel.
# lab-settings: once-per-kernel
. /vmtests/lib.sh

C="asmguardctl --socket /run/asmguard/asmguard.sock"
D=${VM_THIN:-}
AUS=48
ALLOC=2-6 # 40 free AUs of 1 MiB: 10 s at 4 MiB/s
wopen() { dd if=/dev/zero of="$D" bs=4096 count=0 conv=notrunc; } # a write-open, no write
wopen_grid() { as_user_past_modes grid dd if=/dev/zero of="$D" bs=4096 count=0 conv=notrunc; }
until_line() { # until_line PATTERN FILE: up to 10 s
	_i=0
	while [ $_i -lt 100 ] && ! grep -q -- "$1" "$2" 2>/dev/null; do
		_i=$((_i + 1)); sleep 0.1
	done
	grep -q -- "$1" "$2" 2>/dev/null
}
mode_of() { $C lsdsk 2>&1 | awk '$1 == "FTHIN" {print $2}'; }

if [ ! -b "$D" ]; then
	fail thin "no dm-thin fixture"
	vm_exit
fi
w=$(asmguard-synth-asm write "$D" --label FTHIN --group FDG --aus $AUS --allocated $ALLOC --fill 2>&1)
holds synthetic "$w" [ -n "$(echo "$w" | sed -n 's/.*free_bytes \([0-9]*\).*/\1/p')" ]
# an Oracle home whose bin/oracle (the ASM stand-in, setuid grid:asmadmin) an
# allow rule names, as tests/homes.sh builds it
GH=/u01/app/19c/grid
rm -rf /u01 && mkdir -p $GH/bin /etc/oracle
cp /usr/local/bin/ag-asm-writer $GH/bin/oracle
chown -R grid:oinstall /u01 && chgrp asmadmin $GH/bin/oracle && chmod 6751 $GH/bin/oracle
[ -e /etc/oratab ] && cp /etc/oratab /tmp/fc.oratab.saved
printf '+ASM1:%s:N\n' $GH >/etc/oratab
printf 'crs_home=%s\n' $GH >/etc/oracle/olr.loc
M=$((1024 * 1024))
asm() { as_user grid $GH/bin/oracle "$D" "$@"; }
aus() { dd if="$D" bs=$M skip=2 count=5 2>/dev/null | sha256sum | cut -d' ' -f1; } # the allocated AUs
agd_config /tmp/fc.toml mapper/vmthin 'filter.allow_groups=[]' "filter.oracle_homes=[\"$GH\"]"
agd_start /tmp/fc.toml /tmp/fc.log
chown grid "$D"
expect enforced-before enforce "$(mode_of)" "$($C lsdsk 2>&1)"
expect_ok grid-opens-before wopen_grid
expect_ok standin-writes-before asm $((4 * M + 4096))

# 1. killed client: the job is cancelled, the fence drops with it
$C reclaim FTHIN --watch 1 --rate 4 --json >/tmp/fc.res1 2>/tmp/fc.prog1 &
cp=$!
if until_line '"phase":"reclaiming"' /tmp/fc.prog1; then
	expect kill-fenced-while-running fenced "$(mode_of)" "$($C lsdsk 2>&1)"
	kill -9 $cp
	wait $cp 2>/dev/null
	i=0
	while [ $i -lt 100 ] && [ "$(mode_of)" != enforce ]; do i=$((i + 1)); sleep 0.1; done
	expect kill-no-fence-after-job enforce "$(mode_of)" "$(grep -i 'fence\|reclaim' /tmp/fc.log | tail -n 4)"
	expect_ok kill-grid-opens-again wopen_grid
	has_line kill-status-no-fence "reclaim fence: *none" "$($C status 2>&1)"
else
	kill -9 $cp 2>/dev/null
	fail kill-reclaiming "no reclaiming phase :: $(cat /tmp/fc.prog1) :: $(tail -n 5 /tmp/fc.log)"
fi

# 2. the daemon killed mid-reclaim: its job ends with it
kill_agd() { kill -9 "$agd"; wait "$agd" 2>/dev/null; }
$C reclaim FTHIN --watch 1 --rate 4 --json >/tmp/fc.res3 2>/tmp/fc.prog3 &
cp=$!
if until_line '"phase":"reclaiming"' /tmp/fc.prog3; then
	old=$agd
	kill_agd
	wait $cp
	rc=$?
	holds restart-client-told "exit $rc: $(cat /tmp/fc.res3) $(tail -n 1 /tmp/fc.prog3)" [ $rc -ne 0 ]
	expect_fail restart-no-daemon-still-fenced "Operation not permitted" wopen_grid
	has_line restart-record-names-the-old-daemon "\"pid\":$old," "$(cat /run/asmguard/reclaim/fence.json 2>&1)"
	: >/tmp/fc.log2
	if agd_start /tmp/fc.toml /tmp/fc.log2; then
		i=0
		while [ $i -lt 100 ] && [ "$(mode_of)" != enforce ]; do i=$((i + 1)); sleep 0.1; done
		expect restart-no-fence enforce "$(mode_of)" "$($C lsdsk 2>&1)"
		has_line restart-drop-logged "reclaim fence of FTHIN dropped: .*$old" "$(cat /tmp/fc.log2)" "$(grep 'reclaim fence' /tmp/fc.log2 | tail -n 2)"
		expect_ok restart-grid-opens-again wopen_grid
		[ -e /run/asmguard/reclaim/fence.json ] && fail restart-no-record "$(cat /run/asmguard/reclaim/fence.json)" || pass restart-no-record "no fence record"
	else
		fail restart-start "$(tail -n 3 /tmp/fc.log2)"
	fi
else
	kill -9 $cp 2>/dev/null
	fail restart-reclaiming "no reclaiming phase :: $(cat /tmp/fc.prog3) :: $(tail -n 5 /tmp/fc.log)"
fi

# 3. the record names a process that still runs (an old asmguardd still
# exiting, its job's last discard in flight): the fence holds until it ends
kill_agd
sleep 600 &
old=$!
ticks=$(sed 's/.*) //' /proc/$old/stat | cut -d' ' -f20)
printf '{"pid":%s,"start_ticks":%s,"labels":["FTHIN"]}' $old "$ticks" >/run/asmguard/reclaim/fence.json
: >/tmp/fc.log3
if agd_start /tmp/fc.toml /tmp/fc.log3; then
	i=0
	while [ $i -lt 50 ] && [ "$(mode_of)" != fenced ]; do i=$((i + 1)); sleep 0.1; done
	expect kept-fenced fenced "$(mode_of)" "$($C lsdsk 2>&1)"
	has_line kept-logged "reclaim fence of FTHIN kept: .*$old" "$(cat /tmp/fc.log3)" "$(grep 'reclaim fence' /tmp/fc.log3 | tail -n 2)"
	expect_fail kept-grid-refused "Operation not permitted" wopen_grid
	expect_fail kept-reclaim-refused "under way" $C reclaim FTHIN --watch 1 --rate 4
	kill $old
	wait $old 2>/dev/null
	i=0
	while [ $i -lt 50 ] && [ "$(mode_of)" != enforce ]; do i=$((i + 1)); sleep 0.1; done
	expect kept-lifted-once-gone enforce "$(mode_of)" "$($C lsdsk 2>&1) :: $(tail -n 3 /tmp/fc.log3)"
	has_line kept-drop-logged "reclaim fence of FTHIN dropped: .*$old" "$(cat /tmp/fc.log3)" "$(grep 'reclaim fence' /tmp/fc.log3 | tail -n 2)"
	expect_ok kept-grid-opens-again wopen_grid
	[ -e /run/asmguard/reclaim/fence.json ] && fail kept-no-record "$(cat /run/asmguard/reclaim/fence.json)" || pass kept-no-record "no fence record"
else
	kill $old
	fail kept-start "$(tail -n 3 /tmp/fc.log3)"
fi
cat /tmp/fc.log2 /tmp/fc.log3 >>/tmp/fc.log 2>/dev/null

# 4. a whole run (resumes from the checkpoint the killed ones left)
$C reclaim FTHIN --watch 1 --rate 4 --json >/tmp/fc.res2 2>/tmp/fc.prog2 &
rp=$!
if until_line '"phase":"reclaiming"' /tmp/fc.prog2; then
	expect run-lsdsk-fenced fenced "$(mode_of)" "$($C lsdsk 2>&1)"
	has_line run-status-fence "reclaim fence: *FTHIN: a reclaim runs" "$($C status 2>&1)"
	expect_fail run-root-open-refused "Operation not permitted" wopen
	expect_fail run-grid-open-refused "Operation not permitted" wopen_grid
	has_line run-event-names-reclaim "DENIED (reclaim fence).*label=FTHIN" "$($C events 2>&1)"
	has_line run-journal-names-reclaim "write denied by the reclaim's fence.*label=FTHIN" "$(cat /tmp/fc.log)" "$(grep -i 'denied' /tmp/fc.log | tail -n 2)"
	# the Oracle-home stand-in, which its allow rule lets write, and ASM
	# "mounting" the disk group (a write-open of each disk): refused, nothing lost
	b=$(aus)
	expect_fail run-standin-refused "open FAIL" asm $((4 * M + 4096))
	expect_fail run-mount-refused "open FAIL" asm $((3 * M)) 2
	expect run-mount-data-unchanged "$b" "$(aus)"
	has_line run-standin-event "DENIED (reclaim fence).*comm=oracle" "$($C events 2>&1)" "$($C events 2>&1 | grep oracle | tail -n 1)"
	fenced_at_end=$(mode_of)
else
	fail run-reclaiming "no reclaiming phase :: $(cat /tmp/fc.prog2) :: $(tail -n 5 /tmp/fc.log)"
fi
wait $rp
rc=$?
expect run-reclaim-done 0 "$rc" "$(cat /tmp/fc.res2) :: $(tail -n 3 /tmp/fc.prog2) :: $(tail -n 5 /tmp/fc.log)"
expect run-still-fenced-when-probed fenced "${fenced_at_end:-}" "still fenced once the probes were done"
expect run-enforced-after enforce "$(mode_of)" "$($C lsdsk 2>&1)"
expect_ok run-grid-opens-after wopen_grid
b=$(aus)
expect_ok run-standin-writes-after asm $((4 * M + 4096))
holds run-standin-wrote-after "the allocated AUs changed" [ "$(aus)" != "$b" ]
expect_fail run-root-refused-by-enforce-after "Operation not permitted" wopen
[ -e /run/asmguard/reclaim/fence.json ] && fail run-no-record "$(cat /run/asmguard/reclaim/fence.json)" || pass run-no-record "no fence record"

$C filter disable >/dev/null 2>&1
kill "$agd" 2>/dev/null
wait "$agd" 2>/dev/null
rm -f /run/asmguard/filter.state
rm -rf /u01 /etc/oracle
if [ -e /tmp/fc.oratab.saved ]; then mv /tmp/fc.oratab.saved /etc/oratab; else rm -f /etc/oratab; fi
vm_exit
