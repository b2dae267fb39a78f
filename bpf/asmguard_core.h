/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * asmguard_core.h - the CO-RE helpers of asmguard's BPF programs, in one header.
 *
 * Instead of a generated multi-megabyte vmlinux.h, this header declares only the
 * kernel types and fields that asmguard's programs touch. Every struct carries
 * __attribute__((preserve_access_index)), so clang emits CO-RE relocations for
 * each field access and libbpf fixes the offsets up against the running
 * kernel's BTF (/sys/kernel/btf/vmlinux) at load time: one object, many kernels.
 *
 * Rules for adding to it:
 *  - declare a field with the kernel's exact type (size matters for relocation);
 *  - declare only what a program reads; order and missing fields do not matter;
 *  - keep uapi constants here as plain #defines/enums with their kernel values.
 *
 * The libbpf headers (bpf_helpers.h, bpf_tracing.h, bpf_core_read.h) come from
 * the libbpf that libbpf-sys vendors: libbpf-cargo puts them on clang's include
 * path when crates/guard/build.rs compiles bpf/\*.bpf.c.
 */
#ifndef ASMGUARD_CORE_H
#define ASMGUARD_CORE_H

/* ---- basic types (x86_64 and arm64 agree on all of these) ---- */
typedef signed char __s8;
typedef unsigned char __u8;
typedef signed short __s16;
typedef unsigned short __u16;
typedef signed int __s32;
typedef unsigned int __u32;
typedef signed long long __s64;
typedef unsigned long long __u64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef _Bool bool;
#define true 1
#define false 0

typedef __u32 dev_t;        /* kernel dev_t: major << 20 | minor */
typedef unsigned short umode_t;
typedef unsigned int fmode_t;
typedef __u32 uid_t;
typedef __u32 gid_t;
typedef long long loff_t;

/* ---- uapi: the map types and update flags the programs use ---- */
enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_LRU_HASH = 9,
	BPF_MAP_TYPE_RINGBUF = 27,
};

/* cgroup device programs (BPF_PROG_TYPE_CGROUP_DEVICE): the context and its codes */
struct bpf_cgroup_dev_ctx {
	__u32 access_type; /* (access << 16) | type */
	__u32 major;
	__u32 minor;
};

enum {
	BPF_DEVCG_ACC_MKNOD = (1ULL << 0),
	BPF_DEVCG_ACC_READ = (1ULL << 1),
	BPF_DEVCG_ACC_WRITE = (1ULL << 2),
};

enum {
	BPF_DEVCG_DEV_BLOCK = (1ULL << 0),
	BPF_DEVCG_DEV_CHAR = (1ULL << 1),
};

enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
	BPF_EXIST = 2,
};

/* ---- constants ---- */
#define EPERM 1

#define S_IFMT 00170000
#define S_IFBLK 0060000
#define S_IFCHR 0020000
#define S_ISBLK(m) (((m) & S_IFMT) == S_IFBLK)
#define S_ISCHR(m) (((m) & S_IFMT) == S_IFCHR)

#define FMODE_READ ((fmode_t)0x1)
#define FMODE_WRITE ((fmode_t)0x2)

#define MINORBITS 20
#define MKDEV(ma, mi) (((ma) << MINORBITS) | (mi))

/* ---- kernel structs: only the fields asmguard reads ----
 * One declaration per kernel type for every program (CO-RE relocates each
 * field read by name: a field listed here costs nothing where it is not
 * read). A header needing a type's other shape (a member embedded at an
 * offset, a union member) declares a ___ag flavour of its own. */
struct super_block;
struct dentry;
struct inode {
	umode_t i_mode;
	dev_t i_rdev;
	unsigned long i_ino;
	struct super_block *i_sb;
	void *i_private; /* bpffs: the pinned object */
} __attribute__((preserve_access_index));

struct qstr {
	const unsigned char *name;
} __attribute__((preserve_access_index));

struct path {
	struct dentry *dentry;
} __attribute__((preserve_access_index));

struct file {
	struct inode *f_inode;
	fmode_t f_mode;
	unsigned int f_flags;
	struct path f_path;
	void *private_data; /* a BPF object's file: the map, program or link */
} __attribute__((preserve_access_index));

/*
 * Added for the write filter (bpf/guard.bpf.c). kuid_t/kgid_t are one-member
 * structs in the kernel; task_struct->cred is `const struct cred __rcu *`.
 */
typedef int pid_t;
typedef struct {
	uid_t val;
} kuid_t;
typedef struct {
	gid_t val;
} kgid_t;

struct super_block {
	dev_t s_dev;
	unsigned long s_magic;
} __attribute__((preserve_access_index));

/* The supplementary groups (atomic_t usage in 5.10, refcount_t later: not read). */
struct group_info {
	int ngroups;
	kgid_t gid[];
} __attribute__((preserve_access_index));

/* A capability set: `struct { u64 val; }` since 6.3, `struct { u32 cap[2]; }`
 * before; both 8 bytes, capability N at bit N (little-endian). */
struct ag_kernel_cap {
	__u64 val;
};

/* A user namespace: level 0 is the initial one. */
struct user_namespace {
	int level;
} __attribute__((preserve_access_index));

struct cred {
	kuid_t uid;
	kgid_t gid;
	kuid_t euid;
	kgid_t egid;
	kuid_t fsuid;
	kgid_t fsgid;
	struct ag_kernel_cap cap_effective;
	struct user_namespace *user_ns;
	struct group_info *group_info;
} __attribute__((preserve_access_index));

#define CAP_SYS_RAWIO 17
#define CAP_SYS_ADMIN 21

typedef struct {
	int counter;
} atomic_t;

struct mm_struct {
	struct file *exe_file;
	atomic_t mm_users; /* in an anonymous struct since 5.x: CO-RE matches it by name */
} __attribute__((preserve_access_index));

#define PF_KTHREAD 0x00200000 /* I am a kernel thread */

struct nameidata;

/* x86_64: TS_COMPAT in status while the task runs a 32-bit syscall (the
 * kernel's in_compat_syscall()); other architectures have no such field. */
#define TS_COMPAT 0x0002
struct thread_info {
	__u32 status;
} __attribute__((preserve_access_index));

/* Containers: a task's default-hierarchy (cgroup v2) cgroup and its
 * ancestors (through cgroup->self.parent: kernfs_node's parent was renamed
 * __parent in 6.15); kn->id is the cgroup id (the directory's inode number,
 * bpf_get_current_cgroup_id()'s value). */
struct kernfs_node {
	__u64 id;
} __attribute__((preserve_access_index));

struct cgroup;
struct cgroup_subsys_state {
	struct cgroup *cgroup;
	struct cgroup_subsys_state *parent;
} __attribute__((preserve_access_index));

struct cgroup {
	struct cgroup_subsys_state self;
	struct kernfs_node *kn;
} __attribute__((preserve_access_index));

struct css_set {
	struct cgroup *dfl_cgrp;
} __attribute__((preserve_access_index));

/* A task's pid: level 0 in the initial pid namespace, deeper in a container's. */
struct pid {
	unsigned int level;
} __attribute__((preserve_access_index));

struct dentry {
	struct inode *d_inode;
	struct qstr d_name;
} __attribute__((preserve_access_index));

struct task_struct {
	struct thread_info thread_info;
	struct css_set *cgroups;
	struct pid *thread_pid;
	struct nameidata *nameidata; /* set while the task walks a path (do_filp_open ...) */
	unsigned int flags;
	pid_t pid;
	pid_t tgid;
	struct task_struct *group_leader;
	__u64 start_boottime; /* ns since boot; /proc/PID/stat's starttime in USER_HZ ticks */
	const struct cred *cred;
	struct mm_struct *mm;
} __attribute__((preserve_access_index));

/* vm_flags sits in an anonymous union since 6.3: CO-RE matches it by name */
struct vm_area_struct {
	unsigned long vm_flags;
	struct file *vm_file;
} __attribute__((preserve_access_index));

struct io_uring_cmd {
	struct file *file;
	__u32 cmd_op;
} __attribute__((preserve_access_index));

/* The helper ids, only to ask (bpf_core_enum_value_exists) whether the
 * running kernel has one: the value here is never used. */
enum bpf_func_id {
	BPF_FUNC_get_current_task_btf = 158,
};

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#endif /* ASMGUARD_CORE_H */
