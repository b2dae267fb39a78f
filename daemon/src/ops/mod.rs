//! The label operations: `label`, `rename` and `unlabel` as the socket asks
//! for them. Each checks the request against the stored model (the label
//! unique, the disk manageable, not in use, no writer holding it), marks
//! the disk and labels busy, writes through the filter's writer, re-reads
//! the disk (the one `Applier::apply` then protects or releases it), reads
//! the label again [`LABEL_SETTLE`] later (another host writing the same
//! disk at the same moment), and answers only what the disk shows.

pub mod filter;
pub mod reclaim;

use crate::daemon::*;

/// How long after writing a label, rename or unlabel the daemon reads the
/// label sector again before it answers. Another host that read the disk
/// before this write landed and writes its own label next (two nodes
/// labelling one shared disk at once) writes within this time; the second
/// read then finds that label and the request answers `label_conflict`
/// instead of a success the disk no longer shows. Loop devices (their
/// backing file is this host's) are not waited for.
pub const LABEL_SETTLE: Duration = Duration::from_secs(1);

/// The loop driver's major: a loop device is no other host's disk.
const LOOP_MAJOR: u32 = 7;

fn map_op_error(e: LabelOpError) -> ErrorBody {
    let code = match &e {
        LabelOpError::Dev(d) => match d {
            DevError::NotFound(_) => ErrorCode::NotFound,
            DevError::PermissionDenied(_) => ErrorCode::PermissionDenied,
            DevError::WrongType(..) | DevError::TooSmall(..) | DevError::ReadOnly(_) => {
                ErrorCode::NotManageable
            }
            DevError::Busy(..) => ErrorCode::InUse,
            DevError::Io { .. } | DevError::VerifyFailed { .. } => ErrorCode::IoError,
        },
        LabelOpError::Data { .. } => ErrorCode::RefusedData,
        LabelOpError::AsmHeader { .. } => ErrorCode::RefusedAsmHeader,
        LabelOpError::Labelled { .. } => ErrorCode::RefusedLabelled,
        LabelOpError::Member { .. } => ErrorCode::RefusedMember,
        LabelOpError::NotLabelled { .. } => ErrorCode::NotFound,
        LabelOpError::Unreadable(_) => ErrorCode::IoError,
    };
    err(code, e.to_string())
}

/// The answer to a label operation: what was done, where, and which byte ranges
/// were written (`offset+length`).
fn label_result(out: labelling::Outcome, label: &Label, device: String) -> LabelResult {
    LabelResult {
        action: out.action,
        label: label.to_string(),
        device,
        erased: out.erased,
        written: out
            .written
            .iter()
            .map(|(o, l)| format!("{o}+{l}"))
            .collect(),
    }
}

fn parse_label(s: &str) -> Result<Label, ErrorBody> {
    Label::new(s).map_err(|e| err(ErrorCode::InvalidLabel, e.to_string()))
}

/// The kernel name of a device path given by a user.
fn resolve(d: &Daemon, device: &str) -> Result<SysDev, ErrorBody> {
    let p = Path::new(device);
    let meta = std::fs::metadata(p).map_err(|e| {
        err(
            ErrorCode::NotFound,
            format!(
                "{device}: {} (check the path; `lsblk` lists block devices)",
                e
            ),
        )
    })?;
    if !meta.file_type().is_block_device() {
        return Err(err(
            ErrorCode::NotManageable,
            format!("{device}: is not a block device (asmguardd labels block devices only)"),
        ));
    }
    let dev = KernelDev::from_dev_t(meta.rdev())
        .map_err(|e| err(ErrorCode::NotManageable, format!("{device}: {e}")))?;
    let name = sysfs::name_of(&d.site.paths.sys, dev).ok_or_else(|| {
        err(
            ErrorCode::NotFound,
            format!("{device}: block device {dev} is not in sysfs"),
        )
    })?;
    sysfs::read(&d.site.paths, &name)
        .map_err(|e| err(ErrorCode::NotFound, format!("{device}: {name}: {e}")))
}

fn after_write(d: &Daemon, sd: &SysDev) {
    let mut names = BTreeSet::new();
    names.insert(sd.name.clone());
    names.extend(sd.slaves.iter().cloned());
    d.scans.refresh(d, &names);
    // Let udev re-probe (stable path) and every listener know.
    d.submit(Input::Relink(sd.name.clone()));
}

pub fn label(d: &Daemon, a: &LabelArgs) -> Result<LabelResult, ErrorBody> {
    let label = parse_label(&a.label)?;
    let sd = resolve(d, &a.device)?;
    let shown = sd.display_path();
    if !d
        .applied()
        .world
        .conf
        .rules
        .included(&sd.name, sd.dm_name.as_deref())
    {
        return Err(err(
            ErrorCode::NotManageable,
            format!(
                "{shown}: is excluded by devices.include/devices.exclude in {}: asmguardd does not manage it",
                d.site.cfg_source
            ),
        ));
    }
    let what = format!("label {label} on {shown}");
    let claim = d
        .inflight
        .claim(vec![Busy::Dev(sd.dev), Busy::Label(label.clone())], &what)?;
    {
        let s = d.applied();
        let others: Vec<String> = s
            .world
            .model
            .disks
            .iter()
            .filter(|d| d.label == label && !d.paths.iter().any(|p| p.node.name == sd.name))
            .map(|d| d.top.shown.clone())
            .collect();
        if !others.is_empty() {
            return Err(err(
                ErrorCode::LabelConflict,
                format!(
                    "{what}: label {label} is already used by {}: labels must be unique",
                    others.join(", ")
                ),
            ));
        }
    }
    if let Some(why) = sysfs::in_use(&d.site.paths, &sd) {
        return Err(err(
            ErrorCode::InUse,
            format!("{shown}: is in use: {why}: refusing to label it"),
        ));
    }
    if !a.force {
        // A writer's descriptor outlives the label: on the open-time-only
        // backend nothing stops it from overwriting the new label.
        let w = writers_of(&d.site.paths, &sd);
        if let Some(o) = w.first() {
            return Err(err(
                ErrorCode::InUse,
                format!(
                    "{shown}: is open for writing by {o}{}: a write through it could overwrite the label; stop that process and retry, or label with --force",
                    match w.len() {
                        1 => String::new(),
                        n => format!(" and {} more", n - 1),
                    }
                ),
            ));
        }
    }
    let opts = LabelOptions {
        force: a.force,
        migrate: a.migrate,
        open: write_open(d, &sd),
    };
    // A new label starts in the configured mode, whatever was set for
    // the label this disk carried before or for another disk of this name.
    let old = d
        .applied()
        .world
        .model
        .disks
        .iter()
        .find(|d| d.paths.iter().any(|p| p.node.name == sd.name))
        .map(|d| d.label.clone());
    let out = write_label(
        d,
        &sd,
        claim,
        Some(&label),
        |p, _| labelling::label_device(p, &label, opts),
        || {
            let mut ended = vec![label.to_string()];
            ended.extend(old.as_ref().map(|o| o.to_string()));
            d.submit(Input::Forget(ended));
        },
    )?;
    tracing::info!(
        "{shown}: {} {label} (force={}, migrate={})",
        out.action,
        a.force,
        a.migrate
    );
    check_protected(d, &label, &shown)?;
    Ok(label_result(out, &label, shown))
}

/// After a label write (and its claims' wait, `sync_claims`): the disk's
/// devices are in the filter's managed set, and its exclusive claim is
/// held when its mode asks for one; else an error saying which is
/// missing (the label is written: `label` never answers success for a
/// disk the kernel's consumers can still take).
fn check_protected(d: &Daemon, label: &Label, shown: &str) -> Result<(), ErrorBody> {
    if !d.filter.holds(label.as_str()) {
        return Err(err(
            ErrorCode::Internal,
            format!(
                "{shown}: labelled {label}, but the write filter's device maps do not hold \
                 it (the journal says why): run `asmguardctl scan`, and see `asmguardctl status`"
            ),
        ));
    }
    let a = d.applied();
    let wanted = model::claims(&a.world.model.disks);
    if let Some(w) = wanted
        .iter()
        .find(|w| w.label == label.as_str() && !a.claimed.contains(&w.dev))
    {
        return Err(err(
            ErrorCode::InUse,
            format!(
                "{shown}: labelled {label}, but the exclusive claim on {} could not be taken \
                 within {} s: another exclusive opener holds it (mounted, a dm/md member, \
                 swap): mount, swapon and device-mapper are not kept off it until it is \
                 freed and `asmguardctl scan` runs",
                w.path.display(),
                CLAIM_WAIT.as_secs()
            ),
        ));
    }
    Ok(())
}

/// Runs one label write on `sd` (its node, and whether the daemon's exclusive
/// claim holds it) under `claim`. After a good write, `written` tells the
/// filter what became of the disk's mode, then the disk is re-read; the
/// exclusive claims follow the new state once the write is over (they are
/// frozen while the disk is being written).
/// `expect` is the label the disk carries when the write stands (`None`:
/// no label); a write is confirmed by a second read [`LABEL_SETTLE`] later.
fn write_label(
    d: &Daemon,
    sd: &SysDev,
    claim: Claim<'_>,
    expect: Option<&Label>,
    write: impl FnOnce(&Path, WriteOpen) -> Result<labelling::Outcome, LabelOpError>,
    written: impl FnOnce(),
) -> Result<labelling::Outcome, ErrorBody> {
    let raw = write(&sd.dev_path(), write_open(d, sd));
    // the read-back found other bytes: another host may have written the
    // same sector at the same moment; the settled disk says which
    let raced = matches!(&raw, Err(LabelOpError::Dev(DevError::VerifyFailed { .. })));
    let mut out = raw.map_err(map_op_error);
    if out.is_ok() {
        written();
        after_write(d, sd);
    }
    if raced || matches!(&out, Ok(o) if !o.written.is_empty()) {
        if let Err(e) = confirm(d, sd, expect) {
            out = Err(e);
        }
    }
    drop(claim);
    // the claims follow the disk's new state now that it is not written
    d.submit(Input::Again);
    out
}

/// Reads the label sector of `sd` again [`LABEL_SETTLE`] after a write:
/// another label there means another host wrote the same disk at the same
/// time, last. The disk is re-read (this node lists what the disk carries,
/// as every other node does) and the request answers `label_conflict`
/// naming both, never a success the disk does not show.
fn confirm(d: &Daemon, sd: &SysDev, expect: Option<&Label>) -> Result<(), ErrorBody> {
    // a loop device is a file of this host: no other host writes it
    if sd.dev.major() == LOOP_MAJOR {
        return Ok(());
    }
    std::thread::sleep(LABEL_SETTLE);
    let found = match discovery::reread(sd) {
        Some(Ok(r)) => r.state,
        Some(Err(e)) => {
            tracing::warn!(
                "{}: could not read the label again after writing it: {e}",
                sd.display_path()
            );
            return Ok(());
        }
        None => return Ok(()),
    };
    if found.label().as_ref() == expect {
        return Ok(());
    }
    after_write(d, sd);
    let shown = sd.display_path();
    let wrote = expect.map_or_else(|| "no label".to_string(), |l| format!("label {l}"));
    let now = match found.label() {
        Some(l) => format!("label {l}"),
        None => "no label".into(),
    };
    let m = format!(
        "{shown}: wrote {wrote}, but {} s later the disk carries {now}: another host \
         wrote the same disk at the same time, after this write; every node lists \
         {now} now (agree with the other host's administrator, then label again)",
        LABEL_SETTLE.as_secs()
    );
    tracing::error!("{m}");
    Err(err(ErrorCode::LabelConflict, m))
}

/// How the daemon opens `sd` for writing: without `O_EXCL` when its own
/// claim holds it, by its writer.
fn write_open(d: &Daemon, sd: &SysDev) -> WriteOpen {
    WriteOpen {
        held: d.applied().claimed.contains(&sd.dev),
        writer: d.writer,
    }
}

/// The top device of the disk with `label` (not in conflict).
fn disk_top(d: &Daemon, label: &Label, what: &str) -> Result<SysDev, ErrorBody> {
    let s = d.applied();
    if let Some(c) = s
        .world
        .model
        .conflicts
        .get(label.as_str())
        .filter(|_| !s.world.model.kept.contains_key(label.as_str()))
    {
        return Err(err(
            ErrorCode::LabelConflict,
            format!(
                "{what}: label {label} is on more than one disk ({}): relabel one of them with `asmguardctl label NEWLABEL DEVICE --force`",
                c.join(", ")
            ),
        ));
    }
    let disk = s.world.model.disk(label.as_str()).ok_or_else(|| {
        err(
            ErrorCode::NotFound,
            format!("{what}: no disk is labelled {label} (`asmguardctl lsdsk` lists them; `asmguardctl scan` re-reads devices)"),
        )
    })?;
    let top = disk.top.name.clone();
    d.scans
        .observed()
        .devices
        .get(&top)
        .map(|o| o.sys.clone())
        .ok_or_else(|| {
            err(
                ErrorCode::NotFound,
                format!("{what}: device {} is gone", disk.top.shown),
            )
        })
}

pub fn unlabel(d: &Daemon, a: &UnlabelArgs) -> Result<LabelResult, ErrorBody> {
    let label = parse_label(&a.label)?;
    let what = format!("unlabel {label}");
    let sd = disk_top(d, &label, &what)?;
    let claim = d
        .inflight
        .claim(vec![Busy::Dev(sd.dev), Busy::Label(label.clone())], &what)?;
    let shown = sd.display_path();
    let out = write_label(
        d,
        &sd,
        claim,
        None,
        |p, held| labelling::unlabel_device(p, &label, a.force, held),
        || {
            d.submit(Input::Forget(vec![label.to_string()]));
        },
    )?;
    tracing::info!("{shown}: unlabelled {label}");
    Ok(label_result(out, &label, shown))
}

pub fn rename(d: &Daemon, a: &RenameArgs) -> Result<LabelResult, ErrorBody> {
    let old = parse_label(&a.old)?;
    let new = parse_label(&a.new)?;
    let what = format!("rename {old} to {new}");
    let sd = disk_top(d, &old, &what)?;
    let claim = d.inflight.claim(
        vec![
            Busy::Dev(sd.dev),
            Busy::Label(old.clone()),
            Busy::Label(new.clone()),
        ],
        &what,
    )?;
    if old == new {
        return Ok(LabelResult {
            action: asmguard_proto::LabelAction::Unchanged,
            label: new.to_string(),
            device: sd.display_path(),
            erased: vec![],
            written: vec![],
        });
    }
    {
        let s = d.applied();
        if let Some(d) = s.world.model.disks.iter().find(|d| d.label == new) {
            let dev = &d.top.shown;
            return Err(err(
                ErrorCode::LabelConflict,
                format!("{what}: label {new} is already used by {dev}: labels must be unique"),
            ));
        }
    }
    let shown = sd.display_path();
    let out = write_label(
        d,
        &sd,
        claim,
        Some(&new),
        |p, held| labelling::rename_device(p, &old, &new, held),
        || {
            d.submit(Input::Renamed {
                old: old.to_string(),
                new: new.to_string(),
            });
        },
    )?;
    tracing::info!("{shown}: renamed {old} to {new}");
    Ok(label_result(out, &new, shown))
}

/// Every process but this one holding `sd` open for writing: through the
/// device itself, a path below it (multipath) or the disk it is a partition of.
fn writers_of(
    paths: &asmguard_paths::Paths,
    sd: &SysDev,
) -> Vec<asmguard_devices::holders::Opener> {
    let mut devs = vec![sd.dev];
    for n in sd.slaves.iter().chain(sd.parent.iter()) {
        if let Ok(o) = sysfs::read(paths, n) {
            devs.push(o.dev);
        }
    }
    asmguard_devices::holders::writers(&paths.proc, &devs, std::process::id())
}

impl asmguard_proto::serve::Label for Daemon {
    fn label(&self, a: &LabelArgs, _: &str) -> Result<impl serde::Serialize, ErrorBody> {
        label(self, a)
    }
}

impl asmguard_proto::serve::Unlabel for Daemon {
    fn unlabel(&self, a: &UnlabelArgs, _: &str) -> Result<impl serde::Serialize, ErrorBody> {
        unlabel(self, a)
    }
}

impl asmguard_proto::serve::Rename for Daemon {
    fn rename(&self, a: &RenameArgs, _: &str) -> Result<impl serde::Serialize, ErrorBody> {
        rename(self, a)
    }
}
