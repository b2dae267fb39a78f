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

/* Another task got at `child`'s memory (rules.h: root's executables
 * borrowed): a root task running an allowed executable is recorded in
 * ag_borrowed. `child` read with probe reads alone (a BTF pointer or not). */
static __always_inline void borrow_task(struct task_struct *child)
{
	struct ag_task ck = { .btf = false };
	__u32 tgid;
	__u64 start;

	tgid = BPF_CORE_READ(child, tgid);
	if (tgid == 0 || tgid == (__u32)(bpf_get_current_pid_tgid() >> 32))
		return;
	const struct cred *c = BPF_CORE_READ(child, cred);

	if (BPF_CORE_READ(c, euid.val) != 0)
		return;
	ck.t = child;
	ck.c = c;
	if (!task_exe(&ck))
		return;
	start = BPF_CORE_READ(child, group_leader, start_boottime);
	bpf_map_update_elem(&ag_borrowed, &tgid, &start, BPF_ANY);
}

/* Another task gets attach-level access to `child` through a system call
 * (ptrace attach, pidfd_getfd, process_vm_*: PTRACE_MODE_ATTACH_REALCREDS).
 * Never refuses. Needs rules.h. */
static __always_inline int ptrace_access_rule(struct task_struct *child, unsigned int mode)
{
	if ((mode & (AG_PTRACE_MODE_ATTACH | AG_PTRACE_MODE_REALCREDS)) !=
	    (AG_PTRACE_MODE_ATTACH | AG_PTRACE_MODE_REALCREDS))
		return 0;
	borrow_task(child);
	return 0;
}

/* /proc/PID/mem (and /proc/PID/task/TID/mem) opened for writing: the kernel
 * checks it with the opener's fs credentials (PTRACE_MODE_ATTACH_FSCREDS), as
 * it does /proc/PID/stack's readers, so ptrace_access_rule does not record
 * it; file_open does, here, for writers only: the target's task from the
 * proc inode (container_of struct proc_inode: its struct pid, whose
 * PIDTYPE_PID task is the one the file names). Readers (mem read-only,
 * stack, maps) cost nothing but the f_mode test before this. */
#define AG_PROC_SUPER_MAGIC 0x9fa0
#define AG_NAME_MEM 0x006d656dU /* "mem\0", little-endian */

struct hlist_node___agm {
	struct hlist_node___agm *next;
} __attribute__((preserve_access_index));

struct hlist_head___agm {
	struct hlist_node___agm *first;
} __attribute__((preserve_access_index));

struct pid___agm {
	struct hlist_head___agm tasks[4]; /* PIDTYPE_MAX */
} __attribute__((preserve_access_index));

struct proc_inode___agm {
	struct pid___agm *pid;
	struct inode vfs_inode;
} __attribute__((preserve_access_index));

struct task_struct___agm {
	struct hlist_node___agm pid_links[4];
} __attribute__((preserve_access_index));

static __always_inline void mem_open_rule(struct file *file)
{
	const unsigned char *name;
	struct pid___agm *pid;
	struct hlist_node___agm *first;
	__u64 inode;
	__u32 w = 0;

	if (BPF_CORE_READ(file, f_inode, i_sb, s_magic) != AG_PROC_SUPER_MAGIC)
		return;
	name = BPF_CORE_READ(file, f_path.dentry, d_name.name);
	if (!name || bpf_probe_read_kernel(&w, sizeof(w), name) || w != AG_NAME_MEM)
		return;
	inode = (__u64)BPF_CORE_READ(file, f_inode);
	if (!inode)
		return;
	pid = BPF_CORE_READ((struct proc_inode___agm *)(inode - bpf_core_field_offset(struct proc_inode___agm, vfs_inode)),
			    pid);
	if (!pid)
		return;
	first = BPF_CORE_READ(pid, tasks[0].first);
	if (!first)
		return;
	borrow_task((struct task_struct *)((__u64)first -
					   bpf_core_field_offset(struct task_struct___agm, pid_links)));
}

#endif /* ASMGUARD_IDENTITY_H */
