//! Values of `asmguard_discard_bytes_total{label,source}`.
//!
//! `source="reclaim"`: bytes this daemon's reclaim handed back (counted here as
//! each ioctl completes). `source="oracle"`: everyone else's discards are denied
//! by the write filter, so the discards that reach a managed disk and are not
//! reclaim's are the database's: oracle = discard bytes the block tracer saw on
//! the disk's devices - reclaim's own ([`oracle_bytes`]).

use std::collections::BTreeMap;
use std::sync::Mutex;

#[derive(Debug, Default)]
pub struct DiscardCounters {
    reclaim: Mutex<BTreeMap<String, u64>>,
}

impl DiscardCounters {
    pub fn add_reclaim(&self, label: &str, bytes: u64) {
        let mut m = self.reclaim.lock().unwrap_or_else(|p| p.into_inner());
        *m.entry(label.to_string()).or_default() += bytes;
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
    }
}
