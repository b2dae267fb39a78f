//! Protected disks written through a mapping made before protection (the
//! World's `exposed`, found by `crate::inputs::exposed`), descriptors open
//! for writing and loop devices set up over them before protection:
//! `status`'s lines and what appeared and went between two findings.

use asmguard_devices::holders::Opener;
use std::collections::{BTreeMap, BTreeSet};

/// Label -> the processes.
pub type Exposed = BTreeMap<String, Vec<Opener>>;

/// A process's mapping of a disk (by label).
pub type Found = (String, Opener);

/// One `status` line.
pub fn line(label: &str, o: &Opener) -> String {
    format!(
        "{label} mapped shared-writable by pid {} ({}) since before protection",
        o.pid, o.comm
    )
}

/// One `status` line of a descriptor open for writing since before
/// protection (`status`'s `writers_before`).
pub fn writer_line(label: &str, o: &Opener) -> String {
    format!(
        "{label} writer open since before protection: pid {} ({}) fd {} on {} \
         (its writes are refused)",
        o.pid, o.comm, o.fd, o.path
    )
}

/// `status`'s lines of descriptors open for writing since before protection.
pub fn writer_lines(e: &Exposed) -> Vec<String> {
    e.iter()
        .flat_map(|(l, v)| v.iter().map(move |o| writer_line(l, o)))
        .collect()
}

/// `status`'s lines, one per (disk, process).
pub fn lines(e: &Exposed) -> Vec<String> {
    e.iter()
        .flat_map(|(l, v)| v.iter().map(move |o| line(l, o)))
        .collect()
}

/// A loop device over a protected disk, set up before its protection (by
/// path, or bound to a descriptor of the disk).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct LoopBefore {
    /// Its kernel name (`loop0`).
    pub name: String,
    /// `major:minor`.
    pub device: String,
    /// What it reads and writes (`loop/backing_file`).
    pub backing: String,
    /// Set up read-only (`loop/ro`).
    pub read_only: bool,
}

/// Label -> the loop devices over it set up before its protection.
pub type Loops = BTreeMap<String, Vec<LoopBefore>>;

/// One `status` line of a loop device set up before protection.
pub fn loop_line(label: &str, l: &LoopBefore) -> String {
    format!(
        "{} over {label} (backing file {}{}), set up before protection: \
         its writes are judged as the disk's",
        l.name,
        l.backing,
        if l.read_only { ", read-only" } else { "" }
    )
}

/// `status`'s lines of loop devices set up before protection.
pub fn loop_lines(e: &Loops) -> Vec<String> {
    e.iter()
        .flat_map(|(l, v)| v.iter().map(move |o| loop_line(l, o)))
        .collect()
}

/// A loop device with its disk's label.
pub type LoopOf = (String, LoopBefore);

/// The loop devices that appeared and went from `before` to `now`.
pub fn loop_changes(before: &Loops, now: &Loops) -> (Vec<LoopOf>, Vec<LoopOf>) {
    let flat = |m: &Loops| -> BTreeSet<LoopOf> {
        m.iter()
            .flat_map(|(l, v)| v.iter().map(move |o| (l.clone(), o.clone())))
            .collect()
    };
    let (b, a) = (flat(before), flat(now));
    (
        a.difference(&b).cloned().collect(),
        b.difference(&a).cloned().collect(),
    )
}

/// `m` without `label`'s entry (every entry: `None`): its next check takes
/// what it finds as predating protection.
pub fn without<T: Clone>(
    m: &BTreeMap<String, Vec<T>>,
    label: Option<&str>,
) -> BTreeMap<String, Vec<T>> {
    match label {
        None => BTreeMap::new(),
        Some(l) => m
            .iter()
            .filter(|(k, _)| *k != l)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    }
}

/// What appeared and what went from `before` to `now`.
pub fn changes(before: &Exposed, now: &Exposed) -> (Vec<Found>, Vec<Found>) {
    let flat = |m: &Exposed| -> BTreeSet<(String, u32)> {
        m.iter()
            .flat_map(|(l, v)| v.iter().map(move |o| (l.clone(), o.pid)))
            .collect()
    };
    let (b, a) = (flat(before), flat(now));
    let pick = |m: &Exposed, keys: &BTreeSet<(String, u32)>| {
        m.iter()
            .flat_map(|(l, v)| v.iter().map(move |o| (l.clone(), o.clone())))
            .filter(|(l, o)| keys.contains(&(l.clone(), o.pid)))
            .collect::<Vec<_>>()
    };
    let new = pick(now, &a.difference(&b).cloned().collect());
    let gone = pick(before, &b.difference(&a).cloned().collect());
    (new, gone)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o(pid: u32) -> Opener {
        Opener {
            pid,
            comm: "dd".into(),
            fd: 0,
            path: "shared writable mapping 1-2".into(),
            device: "7:0".into(),
        }
    }

    #[test]
    fn appear_and_go() {
        let one = Exposed::from([("DATA1".to_string(), vec![o(12)])]);
        let (n, g) = changes(&Exposed::new(), &one);
        assert_eq!((n.len(), g.len()), (1, 0));
        assert_eq!(
            lines(&one),
            ["DATA1 mapped shared-writable by pid 12 (dd) since before protection"]
        );
        // the same again: nothing new
        let (n, g) = changes(&one, &one.clone());
        assert_eq!((n.len(), g.len()), (0, 0));
        let (n, g) = changes(&one, &Exposed::new());
        assert_eq!((n.len(), g[0].1.pid), (0, 12));
        assert!(lines(&Exposed::new()).is_empty());
        // a descriptor's line names the process, its fd and the path
        let fd = Exposed::from([(
            "DATA1".to_string(),
            vec![Opener {
                fd: 5,
                path: "/dev/sdb".into(),
                ..o(13)
            }],
        )]);
        assert_eq!(
            writer_lines(&fd),
            [
                "DATA1 writer open since before protection: pid 13 (dd) fd 5 on /dev/sdb \
              (its writes are refused)"
            ]
        );
        // a protected disk with none: no line
        assert!(writer_lines(&Exposed::from([("DATA2".to_string(), vec![])])).is_empty());
    }

    #[test]
    fn loops_appear_and_go() {
        let lo = |name: &str, backing: &str, read_only| LoopBefore {
            name: name.into(),
            device: "7:0".into(),
            backing: backing.into(),
            read_only,
        };
        let one = Loops::from([("DATA1".to_string(), vec![lo("loop0", "/dev/sdb", false)])]);
        assert_eq!(
            loop_lines(&one),
            [
                "loop0 over DATA1 (backing file /dev/sdb), set up before protection: \
              its writes are judged as the disk's"
            ]
        );
        let ro = Loops::from([("DATA1".to_string(), vec![lo("loop0", "/dev/sdb", true)])]);
        assert!(loop_lines(&ro)[0].contains("(backing file /dev/sdb, read-only)"));
        let (n, g) = loop_changes(&Loops::new(), &one);
        assert_eq!((n.len(), g.len(), n[0].0.as_str()), (1, 0, "DATA1"));
        assert_eq!(loop_changes(&one, &one.clone()), (vec![], vec![]));
        // the same name bound again to another file: one went, one came
        let again = Loops::from([("DATA1".to_string(), vec![lo("loop0", "/dev/sdc", false)])]);
        let (n, g) = loop_changes(&one, &again);
        assert_eq!(
            (n[0].1.backing.as_str(), g[0].1.backing.as_str()),
            ("/dev/sdc", "/dev/sdb")
        );
        let (n, g) = loop_changes(&one, &Loops::new());
        assert_eq!((n.len(), g[0].1.name.as_str()), (0, "loop0"));
        assert!(loop_lines(&Loops::from([("DATA2".to_string(), vec![])])).is_empty());
        // a protection change forgets the label's entry (all: every one)
        let two = Loops::from([
            ("DATA1".to_string(), vec![lo("loop0", "/dev/sdb", false)]),
            ("DATA2".to_string(), vec![]),
        ]);
        assert_eq!(
            without(&two, Some("DATA2")).keys().collect::<Vec<_>>(),
            ["DATA1"]
        );
        assert!(without(&two, None).is_empty());
    }
}
