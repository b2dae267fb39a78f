use super::*;
use std::fs;

/// The running system's procfs.
fn proc() -> PathBuf {
    asmguard_paths::Paths::default().proc
}

fn ctr(name: &str, patterns: &[&str]) -> Container {
    Container {
        name: name.into(),
        cgroup: patterns.iter().map(|s| s.to_string()).collect(),
        allow_all: false,
        allow_users: vec![],
        allow_groups: vec![],
        present: vec![],
        owner: None,
        group: None,
        mode: None,
        admin_group: None,
        admin: false,
    }
}

#[test]
fn glob() {
    assert!(glob_match("lxc.payload.rac1", "lxc.payload.rac1"));
    assert!(!glob_match("lxc.payload.rac1", "lxc.payload.rac10"));
    assert!(!glob_match(
        "lxc.payload.rac1",
        "lxc.payload.rac1/init.scope"
    ));
    assert!(glob_match(
        "machine.slice/libpod-*.scope",
        "machine.slice/libpod-ab12.scope"
    ));
    assert!(glob_match(
        "machine.slice/libpod-*.scope",
        "machine.slice/libpod-.scope"
    ));
    assert!(!glob_match(
        "machine.slice/libpod-*.scope",
        "machine.slice/libpod-conmon-x.scope/y"
    ));
    // `*` stays within one component.
    assert!(!glob_match("machine.slice/*", "machine.slice/a/b"));
    assert!(!glob_match("*", "a/b"));
    assert!(glob_match("*", "a"));
    assert!(glob_match("a*b*c", "aXbYbZc"));
    assert!(!glob_match("a*b*c", "aXbYbZ"));
    assert!(glob_match("**x", "x"));
    assert!(!glob_match("", "a"));
}

#[test]
fn path_in_matches_ancestors() {
    let c = ctr(
        "rac1",
        &["lxc.payload.rac1", "machine.slice/machine-*.scope"],
    );
    assert!(path_in(&c, "lxc.payload.rac1"));
    assert!(path_in(&c, "/lxc.payload.rac1/init.scope"));
    assert!(path_in(
        &c,
        "machine.slice/machine-rac1.scope/payload/system.slice"
    ));
    assert!(!path_in(&c, "lxc.payload.rac10"));
    assert!(!path_in(&c, "machine.slice"));
    assert!(!path_in(&c, ""));
}

#[test]
fn idmap_parse_and_translate() {
    let m = IdMap::parse("         0     100000      65536\n     65536      5000          1\n")
        .unwrap();
    assert_eq!(m.0, vec![(0, 100000, 65536), (65536, 5000, 1)]);
    assert_eq!(m.to_host(0), Some(100000));
    assert_eq!(m.to_host(54331), Some(154331));
    assert_eq!(m.to_host(65535), Some(165535));
    assert_eq!(m.to_host(65536), Some(5000));
    assert_eq!(m.to_host(65537), None);
    assert_eq!(m.to_inside(154331), Some(54331));
    assert_eq!(m.to_inside(5000), Some(65536));
    assert_eq!(m.to_inside(99999), None);
    assert_eq!(m.to_inside(0), None);
    assert!(!m.is_identity());
    let id = IdMap::parse("0 0 4294967295\n").unwrap();
    assert!(id.is_identity());
    assert_eq!(id, IdMap::identity());
    assert_eq!(id.to_host(54331), Some(54331));
    assert_eq!(id.to_host(u32::MAX - 1), Some(u32::MAX - 1));
    assert_eq!(id.to_host(u32::MAX), None);
    // An extent reaching past u32 is cut, never wrapped.
    let m = IdMap::parse("10 4294967290 100\n").unwrap();
    assert_eq!(m.to_host(15), Some(u32::MAX));
    assert_eq!(m.to_host(16), None);
    assert_eq!(IdMap::parse("").unwrap(), IdMap(vec![]));
    assert_eq!(IdMap::parse("\n").unwrap(), IdMap(vec![]));
    for bad in ["0 1", "0 1 2 3", "a 1 2", "0 1 0", "-1 0 1"] {
        let e = IdMap::parse(bad).unwrap_err();
        assert!(e.contains("line 1") && !e.contains('\n'), "{bad}: {e}");
    }
}

#[test]
fn names_from_a_root() {
    let d = tempfile::tempdir().unwrap();
    fs::create_dir(d.path().join("etc")).unwrap();
    fs::write(
        d.path().join("etc/passwd"),
        "root:x:0:0:root:/root:/bin/bash\n# grid:x:1:1\ngrid:x:54331:54321::/home/grid:/bin/bash\noracle:x:54321:54321::/:/bin/sh\n",
    )
    .unwrap();
    fs::write(
        d.path().join("etc/group"),
        "root:x:0:\noinstall:x:54321:\nasmadmin:x:54329:grid\n",
    )
    .unwrap();
    assert_eq!(inside_id(d.path(), "passwd", "grid"), Ok(54331));
    assert_eq!(inside_id(d.path(), "passwd", "oracle"), Ok(54321));
    assert_eq!(inside_id(d.path(), "passwd", "77"), Ok(77));
    assert_eq!(inside_id(d.path(), "group", "asmadmin"), Ok(54329));
    let e = inside_id(d.path(), "passwd", "intruder").unwrap_err();
    assert!(e.contains("no user \"intruder\""), "{e}");
    let e = inside_id(d.path(), "group", "grid").unwrap_err();
    assert!(e.contains("no group \"grid\""), "{e}");
    // A symlink would resolve against the daemon's root: refused.
    fs::remove_file(d.path().join("etc/group")).unwrap();
    std::os::unix::fs::symlink("/etc/group", d.path().join("etc/group")).unwrap();
    let e = inside_id(d.path(), "group", "root").unwrap_err();
    assert!(e.contains("cannot open"), "{e}");
    // A FIFO would block: refused without blocking.
    nix::unistd::mkfifo(
        &d.path().join("etc/passwd2"),
        Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    let e = read_db(d.path(), "passwd2").unwrap_err();
    assert!(e.contains("not a regular file"), "{e}");
}

#[test]
fn found_translates_through_its_maps() {
    let me = std::process::id();
    let f = Found {
        name: "rac1".into(),
        cgroups: vec![],
        pid: Some(me),
        uid_map: IdMap::parse("0 100000 65536").unwrap(),
        gid_map: IdMap::parse("0 200000 1000").unwrap(),
        tasks: 1,
        proc: proc(),
    };
    // Our own root's passwd has root (0).
    assert_eq!(host_uid(&f, "root"), Ok(100000));
    assert_eq!(host_uid(&f, "54331"), Ok(154331));
    assert_eq!(host_gid(&f, "root"), Ok(200000));
    let e = host_gid(&f, "54329").unwrap_err();
    assert!(e.contains("rac1") && e.contains("not mapped"), "{e}");
    let none = Found { pid: None, ..f };
    let e = host_uid(&none, "grid").unwrap_err();
    assert!(e.contains("no process yet"), "{e}");
}

#[test]
fn find_in_a_tree() {
    let d = tempfile::tempdir().unwrap();
    let r = d.path();
    for p in [
        "lxc.payload.rac1/init.scope",
        "machine.slice/libpod-aa.scope",
        "machine.slice/libpod-bb.scope",
        "machine.slice/libpod-conmon-aa.scope",
        "machine.slice/other",
    ] {
        fs::create_dir_all(r.join(p)).unwrap();
    }
    fs::write(
        r.join("machine.slice/libpod-conmon-aa.scope/cgroup.procs"),
        "1\n",
    )
    .unwrap();
    let c = ctr("pods", &["machine.slice/libpod-*.scope", "nothing/here"]);
    let f = find(&proc(), r, &c);
    let paths: Vec<&str> = f.cgroups.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        [
            "machine.slice/libpod-aa.scope",
            "machine.slice/libpod-bb.scope",
            "machine.slice/libpod-conmon-aa.scope"
        ]
    );
    let ino = fs::metadata(r.join("machine.slice/libpod-aa.scope"))
        .unwrap()
        .ino();
    assert_eq!(f.cgroups[0].1, ino);
    // Empty cgroups: no process yet.
    let c = ctr("rac1", &["lxc.payload.rac1"]);
    let f = find(&proc(), r, &c);
    assert_eq!(f.cgroups.len(), 1);
    assert_eq!(f.pid, None);
    assert!(f.uid_map.0.is_empty());
    // Our process (the host's pid namespace) in a cgroup below: not the
    // container's (a runtime's supervisor, or a first process before it made
    // its namespaces): still no process.
    let me = std::process::id();
    let procs = r.join("lxc.payload.rac1/init.scope/cgroup.procs");
    fs::write(&procs, format!("{me}\n")).unwrap();
    let f = find(&proc(), r, &c);
    assert_eq!(f.pid, None);
    // A privileged container's process (the host's user namespace, a pid
    // namespace of its own): the identity maps, even beside a process of the
    // container in a user namespace of its own (where it may call itself
    // grid). Needs root (unshare --pid).
    let spawn = |args: &[&str]| -> Option<(std::process::Child, u32)> {
        let mut child = std::process::Command::new("unshare")
            .args(args)
            .stderr(std::process::Stdio::null())
            .spawn()
            .ok()?;
        let t0 = std::time::Instant::now();
        // the process unshare forked, in the new pid namespace
        let inner = loop {
            let kids = fs::read_to_string(format!("/proc/{0}/task/{0}/children", child.id()))
                .unwrap_or_default();
            // forked, and its maps written (unshare writes them after the
            // fork: until then find() rightly sees no usable process)
            if let Some(k) = kids.split_whitespace().next() {
                let mapped = fs::read_to_string(format!("/proc/{k}/uid_map"))
                    .is_ok_and(|m| !m.trim().is_empty());
                if mapped {
                    break k.parse().ok();
                }
            }
            if t0.elapsed() > Duration::from_secs(2) {
                break None;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        match inner {
            Some(k) => Some((child, k)),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                None
            }
        }
    };
    let privileged = spawn(&["--pid", "--fork", "sleep", "5"]);
    let nested = spawn(&["--pid", "--fork", "--user", "--map-root-user", "sleep", "5"]);
    {
        let p = privileged.as_ref().expect("unshare --pid (root)").1;
        let n = nested.as_ref().expect("unshare --pid --user (root)").1;
        // the nested one alone: its own maps (the outermost non-host)
        fs::write(&procs, format!("{me}\n{n}\n")).unwrap();
        let f = find(&proc(), r, &c);
        assert_eq!(f.pid, Some(n));
        assert!(!f.uid_map.is_identity());
        // beside a process of the host's user namespace: the identity maps
        fs::write(&procs, format!("{me}\n{n}\n{p}\n")).unwrap();
        let f = find(&proc(), r, &c);
        assert_eq!(f.pid, Some(p));
        assert!(f.uid_map.is_identity() && f.gid_map.is_identity());
        assert_eq!(host_uid(&f, "root"), Ok(0));
    }
    for (mut child, _) in [privileged, nested].into_iter().flatten() {
        let _ = child.kill();
        let _ = child.wait();
    }
    assert!(find(&proc(), r, &ctr("x", &["absent"])).cgroups.is_empty());
}

#[test]
fn namespaces_of_ourselves() {
    let me = std::process::id();
    assert!(!in_container(&proc(), me));
    // A pid that cannot exist: counted as in a container (the restrictive answer).
    assert!(in_container(&proc(), u32::MAX));
    assert!(on_host(&proc(), me) && !on_host(&proc(), u32::MAX));
    assert!(!has_sys_admin(&proc(), u32::MAX));
    let ours = ns_id(Path::new("/proc/self/ns/user")).unwrap();
    assert_eq!(userns_depth(&proc(), me, ours), Some(0));
    assert_eq!(
        container_of(&proc(), Path::new("/sys/fs/cgroup"), &[], me),
        None
    );
}

/// A process in a user namespace of its own (mapped to root) or a cgroup
/// namespace of its own is not on the host, though its pid namespace is; one
/// with its capabilities dropped has no CAP_SYS_ADMIN.
#[test]
fn on_host_asks_every_namespace_and_capabilities() {
    use std::process::{Command, Stdio};
    if !has_sys_admin(&proc(), std::process::id()) {
        eprintln!("skipped: needs CAP_SYS_ADMIN");
        return;
    }
    assert!(has_sys_admin(&proc(), std::process::id()));
    let spawn = |args: &[&str]| {
        Command::new(args[0])
            .args(&args[1..])
            .stdin(Stdio::null())
            .spawn()
            .unwrap()
    };
    let cases: [(&[&str], bool, bool); 4] = [
        (&["sleep", "30"], true, true),
        (
            &["unshare", "--user", "--map-root-user", "sleep", "30"],
            false,
            true,
        ),
        (
            &["unshare", "--cgroup", "--mount", "sleep", "30"],
            false,
            true,
        ),
        (
            &[
                "setpriv",
                "--inh-caps=-all",
                "--bounding-set=-all",
                "sleep",
                "30",
            ],
            true,
            false,
        ),
    ];
    for (args, host, admin) in cases {
        let mut c = spawn(args);
        let pid = c.id();
        // wait until the program runs (unshare and setpriv exec it)
        let t0 = std::time::Instant::now();
        while fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default() != "sleep\n" {
            assert!(
                t0.elapsed() < Duration::from_secs(5),
                "{args:?} did not start"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(on_host(&proc(), pid), host, "{args:?}");
        assert_eq!(has_sys_admin(&proc(), pid), admin, "{args:?}");
        let _ = c.kill();
        let _ = c.wait();
    }
}

#[test]
fn watcher_sees_cgroups_come_and_go() {
    let d = tempfile::tempdir().unwrap();
    let r = d.path();
    fs::create_dir_all(r.join("machine.slice")).unwrap();
    let c = ctr("pods", &["machine.slice/libpod-*.scope"]);
    let mut w = Watcher::new(r, std::slice::from_ref(&c)).unwrap();
    assert_eq!(w.watched(), 2, "the root and machine.slice");
    assert!(!w.changed(Duration::from_millis(50)));
    // Elsewhere: not watched.
    fs::create_dir_all(r.join("system.slice/x")).unwrap();
    assert!(!w.changed(Duration::from_millis(50)));
    fs::create_dir_all(r.join("machine.slice/machine-x.scope")).unwrap();
    assert!(!w.changed(Duration::from_millis(50)));
    fs::create_dir(r.join("machine.slice/libpod-aa.scope")).unwrap();
    fs::write(
        r.join("machine.slice/libpod-aa.scope/cgroup.events"),
        "populated 0\n",
    )
    .unwrap();
    assert!(w.changed(Duration::from_secs(1)));
    assert_eq!(w.watched(), 3, "and the match's cgroup.events");
    fs::write(
        r.join("machine.slice/libpod-aa.scope/cgroup.events"),
        "populated 1\n",
    )
    .unwrap();
    assert!(w.changed(Duration::from_secs(1)));
    fs::remove_file(r.join("machine.slice/libpod-aa.scope/cgroup.events")).unwrap();
    fs::remove_dir(r.join("machine.slice/libpod-aa.scope")).unwrap();
    assert!(w.changed(Duration::from_secs(1)));
    while w.changed(Duration::from_millis(50)) {}
    // A parent made after the watcher: followed.
    fs::remove_dir_all(r.join("machine.slice")).unwrap();
    assert!(w.changed(Duration::from_secs(1)));
    fs::create_dir(r.join("machine.slice")).unwrap();
    assert!(w.changed(Duration::from_secs(1)));
    fs::create_dir(r.join("machine.slice/libpod-bb.scope")).unwrap();
    assert!(w.changed(Duration::from_secs(1)));
}

/// A read that does not answer costs the caller its deadline once; while it
/// is still stuck, later tries of the same key fail (within the overlap grace
/// while it is young, at once after; one thread, not one per try); other keys
/// are not held up; once it returns, the key works again.
#[test]
fn a_read_that_does_not_answer_costs_its_deadline_once() {
    use std::sync::mpsc;
    use std::time::Instant;
    let (release, wait) = mpsc::channel::<()>();
    let t0 = Instant::now();
    let r = within("stuck", Duration::from_millis(100), move || {
        let _ = wait.recv();
        Ok(1u32)
    });
    let took = t0.elapsed();
    assert!(r.unwrap_err().contains("no answer within 100 ms"));
    assert!(
        took >= Duration::from_millis(100) && took < Duration::from_secs(2),
        "{took:?}"
    );
    let t0 = Instant::now();
    let r = within("stuck", Duration::from_secs(5), || Ok(2u32));
    assert!(r.unwrap_err().contains("has not returned yet"));
    let took = t0.elapsed();
    assert!(took < OVERLAP_GRACE + Duration::from_secs(1), "{took:?}");
    // stuck past the grace: a stall, the next try fails at once
    std::thread::sleep(OVERLAP_GRACE);
    let t0 = Instant::now();
    let r = within("stuck", Duration::from_secs(5), || Ok(2u32));
    assert!(r.unwrap_err().contains("has not returned yet"));
    assert!(
        t0.elapsed() < Duration::from_millis(50),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(within("other", Duration::from_secs(5), || Ok(3u32)), Ok(3));
    release.send(()).unwrap();
    let t0 = Instant::now();
    loop {
        match within("stuck", Duration::from_secs(5), || Ok(4u32)) {
            Ok(v) => {
                assert_eq!(v, 4);
                break;
            }
            Err(_) => {
                assert!(
                    t0.elapsed() < Duration::from_secs(5),
                    "the key never came back"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }
    assert_eq!(
        within("err", Duration::from_secs(5), || Err::<u32, _>(
            "bad".into()
        )),
        Err("bad".into())
    );
}

/// Two tries of one key at once (a SIGHUP's resolution and a cgroup event's):
/// the later waits for the earlier's quick read instead of calling it a stall.
#[test]
fn overlapping_quick_reads_of_one_key_both_answer() {
    use std::sync::mpsc;
    let (started, is_started) = mpsc::channel::<()>();
    let first = std::thread::spawn(move || {
        within("overlap", Duration::from_secs(5), move || {
            started.send(()).unwrap();
            std::thread::sleep(Duration::from_millis(60));
            Ok(1u32)
        })
    });
    is_started.recv().unwrap();
    assert_eq!(
        within("overlap", Duration::from_secs(5), || Ok(2u32)),
        Ok(2)
    );
    assert_eq!(first.join().unwrap(), Ok(1));
}

#[test]
fn a_read_without_answer_in_time_gets_the_last_answer_and_a_refusal_forgets_it() {
    let d = Duration::from_millis(50);
    // no answer ever: silence is an error
    assert!(within_or_last("lastkey-a", "last-a", d, || {
        std::thread::sleep(Duration::from_millis(300));
        Ok(7)
    })
    .is_err());
    std::thread::sleep(Duration::from_millis(400));
    // the late answer above was remembered: a slow read now gets it
    assert_eq!(
        within_or_last("lastkey-a", "last-a", d, || {
            std::thread::sleep(Duration::from_millis(300));
            Ok(8)
        }),
        Ok(7)
    );
    std::thread::sleep(Duration::from_millis(400));
    // a quick answer is the answer (and is remembered)
    assert_eq!(within_or_last("lastkey-a", "last-a", d, || Ok(9)), Ok(9));
    // a refusal is the answer, never the remembered value, and forgets it
    assert_eq!(
        within_or_last("lastkey-a", "last-a", d, || Err("no such group".into())),
        Err("no such group".to_string())
    );
    assert!(within_or_last("lastkey-a", "last-a", d, || {
        std::thread::sleep(Duration::from_millis(300));
        Ok(10)
    })
    .is_err());
}

/// The process lookups read the procfs their caller names (its
/// `Paths::proc`), never the running system's: a pid no system has is on the
/// host, an administrator and in a container in a tree that says so.
#[test]
fn process_lookups_read_the_callers_procfs() {
    let d = tempfile::tempdir().unwrap();
    let fake = asmguard_paths::Paths::under(d.path()).proc;
    let pid = u32::MAX - 1;
    let (me, it) = (fake.join("self/ns"), fake.join(format!("{pid}/ns")));
    fs::create_dir_all(&me).unwrap();
    fs::create_dir_all(&it).unwrap();
    for ns in ["pid", "user", "cgroup"] {
        fs::write(me.join(ns), ns).unwrap();
        fs::hard_link(me.join(ns), it.join(ns)).unwrap();
    }
    fs::write(
        fake.join(format!("{pid}/status")),
        "CapEff:\t0000000000200000\n",
    )
    .unwrap();
    fs::write(fake.join(format!("{pid}/cgroup")), "0::/lxc.payload.rac1\n").unwrap();
    let cgroups = d.path().join("cgroup");
    fs::create_dir_all(cgroups.join("lxc.payload.rac1")).unwrap();
    let cs = [ctr("rac1", &["lxc.payload.rac1"])];
    assert!(on_host(&fake, pid) && has_sys_admin(&fake, pid) && !in_container(&fake, pid));
    assert_eq!(container_of(&fake, &cgroups, &cs, pid), Some(&cs[0]));
    // the running system has no such process
    assert!(!on_host(&proc(), pid) && !has_sys_admin(&proc(), pid));
    assert_eq!(container_of(&proc(), &cgroups, &cs, pid), None);
    // a container's files are read below the procfs it was found in
    fs::create_dir_all(fake.join(format!("{pid}/root/etc"))).unwrap();
    fs::write(
        fake.join(format!("{pid}/root/etc/passwd")),
        "grid:x:54321:54321::/:/bin/sh\n",
    )
    .unwrap();
    let f = Found {
        name: "rac1".into(),
        pid: Some(pid),
        uid_map: IdMap::parse("0 100000 65536").unwrap(),
        proc: fake.clone(),
        ..Found::default()
    };
    assert_eq!(host_uid(&f, "grid"), Ok(154321));
    assert!(read_container_db(&proc(), pid, "passwd").is_err());
}
