/*
 * agmapfd - gets a file descriptor onto a BPF map the way an intruder with
 * root would, then writes the map through a program of its own, for the VM
 * lab's pinguard test (issue 41, point 3): the guardian judges the bpf()
 * commands that change a map through an fd, but a socket-filter program
 * loaded with that fd and run with BPF_PROG_TEST_RUN changes it from inside
 * the kernel.
 *
 *   agmapfd pin PATH [write]      BPF_OBJ_GET on a pinned map
 *   agmapfd pinro PATH [write]    the same, read-only (BPF_F_RDONLY)
 *   agmapfd id ID [write]         BPF_MAP_GET_FD_BY_ID
 *   agmapfd pidfd PID FD [write]  pidfd_getfd: FD of process PID
 *   agmapfd prog ID               BPF_PROG_GET_FD_BY_ID (no write)
 *
 * Prints "GET <how> OK fd=N map_id=M" or "GET <how> FAIL <errno> <message>";
 * with `write`, one socket-filter program (key 0, value all zero, BPF_ANY:
 * what zeroes ag_majors' word) loaded and run: "WROTE key 0" or
 * "WRITE FAIL <step> <errno> <message>". Exit 0 when it got the fd (and
 * wrote, if asked), 1 when the kernel refused the fd, 3 when the write was
 * refused, 2 on a setup error. Built statically (tests/vm/initramfs.sh).
 */
#include <errno.h>
#include <linux/bpf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

static long sys_bpf(int cmd, union bpf_attr *a)
{
	return syscall(SYS_bpf, cmd, a, sizeof(*a));
}

static int map_info(int fd, struct bpf_map_info *info)
{
	union bpf_attr a;

	memset(&a, 0, sizeof(a));
	memset(info, 0, sizeof(*info));
	a.info.bpf_fd = fd;
	a.info.info_len = sizeof(*info);
	a.info.info = (uint64_t)(uintptr_t)info;
	return sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &a);
}

#define INSN(c, d, s, o, i) ((struct bpf_insn){ .code = (c), .dst_reg = (d), .src_reg = (s), .off = (o), .imm = (i) })

/* key 0 (up to 8 bytes) at fp-8, value 0 (up to 64 bytes) at fp-72:
 * bpf_map_update_elem(map, fp-8, fp-72, BPF_ANY); return its result */
static int write_map(int mfd)
{
	struct bpf_insn p[32];
	int n = 0, off;
	union bpf_attr a;
	char log[4096] = "";
	unsigned char pkt[64] = { 0 };

	p[n++] = INSN(BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, 0);
	for (off = -8; off >= -72; off -= 8)
		p[n++] = INSN(BPF_STX | BPF_MEM | BPF_DW, 10, 0, off, 0);
	p[n++] = INSN(BPF_LD | BPF_DW | BPF_IMM, 1, BPF_PSEUDO_MAP_FD, 0, mfd);
	p[n++] = INSN(0, 0, 0, 0, 0);
	p[n++] = INSN(BPF_ALU64 | BPF_MOV | BPF_X, 2, 10, 0, 0);
	p[n++] = INSN(BPF_ALU64 | BPF_ADD | BPF_K, 2, 0, 0, -8);
	p[n++] = INSN(BPF_ALU64 | BPF_MOV | BPF_X, 3, 10, 0, 0);
	p[n++] = INSN(BPF_ALU64 | BPF_ADD | BPF_K, 3, 0, 0, -72);
	p[n++] = INSN(BPF_ALU64 | BPF_MOV | BPF_K, 4, 0, 0, BPF_ANY);
	p[n++] = INSN(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_map_update_elem);
	p[n++] = INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);

	memset(&a, 0, sizeof(a));
	a.prog_type = BPF_PROG_TYPE_SOCKET_FILTER;
	a.insn_cnt = n;
	a.insns = (uint64_t)(uintptr_t)p;
	a.license = (uint64_t)(uintptr_t)"GPL";
	a.log_buf = (uint64_t)(uintptr_t)log;
	a.log_size = sizeof(log);
	a.log_level = 1;
	int pfd = sys_bpf(BPF_PROG_LOAD, &a);
	if (pfd < 0) {
		int e = errno;
		printf("WRITE FAIL load %d %s\n", e, strerror(e));
		fprintf(stderr, "%s\n", log);
		return 3;
	}
	memset(&a, 0, sizeof(a));
	a.test.prog_fd = pfd;
	a.test.data_in = (uint64_t)(uintptr_t)pkt;
	a.test.data_size_in = sizeof(pkt);
	a.test.repeat = 1;
	if (sys_bpf(BPF_PROG_TEST_RUN, &a) < 0) {
		int e = errno;
		printf("WRITE FAIL test_run %d %s\n", e, strerror(e));
		return 3;
	}
	if ((int)a.test.retval != 0) {
		printf("WRITE FAIL update %d %s\n", -(int)a.test.retval, strerror(-(int)a.test.retval));
		return 3;
	}
	printf("WROTE key 0\n");
	return 0;
}

int main(int argc, char **argv)
{
	union bpf_attr a;
	int fd = -1, wi = 3;
	const char *how = argc > 1 ? argv[1] : "";

	if (argc < 3) {
		fprintf(stderr, "usage: agmapfd pin|pinro PATH [write] | id ID [write] | pidfd PID FD [write] | prog ID\n");
		return 2;
	}
	memset(&a, 0, sizeof(a));
	if (!strcmp(how, "pin") || !strcmp(how, "pinro")) {
		a.pathname = (uint64_t)(uintptr_t)argv[2];
		if (!strcmp(how, "pinro"))
			a.file_flags = BPF_F_RDONLY;
		fd = sys_bpf(BPF_OBJ_GET, &a);
	} else if (!strcmp(how, "id")) {
		a.map_id = strtoul(argv[2], NULL, 10);
		fd = sys_bpf(BPF_MAP_GET_FD_BY_ID, &a);
	} else if (!strcmp(how, "prog")) {
		a.prog_id = strtoul(argv[2], NULL, 10);
		fd = sys_bpf(BPF_PROG_GET_FD_BY_ID, &a);
		if (fd < 0) {
			int e = errno;
			printf("GET prog FAIL %d %s\n", e, strerror(e));
			return 1;
		}
		printf("GET prog OK fd=%d\n", fd);
		return 0;
	} else if (!strcmp(how, "pidfd") && argc >= 4) {
		int pfd = syscall(SYS_pidfd_open, atoi(argv[2]), 0);
		if (pfd < 0) {
			fprintf(stderr, "agmapfd: pidfd_open %s: %s\n", argv[2], strerror(errno));
			return 2;
		}
		fd = syscall(SYS_pidfd_getfd, pfd, atoi(argv[3]), 0);
		wi = 4;
	} else {
		fprintf(stderr, "agmapfd: unknown way '%s'\n", how);
		return 2;
	}
	if (fd < 0) {
		int e = errno;
		printf("GET %s FAIL %d %s\n", how, e, strerror(e));
		return 1;
	}
	struct bpf_map_info info;
	if (map_info(fd, &info) < 0) {
		int e = errno;
		printf("GET %s OK fd=%d (no map info: %d %s)\n", how, fd, e, strerror(e));
		return 2;
	}
	printf("GET %s OK fd=%d map_id=%u key_size=%u value_size=%u\n", how, fd, info.id, info.key_size,
	       info.value_size);
	if (argc <= wi || strcmp(argv[wi], "write"))
		return 0;
	if (info.key_size > 8 || info.value_size > 64) {
		printf("WRITE FAIL sizes key %u value %u (the helper writes keys up to 8 bytes, values up to 64)\n",
		       info.key_size, info.value_size);
		return 2;
	}
	return write_map(fd);
}
