//! The exporter live: `asmguard-iolat` on a loop device, scraped over HTTP,
//! checked by `promtool check metrics` (Debian's prometheus package), and its
//! `iostat` view (root).

#![cfg(feature = "bpf")]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use asmguard_metrics::http::scrape_blocking;
use asmguard_metrics::{FromPrometheusText, Metrics, Op, Snapshot};
use common::{direct_reads, direct_writes, root_serial, traced_disk, LoopDev};

/// The exporter binary; killed on drop.
struct Exporter {
    child: Child,
    url: String,
}

impl Exporter {
    fn start(args: &[&str]) -> Exporter {
        let mut child = Command::new(env!("CARGO_BIN_EXE_asmguard-iolat"))
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting asmguard-iolat");
        let mut line = String::new();
        BufReader::new(child.stderr.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap_or_else(|| panic!("asmguard-iolat did not start: {line}"))
            .to_string();
        Exporter { child, url }
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `promtool check metrics` on a scrape: (success, everything it printed).
fn promtool(scrape: &str) -> (bool, String) {
    let mut p = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian package prometheus) is needed");
    p.stdin
        .take()
        .unwrap()
        .write_all(scrape.as_bytes())
        .unwrap();
    let out = p.wait_with_output().unwrap();
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// For a root test: the serial guard, a fresh loop device `tag` and the
/// standalone exporter tracing it as DATA1 (`None`: skipped).
fn exported_disk(tag: &str) -> Option<(std::sync::MutexGuard<'static, ()>, LoopDev, Exporter)> {
    let serial = root_serial()?;
    let disk = LoopDev::new(tag, 32);
    let exporter = Exporter::start(&["--device", &format!("{}=DATA1", disk.path.display())]);
    Some((serial, disk, exporter))
}

#[test]
fn promtool_accepts_a_live_scrape_of_the_binary() {
    let Some((_serial, disk, exporter)) = exported_disk("promtool") else {
        return;
    };
    direct_reads(&disk.path, 11);
    direct_writes(&disk.path, 3, 64);
    let text = scrape_blocking(&exporter.url, false).unwrap();
    let (ok, out) = promtool(&text);
    assert!(
        ok && out.trim().is_empty(),
        "promtool: {out}\n--- scrape:\n{text}"
    );
    // not an empty scrape: the disk's histograms and info are there
    let snap = Snapshot::from_prometheus_text(&text).unwrap();
    let reads = snap
        .find("DATA1", Op::Read)
        .expect("read histogram of DATA1");
    assert_eq!(reads.device, disk.name());
    assert!(reads.hist.count() >= 11);
    assert!(snap.find("DATA1", Op::Write).unwrap().hist.bytes >= 3 * 4096);
    assert!(text.contains(&format!(
        "asmguard_disk_info{{label=\"DATA1\",device=\"{}\",paths=\"{}\",logical_sector=\"512\",physical_sector=\"512\",diskgroup=\"\"}} 1",
        disk.name(),
        disk.path.display()
    )));
    // OpenMetrics for those who ask
    let om = scrape_blocking(&exporter.url, true).unwrap();
    assert!(om.ends_with("# EOF\n"));
    assert!(om.contains("# UNIT asmguard_io_latency_seconds seconds"));
}

#[test]
fn promtool_accepts_every_family() {
    let Some(_serial) = root_serial() else {
        return;
    };
    let (disk, dev, iolat) = traced_disk("families", 32);
    let m = Metrics::with_source(Arc::new(iolat), &asmguard_paths::Paths::default().sys);
    common::populate_every_family(
        &m,
        dev,
        disk.name(),
        vec![
            disk.path.display().to_string(),
            "/dev/asmguard/disks/DATA1".into(),
        ],
        asmguard_filter_types::BackendName::CgroupDevice,
    );
    direct_reads(&disk.path, 4);
    let _ = Command::new("blkdiscard")
        .args(["-o", "0", "-l", "65536"])
        .arg(&disk.path)
        .status();
    let text = common::scrape_over_http(m);
    let (ok, out) = promtool(&text);
    assert!(
        ok && out.trim().is_empty(),
        "promtool: {out}\n--- scrape:\n{text}"
    );
    asmguard_testkit::assert_contains_all(
        &text,
        &[
            "asmguard_io_latency_seconds_bucket{",
            "asmguard_io_queue_seconds_bucket{",
            "asmguard_io_bytes_total{",
            "asmguard_io_dropped_total ",
            "asmguard_writes_denied_total{",
            "asmguard_discard_bytes_total{",
            "asmguard_disk_info{",
            "asmguard_filter_mode{",
            "asmguard_backend_info{",
        ],
    );
    assert!(text.contains("op=\"discard\""));
}

#[test]
fn iostat_shows_the_interval() {
    let Some((_serial, disk, exporter)) = exported_disk("iostat") else {
        return;
    };
    let iostat = Command::new(env!("CARGO_BIN_EXE_asmguard-iolat"))
        .args([
            "iostat",
            "DATA1",
            "--interval",
            "5",
            "--count",
            "1",
            "--json",
            "--url",
        ])
        .arg(&exporter.url)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // after iostat's first scrape, well before its second
    std::thread::sleep(Duration::from_millis(1500));
    direct_reads(&disk.path, 150);
    let out = iostat.wait_with_output().unwrap();
    assert!(out.status.success());
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = report["rows"].as_array().unwrap();
    let read = rows.iter().find(|r| r["op"] == "read").expect("a read row");
    assert_eq!(read["label"], "DATA1");
    assert_eq!(read["ios"], 150);
    let iops = read["iops"].as_f64().unwrap();
    assert!((25.0..=35.0).contains(&iops), "150 I/Os in ~5 s: {iops}");
    let shares: f64 = read["wait_pct"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_f64().unwrap())
        .sum();
    assert!((shares - 100.0).abs() < 1e-6, "{shares}");
    let text = Command::new(env!("CARGO_BIN_EXE_asmguard-iolat"))
        .args(["iostat", "--interval", "0.2", "--count", "1", "--url"])
        .arg(&exporter.url)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.starts_with("DEVICE"), "{text}");
    assert!(text.contains("<=1s"));
    assert!(text.contains("DATA1"));
}
