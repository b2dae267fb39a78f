//! What the daemon last wrote to each map it fills, and the check that puts
//! it back: a process with `CAP_SYS_ADMIN` can update any pinned map through
//! its pin or by id (`BPF_MAP_GET_FD_BY_ID`), e.g. zero a word of
//! `ag_majors`, after which the programs skip the disks of that major.
//!
//! Generic by design: a map is a name in [`WATCHED`] and a snapshot of raw
//! keys and values ([`Snapshot`]), taken from the kernel right after this
//! process wrote the map ([`Desired::record`]); nothing here knows a map's
//! key or value layout. Every setter of a watched map records it when it is
//! done (`Guard::record`); a watched map written without a record would be
//! put back to its last record by the next check. A map the object does not
//! have (an older or newer layout) is skipped.
//!
//! Not here: which pins name which objects ([`super::pinwatch`]); the
//! managed-device maps (`ag_blk`, `ag_chr`), which the daemon compares with
//! its own model of the disks and writes again from it.

use libbpf_rs::{MapCore, MapFlags, MapHandle};
use std::collections::BTreeMap;
use std::sync::Mutex;

/// The maps the programs read and this process fills, besides the device
/// maps: compared and put back by [`Desired::check`]. A map the kernel
/// writes (events, counters) is never here.
pub(crate) const WATCHED: &[&str] = &[
    crate::guard::maps::MAJORS,
    crate::guard::maps::RULES,
    crate::guard::maps::RULE_UIDS,
    crate::guard::maps::RULE_GIDS,
    crate::guard::maps::RULE_EXES,
    crate::guard::maps::PLACES,
    crate::guard::maps::SELF,
    crate::guard::maps::PIN_DIRS,
    crate::guard::maps::GUARDED,
];

/// A map's content: raw key -> raw value.
pub(crate) type Snapshot = BTreeMap<Vec<u8>, Vec<u8>>;

/// The content of `map` as the kernel holds it now (every key of an array).
pub(crate) fn snapshot(map: &MapHandle) -> Result<Snapshot, libbpf_rs::Error> {
    let mut out = Snapshot::new();
    for k in map.keys() {
        if let Some(v) = map.lookup(&k, MapFlags::ANY)? {
            out.insert(k, v);
        }
    }
    Ok(out)
}

/// The keys whose values differ between `a` and `b` (or that one lacks).
fn differing(a: &Snapshot, b: &Snapshot) -> usize {
    a.iter().filter(|(k, v)| b.get(*k) != Some(*v)).count()
        + b.keys().filter(|k| !a.contains_key(*k)).count()
}

/// Puts `want` into `map`: its entries written, the others deleted (an
/// array's entries cannot be deleted; an array's snapshot has them all).
fn put_back(map: &MapHandle, want: &Snapshot, now: &Snapshot) -> Result<(), libbpf_rs::Error> {
    for (k, v) in want {
        if now.get(k) != Some(v) {
            map.update(k, v, MapFlags::ANY)?;
        }
    }
    for k in now.keys().filter(|k| !want.contains_key(*k)) {
        match map.delete(k) {
            Ok(()) => {}
            Err(e) if e.kind() == libbpf_rs::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// What this process last wrote, by map name, and what [`Desired::repair`]
/// found changed since the last check.
#[derive(Debug, Default)]
pub(crate) struct Desired {
    maps: Mutex<BTreeMap<&'static str, Snapshot>>,
    found: Mutex<Vec<String>>,
}

/// Compares `map` with `want` and puts it back when another process changed
/// it: what was found, in one phrase.
fn compare(name: &str, map: &MapHandle, want: &Snapshot) -> Option<String> {
    let now = match snapshot(map) {
        Ok(n) => n,
        Err(e) => return Some(format!("{name} could not be read: {e}")),
    };
    if &now == want {
        return None;
    }
    let n = differing(want, &now);
    let what = format!(
        "{name} differs from what this daemon wrote on {n} entr{}",
        if n == 1 { "y" } else { "ies" }
    );
    Some(match put_back(map, want, &now) {
        Ok(()) => format!("{what}: put back"),
        Err(e) => format!("{what}: could not put it back: {e}"),
    })
}

impl Desired {
    /// Records `map`'s content now as what `name` should hold (call right
    /// after writing it). A map that cannot be read keeps its last record.
    pub(crate) fn record(&self, name: &'static str, map: &MapHandle) {
        if let Ok(s) = snapshot(map) {
            lock(&self.maps).insert(name, s);
        }
    }

    /// Puts `name` back to its record before a setter changes it from what
    /// the kernel holds (an incremental write must not record another
    /// process's change as its own); what it found is reported by the next
    /// [`Desired::check`].
    pub(crate) fn repair(&self, name: &str, map: &MapHandle) {
        let found = lock(&self.maps)
            .get(name)
            .and_then(|want| compare(name, map, want));
        if let Some(f) = found {
            lock(&self.found).push(f);
        }
    }

    /// Compares every recorded map (`maps` gives the held handle of a name)
    /// with its record and puts back the ones another process changed: one
    /// phrase each, with what [`Desired::repair`] found since the last check
    /// (empty when all hold what this process wrote).
    pub(crate) fn check<'a>(&self, maps: impl Fn(&str) -> Option<&'a MapHandle>) -> Vec<String> {
        let mut out = std::mem::take(&mut *lock(&self.found));
        for (name, want) in lock(&self.maps).iter() {
            if let Some(f) = maps(name).and_then(|m| compare(name, m, want)) {
                out.push(f);
            }
        }
        out
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differing_counts_changed_missing_and_extra_keys() {
        let a: Snapshot = [(vec![0], vec![1]), (vec![1], vec![2]), (vec![2], vec![3])].into();
        let b: Snapshot = [(vec![0], vec![1]), (vec![1], vec![9]), (vec![3], vec![3])].into();
        assert_eq!(differing(&a, &a), 0);
        // key 1 changed, key 2 missing, key 3 extra
        assert_eq!(differing(&a, &b), 3);
        assert_eq!(differing(&b, &a), 3);
    }

    #[test]
    fn watched_maps_are_maps_of_the_object_the_daemon_fills() {
        for m in WATCHED {
            assert!(crate::guard::maps::pinned().any(|n| n == *m), "{m}");
        }
        for kernel_written in [
            crate::guard::maps::EVENTS,
            crate::guard::maps::STATS,
            crate::guard::maps::COUNTS,
        ] {
            assert!(!WATCHED.contains(&kernel_written));
        }
    }
}
