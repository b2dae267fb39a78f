//! Whether a pinned link may be adopted by a starting daemon: only when it is
//! the one a daemon of this build pinned. With the daemon down, root can
//! unpin a link and pin one of its own (a do-nothing program) under the same
//! name; adopting by name would keep that one and report the disks
//! protected. A pinned link is adopted only when
//!
//! - the record the pinning daemon wrote (`/run/asmguard/pins/…`, root-only,
//!   gone at reboot with the pins) names this link and its program by id;
//! - its type and attach point are those of this build's program (the
//!   cgroup and attach type of a cgroup link; the attach type and kernel
//!   function of a tracing link);
//! - its program has the tag (the kernel's hash of the instructions, map
//!   references left out) and the maps of the program this build loads now.
//!
//! Anything else is replaced: this build's program is attached beside it
//! first, then pinned in its place, so the disks are never unfiltered.
//!
//! Not here: loading and attaching ([`super::loader`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use libbpf_rs::query::LinkTypeInfo;
use libbpf_rs::{Link, ProgramAttachType};

use super::programs::Attach;
use asmguard_filter_types::{PinFound, ReplacedPin};

/// What the kernel says of a program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProgFacts {
    pub id: u32,
    pub tag: [u8; 8],
    pub ty: u32,
    /// The kernel function a tracing program was loaded for (0: none, or a
    /// kernel that does not report it).
    pub attach_btf_id: u32,
    pub map_ids: Vec<u32>,
}

/// [`ProgFacts`] of the program behind `fd`.
pub(crate) fn prog_facts(fd: BorrowedFd<'_>) -> Option<ProgFacts> {
    let mut ids = vec![0u32; 64];
    let mut info = libbpf_rs::libbpf_sys::bpf_prog_info {
        nr_map_ids: ids.len() as u32,
        map_ids: ids.as_mut_ptr() as u64,
        ..Default::default()
    };
    let mut len = std::mem::size_of_val(&info) as u32;
    // SAFETY: info is a bpf_prog_info of `len` bytes whose map_ids points at
    // `ids`, a buffer of nr_map_ids u32s that outlives the call.
    let rc = unsafe {
        libbpf_rs::libbpf_sys::bpf_prog_get_info_by_fd(fd.as_raw_fd(), &mut info, &mut len)
    };
    if rc != 0 {
        return None;
    }
    ids.truncate((info.nr_map_ids as usize).min(64));
    ids.sort_unstable();
    Some(ProgFacts {
        id: info.id,
        tag: info.tag,
        ty: info.type_,
        attach_btf_id: info.attach_btf_id,
        map_ids: ids,
    })
}

/// [`ProgFacts`] of the program with kernel id `id`.
fn prog_facts_by_id(id: u32) -> Option<ProgFacts> {
    // SAFETY: bpf_prog_get_fd_by_id takes a plain id and returns a new fd
    // (owned below) or a negative error.
    let fd = unsafe { libbpf_rs::libbpf_sys::bpf_prog_get_fd_by_id(id) };
    if fd < 0 {
        return None;
    }
    // SAFETY: fd was just returned to us and nothing else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    prog_facts(fd.as_fd())
}

/// One pinned link as its daemon recorded it: (link id, program id, tag).
pub(crate) type Entry = (u32, u32, [u8; 8]);

/// Where the record of the links pinned in `pin_dir` is kept: below
/// `/run/asmguard/pins` (root's, 0700; `paths`' run directory), named after
/// the pin directory.
pub(crate) fn record_path(paths: &asmguard_paths::Paths, pin_dir: &Path) -> PathBuf {
    let name: String = pin_dir
        .to_string_lossy()
        .chars()
        .map(|c| if c == '/' { '%' } else { c })
        .collect();
    paths.run_dir().join("pins").join(name)
}

fn hex(tag: &[u8; 8]) -> String {
    tag.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// The record's text: `NAME LINK_ID PROG_ID TAG` a line.
pub(crate) fn format_record(r: &BTreeMap<String, Entry>) -> String {
    r.iter()
        .map(|(n, (l, p, t))| format!("{n} {l} {p} {}\n", hex(t)))
        .collect()
}

/// [`format_record`]'s text read back (malformed lines are left out).
pub(crate) fn parse_record(text: &str) -> BTreeMap<String, Entry> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let name = f.next()?.to_string();
            let link = f.next()?.parse().ok()?;
            let prog = f.next()?.parse().ok()?;
            let t = f.next()?;
            if t.len() != 16 {
                return None;
            }
            let mut tag = [0u8; 8];
            for (i, b) in tag.iter_mut().enumerate() {
                *b = u8::from_str_radix(t.get(2 * i..2 * i + 2)?, 16).ok()?;
            }
            Some((name, (link, prog, tag)))
        })
        .collect()
}

/// The record of `pin_dir`'s links (empty: none, or unreadable).
pub(crate) fn load_record(
    paths: &asmguard_paths::Paths,
    pin_dir: &Path,
) -> BTreeMap<String, Entry> {
    let p = record_path(paths, pin_dir);
    // only a record root alone could have written counts
    let trusted = std::fs::symlink_metadata(&p).is_ok_and(|m| {
        use std::os::unix::fs::MetadataExt;
        m.is_file() && m.uid() == 0 && m.mode() & 0o022 == 0
    });
    if !trusted {
        return BTreeMap::new();
    }
    std::fs::read_to_string(&p)
        .map(|t| parse_record(&t))
        .unwrap_or_default()
}

/// Writes the record of `links` (atomically; root-only directory and file).
pub(crate) fn save_record(
    paths: &asmguard_paths::Paths,
    pin_dir: &Path,
    links: &[(String, Link)],
) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
    let mut r = BTreeMap::new();
    for (name, link) in links {
        let Ok(info) = link.info() else { continue };
        let Some(p) = prog_facts_by_id(info.prog_id) else {
            continue;
        };
        r.insert(name.clone(), (info.id, info.prog_id, p.tag));
    }
    let path = record_path(paths, pin_dir);
    let dir = path.parent().expect("the record has a directory");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    let tmp = dir.join(format!(".{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    {
        use std::io::Write as _;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(format_record(&r).as_bytes())?;
    }
    std::fs::rename(&tmp, &path)
}

/// What pinned links are checked against: the record of the daemon that
/// pinned them, the ids of the pinned maps (those the programs of this
/// build read, loaded now).
#[derive(Debug, Clone, Default)]
pub(crate) struct Known {
    /// Whether to judge at all: only a loader that claims the objects (the
    /// daemon) may read their programs by id where the guardian is
    /// attached; a tool opening the pins beside it adopts them by name and
    /// keeps no record.
    pub judge: bool,
    pub record: BTreeMap<String, Entry>,
    pub maps: std::collections::BTreeSet<u32>,
}

/// Why a pinned link is not adopted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Not what a daemon pinned, or not this build's program where it
    /// belongs: someone else's (an ERROR).
    Foreign(ReplacedPin),
    /// The link a daemon pinned, with an earlier build's program: an
    /// upgrade (replaced quietly).
    Earlier(ReplacedPin),
}

impl Refusal {
    /// Someone else's pin `name`, holding `found`.
    pub(crate) fn foreign(name: &str, found: PinFound) -> Refusal {
        Refusal::Foreign(ReplacedPin {
            pin: name.to_string(),
            found,
        })
    }
}

/// Whether pinned link `link` (pinned as `name`, attached as `attach`) is
/// the one the record names, of this build's program `fresh` (loaded now,
/// with the same maps), at the same place (`cgroup_id`: the cgroup of a
/// cgroup link). `Ok`: adopt it.
pub(crate) fn judge(
    name: &str,
    link: &Link,
    attach: Attach,
    fresh: &ProgFacts,
    known: &Known,
    cgroup_id: Option<u64>,
) -> Result<(), Refusal> {
    let Ok(info) = link.info() else {
        return Err(Refusal::foreign(name, PinFound::NoLinkInfo));
    };
    // The link the daemon pinned (by id): what differs from this build is an
    // earlier build's (an upgrade, replaced quietly); anything else is
    // someone else's.
    let recorded = known.record.get(name).copied();
    let ours = recorded.is_some_and(|(l, p, _)| l == info.id && p == info.prog_id);
    let refuse = |found: PinFound| {
        let r = ReplacedPin {
            pin: name.to_string(),
            found,
        };
        Err(match ours {
            true => Refusal::Earlier(r),
            false => Refusal::Foreign(r),
        })
    };
    let placed = match (&info.info, attach) {
        (LinkTypeInfo::Cgroup(c), Attach::CgroupDevice) => {
            matches!(c.attach_type, ProgramAttachType::CgroupDevice)
                && cgroup_id.is_none_or(|id| id == c.cgroup_id)
        }
        (LinkTypeInfo::Tracing(t), Attach::Lsm | Attach::FmodRet | Attach::TpBtf) => {
            let ty_ok = matches!(
                (attach, &t.attach_type),
                (Attach::Lsm, ProgramAttachType::LsmMac)
                    | (Attach::FmodRet, ProgramAttachType::ModifyReturn)
                    | (Attach::TpBtf, ProgramAttachType::TraceRawTp)
            );
            // (kernels before 5.13 report no target: all zero)
            ty_ok
                && (t.target_btf_id == 0
                    || fresh.attach_btf_id == 0
                    || t.target_btf_id == fresh.attach_btf_id)
        }
        (LinkTypeInfo::RawTracepoint(_), Attach::TpBtf) => true,
        _ => false,
    };
    if !placed {
        let kind = match &info.info {
            LinkTypeInfo::Cgroup(_) => "a cgroup link",
            LinkTypeInfo::Tracing(_) => "a tracing link",
            LinkTypeInfo::RawTracepoint(_) => "a raw tracepoint link",
            _ => "a link of another kind",
        };
        return refuse(PinFound::OtherPlace {
            link: kind.to_string(),
            attach: format!("{attach:?}"),
        });
    }
    let Some(prog) = prog_facts_by_id(info.prog_id) else {
        return Err(Refusal::foreign(
            name,
            PinFound::ProgramUnreadable {
                program: info.prog_id,
            },
        ));
    };
    if prog.ty != fresh.ty
        || (prog.attach_btf_id != 0
            && fresh.attach_btf_id != 0
            && prog.attach_btf_id != fresh.attach_btf_id)
    {
        return refuse(PinFound::OtherProgramType { program: prog.id });
    }
    // the pinned maps it reads, and as many of its own (the object's .bss,
    // one per load) as this build's program
    let pinned = |ids: &[u32]| -> Vec<u32> {
        ids.iter()
            .copied()
            .filter(|i| known.maps.contains(i))
            .collect()
    };
    if pinned(&prog.map_ids) != pinned(&fresh.map_ids) || prog.map_ids.len() != fresh.map_ids.len()
    {
        return refuse(PinFound::OtherMaps {
            program: prog.id,
            reads: prog.map_ids.clone(),
            want: pinned(&fresh.map_ids),
        });
    }
    match recorded {
        _ if ours => {}
        Some((l, p, _)) => {
            return refuse(PinFound::OtherLink {
                link: info.id,
                program: info.prog_id,
                recorded_link: l,
                recorded_program: p,
            })
        }
        None => {
            return refuse(PinFound::Unrecorded {
                link: info.id,
                program: info.prog_id,
            })
        }
    }
    if prog.tag != fresh.tag {
        return refuse(PinFound::EarlierBuild {
            program: prog.id,
            tag: hex(&prog.tag),
            this_tag: hex(&fresh.tag),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_round_trip() {
        let mut r = BTreeMap::new();
        r.insert(
            "ag_file_open".to_string(),
            (12, 40, [0xde, 0xad, 0, 1, 2, 3, 4, 0xff]),
        );
        r.insert("ag_bpf".to_string(), (13, 41, [0; 8]));
        let text = format_record(&r);
        assert!(
            text.contains("ag_file_open 12 40 dead0001020304ff\n"),
            "{text}"
        );
        assert_eq!(parse_record(&text), r);
        // malformed lines count for nothing
        assert!(parse_record("ag_x 1 2 abc\nag_y one 2 0000000000000000\n").is_empty());
    }

    #[test]
    fn record_named_after_the_pin_dir() {
        let paths = asmguard_paths::Paths::under(Path::new("/t"));
        let p = record_path(&paths, Path::new("/sys/fs/bpf/asmguard"));
        assert_eq!(p, Path::new("/t/run/asmguard/pins/%sys%fs%bpf%asmguard"));
    }
}
