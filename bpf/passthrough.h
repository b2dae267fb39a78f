/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * passthrough.h - which SCSI (SG_IO) and NVMe admin passthrough commands are
 * "read class": they read the device or ask it about itself, and pass the
 * write filter for anyone who may open the device. Everything else (writes,
 * format, sanitize, unknown and vendor commands) stays refused for callers
 * that are not allow-listed.
 *
 * The source of the rule is the Rust table READ_CLASS in
 * crates/guard/src/guard/commands.rs: a host test runs cmd_read_class() below
 * (through bpf/cmdclass.bpf.c, BPF_PROG_TEST_RUN) for every opcode and service
 * action and compares it with that table. A change here without the same
 * change there fails that test.
 *
 * Below the rule, the reading of the command from the caller's ioctl
 * argument (passthrough_read_class): SG_IO's sg_io_hdr (v3, native or 32-bit
 * compat) and sg_io_v4, and NVMe admin commands. Who is trusted to have a
 * read-class command let through is guard.bpf.c's (passthrough_trust).
 *
 * Used by bpf/guard.bpf.c (ag_file_ioctl_s, ag_fr_file_ioctl) and
 * bpf/cmdclass.bpf.c. Needs asmguard_core.h, guard.h and ioctls.h first.
 */
#ifndef ASMGUARD_PASSTHROUGH_H
#define ASMGUARD_PASSTHROUGH_H

/* The command set an opcode belongs to. */
#define AG_CMD_SCSI 1       /* a SCSI CDB (SG_IO: sg_io_hdr v3 or sg_io_v4) */
#define AG_CMD_NVME_ADMIN 2 /* struct nvme_passthru_cmd(64).opcode, admin queue */

/* SCSI: byte 0 the opcode; for SERVICE ACTION IN(16), byte 1 bits 0-4 the
 * service action. */
static __always_inline bool scsi_read_class(__u8 op, __u8 sa)
{
	switch (op) {
	case 0x00: /* TEST UNIT READY */
	case 0x03: /* REQUEST SENSE */
	case 0x08: /* READ(6) */
	case 0x12: /* INQUIRY (VPD pages included) */
	case 0x1a: /* MODE SENSE(6) */
	case 0x25: /* READ CAPACITY(10) */
	case 0x28: /* READ(10) */
	case 0x4d: /* LOG SENSE */
	case 0x5a: /* MODE SENSE(10) */
	case 0x88: /* READ(16) */
	case 0xa0: /* REPORT LUNS */
	case 0xa3: /* MAINTENANCE IN: reports only (REPORT TARGET PORT GROUPS,
		      multipathd's ALUA prioritizer; REPORT SUPPORTED OPCODES ...);
		      its setting twin is MAINTENANCE OUT, 0xa4 */
	case 0xa8: /* READ(12) */
		return true;
	case 0x9e: /* SERVICE ACTION IN(16) */
		return (sa & 0x1f) == 0x10; /* READ CAPACITY(16) */
	}
	return false;
}

static __always_inline bool nvme_admin_read_class(__u8 op)
{
	switch (op) {
	case 0x02: /* GET LOG PAGE */
	case 0x06: /* IDENTIFY */
		return true;
	}
	return false;
}

/* Whether command `op` (service action `sa`) of set `kind` is read class. */
static __always_inline bool cmd_read_class(__u32 kind, __u8 op, __u8 sa)
{
	if (kind == AG_CMD_SCSI)
		return scsi_read_class(op, sa);
	if (kind == AG_CMD_NVME_ADMIN)
		return nvme_admin_read_class(op);
	return false;
}

/* ---- Reading the command: SG_IO and NVMe admin passthrough ----
 *
 * Two programs of guard.bpf.c read the command the kernel is about to send
 * and let the read class (above) through; every other program on file_ioctl
 * is all-or-nothing:
 *  - lsm.s/file_ioctl (ag_file_ioctl_s, sleepable, where the kernel accepts
 *    it) reads with bpf_copy_from_user, which faults the page in: a command
 *    it cannot read, the kernel cannot read either;
 *  - fmod_ret/security_file_ioctl (ag_fr_file_ioctl): the kernel lets no
 *    fmod_ret program on a security_* function sleep, so it reads with
 *    bpf_probe_read_user, which fails on a page that is not in memory: such a
 *    command is refused (fail closed), as is one of a layout it cannot tell.
 *
 * The kernel reads the same user memory again after this hook: a second
 * thread of the caller could rewrite the command in between, so a caller whose
 * memory has other users (threads) gets the all-or-nothing rule. Another
 * process writing into memory it shares with the caller, or ptrace, can still
 * race the two reads (README, Limits). */

#define SG_IO 0x2285
#define NVME_ADMIN_NR 0x41   /* NVME_IOCTL_ADMIN_CMD: _IOWR('N', 0x41, struct nvme_admin_cmd) */
#define NVME_ADMIN64_NR 0x47 /* NVME_IOCTL_ADMIN64_CMD */

/* The start of struct sg_io_hdr (v3: sd, sg) and of struct sg_io_v4 (bsg).
 * A 32-bit caller's compat_sg_io_hdr has 32-bit pointers: cmdp at offset 20. */
struct ag_sg_head {
	__s32 interface_id; /* 'S' (v3) or, as sg_io_v4.guard, 'Q' (v4) */
	__s32 dxfer_direction;
	__u8 cmd_len;
	__u8 mx_sb_len;
	__u16 iovec_count;
	__u32 dxfer_len;
	__u32 dxferp_compat;
	__u32 cmdp_compat;
	__u64 cmdp;
};

struct ag_sg_v4_head {
	__s32 guard; /* 'Q' */
	__u32 protocol;    /* 0: SCSI */
	__u32 subprotocol; /* 0: SCSI command */
	__u32 request_len; /* the CDB's length */
	__u64 request;     /* the CDB */
};

#define AG_CDB_NONE 0 /* nothing readable there */
#define AG_CDB_READ 1 /* read class */
#define AG_CDB_DENY 2 /* anything else */

/* Reads user memory: faulting it in (sleepable programs) or not. */
static __always_inline long read_user(void *dst, __u32 n, __u64 src, bool sleepable)
{
	if (sleepable)
		return bpf_copy_from_user(dst, n, (void *)src);
	return bpf_probe_read_user(dst, n, (void *)src);
}

/* The class of the command at user address `ptr` (`len` bytes long) of set
 * `kind`; its opcode goes into *info for the event. */
static __always_inline int cdb_class(__u64 ptr, __u32 len, __u32 kind, __u32 *info, bool sleepable)
{
	__u8 b[2] = {};

	if (!ptr || read_user(b, 1, ptr, sleepable))
		return AG_CDB_NONE;
	*info = AG_EV_CMD | (__u32)b[0] << 8;
	if (len < 1)
		return AG_CDB_DENY;
	if (kind == AG_CMD_SCSI && b[0] == 0x9e) {
		if (len < 2 || read_user(b, 2, ptr, sleepable))
			return AG_CDB_DENY;
		*info |= (__u32)b[1] << 16;
	}
	return cmd_read_class(kind, b[0], b[1]) ? AG_CDB_READ : AG_CDB_DENY;
}

/* Whether ioctl `cmd` is a passthrough this rule reads (SG_IO, NVMe admin). */
static __always_inline bool classed_ioctl(__u32 cmd)
{
	return cmd == SG_IO ||
	       (IOC_TYPE(cmd) == 'N' && (IOC_NR(cmd) == NVME_ADMIN_NR || IOC_NR(cmd) == NVME_ADMIN64_NR));
}

/* Whether the caller runs a 32-bit syscall (1), a 64-bit one (0), or this
 * kernel does not say (-1: not x86_64). */
static __always_inline int compat_syscall(struct task_struct *t)
{
	if (!bpf_core_field_exists(t->thread_info.status))
		return -1;
	return (BPF_CORE_READ(t, thread_info.status) & TS_COMPAT) ? 1 : 0;
}

/* Whether the passthrough command of ioctl `cmd` at `arg` is read class; *info
 * gets its opcode (AG_EV_CMD) when it could be read. `threads_ok`: the
 * caller's other threads are trusted not to rewrite it (a disk-query tool run
 * as host root: multipathd's checkers are threads). */
static __always_inline bool passthrough_read_class(__u32 cmd, unsigned long arg, __u32 *info,
						   bool sleepable, bool threads_ok)
{
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	union {
		struct ag_sg_head v3;
		struct ag_sg_v4_head v4;
	} h;
	int native, compat, is_compat;

	/* Another thread could rewrite the command after this read. */
	if (!threads_ok && BPF_CORE_READ(t, mm, mm_users.counter) != 1)
		return false;
	if (cmd != SG_IO)
		return cdb_class(arg, 1, AG_CMD_NVME_ADMIN, info, sleepable) == AG_CDB_READ;
	if (read_user(&h, sizeof(h), arg, sleepable))
		return false;
	if (h.v3.interface_id == 'S') {
		compat = cdb_class(h.v3.cmdp_compat, h.v3.cmd_len, AG_CMD_SCSI, info, sleepable);
		native = cdb_class(h.v3.cmdp, h.v3.cmd_len, AG_CMD_SCSI, info, sleepable);
		if (sleepable)
			/* Which layout the kernel reads (native or 32-bit compat)
			 * is not asked: both must be read class or unreadable. */
			return native != AG_CDB_DENY && compat != AG_CDB_DENY &&
			       (native == AG_CDB_READ || compat == AG_CDB_READ);
		/* Without faulting, an unreadable command may be one the kernel
		 * can read: the layout the kernel reads must be read class, and
		 * the other one must not be a readable write (an x32 caller). */
		is_compat = compat_syscall(t);
		if (is_compat < 0)
			return false;
		if (is_compat)
			return compat == AG_CDB_READ && native != AG_CDB_DENY;
		return native == AG_CDB_READ && compat != AG_CDB_DENY;
	}
	if (h.v4.guard == 'Q' && h.v4.protocol == 0 && h.v4.subprotocol == 0)
		return cdb_class(h.v4.request, h.v4.request_len, AG_CMD_SCSI, info, sleepable) ==
		       AG_CDB_READ;
	return false;
}

#endif /* ASMGUARD_PASSTHROUGH_H */
