#!/bin/sh
# fence: from its first discard to its last, a disk being reclaimed is in mode
# "fenced": only asmguardd writes it. Root's and an allow-listed user's (grid)
# write-opens are refused with the fence's event while the job runs and pass
# (grid's) again after it; lsdsk and status show the fence. A client killed with
# SIGKILL mid-run leaves no fence: the daemon cancels the job and the fence
# drops with it. The fenced verdict is one branch of the verdict every hook
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
agd_config /tmp/fc.toml mapper/vmthin 'filter.allow_groups=[]'
agd_start /tmp/fc.toml /tmp/fc.log
chown grid "$D"
expect enforced-before enforce "$(mode_of)" "$($C lsdsk 2>&1)"
expect_ok grid-opens-before wopen_grid

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

# 2. a whole run (resumes from the checkpoint the killed one left)
$C reclaim FTHIN --watch 1 --rate 4 --json >/tmp/fc.res2 2>/tmp/fc.prog2 &
rp=$!
if until_line '"phase":"reclaiming"' /tmp/fc.prog2; then
	expect run-lsdsk-fenced fenced "$(mode_of)" "$($C lsdsk 2>&1)"
	has_line run-status-fence "reclaim fence: *FTHIN: a reclaim runs" "$($C status 2>&1)"
	expect_fail run-root-open-refused "Operation not permitted" wopen
	expect_fail run-grid-open-refused "Operation not permitted" wopen_grid
	has_line run-event-names-reclaim "DENIED (reclaim fence).*label=FTHIN" "$($C events 2>&1)"
	has_line run-journal-names-reclaim "write denied by the reclaim's fence.*label=FTHIN" "$(cat /tmp/fc.log)" "$(grep -i 'denied' /tmp/fc.log | tail -n 2)"
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
expect_fail run-root-refused-by-enforce-after "Operation not permitted" wopen
[ -e /run/asmguard/reclaim/fence.json ] && fail run-no-record "$(cat /run/asmguard/reclaim/fence.json)" || pass run-no-record "no fence record"

$C filter disable >/dev/null 2>&1
kill "$agd" 2>/dev/null
wait "$agd" 2>/dev/null
rm -f /run/asmguard/filter.state
vm_exit
