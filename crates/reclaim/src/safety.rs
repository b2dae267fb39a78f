//! Refuse while the disk group may be mounted.
//!
//! 1. This host: any process (other than the caller) with a file descriptor on any
//!    path of the disk opened for writing, or a shared writable mapping of it
//!    (`asmguard_devices::holders::writers`). ASM opens its disks read-write
//!    while the disk group is mounted.
//! 2. Other hosts (RAC): the ASM heartbeat block (the last block of AU 1) or the
//!    disk header's mount stamp (`mntstmp`) changes during a watch window. ASM
//!    rewrites the heartbeat every few seconds while any instance has the disk
//!    group mounted. Both are read bypassing the page cache (`O_DIRECT`).

use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What the watch compares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamps {
    /// kfdhdb.mntstmp (hi, lo) from block 0 (one per disk watched together).
    pub mntstmp: Vec<(u32, u32)>,
    /// The heartbeat block's bytes (concatenated when several disks are watched).
    pub heartbeat: Vec<u8>,
}

/// Why the watch refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum WatchResult {
    Quiet,
    HeartbeatChanged,
    MountStampChanged,
    Cancelled,
}

/// Read the stamps twice, `window` apart (checking every 250 ms so a change is
/// seen early). `read` returns the stamps from the device (uncached).
pub fn watch(
    read: &mut dyn FnMut() -> Result<Stamps, String>,
    window: Duration,
    cancel: &AtomicBool,
) -> Result<WatchResult, String> {
    let first = read()?;
    let t0 = Instant::now();
    loop {
        let left = window.saturating_sub(t0.elapsed());
        std::thread::sleep(left.min(Duration::from_millis(250)));
        if cancel.load(Ordering::SeqCst) {
            return Ok(WatchResult::Cancelled);
        }
        let now = read()?;
        if now.mntstmp != first.mntstmp {
            return Ok(WatchResult::MountStampChanged);
        }
        if now.heartbeat != first.heartbeat {
            return Ok(WatchResult::HeartbeatChanged);
        }
        if t0.elapsed() >= window {
            return Ok(WatchResult::Quiet);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_sees_changes() {
        let c = AtomicBool::new(false);
        let mut n = 0u32;
        let mut quiet = || -> Result<Stamps, String> {
            Ok(Stamps {
                mntstmp: vec![(1, 2)],
                heartbeat: vec![0; 8],
            })
        };
        assert_eq!(
            watch(&mut quiet, Duration::from_millis(300), &c).unwrap(),
            WatchResult::Quiet
        );
        let mut hb = || -> Result<Stamps, String> {
            n += 1;
            Ok(Stamps {
                mntstmp: vec![(1, 2)],
                heartbeat: vec![n as u8; 8],
            })
        };
        assert_eq!(
            watch(&mut hb, Duration::from_millis(300), &c).unwrap(),
            WatchResult::HeartbeatChanged
        );
        let mut m = 0u32;
        let mut ms = || -> Result<Stamps, String> {
            m += 1;
            Ok(Stamps {
                mntstmp: vec![(1, m)],
                heartbeat: vec![0; 8],
            })
        };
        assert_eq!(
            watch(&mut ms, Duration::from_millis(300), &c).unwrap(),
            WatchResult::MountStampChanged
        );
    }
}
