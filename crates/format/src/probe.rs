//! What a disk already holds: the check that stands between a label write and data.
//!
//! [`probe`] looks at the first and last bytes of a device (see [`HEAD_LEN`] and
//! [`TAIL_LEN`]) for partition tables, volume managers, filesystems, swap, RAID and
//! encryption signatures, ASM disk headers and ASMLib/AFD labels. Where the head holds
//! non-zero bytes that match nothing known, it says [`SignatureKind::UnknownData`]: an
//! unrecognised disk is never taken for a blank one.

use crate::bytes::{be32, has, le16, le32, slice};
use crate::header::DiskHeader;
use crate::label::{self, LabelState};
use serde::Serialize;

/// How many bytes from the start of the device the probe wants (btrfs sits at 64 KiB).
pub const HEAD_LEN: usize = 128 * 1024;
/// How many bytes from the end (md 0.90 sits up to 128 KiB from the end, GPT backup in
/// the last sector).
pub const TAIL_LEN: usize = 128 * 1024;

/// What was found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SignatureKind {
    /// An ASM disk header (kfbh.type 1 + ORCLDISK): a disk ASM knows.
    AsmDiskHeader {
        group: String,
        disk: String,
        status: String,
        checksum_ok: bool,
    },
    /// An ASMLib / AFD / asmguard label (`ORCLDISK` + label), not a disk header.
    AsmLabel {
        label: Option<String>,
    },
    /// `ORCLCLRD`: a label ASMLib deleted.
    AsmLabelCleared,
    /// DOS partition table or boot sector (0x55AA at byte 510).
    Mbr,
    /// GPT header ("EFI PART") at LBA 1 or in the last sector.
    Gpt,
    Lvm2,
    Ext2,
    Ext3,
    Ext4,
    Xfs,
    Btrfs,
    Swap,
    MdRaid {
        version: String,
    },
    Luks {
        version: u16,
    },
    Iso9660,
    /// Non-zero bytes in the first 64 KiB that match no known signature.
    UnknownData {
        first_nonzero_offset: u64,
    },
}

impl SignatureKind {
    /// A short name (as `blkid` would say TYPE).
    pub fn name(&self) -> &'static str {
        match self {
            Self::AsmDiskHeader { .. } => "asm_disk_header",
            Self::AsmLabel { .. } => "oracleasm",
            Self::AsmLabelCleared => "oracleasm_cleared",
            Self::Mbr => "dos",
            Self::Gpt => "gpt",
            Self::Lvm2 => "LVM2_member",
            Self::Ext2 => "ext2",
            Self::Ext3 => "ext3",
            Self::Ext4 => "ext4",
            Self::Xfs => "xfs",
            Self::Btrfs => "btrfs",
            Self::Swap => "swap",
            Self::MdRaid { .. } => "linux_raid_member",
            Self::Luks { .. } => "crypto_LUKS",
            Self::Iso9660 => "iso9660",
            Self::UnknownData { .. } => "unknown_data",
        }
    }

    /// Data that a label write would destroy (everything but our own label kinds and an
    /// ASM disk header, which has its own rule).
    pub fn is_foreign(&self) -> bool {
        !matches!(
            self,
            Self::AsmLabel { .. } | Self::AsmLabelCleared | Self::AsmDiskHeader { .. }
        )
    }
}

/// One signature and where its magic bytes sit on the device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Signature {
    #[serde(flatten)]
    pub kind: SignatureKind,
    /// Byte offset of the magic on the device.
    pub offset: u64,
    /// Length of the magic (what `wipefs` would erase).
    pub len: u32,
}

/// Probe a device given its `head` (up to [`HEAD_LEN`] bytes from offset 0), its
/// `tail` (up to [`TAIL_LEN`] bytes ending at `size`) and its `size` in bytes.
pub fn probe(head: &[u8], tail: &[u8], size: u64) -> Vec<Signature> {
    let mut out = Vec::new();
    let mut sig = |kind, offset: u64, len: u32| out.push(Signature { kind, offset, len });
    let tail_start = size.saturating_sub(tail.len() as u64);
    // In the tail: the bytes at device offset `o`, if the tail holds them.
    let at_tail = |o: u64, n: usize| -> &[u8] {
        if o < tail_start || o >= size {
            return &[];
        }
        slice(tail, (o - tail_start) as usize, n)
    };

    // ASM first: a disk header or a label.
    if let Some(h) = DiskHeader::parse(head) {
        sig(
            SignatureKind::AsmDiskHeader {
                group: h.grpname.clone(),
                disk: h.dskname.clone(),
                status: h.status.name(),
                checksum_ok: h.checksum_ok(),
            },
            0,
            32,
        );
    } else {
        match label::read(head) {
            LabelState::Marked { label, .. } => sig(
                SignatureKind::AsmLabel { label },
                label::TAG_OFFSET as u64,
                8,
            ),
            LabelState::Cleared => sig(SignatureKind::AsmLabelCleared, label::TAG_OFFSET as u64, 8),
            LabelState::Unmarked => {}
        }
    }

    if has(head, 510, &[0x55, 0xAA]) {
        sig(SignatureKind::Mbr, 510, 2);
    }
    for lba in [512u64, 4096] {
        if has(head, lba as usize, b"EFI PART") {
            sig(SignatureKind::Gpt, lba, 8);
        }
    }
    for ss in [512u64, 4096] {
        if size >= ss * 2 && at_tail(size - ss, 8) == b"EFI PART" {
            sig(SignatureKind::Gpt, size - ss, 8);
        }
    }
    for s in 0..4usize {
        let o = s * 512;
        if has(head, o, b"LABELONE") && has(head, o + 24, b"LVM2 001") {
            sig(SignatureKind::Lvm2, o as u64, 8);
        }
    }
    // ext2/3/4: superblock at 1024, magic 0xEF53 at +56, sane block size.
    if le16(head, 1024 + 56) == 0xEF53 && le32(head, 1024 + 24) <= 6 {
        let compat = le32(head, 1024 + 0x5C);
        let incompat = le32(head, 1024 + 0x60);
        let kind = if incompat & (0x40 | 0x80 | 0x200) != 0 {
            SignatureKind::Ext4
        } else if compat & 0x4 != 0 {
            SignatureKind::Ext3
        } else {
            SignatureKind::Ext2
        };
        sig(kind, 1024 + 56, 2);
    }
    if has(head, 0, b"XFSB") {
        sig(SignatureKind::Xfs, 0, 4);
    }
    if has(head, 65536 + 64, b"_BHRfS_M") {
        sig(SignatureKind::Btrfs, 65536 + 64, 8);
    }
    for page in [4096usize, 8192, 16384, 65536] {
        let o = page - 10;
        if has(head, o, b"SWAPSPACE2") || has(head, o, b"SWAP-SPACE") {
            sig(SignatureKind::Swap, o as u64, 10);
        }
    }
    const MD_MAGIC: u32 = 0xa92b_4efc;
    for (o, v) in [(0u64, "1.1"), (4096, "1.2")] {
        if le32(head, o as usize) == MD_MAGIC {
            sig(
                SignatureKind::MdRaid {
                    version: v.to_string(),
                },
                o,
                4,
            );
        }
    }
    if size >= 8192 {
        let o = (size - 8192) & !4095;
        if u32::from_le_bytes(crate::bytes::arr(at_tail(o, 4), 0)) == MD_MAGIC {
            sig(
                SignatureKind::MdRaid {
                    version: "1.0".into(),
                },
                o,
                4,
            );
        }
    }
    if size >= 131072 {
        let o = (size & !65535) - 65536;
        let b = at_tail(o, 4);
        if b.len() == 4 && (le32(b, 0) == MD_MAGIC || be32(b, 0) == MD_MAGIC) {
            sig(
                SignatureKind::MdRaid {
                    version: "0.90".into(),
                },
                o,
                4,
            );
        }
    }
    if has(head, 0, b"LUKS\xba\xbe") {
        let version = u16::from_be_bytes(crate::bytes::arr(head, 6));
        sig(SignatureKind::Luks { version }, 0, 6);
    }
    if has(head, 32769, b"CD001") {
        sig(SignatureKind::Iso9660, 32769, 5);
    }

    // Nothing foreign recognised and no ASM header: any other non-zero byte in the
    // first 64 KiB is data we do not understand.
    let known = out
        .iter()
        .any(|s| s.kind.is_foreign() || matches!(s.kind, SignatureKind::AsmDiskHeader { .. }));
    if !known {
        let labelled = !matches!(label::read(head), LabelState::Unmarked);
        let first = slice(head, 0, 65536)
            .iter()
            .enumerate()
            .find(|(i, &b)| {
                b != 0
                    && !(labelled
                        && ((0x0C..0x10).contains(i)
                            || (label::TAG_OFFSET..label::AREA_END).contains(i)))
            })
            .map(|(i, _)| i as u64);
        if let Some(first_nonzero_offset) = first {
            out.push(Signature {
                kind: SignatureKind::UnknownData {
                    first_nonzero_offset,
                },
                offset: first_nonzero_offset,
                len: 0,
            });
        }
    }
    out
}

/// The foreign signatures among `sigs` (data a label write would destroy).
pub fn foreign(sigs: &[Signature]) -> Vec<&Signature> {
    sigs.iter().filter(|s| s.kind.is_foreign()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::SynthDisk;

    fn kinds(s: &[Signature]) -> Vec<&'static str> {
        s.iter().map(|x| x.kind.name()).collect()
    }

    #[test]
    fn blank_is_nothing() {
        assert!(probe(&vec![0u8; HEAD_LEN], &vec![0u8; TAIL_LEN], 1 << 30).is_empty());
        assert!(probe(&[], &[], 0).is_empty());
    }

    #[test]
    fn md_superblocks_at_each_version_offset() {
        let size: u64 = 64 << 20;
        let magic = 0xa92b_4efcu32.to_le_bytes();
        for (off, ver, in_tail) in [
            (0u64, "1.1", false),
            (4096, "1.2", false),
            ((size - 8192) & !4095, "1.0", true),
            ((size & !65535) - 65536, "0.90", true),
        ] {
            let mut head = vec![0u8; HEAD_LEN];
            let mut tail = vec![0u8; TAIL_LEN];
            if in_tail {
                let o = (off - (size - TAIL_LEN as u64)) as usize;
                tail[o..o + 4].copy_from_slice(&magic);
            } else {
                head[off as usize..off as usize + 4].copy_from_slice(&magic);
            }
            let s = probe(&head, &tail, size);
            assert_eq!(
                s[0].kind,
                SignatureKind::MdRaid {
                    version: ver.into()
                },
                "{ver}: {s:?}"
            );
            assert_eq!(s[0].offset, off);
        }
    }

    #[test]
    fn lvm2_label_in_second_sector() {
        let mut head = vec![0u8; 4096];
        head[512..520].copy_from_slice(b"LABELONE");
        head[536..544].copy_from_slice(b"LVM2 001");
        assert_eq!(kinds(&probe(&head, &[], 1 << 20)), ["LVM2_member"]);
        // LABELONE without the LVM2 type is not LVM2, but it is still data.
        head[536..544].fill(0);
        assert_eq!(kinds(&probe(&head, &[], 1 << 20)), ["unknown_data"]);
    }

    #[test]
    fn mbr_written_over_an_asm_header_is_seen() {
        // Oracle Doc 1487443.1: fdisk wrote 0x55AA at byte 510 of an ASM disk header.
        let mut b = SynthDisk::new(4).header_block();
        b[510] = 0x55;
        b[511] = 0xAA;
        let s = probe(&b, &[], 4 << 20);
        assert_eq!(kinds(&s), ["asm_disk_header", "dos"]);
        assert!(matches!(
            s[0].kind,
            SignatureKind::AsmDiskHeader {
                checksum_ok: false,
                ..
            }
        ));
        assert!(!foreign(&s).is_empty());
    }

    #[test]
    fn unknown_data_is_never_blank() {
        let mut head = vec![0u8; 8192];
        head[5000] = 1;
        let s = probe(&head, &[], 1 << 20);
        assert_eq!(
            s[0].kind,
            SignatureKind::UnknownData {
                first_nonzero_offset: 5000
            }
        );
        // A label alone is ours, not unknown data; a label plus data is both.
        let mut head = vec![0u8; 8192];
        crate::label::write(&mut head, &"X1".parse().unwrap()).unwrap();
        assert_eq!(kinds(&probe(&head, &[], 1 << 20)), ["oracleasm"]);
        head[700] = 9;
        assert_eq!(
            kinds(&probe(&head, &[], 1 << 20)),
            ["oracleasm", "unknown_data"]
        );
    }

    #[test]
    fn gpt_backup_header_alone_is_found() {
        let size = 1u64 << 20;
        let mut tail = vec![0u8; 4096];
        tail[4096 - 512..4096 - 504].copy_from_slice(b"EFI PART");
        let s = probe(&[0u8; 1024], &tail, size);
        assert_eq!(kinds(&s), ["gpt"]);
        assert_eq!(s[0].offset, size - 512);
    }
}
