// SPDX-License-Identifier: GPL-2.0
/*
 * iolat_attach.h - the programs of iolat.bpf.c for one attach kind. Included
 * twice by iolat.bpf.c, after everything they call, with:
 *
 *   IOLAT_KIND     btf | raw: the names (dev_btf, iolat_btf_issue, ...)
 *   IOLAT_SEC      "tp_btf" | "raw_tp": the section prefix
 *   IOLAT_RD(p, a[, b])   how a field of a kernel struct is read: p->a(->b)
 *                  directly (tp_btf), or BPF_CORE_READ (raw_tp)
 *
 * No include guard: each inclusion defines one kind's functions.
 */

#define IOLAT_FN(name) IOLAT_CAT(name, IOLAT_KIND, fn)
#define IOLAT_NAME(hook) IOLAT_CAT(iolat, IOLAT_KIND, hook)

/* whether `disk` is hidden: its whole-disk device has no number (Linux
 * 5.11+: part0 is a struct block_device pointer; before, an embedded
 * hd_struct) */
static __always_inline bool IOLAT_FN(hidden)(struct gendisk___iolat *disk)
{
	if (bpf_core_field_exists(((struct gendisk___new *)disk)->part0)) {
		struct gendisk___new *d = (void *)disk;

		return IOLAT_RD(d, part0, bd_device.devt) == 0;
	} else {
		struct gendisk___old *d = (void *)disk;

		return IOLAT_RD(d, part0.__dev.devt) == 0;
	}
}

/* the request's disk, as a kernel dev_t (0: none), or the name key of a
 * hidden NVMe path (IOLAT_HIDDEN_KEY) */
static __always_inline __u32 IOLAT_FN(dev)(struct request___iolat *rq)
{
	struct gendisk___iolat *disk;
	__u32 major;

	if (bpf_core_field_exists(rq->q->disk)) {
		disk = IOLAT_RD(rq, q, disk);
	} else {
		struct request___old *old = (void *)rq;

		disk = IOLAT_RD(old, rq_disk);
	}
	if (!disk)
		return 0;
	major = IOLAT_RD(disk, major);
	if (major == IOLAT_EXT_MAJOR && IOLAT_FN(hidden)(disk)) {
		char name[32];

		if (bpf_core_read(name, sizeof(name), &disk->disk_name))
			return 0;
		return hidden_key(name);
	}
	return MKDEV(major, (__u32)IOLAT_RD(disk, first_minor));
}

/* the request's queue has the flag the issue programs take for
 * QUEUE_FLAG_STATS; the queue is not read at all when the kernel is not
 * trusted to stamp (the one test of iolat_stats_bit) */
static __always_inline bool IOLAT_FN(stats_flag)(struct request___iolat *rq)
{
	return iolat_stats_bit < 64 && (IOLAT_RD(rq, q, queue_flags) >> iolat_stats_bit) & 1;
}

static __always_inline __u64 IOLAT_FN(cell_key)(struct request___iolat *rq)
{
	return cell_key(IOLAT_RD(rq, q, id), IOLAT_RD(rq, mq_hctx, queue_num), IOLAT_RD(rq, tag));
}

static __always_inline int IOLAT_FN(issue)(struct request___iolat *rq, const bool cells)
{
	__u64 start = 0;

	/* the kernel stamps this request right after us */
	if (IOLAT_FN(stats_flag)(rq))
		return 0;
	if (bpf_core_field_exists(rq->start_time_ns))
		start = IOLAT_RD(rq, start_time_ns);
	on_issue((__u64)rq, IOLAT_FN(dev)(rq), IOLAT_RD(rq, cmd_flags), start, cells,
		 cells ? IOLAT_FN(cell_key)(rq) : 0);
	return 0;
}

static __always_inline int IOLAT_FN(complete)(struct request___iolat *rq, int error,
					      unsigned int nr_bytes, const bool cells)
{
	__u64 io_start = 0;

	/* A request completed in pieces passes here once per piece (SCSI ends a
	 * failed one with the good bytes, maybe none, then with the rest): only
	 * the piece that ends it counts, once, with the request's status. */
	if (nr_bytes < IOLAT_RD(rq, __data_len))
		return 0;
	if (bpf_core_field_exists(rq->io_start_time_ns))
		io_start = IOLAT_RD(rq, io_start_time_ns);
	if (io_start && iolat_stats_bit < 64)
		on_complete_stamped(IOLAT_FN(dev)(rq), IOLAT_RD(rq, cmd_flags),
				    IOLAT_RD(rq, start_time_ns), io_start, nr_bytes, error);
	else if (IOLAT_FN(stats_flag)(rq))
		/* left to the kernel at issue, and the kernel did not stamp it */
		__sync_fetch_and_add(&iolat_stamp_misses, 1);
	else if (cells && cell_take((__u64)rq, IOLAT_FN(cell_key)(rq), nr_bytes, error))
		return 0;
	else if (traced_slot(IOLAT_FN(dev)(rq)) != IOLAT_NOT_TRACED)
		/* the LRU map is looked at for traced disks only */
		on_complete_tracked((__u64)rq, nr_bytes, error);
	return 0;
}

SEC(IOLAT_SEC "/block_rq_issue")
int IOLAT_PROG(IOLAT_NAME(issue), struct request___iolat *rq)
{
	return IOLAT_FN(issue)(rq, false);
}

SEC(IOLAT_SEC "/block_rq_complete")
int IOLAT_PROG(IOLAT_NAME(complete), struct request___iolat *rq, int error, unsigned int nr_bytes)
{
	return IOLAT_FN(complete)(rq, error, nr_bytes, false);
}

SEC(IOLAT_SEC "/block_rq_issue")
int IOLAT_PROG(IOLAT_NAME(issue_cells), struct request___iolat *rq)
{
	return IOLAT_FN(issue)(rq, true);
}

SEC(IOLAT_SEC "/block_rq_complete")
int IOLAT_PROG(IOLAT_NAME(complete_cells), struct request___iolat *rq, int error,
	       unsigned int nr_bytes)
{
	return IOLAT_FN(complete)(rq, error, nr_bytes, true);
}

#undef IOLAT_FN
#undef IOLAT_NAME
