/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * iolat_slot.h - slot_of(): the histogram slot of a time in ns, for
 * bpf/iolat.bpf.c. Plain C on __u64, so that a host test
 * (crates/iostat/tests/slot_of_c.rs) compiles this very file natively and runs
 * it against the Rust twin, slot_of_ns() in crates/iostat/src/hist.rs, on
 * every slot boundary. Needs __u64 and, in BPF code, barrier_var() from
 * bpf_helpers.h (the includer's).
 */
#ifndef ASMGUARD_IOLAT_SLOT_H
#define ASMGUARD_IOLAT_SLOT_H

#include "iolat.h"

#ifndef barrier_var
#define barrier_var(var) asm volatile("" : "+r"(var))
#endif

/* floor(log2(v)) for v >= 1, branch-free */
static inline __attribute__((always_inline)) __u64 log2_floor(__u64 v)
{
	__u64 r, shift;

	r = (v > 0xFFFFFFFFULL) << 5;
	v >>= r;
	shift = (v > 0xFFFF) << 4;
	v >>= shift;
	r |= shift;
	shift = (v > 0xFF) << 3;
	v >>= shift;
	r |= shift;
	shift = (v > 0xF) << 2;
	v >>= shift;
	r |= shift;
	shift = (v > 0x3) << 1;
	v >>= shift;
	r |= shift;
	r |= (v >> 1);
	return r;
}

/*
 * The histogram slot of a time in ns: smallest k with ns <= 2^k units. 64-bit
 * all the way, and pinned in a register after the clamp: older verifiers
 * (6.1) lose the bound if the compiler indexes with an unclamped copy.
 * (A version without the division, two fewer DIVs per completion, measured
 * the same on the benchmark host: BENCHMARKS.md, "A/B".)
 */
static inline __attribute__((always_inline)) __u64 slot_of(__u64 ns)
{
	__u64 units, k = 0;

	/* beyond ~208 days ns * 1024 wraps: such a time belongs in the last slot,
	 * not in slot 0 (the Rust twin saturates) */
	if (ns > (~0ULL - (IOLAT_UNIT_NS_NUM - 1)) / IOLAT_UNIT_NS_DEN)
		return IOLAT_NSLOTS - 1;
	/* time in units, rounded up */
	units = (ns * IOLAT_UNIT_NS_DEN + IOLAT_UNIT_NS_NUM - 1) / IOLAT_UNIT_NS_NUM;
	if (units > 1)
		k = log2_floor(units - 1) + 1;
	barrier_var(k);
	if (k > IOLAT_NSLOTS - 1)
		k = IOLAT_NSLOTS - 1;
	barrier_var(k);
	return k;
}

#endif /* ASMGUARD_IOLAT_SLOT_H */
