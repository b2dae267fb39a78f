//! The daemon's metrics on the host: the labelled disk is traced as soon as it is
//! labelled, N known 4 KiB O_DIRECT reads and M writes show exactly in its
//! histograms and bytes, a denied write shows in `asmguard_writes_denied_total`, the
//! live endpoint passes `promtool check metrics`, and `asmguardctl iostat` reads it.

use asmguard_host_tests::*;
use std::process::Command;
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;

fn scrape(port: u16) -> String {
    let o = run(Command::new("curl").args(["-sf", &format!("http://127.0.0.1:{port}/metrics")]));
    assert_eq!(o.code, 0, "scrape failed: {}", o.stderr);
    o.stdout
}

/// The value of the sample whose line starts with `prefix` (name + labels).
fn sample(text: &str, prefix: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

fn wait_sample(port: u16, prefix: &str, ok: impl Fn(f64) -> bool) -> f64 {
    let t0 = Instant::now();
    loop {
        if let Some(v) = sample(&scrape(port), prefix) {
            if ok(v) {
                return v;
            }
        }
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "{prefix} not as expected within 5 s:\n{}",
            scrape(port)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A scrape once the I/O counters stopped moving: two scrapes in a row (100 ms
/// apart) with the same `asmguard_io_` samples; exact counts are checked on it.
fn settled(port: u16) -> String {
    let io = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| l.starts_with("asmguard_io_"))
            .map(str::to_string)
            .collect()
    };
    let t0 = Instant::now();
    let mut last = scrape(port);
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let now = scrape(port);
        if io(&now) == io(&last) {
            return now;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "the I/O counters kept moving for 5 s"
        );
        last = now;
    }
}

/// A 16 MiB loop disk labelled `label` by a daemon that enforces and allows
/// no one: (the disk, its path, the daemon, its metrics port).
fn labelled_allowing_no_one(label: &str) -> (Loop, String, Daemon, u16) {
    let l = Loop::new(16 * MIB);
    let dev = l.dev.to_str().unwrap().to_string();
    let d = Daemon::start(
        &[&l.name],
        "[filter]\nmode = \"enforce\"\nallow_users = []\nallow_groups = []\n",
    );
    let port = d.metrics_port.unwrap();
    d.ctl(&["label", label, &dev]).ok();
    (l, dev, d, port)
}

fn dd(args: &[&str]) -> Out {
    run(Command::new("dd").args(args))
}

#[test]
fn daemon_exports_exact_io_counts_denials_and_iostat() {
    let Some(_g) = lock() else { return };
    let l = Loop::new(64 * MIB);
    let port = free_port();
    let dev = l.dev.to_str().unwrap().to_string();
    let d = Daemon::start(
        &[&l.name],
        &format!("[metrics]\nlisten = \"127.0.0.1:{port}\"\n"),
    );
    d.ctl(&["label", "MET1", &dev]).ok();
    let st = d.ctl(&["status", "--json"]).ok().json();
    assert!(
        st["metrics"]["address"] == format!("http://127.0.0.1:{port}/metrics").as_str(),
        "{st}"
    );
    let info = format!("asmguard_disk_info{{label=\"MET1\",device=\"{}\"", l.name);
    wait_sample(port, &info, |v| v == 1.0);

    // Exact counts: deltas over N reads and M writes of 4 KiB, O_DIRECT
    // (single-block I/Os: at most single_block_bytes, 8192 by default).
    let (n, m) = (37u64, 11u64);
    let count = |op: &str| {
        format!(
            "asmguard_io_latency_seconds_count{{device=\"{}\",label=\"MET1\",op=\"{op}\",size=\"single\"}}",
            l.name
        )
    };
    let bytes = |op: &str| {
        format!(
            "asmguard_io_bytes_total{{device=\"{}\",label=\"MET1\",op=\"{op}\",size=\"single\"}}",
            l.name
        )
    };
    let before = scrape(port);
    let r0 = sample(&before, &count("read")).unwrap_or(0.0);
    let rb0 = sample(&before, &bytes("read")).unwrap_or(0.0);
    let w0 = sample(&before, &count("write")).unwrap_or(0.0);
    let wb0 = sample(&before, &bytes("write")).unwrap_or(0.0);
    let o = dd(&[
        &format!("if={dev}"),
        "of=/dev/null",
        "bs=4096",
        &format!("count={n}"),
        "skip=100",
        "iflag=direct",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    // Root writes through dd are denied by the filter (enforce by default): write
    // with the filter off for this disk, then turn it back on.
    d.ctl(&["filter", "disable", "MET1"]).ok();
    let o = dd(&[
        "if=/dev/zero",
        &format!("of={dev}"),
        "bs=4096",
        &format!("count={m}"),
        "seek=200",
        "oflag=direct",
        "conv=notrunc",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    d.ctl(&["filter", "enable", "MET1"]).ok();
    wait_sample(port, &count("read"), |v| v - r0 >= n as f64);
    wait_sample(port, &count("write"), |v| v - w0 >= m as f64);
    let after = settled(port);
    for (op, ios, count0, bytes0) in [("read", n, r0, rb0), ("write", m, w0, wb0)] {
        let got = sample(&after, &count(op)).unwrap() - count0;
        assert_eq!(got, ios as f64, "{op}s");
        let got = sample(&after, &bytes(op)).unwrap() - bytes0;
        assert_eq!(got, (ios * 4096) as f64, "{op} bytes");
    }

    // A denied write is counted under the disk's label and the hook that denied it.
    let o = dd(&[
        "if=/dev/zero",
        &format!("of={dev}"),
        "bs=4096",
        "count=1",
        "conv=notrunc",
    ]);
    assert_ne!(o.code, 0, "the write must be denied");
    assert!(o.stderr.contains("Operation not permitted"), "{}", o.stderr);
    let backend = st["filter_backend"].as_str().unwrap().to_string();
    let hook = if backend == "cgroup_device" {
        "cgroup_device"
    } else {
        "file_open"
    };
    // The counters are read when Prometheus scrapes: the very next scrape has
    // the denial, the backend and the mode, with no copy loop to wait for.
    let now = scrape(port);
    let denied_key = format!("asmguard_writes_denied_total{{label=\"MET1\",hook=\"{hook}\"}}");
    assert!(
        sample(&now, &denied_key).unwrap_or(0.0) >= 1.0,
        "the denial is not in the next scrape:\n{now}"
    );
    assert_eq!(
        sample(
            &now,
            &format!("asmguard_backend_info{{backend=\"{backend}\"}}")
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &now,
            "asmguard_filter_mode{label=\"MET1\",mode=\"enforce\"}"
        ),
        Some(1.0)
    );
    // ... and so does a mode change
    d.ctl(&["filter", "audit", "MET1"]).ok();
    let audit = scrape(port);
    assert_eq!(
        sample(
            &audit,
            "asmguard_filter_mode{label=\"MET1\",mode=\"audit\"}"
        ),
        Some(1.0),
        "{audit}"
    );
    d.ctl(&["filter", "enable", "MET1"]).ok();

    // promtool on the live endpoint: clean.
    let text = scrape(port);
    let mut p = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool (Debian package prometheus) is installed");
    use std::io::Write;
    p.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let po = p.wait_with_output().unwrap();
    assert!(
        po.status.success() && po.stdout.is_empty() && po.stderr.is_empty(),
        "promtool: {}{}",
        String::from_utf8_lossy(&po.stdout),
        String::from_utf8_lossy(&po.stderr)
    );

    // iostat through the daemon's endpoint, while reads run.
    let reader = std::thread::spawn({
        let dev = dev.clone();
        move || {
            dd(&[
                &format!("if={dev}"),
                "of=/dev/null",
                "bs=16k",
                "count=400",
                "iflag=direct",
            ]);
        }
    });
    let o = d
        .ctl(&[
            "iostat",
            "MET1",
            "--interval",
            "0.5",
            "--count",
            "1",
            "--json",
        ])
        .ok();
    reader.join().unwrap();
    let v: serde_json::Value = serde_json::from_str(o.stdout.trim()).unwrap();
    let s = v.to_string();
    assert!(s.contains("MET1"), "{s}");
    // the read row: the microsecond and millisecond columns in order, their
    // shares adding up to 100 %, and await (queue + device) at least the device time
    let read = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["op"] == "read")
        .unwrap_or_else(|| panic!("no read row: {s}"));
    assert!(read["ios"].as_u64().unwrap() > 0, "{read}");
    let shares: f64 = asmguard_iostat::iostat::WAIT_BUCKETS
        .iter()
        .map(|b| {
            read["wait_pct"][b]
                .as_f64()
                .unwrap_or_else(|| panic!("no {b}: {read}"))
        })
        .sum();
    assert!((shares - 100.0).abs() < 1e-6, "{read}");
    let at: Vec<usize> = asmguard_iostat::iostat::WAIT_BUCKETS
        .iter()
        .map(|b| o.stdout.find(&format!("\"{b}\":")).unwrap())
        .collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{}", o.stdout);
    let (avg, await_) = (
        read["avg_ms"].as_f64().unwrap(),
        read["await_ms"].as_f64().unwrap(),
    );
    assert!(await_ >= avg && avg > 0.0, "{read}");
    let o = d.ctl(&["iostat", "NOPE", "--interval", "0.1", "--count", "1"]);
    assert_eq!(o.code, 3, "unknown label: {}", o.stderr);
    assert!(o.stderr.contains("NOPE"), "{}", o.stderr);
    let o = d.ctl(&["iostat", "--interval", "0", "--count", "1"]);
    assert_eq!(o.code, 3, "{}", o.stderr);
}

/// `asmguard_writes_denied_total` is the kernel's exact count: with the daemon
/// stopped (SIGSTOP) while thousands of write-opens are denied, the ring buffer
/// overflows and drops events, yet the metric shows every denial, and the drops
/// have their own counter.
#[test]
fn denial_counts_are_exact_when_events_are_dropped() {
    let Some(_g) = lock() else { return };
    let (_l, dev, d, port) = labelled_allowing_no_one("FLOOD");
    let denied = || {
        matches!(std::fs::OpenOptions::new().write(true).open(&dev),
            Err(e) if e.raw_os_error() == Some(libc::EPERM))
    };
    let t0 = Instant::now();
    while !denied() {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "FLOOD never protected"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let hook = scrape(port)
        .lines()
        .find(|l| l.starts_with("asmguard_backend_info{"))
        .map(|l| {
            if l.contains("\"lsm\"") {
                "file_open"
            } else {
                "cgroup_device"
            }
        })
        .unwrap();
    let key = format!("asmguard_writes_denied_total{{label=\"FLOOD\",hook=\"{hook}\"}}");
    let base = wait_sample(port, &key, |v| v >= 1.0);
    // one denied write-open is counted once (a block device's open asks the
    // device cgroup twice only when the first ask allows it)
    assert!(denied());
    let per_open = wait_sample(port, &key, |v| v > base) - base;
    assert_eq!(per_open, 1.0, "one denied write-open, one count");
    let base = base + per_open;
    let pid = nix::unistd::Pid::from_raw(d.pid() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    const N: u64 = 6000; // ~88 bytes each: more than the 256 KiB ring holds
    for _ in 0..N {
        assert!(denied());
    }
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
    let want = base + per_open * N as f64;
    let got = wait_sample(port, &key, |v| v >= want);
    assert_eq!(got, want, "exact denial count");
    let dropped = wait_sample(port, "asmguard_filter_events_dropped_total ", |v| v > 0.0);
    assert!(dropped > 0.0);
}

/// A flood of connections to the metrics port (any local user can open them)
/// takes neither the descriptors label and scan need nor the endpoint for good.
/// The daemon runs with a 128-descriptor limit (about 46 in use) and is sent
/// 150 connections.
#[test]
fn connection_flood_leaves_label_scan_and_metrics_working() {
    let Some(_g) = lock() else { return };
    let l = Loop::new(16 * MIB);
    let d = Daemon::start(&[&l.name], "");
    let port = d.metrics_port.unwrap();
    let pid = d.pid().to_string();
    sh("prlimit", &["--pid", &pid, "--nofile=128:128"]).ok();
    let fds = || {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap()
            .count()
    };
    let before = fds();
    // 32 served, the rest in the listen backlog (about 128 here: more would
    // only make connect() retry for seconds).
    let flood: Vec<_> = (0..150)
        .filter_map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).ok())
        .collect();
    assert_eq!(flood.len(), 150, "the backlog takes them all");
    std::thread::sleep(Duration::from_millis(500));
    let during = fds();
    eprintln!("daemon descriptors: {before} before, {during} with 150 connections open");
    assert!(during <= before + 32, "{before} -> {during}");
    // Before: `Too many open files` here, and the endpoint gone for good.
    d.ctl(&["label", "FLOOD1", &l.dev.display().to_string()])
        .ok();
    d.ctl(&["scan"]).ok();
    let s = d.ctl(&["status", "--json"]).ok().json();
    assert!(s["metrics"]["state"] == "serving", "{s}");
    drop(flood);
    let t0 = Instant::now();
    eprintln!("label, scan and status answered during the flood");
    loop {
        let o = run(Command::new("curl").args([
            "-sf",
            "-m",
            "2",
            &format!("http://127.0.0.1:{port}/metrics"),
        ]));
        if o.code == 0 && o.stdout.contains("asmguard_") {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "/metrics did not recover: {o:?}\n{}",
            d.log_text()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!("/metrics served {:?} after the flood ended", t0.elapsed());
}

/// One write-open is one event and one count, denied or audited, on the
/// cgroup-device backend too, where the kernel asks about a block device twice
/// in one open (inode_permission, then blkdev_open: an audited open reaches
/// both). `dd seek=` without `conv=notrunc` is two opens (O_RDWR, then O_WRONLY
/// when that is refused): two events, two counts.
#[test]
fn one_write_open_is_one_event_and_one_count() {
    let Some(_g) = lock() else { return };
    let (_l, dev, d, port) = labelled_allowing_no_one("ONCE");
    let hook = if d.ctl(&["status", "--json"]).ok().json()["filter_backend"] == "cgroup_device" {
        "cgroup_device"
    } else {
        "file_open"
    };
    let key = format!("asmguard_writes_denied_total{{label=\"ONCE\",hook=\"{hook}\"}}");
    let me = std::process::id();
    // (events of this process in `mode`, events of `comm` dd in `mode`)
    let events = |mode: &str| -> (usize, usize) {
        let o = d.ctl(&["events", "--json"]).ok();
        let evs: Vec<serde_json::Value> = o
            .stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .filter(|e: &serde_json::Value| e["label"] == "ONCE" && e["mode"] == mode)
            .collect();
        (
            evs.iter().filter(|e| e["pid"] == me).count(),
            evs.iter().filter(|e| e["comm"] == "dd").count(),
        )
    };
    let settle = |mode: &str, want: (usize, usize)| {
        let t0 = Instant::now();
        while events(mode) != want && t0.elapsed() < Duration::from_secs(3) {
            std::thread::sleep(Duration::from_millis(50));
        }
        // a second look: no late duplicate
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(events(mode), want, "{mode} events (this process, dd)");
    };
    let open = || std::fs::OpenOptions::new().write(true).open(&dev);
    const N: usize = 3;
    for _ in 0..N {
        assert!(matches!(open(), Err(e) if e.raw_os_error() == Some(libc::EPERM)));
    }
    settle("enforce", (N, 0));
    assert_eq!(wait_sample(port, &key, |v| v >= N as f64), N as f64);
    let dd = dd(&[
        "if=/dev/zero",
        &format!("of={dev}"),
        "bs=512",
        "count=1",
        "seek=8",
    ]);
    assert_ne!(dd.code, 0, "{dd:?}");
    settle("enforce", (N, 2));
    assert_eq!(
        wait_sample(port, &key, |v| v >= (N + 2) as f64),
        (N + 2) as f64
    );

    d.ctl(&["filter", "audit", "ONCE"]).ok();
    for _ in 0..N {
        drop(open().expect("audit allows"));
    }
    settle("audit", (N, 0));
    assert_eq!(
        sample(&scrape(port), &key),
        Some((N + 2) as f64),
        "audited opens are not denials"
    );
}

/// `asmguard_disk_info` names the disk group of a disk from its ASM header
/// (`diskgroup="DGRP7"` for a synthetic ASM disk of that group), and an empty
/// `diskgroup` for a disk that has only an asmguard label.
#[test]
fn disk_info_names_the_disk_group_from_the_asm_header() {
    use asmguard_format::label::Label;
    use asmguard_format::synth::SynthDisk;
    let Some(_g) = lock() else { return };
    let asm = Loop::new(16 * MIB);
    let mut s = SynthDisk::new(16);
    s.grpname = "DGRP7".into();
    s.dskname = "DGRP7_0003".into();
    s.label = Some(Label::new("DGMEMBER").unwrap());
    for (off, b) in s.metadata().unwrap() {
        asm.write_dev(off, &b);
    }
    let plain = Loop::new(16 * MIB);
    let d = Daemon::start(&[&asm.name, &plain.name], "");
    let port = d.metrics_port.unwrap();
    d.ctl(&["label", "DGPLAIN", plain.dev.to_str().unwrap()])
        .ok();
    let info = |label: &str, dev: &str| {
        let prefix = format!("asmguard_disk_info{{label=\"{label}\",device=\"{dev}\"");
        wait_sample(port, &prefix, |v| v == 1.0);
        let text = scrape(port);
        let line = text
            .lines()
            .find(|l| l.starts_with(&prefix))
            .unwrap()
            .to_string();
        line
    };
    let member = info("DGMEMBER", &asm.name);
    assert!(member.contains("diskgroup=\"DGRP7\""), "{member}");
    let only_label = info("DGPLAIN", &plain.name);
    assert!(only_label.contains("diskgroup=\"\""), "{only_label}");
}

/// The usual order: label the disk, then `CREATE DISKGROUP` writes the ASM
/// header. udevd's watch turns the close of the written device into a change
/// event (it writes "change" to the device's uevent file, as done here); the
/// daemon re-reads the disk and `asmguard_disk_info` names the new disk group.
#[test]
fn disk_info_follows_a_disk_group_created_after_the_label() {
    use asmguard_format::label::Label;
    use asmguard_format::synth::SynthDisk;
    let Some(_g) = lock() else { return };
    let l = Loop::new(16 * MIB);
    let d = Daemon::start(&[&l.name], "");
    let port = d.metrics_port.unwrap();
    d.ctl(&["label", "DGLATE", l.dev.to_str().unwrap()]).ok();
    let prefix = format!("asmguard_disk_info{{label=\"DGLATE\",device=\"{}\"", l.name);
    let line = || {
        scrape(port)
            .lines()
            .find(|x| x.starts_with(&prefix))
            .map(str::to_string)
    };
    wait_sample(port, &prefix, |v| v == 1.0);
    assert!(line().unwrap().contains("diskgroup=\"\""), "{:?}", line());
    // what ASM writes: a header of group LATE on the labelled disk
    let mut s = SynthDisk::new(16);
    s.grpname = "LATE".into();
    s.label = Some(Label::new("DGLATE").unwrap());
    for (off, b) in s.metadata().unwrap() {
        l.write_dev(off, &b);
    }
    std::fs::write(format!("/sys/block/{}/uevent", l.name), "change").unwrap();
    let t0 = Instant::now();
    while !line().is_some_and(|x| x.contains("diskgroup=\"LATE\"")) {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "no diskgroup=\"LATE\" 5 s after the change event: {:?}",
            line()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
