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
 * For a caller that is not allow-listed (effective or fs uid in ag_uids, effective
 * or fs gid in ag_gids, or executable {dev, ino} in ag_exes; never the comm),
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
 *   lsm/mmap_file           a shared writable mapping;
 *   lsm/file_mprotect       making a shared mapping writable;
 *   lsm/uring_cmd           io_uring passthrough (NVMe, block discard on 6.12).
 * The cgroup_device program is the fallback where the BPF LSM is not usable:
 * on the cgroup-v2 root, it denies write-opens (open-time only).
 *
 * Every denial (and every audited operation) becomes an ag_event in the
 * ag_events ring buffer. A non-zero verdict of an earlier LSM is returned as is.
 *
 * file_permission runs for every read and write of every file: it returns
 * after two loads and a compare unless the file is a block or character
 * device, and after one array load more unless that device's major has a
 * managed node (ag_majors): only then does it look the device up in a hash map.
 */
#include "asmguard_core.h"
#include "guard.h"

char LICENSE[] SEC("license") = "GPL";

#define MAY_WRITE 0x2
#define MAP_SHARED 0x01
#define MAP_TYPE 0x0f
#define PROT_WRITE 0x2
#define VM_SHARED 0x8

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32); /* kernel dev_t of a block device */
	__type(value, struct ag_disk);
} ag_blk SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32); /* kernel dev_t of a character device */
	__type(value, struct ag_disk);
} ag_chr SEC(".maps");

/* The majors with a managed node, block and character apart (guard.h). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * AG_MAJOR_WORDS);
	__type(key, __u32);
	__type(value, __u64);
} ag_majors SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u8);
} ag_uids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u8);
} ag_gids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, struct ag_exe_key);
	__type(value, __u8);
} ag_exes SEC(".maps");

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
	/* fsgid is checked but not reported */
	e->pad = BPF_CORE_READ(c, fsgid.val);
}

/* The caller's identity where only bpf_get_current_uid_gid is available (the
 * cgroup-device programs of 5.10-era kernels): real uid and gid, no pid, no
 * executable, no supplementary or effective ids. */
static __always_inline void who_ids(struct ag_event *e)
{
	__u64 ug = bpf_get_current_uid_gid();

	e->uid = e->euid = e->fsuid = (__u32)ug;
	e->egid = e->pad = ug >> 32;
}

static __always_inline bool allowed(struct ag_event *e)
{
	struct ag_exe_key k = { .ino = e->exe_ino, .dev = e->exe_dev, .pad = 0 };

	if (bpf_map_lookup_elem(&ag_uids, &e->euid) || bpf_map_lookup_elem(&ag_uids, &e->fsuid))
		return true;
	if (bpf_map_lookup_elem(&ag_gids, &e->egid) || bpf_map_lookup_elem(&ag_gids, &e->pad))
		return true;
	if (e->exe_ino && bpf_map_lookup_elem(&ag_exes, &k))
		return true;
	return false;
}

/* The verdict for a write-like operation on a managed device: 0 or -EPERM.
 * `full`: the whole identity (task walk, executable, comm); false for programs
 * that may call only bpf_get_current_uid_gid. */
static __always_inline int verdict(struct ag_disk *d, __u32 dev, __u32 flags, __u32 hook, __u32 op,
				   bool full)
{
	struct ag_event e = {};
	struct ag_event *r;
	__u32 mode = d->mode;

	if (mode != AG_MODE_AUDIT && mode != AG_MODE_ENFORCE)
		return 0;
	/* A kernel thread writing through a file (the loop driver's worker on a
	 * loop device backed by a managed disk) acts for whoever opened that file
	 * for writing, which file_open already judged. */
	if (hook == AG_HOOK_FILE_PERMISSION &&
	    (BPF_CORE_READ((struct task_struct *)bpf_get_current_task(), flags) & PF_KTHREAD))
		return 0;
	if (full)
		who(&e);
	else
		who_ids(&e);
	if (allowed(&e))
		return 0;

	stat_add(mode == AG_MODE_ENFORCE ? hook : AG_NHOOKS + hook);
	count_disk(d->disk_id, mode == AG_MODE_ENFORCE ? hook : AG_NHOOKS + hook);
	r = bpf_ringbuf_reserve(&ag_events, sizeof(*r), 0);
	if (r) {
		e.pad = 0;
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
	return mode == AG_MODE_ENFORCE ? -EPERM : 0;
}

/* The managed disk of a device (NULL: not managed). `chr`: a character
 * device. The major's bit first (an inlined array load), so that writes to
 * /dev/null, ttys and the disks nobody labelled skip the hash lookup. */
static __always_inline struct ag_disk *managed_dev(__u32 dev, bool chr)
{
	__u32 major = dev >> MINORBITS;
	__u32 word = (chr ? AG_MAJOR_WORDS : 0) + major / 64;
	__u64 *bits = bpf_map_lookup_elem(&ag_majors, &word);

	if (!bits || !((*bits >> (major % 64)) & 1))
		return 0;
	if (chr)
		return bpf_map_lookup_elem(&ag_chr, &dev);
	return bpf_map_lookup_elem(&ag_blk, &dev);
}

/* S_ISBLK(m) || S_ISCHR(m) in one test: of the file types (in units of
 * 010000: fifo 01, chr 02, dir 04, blk 06, reg 010, lnk 012, sock 014) only
 * chr and blk have 02 set and 011 clear. */
#define S_ISDEV(m) (((m) & 0130000) == 0020000)

/* The managed disk behind an inode (NULL: not a managed device). Regular
 * files, directories, pipes, sockets and links leave at the i_mode test. */
static __always_inline struct ag_disk *managed(struct inode *inode, __u32 *dev, __u32 *flags)
{
	umode_t mode;
	bool chr;

	if (!inode)
		return 0;
	mode = inode->i_mode;
	if (!S_ISDEV(mode))
		return 0;
	chr = S_ISCHR(mode);
	*dev = inode->i_rdev;
	*flags = chr ? AG_EV_CHR : 0;
	return managed_dev(*dev, chr);
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
	return verdict(d, dev, flags, hook, op, true);
}

SEC("lsm/file_open")
int BPF_PROG(ag_file_open, struct file *file, int ret)
{
	if (ret)
		return ret;
	if (!(file->f_mode & FMODE_WRITE))
		return 0;
	return check_file(file, AG_HOOK_FILE_OPEN, file->f_mode);
}

SEC("lsm/file_permission")
int BPF_PROG(ag_file_permission, struct file *file, int mask, int ret)
{
	if (ret)
		return ret;
	if (!(mask & MAY_WRITE))
		return 0;
	return check_file(file, AG_HOOK_FILE_PERMISSION, mask);
}

/* ioctl numbers: _IOC(dir, type, nr, size) = dir << 30 | size << 16 | type << 8 | nr */
#define IOC_TYPE(cmd) (((cmd) >> 8) & 0xff)
#define IOC_NR(cmd) ((cmd) & 0xff)

static __always_inline bool write_ioctl(__u32 cmd)
{
	__u32 type = IOC_TYPE(cmd), nr = IOC_NR(cmd);

	switch (cmd) {
	case 0x125d: /* BLKROSET */
	case 0x125f: /* BLKRRPART */
	case 0x1269: /* BLKPG */
	case 0x1277: /* BLKDISCARD */
	case 0x127d: /* BLKSECDISCARD */
	case 0x127f: /* BLKZEROOUT */
	case 0x2285: /* SG_IO (sd, sg, bsg): any SCSI command, WRITE included */
	case 0x1:    /* SCSI_IOCTL_SEND_COMMAND */
		return true;
	}
	/* BLKRESETZONE, BLKOPENZONE, BLKCLOSEZONE, BLKFINISHZONE: _IOW(0x12, 131/134/135/136) */
	if (type == 0x12 && (nr == 131 || (nr >= 134 && nr <= 136)))
		return true;
	/* NVMe: ADMIN_CMD 0x41, SUBMIT_IO 0x42, IO_CMD 0x43, RESET 0x44,
	 * SUBSYS_RESET 0x45, RESCAN 0x46, ADMIN64 0x47, IO64 0x48, IO64_VEC 0x49 */
	if (type == 'N' && nr >= 0x41 && nr <= 0x49)
		return true;
	/* IOC_PR_REGISTER .. IOC_PR_CLEAR: _IOW('p', 200..205) */
	if (type == 'p' && nr >= 200 && nr <= 205)
		return true;
	return false;
}

static __always_inline int check_ioctl(struct file *file, unsigned int cmd, __u32 hook)
{
	if (!write_ioctl(cmd))
		return 0;
	return check_file(file, hook, cmd);
}

SEC("lsm/file_ioctl")
int BPF_PROG(ag_file_ioctl, struct file *file, unsigned int cmd, unsigned long arg, int ret)
{
	if (ret)
		return ret;
	return check_ioctl(file, cmd, AG_HOOK_FILE_IOCTL);
}

/* Only on kernels with security_file_ioctl_compat (6.8, and stable backports):
 * userspace loads it when the kernel BTF has bpf_lsm_file_ioctl_compat. */
SEC("lsm/file_ioctl_compat")
int BPF_PROG(ag_file_ioctl_compat, struct file *file, unsigned int cmd, unsigned long arg, int ret)
{
	if (ret)
		return ret;
	return check_ioctl(file, cmd, AG_HOOK_FILE_IOCTL_COMPAT);
}

SEC("lsm/mmap_file")
int BPF_PROG(ag_mmap_file, struct file *file, unsigned long reqprot, unsigned long prot,
	     unsigned long flags, int ret)
{
	if (ret)
		return ret;
	/* MAP_SHARED and MAP_SHARED_VALIDATE both have bit 0 set; MAP_PRIVATE does not */
	if (!file || !(prot & PROT_WRITE) || !(flags & MAP_SHARED))
		return 0;
	return check_file(file, AG_HOOK_MMAP_FILE, prot);
}

SEC("lsm/file_mprotect")
int BPF_PROG(ag_file_mprotect, struct vm_area_struct *vma, unsigned long reqprot,
	     unsigned long prot, int ret)
{
	if (ret)
		return ret;
	if (!(prot & PROT_WRITE) || !(vma->vm_flags & VM_SHARED))
		return 0;
	return check_file(vma->vm_file, AG_HOOK_FILE_MPROTECT, prot);
}

/* Only on kernels with security_uring_cmd (6.0+): loaded when the BTF has it. */
SEC("lsm/uring_cmd")
int BPF_PROG(ag_uring_cmd, struct io_uring_cmd *ioucmd, int ret)
{
	if (ret)
		return ret;
	return check_file(ioucmd->file, AG_HOOK_URING_CMD, ioucmd->cmd_op);
}

/* Fallback: open-time only. Runs for opens and mknods in every cgroup below the
 * root it is attached to; returns 1 to allow, 0 to deny. */
static __always_inline int cgroup_dev(struct bpf_cgroup_dev_ctx *ctx, bool full)
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
	return verdict(d, dev, flags, AG_HOOK_CGROUP_DEVICE, ctx->access_type, full) ? 0 : 1;
}

SEC("cgroup/dev")
int ag_cgroup_dev(struct bpf_cgroup_dev_ctx *ctx)
{
	return cgroup_dev(ctx, true);
}

/* The same for kernels whose cgroup-device programs may not walk the task
 * (5.10: no bpf_get_current_task, pid_tgid or comm there): identity from
 * bpf_get_current_uid_gid alone. Loaded when ag_cgroup_dev is refused. */
SEC("cgroup/dev")
int ag_cgroup_dev_ids(struct bpf_cgroup_dev_ctx *ctx)
{
	return cgroup_dev(ctx, false);
}
