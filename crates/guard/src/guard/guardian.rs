//! The pins guarded (`bpf/guardian.h`): where the `bpf` security hook is
//! attached, only the daemon may get asmguard's maps, programs and links by
//! id, write its maps or detach its links. This module writes the two maps
//! that rule reads: `ag_guardian`, the daemon's claim (its tgid; the kernel
//! adds the start time and clears it when the process exits), and
//! `ag_guarded`, the ids of the objects.
//!
//! The takeover argument: a daemon claims first thing at load, after it took
//! the pin directory's lock (`crate::pins::lock`), so that no other daemon
//! runs on these pins. A claim succeeds when the record is vacant (the last
//! daemon exited: `kill -9` and restarts included) or already this
//! process's; a record naming another live process is kept by the kernel
//! (the write is refused) and the load stops with [`Error::GuardHeld`].
//! `filter disable` detaches through the daemon's own fds; a reboot clears
//! everything; `make uninstall` disables through the daemon, stops it, and
//! unlinks the pins (unlinking is not a `bpf()` command).
//!
//! Not here: the comparison of every watched map ([`super::mapwatch`]).

use libbpf_rs::{MapCore, MapFlags, MapHandle};
use std::collections::BTreeSet;

use super::abi::{read_u32, read_u64};
use crate::Error;

/// `AG_OBJ_MAP`, `AG_OBJ_PROG`, `AG_OBJ_LINK`: the kinds of `ag_guarded`
/// keys.
pub(crate) const OBJ_MAP: u32 = 1;
/// See [`OBJ_MAP`].
pub(crate) const OBJ_PROG: u32 = 2;
/// See [`OBJ_MAP`].
pub(crate) const OBJ_LINK: u32 = 3;

/// `struct ag_guardian`: tgid (u32), pad (u32), start (u64).
const GUARDIAN_SIZE: usize = 16;

/// A `struct ag_guardian` value naming `tgid`, its start to be filled in by
/// the kernel.
fn claim_value(tgid: u32) -> [u8; GUARDIAN_SIZE] {
    let mut v = [0u8; GUARDIAN_SIZE];
    v[..4].copy_from_slice(&tgid.to_ne_bytes());
    v
}

/// `(tgid, start)` of the record (`None`: unreadable).
fn read(map: &MapHandle) -> Option<(u32, u64)> {
    let v = map.lookup(&0u32.to_ne_bytes(), MapFlags::ANY).ok()??;
    Some((read_u32(&v, 0)?, read_u64(&v, 8)?))
}

/// The process the record names (`Some(0)`: vacant).
pub(crate) fn holder(map: &MapHandle) -> Option<u32> {
    read(map).map(|(t, _)| t)
}

/// Claims the objects for this process (see the module's argument).
pub(crate) fn claim(map: &MapHandle) -> Result<(), Error> {
    let me = std::process::id();
    if holder(map) == Some(me) {
        return Ok(());
    }
    match map.update(&0u32.to_ne_bytes(), &claim_value(me), MapFlags::ANY) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == libbpf_rs::ErrorKind::PermissionDenied => {
            Err(Error::GuardHeld(holder(map).unwrap_or(0)))
        }
        Err(e) => Err(Error::bpf("claiming the filter's objects (ag_guardian)")(e)),
    }
}

/// The check's look at the claim: a phrase when the record does not name
/// this process (claimed again where it is vacant).
pub(crate) fn recheck(map: &MapHandle) -> Option<String> {
    let me = std::process::id();
    match holder(map) {
        Some(t) if t == me => None,
        Some(0) => Some(match claim(map) {
            Ok(()) => "ag_guardian was vacant: claimed again".to_string(),
            Err(e) => format!("ag_guardian was vacant and could not be claimed again: {e}"),
        }),
        Some(t) => Some(format!(
            "ag_guardian names pid {t}, not this daemon: the filter's objects are \
             guarded for that process"
        )),
        None => Some("ag_guardian could not be read".to_string()),
    }
}

/// An `ag_guarded` key.
fn key(kind: u32, id: u32) -> [u8; 8] {
    let mut k = [0u8; 8];
    k[..4].copy_from_slice(&kind.to_ne_bytes());
    k[4..].copy_from_slice(&id.to_ne_bytes());
    k
}

/// Makes `ag_guarded` hold exactly `objects` (kind, id).
pub(crate) fn fill_guarded(map: &MapHandle, objects: &[(u32, u32)]) -> Result<(), Error> {
    let want: BTreeSet<Vec<u8>> = objects
        .iter()
        .filter(|(_, id)| *id != 0)
        .map(|(k, id)| key(*k, *id).to_vec())
        .collect();
    for k in &want {
        map.update(k, &[1u8], MapFlags::ANY)
            .map_err(Error::bpf("updating the guarded objects"))?;
    }
    let stale: Vec<Vec<u8>> = map.keys().filter(|k| !want.contains(k)).collect();
    for k in stale {
        super::pins::delete_quiet(map, &k)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_match_the_header() {
        let h = include_str!("../../../../bpf/guardian.h");
        for (name, v) in [
            ("AG_OBJ_MAP", OBJ_MAP),
            ("AG_OBJ_PROG", OBJ_PROG),
            ("AG_OBJ_LINK", OBJ_LINK),
        ] {
            assert!(h.contains(&format!("#define {name} {v}\n")), "{name}");
        }
        assert_eq!(&claim_value(7)[..4], &7u32.to_ne_bytes());
        assert_eq!(&claim_value(7)[4..], &[0u8; 12]);
        assert_eq!(key(OBJ_LINK, 5)[..4], 3u32.to_ne_bytes());
        assert_eq!(key(OBJ_LINK, 5)[4..], 5u32.to_ne_bytes());
        use super::super::abi::{AgGuardian, AgObjKey};
        use std::mem::{offset_of, size_of};
        assert_eq!(size_of::<AgGuardian>(), GUARDIAN_SIZE);
        assert_eq!(offset_of!(AgGuardian, tgid), 0);
        assert_eq!(offset_of!(AgGuardian, start), 8);
        assert_eq!(size_of::<AgObjKey>(), 8);
        assert_eq!(offset_of!(AgObjKey, kind), 0);
        assert_eq!(offset_of!(AgObjKey, id), 4);
    }
}
