/*
 * agloop - binds a free loop device to a descriptor this process inherited,
 * for the VM lab's loopbind test (issue 41): what a holder of a descriptor
 * opened before a disk was protected (or taken with pidfd_getfd) would do.
 *
 *   agloop HOW FD [write]
 *
 * HOW: set_fd (LOOP_SET_FD), configure (LOOP_CONFIGURE), change_fd (a loop
 * device bound read-only to a file of FD's size first, then LOOP_CHANGE_FD to
 * FD: the kernel changes only a read-only loop device's file).
 * Gets a free loop device from /dev/loop-control and prints one line:
 * "LOOP <how> OK /dev/loopN" (then, with `write`, one 4096-byte block of
 * 0xa5 written through it at offset 0: "wrote N" or "write FAIL ...") or
 * "LOOP <how> FAIL <errno> <message>". The loop device is detached before it
 * exits. Exit 0 when the bind succeeded, 1 when it was refused, 2 on a
 * setup error. Built statically (tests/vm/initramfs.sh).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: agloop set_fd|configure|change_fd FD [write]\n");
		return 2;
	}
	const char *how = argv[1];
	int fd = atoi(argv[2]);
	int ctl = open("/dev/loop-control", O_RDWR);
	if (ctl < 0) {
		fprintf(stderr, "agloop: /dev/loop-control: %s\n", strerror(errno));
		return 2;
	}
	int n = ioctl(ctl, LOOP_CTL_GET_FREE);
	if (n < 0) {
		fprintf(stderr, "agloop: LOOP_CTL_GET_FREE: %s\n", strerror(errno));
		return 2;
	}
	char dev[32];
	snprintf(dev, sizeof(dev), "/dev/loop%d", n);
	int lo = open(dev, O_RDWR);
	if (lo < 0) {
		fprintf(stderr, "agloop: %s: %s\n", dev, strerror(errno));
		return 2;
	}
	int rc;
	if (strcmp(how, "set_fd") == 0) {
		rc = ioctl(lo, LOOP_SET_FD, fd);
	} else if (strcmp(how, "configure") == 0) {
		struct loop_config c;
		memset(&c, 0, sizeof(c));
		c.fd = fd;
		rc = ioctl(lo, LOOP_CONFIGURE, &c);
	} else if (strcmp(how, "change_fd") == 0) {
		/* a read-only file of FD's size first (the kernel changes only
		 * a read-only loop device's file, to one of the same size) */
		off_t size = lseek(fd, 0, SEEK_END);
		int z = open("/tmp/agloop.img", O_RDWR | O_CREAT | O_TRUNC, 0600);
		if (size <= 0 || z < 0 || ftruncate(z, size) != 0) {
			fprintf(stderr, "agloop: /tmp/agloop.img: %s\n", strerror(errno));
			return 2;
		}
		close(z);
		z = open("/tmp/agloop.img", O_RDONLY);
		if (z < 0 || ioctl(lo, LOOP_SET_FD, z) != 0) {
			fprintf(stderr, "agloop: binding %s to /tmp/agloop.img: %s\n", dev, strerror(errno));
			return 2;
		}
		close(z);
		unlink("/tmp/agloop.img");
		rc = ioctl(lo, LOOP_CHANGE_FD, fd);
	} else {
		fprintf(stderr, "agloop: unknown %s\n", how);
		return 2;
	}
	if (rc != 0) {
		int e = errno;
		printf("LOOP %s FAIL %d %s\n", how, e, strerror(e));
		ioctl(lo, LOOP_CLR_FD, 0);
		return 1;
	}
	printf("LOOP %s OK %s\n", how, dev);
	if (argc > 3 && strcmp(argv[3], "write") == 0) {
		char buf[4096];
		memset(buf, 0xa5, sizeof(buf));
		int w = open(dev, O_WRONLY);
		ssize_t k = w < 0 ? -1 : pwrite(w, buf, sizeof(buf), 0);
		if (k < 0)
			printf("write FAIL %d %s\n", errno, strerror(errno));
		else
			printf("wrote %zd\n", k);
		if (w >= 0) {
			fsync(w);
			close(w);
		}
	}
	ioctl(lo, LOOP_CLR_FD, 0);
	return 0;
}
