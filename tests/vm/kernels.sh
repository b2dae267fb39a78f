#!/bin/bash
# tests/vm/kernels.sh - fetch and unpack the newest Debian cloud kernel of a line.
#
#   tests/vm/kernels.sh LINE          LINE = 5.10 | 6.1 | 6.12 | newest (or any "<major>.<minor>")
#
# Picks the newest linux-image-<LINE>...-cloud-amd64[-unsigned] package of the
# line's Debian suites (never a hard-coded version; "newest" takes the newest over
# every suite), through the lab's own apt configuration (apt.sh), downloads it
# (and, for split 7.x packaging, its binary/modules/base parts) into tests/vm/cache/,
# unpacks it there, and prepares tests/vm/work/<LINE>/:
#   vmlinuz            the kernel
#   modules/           lib/modules/<kver>/ with only the modules the lab needs
#                      (and their dependencies from modules.dep), decompressed,
#                      a pruned modules.dep, and asmguard.load (boot load order)
#   kernel.env         KVER=, KPKG=, KPKG_VERSION= for the other scripts
# Source it to get the functions; run it to prepare one line.

VM_DIR=${VM_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}
VM_CACHE=${VM_CACHE:-$VM_DIR/cache}
VM_WORK=${VM_WORK:-$VM_DIR/work}
. "$VM_DIR/apt.sh"

# Modules the guest tests need. "?" marks an optional one: shipped if the kernel
# has it, not loaded at boot (a test runs "modprobe xfs"). Hard dependencies come from modules.dep, "pre:" soft dependencies
# from modules.softdep. Modules loaded with parameters by the guest init
# (scsi_debug, null_blk) are shipped but not in the boot load list.
VM_MODULES="loop dm-mod dm-bufio dm-persistent-data dm-bio-prison dm-thin-pool
 scsi_mod sd_mod sg scsi_debug null_blk unix_diag
 ?dm-multipath ?dm-round-robin ?ext4 ?xfs ?crc32c_generic ?crc32c-intel
 ?crct10dif_generic ?crct10dif-pclmul ?crc64_rocksoft_generic
 ?md-mod ?raid1 ?dm-mirror ?dm-cache ?dm-cache-smq ?configfs ?target_core_mod
 ?target_core_iblock ?target_core_pscsi ?tcm_loop ?nvmet ?nvme-loop ?bcache ?zram
 ?nvme-fabrics ?nvme-tcp ?nvmet-tcp"
VM_MODULES_WITH_PARAMS="scsi_debug null_blk"

vm_log() { echo "kernels: $*" >&2; }

# vm_line_suites LINE: the Debian suites a lab line takes its kernel from ("*": any).
vm_line_suites() {
	case ${1%%[+-]*} in
	5.10) echo "bullseye" ;; # (its security pool is gone from the mirror: LTS ended)
	6.1 | 6.12) echo "bookworm bookworm-updates bookworm-security" ;;
	*) echo "*" ;;
	esac
}

# vm_kernel_pkg LINE: prints "PACKAGE VERSION" of the newest cloud kernel image of
# LINE ("5.10", "6.1", "6.12", "newest", or any "<major>.<minor>"; a "+..." or
# "-..." suffix such as "5.10+lsm" or "6.12-nobpf" names a boot variant of the same
# kernel) in the line's suites.
vm_kernel_pkg() {
	local line=${1%%[+-]*} re names suites n
	if [ "$line" = newest ]; then
		re='^linux-image-[0-9]+\.[0-9]+[.-][0-9][^ ]*-cloud-amd64(-unsigned)?$'
	else
		re="^linux-image-${line//./\\.}[.-][0-9][^ ]*-cloud-amd64(-unsigned)?\$"
	fi
	lab_apt_update || return 1
	names=$(lab_apt_cache search --names-only "$re" 2>/dev/null | awk '{print $1}')
	[ -n "$names" ] || { vm_log "no Debian cloud kernel package for line $1 ($re)"; return 1; }
	suites=$(vm_line_suites "$1")
	# "kernel-version<TAB>unsigned?<TAB>package<TAB>version" for each (package, version)
	# in an allowed suite; newest kernel first, -unsigned preferred (the same build).
	# shellcheck disable=SC2086
	lab_apt_cache madison $names | awk -F'|' -v suites=" $suites " '
		{
			n = $1; gsub(/ /, "", n); gsub(/ /, "", $2)
			split($3, u, " "); suite = u[2]; sub(/\/.*/, "", suite)
			if (suites != " * " && index(suites, " " suite " ") == 0) next
			k = n; sub(/^linux-image-/, "", k); sub(/-cloud-amd64(-unsigned)?$/, "", k)
			print k "\t" (n ~ /-unsigned$/ ? 1 : 0) "\t" n "\t" $2
		}' | sort -t "$(printf '\t')" -k1,1V -k2,2n -k4,4V | tail -n 1 | awk -F'\t' 'NF == 4 {print $3, $4}' | grep . ||
		{ vm_log "no cloud kernel of line $1 in suites: $suites"; return 1; }
}

# vm_download PKG VER: apt-get download PKG=VER into the cache once; prints the .deb.
vm_download() {
	local deb="$VM_CACHE/${1}_${2//:/%3a}_amd64.deb"
	if [ ! -s "$deb" ]; then
		vm_log "downloading $1 $2"
		(cd "$VM_CACHE" && lab_apt_get download -q "$1=$2" >&2) || return 1
		[ -s "$deb" ] || { vm_log "download of $1 did not produce $deb"; return 1; }
	fi
	echo "$deb"
}

# vm_fetch_kernel LINE: download + unpack + prepare work/LINE. Idempotent.
# Both package layouts work: one linux-image package (<= 6.x), or the split one of
# 7.x where linux-image depends on linux-binary-* (the kernel, vmlinuz at
# usr/lib/modules/KVER/vmlinuz), linux-modules-* and linux-base-* (modules.builtin).
vm_fetch_kernel() {
	# one fetch at a time per kernel cache (the VM and system labs run side by side
	# and share it): a subshell holding the cache's lock
	mkdir -p "$VM_CACHE" || return 1
	(
		flock 5
		vm_fetch_kernel_locked "$@"
	) 5>"$VM_CACHE/.fetch.lock"
}
vm_fetch_kernel_locked() {
	local line=$1 pkg ver deb root kver dep dver part pv
	pv=$(vm_kernel_pkg "$line") || return 1
	pkg=${pv% *} ver=${pv#* }
	mkdir -p "$VM_CACHE" "$VM_WORK/$line"
	deb=$(vm_download "$pkg" "$ver") || return 1
	root="$VM_CACHE/${pkg}_${ver//:/%3a}"
	if [ ! -e "$root/.unpacked" ]; then
		rm -rf "$root"
		mkdir -p "$root"
		dpkg-deb -x "$deb" "$root" || return 1
		# split packaging: the image's exact-version siblings hold the kernel and modules
		for dep in $(dpkg-deb -f "$deb" Depends | tr ',' '\n' |
			sed -nE 's/^ *(linux-(binary|modules|base)-[^ ]+) \(= ([^)]+)\).*/\1=\3/p'); do
			dver=${dep#*=}
			part=$(vm_download "${dep%%=*}" "$dver") || return 1
			dpkg-deb -x "$part" "$root" || return 1
		done
		# Newer packages put modules in usr/lib/modules: one layout for the rest.
		if [ ! -d "$root/lib/modules" ] && [ -d "$root/usr/lib/modules" ]; then
			mkdir -p "$root/lib" && ln -s ../usr/lib/modules "$root/lib/modules"
		fi
		# The package ships no modules.dep (its postinst runs depmod): make one.
		kver=$(ls "$root/lib/modules" 2>/dev/null | head -n 1)
		if [ -n "$kver" ] && [ ! -s "$root/lib/modules/$kver/modules.dep" ]; then
			depmod -b "$root" "$kver" || return 1
		fi
		touch "$root/.unpacked"
	fi
	kver=$(ls "$root/lib/modules" 2>/dev/null | head -n 1)
	local vmlinuz="$root/boot/vmlinuz-$kver"
	[ -f "$vmlinuz" ] || vmlinuz="$root/lib/modules/$kver/vmlinuz"
	[ -n "$kver" ] && [ -f "$vmlinuz" ] ||
		{ vm_log "$deb holds no kernel (lib/modules/*, boot/vmlinuz-* or lib/modules/*/vmlinuz)"; return 1; }

	# redo when the package, the module list or this script changes
	local out="$VM_WORK/$line" stamp
	stamp="$pkg $ver $(echo $VM_MODULES) $(cksum <"$VM_DIR/kernels.sh")"
	if [ -f "$out/kernel.env" ] && [ "$(cat "$out/.stamp" 2>/dev/null)" = "$stamp" ]; then
		return 0
	fi
	rm -rf "$out/modules"
	cp "$vmlinuz" "$out/vmlinuz"
	vm_pick_modules "$root/lib/modules/$kver" "$out/modules/lib/modules/$kver" || return 1
	# the kernel's boot configuration (its CONFIG_LSM default list, CONFIG_BPF_LSM)
	cp "$root/boot/config-$kver" "$out/config" 2>/dev/null ||
		cp "$root/lib/modules/$kver/config" "$out/config" 2>/dev/null || : >"$out/config"
	printf 'KVER=%s\nKPKG=%s\nKPKG_VERSION=%s\n' "$kver" "$pkg" "$ver" >"$out/kernel.env"
	echo "$stamp" >"$out/.stamp"
	vm_log "$line: $pkg $ver (kernel $kver) ready in $out"
}

# vm_pick_modules SRC DST: copies VM_MODULES and their dependencies from the
# module tree SRC into DST, decompressed, with a pruned modules.dep and
# asmguard.load, the modprobe order for boot.
vm_pick_modules() {
	local src=$1 dst=$2
	mkdir -p "$dst"
	# awk does the graph work: index modules.dep by normalised name, close over
	# hard deps and softdep "pre:" deps, print "file" lines for copying and
	# "load" lines in dependency order.
	local plan
	plan=$(awk -v want="$VM_MODULES" -v params="$VM_MODULES_WITH_PARAMS" '
		function norm(s) { sub(/.*\//, "", s); sub(/\.ko(\.(xz|zst|gz))?$/, "", s); gsub(/-/, "_", s); return s }
		FILENAME ~ /modules\.dep$/ {
			f = $1; sub(/:$/, "", f); n = norm(f); file[n] = f; deps[n] = ""
			for (i = 2; i <= NF; i++) deps[n] = deps[n] " " norm($i)
			next
		}
		FILENAME ~ /modules\.builtin$/ { builtin[norm($1)] = 1; next }
		FILENAME ~ /modules\.softdep$/ && $1 == "softdep" {
			n = norm($2); pre = 0
			for (i = 3; i <= NF; i++) {
				if ($i == "pre:") { pre = 1; continue }
				if ($i == "post:") { pre = 0; continue }
				if (pre) soft[n] = soft[n] " " norm($i)
			}
			next
		}
		function visit(n, optional,   k, a, c) {
			if (n in done) return
			if (!(n in file)) {
				if (n in builtin) { done[n] = 1; print "builtin " n; return }
				# (a softdep, optional == 2, may name a crypto alias: say nothing)
				if (!optional) print "missing " n; else if (optional == 1) print "absent " n
				done[n] = 1; return
			}
			done[n] = 1
			c = split(soft[n], a, " "); for (k = 1; k <= c; k++) visit(a[k], 2)
			c = split(deps[n], a, " "); for (k = c; k >= 1; k--) visit(a[k], 0)
			print "file " file[n]
			print "load " n
		}
		END {
			c = split(params, p, /[ \n]+/); for (k = 1; k <= c; k++) withp[norm(p[k])] = 1
			c = split(want, w, /[ \n]+/)
			for (k = 1; k <= c; k++) {
				if (w[k] == "") continue
				opt = sub(/^\?/, "", w[k]); n = norm(w[k])
				# optional modules are shipped, not loaded at boot (tests modprobe them)
				if (opt && !(n in done)) print "skip " n
				visit(n, opt)
			}
		}' "$src/modules.dep" "$src/modules.builtin" "$src/modules.softdep") || return 1

	if grep -q '^missing ' <<<"$plan"; then
		vm_log "modules missing in $src: $(echo "$plan" | awk '/^missing /{printf "%s ", $2}')"
		return 1
	fi
	local absent
	absent=$(echo "$plan" | awk '/^absent /{printf "%s ", $2}')
	[ -z "$absent" ] || vm_log "optional modules not in this kernel: $absent"

	local f out
	: >"$dst/modules.dep"
	for f in $(echo "$plan" | awk '/^file /{print $2}'); do
		out=${f%.xz}; out=${out%.zst}; out=${out%.gz}
		mkdir -p "$dst/$(dirname "$out")"
		case $f in
		*.xz) xz -dc "$src/$f" >"$dst/$out" ;;
		*.zst) zstd -qdc "$src/$f" >"$dst/$out" ;;
		*.gz) gzip -dc "$src/$f" >"$dst/$out" ;;
		*) cp "$src/$f" "$dst/$out" ;;
		esac || return 1
		# the pruned modules.dep line, with decompressed names
		grep -E "^${f//./\\.}:" "$src/modules.dep" | sed -E 's/\.ko\.(xz|zst|gz)/.ko/g' >>"$dst/modules.dep"
	done
	cp "$src/modules.builtin" "$dst/" 2>/dev/null || true
	cp "$src/modules.order" "$dst/" 2>/dev/null || true
	# Boot load order: everything except the modules the init loads with parameters.
	echo "$plan" | awk -v params="$VM_MODULES_WITH_PARAMS" '
		BEGIN { c = split(params, p, /[ \n]+/); for (k = 1; k <= c; k++) { n = p[k]; gsub(/-/, "_", n); skip[n] = 1 } }
		/^skip / { skip[$2] = 1 }
		/^load / { order[++m] = $2 }
		END { for (k = 1; k <= m; k++) if (!(order[k] in skip)) print order[k] }' >"$dst/asmguard.load"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	set -euo pipefail
	. "$VM_DIR/deps.sh"
	vm_deps $VM_LAB_PKGS
	[ $# -ge 1 ] || { echo "usage: $0 LINE..." >&2; exit 2; }
	for l in "$@"; do vm_fetch_kernel "$l"; done
fi
