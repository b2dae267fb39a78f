//! `asmguardctl reclaim` through the daemon on a loop device over a sparse file
//! holding a SYNTHETIC ASM disk (built with `asmguard_format::synth`, capname
//! ASMGUARD_SYNTHETIC; the format crate's tests check it parses like the real
//! dumps). Random data fills every AU, free ones below the highest allocated AU
//! included (space a dropped tablespace left behind). After reclaim the backing
//! file's allocated blocks drop by the free AUs' size, and every allocated AU
//! (and AU 0, 1, 11, which are never touched) keeps its checksum.

use asmguard_format::label::Label;
use asmguard_format::synth::SynthDisk;
use asmguard_host_tests::*;
use std::collections::hash_map::DefaultHasher;
use std::fs::OpenOptions;
use std::hash::Hasher;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;
const AUS: usize = 64;

/// Allocated AUs besides 0 and 1; AU 11 is free in the AT but reserved (12.1+
/// header copy) so reclaim must leave it; AU 50 is the high-water mark.
fn allocated() -> Vec<usize> {
    (2..=10).chain(12..=20).chain(30..=40).chain([50]).collect()
}

/// The free AUs reclaim may hand back.
fn free_aus() -> Vec<usize> {
    (21..=29).chain(41..=49).chain(51..AUS).collect()
}

fn kept_aus() -> Vec<usize> {
    let mut v: Vec<usize> = vec![0, 1, 11];
    v.extend(allocated());
    v.sort();
    v
}

struct Disk {
    l: Loop,
    synth: SynthDisk,
}

fn fill(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    let mut v = Vec::with_capacity(len);
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v
}

fn make(label: &str) -> Disk {
    make_with(label, AUS, &allocated())
}

/// A synthetic disk of `aus` AUs of 1 MiB, `alloc` allocated, every AU filled.
fn make_with(label: &str, aus: usize, alloc: &[usize]) -> Disk {
    let l = Loop::new(aus as u64 * MIB);
    let mut s = SynthDisk::new(aus);
    for a in alloc {
        s.allocated[*a] = true;
    }
    s.label = Some(Label::new(label).unwrap());
    for au in 0..aus {
        l.write_dev(au as u64 * MIB, &fill(au as u64 * 7919 + 1, MIB as usize));
    }
    for (off, b) in s.metadata().unwrap() {
        l.write_dev(off, &b);
    }
    Disk { l, synth: s }
}

/// The SHA-256 of `b` (coreutils' `sha256sum`).
fn sha256(b: &[u8]) -> String {
    use std::io::Write;
    let mut c = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(b).unwrap();
    let o = c.wait_with_output().unwrap();
    assert!(o.status.success());
    String::from_utf8_lossy(&o.stdout)[..64].to_string()
}

/// A second loop device over the same backing file: another host's path to the
/// shared LUN, which this host's daemon does not manage.
fn other_host(l: &Loop) -> Loop {
    let mut o = Loop::prepare(MIB);
    o.file = l.file.clone();
    o.attach(None);
    o
}

/// Runs `reclaim` in the background; returns the child and its stderr lines.
fn spawn_reclaim(
    d: &Daemon,
    args: &[&str],
) -> (
    std::process::Child,
    std::io::Lines<BufReader<std::process::ChildStderr>>,
) {
    let mut child = Command::new(ctl_bin())
        .arg("--socket")
        .arg(&d.socket)
        .arg("reclaim")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = child.stderr.take().unwrap();
    (child, BufReader::new(err).lines())
}

/// Reads JSON progress lines until `phase` has done at least `bytes`; returns
/// every line read.
fn progress_until(
    lines: &mut std::io::Lines<BufReader<std::process::ChildStderr>>,
    phase: &str,
    bytes: u64,
) -> Vec<String> {
    let t0 = Instant::now();
    let mut seen = Vec::new();
    loop {
        let l = lines
            .next()
            .unwrap_or_else(|| panic!("no progress line: {seen:?}"))
            .unwrap();
        seen.push(l.clone());
        if let Ok(p) = serde_json::from_str::<serde_json::Value>(&l) {
            if p["phase"] == phase && p["done_bytes"].as_u64().unwrap_or(0) >= bytes {
                return seen;
            }
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "no progress: {seen:?}"
        );
    }
}

fn au_hash(l: &Loop, au: usize) -> u64 {
    let b = l.read_dev(au as u64 * MIB, MIB as usize);
    let mut h = DefaultHasher::new();
    h.write(&b);
    h.finish()
}

fn hashes(l: &Loop) -> Vec<(usize, u64)> {
    kept_aus().into_iter().map(|a| (a, au_hash(l, a))).collect()
}

/// Allocated bytes of the backing file (`stat --format=%b` x 512).
fn allocated_bytes(l: &Loop) -> u64 {
    std::fs::metadata(&l.file).unwrap().blocks() * 512
}

fn start(d: &Disk) -> Daemon {
    Daemon::start(&[&d.l.name], "")
}

fn checkpoint(d: &Daemon, label: &str) -> std::path::PathBuf {
    d.dir.path().join("reclaim").join(format!("{label}.json"))
}

#[test]
fn reclaim_dry_run_then_returns_every_free_au() {
    let Some(_g) = lock() else { return };
    let disk = make("RCLM1");
    let d = start(&disk);
    assert_eq!(d.labels(), vec!["RCLM1"]);
    let before = allocated_bytes(&disk.l);
    assert!(before >= AUS as u64 * MIB, "fully written: {before}");
    let h0 = hashes(&disk.l);
    let expect = free_aus().len() as u64 * MIB;

    // --dry-run: the exact byte count, nothing changed (by label, and by disk group).
    let o = d.ctl(&["reclaim", "RCLM1", "--dry-run", "--json"]).ok();
    let v = o.json();
    assert_eq!(v["dry_run"], true);
    assert_eq!(v["planned_bytes"], expect, "{v:#}");
    assert_eq!(v["reclaimed_bytes"], 0);
    assert_eq!(v["disks"][0]["free_aus"], free_aus().len());
    assert_eq!(v["disks"][0]["disk_group"], "DATA");
    let o = d.ctl(&["reclaim", "--diskgroup", "data", "--dry-run"]).ok();
    assert!(
        o.stdout
            .contains(&format!("would hand back 31.00 MiB ({expect} bytes)")),
        "{}",
        o.stdout
    );
    assert_eq!(allocated_bytes(&disk.l), before, "dry run changed nothing");
    assert_eq!(hashes(&disk.l), h0);

    // The real thing.
    let o = d
        .ctl(&["reclaim", "RCLM1", "--watch", "0.5", "--json"])
        .ok();
    let v = o.json();
    assert_eq!(v["reclaimed_bytes"], expect, "{v:#}");
    assert!(o.stderr.contains("\"phase\":\"checking\""), "{}", o.stderr);
    assert!(
        o.stderr.contains("\"phase\":\"reclaiming\""),
        "{}",
        o.stderr
    );
    let after = allocated_bytes(&disk.l);
    let dropped = before - after;
    // Within alignment (4 KiB granularity; the filesystem's own extent blocks).
    assert!(
        dropped.abs_diff(expect) <= 64 * 1024,
        "allocated bytes dropped by {dropped}, expected {expect}"
    );
    assert_eq!(hashes(&disk.l), h0, "an allocated or reserved AU changed");
    for a in free_aus() {
        assert!(
            disk.l
                .read_dev(a as u64 * MIB, MIB as usize)
                .iter()
                .all(|b| *b == 0),
            "free AU {a} still holds data"
        );
    }
    assert!(
        !checkpoint(&d, "RCLM1").exists(),
        "checkpoint removed when done"
    );
    // The text form, and an unknown label.
    let o = d.ctl(&["reclaim", "RCLM1", "--watch", "0"]).ok();
    assert!(o.stdout.contains("handed back"), "{}", o.stdout);
    let o = d.ctl(&["reclaim", "NOSUCH", "--watch", "0"]);
    assert_eq!(o.code, 3, "{o:?}");
    assert!(d.log_text().contains("reclaim RCLM1"), "journal line");
    let _ = disk.synth.dsksize();
}

#[test]
fn reclaim_rate_limit_cancel_and_resume() {
    let Some(_g) = lock() else { return };
    let disk = make("RCLM2");
    let d = start(&disk);
    let expect = free_aus().len() as u64 * MIB;
    let h0 = hashes(&disk.l);

    // 8 MiB/s over 31 MiB: at least ~3.9 s.
    let t = Instant::now();
    let v = d
        .ctl(&["reclaim", "RCLM2", "--watch", "0", "--rate", "8", "--json"])
        .ok()
        .json();
    let took = t.elapsed().as_secs_f64();
    assert_eq!(v["reclaimed_bytes"], expect);
    assert!(
        took >= expect as f64 / (8.0 * MIB as f64) * 0.95,
        "rate limit not honoured: {took} s"
    );

    // Put data back into the free AUs, then cancel half way (Ctrl-C).
    for a in free_aus() {
        disk.l
            .write_dev(a as u64 * MIB, &fill(a as u64, MIB as usize));
    }
    let before = allocated_bytes(&disk.l);
    // (SIGINT at its default action, as at a terminal, even when the tests run
    // from a background job, which inherits it ignored)
    let mut child = Command::new("env")
        .arg("--default-signal=INT")
        .arg(ctl_bin())
        .arg("--socket")
        .arg(&d.socket)
        .args(["reclaim", "RCLM2", "--watch", "0", "--rate", "4", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = child.stderr.take().unwrap();
    let mut lines = BufReader::new(err).lines();
    let t0 = Instant::now();
    loop {
        let l = lines.next().expect("progress line").unwrap();
        let p: serde_json::Value = serde_json::from_str(&l).unwrap();
        if p["phase"] == "reclaiming" && p["done_bytes"].as_u64().unwrap() >= 4 * MIB {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "no progress");
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let st = child.wait().unwrap();
    assert!(!st.success());
    // The daemon stops after the chunk in flight and keeps its checkpoint.
    let cp = checkpoint(&d, "RCLM2");
    let t0 = Instant::now();
    while !d.log_text().contains("cancelled") {
        assert!(t0.elapsed() < Duration::from_secs(10), "{}", d.log_text());
        std::thread::sleep(Duration::from_millis(100));
    }
    let c: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cp).unwrap()).unwrap();
    let done = c["done_bytes"].as_u64().unwrap();
    assert!(done >= 4 * MIB && done < expect, "{c}");
    let mid = allocated_bytes(&disk.l);
    assert!(before - mid >= done - 64 * 1024, "what was done is done");
    assert!(before - mid < expect, "not all done yet");
    // A rerun completes the job from the checkpoint.
    let v = d
        .ctl(&["reclaim", "RCLM2", "--watch", "0", "--json"])
        .ok()
        .json();
    let resumed = v["disks"][0]["resumed_from_bytes"].as_u64().unwrap();
    assert_eq!(resumed, done, "{v:#}");
    assert_eq!(v["reclaimed_bytes"].as_u64().unwrap() + resumed, expect);
    assert!(!cp.exists());
    let dropped = before - allocated_bytes(&disk.l);
    assert!(
        dropped.abs_diff(expect) <= 64 * 1024,
        "{dropped} vs {expect}"
    );
    assert_eq!(hashes(&disk.l), h0);
}

#[test]
fn reclaim_refuses_while_mounted() {
    let Some(_g) = lock() else { return };
    let disk = make("RCLM3");
    let d = start(&disk);
    let before = allocated_bytes(&disk.l);
    let h0 = hashes(&disk.l);

    // (1) A process on this host holds the disk open for writing (ASM does while
    // the disk group is mounted).
    let holder = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&disk.l.dev)
        .unwrap();
    let o = d.ctl(&["reclaim", "RCLM3", "--watch", "0"]);
    assert_eq!(o.code, 4, "{o:?}");
    assert!(o.stderr.contains("open for writing"), "{}", o.stderr);
    assert!(
        o.stderr.contains(&format!("pid {}", std::process::id())),
        "{}",
        o.stderr
    );
    drop(holder);
    // (1b) A shared writable mapping of the device, its fd already closed.
    let map = {
        use std::os::fd::AsRawFd;
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&disk.l.dev)
            .unwrap();
        // SAFETY: a fresh shared mapping of 4 KiB of the device at offset 60 MiB
        // (an AU the test never checks), not aliased by any Rust reference; it is
        // unmapped below with the same address and length.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                60 * MIB as libc::off_t,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        p
    };
    let o = d.ctl(&["reclaim", "RCLM3", "--watch", "0"]);
    // SAFETY: `map` is the 4 KiB mapping made above, not used after this.
    unsafe { libc::munmap(map, 4096) };
    assert_eq!(o.code, 4, "{o:?}");
    assert!(o.stderr.contains("shared writable mapping"), "{}", o.stderr);
    // A read-only opener is no reason to refuse (checked with a dry run's sibling:
    // the real run below starts with a read-only fd open).
    let _reader = OpenOptions::new().read(true).open(&disk.l.dev).unwrap();

    // (2) The heartbeat block (last block of AU 1) changes during the watch
    // (another RAC node): written through the backing file, no fd on the device.
    let hb = 2 * MIB - 4096;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s2 = stop.clone();
    let file = disk.l.file.clone();
    let w = std::thread::spawn(move || {
        use std::os::unix::fs::FileExt;
        let f = OpenOptions::new().write(true).open(&file).unwrap();
        let mut n = 0u64;
        while !s2.load(std::sync::atomic::Ordering::SeqCst) {
            n += 1;
            f.write_all_at(&fill(n, 4096), hb).unwrap();
            f.sync_all().unwrap();
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    let o = d.ctl(&["reclaim", "RCLM3", "--watch", "2"]);
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    w.join().unwrap();
    assert_eq!(o.code, 4, "{o:?}");
    assert!(o.stderr.contains("heartbeat"), "{}", o.stderr);

    // (2b) The mount stamp changes (header rewritten with a new mntstmp).
    let mut s = disk.synth.clone();
    s.mounted = asmguard_format::header::Stamp::encode(2026, 11, 21, 13, 0, 0);
    let hdr = s.header_block();
    let file = disk.l.file.clone();
    let w = std::thread::spawn(move || {
        use std::os::unix::fs::FileExt;
        std::thread::sleep(Duration::from_millis(700));
        let f = OpenOptions::new().write(true).open(&file).unwrap();
        f.write_all_at(&hdr, 0).unwrap();
        f.sync_all().unwrap();
    });
    let o = d.ctl(&["reclaim", "RCLM3", "--watch", "2"]);
    w.join().unwrap();
    assert_eq!(o.code, 4, "{o:?}");
    assert!(o.stderr.contains("mount stamp"), "{}", o.stderr);

    // Nothing was handed back by the refused runs (AU 0 and 1 were rewritten by
    // this test's own writer).
    assert_eq!(allocated_bytes(&disk.l), before);
    let no01 = |v: Vec<(usize, u64)>| v.into_iter().filter(|(a, _)| *a >= 2).collect::<Vec<_>>();
    assert_eq!(no01(hashes(&disk.l)), no01(h0));
    // Quiet again: it goes through (a read-only opener does not count).
    let v = d
        .ctl(&["reclaim", "RCLM3", "--watch", "0.5", "--json"])
        .ok()
        .json();
    assert_eq!(v["reclaimed_bytes"], free_aus().len() as u64 * MIB);
}

#[test]
fn reclaim_refuses_device_without_discard_and_zeroout_works() {
    let Some(_g) = lock() else { return };
    let disk = make("RCLM4");
    let q = format!("/sys/block/{}/queue/discard_max_bytes", disk.l.name);
    if std::fs::write(&q, "0").is_err() || std::fs::read_to_string(&q).unwrap().trim() != "0" {
        panic!("cannot turn discards off on {} ({q})", disk.l.name);
    }
    let d = start(&disk);
    let h0 = hashes(&disk.l);
    let o = d.ctl(&["reclaim", "RCLM4", "--watch", "0"]);
    assert_eq!(o.code, 3, "{o:?}");
    assert!(
        o.stderr.contains("does not accept discards"),
        "{}",
        o.stderr
    );
    assert!(o.stderr.contains("--method zeroout"), "{}", o.stderr);
    // --method zeroout: free AUs read back as zeros, the rest unchanged.
    let v = d
        .ctl(&[
            "reclaim", "RCLM4", "--watch", "0", "--method", "zeroout", "--json",
        ])
        .ok()
        .json();
    assert_eq!(v["disks"][0]["method"], "zeroout");
    assert_eq!(v["reclaimed_bytes"], free_aus().len() as u64 * MIB);
    for a in free_aus() {
        assert!(disk
            .l
            .read_dev(a as u64 * MIB, MIB as usize)
            .iter()
            .all(|b| *b == 0));
    }
    assert_eq!(hashes(&disk.l), h0);
}

#[test]
fn reclaim_passes_the_filter_that_denies_everyone_else() {
    let Some(_g) = lock() else { return };
    let disk = make("RCLM5");
    let d = Daemon::start(
        &[&disk.l.name],
        "[filter]\nmode = \"enforce\"\nallow_users = []\nallow_groups = []\n",
    );
    let st = d.ctl(&["status", "--json"]).ok().json();
    assert_ne!(st["filter_backend"], "none", "{st:#}");
    let dev = disk.l.dev.display().to_string();
    // Root's discard of the managed disk is denied (on the host: the
    // cgroup-device fallback, at open time)...
    let o = sh(
        "blkdiscard",
        &["-f", "-o", "22020096", "-l", "1048576", &dev],
    );
    assert_ne!(o.code, 0, "root's blkdiscard must be denied: {o:?}");
    assert!(o.stderr.contains("Operation not permitted"), "{o:?}");
    let h0 = hashes(&disk.l);
    let before = allocated_bytes(&disk.l);
    // ...the daemon's reclaim passes.
    let v = d
        .ctl(&["reclaim", "RCLM5", "--watch", "0", "--json"])
        .ok()
        .json();
    let expect = free_aus().len() as u64 * MIB;
    assert_eq!(v["reclaimed_bytes"], expect);
    assert!((before - allocated_bytes(&disk.l)).abs_diff(expect) <= 64 * 1024);
    assert_eq!(hashes(&disk.l), h0);
    d.ctl(&["filter", "disable"]).ok();
}

fn scrape(port: u16) -> String {
    let o = run(Command::new("curl").args(["-sf", &format!("http://127.0.0.1:{port}/metrics")]));
    assert_eq!(o.code, 0, "scrape failed: {}", o.stderr);
    o.stdout
}

/// Waits (5 s) until the sample starting with `prefix` equals `want`.
fn wait_sample(port: u16, prefix: &str, want: u64) {
    let t0 = Instant::now();
    loop {
        let text = scrape(port);
        let v = text
            .lines()
            .find(|l| l.starts_with(prefix))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok());
        if v == Some(want as f64) {
            return;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "{prefix} is {v:?}, not {want}:\n{}",
            text.lines()
                .filter(|l| l.contains("discard"))
                .collect::<Vec<_>>()
                .join("\n")
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn discard_bytes_by_source() {
    let Some(_g) = lock() else { return };
    let disk = make("RCLM6");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let d = Daemon::start(
        &[&disk.l.name],
        &format!("[metrics]\nlisten = \"127.0.0.1:{port}\"\n"),
    );
    let expect = free_aus().len() as u64 * MIB;
    d.ctl(&["reclaim", "RCLM6", "--watch", "0"]).ok();
    let reclaim = "asmguard_discard_bytes_total{label=\"RCLM6\",source=\"reclaim\"}";
    let oracle = "asmguard_discard_bytes_total{label=\"RCLM6\",source=\"oracle\"}";
    wait_sample(port, reclaim, expect);
    wait_sample(port, oracle, 0);
    // A discard by someone the filter lets through (here the filter is off; in
    // production only the allow-listed database processes get this far) counts
    // as the database's.
    let dev = disk.l.dev.display().to_string();
    sh(
        "blkdiscard",
        &[
            "-f",
            "-o",
            &(22 * MIB).to_string(),
            "-l",
            &MIB.to_string(),
            &dev,
        ],
    )
    .ok();
    wait_sample(port, oracle, MIB);
    wait_sample(port, reclaim, expect);
}

/// Scraped every 50 ms during a rate-limited reclaim, both discard counters only
/// ever go up, reclaim's rises while the reclaim runs (counted per ioctl, not at
/// the end), and the database's stays 0: reclaim's own discards are never
/// charged to it, not even for a moment.
#[test]
fn discard_counters_never_go_down_during_a_reclaim() {
    let Some(_g) = lock() else { return };
    let disk = make("RCLM7");
    let d = Daemon::start(&[&disk.l.name], "");
    let port = d.metrics_port.unwrap();
    let expect = free_aus().len() as u64 * MIB;
    let reclaim = "asmguard_discard_bytes_total{label=\"RCLM7\",source=\"reclaim\"}";
    let oracle = "asmguard_discard_bytes_total{label=\"RCLM7\",source=\"oracle\"}";
    let value = |text: &str, prefix: &str| -> Option<f64> {
        text.lines()
            .find(|l| l.starts_with(prefix))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
    };
    // about three seconds at the rate limit
    let rate_mib = (expect / MIB / 3).max(1).to_string();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let samples: Vec<(Option<f64>, Option<f64>)> = std::thread::scope(|s| {
        let scraper = s.spawn(|| {
            let mut v = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let t = scrape(port);
                v.push((value(&t, reclaim), value(&t, oracle)));
                std::thread::sleep(Duration::from_millis(50));
            }
            v
        });
        d.ctl(&["reclaim", "RCLM7", "--watch", "0", "--rate", &rate_mib])
            .ok();
        wait_sample(port, reclaim, expect);
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        scraper.join().unwrap()
    });
    let r: Vec<f64> = samples.iter().filter_map(|s| s.0).collect();
    let o: Vec<f64> = samples.iter().filter_map(|s| s.1).collect();
    assert!(
        r.windows(2).all(|w| w[0] <= w[1]),
        "reclaim went down: {r:?}"
    );
    assert!(
        o.windows(2).all(|w| w[0] <= w[1]),
        "oracle went down: {o:?}"
    );
    assert!(
        o.iter().all(|v| *v == 0.0),
        "reclaim charged to oracle: {o:?}"
    );
    let partial = r
        .iter()
        .filter(|v| **v > 0.0 && **v < expect as f64)
        .count();
    assert!(
        partial >= 2,
        "reclaim was not counted while it ran ({partial} partial samples): {r:?}"
    );
}

/// Another host mounts the disk group while this one reclaims: through its own
/// path to the LUN (a second loop device over the same image) it rewrites the
/// heartbeat block and writes AU 200, a free AU still ahead of the reclaim. The
/// reclaim stops before its next discard (exit 4, naming the heartbeat), AU 200
/// keeps its SHA-256, allocated AUs too; the checkpoint stays, and a rerun
/// while the other host still has the disk group mounted is refused.
#[test]
fn reclaim_stops_before_the_next_discard_when_another_host_wakes_up() {
    let Some(_g) = lock() else { return };
    const N: usize = 256;
    let alloc: Vec<usize> = (2..=10).chain(12..=60).collect();
    let disk = make_with("RCLM8", N, &alloc);
    let b = other_host(&disk.l);
    let d = start(&disk);
    let kept: Vec<(usize, String)> = [0usize, 1, 11]
        .into_iter()
        .chain(alloc.iter().copied())
        .map(|a| (a, sha256(&disk.l.read_dev(a as u64 * MIB, MIB as usize))))
        .collect();
    let t = Instant::now();
    let (child, mut lines) =
        spawn_reclaim(&d, &["RCLM8", "--watch", "0.5", "--rate", "16", "--json"]);
    progress_until(&mut lines, "reclaiming", 16 * MIB);
    // Host B: heartbeat, then an AU of a file it creates.
    let au200 = fill(0xb200, MIB as usize);
    b.write_dev(2 * MIB - 4096, &fill(0xbeef, 4096));
    b.write_dev(200 * MIB, &au200);
    // ...and allocates it in the allocation table (AT block 0 describes AUs 0..448)
    let mut s_b = disk.synth.clone();
    s_b.allocated[200] = true;
    b.write_dev(2 * 4096, &s_b.at_block(0));
    let changed_at = t.elapsed();
    let rest: Vec<String> = lines.map(|l| l.unwrap()).collect();
    let o = child.wait_with_output().unwrap();
    let took = t.elapsed();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let err = rest.join("\n");
    assert_eq!(o.status.code(), Some(4), "stdout {stdout}\nstderr {err}");
    assert!(
        err.contains("RCLM8: heartbeat changed at")
            && err.contains("(mounted on another host?): stopped after")
            && err.contains("nothing was discarded after the change was seen"),
        "{err}"
    );
    // It stopped at the next chunk, not at the end of the plan (195 MiB at 16 MiB/s).
    assert!(
        took < changed_at + Duration::from_secs(3),
        "stopped {:.1} s after the change",
        (took - changed_at).as_secs_f64()
    );
    assert_eq!(
        sha256(&disk.l.read_dev(200 * MIB, MIB as usize)),
        sha256(&au200),
        "host B's AU 200 was discarded"
    );
    for (a, h) in &kept {
        if *a >= 2 {
            assert_eq!(
                &sha256(&disk.l.read_dev(*a as u64 * MIB, MIB as usize)),
                h,
                "AU {a}"
            );
        }
    }
    // --json says what stopped the run.
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let st = &v["disks"][0]["stopped"];
    assert_eq!(st["what"], "heartbeat", "{v:#}");
    let done = v["reclaimed_bytes"].as_u64().unwrap();
    assert!((16 * MIB..195 * MIB).contains(&done), "{v:#}");
    assert_eq!(st["done_bytes"], done, "{v:#}");
    assert!(checkpoint(&d, "RCLM8").exists(), "the checkpoint stays");
    // Host B keeps beating: a rerun re-checks everything first and is refused.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s2 = stop.clone();
    let bdev = b.dev.clone();
    let w = std::thread::spawn(move || {
        let f = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(&bdev)
            .unwrap();
        let mut buf = aligned(4096);
        let mut n = 0u64;
        while !s2.load(std::sync::atomic::Ordering::SeqCst) {
            n += 1;
            buf.as_mut_slice().copy_from_slice(&fill(n, 4096));
            std::os::unix::fs::FileExt::write_all_at(&f, buf.as_slice(), 2 * MIB - 4096).unwrap();
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    let o = d.ctl(&["reclaim", "RCLM8", "--watch", "1"]);
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    w.join().unwrap();
    assert_eq!(o.code, 4, "{o:?}");
    assert!(o.stderr.contains("heartbeat"), "{}", o.stderr);
    assert_eq!(
        sha256(&disk.l.read_dev(200 * MIB, MIB as usize)),
        sha256(&au200)
    );
    // Host B dismounts: the rerun plans again from the changed table (AU 200
    // is allocated now), so it starts that new plan from its beginning instead
    // of resuming the old one, and AU 200 stays.
    let dry = d
        .ctl(&["reclaim", "RCLM8", "--dry-run", "--json"])
        .ok()
        .json();
    let planned = dry["planned_bytes"].as_u64().unwrap();
    assert_eq!(
        planned,
        v["planned_bytes"].as_u64().unwrap() - MIB,
        "{dry:#}"
    );
    let v2 = d
        .ctl(&["reclaim", "RCLM8", "--watch", "0.5", "--json"])
        .ok()
        .json();
    assert_eq!(v2["disks"][0]["resumed_from_bytes"], 0, "{v2:#}");
    assert_eq!(v2["reclaimed_bytes"], planned, "{v2:#}");
    assert!(!checkpoint(&d, "RCLM8").exists());
    assert_eq!(
        sha256(&disk.l.read_dev(200 * MIB, MIB as usize)),
        sha256(&au200)
    );
    for (a, h) in &kept {
        if *a >= 2 {
            assert_eq!(
                &sha256(&disk.l.read_dev(*a as u64 * MIB, MIB as usize)),
                h,
                "AU {a}"
            );
        }
    }
}

/// A sparse disk of two strides (113,792 + 1,000 AUs of 1 MiB, a 112 GiB
/// sparse file): every AU allocated but ten free ones before the stride
/// boundary, nine after it (AU 113,792 holds the second stride's allocation
/// table and is never free) and the last hundred. The free AUs on both sides
/// come back (the backing file shrinks by the filled ones), the allocated ones
/// and the second stride's metadata AU keep their SHA-256.
#[test]
fn reclaim_reads_every_stride() {
    let Some(_g) = lock() else { return };
    let m = SynthDisk::new(1).mfact() as usize;
    assert_eq!(m, 113_792);
    let n = m + 1000;
    let free = |a: usize| (m - 10..m).contains(&a) || (m + 1..m + 10).contains(&a) || a >= m + 900;
    let l = Loop::new(n as u64 * MIB);
    let mut s = SynthDisk::new(n);
    for (a, x) in s.allocated.iter_mut().enumerate() {
        *x = !free(a);
    }
    s.label = Some(Label::new("RCLM9").unwrap());
    let filled: Vec<usize> = (0..=12).chain(m - 20..=m + 20).collect();
    for &au in &filled {
        l.write_dev(au as u64 * MIB, &fill(au as u64 * 7919 + 1, MIB as usize));
    }
    for (off, b) in s.metadata().unwrap() {
        l.write_dev(off, &b);
    }
    let kept: Vec<(usize, String)> = filled
        .iter()
        .filter(|a| !free(**a) && **a >= 2)
        .map(|&a| (a, sha256(&l.read_dev(a as u64 * MIB, MIB as usize))))
        .collect();
    assert!(
        kept.iter().any(|(a, _)| *a == m),
        "the stride's AU is checked"
    );
    let d = Daemon::start(&[&l.name], "");
    let expect = (10 + 9 + 100) * MIB;
    let v = d
        .ctl(&["reclaim", "RCLM9", "--dry-run", "--json"])
        .ok()
        .json();
    assert_eq!(v["planned_bytes"], expect, "{v:#}");
    assert_eq!(v["disks"][0]["at_blocks_valid"], 254 + 3, "{v:#}");
    let before = allocated_bytes(&l);
    let t = Instant::now();
    let v = d
        .ctl(&["reclaim", "RCLM9", "--watch", "0.5", "--json"])
        .ok()
        .json();
    let took = t.elapsed().as_secs_f64();
    assert_eq!(v["reclaimed_bytes"], expect, "{v:#}");
    let dropped = before - allocated_bytes(&l);
    assert!(
        dropped.abs_diff(19 * MIB) <= 64 * 1024,
        "the backing file shrank by {dropped} bytes, not the 19 filled free AUs"
    );
    for a in (m - 10..m).chain(m + 1..m + 10) {
        assert!(
            l.read_dev(a as u64 * MIB, MIB as usize)
                .iter()
                .all(|b| *b == 0),
            "free AU {a} still holds data"
        );
    }
    for (a, h) in &kept {
        assert_eq!(
            &sha256(&l.read_dev(*a as u64 * MIB, MIB as usize)),
            h,
            "AU {a}"
        );
    }
    eprintln!("two-stride reclaim of {expect} bytes: {took:.2} s");
}

/// `--above-size` with the disk group "mounted": a process holds the disk
/// open for writing and the heartbeat keeps changing, yet everything above
/// the ASM size (64 AUs on a 128 MiB device) goes back and nothing below it
/// changes. Then, with data above the size again, the disk is resized up to
/// 100 AUs mid-run: the run stops before the next chunk (exit 4, disk_size),
/// and the AUs past what it had done keep their SHA-256.
#[test]
fn reclaim_above_the_size_online_and_a_growing_disk_stops_it() {
    let Some(_g) = lock() else { return };
    let disk = make_with("RCLMA", AUS, &allocated());
    // the device is twice the ASM size: AUs 64..128 are above it
    let n = 2 * AUS;
    sh(
        "truncate",
        &[
            "-s",
            &(n as u64 * MIB).to_string(),
            &disk.l.file.display().to_string(),
        ],
    )
    .ok();
    sh("losetup", &["-c", &disk.l.dev.display().to_string()]).ok();
    let above = |seed: u64| {
        for au in AUS..n {
            disk.l
                .write_dev(au as u64 * MIB, &fill(au as u64 * seed + 3, MIB as usize));
        }
    };
    above(31);
    let d = start(&disk);
    let below: Vec<String> = (2..AUS)
        .map(|a| sha256(&disk.l.read_dev(a as u64 * MIB, MIB as usize)))
        .collect();
    // "Mounted": ASM holds the disk read-write and beats.
    let holder = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&disk.l.dev)
        .unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s2 = stop.clone();
    let dev = disk.l.dev.clone();
    let beat = std::thread::spawn(move || {
        let f = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(&dev)
            .unwrap();
        let mut buf = aligned(4096);
        let mut k = 0u64;
        while !s2.load(std::sync::atomic::Ordering::SeqCst) {
            k += 1;
            buf.as_mut_slice().copy_from_slice(&fill(k, 4096));
            std::os::unix::fs::FileExt::write_all_at(&f, buf.as_slice(), 2 * MIB - 4096).unwrap();
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    let expect = (n - AUS) as u64 * MIB;
    let v = d
        .ctl(&["reclaim", "RCLMA", "--above-size", "--dry-run", "--json"])
        .ok()
        .json();
    assert_eq!(v["planned_bytes"], expect, "{v:#}");
    assert_eq!(v["disks"][0]["above_size"], true, "{v:#}");
    let before = allocated_bytes(&disk.l);
    let t = Instant::now();
    let v = d
        .ctl(&["reclaim", "RCLMA", "--above-size", "--json"])
        .ok()
        .json();
    let took = t.elapsed().as_secs_f64();
    assert_eq!(v["reclaimed_bytes"], expect, "{v:#}");
    let dropped = before - allocated_bytes(&disk.l);
    assert!(
        dropped.abs_diff(expect) <= 64 * 1024,
        "{dropped} vs {expect}"
    );
    for au in AUS..n {
        assert!(
            disk.l
                .read_dev(au as u64 * MIB, MIB as usize)
                .iter()
                .all(|b| *b == 0),
            "AU {au} above the size still holds data"
        );
    }
    for (i, h) in below.iter().enumerate() {
        assert_eq!(
            &sha256(&disk.l.read_dev((i + 2) as u64 * MIB, MIB as usize)),
            h,
            "AU {}",
            i + 2
        );
    }
    // The DBA resizes the disk up while a slow run goes.
    above(37);
    let kept: Vec<String> = (AUS..n)
        .map(|a| sha256(&disk.l.read_dev(a as u64 * MIB, MIB as usize)))
        .collect();
    let (child, mut lines) =
        spawn_reclaim(&d, &["RCLMA", "--above-size", "--rate", "16", "--json"]);
    progress_until(&mut lines, "reclaiming", 8 * MIB);
    let mut grown = disk.synth.clone();
    grown.allocated.resize(100, false);
    disk.l.write_dev(0, &grown.header_block());
    let rest: Vec<String> = lines.map(|l| l.unwrap()).collect();
    let o = child.wait_with_output().unwrap();
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    beat.join().unwrap();
    drop(holder);
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let err = rest.join("\n");
    assert_eq!(o.status.code(), Some(4), "{stdout}\n{err}");
    assert!(
        err.contains("the disk size changed from 64 to 100 AUs at"),
        "{err}"
    );
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["disks"][0]["stopped"]["what"], "disk_size", "{v:#}");
    let done = v["reclaimed_bytes"].as_u64().unwrap();
    assert!((8 * MIB..expect / 2).contains(&done), "{v:#}");
    // Everything past what was done (and one chunk for the run's last report)
    // is intact.
    let from = AUS + (done / MIB) as usize;
    for au in from..n {
        assert_eq!(
            sha256(&disk.l.read_dev(au as u64 * MIB, MIB as usize)),
            kept[au - AUS],
            "AU {au} was discarded after the disk grew"
        );
    }
    eprintln!("above-size: {expect} bytes in {took:.2} s; stopped after {done} bytes");
}

/// The adaptive rate, on a loop device through the executor itself, with the
/// disk's latency histogram scripted: fast before the run, slow for two
/// intervals (the rate halves twice: 32 -> 16 -> 8 MiB/s, the progress says
/// why), fast again (it doubles back, never above the 32 MiB/s ceiling).
#[test]
fn the_adaptive_rate_halves_when_the_p99_rises_and_comes_back() {
    use asmguard_iostat::hist::NSLOTS;
    use asmguard_reclaim::exec::{execute, ExecOptions};
    use asmguard_reclaim::{Method, Plan, Range};
    let Some(_g) = lock() else { return };
    let l = Loop::new(128 * MIB);
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&l.dev)
        .unwrap();
    let total = 96 * MIB;
    let plan = Plan {
        ranges: vec![Range {
            offset: 16 * MIB,
            len: total,
        }],
        total_bytes: total,
        hash: "adaptive".into(),
        unaligned_bytes: 0,
    };
    // Cumulative slots: call 0 is the baseline (1,000 I/Os of ~1 ms); calls
    // 1 and 2 add 100 I/Os of ~64 ms; later calls 100 of ~1 ms.
    let calls = std::sync::atomic::AtomicU64::new(0);
    let hist = std::sync::Mutex::new([0u64; NSLOTS]);
    let latency = || {
        let n = calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let mut h = hist.lock().unwrap();
        match n {
            0 => h[10] += 1000,
            1 | 2 => h[16] += 100,
            _ => h[10] += 100,
        }
        Some(*h)
    };
    let cancel = std::sync::atomic::AtomicBool::new(false);
    let o = ExecOptions {
        label: "ADAPT".into(),
        method: Method::Discard,
        rate: Some(32 * MIB),
        checkpoint: None,
        cancel: &cancel,
        progress_every: Duration::from_millis(100),
        granularity: 4096,
        counters: None,
        check: None,
        latency: Some(&latency),
        p99_multiple: 4.0,
    };
    let mut seen: Vec<(u64, String)> = Vec::new();
    let t = Instant::now();
    let oc = execute(&f, &plan, &o, &mut |p| {
        seen.push((p.rate_limit_bytes_per_sec as u64, p.rate_note.clone()))
    })
    .unwrap();
    let took = t.elapsed().as_secs_f64();
    assert_eq!(oc.bytes, total);
    let mut limits: Vec<u64> = seen.iter().map(|s| s.0 / MIB).collect();
    limits.dedup();
    assert_eq!(limits, vec![32, 16, 8, 16, 32], "{seen:?}");
    assert!(
        seen.iter().any(|s| s
            .1
            .starts_with("halved: disk p99 64.000 ms above 4 x 1.000 ms")),
        "{seen:?}"
    );
    assert!(seen.iter().any(|s| s.1.starts_with("raised: ")), "{seen:?}");
    // 96 MiB at 32 MiB/s would take 3 s; the slow intervals make it longer.
    assert!(took > 4.0, "{took:.2} s: the rate never came down");
    eprintln!("adaptive: 96 MiB in {took:.2} s, limits {limits:?} MiB/s");
}
