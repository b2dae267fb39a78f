# Shared pieces of the scripts/bench-*.sh benchmarks, sourced by them (POSIX sh:
# bench-reclaim.sh runs under sh). Not for the VM lab's guest benchmarks, which
# use tests/vm/guest/lib.sh.

# bench_config FILE INCLUDE SOCKET [LINE...]: an asmguardd config for a benchmark:
# [devices] include = [INCLUDE] (quoted names, comma-separated), exclude = [],
# [socket] path = SOCKET, then each LINE as it is ("[filter]", 'mode = "off"').
bench_config() {
	_bf=$1
	printf '[devices]\ninclude = [%s]\nexclude = []\n[socket]\npath = "%s"\n' "$2" "$3" >"$_bf"
	shift 3
	for _bl in "$@"; do printf '%s\n' "$_bl"; done >>"$_bf"
}
