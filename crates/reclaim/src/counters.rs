//! Values of `asmguard_discard_bytes_total{label,source}`.
//!
//! `source="reclaim"`: bytes this daemon's reclaim handed back, counted as each
//! ioctl completes successfully ([`DiscardCounters::end`]); an ioctl under way
//! is "in flight" from just before it is issued ([`DiscardCounters::begin`]).
//! `source="oracle"`: everyone else's discards are denied by the write filter,
//! so the discards that reach a managed disk and are not reclaim's are the
//! database's: oracle = discard bytes the block tracer saw on the disk's
//! devices - reclaim's done and in flight ([`oracle_bytes`]). Subtracting the
//! in-flight bytes keeps that figure at or below the truth while an ioctl runs
//! (the tracer may see its bytes before it returns); the daemon's counter
//! source (read at scrape time) never lets the exported value go down. Not for anything else: the filter's counts are the
//! kernel's own.

use std::collections::BTreeMap;
use std::sync::Mutex;

#[derive(Debug, Default)]
pub struct DiscardCounters {
    reclaim: Mutex<BTreeMap<String, u64>>,
    in_flight: Mutex<BTreeMap<String, u64>>,
}

impl DiscardCounters {
    pub fn add_reclaim(&self, label: &str, bytes: u64) {
        let mut m = self.reclaim.lock().unwrap_or_else(|p| p.into_inner());
        *m.entry(label.to_string()).or_default() += bytes;
    }

    /// Just before an ioctl of `bytes` on `label`'s disk.
    pub fn begin(&self, label: &str, bytes: u64) {
        let mut m = self.in_flight.lock().unwrap_or_else(|p| p.into_inner());
        *m.entry(label.to_string()).or_default() += bytes;
    }

    /// Right after it: counted as reclaimed if it succeeded.
    pub fn end(&self, label: &str, bytes: u64, ok: bool) {
        if ok {
            self.add_reclaim(label, bytes);
        }
        let mut m = self.in_flight.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(v) = m.get_mut(label) {
            *v = v.saturating_sub(bytes);
        }
    }

    /// Bytes of ioctls under way on `label`'s disk.
    pub fn in_flight(&self, label: &str) -> u64 {
        let m = self.in_flight.lock().unwrap_or_else(|p| p.into_inner());
        m.get(label).copied().unwrap_or(0)
    }
    pub fn reclaim(&self, label: &str) -> u64 {
        let m = self.reclaim.lock().unwrap_or_else(|p| p.into_inner());
        m.get(label).copied().unwrap_or(0)
    }
    pub fn all_reclaim(&self) -> BTreeMap<String, u64> {
        self.reclaim
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// The database's discard bytes on a disk: what the tracer saw minus reclaim's.
/// Saturates at zero (the tracer may have started after a reclaim).
pub fn oracle_bytes(traced_discard_bytes: u64, reclaim_bytes: u64) -> u64 {
    traced_discard_bytes.saturating_sub(reclaim_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts() {
        let c = DiscardCounters::default();
        c.add_reclaim("DATA1", 5);
        c.add_reclaim("DATA1", 7);
        assert_eq!(c.reclaim("DATA1"), 12);
        assert_eq!(c.reclaim("X"), 0);
        assert_eq!(oracle_bytes(100, 12), 88);
        assert_eq!(oracle_bytes(5, 12), 0);
        c.begin("DATA1", 4);
        assert_eq!((c.reclaim("DATA1"), c.in_flight("DATA1")), (12, 4));
        c.end("DATA1", 4, false);
        assert_eq!((c.reclaim("DATA1"), c.in_flight("DATA1")), (12, 0));
        c.begin("DATA1", 4);
        c.end("DATA1", 4, true);
        assert_eq!((c.reclaim("DATA1"), c.in_flight("DATA1")), (16, 0));
    }
}
