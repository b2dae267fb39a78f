//! asmguardd and containers (issue 23, points 2 and 4), with stand-in containers
//! made of the kernel's pieces (a cgroup-v2 directory, user, pid and mount
//! namespaces: `TestCgroup`): the device nodes made for a container in
//! `/dev/asmguard/containers/<name>/` (owner through its uid map, made, fixed,
//! removed), and `asmguardctl` run inside a container over the socket.

use asmguard_host_tests::*;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;

/// A container's node directory, removed at the end of the test.
struct NodeDir(PathBuf);

impl NodeDir {
    fn of(name: &str) -> NodeDir {
        NodeDir(Path::new("/dev/asmguard/containers").join(name))
    }
}

impl Drop for NodeDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// (device number, uid, gid, mode) of the block node at `p`, or None.
fn node(p: &Path) -> Option<(u64, u32, u32, u32)> {
    let m = std::fs::symlink_metadata(p).ok()?;
    m.file_type()
        .is_block_device()
        .then(|| (m.rdev(), m.uid(), m.gid(), m.mode() & 0o7777))
}

fn rdev(p: &Path) -> u64 {
    std::fs::metadata(p).unwrap().rdev()
}

#[track_caller]
fn wait(limit: Duration, what: &str, d: &Daemon, f: impl Fn() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(
            t0.elapsed() < limit,
            "{what}: not within {limit:?}: {}",
            d.log_text()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn container(name: &str, cg: &TestCgroup, rest: &str) -> String {
    format!(
        "\n[[container]]\nname = {name:?}\ncgroup = [{:?}]\n{rest}\n",
        cg.rel
    )
}

#[test]
fn container_nodes_follow_labels_containers_and_tampering() {
    let Some(_g) = lock() else { return };
    let a = Loop::new(64 * MIB);
    a.write_dev(0, &asmlib_block("PRES1"));
    let b = Loop::new(64 * MIB);
    b.write_dev(0, &asmlib_block("PRES2"));
    let cg = TestCgroup::new("rac1");
    let name = format!("hosttest{}rac1", std::process::id());
    let dir = NodeDir::of(&name);
    let extra = container(
        &name,
        &cg,
        "present = [\"PRES1\"]\nowner = \"grid\"\ngroup = \"asmadmin\"\nmode = \"0640\"",
    );
    let d = Daemon::start(&[&a.name, &b.name], &extra);
    let p1 = dir.0.join("PRES1");
    let p2 = dir.0.join("PRES2");

    // no process in the container yet: its directory, no node, and why
    assert!(dir.0.is_dir(), "{}", d.log_text());
    assert_eq!(node(&p1), None);
    let v = d.lsdsk();
    let np = v["not_presented"].as_array().unwrap();
    assert!(
        np.iter().any(|n| n["container"] == name.as_str()
            && n["reason"].as_str().unwrap().contains("no process")),
        "{v:#}"
    );
    let st = d.ctl(&["status"]).ok();
    assert!(
        st.stdout.contains("not presented: container"),
        "{}",
        st.stdout
    );

    // the container starts (user namespace 0..65535 -> 100000..): the node
    // comes within a second, owned by its grid and asmadmin as the host sees them
    let ctr = cg.start(Some(100000), true);
    let t0 = Instant::now();
    wait(Duration::from_secs(3), "the node", &d, || {
        node(&p1).is_some()
    });
    eprintln!("node made {:?} after the container started", t0.elapsed());
    assert_eq!(
        node(&p1),
        Some((rdev(&a.dev), 154331, 154329, 0o640)),
        "{}",
        d.log_text()
    );
    assert_eq!(node(&p2), None, "PRES2 is not presented");
    let v = d.lsdsk();
    assert_eq!(
        disk(&v, "PRES1")["presented"],
        serde_json::json!([{"container": name, "path": p1.display().to_string(),
                            "uid": 154331, "gid": 154329, "mode": "0640"}])
    );
    assert_eq!(disk(&v, "PRES2")["presented"], serde_json::json!([]));
    assert_eq!(v["not_presented"], serde_json::json!([]), "{v:#}");
    let text = d.ctl(&["lsdsk"]).ok().stdout;
    assert!(
        text.contains(&format!(
            "presented: PRES1 to container {name} as {}",
            p1.display()
        )),
        "{text}"
    );

    // the container's grid reads the disk through it; its intruder may not
    let path = p1.display().to_string();
    let dd = [
        "dd",
        &format!("if={path}"),
        "of=/dev/null",
        "bs=4096",
        "count=1",
    ];
    let o = ctr.run_as(54331, 54321, &[54329], &dd);
    assert_eq!(o.code, 0, "grid in the container: {o:?}");
    let o = ctr.run_as(1001, 1001, &[], &dd);
    assert!(
        o.code != 0 && o.stderr.contains("Permission denied"),
        "intruder in the container: {o:?}"
    );

    // tampered with: owner and mode, then the device number: fixed by the next model
    std::os::unix::fs::lchown(&p1, Some(0), Some(0)).unwrap();
    std::fs::set_permissions(&p1, std::os::unix::fs::PermissionsExt::from_mode(0o666)).unwrap();
    d.ctl(&["scan"]).ok();
    assert_eq!(node(&p1), Some((rdev(&a.dev), 154331, 154329, 0o640)));
    std::fs::remove_file(&p1).unwrap();
    nix::sys::stat::mknod(
        &p1,
        nix::sys::stat::SFlag::S_IFBLK,
        nix::sys::stat::Mode::from_bits_truncate(0o666),
        rdev(&b.dev),
    )
    .unwrap();
    d.ctl(&["scan"]).ok();
    assert_eq!(node(&p1), Some((rdev(&a.dev), 154331, 154329, 0o640)));
    assert!(d.log_text().contains("fixed"), "{}", d.log_text());

    // the label goes: its node goes, the directory stays
    d.ctl(&["unlabel", "PRES1"]).ok();
    assert_eq!(node(&p1), None);
    assert!(dir.0.is_dir());

    // something an administrator put there is left alone, and said so
    std::fs::write(&p1, "admin's").unwrap();
    d.ctl(&["label", "PRES1", &a.dev.display().to_string()])
        .ok();
    assert_eq!(std::fs::read_to_string(&p1).unwrap(), "admin's");
    let v = d.lsdsk();
    let np = &v["not_presented"];
    assert!(
        np.as_array()
            .unwrap()
            .iter()
            .any(|n| n["label"] == "PRES1" && n["reason"].as_str().unwrap().contains("left alone")),
        "{v:#}"
    );
    assert!(d
        .log_text()
        .contains("regular file, not a node asmguardd made"));
    std::fs::remove_file(&p1).unwrap();
    d.ctl(&["scan"]).ok();
    assert_eq!(node(&p1), Some((rdev(&a.dev), 154331, 154329, 0o640)));

    // the container stops: no process, no node (within a second); the directory stays
    let t0 = Instant::now();
    ctr.stop();
    wait(Duration::from_secs(3), "the node to go", &d, || {
        node(&p1).is_none()
    });
    eprintln!(
        "node removed {:?} after the container stopped",
        t0.elapsed()
    );
    assert!(dir.0.is_dir());
    // and comes back with the container
    let ctr = cg.start(Some(100000), true);
    wait(Duration::from_secs(3), "the node again", &d, || {
        node(&p1).is_some()
    });
    drop(ctr);
}

#[test]
fn asmguardctl_in_a_container_reads_and_changes_state_as_configured() {
    let Some(_g) = lock() else { return };
    let a = Loop::new(64 * MIB);
    a.write_dev(0, &asmlib_block("CTL1"));
    let ro = TestCgroup::new("ro");
    let rw = TestCgroup::new("rw");
    let other = TestCgroup::new("other");
    let (ro_name, rw_name) = ("ro-node", "rw-node");
    // the containers' admin group by name, as they see it (the host has none of that name)
    let extra = format!(
        "{}{}",
        container(ro_name, &ro, "admin_group = \"asmadmin\""),
        container(rw_name, &rw, "admin_group = \"asmadmin\"\nadmin = true")
    );
    let d = Daemon::start(&[&a.name], &extra);
    let sock = d.socket.display().to_string();
    let ctl = ctl_bin().display().to_string();
    let ask = |args: &[&str]| -> Vec<String> {
        let mut v = vec![ctl.clone(), "--socket".into(), sock.clone()];
        v.extend(args.iter().map(|s| s.to_string()));
        v
    };
    let run = |r: &Running, ids: (u32, u32, &[u32]), args: &[&str]| {
        let cmd = ask(args);
        let cmd: Vec<&str> = cmd.iter().map(String::as_str).collect();
        r.run_as(ids.0, ids.1, ids.2, &cmd)
    };
    let root: (u32, u32, &[u32]) = (0, 0, &[]);
    let grid: (u32, u32, &[u32]) = (54331, 54321, &[54329]);
    let intruder: (u32, u32, &[u32]) = (1001, 1001, &[]);
    let refusal = |name: &str| {
        format!(
            "from container {name}: the configuration does not grant it admin rights \
             (admin = true in its [[container]] section)"
        )
    };

    // a configured container, user-namespaced, own pid namespace, admin = false
    let r = ro.start(Some(100000), true);
    for who in [root, grid] {
        let o = run(&r, who, &["lsdsk", "--json"]);
        assert_eq!(o.code, 0, "{o:?}");
        assert!(o.stdout.contains("CTL1"), "{o:?}");
        run(&r, who, &["status"]).ok();
        for args in [
            vec!["rename", "CTL1", "CTL9"],
            vec!["filter", "audit", "CTL1"],
            vec!["label", "CTL8", &a.dev.display().to_string()],
        ] {
            let o = run(&r, who, &args);
            o.refused(4, &["permission denied", &refusal(ro_name)]);
            assert_eq!(o.stderr.lines().count(), 1, "{o:?}");
        }
    }
    let o = run(&r, intruder, &["lsdsk"]);
    o.refused(4, &["permission denied", ro_name]);
    // a user namespace of its own that maps its uid to root, or to grid and
    // asmadmin, changes nothing: ids are translated through the container's map
    for nested in [
        vec!["unshare", "--user", "--map-root-user", "--"],
        vec![
            "unshare",
            "--user",
            "--map-user=54331",
            "--map-group=54329",
            "--",
        ],
    ] {
        let mut cmd = nested.clone();
        let asked = ask(&["lsdsk"]);
        cmd.extend(asked.iter().map(String::as_str));
        let o = r.run_as(1001, 1001, &[], &cmd);
        o.refused(4, &["permission denied", ro_name]);
    }
    assert_eq!(d.labels(), vec!["CTL1"]);
    // the same container privileged (no user namespace): its root is host uid 0,
    // still not the host's root
    drop(r);
    let r = ro.start(None, true);
    run(&r, root, &["lsdsk"]).ok();
    run(&r, root, &["rename", "CTL1", "CTL9"]).refused(4, &[&refusal(ro_name)]);
    drop(r);

    // admin = true: its root and its admin group may change state
    let r = rw.start(Some(200000), true);
    run(&r, root, &["rename", "CTL1", "CTL2"]).ok();
    run(&r, grid, &["rename", "CTL2", "CTL1"]).ok();
    run(&r, grid, &["filter", "audit", "CTL1"]).ok();
    run(&r, grid, &["filter", "enable", "CTL1"]).ok();
    run(&r, intruder, &["rename", "CTL1", "CTL2"]).refused(4, &["permission denied"]);
    assert_eq!(d.labels(), vec!["CTL1"]);
    drop(r);

    // a container no section names: its user-namespaced root is nobody on the
    // host; a privileged one's reads as the host's root would, never changes state
    let r = other.start(Some(300000), true);
    run(&r, root, &["lsdsk"]).refused(4, &["permission denied"]);
    drop(r);
    let r = other.start(None, true);
    run(&r, root, &["lsdsk"]).ok();
    let o = run(&r, root, &["rename", "CTL1", "CTL2"]);
    o.refused(4, &["permission denied", "no [[container]] section"]);
    assert_eq!(d.labels(), vec!["CTL1"]);
    assert!(d.log_text().contains(&format!("(container {ro_name})")));
}

/// Host rights need the host's namespaces and the host's CAP_SYS_ADMIN (issue
/// 32, point 1): a uid 0 peer without CAP_SYS_ADMIN (a `--cap-drop=all`
/// process), one in a user namespace of its own mapped to root, and one in a
/// cgroup namespace of its own with the host's pid namespace (what `podman run
/// --pid=host` makes) read, and are refused every state change with one line.
#[test]
fn host_rights_need_the_hosts_namespaces_and_cap_sys_admin() {
    let Some(_g) = lock() else { return };
    let a = Loop::new(64 * MIB);
    a.write_dev(0, &asmlib_block("PIDH1"));
    let d = Daemon::start(&[&a.name], "");
    let dev = a.dev.display().to_string();
    let peers: [(&str, Vec<&str>); 3] = [
        (
            "capabilities dropped",
            vec!["setpriv", "--inh-caps=-all", "--bounding-set=-all", "--"],
        ),
        (
            "own user namespace mapped to root",
            vec!["unshare", "--user", "--map-root-user", "--"],
        ),
        (
            "host pid namespace, own cgroup and mount namespaces",
            vec!["unshare", "--cgroup", "--mount", "--"],
        ),
    ];
    let ctl = ctl_bin().display().to_string();
    let sock = d.socket.display().to_string();
    let as_peer = |wrap: &[&str], args: &[&str]| {
        let mut c = std::process::Command::new(wrap[0]);
        c.args(&wrap[1..])
            .arg(&ctl)
            .arg("--socket")
            .arg(&sock)
            .args(args);
        run(&mut c)
    };
    for (what, wrap) in &peers {
        for args in [
            vec!["filter", "audit", "PIDH1"],
            vec!["label", "--force", "PIDH2", &dev],
            vec!["unlabel", "PIDH1"],
        ] {
            let o = as_peer(wrap, &args);
            o.refused(4, &["permission denied"]);
            assert_eq!(o.stderr.lines().count(), 1, "{what}: {args:?}: {o:?}");
        }
        let o = as_peer(wrap, &["lsdsk", "--json"]);
        assert_eq!(o.code, 0, "{what}: {o:?}");
        assert!(o.stdout.contains("PIDH1"), "{what}: {o:?}");
        let o = as_peer(wrap, &["status"]);
        assert_eq!(o.code, 0, "{what}: {o:?}");
    }
    // nothing changed: label, mode
    let v = d.lsdsk();
    assert_eq!(d.labels(), vec!["PIDH1"], "{v:#}");
    assert_ne!(disk(&v, "PIDH1")["filter_mode"], "audit", "{v:#}");
    // the host's root with its capabilities still may
    d.ctl(&["filter", "audit", "PIDH1"]).ok();
    assert_eq!(disk(&d.lsdsk(), "PIDH1")["filter_mode"], "audit");
}

/// First come, first kept (issue 32, point 3): a disk managed and presented
/// under a label keeps its node (and the writes of the container's grid)
/// when a second device shows up with the same label; the newcomer is a
/// conflict (`lsdsk`, `--json`, the metric, the journal), never presented;
/// and after a daemon restart (the record in the runtime directory) the
/// first still wins.
#[test]
fn a_planted_duplicate_label_does_not_take_a_presented_disk() {
    let Some(_g) = lock() else { return };
    let a = Loop::new(64 * MIB);
    a.write_dev(0, &asmlib_block("FIRST1"));
    let b = Loop::new(64 * MIB);
    let cg = TestCgroup::new("first");
    let name = format!("hosttest{}first", std::process::id());
    let dir = NodeDir::of(&name);
    let runtime = tempfile::Builder::new()
        .prefix("asmguard-kept-")
        .tempdir()
        .unwrap();
    let extra = format!(
        "[daemon]\nruntime_dir = {:?}\n{}",
        runtime.path().display().to_string(),
        container(
            &name,
            &cg,
            "present = [\"FIRST1\"]\nowner = \"grid\"\ngroup = \"asmadmin\"\nmode = \"0660\"",
        )
    );
    let d = Daemon::start(&[&a.name, &b.name], &extra);
    let ctr = cg.start(Some(100000), true);
    let p1 = dir.0.join("FIRST1");
    wait(Duration::from_secs(3), "the node", &d, || {
        node(&p1).is_some()
    });
    let grid_writes = |r: &Running, what: &str| {
        let o = r.run_as(
            54331,
            54321,
            &[54329],
            &[
                "dd",
                "if=/dev/zero",
                &format!("of={}", p1.display()),
                "bs=4096",
                "seek=16",
                "count=1",
                "oflag=direct",
                "conv=notrunc",
            ],
        );
        assert_eq!(o.code, 0, "{what}: grid's write through the node: {o:?}");
    };
    grid_writes(&ctr, "before");
    let kept_path = a.dev.display().to_string();
    let new_path = b.dev.display().to_string();

    // the newcomer: a second device with the same label
    b.write_dev(0, &asmlib_block("FIRST1"));
    d.ctl(&["scan"]).ok();
    let check = |d: &Daemon, when: &str| {
        let v = d.lsdsk();
        let c = &v["conflicts"][0];
        assert_eq!(c["label"], "FIRST1", "{when}: {v:#}");
        assert_eq!(c["kept"], kept_path.as_str(), "{when}: {v:#}");
        let devs: Vec<&str> = c["devices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_str().unwrap())
            .collect();
        assert!(devs.contains(&new_path.as_str()), "{when}: {v:#}");
        // the first keeps its node, the newcomer has none
        assert_eq!(
            node(&p1).map(|n| n.0),
            Some(rdev(&a.dev)),
            "{when}: {}",
            d.log_text()
        );
        let text = d.ctl(&["lsdsk"]).ok().stdout;
        assert!(
            text.contains(&format!(
                "CONFLICT: label FIRST1 is also on {new_path}: {kept_path} had it first and keeps it"
            )),
            "{when}: {text}"
        );
        assert!(
            text.contains(&format!("presented: FIRST1 to container {name}")),
            "{when}: {text}"
        );
        let port = d.metrics_port.unwrap();
        let m = run(std::process::Command::new("curl")
            .args(["-sf", &format!("http://127.0.0.1:{port}/metrics")]))
        .stdout;
        for (dev, role) in [(&kept_path, "kept"), (&new_path, "newcomer")] {
            let line = format!(
                "asmguard_label_conflict{{label=\"FIRST1\",device=\"{dev}\",role=\"{role}\"}} 1"
            );
            assert!(m.contains(&line), "{when}: {line} not in {m}");
        }
    };
    check(&d, "the newcomer appears");
    grid_writes(&ctr, "with the newcomer there");
    assert!(
        d.log_text().contains("had it first and keeps it"),
        "{}",
        d.log_text()
    );
    // which disk was first is recorded in the runtime directory
    let r = rdev(&a.dev);
    assert_eq!(
        std::fs::read_to_string(runtime.path().join("kept/FIRST1")).unwrap(),
        format!(
            "{}:{}\n",
            nix::sys::stat::major(r),
            nix::sys::stat::minor(r)
        )
    );

    // a restart: the first still wins
    drop(d);
    let d = Daemon::start(&[&a.name, &b.name], &extra);
    wait(
        Duration::from_secs(3),
        "the node after the restart",
        &d,
        || node(&p1).is_some(),
    );
    check(&d, "after a restart");
    grid_writes(&ctr, "after a restart");
    drop(ctr);
}

/// SIGHUP reads the whole file (issue 30): a key that took effect only at
/// the start before (`[paths] mode`, the default of a container's nodes)
/// now takes effect; a key only a restart applies (`[metrics] listen`) keeps
/// its value in force and is named in `status`; a file that does not parse
/// changes nothing.
#[test]
fn sighup_reloads_the_whole_configuration() {
    let Some(_g) = lock() else { return };
    let a = Loop::new(64 * MIB);
    a.write_dev(0, &asmlib_block("HUP1"));
    let cg = TestCgroup::new("hup1");
    let name = format!("hosttest{}hup1", std::process::id());
    let dir = NodeDir::of(&name);
    let d = Daemon::start(&[&a.name], &container(&name, &cg, "present = [\"HUP1\"]"));
    let p = dir.0.join("HUP1");
    let _ctr = cg.start(Some(100000), true);
    wait(Duration::from_secs(3), "the node", &d, || {
        node(&p).is_some()
    });
    // [paths]'s defaults: grid, asmadmin, 0660
    assert_eq!(node(&p), Some((rdev(&a.dev), 154331, 154329, 0o660)));
    let st = d.ctl(&["status", "--json"]).ok().json();
    assert_eq!(st["restart_needed"], serde_json::json!([]), "{st:#}");

    let hup = |d: &Daemon| {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(d.pid() as i32),
            nix::sys::signal::Signal::SIGHUP,
        )
        .unwrap()
    };
    let port = d.metrics_port.unwrap();
    let text = std::fs::read_to_string(&d.config).unwrap();
    let other = free_port();
    let good = text.replace(
        &format!("listen = \"127.0.0.1:{port}\""),
        &format!("listen = \"127.0.0.1:{other}\""),
    ) + "\n[paths]\nmode = \"0640\"\n";
    std::fs::write(&d.config, &good).unwrap();
    hup(&d);
    wait(Duration::from_secs(5), "the new mode", &d, || {
        node(&p).is_some_and(|n| n.3 == 0o640)
    });
    assert_eq!(node(&p), Some((rdev(&a.dev), 154331, 154329, 0o640)));
    let st = d.ctl(&["status", "--json"]).ok().json();
    let waiting = st["restart_needed"].as_array().unwrap();
    assert_eq!(waiting.len(), 1, "{st:#}");
    let w = &waiting[0];
    assert!(
        w["key"] == "metrics.listen"
            && w["in_force"].as_str().unwrap().contains(&port.to_string())
            && w["in_file"].as_str().unwrap().contains(&other.to_string()),
        "{w}"
    );
    // the exporter still listens where it did
    assert!(
        st["metrics"]["address"]
            .as_str()
            .is_some_and(|a| a.contains(&port.to_string())),
        "{st:#}"
    );
    let human = d.ctl(&["status"]).ok().stdout;
    assert!(
        human.contains("restart needed") && human.contains("metrics.listen"),
        "{human}"
    );
    let log = d.log_text();
    assert!(
        log.contains("metrics.listen") && log.contains("takes effect only when asmguardd restarts"),
        "{log}"
    );

    // a broken file: one error line, and nothing changes
    std::fs::write(
        &d.config,
        good.replace("mode = \"0640\"", "mode = \"0600\"\nbogus = 1"),
    )
    .unwrap();
    hup(&d);
    wait(Duration::from_secs(5), "the error line", &d, || {
        d.log_text().contains("configuration not reloaded")
    });
    d.ctl(&["scan"]).ok();
    assert_eq!(node(&p), Some((rdev(&a.dev), 154331, 154329, 0o640)));
    let again = d.ctl(&["status", "--json"]).ok().json();
    assert_eq!(again["restart_needed"], st["restart_needed"]);
    let line = d
        .log_text()
        .lines()
        .find(|l| l.contains("configuration not reloaded"))
        .unwrap()
        .to_string();
    assert!(line.contains("bogus"), "{line}");
}

/// A container whose files never answer (its `/etc` on a FUSE file system
/// that does not reply) costs itself a warning, a `status` line and a metric,
/// and keeps its last good resolution (its rule and its nodes); the daemon's
/// scans, labels, `status` and a restart go on as if it were not there
/// (issue 32, point 4).
#[test]
fn a_stalled_container_costs_itself_and_not_the_daemon() {
    let Some(_g) = lock() else { return };
    let fuse = StalledFuse::mount();
    let a = Loop::new(16 * MIB);
    a.write_dev(0, &asmlib_block("STALL1"));
    let b = Loop::new(16 * MIB);
    let cg = TestCgroup::new("stall");
    let name = format!("hosttest{}stall", std::process::id());
    let dir = NodeDir::of(&name);
    // a privileged container in a pid namespace of its own: its users are
    // the host's ids, read from its own /etc/passwd
    let ctr = cg.start(None, true);
    let config = format!(
        "[filter]\nmode = \"enforce\"\nallow_users = []\nallow_groups = []\n{}",
        container(
            &name,
            &cg,
            "allow_users = [\"grid\"]\npresent = [\"STALL1\"]\nowner = \"grid\"\ngroup = \"asmadmin\""
        )
    );
    let mut d = Daemon::start(&[&a.name, &b.name], &config);
    let view = |d: &Daemon| {
        let st = d.ctl(&["status", "--json"]).ok().json();
        st["containers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name.as_str())
            .cloned()
            .unwrap_or_else(|| panic!("no container {name}: {st:#}"))
    };
    let grid = serde_json::json!([{"name": "grid", "host_uid": 54331}]);
    wait(Duration::from_secs(5), "the container resolved", &d, || {
        view(&d)["allow"]["users"] == grid
    });
    let p = dir.0.join("STALL1");
    wait(Duration::from_secs(3), "its node", &d, || {
        node(&p).is_some()
    });

    // its /etc stops answering; SIGHUP resolves the containers again
    let o = ctr.run_as(
        0,
        0,
        &[],
        &[
            "mount",
            "-n",
            "--bind",
            &fuse.dir.path().display().to_string(),
            "/etc",
        ],
    );
    assert_eq!(o.code, 0, "the stalled /etc: {o:?}");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(d.pid() as i32),
        nix::sys::signal::Signal::SIGHUP,
    )
    .unwrap();
    wait(Duration::from_secs(10), "the stall reported", &d, || {
        view(&d)["problems"].as_array().is_some_and(|p| {
            p.iter()
                .any(|l| l.as_str().unwrap().contains("did not answer"))
        })
    });
    let v = view(&d);
    assert_eq!(
        v["allow"]["users"], grid,
        "the last good rule is kept: {v:#}"
    );
    assert!(node(&p).is_some(), "its node is kept");
    assert!(
        d.log_text().contains("did not answer") && d.log_text().contains("WARN"),
        "{}",
        d.log_text()
    );
    let metrics = {
        use std::io::{Read, Write};
        let mut c = std::net::TcpStream::connect(("127.0.0.1", d.metrics_port.unwrap())).unwrap();
        c.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
        let mut out = String::new();
        c.read_to_string(&mut out).unwrap();
        out
    };
    assert!(
        metrics.contains(&format!(
            "asmguard_container_stalled{{container=\"{name}\"}} 1\n"
        )),
        "{metrics}"
    );

    // resolved again while it still stalls (a container with a problem is
    // resolved again about once a second, and SIGHUP resolves it at once): each
    // resolution keeps the last good one, not only the first after the stall
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(d.pid() as i32),
        nix::sys::signal::Signal::SIGHUP,
    )
    .unwrap();
    std::thread::sleep(Duration::from_secs(4));
    let v = view(&d);
    assert_eq!(
        v["allow"]["users"], grid,
        "the last good rule is kept through later resolutions: {v:#}"
    );
    assert_eq!(
        v["problems"].as_array().map(|p| p.len()),
        Some(1),
        "one stall line, not one per resolution: {v:#}"
    );
    assert!(
        node(&p).is_some(),
        "its node is kept through later resolutions"
    );

    // the daemon goes on: status, a scan and a label answer at once, and the
    // new label is protected when `label` returns
    // (each given 10 s: a request that waited for the stalled files would
    // never answer; the time is reported, not judged)
    let t = Instant::now();
    d.ctl(&["--timeout", "10", "status"]).ok();
    d.ctl(&["--timeout", "10", "scan"]).ok();
    d.ctl(&[
        "--timeout",
        "10",
        "label",
        "STALL2",
        &b.dev.display().to_string(),
    ])
    .ok();
    let took = t.elapsed();
    eprintln!("status, scan and label with a stalled container: {took:?}");
    assert!(
        std::fs::OpenOptions::new()
            .write(true)
            .open(&b.dev)
            .is_err(),
        "STALL2 is protected once label returned"
    );

    // and a restart reaches READY (the new process has no last good
    // resolution: nobody in the container may write until it answers)
    d.stop();
    drop(d);
    let d = Daemon::start(&[&a.name, &b.name], &config);
    eprintln!(
        "READY {:?} after start with a stalled container",
        d.ready_after
    );
    assert!(
        d.ready_after < Duration::from_secs(10),
        "{:?}",
        d.ready_after
    );
    let v = view(&d);
    assert!(
        v["problems"].to_string().contains("did not answer"),
        "{v:#}"
    );
    assert_eq!(v["allow"]["users"], serde_json::json!([]), "{v:#}");
    drop(d);
    drop(ctr);
    drop(fuse);
}
