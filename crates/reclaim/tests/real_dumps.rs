//! The planner against the real dumps (shared reference vectors, copied into the
//! format crate): they are headers of real member disks, but partial blocks, so
//! their checksum cannot be verified and nothing is planned from them. A
//! SYNTHETIC disk with the first dump's identity (dsknum 2, 12.1, NORMAL
//! redundancy, block.obj 0x80000002) plans like any other, with AU 11 reserved.

use asmguard_format::header::{DiskHeader, Redundancy};
use asmguard_format::synth::SynthDisk;
use asmguard_reclaim::plan::{plan_disk, Layout, Limits};
use asmguard_testkit::vector;

#[test]
fn partial_real_headers_are_refused() {
    for f in [
        "asm-disk-chk-pl-sdk1-first160.bin",
        "linux-dm39-first96.bin",
    ] {
        let h = DiskHeader::parse(&vector(f)).expect("a real ASM disk header");
        let e = Layout::from_header(&h).unwrap_err();
        assert!(e.contains("checksum"), "{f}: {e}");
    }
    // The AFD-labelled sector is no ASM disk header at all.
    assert!(DiskHeader::parse(&vector("seed-afd-label-V512DATA1-4096.bin")).is_none());
}

#[test]
fn synthetic_disk_with_a_real_identity_plans() {
    let real = DiskHeader::parse(&vector("asm-disk-chk-pl-sdk1-first160.bin")).unwrap();
    let mut s = SynthDisk::new(600);
    s.dsknum = real.dsknum;
    s.compat = real.compat;
    s.redundancy = Redundancy::Normal;
    s.grpname = real.grpname.clone();
    s.dskname = real.dskname.clone();
    s.fgname = real.fgname.clone();
    for a in 2..300 {
        s.allocated[a] = a % 7 != 0;
    }
    let hb = s.header_block();
    let h = DiskHeader::parse(&hb).unwrap();
    assert_eq!(h.kfbh.obj, real.kfbh.obj);
    assert_eq!(h.compat, 0x0c10_0000);
    let mut au0 = vec![0u8; 1 << 20];
    for (off, b) in s.metadata().unwrap() {
        if off < 1 << 20 {
            au0[off as usize..off as usize + b.len()].copy_from_slice(&b);
        }
    }
    let lim = Limits {
        logical_block_size: 512,
        granularity: 4096,
        alignment: 0,
        max_bytes: 1 << 30,
    };
    let (_, scan, plan) = plan_disk(&h, &au0, 600 << 20, &lim, "discard").unwrap();
    assert_eq!(scan.blocks_valid, 2);
    let free: Vec<u64> = (2..600u64)
        .filter(|a| *a >= 300 || a % 7 == 0)
        .filter(|a| *a != 11)
        .collect();
    assert_eq!(scan.free_aus, free.len() as u64);
    assert_eq!(plan.total_bytes, free.len() as u64 * (1 << 20));
    // Another disk's AT (dsknum 3) is not this disk's.
    let mut other = s.clone();
    other.dsknum = 3;
    let mut au0b = au0.clone();
    for i in 0..2u32 {
        let b = other.at_block(i);
        let o = (2 + i as usize) * 4096;
        au0b[o..o + 4096].copy_from_slice(&b);
    }
    assert!(plan_disk(&h, &au0b, 600 << 20, &lim, "discard").is_err());
}
