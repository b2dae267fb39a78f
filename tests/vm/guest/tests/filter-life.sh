#!/bin/sh
# filter-life: the filter's life cycle. Pins keep protection through a kill -9
# of its loader and a restart re-adopts them with no unprotected moment (an
# attacker loop runs throughout); events after re-adoption; audit and off
# modes; uninstall removes everything; the cgroup-device fallback (open-time
# only, and it says so), and the upgrade from a pinned fallback to the kernel's
# best backend with no unprotected moment.
. /vmtests/lib.sh

G=/usr/local/bin/asmguard-guard-test
PIN=/sys/fs/bpf/asmguard
DDW="bs=4096 count=1 conv=notrunc"
[ -x "$G" ] || { fail setup "$G missing"; vm_exit; }
dd if=/dev/zero bs=4096 count=1 2>/dev/null | tr '\0' 'X' >/tmp/junk

L=$(new_loop 8 life-prot) && A=$(new_loop 8 life-audit) || { fail setup "losetup"; vm_exit; }
dd if=/dev/urandom of="$L" bs=1M count=8 oflag=direct 2>/dev/null
before=$(sha "$L")

# the kernel's backend (LSM or fmod_ret programs, or the cgroup-device fallback)
if vm_full; then
	OPEN_EVENT="comm=dd .*hook=file_open op=write-open mode=enforce" OPEN_HOOK=file_open
else
	OPEN_EVENT="hook=cgroup_device .*mode=enforce" OPEN_HOOK=cgroup_device
fi
$G hold --backend $VM_BACKEND --uid 54331 "$L" >/tmp/hold.out 2>&1 &
holder=$!
if wait_for_line /tmp/hold.out "^ready backend=$VM_BACKEND" 30; then
	pass load "$(head -n 1 /tmp/hold.out)"
else
	fail load "$(cat /tmp/hold.out)"
	vm_exit
fi
expect_fail denied "Operation not permitted" dd if=/tmp/junk of="$L" $DDW

# an attacker that tries a write-open every few ms, through the crash and the restart
attacker_start "$L"
sleep 1

kill -9 "$holder"
wait "$holder" 2>/dev/null
links=$(ls $PIN/links 2>/dev/null | tr '\n' ' ')
holds pins-survive-kill9 "links: ${links:-none pinned}" [ -n "$links" ]
expect_fail denied-after-kill9 "Operation not permitted" dd if=/tmp/junk of="$L" $DDW
out=$($G load 2>&1)
case $out in
*"adopted=yes"*) pass restart-readopts "$out" ;;
*) fail restart-readopts "$out" ;;
esac
expect_fail denied-after-restart "Operation not permitted" dd if=/tmp/junk of="$L" $DDW
sleep 1
attacker_stop no-unprotected-window
after=$(sha "$L")
expect sha256-unchanged "$before" "$after"
chown grid "$L"
expect_ok allowed-after-restart as_user grid dd if="$L" of=/dev/null bs=4096 count=1
expect_ok allowed-write-after-restart as_user grid dd if=/tmp/junk of="$L" $DDW

# events flow from the re-adopted ring buffer
$G events --timeout 1 >/dev/null 2>&1
$G events --count 1 --timeout 20 >/tmp/ev.out 2>&1 &
evr=$!
sleep 1
dd if=/tmp/junk of="$L" $DDW 2>/dev/null
wait "$evr"
has_line events-after-restart "$OPEN_EVENT" "$(cat /tmp/ev.out)"

# audit: logged and allowed; off: allowed, not logged
$G load --mode audit --id 7 "$A" >/dev/null 2>&1
# Drain what earlier steps left in the ring buffer (the attacker loop's denials),
# so the reader below sees the audit event, not an old one.
$G events --timeout 1 >/dev/null 2>&1
$G events --count 1 --timeout 20 >/tmp/ev.out 2>&1 &
evr=$!
sleep 1
expect_ok audit-allows dd if=/tmp/junk of="$A" $DDW
wait "$evr"
has_line audit-logs "disk=7 hook=$OPEN_HOOK .*mode=audit" "$(cat /tmp/ev.out)"
s1=$($G stats)
$G load --mode off "$A" >/dev/null 2>&1
expect_ok off-allows dd if=/tmp/junk of="$A" $DDW
s2=$($G stats)
expect off-not-logged "$s1" "$s2"
# (one write-open is one check for the LSM; the device cgroup is asked twice on
# some kernels, at the inode permission check and again at the block device open)
case $s2 in *"audited=file_open:1"* | *"audited=cgroup_device:1"* | *"audited=cgroup_device:2"*) pass audit-counted "$s2" ;; *) fail audit-counted "$s2" ;; esac

# uninstall: detached and gone (unload waits until the kernel has released the
# links, and says which stay attached if it does not)
expect_ok uninstall $G unload
holds uninstall-removes-pins "$(ls -R $PIN 2>&1)" [ ! -e $PIN ]
expect_ok write-after-uninstall dd if=/tmp/junk of="$L" $DDW

# the fallback: cgroup-device program on the cgroup2 root (open-time only)
dd if=/dev/urandom of="$L" bs=1M count=8 oflag=direct 2>/dev/null
exec 3<>"$L" || { fail fallback-preopen "cannot open $L"; vm_exit; }
out=$($G load --backend cgroup --uid 54331 "$L" 2>&1)
case $out in
*"backend=cgroup_device"*"degraded: open-time only"*) pass fallback-load "$out" ;;
*) fail fallback-load "$out" ;;
esac
expect_fail fallback-denies-root "Operation not permitted" dd if=/tmp/junk of="$L" $DDW
chmod 666 "$L"
expect_fail fallback-denies-intruder "Operation not permitted" as_user_past_modes intruder dd if=/tmp/junk of="$L" $DDW
expect_ok fallback-allows-read dd if="$L" of=/dev/null bs=4096 count=1
expect_ok fallback-allows-grid as_user grid dd if=/tmp/junk of="$L" $DDW seek=100
# what the fallback cannot see: a write on an fd opened before it started
if printf CORRUPTION >&3 2>/dev/null; then
	pass fallback-is-open-time-only "a write on a pre-opened fd passes (documented limit)"
else
	fail fallback-is-open-time-only "the pre-opened write was refused: the limit text is wrong"
fi
# upgrade: a version without the better backend left the fallback pinned; the next
# start (the daemon's Guard::open, as load runs it) attaches the best backend beside
# it, sharing the pinned maps, and only then removes the old links. An attacker
# loop runs through it: not one write-open lands; the pre-opened fd is now refused.
if vm_full; then
	attacker_start "$L"
	sleep 1
	out=$($G load 2>&1)
	case $out in
	*"backend=$VM_BACKEND"*"replaced the pinned cgroup_device filter, which stayed attached until this one was"*)
		pass upgrade-replaces-fallback "$out" ;;
	*) fail upgrade-replaces-fallback "$out" ;;
	esac
	links=$(ls $PIN/links 2>&1 | tr '\n' ' ')
	case " $links" in
	*" ag_cgroup_dev"*) fail upgrade-old-links-gone "$links" ;;
	*" ag_file_open "* | *" ag_fr_file_open "*) pass upgrade-old-links-gone "$links" ;;
	*) fail upgrade-old-links-gone "no file_open program pinned: $links" ;;
	esac
	sleep 1
	attacker_stop upgrade-no-unprotected-window
	expect_fail upgrade-preopened-fd-denied "Operation not permitted" sh -c 'dd if=/tmp/junk bs=512 count=1 status=none >&3'
	expect_ok upgrade-grid-writes as_user grid dd if=/tmp/junk of="$L" $DDW seek=100
	out=$($G load 2>&1)
	has_line upgrade-then-readopts "adopted=yes" "$out"
else
	na upgrade-replaces-fallback "no backend better than the fallback on this kernel"
fi
exec 3>&-
# (every command of the test tool opens the filter as the daemon does, which
# would have upgraded it: the counters are read after; the maps are the same)
has_line fallback-counts "cgroup_device:" "$($G stats)"
$G unload
expect_ok fallback-uninstalled dd if=/tmp/junk of="$L" $DDW

losetup -d "$L" "$A" 2>/dev/null
vm_exit
