//! asmguardd: discovers labelled ASM disks, keeps their state current from device
//! events (udev's where udevd runs, else the kernel's uevents), and serves `asmguardctl` over a unix socket. Runs as a systemd
//! `Type=notify` service: READY=1 is sent once the first scan is done, udevd has made its links (at most
//! 10 s) and the socket
//! listens; the watchdog is fed while the device monitor is alive.
//!
//! Exit codes: 0 stopped by SIGTERM/SIGINT; 1 could not start; 2 bad usage;
//! 3 bad configuration.

use asmguard_config as config;
use asmguard_devices::events::DeviceEvent;
mod apply;
mod daemon;
mod inputs;
mod ops;
mod serve;
mod views;
mod world;

use apply::links;
use apply::{filter, metrics};
use inputs::{fence_watch, server, tasks, watch};
use world::check;

use clap::Parser;
use std::path::PathBuf;

use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long READY=1 waits for udevd to make the stable links.
const LINK_WAIT: Duration = Duration::from_secs(10);

#[derive(Debug, Parser)]
#[command(
    name = "asmguardd",
    version,
    about = "asmguard daemon: labelled ASM disks, stable paths, write protection",
    long_about = "asmguardd discovers block devices carrying ASM labels (ORCLDISK + label, as \
                  written by asmguardctl, ASMLib or AFD), groups every path of each disk, keeps \
                  that state current from device events (udev's where udevd runs, else the \
                  kernel's uevents), and serves asmguardctl over a \
                  unix socket.\n\nExit codes: 0 stopped by a signal; 1 could not start; \
                  2 bad usage; 3 bad configuration."
)]
struct Args {
    /// Configuration file (default /etc/asmguard/asmguard.toml; built-in defaults when
    /// that file is absent).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Check the configuration, print the result, and exit (0 valid, 3 invalid).
    #[arg(long)]
    check_config: bool,
    /// Listen on this socket instead of the configured one.
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Pin the write filter's BPF maps and links here instead of
    /// /sys/fs/bpf/asmguard (tests and demos that must not touch the real one).
    #[arg(long, value_name = "DIR")]
    bpf_pin_dir: Option<PathBuf>,
    /// Internal: print a container's /etc/passwd or /etc/group (PID FILE) and
    /// exit; the daemon reads containers' files through such a child of its
    /// own (`tasks::read_container_db`).
    #[arg(long, hide = true, num_args = 2, value_names = ["PID", "FILE"])]
    read_container_db: Option<Vec<String>>,
}

fn main() {
    let args = Args::parse();
    // the filesystem roots: built once here, passed down
    let paths = asmguard_paths::Paths::default();
    if let Some(a) = &args.read_container_db {
        std::process::exit(tasks::print_container_db(&paths.proc, a));
    }
    let (cfg, source) = match config::load(args.config.as_deref()) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("asmguardd: {e}");
            std::process::exit(3);
        }
    };
    if args.check_config {
        for w in &check::warnings(&cfg, &source, &paths) {
            eprintln!("asmguardd: warning: {w}");
        }
        println!("{source}: configuration is valid");
        std::process::exit(0);
    }
    let journal = std::env::var_os("JOURNAL_STREAM").is_some();
    let filter = tracing_subscriber::EnvFilter::try_from_env("ASMGUARD_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let fmt = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    if journal {
        fmt.without_time().init();
    } else {
        fmt.init();
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(64)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("asmguardd: cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    let code = rt.block_on(run(cfg, source, paths, args.socket, args.bpf_pin_dir));
    std::process::exit(code);
}

async fn run(
    cfg: config::Config,
    source: String,
    paths: asmguard_paths::Paths,
    socket: Option<PathBuf>,
    bpf_pin_dir: Option<PathBuf>,
) -> i32 {
    let t0 = Instant::now();
    let _ = tasks::SELF_EXE.set(paths.own().join("exe"));
    asmguard_containers::set_db_reader(tasks::read_container_db);
    let socket = socket.unwrap_or_else(|| cfg.socket.path.clone());
    let nofile = metrics::raise_nofile();
    tracing::debug!("open-file limit: {nofile}");
    // Before anything is claimed, pinned or scanned: one daemon per pin directory.
    let pin_dir = bpf_pin_dir.clone().unwrap_or_else(|| paths.pin_dir());
    let _pin_lock = match asmguard_guard::pins::lock(&paths.run_dir(), &pin_dir, &paths.proc) {
        Ok(l) => {
            if let Some(w) = &l.warning {
                tracing::warn!("{w}");
            }
            l
        }
        Err(msg) => {
            tracing::error!("{msg}");
            eprintln!("asmguardd: {msg}");
            return 1;
        }
    };
    // (after the lock: a refused second daemon says that alone)
    for w in check::warnings(&cfg, &source, &paths) {
        tracing::warn!("{w}");
    }
    // The monitor first, so nothing that happens during the first scan is missed.
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<DeviceEvent>();
    let (monitor_desc, monitor_alive) = tasks::start_monitor(tx, &paths);
    // The socket first: a second daemon that cannot bind it never touches the
    // filter or the disks.
    let listener = match server::bind(&socket) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("asmguardd: {e}");
            return 1;
        }
    };
    // The filter and the tracer before the first scan, so the scan's model
    // puts the disks under both at once (Applier::apply).
    let runtime_dir = cfg.daemon.runtime_dir.clone().unwrap_or_else(|| {
        socket
            .parent()
            .map(std::path::Path::to_path_buf)
            .unwrap_or_else(|| paths.run_dir())
    });
    let (filter, writer, rules, modes) =
        match start_filter(&cfg, &paths, &runtime_dir, bpf_pin_dir).await {
            Ok(f) => f,
            Err(msg) => {
                tracing::error!("{msg}");
                eprintln!("asmguardd: {msg}");
                return 1;
            }
        };
    let trace_all = cfg.metrics.trace_all_disks;
    let single_block_bytes = cfg.metrics.single_block_bytes;
    let metrics_paths = paths.clone();
    let metrics = match tokio::task::spawn_blocking(move || {
        metrics::MetricsService::start(&metrics_paths, trace_all, single_block_bytes)
    })
    .await
    {
        Ok(m) => m,
        Err(e) => {
            tracing::error!("metrics: {e}");
            return 1;
        }
    };
    let d = Arc::new(daemon::Daemon::new(daemon::Parts {
        cfg,
        cfg_source: source,
        paths,
        socket: socket.clone(),
        runtime_dir,
        monitor: monitor_desc,
        started: daemon::Started {
            filter,
            writer,
            metrics,
            modes,
        },
    }));
    d.submit(world::Input::Rules(Arc::new(rules)));
    // a fence kept from an earlier daemon ends with its process (crate::apply::fence)
    let _ = fence_watch::watch_kept(&d);
    let conf = d.applied().world.conf.clone();
    if conf.admin_gid.is_none() {
        tracing::warn!(
            "admin group {} does not exist: only root may use the socket",
            conf.cfg.socket.admin_group
        );
    }
    // the containers before the first scan: its model presents their nodes
    let d2 = d.clone();
    let _ = tokio::task::spawn_blocking(move || inputs::containers::resolve(&d2)).await;
    let d2 = d.clone();
    match tokio::task::spawn_blocking(move || d2.scans.full(&d2)).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => {
            tracing::error!("cannot read /sys/class/block: {e}");
            return 1;
        }
        Err(e) => {
            tracing::error!("first scan failed: {e}");
            return 1;
        }
    }
    // READY=1 only once udevd has made the links (units ordered after this
    // one open them), at most LINK_WAIT
    let d2 = d.clone();
    let missing = tokio::task::spawn_blocking(move || {
        let m = d2.applied().world.model.clone();
        links::wait_linked(&d2.site.paths, &m, LINK_WAIT)
    })
    .await
    .unwrap_or_default();
    if !missing.is_empty() {
        tracing::warn!(
            "udevd has not made the stable links of {} after {} s: starting without them",
            missing.join(", "),
            LINK_WAIT.as_secs()
        );
    }
    d.metrics
        .serve(&d.applied().world.conf.cfg.metrics.listen)
        .await;
    // The filter's denials, the discard totals, the backend and the modes are
    // read when Prometheus scrapes.
    d.metrics.read_counters_from(metrics::Sources {
        applied: d.published(),
        filter: d.filter.clone(),
        discards: d.reclaims.discards.clone(),
        labels_lost: d.labels_lost.clone(),
    });
    let st = crate::views::status(&d.applied(), &d.site, &d.filter, &d.metrics, &d.scans);
    tracing::info!(
        "ready in {} ms: {} devices looked at, {} disks, {} conflicts; socket {}",
        t0.elapsed().as_millis(),
        st.devices_scanned,
        st.disks,
        st.conflicts,
        socket.display()
    );
    // SIGTERM is handled from before READY=1: a stop that follows READY at once
    // (systemd, or a test) gets the clean shutdown, not the default action
    // (seen under load: the handler was installed after the socket answered).
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("SIGTERM handler: {e}");
            return 1;
        }
    };
    tasks::notify(&[
        sd_notify::NotifyState::Ready,
        sd_notify::NotifyState::Status(
            &crate::views::service::line(&d.applied(), &d.filter).to_string(),
        ),
    ]);

    tasks::device_events(d.clone(), rx);
    watch::spawn(
        d.clone(),
        Duration::from_secs(d.applied().world.conf.cfg.devices.label_watch_seconds),
    );
    tasks::watchdog(monitor_alive.clone());
    tasks::filter_verify(d.clone());
    inputs::containers::task(d.clone());
    tasks::spawn_rules(d.clone());
    let serve = tokio::spawn(server::serve(listener, d.clone()));
    tasks::sighup(d.clone());
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    shutdown(&d, &socket, serve).await;
    tracing::info!("stopped");
    0
}

/// Stops serving; a label write under way finishes (write, sync, read-back)
/// before the socket goes.
async fn shutdown(
    d: &daemon::Daemon,
    socket: &std::path::Path,
    serve: tokio::task::JoinHandle<()>,
) {
    tasks::notify(&[sd_notify::NotifyState::Stopping]);
    serve.abort();
    // A label write under way finishes (write, sync, read-back) before the exit.
    let t = Instant::now();
    while d.inflight.writing() && t.elapsed() < Duration::from_secs(60) {
        tracing::info!("waiting for a label write to finish before stopping");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = std::fs::remove_file(socket);
}

/// The write filter, once the socket is ours (a second daemon that cannot bind
/// never touches it). Pinned programs of an earlier run are re-adopted as they
/// are, so protection never drops; the first scan's sync fills the managed
/// set. `Err`: the daemon must not start (no filter and `[filter]
/// require_protection`, or the start itself failed).
async fn start_filter(
    cfg: &config::Config,
    paths: &asmguard_paths::Paths,
    runtime_dir: &std::path::Path,
    bpf_pin_dir: Option<PathBuf>,
) -> Result<
    (
        filter::service::FilterService,
        asmguard_devices::writer::Writer,
        world::HostRules,
        world::modes::Modes,
    ),
    String,
> {
    let state_file = apply::modes_file(runtime_dir);
    let paths2 = paths.clone();
    let cfg2 = cfg.clone();
    let require = cfg.filter.require_protection;
    let started = tokio::task::spawn_blocking(move || {
        let (f, writer, rules, modes) = filter::start(&cfg2, &paths2, bpf_pin_dir, state_file);
        let st = f.status();
        if require && st.cover == asmguard_guard::Coverage::Unprotected {
            return Err(st.reason.to_string());
        }
        Ok((f, writer, rules, modes))
    })
    .await;
    match started {
        Ok(Ok(f)) => Ok(f),
        Ok(Err(why)) => Err(format!(
            "refusing to start: no write filter could load ({why}) and [filter] \
             require_protection = true; fix the cause or set it to false to run unprotected"
        )),
        Err(e) => Err(format!("write filter: {e}")),
    }
}
