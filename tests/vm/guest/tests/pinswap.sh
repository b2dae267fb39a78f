#!/bin/sh
# pinswap (issue 41, point 2): a restarted daemon adopts only the links it
# pinned. With the daemon over a labelled loop disk killed (kill -9), root
# unpins every link of the filter's own programs and pins in their place a
# link that judges no write (the companion ag_kernel_open's, or on 5.10 the
# exit tracer's, hard-linked on bpffs): the filter's programs go with their last reference and root's
# write lands (the attack). The restarted daemon does not adopt those links
# (not the ones it recorded, nor its programs): it attaches its own in their
# place, says so (an ERROR line; `status` degraded, naming them) and root's
# write is refused again; each replaced pin is an event (`events`: PIN
# REPLACED, naming it) and counts in asmguard_pins_replaced_total. The start
# after adopts what that one pinned, with no ERROR, no such event, and says
# protected.
# Both backends' links are covered by the base lines (5.10: fmod_ret; 6.1, 6.12,
# newest: LSM): once per kernel.
# lab-settings: once-per-kernel
. /vmtests/lib.sh

C="asmguardctl --socket /run/asmguard/asmguard.sock"
PIN=/sys/fs/bpf/asmguard
EPERM="Operation not permitted"
# the link pinned in place: the companion's (a cgroup link), or where the
# kernel refuses it (5.10) the exit tracer's (judges no write either)
COMP=ag_kernel_open
[ -e "$PIN/links/$COMP" ] || COMP=ag_guardian_exit
L=$(new_loop 16 ps-disk)
[ -b "$L" ] || { fail setup "no loop device"; vm_exit; }
PORT=19474
agd_config /tmp/ps.toml "${L#/dev/}" "metrics.listen=\"127.0.0.1:$PORT\""
lo_up # the metrics are served over loopback
# asmguard_pins_replaced_total as the daemon serves it (empty: not served)
replaced_total() {
	asmguard-iolat scrape --url "http://127.0.0.1:$PORT/metrics" 2>&1 |
		awk '/^asmguard_pins_replaced_total / {print $NF}'
}
: >/tmp/ps.log
agd_start /tmp/ps.toml /tmp/ps.log || { fail setup "asmguardd did not answer: $(tail -n 5 /tmp/ps.log)"; vm_exit; }
expect_ok label $C label PSDISK "$L"
DDW="bs=4096 count=1 conv=notrunc oflag=direct"
dd_root() { dd if=/dev/zero of="$L" $DDW seek=16 2>&1; }

if ! vm_full; then
	na swap "$VM_FALLBACK_WHY: its one link is the cgroup-device program's, and no other link to pin in its place (the host tests replace it by an allow-all program)"
elif [ ! -e "$PIN/links/$COMP" ]; then
	fail setup "no $COMP link to pin in place: $(ls $PIN/links 2>&1)"
else
	expect_fail refused-before "$EPERM" dd_root
	kill -9 "$agd"
	wait "$agd" 2>/dev/null
	swapped=""
	for f in "$PIN"/links/*; do
		n=${f##*/}
		[ "$n" = "$COMP" ] && continue
		rm -f "$f" && ln "$PIN/links/$COMP" "$f" && swapped="$swapped $n"
	done
	info "pinned $COMP's link under:$swapped"
	# the unpinned programs go with their last reference (deferred)
	i=0
	while [ $i -lt 50 ] && ! dd_root >/dev/null; do i=$((i + 1)); sleep 0.1; done
	expect_ok attack-lands dd_root
	: >/tmp/ps.log
	agd_start /tmp/ps.toml /tmp/ps.log || fail restart "$(tail -n 5 /tmp/ps.log)"
	expect_fail refused-after-restart "$EPERM" dd_root
	has_line error-line "ERROR.*not what this daemon's build pinned" "$(cat /tmp/ps.log)" \
		"$(grep -m 1 "not what this daemon's build pinned" /tmp/ps.log | cut -c1-280)"
	st=$($C status 2>&1)
	has_line status-degraded "^protection: *degraded" "$st"
	has_line status-names-them "replaced at start" "$st" "$(echo "$st" | grep -i -m 2 'replaced at start' | cut -c1-250)"
	ev=$($C events 2>&1)
	n_sw=$(echo $swapped | wc -w)
	n_ev=0
	for n in $swapped; do
		echo "$ev" | grep -q "PIN REPLACED $n:" && n_ev=$((n_ev + 1))
	done
	holds event-per-pin "$n_ev of $n_sw replaced pins named in events: $(echo "$ev" | grep -m 2 'PIN REPLACED' | cut -c1-200)" \
		[ "$n_ev" = "$n_sw" ]
	t=$(replaced_total)
	holds counter "asmguard_pins_replaced_total=${t:-absent}, $n_sw replaced" [ "$t" = "$n_sw" ]
	same=""
	for n in $swapped; do [ "$PIN/links/$n" -ef "$PIN/links/$COMP" ] && same="$same $n"; done
	holds pins-replaced "still the companion's link:${same:- none}" [ -z "$same" ]

	kill "$agd"
	wait "$agd" 2>/dev/null
	: >/tmp/ps2.log
	agd_start /tmp/ps.toml /tmp/ps2.log || fail restart-2 "$(tail -n 5 /tmp/ps2.log)"
	st=$($C status 2>&1)
	has_line readopted "re-adopted" "$st" "$(echo "$st" | grep -i -m 2 filter)"
	has_line protected-after "^protection: *protected" "$st"
	holds no-error-after "$(grep -c ERROR /tmp/ps2.log) ERROR lines" [ "$(grep -c "not what this daemon's build pinned" /tmp/ps2.log)" = 0 ]
	holds no-event-after "$($C events 2>&1 | grep -c 'PIN REPLACED') PIN REPLACED events" \
		[ "$($C events 2>&1 | grep -c 'PIN REPLACED')" = 0 ]
	t=$(replaced_total)
	holds counter-after "asmguard_pins_replaced_total=${t:-absent}" [ "$t" = 0 ]
	expect_fail refused-after-readoption "$EPERM" dd_root
fi

$C filter disable >/dev/null 2>&1
kill "$agd" 2>/dev/null
wait "$agd" 2>/dev/null
losetup -d "$L" 2>/dev/null
vm_exit
