//! Writing, changing and removing labels on a device, with every refusal a DBA needs.
//!
//! * A disk with foreign data (any signature the probe finds, or unknown non-zero
//!   bytes) is refused without `force`. With `force`, each signature's magic bytes are
//!   erased (as `wipefs` does) and a fresh label block is written.
//! * A disk with an ASM disk header is refused without `migrate`. With it, only the
//!   label bytes of block 0 (and of the header copy in AU 1, when that is a valid disk
//!   header copy) change and the checksum word is carried along; nothing else is
//!   written.
//! * A disk that carries another label is refused without `force` (use rename).
//! * The same label again is a no-op.
//!
//! Every write is `O_DIRECT`, aligned to the logical block size, synced, read back
//! and compared. The device is opened `O_EXCL`, so a mounted or dm/md-held device, or
//! a second labeller at the same time, gets `EBUSY`.

use crate::blockdev::{DevError, Device, MIN_SIZE};
use crate::writer::WriteOpen;
use asmguard_format::header::{DiskHeader, HeaderStatus};
use asmguard_format::kfbh::{self, Checksum};
use asmguard_format::label::{self, Label, LabelState};
use asmguard_format::probe::{self, Signature, SignatureKind};
use asmguard_proto::LabelAction;
use std::path::Path;

/// Options of a label write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LabelOptions {
    pub force: bool,
    pub migrate: bool,
    /// How the device is opened for writing (the caller's exclusive claim, the
    /// writer's real id: see `Device::open_write_as`).
    pub open: WriteOpen,
}

/// What was done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// What was done (the `action` of the protocol's answer).
    pub action: LabelAction,
    /// Signatures erased, `name@offset`.
    pub erased: Vec<String>,
    /// Ranges written: (offset, length).
    pub written: Vec<(u64, usize)>,
}

/// Why a label operation did not happen. Nothing was written in any of these cases,
/// except `Dev(VerifyFailed)` / `Dev(Io)` on a write.
#[derive(Debug, thiserror::Error)]
pub enum LabelOpError {
    #[error(transparent)]
    Dev(#[from] DevError),
    #[error("{path}: holds data ({sigs}): refusing to label it; --force erases these signatures")]
    Data { path: String, sigs: String },
    #[error("{path}: holds an ASM disk header (disk group {group:?}, disk {disk:?}, {status}): refusing to label it; --migrate keeps the header and only sets the label")]
    AsmHeader {
        path: String,
        group: String,
        disk: String,
        status: String,
    },
    #[error("{path}: is already labelled {existing}: {}", relabel_hint(existing))]
    Labelled { path: String, existing: String },
    #[error("{path}: the ASM disk header says this disk is a {status} of disk group {group:?}: refusing to remove its label; --force removes it anyway")]
    Member {
        path: String,
        status: String,
        group: String,
    },
    #[error("{path}: does not carry label {expected} (it says {found}): nothing changed")]
    NotLabelled {
        path: String,
        expected: String,
        found: String,
    },
    #[error("{0}: could not read the first blocks of the device")]
    Unreadable(String),
}

/// What to do about a disk that carries another label. `rename` names a disk by
/// its label, so it can only be suggested for a valid label as it is written on
/// the disk, and only works while no other disk carries it.
fn relabel_hint(existing: &str) -> String {
    match Label::new(existing) {
        Ok(l) if l.as_str() == existing => format!(
            "`asmguardctl rename {existing} NEW` renames it (unless another disk carries \
             {existing} too), or --force replaces the label"
        ),
        _ => format!(
            "{existing:?} is not a valid label as written (labels are [A-Z0-9_], starting \
             with a letter), so `rename` cannot name it: --force replaces the label"
        ),
    }
}

fn describe(sigs: &[&Signature]) -> String {
    sigs.iter()
        .map(|s| format!("{} at byte {}", s.kind.name(), s.offset))
        .collect::<Vec<_>>()
        .join(", ")
}

fn found_text(s: &LabelState) -> String {
    match s {
        LabelState::Unmarked => "no label".into(),
        LabelState::Cleared => "a cleared label".into(),
        LabelState::Marked { label: None, .. } => "ORCLDISK without a label".into(),
        LabelState::Marked { raw, .. } => format!("label {raw}"),
    }
}

struct Probed {
    dev: Device,
    head: Vec<u8>,
    sigs: Vec<Signature>,
    header: Option<DiskHeader>,
    unit: usize,
}

fn open_probe(path: &Path, how: WriteOpen) -> Result<Probed, LabelOpError> {
    let dev = Device::open_write_as(path, how)?;
    dev.require_size(MIN_SIZE.max(dev.logical_block_size as u64))?;
    let (head, tail) = dev.read_probe_regions()?;
    let unit = dev.logical_block_size.max(512) as usize;
    if head.len() < 4096.max(unit) {
        return Err(LabelOpError::Unreadable(path.display().to_string()));
    }
    let sigs = probe::probe(&head, &tail, dev.size);
    let header = DiskHeader::parse(&head[..4096.max(unit)]);
    Ok(Probed {
        dev,
        head,
        sigs,
        header,
        unit,
    })
}

/// Edit the label in the first logical block in place (XOR-neutral, so an ASM header
/// checksum stays valid), and the same in the header copy in AU 1 if `header` is given
/// and that copy is a valid disk header. Returns the ranges written.
fn edit_in_place(
    p: &Probed,
    edit: &dyn Fn(&mut [u8]),
    with_copy: bool,
) -> Result<Vec<(u64, usize)>, LabelOpError> {
    let mut written = Vec::new();
    let mut b0 = p.head[..p.unit].to_vec();
    edit(&mut b0);
    if let (true, Some(h)) = (with_copy, &p.header) {
        let bs = h.blksize as u64;
        let (au, blk) = h.backup_header_location();
        let off = au as u64 * h.ausize as u64 + blk as u64 * bs;
        let len = (bs as usize).max(p.unit);
        let aligned = bs.is_power_of_two() && off % p.unit as u64 == 0 && bs > 0;
        if aligned && h.ausize > 0 && off + len as u64 <= p.dev.size {
            let copy = p.dev.read_at(off, len)?;
            if copy.len() == len
                && asmguard_format::header::is_disk_header(&copy)
                && kfbh::verify(&copy, bs as usize) == Checksum::Valid
            {
                let mut c = copy[..p.unit].to_vec();
                edit(&mut c);
                p.dev.write_verified(off, &c)?;
                written.push((off, c.len()));
            }
        }
    }
    // Block 0 last: the label appears only once everything else is in place.
    p.dev.write_verified(0, &b0)?;
    written.push((0, b0.len()));
    Ok(written)
}

/// Without `--force`: refuse foreign data, then another label.
fn refuse_unless_forced(
    shown: &str,
    foreign: &[&Signature],
    existing: &Option<String>,
    force: bool,
) -> Result<(), LabelOpError> {
    if force {
        return Ok(());
    }
    if !foreign.is_empty() {
        return Err(LabelOpError::Data {
            path: shown.to_string(),
            sigs: describe(foreign),
        });
    }
    if let Some(e) = existing {
        return Err(LabelOpError::Labelled {
            path: shown.to_string(),
            existing: e.clone(),
        });
    }
    Ok(())
}

/// Label the device at `path`.
pub fn label_device(path: &Path, new: &Label, opts: LabelOptions) -> Result<Outcome, LabelOpError> {
    let p = open_probe(path, opts.open)?;
    let shown = path.display().to_string();
    let current = label::read(&p.head);
    if current.label().as_ref() == Some(new) {
        return Ok(Outcome {
            action: LabelAction::Unchanged,
            erased: vec![],
            written: vec![],
        });
    }
    let foreign = probe::foreign(&p.sigs);
    let existing = match &current {
        LabelState::Marked {
            label: Some(_),
            raw,
            ..
        } => Some(raw.clone()),
        _ => None,
    };
    if let Some(h) = &p.header {
        if !opts.migrate {
            return Err(LabelOpError::AsmHeader {
                path: shown,
                group: h.grpname.clone(),
                disk: h.dskname.clone(),
                status: h.status.name(),
            });
        }
        refuse_unless_forced(&shown, &foreign, &existing, opts.force)?;
        // Only the label bytes change; nothing is erased on an ASM disk.
        return write_label_bytes(&p, new, LabelAction::Migrated);
    }
    refuse_unless_forced(&shown, &foreign, &existing, opts.force)?;
    // A fresh label block covers the first 4 KiB (or one logical block if larger).
    let fresh_len = 4096usize.max(p.unit);
    let mut written = Vec::new();
    let mut erased = Vec::new();
    for s in &foreign {
        if matches!(s.kind, SignatureKind::UnknownData { .. }) {
            erased.push(format!("unknown data at byte {}", s.offset));
        }
        if s.len == 0 {
            continue;
        }
        erased.push(format!("{}@{}", s.kind.name(), s.offset));
        if s.offset + (s.len as u64) <= fresh_len as u64 {
            continue; // inside the fresh block
        }
        let u = p.unit as u64;
        let start = s.offset / u * u;
        let end = (s.offset + s.len as u64).div_ceil(u) * u;
        let mut blk = p.dev.read_at(start, (end - start) as usize)?;
        if blk.len() != (end - start) as usize {
            return Err(LabelOpError::Unreadable(shown));
        }
        let a = (s.offset - start) as usize;
        blk[a..a + s.len as usize].fill(0);
        p.dev.write_verified(start, &blk)?;
        written.push((start, blk.len()));
    }
    let mut b = vec![0u8; fresh_len];
    label::write(&mut b, new).map_err(|_| LabelOpError::Unreadable(shown.clone()))?;
    p.dev.write_verified(0, &b)?;
    written.push((0, b.len()));
    let action = if existing.is_some() {
        LabelAction::Relabelled
    } else {
        LabelAction::Labelled
    };
    Ok(Outcome {
        action,
        erased,
        written,
    })
}

/// Writes `new` over the label bytes only (block 0 and a valid header copy).
fn write_label_bytes(
    p: &Probed,
    new: &Label,
    action: LabelAction,
) -> Result<Outcome, LabelOpError> {
    let written = edit_in_place(
        p,
        &|b: &mut [u8]| {
            let _ = label::write(b, new);
        },
        true,
    )?;
    Ok(Outcome {
        action,
        erased: vec![],
        written,
    })
}

/// [`open_probe`], refusing a device that does not carry the label `expected`.
fn open_labelled(path: &Path, expected: &Label, how: WriteOpen) -> Result<Probed, LabelOpError> {
    let p = open_probe(path, how)?;
    let current = label::read(&p.head);
    if current.label().as_ref() != Some(expected) {
        return Err(LabelOpError::NotLabelled {
            path: path.display().to_string(),
            expected: expected.to_string(),
            found: found_text(&current),
        });
    }
    Ok(p)
}

/// Change the label `old` on the device at `path` to `new`, touching only the label
/// bytes (and the checksum word), on block 0 and on a valid ASM header copy.
/// `how` as in `LabelOptions::open`.
pub fn rename_device(
    path: &Path,
    old: &Label,
    new: &Label,
    how: WriteOpen,
) -> Result<Outcome, LabelOpError> {
    let p = open_labelled(path, old, how)?;
    write_label_bytes(&p, new, LabelAction::Renamed)
}

/// Remove the label `expected` from the device at `path`. On an ASM disk the
/// `ORCLDISK` provstr stays and only the label bytes are zeroed; elsewhere the tag
/// becomes `ORCLCLRD` as ASMLib's `deletedisk` leaves it. A disk-group member is
/// refused without `force`. `how` as in `LabelOptions::open`.
pub fn unlabel_device(
    path: &Path,
    expected: &Label,
    force: bool,
    how: WriteOpen,
) -> Result<Outcome, LabelOpError> {
    let p = open_labelled(path, expected, how)?;
    if let Some(h) = &p.header {
        if h.status == HeaderStatus::Member && !force {
            return Err(LabelOpError::Member {
                path: path.display().to_string(),
                status: h.status.name(),
                group: h.grpname.clone(),
            });
        }
    }
    let written = edit_in_place(
        &p,
        &|b: &mut [u8]| {
            let _ = label::clear(b);
        },
        true,
    )?;
    Ok(Outcome {
        action: LabelAction::Unlabelled,
        erased: vec![],
        written,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use asmguard_format::synth::SynthDisk;
    use std::io::Write;

    fn image(len: usize) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(&vec![0u8; len]).unwrap();
        f
    }

    fn put(f: &tempfile::NamedTempFile, off: u64, b: &[u8]) {
        use std::os::unix::fs::FileExt;
        f.as_file().write_all_at(b, off).unwrap();
    }

    fn bytes(f: &tempfile::NamedTempFile) -> Vec<u8> {
        std::fs::read(f.path()).unwrap()
    }

    fn l(s: &str) -> Label {
        Label::new(s).unwrap()
    }

    #[test]
    fn relabel_hint_suggests_rename_only_for_a_label_rename_can_name() {
        assert!(relabel_hint("DATA1").contains("asmguardctl rename DATA1 NEW"));
        for raw in ["data1", "DATA 1", "1DATA"] {
            let h = relabel_hint(raw);
            assert!(!h.contains("asmguardctl rename"), "{raw}: {h}");
            assert!(h.contains("--force"), "{raw}: {h}");
        }
    }

    #[test]
    fn blank_is_labelled_and_relabel_needs_force() {
        let f = image(1 << 20);
        let o = label_device(f.path(), &l("DATA1"), LabelOptions::default()).unwrap();
        assert_eq!(o.action, LabelAction::Labelled);
        assert_eq!(label::read(&bytes(&f)).label(), Some(l("DATA1")));
        let o = label_device(f.path(), &l("DATA1"), LabelOptions::default()).unwrap();
        assert_eq!(o.action, LabelAction::Unchanged);
        let e = label_device(f.path(), &l("DATA2"), LabelOptions::default()).unwrap_err();
        assert!(matches!(e, LabelOpError::Labelled { .. }), "{e}");
        let o = rename_device(f.path(), &l("DATA1"), &l("DATA2"), WriteOpen::default()).unwrap();
        assert_eq!(o.action, LabelAction::Renamed);
        assert_eq!(label::read(&bytes(&f)).label(), Some(l("DATA2")));
        unlabel_device(f.path(), &l("DATA2"), false, WriteOpen::default()).unwrap();
        assert_eq!(label::read(&bytes(&f)), LabelState::Cleared);
        // A cleared disk is blank enough to label again without force.
        label_device(f.path(), &l("DATA3"), LabelOptions::default()).unwrap();
    }

    #[test]
    fn foreign_data_is_refused_then_erased_with_force() {
        let f = image(1 << 20);
        // An MBR signature and LVM2 label, and swap at the end of the first 4 KiB page.
        put(&f, 510, &[0x55, 0xAA]);
        put(&f, 512, b"LABELONE");
        put(&f, 512 + 24, b"LVM2 001");
        put(&f, 65536 + 64, b"_BHRfS_M");
        let before = bytes(&f);
        let e = label_device(f.path(), &l("D"), LabelOptions::default()).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, LabelOpError::Data { .. }), "{msg}");
        assert!(
            msg.contains("LVM2_member") && msg.contains("--force"),
            "{msg}"
        );
        assert_eq!(bytes(&f), before, "a refusal writes nothing");
        let e = label_device(
            f.path(),
            &l("D"),
            LabelOptions {
                force: false,
                migrate: true,
                open: WriteOpen::default(),
            },
        )
        .unwrap_err();
        assert!(matches!(e, LabelOpError::Data { .. }));
        let o = label_device(
            f.path(),
            &l("D"),
            LabelOptions {
                force: true,
                migrate: false,
                open: WriteOpen::default(),
            },
        )
        .unwrap();
        assert!(o.erased.iter().any(|s| s.starts_with("btrfs@")), "{o:?}");
        let after = bytes(&f);
        let sigs = probe::probe(
            &after[..131072],
            &after[after.len() - 131072..],
            after.len() as u64,
        );
        assert!(probe::foreign(&sigs).is_empty(), "{sigs:?}");
        assert_eq!(label::read(&after).label(), Some(l("D")));
        // Only the erased magic and the label block changed.
        let changed: Vec<usize> = (0..after.len())
            .filter(|&i| after[i] != before[i])
            .collect();
        assert!(
            changed
                .iter()
                .all(|&i| i < 4096 || (65600..65608).contains(&i)),
            "{changed:?}"
        );
    }

    #[test]
    fn asm_header_needs_migrate_and_keeps_every_other_byte() {
        let mut d = SynthDisk::new(8);
        d.label = None;
        let f = image(8 << 20);
        for (off, b) in d.metadata().unwrap() {
            put(&f, off, &b);
        }
        let before = bytes(&f);
        let e = label_device(f.path(), &l("MIG1"), LabelOptions::default()).unwrap_err();
        assert!(matches!(e, LabelOpError::AsmHeader { .. }), "{e}");
        assert!(e.to_string().contains("--migrate"));
        assert_eq!(bytes(&f), before);
        let o = label_device(
            f.path(),
            &l("MIG1"),
            LabelOptions {
                force: false,
                migrate: true,
                open: WriteOpen::default(),
            },
        )
        .unwrap();
        assert_eq!(o.action, LabelAction::Migrated);
        let after = bytes(&f);
        let copy_off = (1 << 20) + 254 * 4096;
        let allowed = |i: usize| {
            let r = i % (1 << 20);
            (i < 4096 || (copy_off..copy_off + 4096).contains(&i))
                && ((0x0c..0x10).contains(&(r % 4096)) || (0x20..0x40).contains(&(r % 4096)))
        };
        for i in 0..after.len() {
            if after[i] != before[i] {
                assert!(allowed(i), "byte {i} changed");
            }
        }
        let h = DiskHeader::parse(&after[..4096]).unwrap();
        assert!(h.checksum_ok());
        assert_eq!(h.label.label(), Some(l("MIG1")));
        let c = DiskHeader::parse(&after[copy_off..copy_off + 4096]).unwrap();
        assert!(c.checksum_ok());
        assert_eq!(c.label.label(), Some(l("MIG1")));
        // A member: unlabel needs force, and keeps ORCLDISK.
        let e = unlabel_device(f.path(), &l("MIG1"), false, WriteOpen::default()).unwrap_err();
        assert!(matches!(e, LabelOpError::Member { .. }), "{e}");
        unlabel_device(f.path(), &l("MIG1"), true, WriteOpen::default()).unwrap();
        let h = DiskHeader::parse(&bytes(&f)[..4096]).unwrap();
        assert!(h.checksum_ok());
        assert_eq!(h.provstr, "ORCLDISK");
    }
}
