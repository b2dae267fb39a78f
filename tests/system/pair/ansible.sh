# shellcheck shell=bash
# tests/system/pair/ansible.sh - rollout with the project's Ansible role
# (contrib/ansible) onto both nodes, from the host, over SSH (each node's sshd on a
# forwarded host loopback port): the first run labels four shared disks (vdf-vdi)
# once (the role labels one host at a time: a writes, b adopts), a second run
# reports changed=0 on both nodes, both nodes list the four labels and refuse
# root's write on each, and a play against a disk holding ext4 (vdj) fails with
# asmguard's own message and changes no byte of it (sha256 of the shared file on
# the host, before and after).
# A two-node test (tests/system/pair.sh runs it): sourced by the host's driver, it
# runs commands on the nodes (on NODE CMD) and on the host (ansible-playbook), and
# reports through the labs' result contract (pass, fail, ok, refused, same).

# ans_play VARS_JSON: ansible-playbook with the role against both nodes; RC, OUT.
ans_play() {
	printf '%s\n' "$1" >"$ANS/vars.json"
	OUT=$(cd "$ANS" && env ANSIBLE_ROLES_PATH="$SYS_ROOT/contrib/ansible/roles" \
		ANSIBLE_HOME="$ANS/home" ANSIBLE_LOCAL_TEMP="$ANS/tmp" ANSIBLE_NOCOLOR=1 \
		ANSIBLE_HOST_KEY_CHECKING=False ANSIBLE_PIPELINING=True ANSIBLE_SSH_CONTROL_PATH_DIR="$ANS_CP" \
		ANSIBLE_INVENTORY_UNPARSED_WARNING=false ANSIBLE_DEPRECATION_WARNINGS=false \
		timeout 300 ansible-playbook -i inventory.ini -e @vars.json play.yml 2>&1)
	RC=$?
	echo "$OUT" >>"$ANS/playbook.log"
}
# ans_recap NODE KEY: KEY's number in NODE's PLAY RECAP line of the last play.
ans_recap() {
	printf '%s\n' "$OUT" | awk -v n="$1" -v k="$2=" '$1 == n && $2 == ":" {
		for (i = 3; i <= NF; i++) if (index($i, k) == 1) print substr($i, length(k) + 1) }' | tail -n 1
}

pair_ansible_run() {
	ANS=$w/ansible
	ANS_CP=$(mktemp -d /tmp/agpair-cp.XXXXXX) # ssh's control sockets want a short path
	rm -rf "$ANS"
	mkdir -p "$ANS/home" "$ANS/tmp"
	local n disks want
	{
		for n in a b; do
			echo "$n ansible_host=127.0.0.1 ansible_port=${SSHPORT[$n]} ansible_user=root" \
				"ansible_ssh_private_key_file=$w/id ansible_python_interpreter=/usr/bin/python3" \
				"ansible_ssh_common_args='-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null'"
		done
	} >"$ANS/inventory.ini"
	printf -- '- name: asmguard onto the pair\n  hosts: all\n  gather_facts: false\n  roles:\n    - role: asmguard\n' \
		>"$ANS/play.yml"
	# sshd on both nodes, through the forwards (60 s at most)
	local i=0
	until OUT=$(cd "$ANS" && env ANSIBLE_HOME="$ANS/home" ANSIBLE_LOCAL_TEMP="$ANS/tmp" \
		ANSIBLE_HOST_KEY_CHECKING=False ANSIBLE_SSH_CONTROL_PATH_DIR="$ANS_CP" \
		timeout 60 ansible all -i inventory.ini -m ansible.builtin.ping 2>&1); do
		i=$((i + 1))
		[ $i -lt 12 ] || break
		sleep 5
	done
	if [ "$(printf '%s\n' "$OUT" | grep -c '"ping": "pong"')" = 2 ]; then
		pass ansible.ssh-both-nodes "ansible ping answered by a and b through ports ${SSHPORT[a]} and ${SSHPORT[b]}"
	else
		fail ansible.ssh-both-nodes "$OUT"
		rm -rf "$ANS_CP"
		return
	fi

	disks='[{"label": "PAIRAN1", "device": "/dev/vdf"}, {"label": "PAIRAN2", "device": "/dev/vdg"},
		{"asmlabel": "pairan3", "device": "/dev/vdh"}, {"label": "PAIRAN4", "device": "/dev/vdi"}]'
	local vars='{"asmguard_install_package": false, "asmguard_metrics_listen": "0.0.0.0:9465",
		"asmguard_disks": '"$disks"'}'
	local t0=$SECONDS
	ans_play "$vars"
	info "ansible: first run $((SECONDS - t0)) s"
	if [ "$RC" = 0 ] && [ "$(ans_recap a failed)" = 0 ] && [ "$(ans_recap b failed)" = 0 ] &&
		[ "$(ans_recap a changed)" -gt 0 ] 2>/dev/null; then
		pass ansible.first-run "a: changed=$(ans_recap a changed), b: changed=$(ans_recap b changed)"
	else
		fail ansible.first-run "exit $RC: $(printf '%s\n' "$OUT" | tail -n 25)"
	fi
	# the labels: written once (on a: the role goes one host at a time), the same on both
	want=$(printf 'PAIRAN1 /dev/vdf\nPAIRAN2 /dev/vdg\nPAIRAN3 /dev/vdh\nPAIRAN4 /dev/vdi')
	for n in a b; do
		# listed in enforce by this node's daemon, its link on the device
		on $n "for l in PAIRAN1 PAIRAN2 PAIRAN3 PAIRAN4; do i=0; until listed \$l || [ \$i -ge 100 ]; do i=\$((i+1)); sleep 0.1; done; listed \$l && echo \$l \$(readlink -f /dev/asmguard/disks/\$l); done"
		same "ansible.$n-lists-four-labels" "$want" "$OUT"
	done
	t0=$SECONDS
	ans_play "$vars"
	info "ansible: second run $((SECONDS - t0)) s"
	if [ "$RC" = 0 ] && [ "$(ans_recap a changed)" = 0 ] && [ "$(ans_recap b changed)" = 0 ] &&
		[ "$(ans_recap a failed)" = 0 ] && [ "$(ans_recap b failed)" = 0 ]; then
		pass ansible.second-run-changes-nothing "a and b: changed=0 failed=0"
	else
		fail ansible.second-run-changes-nothing "exit $RC: $(printf '%s\n' "$OUT" | grep -A3 'PLAY RECAP')"
	fi
	for n in a b; do
		for d in vdf vdi; do
			on $n "write_as root /dev/$d 2 R"
			refused "ansible.$n-root-denied-$d" "Operation not permitted"
		done
		on $n "write_as grid /dev/asmguard/disks/PAIRAN1 40 G"
		ok "ansible.$n-grid-writes-PAIRAN1"
	done

	# a disk holding a file system: the play fails with asmguard's message, no byte written
	local before after
	before=$(sha256sum <"$w/sh10.img" | cut -d' ' -f1)
	ans_play '{"asmguard_install_package": false, "asmguard_metrics_listen": "0.0.0.0:9465",
		"asmguard_disks": [{"label": "PAIRANX", "device": "/dev/vdj"}]}'
	after=$(sha256sum <"$w/sh10.img" | cut -d' ' -f1)
	if [ "$RC" != 0 ] && grep -q '/dev/vdj: .*holds data' <<<"$OUT"; then
		pass ansible.data-disk-fails-the-play "$(printf '%s\n' "$OUT" | grep -m1 'holds data')"
	else
		fail ansible.data-disk-fails-the-play "exit $RC: $(printf '%s\n' "$OUT" | tail -n 15)"
	fi
	same ansible.data-disk-unchanged "$before" "$after" "sha256 of the ext4 disk before and after the failed play"
	for n in a b; do
		on $n "$C lsdsk | grep -c '^PAIRANX' || true"
		same "ansible.$n-no-label-on-data-disk" 0 "$OUT"
	done
	rm -rf "$ANS_CP"
}
