//! Helpers of the host tests: root check, loop devices that clean up after
//! themselves, O_DIRECT I/O through dd.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The whole disk a block device node belongs to, as the tracer counts it.
pub fn disk_of(path: &Path) -> asmguard_metrics::KernelDev {
    asmguard_devices::sysfs::disk_of_path(Path::new("/sys"), path).expect("a block device")
}

/// Taken by every test of a binary that loads a tracer: loading reads one
/// block of a disk to verify the kernel's stamps (the probe read), which must
/// not land in another test's exact-count window.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// True when the test may run. Without root the tests fail, unless
/// `ASMGUARD_HOST_TESTS=skip` is set (then they print SKIPPED and pass).
pub fn require_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    if std::env::var("ASMGUARD_HOST_TESTS").as_deref() == Ok("skip") {
        eprintln!("SKIPPED: host tests need root (ASMGUARD_HOST_TESTS=skip)");
        return false;
    }
    panic!("host tests need root and loop devices; set ASMGUARD_HOST_TESTS=skip to skip them");
}

fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
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
