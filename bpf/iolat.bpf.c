// SPDX-License-Identifier: GPL-2.0
/*
 * iolat.bpf.c - per-disk, per-operation I/O latency histograms from the block
 * tracepoints, read by crates/metrics (asmguard-metrics) at scrape time.
 *
 *   block_rq_issue     the request goes to the driver: remember when, and its
 *                      queue time (issue - rq->start_time_ns, the block layer's
 *                      own stamp taken when the request was set up, before it
 *                      was inserted or plugged)
 *   block_rq_complete  device time = complete - issue; add it and the queue
 *                      time to the (disk, op) histograms; a completion with
 *                      an error is counted by kind (iolat_errs) instead
 *
 * The hot path is two programs and three map lookups per I/O, no map update
 * or delete in the steady state (see struct iolat_start); on queues where the
 * kernel stamps requests itself (see iolat_stats_bit) it is one program and
 * one lookup. block_rq_insert is not needed: the kernel's start_time_ns
 * already marks the start of queueing.
 *
 * Each hook exists twice: tp_btf (direct, typed access to struct request) and
 * raw_tp (bpf_probe_read, for kernels that cannot attach tp_btf), from one
 * body (iolat_attach.h, included once per kind), and each of those twice
 * again: with the in-flight cells of the own-stamps path (BPF cmpxchg, Linux
 * 5.12) and without (the LRU map only). The loader loads one of the four sets.
 *
 * Only disks that are keys of iolat_devs are traced (found through the
 * direct-mapped iolat_devidx in front of it); "all disks" is userspace adding
 * every disk. Time units and buckets: see iolat.h.
 */
#include "asmguard_core.h"
#include "iolat.h"
#include "iolat_slot.h"

char LICENSE[] SEC("license") = "GPL";

/* p->a or p->a->b: a field read written like BPF_CORE_READ's arguments */
#define IOLAT_NTH(_1, _2, _3, N, ...) N
#define IOLAT_ARROW2(p, a) (p)->a
#define IOLAT_ARROW3(p, a, b) (p)->a->b
#define IOLAT_ARROW(...) IOLAT_NTH(__VA_ARGS__, IOLAT_ARROW3, IOLAT_ARROW2, _)(__VA_ARGS__)
#define IOLAT_CAT_(a, b, c) a##_##b##_##c
#define IOLAT_CAT(a, b, c) IOLAT_CAT_(a, b, c)
/* BPF_PROG with a name that is itself a macro (expanded before BPF_PROG pastes it) */
#define IOLAT_PROG(name, ...) BPF_PROG(name, __VA_ARGS__)

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
	char disk_name[32];
} __attribute__((preserve_access_index));

/* whether a disk is hidden (no device number for userspace: the paths of an
 * NVMe multipath head) is read from its struct device's number, 0 when hidden
 * (no `dev` in sysfs; the block device's own bd_dev is set all the same):
 * inside a struct block_device pointed to by part0 since Linux 5.11, inside
 * an embedded struct hd_struct before */
struct device___iolat {
	__u32 devt;
} __attribute__((preserve_access_index));

struct block_device___iolat {
	struct device___iolat bd_device;
} __attribute__((preserve_access_index));

struct gendisk___new {
	struct block_device___iolat *part0;
} __attribute__((preserve_access_index));

struct hd_struct___iolat {
	struct device___iolat __dev;
} __attribute__((preserve_access_index));

struct gendisk___old {
	struct hd_struct___iolat part0;
} __attribute__((preserve_access_index));

struct request_queue___iolat {
	struct gendisk___iolat *disk; /* Linux >= 5.15 */
	unsigned long queue_flags;
	int id;
} __attribute__((preserve_access_index));

struct blk_mq_hw_ctx___iolat {
	unsigned int queue_num;
} __attribute__((preserve_access_index));

struct request___iolat {
	struct request_queue___iolat *q;
	struct blk_mq_hw_ctx___iolat *mq_hctx;
	int tag;
	unsigned int cmd_flags;
	unsigned int __data_len; /* bytes not completed yet */
	__u64 start_time_ns;
	__u64 io_start_time_ns;
} __attribute__((preserve_access_index));

struct request___old {
	struct gendisk___iolat *rq_disk; /* removed in Linux 5.17 */
} __attribute__((preserve_access_index));

/* traced disks: kernel dev_t -> slot (filled by userspace) */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IOLAT_MAX_DISKS);
	__type(key, __u32);
	__type(value, __u32);
} iolat_devs SEC(".maps");

/* the direct-mapped index in front of iolat_devs (see iolat.h) */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * IOLAT_MAX_DISKS);
	__type(key, __u32);
	__type(value, struct iolat_devent);
} iolat_devidx SEC(".maps");

/* the largest single-block I/O in bytes ([metrics] single_block_bytes): an
 * I/O of at most this size is IOLAT_SIZE_SINGLE, a larger one IOLAT_SIZE_MULTI */
const volatile __u32 iolat_single_max = 8192;

/* log2 of iolat_devidx's size (userspace sets both) */
const volatile __u32 iolat_idx_bits = 12;

/*
 * Requests seen: request pointer -> issue time. LRU, so the map stays bounded
 * whatever happens to completions. Userspace raises max_entries with the CPU
 * count (the LRU keeps per-CPU free lists).
 */
struct {
	__uint(type, IOLAT_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 32768);
	__type(key, __u64);
	__type(value, struct iolat_start);
} iolat_start SEC(".maps");

/* in-flight cells of the own-stamps path (see iolat.h; userspace sizes it) */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct iolat_cell);
} iolat_cells SEC(".maps");

/* log2 of iolat_cells' size (userspace sets both) */
const volatile __u32 iolat_cell_bits = 16;

/* requests of traced disks stamped by us rather than the kernel (per CPU) */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} iolat_own SEC(".maps");

/* histograms: element (slot * IOLAT_NOPS + op) * IOLAT_NSIZES + size class
 * (userspace sizes it) */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, IOLAT_MAX_DISKS * IOLAT_NOPS * IOLAT_NSIZES);
	__type(key, __u32);
	__type(value, struct iolat_hist);
} iolat_hists SEC(".maps");

/* errored completions: element slot * IOLAT_NERRS + kind (userspace sizes it) */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, IOLAT_MAX_DISKS * IOLAT_NERRS);
	__type(key, __u32);
	__type(value, __u64);
} iolat_errs SEC(".maps");

/* issues of traced disks that could not be remembered (LRU insert failed) */
__u64 iolat_dropped = 0;

/*
 * Completions the kernel did not stamp although the queue's flag at
 * iolat_stats_bit was set, so the issue program left them to the kernel: that
 * bit is not QUEUE_FLAG_STATS on this kernel. Userspace reads it after a probe
 * read at load and falls back to its own stamps if it moved.
 */
__u64 iolat_stamp_misses = 0;

/*
 * The bit number of QUEUE_FLAG_STATS in request_queue->queue_flags on the
 * running kernel, or ~0 if unknown. CO-RE cannot relocate it: it is a member
 * of an anonymous enum on newer kernels (6.12: userspace reads it from the
 * kernel's BTF) and a #define on older ones (5.10, 6.1: userspace's
 * per-kernel table).
 * Userspace verifies it with a probe read (see iolat_stamp_misses).
 *
 * On a queue with that flag (set whenever writeback throttling, io.latency or
 * io.cost watch the queue, which is the default for most disks), the kernel
 * itself stamps every request at issue (rq->io_start_time_ns, right after the
 * block_rq_issue tracepoint). Then the issue program has nothing to do, and
 * the complete program needs no map entry: one program, one map lookup.
 */
const volatile __u32 iolat_stats_bit = ~0U;

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

#define IOLAT_NOT_TRACED (~0U)

/* the major of the block layer's extended device numbers (BLOCK_EXT_MAJOR):
 * NVMe namespaces, their partitions and the hidden paths of NVMe heads */
#define IOLAT_EXT_MAJOR 259

/*
 * The key of a hidden NVMe path `nvme<S>c<C>n<N>` (S, C, N < 1024; see iolat.h
 * IOLAT_HIDDEN_KEY), from its 32-byte name; 0 for any other name. The kernel
 * gives such a disk a device number userspace never sees, so the tracer and
 * userspace key it by its name instead.
 */
static __always_inline __u32 hidden_key(const char name[32])
{
	__u32 v[3] = {}, f = 0;
	bool digits = false;

	if (name[0] != 'n' || name[1] != 'v' || name[2] != 'm' || name[3] != 'e')
		return 0;
	for (int i = 4; i < 32; i++) {
		char ch = name[i];

		if (ch >= '0' && ch <= '9') {
			if (f > 2)
				return 0;
			v[f] = v[f] * 10 + (ch - '0');
			if (v[f] >= IOLAT_HIDDEN_MAX)
				return 0;
			digits = true;
			continue;
		}
		if (!digits)
			return 0;
		if (f == 2)
			return ch == 0 ? IOLAT_HIDDEN_KEY(v[0], v[1], v[2]) : 0;
		if (ch != (f == 0 ? 'c' : 'n'))
			return 0;
		f++;
		digits = false;
	}
	return 0;
}

/* the histogram slot of a traced disk, or IOLAT_NOT_TRACED: one array lookup,
 * and a hash lookup only in a bucket several traced disks share */
static __always_inline __u32 traced_slot(__u32 dev)
{
	__u32 b = IOLAT_BUCKET(dev, iolat_idx_bits);
	struct iolat_devent *e = bpf_map_lookup_elem(&iolat_devidx, &b);
	__u32 *slot;

	if (!e || !e->slot1)
		return IOLAT_NOT_TRACED;
	if (e->slot1 != IOLAT_IDX_SHARED)
		return e->dev == dev ? e->slot1 - 1 : IOLAT_NOT_TRACED;
	slot = bpf_map_lookup_elem(&iolat_devs, &dev);
	return slot ? *slot : IOLAT_NOT_TRACED;
}

/* claims the cell of request `rq` (whose in-flight identity is `key`, see
 * cell_key) for this issue; false if another request in flight holds it
 * (then the LRU map keeps this one) */
static __always_inline bool cell_put(__u64 rq, __u64 key, __u64 now, __u64 queue, __u32 idx)
{
	__u32 k = IOLAT_CELL(key, iolat_cell_bits);
	struct iolat_cell *c = bpf_map_lookup_elem(&iolat_cells, &k);

	if (!c || __sync_val_compare_and_swap(&c->issue_ns, 0, now) != 0)
		return false;
	c->queue_ns = queue;
	c->idx = idx;
	c->rq = rq;
	return true;
}

/* issue of a request of disk `dev`; `start` is rq->start_time_ns (0: unknown);
 * `cells`: try the cells before the LRU map (a constant: two program sets) */
static __always_inline void on_issue(__u64 rq, __u32 dev, unsigned int cmd_flags, __u64 start,
				     const bool cells, __u64 key)
{
	struct iolat_start *s, fresh = {};
	__u32 slot, op, zero = 0;
	__u64 now, queue, *own;

	slot = traced_slot(dev);
	if (slot == IOLAT_NOT_TRACED)
		return;
	op = op_class(cmd_flags);
	if (op >= IOLAT_NOPS)
		return;
	own = bpf_map_lookup_elem(&iolat_own, &zero);
	if (own)
		*own += 1;
	now = bpf_ktime_get_ns();
	queue = start && start <= now ? now - start : IOLAT_NO_QUEUE_TIME;
	if (cells && cell_put(rq, key, now, queue, slot * IOLAT_NOPS + op))
		return;
	s = bpf_map_lookup_elem(&iolat_start, &rq);
	if (!s)
		s = &fresh;
	s->issue_ns = now;
	s->queue_ns = queue;
	s->idx = slot * IOLAT_NOPS + op;
	if (s == &fresh && bpf_map_update_elem(&iolat_start, &rq, &fresh, BPF_ANY))
		__sync_fetch_and_add(&iolat_dropped, 1);
}

/* the tracepoint's `error` (a blk_status_t, or a negative errno on older
 * kernels) -> enum iolat_err; see iolat.h */
static __always_inline __u32 err_kind(int error)
{
	switch (error) {
	case 10:
	case -5:
		return IOLAT_ERR_IOERR;
	case 7:
	case -61:
		return IOLAT_ERR_MEDIUM;
	case 4:
	case -67:
		return IOLAT_ERR_TRANSPORT;
	case 5:
	case -121:
		return IOLAT_ERR_TARGET;
	case 2:
	case -110:
		return IOLAT_ERR_TIMEOUT;
	case 3:
	case -28:
		return IOLAT_ERR_NOSPC;
	case 1:
	case -95:
		return IOLAT_ERR_NOTSUPP;
	default:
		return IOLAT_ERR_OTHER;
	}
}

/* an errored completion of the disk slot `slot`: counted apart, not a latency */
static __always_inline void count_error(__u32 slot, int error)
{
	__u32 k = slot * IOLAT_NERRS + err_kind(error);
	__u64 *n = bpf_map_lookup_elem(&iolat_errs, &k);

	if (n)
		__sync_fetch_and_add(n, 1);
}

static __always_inline void record(__u32 idx, __u64 lat, __u64 queue, unsigned int nr_bytes)
{
	__u32 e = idx * IOLAT_NSIZES + (nr_bytes > iolat_single_max ? IOLAT_SIZE_MULTI : IOLAT_SIZE_SINGLE);
	struct iolat_hist *h = bpf_map_lookup_elem(&iolat_hists, &e);

	if (!h)
		return;
	__sync_fetch_and_add(&h->lat[slot_of(lat)], 1);
	__sync_fetch_and_add(&h->lat_sum_ns, lat);
	__sync_fetch_and_add(&h->bytes, nr_bytes);
	if (queue != IOLAT_NO_QUEUE_TIME) {
		__sync_fetch_and_add(&h->queue[slot_of(queue)], 1);
		__sync_fetch_and_add(&h->queue_sum_ns, queue);
	}
}

/* completion of a request the kernel stamped at issue (io_start != 0) */
static __always_inline void on_complete_stamped(__u32 dev, unsigned int cmd_flags, __u64 start,
						__u64 io_start, unsigned int nr_bytes, int error)
{
	__u32 slot = traced_slot(dev);
	__u32 op;
	__u64 now;

	if (slot == IOLAT_NOT_TRACED)
		return;
	op = op_class(cmd_flags);
	if (op >= IOLAT_NOPS)
		return;
	if (error) {
		count_error(slot, error);
		return;
	}
	now = bpf_ktime_get_ns();
	record(slot * IOLAT_NOPS + op, now > io_start ? now - io_start : 0,
	       start && start <= io_start ? io_start - start : IOLAT_NO_QUEUE_TIME, nr_bytes);
}

/* completion of a request whose cell (see cell_put) it still holds: records
 * it and frees the cell; false if the cell holds another request */
static __always_inline bool cell_take(__u64 rq, __u64 key, unsigned int nr_bytes, int error)
{
	__u32 k = IOLAT_CELL(key, iolat_cell_bits);
	struct iolat_cell *c = bpf_map_lookup_elem(&iolat_cells, &k);
	__u64 issue, queue;
	__u32 idx;

	if (!c || c->rq != rq)
		return false;
	issue = c->issue_ns;
	queue = c->queue_ns;
	idx = c->idx;
	c->rq = 0;
	/* frees the cell, after the reads above (xchg is a full barrier) */
	__sync_lock_test_and_set(&c->issue_ns, 0);
	if (issue && error)
		count_error(idx / IOLAT_NOPS, error);
	else if (issue)
		record(idx, bpf_ktime_get_ns() - issue, queue, nr_bytes);
	return true;
}

/* completion of a request we stamped at issue in the LRU map (or never saw) */
static __always_inline void on_complete_tracked(__u64 rq, unsigned int nr_bytes, int error)
{
	struct iolat_start *s = bpf_map_lookup_elem(&iolat_start, &rq);
	__u64 issue, lat;

	if (!s)
		return;
	issue = s->issue_ns;
	if (!issue)
		return;
	lat = bpf_ktime_get_ns() - issue;
	s->issue_ns = 0;
	if (error)
		count_error(s->idx / IOLAT_NOPS, error);
	else
		record(s->idx, lat, s->queue_ns, nr_bytes);
}

/*
 * A request's identity among the requests in flight, as a number: its queue,
 * hardware context and driver tag (the verifier does not let a program hash
 * the request pointer itself). The cell found from it is then checked against
 * the pointer.
 */
static __always_inline __u64 cell_key(int qid, unsigned int hctx, int tag)
{
	return ((__u64)(__u32)qid << 32) | ((__u64)(hctx & 0xffff) << 16) | (__u32)(tag & 0xffff);
}

/*
 * The programs, one body for both attach kinds: iolat_attach.h is included
 * once per kind, with the way a field of struct request is read.
 */

/* tp_btf: typed, direct reads (a fault on a NULL pointer reads as 0) */
#define IOLAT_KIND btf
#define IOLAT_SEC "tp_btf"
#define IOLAT_RD(...) IOLAT_ARROW(__VA_ARGS__)
#include "iolat_attach.h"
#undef IOLAT_KIND
#undef IOLAT_SEC
#undef IOLAT_RD

/* raw_tp: the same through bpf_probe_read_kernel, for kernels that cannot
 * attach tp_btf */
#define IOLAT_KIND raw
#define IOLAT_SEC "raw_tp"
#define IOLAT_RD(...) BPF_CORE_READ(__VA_ARGS__)
#include "iolat_attach.h"
#undef IOLAT_KIND
#undef IOLAT_SEC
#undef IOLAT_RD
