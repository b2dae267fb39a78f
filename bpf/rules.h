/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rules.h - who may write a managed disk: the allow rules of bpf/guard.bpf.c.
 *
 * A rule (bpf/guard.h, struct ag_rules) is a conjunction: who (users and
 * groups: effective, fs or supplementary ids), what (the executable, by
 * inode) and where (the nearest configured cgroup of the task: a container,
 * a systemd unit). A task may write when every condition of one rule holds.
 * Each rule is a bit; the id maps give the rules an id satisfies, so a
 * verdict is a handful of lookups and ANDs, read only as far as the answer
 * needs: the euid/fsuid/egid/fsgid lookups first (the database's writers),
 * then the executable, the cgroup walk and the supplementary groups only for
 * rules that still could hold.
 *
 * Besides the rules, two narrow allowances that no configuration widens:
 *  - the daemon's own process (ag_self: thread group id and start time), for
 *    its label and reclaim writes;
 *  - the disk-query tools (ag_rule_exes' `tools`): read-class passthrough
 *    for host root holding CAP_SYS_RAWIO/CAP_SYS_ADMIN (guard.bpf.c), and
 *    multipathd's in-kernel opens of the paths it maps.
 *
 * Needs asmguard_core.h and guard.h first.
 */
#ifndef ASMGUARD_RULES_H
#define ASMGUARD_RULES_H

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ag_rules);
} ag_rules SEC(".maps");

/* uid (gid) -> the rules whose users (groups) hold it. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u64);
} ag_rule_uids SEC(".maps"), ag_rule_gids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct ag_exe_key);
	__type(value, struct ag_exe);
} ag_rule_exes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct ag_place);
} ag_places SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ag_self);
} ag_self SEC(".maps");

/* How a program reads the calling task (verdict()'s `reader`):
 *  AG_IDS       bpf_get_current_uid_gid alone (5.10's cgroup-device programs);
 *  AG_TASK      the task by CO-RE probe reads, a helper call per field
 *               (the cgroup-device and sleepable programs);
 *  AG_TASK_BTF  by plain loads where the kernel has bpf_get_current_task_btf
 *               (5.11+), else as AG_TASK (the LSM and fmod_ret programs:
 *               every write of the allowed writer comes through here). */
enum ag_reader {
	AG_IDS,
	AG_TASK,
	AG_TASK_BTF,
};

/* Whether this kernel has bpf_get_current_task_btf: a CO-RE constant, so
 * the verifier walks only one side of each `if` on it (5.10 never sees the
 * helper or a plain load through the task). Tested at every use rather than
 * kept in a variable the compiler might spill. */
#define AG_HAVE_TASK_BTF bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_get_current_task_btf)

/* The calling task, as far as it was read. btf: t and c are BTF pointers,
 * their fields read by plain loads (a compile-time constant: the program's
 * reader; each use also tests AG_HAVE_TASK_BTF). */
/* Never BPF_CORE_READ(k->t, ...): the macro wraps its whole first argument
 * in __builtin_preserve_access_index, so the load of k->t itself becomes a
 * CO-RE relocation against struct ag_task, which no kernel's BTF has, and
 * libbpf poisons that instruction (the verifier refuses "invalid CO-RE
 * relocation" on the probe-read side). Copy the pointer to a local first. */
struct ag_task {
	struct task_struct *t;
	const struct cred *c;
	bool btf;
};

#define AG_BTF(k) ((k)->btf && AG_HAVE_TASK_BTF)

static __always_inline __u64 id_rules(void *map, __u32 id)
{
	__u64 *m = bpf_map_lookup_elem(map, &id);

	return m ? *m : 0;
}

/* The rules whose users or groups hold the effective or fs uid or gid: one
 * lookup each where they agree (fsuid follows euid unless setfsuid() moved
 * it). The four ids sit together in struct cred (euid, egid, fsuid, fsgid
 * since 2.6.29): one probe read where fields cost a helper call each, when
 * the running kernel's offsets say so. */
struct ag_ids {
	__u32 euid, egid, fsuid, fsgid;
};

static __always_inline __u64 who_rules(struct ag_task *k)
{
	const struct cred *c = k->c;
	struct ag_ids id = {};
	__u64 m;

	if (AG_BTF(k)) {
		id.euid = c->euid.val;
		id.egid = c->egid.val;
		id.fsuid = c->fsuid.val;
		id.fsgid = c->fsgid.val;
	} else {
		id.euid = BPF_CORE_READ(c, euid.val);
		id.egid = BPF_CORE_READ(c, egid.val);
		id.fsuid = BPF_CORE_READ(c, fsuid.val);
		id.fsgid = BPF_CORE_READ(c, fsgid.val);
	}
	m = id_rules(&ag_rule_uids, id.euid) | id_rules(&ag_rule_gids, id.egid);
	if (id.fsuid != id.euid)
		m |= id_rules(&ag_rule_uids, id.fsuid);
	if (id.fsgid != id.egid)
		m |= id_rules(&ag_rule_gids, id.fsgid);
	return m;
}

/* The rules whose groups hold one of the first AG_MAX_GROUPS supplementary
 * groups (the lowest gids: the kernel keeps them sorted): the database's
 * users are often in the admin groups by supplementary membership only
 * (grid: primary oinstall, asmadmin beside). Stops once every rule of
 * `want` is found. */
#define AG_MAX_GROUPS 64
static __always_inline __u64 groups_rules(const struct cred *c, __u64 want)
{
	struct group_info *gi = BPF_CORE_READ(c, group_info);
	int n = BPF_CORE_READ(gi, ngroups);
	__u64 m = 0;
	__u32 g;

	for (int i = 0; i < AG_MAX_GROUPS; i++) {
		if (i >= n || (m & want) == want)
			break;
		if (bpf_core_read(&g, sizeof(g), &gi->gid[i]))
			break;
		m |= id_rules(&ag_rule_gids, g);
	}
	return m;
}

/* The executable's entry (rules and tool flags); NULL: none. */
static __always_inline struct ag_exe *task_exe(struct ag_task *k)
{
	struct ag_exe_key key = { .pad = 0 };
	struct task_struct *t = k->t;
	struct inode *ino;

	if (AG_BTF(k)) {
		ino = k->t->mm->exe_file->f_inode;
		key.ino = ino->i_ino;
		if (!key.ino)
			return 0;
		key.dev = ino->i_sb->s_dev;
	} else {
		ino = BPF_CORE_READ(t, mm, exe_file, f_inode);
		key.ino = BPF_CORE_READ(ino, i_ino);
		if (!key.ino)
			return 0;
		key.dev = BPF_CORE_READ(ino, i_sb, s_dev);
	}
	return bpf_map_lookup_elem(&ag_rule_exes, &key);
}

/* The task's place: the first of its default-hierarchy (cgroup v2) cgroup
 * and that cgroup's ancestors, AG_CTR_DEPTH of them at most, in ag_places.
 * NULL: in none. */
static __always_inline struct ag_place *task_place(struct ag_task *k)
{
	struct task_struct *t = k->t;
	struct cgroup *cg;
	struct cgroup_subsys_state *up;
	struct ag_place *p;
	__u64 id;

	if (AG_BTF(k))
		cg = k->t->cgroups->dfl_cgrp;
	else
		cg = BPF_CORE_READ(t, cgroups, dfl_cgrp);
	for (int i = 0; i < AG_CTR_DEPTH; i++) {
		if (!cg)
			break;
		if (AG_BTF(k))
			id = cg->kn->id;
		else
			id = BPF_CORE_READ(cg, kn, id);
		p = bpf_map_lookup_elem(&ag_places, &id);
		if (p)
			return p;
		if (AG_BTF(k))
			up = cg->self.parent;
		else
			up = BPF_CORE_READ(cg, self.parent);
		if (!up)
			break;
		if (AG_BTF(k))
			cg = up->cgroup;
		else
			cg = BPF_CORE_READ(up, cgroup);
	}
	return 0;
}

/* ---- Root's executables borrowed (issue 41, point 4) ----
 *
 * A rule whose binary runs as root ("uid 0 AND crsd.bin") is held by any
 * root process running that file: root, attaching to it with ptrace (or
 * asking to be traced and exec'ing it), or taking its descriptors with
 * pidfd_getfd, writes through it. A root task running an allowed
 * executable is not that executable's while another task traces it, nor
 * ever after another task got attach-level access to it through a system
 * call (ptrace attach, pidfd_getfd, process_vm_readv/writev: the kernel's
 * PTRACE_MODE_ATTACH_REALCREDS check; ag_ptrace_access_check records it in
 * ag_borrowed by tgid and start). /proc/PID/mem is checked with the
 * opener's fs credentials (..._FSCREDS), which /proc/PID/stack readers
 * share: not recorded there, but opened for writing it is, by file_open
 * (identity.h, mem_open_rule); its readers cost nothing. A rule's binary run
 * by its home's owner (not root) is not touched: `strace -p` of a running
 * oracle costs it no write. */
#define AG_PTRACE_MODE_ATTACH 0x02
#define AG_PTRACE_MODE_REALCREDS 0x10

struct task_struct___agp {
	unsigned int ptrace;
} __attribute__((preserve_access_index));

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);   /* tgid, in the initial pid namespace */
	__type(value, __u64); /* its leader's start_boottime */
} ag_borrowed SEC(".maps");

/* Whether the task is root and traced, or was borrowed (ag_borrowed). */
static __always_inline bool root_borrowed(struct ag_task *k)
{
	struct task_struct *t = k->t;
	const struct cred *c = k->c; /* (a local: no CO-RE access through ag_task) */
	__u32 tgid;
	__u64 *start;

	if (BPF_CORE_READ(c, euid.val) != 0)
		return false;
	if (BPF_CORE_READ((struct task_struct___agp *)t, ptrace))
		return true;
	tgid = BPF_CORE_READ(t, tgid);
	start = bpf_map_lookup_elem(&ag_borrowed, &tgid);
	return start && *start == BPF_CORE_READ(t, group_leader, start_boottime);
}

/* Whether one rule holds whole for the task, in straight-line steps (one
 * path for the verifier to walk per condition): the ids first, and when a
 * rule of who alone holds, nothing more; then the supplementary groups only
 * for rules the ids left unsatisfied; then the executable and the place,
 * each only when a candidate rule needs it. *place: the place when read. */
static __always_inline bool rules_allow(struct ag_task *k, struct ag_place **place)
{
	__u32 zero = 0;
	struct ag_rules *rs = bpf_map_lookup_elem(&ag_rules, &zero);
	struct ag_exe *x;
	struct ag_place *p;
	__u64 who, cand, missing;

	if (!rs)
		return false;
	who = who_rules(k);
	cand = rs->active & (who | ~rs->need_who);
	if (cand & ~(rs->need_exe | rs->need_place))
		return true;
	missing = rs->active & rs->need_who & ~who;
	if (missing) {
		who |= groups_rules(k->c, missing);
		cand = rs->active & (who | ~rs->need_who);
	}
	if (cand & rs->need_exe) {
		x = task_exe(k);
		if (x && root_borrowed(k))
			x = 0;
		cand &= (x ? x->rules : 0) | ~rs->need_exe;
	}
	if (cand & rs->need_place) {
		p = task_place(k);
		*place = p;
		cand &= (p ? p->rules : 0) | ~rs->need_place;
	}
	return cand != 0;
}

/* Whether the task is the daemon's own process. */
static __always_inline bool is_daemon(struct task_struct *t)
{
	__u32 zero = 0;
	struct ag_self *s = bpf_map_lookup_elem(&ag_self, &zero);
	__u64 start;

	if (!s || !s->tgid || BPF_CORE_READ(t, tgid) != s->tgid)
		return false;
	/* /proc/PID/stat: nsec_to_clock_t(start_boottime), USER_HZ = 100 */
	start = BPF_CORE_READ(t, group_leader, start_boottime);
	return start / (1000000000ULL / 100) == s->start_ticks;
}

/* Whether the task runs as host root a disk-query tool with flag `tool`. */
static __always_inline bool runs_tool(struct ag_task *k, __u32 tool)
{
	const struct cred *c = k->c;
	struct ag_exe *x;

	if (BPF_CORE_READ(c, euid.val) != 0 || BPF_CORE_READ(c, user_ns, level) != 0)
		return false;
	x = task_exe(k);
	return x && (x->tools & tool);
}

/* Whether the task holds capability `cap` in the initial user namespace
 * (the kernel's capable()). */
static __always_inline bool host_capable(const struct cred *c, int cap)
{
	struct ag_kernel_cap caps = {};

	if (BPF_CORE_READ(c, user_ns, level) != 0)
		return false;
	if (bpf_core_read(&caps, sizeof(caps), &c->cap_effective))
		return true; /* unreadable: assume the worst */
	return (caps.val >> cap) & 1;
}

/* Reads the calling task as `reader` says (AG_TASK or AG_TASK_BTF). */
static __always_inline void task_init(struct ag_task *k, enum ag_reader reader)
{
	k->btf = reader == AG_TASK_BTF;
	if (AG_BTF(k)) {
		k->t = bpf_get_current_task_btf();
		k->c = k->t->cred;
	} else {
		struct task_struct *t = (struct task_struct *)bpf_get_current_task();

		k->t = t;
		k->c = BPF_CORE_READ(t, cred);
	}
}

/* Whether the task is a kernel thread. */
static __always_inline bool task_kthread(struct ag_task *k)
{
	if (AG_BTF(k))
		return k->t->flags & PF_KTHREAD;
	struct task_struct *t = k->t;

	return BPF_CORE_READ(t, flags) & PF_KTHREAD;
}

/* ---- multipathd's in-kernel opens (issue 41, point 4) ----
 *
 * multipathd (AG_TOOL_KOPEN) may open the paths of a managed disk in the
 * kernel because the dm multipath target does so when multipathd loads a
 * table. Any in-kernel open by a task running that file was allowed: root,
 * injected into multipathd, enabled an nvmet namespace over a managed disk
 * (a write() to configfs). Now only inside a device-mapper ioctl: the task's
 * current system call is ioctl, and the last ioctl this thread made (the
 * kernel calls security_file_ioctl before it runs any: so this one) was a
 * table load or target message on the dm control device (misc 10:236; the
 * dm driver reads only the ioctl's type and number). The file_ioctl
 * programs leave the mark in ag_dm_ioctl (dm_ioctl_mark) and take it off on
 * the thread's next ioctl of anything else; nvmet's, LIO's, md's opens come
 * from other calls. x86_64: the system call number is read from the task's
 * saved user registers at the top of its kernel stack (16 KiB, 32 KiB with
 * KASAN; 16 bytes lower on FRED kernels: the one whose segment registers are
 * user's). Elsewhere, or when none is, multipathd's in-kernel opens are
 * refused. */
#define AG_DM_CTL_DEV ((10U << 20) | 236U) /* the kernel's dev_t of misc 10:236 */
#define AG_DM_IOCTL_TYPE 0xfd
#define AG_DM_TABLE_LOAD_NR 9
#define AG_DM_TARGET_MSG_NR 14
#define AG_S_IFMT 00170000
#define AG_S_IFCHR 0020000

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32); /* thread id */
	__type(value, __u8);
} ag_dm_ioctl SEC(".maps");

struct task_struct___agk {
	void *stack;
} __attribute__((preserve_access_index));

/* ioctl(file, cmd) by the current thread: marks it when it is a dm table
 * load or target message, unmarks it otherwise. Never refuses. */
static __always_inline void dm_ioctl_mark(struct file *file, unsigned int cmd)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct inode *ino = BPF_CORE_READ(file, f_inode);
	__u8 one = 1;

	if (((cmd >> 8) & 0xff) == AG_DM_IOCTL_TYPE &&
	    ((cmd & 0xff) == AG_DM_TABLE_LOAD_NR || (cmd & 0xff) == AG_DM_TARGET_MSG_NR) &&
	    (BPF_CORE_READ(ino, i_mode) & AG_S_IFMT) == AG_S_IFCHR &&
	    BPF_CORE_READ(ino, i_rdev) == AG_DM_CTL_DEV) {
		bpf_map_update_elem(&ag_dm_ioctl, &tid, &one, BPF_ANY);
		return;
	}
	if (bpf_map_lookup_elem(&ag_dm_ioctl, &tid))
		bpf_map_delete_elem(&ag_dm_ioctl, &tid);
}

/* The current system call's number (x86_64), -1 when it cannot be told. */
static __always_inline long current_syscall(void)
{
#if defined(__TARGET_ARCH_x86) || defined(__x86_64__)
	struct task_struct___agk *t = (void *)bpf_get_current_task();
	char *stack = BPF_CORE_READ(t, stack);
	char *regs;
	__u64 cs = 0, ss = 0, nr = 0;

	/* struct pt_regs (168 bytes): r15 .. di, orig_ax at 120, ip, cs at 136,
	 * flags, sp, ss at 160 */
	if (!stack)
		return -1;
	/* the stack 16 or 32 KiB, with 0 or 16 bytes of padding above the
	 * registers (FRED kernels reserve 16); FRED keeps event bits above the
	 * 16-bit selectors in the cs and ss words */
	for (int i = 0; i < 4; i++) {
		regs = stack + ((i & 1) ? 32768 : 16384) - ((i & 2) ? 16 : 0) - 168;
		if (bpf_probe_read_kernel(&cs, 8, regs + 136) || bpf_probe_read_kernel(&ss, 8, regs + 160))
			continue;
		if ((cs & 0xffff) == 0x33 && (ss & 0xffff) == 0x2b &&
		    !bpf_probe_read_kernel(&nr, 8, regs + 120))
			return (long)nr;
	}
#endif
	return -1;
}

/* Whether the current thread is inside a dm table load or target message. */
static __always_inline bool in_dm_ioctl(void)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	return bpf_map_lookup_elem(&ag_dm_ioctl, &tid) && current_syscall() == 16 /* ioctl */;
}

/* Whether the task (task_init) may do a write-class operation (hook
 * `hook`): a rule holds, or it is the daemon, or multipathd's in-kernel open.
 * *ctr_id: the container it is in (0: none), for the event. */
static __always_inline bool task_allowed(struct ag_task *k, __u32 *ctr_id, __u32 hook)
{
	struct ag_place *p = 0;

	if (rules_allow(k, &p))
		return true;
	if (is_daemon(k->t))
		return true;
	if (hook == AG_HOOK_KERNEL_OPEN && runs_tool(k, AG_TOOL_KOPEN) && in_dm_ioctl())
		return true;
	/* the container for the event: no second walk when the rules read it */
	if (!p)
		p = task_place(k);
	*ctr_id = p ? p->ctr_id : 0;
	return false;
}

/* The same from the ids of who_ids() (programs that cannot read the task):
 * the rules with users or groups, judged by those alone (their other
 * conditions cannot be read here: the daemon says so). */
static __always_inline bool ids_allowed(__u32 uid, __u32 gid)
{
	__u32 zero = 0;
	struct ag_rules *rs = bpf_map_lookup_elem(&ag_rules, &zero);

	if (!rs)
		return false;
	return rs->active & rs->need_who & (id_rules(&ag_rule_uids, uid) | id_rules(&ag_rule_gids, gid));
}

#endif /* ASMGUARD_RULES_H */
