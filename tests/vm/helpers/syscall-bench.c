/*
 * syscall-bench: a syscall microbenchmark for the write filter's cost
 * (scripts/bench-filter.sh; the VM lab builds every C file in tests/vm/helpers).
 *
 *   syscall-bench tmpfs FILE N    64-byte pwrite + pread of FILE (on tmpfs), N times
 *   syscall-bench pipe N          64-byte write + read through a pipe, N times
 *   syscall-bench null N          64-byte read of /dev/zero + write to /dev/null, N times
 *   syscall-bench pwrite DEV N    4 KiB O_DIRECT pwrite to DEV (a managed disk), N times,
 *                                 to blocks 1-255 (never block 0, its label)
 *   syscall-bench open PATH N     open PATH for writing and close it, N times (what the
 *                                 cgroup-device fallback sees: opens, not reads or writes)
 *   syscall-bench denied PATH N   try to open PATH for writing N times, each refused with
 *                                 EPERM (the filter's denial path; fails if one opens)
 *
 * Prints "<mode> calls=<C> ns_per_call=<T>" (wall clock, CLOCK_MONOTONIC).
 * Every failed call is an error: the run stops with exit status 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static int open_or_die(const char *path, int flags)
{
	int fd = open(path, flags, 0600);

	if (fd < 0)
		die(path);
	return fd;
}

int main(int argc, char **argv)
{
	static char buf[4096] __attribute__((aligned(4096)));
	const char *mode = argc > 1 ? argv[1] : "";
	int wfd, rfd, p[2];
	long n, i;
	size_t sz = 64;
	double t0, t1;

	if (argc == 3 && (!strcmp(mode, "pipe") || !strcmp(mode, "null"))) {
		n = atol(argv[2]);
	} else if (argc == 4 && (!strcmp(mode, "tmpfs") || !strcmp(mode, "pwrite") ||
				 !strcmp(mode, "open") || !strcmp(mode, "denied"))) {
		n = atol(argv[3]);
	} else {
		fprintf(stderr,
			"usage: syscall-bench tmpfs FILE N | pipe N | null N | pwrite DEV N | open PATH N | denied PATH N\n");
		return 2;
	}
	if (n <= 0) {
		fprintf(stderr, "syscall-bench: N must be a positive number\n");
		return 2;
	}
	memset(buf, 'x', sizeof(buf));
	if (!strcmp(mode, "denied")) {
		t0 = now_ns();
		for (i = 0; i < n; i++) {
			wfd = open(argv[2], O_WRONLY);
			if (wfd >= 0) {
				fprintf(stderr, "syscall-bench: %s opened for writing: not denied\n", argv[2]);
				return 1;
			}
			if (errno != EPERM)
				die(argv[2]);
		}
		t1 = now_ns();
		printf("denied calls=%ld ns_per_call=%.1f\n", n, (t1 - t0) / n);
		return 0;
	}
	if (!strcmp(mode, "open")) {
		t0 = now_ns();
		for (i = 0; i < n; i++)
			close(open_or_die(argv[2], O_WRONLY));
		t1 = now_ns();
		printf("open calls=%ld ns_per_call=%.1f\n", n, (t1 - t0) / n);
		return 0;
	}
	if (!strcmp(mode, "tmpfs")) {
		wfd = rfd = open_or_die(argv[2], O_RDWR | O_CREAT);
	} else if (!strcmp(mode, "pipe")) {
		if (pipe(p))
			die("pipe");
		rfd = p[0];
		wfd = p[1];
	} else if (!strcmp(mode, "null")) {
		rfd = open_or_die("/dev/zero", O_RDONLY);
		wfd = open_or_die("/dev/null", O_WRONLY);
	} else {
		wfd = open_or_die(argv[2], O_WRONLY | O_DIRECT);
		rfd = -1;
		sz = sizeof(buf);
	}

	t0 = now_ns();
	for (i = 0; i < n; i++) {
		if (rfd < 0) {
			if (pwrite(wfd, buf, sz, (off_t)(1 + i % 255) * sz) != (ssize_t)sz)
				die("pwrite");
		} else if (!strcmp(mode, "tmpfs")) {
			if (pwrite(wfd, buf, sz, 0) != (ssize_t)sz || pread(rfd, buf, sz, 0) != (ssize_t)sz)
				die("tmpfs");
		} else if (!strcmp(mode, "pipe")) {
			if (write(wfd, buf, sz) != (ssize_t)sz || read(rfd, buf, sz) != (ssize_t)sz)
				die("pipe");
		} else {
			if (read(rfd, buf, sz) != (ssize_t)sz || write(wfd, buf, sz) != (ssize_t)sz)
				die("null");
		}
	}
	t1 = now_ns();
	n *= rfd < 0 ? 1 : 2;
	printf("%s calls=%ld ns_per_call=%.1f\n", mode, n, (t1 - t0) / n);
	return 0;
}
