// SPDX-License-Identifier: GPL-2.0
/*
 * cmdclass.bpf.c - the passthrough command rule of bpf/passthrough.h and the
 * refused ioctls of bpf/ioctls.h, alone in programs that BPF_PROG_TEST_RUN can
 * run on any kernel (no LSM needed). Never attached: the host test
 * crates/guard/tests/commands_host.rs runs them for every opcode and service
 * action, every ioctl type and number, and compares their answers with the
 * Rust tables (crates/guard/src/guard/commands.rs, ioctls.rs).
 *
 * Input (the test packet): byte 0 the command set (AG_CMD_*), byte 1 the
 * opcode, byte 2 the service action. Returns 1 (read class), 0 (not), or 2
 * (packet too short).
 */
#include "asmguard_core.h"
#include "guard.h"
#include "ioctls.h"
#include "passthrough.h"

char LICENSE[] SEC("license") = "GPL";

/* uapi struct xdp_md, the two fields used */
struct xdp_md {
	__u32 data;
	__u32 data_end;
};

SEC("xdp")
int ag_cmd_class(struct xdp_md *ctx)
{
	__u8 *p = (__u8 *)(long)ctx->data;
	__u8 *end = (__u8 *)(long)ctx->data_end;

	if (p + 3 > end)
		return 2;
	return cmd_read_class(p[0], p[1], p[2]) ? 1 : 0;
}

/* write_ioctl() of bpf/ioctls.h: the packet's first 4 bytes are the command
 * (native endian). Returns 1 (refused to callers not allowed), 0, or 2
 * (packet too short). */
SEC("xdp")
int ag_ioctl_write(struct xdp_md *ctx)
{
	__u8 *p = (__u8 *)(long)ctx->data;
	__u8 *end = (__u8 *)(long)ctx->data_end;
	__u32 cmd;

	if (p + 4 > end)
		return 2;
	__builtin_memcpy(&cmd, p, 4);
	return write_ioctl(cmd) ? 1 : 0;
}
