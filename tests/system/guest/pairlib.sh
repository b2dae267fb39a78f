# shellcheck shell=sh
# asmguard system lab, two-node mode: helpers the host's commands use on each node
# (". /vmtests/pairlib.sh; ..."; tests/system/pair.sh drives them). The shared disks
# are namespaces of the node's NVMe controller whose backing files both guests
# attach: the same disk has the same name on both nodes.

. /vmtests/lib.sh
. /vmtests/syslib.sh

# now_ms: milliseconds of this node's clock.
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# raw_label DEV: bytes 32-63 of block 0 as this node reads them from the disk
# (O_DIRECT, never its page cache), NULs dropped: "ORCLDISKDATA1", "" when blank.
raw_label() {
	dd if="$1" bs=4096 count=1 iflag=direct 2>/dev/null | dd bs=1 skip=32 count=32 2>/dev/null | tr -d '\0'
}

# listed LABEL: the daemon lists LABEL in enforce ("LABEL" or "LABEL CONFLICT").
listed() { $C lsdsk 2>/dev/null | grep -q "^$1\( CONFLICT\)\? \+enforce"; }
# named LABEL: the daemon lists LABEL at all.
named() { $C lsdsk 2>/dev/null | grep -q "^$1 "; }

# follow appear|gone LABEL DEV SECONDS: waits until this node reads LABEL in DEV's
# block 0 (gone: no longer), then until its daemon lists it in enforce (gone: no
# longer lists it). Prints "ok MS" (MS: from the disk showing the change to the
# daemon listing it) or why it gave up (exit 1).
follow() {
	_end=$(($(now_ms) + $4 * 1000))
	while :; do
		case $1:$(raw_label "$3") in
		appear:ORCLDISK"$2") break ;;
		gone:*ORCLDISK"$2") ;;
		gone:*) break ;;
		esac
		[ "$(now_ms)" -lt $_end ] || { echo "the disk did not show the change within $4 s: '$(raw_label "$3")'"; return 1; }
		sleep 0.05
	done
	_raw=$(now_ms)
	_end=$((_raw + $4 * 1000))
	while :; do
		if [ "$1" = appear ]; then listed "$2" && break; else named "$2" || break; fi
		[ "$(now_ms)" -lt $_end ] || { echo "the daemon did not follow within $4 s: $($C lsdsk 2>&1 | tr '\n' ' ')"; return 1; }
		sleep 0.05
	done
	echo "ok $(($(now_ms) - _raw))"
}

# bg NAME CMD...: runs CMD in the background, its output in /tmp/NAME.out and its
# exit status in /tmp/NAME.rc when it ends.
bg() {
	_n=$1; shift
	rm -f "/tmp/$_n.rc" "/tmp/$_n.out"
	(
		"$@" >"/tmp/$_n.out" 2>&1
		echo $? >"/tmp/$_n.rc"
	) </dev/null >/dev/null 2>&1 &
}

# bg_wait NAME SECONDS: waits for bg NAME to end; prints its output, returns its status.
bg_wait() {
	_i=0
	while [ ! -s "/tmp/$1.rc" ] && [ $_i -lt $(($2 * 10)) ]; do _i=$((_i + 1)); sleep 0.1; done
	cat "/tmp/$1.out" 2>/dev/null
	[ -s "/tmp/$1.rc" ] || { echo "(still running after $2 s)"; return 124; }
	return "$(cat "/tmp/$1.rc")"
}

# link_of LABEL SECONDS: waits for udevd's /dev/asmguard/disks/LABEL; prints
# "TARGET OWNER:GROUP MODE" of the node it leads to.
link_of() {
	sys_wait_link "$1" $(($2 * 10)) || { echo "no /dev/asmguard/disks/$1 after $2 s: $(ls /dev/asmguard/disks 2>&1 | tr '\n' ' ')"; return 1; }
	stat -L -c '%N' "/dev/asmguard/disks/$1" >/dev/null
	echo "$(readlink -f "/dev/asmguard/disks/$1") $(stat -L -c '%U:%G %a' "/dev/asmguard/disks/$1")"
}

# write_as USER DEV BLOCK CHAR: USER writes 4 KiB of CHAR at 4 KiB block BLOCK of DEV
# (O_DIRECT); prints dd's error when refused.
write_as() {
	head -c 4096 /dev/zero | tr '\0' "$4" >"/tmp/blk.$4"
	chmod 0644 "/tmp/blk.$4"
	if [ "$1" = root ]; then
		dd if="/tmp/blk.$4" of="$2" bs=4096 count=1 seek="$3" conv=notrunc oflag=direct 2>&1
	else
		as_user "$1" dd if="/tmp/blk.$4" of="$2" bs=4096 count=1 seek="$3" conv=notrunc oflag=direct 2>&1
	fi
}

# write_as_past_modes USER DEV BLOCK CHAR: write_as past DEV's mode bits (lib.sh's
# VM_PAST_MODES: udevd sets them back on the daemon's change events): for a check that
# means the filter's refusal.
write_as_past_modes() {
	head -c 4096 /dev/zero | tr '\0' "$4" >"/tmp/blk.$4"
	chmod 0644 "/tmp/blk.$4"
	as_user_past_modes "$1" dd if="/tmp/blk.$4" of="$2" bs=4096 count=1 seek="$3" conv=notrunc oflag=direct 2>&1
}

# block_char DEV BLOCK: the distinct bytes of 4 KiB block BLOCK (O_DIRECT), e.g. "A".
block_char() {
	dd if="$1" bs=4096 count=1 skip="$2" iflag=direct 2>/dev/null | tr -d '\0' | fold -w1 | sort -u | tr -d '\n'
}

# standin_start DEV: what ASM does to a mounted disk group's disk, as grid: holds DEV
# open read-write and rewrites the heartbeat block (the last 4 KiB block of AU 1,
# 1 MiB AUs: byte 2 MiB - 4096) every 2 s until standin_stop.
standin_start() {
	rm -f /tmp/standin.stop /tmp/standin.beats
	: >/tmp/standin.beats
	chmod 0666 /tmp/standin.beats
	bg standin as_user grid sh -c '
		exec 3<>"$1"
		n=0
		while [ ! -e /tmp/standin.stop ]; do
			n=$((n + 1))
			{ printf "heartbeat %s %s" "$(hostname)" "$n"; head -c 4096 /dev/zero; } |
				dd of="$1" bs=4096 count=1 seek=511 iflag=fullblock oflag=direct conv=notrunc 2>/dev/null &&
				echo "$n" >>/tmp/standin.beats
			sleep 2
		done' standin "$1"
}

# standin_stop: stops it; prints how many heartbeats it wrote.
standin_stop() {
	touch /tmp/standin.stop
	bg_wait standin 10 >/dev/null
	wc -l </tmp/standin.beats
}

# label_when_seen SEEN DEV NEW: waits (60 s at most) until DEV's block 0 carries
# label SEEN, then labels DEV NEW at once, with --force (another node's label is on it).
label_when_seen() {
	_end=$(($(now_ms) + 60000))
	until [ "$(raw_label "$2")" = "ORCLDISK$1" ]; do
		[ "$(now_ms)" -lt $_end ] || { echo "never saw $1 on $2"; return 1; }
		sleep 0.02
	done
	$C label "$3" "$2" --force
}

PROM=http://127.0.0.1:9090/api/v1
# promq QUERY: "INSTANCE VALUE" of each series QUERY gives (Prometheus on this node).
promq() {
	curl -fsG "$PROM/query" --data-urlencode "query=$1" | sed 's/},{"metric"/}\n{"metric"/g' |
		sed -n 's/.*"instance":"\([^"]*\)".*"value":\[[0-9.]*,"\([^"]*\)"\].*/\1 \2/p' | sort
}
# prom_up: how many scrape targets are up.
prom_up() { curl -fs "$PROM/targets" | grep -o '"health":"up"' | wc -l; }
# prom_alerts NAME: "INSTANCE STATE" of each alert NAME in /api/v1/alerts.
prom_alerts() {
	curl -fs "$PROM/alerts" | sed 's/},{"labels"/}\n{"labels"/g' | grep "\"alertname\":\"$1\"" |
		sed -n 's/.*"instance":"\([^"]*\)".*"state":"\([a-z]*\)".*/\1 \2/p' | sort
}
# until_true SECONDS CMD...: runs CMD every 0.2 s until it succeeds (status 1 after SECONDS).
until_true() {
	_end=$(($(now_ms) + $1 * 1000))
	shift
	until "$@"; do
		[ "$(now_ms)" -lt $_end ] || return 1
		sleep 0.2
	done
}
prom_up_is() { [ "$(prom_up)" = "$1" ]; }
# prom_series_is QUERY N: QUERY gives N series.
prom_series_is() { [ "$(promq "$1" | wc -l)" = "$2" ]; }
alert_firing() { prom_alerts "$1" | grep -q firing; }
alert_gone() { [ -z "$(prom_alerts "$1")" ]; }
# journal_has TEXT: the daemon's journal has a line with TEXT.
journal_has() { journalctl -u asmguard -o cat | grep -q -- "$1"; }
