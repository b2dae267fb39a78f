// SPDX-License-Identifier: GPL-2.0
/*
 * iolat_calibrate.bpf.c - benchmarks only, never in the production object:
 * an empty program on the tracepoint iolat.bpf.c's completion program uses.
 * Its run_time_ns / run_cnt under kernel.bpf_stats_enabled is the cost of the
 * measurement itself, to subtract from iolat's figures
 * (scripts/bench-iolat.sh; asmguard-iolat --calibrate loads it).
 */
#include "asmguard_core.h"

char LICENSE[] SEC("license") = "GPL";

SEC("tp_btf/block_rq_complete")
int BPF_PROG(iolat_calibrate)
{
	return 0;
}
