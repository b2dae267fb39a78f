# shellcheck shell=sh
# asmguard system lab: helpers of the container tests (tests/system/guest/tests/
# {lxc,podman,nspawn}.sh), after /vmtests/lib.sh and /vmtests/syslib.sh.
#
# The containers are real ones, started by each runtime's own tools (lxc-start,
# podman run, systemd-nspawn) from the image's small root file system
# (CTR_ROOTFS, built by tests/system/image.sh: the tools the checks run, and the
# users grid 54331, oracle 54321, intruder 1001 with the Oracle groups). A
# user-namespaced container maps its ids 0..65535 to 100000.. on the host
# (container grid = host 154331). Networks are off in every container.
#
# What a container is given: the daemon's device nodes for it,
# /dev/asmguard/containers/<name>/<LABEL> (the [[container]] present key), bound to
# the container's /dev/asmguard/disks; the control socket's directory /run/asmguard
# (read-only bind); /usr/sbin/asmguardctl at /usr/local/bin/asmguardctl.

CTR_ROOTFS=/var/lib/ctr-lab/rootfs
CTR_CONF=/etc/asmguard/asmguard.toml
CTR_PATH=/usr/local/bin:/usr/sbin:/usr/bin
CTR_SHIFT=100000

# ctr_ids USER: "uid gid groups" of USER as every lab container sees it (its own
# /etc/passwd and /etc/group, written by image.sh: the spec's ids).
ctr_ids() {
	case $1 in
	root) echo "0 0 0" ;;
	grid) echo "54331 54321 54321,54327,54328,54329" ;;
	oracle) echo "54321 54321 54321,54322,54327" ;;
	intruder) echo "1001 1001 1001" ;;
	*) return 1 ;;
	esac
}

# ctr_host_id ID USERNS: the host id of a container id (USERNS 1: shifted).
ctr_host_id() { [ "$2" = 1 ] && echo $(($1 + CTR_SHIFT)) || echo "$1"; }

# ctr_disk NAME LABEL: a 64 MiB memory-backed null_blk disk (configfs NAME), labelled
# LABEL (empty: no label), whose link udevd made; prints its /dev node.
ctr_disk() {
	modprobe null_blk nr_devices=0 2>/dev/null
	[ -d /sys/kernel/config/nullb ] || mount -t configfs configfs /sys/kernel/config 2>/dev/null
	_d=/sys/kernel/config/nullb/$1
	[ -d "$_d" ] || mkdir "$_d" || return 1
	echo 64 >"$_d/size"
	echo 512 >"$_d/blocksize"
	echo 1 >"$_d/memory_backed"
	echo 1 >"$_d/power" || return 1
	_i=0 _dev=""
	while [ $_i -lt 50 ] && [ -z "$_dev" ]; do
		for _b in "/sys/block/$1" /sys/block/nullb*; do
			[ -e "$_b" ] && [ -b "/dev/${_b##*/}" ] && { _dev=/dev/${_b##*/}; break; }
		done
		_i=$((_i + 1))
		sleep 0.1
	done
	[ -n "$_dev" ] || { echo "no null_blk disk for $_d"; return 1; }
	if [ -n "$2" ]; then
		$C label "$2" "$_dev" >/tmp/ctr-label.out 2>&1 || { cat /tmp/ctr-label.out; return 1; }
		sys_wait_link "$2" 100 || { echo "no link /dev/asmguard/disks/$2"; return 1; }
	fi
	echo "$_dev"
}

# ctr_majmin DEV: "MAJ:MIN" of a block device node.
ctr_majmin() { stat -L -c '%t %T' "$1" | { read -r _a _b && echo "$((0x$_a)):$((0x$_b))"; }; }

# ctr_config [TOML]: /etc/asmguard/asmguard.toml with no host allow-list (so only
# [[container]] rules grant writes) and TOML appended (the [[container]] tables);
# asmguard restarted and answering. Non-zero, with the daemon's reason on stdout,
# when it refuses the file: the file is then written without TOML and restarted.
# The packaged file is kept in /tmp/ctr-conf.orig (ctr_config_restore).
ctr_config() {
	[ -e /tmp/ctr-conf.orig ] || cp "$CTR_CONF" /tmp/ctr-conf.orig
	_base='[filter]
mode = "enforce"
allow_users = []
allow_groups = []'
	printf '%s\n\n%s\n' "$_base" "${1:-}" >"$CTR_CONF"
	if ! _o=$(asmguardd --check-config --config "$CTR_CONF" 2>&1); then
		printf '%s\n' "$_base" >"$CTR_CONF"
		systemctl restart asmguard.service >/dev/null 2>&1
		sys_service_up
		echo "$_o"
		return 1
	fi
	systemctl restart asmguard.service >/dev/null 2>&1
	sys_service_up || { echo "asmguard does not answer after the restart: $(journalctl -b -u asmguard --no-pager -n 5 -o cat)"; return 1; }
}

# ctr_config_restore: the packaged configuration back, asmguard restarted.
ctr_config_restore() {
	[ -e /tmp/ctr-conf.orig ] && cp /tmp/ctr-conf.orig "$CTR_CONF"
	systemctl restart asmguard.service >/dev/null 2>&1
	sys_service_up
}

# ctr_rule NAME CGROUP [LINE...]: one [[container]] table, NAME and one CGROUP
# pattern, then each LINE ('allow_users = ["grid"]', ...).
ctr_rule() {
	_n=$1 _cg=$2
	shift 2
	printf '[[container]]\nname = "%s"\ncgroup = ["%s"]\n' "$_n" "$_cg"
	for _kv in "$@"; do printf '%s\n' "$_kv"; done
	printf '\n'
}

# ctr_present NAME USERNS LABEL...: the directory to bind into container NAME as its
# /dev/asmguard/disks: the daemon's /dev/asmguard/containers/NAME when it made one
# (it fills it with the nodes once the container runs: ctr_wait_nodes); else (no
# such directory: a daemon without the feature, or no [[container]] for NAME) a
# directory the lab makes the same way, /dev/ctr-lab/NAME, with one node per LABEL
# (the disk's dev_t, grid:asmadmin as the container sees them, 0660).
ctr_present() {
	_n=$1 _u=$2
	shift 2
	_dir=/dev/asmguard/containers/$_n
	if [ ! -d "$_dir" ]; then
		_dir=/dev/ctr-lab/$_n
		mkdir -p "$_dir"
		for _l in "$@"; do
			rm -f "$_dir/$_l"
			_mm=$(ctr_majmin "/dev/asmguard/disks/$_l") || return 1
			mknod -m 0660 "$_dir/$_l" b "${_mm%:*}" "${_mm#*:}" || return 1
			chown "$(ctr_host_id 54331 "$_u"):$(ctr_host_id 54329 "$_u")" "$_dir/$_l"
		done
	fi
	echo "$_dir"
}

# ctr_wait_nodes DIR LABEL...: waits (10 s at most) until DIR holds a block node for
# every LABEL; prints the milliseconds waited. Non-zero if they did not all come.
ctr_wait_nodes() {
	_d=$1
	shift
	_t0=$(date +%s%N) _ms=0
	while [ $_ms -lt 10000 ]; do
		_all=1
		for _l in "$@"; do [ -b "$_d/$_l" ] || _all=0; done
		[ $_all = 1 ] && { echo "$_ms"; return 0; }
		sleep 0.1
		_ms=$((($(date +%s%N) - _t0) / 1000000))
	done
	echo "$_ms"
	return 1
}

# ---- starting, running in and stopping containers ---------------------------

# ctr_subids: root's subordinate ids 100000..165535 in /etc/subuid and /etc/subgid
# (LXC maps a root-started container's ids through newuidmap/newgidmap, which
# check them), as on an LXC host.
ctr_subids() {
	for _f in /etc/subuid /etc/subgid; do
		grep -q "^root:$CTR_SHIFT:65536\$" "$_f" 2>/dev/null || echo "root:$CTR_SHIFT:65536" >>"$_f"
	done
}

# ctr_lxc_start NAME USERNS CONFIG-LINES: writes /var/lib/lxc/NAME/config (the lab's
# base: the image's root file system, no network, no console, a tmpfs /tmp, proc and
# sys, a device cgroup that allows the usual character devices only, and with USERNS
# 1 lxc.idmap 0..65535 -> 100000) followed by CONFIG-LINES (the presentation), and
# starts it with lxc-start (init: sleep). Prints the log's tail on failure.
ctr_lxc_start() {
	_n=$1
	mkdir -p "/var/lib/lxc/$_n"
	chmod 0755 /var/lib/lxc "/var/lib/lxc/$_n"
	{
		cat <<EOF
lxc.uts.name = $_n
lxc.rootfs.path = dir:$CTR_ROOTFS
lxc.init.cmd = /usr/bin/sleep infinity
lxc.net.0.type = empty
lxc.apparmor.profile = unconfined
lxc.autodev = 1
lxc.tty.max = 0
lxc.pty.max = 8
lxc.console.path = none
lxc.mount.auto = proc:mixed sys:mixed
lxc.mount.entry = tmpfs tmp tmpfs defaults 0 0
lxc.cgroup2.devices.deny = a
lxc.cgroup2.devices.allow = c 1:3 rwm
lxc.cgroup2.devices.allow = c 1:5 rwm
lxc.cgroup2.devices.allow = c 1:8 rwm
lxc.cgroup2.devices.allow = c 1:9 rwm
lxc.cgroup2.devices.allow = c 5:0 rwm
lxc.cgroup2.devices.allow = c 5:2 rwm
lxc.cgroup2.devices.allow = c 136:* rwm
EOF
		[ "$2" = 1 ] && printf 'lxc.idmap = u 0 %s 65536\nlxc.idmap = g 0 %s 65536\n' $CTR_SHIFT $CTR_SHIFT
		printf '%s\n' "$3"
	} >"/var/lib/lxc/$_n/config"
	rm -f "/tmp/lxc-$_n.log"
	if ! lxc-start -n "$_n" -d -l INFO -o "/tmp/lxc-$_n.log" || ! lxc-wait -n "$_n" -s RUNNING -t 30; then
		echo "lxc-start $_n: $(grep -E 'ERROR' "/tmp/lxc-$_n.log" | head -n 4 | sed 's/^.* - //')"
		return 1
	fi
}

# ctr_pid RUNTIME NAME: the host pid of the container's first process.
ctr_pid() {
	case $1 in
	lxc) lxc-info -n "$2" -p -H 2>/dev/null ;;
	podman) podman inspect -f '{{.State.Pid}}' "$2" 2>/dev/null ;;
	nspawn) machinectl show "$2" -p Leader --value 2>/dev/null ;;
	esac
}

# ctr_cgroup RUNTIME NAME: the cgroup-v2 path (relative to the mount) of the
# container's first process.
ctr_cgroup() {
	_p=$(ctr_pid "$1" "$2") && [ -n "$_p" ] && sed -n 's|^0::/||p' "/proc/$_p/cgroup"
}

# ctr_exec RUNTIME NAME USER CMD...: CMD in the container as USER (ids as the
# container sees them, ctr_ids), through the runtime's own tool: lxc-attach,
# podman exec; for systemd-nspawn (whose machinectl shell needs systemd inside)
# nsenter into every namespace of the container's leader after joining its cgroup.
# RUNTIME "enter" and NAME a host pid: nsenter into that process's container the
# same way, as USER's uid and gid only (no name is looked up: the container's
# /etc/group may not answer, and setpriv reads it).
ctr_exec() {
	_rt=$1 _n=$2
	_ids=$(ctr_ids "$3") || { echo "ctr_exec: no lab user $3"; return 127; }
	shift 3
	read -r _uid _gid _grp <<EOF
$_ids
EOF
	if [ "$_rt" = enter ]; then
		# (no setpriv: it looks its group arguments up as names first, in the
		# container's /etc/group; nsenter's -S/-G take numbers, and leave no
		# supplementary groups)
		set -- env PATH=$CTR_PATH "$@"
		_ids="-S $_uid -G $_gid"
	else
		# shellcheck disable=SC2086
		set -- env PATH=$CTR_PATH setpriv --reuid="$_uid" --regid="$_gid" --groups="$_grp" $_ctr_caps -- "$@"
		_ids=""
	fi
	case $_rt in
	lxc) lxc-attach -n "$_n" --clear-env -- "$@" ;;
	podman) podman exec "$_n" "$@" ;;
	nspawn | enter)
		if [ "$_rt" = enter ]; then
			_l=$_n
		else
			_l=$(ctr_pid nspawn "$_n") && [ -n "$_l" ] || { echo "ctr_exec: no leader of machine $_n"; return 127; }
		fi
		_cg=$(sed -n 's|^0::||p' "/proc/$_l/cgroup")
		# shellcheck disable=SC2086
		sh -c 'echo $$ >"/sys/fs/cgroup$0/cgroup.procs" && exec "$@"' "$_cg" nsenter -t "$_l" -a $_ids "$@"
		;;
	*) echo "ctr_exec: no runtime $_rt"; return 127 ;;
	esac
}

# ctr_write RUNTIME NAME USER NODE BLOCK CHAR: USER writes one 4 KiB block (number
# BLOCK) of CHAR bytes to NODE inside the container, O_DIRECT.
ctr_write() {
	ctr_exec "$1" "$2" "$3" sh -c "dd if=/dev/zero bs=4096 count=1 2>/dev/null | tr '\\000' '$6' |
		dd of='$4' bs=4096 count=1 seek=$5 iflag=fullblock conv=notrunc oflag=direct"
}

# ctr_write_past_modes RUNTIME NAME USER NODE BLOCK CHAR: ctr_write past the node's mode
# bits (lib.sh's VM_PAST_MODES, in the container's user namespace): for a check that
# means the filter's refusal, which then alone can answer.
_ctr_caps=""
ctr_write_past_modes() {
	_ctr_caps=$VM_PAST_MODES
	ctr_write "$@"
	_r=$?
	_ctr_caps=""
	return $_r
}

# ctr_read RUNTIME NAME USER NODE BLOCK: prints block BLOCK of NODE as the container's
# USER reads it (O_DIRECT), squeezed (4096 'G' bytes print "G").
ctr_read() {
	ctr_exec "$1" "$2" "$3" sh -c "dd if='$4' bs=4096 count=1 skip=$5 iflag=direct 2>/dev/null | tr -s '\\000-\\377'"
}

# host_block DEV BLOCK: block BLOCK of DEV read on the host, squeezed like ctr_read.
host_block() { dd if="$1" bs=4096 count=1 skip="$2" iflag=direct 2>/dev/null | tr -s '\000-\377'; }

# host_write DEV BLOCK CHAR [USER]: the host's root (or USER, through
# as_user_past_modes: the checks that name a user mean the filter's refusal) writes one
# block of CHAR bytes.
host_write() {
	dd if=/dev/zero bs=4096 count=1 2>/dev/null | tr '\000' "$3" >/tmp/ctr-block
	chmod 0644 /tmp/ctr-block
	if [ -n "${4:-}" ]; then
		as_user_past_modes "$4" dd if=/tmp/ctr-block of="$1" bs=4096 count=1 seek="$2" conv=notrunc oflag=direct
	else
		dd if=/tmp/ctr-block of="$1" bs=4096 count=1 seek="$2" conv=notrunc oflag=direct
	fi
}

# asmguard_prog_ids: the ids of the filter's BPF programs (its links'), sorted,
# on one line: read from the daemon's own link fds (their fdinfo), since where
# the pins are guarded no other task may open a link or program by id (what
# `bpftool link show` does). The daemon's other links (the I/O latency
# tracer's, loaded again by each daemon) are left out: their programs open by
# id and are not named ag_*; the filter's are refused by id (guarded) or named
# ag_* (watched).
asmguard_prog_ids() {
	_agd=$(grep -lx asmguardd /proc/[0-9]*/comm 2>/dev/null | head -n 1 | cut -d/ -f3)
	[ -n "$_agd" ] || return 0
	for _f in $(grep -l '^link_id:' /proc/"$_agd"/fdinfo/* 2>/dev/null); do
		_id=$(sed -n 's/^prog_id:[[:space:]]*\([0-9]*\).*/\1/p' "$_f")
		[ -n "$_id" ] || continue
		_n=$(bpftool prog show id "$_id" 2>/dev/null | sed -n 's/.* name \([^ ]*\).*/\1/p' | head -n 1)
		case $_n in '' | ag_*) echo "$_id" ;; esac
	done | sort -n | tr '\n' ' '
}

# runtime_device_prog CGROUP: the cgroup_device programs in effect on CGROUP (a
# path relative to the cgroup-v2 mount) but asmguard's own (ag_*), on one line.
# (Where the pins are guarded bpftool cannot open asmguard's programs by id: it
# leaves them out of the list, and the runtime's own are the ones asked for.)
runtime_device_prog() {
	[ -n "$1" ] && bpftool cgroup show "/sys/fs/cgroup/$1" effective 2>/dev/null |
		grep -w cgroup_device | grep -v ' ag_' | tr -s ' \n' '  '
}

# ctr_ctl_checks RUNTIME NAME: asmguardctl inside container NAME (no admin
# rights) over the bound socket: its grid reads (lsdsk, status, iostat), its
# intruder is refused, and its grid's and root's state changes are refused
# (each undone on the host should it have gone through).
ctr_ctl_checks() {
	expect_ok "grid-lsdsk-$2" ctr_exec "$1" "$2" grid asmguardctl lsdsk
	expect_ok "grid-status-$2" ctr_exec "$1" "$2" grid asmguardctl status
	expect_ok "grid-iostat-$2" ctr_exec "$1" "$2" grid asmguardctl iostat --count 1 --interval 0.5
	expect_fail "intruder-lsdsk-refused-$2" "permission denied" ctr_exec "$1" "$2" intruder asmguardctl lsdsk
	expect_fail "grid-filter-refused-$2" "permission denied" ctr_exec "$1" "$2" grid asmguardctl filter audit DATA1
	expect_fail "root-filter-refused-$2" "permission denied|refused" ctr_exec "$1" "$2" root asmguardctl filter audit DATA1
	expect_fail "root-label-refused-$2" "permission denied|refused" ctr_exec "$1" "$2" root asmguardctl rename DATA2 DATA9
	$C filter enable DATA1 >/dev/null 2>&1
	$C rename DATA9 DATA2 >/dev/null 2>&1
}

# ctr_check_nodes NAME LABEL...: the daemon made NAME's nodes of LABELs in
# /dev/asmguard/containers/NAME (waited for, as the container just started).
ctr_check_nodes() {
	_d=/dev/asmguard/containers/$1
	_n=$1
	shift
	if _ms=$(ctr_wait_nodes "$_d" "$@"); then
		pass "present-by-daemon-$_n" "$(ls -ln "$_d" | tail -n +2 | tr -s ' \n' '  ') ($_ms ms after the start)"
	else
		fail "present-by-daemon-$_n" "no nodes after $_ms ms: $(ls -ln "$_d" 2>&1 | tr -s ' \n' '  ') :: $($C lsdsk 2>&1 | grep -i 'present' | tr '\n' ' ')"
	fi
}

# ctr_check_runtime_prog CHECK RUNTIME NAME: the runtime attached a device
# program of its own to container NAME's cgroup.
ctr_check_runtime_prog() {
	_cg=$(ctr_cgroup "$2" "$3")
	_dp=$(runtime_device_prog "$_cg")
	holds "$1-$3" "on $_cg: ${_dp:-none}" [ -n "$_dp" ]
}

# ---- a container file that never answers ------------------------------------

# ctr_stall PID FILE: FILE (a path inside the container, a regular file) of the
# container that process PID runs in is covered, in the container's mount
# namespace, by a FUSE file system that never answers: the kernel's INIT
# request is never read, so every open, stat or read of it waits (killably)
# until the holder goes. The holder is a sleep of this shell's holding the
# /dev/fuse descriptor (its pid in CTR_STALL_HOLDER; ctr_unstall ends it). No
# FUSE library or server is needed.
ctr_stall() {
	modprobe fuse 2>/dev/null
	[ -c /dev/fuse ] || { echo "no /dev/fuse"; return 1; }
	rm -f /tmp/ctr-stall.out
	# (the mount runs inside the container's mount namespace with the container's
	# mount binary, which finds no mount.fuse helper there: -i, a plain mount(2))
	sh -c 'exec 3<>/dev/fuse || exit 1
nsenter -t "$0" -m mount -n -i -t fuse -o fd=3,rootmode=100644,user_id=0,group_id=0,allow_other ctrstalled "$1" || exit 1
echo mounted
exec sleep infinity' "$1" "$2" >/tmp/ctr-stall.out 2>&1 &
	CTR_STALL_HOLDER=$! CTR_STALL_PID=$1 CTR_STALL_FILE=$2
	_i=0
	while [ $_i -lt 100 ] && ! grep -q mounted /tmp/ctr-stall.out; do
		kill -0 "$CTR_STALL_HOLDER" 2>/dev/null || break
		_i=$((_i + 1))
		sleep 0.1
	done
	grep -q mounted /tmp/ctr-stall.out || { cat /tmp/ctr-stall.out; return 1; }
}

# ctr_unstall: the holder of ctr_stall ends (the connection goes: what waited on
# the file, and every later use of it, fails with ENOTCONN at once), and the
# mount is detached if umount can (on 6.12 umount of the aborted FUSE file mount
# answers ENOENT: it stays until the container goes). Non-zero while it stays.
ctr_unstall() {
	[ -n "${CTR_STALL_HOLDER:-}" ] || return 0
	kill "$CTR_STALL_HOLDER" 2>/dev/null
	wait "$CTR_STALL_HOLDER" 2>/dev/null
	# (-c: no stat of the path; the mount may already be gone with its container)
	nsenter -t "$CTR_STALL_PID" -m umount -l -c "$CTR_STALL_FILE" >/tmp/ctr-unstall.out 2>&1 ||
		nsenter -t "$CTR_STALL_PID" -m umount -l "$CTR_STALL_FILE" >>/tmp/ctr-unstall.out 2>&1
	CTR_STALL_HOLDER=""
	! grep -q ' ctrstalled ' "/proc/$CTR_STALL_PID/mountinfo" 2>/dev/null
}
