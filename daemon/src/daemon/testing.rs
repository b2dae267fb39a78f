//! Daemons for unit tests: no filter, tracer or scan.

#![cfg(test)]

use super::*;

/// A daemon on the roots `paths` with runtime state under `runtime_dir`.
pub fn daemon_at(cfg: Config, paths: asmguard_paths::Paths, runtime_dir: &Path) -> Daemon {
    Daemon::new(Parts {
        cfg,
        cfg_source: "test".into(),
        paths,
        socket: PathBuf::from("/nonexistent/asmguard.sock"),
        runtime_dir: runtime_dir.to_path_buf(),
        monitor: asmguard_proto::EventSource::None {
            reason: "not listened to in this test".into(),
        },
        started: Started {
            filter: FilterService::inert(),
            writer: Writer::default(),
            metrics: MetricsService::without_tracer(),
            modes: Default::default(),
        },
    })
}

/// A daemon on the system's roots, with no runtime directory.
pub fn daemon(cfg: Config) -> Daemon {
    daemon_at(
        cfg,
        asmguard_paths::Paths::default(),
        Path::new("/nonexistent"),
    )
}

/// `status` as the socket answers it.
pub fn status(d: &Daemon) -> StatusResult {
    crate::views::status(&d.applied(), &d.site, &d.filter, &d.metrics, &d.scans)
}
