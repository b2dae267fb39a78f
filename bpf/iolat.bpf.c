// SPDX-License-Identifier: GPL-2.0
/*
 * iolat.bpf.c - per-disk, per-operation I/O latency histograms from the block
 * tracepoints, read by crates/metrics (asmguard-metrics) at scrape time.
 *
 *   block_rq_insert    remember when the request entered the queue
 *   block_rq_issue     remember when it went to the driver
 *   block_rq_complete  device time = complete - issue, queue time = issue -
 *                      insert (0 when the request was issued directly, without
 *                      being queued); add both to the (disk, op) histograms
 *
 * Each hook exists twice: tp_btf (direct, typed access to struct request) and
 * raw_tp (bpf_probe_read, for kernels that cannot attach tp_btf). The loader
 * loads one set. Both need the one-argument block_rq_insert of Linux >= 5.11.
 *
 * Only disks whose kernel dev_t is a key of iolat_devs are traced, unless
 * trace_all is set in iolat_config. Time units and buckets: see iolat.h.
 */
#include "asmguard_core.h"
#include "iolat.h"

char LICENSE[] SEC("license") = "GPL";

#define IOLAT_MAP_TYPE_LRU_HASH 9 /* BPF_MAP_TYPE_LRU_HASH */
#define IOLAT_F_NO_PREALLOC 1     /* BPF_F_NO_PREALLOC */
#define IOLAT_REQ_OP_MASK 0xff    /* (1 << REQ_OP_BITS) - 1 */

/*
 * The few kernel fields we read. The ___iolat / ___old suffixes are CO-RE
 * "flavors": libbpf matches them against struct request, struct gendisk and
 * struct request_queue of the running kernel, and the distinct names keep this
 * file free of clashes with asmguard_core.h.
 */
struct gendisk___iolat {
	int major;
	int first_minor;
} __attribute__((preserve_access_index));

struct request_queue___iolat {
	struct gendisk___iolat *disk; /* Linux >= 5.15 */
} __attribute__((preserve_access_index));

struct request___iolat {
	struct request_queue___iolat *q;
	unsigned int cmd_flags;
} __attribute__((preserve_access_index));

struct request___old {
	struct gendisk___iolat *rq_disk; /* removed in Linux 5.17 */
} __attribute__((preserve_access_index));

/* disks to trace: kernel dev_t -> 1 (filled by userspace) */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8);
} iolat_devs SEC(".maps");

/*
 * In-flight requests: request pointer -> timestamps. LRU, so completions we
 * never see (lost, or of requests issued before we attached) cannot leak
 * entries. Userspace raises max_entries on hosts with many CPUs (the LRU keeps
 * per-CPU free lists).
 */
struct {
	__uint(type, IOLAT_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 32768);
	__type(key, __u64);
	__type(value, struct iolat_start);
} iolat_start SEC(".maps");

/* (disk, op) -> histograms; allocated on first use */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__uint(map_flags, IOLAT_F_NO_PREALLOC);
	__type(key, struct iolat_key);
	__type(value, struct iolat_hist);
} iolat_hists SEC(".maps");

/* settings userspace may change at any time (one element, key 0) */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct iolat_config);
} iolat_config SEC(".maps");

/* completions not counted because iolat_hists was full */
__u64 iolat_dropped = 0;
/* the initial value of a new iolat_hists entry (never written) */
struct iolat_hist iolat_zero = {};

/* REQ_OP_* -> enum iolat_op, or IOLAT_NOPS for operations we do not count */
static __always_inline __u32 op_class(unsigned int cmd_flags)
{
	switch (cmd_flags & IOLAT_REQ_OP_MASK) {
	case 0:
		return IOLAT_OP_READ;
	case 1:
		return IOLAT_OP_WRITE;
	case 2:
		return IOLAT_OP_FLUSH;
	case 3: /* discard */
	case 5: /* secure erase */
	case 9: /* write zeroes */
		return IOLAT_OP_DISCARD;
	default:
		return IOLAT_NOPS;
	}
}

static __always_inline bool wanted(__u32 dev)
{
	__u32 zero = 0;
	struct iolat_config *cfg = bpf_map_lookup_elem(&iolat_config, &zero);

	if (cfg && cfg->trace_all)
		return true;
	return bpf_map_lookup_elem(&iolat_devs, &dev) != NULL;
}

/* floor(log2(v)) for v >= 1, branch-free */
static __always_inline __u32 log2_floor(__u64 v)
{
	__u32 r, shift;

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

/* the histogram slot of a time in ns: smallest k with ns <= 2^k units */
static __always_inline __u32 slot_of(__u64 ns)
{
	/* time in units, rounded up */
	__u64 units = (ns * IOLAT_UNIT_NS_DEN + IOLAT_UNIT_NS_NUM - 1) / IOLAT_UNIT_NS_NUM;
	__u32 k;

	if (units <= 1)
		return 0;
	k = log2_floor(units - 1) + 1;
	return k < IOLAT_NSLOTS - 1 ? k : IOLAT_NSLOTS - 1;
}

/* insert: the disk and op are known, the request is new */
static __always_inline void on_insert(__u64 rq, __u32 dev, unsigned int cmd_flags)
{
	struct iolat_start s = {};

	s.op = op_class(cmd_flags);
	if (s.op >= IOLAT_NOPS || !wanted(dev))
		return;
	s.dev = dev;
	s.insert_ns = bpf_ktime_get_ns();
	bpf_map_update_elem(&iolat_start, &rq, &s, BPF_ANY);
}

/*
 * issue of a request we saw inserted: stamp it. Returns false when the request
 * is unknown (issued directly) and the caller must read its disk and op.
 */
static __always_inline bool on_issue_known(__u64 rq)
{
	struct iolat_start *s = bpf_map_lookup_elem(&iolat_start, &rq);
	__u64 now;

	if (!s)
		return false;
	now = bpf_ktime_get_ns();
	/* a second issue (requeue, or a stale entry): no queue time */
	if (s->issue_ns)
		s->insert_ns = 0;
	s->issue_ns = now;
	return true;
}

/* issue of a request that never went through the queue */
static __always_inline void on_issue_direct(__u64 rq, __u32 dev, unsigned int cmd_flags)
{
	struct iolat_start s = {};

	s.op = op_class(cmd_flags);
	if (s.op >= IOLAT_NOPS || !wanted(dev))
		return;
	s.dev = dev;
	s.issue_ns = bpf_ktime_get_ns();
	bpf_map_update_elem(&iolat_start, &rq, &s, BPF_ANY);
}

static __always_inline void on_complete(__u64 rq, unsigned int nr_bytes)
{
	struct iolat_start *s = bpf_map_lookup_elem(&iolat_start, &rq);
	struct iolat_key key;
	struct iolat_hist *h;
	__u64 now, lat, queue = 0;

	if (!s)
		return;
	now = bpf_ktime_get_ns();
	if (!s->issue_ns) {
		/* completed (failed) without being issued: nothing to measure */
		bpf_map_delete_elem(&iolat_start, &rq);
		return;
	}
	lat = now - s->issue_ns;
	if (s->insert_ns && s->insert_ns < s->issue_ns)
		queue = s->issue_ns - s->insert_ns;
	key.dev = s->dev;
	key.op = s->op;
	bpf_map_delete_elem(&iolat_start, &rq);

	h = bpf_map_lookup_elem(&iolat_hists, &key);
	if (!h) {
		bpf_map_update_elem(&iolat_hists, &key, &iolat_zero, BPF_NOEXIST);
		h = bpf_map_lookup_elem(&iolat_hists, &key);
		if (!h) {
			__sync_fetch_and_add(&iolat_dropped, 1);
			return;
		}
	}
	__sync_fetch_and_add(&h->lat[slot_of(lat)], 1);
	__sync_fetch_and_add(&h->queue[slot_of(queue)], 1);
	__sync_fetch_and_add(&h->lat_sum_ns, lat);
	__sync_fetch_and_add(&h->queue_sum_ns, queue);
	__sync_fetch_and_add(&h->bytes, nr_bytes);
}

/* ---- tp_btf: typed, direct reads of struct request ---- */

static __always_inline __u32 dev_btf(struct request___iolat *rq)
{
	struct gendisk___iolat *disk;

	if (bpf_core_field_exists(rq->q->disk)) {
		disk = rq->q->disk;
	} else {
		struct request___old *old = (void *)rq;

		disk = old->rq_disk;
	}
	if (!disk)
		return 0;
	return MKDEV((__u32)disk->major, (__u32)disk->first_minor);
}

SEC("tp_btf/block_rq_insert")
int BPF_PROG(iolat_btf_insert, struct request___iolat *rq)
{
	on_insert((__u64)rq, dev_btf(rq), rq->cmd_flags);
	return 0;
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(iolat_btf_issue, struct request___iolat *rq)
{
	if (!on_issue_known((__u64)rq))
		on_issue_direct((__u64)rq, dev_btf(rq), rq->cmd_flags);
	return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(iolat_btf_complete, struct request___iolat *rq, int error, unsigned int nr_bytes)
{
	on_complete((__u64)rq, nr_bytes);
	return 0;
}

/* ---- raw_tp: the same through bpf_probe_read_kernel ---- */

static __always_inline __u32 dev_raw(struct request___iolat *rq)
{
	struct gendisk___iolat *disk;

	if (bpf_core_field_exists(rq->q->disk)) {
		disk = BPF_CORE_READ(rq, q, disk);
	} else {
		struct request___old *old = (void *)rq;

		disk = BPF_CORE_READ(old, rq_disk);
	}
	if (!disk)
		return 0;
	return MKDEV((__u32)BPF_CORE_READ(disk, major), (__u32)BPF_CORE_READ(disk, first_minor));
}

SEC("raw_tp/block_rq_insert")
int BPF_PROG(iolat_raw_insert, struct request___iolat *rq)
{
	on_insert((__u64)rq, dev_raw(rq), BPF_CORE_READ(rq, cmd_flags));
	return 0;
}

SEC("raw_tp/block_rq_issue")
int BPF_PROG(iolat_raw_issue, struct request___iolat *rq)
{
	if (!on_issue_known((__u64)rq))
		on_issue_direct((__u64)rq, dev_raw(rq), BPF_CORE_READ(rq, cmd_flags));
	return 0;
}

SEC("raw_tp/block_rq_complete")
int BPF_PROG(iolat_raw_complete, struct request___iolat *rq, int error, unsigned int nr_bytes)
{
	on_complete((__u64)rq, nr_bytes);
	return 0;
}
