#!/bin/sh
# rule-cost: a benchmark, not a test (scripts/bench-rules.sh runs it; the lab's
# test runs never do). The allowed writer's cost per I/O under three allow
# rules, side by side in one boot, in alternating rounds (the daemon reloads
# its configuration with SIGHUP between them):
#   user     [filter] allow_users = ["grid"] (any process of grid);
#   user+exe [[rule]] users = ["grid"], executables = [syscall-bench];
#   user+exe+cgroup  the same and cgroups = ["rulebench"] (where a unit's rule
#            is judged: the task's cgroup and its ancestors).
# grid runs `syscall-bench pwrite` (4 KiB O_DIRECT) in the cgroup rulebench
# under every rule. Two measures of each run: the allowed writer's whole cost
# per I/O (`sys`: the pwrite call's wall time, syscall-bench's ns per call)
# and the rule's own part of it (`prog`: bpf_stats' ns per call of the
# filter's file_permission program, ag_file_permission or
# ag_fr_file_permission, the one every write goes through). Prints
# "VMINFO rule-cost bench ..." lines: per rule and measure the median ns per
# call, and per conjunction and measure its median ratio to the user rule over
# the rounds (with min and max). Under TCG only those ratios mean anything.
. /vmtests/lib.sh

ROUNDS=${RULE_ROUNDS:-9}
N=${RULE_N:-1500}
C="asmguardctl --socket /run/asmguard/asmguard.sock"
vm_full || { na bench "$VM_FALLBACK_WHY: no per-write program to measure"; vm_exit; }

D=$(new_loop 64 rule-bench) || { fail bench "losetup: $D"; vm_exit; }
SB=$(command -v syscall-bench)
CG=/sys/fs/cgroup/rulebench
mkdir -p $CG
base() { agd_config /tmp/rb.toml "${D#/dev/}" 'filter.allow_groups=[]' "$@"; }
rule_cfg() { # rule_cfg user|exe|cgroup
	case $1 in
	user) base 'filter.allow_users=["grid"]' ;;
	exe)
		base 'filter.allow_users=[]'
		printf '\n[[rule]]\nname = "bench"\nusers = ["grid"]\nexecutables = ["%s"]\n' "$SB" >>/tmp/rb.toml ;;
	cgroup)
		base 'filter.allow_users=[]'
		printf '\n[[rule]]\nname = "bench"\nusers = ["grid"]\nexecutables = ["%s"]\ncgroups = ["rulebench"]\n' "$SB" >>/tmp/rb.toml ;;
	esac
}
rule_cfg user
: >/tmp/rb.log
agd_start /tmp/rb.toml /tmp/rb.log || { fail bench "asmguardd: $(tail -n 3 /tmp/rb.log)"; vm_exit; }
$C label RBENCH "$D" >/dev/null 2>&1 || { fail bench "label: $(tail -n 3 /tmp/rb.log)"; vm_exit; }
chmod 666 "$D"

# the file_permission program's total run time and count, from the daemon
# (status --json: where the pins are guarded `bpftool prog show` cannot open
# the filter's programs)
fp_stats() {
	$C status --json 2>/dev/null | tr -d '\n' |
		sed -n 's/.*"filter_program_runs": *\[\([^]]*\)\].*/\1/p' |
		grep -o '"name": *"[^"]*", *"run_cnt": *[0-9]*, *"run_time_ns": *[0-9]*' |
		sed 's/"name": *"\([^"]*\)", *"run_cnt": *\([0-9]*\), *"run_time_ns": *\([0-9]*\)/\1 \3 \2/' | awk '$1=="ag_file_permission" || $1=="ag_fr_file_permission" {print $2+0, $3+0}'
}
# grid's writes in the cgroup: ns per call of the program and of the pwrite
# call ("PROG SYS"), or "denied"
one_run() {
	s0=$(fp_stats)
	sh -c "echo \$\$ > $CG/cgroup.procs && exec setpriv --reuid=54331 --regid=54321 --init-groups -- $SB pwrite $D $N" \
		>/tmp/rb.out 2>&1 || { echo denied; return; }
	s1=$(fp_stats)
	sys=$(sed -n 's/.*ns_per_call=\([0-9.]*\).*/\1/p' /tmp/rb.out)
	echo "$s0 $s1 ${sys:-0}" | awk '{dc=$4-$2; if (dc > 0) printf "%.1f %s\n", ($3-$1)/dc, $5; else print "none", $5}'
}
apply() { # apply RULE: reload and wait until the rule lets grid write
	rule_cfg "$1"
	kill -HUP "$agd"
	for _i in 1 2 3 4 5 6 7 8 9 10; do
		sleep 0.3
		sh -c "echo \$\$ > $CG/cgroup.procs && exec setpriv --reuid=54331 --regid=54321 --init-groups -- $SB pwrite $D 2" \
			>/dev/null 2>&1 && return 0
	done
	return 1
}

echo 1 >/proc/sys/kernel/bpf_stats_enabled
: >/tmp/rb-rounds
r=1
while [ $r -le "$ROUNDS" ]; do
	case $((r % 3)) in
	0) order="user exe cgroup" ;;
	1) order="exe cgroup user" ;;
	*) order="cgroup user exe" ;;
	esac
	for k in $order; do
		apply "$k" || { fail "bench-$k" "grid cannot write under the $k rule: $(tail -n 3 /tmp/rb.log)"; break 2; }
		echo "$r $k $(one_run)" >>/tmp/rb-rounds
	done
	r=$((r + 1))
done
echo 0 >/proc/sys/kernel/bpf_stats_enabled

# a conjunction's other conditions must matter: grid's dd (another executable)
# is refused under user+exe
apply exe >/dev/null
if as_user grid dd if=/dev/zero of="$D" bs=4096 seek=8 count=1 conv=notrunc 2>/dev/null; then
	fail bench-conjunction "grid's dd wrote under the user+exe rule"
else
	pass bench-conjunction "grid's dd refused under user+exe"
fi

med() { sort -g | awk '{a[NR]=$1} END {if (NR==0) print "none"; else print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
# rounds: "ROUND RULE PROG SYS"; measure m: column 3 (prog) or 4 (sys)
for m in prog sys; do
	col=3
	[ $m = sys ] && col=4
	for k in user exe cgroup; do
		info "bench $m rule $k ns_per_call_median=$(awk -v k=$k -v c=$col '$2==k {print $c}' /tmp/rb-rounds | med) rounds=$(awk -v k=$k '$2==k' /tmp/rb-rounds | wc -l)"
	done
	for k in exe cgroup; do
		ratios=$(awk -v k=$k -v c=$col '{v[$1" "$2]=$c; r[$1]=1} END {for (x in r) if (v[x" user"] > 0) printf "%.4f\n", v[x" "k]/v[x" user"]}' /tmp/rb-rounds | sort -g)
		info "bench $m ratio $k/user median=$(echo "$ratios" | med) min=$(echo "$ratios" | head -n 1) max=$(echo "$ratios" | tail -n 1)"
	done
done
# the filter removed through the daemon (its pins are guarded), then the daemon
$C filter disable >/dev/null 2>&1
kill "$agd" 2>/dev/null
wait "$agd" 2>/dev/null
pass bench "figures printed ($ROUNDS rounds)"
vm_exit
