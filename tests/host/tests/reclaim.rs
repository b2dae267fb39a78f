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
use std::os::unix::fs::MetadataExt;
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
    let l = Loop::new(AUS as u64 * MIB);
    let mut s = SynthDisk::new(AUS);
    for a in allocated() {
        s.allocated[a] = true;
    }
    s.label = Some(Label::new(label).unwrap());
    for au in 0..AUS {
        l.write_dev(au as u64 * MIB, &fill(au as u64 * 7919 + 1, MIB as usize));
    }
    for (off, b) in s.metadata().unwrap() {
        l.write_dev(off, &b);
    }
    Disk { l, synth: s }
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
