//! asmguard-iolat: the latency tracer and Prometheus exporter on its own (for
//! tests and benchmarks, and until asmguardd runs it), plus `iostat`.
//!
//!   asmguard-iolat [--listen ADDR] [--device PATH[=LABEL]]... [--all] [--raw-tp]
//!   asmguard-iolat iostat [LABEL] [--interval S] [--count N] [--json] [--url URL]
//!   asmguard-iolat scrape [--url URL] [--openmetrics]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use asmguard_metrics::bpf::{DEFAULT_MAX_DISKS, DEFAULT_SINGLE_BLOCK_BYTES};
use asmguard_metrics::http::{self, DEFAULT_LISTEN};
use asmguard_metrics::FromPrometheusText;
use asmguard_metrics::{
    AttachMode, DiskInfo, IoLat, KernelDev, LoadOptions, Metrics, Op, OpHist, Snapshot,
};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "asmguard-iolat",
    about = "Per-disk I/O latency histograms from BPF block tracepoints, served to Prometheus",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    serve: ServeArgs,
}

#[derive(clap::Args)]
struct ServeArgs {
    /// Address of the /metrics endpoint.
    #[arg(long, default_value = DEFAULT_LISTEN)]
    listen: SocketAddr,
    /// A disk to trace, with an optional label: /dev/sdb=DATA1 (repeatable).
    #[arg(long = "device", value_name = "PATH[=LABEL]")]
    devices: Vec<String>,
    /// Trace every disk, not only the --device ones.
    #[arg(long)]
    all: bool,
    /// Attach with raw_tp instead of tp_btf.
    #[arg(long)]
    raw_tp: bool,
    /// Benchmarks only: add N synthetic disks (read and write histograms written
    /// into the BPF map, names BENCH0001...) to measure scrapes of many disks.
    #[arg(long, value_name = "N", default_value_t = 0, hide = true)]
    synthetic_disks: u32,
    /// The largest single-block I/O in bytes (the database block size): I/Os up
    /// to it count as size="single", larger ones as size="multi".
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_SINGLE_BLOCK_BYTES,
          value_parser = clap::value_parser!(u32).range(1..))]
    single_block_bytes: u32,
    /// Always stamp requests ourselves, even on queues the kernel stamps.
    #[arg(long)]
    no_kernel_stamps: bool,
    /// The bit number of QUEUE_FLAG_STATS, for a kernel whose BTF and the
    /// built-in table do not know it (checked by a probe read at start).
    #[arg(long, value_name = "BIT", value_parser = clap::value_parser!(u32).range(0..64))]
    queue_stats_bit: Option<u32>,
    /// Benchmarks only: also attach an empty program to block_rq_complete, to
    /// measure what kernel.bpf_stats_enabled itself costs per event.
    #[arg(long, hide = true)]
    calibrate: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Per disk and op: IOPS, MB/s and Oracle's wait histogram, from the exporter.
    Iostat {
        /// Only this label (or device name).
        label: Option<String>,
        /// Seconds between samples.
        #[arg(long, default_value_t = 1.0)]
        interval: f64,
        /// Number of reports (0: until interrupted).
        #[arg(long, default_value_t = 0)]
        count: u64,
        /// One JSON object per report.
        #[arg(long)]
        json: bool,
        /// The exporter to read.
        #[arg(long, default_value_t = format!("http://{DEFAULT_LISTEN}/metrics"))]
        url: String,
    },
    /// Prints one scrape of the exporter (Prometheus text, or OpenMetrics).
    Scrape {
        /// The exporter to read.
        #[arg(long, default_value_t = format!("http://{DEFAULT_LISTEN}/metrics"))]
        url: String,
        /// Ask for OpenMetrics instead of the Prometheus text format.
        #[arg(long)]
        openmetrics: bool,
    },
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Iostat {
            label,
            interval,
            count,
            json,
            url,
        }) => run_iostat(label.as_deref(), interval, count, json, &url),
        Some(Command::Scrape { url, openmetrics }) => {
            print!("{}", http::scrape_blocking(&url, openmetrics)?);
            Ok(())
        }
        None => serve(cli.serve),
    }
}

fn sysfs_u32(name: &str, attr: &str) -> u32 {
    std::fs::read_to_string(
        asmguard_paths::Paths::default()
            .class_block()
            .join(name)
            .join("queue")
            .join(attr),
    )
    .ok()
    .and_then(|s| s.trim().parse().ok())
    .unwrap_or(0)
}

/// The paths (device number, kernel name) of a dm-multipath device (dm UUID
/// `mpath-...`) from its sysfs `slaves`; empty for any other device.
fn multipath_paths(dev: KernelDev) -> Vec<(KernelDev, String)> {
    let base = asmguard_paths::Paths::default().sys.join(format!(
        "dev/block/{}:{}",
        dev.major(),
        dev.minor()
    ));
    let uuid = std::fs::read_to_string(base.join("dm/uuid")).unwrap_or_default();
    if !uuid.starts_with("mpath-") {
        return Vec::new();
    }
    let Ok(dir) = std::fs::read_dir(base.join("slaves")) else {
        return Vec::new();
    };
    let mut out: Vec<(KernelDev, String)> = dir
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let d = KernelDev::read_sysfs(&e.path().join("dev")).ok()?;
            Some((d, e.file_name().to_string_lossy().into_owned()))
        })
        .collect();
    out.sort();
    out
}

fn serve(args: ServeArgs) -> Result<()> {
    let opts = LoadOptions {
        max_disks: DEFAULT_MAX_DISKS.max(args.synthetic_disks),
        kernel_stamps: !args.no_kernel_stamps,
        calibrate: args.calibrate,
        stats_bit: args.queue_stats_bit,
        single_block_bytes: args.single_block_bytes,
        ..LoadOptions::default()
    };
    let paths = asmguard_paths::Paths::default();
    let iolat = if args.raw_tp {
        IoLat::load_opts(
            &paths,
            &LoadOptions {
                mode: AttachMode::RawTp,
                ..opts
            },
        )
    } else {
        IoLat::load_opts(&paths, &opts).or_else(|_| {
            IoLat::load_opts(
                &paths,
                &LoadOptions {
                    mode: AttachMode::RawTp,
                    ..opts
                },
            )
        })
    }
    .context("loading the BPF latency tracer")?;
    let iolat = Arc::new(iolat);
    let metrics = Metrics::with_source(iolat.clone(), &paths.sys);
    for spec in &args.devices {
        let (path, label) = match spec.split_once('=') {
            Some((p, l)) => (PathBuf::from(p), l.to_string()),
            None => (PathBuf::from(spec), String::new()),
        };
        let dev =
            asmguard_devices::sysfs::disk_of_path(&asmguard_paths::Paths::default().sys, &path)?;
        let device = asmguard_devices::sysfs::name_of(&asmguard_paths::Paths::default().sys, dev)
            .unwrap_or_else(|| dev.to_string());
        let info = DiskInfo {
            path: String::new(),
            logical_sector: sysfs_u32(&device, "logical_block_size"),
            physical_sector: sysfs_u32(&device, "physical_block_size"),
            device,
            label,
            paths: vec![path.display().to_string()],
            diskgroup: String::new(),
        };
        // a dm-multipath device issues no requests: trace its paths, which
        // roll up into it (as asmguardd does)
        let paths = multipath_paths(dev);
        if paths.is_empty() {
            iolat.add_device(dev.raw())?;
            metrics.set_disk(dev, info.clone());
        }
        for (p, name) in paths {
            iolat.add_device(p.raw())?;
            metrics.set_disk(
                p,
                DiskInfo {
                    path: name,
                    ..info.clone()
                },
            );
        }
    }
    add_synthetic_disks(&iolat, &metrics, args.synthetic_disks)?;
    if args.all {
        iolat.set_trace_all(true)?;
    } else if args.devices.is_empty() && args.synthetic_disks == 0 {
        bail!("nothing to trace: give --device PATH[=LABEL] or --all");
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        if args.all {
            // disks that appear later
            let iolat = iolat.clone();
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    if let Err(e) = iolat.rescan() {
                        eprintln!("asmguard-iolat: rescanning disks: {e}");
                    }
                }
            });
        }
        let addr = http::spawn(args.listen, metrics)
            .await
            .with_context(|| format!("listening on {}", args.listen))?;
        eprintln!(
            "asmguard-iolat: serving http://{addr}/metrics ({}, {}, {}, {} disks{})",
            iolat.mode().as_str(),
            iolat.stamps(),
            if iolat.cells() {
                "in-flight cells"
            } else {
                "in-flight LRU map"
            },
            iolat.devices().len(),
            if args.all { ", all disks" } else { "" }
        );
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        Ok(())
    })
}

/// Synthetic disks on major 4095 (unused by Linux), with plausible histograms.
fn add_synthetic_disks(iolat: &IoLat, metrics: &Metrics, n: u32) -> Result<()> {
    for i in 0..n {
        let dev = KernelDev::new(4095, i)?;
        for (op, base) in [(Op::Read, 9usize), (Op::Write, 10usize)] {
            let mut hist = OpHist::default();
            for k in 0..6 {
                hist.lat[base + k] = 1000 >> k;
                hist.queue[k] = 500 >> k;
            }
            hist.bytes = 16384 * hist.count();
            hist.lat_sum_ns = 500_000 * hist.count();
            iolat.insert_histogram(dev.raw(), op, &hist)?;
        }
        let label = format!("BENCH{:04}", i + 1);
        metrics.set_disk(
            dev,
            DiskInfo {
                path: String::new(),
                device: format!("bench{}", i + 1),
                paths: vec![asmguard_paths::Paths::default()
                    .disks_dir()
                    .join(&label)
                    .display()
                    .to_string()],
                label,
                logical_sector: 512,
                physical_sector: 4096,
                diskgroup: String::new(),
            },
        );
    }
    Ok(())
}

fn run_iostat(label: Option<&str>, interval: f64, count: u64, json: bool, url: &str) -> Result<()> {
    if !interval.is_finite() || interval <= 0.0 {
        bail!("--interval must be positive");
    }
    let read = || -> Result<(Snapshot, Instant)> {
        let text = http::scrape_blocking(url, false)?;
        let at = Instant::now();
        Ok((Snapshot::from_prometheus_text(&text)?, at))
    };
    let (mut prev, mut prev_at) = read()?;
    let mut n = 0u64;
    loop {
        std::thread::sleep(Duration::from_secs_f64(interval));
        let (cur, at) = read()?;
        let report = asmguard_metrics::iostat(&prev, &cur, at - prev_at, label, false);
        if json {
            println!("{}", report.to_json());
        } else {
            print!("{}", report.to_text());
            if count != 1 {
                println!();
            }
        }
        n += 1;
        if count != 0 && n >= count {
            return Ok(());
        }
        (prev, prev_at) = (cur, at);
    }
}
