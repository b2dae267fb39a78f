//! Helpers of the host tests: root check, loop devices that clean up after
//! themselves, O_DIRECT I/O through dd.
#![allow(dead_code)]

use asmguard_filter_types::{Applied, Hook, Mode};
use asmguard_testkit::run_ok as run;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Taken by every test of a binary that loads a tracer (after the root check):
/// loading reads one block of a disk to verify the kernel's stamps (the probe
/// read), which must not land in another test's exact-count window.
#[allow(unused_imports)]
pub use asmguard_testkit::root_lock as root_serial;

/// The whole disk a block device node belongs to, as the tracer counts it.
pub fn disk_of(path: &Path) -> asmguard_metrics::KernelDev {
    asmguard_devices::sysfs::disk_of_path(Path::new("/sys"), path).expect("a block device")
}

/// A loop device over a sparse file in /dev/shm; detached and removed on drop.
pub struct LoopDev {
    pub path: PathBuf,
    backing: PathBuf,
}

impl LoopDev {
    pub fn new(tag: &str, size_mib: u64) -> LoopDev {
        let backing = PathBuf::from(format!(
            "/dev/shm/asmguard-metrics-test-{tag}-{}.img",
            std::process::id()
        ));
        let f = std::fs::File::create(&backing).expect("creating the backing file");
        f.set_len(size_mib << 20).expect("sizing the backing file");
        drop(f);
        let out = run(Command::new("losetup").args(["-f", "--show"]).arg(&backing));
        let path = PathBuf::from(out.trim());
        settle();
        LoopDev { path, backing }
    }

    pub fn name(&self) -> String {
        self.path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned()
    }
}

impl Drop for LoopDev {
    fn drop(&mut self) {
        let _ = Command::new("losetup").arg("-d").arg(&self.path).status();
        let _ = std::fs::remove_file(&self.backing);
    }
}

/// Waits until udev has handled every event (so its probes are done).
pub fn settle() {
    let _ = Command::new("udevadm")
        .args(["settle", "--timeout=10"])
        .status();
}

/// `count` O_DIRECT reads of 4 KiB, one request each.
pub fn direct_reads(dev: &Path, count: u64) {
    run(Command::new("dd")
        .arg(format!("if={}", dev.display()))
        .args(["of=/dev/null", "bs=4096", "iflag=direct", "status=none"])
        .arg(format!("count={count}")));
}

/// `count` O_DIRECT writes of 4 KiB, one request each, from offset `skip` blocks.
pub fn direct_writes(dev: &Path, count: u64, skip: u64) {
    run(Command::new("dd")
        .args(["if=/dev/zero", "bs=4096", "oflag=direct", "status=none"])
        .arg(format!("of={}", dev.display()))
        .arg(format!("seek={skip}"))
        .arg(format!("count={count}")));
}

/// Describes `dev` as disk DATA1 (kernel name `device`, `paths`) and gives `m`
/// a value in every counter family, with the write-filter `backend`.
pub fn populate_every_family(
    m: &asmguard_metrics::Metrics,
    dev: asmguard_metrics::KernelDev,
    device: String,
    paths: Vec<String>,
    backend: asmguard_filter_types::BackendName,
) {
    use asmguard_metrics::{Counters, DiscardSource, DiskInfo};
    m.set_disk(
        dev,
        DiskInfo {
            path: String::new(),
            device,
            label: "DATA1".into(),
            paths,
            logical_sector: 512,
            physical_sector: 4096,
            diskgroup: String::new(),
        },
    );
    m.set_counter_source(std::sync::Arc::new(
        Counters::default()
            .with_backend(backend)
            .with_mode("DATA1", Applied::Mode(Mode::Enforce))
            .with_denied("DATA1", Hook::FileOpen, 1)
            .with_denied("DATA1", Hook::FileIoctl, 1)
            .with_discard("DATA1", DiscardSource::Oracle, 1 << 20)
            .with_discard("DATA1", DiscardSource::Reclaim, 4 << 20),
    ));
}

/// `m` served on a free local port, scraped once (Prometheus text format).
pub fn scrape_over_http(m: asmguard_metrics::Metrics) -> String {
    use asmguard_metrics::http;
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let addr = http::spawn("127.0.0.1:0".parse().unwrap(), m)
            .await
            .unwrap();
        http::scrape(&format!("http://{addr}/metrics"), false)
            .await
            .unwrap()
    })
}

/// A fresh loop device (`tag`, `size_mib` MiB), its dev_t, and a tracer that
/// traces it.
pub fn traced_disk(
    tag: &str,
    size_mib: u64,
) -> (
    LoopDev,
    asmguard_metrics::KernelDev,
    asmguard_metrics::IoLat,
) {
    let disk = LoopDev::new(tag, size_mib);
    let dev = disk_of(&disk.path);
    let iolat = asmguard_metrics::IoLat::load(&asmguard_paths::Paths::default())
        .expect("loading the tracer");
    iolat.add_device(dev.raw()).unwrap();
    (disk, dev, iolat)
}
