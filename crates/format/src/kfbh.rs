//! The 32-byte header (kfbh) that starts every ASM metadata block, and its checksum.
//!
//! Checksum rule (verified on real blocks): the 32-bit word at 0x0C is chosen so that
//! the XOR of all 32-bit words of the block is zero. The rule is the same in either
//! byte order, because a zero XOR of words is a zero XOR in every byte lane.

use crate::bytes::{arr, Endian};
use serde::Serialize;

pub const KFBH_LEN: usize = 32;
pub const CHECK_OFFSET: usize = 0x0C;

/// kfbh.type values that asmguard names. Others are kept as numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockType {
    Invalid,
    DiskHeader,
    FreeSpace,
    AllocTable,
    FileDirectory,
    Other(u8),
}

impl BlockType {
    pub fn from_u8(v: u8) -> Self {
        match v {
            0 => Self::Invalid,
            1 => Self::DiskHeader,
            2 => Self::FreeSpace,
            3 => Self::AllocTable,
            4 => Self::FileDirectory,
            n => Self::Other(n),
        }
    }
    pub fn code(self) -> u8 {
        match self {
            Self::Invalid => 0,
            Self::DiskHeader => 1,
            Self::FreeSpace => 2,
            Self::AllocTable => 3,
            Self::FileDirectory => 4,
            Self::Other(n) => n,
        }
    }
    /// The name kfed prints (KFBTYP_*).
    pub fn kfed_name(self) -> String {
        match self {
            Self::Invalid => "KFBTYP_INVALID".into(),
            Self::DiskHeader => "KFBTYP_DISKHEAD".into(),
            Self::FreeSpace => "KFBTYP_FREESPC".into(),
            Self::AllocTable => "KFBTYP_ALLOCTBL".into(),
            Self::FileDirectory => "KFBTYP_FILEDIR".into(),
            Self::Other(n) => format!("type {n}"),
        }
    }
}

/// Result of checking a block's checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Checksum {
    /// XOR of every word is zero.
    Valid,
    /// XOR of every word is this value, not zero.
    Invalid { xor: u32 },
    /// Fewer bytes than the block size were given: cannot be verified.
    Incomplete { have: usize, block_size: usize },
}

/// The decoded kfbh.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Kfbh {
    pub endian: Endian,
    pub hard: u8,
    pub block_type: BlockType,
    pub datfmt: u8,
    pub blk: u32,
    pub obj: u32,
    pub check: u32,
    pub fcn_base: u32,
    pub fcn_wrap: u32,
}

impl Kfbh {
    /// Decode the first 32 bytes. `None` when the endian byte is neither 0 nor 1 or the
    /// input is shorter than 32 bytes: such a block is not ASM metadata.
    pub fn parse(b: &[u8]) -> Option<Kfbh> {
        if b.len() < KFBH_LEN {
            return None;
        }
        let endian = match b[0] {
            1 => Endian::Little,
            0 => Endian::Big,
            _ => return None,
        };
        Some(Kfbh {
            endian,
            hard: b[1],
            block_type: BlockType::from_u8(b[2]),
            datfmt: b[3],
            blk: endian.u32(b, 4),
            obj: endian.u32(b, 8),
            check: endian.u32(b, 12),
            fcn_base: endian.u32(b, 16),
            fcn_wrap: endian.u32(b, 20),
        })
    }

    /// Encode into the first 32 bytes of `b` (check is written as is).
    pub fn write(&self, b: &mut [u8]) {
        let e = self.endian;
        if b.len() < KFBH_LEN {
            return;
        }
        b[0] = match e {
            Endian::Little => 1,
            Endian::Big => 0,
        };
        b[1] = self.hard;
        b[2] = self.block_type.code();
        b[3] = self.datfmt;
        e.put_u32(b, 4, self.blk);
        e.put_u32(b, 8, self.obj);
        e.put_u32(b, 12, self.check);
        e.put_u32(b, 16, self.fcn_base);
        e.put_u32(b, 20, self.fcn_wrap);
    }

    /// The disk number encoded in block.obj for per-disk metadata (0x80000000 | n).
    pub fn disk_number(&self) -> Option<u32> {
        (self.obj & 0x8000_0000 != 0).then_some(self.obj & 0x7fff_ffff)
    }
}

/// XOR of all 32-bit words of `b` (a trailing partial word is zero-padded), as raw
/// little-endian lanes.
pub fn xor_words(b: &[u8]) -> u32 {
    b.chunks(4)
        .map(|c| u32::from_le_bytes(arr::<4>(c, 0)))
        .fold(0, |a, w| a ^ w)
}

/// Check a block of `block_size` bytes; `b` may be shorter (a published partial dump).
pub fn verify(b: &[u8], block_size: usize) -> Checksum {
    if b.len() < block_size || block_size == 0 {
        return Checksum::Incomplete {
            have: b.len(),
            block_size,
        };
    }
    match xor_words(&b[..block_size]) {
        0 => Checksum::Valid,
        x => Checksum::Invalid { xor: x },
    }
}

/// Set the check word so that the block XORs to zero.
pub fn fix_checksum(block: &mut [u8]) {
    if block.len() < KFBH_LEN {
        return;
    }
    block[CHECK_OFFSET..CHECK_OFFSET + 4].fill(0);
    let x = xor_words(block);
    block[CHECK_OFFSET..CHECK_OFFSET + 4].copy_from_slice(&x.to_le_bytes());
}
