//! Subordinate id ranges (`/etc/subuid`, `/etc/subgid`: `owner:start:count` a
//! line) against a container's id maps. A host user who owns a subordinate
//! range can make a user namespace of its own mapping those host ids
//! (`newuidmap`/`newgidmap`), and so act as the container's users on the host:
//! open the device nodes presented to the container, which are owned by the
//! container's host ids. Debian gives the first user `useradd` makes the
//! range `100000:65536`, the range container recipes often use. A container
//! therefore wants a range no host user but root owns; [`overlaps`] says
//! which owners' ranges its maps reach.

use crate::{Found, IdMap};
use std::path::Path;

/// One line of a subordinate id file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubId {
    /// The owner as written: a user name or a uid.
    pub owner: String,
    pub start: u64,
    pub count: u64,
}

/// The entries of a subordinate id file's `text` (comments, blank and
/// malformed lines skipped, as shadow's tools skip them).
pub fn parse(text: &str) -> Vec<SubId> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| {
            let mut f = l.trim().split(':');
            let owner = f.next()?.to_string();
            let start = f.next()?.parse().ok()?;
            let count: u64 = f.next()?.parse().ok()?;
            (!owner.is_empty() && count > 0 && f.next().is_none()).then_some(SubId {
                owner,
                start,
                count,
            })
        })
        .collect()
}

/// The entries of `entries` whose range shares a host id with an extent of
/// `map` (root's own ranges aside: root needs no range to be anyone). The
/// identity map (a privileged container) overlaps nothing: its ids are the
/// host's own, owned by whoever the host says.
pub fn overlaps<'a>(map: &IdMap, entries: &'a [SubId]) -> Vec<&'a SubId> {
    if map.is_identity() {
        return Vec::new();
    }
    entries
        .iter()
        .filter(|e| e.owner != "root" && e.owner != "0")
        .filter(|e| {
            map.0.iter().any(|&(_, out, n)| {
                let (a0, a1) = (u64::from(out), u64::from(out) + u64::from(n));
                let (b0, b1) = (e.start, e.start + e.count);
                a0 < b1 && b0 < a1
            })
        })
        .collect()
}

/// One warning per host user whose subordinate uid (`subuid`: the text of
/// /etc/subuid) or gid range (`subgid`) the maps of container `f` reach;
/// `etc` (the caller's `Paths::etc`) names the files.
pub fn warnings(f: &Found, etc: &Path, subuid: &str, subgid: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (what, file, map, text) in [
        ("uid", "subuid", &f.uid_map, subuid),
        ("gid", "subgid", &f.gid_map, subgid),
    ] {
        let file = etc.join(file);
        let file = file.display();
        let entries = parse(text);
        for e in overlaps(map, &entries) {
            out.push(format!(
                "container {}: its {what} map ({}) reaches host {what}s {}-{} of {file}, which \
                 host user {} owns: that user can act as the container's users through a user \
                 namespace of its own (new{what}map) and open its disks' nodes; map the \
                 container to a range no host user owns",
                f.name,
                extents(map),
                e.start,
                e.start + e.count - 1,
                e.owner
            ));
        }
    }
    out
}

/// `0-65535 -> 100000-165535` for each extent.
fn extents(map: &IdMap) -> String {
    map.0
        .iter()
        .map(|&(i, o, n)| {
            let last = |x: u32| u64::from(x) + u64::from(n) - 1;
            format!("{i}-{} -> {o}-{}", last(i), last(o))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// [`warnings`] for /etc/subuid and /etc/subgid as they are now (a missing
/// file has no entries), under `etc` (the caller's `Paths::etc`).
pub fn host_warnings(f: &Found, etc: &Path) -> Vec<String> {
    let read = |p: &str| std::fs::read_to_string(etc.join(p)).unwrap_or_default();
    warnings(f, etc, &read("subuid"), &read("subgid"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(uid: IdMap, gid: IdMap) -> Found {
        Found {
            name: "rac1".into(),
            cgroups: vec![],
            pid: Some(42),
            uid_map: uid,
            gid_map: gid,
            tasks: 1,
            proc: std::path::PathBuf::new(),
        }
    }

    #[test]
    fn a_range_a_host_user_owns_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let subuid = dir.path().join("subuid");
        std::fs::write(
            &subuid,
            "# comment\nalice:100000:65536\nroot:1000000:65536\nbob:300000:65536\nbroken:x:1\n\n",
        )
        .unwrap();
        let text = std::fs::read_to_string(&subuid).unwrap();
        let etc = asmguard_paths::Paths::default().etc;
        let e = parse(&text);
        assert_eq!(e.len(), 3, "{e:?}");
        // the README's old LXC recipe: 0 100000 65536 -> alice's range
        let m = IdMap(vec![(0, 100000, 65536)]);
        let w = warnings(&found(m.clone(), m.clone()), &etc, &text, "");
        assert_eq!(w.len(), 1, "{w:#?}");
        assert!(w[0].contains("host user alice"), "{}", w[0]);
        assert!(w[0].contains("0-65535 -> 100000-165535"), "{}", w[0]);
        assert!(w[0].contains("100000-165535 of /etc/subuid"), "{}", w[0]);
        // the same map for gids, against the subgid text
        let w = warnings(&found(IdMap::default(), m), &etc, "", &text);
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("gid map") && w[0].contains("/etc/subgid"));
        // an edge: the map ends one id before bob's range; root's own range is fine
        let m = IdMap(vec![(0, 234464, 65536)]);
        assert!(overlaps(&m, &e).is_empty(), "234464+65536 = 300000");
        let m = IdMap(vec![(0, 234465, 65536)]);
        assert_eq!(overlaps(&m, &e)[0].owner, "bob");
        let m = IdMap(vec![(0, 1000000, 65536)]);
        assert!(overlaps(&m, &e).is_empty(), "root's range");
        // a range no one owns, and a privileged container: nothing to say
        let m = IdMap(vec![(0, 2_000_000_000, 65536)]);
        assert!(warnings(&found(m.clone(), m), &etc, &text, &text).is_empty());
        let id = IdMap::identity();
        assert!(warnings(&found(id.clone(), id), &etc, &text, &text).is_empty());
    }

    #[test]
    fn host_warnings_read_and_name_the_callers_etc() {
        let dir = tempfile::tempdir().unwrap();
        let etc = asmguard_paths::Paths::under(dir.path()).etc;
        std::fs::create_dir_all(&etc).unwrap();
        std::fs::write(etc.join("subuid"), "alice:100000:65536\n").unwrap();
        std::fs::write(etc.join("subgid"), "alice:100000:65536\n").unwrap();
        let m = IdMap(vec![(0, 100000, 65536)]);
        let w = host_warnings(&found(m.clone(), m), &etc);
        assert_eq!(w.len(), 2, "{w:#?}");
        let named = etc.join("subuid").display().to_string();
        assert!(w[0].contains(&named), "{} does not name {named}", w[0]);
        assert!(w[1].contains(&etc.join("subgid").display().to_string()));
    }
}
