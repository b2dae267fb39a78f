//! The allow rules as the filter holds them: the userspace twin of
//! `bpf/rules.h`. One type from the daemon's configuration to the maps:
//! [`Rules`] (conjunctions, the disk-query tools, the daemon's own process)
//! encoded into the contents of `ag_rules`, `ag_rule_uids`, `ag_rule_gids`,
//! `ag_rule_exes`, `ag_places` and `ag_self` ([`Encoded`]).
//!
//! A rule is one bit. A change never leaves a task judged by half a rule set:
//! the new rules take bits the rules in force do not use, their entries go in
//! first (beside the old ones), then one write of `ag_rules` puts them in
//! force instead of the old ones, then the old bits leave the id maps
//! ([`Guard::set_rules`]). Hence at most [`MAX_RULES`] rules: half the bits.

use std::collections::{BTreeMap, BTreeSet};

use libbpf_rs::{MapCore, MapFlags, MapHandle};

use super::abi;
use super::pins::delete_quiet;
use super::types::ExeId;
use crate::Error;

/// At most this many rules at once (the other half of the 64 bits is for
/// the next set while it replaces this one).
pub const MAX_RULES: usize = 32;

/// One allow rule: a task may write when every condition it has holds. An
/// empty list is no condition of that kind; a rule needs at least one.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Rule {
    /// Who, by uid: an effective or fs uid of the task (host ids).
    pub uids: Vec<u32>,
    /// Who, by gid: an effective, fs or supplementary gid (with `uids`:
    /// either holds the who condition).
    pub gids: Vec<u32>,
    /// What: the task's executable, by file identity.
    pub exes: Vec<ExeId>,
    /// Where: cgroup ids; the task's nearest configured cgroup must be one.
    pub places: Vec<u64>,
    /// The container these places are (1..; 0: not a container), for events.
    pub ctr_id: u32,
}

impl Rule {
    fn has_who(&self) -> bool {
        !self.uids.is_empty() || !self.gids.is_empty()
    }
}

/// A disk-query tool: never a write; read-class passthrough as host root
/// even while holding CAP_SYS_RAWIO/CAP_SYS_ADMIN (`query`), and in-kernel
/// opens of the paths it maps (`kernel_open`: multipathd).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Tool {
    /// The tool's executable.
    pub exe: ExeId,
    /// Read-class passthrough as host root with CAP_SYS_RAWIO.
    pub query: bool,
    /// In-kernel opens (device-mapper table loads) as host root.
    pub kernel_open: bool,
}

/// The daemon's own process (`ag_self`): thread group id and start time
/// (`/proc/PID/stat` field 22, clock ticks), so that a pid reused after the
/// daemon died is nobody.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SelfId {
    /// Thread group id.
    pub tgid: u32,
    /// Start time in USER_HZ ticks since boot.
    pub start_ticks: u64,
}

impl SelfId {
    /// The calling process, as the procfs `proc` (the caller's `Paths::proc`)
    /// shows it.
    pub fn current(proc: &std::path::Path) -> Result<SelfId, Error> {
        let stat = std::fs::read_to_string(proc.join("self/stat")).map_err(|source| Error::Io {
            what: "reading /proc/self/stat",
            source,
        })?;
        parse_stat(&stat).ok_or_else(|| Error::Io {
            what: "parsing /proc/self/stat",
            source: std::io::Error::from(std::io::ErrorKind::InvalidData),
        })
    }
}

/// (pid, starttime) of a `/proc/PID/stat` line; the command may hold spaces
/// and parentheses, so fields count from the last `)`.
fn parse_stat(stat: &str) -> Option<SelfId> {
    let tgid = stat.split_whitespace().next()?.parse().ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    // rest starts at field 3 (state); starttime is field 22
    let start_ticks = rest.split_whitespace().nth(19)?.parse().ok()?;
    Some(SelfId { tgid, start_ticks })
}

/// Everything the filter judges writers by.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    /// The allow rules ([`MAX_RULES`] at most).
    pub rules: Vec<Rule>,
    /// The disk-query tools.
    pub tools: Vec<Tool>,
    /// The daemon's own process.
    pub daemon: Option<SelfId>,
    /// Places without a rule of their own, (cgroup id, container id): a
    /// container whose users are not resolved yet is still the nearest
    /// place of its tasks (no rule of an enclosing place applies) and is
    /// named in their events.
    pub places: Vec<(u64, u32)>,
}

impl Rules {
    /// The plain allow-list as rules: any process of `uids`/`gids` (one
    /// rule), any process of `exes` (another).
    pub fn from_ids(uids: &[u32], gids: &[u32], exes: &[ExeId]) -> Rules {
        let mut rules = Vec::new();
        if !uids.is_empty() || !gids.is_empty() {
            rules.push(Rule {
                uids: uids.to_vec(),
                gids: gids.to_vec(),
                ..Rule::default()
            });
        }
        if !exes.is_empty() {
            rules.push(Rule {
                exes: exes.to_vec(),
                ..Rule::default()
            });
        }
        Rules {
            rules,
            ..Rules::default()
        }
    }
}

/// The rules in force as the kernel holds them: (active, need_who,
/// need_exe, need_place) and the places (cgroup id -> (rules, container id)).
pub type InForce = ((u64, u64, u64, u64), BTreeMap<u64, (u64, u32)>);

/// The contents of the rule maps, by map name: key bytes -> value bytes.
pub type Encoded = BTreeMap<&'static str, BTreeMap<Vec<u8>, Vec<u8>>>;

/// The rule maps, in the order a change writes them (`ag_rules` is written
/// on its own, between the two passes).
pub(crate) const RULE_MAPS: [&str; 5] = [
    crate::guard::maps::RULE_UIDS,
    crate::guard::maps::RULE_GIDS,
    crate::guard::maps::RULE_EXES,
    crate::guard::maps::PLACES,
    crate::guard::maps::SELF,
];

/// Encodes `r` with rule i on bit `bits[i]`. Errors: too many rules, a rule
/// without a condition.
pub fn encode(r: &Rules, bits: &[u32]) -> Result<Encoded, String> {
    if r.rules.len() > MAX_RULES {
        return Err(format!(
            "{} allow rules: at most {MAX_RULES}",
            r.rules.len()
        ));
    }
    let mut uids: BTreeMap<u32, u64> = BTreeMap::new();
    let mut gids: BTreeMap<u32, u64> = BTreeMap::new();
    let mut exes: BTreeMap<ExeId, (u64, u32)> = BTreeMap::new();
    let mut places: BTreeMap<u64, (u64, u32)> = BTreeMap::new();
    let (mut active, mut who, mut exe, mut place) = (0u64, 0u64, 0u64, 0u64);
    for (rule, &bit) in r.rules.iter().zip(bits) {
        let b = 1u64 << bit;
        if !rule.has_who() && rule.exes.is_empty() && rule.places.is_empty() {
            return Err("an allow rule without a condition would allow everyone".into());
        }
        active |= b;
        if rule.has_who() {
            who |= b;
        }
        if !rule.exes.is_empty() {
            exe |= b;
        }
        if !rule.places.is_empty() {
            place |= b;
        }
        for u in &rule.uids {
            *uids.entry(*u).or_default() |= b;
        }
        for g in &rule.gids {
            *gids.entry(*g).or_default() |= b;
        }
        for x in &rule.exes {
            exes.entry(*x).or_default().0 |= b;
        }
        for p in &rule.places {
            let e = places.entry(*p).or_default();
            e.0 |= b;
            e.1 = e.1.max(rule.ctr_id);
        }
    }
    for (cg, ctr) in &r.places {
        let e = places.entry(*cg).or_default();
        e.1 = e.1.max(*ctr);
    }
    for t in &r.tools {
        let flags =
            (u32::from(t.query) * abi::TOOL_QUERY) | (u32::from(t.kernel_open) * abi::TOOL_KOPEN);
        exes.entry(t.exe).or_default().1 |= flags;
    }
    let id = |m: BTreeMap<u32, u64>| {
        m.into_iter()
            .map(|(k, v)| (k.to_ne_bytes().to_vec(), v.to_ne_bytes().to_vec()))
            .collect::<BTreeMap<_, _>>()
    };
    let mut out = Encoded::new();
    out.insert(crate::guard::maps::RULE_UIDS, id(uids));
    out.insert(crate::guard::maps::RULE_GIDS, id(gids));
    out.insert(
        crate::guard::maps::RULE_EXES,
        exes.into_iter()
            .map(|(x, (rules, tools))| (x.key(), abi::exe_value(rules, tools).to_vec()))
            .collect(),
    );
    out.insert(
        crate::guard::maps::PLACES,
        places
            .into_iter()
            .map(|(cg, (rules, ctr))| {
                (
                    cg.to_ne_bytes().to_vec(),
                    abi::place_value(rules, ctr).to_vec(),
                )
            })
            .collect(),
    );
    let me = r.daemon.map_or((0, 0), |s| (s.tgid, s.start_ticks));
    out.insert(
        crate::guard::maps::SELF,
        BTreeMap::from([(
            0u32.to_ne_bytes().to_vec(),
            abi::self_value(me.0, me.1).to_vec(),
        )]),
    );
    out.insert(
        crate::guard::maps::RULES,
        BTreeMap::from([(
            0u32.to_ne_bytes().to_vec(),
            abi::rules_value(active, who, exe, place).to_vec(),
        )]),
    );
    Ok(out)
}

/// `n` bits none of which is in `used`, lowest first.
pub(crate) fn free_bits(used: u64, n: usize) -> Vec<u32> {
    (0..64u32)
        .filter(|b| used & (1 << b) == 0)
        .take(n)
        .collect()
}

/// The union of two encodings of the id maps: masks ORed, tool flags ORed.
pub(crate) fn union(
    old: &BTreeMap<Vec<u8>, Vec<u8>>,
    new: &BTreeMap<Vec<u8>, Vec<u8>>,
    name: &str,
) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut out = new.clone();
    for (k, ov) in old {
        let Some(nv) = out.get_mut(k) else {
            out.insert(k.clone(), ov.clone());
            continue;
        };
        match name {
            crate::guard::maps::RULE_UIDS | crate::guard::maps::RULE_GIDS => {
                let m = abi::read_u64(ov, 0).unwrap_or(0) | abi::read_u64(nv, 0).unwrap_or(0);
                *nv = m.to_ne_bytes().to_vec();
            }
            crate::guard::maps::RULE_EXES => {
                let (or, ot) = abi::parse_exe_value(ov).unwrap_or_default();
                let (nr, nt) = abi::parse_exe_value(nv).unwrap_or_default();
                *nv = abi::exe_value(or | nr, ot | nt).to_vec();
            }
            crate::guard::maps::PLACES => {
                let (or, oc) = abi::parse_place_value(ov).unwrap_or_default();
                let (nr, nc) = abi::parse_place_value(nv).unwrap_or_default();
                *nv = abi::place_value(or | nr, if nc != 0 { nc } else { oc }).to_vec();
            }
            _ => {}
        }
    }
    out
}

/// A map's whole content.
pub(crate) fn read_all(map: &MapHandle) -> Result<BTreeMap<Vec<u8>, Vec<u8>>, Error> {
    let mut out = BTreeMap::new();
    for k in map.keys() {
        if let Some(v) = map
            .lookup(&k, MapFlags::ANY)
            .map_err(Error::bpf("reading the allow rules"))?
        {
            out.insert(k, v);
        }
    }
    Ok(out)
}

/// Makes `map` hold exactly `want`: every entry written, then the others
/// deleted (an array's entries cannot be deleted: all are written).
pub(crate) fn write_exact(map: &MapHandle, want: &BTreeMap<Vec<u8>, Vec<u8>>) -> Result<(), Error> {
    write_add(map, want)?;
    let keep: BTreeSet<&Vec<u8>> = want.keys().collect();
    let stale: Vec<Vec<u8>> = map.keys().filter(|k| !keep.contains(k)).collect();
    for k in stale {
        delete_quiet(map, &k)?;
    }
    Ok(())
}

/// Writes every entry of `want`.
pub(crate) fn write_add(map: &MapHandle, want: &BTreeMap<Vec<u8>, Vec<u8>>) -> Result<(), Error> {
    for (k, v) in want {
        map.update(k, v, MapFlags::ANY)
            .map_err(Error::bpf("updating the allow rules"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::KernelDev;

    fn exe(ino: u64) -> ExeId {
        ExeId {
            ino,
            dev: KernelDev::from_raw(8 << 20 | 1),
        }
    }

    #[test]
    fn stat_line_with_a_strange_command() {
        let s =
            "4242 (a) b (c)) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10";
        assert_eq!(
            parse_stat(s),
            Some(SelfId {
                tgid: 4242,
                start_ticks: 987654
            })
        );
        let me = SelfId::current(&asmguard_paths::Paths::default().proc).unwrap();
        assert_eq!(me.tgid, std::process::id());
        assert!(me.start_ticks > 0);
    }

    #[test]
    fn conjunction_encoded_with_its_needs() {
        let r = Rules {
            rules: vec![
                Rule {
                    uids: vec![54331],
                    exes: vec![exe(7)],
                    ..Rule::default()
                },
                Rule {
                    gids: vec![54330],
                    places: vec![99],
                    ctr_id: 3,
                    ..Rule::default()
                },
            ],
            tools: vec![Tool {
                exe: exe(7),
                query: true,
                kernel_open: false,
            }],
            daemon: Some(SelfId {
                tgid: 10,
                start_ticks: 20,
            }),
            places: vec![(99, 4), (100, 5)],
        };
        let e = encode(&r, &[5, 9]).unwrap();
        let (active, who, x, place) =
            abi::parse_rules_value(&e[crate::guard::maps::RULES][&0u32.to_ne_bytes().to_vec()])
                .unwrap();
        assert_eq!(active, 1 << 5 | 1 << 9);
        assert_eq!(who, 1 << 5 | 1 << 9);
        assert_eq!(x, 1 << 5);
        assert_eq!(place, 1 << 9);
        assert_eq!(
            e[crate::guard::maps::RULE_UIDS][&54331u32.to_ne_bytes().to_vec()],
            (1u64 << 5).to_ne_bytes().to_vec()
        );
        assert_eq!(
            abi::parse_exe_value(&e[crate::guard::maps::RULE_EXES][&exe(7).key()]),
            Some((1 << 5, abi::TOOL_QUERY))
        );
        assert_eq!(
            abi::parse_place_value(&e[crate::guard::maps::PLACES][&99u64.to_ne_bytes().to_vec()]),
            Some((1 << 9, 4)),
            "a rule's place, named by the larger container id"
        );
        assert_eq!(
            abi::parse_place_value(&e[crate::guard::maps::PLACES][&100u64.to_ne_bytes().to_vec()]),
            Some((0, 5)),
            "a place without a rule"
        );
    }

    #[test]
    fn a_rule_without_a_condition_and_too_many_rules_are_refused() {
        let r = Rules {
            rules: vec![Rule::default()],
            ..Rules::default()
        };
        assert!(encode(&r, &[0]).unwrap_err().contains("everyone"));
        let many = Rules {
            rules: vec![
                Rule {
                    uids: vec![1],
                    ..Rule::default()
                };
                MAX_RULES + 1
            ],
            ..Rules::default()
        };
        assert!(encode(&many, &(0..64).collect::<Vec<_>>()).is_err());
    }

    #[test]
    fn new_bits_avoid_the_rules_in_force_and_union_keeps_both() {
        assert_eq!(free_bits(0b1011, 3), vec![2, 4, 5]);
        let old = BTreeMap::from([(vec![1u8, 0, 0, 0], 1u64.to_ne_bytes().to_vec())]);
        let new = BTreeMap::from([
            (vec![1u8, 0, 0, 0], 4u64.to_ne_bytes().to_vec()),
            (vec![2u8, 0, 0, 0], 4u64.to_ne_bytes().to_vec()),
        ]);
        let u = union(&old, &new, crate::guard::maps::RULE_UIDS);
        assert_eq!(u[&vec![1u8, 0, 0, 0]], 5u64.to_ne_bytes().to_vec());
        assert_eq!(u.len(), 2);
    }
}
