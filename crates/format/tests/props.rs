//! Property tests: build -> parse round trips, no input of any size panics a parser,
//! and a label edit changes only the label bytes and the checksum word.
//!
//! Case counts: `PROPTEST_CASES` (default 512 here; `make test` runs the default).

use asmguard_format::alloc::{self, AtBlock, FstBlock};
use asmguard_format::bytes::Endian;
use asmguard_format::header::{HeaderStatus, Redundancy, Stamp};
use asmguard_format::kfbh::{self, xor_words, Checksum};
use asmguard_format::label::{self, Label, LabelState};
use asmguard_format::probe;
use asmguard_format::synth::{SynthDisk, SYNTHETIC_MARK};
use asmguard_format::DiskHeader;
use proptest::prelude::*;

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(512)
}

fn label_strategy() -> impl Strategy<Value = String> {
    "[a-zA-Z][a-zA-Z0-9_]{0,23}"
}

fn name_strategy() -> impl Strategy<Value = String> {
    "[A-Z][A-Z0-9_]{0,30}"
}

prop_compose! {
    fn synth_disk()(
        big in any::<bool>(),
        blk_shift in 9u32..=12,          // 512 .. 4096-byte metadata blocks
        au_shift in 20u32..=22,          // 1, 2, 4 MiB AUs
        dsknum in any::<u16>(),
        red in 1u8..=3,
        status in 0u8..=7,
        compat in prop::sample::select(vec![0x0a10_0000u32, 0x0b20_0000, 0x0c10_0000, 0x1300_0000]),
        dskname in name_strategy(),
        grpname in name_strategy(),
        fgname in name_strategy(),
        label in prop::option::of(label_strategy()),
        y in 2000u32..2100, mo in 1u32..=12, d in 1u32..=28, h in 0u32..24, mi in 0u32..60, s in 0u32..60,
        alloc in prop::collection::vec(any::<bool>(), 2..1500),
    ) -> SynthDisk {
        let mut disk = SynthDisk::new(alloc.len());
        disk.endian = if big { Endian::Big } else { Endian::Little };
        disk.blksize = 1 << blk_shift;
        disk.ausize = 1 << au_shift;
        disk.dsknum = dsknum;
        disk.redundancy = Redundancy::from_u8(red);
        disk.status = HeaderStatus::from_u8(status);
        disk.compat = compat;
        disk.dskname = dskname;
        disk.grpname = grpname;
        disk.fgname = fgname;
        disk.label = label.map(|l| Label::new(&l).unwrap());
        disk.created = Stamp::encode(y, mo, d, h, mi, s);
        disk.allocated = alloc;
        disk
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn header_round_trip(disk in synth_disk()) {
        let b = disk.header_block();
        let h = DiskHeader::parse(&b).expect("synthetic header parses");
        prop_assert_eq!(h.checksum, Checksum::Valid);
        prop_assert_eq!(h.kfbh.endian, disk.endian);
        prop_assert_eq!(h.dsknum, disk.dsknum);
        prop_assert_eq!(h.redundancy, disk.redundancy);
        prop_assert_eq!(h.status, disk.status);
        prop_assert_eq!(h.compat, disk.compat);
        prop_assert_eq!(&h.dskname, &disk.dskname);
        prop_assert_eq!(&h.grpname, &disk.grpname);
        prop_assert_eq!(&h.fgname, &disk.fgname);
        prop_assert_eq!(&h.capname, SYNTHETIC_MARK);
        prop_assert_eq!(h.blksize, disk.blksize);
        prop_assert_eq!(h.ausize, disk.ausize);
        prop_assert_eq!(h.secsize, disk.secsize);
        prop_assert_eq!(h.dsksize, disk.dsksize());
        prop_assert_eq!(h.mfact, disk.mfact());
        prop_assert_eq!((h.created.hi, h.created.lo), disk.created);
        prop_assert_eq!(h.label.label(), disk.label.clone());
        prop_assert_eq!(h.kfbh.disk_number(), Some(disk.dsknum as u32));
    }

    #[test]
    fn allocation_table_round_trip(disk in synth_disk()) {
        let bs = disk.blksize as usize;
        let meta = disk.metadata();
        prop_assume!(meta.is_ok());
        let meta = meta.unwrap();
        // AT blocks sit at AU 0 blocks ALTLOCN..; parse them all.
        let ats: Vec<AtBlock> = meta
            .iter()
            .filter(|(o, _)| *o >= SynthDisk::ALTLOCN as u64 * bs as u64 && *o < disk.ausize as u64)
            .map(|(_, b)| AtBlock::parse(b, bs).expect("AT block parses"))
            .collect();
        let free = alloc::free_extents(&ats, disk.dsksize() as u64, &[0, 1]);
        let expect: Vec<u64> = (2..disk.allocated.len() as u64)
            .filter(|&au| !disk.allocated[au as usize])
            .collect();
        let got: Vec<u64> = free.iter().flat_map(|x| x.start..x.end()).collect();
        prop_assert_eq!(got, expect);
        // Extents are merged: no two touch.
        for w in free.windows(2) {
            prop_assert!(w[0].end() < w[1].start);
        }
        let fst = FstBlock::parse(&meta[1].1, bs).expect("FST parses");
        prop_assert_eq!(fst.cnt as usize, ats.len());
        // The header copy in AU 1 is identical and valid.
        let copy = meta.last().unwrap();
        prop_assert_eq!(copy.0, disk.ausize as u64 + (disk.ausize as u64 / bs as u64 - 2) * bs as u64);
        prop_assert_eq!(&copy.1, &meta[0].1);
    }

    #[test]
    fn label_edit_touches_only_label_and_check(
        mut block in prop::collection::vec(any::<u8>(), 512..=4096),
        l in label_strategy(),
    ) {
        let before = block.clone();
        let xor_before = xor_words(&block);
        let label = Label::new(&l).unwrap();
        label::write(&mut block, &label).unwrap();
        for (i, (a, b)) in before.iter().zip(&block).enumerate() {
            if a != b {
                prop_assert!((0x0C..0x10).contains(&i) || (0x20..0x40).contains(&i), "byte {} changed", i);
            }
        }
        prop_assert_eq!(xor_words(&block), xor_before);
        prop_assert_eq!(label::read(&block).label(), Some(label));
        label::clear(&mut block).unwrap();
        prop_assert_eq!(xor_words(&block), xor_before);
        prop_assert!(label::read(&block).label().is_none());
    }

    #[test]
    fn label_edit_on_disk_header_keeps_it_valid(disk in synth_disk(), l in label_strategy()) {
        let mut b = disk.header_block();
        let orig = DiskHeader::parse(&b).unwrap();
        let label = Label::new(&l).unwrap();
        label::write(&mut b, &label).unwrap();
        let h = DiskHeader::parse(&b).unwrap();
        prop_assert_eq!(h.checksum, Checksum::Valid);
        prop_assert_eq!(h.label.label(), Some(label));
        // Every other field is unchanged.
        prop_assert_eq!(h.dskname, orig.dskname);
        prop_assert_eq!(h.grpname, orig.grpname);
        prop_assert_eq!(h.kfbh.blk, orig.kfbh.blk);
        prop_assert_eq!(h.dsksize, orig.dsksize);
        // Unlabel keeps ORCLDISK (ASM needs it) and the checksum.
        label::clear(&mut b).unwrap();
        let h = DiskHeader::parse(&b).unwrap();
        prop_assert_eq!(h.checksum, Checksum::Valid);
        let kept = matches!(h.label, LabelState::Marked { label: None, .. });
        prop_assert!(kept, "unlabel must keep ORCLDISK");
    }

    #[test]
    fn valid_labels_are_accepted_and_upper_cased(l in label_strategy()) {
        let label = Label::new(&l).unwrap();
        prop_assert_eq!(label.as_str(), l.to_ascii_uppercase());
        let mut b = vec![0u8; 512];
        label::write(&mut b, &label).unwrap();
        prop_assert_eq!(kfbh::verify(&b, 512), Checksum::Valid);
    }

    #[test]
    fn invalid_labels_are_refused(l in "[^A-Za-z0-9_]{1,3}|[0-9_][A-Z0-9_]{0,10}|[A-Z]{25,40}") {
        prop_assert!(Label::new(&l).is_err());
    }

    #[test]
    fn stamps_round_trip(y in 0u32..(1<<18), mo in 0u32..16, d in 0u32..32, h in 0u32..32, mi in 0u32..64, s in 0u32..64) {
        let (hi, lo) = Stamp::encode(y, mo, d, h, mi, s);
        let st = Stamp::decode(hi, lo);
        prop_assert_eq!((st.year, st.month, st.day, st.hour, st.minute, st.second), (y, mo, d, h, mi, s));
    }

    /// No input of any size panics any parser.
    #[test]
    fn parsers_never_panic(
        data in prop::collection::vec(any::<u8>(), 0..9000),
        tail in prop::collection::vec(any::<u8>(), 0..300),
        size in any::<u64>(),
        bs in prop::sample::select(vec![0usize, 1, 511, 512, 1024, 4096, 8192, 65536, 1 << 20]),
    ) {
        let _ = DiskHeader::parse(&data);
        let _ = kfbh::Kfbh::parse(&data);
        let _ = kfbh::verify(&data, bs);
        let _ = AtBlock::parse(&data, bs);
        let _ = FstBlock::parse(&data, bs);
        let _ = label::read(&data);
        let _ = probe::probe(&data, &tail, size);
        let _ = probe::probe(&data, &tail, data.len() as u64);
    }

    /// Headers with random bytes behind a valid kfbh still parse without panicking, and
    /// a corrupted byte is caught by the checksum.
    #[test]
    fn corruption_is_detected(disk in synth_disk(), at in 0usize..4096, flip in 1u8..=255) {
        let mut b = disk.header_block();
        let at = at % b.len();
        prop_assume!(at >= 4); // keep endian/type so it is still a header
        prop_assume!(!(0x20..0x28).contains(&at)); // keep ORCLDISK
        b[at] ^= flip;
        let h = DiskHeader::parse(&b).unwrap();
        // Invalid, or (when the corrupted byte is blksize itself) not verifiable: never Valid.
        prop_assert_ne!(h.checksum, Checksum::Valid);
    }
}
