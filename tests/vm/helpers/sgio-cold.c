/*
 * sgio-cold - sends a SCSI INQUIRY (a read-class command) with SG_IO whose CDB sits
 * in a page that is not in the caller's page tables yet, for the VM lab's
 * passthrough test.
 *
 *   sgio-cold DEVICE cold|warm
 *
 * The CDB is written to a file and mapped MAP_PRIVATE without being touched
 * ("cold": its page is not mapped in until something faults it in), or touched
 * first ("warm"). The fmod_ret filter reads the command without faulting and must
 * refuse a cold one (fail closed) and pass a warm one; the sleepable LSM program
 * faults the page in and passes both. Prints "sgio-cold MODE OK" or
 * "sgio-cold MODE FAIL <errno> <message>" and exits 0 or 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <scsi/sg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	unsigned char inquiry[6] = { 0x12, 0, 0, 0, 96, 0 };
	unsigned char resp[96], sense[32];
	char path[] = "/tmp/sgio-cold-XXXXXX";
	struct sg_io_hdr h;
	volatile unsigned char *cdb;
	int fd, cf, warm;

	if (argc != 3 || (strcmp(argv[2], "cold") && strcmp(argv[2], "warm"))) {
		fprintf(stderr, "usage: sgio-cold DEVICE cold|warm\n");
		return 2;
	}
	warm = !strcmp(argv[2], "warm");
	cf = mkstemp(path);
	if (cf < 0 || write(cf, inquiry, sizeof(inquiry)) != sizeof(inquiry)) {
		perror("sgio-cold: the CDB file");
		return 2;
	}
	unlink(path);
	cdb = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, cf, 0);
	if (cdb == MAP_FAILED) {
		perror("sgio-cold: mmap");
		return 2;
	}
	if (warm && cdb[0] != 0x12) {
		fprintf(stderr, "sgio-cold: the mapped CDB reads 0x%02x\n", cdb[0]);
		return 2;
	}
	fd = open(argv[1], O_RDONLY | O_NONBLOCK);
	if (fd < 0) {
		perror(argv[1]);
		return 2;
	}
	memset(&h, 0, sizeof(h));
	h.interface_id = 'S';
	h.dxfer_direction = SG_DXFER_FROM_DEV;
	h.cmd_len = sizeof(inquiry);
	h.mx_sb_len = sizeof(sense);
	h.dxfer_len = sizeof(resp);
	h.dxferp = resp;
	h.cmdp = (unsigned char *)cdb;
	h.sbp = sense;
	h.timeout = 10000;
	if (ioctl(fd, SG_IO, &h) < 0) {
		printf("sgio-cold %s FAIL %d %s\n", argv[2], errno, strerror(errno));
		return 1;
	}
	printf("sgio-cold %s OK\n", argv[2]);
	return 0;
}
