/*
 * ag-asm-writer - the VM lab's stand-in for ASM and ocssd.bin: a program that
 * writes a disk by itself (installed by the tests as <home>/bin/oracle, setuid
 * and setgid grid:asmadmin like the real one, and as <home>/bin/ocssd.bin).
 *
 *   ag-asm-writer DEVICE OFFSET [COUNT] [--loop]
 *
 * Opens DEVICE O_RDWR|O_DIRECT, then writes COUNT (default 1) 4096-byte blocks
 * at byte OFFSET ("AGASM <pid> <n>" and '.'s, O_DIRECT) and reads each back.
 * One line per block: "write N ok" or "write N FAIL <errno name> <message>".
 * --loop: writes one block every 100 ms at OFFSET until killed (each line
 * flushed), never exits on a failed write. Exit 0 if every write landed, 1 if
 * one did not (or the open was refused: "open FAIL ..."), 2 on bad arguments.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LEN 4096

int main(int argc, char **argv)
{
	int loop = 0, nargs = 0;
	const char *a[3] = { 0 };
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--loop"))
			loop = 1;
		else if (nargs < 3)
			a[nargs++] = argv[i];
		else
			nargs = 9;
	}
	if (nargs < 2 || nargs > 3) {
		fprintf(stderr, "usage: ag-asm-writer DEVICE OFFSET [COUNT] [--loop]\n");
		return 2;
	}
	char *e1, *e2 = "";
	long long off = strtoll(a[1], &e1, 0);
	long count = a[2] ? strtol(a[2], &e2, 0) : 1;
	if (*e1 || *e2 || off < 0 || off % LEN || count < 1) {
		fprintf(stderr, "ag-asm-writer: OFFSET must be a multiple of 4096 and COUNT a positive number\n");
		return 2;
	}
	char *buf, *back;
	if (posix_memalign((void **)&buf, LEN, LEN) || posix_memalign((void **)&back, LEN, LEN))
		return 2;
	int fd = open(a[0], O_RDWR | O_DIRECT);
	if (fd < 0) {
		printf("open FAIL %s %s\n", strerrorname_np(errno), strerror(errno));
		return 1;
	}
	printf("open ok pid %d\n", getpid());
	fflush(stdout);
	int bad = 0;
	for (long n = 0; loop || n < count; n++) {
		long long at = loop ? off : off + n * LEN;
		memset(buf, '.', LEN);
		snprintf(buf, 64, "AGASM %d %ld", getpid(), n);
		if (pwrite(fd, buf, LEN, at) != LEN) {
			printf("write %ld FAIL %s %s\n", n, strerrorname_np(errno), strerror(errno));
			bad = 1;
		} else if (pread(fd, back, LEN, at) != LEN || memcmp(buf, back, LEN)) {
			printf("write %ld FAIL EIO not read back\n", n);
			bad = 1;
		} else {
			printf("write %ld ok\n", n);
		}
		fflush(stdout);
		if (loop)
			usleep(100000);
	}
	return bad;
}
