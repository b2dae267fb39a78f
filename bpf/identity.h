/* SPDX-License-Identifier: GPL-2.0 */
/*
 * identity.h - who the caller is, as an event (struct ag_event) records it:
 * pid, thread, real, effective and fs ids and the executable by inode. Who
 * may write (the allow rules, the daemon, the disk-query tools) is
 * bpf/rules.h; the container an event names comes from there too.
 *
 * Used by bpf/guard.bpf.c. Needs asmguard_core.h and guard.h first.
 */
#ifndef ASMGUARD_IDENTITY_H
#define ASMGUARD_IDENTITY_H

/* The caller's identity, read with CO-RE probe reads (usable from the LSM
 * and the cgroup_device programs alike). */
static __always_inline void who(struct ag_event *e)
{
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	const struct cred *c = BPF_CORE_READ(t, cred);
	struct file *exe = BPF_CORE_READ(t, mm, exe_file);
	__u64 pid_tgid = bpf_get_current_pid_tgid();

	e->pid = pid_tgid >> 32;
	e->tid = (__u32)pid_tgid;
	e->uid = BPF_CORE_READ(c, uid.val);
	e->euid = BPF_CORE_READ(c, euid.val);
	e->fsuid = BPF_CORE_READ(c, fsuid.val);
	e->egid = BPF_CORE_READ(c, egid.val);
	e->exe_ino = BPF_CORE_READ(exe, f_inode, i_ino);
	e->exe_dev = BPF_CORE_READ(exe, f_inode, i_sb, s_dev);
}

/* The caller's identity where only bpf_get_current_uid_gid is available (the
 * cgroup-device programs of 5.10-era kernels): real uid and gid, no pid, no
 * executable, no supplementary or effective ids. */
static __always_inline void who_ids(struct ag_event *e)
{
	__u64 ug = bpf_get_current_uid_gid();

	e->uid = e->euid = e->fsuid = (__u32)ug;
	e->egid = ug >> 32;
}

/* Another task gets attach-level access to `child` through a system call
 * (rules.h: root's executables borrowed): a root task running an allowed
 * executable is recorded in ag_borrowed. Never refuses. Needs rules.h. */
static __always_inline int ptrace_access_rule(struct task_struct *child, unsigned int mode)
{
	struct ag_task ck = { .btf = false };
	__u32 tgid;
	__u64 start;

	if ((mode & (AG_PTRACE_MODE_ATTACH | AG_PTRACE_MODE_REALCREDS)) !=
	    (AG_PTRACE_MODE_ATTACH | AG_PTRACE_MODE_REALCREDS))
		return 0;
	tgid = BPF_CORE_READ(child, tgid);
	if (tgid == (__u32)(bpf_get_current_pid_tgid() >> 32))
		return 0;
	const struct cred *c = BPF_CORE_READ(child, cred);

	if (BPF_CORE_READ(c, euid.val) != 0)
		return 0;
	ck.t = child;
	ck.c = c;
	if (!task_exe(&ck))
		return 0;
	start = BPF_CORE_READ(child, group_leader, start_boottime);
	bpf_map_update_elem(&ag_borrowed, &tgid, &start, BPF_ANY);
	return 0;
}

#endif /* ASMGUARD_IDENTITY_H */
