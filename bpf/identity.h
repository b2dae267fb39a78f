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

#endif /* ASMGUARD_IDENTITY_H */
