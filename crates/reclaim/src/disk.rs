//! Reading a disk for a plan and for the watch (uncached reads through
//! `asmguard-devices`), and opening it for the ioctls.

use crate::caps::{self, Caps, Method};
use crate::plan::{self, AtScan, Layout, Limits, Plan};
use crate::safety::Stamps;
use asmguard_devices::Device;
use asmguard_format::header::{off, DiskHeader};
use serde::Serialize;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Everything known about one disk before any write.
#[derive(Debug, Clone, Serialize)]
pub struct DiskPlan {
    pub device: String,
    pub device_size: u64,
    pub disk_group: String,
    pub asm_disk: String,
    pub method: Method,
    pub caps: Caps,
    pub limits: Limits,
    pub layout: Layout,
    pub scan: AtScan,
    pub plan: Plan,
    /// Seconds the AT read and plan took.
    pub scan_seconds: f64,
    /// The heartbeat block and mount stamp as read before the allocation
    /// table: the stop rule compares them before every chunk.
    #[serde(skip_serializing)]
    pub baseline: Stamps,
    /// `--above-size`: the plan is everything above `dsksize`.
    pub above_size: bool,
}

/// Why a disk cannot be planned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrepareError {
    /// The disk cannot be reclaimed as it is: its queue limits refuse the
    /// method, or its header or allocation table does not allow a plan.
    Unusable(String),
    /// Reading sysfs or the device failed.
    Io(String),
}

impl std::fmt::Display for PrepareError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PrepareError::Unusable(m) | PrepareError::Io(m) => f.write_str(m),
        }
    }
}

/// What both plans start from: the device's discard capabilities for
/// `method`, the device open for reading, its ASM header, the layout it gives,
/// and the stamps the stop rule compares with.
struct Opened {
    caps: Caps,
    limits: Limits,
    d: Device,
    h: DiskHeader,
    l: Layout,
    baseline: Stamps,
}

/// Opens `dev` for a plan; `no_header` says what a disk without an ASM header
/// lacks for this plan.
fn open(
    dev: &Path,
    sys: &Path,
    name: &str,
    method: Method,
    no_header: &str,
) -> Result<Opened, PrepareError> {
    use PrepareError::{Io, Unusable};
    let caps = caps::read(sys, name).map_err(Io)?;
    let limits = caps::check(&caps, method).map_err(Unusable)?;
    let d = Device::open_read(dev).map_err(|e| Io(e.to_string()))?;
    let b0 = d.read_block0().map_err(|e| Io(e.to_string()))?;
    let h = DiskHeader::parse(&b0).ok_or_else(|| {
        Unusable(format!(
            "{}: holds no ASM disk header: {no_header}",
            dev.display()
        ))
    })?;
    let l = Layout::from_header(&h).map_err(|e| Unusable(format!("{}: {e}", dev.display())))?;
    let baseline = stamps(&d, &l).map_err(Io)?;
    Ok(Opened {
        caps,
        limits,
        d,
        h,
        l,
        baseline,
    })
}

/// Read the header and AU 0 of `dev` (kernel name `name` under `sys`), check the
/// device's capabilities for `method` and plan.
pub fn prepare(
    dev: &Path,
    sys: &Path,
    name: &str,
    method: Method,
) -> Result<DiskPlan, PrepareError> {
    let no_header = "there is no allocation table to read";
    prepare_with(dev, sys, name, method, no_header, false, |o| {
        // AU 0 must read; a later stride that does not stays in use.
        o.d.read_at(0, o.l.blksize as usize)
            .map_err(|e| PrepareError::Io(e.to_string()))?;
        let mut read = |off: u64, n: usize| o.d.read_at(off, n).map_err(|e| e.to_string());
        plan::plan_disk_with(&o.h, &mut read, o.d.size, &o.limits, method.as_str())
            .map_err(|e| PrepareError::Unusable(format!("{}: {e}", dev.display())))
    })
}

/// The plan above the ASM size: every byte from `dsksize` AUs to the end of
/// the device (ASM never allocates there), aligned; the disk header must be
/// valid. Nothing else is read: the disk group may be mounted.
pub fn prepare_above(
    dev: &Path,
    sys: &Path,
    name: &str,
    method: Method,
) -> Result<DiskPlan, PrepareError> {
    prepare_with(
        dev,
        sys,
        name,
        method,
        "its ASM size is unknown",
        true,
        |o| {
            let (scan, plan) = plan::plan_above(&o.l, o.d.size, &o.limits, method.as_str())
                .map_err(|e| PrepareError::Unusable(format!("{}: {e}", dev.display())))?;
            Ok((o.l, scan, plan))
        },
    )
}

/// Both plans: [`open`] the disk, plan with `make`, and describe the result.
fn prepare_with(
    dev: &Path,
    sys: &Path,
    name: &str,
    method: Method,
    no_header: &str,
    above_size: bool,
    make: impl FnOnce(&Opened) -> Result<(Layout, AtScan, Plan), PrepareError>,
) -> Result<DiskPlan, PrepareError> {
    let t = std::time::Instant::now();
    let o = open(dev, sys, name, method, no_header)?;
    let (layout, scan, plan) = make(&o)?;
    Ok(DiskPlan {
        device: dev.display().to_string(),
        device_size: o.d.size,
        disk_group: o.h.grpname.clone(),
        asm_disk: o.h.dskname.clone(),
        method,
        caps: o.caps,
        limits: o.limits,
        layout,
        scan,
        plan,
        scan_seconds: t.elapsed().as_secs_f64(),
        baseline: o.baseline,
        above_size,
    })
}

/// The mount stamp and heartbeat block, read with `O_DIRECT`.
pub fn stamps(d: &Device, l: &Layout) -> Result<Stamps, String> {
    let b0 = d.read_block0().map_err(|e| e.to_string())?;
    let h = DiskHeader::parse(&b0)
        .ok_or_else(|| format!("{}: the ASM disk header is gone", d.path.display()))?;
    let e = h.kfbh.endian;
    let hb = d
        .read_at(l.heartbeat_offset(), l.blksize as usize)
        .map_err(|e| e.to_string())?;
    if hb.len() != l.blksize as usize {
        return Err(format!(
            "{}: the heartbeat block could not be read",
            d.path.display()
        ));
    }
    Ok(Stamps {
        mntstmp: vec![(e.u32(&b0, off::MNTSTMP), e.u32(&b0, off::MNTSTMP + 4))],
        heartbeat: hb,
    })
}

/// Open the device for the ioctls (read-write; `O_EXCL` is not used so that the
/// device-mapper or multipath holders above a path do not make it fail: the
/// safety checks decide).
pub fn open_rw(dev: &Path, writer: asmguard_devices::writer::Writer) -> std::io::Result<File> {
    writer.open(
        OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_CLOEXEC),
        dev,
    )
}
