//! Endian-aware field readers and writers over byte slices that never panic.

/// Byte order of an ASM metadata block (kfbh.endian: 1 little, 0 big).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Endian {
    Little,
    Big,
}

impl Endian {
    pub fn u16(self, b: &[u8], off: usize) -> u16 {
        let a = arr::<2>(b, off);
        match self {
            Endian::Little => u16::from_le_bytes(a),
            Endian::Big => u16::from_be_bytes(a),
        }
    }

    pub fn u32(self, b: &[u8], off: usize) -> u32 {
        let a = arr::<4>(b, off);
        match self {
            Endian::Little => u32::from_le_bytes(a),
            Endian::Big => u32::from_be_bytes(a),
        }
    }

    pub fn put_u16(self, b: &mut [u8], off: usize, v: u16) {
        let a = match self {
            Endian::Little => v.to_le_bytes(),
            Endian::Big => v.to_be_bytes(),
        };
        put(b, off, &a);
    }

    pub fn put_u32(self, b: &mut [u8], off: usize, v: u32) {
        let a = match self {
            Endian::Little => v.to_le_bytes(),
            Endian::Big => v.to_be_bytes(),
        };
        put(b, off, &a);
    }
}

/// `N` bytes at `off`, zero where the slice is shorter.
pub fn arr<const N: usize>(b: &[u8], off: usize) -> [u8; N] {
    let mut out = [0u8; N];
    if off < b.len() {
        let n = N.min(b.len() - off);
        out[..n].copy_from_slice(&b[off..off + n]);
    }
    out
}

/// Copy `src` to `off`, clipped to the slice.
pub fn put(b: &mut [u8], off: usize, src: &[u8]) {
    if off < b.len() {
        let n = src.len().min(b.len() - off);
        b[off..off + n].copy_from_slice(&src[..n]);
    }
}

/// `len` bytes at `off` (clipped), or an empty slice.
pub fn slice(b: &[u8], off: usize, len: usize) -> &[u8] {
    if off >= b.len() {
        return &[];
    }
    &b[off..b.len().min(off.saturating_add(len))]
}

/// A NUL-padded text field: up to the first NUL, non-printable bytes escaped.
pub fn text(b: &[u8], off: usize, len: usize) -> String {
    let s = slice(b, off, len);
    let end = s.iter().position(|&c| c == 0).unwrap_or(s.len());
    s[..end]
        .iter()
        .map(|&c| {
            if c.is_ascii_graphic() || c == b' ' {
                (c as char).to_string()
            } else {
                format!("\\x{c:02x}")
            }
        })
        .collect()
}

/// Little-endian u16/u32/u64 helpers for foreign formats.
pub fn le16(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes(arr(b, off))
}
pub fn le32(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(arr(b, off))
}
pub fn be32(b: &[u8], off: usize) -> u32 {
    u32::from_be_bytes(arr(b, off))
}

/// Does `b` hold `magic` at `off`?
pub fn has(b: &[u8], off: usize, magic: &[u8]) -> bool {
    slice(b, off, magic.len()) == magic
}
