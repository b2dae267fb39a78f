/* SPDX-License-Identifier: GPL-2.0 */
/*
 * devices.h - the managed set: which devices the write filter judges.
 *
 * A managed disk is every dev_t that reaches a labelled disk (the labelled
 * device, a multipath device above it and its sd paths, the parent disk of a
 * labelled partition, the SCSI/NVMe generic character devices). Userspace
 * (crates/guard, loader.rs) keys ag_blk / ag_chr by the kernel dev_t and
 * gives each a mode (struct ag_disk: enforce, audit or off), and keeps
 * ag_majors a superset of their majors.
 *
 * The lookup is built for file_permission, which runs for every read and
 * write of every file: two loads and a compare unless the file is a block or
 * character device, one array load more unless that device's major has a
 * managed node, and only then a hash lookup.
 *
 * Used by bpf/guard.bpf.c. Needs asmguard_core.h and guard.h first.
 */
#ifndef ASMGUARD_DEVICES_H
#define ASMGUARD_DEVICES_H

/* The managed nodes by kernel dev_t: block devices in ag_blk, character
 * devices in ag_chr. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct ag_disk);
} ag_blk SEC(".maps"), ag_chr SEC(".maps");

/* The majors with a managed node, block and character apart (guard.h). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * AG_MAJOR_WORDS);
	__type(key, __u32);
	__type(value, __u64);
} ag_majors SEC(".maps");

/* The managed disk of a device (NULL: not managed). `chr`: a character
 * device. The major's bit first (an inlined array load), so that writes to
 * /dev/null, ttys and the disks nobody labelled skip the hash lookup. */
static __always_inline struct ag_disk *managed_dev(__u32 dev, bool chr)
{
	__u32 major = dev >> MINORBITS;
	__u32 word = (chr ? AG_MAJOR_WORDS : 0) + major / 64;
	__u64 *bits = bpf_map_lookup_elem(&ag_majors, &word);

	if (!bits || !((*bits >> (major % 64)) & 1))
		return 0;
	if (chr)
		return bpf_map_lookup_elem(&ag_chr, &dev);
	return bpf_map_lookup_elem(&ag_blk, &dev);
}

/* S_ISBLK(m) || S_ISCHR(m) in one test: of the file types (in units of
 * 010000: fifo 01, chr 02, dir 04, blk 06, reg 010, lnk 012, sock 014) only
 * chr and blk have 02 set and 011 clear. */
#define S_ISDEV(m) (((m) & 0130000) == 0020000)

/* The managed disk behind an inode (NULL: not a managed device). Regular
 * files, directories, pipes, sockets and links leave at the i_mode test. */
static __always_inline struct ag_disk *managed(struct inode *inode, __u32 *dev, __u32 *flags)
{
	umode_t mode;
	bool chr;

	if (!inode)
		return 0;
	mode = inode->i_mode;
	if (!S_ISDEV(mode))
		return 0;
	chr = S_ISCHR(mode);
	*dev = inode->i_rdev;
	*flags = chr ? AG_EV_CHR : 0;
	return managed_dev(*dev, chr);
}

#endif /* ASMGUARD_DEVICES_H */
