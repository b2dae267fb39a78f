#!/bin/sh
# coexist: asmguard beside another filter on the same kernel functions (a second
# instance under another pin directory stands in for another security tool on the
# same LSM or fmod_ret hooks). Each filter keeps its own verdicts: a refusal by either
# stands, in whichever order the kernel runs them, and neither turns the other's
# refusal into an allow; `status` names the other filter's programs; unloading the
# other one leaves asmguard's protection as it was.
. /vmtests/lib.sh

G=/usr/local/bin/asmguard-guard-test
P2=/sys/fs/bpf/asmguard-other
C="asmguardctl --socket /run/asmguard/asmguard.sock"
DDW="bs=4096 count=1 conv=notrunc"
dd if=/dev/zero bs=4096 count=1 2>/dev/null | tr '\0' 'X' >/tmp/junk

if ! vm_full; then
	na coexist "$VM_FALLBACK_WHY: no programs on the security functions to share"
	vm_exit
fi
A=$(new_loop 8 co-a) && B=$(new_loop 8 co-b) || { fail setup "losetup"; vm_exit; }
chmod 666 "$A" "$B" # the filters, not the mode bits, decide

# asmguardd manages A (grid allowed)
agd_config /tmp/co.toml "${A#/dev/}"
agd_start /tmp/co.toml /tmp/co.log || { fail daemon "$(tail -n 5 /tmp/co.log)"; vm_exit; }
expect_ok label $C label CO1 "$A"
st=$($C status 2>&1)
has_line alone-no-others "^other programs: *none on the filter's kernel functions" "$st"

# the other filter enforces A and B with its own allow-list: root only
out=$($G load --pin-dir $P2 --backend $VM_BACKEND --uid 0 --id 5 "$A" 2>&1)
has_line other-loads "backend=$VM_BACKEND" "$out"
expect_ok other-adds-b $G load --pin-dir $P2 --id 6 "$B"
# A: asmguard refuses root, the other refuses grid; B: only the other filters it
expect_fail root-refused-by-asmguard "Operation not permitted" dd if=/tmp/junk of="$A" $DDW
expect_fail grid-refused-by-other "Operation not permitted" as_user_past_modes grid dd if=/tmp/junk of="$A" $DDW
expect_fail intruder-refused-by-both "Operation not permitted" as_user_past_modes intruder dd if=/tmp/junk of="$A" $DDW
expect_ok root-allowed-by-other dd if=/tmp/junk of="$B" $DDW
expect_fail grid-refused-by-other-on-b "Operation not permitted" as_user_past_modes grid dd if=/tmp/junk of="$B" $DDW

# status names the other filter's programs, on asmguard's hooks
# (kernels before 5.13 do not report a link's target: there, any other LSM or
# fmod_ret program, "on a security function")
kmaj=$(echo "$VM_KVER" | cut -d. -f1) kmin=$(echo "$VM_KVER" | cut -d. -f2)
on="on file_open"
[ "$kmaj" -gt 5 ] || [ "$kmin" -ge 13 ] || on="on a security function"
others=$($C status 2>&1 | grep '^other programs:')
has_line status-names-others "(id [0-9]*) $on.*(the first refusal on a function wins)" "$others"
jothers=$($C status --json 2>&1 | tr -d '\n' | grep -o '"filter_other_programs": *\[[^]]*\]')
# (asmguardctl's JSON has each object's keys in alphabetical order)
jon='"hook": *"file_open"'
[ "$kmaj" -gt 5 ] || [ "$kmin" -ge 13 ] || jon='"hook": *null'
has_line status-json-others "$jon"', *"id": *[0-9]*, *"name": *"[a-z_]*"' "$jothers"

# the other filter gone: asmguard's verdicts as before (grid writes A, root does not)
expect_ok other-unloads $G unload --pin-dir $P2
# (past the label's block: a write over the header is grid's right, but the
# daemon's label watch then lets the disk go, and root's write below lands)
expect_ok grid-writes-after as_user grid dd if=/tmp/junk of="$A" $DDW seek=1
expect_fail root-refused-after "Operation not permitted" dd if=/tmp/junk of="$A" $DDW
st=$($C status 2>&1)
has_line others-gone "^other programs: *none" "$st"
has_line disk-still-managed "^filter: *1 devices protected" "$st"

kill "$agd"; wait "$agd" 2>/dev/null
asmguard-guard-test unload >/dev/null 2>&1
losetup -d "$A" "$B" 2>/dev/null
vm_exit
