#!/bin/sh
# homes: Oracle's own binaries write, run by their home's owner (issue 29).
# With no user or group allowed ([filter] allow_users = [], allow_groups = [])
# and oracle_homes = ["/u01/app/19c/grid"], a fake Grid home (registered in
# /etc/oratab and /etc/oracle/olr.loc, crs_home) whose bin/oracle and
# bin/ocssd.bin are the ASM stand-in ag-asm-writer (oracle setuid/setgid
# grid:asmadmin, mode 6751, like the real one):
# - the stand-in run as grid writes, and so does ocssd.bin (its voting-file
#   area); grid's own dd is refused;
# - `strace -p` of a running stand-in (the lab's ptrace stand-in without
#   strace) costs it no write;
# - a relinked oracle (a new inode moved over the path) writes within 1 s,
#   and the running one, whose executable is the old inode, keeps writing;
# - intruder running the stand-in under ptrace (the kernel applies no set-id
#   bits to a traced exec; the binary is not readable by others, so the
#   injection uses registers only: ag-ptrace-write --image) is refused;
# - with oracle_homes = "auto", the Grid home is found from olr.loc, and a new
#   database home (owner oracle) added to oratab writes within 1 s.
# - root's crsd.bin writes no more once another task traced it, took an fd
#   from it (pidfd_getfd) or wrote its /proc/PID/mem (agmem; readers of its
#   mem, stack and maps cost it nothing).
# On main before issue 29, the daemon knows no oracle_homes: every check fails.
. /vmtests/lib.sh

C="asmguardctl --socket /run/asmguard/asmguard.sock"
EPERM="Operation not permitted"
LOG=/tmp/homes.log
GH=/u01/app/19c/grid
DH=/u01/app/oracle/product/19c/dbhome_2
W=/usr/local/bin/ag-asm-writer
[ ! -e /sys/fs/bpf/asmguard ] || { fail setup "a filter is pinned from an earlier test"; vm_exit; }

# ---- the Grid home and its registration ------------------------------------------------
rm -rf /u01 && mkdir -p $GH/bin /etc/oracle
cp $W $GH/bin/oracle && cp $W $GH/bin/ocssd.bin && cp $W $GH/bin/crsd.bin
# (chown clears the set-id bits: the modes last; crsd.bin is root's, as CRS
# installs it)
chown -R grid:oinstall /u01 && chgrp asmadmin $GH/bin/oracle && chown root $GH/bin/crsd.bin
chmod 6751 $GH/bin/oracle && chmod 751 $GH/bin/ocssd.bin $GH/bin/crsd.bin
info "oracle: $(stat -c '%U:%G %a' $GH/bin/oracle)"
[ -e /etc/oratab ] && cp /etc/oratab /tmp/homes.oratab.saved
printf '# written by the lab\n+ASM1:%s:N\n' $GH >/etc/oratab
printf 'olrconfig_loc=%s/cdata/asmguard-vm.olr\ncrs_home=%s\n' $GH $GH >/etc/oracle/olr.loc

# cleanup: the daemon stopped, its filter state, the loop disk, the homes gone
cleanup() {
	$C unlabel HOMES >/dev/null 2>&1
	$C filter disable >/dev/null 2>&1
	kill "$agd" 2>/dev/null
	wait "$agd" 2>/dev/null
	rm -f /run/asmguard/filter.state
	losetup -d "$D" 2>/dev/null
	rm -rf /u01 /etc/oracle
	if [ -e /tmp/homes.oratab.saved ]; then mv /tmp/homes.oratab.saved /etc/oratab; else rm -f /etc/oratab; fi
}

D=$(new_loop 8 homes) || { fail setup "losetup: $D"; vm_exit; }
chmod 666 "$D" # the filter, not the mode bits, decides
agd_config /tmp/homes.toml "${D#/dev/}" 'filter.allow_users=[]' 'filter.allow_groups=[]' \
	"filter.oracle_homes=[\"$GH\"]"
: >$LOG
if ! agd_start /tmp/homes.toml $LOG; then
	fail setup "asmguardd did not start with oracle_homes: $(grep -v '^$' $LOG | tail -n 2)"
	cleanup
	vm_exit
fi
expect_ok label $C label HOMES "$D"
info "status: $($C status 2>&1 | grep -i -E 'home|oracle' | head -n 3)"
# status, lsdsk --json name the homes and binaries allowed
st=$($C status 2>&1)
case $st in
*"oracle homes: uid 54331 AND executable $GH/bin/oracle"*) pass status-names-the-rule "$(echo "$st" | grep -m1 'who may write')" ;;
*) fail status-names-the-rule "$(echo "$st" | grep -i -E 'who may write|oracle homes')" ;;
esac
js=$($C lsdsk --json 2>&1)
case $js in
*'"oracle_homes"'*'"path": "'"$GH/bin/oracle"'"'*'"kind": "grid"'*'"path": "'"$GH"'"'*) pass lsdsk-json-names-the-home "$(echo "$js" | tr -d '\n' | grep -o '"oracle_homes": *\[.*\]' | head -c 300)" ;;
*) fail lsdsk-json-names-the-home "$(echo "$js" | head -c 300)" ;;
esac

M=$((1024 * 1024))
expect_ok standin-writes as_user grid $GH/bin/oracle "$D" $((M + 4096))
expect_ok ocssd-writes as_user grid $GH/bin/ocssd.bin "$D" $((2 * M)) 4
expect_fail grid-dd-refused "$EPERM" as_user grid dd if=/dev/zero of="$D" bs=4096 count=1 seek=600 conv=notrunc

# ---- a running stand-in, traced and relinked -----------------------------------------------
as_user grid $GH/bin/oracle "$D" $((3 * M)) --loop >/tmp/homes.loop 2>&1 &
loop=$!
# oks N: the running stand-in's successful writes so far
oks() { grep -c ' ok$' /tmp/homes.loop; }
fails() { grep -c FAIL /tmp/homes.loop; }
wait_for_line /tmp/homes.loop '^write 2 ' 20
pid=$(sed -n 's/^open ok pid //p' /tmp/homes.loop)
expect loop-writes "0 fail" "$(fails) fail" "$(head -n 3 /tmp/homes.loop | tr '\n' ' ')"
o0=$(oks)
if command -v strace >/dev/null; then
	tracer="strace -p $pid -o /tmp/homes.strace"
	timeout -s INT 3 strace -p "$pid" -o /tmp/homes.strace >/dev/null 2>&1
else
	tracer="ag-ptrace-write --seize $pid 3"
	ag-ptrace-write --seize "$pid" 3 >/tmp/homes.strace 2>&1
fi
sleep 0.5
o1=$(oks)
holds traced-keeps-writing "$tracer: $((o1 - o0)) writes while traced, $(fails) failed: $(grep FAIL /tmp/homes.loop | head -n 1)" \
	[ $((o1 - o0)) -ge 3 -a "$(fails)" = 0 ]

# relink: a new inode at the same path, as `relink` and opatch leave it
cp -p $GH/bin/oracle $GH/bin/oracle.new && mv $GH/bin/oracle.new $GH/bin/oracle
info "relinked: inode $(stat -c %i $GH/bin/oracle) $(stat -c '%U:%G %a' $GH/bin/oracle)"
sleep 1
expect_ok relinked-writes-within-1s as_user grid $GH/bin/oracle "$D" $((M + 8192))
o2=$(oks)
sleep 1
o3=$(oks)
holds running-old-inode-keeps-writing "$((o3 - o2)) writes in the second after the relink, $(fails) failed" \
	[ $((o3 - o2)) -ge 3 -a "$(fails)" = 0 ]
kill "$pid" "$loop" 2>/dev/null
wait "$loop" 2>/dev/null

# ---- intruder borrows the binary under ptrace --------------------------------------------
b=$(sha "$D")
expect_fail intruder-ptrace-refused "write refused" as_user intruder /usr/local/bin/ag-ptrace-write \
	--image $W $GH/bin/oracle "$D" $((M + 12288))
expect intruder-ptrace.sha-unchanged "$b" "$(sha "$D")"

# ---- crsd.bin ("uid 0 AND crsd.bin", issue 41 point 4): root's crsd.bin writes; --------
# under another task's ptrace (root's own, injecting) or once another task took
# an fd from it (pidfd_getfd) it writes no more
expect_ok crsd-writes $GH/bin/crsd.bin "$D" $((4 * M))
b=$(sha "$D")
expect_fail crsd-ptrace-refused "write refused" ag-ptrace-write $GH/bin/crsd.bin "$D" $((4 * M + 4096))
expect crsd-ptrace.sha-unchanged "$b" "$(sha "$D")"
# crsd_writes CHECK WHAT refused|free: the writes the looping crsd.bin logs in
# 0.6 s after WHAT: refused (at most one lands, three or more refused in all)
# or free (three or more land, none refused)
crsd_writes() {
	local n0 n1 n fails
	n0=$(grep -c ' ok$' /tmp/homes.crsd)
	sleep 0.6
	n1=$(grep -c ' ok$' /tmp/homes.crsd)
	n=$((n1 - n0)) fails=$(grep -c FAIL /tmp/homes.crsd)
	if [ "$3" = refused ]; then
		holds "$1" "$n writes after $2, $fails refused: $(grep -m 1 FAIL /tmp/homes.crsd)" [ $n -le 1 -a "$fails" -ge 3 ]
	else
		holds "$1" "$n writes after $2, $fails refused: $(grep -m 1 FAIL /tmp/homes.crsd)" [ $n -ge 3 -a "$fails" = 0 ]
	fi
}
$GH/bin/crsd.bin "$D" $((5 * M)) --loop >/tmp/homes.crsd 2>&1 &
crsd=$!
wait_for_line /tmp/homes.crsd '^write 2 ' 20
expect crsd-loop-writes "0 fail" "$(grep -c FAIL /tmp/homes.crsd) fail" "$(head -n 2 /tmp/homes.crsd | tr '\n' ' ')"
has_line crsd-fd-taken "^GET pidfd OK" "$(agmapfd pidfd "$crsd" 1 2>&1)"
crsd_writes crsd-after-pidfd-getfd-refused "the fd was taken" refused
kill "$crsd" 2>/dev/null
wait "$crsd" 2>/dev/null

# ---- crsd.bin's memory written through /proc/PID/mem (issue 41, point 4) ----------------
# /proc/PID/mem is opened with the opener's fs credentials (PTRACE_MODE_FSCREDS,
# as /proc/PID/stack is read): the attach record above does not see it. Its
# readers (mem read-only, stack, maps) cost crsd.bin nothing; once root opened
# its mem for writing and wrote a byte, it writes no more
if vm_full; then
	$GH/bin/crsd.bin "$D" $((6 * M)) --loop >/tmp/homes.crsd 2>&1 &
	crsd=$!
	wait_for_line /tmp/homes.crsd '^write 2 ' 20
	has_line crsd-mem-read "^MEM read OK" "$(agmem read "$crsd" 2>&1)"
	cat /proc/$crsd/stack /proc/$crsd/maps /proc/$crsd/status >/dev/null 2>&1
	crsd_writes crsd-readers-cost-nothing "the readers" free
	has_line crsd-mem-written "^MEM write OK" "$(agmem write "$crsd" 2>&1)"
	crsd_writes crsd-after-mem-write-refused "the mem write" refused
	kill "$crsd" 2>/dev/null
	wait "$crsd" 2>/dev/null
else
	na crsd-mem "$VM_FALLBACK_WHY"
fi

kill "$agd"
wait "$agd" 2>/dev/null
agd_config /tmp/homes-auto.toml "${D#/dev/}" 'filter.allow_users=[]' 'filter.allow_groups=[]' \
	'filter.oracle_homes="auto"'
if agd_start /tmp/homes-auto.toml $LOG; then
	expect_ok auto.grid-home-writes as_user grid $GH/bin/oracle "$D" $((M + 16384))
	mkdir -p $DH/bin && cp $W $DH/bin/oracle && chown -R oracle:oinstall /u01/app/oracle &&
		chgrp asmadmin $DH/bin/oracle && chmod 6751 $DH/bin/oracle
	expect_fail auto.unregistered-home-refused "FAIL" as_user oracle $DH/bin/oracle "$D" $((M + 20480))
	printf 'ORCL2:%s:N\n' $DH >>/etc/oratab
	sleep 1
	expect_ok auto.new-home-writes-within-1s as_user oracle $DH/bin/oracle "$D" $((M + 20480))
else
	fail auto.setup "asmguardd did not start with oracle_homes = \"auto\": $(tail -n 2 $LOG)"
fi

cleanup
vm_exit
