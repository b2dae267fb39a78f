// SPDX-License-Identifier: GPL-2.0
/*
 * guard.bpf.c - asmguard's write filter.
 *
 * A managed disk is every dev_t that reaches a labelled disk (the labelled
 * device, a multipath device above it and its sd paths, the parent disk of a
 * labelled partition, the SCSI/NVMe generic character devices). Userspace
 * (crates/guard) keys ag_blk / ag_chr by the kernel dev_t and gives each a mode:
 * enforce, audit (log and allow) or off.
 *
 * For a caller that no allow rule allows (bpf/rules.h: conjunctions of
 * users/groups, executable and place; never the comm), that is not the daemon's
 * own process,
 * on a managed device these are denied with -EPERM:
 *   lsm/file_open           any open for writing (block or generic char device);
 *   lsm/file_permission     a write on an fd opened before the filter started
 *                           (write, pwrite, writev, aio, io_uring, splice,
 *                           copy_file_range, fallocate: all go through
 *                           rw_verify_area / vfs_fallocate);
 *   lsm/file_ioctl(+compat) discard, zero-out, secure discard, partition table
 *                           changes, BLKROSET, zone resets, SG_IO and
 *                           SCSI_IOCTL_SEND_COMMAND (whatever the open mode: root
 *                           can send a SCSI WRITE on a read-only fd), NVMe
 *                           passthrough, persistent reservations;
 *   lsm.s/file_ioctl        (ag_file_ioctl_s, preferred where the kernel allows
 *                           it) the same, except that SG_IO and NVMe admin
 *                           commands of the read class (bpf/passthrough.h) pass:
 *                           the command is read from user memory;
 *   lsm/mmap_file           a shared writable mapping;
 *   lsm/file_mprotect       making a shared mapping writable;
 *   lsm/uring_cmd           io_uring passthrough (NVMe, block discard on 6.12).
 * Where bpf is not an active LSM (Oracle's UEK7/UEK8, Ubuntu, Debian 11 by
 * default), the same rules are attached as fmod_ret/security_<hook> (ag_fr_*):
 * a trampoline on the kernel's security function, whose non-zero return the
 * function returns without running its body. Its file_ioctl cannot sleep, so
 * it reads passthrough commands without faulting and refuses one it cannot
 * read (below). The cgroup_device program is the fallback where neither
 * loads: on the cgroup-v2 root, it denies write-opens (open-time only). Beside
 * the LSM or fmod_ret programs, ag_kernel_open (cgroup/dev too) judges
 * in-kernel opens by device number that no security hook sees (nvmet).
 *
 * The pins: inode_unlink, inode_rmdir and inode_rename (twins too) refuse a
 * task outside the host's pid namespace anything in the pin directories
 * (ag_pin_dirs), should bpffs be mounted into a container.
 *
 * Every denial (and every audited operation) becomes an ag_event in the
 * ag_events ring buffer. A non-zero verdict of an earlier LSM or fmod_ret
 * program is returned as is.
 *
 * file_permission runs for every read and write of every file: it returns
 * after two loads and a compare unless the file is a block or character
 * device, and after one array load more unless that device's major has a
 * managed node (ag_majors): only then does it look the device up in a hash map.
 *
 * The parts: this file keeps the verdict (events and counts), the rule of each
 * hook and the programs. The headers, each for one thing:
 *   guard.h        the layouts and codes userspace shares (the ABI);
 *   asmguard_core.h the kernel types read with CO-RE;
 *   devices.h      the managed set (ag_blk, ag_chr, ag_majors) and its lookup;
 *   rules.h        who may write: the allow rules, the daemon, the tools;
 *   identity.h     who the caller is, for the event;
 *   ioctls.h       which ioctls write;
 *   passthrough.h  the read class of SG_IO and NVMe admin commands, and
 *                  reading them from the caller's memory;
 *   pins.h         the pin directories no container may empty;
 *   guardian.h     asmguard's maps, programs and links the daemon's alone
 *                  (lsm/bpf, fmod_ret/security_bpf; the programs are there).
 */
#include "asmguard_core.h"
#include "guard.h"
#include "ioctls.h"
#include "rules.h"
#include "identity.h"
#include "devices.h"
#include "passthrough.h"
#include "pins.h"
#include "guardian.h"

char LICENSE[] SEC("license") = "GPL";

#define MAY_WRITE 0x2
#define MAP_SHARED 0x01
#define MAP_TYPE 0x0f
#define PROT_WRITE 0x2
#define VM_SHARED 0x8

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} ag_events SEC(".maps");

/* Keeps struct ag_event in the object's BTF (a ring buffer has no value type):
 * the userspace decoder's test checks its layout against it. Never used. */
struct ag_event *ag_event_layout __attribute__((unused));

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, AG_NSTATS);
	__type(key, __u32);
	__type(value, __u64);
} ag_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, struct ag_count_key);
	__type(value, __u64);
} ag_counts SEC(".maps");

/* Exact per-disk counts (the ring buffer may drop events; these never miss). */
static __always_inline void count_disk(__u32 disk_id, __u32 idx)
{
	struct ag_count_key k = { .disk_id = disk_id, .idx = idx };
	__u64 zero = 0, *v;

	v = bpf_map_lookup_elem(&ag_counts, &k);
	if (!v) {
		bpf_map_update_elem(&ag_counts, &k, &zero, BPF_NOEXIST);
		v = bpf_map_lookup_elem(&ag_counts, &k);
	}
	if (v)
		__sync_fetch_and_add(v, 1);
}

static __always_inline void stat_add(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&ag_stats, &idx);

	if (v)
		__sync_fetch_and_add(v, 1);
}

/* The verdict for a write-like operation on a managed device: 0 or -EPERM.
 * `reader`: how the caller is read (bpf/rules.h: AG_IDS for programs that
 * may call only bpf_get_current_uid_gid). `allowable`: whether an allow rule
 * lets it through (not for binding a loop device: loop_bind_rule). */
static __always_inline int verdict_of(struct ag_disk *d, __u32 dev, __u32 flags, __u32 hook,
				      __u32 op, enum ag_reader reader, bool allowable)
{
	struct ag_event e = {};
	struct ag_event *r;
	struct ag_task k;
	__u32 mode = d->mode;
	bool full = reader != AG_IDS;

	if (mode != AG_MODE_AUDIT && mode != AG_MODE_ENFORCE && mode != AG_MODE_FENCED)
		return 0;
	if (full) {
		task_init(&k, reader);
		if (mode == AG_MODE_FENCED) {
			/* A reclaim runs on the disk: the daemon's process alone
			 * writes (no allow rule, no kernel thread acting for an
			 * opener). */
			if (is_daemon(k.t))
				return 0;
		} else {
			/* A kernel thread writing through a file (the loop driver's
			 * worker on a loop device backed by a managed disk) acts for
			 * whoever opened that file for writing, which file_open
			 * already judged. */
			if (hook == AG_HOOK_FILE_PERMISSION && task_kthread(&k))
				return 0;
			if (allowable && task_allowed(&k, &e.ctr_id, hook))
				return 0;
		}
		who(&e);
	} else {
		/* Fenced too: by ids alone the daemon cannot be told from an
		 * allowed user, so the allow rules keep their say (status says so). */
		who_ids(&e);
		if (ids_allowed(e.euid, e.egid))
			return 0;
	}

	count_disk(d->disk_id, mode != AG_MODE_AUDIT ? hook : AG_DISK_HOOKS + hook);
	r = bpf_ringbuf_reserve(&ag_events, sizeof(*r), 0);
	if (r) {
		e.ts_ns = bpf_ktime_get_ns();
		e.dev = dev;
		e.disk_id = d->disk_id;
		e.hook = hook;
		e.op = op;
		e.mode = mode;
		e.flags = flags;
		if (full)
			bpf_get_current_comm(&e.comm, sizeof(e.comm));
		__builtin_memcpy(r, &e, sizeof(e));
		bpf_ringbuf_submit(r, 0);
	} else {
		stat_add(AG_STAT_RB_DROPS);
	}
	return mode != AG_MODE_AUDIT ? -EPERM : 0;
}

static __always_inline int verdict(struct ag_disk *d, __u32 dev, __u32 flags, __u32 hook, __u32 op,
				   enum ag_reader reader)
{
	return verdict_of(d, dev, flags, hook, op, reader, true);
}

static __always_inline int check_file(struct file *file, __u32 hook, __u32 op)
{
	struct ag_disk *d;
	__u32 dev = 0, flags = 0;

	if (!file)
		return 0;
	d = managed(file->f_inode, &dev, &flags);
	if (!d)
		return 0;
	return verdict(d, dev, flags, hook, op, AG_TASK_BTF);
}

/* ---- The rules: one per hook, as functions of the security function's
 * own arguments. Each is attached twice (below): as lsm/<hook> where the BPF
 * LSM is active, and as fmod_ret/security_<hook> where it is not. */

static __always_inline int file_open_rule(struct file *file)
{
	if (!(file->f_mode & FMODE_WRITE))
		return 0;
	mem_open_rule(file); /* records, never refuses (identity.h) */
	return check_file(file, AG_HOOK_FILE_OPEN, file->f_mode);
}

static __always_inline int file_permission_rule(struct file *file, int mask)
{
	if (!(mask & MAY_WRITE))
		return 0;
	return check_file(file, AG_HOOK_FILE_PERMISSION, mask);
}

/* Every ioctl that writes (bpf/ioctls.h), all-or-nothing. */
static __always_inline int ioctl_rule(struct file *file, unsigned int cmd, __u32 hook)
{
	if (!write_ioctl(cmd))
		return 0;
	return check_file(file, hook, cmd);
}

/* `prot`: the LSM hook's (what the kernel will map) or security_mmap_file's
 * (what the caller asked for, before READ_IMPLIES_EXEC adds PROT_EXEC): they
 * agree on PROT_WRITE. */
static __always_inline int mmap_file_rule(struct file *file, unsigned long prot, unsigned long flags)
{
	/* MAP_SHARED and MAP_SHARED_VALIDATE both have bit 0 set; MAP_PRIVATE does not */
	if (!file || !(prot & PROT_WRITE) || !(flags & MAP_SHARED))
		return 0;
	return check_file(file, AG_HOOK_MMAP_FILE, prot);
}

static __always_inline int file_mprotect_rule(struct vm_area_struct *vma, unsigned long prot)
{
	if (!(prot & PROT_WRITE) || !(vma->vm_flags & VM_SHARED))
		return 0;
	return check_file(vma->vm_file, AG_HOOK_FILE_MPROTECT, prot);
}

static __always_inline int uring_cmd_rule(struct io_uring_cmd *ioucmd)
{
	return check_file(ioucmd->file, AG_HOOK_URING_CMD, ioucmd->cmd_op);
}

/* ---- SG_IO and NVMe admin passthrough by command class (the command is
 * read by bpf/passthrough.h) ---- */

/* How far the class rule trusts this caller's read-class passthrough: the
 * command is read here before the kernel copies it again, so a caller could
 * rewrite it in between (another thread, another process sharing the page,
 * process_vm_writev, its own O_DIRECT read landing in it).
 *  1: a disk-query tool run as host root (bpf/rules.h): the class rule, its
 *     threads trusted (multipathd's path checkers are threads);
 *  0: a caller without CAP_SYS_RAWIO (SG_IO) or CAP_SYS_ADMIN (NVMe admin) in
 *     the initial user namespace: the class rule, single-threaded callers
 *     only; the kernel itself refuses write commands to it after its own copy
 *     (scsi_cmd_allowed, nvme_cmd_allowed);
 * -1: any other caller holding the capability: no class rule, only what an
 *     allow rule gives it. */
static __always_inline int passthrough_trust(__u32 cmd)
{
	struct ag_task k;

	task_init(&k, AG_TASK);
	if (runs_tool(&k, AG_TOOL_QUERY))
		return 1;
	if (host_capable(k.c, cmd == SG_IO ? CAP_SYS_RAWIO : CAP_SYS_ADMIN))
		return -1;
	return 0;
}

/* file_ioctl with the read class of SG_IO and NVMe admin commands let
 * through (`sleepable`: how the command is read, above). */
static __always_inline int ioctl_by_class_rule(struct file *file, unsigned int cmd,
					       unsigned long arg, bool sleepable)
{
	struct ag_disk *d;
	__u32 dev = 0, flags = 0;

	if (!write_ioctl(cmd) || !file)
		return 0;
	d = managed(file->f_inode, &dev, &flags);
	if (!d)
		return 0;
	/* The command is read for every caller: the event names its opcode. */
	if (classed_ioctl(cmd)) {
		int trust = passthrough_trust(cmd);

		if (passthrough_read_class(cmd, arg, &flags, sleepable, trust > 0) && trust >= 0)
			return 0;
	}
	return verdict(d, dev, flags, AG_HOOK_FILE_IOCTL, cmd, sleepable ? AG_TASK : AG_TASK_BTF);
}

/* ---- Loop devices bound to a managed disk ----
 *
 * LOOP_SET_FD and LOOP_CHANGE_FD (arg: the backing fd) and LOOP_CONFIGURE
 * (arg: struct loop_config, the backing fd its first field) on a loop device
 * bind it to an open file; the loop driver then writes that file from its own
 * worker, a kernel thread (let through on file_permission: file_open judged
 * the opener). A descriptor opened for writing before the disk was protected,
 * or taken from another process (pidfd_getfd), would make a writable loop
 * device over the disk: binding one to a managed block device opened for
 * writing is refused, to a caller an allow rule lets write the disk too: the
 * loop device would give the disk to anyone who can open it, from the bind
 * until the daemon adds it to the managed set (the refresh after its
 * uevent). A read-only backing descriptor makes a read-only loop device: not
 * judged.
 * A LOOP_CONFIGURE whose config cannot be read without faulting (not
 * sleepable) is refused: losetup's own is on its stack. The descriptor is
 * read from the caller's fd table before the kernel's own fdget (another
 * thread's dup2 in between is the race guardian.h's rule has too). */
#define AG_LOOP_MAJOR 7
#define AG_LOOP_SET_FD 0x4C00
#define AG_LOOP_CHANGE_FD 0x4C06
#define AG_LOOP_CONFIGURE 0x4C0A

/* The file behind the caller's descriptor `fd` (NULL: none). */
static __always_inline struct file *fd_file(__u32 fd)
{
	struct task_struct___ag *t = (void *)bpf_get_current_task();
	struct fdtable *fdt = BPF_CORE_READ(t, files, fdt);
	struct file **fds;
	struct file *f = NULL;

	if (!fdt || fd >= BPF_CORE_READ(fdt, max_fds))
		return NULL;
	fds = BPF_CORE_READ(fdt, fd);
	if (bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]))
		return NULL;
	return f;
}

static __always_inline int loop_bind_rule(struct file *file, unsigned int cmd, unsigned long arg,
					  bool sleepable)
{
	struct file *backing;
	struct inode *inode;
	struct ag_disk *d;
	__u32 fd = (__u32)arg, dev;

	if (cmd != AG_LOOP_SET_FD && cmd != AG_LOOP_CHANGE_FD && cmd != AG_LOOP_CONFIGURE)
		return 0;
	if (!file || !S_ISBLK(file->f_inode->i_mode) ||
	    (file->f_inode->i_rdev >> MINORBITS) != AG_LOOP_MAJOR)
		return 0;
	if (cmd == AG_LOOP_CONFIGURE && read_user(&fd, sizeof(fd), arg, sleepable))
		return -EPERM;
	backing = fd_file(fd);
	if (!backing || !(BPF_CORE_READ(backing, f_mode) & FMODE_WRITE))
		return 0;
	inode = BPF_CORE_READ(backing, f_inode);
	if (!inode || !S_ISBLK(BPF_CORE_READ(inode, i_mode)))
		return 0;
	dev = BPF_CORE_READ(inode, i_rdev);
	d = managed_dev(dev, false);
	if (!d)
		return 0;
	return verdict_of(d, dev, 0, AG_HOOK_FILE_IOCTL, cmd, sleepable ? AG_TASK : AG_TASK_BTF,
			  false);
}

/* ---- The programs ----
 *
 * AG_TWIN(hook, rule, params) attaches `rule` twice, with the same
 * parameters: lsm/<hook> (ag_<hook>, the BPF LSM) and
 * fmod_ret/security_<hook> (ag_fr_<hook>: a trampoline on the kernel's
 * security function, which the verifier lets any BPF_MODIFY_RETURN program
 * change, whether or not bpf is an active LSM). Each receives the verdict of
 * the programs before it as `ret` and returns a non-zero one as it is. */
#define AG_TWIN(hook, rule, params...)                                                 \
	SEC("lsm/" #hook)                                                              \
	int BPF_PROG(ag_##hook, params, int ret)                                       \
	{                                                                              \
		return ret ?: rule;                                                    \
	}                                                                              \
	SEC("fmod_ret/security_" #hook)                                                \
	int BPF_PROG(ag_fr_##hook, params, int ret)                                    \
	{                                                                              \
		return ret ?: rule;                                                    \
	}

AG_TWIN(file_open, file_open_rule(file), struct file *file)
/* root's executables borrowed (identity.h, rules.h): records, never refuses */
AG_TWIN(ptrace_access_check, ptrace_access_rule(child, mode), struct task_struct *child,
	unsigned int mode)
AG_TWIN(file_permission, file_permission_rule(file, mask), struct file *file, int mask)
/* file_ioctl_compat: only on kernels with security_file_ioctl_compat (6.8,
 * and stable backports): userspace loads it when the kernel BTF has it. */
AG_TWIN(file_ioctl_compat,
	loop_bind_rule(file, cmd, arg, false) ?: ioctl_rule(file, cmd, AG_HOOK_FILE_IOCTL_COMPAT),
	struct file *file,
	unsigned int cmd, unsigned long arg)
AG_TWIN(file_mprotect, file_mprotect_rule(vma, prot), struct vm_area_struct *vma,
	unsigned long reqprot, unsigned long prot)
/* uring_cmd: only on kernels with security_uring_cmd (6.0+). */
AG_TWIN(uring_cmd, uring_cmd_rule(ioucmd), struct io_uring_cmd *ioucmd)

/* The pins (above). */
AG_TWIN(inode_unlink, pin_rule(dir, dentry), struct inode *dir, struct dentry *dentry)
AG_TWIN(inode_rmdir, pin_rule(dir, dentry), struct inode *dir, struct dentry *dentry)

/* inode_rename: the LSM hook has (old_dir, old_dentry, new_dir, new_dentry),
 * the security function a fifth argument (flags). */
SEC("lsm/inode_rename")
int BPF_PROG(ag_inode_rename, struct inode *old_dir, struct dentry *old_dentry,
	     struct inode *new_dir, struct dentry *new_dentry, int ret)
{
	return ret ?: pin_rule(old_dir, old_dentry) ?: pin_rule(new_dir, new_dentry);
}

SEC("fmod_ret/security_inode_rename")
int BPF_PROG(ag_fr_inode_rename, struct inode *old_dir, struct dentry *old_dentry,
	     struct inode *new_dir, struct dentry *new_dentry, unsigned int flags, int ret)
{
	return ret ?: pin_rule(old_dir, old_dentry) ?: pin_rule(new_dir, new_dentry);
}

/* mmap_file: the LSM hook has (file, reqprot, prot, flags), the security
 * function (file, prot, flags). */
SEC("lsm/mmap_file")
int BPF_PROG(ag_mmap_file, struct file *file, unsigned long reqprot, unsigned long prot,
	     unsigned long flags, int ret)
{
	return ret ?: mmap_file_rule(file, prot, flags);
}

SEC("fmod_ret/security_mmap_file")
int BPF_PROG(ag_fr_mmap_file, struct file *file, unsigned long prot, unsigned long flags, int ret)
{
	return ret ?: mmap_file_rule(file, prot, flags);
}

/* file_ioctl: three programs, one attached (the hook table's row). */
SEC("lsm.s/file_ioctl")
int BPF_PROG(ag_file_ioctl_s, struct file *file, unsigned int cmd, unsigned long arg, int ret)
{
	dm_ioctl_mark(file, cmd); /* multipathd's in-kernel opens (rules.h) */
	return ret ?: loop_bind_rule(file, cmd, arg, true) ?: ioctl_by_class_rule(file, cmd, arg, true);
}

SEC("lsm/file_ioctl")
int BPF_PROG(ag_file_ioctl, struct file *file, unsigned int cmd, unsigned long arg, int ret)
{
	dm_ioctl_mark(file, cmd); /* multipathd's in-kernel opens (rules.h) */
	return ret ?: loop_bind_rule(file, cmd, arg, false) ?: ioctl_rule(file, cmd, AG_HOOK_FILE_IOCTL);
}

SEC("fmod_ret/security_file_ioctl")
int BPF_PROG(ag_fr_file_ioctl, struct file *file, unsigned int cmd, unsigned long arg, int ret)
{
	dm_ioctl_mark(file, cmd); /* multipathd's in-kernel opens (rules.h) */
	return ret ?: loop_bind_rule(file, cmd, arg, false) ?: ioctl_by_class_rule(file, cmd, arg, false);
}

/* A block device opened through a path is asked about twice in one open:
 * may_open -> inode_permission -> devcgroup_inode_permission, then blkdev_open
 * -> bdev_permission (a character device, and an in-kernel open by number,
 * once). A denial ends the open at the first ask; an audited open reaches the
 * second. The fallback reports each open once: an audited first ask leaves
 * the task's id and the device here, and the second ask that finds them is
 * not reported again. An entry an open left behind (it failed between the
 * asks) only moves the report of the task's next open of that device from its
 * first ask to its second: still one per open. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);   /* tid */
	__type(value, __u32); /* kernel dev_t */
} ag_open_asked SEC(".maps");

/* Fallback: open-time only. Runs for opens and mknods in every cgroup below the
 * root it is attached to; returns 1 to allow, 0 to deny. `pair`: report a
 * block device's two asks of one open once (needs the task: not 5.10). */
static __always_inline int cgroup_dev(struct bpf_cgroup_dev_ctx *ctx, bool full, __u32 hook,
				      bool pair)
{
	__u32 type = ctx->access_type & 0xffff;
	__u32 access = ctx->access_type >> 16;
	__u32 dev, flags;
	struct ag_disk *d;

	if (!(access & BPF_DEVCG_ACC_WRITE))
		return 1;
	if (ctx->major >= (1 << (32 - MINORBITS)) || ctx->minor >= (1 << MINORBITS))
		return 1;
	dev = MKDEV(ctx->major, ctx->minor);
	if (type != BPF_DEVCG_DEV_BLOCK && type != BPF_DEVCG_DEV_CHAR)
		return 1;
	flags = type == BPF_DEVCG_DEV_CHAR ? AG_EV_CHR : 0;
	d = managed_dev(dev, type == BPF_DEVCG_DEV_CHAR);
	if (!d)
		return 1;
	pair = pair && type == BPF_DEVCG_DEV_BLOCK &&
	       BPF_CORE_READ((struct task_struct *)bpf_get_current_task(), nameidata);
	if (pair) {
		__u32 tid = (__u32)bpf_get_current_pid_tgid();
		__u32 *asked = bpf_map_lookup_elem(&ag_open_asked, &tid);

		if (asked && *asked == dev) {
			bpf_map_delete_elem(&ag_open_asked, &tid);
			/* the second ask of an open reported at the first (enforce is
			 * judged again: the mode may have changed in between) */
			if (d->mode != AG_MODE_ENFORCE && d->mode != AG_MODE_FENCED)
				return 1;
		}
	}
	if (verdict(d, dev, flags, hook, ctx->access_type, full ? AG_TASK : AG_IDS))
		return 0;
	if (pair && d->mode == AG_MODE_AUDIT) {
		__u32 tid = (__u32)bpf_get_current_pid_tgid();

		bpf_map_update_elem(&ag_open_asked, &tid, &dev, BPF_ANY);
	}
	return 1;
}

SEC("cgroup/dev")
int ag_cgroup_dev(struct bpf_cgroup_dev_ctx *ctx)
{
	return cgroup_dev(ctx, true, AG_HOOK_CGROUP_DEVICE, true);
}

/* The same for kernels whose cgroup-device programs may not walk the task
 * (5.10: no bpf_get_current_task, pid_tgid or comm there): identity from
 * bpf_get_current_uid_gid alone. Loaded when ag_cgroup_dev is refused. */
SEC("cgroup/dev")
int ag_cgroup_dev_ids(struct bpf_cgroup_dev_ctx *ctx)
{
	return cgroup_dev(ctx, false, AG_HOOK_CGROUP_DEVICE, false);
}

/* LSM backend: in-kernel opens by device number. nvmet's block backend opens
 * its device by path without a claim, and no LSM hook sees that open: only the
 * device-cgroup check runs (bdev_permission -> devcgroup_check_permission), in
 * the configuring task. That check also runs for every user open of a device
 * node (may_open -> inode_permission, before file_open), but a user open runs
 * inside a path walk (task->nameidata is set from do_filp_open to its end),
 * while an in-kernel open by number (lookup_bdev has finished its walk) does
 * not. This program, attached to the cgroup-v2 root next to the LSM programs,
 * judges only the latter: user opens are still judged, and reported, by
 * file_open. Loaded where the kernel lets cgroup-device programs read the task
 * (not 5.10). */
SEC("cgroup/dev")
int ag_kernel_open(struct bpf_cgroup_dev_ctx *ctx)
{
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();

	if (BPF_CORE_READ(t, nameidata))
		return 1;
	return cgroup_dev(ctx, true, AG_HOOK_KERNEL_OPEN, false);
}
