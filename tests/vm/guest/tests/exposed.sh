#!/bin/sh
# exposed (issue 41, point 1): a shared-writable mapping of a managed disk
# made before the disk is protected (here: across `filter disable` and
# `enable`, as after a maintenance window) keeps writing: the kernel judges a
# mapping only when it is made. The daemon's 2-second check finds it: the
# disk is "exposed" (`status` exits 7 naming the pid and comm, `lsdsk`, an
# EXPOSED event) until the process is gone, and `status` exits 0 again within
# the check. A descriptor a user opened for writing in the same window
# (issue 41, point 3) is named in `status` too ("writer open since before
# protection"), without making the disk exposed: its write is refused
# (`file_permission` judges every write, whenever the fd was opened) and
# the disk unchanged. The same on every backend (the scan reads /proc): once
# per kernel.
# lab-settings: once-per-kernel
. /vmtests/lib.sh

C="asmguardctl --socket /run/asmguard/asmguard.sock"
L=$(new_loop 16 ex-disk)
[ -b "$L" ] || { fail setup "no loop device"; vm_exit; }
agd_config /tmp/ex.toml "${L#/dev/}"
: >/tmp/ex.log
agd_start /tmp/ex.toml /tmp/ex.log || { fail setup "asmguardd did not answer: $(tail -n 5 /tmp/ex.log)"; vm_exit; }
expect_ok label $C label EXDISK "$L"
expect_ok filter-disable $C filter disable
rm -f /tmp/exgo
ag-premap "$L" 1048576 /tmp/exgo >/tmp/ex.out 2>&1 &
pm=$!
wait_for_line /tmp/ex.out '^mapped' 10 || fail setup "ag-premap did not map: $(cat /tmp/ex.out)"
# a user's descriptor open for writing across the window: it writes once told
rm -f /tmp/exwgo
# shellcheck disable=SC2016
as_user_past_modes nobody sh -c 'exec 5<>"$0"; echo "opened $$"
	while [ ! -e /tmp/exwgo ]; do sleep 0.1; done
	if r=$(dd if=/dev/urandom bs=4096 count=1 seek=300 conv=notrunc 2>&1 >&5); then
		echo "wrote OK"; else echo "refused: $r"; fi' "$L" >/tmp/exw.out 2>&1 &
pwj=$!
wait_for_line /tmp/exw.out '^opened' 10 || fail setup "the writer did not open: $(cat /tmp/exw.out)"
pw=$(sed -n 's/^opened //p' /tmp/exw.out) # the shell holding fd 5 (the job is its parent)
blk300() { dd if="$L" bs=4096 skip=300 count=1 2>/dev/null | sha256sum | cut -d' ' -f1; }
before=$(blk300)
expect_ok filter-enable $C filter enable

# exposed within the check (2 s, a little slack)
i=0
while [ $i -lt 60 ]; do
	out=$($C status 2>&1); rc=$?
	[ $rc -ne 0 ] && break
	i=$((i + 1)); sleep 0.1
done
expect status-exits-7 7 "$rc" "$out"
has_line status-names-pid "exposed: EXDISK mapped shared-writable by pid $pm (ag-premap) since before protection" "$out"
has_line lsdsk-exposed "EXDISK.*exposed" "$($C lsdsk 2>&1)"
has_line event-exposed "EXPOSED label=EXDISK .*pid=$pm" "$($C events 2>&1)"

# what no hook can take back: the store through the old mapping lands
touch /tmp/exgo
wait "$pm"
has_line old-mapping-writes "^wrote OK" "$(cat /tmp/ex.out)"
holds written "the old mapping wrote the protected disk" \
	sh -c "dd if='$L' bs=4096 skip=256 count=1 2>/dev/null | grep -q CORRUPTION"

# the process is gone: no longer exposed within the check
i=0
while [ $i -lt 60 ]; do
	out=$($C status 2>&1); rc=$?
	[ $rc -eq 0 ] && break
	i=$((i + 1)); sleep 0.1
done
expect status-clears 0 "$rc" "$out"
has_line event-ended "EXPOSURE ENDED label=EXDISK .*pid=$pm" "$($C events 2>&1)"

# the pre-opened descriptor: named (exit 0: its writes are refused), refused
has_line status-names-writer "EXDISK writer open since before protection: pid $pw (sh)" "$out"
touch /tmp/exwgo
wait "$pwj"
has_line old-fd-refused "^refused: .*Operation not permitted" "$(cat /tmp/exw.out)"
expect old-fd-unchanged "$before" "$(blk300)"
i=0
while [ $i -lt 60 ]; do
	out=$($C status 2>&1)
	echo "$out" | grep -q "writer open since" || break
	i=$((i + 1)); sleep 0.1
done
holds writer-gone "writer line once it exited: $(echo "$out" | grep -m 1 'writer open since')" \
	[ -z "$(echo "$out" | grep 'writer open since')" ]

$C filter disable >/dev/null 2>&1
kill "$agd" 2>/dev/null
wait "$agd" 2>/dev/null
losetup -d "$L" 2>/dev/null
vm_exit
