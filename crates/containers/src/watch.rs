//! The inotify watch on the cgroup tree: the directories the configured patterns can
//! descend through (a cgroup made or removed there may be a container starting or
//! stopping) and the `cgroup.events` of the matched cgroups (a container becoming
//! populated: its first process, whose id maps the daemon reads).

use crate::{component_match, inotify, sleep_poll, watch_targets, DIR_EVENTS};
use asmguard_config::Container;
use nix::sys::inotify::{AddWatchFlags, Inotify, WatchDescriptor};
use std::collections::{BTreeSet, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// inotify on the cgroup directories the patterns can descend through (and
/// `cgroup.events` of matches): [`Watcher::changed`] returns true when something
/// appeared, vanished or was populated.
pub struct Watcher {
    fd: Inotify,
    root: PathBuf,
    containers: Vec<Container>,
    /// Each watch: the pattern components a child named in its events must match
    /// to matter (`None`: a `cgroup.events` file, every event matters).
    watches: HashMap<WatchDescriptor, Option<BTreeSet<String>>>,
}

impl Watcher {
    /// Watch what `cs`'s patterns can match below the cgroup2 mount `root`.
    pub fn new(root: &Path, cs: &[Container]) -> io::Result<Watcher> {
        let mut w = Watcher {
            fd: inotify()?,
            root: root.to_path_buf(),
            containers: cs.to_vec(),
            watches: HashMap::new(),
        };
        w.arm()?;
        Ok(w)
    }

    /// Add watches for what exists now (adding a watch again only replaces its
    /// mask). The root must be watchable; a directory that vanished in between is
    /// skipped (its parent's watch reports that).
    fn arm(&mut self) -> io::Result<()> {
        let (dirs, events) = watch_targets(&self.root, &self.containers);
        let mut now = HashMap::new();
        for (d, comps) in dirs {
            match self.fd.add_watch(&d, DIR_EVENTS) {
                Ok(wd) => {
                    now.insert(wd, Some(comps));
                }
                Err(e) if d == self.root => {
                    return Err(io::Error::other(format!(
                        "cannot watch {}: {e}",
                        self.root.display()
                    )))
                }
                Err(_) => {}
            }
        }
        for f in events {
            if let Ok(wd) = self.fd.add_watch(&f, AddWatchFlags::IN_MODIFY) {
                now.insert(wd, None);
            }
        }
        // Watches no longer wanted (a directory that now matches nothing below).
        for wd in self.watches.keys() {
            if !now.contains_key(wd) {
                let _ = self.fd.rm_watch(*wd);
            }
        }
        self.watches = now;
        Ok(())
    }

    /// Wait up to `timeout` for a change: true when a cgroup a pattern can match (or
    /// a directory on the way to one) appeared or vanished, or a matched cgroup's
    /// `cgroup.events` changed (populated). The watches then follow the new tree.
    pub fn changed(&mut self, timeout: Duration) -> bool {
        if !sleep_poll(&self.fd, timeout) {
            return false;
        }
        // Drain everything queued: one answer for a burst of events.
        let mut any = false;
        while let Ok(evs) = self.fd.read_events() {
            if evs.is_empty() {
                break;
            }
            for e in evs {
                any |= match self.watches.get(&e.wd) {
                    // A watch gone (its directory removed), or the queue overflowed.
                    _ if e
                        .mask
                        .intersects(AddWatchFlags::IN_IGNORED | AddWatchFlags::IN_Q_OVERFLOW) =>
                    {
                        true
                    }
                    Some(None) => true,
                    Some(Some(comps)) => {
                        e.name.as_ref().and_then(|n| n.to_str()).is_some_and(|n| {
                            comps
                                .iter()
                                .any(|c| component_match(c.as_bytes(), n.as_bytes()))
                        })
                    }
                    None => false,
                };
            }
        }
        if any {
            // A directory that vanished and came back is watched again; an error
            // here leaves the old watches, and the next call retries.
            let _ = self.arm();
        }
        any
    }

    /// How many directories and files are watched (for logs and tests).
    pub fn watched(&self) -> usize {
        self.watches.len()
    }
}
