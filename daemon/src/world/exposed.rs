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

/// One line of the log of an exposure.
pub fn line(label: &str, o: &Opener) -> String {
    format!(
        "{label} mapped shared-writable by pid {} ({}) since before protection",
        o.pid, o.comm
    )
}

/// `status`'s `exposed` or `writers_before`: one per (disk, process).
pub fn opened(e: &Exposed) -> Vec<asmguard_proto::OpenedBefore> {
    e.iter()
        .flat_map(|(l, v)| {
            v.iter().map(move |o| asmguard_proto::OpenedBefore {
                label: l.clone(),
                pid: o.pid,
                comm: o.comm.clone(),
                fd: o.fd,
                path: o.path.clone(),
                device: o.device,
            })
        })
        .collect()
}

/// A loop device over a protected disk, set up before its protection (by
/// path, or bound to a descriptor of the disk): the protocol's record, kept
/// as `status` and the events show it.
pub use asmguard_proto::LoopBefore;

/// Label -> the loop devices over it set up before its protection.
pub type Loops = BTreeMap<String, Vec<LoopBefore>>;

/// `status`'s `loops_before`: the loop devices set up before protection.
pub fn loops(e: &Loops) -> Vec<LoopBefore> {
    e.values().flatten().cloned().collect()
}

/// The loop devices that appeared and went from `before` to `now`.
pub fn loop_changes(before: &Loops, now: &Loops) -> (Vec<LoopBefore>, Vec<LoopBefore>) {
    let flat = |m: &Loops| -> BTreeSet<LoopBefore> { m.values().flatten().cloned().collect() };
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
    use asmguard_devices::KernelDev;

    fn o(pid: u32) -> Opener {
        Opener {
            pid,
            comm: "dd".into(),
            fd: 0,
            path: "shared writable mapping 1-2".into(),
            device: KernelDev::new(7, 0).unwrap(),
        }
    }

    #[test]
    fn appear_and_go() {
        let one = Exposed::from([("DATA1".to_string(), vec![o(12)])]);
        let (n, g) = changes(&Exposed::new(), &one);
        assert_eq!((n.len(), g.len()), (1, 0));
        let v = opened(&one);
        assert_eq!(
            (v.len(), v[0].label.as_str(), v[0].pid, v[0].comm.as_str()),
            (1, "DATA1", 12, "dd")
        );
        assert_eq!(
            line("DATA1", &o(12)),
            "DATA1 mapped shared-writable by pid 12 (dd) since before protection"
        );
        // the same again: nothing new
        let (n, g) = changes(&one, &one.clone());
        assert_eq!((n.len(), g.len()), (0, 0));
        let (n, g) = changes(&one, &Exposed::new());
        assert_eq!((n.len(), g[0].1.pid), (0, 12));
        assert!(opened(&Exposed::new()).is_empty());
        // a descriptor names the process, its fd and the path
        let fd = Exposed::from([(
            "DATA1".to_string(),
            vec![Opener {
                fd: 5,
                path: "/dev/sdb".into(),
                ..o(13)
            }],
        )]);
        let v = opened(&fd);
        assert_eq!(
            (
                v[0].pid,
                v[0].fd,
                v[0].path.as_str(),
                v[0].device.to_string()
            ),
            (13, 5, "/dev/sdb", "7:0".to_string())
        );
        // a protected disk with none: no entry
        assert!(opened(&Exposed::from([("DATA2".to_string(), vec![])])).is_empty());
    }

    #[test]
    fn loops_appear_and_go() {
        let lo = |name: &str, backing: &str, read_only| LoopBefore {
            label: "DATA1".into(),
            name: name.into(),
            device: KernelDev::new(7, 0).unwrap(),
            backing: backing.into(),
            read_only,
        };
        let one = Loops::from([("DATA1".to_string(), vec![lo("loop0", "/dev/sdb", false)])]);
        assert_eq!(
            loops(&one),
            [LoopBefore {
                label: "DATA1".into(),
                name: "loop0".into(),
                device: KernelDev::new(7, 0).unwrap(),
                backing: "/dev/sdb".into(),
                read_only: false,
            }]
        );
        assert_eq!(
            lo("loop0", "/dev/sdb", false).to_string(),
            "loop0 over DATA1 (backing file /dev/sdb), set up before protection: \
             its writes are judged as the disk's"
        );
        let ro = Loops::from([("DATA1".to_string(), vec![lo("loop0", "/dev/sdb", true)])]);
        assert!(loops(&ro)[0].read_only);
        let (n, g) = loop_changes(&Loops::new(), &one);
        assert_eq!((n.len(), g.len(), n[0].label.as_str()), (1, 0, "DATA1"));
        assert_eq!(loop_changes(&one, &one.clone()), (vec![], vec![]));
        // the same name bound again to another file: one went, one came
        let again = Loops::from([("DATA1".to_string(), vec![lo("loop0", "/dev/sdc", false)])]);
        let (n, g) = loop_changes(&one, &again);
        assert_eq!(
            (n[0].backing.as_str(), g[0].backing.as_str()),
            ("/dev/sdc", "/dev/sdb")
        );
        let (n, g) = loop_changes(&one, &Loops::new());
        assert_eq!((n.len(), g[0].name.as_str()), (0, "loop0"));
        assert!(loops(&Loops::from([("DATA2".to_string(), vec![])])).is_empty());
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
