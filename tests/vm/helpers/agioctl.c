/*
 * agioctl - destructive ioctls that write nothing, for the VM lab's
 * destructive test.
 *
 *   agioctl DEVICE IOCTL...
 *
 * Opens DEVICE read-only (O_RDONLY | O_NONBLOCK) and issues each IOCTL on that
 * fd, printing one line each: "IOCTL <name> OK" or "IOCTL <name> FAIL <errno>
 * <message>". The write filter must refuse every one of them with EPERM
 * before the driver sees it; the arguments are the mildest the command takes
 * (a zero key, locking range 0, ATA CHECK POWER MODE), in case it is not.
 *
 * IOCTLs: sg_scsi_reset (SG_SCSI_RESET, SG_SCSI_RESET_DEVICE),
 * opal_psid_revert (IOC_OPAL_PSID_REVERT_TPR), opal_revert (IOC_OPAL_REVERT_TPR),
 * opal_erase_lr (IOC_OPAL_ERASE_LR), opal_secure_erase_lr
 * (IOC_OPAL_SECURE_ERASE_LR), hdio_drive_cmd (HDIO_DRIVE_CMD), hdio_drive_task
 * (HDIO_DRIVE_TASK), hdio_drive_taskfile (HDIO_DRIVE_TASKFILE),
 * opal_get_status (IOC_OPAL_GET_STATUS: a read, not refused by the filter).
 * Built statically (tests/vm/initramfs.sh).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/hdreg.h>
#include <linux/sed-opal.h>
#include <scsi/sg.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: agioctl DEVICE IOCTL...\n");
		return 2;
	}
	int fd = open(argv[1], O_RDONLY | O_NONBLOCK);
	if (fd < 0) {
		fprintf(stderr, "agioctl: open %s: %s\n", argv[1], strerror(errno));
		return 2;
	}
	int failed = 0;
	for (int i = 2; i < argc; i++) {
		const char *n = argv[i];
		struct opal_key key;
		struct opal_session_info sess;
		struct opal_status st;
		unsigned char args[4 + 512];
		int reset = SG_SCSI_RESET_DEVICE;
		int rc;

		memset(&key, 0, sizeof(key));
		memset(&sess, 0, sizeof(sess));
		memset(&st, 0, sizeof(st));
		memset(args, 0, sizeof(args));
		if (!strcmp(n, "sg_scsi_reset")) {
			rc = ioctl(fd, SG_SCSI_RESET, &reset);
		} else if (!strcmp(n, "opal_psid_revert")) {
			rc = ioctl(fd, IOC_OPAL_PSID_REVERT_TPR, &key);
		} else if (!strcmp(n, "opal_revert")) {
			rc = ioctl(fd, IOC_OPAL_REVERT_TPR, &key);
		} else if (!strcmp(n, "opal_erase_lr")) {
			rc = ioctl(fd, IOC_OPAL_ERASE_LR, &sess);
		} else if (!strcmp(n, "opal_secure_erase_lr")) {
			rc = ioctl(fd, IOC_OPAL_SECURE_ERASE_LR, &sess);
		} else if (!strcmp(n, "opal_get_status")) {
			rc = ioctl(fd, IOC_OPAL_GET_STATUS, &st);
		} else if (!strcmp(n, "hdio_drive_cmd")) {
			args[0] = 0xe5; /* ATA CHECK POWER MODE */
			rc = ioctl(fd, HDIO_DRIVE_CMD, args);
		} else if (!strcmp(n, "hdio_drive_task")) {
			args[0] = 0xe5;
			rc = ioctl(fd, HDIO_DRIVE_TASK, args);
		} else if (!strcmp(n, "hdio_drive_taskfile")) {
			rc = ioctl(fd, HDIO_DRIVE_TASKFILE, args);
		} else {
			fprintf(stderr, "agioctl: unknown ioctl %s\n", n);
			return 2;
		}
		if (rc < 0) {
			printf("IOCTL %s FAIL %d %s\n", n, errno, strerror(errno));
			failed = 1;
		} else {
			printf("IOCTL %s OK\n", n);
		}
	}
	close(fd);
	return failed;
}
