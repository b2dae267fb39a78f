//! Host tests of the BPF latency tracer on loop devices (root).

#![cfg(feature = "bpf")]

mod common;

use std::process::Command;

use asmguard_metrics::{
    AttachMode, IoLat, KernelDev, LoadOptions, Op, OpHist, RawEntry, StatsBitFrom,
    TracerStamps as Stamps,
};
use common::{direct_reads, direct_writes, disk_of, root_serial, traced_disk, LoopDev};

fn hist_of(entries: &[RawEntry], dev: KernelDev, op: Op) -> OpHist {
    entries
        .iter()
        .find(|e| e.dev == dev.raw() && e.op == op)
        .map(|e| e.hist.clone())
        .unwrap_or_default()
}

/// N reads and M writes of 4 KiB show as exactly N and M I/Os, N*4096 and
/// M*4096 bytes, with every I/O in one latency and one queue slot.
/// `kernel_stamps`: use the kernel's issue stamps (loop devices have them:
/// writeback throttling watches their queues) or stamp requests ourselves in
/// the LRU map.
fn exact_counts(mode: AttachMode, kernel_stamps: bool, n: u64, m: u64) {
    let Some(_serial) = root_serial() else {
        return;
    };
    let disk = LoopDev::new(&format!("exact-{}-{kernel_stamps}", mode.as_str()), 64);
    let dev = disk_of(&disk.path);
    let iolat = IoLat::load_opts(
        &asmguard_paths::Paths::default(),
        &LoadOptions {
            mode,
            max_disks: 16,
            kernel_stamps,
            ..LoadOptions::default()
        },
    )
    .expect("loading the tracer");
    assert_eq!(iolat.mode(), mode);
    assert_eq!(iolat.kernel_stamps(), kernel_stamps);
    iolat.add_device(dev.raw()).unwrap();
    assert_eq!(iolat.devices(), vec![dev.raw()]);

    // Reads first: closing a device opened for writing makes udev probe it
    // (more reads), so each op is measured in its own window.
    let s0 = iolat.read().unwrap();
    direct_reads(&disk.path, n);
    let s1 = iolat.read().unwrap();
    direct_writes(&disk.path, m, 128);
    let s2 = iolat.read().unwrap();

    let reads = hist_of(&s1, dev, Op::Read).delta(&hist_of(&s0, dev, Op::Read));
    let writes = hist_of(&s2, dev, Op::Write).delta(&hist_of(&s1, dev, Op::Write));
    // a shortfall names the requests that completed without the kernel's
    // issue stamp (not counted in the histograms, counted here)
    let misses = iolat.stamp_misses();
    assert_eq!(reads.count(), n, "reads: {reads:?}, stamp misses {misses}");
    assert_eq!(reads.bytes, n * 4096);
    // the kernel stamps requests of disks with iostats on (the default)
    assert_eq!(reads.queue_count(), n);
    assert!(reads.lat_sum_ns > 0);
    let misses = iolat.stamp_misses();
    assert_eq!(
        writes.count(),
        m,
        "writes: {writes:?}, stamp misses {misses}"
    );
    assert_eq!(writes.bytes, m * 4096);
    assert_eq!(writes.queue_count(), m);
    // no writes in the read window
    let w01 = hist_of(&s1, dev, Op::Write).delta(&hist_of(&s0, dev, Op::Write));
    assert_eq!(w01.count(), 0);
    assert_eq!(iolat.dropped(), 0);
    // which path counted them: the kernel stamps loop requests (writeback
    // throttling keeps stats on their queues), so with kernel stamps the
    // tracer stamped none of them; with own stamps, every one
    let own = iolat.own_stamped();
    if kernel_stamps {
        assert_eq!(own, 0, "the kernel stamps loop requests");
    } else {
        assert_eq!(own, n + m, "own stamps: every request");
    }
    // this kernel has BPF cmpxchg: the own-stamps path uses the cells
    assert!(iolat.cells());
}

/// Every attach mode with each source of issue stamps, with its own counts.
#[test]
fn exact_counts_in_every_attach_mode_and_stamp_source() {
    for (mode, kernel_stamps, n, m) in [
        (AttachMode::TpBtf, true, 37, 23),
        (AttachMode::TpBtf, false, 29, 31),
        (AttachMode::RawTp, true, 19, 41),
        (AttachMode::RawTp, false, 43, 17),
    ] {
        exact_counts(mode, kernel_stamps, n, m);
    }
}

/// The kernel's stamps are verified at load by a probe read of a disk whose
/// queue keeps stats (every blk-mq disk with writeback throttling: here the
/// loop device below, at least), and the read leaves no disk traced.
#[test]
fn kernel_stamps_are_verified_by_a_probe_read() {
    let Some(_serial) = root_serial() else {
        return;
    };
    let _disk = LoopDev::new("probe", 16);
    let iolat = IoLat::load(&asmguard_paths::Paths::default()).expect("loading the tracer");
    match iolat.stamps() {
        Stamps::Kernel {
            stats_bit: bit,
            bit_from: source,
            verified_on: Some(disk),
        } => {
            assert!(*bit < 64);
            assert!(
                std::path::Path::new("/sys/block").join(disk).exists(),
                "verified on {disk}, which is not a disk"
            );
            // on this kernel (6.12 and later) the bit comes from the BTF
            assert_eq!(*source, StatsBitFrom::Btf, "{}", iolat.stamps());
        }
        other => panic!("kernel stamps not verified: {other}"),
    }
    assert!(iolat.stamps().to_string().contains("verified on "));
    assert_eq!(iolat.stamp_misses(), 0);
    assert!(iolat.devices().is_empty(), "the probe left a disk traced");
    assert!(
        iolat.read().unwrap().is_empty(),
        "the probe left histograms"
    );
}

/// A bit no live queue has (QUEUE_FLAG_DYING) makes the issue program stamp
/// every request itself: the probe reads are all counted by the tracer's own
/// stamps, so nothing verifies the bit, and the description says so.
#[test]
fn a_bit_no_queue_has_is_reported_unverified() {
    let Some(_serial) = root_serial() else {
        return;
    };
    let _disk = LoopDev::new("probe-dying", 16);
    let dying = asmguard_metrics::stamps::btf_queue_flag("QUEUE_FLAG_DYING")
        .expect("QUEUE_FLAG_DYING in the BTF");
    let iolat = IoLat::load_opts(
        &asmguard_paths::Paths::default(),
        &LoadOptions {
            stats_bit: Some(dying),
            ..LoadOptions::default()
        },
    )
    .expect("loading the tracer");
    assert_eq!(
        iolat.stamps(),
        &Stamps::Kernel {
            stats_bit: dying,
            bit_from: StatsBitFrom::Configuration,
            verified_on: None
        }
    );
    assert!(iolat.stamps().to_string().contains("not verified"));
    assert_eq!(iolat.stamp_misses(), 0);
}

/// A bit outside the 64-bit word is refused: own stamps, and why.
#[test]
fn an_impossible_bit_means_own_stamps() {
    let Some(_serial) = root_serial() else {
        return;
    };
    let iolat = IoLat::load_opts(
        &asmguard_paths::Paths::default(),
        &LoadOptions {
            stats_bit: Some(64),
            ..LoadOptions::default()
        },
    )
    .expect("loading the tracer");
    assert!(!iolat.kernel_stamps());
    assert!(
        iolat.stamps().to_string().contains("not a bit"),
        "{}",
        iolat.stamps()
    );
}

/// Two traced disks whose dev_t share a bucket of the tracer's direct-mapped
/// index are told apart by the hash map behind it; an untraced disk is not
/// counted; after one leaves, the other still counts exactly.
#[test]
fn disks_sharing_an_index_bucket_count_exactly() {
    let Some(_serial) = root_serial() else {
        return;
    };
    // max_disks 2: four buckets, so five disks hold a pair that shares one
    let disks: Vec<LoopDev> = (0..5)
        .map(|i| LoopDev::new(&format!("bucket{i}"), 16))
        .collect();
    let devs: Vec<KernelDev> = disks.iter().map(|d| disk_of(&d.path)).collect();
    let b = |i: usize| asmguard_metrics::bpf::index_bucket(devs[i].raw(), 2);
    let (i, j) = (0..5)
        .flat_map(|i| (i + 1..5).map(move |j| (i, j)))
        .find(|&(i, j)| b(i) == b(j))
        .expect("five disks in four buckets");
    // the tracer's own issue stamps: this test is about the index, and a
    // loop queue's kernel stamps depend on what earlier tests did to it
    // (writeback throttling off: no stamp on its first requests)
    let iolat = IoLat::load_opts(
        &asmguard_paths::Paths::default(),
        &LoadOptions {
            max_disks: 2,
            kernel_stamps: false,
            ..LoadOptions::default()
        },
    )
    .unwrap();
    iolat.add_device(devs[i].raw()).unwrap();
    iolat.add_device(devs[j].raw()).unwrap();
    let other = (0..5).find(|&k| k != i && k != j).unwrap();

    let s0 = iolat.read().unwrap();
    direct_reads(&disks[i].path, 13);
    direct_reads(&disks[j].path, 17);
    direct_reads(&disks[other].path, 5);
    let s1 = iolat.read().unwrap();
    let reads = |s1: &[RawEntry], s0: &[RawEntry], k: usize| {
        hist_of(s1, devs[k], Op::Read)
            .delta(&hist_of(s0, devs[k], Op::Read))
            .count()
    };
    let misses = iolat.stamp_misses();
    assert_eq!(reads(&s1, &s0, i), 13, "stamp misses {misses}");
    assert_eq!(reads(&s1, &s0, j), 17, "stamp misses {misses}");
    assert_eq!(reads(&s1, &s0, other), 0);

    iolat.forget_device(devs[j].raw()).unwrap();
    direct_reads(&disks[i].path, 7);
    direct_reads(&disks[j].path, 3);
    let s2 = iolat.read().unwrap();
    assert_eq!(reads(&s2, &s1, i), 7);
    assert_eq!(reads(&s2, &s1, j), 0);
}

#[test]
fn discards_and_flushes_have_their_own_op() {
    let Some(_serial) = root_serial() else {
        return;
    };
    let (disk, dev, iolat) = traced_disk("discard", 64);
    let s0 = iolat.read().unwrap();
    let st = Command::new("blkdiscard")
        .args(["-o", "1048576", "-l", "1048576"])
        .arg(&disk.path)
        .status()
        .unwrap();
    assert!(st.success());
    let delta = |now: &[RawEntry], before: &[RawEntry], op| {
        hist_of(now, dev, op).delta(&hist_of(before, dev, op))
    };
    let s1 = iolat.read().unwrap();
    let d = delta(&s1, &s0, Op::Discard);
    assert!(d.count() >= 1, "{d:?}");
    assert_eq!(d.bytes, 1 << 20);
    // discards are not writes
    let w = delta(&s1, &s0, Op::Write);
    assert_eq!(w.bytes, 0);

    // fsync of a device with a write-back cache sends a flush
    let cache = std::fs::read_to_string(format!("/sys/block/{}/queue/write_cache", disk.name()))
        .unwrap_or_default();
    if cache.trim() == "write back" {
        let st = Command::new("dd")
            .args([
                "if=/dev/zero",
                "bs=4096",
                "count=1",
                "oflag=direct",
                "conv=fsync",
                "status=none",
            ])
            .arg(format!("of={}", disk.path.display()))
            .status()
            .unwrap();
        assert!(st.success());
        let s2 = iolat.read().unwrap();
        let f = delta(&s2, &s1, Op::Flush);
        assert!(f.count() >= 1, "no flush counted: {f:?}");
    }
}

#[test]
fn only_added_disks_unless_trace_all() {
    let Some(_serial) = root_serial() else {
        return;
    };
    let traced = LoopDev::new("traced", 16);
    let other = LoopDev::new("other", 16);
    let tdev = disk_of(&traced.path);
    let odev = disk_of(&other.path);
    let iolat = IoLat::load(&asmguard_paths::Paths::default()).unwrap();
    iolat.add_device(tdev.raw()).unwrap();

    direct_reads(&other.path, 5);
    direct_reads(&traced.path, 5);
    let s = iolat.read().unwrap();
    assert!(hist_of(&s, tdev, Op::Read).count() >= 5);
    assert_eq!(
        hist_of(&s, odev, Op::Read).count(),
        0,
        "untraced disk counted"
    );

    assert!(iolat.set_trace_all(true).unwrap() >= 2);
    direct_reads(&other.path, 7);
    let s = iolat.read().unwrap();
    assert!(hist_of(&s, odev, Op::Read).count() >= 7);

    // a disk unknown to the tracer (here: forgotten; in life: hotplugged) is
    // traced after a rescan
    let late = LoopDev::new("late", 16);
    let ldev = disk_of(&late.path);
    iolat.forget_device(ldev.raw()).unwrap();
    assert!(!iolat.devices().contains(&ldev.raw()));
    iolat.rescan().unwrap();
    assert!(iolat.devices().contains(&ldev.raw()));
    direct_reads(&late.path, 9);
    let s = iolat.read().unwrap();
    assert!(hist_of(&s, ldev, Op::Read).count() >= 9);

    // forgetting a disk drops its histograms and stops counting it
    iolat.set_trace_all(false).unwrap();
    assert!(hist_of(&iolat.read().unwrap(), tdev, Op::Read).count() > 0);
    iolat.forget_device(tdev.raw()).unwrap();
    assert!(iolat.read().unwrap().iter().all(|e| e.dev != tdev.raw()));
    direct_reads(&traced.path, 3);
    assert!(
        iolat.read().unwrap().iter().all(|e| e.dev != tdev.raw()),
        "a forgotten disk is not counted"
    );
}

/// Two loop devices traced as the two paths of one disk (as the daemon traces
/// each path of a multipath device or NVMe head): the scrape has one series
/// per op for the disk, holding exactly the reads of both paths.
#[test]
fn paths_of_one_disk_roll_up_with_exact_counts() {
    use asmguard_metrics::{DiskInfo, Metrics};
    let Some(_serial) = root_serial() else {
        return;
    };
    let paths: Vec<LoopDev> = (0..2)
        .map(|i| LoopDev::new(&format!("rollup{i}"), 16))
        .collect();
    let devs: Vec<KernelDev> = paths.iter().map(|d| disk_of(&d.path)).collect();
    let iolat = std::sync::Arc::new(
        IoLat::load_opts(
            &asmguard_paths::Paths::default(),
            &LoadOptions {
                kernel_stamps: false,
                ..LoadOptions::default()
            },
        )
        .unwrap(),
    );
    let m = Metrics::with_source(iolat.clone(), &asmguard_paths::Paths::default().sys);
    for (i, dev) in devs.iter().enumerate() {
        iolat.add_device(dev.raw()).unwrap();
        m.set_disk(
            *dev,
            DiskInfo {
                device: "dm-rollup".into(),
                path: format!("path{i}"),
                label: "ROLLUP1".into(),
                paths: vec![],
                logical_sector: 512,
                physical_sector: 512,
                diskgroup: String::new(),
            },
        );
    }
    // the disk's read series (none before its first read), never one per path
    let reads = |m: &Metrics| {
        let s = m.snapshot().unwrap();
        let mine: Vec<_> = s
            .entries
            .iter()
            .filter(|e| e.op == Op::Read && e.label == "ROLLUP1")
            .collect();
        assert!(mine.len() <= 1, "{s:?}");
        mine.first().map(|e| {
            assert_eq!(e.device, "dm-rollup");
            e.hist.clone()
        })
    };
    let h0 = reads(&m).unwrap_or_default();
    direct_reads(&paths[0].path, 11);
    direct_reads(&paths[1].path, 19);
    let d = reads(&m).expect("a read series").delta(&h0);
    assert_eq!((d.count(), d.bytes), (30, 30 * 4096));
    let text = m.encode_prometheus_text();
    assert_eq!(
        text.matches("asmguard_io_latency_seconds_count{device=\"dm-rollup\"")
            .count(),
        1,
        "{text}"
    );
}
