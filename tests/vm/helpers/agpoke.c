/*
 * agpoke - write attacks on a block device for the VM lab's filter test.
 *
 *   agpoke [--preopen GOFILE] DEVICE OFFSET ATTACK...
 *
 * Opens DEVICE read-write, then runs each ATTACK at byte OFFSET and prints one
 * line per attack: "ATTACK <name> OK" or "ATTACK <name> FAIL <errno> <message>".
 * With --preopen it opens DEVICE first, prints "opened <pid>", and waits for
 * GOFILE to exist before attacking (so the fd predates the filter).
 *
 * Attacks: write (buffered write + fsync), odirect (O_DIRECT pwrite), uring
 * (io_uring IORING_OP_WRITE, raw syscalls), uringdiscard (io_uring
 * IORING_OP_URING_CMD BLOCK_URING_CMD_DISCARD: 6.12+), mmap (shared writable mapping +
 * msync), mprotect (shared read mapping made writable), punch (fallocate
 * PUNCH_HOLE), discard (BLKDISCARD), zeroout (BLKZEROOUT), secdiscard
 * (BLKSECDISCARD). Every attack writes/discards 4 KiB-1 MiB at OFFSET.
 * Built statically (tests/vm/initramfs.sh); no liburing needed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <linux/io_uring.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define LEN 4096

static char *buf;

static void report(const char *name, int err)
{
	if (err == 0)
		printf("ATTACK %s OK\n", name);
	else
		printf("ATTACK %s FAIL %d %s\n", name, err, strerror(err));
	fflush(stdout);
}

/* BLOCK_URING_CMD_DISCARD (linux/blkdev.h, 6.12+): _IO(0x12, 0) */
#define AG_BLOCK_URING_CMD_DISCARD 0x1200

/* One io_uring request on fd: IORING_OP_WRITE of LEN bytes at off, or (discard)
 * IORING_OP_URING_CMD BLOCK_URING_CMD_DISCARD of 1 MiB at off. */
static int uring_op(int fd, off_t off, int discard)
{
	struct io_uring_params p;
	memset(&p, 0, sizeof(p));
	int rfd = syscall(__NR_io_uring_setup, 4, &p);
	if (rfd < 0)
		return errno;
	size_t sqsz = p.sq_off.array + p.sq_entries * sizeof(unsigned);
	size_t cqsz = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	if ((p.features & IORING_FEAT_SINGLE_MMAP) && cqsz > sqsz)
		sqsz = cqsz;
	char *sq = mmap(0, sqsz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, rfd, IORING_OFF_SQ_RING);
	if (sq == MAP_FAILED)
		return errno;
	char *cq = sq;
	if (!(p.features & IORING_FEAT_SINGLE_MMAP)) {
		cq = mmap(0, cqsz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, rfd, IORING_OFF_CQ_RING);
		if (cq == MAP_FAILED)
			return errno;
	}
	struct io_uring_sqe *sqes = mmap(0, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE,
					 MAP_SHARED | MAP_POPULATE, rfd, IORING_OFF_SQES);
	if (sqes == MAP_FAILED)
		return errno;
	unsigned *tail = (unsigned *)(sq + p.sq_off.tail);
	unsigned mask = *(unsigned *)(sq + p.sq_off.ring_mask);
	unsigned *array = (unsigned *)(sq + p.sq_off.array);
	unsigned t = *tail, idx = t & mask;
	memset(&sqes[idx], 0, sizeof(sqes[idx]));
	sqes[idx].fd = fd;
	if (discard) {
		sqes[idx].opcode = IORING_OP_URING_CMD;
		sqes[idx].cmd_op = AG_BLOCK_URING_CMD_DISCARD;
		sqes[idx].addr = off;
		sqes[idx].addr3 = 1 << 20;
	} else {
		sqes[idx].opcode = IORING_OP_WRITE;
		sqes[idx].addr = (uint64_t)(uintptr_t)buf;
		sqes[idx].len = LEN;
		sqes[idx].off = off;
	}
	array[idx] = idx;
	__atomic_store_n(tail, t + 1, __ATOMIC_RELEASE);
	if (syscall(__NR_io_uring_enter, rfd, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0) < 0)
		return errno;
	unsigned head = __atomic_load_n((unsigned *)(cq + p.cq_off.head), __ATOMIC_ACQUIRE);
	unsigned cmask = *(unsigned *)(cq + p.cq_off.ring_mask);
	struct io_uring_cqe *cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
	int res = cqes[head & cmask].res;
	close(rfd);
	if (res < 0)
		return -res;
	return (discard || res == LEN) ? 0 : EIO;
}

static int attack(int fd, const char *a, off_t off)
{
	uint64_t range[2] = { (uint64_t)off, 1 << 20 };
	if (!strcmp(a, "write")) {
		if (pwrite(fd, buf, LEN, off) != LEN)
			return errno ? errno : EIO;
		return fsync(fd) ? errno : 0;
	}
	if (!strcmp(a, "odirect")) {
		int fl = fcntl(fd, F_GETFL);
		if (fcntl(fd, F_SETFL, fl | O_DIRECT))
			return errno;
		int r = pwrite(fd, buf, LEN, off) == LEN ? 0 : (errno ? errno : EIO);
		fcntl(fd, F_SETFL, fl);
		return r;
	}
	if (!strcmp(a, "uring"))
		return uring_op(fd, off, 0);
	if (!strcmp(a, "uringdiscard"))
		return uring_op(fd, off, 1);
	if (!strcmp(a, "mmap")) {
		char *m = mmap(0, LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off);
		if (m == MAP_FAILED)
			return errno;
		memcpy(m, buf, LEN);
		int r = msync(m, LEN, MS_SYNC) ? errno : 0;
		munmap(m, LEN);
		return r;
	}
	if (!strcmp(a, "mprotect")) {
		char *m = mmap(0, LEN, PROT_READ, MAP_SHARED, fd, off);
		if (m == MAP_FAILED)
			return errno + 1000; /* not the attack: the read mapping failed */
		if (mprotect(m, LEN, PROT_READ | PROT_WRITE)) {
			int e = errno;
			munmap(m, LEN);
			return e;
		}
		memcpy(m, buf, LEN);
		int r = msync(m, LEN, MS_SYNC) ? errno : 0;
		munmap(m, LEN);
		return r;
	}
	if (!strcmp(a, "punch"))
		return fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, 1 << 20) ? errno : 0;
	if (!strcmp(a, "discard"))
		return ioctl(fd, BLKDISCARD, range) ? errno : 0;
	if (!strcmp(a, "zeroout"))
		return ioctl(fd, BLKZEROOUT, range) ? errno : 0;
	if (!strcmp(a, "secdiscard"))
		return ioctl(fd, BLKSECDISCARD, range) ? errno : 0;
	return EINVAL;
}

int main(int argc, char **argv)
{
	const char *go = NULL;
	int i = 1;
	if (argc > 2 && !strcmp(argv[1], "--preopen")) {
		go = argv[2];
		i = 3;
	}
	if (argc - i < 3) {
		fprintf(stderr, "usage: agpoke [--preopen GOFILE] DEVICE OFFSET ATTACK...\n");
		return 2;
	}
	const char *dev = argv[i];
	off_t off = strtoll(argv[i + 1], NULL, 0);
	if (posix_memalign((void **)&buf, 4096, LEN))
		return 1;
	memset(buf, 'X', LEN);
	memcpy(buf, "CORRUPTION", 10);
	int fd = open(dev, O_RDWR);
	if (fd < 0) {
		report("open", errno);
		return 0;
	}
	if (go) {
		printf("opened %d\n", getpid());
		fflush(stdout);
		struct stat st;
		while (stat(go, &st) != 0)
			usleep(50000);
	}
	for (int k = i + 2; k < argc; k++)
		report(argv[k], attack(fd, argv[k], off));
	/* stay a moment: the denial events are read in userspace, which resolves
	 * /proc/PID/exe of a process that still exists */
	if (go)
		sleep(2);
	return 0;
}
