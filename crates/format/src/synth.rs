//! Builders for SYNTHETIC ASM disks, for tests and benchmarks.
//!
//! Every block built here follows the field table verified on real dumps (shared
//! reference) and is marked synthetic: `capname` reads `ASMGUARD_SYNTHETIC`. The tests
//! check that the parsers read real dumps and synthetic blocks alike. Every stride
//! is built: the first AU of stride k (AU `k * mfact`) holds that stride's free space
//! table (block `fstlocn`) and allocation table (blocks `altlocn..`), the layout of
//! AU 0 repeated (`at-layout.md` beside this crate: what is known and what is not).

use crate::alloc::{
    AtBlock, AT_AUNUM, AT_ENTRIES, AT_ENTRY_LEN, AT_SHRINK, FST_CNT, FST_ENTRIES, FST_MAX, V_BIT,
};
use crate::bytes::{put, Endian};
use crate::header::{off, HeaderStatus, Redundancy, Stamp};
use crate::kfbh::{fix_checksum, BlockType, Kfbh};
use crate::label::{self, Label};

pub const SYNTHETIC_MARK: &str = "ASMGUARD_SYNTHETIC";

/// A synthetic ASM disk description.
#[derive(Debug, Clone)]
pub struct SynthDisk {
    pub endian: Endian,
    pub secsize: u16,
    pub blksize: u16,
    pub ausize: u32,
    pub dsknum: u16,
    pub redundancy: Redundancy,
    pub status: HeaderStatus,
    pub compat: u32,
    pub dskname: String,
    pub grpname: String,
    pub fgname: String,
    pub created: (u32, u32),
    pub mounted: (u32, u32),
    pub label: Option<Label>,
    /// One flag per AU (the disk size in AUs is its length). AUs 0 and 1 are always
    /// allocated (ASM metadata) whatever is given here.
    pub allocated: Vec<bool>,
}

impl SynthDisk {
    /// A 1 MiB-AU, 4 KiB-block, little-endian disk of `aus` AUs with only AU 0 and 1 in use.
    pub fn new(aus: usize) -> SynthDisk {
        SynthDisk {
            endian: Endian::Little,
            secsize: 512,
            blksize: 4096,
            ausize: 1 << 20,
            dsknum: 0,
            redundancy: Redundancy::External,
            status: HeaderStatus::Member,
            compat: 0x0b20_0000,
            dskname: "DATA_0000".into(),
            grpname: "DATA".into(),
            fgname: "DATA_0000".into(),
            created: Stamp::encode(2024, 3, 14, 9, 26, 53),
            mounted: Stamp::encode(2026, 11, 1, 12, 0, 0),
            label: None,
            allocated: vec![false; aus],
        }
    }

    pub fn dsksize(&self) -> u32 {
        self.allocated.len() as u32
    }

    /// AUs per AT block.
    pub fn shrink(&self) -> u16 {
        if self.blksize == 4096 {
            448
        } else {
            AtBlock::capacity(self.blksize as usize) as u16
        }
    }

    /// First AT block in AU 0.
    pub const ALTLOCN: u32 = 2;
    pub const FSTLOCN: u32 = 1;

    /// AT blocks that fit in AU 0 after the header and FST.
    pub fn at_blocks_per_stride(&self) -> u32 {
        self.ausize / self.blksize as u32 - Self::ALTLOCN
    }

    pub fn mfact(&self) -> u32 {
        self.at_blocks_per_stride() * self.shrink() as u32
    }

    fn is_allocated(&self, au: usize) -> bool {
        au < 2
            || au % self.mfact() as usize == 0
            || self.allocated.get(au).copied().unwrap_or(false)
    }

    /// Strides holding at least one AU of the disk.
    pub fn strides(&self) -> u32 {
        self.dsksize().div_ceil(self.mfact()).max(1)
    }

    /// AUs of stride `k` inside the disk.
    fn stride_aus(&self, k: u32) -> u32 {
        let first = k * self.mfact();
        self.dsksize().saturating_sub(first).min(self.mfact())
    }

    fn kfbh(&self, t: BlockType, blk: u32) -> Kfbh {
        Kfbh {
            endian: self.endian,
            hard: 0x82,
            block_type: t,
            datfmt: 1,
            blk,
            obj: 0x8000_0000 | self.dsknum as u32,
            check: 0,
            fcn_base: 0,
            fcn_wrap: 0,
        }
    }

    /// The disk header (AU 0 block 0; the copy in AU 1 is the same block).
    pub fn header_block(&self) -> Vec<u8> {
        let e = self.endian;
        let mut b = vec![0u8; self.blksize as usize];
        self.kfbh(BlockType::DiskHeader, 0).write(&mut b);
        put(&mut b, label::TAG_OFFSET, label::TAG_MARKED);
        if let Some(l) = &self.label {
            put(&mut b, label::LABEL_OFFSET, &l.to_bytes());
        }
        e.put_u32(&mut b, off::COMPAT, self.compat);
        e.put_u16(&mut b, off::DSKNUM, self.dsknum);
        b[off::GRPTYP] = self.redundancy.code();
        b[off::HDRSTS] = self.status.code();
        put(&mut b, off::DSKNAME, self.dskname.as_bytes());
        put(&mut b, off::GRPNAME, self.grpname.as_bytes());
        put(&mut b, off::FGNAME, self.fgname.as_bytes());
        put(&mut b, off::CAPNAME, SYNTHETIC_MARK.as_bytes());
        e.put_u32(&mut b, off::CRESTMP, self.created.0);
        e.put_u32(&mut b, off::CRESTMP + 4, self.created.1);
        e.put_u32(&mut b, off::MNTSTMP, self.mounted.0);
        e.put_u32(&mut b, off::MNTSTMP + 4, self.mounted.1);
        e.put_u16(&mut b, off::SECSIZE, self.secsize);
        e.put_u16(&mut b, off::BLKSIZE, self.blksize);
        e.put_u32(&mut b, off::AUSIZE, self.ausize);
        e.put_u32(&mut b, off::MFACT, self.mfact());
        e.put_u32(&mut b, off::DSKSIZE, self.dsksize());
        e.put_u32(&mut b, off::PMCNT, 2);
        e.put_u32(&mut b, off::FSTLOCN, Self::FSTLOCN);
        e.put_u32(&mut b, off::ALTLOCN, Self::ALTLOCN);
        e.put_u32(&mut b, off::F1B1LOCN, 2);
        e.put_u32(&mut b, off::DBCOMPAT, 0x0a10_0000);
        e.put_u32(&mut b, off::GRPSTMP, self.created.0);
        e.put_u32(&mut b, off::GRPSTMP + 4, self.created.1);
        fix_checksum(&mut b);
        b
    }

    fn at_blocks_needed(&self, k: u32) -> u32 {
        let s = self.shrink() as u32;
        self.stride_aus(k).div_ceil(s).max(1)
    }

    /// The free space table block of the first stride (AU 0, block 1).
    pub fn fst_block(&self) -> Vec<u8> {
        self.fst_block_in(0)
    }

    /// The free space table block of stride `k` (block 1 of its first AU).
    pub fn fst_block_in(&self, k: u32) -> Vec<u8> {
        let e = self.endian;
        let mut b = vec![0u8; self.blksize as usize];
        self.kfbh(BlockType::FreeSpace, Self::FSTLOCN).write(&mut b);
        let first = (k * self.mfact()) as usize;
        e.put_u32(&mut b, 0x20, first as u32);
        e.put_u16(&mut b, FST_MAX, self.at_blocks_per_stride() as u16);
        let n = self.at_blocks_needed(k);
        e.put_u16(&mut b, FST_CNT, n as u16);
        for i in 0..n as usize {
            let s = self.shrink() as usize;
            let free = (first + i * s..(first + (i + 1) * s).min(self.allocated.len()))
                .filter(|&au| !self.is_allocated(au))
                .count();
            b[FST_ENTRIES + i] = if free > 0 { 1 } else { 0 };
        }
        fix_checksum(&mut b);
        b
    }

    /// AT block `i` of the first stride (AU 0, block `ALTLOCN + i`).
    pub fn at_block(&self, i: u32) -> Vec<u8> {
        self.at_block_in(0, i)
    }

    /// AT block `i` of stride `k` (block `ALTLOCN + i` of AU `k * mfact`),
    /// describing AUs from `k * mfact + i * shrink`.
    pub fn at_block_in(&self, k: u32, i: u32) -> Vec<u8> {
        let e = self.endian;
        let s = self.shrink() as u32;
        let first = k * self.mfact() + i * s;
        let mut b = vec![0u8; self.blksize as usize];
        self.kfbh(BlockType::AllocTable, Self::ALTLOCN + i)
            .write(&mut b);
        e.put_u32(&mut b, AT_AUNUM, first);
        e.put_u16(&mut b, AT_SHRINK, s as u16);
        for j in 0..s {
            let au = (first + j) as usize;
            let o = AT_ENTRIES + j as usize * AT_ENTRY_LEN;
            if au < self.allocated.len() && self.is_allocated(au) {
                // Extent number = AU number here; file number 1..: a plausible entry.
                e.put_u32(&mut b, o, au as u32);
                e.put_u32(&mut b, o + 4, V_BIT | (1 + (au as u32 % 255)));
            } else if au >= self.allocated.len() {
                // Past the end of the disk: no entry (zero), which reads as free but
                // callers clip to dsksize.
            }
        }
        fix_checksum(&mut b);
        b
    }

    /// Every metadata block with its byte offset on the device.
    pub fn metadata(&self) -> Result<Vec<(u64, Vec<u8>)>, String> {
        let bs = self.blksize as u64;
        if self.dsksize() < 2 {
            return Err("a synthetic disk needs at least 2 AUs".into());
        }
        let mut v = vec![(0, self.header_block())];
        for k in 0..self.strides() {
            let base = k as u64 * self.mfact() as u64 * self.ausize as u64;
            v.push((base + bs, self.fst_block_in(k)));
            for i in 0..self.at_blocks_needed(k) {
                v.push((
                    base + (Self::ALTLOCN + i) as u64 * bs,
                    self.at_block_in(k, i),
                ));
            }
        }
        let (au, blk) = (1u64, self.ausize as u64 / bs - 2);
        v.push((au * self.ausize as u64 + blk * bs, self.header_block()));
        Ok(v)
    }
}
