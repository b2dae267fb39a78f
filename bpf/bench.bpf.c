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

SEC("lsm/file_open")
int BPF_PROG(bench_file_open)
{
	return 0;
}

SEC("lsm/file_permission")
int BPF_PROG(bench_file_permission)
{
	return 0;
}

SEC("lsm/file_ioctl")
int BPF_PROG(bench_file_ioctl)
{
	return 0;
}

SEC("lsm/mmap_file")
int BPF_PROG(bench_mmap_file)
{
	return 0;
}

SEC("lsm/file_mprotect")
int BPF_PROG(bench_file_mprotect)
{
	return 0;
}
