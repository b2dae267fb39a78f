/*
 * agmem - opens another process's /proc/PID/mem the way a root intruder
 * would, for the VM lab's homes test (issue 41, point 4): a root-run allowed
 * binary (crsd.bin) whose memory another task wrote through /proc/PID/mem is
 * that task's, not the binary's.
 *
 *   agmem write PID   opens /proc/PID/mem read-write, reads one byte of the
 *                     first writable private mapping and writes it back
 *                     (a real write that changes nothing)
 *   agmem read PID    opens it read-only and reads that byte
 *
 * Prints "MEM <how> OK addr=0x..." or "MEM <how> FAIL <step> <errno> <message>";
 * exit 0 on success, 1 when refused, 2 on a setup error. Built statically
 * (tests/vm/initramfs.sh).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	char path[64], line[512], perms[8];
	unsigned long lo = 0, hi;
	unsigned char b;
	int wr, fd;
	FILE *m;

	if (argc != 3 || (strcmp(argv[1], "write") && strcmp(argv[1], "read"))) {
		fprintf(stderr, "usage: agmem write|read PID\n");
		return 2;
	}
	wr = !strcmp(argv[1], "write");
	snprintf(path, sizeof(path), "/proc/%s/maps", argv[2]);
	m = fopen(path, "r");
	if (!m) {
		printf("MEM %s FAIL maps %d %s\n", argv[1], errno, strerror(errno));
		return 2;
	}
	while (fgets(line, sizeof(line), m)) {
		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 && perms[0] == 'r' &&
		    perms[1] == 'w' && perms[3] == 'p')
			break;
		lo = 0;
	}
	fclose(m);
	if (!lo) {
		printf("MEM %s FAIL maps 0 no writable private mapping\n", argv[1]);
		return 2;
	}
	snprintf(path, sizeof(path), "/proc/%s/mem", argv[2]);
	fd = open(path, wr ? O_RDWR : O_RDONLY);
	if (fd < 0) {
		printf("MEM %s FAIL open %d %s\n", argv[1], errno, strerror(errno));
		return 1;
	}
	if (pread(fd, &b, 1, (off_t)lo) != 1) {
		printf("MEM %s FAIL pread %d %s\n", argv[1], errno, strerror(errno));
		return 1;
	}
	if (wr && pwrite(fd, &b, 1, (off_t)lo) != 1) {
		printf("MEM %s FAIL pwrite %d %s\n", argv[1], errno, strerror(errno));
		return 1;
	}
	printf("MEM %s OK addr=0x%lx\n", argv[1], lo);
	return 0;
}
