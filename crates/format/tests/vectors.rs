//! The real dumps from the shared reference parse to the values written next to them
//! (reference/vectors/EXPECTED.md). The `.bin` files are copied into this crate so the
//! tests run anywhere, with `tests/vectors/SHA256SUMS` taken from the reference: the
//! copies are always checked against those sums, and, when the shared reference sits
//! beside the repository, against it byte for byte too.

use asmguard_format::header::{HeaderStatus, Redundancy};
use asmguard_format::kfbh::{self, BlockType, Checksum};
use asmguard_format::label::{self, LabelState};
use asmguard_format::probe::{probe, SignatureKind};
use asmguard_format::DiskHeader;
use asmguard_testkit::{run_ok, vector, vectors_dir};
use std::path::PathBuf;

#[test]
fn copies_match_the_reference_sums() {
    let dir = vectors_dir();
    let sums = std::fs::read_to_string(dir.join("SHA256SUMS")).expect("tests/vectors/SHA256SUMS");
    run_ok(
        std::process::Command::new("sha256sum")
            .args(["--check", "--strict", "SHA256SUMS"])
            .current_dir(&dir),
    );
    assert_eq!(
        sums.lines().count(),
        3,
        "expected the three reference vectors"
    );
    // Beside the shared reference (the development checkout), byte for byte too.
    let shared =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/reference/vectors");
    if !shared.is_dir() {
        return;
    }
    let mut n = 0;
    for e in std::fs::read_dir(&shared).unwrap() {
        let p = e.unwrap().path();
        if p.extension().map(|x| x == "bin").unwrap_or(false) {
            let name = p.file_name().unwrap().to_str().unwrap().to_string();
            assert_eq!(std::fs::read(&p).unwrap(), vector(&name), "{name} differs");
            n += 1;
        }
    }
    assert_eq!(n, 3, "expected the three reference vectors");
}

#[test]
fn perl_check_script_member_disk() {
    let b = vector("asm-disk-chk-pl-sdk1-first160.bin");
    let h = DiskHeader::parse(&b).expect("a disk header");
    assert_eq!(h.kfbh.endian, asmguard_format::bytes::Endian::Little);
    assert_eq!(h.kfbh.block_type, BlockType::DiskHeader);
    assert_eq!(h.kfbh.datfmt, 2);
    assert_eq!(h.kfbh.obj, 0x8000_0002);
    assert_eq!(h.kfbh.disk_number(), Some(2));
    assert_eq!(h.provstr, "ORCLDISK");
    assert_eq!(
        h.label,
        LabelState::Marked {
            label: None,
            raw: String::new(),
            valid: false
        }
    );
    assert_eq!(h.compat, 0x0c10_0000);
    assert_eq!(h.compat_str, "12.1.0.0.0");
    assert_eq!(h.dsknum, 2);
    assert_eq!(h.redundancy, Redundancy::Normal);
    assert_eq!(h.status, HeaderStatus::Member);
    assert_eq!(h.dskname, "DISK15");
    assert_eq!(h.grpname, "DATA");
    assert_eq!(h.fgname, "FGA");
    assert_eq!(
        h.checksum,
        Checksum::Incomplete {
            have: 160,
            block_size: 4096
        }
    );
}

#[test]
fn dm39_external_member() {
    let b = vector("linux-dm39-first96.bin");
    let h = DiskHeader::parse(&b).expect("a disk header");
    assert_eq!(h.kfbh.block_type, BlockType::DiskHeader);
    assert_eq!(h.kfbh.obj, 0x8000_0000);
    assert_eq!(h.kfbh.check, 0xe389_fc77);
    assert_eq!(h.provstr, "ORCLDISK");
    assert!(h.label.label().is_none());
    assert_eq!(h.compat, 0x0a10_0000);
    assert_eq!(h.dsknum, 0);
    assert_eq!(h.redundancy, Redundancy::External);
    assert_eq!(h.status, HeaderStatus::Member);
    assert!(h.dskname.starts_with("NCAS_DISK1_0000"), "{}", h.dskname);
    assert!(matches!(h.checksum, Checksum::Incomplete { have: 96, .. }));
}

#[test]
fn afd_seed_label() {
    let b = vector("seed-afd-label-V512DATA1-4096.bin");
    assert_eq!(b.len(), 4096);
    // Not an ASM disk header: kfbh.type 0 (KFBTYP_INVALID).
    assert!(DiskHeader::parse(&b).is_none());
    assert_eq!(
        kfbh::Kfbh::parse(&b).unwrap().block_type,
        BlockType::Invalid
    );
    assert_eq!(label::read(&b).label().unwrap().as_str(), "V512DATA1");
    assert_eq!(&b[0x0c..0x10], b"(out");
    // The AFD block XORs to zero: the word at 0x0C is the XOR of tag and label.
    assert_eq!(kfbh::verify(&b, 4096), Checksum::Valid);
    // Byte for byte what the format code writes on a zero block.
    let mut ours = vec![0u8; 4096];
    label::write(&mut ours, &"V512DATA1".parse().unwrap()).unwrap();
    assert_eq!(ours, b);
    // The probe sees an ASM label and nothing foreign.
    let sigs = probe(&b, &[], 1 << 30);
    assert_eq!(sigs.len(), 1, "{sigs:?}");
    assert_eq!(
        sigs[0].kind,
        SignatureKind::AsmLabel {
            label: Some("V512DATA1".into())
        }
    );
}

#[test]
fn real_headers_probe_as_asm_disk_headers() {
    for v in [
        "asm-disk-chk-pl-sdk1-first160.bin",
        "linux-dm39-first96.bin",
    ] {
        let b = vector(v);
        let sigs = probe(&b, &[], 1 << 30);
        assert!(
            matches!(sigs.as_slice(), [s] if matches!(s.kind, SignatureKind::AsmDiskHeader { .. })),
            "{v}: {sigs:?}"
        );
    }
}
