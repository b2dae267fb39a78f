//! Allocation table (AT) and free space table (FST) blocks, and free AUs as extents.
//!
//! Layout (reference `asm-format.md`): an AT block is kfbh (type 3) + kfdatb at 0x20
//! (`aunum` u32 = first AU it describes, `shrink` u16 = AUs per AT block) and one 8-byte
//! entry per AU from 0x48: `lo` = extent number, `hi` = flags and file number, bit 23 of
//! `hi` = V (allocated). V = 0 is a free AU. A block that does not parse (wrong type,
//! bad checksum, odd counts) says nothing: its AUs are in use as far as reclaim knows.

use crate::bytes::Endian;
use crate::kfbh::{self, BlockType, Checksum, Kfbh};
use serde::Serialize;

pub const AT_AUNUM: usize = 0x20;
pub const AT_SHRINK: usize = 0x24;
pub const AT_ENTRIES: usize = 0x48;
pub const AT_ENTRY_LEN: usize = 8;
pub const V_BIT: u32 = 1 << 23;

pub const FST_AUNUM: usize = 0x20;
pub const FST_MAX: usize = 0x24;
pub const FST_CNT: usize = 0x26;
pub const FST_ENTRIES: usize = 0x38;

/// One AT entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct AtEntry {
    pub lo: u32,
    pub hi: u32,
}

impl AtEntry {
    pub fn allocated(&self) -> bool {
        self.hi & V_BIT != 0
    }
    /// File number of an allocated AU (bits below the flags; mask unverified).
    pub fn file(&self) -> u32 {
        self.hi & 0x000f_ffff
    }
}

/// Why an AT block was not used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
pub enum AtError {
    #[error("not ASM metadata (no valid kfbh)")]
    NotMetadata,
    #[error("block type is {0}, not an allocation table")]
    WrongType(String),
    #[error("checksum does not hold ({0:?})")]
    BadChecksum(Checksum),
    #[error("block size {0} is not a power of two between 512 and 65536")]
    BadBlockSize(usize),
    #[error("AUs per block ({0}) does not fit the block")]
    BadShrink(u16),
}

/// A parsed allocation table block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AtBlock {
    pub kfbh: Kfbh,
    pub aunum: u32,
    pub shrink: u16,
    pub entries: Vec<AtEntry>,
}

fn valid_block_size(n: usize) -> bool {
    (512..=65536).contains(&n) && n.is_power_of_two()
}

/// The header of a metadata block of type `want`, `blksize` bytes, with a valid checksum.
fn metadata_block(b: &[u8], blksize: usize, want: BlockType) -> Result<Kfbh, AtError> {
    if !valid_block_size(blksize) {
        return Err(AtError::BadBlockSize(blksize));
    }
    let kfbh = Kfbh::parse(b).ok_or(AtError::NotMetadata)?;
    if kfbh.block_type != want {
        return Err(AtError::WrongType(kfbh.block_type.kfed_name()));
    }
    match kfbh::verify(b, blksize) {
        Checksum::Valid => Ok(kfbh),
        c => Err(AtError::BadChecksum(c)),
    }
}

impl AtBlock {
    /// Capacity of one AT block of `blksize` bytes.
    pub fn capacity(blksize: usize) -> usize {
        blksize.saturating_sub(AT_ENTRIES) / AT_ENTRY_LEN
    }

    pub fn parse(b: &[u8], blksize: usize) -> Result<AtBlock, AtError> {
        let kfbh = metadata_block(b, blksize, BlockType::AllocTable)?;
        let e = kfbh.endian;
        let shrink = e.u16(b, AT_SHRINK);
        if shrink == 0 || shrink as usize > Self::capacity(blksize) {
            return Err(AtError::BadShrink(shrink));
        }
        let entries = (0..shrink as usize)
            .map(|i| {
                let o = AT_ENTRIES + i * AT_ENTRY_LEN;
                AtEntry {
                    lo: e.u32(b, o),
                    hi: e.u32(b, o + 4),
                }
            })
            .collect();
        Ok(AtBlock {
            aunum: e.u32(b, AT_AUNUM),
            shrink,
            entries,
            kfbh,
        })
    }

    /// AU numbers this block says are free.
    pub fn free_aus(&self) -> impl Iterator<Item = u64> + '_ {
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| !e.allocated())
            .map(move |(i, _)| self.aunum as u64 + i as u64)
    }
}

/// A run of allocation units: `[start, start + count)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, PartialOrd, Ord)]
pub struct AuExtent {
    pub start: u64,
    pub count: u64,
}

impl AuExtent {
    pub fn end(&self) -> u64 {
        self.start + self.count
    }
}

/// Merge AU numbers into sorted, non-overlapping extents.
pub fn merge(aus: impl IntoIterator<Item = u64>) -> Vec<AuExtent> {
    let mut v: Vec<u64> = aus.into_iter().collect();
    v.sort_unstable();
    v.dedup();
    let mut out: Vec<AuExtent> = Vec::new();
    for au in v {
        match out.last_mut() {
            Some(x) if x.end() == au => x.count += 1,
            _ => out.push(AuExtent {
                start: au,
                count: 1,
            }),
        }
    }
    out
}

/// Free extents of one disk from its parsed AT blocks, limited to `[0, dsksize)` and
/// never containing an AU in `reserved` (AU 0, AU 1, header copies, AT AUs...).
pub fn free_extents(blocks: &[AtBlock], dsksize: u64, reserved: &[u64]) -> Vec<AuExtent> {
    merge(
        blocks
            .iter()
            .flat_map(|b| b.free_aus())
            .filter(|au| *au < dsksize && !reserved.contains(au)),
    )
}

/// A parsed free space table block: one byte per AT block (low nibble FREE, high FRAG).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FstBlock {
    pub kfbh: Kfbh,
    pub aunum: u32,
    pub max: u16,
    pub cnt: u16,
    pub free: Vec<u8>,
    pub frag: Vec<u8>,
}

impl FstBlock {
    pub fn parse(b: &[u8], blksize: usize) -> Result<FstBlock, AtError> {
        let kfbh = metadata_block(b, blksize, BlockType::FreeSpace)?;
        let e: Endian = kfbh.endian;
        let cnt = e.u16(b, FST_CNT);
        let n = (cnt as usize).min(blksize - FST_ENTRIES);
        let bytes = &b[FST_ENTRIES..FST_ENTRIES + n];
        Ok(FstBlock {
            aunum: e.u32(b, FST_AUNUM),
            max: e.u16(b, FST_MAX),
            cnt,
            free: bytes.iter().map(|x| x & 0xf).collect(),
            frag: bytes.iter().map(|x| x >> 4).collect(),
            kfbh,
        })
    }
}
