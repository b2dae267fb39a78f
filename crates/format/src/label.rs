//! The ASMLib / AFD label: `ORCLDISK` at byte 32 of block 0, the label at byte 40.
//!
//! Byte-compatible with ASMLib (`kfdhdb.driver.provstr` + `driver.reserved`), AFD (the
//! same place, see the seed's `ORCLDISKV512DATA1` dump) and util-linux blkid, which
//! reports such a disk as `TYPE="oracleasm" LABEL="<label>"`. The word at 0x0C is kept
//! so that the XOR of all words of the block is unchanged by a label edit: on a blank
//! disk that makes it the XOR of the tag and label words (the seed's `(out`), on a disk
//! with an ASM disk header it keeps the header checksum valid.

use crate::bytes::{put, slice};
use crate::kfbh::{xor_words, BlockType, Kfbh, CHECK_OFFSET};
use serde::Serialize;
use std::fmt;

pub const TAG_OFFSET: usize = 0x20;
pub const LABEL_OFFSET: usize = 0x28;
pub const LABEL_MAX: usize = 24;
/// The end of the label area (tag + label): the edit touches 0x20..0x40 and 0x0C..0x10.
pub const AREA_END: usize = LABEL_OFFSET + LABEL_MAX;
/// "Marked" tag.
pub const TAG_MARKED: &[u8; 8] = b"ORCLDISK";
/// Tag ASMLib's `deletedisk` writes.
pub const TAG_CLEARED: &[u8; 8] = b"ORCLCLRD";

/// A validated label: 1..=24 bytes of `[A-Z0-9_]`, starting with a letter.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct Label(String);

/// Why a label was refused. Each message names the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LabelError {
    #[error("label is empty: give 1 to 24 characters of A-Z, 0-9 and _")]
    Empty,
    #[error("label {0:?} is {1} characters long: at most 24 are allowed")]
    TooLong(String, usize),
    #[error("label {0:?} must start with a letter (A-Z)")]
    FirstNotLetter(String),
    #[error("label {0:?} contains {1:?}: only A-Z, 0-9 and _ are allowed")]
    BadChar(String, char),
}

impl Label {
    /// Validate and upper-case a label given by a user.
    pub fn new(input: &str) -> Result<Label, LabelError> {
        if input.is_empty() {
            return Err(LabelError::Empty);
        }
        if let Some(c) = input
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '_'))
        {
            return Err(LabelError::BadChar(input.to_string(), c));
        }
        // All ASCII from here on, so byte length == char count.
        if input.len() > LABEL_MAX {
            return Err(LabelError::TooLong(input.to_string(), input.len()));
        }
        if !input.as_bytes()[0].is_ascii_alphabetic() {
            return Err(LabelError::FirstNotLetter(input.to_string()));
        }
        Ok(Label(input.to_ascii_uppercase()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The 24 bytes stored on disk, NUL-padded.
    pub fn to_bytes(&self) -> [u8; LABEL_MAX] {
        let mut out = [0u8; LABEL_MAX];
        out[..self.0.len()].copy_from_slice(self.0.as_bytes());
        out
    }
}

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for Label {
    type Err = LabelError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Label::new(s)
    }
}

/// What the label area of block 0 says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum LabelState {
    /// No `ORCLDISK` / `ORCLCLRD` tag at byte 32.
    Unmarked,
    /// `ORCLDISK` at byte 32. `label` is `None` when the 24 label bytes are all zero
    /// (a plain ASM disk, e.g. managed by udev rules). `raw` is the label as stored
    /// (escaped if not printable), `valid` whether it follows the label rules.
    Marked {
        label: Option<String>,
        raw: String,
        valid: bool,
    },
    /// `ORCLCLRD`: a label deleted by ASMLib's `deletedisk`.
    Cleared,
}

impl LabelState {
    /// The label when it is a valid one.
    pub fn label(&self) -> Option<Label> {
        match self {
            LabelState::Marked {
                label: Some(l),
                valid: true,
                ..
            } => Label::new(l).ok(),
            _ => None,
        }
    }
}

/// Read the label area of block 0 (any length; short input is `Unmarked`).
pub fn read(block0: &[u8]) -> LabelState {
    let tag = slice(block0, TAG_OFFSET, 8);
    if tag == TAG_CLEARED {
        return LabelState::Cleared;
    }
    if tag != TAG_MARKED {
        return LabelState::Unmarked;
    }
    let bytes = slice(block0, LABEL_OFFSET, LABEL_MAX);
    if bytes.iter().all(|&b| b == 0) {
        return LabelState::Marked {
            label: None,
            raw: String::new(),
            valid: false,
        };
    }
    let raw = crate::bytes::text(block0, LABEL_OFFSET, LABEL_MAX);
    // As util-linux blkid reads it (and so udev's ID_FS_LABEL, and ASM): up to
    // the first NUL, trailing white space trimmed; bytes after a NUL are not
    // part of it.
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    let kept = bytes[..end]
        .iter()
        .rposition(|b| !matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'))
        .map_or(0, |i| i + 1);
    let label = &crate::bytes::text(&bytes[..kept], 0, kept);
    if label.is_empty() {
        return LabelState::Marked {
            label: None,
            raw,
            valid: false,
        };
    }
    // Valid: stored upper-case and rule-abiding.
    let valid = Label::new(label)
        .map(|l| l.as_str() == label)
        .unwrap_or(false);
    LabelState::Marked {
        label: Some(label.to_string()),
        raw,
        valid,
    }
}

/// Why a label as blkid reads it (`LabelState::Marked`'s `label`) is not one
/// asmguard manages; `None` when it is.
pub fn why_not_managed(label: &str) -> Option<String> {
    match Label::new(label) {
        Err(e) => Some(e.to_string()),
        Ok(l) if l.as_str() != label => Some(format!(
            "it is not stored upper-case ({label}; asmguard, ASMLib and AFD store {l})"
        )),
        Ok(_) => None,
    }
}

/// Error for an edit on a buffer that cannot hold the label area.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("block of {0} bytes is too small for a label (needs at least 512)")]
pub struct BlockTooSmall(pub usize);

fn edit(block: &mut [u8], tag: &[u8; 8], label: &[u8; LABEL_MAX]) -> Result<(), BlockTooSmall> {
    if block.len() < 512 {
        return Err(BlockTooSmall(block.len()));
    }
    let before = xor_words(&block[TAG_OFFSET..AREA_END]);
    put(block, TAG_OFFSET, tag);
    put(block, LABEL_OFFSET, label);
    let after = xor_words(&block[TAG_OFFSET..AREA_END]);
    let mut check = [0u8; 4];
    check.copy_from_slice(&block[CHECK_OFFSET..CHECK_OFFSET + 4]);
    let check = u32::from_le_bytes(check) ^ before ^ after;
    block[CHECK_OFFSET..CHECK_OFFSET + 4].copy_from_slice(&check.to_le_bytes());
    Ok(())
}

/// Write `ORCLDISK` + `label` into block 0 and carry the change into the word at 0x0C.
/// Only bytes 0x0C..0x10 and 0x20..0x40 change; a block that XORed to zero still does.
pub fn write(block0: &mut [u8], label: &Label) -> Result<(), BlockTooSmall> {
    edit(block0, TAG_MARKED, &label.to_bytes())
}

/// Remove the label. On a disk with an ASM disk header the `ORCLDISK` provstr stays
/// (ASM needs it) and only the label bytes are zeroed; on any other disk the tag
/// becomes `ORCLCLRD`, as ASMLib's `deletedisk` leaves it.
pub fn clear(block0: &mut [u8]) -> Result<(), BlockTooSmall> {
    let tag = if is_disk_header(block0) {
        TAG_MARKED
    } else {
        TAG_CLEARED
    };
    edit(block0, tag, &[0u8; LABEL_MAX])
}

/// Does `b` start with something that claims to be an ASM disk header (a valid endian
/// byte, kfbh.type 1 and the `ORCLDISK` provstr)? The checksum is not required here:
/// a damaged header is still an ASM disk and must not be treated as blank.
pub fn is_disk_header(b: &[u8]) -> bool {
    matches!(Kfbh::parse(b), Some(h) if h.block_type == BlockType::DiskHeader)
        && slice(b, TAG_OFFSET, 8) == TAG_MARKED
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_are_named() {
        assert_eq!(Label::new("data1").unwrap().as_str(), "DATA1");
        assert_eq!(Label::new("V512DATA1").unwrap().as_str(), "V512DATA1");
        assert!(matches!(Label::new(""), Err(LabelError::Empty)));
        assert!(matches!(
            Label::new("1DATA"),
            Err(LabelError::FirstNotLetter(_))
        ));
        assert!(matches!(
            Label::new("_DATA"),
            Err(LabelError::FirstNotLetter(_))
        ));
        assert!(matches!(
            Label::new("DATA-1"),
            Err(LabelError::BadChar(_, '-'))
        ));
        assert!(matches!(
            Label::new("DÄTA"),
            Err(LabelError::BadChar(_, 'Ä'))
        ));
        assert!(Label::new(&"A".repeat(24)).is_ok());
        assert!(matches!(
            Label::new(&"A".repeat(25)),
            Err(LabelError::TooLong(_, 25))
        ));
        let msg = Label::new("DATA-1").unwrap_err().to_string();
        assert!(msg.contains("only A-Z, 0-9 and _"), "{msg}");
    }

    #[test]
    fn blank_disk_label_matches_afd_seed_bytes() {
        // The AFD seed: ORCLDISKV512DATA1 at 0x20 and "(out" at 0x0C on a zero block.
        let mut b = vec![0u8; 4096];
        write(&mut b, &Label::new("v512data1").unwrap()).unwrap();
        assert_eq!(&b[0x0c..0x10], b"(out");
        assert_eq!(&b[0x20..0x31], b"ORCLDISKV512DATA1");
        assert_eq!(xor_words(&b), 0);
        assert_eq!(read(&b).label().unwrap().as_str(), "V512DATA1");
    }

    #[test]
    fn clear_on_plain_label_writes_cleared_tag() {
        let mut b = vec![0u8; 512];
        write(&mut b, &Label::new("X").unwrap()).unwrap();
        clear(&mut b).unwrap();
        assert_eq!(read(&b), LabelState::Cleared);
        assert_eq!(xor_words(&b), 0);
    }

    #[test]
    fn invalid_stored_labels_are_reported_not_trusted() {
        let mut b = vec![0u8; 512];
        b[0x20..0x28].copy_from_slice(TAG_MARKED);
        b[0x28..0x2c].copy_from_slice(b"ab\x01c");
        match read(&b) {
            LabelState::Marked { valid, raw, .. } => {
                assert!(!valid);
                assert_eq!(raw, "ab\\x01c");
            }
            s => panic!("{s:?}"),
        }
        assert!(read(&b).label().is_none());
        assert!(write(&mut [0u8; 100], &Label::new("A").unwrap()).is_err());
    }
}
