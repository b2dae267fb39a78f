// SPDX-License-Identifier: GPL-2.0
/*
 * cmdclass.bpf.c - the passthrough command rule of bpf/passthrough.h, alone in
 * a program that BPF_PROG_TEST_RUN can run on any kernel (no LSM needed). Never
 * attached: the host test crates/guard/tests/commands_host.rs runs it for
 * every opcode and service action and compares its answers with the Rust
 * table (crates/guard/src/guard/commands.rs).
 *
 * Input (the test packet): byte 0 the command set (AG_CMD_*), byte 1 the
 * opcode, byte 2 the service action. Returns 1 (read class), 0 (not), or 2
 * (packet too short).
 */
#include "asmguard_core.h"
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
