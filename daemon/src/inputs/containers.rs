//! The containers' input: the configured containers resolved again (their
//! cgroups, a process, its id maps and files) and sent to the World as
//! `Input::Containers`, at start, on SIGHUP and whenever the cgroup tree
//! changes (the `containers` task here).

use crate::daemon::Daemon;
use crate::world::Input;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Resolves the configured containers again (their cgroups, a process,
/// its id maps and files, each container's files waited for at most
/// [`crate::apply::filter::containers::DEADLINE`]) and sends them to the
/// World: at start before the first scan, on SIGHUP, and whenever the
/// cgroup tree changes ([`task`]).
pub fn resolve(d: &Daemon) {
    let cfg = d.applied().world.conf.cfg.clone();
    d.submit(Input::Containers(Arc::new(resolved(d, &cfg))));
}

/// The containers `cfg` configures, resolved again (changes against the
/// last resolution logged), not sent: a SIGHUP sends them with the rest of
/// what it reloaded.
pub fn resolved(d: &Daemon, cfg: &asmguard_config::Config) -> crate::world::Containers {
    let a = d.applied();
    let last = &a.world.containers;
    let now = crate::apply::filter::containers::resolve(
        &d.site.paths.proc,
        d.site.cgroup_root.as_deref(),
        cfg,
        last,
        crate::apply::filter::containers::DEADLINE,
    );
    crate::apply::filter::containers::log_changes(last, &now, &d.site.paths.etc);
    now
}

/// Whether a container that runs is not fully resolved yet (no process
/// whose id maps are written, users or its nodes' owner not translated):
/// worth resolving again soon.
pub fn pending(d: &Daemon) -> bool {
    let a = d.applied();
    let c = &a.world.containers;
    if c.pending() {
        return true;
    }
    let running: Vec<&str> = c
        .each
        .iter()
        .filter(|r| !r.found.cgroups.is_empty() && !r.config.present.is_empty())
        .map(|r| r.config.name.as_str())
        .collect();
    a.presented
        .problems
        .iter()
        .any(|p| p.label.is_none() && running.contains(&p.container.as_str()))
}

/// The `containers` task: resolves the configured containers again whenever
/// the cgroup tree under their patterns changes (every second while one runs
/// but is not fully resolved, every 10 s otherwise: a container's namespaces
/// can change with no cgroup event), and at once when SIGHUP brought another
/// list. Each resolution waits for a container's files at most
/// `filter::containers::DEADLINE` (a stalled container keeps its last good
/// resolution and costs itself a warning, not the daemon its scans).
pub fn task(d: Arc<Daemon>) {
    let Some(root) = d.site.cgroup_root.clone() else {
        if !d.applied().world.conf.cfg.container.is_empty() {
            tracing::error!("filter: no cgroup2 file system: container rules cannot apply");
        }
        return;
    };
    let spawned = std::thread::Builder::new()
        .name("containers".into())
        .spawn(move || {
            let mut cs = d.applied().world.conf.cfg.container.clone();
            let mut watcher = crate::apply::filter::containers::watch(&root, &cs);
            let mut last = Instant::now();
            loop {
                let now = d.applied().world.conf.cfg.container.clone();
                if now != cs {
                    // SIGHUP resolved the new list already
                    cs = now;
                    watcher = crate::apply::filter::containers::watch(&root, &cs);
                }
                let changed = match watcher.as_mut() {
                    Some(w) => w.changed(Duration::from_millis(250)),
                    None => {
                        std::thread::sleep(Duration::from_millis(250));
                        false
                    }
                };
                let due = if pending(&d) { 1 } else { 10 };
                if changed || last.elapsed() >= Duration::from_secs(due) {
                    resolve(&d);
                    last = Instant::now();
                }
            }
        });
    if let Err(e) = spawned {
        tracing::error!("filter: cannot start the containers thread: {e}");
    }
}
