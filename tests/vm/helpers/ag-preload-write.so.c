/*
 * ag-preload-write.so - borrow an allow-listed executable's identity with
 * LD_PRELOAD (issue 29's attack) and write a managed disk from inside it.
 *
 *   AG_DEV=DEVICE AG_OFF=OFFSET LD_PRELOAD=/usr/local/lib/ag-preload-write.so TARGET...
 *
 * A constructor, run by the dynamic loader before TARGET's main: opens DEVICE
 * O_WRONLY, pwrites 4096 bytes ("AGPRELOAD" and 'L's) at byte OFFSET, fsyncs,
 * prints one line naming the executable it ran in and each result to stderr,
 * and _exit()s: 0 if the write landed, 1 if not (TARGET's main never runs).
 * Without AG_DEV it does nothing. Built as a shared object by
 * tests/vm/initramfs.sh (the helpers named NAME.so.c become /usr/local/lib/NAME.so).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LEN 4096

__attribute__((constructor)) static void ag_preload_write(void)
{
	const char *dev = getenv("AG_DEV"), *offs = getenv("AG_OFF");
	static char buf[LEN];
	char exe[512] = "?";
	if (!dev)
		return;
	long long off = offs ? strtoll(offs, NULL, 0) : 0;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0)
		exe[n] = 0;
	memset(buf, 'L', LEN);
	memcpy(buf, "AGPRELOAD", 9);
	int fd = open(dev, O_WRONLY);
	if (fd < 0) {
		fprintf(stderr, "ag-preload-write: exe=%s open(%s, O_WRONLY) = -1 %s; write refused\n", exe, dev,
			strerror(errno));
		_exit(1);
	}
	ssize_t w = pwrite(fd, buf, LEN, off);
	int e = errno;
	int s = fsync(fd);
	fprintf(stderr, "ag-preload-write: exe=%s open(%s, O_WRONLY) = %d, pwrite(4096, %lld) = %zd%s%s, fsync = %d; write %s\n",
		exe, dev, fd, off, w, w < 0 ? " " : "", w < 0 ? strerror(e) : "", s, w == LEN ? "LANDED" : "refused");
	_exit(w == LEN ? 0 : 1);
}
