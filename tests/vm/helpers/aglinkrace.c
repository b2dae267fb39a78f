/*
 * aglinkrace - races the guardian's fd-table read for a pinned BPF link, for
 * the VM lab's pinguard test (issue 41, point 3): BPF_OBJ_GET on a link's pin
 * makes an fd with no security hook on the way, and the guardian judges
 * BPF_LINK_DETACH / BPF_LINK_UPDATE from the caller's fd table before the
 * command's own fdget; a second thread dup2()s the link's fd and /dev/null
 * in turn over the fd the command names, so that the guardian may see
 * /dev/null and the kernel the link.
 *
 *   aglinkrace detach|update PIN SECONDS
 *
 * update: a cgroup-device program of its own that allows everything (what
 * would replace a cgroup-device link's program). Prints "LINK type=T id=I
 * prog=P", the command tried once on the link's own fd ("DIRECT <cmd> OK" or
 * "DIRECT <cmd> FAIL <errno> <message>"), then "RACE <cmd> tries=N landed=L
 * eperm=.. einval=.. eopnotsupp=.. ebadf=.. other=..". Exit 0 when nothing
 * landed, 1 when the pin gave no fd ("GET FAIL <errno> <message>"), 3 when a
 * command landed, 2 on a setup error. Built statically
 * (tests/vm/initramfs.sh).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define TARGET_FD 200

static int link_fd, null_fd, update, prog_fd;
static volatile int stop;

static long sys_bpf(int cmd, union bpf_attr *a)
{
	return syscall(SYS_bpf, cmd, a, sizeof(*a));
}

static long link_cmd(int fd)
{
	union bpf_attr a;

	memset(&a, 0, sizeof(a));
	if (update) {
		a.link_update.link_fd = fd;
		a.link_update.new_prog_fd = prog_fd;
		return sys_bpf(BPF_LINK_UPDATE, &a);
	}
	a.link_detach.link_fd = fd;
	return sys_bpf(BPF_LINK_DETACH, &a);
}

static void *swapper(void *arg)
{
	(void)arg;
	while (!stop) {
		dup2(link_fd, TARGET_FD);
		dup2(null_fd, TARGET_FD);
	}
	return NULL;
}

static int allow_all_prog(void)
{
	struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 1 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	union bpf_attr a;

	memset(&a, 0, sizeof(a));
	a.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
	a.expected_attach_type = BPF_CGROUP_DEVICE;
	a.insns = (uint64_t)(uintptr_t)insns;
	a.insn_cnt = 2;
	a.license = (uint64_t)(uintptr_t)"GPL";
	return sys_bpf(BPF_PROG_LOAD, &a);
}

int main(int argc, char **argv)
{
	long tries = 0, landed = 0, eperm = 0, einval = 0, enotsup = 0, ebadf = 0, other = 0;
	struct bpf_link_info info;
	struct timespec t0, t;
	union bpf_attr a;
	pthread_t th;
	double secs;

	if (argc != 4 || (strcmp(argv[1], "detach") && strcmp(argv[1], "update"))) {
		fprintf(stderr, "usage: aglinkrace detach|update PIN SECONDS\n");
		return 2;
	}
	update = !strcmp(argv[1], "update");
	secs = atof(argv[3]);
	memset(&a, 0, sizeof(a));
	a.pathname = (uint64_t)(uintptr_t)argv[2];
	link_fd = sys_bpf(BPF_OBJ_GET, &a);
	if (link_fd < 0) {
		printf("GET FAIL %d %s\n", errno, strerror(errno));
		return 1;
	}
	memset(&info, 0, sizeof(info));
	memset(&a, 0, sizeof(a));
	a.info.bpf_fd = link_fd;
	a.info.info_len = sizeof(info);
	a.info.info = (uint64_t)(uintptr_t)&info;
	if (sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &a))
		printf("LINK info FAIL %d %s\n", errno, strerror(errno));
	else
		printf("LINK type=%u id=%u prog=%u\n", info.type, info.id, info.prog_id);
	if (update) {
		prog_fd = allow_all_prog();
		if (prog_fd < 0) {
			printf("PROG FAIL %d %s\n", errno, strerror(errno));
			return 2;
		}
	}
	null_fd = open("/dev/null", O_RDONLY);
	if (null_fd < 0)
		return 2;
	if (link_cmd(link_fd))
		printf("DIRECT %s FAIL %d %s\n", argv[1], errno, strerror(errno));
	else {
		printf("DIRECT %s OK\n", argv[1]);
		landed++;
	}
	if (pthread_create(&th, NULL, swapper, NULL))
		return 2;
	while (fcntl(TARGET_FD, F_GETFD) < 0) /* the swapper's first dup2 */
		sched_yield();
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		for (int i = 0; i < 256; i++, tries++) {
			if (link_cmd(TARGET_FD) == 0) {
				landed++;
				continue;
			}
			switch (errno) {
			case EPERM: eperm++; break;
			case EINVAL: einval++; break;
			case EOPNOTSUPP: enotsup++; break;
			case EBADF: ebadf++; break;
			default: other++;
			}
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 < secs);
	stop = 1;
	pthread_join(th, NULL);
	printf("RACE %s tries=%ld landed=%ld eperm=%ld einval=%ld eopnotsupp=%ld ebadf=%ld other=%ld\n",
	       argv[1], tries, landed, eperm, einval, enotsup, ebadf, other);
	return landed ? 3 : 0;
}
