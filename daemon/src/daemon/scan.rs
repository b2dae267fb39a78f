//! The scans: a full scan or a refresh of a few devices reads sysfs and
//! the label sectors (`asmguard_devices::discovery`), builds the model and
//! sends it to the World (`Input::Model`); the label watch's reads compare a
//! device's label sector with what the last scan found. What they observed
//! is kept here (a refresh re-reads a few devices of it).

use super::{Busy, Daemon};
use crate::world::model;
use crate::world::Input;
use asmguard_devices::discovery::{self, Observed};
use asmguard_devices::sysfs::{self, SysDev};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, RwLock};
use std::time::Instant;

/// What the label watch found changed on a device: what it read before and
/// now, the label it lost to an overwrite, and (old, new) when one label
/// replaced another.
pub type LabelChange = (String, Option<String>, Option<(String, String)>);

/// What the scans observed (the input side's cache: a refresh re-reads a few).
#[derive(Debug, Default)]
pub struct Observations {
    /// Every block device as last observed.
    pub devices: BTreeMap<String, Observed>,
    pub last_scan_ms: u64,
}

/// Full scans and refreshes, in order.
#[derive(Debug, Default)]
pub struct Scans {
    /// Serialises full scans and refreshes, from reading sysfs to their
    /// apply: a slow scan can never replace what a newer refresh found.
    order: Mutex<()>,
    /// What the scans observed.
    observed: RwLock<Observations>,
    /// Full scans started and finished (numbered from 1): `scan` requests that
    /// arrive while one runs share the next one instead of each starting its own.
    pub started: std::sync::atomic::AtomicU64,
    pub done: std::sync::atomic::AtomicU64,
    /// Where concurrent `scan` requests wait (asynchronously, no thread each).
    pub gate: tokio::sync::Mutex<()>,
}

/// Test hook: runs inside a full scan between reading the devices and storing
/// them (simulates a slow scan).
#[cfg(test)]
static SCAN_HOOK: Mutex<Option<Box<dyn Fn() + Send>>> = Mutex::new(None);

impl Scans {
    /// What the scans observed, read. Never while holding it already: a
    /// writer waiting in between would leave the second read waiting for ever.
    pub fn observed(&self) -> std::sync::RwLockReadGuard<'_, Observations> {
        self.observed.read().unwrap_or_else(|p| p.into_inner())
    }

    fn observed_mut(&self) -> std::sync::RwLockWriteGuard<'_, Observations> {
        self.observed.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Re-read every device, and send the World the new model.
    pub fn full(&self, d: &Daemon) -> std::io::Result<usize> {
        self.full_under(d, &d.applied().world.conf.clone(), Input::Model)
    }

    /// A full scan under the configuration `conf` (in force, or a SIGHUP's
    /// not yet in force), its model sent to the World as the input `wrap`
    /// makes of it (`Input::Model`; a SIGHUP's `Input::Reload`).
    pub fn full_under(
        &self,
        d: &Daemon,
        conf: &crate::world::conf::Conf,
        wrap: impl FnOnce(model::Model) -> Input,
    ) -> std::io::Result<usize> {
        use std::sync::atomic::Ordering::SeqCst;
        let _order = self.order.lock().unwrap_or_else(|p| p.into_inner());
        let number = self.started.fetch_add(1, SeqCst) + 1;
        let t = Instant::now();
        let observed = discovery::observe_all(&d.site.paths, &conf.rules);
        let devices = match observed {
            Ok(d) => d,
            Err(e) => {
                self.done.store(number, SeqCst);
                return Err(e);
            }
        };
        let grouping = discovery::group(&devices, &conf.rules);
        let built = model::build(&d.site.paths.sys, &devices, &grouping);
        let n = devices.len();
        #[cfg(test)]
        if let Some(h) = SCAN_HOOK.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            h();
        }
        {
            let mut s = self.observed_mut();
            s.devices = devices;
            s.last_scan_ms = t.elapsed().as_millis() as u64;
        }
        d.submit(wrap(built));
        self.done.store(number, SeqCst);
        tracing::debug!(
            "full scan #{number}: {n} devices in {} ms",
            t.elapsed().as_millis()
        );
        Ok(n)
    }

    /// The devices the label watch reads (`crate::inputs::watch`): the ones
    /// a scan reads with nothing stacked on them.
    pub fn watched(&self) -> Vec<String> {
        self.observed()
            .devices
            .iter()
            .filter(|(_, o)| o.included && o.read.is_some() && o.sys.holders.is_empty())
            .map(|(n, _)| n.clone())
            .collect()
    }
    /// Reads the label sector of `name` again; `Some((what, lost, replaced))`
    /// when it reads differently from what the last scan or refresh found,
    /// `lost` naming the label it no longer carries (overwritten, no tag),
    /// `replaced` the label another one took the place of (old, new).
    /// A disk this daemon is writing a label on right now is skipped: its
    /// own write is not another host's.
    pub fn label_changed(&self, d: &Daemon, name: &str) -> Option<LabelChange> {
        let sys = self.observed().devices.get(name)?.sys.clone();
        let busy = Busy::Dev(sys.dev);
        if d.inflight.holds(&busy) {
            return None;
        }
        let now = discovery::reread(&sys);
        let s = self.observed();
        let before = &s.devices.get(name)?.read;
        if *before == now {
            return None;
        }
        let word = |r: &Option<Result<discovery::LabelRead, String>>| match r {
            None => "not read".to_string(),
            Some(Err(e)) => format!("unreadable: {e}"),
            Some(Ok(l)) => format!("{:?}", l.state),
        };
        let label = |r: &Option<Result<discovery::LabelRead, String>>| match r {
            Some(Ok(l)) => l.state.label().map(|l| l.to_string()),
            _ => None,
        };
        // an unlabel (ORCLCLRD, or ORCLDISK with the label bytes cleared) or a
        // rename leaves a tag; a label sector with no tag was overwritten
        let overwritten = !matches!(
            &now,
            Some(Ok(discovery::LabelRead {
                state: asmguard_format::label::LabelState::Marked { .. }
                    | asmguard_format::label::LabelState::Cleared,
                ..
            }))
        );
        let lost = label(before).filter(|_| overwritten);
        let replaced = match (label(before), label(&now)) {
            (Some(a), Some(b)) if a != b => Some((a, b)),
            _ => None,
        };
        Some((
            format!("{} -> {}", word(before), word(&now)),
            lost,
            replaced,
        ))
    }

    /// Re-read the named devices (gone ones are dropped), the sysfs facts of the
    /// devices they relate to (slaves, holders, partition parent), and regroup.
    pub fn refresh(&self, d: &Daemon, names: &BTreeSet<String>) {
        let _order = self.order.lock().unwrap_or_else(|p| p.into_inner());
        let mut fresh = Vec::new();
        let mut related = BTreeSet::new();
        let conf = d.applied().world.conf.clone();
        let rules = &conf.rules;
        for n in names {
            let o = discovery::observe(&d.site.paths, rules, n);
            if let Some(o) = &o {
                related.extend(o.sys.slaves.iter().cloned());
                related.extend(o.sys.holders.iter().cloned());
                related.extend(o.sys.parent.iter().cloned());
            }
            fresh.push((n.clone(), o));
        }
        let rel: Vec<(String, Option<SysDev>)> = related
            .into_iter()
            .filter(|r| !names.contains(r))
            .map(|r| {
                let s = sysfs::read(&d.site.paths, &r).ok();
                (r, s)
            })
            .collect();
        let mut s = self.observed_mut();
        for (n, o) in fresh {
            match o {
                Some(o) => {
                    s.devices.insert(n, o);
                }
                None => {
                    s.devices.remove(&n);
                }
            }
        }
        for (n, sd) in rel {
            match (sd, s.devices.get_mut(&n)) {
                (Some(sd), Some(o)) => o.sys = sd,
                (None, Some(_)) => {
                    s.devices.remove(&n);
                }
                _ => {}
            }
        }
        let grouping = discovery::group(&s.devices, rules);
        let built = model::build(&d.site.paths.sys, &s.devices, &grouping);
        drop(s);
        d.submit(Input::Model(built));
    }
}

#[cfg(test)]
mod scan_race_tests {
    use super::*;
    use asmguard_config::Config;
    use std::path::Path;
    use std::sync::Arc;

    fn fake_dev(root: &Path, name: &str, minor: u32) {
        let d = root.join("class/block").join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("dev"), format!("7:{minor}\n")).unwrap();
        std::fs::write(d.join("size"), "0\n").unwrap();
    }

    /// A full scan that read sysfs before a device appeared, and stores its
    /// result after the refresh that added it, must not lose the device.
    #[test]
    fn a_slow_full_scan_never_replaces_a_newer_refresh() {
        let root = tempfile::tempdir().unwrap();
        fake_dev(root.path(), "fake0", 200);
        let paths = asmguard_paths::Paths {
            sys: root.path().to_path_buf(),
            ..Default::default()
        };
        let d = Arc::new(crate::daemon::testing::daemon_at(
            Config::default(),
            paths,
            Path::new("/nonexistent"),
        ));
        let (computed, wait_computed) = std::sync::mpsc::channel::<()>();
        let computed = Mutex::new(computed);
        *SCAN_HOOK.lock().unwrap() = Some(Box::new(move || {
            let _ = computed.lock().unwrap().send(());
            // a slow scan: the refresh below runs (or waits) meanwhile
            std::thread::sleep(std::time::Duration::from_millis(300));
        }));
        let d1 = Arc::clone(&d);
        let scan = std::thread::spawn(move || d1.scans.full(&d1).unwrap());
        wait_computed.recv().unwrap();
        fake_dev(root.path(), "fake1", 201);
        d.scans.refresh(&d, &BTreeSet::from(["fake1".to_string()]));
        scan.join().unwrap();
        *SCAN_HOOK.lock().unwrap() = None;
        let s = d.scans.observed();
        assert!(s.devices.contains_key("fake0"));
        assert!(
            s.devices.contains_key("fake1"),
            "the scan replaced the refresh's newer state: {:?}",
            s.devices.keys().collect::<Vec<_>>()
        );
    }
}
