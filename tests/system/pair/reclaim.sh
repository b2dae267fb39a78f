# shellcheck shell=bash
# tests/system/pair/reclaim.sh - reclaim across hosts: a refuses while b's stand-in ASM
# heartbeats on the SYNTHETIC disk group (vde), proceeds once it stops; the kept AUs
# unchanged, b reads the freed AUs as zeros. And the stop rule: while a reclaims
# slowly, b writes the heartbeat block and a free AU, as a node mounting the disk
# group mid-run would: a stops before its next discard (exit 4, naming the heartbeat)
# and b's AU keeps its sha256.
# A two-node test (tests/system/pair.sh runs it): sourced by the
# host's driver, it runs commands on the nodes (on NODE CMD, send/recv) and reports
# through the labs' result contract (pass, fail, ok, refused, same, within5).

# pair_reclaim_run: the test (b's filter may be off by now: the prometheus test's
# alert is running).
pair_reclaim_run() {
	D=/dev/vde
	for n in a b; do
		on $n "$C lsdsk | grep '^PAIRRC .*$D.*PAIRDG' | awk '{print \$NF}'"
		ok "reclaim.$n-lists-disk" "PAIRRC in disk group PAIRDG on $D, Serial/WWN $OUT"
		eval "wwn_$n=\$OUT"
	done
	same reclaim.same-disk-identity "$wwn_a" "$wwn_b" "both nodes report the disk's serial/WWN as $wwn_b"
	on b "standin_start $D; sleep 3; wc -l </tmp/standin.beats"
	[ "$RC" = 0 ] && [ "${OUT:-0}" -ge 1 ] 2>/dev/null && pass reclaim.b-standin-heartbeats "$OUT heartbeat(s) written by grid on b" ||
		fail reclaim.b-standin-heartbeats "exit $RC: $OUT"
	on a "$C reclaim --diskgroup PAIRDG --watch 6 --json 2>/tmp/rc.err; rc=\$?; grep -v '^{\"phase\"' /tmp/rc.err; exit \$rc"
	refused reclaim.a-refuses-while-b-heartbeats "heartbeat"
	[ "$RC" = 4 ] && pass reclaim.a-refusal-exit-4 "exit 4" || fail reclaim.a-refusal-exit-4 "exit $RC"
	on b "standin_stop"
	[ "$RC" = 0 ] && [ "${OUT:-0}" -ge 3 ] 2>/dev/null && pass reclaim.b-standin-stopped "it wrote $OUT heartbeats" ||
		fail reclaim.b-standin-stopped "exit $RC: $OUT"
	pair_reclaim_stop_rule
	on a "asmguard-synth-asm hash $D --aus 96 --allocated $RC_ALLOC"
	h0=$OUT
	on a "$C reclaim --diskgroup PAIRDG --watch 3 --json 2>/tmp/rc.progress | grep -o '\"reclaimed_bytes\": *[0-9]*' | grep -o '[0-9]*\$' | head -n 1" 180
	same reclaim.a-proceeds-after-b-stops "$RC_FREE" "$OUT" "reclaimed bytes (free AUs $RC_FREE)"
	on a "asmguard-synth-asm hash $D --aus 96 --allocated $RC_ALLOC"
	same reclaim.kept-aus-unchanged "$h0" "$OUT"
	on b "dd if=$D bs=1M skip=21 count=1 iflag=direct 2>/dev/null | tr -d '\0' | wc -c"
	same reclaim.b-reads-freed-au-as-zeros 0 "$OUT" "non-zero bytes b reads in AU 21 (free, reclaimed by a)"
}

# pair_reclaim_stop_rule: a reclaims at 2 MiB/s (the free AUs 21-29, 41-49, 51-95 in
# order: about 30 s); once its discards have started, b writes its heartbeat and AU 90
# (free, the last a would reach), as grid. a stops before its next discard, exit 4,
# naming the heartbeat and what was done; AU 90 as b wrote it. The stopped run's
# checkpoint is then removed, so that the whole reclaim after it starts afresh.
pair_reclaim_stop_rule() {
	on a "bg rcstop $C reclaim --diskgroup PAIRDG --watch 2 --rate 2 --json; until_true 60 grep -q '\"phase\": *\"reclaiming\"' /tmp/rcstop.out && echo started"
	same reclaim.stop-a-discarding "started" "$OUT" "a's reclaim at 2 MiB/s reached its discards"
	on b "head -c 1048576 /dev/urandom >/tmp/au90 && chmod 0644 /tmp/au90 && as_user grid dd if=/tmp/au90 of=$D bs=1M seek=90 count=1 oflag=direct conv=notrunc 2>/dev/null && standin_start $D && sleep 3 && standin_stop >/dev/null && sha256sum </tmp/au90 | cut -d' ' -f1"
	[ "$RC" = 0 ] && [ -n "$OUT" ] && pass reclaim.stop-b-writes "b wrote AU 90 (sha256 $OUT) and its heartbeat as grid" ||
		fail reclaim.stop-b-writes "exit $RC: $OUT"
	want=$OUT
	on a "bg_wait rcstop 60"
	rc=$RC
	out=$OUT
	[ "$rc" = 4 ] && pass reclaim.stop-a-exit-4 "exit 4" || fail reclaim.stop-a-exit-4 "exit $rc: $(one "$out")"
	grep -q 'heartbeat changed at [0-9:]* (mounted on another host?): stopped after' <<<"$out" &&
		pass reclaim.stop-a-names-heartbeat "$(printf '%s' "$out" | grep -o 'heartbeat changed[^"]*' | head -n 1)" ||
		fail reclaim.stop-a-names-heartbeat "$(one "$out")"
	on b "dd if=$D bs=1M skip=90 count=1 iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1"
	same reclaim.stop-b-au-kept "$want" "$OUT" "AU 90 after a stopped"
	on a "rm -f /run/asmguard/reclaim/PAIRRC.json"
}
