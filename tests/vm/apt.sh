#!/bin/bash
# tests/vm/apt.sh - the VM lab's own apt configuration, to reach the Debian suites
# whose kernels the lab boots (bullseye ... sid) without touching the machine's apt.
#
# Source it and use `lab_apt_get ARGS...` / `lab_apt_cache ARGS...`: apt-get and
# apt-cache with their own sources list, lists, cache and an empty status file, all
# under tests/vm/cache/apt/. The machine's /etc/apt is only read, to learn the
# mirror URI and keyring (from its deb822 or one-line sources); nothing there is
# written. `lab_apt_update` refreshes the lists when they are older than a day or
# the suite list changed.
#
#   LAB_APT_SUITES   suites the lab knows (default below)
#   LAB_APT_MIRROR   override the mirror URI read from the machine's sources

LAB_APT_SUITES=${LAB_APT_SUITES:-"bullseye bookworm bookworm-updates bookworm-backports trixie trixie-backports sid"}
LAB_APT_DIR=${LAB_APT_DIR:-${VM_CACHE:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/cache}/apt}

lab_apt_log() { echo "lab-apt: $*" >&2; }

# lab_apt_mirror [security]: prints "URI KEYRING" of the machine's main Debian archive
# (or, with "security", of its security archive), read from /etc/apt: deb822
# stanzas first, then one-line sources.
lab_apt_mirror() {
	local want=${1:-main} found
	if [ "$want" = main ] && [ -n "${LAB_APT_MIRROR:-}" ]; then
		echo "$LAB_APT_MIRROR ${LAB_APT_KEYRING:-/usr/share/keyrings/debian-archive-keyring.gpg}"
		return 0
	fi
	found=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk -v want="$want" '
		function flush() {
			if (uri != "" && ((want == "security") == (suites ~ /-security/))) { print uri, key; done = 1; exit }
			uri = ""; suites = ""; key = ""
		}
		/^[ \t]*$/ { flush(); next }
		/^URIs:/ { uri = $2 }
		/^Suites:/ { $1 = ""; suites = $0 }
		/^Signed-By:/ { key = $2 }
		END { if (!done) flush() }')
	if [ -z "$found" ]; then
		found=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | awk -v want="$want" '
			$1 != "deb" { next }
			{
				key = ""; uri = ""; suite = ""
				for (i = 2; i <= NF; i++) {
					if ($i ~ /signed-by=/) { key = $i; sub(/.*signed-by=/, "", key); sub(/\]$/, "", key) }
					if ($i ~ /^\[/ || $i ~ /\]$/ || $i ~ /=/) continue
					if (uri == "") uri = $i; else if (suite == "") suite = $i
				}
				if ((want == "security") == (suite ~ /-security/)) { print uri, key; exit }
			}')
	fi
	if [ -z "$found" ]; then
		[ "$want" = security ] && return 1
		lab_apt_log "no Debian archive in the machine's apt sources; set LAB_APT_MIRROR"
		return 1
	fi
	set -- $found
	echo "$1 ${2:-/usr/share/keyrings/debian-archive-keyring.gpg}"
}

lab_apt_opts() {
	echo "-o Dir::Etc::sourcelist=$LAB_APT_DIR/sources.list -o Dir::Etc::sourceparts=-" \
		"-o Dir::State::Lists=$LAB_APT_DIR/lists -o Dir::Cache=$LAB_APT_DIR/cache" \
		"-o Dir::State::status=$LAB_APT_DIR/status -o APT::Get::List-Cleanup=0" \
		"-o Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false" \
		"-o Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false" \
		"-o Acquire::IndexTargets::deb::DEP-11-icons-small::DefaultEnabled=false" \
		"-o Acquire::IndexTargets::deb::Contents-deb::DefaultEnabled=false" \
		"-o Acquire::Languages=none -o APT::Sandbox::User=root"
}

# lab_apt_setup: writes the sources list (idempotent).
lab_apt_setup() {
	local m uri key s list sec
	m=$(lab_apt_mirror) || return 1
	uri=${m%% *} key=${m#* }
	# the security archive serves the stable suites' current kernels
	sec=$(lab_apt_mirror security) || sec=""
	mkdir -p "$LAB_APT_DIR/lists/partial" "$LAB_APT_DIR/cache/archives/partial"
	[ -e "$LAB_APT_DIR/status" ] || : >"$LAB_APT_DIR/status"
	list=""
	for s in $LAB_APT_SUITES; do
		list="${list}deb [signed-by=$key] $uri $s main
"
		case $s in
		*-*) ;;
		sid | trixie) ;; # no security suite for sid; trixie's is not a lab line
		*) [ -n "$sec" ] && list="${list}deb [signed-by=${sec#* }] ${sec%% *} $s-security main
" ;;
		esac
	done
	if [ "$(cat "$LAB_APT_DIR/sources.list" 2>/dev/null)" != "${list%
}" ]; then
		printf '%s' "$list" >"$LAB_APT_DIR/sources.list"
		rm -f "$LAB_APT_DIR/.updated"
	fi
}

lab_apt_get() {
	# shellcheck disable=SC2046
	DEBIAN_FRONTEND=noninteractive apt-get $(lab_apt_opts) "$@"
}

lab_apt_cache() {
	# shellcheck disable=SC2046
	apt-cache $(lab_apt_opts) "$@"
}

# lab_apt_update [force]: refreshes the lab's lists once a day (or when forced).
lab_apt_update() {
	lab_apt_setup || return 1
	if [ "${1:-}" != force ] && [ -n "$(find "$LAB_APT_DIR/.updated" -mmin -1440 2>/dev/null)" ]; then
		return 0
	fi
	lab_apt_log "updating the lab's package lists ($LAB_APT_SUITES)"
	lab_apt_get update -qq >&2 || return 1
	touch "$LAB_APT_DIR/.updated"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	set -euo pipefail
	lab_apt_update "${1:-}"
	lab_apt_cache policy | sed -n '1,40p'
fi
