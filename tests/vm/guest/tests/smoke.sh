#!/bin/sh
# smoke: the BPF LSM works on this kernel and the smoke program (bpf/smoke.bpf.c,
# loaded by asmguard-bpf-smoke) denies write-opens of exactly the devices in
# its map, for root too, and nothing else.
. /vmtests/lib.sh

LOADER=/usr/local/bin/asmguard-bpf-smoke
DD_W="bs=4096 count=1 oflag=direct conv=notrunc"

pass kernel "$(uname -r) :: $(cut -d' ' -f1-3 /proc/version) $(uname -v)"

lsm=$(cat /sys/kernel/security/lsm 2>&1)
case ",$lsm," in
*,bpf,*) pass lsm-has-bpf "$lsm" ;;
*)
	# a kernel booted without bpf in its LSM list (Debian's 5.10 default): the
	# smoke LSM program cannot attach; filter*.sh test the fallback there
	if grep -aq bpf_lsm_file_open /sys/kernel/btf/vmlinux 2>/dev/null; then
		na lsm-has-bpf "bpf is built in but not in this boot's LSM list: $lsm"
	else
		na lsm-has-bpf "this kernel has no BPF LSM: $lsm"
	fi
	NO_LSM=1 ;;
esac

if [ -s /sys/kernel/btf/vmlinux ]; then
	pass kernel-btf "$(wc -c </sys/kernel/btf/vmlinux) bytes"
else
	fail kernel-btf "no /sys/kernel/btf/vmlinux: CO-RE cannot work"
fi

if [ "${NO_LSM:-0}" = 1 ]; then
	na lsm-program "no active BPF LSM: the smoke LSM program cannot attach (the fallback is tested by filter*.sh)"
	vm_exit
fi
if [ ! -x "$LOADER" ]; then
	fail loader-present "$LOADER missing (cargo build --release -p asmguard-guard)"
	vm_exit
fi

# The protected device with known content, and a control device.
prot=$(new_loop 16 smoke-prot) || { fail setup "losetup: $prot"; vm_exit; }
ctrl=$(new_loop 16 smoke-ctrl) || { fail setup "losetup: $ctrl"; vm_exit; }
dd if=/dev/urandom of=/tmp/smoke-pattern bs=4096 count=16 2>/dev/null
dd if=/tmp/smoke-pattern of="$prot" bs=4096 count=16 oflag=direct conv=notrunc 2>/dev/null
before=$(sha "$prot")
info "protected $prot ($(stat -c %t:%T "$prot")), control $ctrl, sha $before"

"$LOADER" "$prot" >/tmp/smoke-loader.out 2>&1 &
loader=$!
if wait_for_line /tmp/smoke-loader.out '^ready' 60; then
	pass loader-ready "$(cat /tmp/smoke-loader.out)"
else
	fail loader-ready "$(cat /tmp/smoke-loader.out)"
	kill "$loader" 2>/dev/null
	vm_exit
fi

# root, write-open: denied by the LSM program
expect_fail write-open-denied "Operation not permitted" \
	dd if=/dev/zero of="$prot" $DD_W
# root, read-write open from the shell: denied too
expect_fail rdwr-open-denied "Operation not permitted" \
	sh -c "exec 3<>$prot"
# a non-root user to whom the mode bits would allow writing: denied
chmod 666 "$prot" "$ctrl"
expect_fail write-open-denied-intruder "Operation not permitted" \
	as_user_past_modes intruder dd if=/dev/zero of="$prot" $DD_W
# reads still work
expect_ok read-allowed dd if="$prot" of=/dev/null bs=4096 count=1 iflag=direct
# nothing was written
after=$(sha "$prot")
if [ "$after" = "$before" ]; then
	pass content-unchanged "$after"
else
	fail content-unchanged "sha256 $before -> $after"
fi
# a device not in the map is writable while the program is attached
expect_ok control-write-allowed dd if=/dev/zero of="$ctrl" $DD_W
expect_ok control-write-allowed-intruder as_user intruder dd if=/dev/zero of="$ctrl" $DD_W

# Stop the loader: the kernel drops the link, the same write must now pass.
kill "$loader"
wait "$loader" 2>/dev/null
i=0
while [ $i -lt 50 ] && ! dd if=/dev/zero of="$prot" $DD_W 2>/dev/null; do
	i=$((i + 1))
	sleep 0.1
done
expect_ok write-allowed-after-detach dd if=/dev/zero of="$prot" $DD_W
if [ "$(sha "$prot")" != "$before" ]; then
	pass content-written-after-detach
else
	fail content-written-after-detach "the write after detach did not change the device"
fi

# Command mode: the program counts its denials (one write-open, one read-open).
out=$("$LOADER" "$prot" -- sh -c "dd if=/dev/zero of=$prot $DD_W; dd if=$prot of=/dev/null bs=4096 count=1" 2>&1)
if printf '%s\n' "$out" | grep -qx 'denied=1' && printf '%s' "$out" | grep -q "Operation not permitted"; then
	pass denial-counter "$out"
else
	fail denial-counter "expected exactly one denial: $out"
fi

losetup -d "$prot" "$ctrl" 2>/dev/null
vm_exit
