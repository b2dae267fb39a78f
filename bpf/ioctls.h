/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * ioctls.h - which ioctls write to a disk, or change it, and so are refused to
 * callers the filter does not allow (the LSM file_ioctl hooks).
 *
 * The names userspace reports are the Rust table IOCTLS in
 * crates/guard/src/guard/ioctls.rs: a host test runs write_ioctl() below
 * (through bpf/cmdclass.bpf.c, BPF_PROG_TEST_RUN) for every type and number
 * and the exact commands, and checks that it refuses exactly what that table
 * names. A change here without the same change there fails that test.
 *
 * Used by bpf/guard.bpf.c and bpf/cmdclass.bpf.c.
 */
#ifndef ASMGUARD_IOCTLS_H
#define ASMGUARD_IOCTLS_H

/* ioctl numbers: _IOC(dir, type, nr, size) = dir << 30 | size << 16 | type << 8 | nr */
#define IOC_TYPE(cmd) (((cmd) >> 8) & 0xff)
#define IOC_NR(cmd) ((cmd) & 0xff)

static __always_inline bool write_ioctl(__u32 cmd)
{
	__u32 type = IOC_TYPE(cmd), nr = IOC_NR(cmd);

	switch (cmd) {
	case 0x125d: /* BLKROSET */
	case 0x125f: /* BLKRRPART */
	case 0x1269: /* BLKPG */
	case 0x1277: /* BLKDISCARD */
	case 0x127d: /* BLKSECDISCARD */
	case 0x127f: /* BLKZEROOUT */
	case 0x2285: /* SG_IO (sd, sg, bsg): any SCSI command, WRITE included */
	case 0x1:    /* SCSI_IOCTL_SEND_COMMAND */
	case 0x2284: /* SG_SCSI_RESET (sd, sg): device, target, bus or host reset */
	case 0x031c: /* HDIO_DRIVE_RESET */
	case 0x031d: /* HDIO_DRIVE_TASKFILE: raw ATA taskfile (security erase) */
	case 0x031e: /* HDIO_DRIVE_TASK */
	case 0x031f: /* HDIO_DRIVE_CMD: ATA command (security erase, set features) */
		return true;
	}
	/* BLKRESETZONE, BLKOPENZONE, BLKCLOSEZONE, BLKFINISHZONE: _IOW(0x12, 131/134/135/136) */
	if (type == 0x12 && (nr == 131 || (nr >= 134 && nr <= 136)))
		return true;
	/* NVMe: ADMIN_CMD 0x41, SUBMIT_IO 0x42, IO_CMD 0x43, RESET 0x44,
	 * SUBSYS_RESET 0x45, RESCAN 0x46, ADMIN64 0x47, IO64 0x48, IO64_VEC 0x49 */
	if (type == 'N' && nr >= 0x41 && nr <= 0x49)
		return true;
	/* IOC_PR_REGISTER .. IOC_PR_CLEAR: _IOW('p', 200..205) */
	if (type == 'p' && nr >= 200 && nr <= 205)
		return true;
	/* Opal self-encrypting drives (linux/sed-opal.h, _IOW('p', 220..241)):
	 * every command that changes the drive's data, keys or locking, from
	 * IOC_OPAL_SAVE (220) to IOC_OPAL_GENERIC_TABLE_RW (235), and
	 * IOC_OPAL_REVERT_LSP (240), IOC_OPAL_SET_SID_PW (241). A revert
	 * (REVERT_TPR, PSID_REVERT_TPR) or ERASE_LR/SECURE_ERASE_LR erases data
	 * cryptographically. The reads pass: GET_STATUS 236, GET_LR_STATUS 237,
	 * GET_GEOMETRY 238, DISCOVERY 239. */
	if (type == 'p' && ((nr >= 220 && nr <= 235) || nr == 240 || nr == 241))
		return true;
	return false;
}

#endif /* ASMGUARD_IOCTLS_H */
