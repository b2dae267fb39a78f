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
 * Used by bpf/guard.bpf.c (ag_file_ioctl_s) and bpf/cmdclass.bpf.c.
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

#endif /* ASMGUARD_PASSTHROUGH_H */
