//! The ASM disk header: kfbh + kfdhdb in AU 0, block 0 (absolute offsets below).
//!
//! Field table and sources: shared reference `asm-format.md`. Only `hdrsts` = 3
//! (MEMBER) has been seen in public dumps; the other status names follow the `kfed`
//! names (KFDHDR_*) and are reported, never used to decide a write.

use crate::bytes::{slice, text, Endian};
use crate::kfbh::{self, Checksum, Kfbh};
/// Defined with the label tag it reads (so `label` needs nothing of this module).
pub use crate::label::is_disk_header;
use crate::label::{self, LabelState};
use serde::Serialize;

/// Offsets (absolute, in block 0).
pub mod off {
    pub const COMPAT: usize = 0x40;
    pub const DSKNUM: usize = 0x44;
    pub const GRPTYP: usize = 0x46;
    pub const HDRSTS: usize = 0x47;
    pub const DSKNAME: usize = 0x48;
    pub const GRPNAME: usize = 0x68;
    pub const FGNAME: usize = 0x88;
    pub const CAPNAME: usize = 0xA8;
    pub const CRESTMP: usize = 0xC8;
    pub const MNTSTMP: usize = 0xD0;
    pub const SECSIZE: usize = 0xD8;
    pub const BLKSIZE: usize = 0xDA;
    pub const AUSIZE: usize = 0xDC;
    pub const MFACT: usize = 0xE0;
    pub const DSKSIZE: usize = 0xE4;
    pub const PMCNT: usize = 0xE8;
    pub const FSTLOCN: usize = 0xEC;
    pub const ALTLOCN: usize = 0xF0;
    pub const F1B1LOCN: usize = 0xF4;
    pub const DBCOMPAT: usize = 0x100;
    pub const GRPSTMP: usize = 0x104;
    pub const VFSTART: usize = 0x10C;
    pub const VFEND: usize = 0x110;
    pub const SPFILE: usize = 0x114;
    pub const UB2SPARE: usize = 0x1FE;
    pub const NAME_LEN: usize = 32;
}

/// kfdhdb.hdrsts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HeaderStatus {
    Invalid,
    Unknown,
    Candidate,
    Member,
    Former,
    Conflict,
    Incompat,
    Provisioned,
    Other(u8),
}

impl HeaderStatus {
    pub fn from_u8(v: u8) -> Self {
        match v {
            0 => Self::Invalid,
            1 => Self::Unknown,
            2 => Self::Candidate,
            3 => Self::Member,
            4 => Self::Former,
            5 => Self::Conflict,
            6 => Self::Incompat,
            7 => Self::Provisioned,
            n => Self::Other(n),
        }
    }
    pub fn code(self) -> u8 {
        match self {
            Self::Invalid => 0,
            Self::Unknown => 1,
            Self::Candidate => 2,
            Self::Member => 3,
            Self::Former => 4,
            Self::Conflict => 5,
            Self::Incompat => 6,
            Self::Provisioned => 7,
            Self::Other(n) => n,
        }
    }
    /// Upper-case name as V$ASM_DISK.HEADER_STATUS shows it.
    pub fn name(self) -> String {
        match self {
            Self::Other(n) => format!("UNKNOWN({n})"),
            s => format!("{s:?}").to_ascii_uppercase(),
        }
    }
}

/// kfdhdb.grptyp: the disk group's redundancy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Redundancy {
    External,
    Normal,
    High,
    Other(u8),
}

impl Redundancy {
    pub fn from_u8(v: u8) -> Self {
        match v {
            1 => Self::External,
            2 => Self::Normal,
            3 => Self::High,
            n => Self::Other(n),
        }
    }
    pub fn code(self) -> u8 {
        match self {
            Self::External => 1,
            Self::Normal => 2,
            Self::High => 3,
            Self::Other(n) => n,
        }
    }
}

/// An ASM timestamp (hi/lo words), decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Stamp {
    pub hi: u32,
    pub lo: u32,
    pub year: u32,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
    pub usec: u32,
}

impl Stamp {
    pub fn decode(hi: u32, lo: u32) -> Stamp {
        Stamp {
            hi,
            lo,
            hour: hi & 0x1f,
            day: (hi >> 5) & 0x1f,
            month: (hi >> 10) & 0xf,
            year: hi >> 14,
            usec: lo & 0x3ff,
            // msec sits in bits 10..19; sec 20..25; min 26..31.
            second: (lo >> 20) & 0x3f,
            minute: lo >> 26,
        }
    }
    pub fn msec(&self) -> u32 {
        (self.lo >> 10) & 0x3ff
    }
    pub fn encode(year: u32, month: u32, day: u32, hour: u32, min: u32, sec: u32) -> (u32, u32) {
        let hi = (year << 14) | ((month & 0xf) << 10) | ((day & 0x1f) << 5) | (hour & 0x1f);
        let lo = ((min & 0x3f) << 26) | ((sec & 0x3f) << 20);
        (hi, lo)
    }
    /// `YYYY-MM-DD hh:mm:ss.mmm`, or `none` for an all-zero stamp.
    pub fn display(&self) -> String {
        if self.hi == 0 && self.lo == 0 {
            return "none".into();
        }
        format!(
            "{:04}-{:02}-{:02} {:02}:{:02}:{:02}.{:03}",
            self.year,
            self.month,
            self.day,
            self.hour,
            self.minute,
            self.second,
            self.msec()
        )
    }
}

/// An ASM compatibility word (0x0b200000 = 11.2.0.0.0).
pub fn compat_string(v: u32) -> String {
    if v == 0 {
        return "0".into();
    }
    format!(
        "{}.{}.{}.{}.{}",
        v >> 24,
        (v >> 20) & 0xf,
        (v >> 16) & 0xf,
        (v >> 12) & 0xf,
        (v >> 8) & 0xf
    )
}

/// A decoded ASM disk header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DiskHeader {
    pub kfbh: Kfbh,
    pub checksum: Checksum,
    /// The block length the checksum was checked over (blksize, or a fallback when
    /// the blksize field itself is damaged).
    pub checksum_block_len: usize,
    /// How many bytes of the block were available to the parser.
    pub bytes_available: usize,
    pub provstr: String,
    pub label: LabelState,
    pub compat: u32,
    pub compat_str: String,
    pub dsknum: u16,
    pub redundancy: Redundancy,
    pub status: HeaderStatus,
    pub dskname: String,
    pub grpname: String,
    pub fgname: String,
    pub capname: String,
    pub created: Stamp,
    pub mounted: Stamp,
    pub secsize: u16,
    pub blksize: u16,
    pub ausize: u32,
    pub mfact: u32,
    pub dsksize: u32,
    pub pmcnt: u32,
    pub fstlocn: u32,
    pub altlocn: u32,
    pub f1b1locn: u32,
    pub dbcompat: u32,
    pub grpstmp: Stamp,
    pub vfstart: u32,
    pub vfend: u32,
    pub spfile: u32,
    /// Byte 510: 0xAA55 here is an MBR signature written over the header.
    pub mbr_signature_at_510: bool,
}

impl DiskHeader {
    /// Parse block 0. `None` when it is not an ASM disk header. Shorter input (a
    /// partial dump) is parsed as far as it goes; the checksum is then `Incomplete`
    /// and fields past the end read as zero (see `bytes_available`).
    pub fn parse(b: &[u8]) -> Option<DiskHeader> {
        if !is_disk_header(b) {
            return None;
        }
        let kfbh = Kfbh::parse(b)?;
        let e: Endian = kfbh.endian;
        let blksize = e.u16(b, off::BLKSIZE);
        let valid = |n: usize| (512..=65536).contains(&n) && n.is_power_of_two();
        // A damaged blksize field: check the block as long as it was given (or 4 KiB).
        let block_size = if valid(blksize as usize) {
            blksize as usize
        } else if valid(b.len()) {
            b.len()
        } else {
            4096
        };
        let stamp = |o: usize| Stamp::decode(e.u32(b, o), e.u32(b, o + 4));
        let compat = e.u32(b, off::COMPAT);
        Some(DiskHeader {
            checksum: kfbh::verify(b, block_size),
            checksum_block_len: block_size,
            bytes_available: b.len(),
            provstr: text(b, label::TAG_OFFSET, 8),
            label: label::read(b),
            compat,
            compat_str: compat_string(compat),
            dsknum: e.u16(b, off::DSKNUM),
            redundancy: Redundancy::from_u8(*b.get(off::GRPTYP).unwrap_or(&0)),
            status: HeaderStatus::from_u8(*b.get(off::HDRSTS).unwrap_or(&0)),
            dskname: text(b, off::DSKNAME, off::NAME_LEN),
            grpname: text(b, off::GRPNAME, off::NAME_LEN),
            fgname: text(b, off::FGNAME, off::NAME_LEN),
            capname: text(b, off::CAPNAME, off::NAME_LEN),
            created: stamp(off::CRESTMP),
            mounted: stamp(off::MNTSTMP),
            secsize: e.u16(b, off::SECSIZE),
            blksize,
            ausize: e.u32(b, off::AUSIZE),
            mfact: e.u32(b, off::MFACT),
            dsksize: e.u32(b, off::DSKSIZE),
            pmcnt: e.u32(b, off::PMCNT),
            fstlocn: e.u32(b, off::FSTLOCN),
            altlocn: e.u32(b, off::ALTLOCN),
            f1b1locn: e.u32(b, off::F1B1LOCN),
            dbcompat: e.u32(b, off::DBCOMPAT),
            grpstmp: stamp(off::GRPSTMP),
            vfstart: e.u32(b, off::VFSTART),
            vfend: e.u32(b, off::VFEND),
            spfile: e.u32(b, off::SPFILE),
            mbr_signature_at_510: slice(b, off::UB2SPARE, 2) == [0x55, 0xAA],
            kfbh,
        })
    }

    /// Allocation units per metadata block count helpers.
    pub fn blocks_per_au(&self) -> u32 {
        if self.blksize == 0 {
            0
        } else {
            self.ausize / self.blksize as u32
        }
    }

    /// The AU that holds the backup copy of the disk header (AU 1), and its block.
    pub fn backup_header_location(&self) -> (u32, u32) {
        (1, self.blocks_per_au().saturating_sub(2))
    }

    /// Does the checksum hold?
    pub fn checksum_ok(&self) -> bool {
        self.checksum == Checksum::Valid
    }
}
