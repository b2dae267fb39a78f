// SPDX-License-Identifier: GPL-2.0
/*
 * smoke.bpf.c - the smallest possible asmguard filter, used to prove the BPF
 * build pipeline and the BPF LSM on real kernels (tests/vm, test "smoke").
 *
 * Denies every write-open of a block device whose kernel dev_t is a key of
 * smoke_devs. Everything else keeps the verdict of earlier LSMs.
 */
#include "asmguard_core.h"

char LICENSE[] SEC("license") = "GPL";

/* key: kernel dev_t (major << 20 | minor); value: unused (1) */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u8);
} smoke_devs SEC(".maps");

/* number of opens this program denied (read by userspace through .bss) */
__u64 smoke_denied = 0;

SEC("lsm/file_open")
int BPF_PROG(smoke_file_open, struct file *file, int ret)
{
	struct inode *inode;
	umode_t mode;
	dev_t rdev;

	/* an earlier LSM (or BPF program) already said no: keep its verdict */
	if (ret != 0)
		return ret;

	if (!(file->f_mode & FMODE_WRITE))
		return 0;

	inode = file->f_inode;
	if (!inode)
		return 0;
	mode = inode->i_mode;
	if (!S_ISBLK(mode))
		return 0;

	rdev = inode->i_rdev;
	if (!bpf_map_lookup_elem(&smoke_devs, &rdev))
		return 0;

	__sync_fetch_and_add(&smoke_denied, 1);
	return -EPERM;
}
