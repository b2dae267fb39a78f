/* ag-premap DEVICE OFFSET GOFILE: maps 4 KiB of DEVICE at OFFSET shared and
 * writable, closes the descriptor (only the mapping is left), prints
 * "mapped PID", waits for GOFILE, then stores "CORRUPTION" through the
 * mapping, msyncs and prints "wrote OK" or "wrote FAIL errno". The mapping is
 * made before the disk is protected (issue 41, point 1: exposed disks). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: ag-premap DEVICE OFFSET GOFILE\n");
		return 2;
	}
	int fd = open(argv[1], O_RDWR);
	if (fd < 0) {
		printf("open FAIL %d %s\n", errno, strerror(errno));
		return 1;
	}
	char *m = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, strtoll(argv[2], NULL, 0));
	if (m == MAP_FAILED) {
		printf("mmap FAIL %d %s\n", errno, strerror(errno));
		return 1;
	}
	close(fd);
	printf("mapped %d\n", getpid());
	fflush(stdout);
	struct stat st;
	while (stat(argv[3], &st) != 0)
		usleep(50000);
	memcpy(m, "CORRUPTION", 10);
	if (msync(m, 4096, MS_SYNC))
		printf("wrote FAIL %d %s\n", errno, strerror(errno));
	else
		printf("wrote OK\n");
	return 0;
}
