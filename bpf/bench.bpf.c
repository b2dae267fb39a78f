// SPDX-License-Identifier: GPL-2.0
/*
 * bench.bpf.c - empty LSM programs, for benchmarks only (scripts/bench-filter.sh,
 * loaded by asmguard-bench-empty; nothing else ever loads them).
 *
 * Each one sits on a hook the write filter (guard.bpf.c) uses and returns at
 * once. Its bpf_stats figure (run_time_ns / run_cnt) is the cost of the BPF
 * trampoline plus the measurement itself: the floor that a filter program on
 * the same hook is compared with ("no more than empty + 10 ns" on a file that
 * is not a device). Only hooks every lab kernel has (5.10 and later).
 *
 * bench_file_permission_hash is the other reference: the write filter's
 * file_permission as it was before the device-major bitmap (ag_majors), i.e.
 * a hash lookup for the write of every block or character device, in maps of
 * its own that stay empty. Next to ag_file_permission on the same calls it
 * gives the old path's cost side by side with the new one.
 */
#include "asmguard_core.h"

char LICENSE[] SEC("license") = "GPL";

/* An empty program bench_HOOK on lsm/HOOK. */
#define EMPTY_LSM(hook)            \
	SEC("lsm/" #hook)          \
	int BPF_PROG(bench_##hook) \
	{                          \
		return 0;          \
	}

EMPTY_LSM(file_open)
EMPTY_LSM(file_permission)
EMPTY_LSM(file_ioctl)
EMPTY_LSM(mmap_file)
EMPTY_LSM(file_mprotect)
EMPTY_LSM(inode_permission)

/* An empty program bench_fr_HOOK on fmod_ret/security_HOOK: the floor of the
 * filter's fmod_ret programs (ag_fr_HOOK), where bpf is not an active LSM. */
#define EMPTY_FMOD_RET(hook)                \
	SEC("fmod_ret/security_" #hook)     \
	int BPF_PROG(bench_fr_##hook)       \
	{                                   \
		return 0;                   \
	}

EMPTY_FMOD_RET(file_open)
EMPTY_FMOD_RET(file_permission)
EMPTY_FMOD_RET(file_ioctl)
EMPTY_FMOD_RET(mmap_file)
EMPTY_FMOD_RET(file_mprotect)
EMPTY_FMOD_RET(inode_permission)

#define MAY_WRITE 0x2

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u64);
} bench_blk SEC(".maps"), bench_chr SEC(".maps");

SEC("lsm/file_permission")
int BPF_PROG(bench_file_permission_hash, struct file *file, int mask, int ret)
{
	struct inode *inode;
	umode_t mode;
	__u32 dev;

	if (ret)
		return ret;
	if (!(mask & MAY_WRITE) || !file)
		return 0;
	inode = file->f_inode;
	if (!inode)
		return 0;
	mode = inode->i_mode;
	dev = inode->i_rdev;
	if (S_ISBLK(mode))
		bpf_map_lookup_elem(&bench_blk, &dev);
	else if (S_ISCHR(mode))
		bpf_map_lookup_elem(&bench_chr, &dev);
	return 0;
}
