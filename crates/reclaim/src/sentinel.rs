//! The stop rule: before each chunk, re-read what another host that mounts the
//! disk group rewrites, and stop before the next discard on any change.
//!
//! A reclaim can only fence this host's writers. Another RAC node that mounts
//! the disk group during a reclaim rewrites the heartbeat block (the last block
//! of AU 1) within seconds, may stamp the header's `mntstmp`, and changes the
//! allocation table (AT) block of every AU it allocates. So before every chunk
//! [`Sentinel::check`] reads, with `O_DIRECT`:
//!
//! * block 0 (the header): its mount stamp, and its `dsksize` (`--above-size`:
//!   ASM never allocates at or above it; a disk that grew stops the run);
//! * the heartbeat block;
//! * every AT block describing an AU of the chunk (not in `--above-size`).
//!
//! Each is compared with what was read for the plan (before the AT itself),
//! so a change at any time after planning stops the run. What remains is one
//! chunk: a change landing after the check and before the chunk's discard
//! completes is not seen; chunks are kept short for that (see `crate::exec`).

use crate::plan::{block_sum, Layout, Range};
use crate::safety::Stamps;
use asmguard_devices::Device;
use asmguard_format::header::{off, DiskHeader};
use std::collections::BTreeMap;

/// Why a run stops.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stop {
    /// `heartbeat`, `mount_stamp`, `allocation_table`, `disk_size`, `header`,
    /// `read_error`.
    pub what: &'static str,
    /// What changed, as the message's first part ("heartbeat changed at ...").
    pub detail: String,
    /// Local time it was seen, `HH:MM:SS`.
    pub seen_at: String,
}

/// What is compared.
pub enum Watched {
    /// Free AUs from the AT: heartbeat, mount stamp and the AT blocks (their
    /// plan-time hashes by byte offset, `shrink` AUs each).
    Free {
        block_sums: BTreeMap<u64, u64>,
        shrink: u64,
    },
    /// Above the disk size: heartbeat and mount stamp are not compared (the
    /// disk group is mounted); `dsksize` must not grow above `dsksize`.
    AboveSize,
}

/// Re-reads a disk before each chunk.
pub struct Sentinel {
    pub dev: Device,
    pub layout: Layout,
    pub baseline: Stamps,
    pub watched: Watched,
}

/// The local time of day, `HH:MM:SS`.
pub fn clock() -> String {
    let t: libc::time_t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as libc::time_t)
        .unwrap_or(0);
    // SAFETY: `tm` is a plain C struct for which all-zero bytes are a valid value;
    // localtime_r only reads `t` and writes `tm`, both alive on this frame.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: as above; both pointers are valid for the call.
    let ok = !unsafe { libc::localtime_r(&t, &mut tm) }.is_null();
    if !ok {
        return "??:??:??".into();
    }
    format!("{:02}:{:02}:{:02}", tm.tm_hour, tm.tm_min, tm.tm_sec)
}

fn stop(what: &'static str, detail: String) -> Stop {
    let seen_at = clock();
    Stop {
        what,
        detail: detail.replace("{at}", &seen_at),
        seen_at,
    }
}

/// The first AU described by the AT block after the one describing `au`: AT
/// blocks describe `shrink` AUs each, counted from the first AU of each stride.
pub fn next_at_block(l: &Layout, au: u64, shrink: u64) -> u64 {
    let s = shrink.max(1);
    let base = au.checked_div(l.mfact).unwrap_or(0) * l.mfact;
    let next = base + ((au - base) / s + 1) * s;
    if l.mfact > 0 {
        next.min(base + l.mfact)
    } else {
        next
    }
}

impl Sentinel {
    /// `Ok` when the chunk `r` may be discarded now.
    pub fn check(&self, r: &Range) -> Result<(), Stop> {
        let l = &self.layout;
        let read = |o: u64, n: u64| -> Result<Vec<u8>, Stop> {
            match self.dev.read_at(o, n as usize) {
                Ok(b) if b.len() == n as usize => Ok(b),
                Ok(_) => Err(stop(
                    "read_error",
                    format!("a short read at byte {o} at {{at}}"),
                )),
                Err(e) => Err(stop(
                    "read_error",
                    format!("reading byte {o} failed at {{at}} ({e})"),
                )),
            }
        };
        let b0 = read(0, l.blksize)?;
        let Some(h) = DiskHeader::parse(&b0) else {
            return Err(stop(
                "header",
                "the ASM disk header was gone at {at} (rewritten by someone?)".into(),
            ));
        };
        if matches!(self.watched, Watched::AboveSize) {
            if h.checksum != asmguard_format::kfbh::Checksum::Valid {
                return Err(stop(
                    "header",
                    "the ASM disk header's checksum failed at {at}".into(),
                ));
            }
            if h.dsksize as u64 != l.dsksize {
                return Err(stop(
                    "disk_size",
                    format!(
                        "the disk size changed from {} to {} AUs at {{at}} (the disk group was resized)",
                        l.dsksize, h.dsksize
                    ),
                ));
            }
            return Ok(());
        }
        let e = h.kfbh.endian;
        let mnt = (e.u32(&b0, off::MNTSTMP), e.u32(&b0, off::MNTSTMP + 4));
        if self.baseline.mntstmp.first() != Some(&mnt) {
            return Err(stop(
                "mount_stamp",
                "the mount stamp changed at {at} (the disk group was mounted?)".into(),
            ));
        }
        let hb = read(l.heartbeat_offset(), l.blksize)?;
        if hb != self.baseline.heartbeat {
            return Err(stop(
                "heartbeat",
                "heartbeat changed at {at} (mounted on another host?)".into(),
            ));
        }
        if let Watched::Free { block_sums, shrink } = &self.watched {
            let (first, last) = (r.offset / l.ausize, (r.end() - 1) / l.ausize);
            let mut au = first;
            while au <= last {
                let o = l.at_block_offset(au, *shrink);
                let b = read(o, l.blksize)?;
                if block_sums.get(&o) != Some(&block_sum(&b)) {
                    return Err(stop(
                        "allocation_table",
                        format!(
                            "the allocation table block describing AU {au} (byte {o}) changed at {{at}} (ASM allocated space?)"
                        ),
                    ));
                }
                au = next_at_block(l, au, *shrink);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{scan_at, Layout};
    use asmguard_format::synth::SynthDisk;
    use std::os::unix::fs::FileExt;

    const MIB: u64 = 1 << 20;

    /// An image of `s`, and the sentinel a plan of it would use.
    fn setup(s: &SynthDisk) -> (tempfile::NamedTempFile, Sentinel) {
        let f = tempfile::NamedTempFile::new().unwrap();
        f.as_file().set_len(s.dsksize() as u64 * MIB).unwrap();
        for (o, b) in s.metadata().unwrap() {
            f.as_file().write_all_at(&b, o).unwrap();
        }
        let dev = Device::open_read(f.path()).unwrap();
        let h = DiskHeader::parse(&dev.read_block0().unwrap()).unwrap();
        let l = Layout::from_header(&h).unwrap();
        let baseline = crate::disk::stamps(&dev, &l).unwrap();
        let au0 = dev.read_at(0, MIB as usize).unwrap();
        let scan = scan_at(&l, &au0, s.dsksize() as u64 * MIB);
        let se = Sentinel {
            dev,
            layout: l,
            baseline,
            watched: Watched::Free {
                block_sums: scan.block_sums,
                shrink: scan.shrink,
            },
        };
        (f, se)
    }

    fn aus(first: u64, count: u64) -> Range {
        Range {
            offset: first * MIB,
            len: count * MIB,
        }
    }

    #[test]
    fn any_change_of_what_another_host_writes_stops() {
        let mut s = SynthDisk::new(1000);
        s.allocated[5] = true;
        let (f, se) = setup(&s);
        let w = |o: u64, b: &[u8]| f.as_file().write_all_at(b, o).unwrap();
        // Quiet: every chunk may go, across AT blocks (448 AUs each) too.
        se.check(&aus(10, 5)).unwrap();
        se.check(&aus(400, 100)).unwrap();
        se.check(&aus(999, 1)).unwrap();
        // ASM allocates AU 600: the AT block describing AUs 448..895 (block 3)
        // changes; chunks it describes stop, others may go.
        let mut t = s.clone();
        t.allocated[600] = true;
        w(3 * 4096, &t.at_block(1));
        let e = se.check(&aus(590, 20)).unwrap_err();
        assert_eq!(e.what, "allocation_table");
        assert!(e.detail.contains("AU 590 (byte 12288)"), "{}", e.detail);
        assert!(!e.detail.contains("{at}"));
        assert_eq!(
            se.check(&aus(440, 10)).unwrap_err().what,
            "allocation_table"
        );
        se.check(&aus(10, 400)).unwrap();
        se.check(&aus(900, 50)).unwrap();
        w(3 * 4096, &s.at_block(1));
        se.check(&aus(590, 20)).unwrap();
        // The heartbeat (last block of AU 1).
        w(2 * MIB - 4096, b"beat");
        let e = se.check(&aus(10, 5)).unwrap_err();
        assert_eq!(e.what, "heartbeat");
        assert!(
            e.detail.starts_with("heartbeat changed at "),
            "{}",
            e.detail
        );
        assert!(
            e.detail.ends_with("(mounted on another host?)"),
            "{}",
            e.detail
        );
        assert_eq!(e.seen_at.len(), 8);
        w(2 * MIB - 4096, &[0; 4]);
        se.check(&aus(10, 5)).unwrap();
        // The mount stamp.
        let mut m = s.clone();
        m.mounted = asmguard_format::header::Stamp::encode(2026, 11, 28, 12, 3, 4);
        w(0, &m.header_block());
        assert_eq!(se.check(&aus(10, 5)).unwrap_err().what, "mount_stamp");
        // The header wiped.
        w(0, &[0; 4096]);
        assert_eq!(se.check(&aus(10, 5)).unwrap_err().what, "header");
    }

    #[test]
    fn above_the_size_only_the_disk_size_counts() {
        let s = SynthDisk::new(100);
        let (f, mut se) = setup(&s);
        se.watched = Watched::AboveSize;
        se.layout.dsksize = 100;
        let w = |o: u64, b: &[u8]| f.as_file().write_all_at(b, o).unwrap();
        // The disk group is mounted: heartbeat and mount stamp move, no stop.
        w(2 * MIB - 4096, b"beat");
        let mut m = s.clone();
        m.mounted = asmguard_format::header::Stamp::encode(2026, 11, 28, 12, 3, 4);
        w(0, &m.header_block());
        se.check(&aus(100, 10)).unwrap();
        // Resized up to 120 AUs.
        m.allocated.resize(120, false);
        w(0, &m.header_block());
        let e = se.check(&aus(100, 10)).unwrap_err();
        assert_eq!(e.what, "disk_size");
        assert!(e.detail.contains("from 100 to 120 AUs"), "{}", e.detail);
    }

    #[test]
    fn at_blocks_restart_at_each_stride() {
        let l = Layout {
            ausize: MIB,
            blksize: 4096,
            dsksize: 300_000,
            mfact: 113_792,
            altlocn: 2,
            dsknum: 0,
            vfstart: 0,
            vfend: 0,
            spfile: 0,
        };
        assert_eq!(next_at_block(&l, 0, 448), 448);
        assert_eq!(next_at_block(&l, 447, 448), 448);
        // the last block of stride 0 describes 113,344..113,791
        assert_eq!(next_at_block(&l, 113_500, 448), 113_792);
        assert_eq!(next_at_block(&l, 113_792, 448), 113_792 + 448);
        assert_eq!(l.at_block_offset(113_791, 448), (2 + 253) * 4096);
        assert_eq!(l.at_block_offset(113_792, 448), 113_792 * MIB + 2 * 4096);
        assert_eq!(
            l.at_block_offset(113_792 + 448, 448),
            113_792 * MIB + 3 * 4096
        );
    }
}
