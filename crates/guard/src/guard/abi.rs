//! What `bpf/guard.h` defines, seen from Rust: the map value and key layouts,
//! the event record, the mode codes and the stats indices.
//!
//! `guard.h` is the single source. The map key/value types come from the
//! skeleton libbpf-cargo generates from the object's BTF ([`AgDisk`],
//! [`AgExeKey`]); the event record travels through a ring buffer (no map
//! type), so the skeleton has no type for it: [`AgEvent`] mirrors it, and the
//! tests check every field's `offset_of!` against the object's BTF and the
//! codes against the header's `#define`s. Hook codes live in the hook table ([`super::hooks`]).
//!
//! Not here: decoding records (that is [`super::events`]), map access
//! (that is [`super::loader`]).

use std::mem::{offset_of, size_of};

use super::hooks::HOOKS;
use super::types::{DevKey, ExeId, Mode};

/// The skeleton of `bpf/guard.bpf.c`, for its BTF-derived types.
#[allow(missing_docs, dead_code, clippy::all, clippy::pedantic)]
mod skel {
    include!(concat!(env!("OUT_DIR"), "/guard.skel.rs"));
}

/// `struct ag_disk`: value of `ag_blk` / `ag_chr` (key: kernel dev_t, u32).
pub type AgDisk = skel::types::ag_disk;
/// `struct ag_exe_key`: key of `ag_exes`.
pub type AgExeKey = skel::types::ag_exe_key;

/// `struct ag_rules`: `ag_rules[0]` (bpf/rules.h).
pub type AgRules = skel::types::ag_rules;
/// `struct ag_exe`: value of `ag_rule_exes` (key: [`AgExeKey`]).
pub type AgExe = skel::types::ag_exe;
/// `struct ag_place`: value of `ag_places` (key: cgroup id, u64).
pub type AgPlace = skel::types::ag_place;
/// `struct ag_self`: `ag_self[0]`, the daemon's own process.
pub type AgSelf = skel::types::ag_self;
/// `struct ag_guardian`: `ag_guardian[0]`, the daemon that alone may touch
/// the filter's objects (bpf/guardian.h).
pub type AgGuardian = skel::types::ag_guardian;
/// `struct ag_obj_key`: key of `ag_guarded` (bpf/guardian.h).
pub type AgObjKey = skel::types::ag_obj_key;
/// `AG_TOOL_QUERY`, `AG_TOOL_KOPEN` (`struct ag_exe`'s `tools`).
pub const TOOL_QUERY: u32 = 1;
/// See [`TOOL_QUERY`].
pub const TOOL_KOPEN: u32 = 2;

/// Writes `v` at `off` of `buf` (native endian).
fn put(buf: &mut [u8], off: usize, v: &[u8]) {
    buf[off..][..v.len()].copy_from_slice(v);
}

/// The value of `ag_rules[0]`: (active, need_who, need_exe, need_place).
pub fn rules_value(active: u64, who: u64, exe: u64, place: u64) -> [u8; size_of::<AgRules>()] {
    let mut v = [0u8; size_of::<AgRules>()];
    put(&mut v, offset_of!(AgRules, active), &active.to_ne_bytes());
    put(&mut v, offset_of!(AgRules, need_who), &who.to_ne_bytes());
    put(&mut v, offset_of!(AgRules, need_exe), &exe.to_ne_bytes());
    put(
        &mut v,
        offset_of!(AgRules, need_place),
        &place.to_ne_bytes(),
    );
    v
}

/// (active, need_who, need_exe, need_place) of an `ag_rules` value.
pub fn parse_rules_value(v: &[u8]) -> Option<(u64, u64, u64, u64)> {
    Some((
        read_u64(v, offset_of!(AgRules, active))?,
        read_u64(v, offset_of!(AgRules, need_who))?,
        read_u64(v, offset_of!(AgRules, need_exe))?,
        read_u64(v, offset_of!(AgRules, need_place))?,
    ))
}

/// The value of an `ag_rule_exes` entry.
pub fn exe_value(rules: u64, tools: u32) -> [u8; size_of::<AgExe>()] {
    let mut v = [0u8; size_of::<AgExe>()];
    put(&mut v, offset_of!(AgExe, rules), &rules.to_ne_bytes());
    put(&mut v, offset_of!(AgExe, tools), &tools.to_ne_bytes());
    v
}

/// (rules, tools) of an `ag_rule_exes` value.
pub fn parse_exe_value(v: &[u8]) -> Option<(u64, u32)> {
    Some((
        read_u64(v, offset_of!(AgExe, rules))?,
        read_u32(v, offset_of!(AgExe, tools))?,
    ))
}

/// The value of an `ag_places` entry.
pub fn place_value(rules: u64, ctr_id: u32) -> [u8; size_of::<AgPlace>()] {
    let mut v = [0u8; size_of::<AgPlace>()];
    put(&mut v, offset_of!(AgPlace, rules), &rules.to_ne_bytes());
    put(&mut v, offset_of!(AgPlace, ctr_id), &ctr_id.to_ne_bytes());
    v
}

/// (rules, ctr_id) of an `ag_places` value.
pub fn parse_place_value(v: &[u8]) -> Option<(u64, u32)> {
    Some((
        read_u64(v, offset_of!(AgPlace, rules))?,
        read_u32(v, offset_of!(AgPlace, ctr_id))?,
    ))
}

/// The value of `ag_self[0]`.
pub fn self_value(tgid: u32, start_ticks: u64) -> [u8; size_of::<AgSelf>()] {
    let mut v = [0u8; size_of::<AgSelf>()];
    put(&mut v, offset_of!(AgSelf, tgid), &tgid.to_ne_bytes());
    put(
        &mut v,
        offset_of!(AgSelf, start_ticks),
        &start_ticks.to_ne_bytes(),
    );
    v
}

/// `struct ag_event`: one record of the `ag_events` ring buffer.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
#[allow(missing_docs)]
pub struct AgEvent {
    pub ts_ns: u64,
    pub exe_ino: u64,
    pub exe_dev: u32,
    pub pid: u32,
    pub tid: u32,
    pub uid: u32,
    pub euid: u32,
    pub fsuid: u32,
    pub egid: u32,
    pub dev: u32,
    pub disk_id: u32,
    pub hook: u32,
    pub op: u32,
    pub mode: u32,
    pub flags: u32,
    /// The container the task is in (`struct ag_ctr`'s id); 0: none.
    pub ctr_id: u32,
    pub comm: [u8; 16],
}

impl AgEvent {
    /// The record at the start of `b` (a ring-buffer record), `None` if short.
    pub fn read(b: &[u8]) -> Option<AgEvent> {
        if b.len() < EVENT_SIZE {
            return None;
        }
        let p = b.as_ptr().cast::<AgEvent>();
        // `b` holds at least `size_of::<AgEvent>()` bytes the kernel wrote as
        // a `struct ag_event` (layout checked against the object's BTF in the
        // tests); `AgEvent` is `repr(C)` of integers and bytes, so every bit
        // pattern is a value.
        // SAFETY: `p` points at EVENT_SIZE readable bytes; read_unaligned needs no alignment.
        let ev = unsafe { std::ptr::read_unaligned(p) };
        Some(ev)
    }
}

/// Size of `struct ag_event`.
pub const EVENT_SIZE: usize = size_of::<AgEvent>();
const _: () = assert!(EVENT_SIZE == 88);
const _: () = assert!(offset_of!(AgEvent, exe_dev) == 16);
const _: () = assert!(offset_of!(AgEvent, dev) == 44);
const _: () = assert!(offset_of!(AgEvent, flags) == 64);
const _: () = assert!(offset_of!(AgEvent, comm) == 72);

/// `AG_EV_CHR`: the event's device is a character device.
pub const EV_CHR: u32 = 1;
/// `AG_EV_CMD`: the filter read the passthrough command (opcode in flags
/// bits 8-15, SCSI service action in 16-23).
pub const EV_CMD: u32 = 2;

/// `AG_NHOOKS`: hook codes are `1..NHOOKS`.
pub const NHOOKS: u32 = HOOKS.len() as u32 + 1;
/// `AG_DISK_HOOKS`: the hook codes below it judge disks and are counted per
/// disk; the layout of `ag_counts` and `ag_stats` is fixed by it, not by how
/// many hooks there are (pinned maps of an earlier version keep their meaning).
pub const DISK_HOOKS: u32 = 10;
const _: () = assert!(DISK_HOOKS <= NHOOKS);
/// `ag_count_key.idx` of the denials (enforce) of a hook code.
pub const fn stat_denied(code: u32) -> u32 {
    code
}
/// `ag_count_key.idx` of the audited operations of a hook code.
pub const fn stat_audited(code: u32) -> u32 {
    DISK_HOOKS + code
}
/// `AG_STAT_RB_DROPS`: events lost because the ring buffer was full (the one
/// `ag_stats` entry the programs write).
pub const STAT_RB_DROPS: u32 = 2 * DISK_HOOKS;
/// `AG_NSTATS`: entries of `ag_stats`.
pub const NSTATS: u32 = 32;
const _: () = assert!(STAT_RB_DROPS < NSTATS);

/// `AG_MAJOR_WORDS`: `ag_majors` words per device type (block, then
/// character), 64 majors each: 4,096, the kernel dev_t's 12-bit majors.
pub const MAJOR_WORDS: u32 = 64;
/// Entries of `ag_majors`.
pub const MAJOR_ENTRIES: u32 = 2 * MAJOR_WORDS;

/// The `ag_majors` word (its key) and the bit in it of a device's major.
pub fn major_slot(dev: DevKey) -> (u32, u32) {
    let m = dev.dev.major();
    (if dev.chr { MAJOR_WORDS } else { 0 } + m / 64, m % 64)
}

/// The whole `ag_majors` content for a managed set: one bit per major (block
/// and character apart) that has at least one of `devs`.
pub fn major_bitmap(devs: impl IntoIterator<Item = DevKey>) -> Vec<u64> {
    let mut words = vec![0u64; MAJOR_ENTRIES as usize];
    for d in devs {
        let (w, b) = major_slot(d);
        words[w as usize] |= 1 << b;
    }
    words
}

/// The majors whose bits are set in `ag_majors` words: (block, character).
pub fn majors_of(words: &[u64]) -> (Vec<u32>, Vec<u32>) {
    let of = |base: u32| -> Vec<u32> {
        (0..MAJOR_WORDS * 64)
            .filter(|m| {
                words
                    .get((base + m / 64) as usize)
                    .is_some_and(|w| (w >> (m % 64)) & 1 == 1)
            })
            .collect()
    };
    (of(0), of(MAJOR_WORDS))
}

/// The value of a device map entry.
pub fn disk_value(disk_id: u32, mode: Mode) -> [u8; size_of::<AgDisk>()] {
    let mut v = [0u8; size_of::<AgDisk>()];
    v[offset_of!(AgDisk, disk_id)..][..4].copy_from_slice(&disk_id.to_ne_bytes());
    v[offset_of!(AgDisk, mode)..][..4].copy_from_slice(&mode.code().to_ne_bytes());
    v
}

/// `(disk_id, mode code)` of a device map value; `None` if short.
pub fn parse_disk_value(v: &[u8]) -> Option<(u32, u32)> {
    Some((
        read_u32(v, offset_of!(AgDisk, disk_id))?,
        read_u32(v, offset_of!(AgDisk, mode))?,
    ))
}

/// The key of `ag_exes` for an executable's inode and filesystem dev_t.
pub fn exe_key(ino: u64, dev: u32) -> [u8; size_of::<AgExeKey>()] {
    let mut k = [0u8; size_of::<AgExeKey>()];
    k[offset_of!(AgExeKey, ino)..][..8].copy_from_slice(&ino.to_ne_bytes());
    k[offset_of!(AgExeKey, dev)..][..4].copy_from_slice(&dev.to_ne_bytes());
    k
}

/// `(ino, dev)` of an `ag_exes` key; `None` if short.
pub fn parse_exe_key(k: &[u8]) -> Option<(u64, u32)> {
    Some((
        read_u64(k, offset_of!(AgExeKey, ino))?,
        read_u32(k, offset_of!(AgExeKey, dev))?,
    ))
}

/// A native-endian u32 at `off`.
pub fn read_u32(b: &[u8], off: usize) -> Option<u32> {
    b.get(off..off + 4)?.try_into().ok().map(u32::from_ne_bytes)
}

/// A native-endian u64 at `off`.
pub fn read_u64(b: &[u8], off: usize) -> Option<u64> {
    b.get(off..off + 8)?.try_into().ok().map(u64::from_ne_bytes)
}

/// A struct's members in the compiled guard object's BTF: name -> byte
/// offset, and the struct's size. Independent of any Rust-side offsets.
/// The `ag_exes` keys of allow-listed executables.
impl ExeId {
    /// Its `ag_exes` key.
    pub(crate) fn key(self) -> Vec<u8> {
        exe_key(self.ino, self.dev.raw()).to_vec()
    }
    /// From an `ag_exes` key (`None` if short).
    pub(crate) fn from_key(k: &[u8]) -> Option<Self> {
        let (ino, dev) = parse_exe_key(k)?;
        Some(ExeId {
            ino,
            dev: crate::KernelDev::from_raw(dev),
        })
    }
}

#[cfg(test)]
pub(crate) fn btf_layout(name: &str) -> (std::collections::BTreeMap<String, usize>, usize) {
    use libbpf_rs::btf::types::{MemberAttr, Struct};
    use libbpf_rs::btf::{Btf, HasSize};
    let btf = Btf::from_raw("guard", super::loader::GUARD_OBJ)
        .unwrap()
        .expect("the object has BTF");
    let st: Struct<'_> = btf
        .type_by_name(name)
        .unwrap_or_else(|| panic!("struct {name} in BTF"));
    let members = st
        .iter()
        .map(|m| {
            let bits = match m.attr {
                MemberAttr::Normal { offset } => offset,
                MemberAttr::BitField { offset, .. } => offset,
            };
            (
                m.name.unwrap().to_string_lossy().into_owned(),
                bits as usize / 8,
            )
        })
        .collect();
    (members, st.size())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `bpf/guard.h`, the ABI's source.
    const GUARD_H: &str = include_str!("../../../../bpf/guard.h");

    /// The `#define NAME value` lines of guard.h with a numeric value.
    fn defines() -> std::collections::BTreeMap<String, String> {
        GUARD_H
            .lines()
            .filter_map(|l| {
                let rest = l.strip_prefix("#define ")?;
                let rest = rest.split("/*").next()?.trim();
                let (name, value) = rest.split_once(char::is_whitespace)?;
                Some((name.to_string(), value.trim().to_string()))
            })
            .collect()
    }

    #[test]
    fn codes_match_guard_h() {
        let d = defines();
        let num = |k: &str| -> u32 {
            d.get(k)
                .unwrap_or_else(|| panic!("guard.h has no {k}"))
                .parse()
                .unwrap_or_else(|e| panic!("{k}: {e}"))
        };
        for (mode, code) in Mode::ALL {
            assert_eq!(
                num(&format!("AG_MODE_{}", mode.as_str().to_uppercase())),
                code
            );
            assert_eq!(Mode::from_code(code), mode);
        }
        assert_eq!(num("AG_NHOOKS"), NHOOKS);
        assert_eq!(num("AG_NSTATS"), NSTATS);
        assert_eq!(num("AG_EV_CHR"), EV_CHR);
        assert_eq!(num("AG_EV_CMD"), EV_CMD);
        assert_eq!(num("AG_MAJOR_WORDS"), MAJOR_WORDS);
        assert_eq!(num("AG_TOOL_QUERY"), TOOL_QUERY);
        assert_eq!(num("AG_TOOL_KOPEN"), TOOL_KOPEN);
        assert_eq!(
            num("AG_MAX_RULES"),
            2 * super::super::rules::MAX_RULES as u32
        );
        assert_eq!(num("AG_DISK_HOOKS"), DISK_HOOKS);
        assert_eq!(num("AG_STAT_RB_DROPS"), STAT_RB_DROPS);
        // Every hook code of the header is a row of the table, and back.
        let hooks: Vec<(String, u32)> = d
            .keys()
            .filter_map(|k| k.strip_prefix("AG_HOOK_"))
            .map(|h| (h.to_lowercase(), num(&format!("AG_HOOK_{h}"))))
            .collect();
        assert_eq!(hooks.len(), HOOKS.len());
        for (label, code) in hooks {
            let row = HOOKS
                .iter()
                .find(|r| r.code == code)
                .unwrap_or_else(|| panic!("AG_HOOK_{label} ({code}) has no row in HOOKS"));
            assert_eq!(row.label, label, "code {code}");
        }
    }

    #[test]
    fn map_layouts_from_the_skeleton() {
        assert_eq!(size_of::<AgDisk>(), 8);
        assert_eq!(offset_of!(AgDisk, disk_id), 0);
        assert_eq!(offset_of!(AgDisk, mode), 4);
        assert_eq!(size_of::<AgExeKey>(), 16);
        assert_eq!(offset_of!(AgExeKey, ino), 0);
        assert_eq!(offset_of!(AgExeKey, dev), 8);
        let v = disk_value(7, Mode::Enforce);
        assert_eq!(parse_disk_value(&v), Some((7, 2)));
        assert_eq!(size_of::<AgRules>(), 32);
        assert_eq!(size_of::<AgExe>(), 16);
        assert_eq!(offset_of!(AgExe, tools), 8);
        assert_eq!(size_of::<AgPlace>(), 16);
        assert_eq!(offset_of!(AgPlace, ctr_id), 8);
        assert_eq!(size_of::<AgSelf>(), 16);
        assert_eq!(offset_of!(AgSelf, start_ticks), 8);
        let v = rules_value(1, 2, 3, 4);
        assert_eq!(parse_rules_value(&v), Some((1, 2, 3, 4)));
        assert_eq!(
            parse_exe_value(&exe_value(5, TOOL_KOPEN)),
            Some((5, TOOL_KOPEN))
        );
        assert_eq!(parse_place_value(&place_value(6, 7)), Some((6, 7)));
        let k = exe_key(1234, (8 << 20) | 1);
        assert_eq!(parse_exe_key(&k), Some((1234, (8 << 20) | 1)));
        assert_eq!(parse_exe_key(&k[..10]), None);
    }

    #[test]
    fn major_bitmap_has_one_bit_per_major_and_type() {
        use crate::KernelDev;
        let blk = |ma, mi| DevKey::block(KernelDev::new(ma, mi).unwrap());
        let chr = |ma, mi| DevKey::char(KernelDev::new(ma, mi).unwrap());
        // sd (8), sg (21), NVMe generic (a dynamic major such as 242), the
        // highest major (4095)
        assert_eq!(major_slot(blk(8, 0)), (0, 8));
        assert_eq!(major_slot(chr(21, 3)), (64, 21));
        assert_eq!(major_slot(chr(242, 0)), (67, 50));
        assert_eq!(major_slot(blk(4095, 1)), (63, 63));
        assert_eq!(major_slot(chr(4095, 1)), (127, 63));
        let w = major_bitmap([blk(8, 0), blk(8, 16), chr(21, 0), blk(259, 1)]);
        assert_eq!(w.len(), MAJOR_ENTRIES as usize);
        assert_eq!(w[0], 1 << 8);
        assert_eq!(w[4], 1 << 3, "259 = 4 * 64 + 3");
        assert_eq!(w[64], 1 << 21);
        // block 21 and character 8 are other devices: their bits stay clear
        assert_eq!(w.iter().map(|x| x.count_ones()).sum::<u32>(), 3);
        assert!(major_bitmap([]).iter().all(|x| *x == 0));
        assert_eq!(majors_of(&w), (vec![8, 259], vec![21]));
    }

    /// The mirror of `struct ag_event` against the compiled object's BTF
    /// (the C compiler's layout of guard.h), field by field.
    #[test]
    fn event_mirror_matches_the_object_btf() {
        let (at, size) = btf_layout("ag_event");
        assert_eq!(size, EVENT_SIZE);
        let mine = [
            ("ts_ns", offset_of!(AgEvent, ts_ns)),
            ("exe_ino", offset_of!(AgEvent, exe_ino)),
            ("exe_dev", offset_of!(AgEvent, exe_dev)),
            ("pid", offset_of!(AgEvent, pid)),
            ("tid", offset_of!(AgEvent, tid)),
            ("uid", offset_of!(AgEvent, uid)),
            ("euid", offset_of!(AgEvent, euid)),
            ("fsuid", offset_of!(AgEvent, fsuid)),
            ("egid", offset_of!(AgEvent, egid)),
            ("dev", offset_of!(AgEvent, dev)),
            ("disk_id", offset_of!(AgEvent, disk_id)),
            ("hook", offset_of!(AgEvent, hook)),
            ("op", offset_of!(AgEvent, op)),
            ("mode", offset_of!(AgEvent, mode)),
            ("flags", offset_of!(AgEvent, flags)),
            ("ctr_id", offset_of!(AgEvent, ctr_id)),
            ("comm", offset_of!(AgEvent, comm)),
        ];
        assert_eq!(at.len(), mine.len(), "{at:?}");
        for (name, off) in mine {
            assert_eq!(at.get(name), Some(&off), "{name}");
        }
        let (disk, size) = btf_layout("ag_disk");
        assert_eq!(size, size_of::<AgDisk>());
        assert_eq!(disk["mode"], offset_of!(AgDisk, mode));
    }
}
