# shellcheck shell=bash
# tests/system/pair/conflict.sh - the same label on two nodes at once: one disk two
# names (one wins, the other is told), a forced label landing during the other's
# confirmation, two disks one name (both stay protected, every node reports the
# conflict, resolved on one node and followed by the other). Disks vdb, vdc, vdd.
# A two-node test (tests/system/pair.sh runs it): sourced by the
# host's driver, it runs commands on the nodes (on NODE CMD, send/recv) and reports
# through the labs' result contract (pass, fail, ok, refused, same, within5).

# pair_conflict_run: the test.
pair_conflict_run() {
	D=/dev/vdb
	# one disk, two names, at once: one wins, the other is told, both nodes agree
	send a ". /vmtests/pairlib.sh; $C label PAIRC1 $D"
	send b ". /vmtests/pairlib.sh; $C label PAIRC2 $D"
	recv a; rc_a=$RC out_a=$OUT
	recv b; rc_b=$RC out_b=$OUT
	case $rc_a:$rc_b in
	0:4) win=PAIRC1 lose=PAIRC2 lost=$out_b ;;
	4:0) win=PAIRC2 lose=PAIRC1 lost=$out_a ;;
	*) win="" lose="" lost="" ;;
	esac
	if [ -n "$win" ] && grep -q "$win" <<<"$lost"; then
		pass conflict.one-disk-two-names-one-refused "$win stands; the other was refused naming it: $lost"
	else
		fail conflict.one-disk-two-names-one-refused "a: exit $rc_a $out_a :: b: exit $rc_b $out_b"
	fi
	info "conflict: one disk two names at once: a exit $rc_a, b exit $rc_b"
	for n in a b; do
		on $n "i=0; until listed ${win:-none} || [ \$i -ge 100 ]; do i=\$((i+1)); sleep 0.1; done; raw_label $D; echo; $C lsdsk | grep '^PAIRC' | cut -d' ' -f1"
		same "conflict.one-disk-$n-agrees" "$(printf 'ORCLDISK%s\n%s' "$win" "$win")" "$OUT" "disk and daemon on $n"
	done

	# one disk, two names, b's forced label landing while a's is being confirmed:
	# a is told (label_conflict), or, had b come later, a's watch reports the change
	on b "bg force label_when_seen PAIRF1 $D PAIRF2"
	on a "$C label PAIRF1 $D --force"
	rc_a=$RC out_a=$OUT
	on b "bg_wait force 30"
	ok conflict.forced-b-label
	if [ "$rc_a" = 4 ] && grep -q "carries label PAIRF2" <<<"$out_a"; then
		pass conflict.forced-a-told "$out_a"
		info "conflict: b's forced label landed within a's confirmation: a answered label_conflict"
	else
		on a "until_true 10 journal_has 'carries label PAIRF2, not PAIRF1'; journalctl -u asmguard -o cat | grep 'carries label PAIRF2, not PAIRF1'"
		if [ "$rc_a" = 0 ] && [ "$RC" = 0 ]; then
			pass conflict.forced-a-told "a's label answered before b's landed; a's journal: $OUT"
			info "conflict: b's forced label landed after a's confirmation: a's label watch reported it"
		else
			fail conflict.forced-a-told "a: exit $rc_a $out_a; journal: $OUT"
		fi
	fi
	for n in a b; do
		on $n "i=0; until listed PAIRF2 || [ \$i -ge 100 ]; do i=\$((i+1)); sleep 0.1; done; raw_label $D; echo; $C lsdsk | grep '^PAIR[CF]' | cut -d' ' -f1"
		same "conflict.forced-$n-agrees" "$(printf 'ORCLDISKPAIRF2\nPAIRF2')" "$OUT" "disk and daemon on $n"
	done

	# two disks, one name, at once: both stay protected, every node reports the conflict
	D4=/dev/vdc D5=/dev/vdd
	send a ". /vmtests/pairlib.sh; $C label PAIRDUP $D4"
	send b ". /vmtests/pairlib.sh; $C label PAIRDUP $D5"
	recv a; rc_a=$RC out_a=$OUT
	recv b; rc_b=$RC out_b=$OUT
	info "conflict: two disks one name at once: a exit $rc_a, b exit $rc_b"
	if [ "$rc_a:$rc_b" = 0:0 ]; then
		pass conflict.two-disks-one-name-both-written "a: $out_a; b: $out_b"
		for n in a b; do
			on $n "i=0; until $C lsdsk | grep -q 'CONFLICT: label PAIRDUP' || [ \$i -ge 100 ]; do i=\$((i+1)); sleep 0.1; done; $C lsdsk | grep 'CONFLICT: label PAIRDUP'"
			same "conflict.two-disks-$n-reports" "CONFLICT: label PAIRDUP is on $D4 and $D5: neither is used until one is relabelled" "$OUT"
			on $n "$C status | grep -i conflict; journalctl -u asmguard -o cat | grep -c 'label PAIRDUP is on more than one disk'"
			if [ "$RC" = 0 ] && grep -q "1 label conflicts" <<<"$OUT" && [ "$(printf '%s' "$OUT" | tail -n 1)" -ge 1 ]; then
				pass "conflict.two-disks-$n-status-and-journal" "$OUT"
			else
				fail "conflict.two-disks-$n-status-and-journal" "exit $RC: $OUT"
			fi
			on $n "write_as root $D4 2 R; a=\$?; write_as root $D5 2 R; b=\$?; echo \$a \$b"
			same "conflict.two-disks-$n-both-protected" "1 1" "$(printf '%s' "$OUT" | tail -n 1)" "$OUT"
			on $n "$C unlabel PAIRDUP"
			refused "conflict.two-disks-$n-label-ops-refused" "more than one disk"
		done
		on a "raw_label $D4; echo; raw_label $D5"
		same conflict.two-disks-nothing-lost "$(printf 'ORCLDISKPAIRDUP\nORCLDISKPAIRDUP')" "$OUT"
		# resolved on one node, followed by the other
		on b "bg follow follow appear PAIRDUP2 $D5 30"
		on a "$C label PAIRDUP2 $D5 --force"
		ok conflict.two-disks-relabel-one
		on b "bg_wait follow 40"
		within5 conflict.two-disks-b-follows-within-5s
		for n in a b; do
			on $n "$C lsdsk | grep -c CONFLICT; $C lsdsk | grep '^PAIRDUP' | awk '{print \$1, \$3}' | sort"
			same "conflict.two-disks-$n-resolved" "$(printf '0\nPAIRDUP %s\nPAIRDUP2 %s' $D4 $D5)" "$OUT"
		done
	else
		# b's daemon had already read a's label: one refused, naming the other disk
		if { [ "$rc_a:$rc_b" = 0:4 ] && grep -q "$D4" <<<"$out_b"; } ||
			{ [ "$rc_a:$rc_b" = 4:0 ] && grep -q "$D5" <<<"$out_a"; }; then
			pass conflict.two-disks-one-name-both-written "one was refused, naming the other disk: a: $out_a; b: $out_b"
		else
			fail conflict.two-disks-one-name-both-written "a: exit $rc_a $out_a; b: exit $rc_b $out_b"
		fi
	fi
}
