/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * guard.h - what bpf/guard.bpf.c and its userspace (crates/guard/src/guard/)
 * agree on: map value and key layouts, the event record, hook and mode codes.
 * Every struct is plain fixed-size fields with explicit padding. This header is
 * the source: the Rust side takes the map types from the skeleton generated
 * from the object's BTF, mirrors only struct ag_event (a ring buffer record
 * has no BTF) and its tests read these definitions back (abi.rs). A new hook
 * is an AG_HOOK_* code here, its program, and one row of hooks.rs.
 *
 * Needs __u8/__u32/__u64 from the includer (asmguard_core.h in BPF code).
 */
#ifndef ASMGUARD_GUARD_H
#define ASMGUARD_GUARD_H

/* Per-disk mode (value of the device maps). */
#define AG_MODE_OFF 0     /* in the map but not filtered */
#define AG_MODE_AUDIT 1   /* log, allow */
#define AG_MODE_ENFORCE 2 /* log, deny with -EPERM */

/* Which hook saw the operation (event.hook, stats index). */
#define AG_HOOK_FILE_OPEN 1
#define AG_HOOK_FILE_PERMISSION 2
#define AG_HOOK_FILE_IOCTL 3
#define AG_HOOK_FILE_IOCTL_COMPAT 4
#define AG_HOOK_MMAP_FILE 5
#define AG_HOOK_FILE_MPROTECT 6
#define AG_HOOK_URING_CMD 7
#define AG_HOOK_CGROUP_DEVICE 8
#define AG_HOOK_KERNEL_OPEN 9 /* cgroup/dev beside the LSM programs: opens by number */
#define AG_HOOK_INODE_UNLINK 10 /* the pins: removing one from a container */
#define AG_HOOK_INODE_RMDIR 11
#define AG_HOOK_INODE_RENAME 12
#define AG_NHOOKS 13

/* Stats array (ag_stats), u64 each. Only [AG_STAT_RB_DROPS] is written: events
 * lost because the ring buffer was full. Denials and audits are counted once,
 * per disk and hook, in ag_counts (their totals are its sums); the slots below
 * AG_STAT_RB_DROPS stay for the layout of maps pinned by earlier versions
 * (which counted by hook here too, a second map update per denial). */
#define AG_STAT_RB_DROPS (2 * AG_NHOOKS)
#define AG_NSTATS 32

/* Value of ag_blk / ag_chr (key: kernel dev_t, u32). */
struct ag_disk {
	__u32 disk_id; /* the daemon's number for the label, carried in events */
	__u32 mode;    /* AG_MODE_* */
};

/* ag_majors: one bit per device major (a kernel dev_t has a 12-bit major)
 * that has at least one node in ag_blk (words 0..63) or ag_chr (words
 * AG_MAJOR_WORDS..2*AG_MAJOR_WORDS-1): major M is bit M % 64 of word
 * (chr ? AG_MAJOR_WORDS : 0) + M / 64. Userspace keeps it a superset of the
 * device maps' majors (bits are set before a device goes in, cleared only
 * after its last device of that major has left). */
#define AG_MAJOR_WORDS 64

/* Key of ag_exes: the executable's inode. */
struct ag_exe_key {
	__u64 ino;
	__u32 dev; /* kernel dev_t of the filesystem (s_dev) */
	__u32 pad; /* zero */
};

/* Containers. ag_ctrs: key a cgroup id (u64, the cgroup directory's inode
 * number), value the container whose cgroup it is. A task is judged by the
 * first of its cgroup and that cgroup's ancestors found there. */
#define AG_CTR_ALL 1 /* anything in the container may write */
struct ag_ctr {
	__u32 flags;  /* AG_CTR_* */
	__u32 ctr_id; /* the daemon's number for the container (1..), in events */
};

/* Key of ag_ctr_uids / ag_ctr_gids: a host uid (gid) allowed in container
 * ctr_id (the container's own user translated through its id map). */
struct ag_ctr_id {
	__u32 ctr_id;
	__u32 id;
};

/* The deepest cgroup level searched for a container's cgroup. */
#define AG_CTR_DEPTH 16

/* event.flags */
#define AG_EV_CHR 1 /* the device is a character device (sg, bsg, ng) */
#define AG_EV_CMD 2 /* a passthrough command was read (SG_IO, NVMe admin): its
		       opcode in bits 8-15, the SCSI service action in bits 16-23 */

/* Key of ag_counts: a disk's exact denial (enforce) and audit counts per hook.
 * idx: the hook code for denials, AG_NHOOKS + the hook code for audits. */
struct ag_count_key {
	__u32 disk_id;
	__u32 idx;
};

/* One denial (or audited operation), through the ag_events ring buffer. */
struct ag_event {
	__u64 ts_ns;   /* bpf_ktime_get_ns() */
	__u64 exe_ino; /* caller's executable inode (0 for kernel threads) */
	__u32 exe_dev; /* ... and its filesystem's kernel dev_t */
	__u32 pid;     /* thread group id */
	__u32 tid;
	__u32 uid;     /* real uid */
	__u32 euid;
	__u32 fsuid;
	__u32 egid;
	__u32 dev;     /* kernel dev_t of the device */
	__u32 disk_id;
	__u32 hook;    /* AG_HOOK_* */
	__u32 op;      /* open: f_mode; permission: mask; ioctl: cmd; mmap/mprotect: prot;
			  uring_cmd: cmd_op; cgroup_device: access_type */
	__u32 mode;    /* AG_MODE_AUDIT or AG_MODE_ENFORCE */
	__u32 flags;   /* AG_EV_* */
	__u32 ctr_id;  /* the container (struct ag_ctr) the task is in; 0: none */
	char comm[16];
};

#endif /* ASMGUARD_GUARD_H */
