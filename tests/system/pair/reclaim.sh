# shellcheck shell=bash
# tests/system/pair/reclaim.sh - reclaim across hosts: a refuses while b's stand-in ASM
# heartbeats on the SYNTHETIC disk group (vde), proceeds once it stops; the kept AUs
# unchanged, b reads the freed AUs as zeros.
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
	on a "asmguard-synth-asm hash $D --aus 96 --allocated $RC_ALLOC"
	h0=$OUT
	on a "$C reclaim --diskgroup PAIRDG --watch 3 --json 2>/tmp/rc.progress | grep -o '\"reclaimed_bytes\": *[0-9]*' | grep -o '[0-9]*\$' | head -n 1" 180
	same reclaim.a-proceeds-after-b-stops "$RC_FREE" "$OUT" "reclaimed bytes (free AUs $RC_FREE)"
	on a "asmguard-synth-asm hash $D --aus 96 --allocated $RC_ALLOC"
	same reclaim.kept-aus-unchanged "$h0" "$OUT"
	on b "dd if=$D bs=1M skip=21 count=1 iflag=direct 2>/dev/null | tr -d '\0' | wc -c"
	same reclaim.b-reads-freed-au-as-zeros 0 "$OUT" "non-zero bytes b reads in AU 21 (free, reclaimed by a)"
}
