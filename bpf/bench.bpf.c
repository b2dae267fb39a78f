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
