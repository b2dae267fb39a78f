//! From the allocation table to byte ranges. Pure: the caller reads the bytes.
//!
//! Conservative by construction (shared reference `asm-format.md` and
//! `at-layout.md` beside the format crate: the AT of later strides is read where
//! the public sources put it, unverified on real bytes, so every block must prove
//! itself):
//!
//! * the AT of every stride is read from the first AU of the stride (AU 0 for the
//!   first; `at-layout.md` beside the format crate gives the layout and sources);
//!   a stride that cannot be read stays in use;
//! * an AT block counts only when its kfbh type is 3, its checksum holds, its
//!   `block.blk` is its position in its AU, its `block.obj` names this disk, its
//!   `shrink` is the same as the other blocks' and its `aunum` is
//!   `stride start + i * shrink`;
//!   anything else leaves its AUs in use;
//! * AU 0, AU 1, AU 11 (12.1+ header copy; reserved whatever the compatibility),
//!   the voting-file AUs, the spfile AU and the first AU of every stride are never
//!   free, nor any AU at or past `dsksize` or past the end of the device.

use asmguard_format::alloc::{self, AtBlock, AuExtent};
use asmguard_format::header::DiskHeader;
use asmguard_format::kfbh::Checksum;
use serde::{Deserialize, Serialize};

/// The geometry a plan needs, from a disk header whose checksum holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Layout {
    pub ausize: u64,
    pub blksize: u64,
    pub dsksize: u64,
    pub mfact: u64,
    pub altlocn: u64,
    pub dsknum: u32,
    pub vfstart: u64,
    pub vfend: u64,
    pub spfile: u64,
}

impl Layout {
    /// Refuses headers a plan cannot be trusted on.
    pub fn from_header(h: &DiskHeader) -> Result<Layout, String> {
        if h.checksum != Checksum::Valid {
            return Err(
                "the ASM disk header's checksum does not hold: nothing is known to be free".into(),
            );
        }
        let bs = h.blksize as u64;
        let au = h.ausize as u64;
        if !(512..=65536).contains(&bs) || !bs.is_power_of_two() {
            return Err(format!("ASM block size {bs} is not plausible"));
        }
        if !au.is_power_of_two() || au < bs * 4 || au > (1 << 30) {
            return Err(format!("ASM allocation unit size {au} is not plausible"));
        }
        if h.dsksize < 2 {
            return Err(format!("ASM disk size {} AUs is not plausible", h.dsksize));
        }
        let bpa = au / bs;
        if h.altlocn as u64 == 0 || h.altlocn as u64 >= bpa {
            return Err(format!(
                "first allocation table block {} is not inside AU 0",
                h.altlocn
            ));
        }
        Ok(Layout {
            ausize: au,
            blksize: bs,
            dsksize: h.dsksize as u64,
            mfact: h.mfact as u64,
            altlocn: h.altlocn as u64,
            dsknum: h.dsknum as u32,
            vfstart: h.vfstart as u64,
            vfend: h.vfend as u64,
            spfile: h.spfile as u64,
        })
    }

    pub fn blocks_per_au(&self) -> u64 {
        self.ausize / self.blksize
    }

    /// Byte offset of the heartbeat block (the last block of AU 1).
    pub fn heartbeat_offset(&self) -> u64 {
        2 * self.ausize - self.blksize
    }

    /// Byte offset of the AT block describing `au` (`shrink` AUs per block):
    /// block `altlocn + (au mod mfact) / shrink` of the first AU of its stride.
    pub fn at_block_offset(&self, au: u64, shrink: u64) -> u64 {
        let first = au.checked_div(self.mfact).unwrap_or(0) * self.mfact;
        first * self.ausize + (self.altlocn + (au - first) / shrink.max(1)) * self.blksize
    }

    /// AUs never handed back, whatever the AT says.
    pub fn reserved(&self) -> Vec<u64> {
        let mut v = vec![0, 1, 11];
        if self.vfstart != 0 && self.vfend >= self.vfstart {
            let end = self.vfend.min(self.dsksize);
            v.extend(self.vfstart..=end);
        }
        if self.spfile != 0 {
            v.push(self.spfile);
        }
        if self.mfact > 0 {
            v.extend(
                (1..)
                    .map(|k| k * self.mfact)
                    .take_while(|a| *a < self.dsksize),
            );
        }
        v.sort_unstable();
        v.dedup();
        v
    }
}

/// What the AT of one disk says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AtScan {
    /// AT blocks looked at / accepted.
    pub blocks_read: u64,
    pub blocks_valid: u64,
    /// Why blocks were not used (at most a few, for the report).
    pub rejected: Vec<String>,
    /// AUs described by accepted blocks (clipped to dsksize).
    pub covered_aus: u64,
    /// AUs the accepted blocks positively mark free (reserved ones excluded).
    pub free_aus: u64,
    pub extents: Vec<AuExtent>,
    /// AUs per AT block (0 when no block was accepted).
    pub shrink: u64,
    /// Byte offset -> hash of every accepted AT block, as read for the plan:
    /// the stop rule re-reads the blocks covering each chunk and compares.
    #[serde(skip)]
    pub block_sums: std::collections::BTreeMap<u64, u64>,
}

/// FNV-1a of a block (what the stop rule compares).
pub fn block_sum(b: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for x in b {
        h ^= *x as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Reads the AT blocks of the first stride in `au0` (the bytes of AU 0, at least
/// up to the last block needed) and returns the free AU extents; later strides
/// stay in use. `device_size` clips to the device.
pub fn scan_at(l: &Layout, au0: &[u8], device_size: u64) -> AtScan {
    scan_disk(
        l,
        &mut |o, n| {
            au0.get(o as usize..o as usize + n)
                .map(<[u8]>::to_vec)
                .ok_or_else(|| "not read".to_string())
        },
        device_size,
        1,
    )
}

/// The strides of a disk: `ceil(min(dsksize, device AUs) / mfact)`.
pub fn strides(l: &Layout, device_size: u64) -> u64 {
    let aus = l.dsksize.min(device_size / l.ausize);
    if l.mfact == 0 {
        1
    } else {
        aus.div_ceil(l.mfact).max(1)
    }
}

/// Reads the AT of every stride (up to `max_strides`) through `read(offset,
/// len)` and returns the free AU extents. Stride k's AT is in its first AU
/// (`k * mfact`), blocks `altlocn..`, the layout of AU 0 (`at-layout.md` beside
/// the format crate). A block counts only when its kfbh type is 3, its
/// checksum holds, `block.blk` is its position, `block.obj` names this disk,
/// `shrink` is the first block's and `aunum` is `k * mfact + i * shrink`;
/// anything else (and a stride that cannot be read) leaves its AUs in use.
pub fn scan_disk(
    l: &Layout,
    read: &mut dyn FnMut(u64, usize) -> Result<Vec<u8>, String>,
    device_size: u64,
    max_strides: u64,
) -> AtScan {
    let bs = l.blksize as usize;
    let mut blocks: Vec<AtBlock> = Vec::new();
    let mut block_sums = std::collections::BTreeMap::new();
    let mut rejected = Vec::new();
    let mut shrink: Option<u16> = None;
    let mut read_n = 0u64;
    let reject = |what: String, rejected: &mut Vec<String>| {
        if rejected.len() < 8 {
            rejected.push(what);
        }
    };
    let device_aus = device_size / l.ausize;
    let disk_aus = l.dsksize.min(device_aus);
    let stride = if l.mfact > 0 { l.mfact } else { u64::MAX };
    let per_au = l.blocks_per_au() - l.altlocn;
    for k in 0..strides(l, device_size).min(max_strides) {
        let first = k.saturating_mul(stride);
        let limit = disk_aus.min(first.saturating_add(stride));
        let base = first * l.ausize;
        // The blocks this stride needs (all of its AU until shrink is known).
        let want = match shrink {
            Some(s) => (limit - first).div_ceil(s as u64).min(per_au),
            None => per_au,
        };
        let start = base + l.altlocn * l.blksize;
        let bytes = match read(start, (want * l.blksize) as usize) {
            Ok(b) => b,
            Err(e) => {
                let at = if k == 0 {
                    "AU 0".to_string()
                } else {
                    format!("stride {k} (AU {first})")
                };
                reject(format!("{at}: not read ({e})"), &mut rejected);
                continue;
            }
        };
        let name = |i: u64| {
            if k == 0 {
                format!("AT block {}", l.altlocn + i)
            } else {
                format!("AU {first} AT block {}", l.altlocn + i)
            }
        };
        for i in 0..want {
            if let Some(s) = shrink {
                if first + i * s as u64 >= limit {
                    break;
                }
            }
            let off = (i * l.blksize) as usize;
            let Some(b) = bytes.get(off..off + bs) else {
                break;
            };
            read_n += 1;
            let blk = match AtBlock::parse(b, bs) {
                Ok(blk) => blk,
                Err(e) => {
                    // An all-zero block past the used AT is the normal end.
                    if b.iter().all(|x| *x == 0) && shrink.is_some() {
                        break;
                    }
                    reject(format!("{}: {e}", name(i)), &mut rejected);
                    continue;
                }
            };
            if blk.kfbh.blk as u64 != l.altlocn + i {
                reject(
                    format!(
                        "{}: block.blk is {}, not its position",
                        name(i),
                        blk.kfbh.blk
                    ),
                    &mut rejected,
                );
                continue;
            }
            if blk.kfbh.disk_number() != Some(l.dsknum) {
                reject(
                    format!(
                        "{}: block.obj {:#x} names another disk",
                        name(i),
                        blk.kfbh.obj
                    ),
                    &mut rejected,
                );
                continue;
            }
            match shrink {
                None => shrink = Some(blk.shrink),
                Some(s) if s != blk.shrink => {
                    reject(
                        format!("{}: shrink {} differs from {s}", name(i), blk.shrink),
                        &mut rejected,
                    );
                    continue;
                }
                _ => {}
            }
            let want_aunum = first + i * blk.shrink as u64;
            if blk.aunum as u64 != want_aunum {
                reject(
                    format!("{}: aunum {} is not {want_aunum}", name(i), blk.aunum),
                    &mut rejected,
                );
                continue;
            }
            block_sums.insert(start + off as u64, block_sum(b));
            // AUs of another stride are never read off this block.
            let mut blk = blk;
            let keep = (limit - first)
                .saturating_sub(i * blk.shrink as u64)
                .min(blk.entries.len() as u64) as usize;
            blk.entries.truncate(keep);
            blocks.push(blk);
        }
    }
    let covered: u64 = blocks.iter().map(|b| b.entries.len() as u64).sum();
    let extents = alloc::free_extents(&blocks, disk_aus, &l.reserved());
    AtScan {
        blocks_read: read_n,
        blocks_valid: blocks.len() as u64,
        rejected,
        covered_aus: covered,
        free_aus: extents.iter().map(|e| e.count).sum(),
        extents,
        shrink: shrink.unwrap_or(0) as u64,
        block_sums,
    }
}

/// Discard limits of the device (see [`crate::caps`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    pub logical_block_size: u64,
    pub granularity: u64,
    pub alignment: u64,
    pub max_bytes: u64,
}

/// A byte range handed to one ioctl.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Range {
    pub offset: u64,
    pub len: u64,
}

impl Range {
    pub fn end(&self) -> u64 {
        self.offset + self.len
    }
}

/// The byte ranges to hand back, in ascending order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plan {
    pub ranges: Vec<Range>,
    pub total_bytes: u64,
    /// Identifies the plan (ranges, device size, method) for resuming.
    pub hash: String,
    /// Bytes of free AUs lost to alignment.
    pub unaligned_bytes: u64,
}

/// Free AU extents -> aligned byte ranges, split at `max_bytes` (rounded down to the
/// granularity). `extents` must be sorted and merged.
pub fn ranges(
    extents: &[AuExtent],
    ausize: u64,
    device_size: u64,
    lim: &Limits,
) -> Result<(Vec<Range>, u64), String> {
    let g = lim.granularity.max(lim.logical_block_size).max(512);
    if !g.is_power_of_two() && g % lim.logical_block_size.max(512) != 0 {
        return Err(format!("discard granularity {g} is not usable"));
    }
    let a = lim.alignment % g;
    let max = lim.max_bytes / g * g;
    if max == 0 {
        return Err(format!(
            "the device takes at most {} bytes per discard, less than its granularity {g}",
            lim.max_bytes
        ));
    }
    let mut out = Vec::new();
    let mut lost = 0u64;
    for e in extents {
        let start = e.start * ausize;
        let end = (e.end() * ausize).min(device_size);
        if end <= start {
            continue;
        }
        let s = if start <= a {
            a
        } else {
            a + (start - a).div_ceil(g) * g
        };
        let t = if end < a { 0 } else { a + (end - a) / g * g };
        if t <= s {
            lost += end - start;
            continue;
        }
        lost += (s - start) + (end - t);
        let mut o = s;
        while o < t {
            let n = (t - o).min(max);
            out.push(Range { offset: o, len: n });
            o += n;
        }
    }
    Ok((out, lost))
}

fn fnv(h: &mut u64, v: u64) {
    for b in v.to_le_bytes() {
        *h ^= b as u64;
        *h = h.wrapping_mul(0x0100_0000_01b3);
    }
}

/// Hash of a plan for the checkpoint.
pub fn hash(ranges: &[Range], device_size: u64, method: &str) -> String {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    fnv(&mut h, device_size);
    for b in method.bytes() {
        fnv(&mut h, b as u64);
    }
    for r in ranges {
        fnv(&mut h, r.offset);
        fnv(&mut h, r.len);
    }
    format!("{h:016x}")
}

/// Header block 0 + AU 0 bytes -> the plan (the first stride only: later
/// strides stay in use). See [`plan_disk_with`].
pub fn plan_disk(
    header: &DiskHeader,
    au0: &[u8],
    device_size: u64,
    lim: &Limits,
    method: &str,
) -> Result<(Layout, AtScan, Plan), String> {
    let l = Layout::from_header(header)?;
    let scan = scan_at(&l, au0, device_size);
    finish(l, scan, device_size, lim, method)
}

/// Header block 0 + the AT of every stride, read through `read(offset, len)`
/// -> the plan.
pub fn plan_disk_with(
    header: &DiskHeader,
    read: &mut dyn FnMut(u64, usize) -> Result<Vec<u8>, String>,
    device_size: u64,
    lim: &Limits,
    method: &str,
) -> Result<(Layout, AtScan, Plan), String> {
    let l = Layout::from_header(header)?;
    let scan = scan_disk(&l, read, device_size, u64::MAX);
    finish(l, scan, device_size, lim, method)
}

/// Everything above the ASM size: `[dsksize * ausize, device_size)`, aligned
/// and split like free AUs. The scan reports that range as its one extent
/// (no AT is read). The plan hash differs from a free-AU plan's.
pub fn plan_above(
    l: &Layout,
    device_size: u64,
    lim: &Limits,
    method: &str,
) -> Result<(AtScan, Plan), String> {
    let first = l.dsksize;
    let end = device_size.div_ceil(l.ausize);
    let extents = if end > first {
        vec![AuExtent {
            start: first,
            count: end - first,
        }]
    } else {
        Vec::new()
    };
    let (r, lost) = ranges(&extents, l.ausize, device_size, lim)?;
    let scan = AtScan {
        blocks_read: 0,
        blocks_valid: 0,
        rejected: Vec::new(),
        covered_aus: 0,
        free_aus: extents.iter().map(|e| e.count).sum(),
        extents,
        shrink: 0,
        block_sums: Default::default(),
    };
    let plan = Plan {
        total_bytes: r.iter().map(|x| x.len).sum(),
        hash: hash(&r, device_size, &format!("{method} above {first}")),
        ranges: r,
        unaligned_bytes: lost,
    };
    Ok((scan, plan))
}

fn finish(
    l: Layout,
    scan: AtScan,
    device_size: u64,
    lim: &Limits,
    method: &str,
) -> Result<(Layout, AtScan, Plan), String> {
    if scan.blocks_valid == 0 {
        return Err(format!(
            "no allocation table block could be read positively ({}): nothing is known to be free",
            scan.rejected.join("; ")
        ));
    }
    let (r, lost) = ranges(&scan.extents, l.ausize, device_size, lim)?;
    let plan = Plan {
        total_bytes: r.iter().map(|x| x.len).sum(),
        hash: hash(&r, device_size, method),
        ranges: r,
        unaligned_bytes: lost,
    };
    Ok((l, scan, plan))
}

#[cfg(test)]
mod tests {
    use super::*;
    use asmguard_format::kfbh::fix_checksum;
    use asmguard_format::synth::SynthDisk;

    const MIB: u64 = 1 << 20;

    fn image(s: &SynthDisk) -> Vec<u8> {
        let mut au0 = vec![0u8; s.ausize as usize];
        for (off, b) in s.metadata().unwrap() {
            if off < s.ausize as u64 {
                au0[off as usize..off as usize + b.len()].copy_from_slice(&b);
            }
        }
        au0
    }

    fn lim() -> Limits {
        Limits {
            logical_block_size: 512,
            granularity: 4096,
            alignment: 0,
            max_bytes: 4 * MIB,
        }
    }

    fn disk(n: usize, alloc: &[usize]) -> SynthDisk {
        let mut s = SynthDisk::new(n);
        for a in alloc {
            s.allocated[*a] = true;
        }
        s
    }

    #[test]
    fn free_aus_exclude_reserved_and_merge() {
        // 1000 AUs: 2..=9 allocated, 10..=19 free (11 reserved), 20 allocated, rest free.
        let alloc: Vec<usize> = (2..10).chain([20]).collect();
        let s = disk(1000, &alloc);
        let h = DiskHeader::parse(&s.header_block()).unwrap();
        let (l, scan, plan) = plan_disk(&h, &image(&s), 1000 * MIB, &lim(), "discard").unwrap();
        assert_eq!(l.dsksize, 1000);
        assert_eq!(scan.blocks_valid, 3); // 448 AUs per block
        assert_eq!(
            scan.extents,
            vec![
                AuExtent {
                    start: 10,
                    count: 1
                },
                AuExtent {
                    start: 12,
                    count: 8
                },
                AuExtent {
                    start: 21,
                    count: 979
                },
            ]
        );
        assert_eq!(scan.free_aus, 988);
        assert_eq!(plan.total_bytes, 988 * MIB);
        assert!(plan.ranges.iter().all(|r| r.len <= 4 * MIB));
        assert!(plan.ranges.windows(2).all(|w| w[0].end() <= w[1].offset));
        // Never AU 0, 1, 11, allocated ones.
        for r in &plan.ranges {
            for au in [0u64, 1, 2, 9, 11, 20] {
                assert!(
                    r.end() <= au * MIB || r.offset >= (au + 1) * MIB,
                    "{r:?} {au}"
                );
            }
        }
    }

    #[test]
    fn clipped_to_device_and_dsksize() {
        let s = disk(100, &[5]);
        let h = DiskHeader::parse(&s.header_block()).unwrap();
        // Device shorter than dsksize: only whole AUs inside the device.
        let (_, scan, plan) =
            plan_disk(&h, &image(&s), 50 * MIB + 4096, &lim(), "discard").unwrap();
        assert_eq!(scan.extents.last().unwrap().end(), 50);
        assert!(plan.ranges.last().unwrap().end() <= 50 * MIB);
    }

    #[test]
    fn bad_blocks_mean_in_use() {
        let s = disk(1000, &[]);
        let h = DiskHeader::parse(&s.header_block()).unwrap();
        let mut au0 = image(&s);
        let bs = 4096usize;
        // Corrupt AT block 1 (AUs 448..895): checksum no longer holds.
        au0[3 * bs + 0x50] ^= 1;
        // AT block 2 claims another aunum (fixed checksum): rejected too.
        let o = 4 * bs;
        au0[o + 0x20] = 7;
        fix_checksum(&mut au0[o..o + bs]);
        let (_, scan, _) = plan_disk(&h, &au0, 1000 * MIB, &lim(), "discard").unwrap();
        assert_eq!(scan.blocks_valid, 1);
        assert_eq!(scan.rejected.len(), 2, "{:?}", scan.rejected);
        assert!(scan.extents.iter().all(|e| e.end() <= 448));
        // A wrong disk number: rejected.
        let mut au0 = image(&s);
        let o = 2 * bs;
        au0[o + 8] = 5;
        fix_checksum(&mut au0[o..o + bs]);
        let (_, scan, _) = plan_disk(&h, &au0, 1000 * MIB, &lim(), "discard").unwrap();
        assert!(scan.extents.iter().all(|e| e.start >= 448));
        // No valid block at all: refused.
        let au0 = vec![0u8; MIB as usize];
        assert!(plan_disk(&h, &au0, 1000 * MIB, &lim(), "discard").is_err());
    }

    /// A sparse reader over the metadata of `s` (zeros elsewhere); `broken`
    /// offsets fail to read.
    fn reader(
        s: &SynthDisk,
        broken: Option<u64>,
    ) -> impl FnMut(u64, usize) -> Result<Vec<u8>, String> {
        let md = s.metadata().unwrap();
        move |o: u64, n: usize| {
            if broken.is_some_and(|b| (o..o + n as u64).contains(&b)) {
                return Err("EIO".into());
            }
            let mut v = vec![0u8; n];
            for (mo, b) in &md {
                let (mo, me) = (*mo, *mo + b.len() as u64);
                if me > o && mo < o + n as u64 {
                    let from = mo.max(o);
                    let to = me.min(o + n as u64);
                    v[(from - o) as usize..(to - o) as usize]
                        .copy_from_slice(&b[(from - mo) as usize..(to - mo) as usize]);
                }
            }
            Ok(v)
        }
    }

    #[test]
    fn every_stride_is_read_and_the_boundary_is_kept() {
        // Two strides and a bit: 113,792 + 1,000 AUs, everything allocated
        // except AUs on both sides of the boundary and the tail.
        let s0 = SynthDisk::new(1);
        let m = s0.mfact() as usize;
        assert_eq!(m, 113_792);
        let mut s = SynthDisk::new(m + 1000);
        for (a, x) in s.allocated.iter_mut().enumerate() {
            *x = !((m - 10..m + 10).contains(&a) || a >= m + 900);
        }
        let h = DiskHeader::parse(&s.header_block()).unwrap();
        let size = (m as u64 + 1000) * MIB;
        let (l, scan, plan) =
            plan_disk_with(&h, &mut reader(&s, None), size, &lim(), "discard").unwrap();
        assert_eq!(l.mfact, m as u64);
        // 254 blocks in stride 0, 3 in stride 1 (1000 AUs / 448)
        assert_eq!(scan.blocks_valid, 254 + 3, "{:?}", scan.rejected);
        assert!(scan.rejected.is_empty(), "{:?}", scan.rejected);
        let m = m as u64;
        assert_eq!(
            scan.extents,
            vec![
                AuExtent {
                    start: m - 10,
                    count: 10
                },
                // AU m itself (the stride's metadata) is never free
                AuExtent {
                    start: m + 1,
                    count: 9
                },
                AuExtent {
                    start: m + 900,
                    count: 100
                },
            ]
        );
        assert_eq!(plan.total_bytes, 119 * MIB);
        // the AT blocks of stride 1 are where the stop rule looks for them
        assert!(scan
            .block_sums
            .contains_key(&l.at_block_offset(m + 5, scan.shrink)));
        assert_eq!(l.at_block_offset(m + 5, 448), m * MIB + 2 * 4096);
        // The first stride alone (AU 0 only): stride 1 stays in use.
        let (_, one, _) = plan_disk(
            &h,
            &reader(&s, None)(0, MIB as usize).unwrap(),
            size,
            &lim(),
            "discard",
        )
        .unwrap();
        assert_eq!(one.extents.len(), 1);
        // Stride 1 unreadable: in use, and said.
        let (_, bad, _) = plan_disk_with(
            &h,
            &mut reader(&s, Some(m * MIB + 3 * 4096)),
            size,
            &lim(),
            "discard",
        )
        .unwrap();
        assert_eq!(bad.extents, scan.extents[..1].to_vec());
        assert!(
            bad.rejected[0].starts_with(&format!("stride 1 (AU {m}): not read")),
            "{:?}",
            bad.rejected
        );
        // A stride-1 AT block claiming stride 0's AUs (aunum without the
        // stride's start): rejected, its AUs in use.
        let mut b = s.at_block_in(1, 0);
        b[0x20..0x24].copy_from_slice(&0u32.to_le_bytes());
        fix_checksum(&mut b);
        let mut base = reader(&s, None);
        let mut r = |o: u64, n: usize| {
            let mut v = base(o, n)?;
            let at = m * MIB + 2 * 4096;
            if (o..o + n as u64).contains(&at) {
                let i = (at - o) as usize;
                v[i..i + 4096].copy_from_slice(&b);
            }
            Ok(v)
        };
        let (_, w, _) = plan_disk_with(&h, &mut r, size, &lim(), "discard").unwrap();
        assert!(w.extents.iter().all(|e| e.end() <= m || e.start >= m + 448));
        assert!(
            w.rejected
                .iter()
                .any(|r| r.contains(&format!("AU {m} AT block 2: aunum 0 is not {m}"))),
            "{:?}",
            w.rejected
        );
    }

    #[test]
    fn bad_header_refused() {
        let s = disk(100, &[]);
        let mut b = s.header_block();
        b[0x100] ^= 1;
        let h = DiskHeader::parse(&b).unwrap();
        assert!(Layout::from_header(&h).is_err());
    }

    #[test]
    fn voting_and_spfile_reserved() {
        let s = disk(100, &[]);
        let mut b = s.header_block();
        use asmguard_format::header::off;
        b[off::VFSTART] = 40;
        b[off::VFEND] = 47;
        b[off::SPFILE] = 60;
        fix_checksum(&mut b[..4096]);
        let h = DiskHeader::parse(&b).unwrap();
        let (_, scan, _) = plan_disk(&h, &image(&s), 100 * MIB, &lim(), "discard").unwrap();
        for au in (40..=47).chain([60]) {
            assert!(scan.extents.iter().all(|e| au < e.start || au >= e.end()));
        }
    }

    #[test]
    fn alignment_and_split() {
        let ext = [AuExtent { start: 2, count: 3 }];
        // Granularity 1 MiB, alignment 512 KiB: ranges start at 2.5 MiB.
        let l = Limits {
            logical_block_size: 4096,
            granularity: MIB,
            alignment: MIB / 2,
            max_bytes: MIB + 100,
        };
        let (r, lost) = ranges(&ext, MIB, 100 * MIB, &l).unwrap();
        assert_eq!(
            r,
            vec![
                Range {
                    offset: 2 * MIB + MIB / 2,
                    len: MIB
                },
                Range {
                    offset: 3 * MIB + MIB / 2,
                    len: MIB
                },
            ]
        );
        assert_eq!(lost, MIB);
        // Granularity larger than the extent: nothing.
        let l2 = Limits {
            granularity: 8 * MIB,
            alignment: 0,
            max_bytes: 64 * MIB,
            ..l
        };
        let (r, lost) = ranges(&ext, MIB, 100 * MIB, &l2).unwrap();
        assert!(r.is_empty());
        assert_eq!(lost, 3 * MIB);
        let l3 = Limits {
            max_bytes: 100,
            ..l
        };
        assert!(ranges(&ext, MIB, 100 * MIB, &l3).is_err());
    }

    #[test]
    fn hash_changes_with_plan() {
        let a = [Range { offset: 0, len: 1 }];
        let b = [Range { offset: 0, len: 2 }];
        assert_ne!(hash(&a, 10, "discard"), hash(&b, 10, "discard"));
        assert_ne!(hash(&a, 10, "discard"), hash(&a, 10, "zeroout"));
        assert_eq!(hash(&a, 10, "discard"), hash(&a, 10, "discard"));
    }
}
