#!/bin/sh
# pinguard: the pins guarded, not only watched (issue 31, point 4). With the
# daemon running over a labelled loop disk, root with bpffs mounted and
# CAP_SYS_ADMIN (bpftool) tries what a careless admin would: on the LSM and
# fmod_ret backends (the `bpf` security hook) getting asmguard's maps,
# programs and links by id, writing ag_majors and the device map through
# their pins, and detaching a link through its pin or by id are all refused;
# so is any fd onto its maps and programs (issue 41, point 3: agmapfd gets
# one from a pin, read-write or read-only, by id, or from the daemon with
# pidfd_getfd, then writes ag_majors with a socket-filter program of its own
# run by BPF_PROG_TEST_RUN: on main before it every one of those writes
# landed), reading a map through its pin included (the ids are read in a
# vacancy: the daemon stopped once), and no fd onto its links from their pins
# (aglinkrace: the dup2 race on BPF_LINK_DETACH/UPDATE, link_race below);
# `status` says "guarded" and
# "map fds: refused by the kernel". The
# daemon restarted (SIGTERM, then kill -9) re-adopts and guards again (the
# kernel frees the claim when the daemon exits); `filter disable` through the
# socket removes everything, and so does `make uninstall` (scripts/uninstall.sh)
# with the pins guarded. On the cgroup-device fallback `status` says
# "watched, not guarded" and "map fds: periodic check only", and a zeroed
# ag_majors word is put back within the daemon's 2 s check.
. /vmtests/lib.sh

C="asmguardctl --socket /run/asmguard/asmguard.sock"
PIN=/sys/fs/bpf/asmguard
EPERM="Operation not permitted"
command -v bpftool >/dev/null || { fail setup "bpftool missing from the guest"; vm_exit; }
L=$(new_loop 16 pg-disk)
[ -b "$L" ] || { fail setup "no loop device"; vm_exit; }
agd_config /tmp/pg.toml "${L#/dev/}"
: >/tmp/pg.log
agd_start /tmp/pg.toml /tmp/pg.log || { fail setup "asmguardd did not answer: $(tail -n 5 /tmp/pg.log)"; vm_exit; }
expect_ok label $C label PGDISK "$L"
DDW="bs=4096 count=1 conv=notrunc oflag=direct"

pins_word() { $C status --json 2>/dev/null | sed -n 's/.*"filter_pins": *"\([a-z]*\)".*/\1/p'; }
# the first key of a pinned map, as bpftool's hex words ("00 00 70 00")
first_key() {
	bpftool -j map getnext pinned "$1" 2>/dev/null | sed -n 's/.*"next_key":\[\([^]]*\)\].*/\1/p' |
		tr -d '"' | sed 's/0x//g; s/,/ /g'
}
map_id() { bpftool -j map show pinned "$PIN/maps/$1" 2>/dev/null | sed -n 's/^{"id":\([0-9]*\),.*/\1/p'; }
# a link's id and its program's, from one of the daemon's own link fds
# (bpftool's link show opens the program by id, which the guard refuses; the
# daemon also holds programs of its own object that no link runs)
link_fdinfo() { grep -l "^link_id:" /proc/$agd/fdinfo/* 2>/dev/null | head -n 1; }
fd_field() { [ -n "$2" ] && grep -h "^$1:" "$2" 2>/dev/null | head -n 1 | tr -dc 0-9; }
ZERO8="00 00 00 00 00 00 00 00"

# the ids and ag_blk's first key, read through the pins while no daemon holds
# the record (vacant: nothing refused); the maps outlive a restart, ids too
read_ids() {
	mid=$(map_id ag_majors)
	bid=$(map_id ag_blk)
	bkey=$(first_key $PIN/maps/ag_blk)
}
# the daemon's fd onto map id $1 (its fdinfo)
daemon_map_fd() { grep -l "^map_id:[[:space:]]*$1\$" /proc/$agd/fdinfo/* 2>/dev/null | head -n 1 | sed 's,.*/,,'; }

attacks() { # attacks ROUND: every attack refused, no fd onto the filter's objects
	r=$1
	# the companion's cgroup link is one a detach would take off
	link=$(ls $PIN/links | grep -E '^ag_kernel_open$|^ag_(fr_)?file_open$' | head -n 1)
	lf=$(link_fdinfo)
	lid=$(fd_field link_id "$lf")
	pid=$(fd_field prog_id "$lf")
	info "round $r: ag_majors id=$mid ag_blk id=$bid link $link id=$lid prog=$pid ag_blk key=$bkey"
	[ -n "$mid" ] && [ -n "$bid" ] && [ -n "$lid" ] && [ -n "$pid" ] && [ -n "$bkey" ] ||
		{ fail "ids.$r" "could not read the ids through the pins"; return; }
	# no fd onto the filter's maps for anyone else (issue 41, point 3): not
	# from a pin (read-write or read-only: a program loaded with either
	# writes the map), not by id, not taken from the daemon (pidfd_getfd)
	expect_fail "read-pinned-refused.$r" "$EPERM" bpftool map dump pinned $PIN/maps/ag_majors
	expect_fail "mapfd-pin-write.$r" "^GET pin FAIL 1 " agmapfd pin $PIN/maps/ag_majors write
	expect_fail "mapfd-pinro-write.$r" "^GET pinro FAIL 1 " agmapfd pinro $PIN/maps/ag_majors write
	expect_fail "mapfd-id-write.$r" "^GET id FAIL 1 " agmapfd id "$mid" write
	dfd=$(daemon_map_fd "$mid")
	if [ -n "$dfd" ]; then
		expect_fail "mapfd-pidfd-write.$r" "^GET pidfd FAIL 1 " agmapfd pidfd "$agd" "$dfd" write
	else
		fail "mapfd-pidfd-write.$r" "no fd of the daemon's holds map id $mid"
	fi
	expect_fail "progfd-id.$r" "^GET prog FAIL 1 " agmapfd prog "$pid"
	expect_fail "map-by-id.$r" "$EPERM" bpftool map dump id "$mid"
	expect_fail "prog-by-id.$r" "$EPERM" bpftool prog dump xlated id "$pid"
	expect_fail "link-by-id.$r" "$EPERM" bpftool link show id "$lid"
	# every filter program (ag_*) the daemon holds, attached or not (after a
	# restart the attached ones are the last daemon's, and its own load's run
	# nowhere); the daemon's other programs (the I/O latency tracer's) are
	# not the filter's
	opened="" others="" refused=0
	for p in $(grep -h '^prog_id:' /proc/$agd/fdinfo/* 2>/dev/null | tr -dc '0-9\n' | sort -un); do
		n=$(bpftool prog show id "$p" 2>/dev/null | sed -n 's/.* name \([^ ]*\).*/\1/p' | head -n 1)
		case $n in
		'') refused=$((refused + 1)) ;;
		ag_*) opened="$opened $p:$n" ;;
		*) others="$others $p:$n" ;;
		esac
	done
	holds "every-prog-by-id.$r" "$refused refused; filter programs opened by id:${opened:- none} (others:${others:- none})" \
		[ -z "$opened" -a "$refused" -gt 0 ]
	expect_fail "majors-zeroed.$r" "$EPERM" bpftool map update pinned $PIN/maps/ag_majors key 00 00 00 00 value $ZERO8
	expect_fail "devmap-delete.$r" "$EPERM" bpftool map delete pinned $PIN/maps/ag_blk key $bkey
	expect_fail "link-detach-pinned.$r" "$EPERM" bpftool link detach pinned "$PIN/links/$link"
	expect_fail "link-detach-id.$r" "$EPERM" bpftool link detach id "$lid"
	expect_fail "still-protected.$r" "$EPERM" dd if=/dev/zero of="$L" $DDW
	expect_fail "guardian-read-refused.$r" "$EPERM" bpftool map dump pinned $PIN/maps/ag_guardian
}

# The daemon's links as it holds them: id, program, cgroup (cgroup links) per line
links_state() {
	for f in $(grep -l "^link_id:" /proc/$agd/fdinfo/* 2>/dev/null); do
		grep -h "^link_id:\|^prog_id:\|^cgroup_id:" "$f" | tr -s ' \t\n' '  '
		echo
	done | sort
}
# The fd-table race (issue 41, point 3): BPF_OBJ_GET on a link's pin makes an
# fd with no bpf hook on the way, and the guardian judges BPF_LINK_DETACH and
# BPF_LINK_UPDATE from the caller's fd table before the command's own fdget:
# aglinkrace's second thread dup2()s the link's fd and /dev/null over the fd
# named. Before the pin's open was judged (inode_permission, guardian.h) the
# pins gave anyone an fd and, on 6.12, 19 of 745k detaches of ag_kernel_open
# (a cgroup-device link: the kernel has detach and update for those; the
# tracing links of lsm/, fmod_ret/ and tp_btf/ programs have neither) landed
# within 3 s. Now: every link pin refuses its fd; the cgroup link raced 3 s
# each way all the same (instant while the fd is refused; a race run again
# if it is not) lands nothing; the daemon's links unchanged (link, program,
# cgroup), the disk refused, its sha256 unchanged.
link_race() {
	before=$(links_state)
	b=$(sha "$L")
	for p in $PIN/links/*; do
		expect_fail "link-pin-refused.$(basename "$p")" "^GET FAIL 1 " aglinkrace detach "$p" 0
	done
	for p in $PIN/links/ag_kernel_open; do
		[ -e "$p" ] || { info "no cgroup link pinned"; continue; }
		for how in detach update; do
			out=$(aglinkrace $how "$p" 3 2>&1)
			rc=$?
			holds "link-race-$how.$(basename "$p")" "exit $rc: $(echo "$out" | tr '\n' ' ')" [ $rc = 0 -o $rc = 1 ]
		done
	done
	expect "link-race.links-unchanged" "$before" "$(links_state)"
	expect_fail "link-race.still-refused" "$EPERM" dd if=/dev/zero of="$L" $DDW
	expect "link-race.sha-unchanged" "$b" "$(sha "$L")"
}

# the hook's arguments on this kernel (the rule reads cmd and attr, the first
# two everywhere; newer kernels add `bool kernel` after size)
hook_fn=bpf_lsm_bpf
[ "$VM_BACKEND" = fmod_ret ] && hook_fn=security_bpf
proto=$(bpftool btf dump file /sys/kernel/btf/vmlinux 2>/dev/null | sed -n "s/.*FUNC '$hook_fn' type_id=\([0-9]*\).*/\1/p" | head -n 1)
[ -n "$proto" ] && info "$hook_fn: $(bpftool btf dump file /sys/kernel/btf/vmlinux 2>/dev/null | grep -A4 "^\[$proto\] FUNC_PROTO" | tr -s ' \n' '  ')"

if vm_full; then
	expect pins-guarded guarded "$(pins_word)" "$($C status 2>&1 | grep -i pins)"
	has_line map-fds-refused "^map fds: *refused by the kernel" "$($C status 2>&1)"
	# a vacancy to read the ids in (the daemon's SIGTERM; the record held
	# is held before it: guardian-held)
	has_line "guardian-held" "^GET pin FAIL 1 " "$(agmapfd pin $PIN/maps/ag_guardian 2>&1)"
	kill -TERM "$agd"
	wait "$agd" 2>/dev/null
	has_line "guardian-vacant" "\"tgid\": *0," "$(bpftool -j map dump pinned $PIN/maps/ag_guardian 2>&1)"
	read_ids
	agd_start /tmp/pg.toml /tmp/pg.log || fail "restart-ids" "$(tail -n 5 /tmp/pg.log)"
	attacks 1
	# a restart (SIGTERM) and a crash (kill -9): the next daemon claims and guards
	for how in TERM KILL; do
		kill -$how "$agd"
		wait "$agd" 2>/dev/null
		agd_start /tmp/pg.toml /tmp/pg.log || fail "restart-$how" "$(tail -n 5 /tmp/pg.log)"
		st=$($C status 2>&1)
		has_line "readopted-$how" "re-adopted" "$st" "$(echo "$st" | grep -i filter | head -n 3)"
		expect "pins-guarded-$how" guarded "$(pins_word)"
	done
	attacks 2
	link_race
	has_line "no-tamper-seen" "^protection: *protected" "$($C status 2>&1)"
else
	expect pins-watched watched "$(pins_word)" "$($C status 2>&1 | grep -i pins)"
	has_line pins-watched-text "watched, not guarded" "$($C status 2>&1)"
	has_line map-fds-periodic "^map fds: *periodic check only" "$($C status 2>&1)"
	expect_ok majors-zeroed bpftool map update pinned $PIN/maps/ag_majors key 00 00 00 00 value $ZERO8
	i=0
	while [ $i -lt 60 ] && ! grep -q "ERROR.*ag_majors" /tmp/pg.log; do i=$((i + 1)); sleep 0.1; done
	has_line majors-noticed "ERROR.*ag_majors" "$(cat /tmp/pg.log)" "after $i tenths of a second"
	expect_fail majors-put-back "$EPERM" dd if=/dev/zero of="$L" $DDW
fi

# the way out stays the daemon's: filter disable through the socket
expect_ok filter-disable $C filter disable
holds pins-gone "$(ls -R $PIN 2>&1 | head -n 3)" [ ! -e $PIN ]
# (past the label: the disk stays PGDISK for what follows)
expect_ok write-after-disable dd if=/dev/zero of="$L" $DDW seek=8

# make uninstall (scripts/uninstall.sh, as the package's) while the pins are
# guarded again: it disables the filter through the daemon, stops the service
# (here a systemctl that stops the lab's daemon, as `disable --now` would) and
# unlinks what is left; the disk is writable after it, nothing pinned
if vm_full; then
	expect_ok filter-enable $C filter enable
	expect pins-guarded-again guarded "$(pins_word)"
	expect_fail refused-again "$EPERM" dd if=/dev/zero of="$L" $DDW
	if [ -f /vmtests/uninstall.sh ] && command -v bash >/dev/null; then
		mkdir -p /tmp/pg-bin
		echo "$agd" >/tmp/pg.agd
		printf '#!/bin/sh\ncase "$*" in *disable*) kill "$(cat /tmp/pg.agd)" ;; esac\nexit 0\n' >/tmp/pg-bin/systemctl
		chmod 755 /tmp/pg-bin/systemctl
		ln -sf "$(command -v asmguardctl)" /usr/sbin/asmguardctl
		out=$(PATH=/tmp/pg-bin:$PATH bash /vmtests/uninstall.sh 2>&1)
		has_line uninstall-disables "write filter disabled through asmguardd" "$out"
		wait "$agd" 2>/dev/null
		holds uninstall-pins-gone "$(ls -R $PIN 2>&1 | head -n 3) :: $out" [ ! -e $PIN ]
		expect_ok write-after-uninstall dd if=/dev/zero of="$L" $DDW
	else
		fail uninstall-setup "no /vmtests/uninstall.sh or no bash in the guest"
	fi
fi
kill "$agd" 2>/dev/null; wait "$agd" 2>/dev/null
losetup -d "$L" 2>/dev/null
vm_exit
