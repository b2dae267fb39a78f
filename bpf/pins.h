/* SPDX-License-Identifier: GPL-2.0 */
/*
 * pins.h - tamper protection of the pins (the pin rule of bpf/guard.bpf.c).
 *
 * Root in a container must not remove asmguard by unlinking its pins (bpffs
 * is not in a container unless mounted in: then the unlink is denied). A task
 * outside the host's pid namespace may not unlink, remove or rename anything
 * in the pin directory (or it); the host's root still can. The programs
 * (inode_unlink, inode_rmdir, inode_rename and their fmod_ret twins) are in
 * guard.bpf.c; userspace fills ag_pin_dirs at load (crates/guard, pins.rs).
 *
 * Used by bpf/guard.bpf.c. Needs asmguard_core.h and guard.h first.
 */
#ifndef ASMGUARD_PINS_H
#define ASMGUARD_PINS_H

/* The pin directory and its maps/ and links/ directories, by inode (an
 * ag_exe_key: {ino, s_dev}), filled at load: no task outside the host's pid
 * namespace may remove or rename what is in them. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, struct ag_exe_key);
	__type(value, __u8);
} ag_pin_dirs SEC(".maps");

/* Whether `i` is the pin directory or one of its subdirectories. */
static __always_inline bool pin_dir(struct inode *i)
{
	struct ag_exe_key k = { .pad = 0 };

	if (!i)
		return false;
	k.ino = BPF_CORE_READ(i, i_ino);
	k.dev = BPF_CORE_READ(i, i_sb, s_dev);
	return bpf_map_lookup_elem(&ag_pin_dirs, &k) != NULL;
}

/* Removing (or renaming) `dentry` from directory `dir`: -EPERM when either is
 * a pin directory and the task is outside the host's pid namespace. The pid
 * namespace first: two loads decide for the host's own tasks. */
static __always_inline int pin_rule(struct inode *dir, struct dentry *dentry)
{
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();

	if (BPF_CORE_READ(t, thread_pid, level) == 0)
		return 0;
	if (pin_dir(dir) || pin_dir(BPF_CORE_READ(dentry, d_inode)))
		return -EPERM;
	return 0;
}

#endif /* ASMGUARD_PINS_H */
