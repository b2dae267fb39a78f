//! The daemon: hotplug within 1 s, concurrent label requests, socket authorisation by
//! SO_PEERCRED and SO_PEERGROUPS, malformed / oversized / unknown requests, start-to-READY, the systemd
//! unit, the udev rules.

use asmguard_host_tests::*;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;

fn has_label(v: &serde_json::Value, l: &str) -> bool {
    v["disks"]
        .as_array()
        .unwrap()
        .iter()
        .any(|d| d["label"] == l)
}

#[test]
fn hotplug_add_change_remove_within_one_second() {
    let Some(_g) = lock() else { return };
    // The device does not exist when the daemon starts.
    let mut l = Loop::prepare(64 * MIB);
    l.write_file(0, &asmlib_block("HOT1"));
    let d = Daemon::start(&[&l.name], "");
    assert!(!Path::new(&format!("/sys/class/block/{}", l.name)).exists());
    assert!(d.labels().is_empty());

    // add: losetup makes the device and attaches the labelled file.
    let t0 = Instant::now();
    l.attach(None);
    let t = d
        .wait_for(Duration::from_secs(3), |v| has_label(v, "HOT1"))
        .unwrap_or_else(|| panic!("HOT1 never appeared: {}", d.log_text()));
    let add = t0.elapsed();
    eprintln!("hotplug add seen after {add:?} ({t:?} of polling)");
    assert!(add < Duration::from_secs(1), "add took {add:?}");

    // change: another tool rewrites the label, the kernel sends a change uevent
    // (as udev's watch or `udevadm trigger --action=change` would make it).
    l.write_dev(0, &asmlib_block("HOT2"));
    let t0 = Instant::now();
    std::fs::write(format!("/sys/class/block/{}/uevent", l.name), "change").unwrap();
    d.wait_for(Duration::from_secs(3), |v| {
        has_label(v, "HOT2") && !has_label(v, "HOT1")
    })
    .unwrap_or_else(|| panic!("HOT2 never appeared: {}", d.log_text()));
    let change = t0.elapsed();
    eprintln!("hotplug change seen after {change:?}");
    assert!(change < Duration::from_secs(1), "change took {change:?}");

    // remove: losetup -d.
    let t0 = Instant::now();
    l.detach();
    d.wait_for(Duration::from_secs(3), |v| {
        v["disks"].as_array().unwrap().is_empty()
    })
    .unwrap_or_else(|| panic!("HOT2 never went away: {}", d.log_text()));
    let remove = t0.elapsed();
    eprintln!("hotplug remove seen after {remove:?}");
    assert!(remove < Duration::from_secs(1), "remove took {remove:?}");
    // None of it needed a scan.
    assert!(!d.log_text().contains("rescanning every device"));
}

#[test]
fn concurrent_label_requests_exactly_one_wins() {
    let Some(_g) = lock() else { return };
    let l = Loop::new(64 * MIB);
    let d = Daemon::start(&[&l.name], "");
    let dev = l.dev.display().to_string();
    let mut busy_seen = 0;
    for round in 0..8 {
        // Start blank each round.
        l.write_dev(0, &vec![0u8; 4096]);
        d.ctl(&["scan"]).ok();
        let labels: Vec<String> = (0..4).map(|i| format!("R{round}C{i}")).collect();
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(labels.len()));
        let outs: Vec<(String, Out)> = std::thread::scope(|s| {
            let hs: Vec<_> = labels
                .iter()
                .map(|lab| {
                    let b = barrier.clone();
                    let (d, dev) = (&d, &dev);
                    s.spawn(move || {
                        b.wait();
                        (lab.clone(), d.ctl(&["label", lab, dev]))
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let winners: Vec<&(String, Out)> = outs.iter().filter(|(_, o)| o.code == 0).collect();
        assert_eq!(winners.len(), 1, "round {round}: {outs:#?}");
        for (_, o) in outs.iter().filter(|(_, o)| o.code != 0) {
            // Either busy (6) while the winner wrote, or refused (4) because the label
            // was already there; a clear one-line message either way.
            assert!(o.code == 6 || o.code == 4, "{o:?}");
            assert_eq!(o.stderr.lines().count(), 1, "{o:?}");
            if o.code == 6 {
                busy_seen += 1;
                assert!(o.stderr.contains("busy being labelled"), "{o:?}");
            } else {
                assert!(o.stderr.contains("already labelled"), "{o:?}");
            }
        }
        // The disk holds one whole label: exactly the block the winner writes.
        let w = &winners[0].0;
        assert_same(
            &l.read_dev(0, 4096),
            &fresh_label_block(w, 512),
            "label block",
        );
        assert_eq!(d.labels(), vec![w.clone()]);
    }
    eprintln!("busy refusals seen: {busy_seen} (the rest saw the label already written)");
}

#[test]
fn socket_authorisation_by_peer_credentials() {
    let Some(_g) = lock() else { return };
    let l = Loop::new(64 * MIB);
    let dev = l.dev.display().to_string();
    // Admin group: nogroup (gid 65534).
    let d = Daemon::start(&[&l.name], "admin_group = \"nogroup\"\n");
    let nobody = ["--reuid", "65534", "--regid", "65534", "--clear-groups"];
    // A reader in the admin group (primary gid) may list, may not label.
    let o = d.ctl_as(&nobody, &["lsdsk", "--json"]);
    assert_eq!(o.code, 0, "{o:?}");
    let o = d.ctl_as(&nobody, &["label", "NOPE", &dev]);
    o.refused(4, &["permission denied", "needs root"]);
    assert_same(&l.read_dev(0, 4096), &[0u8; 4096], "refused label");
    for args in [vec!["unlabel", "X"], vec!["rename", "X", "Y"]] {
        let o = d.ctl_as(&nobody, &args);
        assert_eq!(o.code, 4, "{o:?}");
    }
    // Admin group as a supplementary group.
    let supp = ["--reuid", "65534", "--regid", "1", "--groups", "65534"];
    assert_eq!(d.ctl_as(&supp, &["status"]).code, 0);
    // Neither primary nor supplementary: refused, also for reads.
    let stranger = ["--reuid", "65534", "--regid", "1", "--clear-groups"];
    let o = d.ctl_as(&stranger, &["lsdsk"]);
    o.refused(4, &["needs root or membership of group nogroup"]);
    // Root may.
    d.ctl(&["label", "ROOTOK", &dev]).ok();
}

#[test]
fn malformed_oversized_and_unknown_requests_get_structured_errors() {
    let Some(_g) = lock() else { return };
    let l = Loop::new(16 * MIB);
    let mut d = Daemon::start(&[&l.name], "timeout_seconds = 2\n");
    let code = |v: &serde_json::Value| v["error"]["code"].as_str().unwrap_or("").to_string();
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"hello\n".to_vec(), "bad_request"),
        (b"\xff\xfe\x00garbage\n".to_vec(), "bad_request"),
        (b"[1,2,3]\n".to_vec(), "bad_request"),
        (br#"{"id":1,"op":"lsdsk"}"#.iter().chain(b"\n").copied().collect(), "bad_request"),
        (b"{\"version\":99,\"id\":2,\"op\":\"lsdsk\"}\n".to_vec(), "unsupported_version"),
        (b"{\"version\":1,\"id\":3,\"op\":\"format_disk\"}\n".to_vec(), "unknown_op"),
        (b"{\"version\":1,\"id\":4,\"op\":\"label\",\"args\":{\"label\":\"X\"}}\n".to_vec(), "bad_request"),
        (b"{\"version\":1,\"id\":5,\"op\":\"label\",\"args\":{\"label\":\"X\",\"device\":\"/dev/null\",\"wipe\":true}}\n".to_vec(), "bad_request"),
        (b"{\"version\":1,\"id\":6,\"op\":\"label\",\"args\":{\"label\":\"X\",\"device\":\"/dev/null\"}}\n".to_vec(), "not_manageable"),
        (b"{\"version\":1,\"id\":7,\"op\":\"label\",\"args\":{\"label\":\"bad label\",\"device\":\"/dev/null\"}}\n".to_vec(), "invalid_label"),
    ];
    for (bytes, want) in &cases {
        let v = d.raw(bytes);
        assert_eq!(v["ok"], false, "{v}");
        assert_eq!(v["version"], 1, "{v}");
        assert_eq!(
            code(&v),
            *want,
            "{:?} -> {v}",
            String::from_utf8_lossy(bytes)
        );
        assert!(!v["error"]["message"].as_str().unwrap().is_empty());
    }
    // The id comes back when it could be read.
    assert_eq!(
        d.raw(b"{\"version\":1,\"id\":3,\"op\":\"format_disk\"}\n")["id"],
        3
    );
    // Oversized: 1 MiB without a newline, and 100 KiB with one.
    let big = vec![b'x'; 1 << 20];
    let v = d.raw(&big);
    assert_eq!(code(&v), "too_large", "{v}");
    let mut line = format!(
        "{{\"version\":1,\"id\":8,\"op\":\"lsdsk\",\"pad\":\"{}\"}}",
        "y".repeat(100 * 1024)
    );
    line.push('\n');
    assert_eq!(code(&d.raw(line.as_bytes())), "too_large");
    // Several requests on one connection, then an idle one is closed after the timeout.
    let mut s = UnixStream::connect(&d.socket).unwrap();
    s.write_all(
        b"{\"version\":1,\"id\":10,\"op\":\"ping\"}\n{\"version\":1,\"id\":11,\"op\":\"status\"}\n",
    )
    .unwrap();
    let t0 = Instant::now();
    let mut all = String::new();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.read_to_string(&mut all).unwrap();
    let lines: Vec<serde_json::Value> = all
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "{all}");
    assert_eq!(lines[0]["id"], 10);
    assert_eq!(lines[1]["id"], 11);
    assert_eq!(lines[1]["ok"], true);
    assert!(lines[2]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("within 2 s"));
    assert!(t0.elapsed() >= Duration::from_secs(2) && t0.elapsed() < Duration::from_secs(6));
    // A client that disconnects mid-request.
    {
        let mut s = UnixStream::connect(&d.socket).unwrap();
        s.write_all(b"{\"version\":1,\"id\":1,").unwrap();
    }
    // Many clients at once.
    std::thread::scope(|sc| {
        let hs: Vec<_> = (0..64)
            .map(|_| sc.spawn(|| d.raw(b"{\"version\":1,\"id\":1,\"op\":\"lsdsk\"}\n")))
            .collect();
        for h in hs {
            assert_eq!(h.join().unwrap()["ok"], true);
        }
    });
    // Still alive and answering.
    assert!(d.alive(), "{}", d.log_text());
    d.ctl(&["status"]).ok();
    // The CLI turns a daemon that is not there into exit 5 and one line.
    let o = run(Command::new(ctl_bin()).args(["--socket", "/nonexistent/asmguard.sock", "lsdsk"]));
    assert_eq!(o.code, 5, "{o:?}");
    assert_eq!(o.stderr.lines().count(), 1);
    assert!(o.stderr.contains("not reachable"), "{o:?}");
    let o = run(Command::new(ctl_bin())
        .env("ASMGUARD_SOCKET", &d.socket)
        .args(["status", "--json"]));
    assert_eq!(o.code, 0, "{o:?}");
}

#[test]
fn status_reports_the_facts() {
    let Some(_g) = lock() else { return };
    let l = Loop::new(16 * MIB);
    let d = Daemon::start(&[&l.name], "");
    let s = d.ctl(&["status", "--json"]).ok().json();
    assert_eq!(s["daemon_version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(s["pid"], d.pid());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert_eq!(s["kernel"], kernel.trim());
    let lsm = std::fs::read_to_string("/sys/kernel/security/lsm");
    let b = &s["bpf_lsm"];
    match lsm {
        Ok(l) => {
            let names: Vec<&str> = l.trim().split(',').collect();
            assert_eq!(b["lsm"], serde_json::json!(names), "{b}");
            assert_eq!(b["active"], names.contains(&"bpf"), "{b}");
        }
        Err(_) => assert_eq!(b["active"], serde_json::Value::Null, "{b}"),
    }
    // The host refuses BPF LSM programs: the cgroup-device fallback, and status says
    // so (`lsm` where the BPF LSM works).
    let backend = s["filter_backend"].as_str().unwrap();
    assert!(matches!(backend, "lsm" | "cgroup_device"), "{s:#}");
    if backend == "cgroup_device" {
        assert_eq!(s["filter_coverage"], "open_time_only");
    }
    assert_eq!(s["socket"], d.socket.display().to_string());
    // The configured endpoint (a free port the harness chose), served.
    let m = &s["metrics"];
    let port = d.metrics_port.expect("the harness chose the metrics port");
    let url = format!("http://127.0.0.1:{port}/metrics");
    assert_eq!(m["address"], url.as_str(), "{s:#}");
    assert_eq!(m["state"], "serving", "{s:#}");
    assert!(
        matches!(m["tracer"]["state"].as_str(), Some("attached" | "off")),
        "{s:#}"
    );
    assert_eq!(s["devices_scanned"], 1);
    // This host runs no udevd: the kernel's uevents are the source.
    assert_eq!(
        s["events"],
        serde_json::json!({"source": "kernel"}),
        "{s:#}"
    );
    let t = d.ctl(&["status"]).ok().stdout;
    asmguard_testkit::assert_contains_all(
        &t,
        &[
            "daemon:",
            "kernel:",
            "bpf lsm:",
            "filter backend:",
            "disks:",
            "events:",
            "socket:",
            "metrics:",
        ],
    );
    assert!(
        t.lines()
            .any(|l| l.starts_with("events:") && l.ends_with(" kernel uevents (no udevd)")),
        "{t}"
    );
    // the text view writes the endpoint's and the tracer's state as before
    assert!(
        t.lines()
            .any(|l| l.starts_with("metrics:")
                && l.contains(&format!(" {url} (serving) (latency: "))),
        "{t}"
    );
    // the text view says the facts of `bpf_lsm` as a sentence
    if let Some(active) = b["active"].as_bool() {
        let want = format!("{} (lsm=", if active { "yes" } else { "no" });
        assert!(
            t.lines()
                .any(|l| l.starts_with("bpf lsm:") && l.contains(&want)),
            "{t}"
        );
    }
}

#[test]
fn daemon_start_to_ready_and_clean_stop() {
    let Some(_g) = lock() else { return };
    let loops: Vec<Loop> = (0..8).map(|_| Loop::new(16 * MIB)).collect();
    for (i, l) in loops.iter().enumerate() {
        l.write_dev(0, &asmlib_block(&format!("RDY{i}")));
    }
    let names: Vec<&str> = loops.iter().map(|l| l.name.as_str()).collect();
    let mut d = Daemon::start(&names, "");
    eprintln!(
        "asmguardd start -> READY=1 with 8 labelled loop devices: {:?}",
        d.ready_after
    );
    assert!(
        d.ready_after < Duration::from_secs(5),
        "{:?}",
        d.ready_after
    );
    // READY means the first scan is done: everything is listed at once.
    assert_eq!(d.labels().len(), 8);
    let sock = d.socket.clone();
    let st = d.stop().unwrap();
    assert!(st.success(), "{st}");
    assert!(!sock.exists(), "socket removed on stop");
    // A second daemon on a live socket refuses to start; a stale socket is replaced.
    let d1 = Daemon::start(&names, "");
    let other_pins = format!("{}-second", d1.pin_dir.display());
    let o = run(Command::new(daemon_bin())
        .arg("--config")
        .arg(&d1.config)
        .args(["--bpf-pin-dir", &other_pins]));
    let _ = std::fs::remove_dir_all(&other_pins);
    o.refused(1, &["already listening"]);
}

/// A second daemon on the same pin directory, with its own socket, is refused
/// at once, before it claims a disk or touches the filter: the first one keeps
/// its disks. Before, it took over the managed set silently.
#[test]
fn second_daemon_on_the_same_pins_is_refused_first_thing() {
    let Some(_g) = lock() else { return };
    let l = Loop::new(16 * MIB);
    let d1 = Daemon::start(&[&l.name], "");
    d1.ctl(&["label", "PINS1", &l.dev.display().to_string()])
        .ok();
    let sock2 = d1.dir.path().join("second.sock");
    // (The old daemon started and ran: `timeout` ends it with 124.)
    let o = run(Command::new("timeout")
        .arg("10")
        .arg(daemon_bin())
        .arg("--config")
        .arg(&d1.config)
        .arg("--socket")
        .arg(&sock2)
        .arg("--bpf-pin-dir")
        .arg(&d1.pin_dir));
    o.refused(
        1,
        &[
            "another asmguardd (pid",
            "already uses this BPF pin directory",
        ],
    );
    // That message alone (log line and stderr): no claim taken, no warning.
    assert!(
        o.stderr
            .lines()
            .all(|l| l.contains("already uses this BPF pin directory")),
        "{o:?}"
    );
    assert!(!sock2.exists());
    assert!(d1.labels().contains(&"PINS1".to_string()));
}

#[test]
fn watchdog_is_fed_and_stop_is_announced() {
    let Some(_g) = lock() else { return };
    let l = Loop::new(16 * MIB);
    let mut d = Daemon::start_env(&[&l.name], "", &[("WATCHDOG_USEC", "200000")]);
    let msgs = d.notifications(Duration::from_millis(1000));
    let pings = msgs.iter().filter(|m| *m == "WATCHDOG=1").count();
    assert!(pings >= 4, "expected a ping every 100 ms: {msgs:?}");
    let pid = d.pid().to_string();
    // SIGTERM: STOPPING=1, exit 0.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid.parse().unwrap()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let msgs = d.notifications(Duration::from_millis(500));
    assert!(msgs.iter().any(|m| m == "STOPPING=1"), "{msgs:?}");
    assert!(d.stop().is_none_or(|s| s.success()));
}

#[test]
fn config_errors_name_the_key_and_exit_3() {
    // No devices touched: --check-config only.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("c.toml");
    let check = |text: &str| {
        std::fs::write(&p, text).unwrap();
        run(Command::new(daemon_bin())
            .arg("--check-config")
            .arg("--config")
            .arg(&p))
    };
    let o = check("[devices]\ninclude = [\"loop0\"]\n[paths]\nmode = \"0640\"\n");
    assert_eq!(o.code, 0, "{o:?}");
    assert!(o.stdout.contains("valid"));
    for (text, key) in [
        ("[paths]\nmodee = \"0640\"\n", "paths.modee"),
        ("[paths]\nmode = \"rw\"\n", "paths.mode"),
        ("[socket]\ntimeout_seconds = -1\n", "socket.timeout_seconds"),
        ("[filter]\nmode = \"maybe\"\n", "filter.mode"),
        ("[metrics]\nlisten = \"nowhere\"\n", "metrics.listen"),
    ] {
        let o = check(text);
        assert_eq!(o.code, 3, "{text}: {o:?}");
        assert!(o.stderr.contains(&format!("`{key}`")), "{text}: {o:?}");
        assert_eq!(o.stderr.lines().count(), 1, "{o:?}");
    }
    // What may resolve later, or is meant but doubtful: valid (exit 0), with one
    // warning line each on stderr naming the key.
    let ok = "[paths]\nowner = \"root\"\ngroup = \"root\"\n[socket]\nadmin_group = \"root\"\n";
    for (text, key, words) in [
        (
            "[filter]\nallow_users = [\"root\", \"ldapuser_nowhere\"]\nallow_groups = [\"root\"]\n",
            "filter.allow_users",
            "ldapuser_nowhere does not exist",
        ),
        (
            "[filter]\nallow_users = [\"root\"]\nallow_groups = [\"ldapgroup_nowhere\"]\n",
            "filter.allow_groups",
            "ldapgroup_nowhere does not exist",
        ),
        (
            "[filter]\nallow_users = []\nallow_groups = []\noracle_homes = \"off\"\n",
            "filter.allow_users",
            "allow-list is empty",
        ),
        (
            "[metrics]\nlisten = \"0.0.0.0:9465\"\n[filter]\nallow_users = []\nallow_groups = []\n\
             [[rule]]\nname = \"db\"\nusers = [\"root\"]\nunits = [\"db.service\"]\n",
            "metrics.listen",
            "every network",
        ),
    ] {
        let o = check(&format!("{ok}{text}"));
        assert_eq!(o.code, 0, "{text}: {o:?}");
        assert!(o.stdout.contains("valid"), "{o:?}");
        // (the note on rules that any process of a user satisfies comes
        // with every plain allow_users: checked below)
        let w: Vec<&str> = o
            .stderr
            .lines()
            .filter(|l| !l.contains("any process of those users"))
            .collect();
        assert!(
            w.len() == 1
                && w[0].starts_with("asmguardd: warning: ")
                && w[0].contains(&format!("`{key}`"))
                && w[0].contains(words),
            "{text}: {o:?}"
        );
    }
    // an owner, group or admin group that does not resolve: a warning each
    let o = check(
        "[paths]\nowner = \"nouser_nowhere\"\ngroup = \"nogroup_nowhere\"\n\
         [socket]\nadmin_group = \"noadmin_nowhere\"\n[filter]\nallow_users = [\"root\"]\nallow_groups = [\"root\"]\n",
    );
    assert_eq!(o.code, 0, "{o:?}");
    for key in ["paths.owner", "paths.group", "socket.admin_group"] {
        assert!(
            o.stderr
                .lines()
                .any(|l| l.starts_with("asmguardd: warning: ") && l.contains(&format!("`{key}`"))),
            "{key}: {o:?}"
        );
    }
    assert_eq!(o.stderr.lines().count(), 4, "{o:?}");
    assert!(
        o.stderr.contains("any process of those users") && o.stderr.contains("oracle_homes"),
        "a plain allow_users says what it allows and how to tighten it: {o:?}"
    );
    // a rule of a user and a unit: no such note
    let o = check(
        "[paths]\nowner = \"root\"\ngroup = \"root\"\n[socket]\nadmin_group = \"root\"\n\
         [filter]\nallow_users = []\nallow_groups = []\n\
         [[rule]]\nname = \"db\"\nusers = [\"root\"]\nunits = [\"db.service\"]\n",
    );
    assert_eq!((o.code, o.stderr.as_str()), (0, ""), "{o:?}");
    // a NUL in a device pattern cannot work: an error, one line
    let o = check("[devices]\ninclude = [\"sd\\u0000*\"]\n");
    assert_eq!(o.code, 3, "{o:?}");
    assert!(o.stderr.contains("`devices.include`"), "{o:?}");
    assert_eq!(o.stderr.lines().count(), 1, "{o:?}");
    // A missing explicit config is an error too (not silently the defaults).
    let o = run(Command::new(daemon_bin()).args([
        "--check-config",
        "--config",
        "/nonexistent/asmguard.toml",
    ]));
    assert_eq!(o.code, 3, "{o:?}");
    // The daemon itself refuses to start on a bad config.
    std::fs::write(&p, "[devices]\nbogus = 1\n").unwrap();
    let o = run(Command::new(daemon_bin()).arg("--config").arg(&p));
    assert_eq!(o.code, 3, "{o:?}");
}

#[test]
fn systemd_unit_verifies() {
    let unit = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../systemd/asmguard.service"),
    )
    .unwrap();
    asmguard_testkit::assert_contains_all(
        &unit,
        &[
            "Type=notify",
            "WatchdogSec=",
            "Restart=on-failure",
            "Before=oracle-ohasd.service",
            "NoNewPrivileges=yes",
            "ProtectSystem=strict",
            "ReadWritePaths=-/sys/fs/bpf",
            "CAP_BPF",
            // the containers' device nodes, and reading containers' /proc/PID/root
            "CAP_MKNOD",
            "CAP_SYS_PTRACE",
        ],
    );
    let dir = tempfile::tempdir().unwrap();
    // systemd-analyze checks that ExecStart exists and that man: documentation resolves.
    let u = dir.path().join("asmguard.service");
    std::fs::write(
        &u,
        unit.replace("/usr/sbin/asmguardd", &daemon_bin().display().to_string()),
    )
    .unwrap();
    let man8 = dir.path().join("man/man8");
    std::fs::create_dir_all(&man8).unwrap();
    let man = run(Command::new(ctl_bin()).arg("man")).ok();
    std::fs::write(man8.join("asmguardctl.8"), man.stdout).unwrap();
    let o = run(Command::new("systemd-analyze")
        .arg("verify")
        .arg(&u)
        .env("MANPATH", dir.path().join("man"))
        .env("SYSTEMD_LOG_LEVEL", "notice"));
    assert_eq!(o.code, 0, "{o:?}");
    assert!(
        o.stderr.trim().is_empty() && o.stdout.trim().is_empty(),
        "not clean: {o:?}"
    );
}

#[test]
fn udev_rules_make_the_link_with_owner_and_mode() {
    let Some(_g) = lock() else { return };
    if Path::new("/run/udev/control").exists() {
        eprintln!("SKIPPED: a udevd runs here; this test only runs where udevadm test is alone");
        return;
    }
    let l = Loop::new(16 * MIB);
    let d = Daemon::start(&[&l.name], "");
    d.ctl(&["label", "UDEV1", &l.dev.display().to_string()])
        .ok();
    drop(d);
    let (_dir, cfg) = asmguard_testkit::config_file(
        "[paths]\nowner = \"nobody\"\ngroup = \"nogroup\"\nmode = \"0640\"\n",
    );
    let rules = run(Command::new(ctl_bin())
        .args(["udev-rules", "--config"])
        .arg(&cfg))
    .ok()
    .stdout;
    assert!(
        rules.contains(r#"OWNER="nobody", GROUP="nogroup", MODE="0640""#),
        "{rules}"
    );
    // Record what did not exist, so it is removed afterwards.
    let created: Vec<std::path::PathBuf> = [
        "/run/udev",
        "/run/asmguard",
        "/dev/asmguard",
        "/dev/disk",
        "/dev/block",
    ]
    .iter()
    .map(std::path::PathBuf::from)
    .filter(|p| !p.exists())
    .collect();
    std::fs::create_dir_all("/run/udev/rules.d").unwrap();
    let path = Path::new("/run/udev/rules.d")
        .join(format!("99-asmguard-test-{}.rules", std::process::id()));
    std::fs::write(&path, &rules).unwrap();
    use std::os::unix::fs::MetadataExt;
    let db = Path::new("/run/asmguard/links").join(&l.name);
    let _c = UdevCleanup {
        dev: l.dev.clone(),
        created,
        rules: path,
        db: db.clone(),
    };
    let link = Path::new("/dev/asmguard/disks/UDEV1");
    let udev_test = || {
        let o = run(Command::new("udevadm")
            .args(["test", "--action=change"])
            .arg(format!("/sys/class/block/{}", l.name)));
        assert_eq!(o.code, 0, "{o:?}");
        assert!(o.stdout.contains("ID_FS_TYPE=oracleasm"), "{o:?}");
        o
    };
    // The label bytes alone make no link: only the label asmguardd manages the
    // device under (ASMGUARD_LABEL in /run/asmguard/links/<name>, which the
    // daemon writes), and "-" makes none.
    let o = udev_test();
    assert!(!link.exists(), "a link from the label bytes alone: {o:?}");
    std::fs::create_dir_all("/run/asmguard/links").unwrap();
    std::fs::write(&db, "ASMGUARD_LABEL=-\n").unwrap();
    let o = udev_test();
    assert!(!link.exists(), "a link for \"-\": {o:?}");
    std::fs::write(&db, "ASMGUARD_LABEL=UDEV1\n").unwrap();
    let o = udev_test();
    let target =
        std::fs::read_link(link).unwrap_or_else(|e| panic!("{}: {e}: {o:?}", link.display()));
    assert_eq!(target, Path::new("../..").join(&l.name));
    let m = std::fs::metadata(&l.dev).unwrap();
    assert_eq!((m.uid(), m.gid(), m.mode() & 0o7777), (65534, 65534, 0o640));
    // lsdsk sees the link udev made, leading to the top device.
    let d = Daemon::start(&[&l.name], "");
    let v = d.lsdsk();
    assert_eq!(v["disks"][0]["stable_link"], "ok", "{v}");
    drop(d);
    // A link to something else is reported, not trusted.
    std::fs::remove_file(link).unwrap();
    std::os::unix::fs::symlink("/dev/null", link).unwrap();
    let d = Daemon::start(&[&l.name], "");
    let v = d.lsdsk();
    assert_eq!(v["disks"][0]["stable_link"], "wrong", "{v}");
    assert_eq!(v["disks"][0]["stable_link_target"], "/dev/null", "{v}");
    std::fs::remove_file(link).unwrap();
    drop(d);
    assert!(
        o.stderr.contains("nowatch")
            || o.stdout.contains("nowatch")
            || rules.contains("OPTIONS+=\"nowatch\"")
    );
}

#[test]
fn install_script_stages_everything() {
    let dest = tempfile::tempdir().unwrap();
    let o = run(script("install.sh").env("DESTDIR", dest.path()));
    assert_eq!(o.code, 0, "{o:?}");
    for f in [
        "usr/sbin/asmguardd",
        "usr/sbin/asmguardctl",
        "usr/lib/systemd/system/asmguard.service",
        "etc/asmguard/asmguard.toml",
        "etc/udev/rules.d/99-asmguard.rules",
        "usr/share/man/man8/asmguardctl.8",
        "usr/share/bash-completion/completions/asmguardctl",
    ] {
        assert!(dest.path().join(f).is_file(), "{f} not installed: {o:?}");
    }
    let rules =
        std::fs::read_to_string(dest.path().join("etc/udev/rules.d/99-asmguard.rules")).unwrap();
    let shipped =
        std::fs::read_to_string(repo_root().join("udev-rules/99-asmguard.rules")).unwrap();
    assert_eq!(rules, shipped);
    // An existing config is never overwritten.
    std::fs::write(
        dest.path().join("etc/asmguard/asmguard.toml"),
        "[paths]\nmode = \"0640\"\n",
    )
    .unwrap();
    run(script("install.sh").env("DESTDIR", dest.path())).ok();
    let c = std::fs::read_to_string(dest.path().join("etc/asmguard/asmguard.toml")).unwrap();
    assert_eq!(c, "[paths]\nmode = \"0640\"\n");
    let rules =
        std::fs::read_to_string(dest.path().join("etc/udev/rules.d/99-asmguard.rules")).unwrap();
    assert!(rules.contains("MODE=\"0640\""), "{rules}");
}

#[test]
fn demo_script_runs_and_cleans_up() {
    let Some(_g) = lock() else { return };
    let o = run(&mut script("demo.sh"));
    assert_eq!(o.code, 0, "{o:?}");
    asmguard_testkit::assert_contains_all(
        &o.stdout,
        &[
            "labelled DEMO1",
            "DEMO1  enforce",
            "bpf lsm:",
            "Operation not permitted",
            "DENIED  write-open label=DEMO1",
            "uid=0 egid=0 comm=dd",
            "removed the write filter",
            "label:       DEMO1 (ORCLDISK)",
            "Cleaning up",
            "detaching /dev/loop",
        ],
    );
    // the allowed writer's write beside the refused one, and no warning about
    // a user, group or rule the demo itself never needed
    let allowed = o
        .stdout
        .split("==> The allowed writer")
        .nth(1)
        .and_then(|r| r.split("==> ").next())
        .unwrap_or_else(|| panic!("no allowed writer step: {o:?}"));
    assert!(
        allowed.contains("(allowed: 4096 bytes written at 1 MiB)"),
        "{allowed}"
    );
    for w in ["does not exist", "can be borrowed", "any process of"] {
        assert!(!o.stdout.contains(w), "the demo warns {w:?}: {o:?}");
    }
    // at most one build (the script's, when the binaries are not built yet)
    assert!(o.stdout.matches("cargo build").count() <= 1, "{o:?}");
    // Nothing left behind: the loop device is detached, the daemon gone, files removed.
    let after = |p: &str| {
        let l = o.stdout.lines().find_map(|l| l.strip_prefix(p));
        l.unwrap_or_else(|| panic!("no line {p:?}: {o:?}"))
            .to_string()
    };
    let dev = after("loop device: ");
    let work = after("removed ");
    let name = dev.trim_start_matches("/dev/");
    let backing = loop_backing_file(name);
    assert!(
        !backing.contains(&work),
        "{dev} still attached to {backing}"
    );
    assert!(!Path::new(&work).exists(), "{work} left behind");
    let leftover: Vec<_> = std::fs::read_dir("/sys/fs/bpf")
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("asmguard-demo-"))
        .collect();
    assert!(leftover.is_empty(), "filter pins left behind: {leftover:?}");
    let pid = o
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("stopping asmguardd (pid "))
        .unwrap();
    let pid = pid.trim_end_matches(')');
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "asmguardd {pid} still runs"
    );
}

/// This thread only (raw system calls; glibc's wrappers change every thread):
/// real, effective and filesystem ids `uid`/`gid` and supplementary `groups`.
/// The saved uid stays 0, so nothing else is affected; the thread ends after use.
fn become_on_this_thread(uid: u32, gid: u32, groups: &[u32]) {
    // SAFETY: plain credential system calls on the calling thread; `groups`
    // outlives the setgroups call, which reads `groups.len()` gid_t values.
    unsafe {
        assert_eq!(
            libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()),
            0
        );
        assert_eq!(libc::syscall(libc::SYS_setresgid, gid, gid, gid), 0);
        assert_eq!(libc::syscall(libc::SYS_setresuid, uid, uid, 0), 0);
    }
}

fn connect_as(sock: &Path, uid: u32, gid: u32, groups: Vec<u32>, n: usize) -> Vec<UnixStream> {
    let sock = sock.to_path_buf();
    std::thread::spawn(move || {
        become_on_this_thread(uid, gid, &groups);
        (0..n)
            .map(|_| UnixStream::connect(&sock).unwrap())
            .collect::<Vec<_>>()
    })
    .join()
    .unwrap()
}

/// The first line the daemon sent on `s` within `wait`, or "" if none.
fn first_line(s: &UnixStream, wait: Duration) -> String {
    s.set_read_timeout(Some(wait)).unwrap();
    let mut buf = Vec::new();
    let mut b = [0u8; 1];
    let mut r = s;
    while let Ok(1) = r.read(&mut b) {
        if b[0] == b'\n' {
            break;
        }
        buf.push(b[0]);
    }
    String::from_utf8_lossy(&buf).into_owned()
}

#[test]
fn no_user_can_exhaust_the_control_socket() {
    let Some(_g) = lock() else { return };
    let l = Loop::new(16 * MIB);
    // Admin group: nogroup (gid 65534).
    let d = Daemon::start(&[&l.name], "admin_group = \"nogroup\"\n");
    // 600 connections held by a user who may do nothing: each is refused at once.
    let strangers = connect_as(&d.socket, 65534, 1, vec![], 600);
    let l0 = first_line(&strangers[0], Duration::from_secs(5));
    assert!(
        l0.contains("\"permission_denied\"")
            && l0.contains("needs root or membership of group nogroup"),
        "{l0}"
    );
    let last = first_line(&strangers[599], Duration::from_secs(5));
    assert!(last.contains("\"permission_denied\""), "{last}");
    // An admin-group user holds more than one uid may: the rest are refused busy.
    let admins = connect_as(&d.socket, 65534, 1, vec![65534], 40);
    let busy = admins
        .iter()
        .filter(|s| first_line(s, Duration::from_millis(300)).contains("\"busy\""))
        .count();
    assert_eq!(busy, 40 - 32, "per-uid bound");
    // Root, and the admin group's other users, are still served.
    let o = d.ctl(&["status"]);
    assert_eq!(o.code, 0, "root locked out: {o:?}");
    let other = ["--reuid", "65533", "--regid", "1", "--groups", "65534"];
    let o = d.ctl_as(&other, &["status"]);
    assert_eq!(o.code, 0, "another admin user locked out: {o:?}");
    drop((strangers, admins));
}

/// The whole process's supplementary groups (glibc's wrapper changes every
/// thread, the leader too: what `/proc/PID/status` shows for the process).
fn set_process_groups(groups: &[u32]) {
    // SAFETY: `groups` outlives the call, which reads `groups.len()` gid_t values.
    assert_eq!(
        unsafe { libc::setgroups(groups.len(), groups.as_ptr()) },
        0,
        "setgroups"
    );
}

/// Connects as uid 65534 (gid 1) with supplementary groups `at_connect`, then
/// (back as root for a moment) switches this thread to `at_request` before
/// asking `status`: the daemon's first line.
fn ask_after_regroup(sock: &Path, at_connect: Vec<u32>, at_request: Vec<u32>) -> String {
    let sock = sock.to_path_buf();
    std::thread::spawn(move || {
        become_on_this_thread(65534, 1, &at_connect);
        let mut s = UnixStream::connect(&sock).unwrap();
        // SAFETY: credential system calls on this thread only; the saved uid
        // 0 lets it take root back, and `at_request` outlives setgroups.
        unsafe {
            assert_eq!(libc::syscall(libc::SYS_setresuid, -1, 0, -1), 0);
            assert_eq!(
                libc::syscall(libc::SYS_setgroups, at_request.len(), at_request.as_ptr()),
                0
            );
            assert_eq!(libc::syscall(libc::SYS_setresuid, -1, 65534, -1), 0);
        }
        // A refused peer is closed at once: the write may then fail.
        let _ = s.write_all(b"{\"version\":1,\"id\":1,\"op\":\"status\"}\n");
        first_line(&s, Duration::from_secs(10))
    })
    .join()
    .unwrap()
}

/// A peer's groups are the ones it connected with (SO_PEERGROUPS), not the
/// ones `/proc/PID/status` shows when its request is read: the process's
/// leader thread is given the opposite membership to the connecting thread's
/// new one, so reading /proc (by then, or by pid) gets each case wrong.
#[test]
fn peer_groups_are_those_at_connect_time() {
    let Some(_g) = lock() else { return };
    let l = Loop::new(16 * MIB);
    // Admin group: nogroup (gid 65534).
    let d = Daemon::start(&[&l.name], "admin_group = \"nogroup\"\n");
    let mut saved = vec![0u32; 1024];
    // SAFETY: `saved` has room for the 1024 gid_t values getgroups may write.
    let n = unsafe { libc::getgroups(saved.len() as i32, saved.as_mut_ptr()) };
    assert!(n >= 0, "getgroups");
    saved.truncate(n as usize);
    // In the admin group at connect, out of it by the request (and the
    // process shows no admin group): still served.
    set_process_groups(&[]);
    let served = ask_after_regroup(&d.socket, vec![65534], vec![]);
    // Out of it at connect, in it by the request (and so is the process):
    // still refused.
    set_process_groups(&[65534]);
    let refused = ask_after_regroup(&d.socket, vec![], vec![65534]);
    set_process_groups(&saved);
    let v: serde_json::Value = serde_json::from_str(&served).unwrap_or_default();
    assert_eq!(v["ok"], true, "{served}");
    assert!(
        refused.contains("\"permission_denied\"")
            && refused.contains("needs root or membership of group nogroup"),
        "{refused}"
    );
}

#[test]
fn concurrent_scans_share_one_scan() {
    let Some(_g) = lock() else { return };
    let l = Loop::new(16 * MIB);
    let d = Daemon::start(&[&l.name], "");
    let scans = |d: &Daemon| d.log_text().matches("full scan #").count();
    let before = scans(&d);
    // 30 connections first, then 30 scan requests sent back to back: they all
    // arrive while the first scan runs.
    let mut conns: Vec<UnixStream> = (0..30)
        .map(|_| UnixStream::connect(&d.socket).unwrap())
        .collect();
    for (i, c) in conns.iter_mut().enumerate() {
        let req = asmguard_proto::Request {
            id: i as u64 + 1,
            op: asmguard_proto::Op::Scan,
        };
        c.write_all(format!("{}\n", req.to_line()).as_bytes())
            .unwrap();
    }
    for c in &conns {
        let line = first_line(c, Duration::from_secs(30));
        assert!(line.contains("\"ok\":true"), "{line}");
    }
    // Requests that arrive while a scan runs share the next one, so the
    // count is the number of scans the arrivals straddle: 2-3 on a quiet
    // machine; a busy one (the lab's guests beside it) spreads the 30 writes
    // over a few more. Never one scan per request.
    let ran = scans(&d) - before;
    assert!(
        (1..=6).contains(&ran),
        "30 concurrent scan requests ran {ran} scans (coalesced: at most 6)"
    );
}
