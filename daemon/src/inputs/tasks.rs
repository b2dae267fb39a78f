//! The daemon's background tasks, each around the [`Daemon`] and its World:
//! device events (a refresh or a full scan: a new model), the `containers`
//! task (the configured containers resolved again: a new resolution), SIGHUP
//! (a new configuration), the filter's pin check, and the systemd watchdog.
//! Each builds its part of the next World and hands it to the daemon, which
//! applies it (`Daemon::submit`); none of them changes the system itself.

use crate::daemon::Daemon;
use crate::world::Input;
use asmguard_devices::events::DeviceEvent;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Every 2 s: are the filter's pins and maps still this daemon's
/// (`FilterService::verify`: another process with the same pin directory
/// could replace them)? A few fdinfo reads and one walk of the device map.
/// Then which protected disks a mapping made before protection still writes
/// (`crate::inputs::exposed::check`: one read of every process's maps).
pub fn filter_verify(d: Arc<Daemon>) {
    let spawned = std::thread::Builder::new()
        .name("filter-verify".into())
        .spawn(move || {
            let mut shown = crate::views::service::line(&d.applied(), &d.filter);
            loop {
                std::thread::sleep(Duration::from_secs(2));
                d.submit(Input::Verify);
                crate::inputs::exposed::check(&d);
                // the service's state line, when it changed
                let line = crate::views::service::line(&d.applied(), &d.filter);
                if line != shown {
                    notify(&[sd_notify::NotifyState::Status(&line.to_string())]);
                    shown = line;
                }
            }
        });
    if let Err(e) = spawned {
        tracing::error!("write filter: cannot start the thread that checks its pins: {e}");
    }
}

pub fn notify(states: &[sd_notify::NotifyState]) {
    if let Err(e) = sd_notify::notify(states) {
        tracing::debug!("sd_notify: {e}");
    }
}

/// Listens to block device events on a thread of its own: from udev where udevd
/// runs (after its rules, so the links exist), else the kernel's uevents
/// (`asmguard_devices::events`). Each event goes to `tx`. Returns what `status`
/// shows as the event source, and whether it still runs (the watchdog stops being
/// fed when it dies).
pub fn start_monitor(
    tx: tokio::sync::mpsc::UnboundedSender<DeviceEvent>,
    paths: &asmguard_paths::Paths,
) -> (asmguard_proto::EventSource, Arc<AtomicBool>) {
    let monitor_alive = Arc::new(AtomicBool::new(false));
    let none = |e: &dyn std::fmt::Display| {
        tracing::warn!(
            "cannot listen to device events: {e}: device changes need `asmguardctl scan`"
        );
        asmguard_proto::EventSource::None {
            reason: e.to_string(),
        }
    };
    let mut src = match asmguard_devices::events::EventSource::open(paths) {
        Ok(src) => src,
        Err(e) => return (none(&e), monitor_alive),
    };
    let desc = match src.kind() {
        asmguard_devices::events::SourceKind::Udev => asmguard_proto::EventSource::Udev,
        asmguard_devices::events::SourceKind::Kernel => asmguard_proto::EventSource::Kernel {
            udev_failed: src.udev_error().map(str::to_string),
        },
    };
    tracing::info!("device events: {desc}");
    monitor_alive.store(true, Ordering::SeqCst);
    let alive = monitor_alive.clone();
    let spawned = std::thread::Builder::new()
        .name("device-events".into())
        .spawn(move || {
            loop {
                match src.recv() {
                    Ok(e) => {
                        match &e {
                            DeviceEvent::Block { action, name } => {
                                tracing::debug!("device event {action} {name}")
                            }
                            DeviceEvent::NvmeController { action, name } => {
                                tracing::debug!("NVMe controller event {action} {name}")
                            }
                            DeviceEvent::Overflow => tracing::warn!(
                                "device event buffer overflowed: rescanning every device"
                            ),
                        }
                        if tx.send(e).is_err() {
                            break;
                        }
                    }
                    Err(e) => {
                        tracing::error!("device event monitor failed: {e}");
                        break;
                    }
                }
            }
            alive.store(false, Ordering::SeqCst);
        });
    match spawned {
        Ok(_) => (desc, monitor_alive),
        Err(e) => {
            monitor_alive.store(false, Ordering::SeqCst);
            (none(&e), monitor_alive)
        }
    }
}

/// How long an NVMe controller that was added is waited for to join its
/// subsystem (PCI: after its reset and Identify; fabrics: after the connect).
const NVME_SETTLE: Duration = Duration::from_secs(5);

/// Device events: coalesce bursts, re-read only what changed. An NVMe
/// controller's event (a path of a native multipath head came or went) makes
/// a new model at once, again once each added controller has joined its
/// subsystem (its node is then among the head's: managed), and once more a
/// second later, when its namespaces' paths are there for `lsdsk`.
pub fn device_events(d3: Arc<Daemon>, mut rx: tokio::sync::mpsc::UnboundedReceiver<DeviceEvent>) {
    tokio::spawn(async move {
        while let Some(first) = rx.recv().await {
            let mut names = BTreeSet::new();
            let mut rescan = false;
            let mut controllers = BTreeSet::new();
            let mut take = |e: DeviceEvent| match e {
                DeviceEvent::Block { name, .. } => {
                    names.insert(name);
                }
                DeviceEvent::NvmeController { name, .. } => {
                    controllers.insert(name);
                }
                DeviceEvent::Overflow => rescan = true,
            };
            take(first);
            while let Ok(more) = rx.try_recv() {
                take(more);
            }
            let d = d3.clone();
            let _ = tokio::task::spawn_blocking(move || {
                if rescan {
                    if let Err(e) = d.scans.full(&d) {
                        tracing::error!("rescan: {e}");
                    }
                } else {
                    d.scans.refresh(&d, &names);
                }
            })
            .await;
            if !controllers.is_empty() {
                let d = d3.clone();
                tokio::task::spawn_blocking(move || nvme_settle(&d, &controllers));
            }
        }
    });
}

/// After NVMe controller events: a new model once every controller named has
/// joined its subsystem or gone (at most [`NVME_SETTLE`]), and once more a
/// second later. Runs beside the event loop (a refresh takes the scan lock).
fn nvme_settle(d: &Daemon, controllers: &BTreeSet<String>) {
    let sys = d.site.paths.sys.clone();
    let start = Instant::now();
    let settled = || {
        controllers
            .iter()
            .all(|c| asmguard_devices::sysfs::nvme_controller_settled(&sys, c))
    };
    while !settled() && start.elapsed() < NVME_SETTLE {
        std::thread::sleep(Duration::from_millis(50));
    }
    let names: Vec<&str> = controllers.iter().map(String::as_str).collect();
    tracing::info!(
        "NVMe controller {} {} after {} ms: devices read again",
        names.join(", "),
        if settled() {
            "settled"
        } else {
            "not in a subsystem yet"
        },
        start.elapsed().as_millis()
    );
    d.scans.refresh(d, &BTreeSet::new());
    std::thread::sleep(Duration::from_secs(1));
    d.scans.refresh(d, &BTreeSet::new());
}

/// The systemd watchdog, fed while the runtime runs and the device monitor is alive.
pub fn watchdog(alive: Arc<AtomicBool>) {
    if let Some(wd) = sd_notify::watchdog_enabled() {
        let period = (wd / 2).max(Duration::from_millis(100));
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(period).await;
                if alive.load(Ordering::SeqCst) {
                    notify(&[sd_notify::NotifyState::Watchdog]);
                } else {
                    tracing::error!("device monitor is gone: no longer feeding the watchdog");
                }
            }
        });
    }
}

/// SIGHUP: the whole configuration file is read again and put in force
/// ([`reload_conf`]); the allow-list's names are resolved again (NSS: a user
/// or group added to LDAP, SSSD or extrausers since the start).
pub fn sighup(d: Arc<Daemon>) {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        Ok(mut hup) => {
            tokio::spawn(async move {
                while hup.recv().await.is_some() {
                    let d8 = d.clone();
                    let _ = tokio::task::spawn_blocking(move || reload_conf(&d8)).await;
                }
            });
        }
        Err(e) => tracing::error!("SIGHUP handler: {e}"),
    }
}

/// This program (`/proc/self/exe` under the roots `main` was given): the
/// child that reads a container's files.
pub static SELF_EXE: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

/// A container's `/etc/passwd` or `/etc/group` read by a child process of
/// the daemon (`asmguardd --read-container-db PID FILE`): a file system that
/// never answers (FUSE) then holds that child, which the daemon leaves behind,
/// and never one of its own threads (a thread waiting on FUSE cannot be
/// killed: the daemon could not exit). The caller's deadline is
/// `asmguard_containers::within`'s.
pub fn read_container_db(pid: u32, file: &str) -> Result<String, String> {
    let exe = SELF_EXE.get().cloned().unwrap_or_default();
    let out = std::process::Command::new(exe)
        .arg("--read-container-db")
        .arg(pid.to_string())
        .arg(file)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .output()
        .map_err(|e| {
            format!("cannot start a reader for etc/{file} of process {pid}'s container: {e}")
        })?;
    if out.status.success() {
        String::from_utf8(out.stdout)
            .map_err(|_| format!("etc/{file} of process {pid}'s container is not UTF-8"))
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

/// The child's side of [`read_container_db`]: `args` = PID FILE, the process
/// in the procfs `proc`; the file on stdout (status 0), or one line on stderr
/// (status 1).
pub fn print_container_db(proc: &std::path::Path, args: &[String]) -> i32 {
    use std::io::Write;
    let read = match args {
        [pid, file] => pid
            .parse::<u32>()
            .map_err(|_| format!("{pid}: not a process id"))
            .and_then(|pid| asmguard_containers::read_container_db(proc, pid, file)),
        _ => Err("--read-container-db takes PID FILE".to_string()),
    };
    match read {
        Ok(text) => match std::io::stdout().write_all(text.as_bytes()) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("{e}");
                1
            }
        },
        Err(e) => {
            eprintln!("{e}");
            1
        }
    }
}

/// SIGHUP: reads the whole file again and puts it in force on `d` as one
/// input (`Input::Reload`): the configuration, the host's rules resolved
/// again under it (names through NSS, the Oracle homes, the rules' places),
/// the containers resolved again, and a full scan under it (the device
/// rules). A file that cannot be read changes nothing.
pub fn reload_conf(d: &Daemon) {
    let path = match d
        .site
        .cfg_source
        .strip_suffix(" (absent: built-in defaults)")
    {
        Some(_) => None,
        None => Some(std::path::PathBuf::from(&d.site.cfg_source)),
    };
    let (file, source) = match asmguard_config::load(path.as_deref()) {
        Ok(x) => x,
        Err(e) => {
            tracing::error!(
                "SIGHUP: configuration not reloaded, the one in force stays and nothing \
                 changed: {e}"
            );
            return;
        }
    };
    let now = d.applied().world.conf.reloaded(file);
    for w in crate::world::check::warnings(&now.cfg, &source, &d.site.paths) {
        tracing::warn!("{w}");
    }
    for k in &now.restart_needed {
        tracing::warn!(
            "SIGHUP: {} = {} -> {}: takes effect only when asmguardd restarts; the value in force stays",
            k.key,
            k.in_force,
            k.in_file
        );
    }
    // everything the new configuration decides is found under it first,
    // then sent as one input (crate::world::Reload)
    let conf = Arc::new(now);
    let before = d.applied().world.rules.clone();
    let rules = Arc::new(crate::apply::filter::reload_rules(
        &d.filter,
        &conf.cfg,
        &d.site.paths,
    ));
    let containers = Arc::new(crate::inputs::containers::resolved(d, &conf.cfg));
    let reload = |model| {
        Input::Reload(Box::new(crate::world::Reload {
            conf: conf.clone(),
            rules: rules.clone(),
            containers: containers.clone(),
            model,
        }))
    };
    if let Err(e) = d.scans.full_under(d, &conf, |m| reload(Some(m))) {
        tracing::error!("SIGHUP: rescan: {e}: the disks stay as last scanned");
        d.submit(reload(None));
    }
    // said once in force: a line read means it applies
    crate::apply::filter::log_reloaded_rules(before.as_deref(), &rules);
    tracing::info!("SIGHUP: configuration reloaded from {source}");
}

/// The `rules` thread: follows the Oracle homes (oratab, olr.loc, the
/// homes' binaries: a new home, an in-place relink, a removed home are
/// allowed or retired within a second, before an instance restarts) and
/// the `[[rule]]`s' places (a unit's cgroup is made anew each time it
/// starts), and rebuilds the host's rules when either changes.
pub fn spawn_rules(d: std::sync::Arc<Daemon>) {
    let cfg = d.applied().world.conf.cfg.clone();
    let mut spec = crate::apply::filter::homes_spec(&cfg.filter);
    let has_places = cfg
        .rule
        .iter()
        .any(|r| !r.units.is_empty() || !r.cgroups.is_empty());
    if spec == asmguard_homes::Spec::Off && !has_places {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("rules".into())
        .spawn(move || {
            let mut follower = asmguard_homes::Follower::new(&d.site.paths.root, &spec);
            let mut places = d
                .applied()
                .world
                .rules
                .as_ref()
                .map(|r| r.places.clone())
                .unwrap_or_default();
            let mut tick = 0u32;
            loop {
                std::thread::sleep(std::time::Duration::from_millis(250));
                tick = tick.wrapping_add(1);
                // SIGHUP may have changed the configuration.
                let cfg = d.applied().world.conf.cfg.clone();
                let now_spec = crate::apply::filter::homes_spec(&cfg.filter);
                let mut changed = false;
                if now_spec != spec {
                    spec = now_spec;
                    follower = asmguard_homes::Follower::new(&d.site.paths.root, &spec);
                    changed = true;
                }
                if let Some(found) = follower.poll() {
                    let (homes, retired) = crate::apply::filter::homes_of(found);
                    if homes.is_empty() {
                        tracing::info!("filter: oracle homes: no Oracle homes found");
                    }
                    for l in homes.iter().map(ToString::to_string).chain(
                        retired
                            .iter()
                            .map(asmguard_proto::OracleBinary::retired_text),
                    ) {
                        tracing::info!("filter: oracle homes: {l}");
                    }
                    for p in &found.problems {
                        tracing::info!("filter: oracle homes: problem: {p}");
                    }
                    changed = true;
                }
                if tick % 4 == 0 {
                    let now = crate::apply::filter::resolve_places(&d.site.paths.proc, &cfg);
                    if now != places {
                        places = now;
                        changed = true;
                    }
                }
                if changed {
                    let rules = crate::apply::filter::resolve_rules(
                        &d.filter,
                        &cfg,
                        follower.current().clone(),
                        places.clone(),
                    );
                    d.submit(Input::Rules(Arc::new(rules)));
                }
            }
        });
    if let Err(e) = spawned {
        tracing::error!("filter: cannot start the rules thread: {e}");
    }
}
