//! `asmguardctl inspect`: offline, read-only view of a device or image.

use crate::cli::InspectArgs;
use crate::exit::{CliError, FAILED};
use crate::size::human;
use asmguard_devices::{Device, DeviceKind};
use asmguard_format::header::DiskHeader;
use asmguard_format::label::{self, LabelState};
use asmguard_format::probe::{self, Signature, SignatureKind};
use serde::Serialize;

/// What `inspect --json` prints.
#[derive(Debug, Serialize)]
pub struct Report {
    pub path: String,
    pub kind: DeviceKind,
    pub size_bytes: u64,
    pub logical_block_size: Option<u32>,
    pub physical_block_size: Option<u32>,
    pub device_number: Option<String>,
    pub label: LabelState,
    pub disk_header: Option<DiskHeader>,
    pub signatures: Vec<Signature>,
    /// blank | asm_label | asm_disk_header | foreign_data
    pub verdict: &'static str,
}

pub fn report(dev: &Device) -> Result<Report, CliError> {
    dev.require_size(asmguard_devices::blockdev::MIN_SIZE)?;
    let (head, tail) = dev.read_probe_regions()?;
    if head.len() < 4096 {
        return Err(CliError::new(
            FAILED,
            format!(
                "{}: only {} bytes could be read from the start (unreadable device?)",
                dev.path.display(),
                head.len()
            ),
        ));
    }
    let sigs = probe::probe(&head, &tail, dev.size);
    let header = DiskHeader::parse(&head[..4096.max(dev.logical_block_size as usize)]);
    let verdict = if !probe::foreign(&sigs).is_empty() {
        "foreign_data"
    } else if header.is_some() {
        "asm_disk_header"
    } else if sigs
        .iter()
        .any(|s| matches!(s.kind, SignatureKind::AsmLabel { .. }))
    {
        "asm_label"
    } else {
        "blank"
    };
    let block = dev.kind == DeviceKind::BlockDevice;
    Ok(Report {
        path: dev.path.display().to_string(),
        kind: dev.kind,
        size_bytes: dev.size,
        logical_block_size: block.then_some(dev.logical_block_size),
        physical_block_size: block.then_some(dev.physical_block_size),
        device_number: dev.rdev.map(|d| d.to_string()),
        label: label::read(&head),
        disk_header: header,
        signatures: sigs,
        verdict,
    })
}

pub fn run(args: &InspectArgs) -> Result<(), CliError> {
    let dev = match Device::open_read(&args.path) {
        // Image files on filesystems without O_DIRECT are read buffered anyway.
        Err(asmguard_devices::DevError::Io { .. }) => Device::open_buffered(&args.path)?,
        r => r?,
    };
    let r = report(&dev)?;
    if args.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&r).map_err(|e| CliError::new(FAILED, e.to_string()))?
        );
    } else {
        out!("{}", text(&r));
    }
    Ok(())
}

pub fn label_text(l: &LabelState) -> String {
    match l {
        LabelState::Unmarked => "none".into(),
        LabelState::Cleared => "cleared (ORCLCLRD)".into(),
        LabelState::Marked { label: None, .. } => "ORCLDISK, no label".into(),
        LabelState::Marked {
            raw, valid: true, ..
        } => format!("{raw} (ORCLDISK)"),
        LabelState::Marked { raw, .. } => format!("{raw:?} (ORCLDISK, not a valid label)"),
    }
}

pub fn text(r: &Report) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let kind = match r.kind {
        DeviceKind::BlockDevice => "block device",
        DeviceKind::ImageFile => "image file",
    };
    let _ = writeln!(s, "path:        {}", r.path);
    let _ = writeln!(s, "kind:        {kind}");
    let _ = writeln!(
        s,
        "size:        {} ({} bytes)",
        human(r.size_bytes),
        r.size_bytes
    );
    if let (Some(l), Some(p)) = (r.logical_block_size, r.physical_block_size) {
        let _ = writeln!(s, "sectors:     logical {l}, physical {p}");
    }
    if let Some(d) = &r.device_number {
        let _ = writeln!(s, "device:      {d}");
    }
    let _ = writeln!(s, "label:       {}", label_text(&r.label));
    let _ = writeln!(s, "verdict:     {}", r.verdict);
    if r.signatures.is_empty() {
        let _ = writeln!(s, "signatures:  none");
    }
    for sig in &r.signatures {
        let detail = match &sig.kind {
            SignatureKind::AsmDiskHeader {
                group,
                disk,
                status,
                checksum_ok,
            } => format!(
                " (group {group}, disk {disk}, {status}, checksum {})",
                if *checksum_ok { "ok" } else { "BAD" }
            ),
            SignatureKind::MdRaid { version } => format!(" (metadata {version})"),
            SignatureKind::Luks { version } => format!(" (version {version})"),
            SignatureKind::AsmLabel { label: Some(l) } => format!(" (label {l})"),
            _ => String::new(),
        };
        let _ = writeln!(
            s,
            "signature:   {} at byte {}{detail}",
            sig.kind.name(),
            sig.offset
        );
    }
    if let Some(h) = &r.disk_header {
        let _ = writeln!(s, "ASM disk header (kfed names):");
        let checksum = match h.checksum {
            asmguard_format::kfbh::Checksum::Valid => "valid".to_string(),
            asmguard_format::kfbh::Checksum::Invalid { xor } => {
                format!("INVALID (block XOR 0x{xor:08x})")
            }
            asmguard_format::kfbh::Checksum::Incomplete { have, block_size } => {
                format!("not verifiable ({have} of {block_size} bytes)")
            }
        };
        let e = h.kfbh.endian;
        let rows: Vec<(&str, String)> = vec![
            ("kfbh.endian", format!("{e:?}").to_lowercase()),
            ("kfbh.hard", format!("0x{:02x}", h.kfbh.hard)),
            ("kfbh.type", h.kfbh.block_type.kfed_name()),
            ("kfbh.datfmt", h.kfbh.datfmt.to_string()),
            ("kfbh.block.blk", h.kfbh.blk.to_string()),
            ("kfbh.block.obj", format!("0x{:08x}", h.kfbh.obj)),
            ("kfbh.check", format!("0x{:08x} ({checksum})", h.kfbh.check)),
            ("kfbh.fcn.base", h.kfbh.fcn_base.to_string()),
            ("kfdhdb.driver.provstr", h.provstr.clone()),
            ("kfdhdb.driver.reserved", label_text(&h.label)),
            (
                "kfdhdb.compat",
                format!("0x{:08x} ({})", h.compat, h.compat_str),
            ),
            ("kfdhdb.dsknum", h.dsknum.to_string()),
            (
                "kfdhdb.grptyp",
                format!("{:?}", h.redundancy).to_uppercase(),
            ),
            ("kfdhdb.hdrsts", h.status.name()),
            ("kfdhdb.dskname", h.dskname.clone()),
            ("kfdhdb.grpname", h.grpname.clone()),
            ("kfdhdb.fgname", h.fgname.clone()),
            ("kfdhdb.capname", h.capname.clone()),
            ("kfdhdb.crestmp", h.created.display()),
            ("kfdhdb.mntstmp", h.mounted.display()),
            ("kfdhdb.secsize", h.secsize.to_string()),
            ("kfdhdb.blksize", h.blksize.to_string()),
            ("kfdhdb.ausize", h.ausize.to_string()),
            ("kfdhdb.mfact", h.mfact.to_string()),
            ("kfdhdb.dsksize", format!("{} AUs", h.dsksize)),
            ("kfdhdb.pmcnt", h.pmcnt.to_string()),
            ("kfdhdb.fstlocn", h.fstlocn.to_string()),
            ("kfdhdb.altlocn", h.altlocn.to_string()),
            ("kfdhdb.f1b1locn", h.f1b1locn.to_string()),
            (
                "kfdhdb.dbcompat",
                format!(
                    "0x{:08x} ({})",
                    h.dbcompat,
                    asmguard_format::header::compat_string(h.dbcompat)
                ),
            ),
            ("kfdhdb.grpstmp", h.grpstmp.display()),
            ("kfdhdb.vfstart", h.vfstart.to_string()),
            ("kfdhdb.vfend", h.vfend.to_string()),
            ("kfdhdb.spfile", h.spfile.to_string()),
        ];
        for (k, v) in rows {
            let _ = writeln!(s, "  {k:<24} {v}");
        }
        if h.mbr_signature_at_510 {
            let _ = writeln!(
                s,
                "  WARNING: an MBR signature (0x55AA) sits at byte 510 of the ASM header"
            );
        }
    }
    s
}
