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
#define AG_MODE_FENCED 3  /* a reclaim runs: only the daemon's process writes
			     (no allow rule counts); log, deny with -EPERM */

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
#define AG_HOOK_BPF 13 /* asmguard's BPF objects: the daemon's alone (guardian.h) */
#define AG_HOOK_TASK_EXIT 14 /* the daemon's exit frees its record (guardian.h) */
#define AG_HOOK_BPF_MAP 15 /* an fd onto one of asmguard's maps (guardian.h) */
#define AG_HOOK_BPF_PROG 16 /* an fd onto one of its programs */
#define AG_HOOK_FILE_RECEIVE 17 /* one of its objects' fds received (pidfd_getfd, SCM_RIGHTS) */
#define AG_HOOK_PTRACE_ACCESS_CHECK 18 /* root's allowed executables borrowed (identity.h) */
#define AG_HOOK_INODE_PERMISSION 19 /* a pin of one of its links opened (guardian.h) */
#define AG_NHOOKS 20

/* The hooks that judge disks (codes below AG_DISK_HOOKS) are counted per disk
 * in ag_counts: idx = the code for a denial, AG_DISK_HOOKS + the code for an
 * audit. The pin hooks (10..12) are never counted there. Fixed, like
 * AG_STAT_RB_DROPS: maps pinned by an earlier version keep their meaning
 * when a new one adopts them, whatever hooks were added since. */
#define AG_DISK_HOOKS 10

/* Stats array (ag_stats), u64 each. Only [AG_STAT_RB_DROPS] is written: events
 * lost because the ring buffer was full. Denials and audits are counted once,
 * per disk and hook, in ag_counts (their totals are its sums); the slots below
 * AG_STAT_RB_DROPS stay for the layout of maps pinned by earlier versions
 * (which counted by hook here too, a second map update per denial). */
#define AG_STAT_RB_DROPS 20 /* 2 * AG_DISK_HOOKS */
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

/* Allow rules (bpf/rules.h). A rule is a conjunction of up to three
 * conditions: who (an effective, fs or supplementary uid/gid in its users or
 * groups), what (the executable, by inode) and where (the task's cgroup or
 * the nearest of its ancestors that is a configured place: a container, a
 * systemd unit). A task may write when every condition of one rule holds.
 * Each rule is one bit (AG_MAX_RULES); the id maps give, per id, the rules
 * whose condition it satisfies. */
#define AG_MAX_RULES 64

/* ag_rules[0]: which rules are in force and which conditions each has. A
 * rule's bit is set in need_X when it has condition X. */
struct ag_rules {
	__u64 active;
	__u64 need_who;
	__u64 need_exe;
	__u64 need_place;
};

/* Value of ag_rule_exes (key: struct ag_exe_key). */
#define AG_TOOL_QUERY 1 /* a disk-query tool: read-class passthrough as host root,
			   also holding CAP_SYS_RAWIO / CAP_SYS_ADMIN */
#define AG_TOOL_KOPEN 2 /* as host root, may open managed paths in the kernel
			   (device-mapper table loads: multipathd) */
struct ag_exe {
	__u64 rules; /* the rules whose executables include it */
	__u32 tools; /* AG_TOOL_* */
	__u32 pad;
};

/* Value of ag_places (key: a cgroup id, u64, the cgroup directory's inode
 * number). A task is judged by the first of its cgroup and that cgroup's
 * ancestors found there. */
struct ag_place {
	__u64 rules;  /* the rules whose place it is */
	__u32 ctr_id; /* the daemon's number for the container (1..), in events; 0: a unit */
	__u32 pad;
};

/* ag_self[0]: the daemon's own process, whose label and reclaim writes are
 * allowed (its process, not its executable: the same binary started by
 * anyone else is nobody). start_ticks: /proc/PID/stat's starttime (USER_HZ). */
struct ag_self {
	__u32 tgid;
	__u32 pad;
	__u64 start_ticks;
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
	__u32 mode;    /* AG_MODE_AUDIT, AG_MODE_ENFORCE or AG_MODE_FENCED */
	__u32 flags;   /* AG_EV_* */
	__u32 ctr_id;  /* the container (struct ag_place) the task is in; 0: none */
	char comm[16];
};

#endif /* ASMGUARD_GUARD_H */
