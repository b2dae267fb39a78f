#!/bin/sh
# exposed (issue 41, point 1): a shared-writable mapping of a managed disk
# made before the disk is protected (here: across `filter disable` and
# `enable`, as after a maintenance window) keeps writing: the kernel judges a
# mapping only when it is made. The daemon's 2-second check finds it: the
# disk is "exposed" (`status` exits 7 naming the pid and comm, `lsdsk`, an
# EXPOSED event) until the process is gone, and `status` exits 0 again within
# the check. The same on every backend (the scan reads /proc): once per kernel.
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

$C filter disable >/dev/null 2>&1
kill "$agd" 2>/dev/null
wait "$agd" 2>/dev/null
losetup -d "$L" 2>/dev/null
vm_exit
