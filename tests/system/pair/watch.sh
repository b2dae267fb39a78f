# shellcheck shell=bash
# tests/system/pair/watch.sh - a label made on node a reaches node b with no command:
# label, rename, unlabel followed within 5 s, b's link, b's filter and both nodes'
# writes on the one disk (vda).
# A two-node test (tests/system/pair.sh runs it): sourced by the
# host's driver, it runs commands on the nodes (on NODE CMD, send/recv) and reports
# through the labs' result contract (pass, fail, ok, refused, same, within5).

# pair_watch_run: the test.
pair_watch_run() {
	D=/dev/vda
	on b "dd if=/dev/zero of=$D bs=4096 count=1 seek=2 conv=notrunc oflag=direct 2>&1"
	ok watch.b-root-writes-before-label "root on b writes the unlabelled shared disk (zeros: the label's data check stays quiet)"
	# what predates protection on b: a loop device root set up over the disk
	# before a labels it; once b protects the disk, the loop device's writes are
	# judged as the disk's, and b's status names it
	on b "head -c 4096 /dev/zero | tr '\\0' H >/tmp/blk.H; chmod 644 /tmp/blk.H; rm -f /tmp/hold.stop; bg hold as_user_past_modes intruder sh -c 'exec 3<>$D; while [ ! -e /tmp/hold.stop ]; do sleep 0.1; done; dd if=/tmp/blk.H bs=4096 count=1 seek=4 conv=notrunc >&3'"
	on b "losetup -f --show $D"
	ok watch.b-loop-before-label
	LB=$OUT
	on b "bg follow follow appear PAIRW1 $D 30"
	on a "$C label PAIRW1 $D"
	ok watch.a-label
	on b "bg_wait follow 40"
	within5 watch.b-lists-label-within-5s
	on b "write_as_past_modes intruder $LB 3 L"
	refused watch.b-loop-before-label-denied "Operation not permitted"
	on b "i=0; until $C status | grep -q '${LB#/dev/} over PAIRW1'; do i=\$((i+1)); [ \$i -lt 50 ] || break; sleep 0.1; done; $C status | grep '^ *loop:'; losetup -d $LB"
	same watch.b-status-names-loop "loop: ${LB#/dev/} over PAIRW1 (backing file $D), set up before protection: its writes are judged as the disk's" "$(echo "$OUT" | sed 's/^ *//; s/  */ /g')"
	on b "i=0; until $C status | grep -q '(sh) fd 3 on $D'; do i=\$((i+1)); [ \$i -lt 30 ] || break; sleep 0.1; done; $C status | grep 'writer open since before protection'; touch /tmp/hold.stop; bg_wait hold 10"
	same watch.b-status-names-writer yes "$(grep -q "PAIRW1 writer open since before protection: pid [0-9]* (sh) fd 3 on $D" <<<"$OUT" && echo yes)" "$OUT"
	refused watch.b-writer-before-label-denied "Operation not permitted"
	on b "link_of PAIRW1 10"
	same watch.b-link-owner-mode "$D grid:asmadmin 660" "$OUT" "udevd on b linked it after the daemon's change event: $OUT"
	on b "write_as root $D 2 R"
	refused watch.b-root-denied "Operation not permitted"
	on b "write_as_past_modes intruder $D 2 I"
	refused watch.b-intruder-denied "Operation not permitted"
	on a "write_as grid /dev/asmguard/disks/PAIRW1 16 A"
	ok watch.a-grid-writes
	on b "write_as grid /dev/asmguard/disks/PAIRW1 17 B"
	ok watch.b-grid-writes
	on b "block_char $D 16"
	same watch.b-reads-a-block A "$OUT" "b reads a's block 16 as '$OUT' (one disk)"
	on a "block_char $D 17; echo; block_char $D 2; block_char $D 3; block_char $D 4"
	same watch.a-reads-b-block-and-no-denied-write B "$OUT" "a reads b's grid block 17, and blocks 2 to 4 as zeros (no refused write landed: root's, the loop's, the old descriptor's)"

	on b "bg follow follow appear PAIRW2 $D 30"
	on a "$C rename PAIRW1 PAIRW2"
	ok watch.a-rename
	on b "bg_wait follow 40"
	within5 watch.b-follows-rename-within-5s
	on b "named PAIRW1 && echo 'PAIRW1 still listed'; link_of PAIRW2 10; [ -e /dev/asmguard/disks/PAIRW1 ] && echo 'old link kept'"
	same watch.b-rename-link "$D grid:asmadmin 660" "$OUT"
	on b "write_as root $D 2 R"
	refused watch.b-root-denied-after-rename "Operation not permitted"

	on b "bg follow follow gone PAIRW2 $D 30"
	on a "$C unlabel PAIRW2"
	ok watch.a-unlabel
	on b "bg_wait follow 40"
	within5 watch.b-releases-within-5s
	on b "i=0; while [ -e /dev/asmguard/disks/PAIRW2 ] && [ \$i -lt 100 ]; do i=\$((i+1)); sleep 0.1; done; [ ! -e /dev/asmguard/disks/PAIRW2 ] || { echo 'link kept'; exit 1; }; write_as root $D 2 R"
	ok watch.b-released "no link, root writes again on b: $OUT"
}
