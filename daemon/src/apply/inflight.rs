//! The disks and labels a label write holds while it runs: the label
//! operations claim them (`crate::ops`), the applier leaves those disks'
//! exclusive claims as they are meanwhile, the label watch skips their
//! changes, and a stopping daemon waits for them.

use asmguard_devices::KernelDev;
use asmguard_proto::{ErrorBody, ErrorCode};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// What a label write holds while it runs: the device written, and the labels
/// it writes or removes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Busy {
    Dev(KernelDev),
    Label(asmguard_format::label::Label),
}

/// The writes under way (one set, shared by the operations and the applier).
#[derive(Debug, Clone, Default)]
pub struct Inflight(Arc<Mutex<HashSet<Busy>>>);

/// Holds claims on disks/labels; released on drop.
pub struct Claim<'a> {
    on: &'a Inflight,
    keys: Vec<Busy>,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        let mut s = self.on.lock();
        for k in &self.keys {
            s.remove(k);
        }
    }
}

impl Inflight {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<Busy>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Claims `keys` for the write `what`, or answers `busy` naming the one
    /// another request holds (nothing is claimed then).
    pub fn claim(&self, keys: Vec<Busy>, what: &str) -> Result<Claim<'_>, ErrorBody> {
        let mut s = self.lock();
        if let Some(k) = keys.iter().find(|k| s.contains(*k)) {
            let m = match k {
                Busy::Dev(_) => {
                    format!("{what}: the disk is busy being labelled by another request; try again")
                }
                Busy::Label(l) => {
                    format!("{what}: label {l} is being written by another request; try again")
                }
            };
            return Err(ErrorBody::new(ErrorCode::Busy, m));
        }
        for k in &keys {
            s.insert(k.clone());
        }
        Ok(Claim { on: self, keys })
    }

    /// Whether a label write is under way.
    pub fn writing(&self) -> bool {
        !self.lock().is_empty()
    }

    /// Whether `k` is being written.
    pub fn holds(&self, k: &Busy) -> bool {
        self.lock().contains(k)
    }

    /// The disks being written.
    pub fn disks(&self) -> Vec<KernelDev> {
        self.lock()
            .iter()
            .filter_map(|k| match k {
                Busy::Dev(d) => Some(*d),
                Busy::Label(_) => None,
            })
            .collect()
    }
}
