/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * iolat.h - the types bpf/iolat.bpf.c shares with userspace (crates/metrics).
 *
 * Every definition here is mirrored by hand in crates/metrics/src/bpf.rs, and a
 * unit test there checks the Rust layout against the BTF the compiler emits
 * (the skeleton's generated types), so the two cannot drift apart silently.
 *
 * Needs __u32 / __u64 from the includer (asmguard_core.h in BPF code).
 *
 * ## Time unit and buckets
 *
 * Latencies are bucketed in log2 of a "binary microsecond": 1 unit = 1 ms / 1024
 * = 976.5625 ns. With that unit, bucket boundaries fall exactly on the bucket
 * boundaries of Oracle's wait event histogram: 2^10 units = 1 ms, 2^11 = 2 ms,
 * ... 2^15 = 32 ms, 2^20 = 1024 ms (Oracle's "<= 1 s" bucket is 1024 ms too).
 *
 * Slot k (0 <= k < IOLAT_NSLOTS - 1) counts I/Os that took at most 2^k units
 * (rounded up, Prometheus `le` semantics): a time t in ns goes to the smallest k
 * with t * 1024 <= 2^k * 10^6, i.e. t <= 2^k / 1024 ms. Slot 0 also holds 0.
 * The last slot (IOLAT_NSLOTS - 1) counts everything slower than
 * 2^(IOLAT_NSLOTS - 2) units (32.768 s): it only shows up in `le="+Inf"`.
 */
#ifndef ASMGUARD_IOLAT_H
#define ASMGUARD_IOLAT_H

/* slots 0..25 have an upper bound of 2^k units; slot 26 is the overflow */
#define IOLAT_NSLOTS 27

/* one unit = IOLAT_UNIT_NS_NUM / IOLAT_UNIT_NS_DEN ns = 10^6 / 1024 ns */
#define IOLAT_UNIT_NS_NUM 1000000ULL
#define IOLAT_UNIT_NS_DEN 1024ULL

/*
 * Operation classes (the `op` label). Mapping from the kernel's REQ_OP_*:
 *   REQ_OP_READ (0)                                   -> read
 *   REQ_OP_WRITE (1)                                  -> write
 *   REQ_OP_DISCARD (3), REQ_OP_SECURE_ERASE (5),
 *   REQ_OP_WRITE_ZEROES (9)                           -> discard
 *   REQ_OP_FLUSH (2)                                  -> flush
 *   anything else (zone management, driver passthrough) is not counted.
 * Write-zeroes counts as discard: like a discard it carries no data payload and
 * is a space-management command (thin arrays turn it into UNMAP); counting its
 * range as written bytes would inflate write throughput by gigabytes.
 */
enum iolat_op {
	IOLAT_OP_READ = 0,
	IOLAT_OP_WRITE = 1,
	IOLAT_OP_DISCARD = 2,
	IOLAT_OP_FLUSH = 3,
	IOLAT_NOPS = 4,
};

/*
 * I/O size classes (the `size` label): single-block I/Os (at most
 * iolat_single_max bytes, the database block size) and multiblock ones. Each
 * (disk, op) has one histogram per class.
 */
enum iolat_size {
	IOLAT_SIZE_SINGLE = 0,
	IOLAT_SIZE_MULTI = 1,
	IOLAT_NSIZES = 2,
};

/*
 * Error kinds (the `kind` label of asmguard_io_errors_total), from the
 * completion tracepoint's `error`: a blk_status_t (Linux >= 5.17 or so) or,
 * on older kernels, the errno blk_status_to_errno() made of it (negative).
 *   BLK_STS_IOERR (10)      / -EIO        -> ioerr
 *   BLK_STS_MEDIUM (7)      / -ENODATA    -> medium
 *   BLK_STS_TRANSPORT (4)   / -ENOLINK    -> transport
 *   BLK_STS_TARGET (5)      / -EREMOTEIO  -> target
 *   BLK_STS_TIMEOUT (2)     / -ETIMEDOUT  -> timeout
 *   BLK_STS_NOSPC (3)       / -ENOSPC     -> nospc
 *   BLK_STS_NOTSUPP (1)     / -EOPNOTSUPP -> notsupp
 *   anything else                         -> other
 * An errored request is counted here and is not a latency sample.
 */
enum iolat_err {
	IOLAT_ERR_IOERR = 0,
	IOLAT_ERR_MEDIUM = 1,
	IOLAT_ERR_TRANSPORT = 2,
	IOLAT_ERR_TARGET = 3,
	IOLAT_ERR_TIMEOUT = 4,
	IOLAT_ERR_NOSPC = 5,
	IOLAT_ERR_NOTSUPP = 6,
	IOLAT_ERR_OTHER = 7,
	IOLAT_NERRS = 8,
};

/* default number of disk slots (userspace may size the maps differently) */
#define IOLAT_MAX_DISKS 2048

/*
 * `iolat_devs` (hash): kernel dev_t of a traced whole disk -> its slot. Slots
 * are handed out by userspace; the histograms of slot s, op o and size class
 * c are element (s * IOLAT_NOPS + o) * IOLAT_NSIZES + c of the `iolat_hists`
 * array, its error counters (__u64,
 * by enum iolat_err) elements s * IOLAT_NERRS + k of the `iolat_errs` array.
 */

/*
 * `iolat_devidx` (array of 2^iolat_idx_bits buckets, at least twice the disk
 * slots): a direct-mapped index in front of iolat_devs, so the hot path pays
 * an array lookup instead of a hash lookup. Bucket iolat_bucket(dev) holds
 * the one traced disk that hashes there as { dev, slot + 1 }, { 0, 0 } when
 * none does, or { 0, IOLAT_IDX_SHARED } when several do (then iolat_devs
 * decides). Userspace keeps it in step with iolat_devs.
 */
struct iolat_devent {
	__u32 dev;
	__u32 slot1; /* slot + 1; 0: no traced disk here */
};

#define IOLAT_IDX_SHARED (~0U)

/*
 * Hidden disks: the paths of an NVMe multipath head (`nvme<S>c<C>n<N>`: head
 * N of subsystem S through controller C) have a device number inside the
 * kernel only (no `dev` in sysfs, no node). The tracer keys them by their
 * name instead: major IOLAT_HIDDEN_MAJOR + S (majors 3072..4095, above every
 * block major the kernel hands out, at most 511), minor C * 1024 + N; S, C
 * and N below IOLAT_HIDDEN_MAX, else not traced. Mirrored by
 * asmguard_metrics::hidden_path_key.
 */
#define IOLAT_HIDDEN_MAJOR 3072
#define IOLAT_HIDDEN_MAX 1024
#define IOLAT_HIDDEN_KEY(s, c, n) \
	((((__u32)IOLAT_HIDDEN_MAJOR + (s)) << 20) | ((__u32)(c) << 10) | (__u32)(n))

/* Fibonacci hashing of a dev_t to `bits` (1..31) bits */
#define IOLAT_BUCKET(dev, bits) ((__u32)((__u32)(dev) * 2654435761U) >> (32 - (bits)))

/* element of the `iolat_hists` array: cumulative since userspace zeroed it */
struct iolat_hist {
	__u64 bytes;        /* bytes completed */
	__u64 lat_sum_ns;   /* sum of device times (issue -> complete), ns */
	__u64 queue_sum_ns; /* sum of queue times, ns */
	__u64 lat[IOLAT_NSLOTS];   /* device time histogram; I/O count = sum */
	__u64 queue[IOLAT_NSLOTS]; /* queue time histogram (I/Os with a known queue time) */
};

/* no queue time known (the kernel did not stamp the request) */
#define IOLAT_NO_QUEUE_TIME (~0ULL)

/*
 * value of the `iolat_start` LRU map (key: the struct request pointer). Entries
 * are not deleted on completion: a struct request is reused for I/O after I/O,
 * so its entry is looked up and rewritten in place, which is much cheaper than
 * inserting and deleting one per I/O. The LRU bounds the map.
 */
struct iolat_start {
	__u64 issue_ns; /* 0: not in flight */
	__u64 queue_ns; /* or IOLAT_NO_QUEUE_TIME */
	__u32 idx;      /* element of iolat_hists */
	__u32 pad;
};

/*
 * element of the `iolat_cells` array (2^iolat_cell_bits cells): where the
 * own-stamps path keeps a request in flight, at cell IOLAT_CELL(its key: queue
 * id, hardware context and driver tag, unique among requests in flight).
 * A cell is free while issue_ns is 0: an issue claims it with a
 * compare-and-swap, its completion empties it (rq first, then issue_ns).
 * A request whose cell is taken goes to the `iolat_start` LRU map instead, so
 * counts stay exact. Kernels without BPF cmpxchg (before 5.12) load programs
 * that use the LRU map only.
 */
struct iolat_cell {
	__u64 rq;       /* the request pointer, 0 once completed */
	__u64 issue_ns; /* 0: free */
	__u64 queue_ns; /* or IOLAT_NO_QUEUE_TIME */
	__u32 idx;      /* element of iolat_hists */
	__u32 pad;
};

/* Fibonacci hashing of a request's key to `bits` (1..31) bits */
#define IOLAT_CELL(key, bits) ((__u32)(((__u64)(key) * 0x9E3779B97F4A7C15ULL) >> (64 - (bits))))

#endif /* ASMGUARD_IOLAT_H */
