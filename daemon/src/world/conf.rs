//! The configuration in force: one snapshot ([`Conf`]) that every reader of
//! the daemon takes whole (device rules, the containers' nodes, the socket's
//! admin group and timeout, `status`), swapped as one on SIGHUP.
//!
//! A reload reads the whole file. Every key takes effect except the few that
//! only a start can apply ([`RESTART_ONLY`]: what was bound, opened or
//! loaded once); those keep their value in force, and the log and `status`
//! (`restart_needed`) name each that the file changed. A file that does not
//! read or parse changes nothing: one error line, and the snapshot in force
//! stays.

use asmguard_config::Config;
use asmguard_devices::pattern::Rules;

/// The configuration in force and what follows from it.
#[derive(Debug, Clone)]
pub struct Conf {
    /// The configuration in force (restart-only keys as at the start).
    pub cfg: Config,
    /// `[devices]`'s include/exclude/scan order as the scan takes them.
    pub rules: Rules,
    /// `[socket] admin_group` resolved (`None`: no such group: only root
    /// may use the socket).
    pub admin_gid: Option<u32>,
    /// The restart-only keys the file changed, as `status` shows them.
    pub restart_needed: Vec<asmguard_proto::RestartNeeded>,
}

impl Conf {
    /// The snapshot of `cfg` (nothing waits for a restart).
    pub fn new(cfg: Config) -> Conf {
        let admin_gid = nix::unistd::Group::from_name(&cfg.socket.admin_group)
            .ok()
            .flatten()
            .map(|g| g.gid.as_raw());
        Conf {
            rules: cfg.rules(),
            admin_gid,
            cfg,
            restart_needed: Vec::new(),
        }
    }

    /// The snapshot a reload puts in force: the file's configuration `file`
    /// with the restart-only keys as they are in force in `self`, and those
    /// the file changed named.
    pub fn reloaded(&self, file: Config) -> Conf {
        let (cfg, restart_needed) = merge(&self.cfg, file);
        Conf {
            restart_needed,
            ..Conf::new(cfg)
        }
    }
}

/// The keys only a start applies: the socket is bound and the runtime
/// directory's state read once; the exporter listens and the tracer loads
/// once; the label watch's thread and its settle time are set up once; the
/// filter's default mode is the base of the modes saved in its state file;
/// `require_protection` is the start's check.
pub const RESTART_ONLY: [&str; 8] = [
    "socket.path",
    "daemon.runtime_dir",
    "metrics.listen",
    "metrics.trace_all_disks",
    "metrics.single_block_bytes",
    "devices.label_watch_seconds",
    "filter.mode",
    "filter.require_protection",
];

/// `file` with the restart-only keys of `running` kept, and each key the
/// file changed among them, `key = in force -> in the file`.
pub fn merge(running: &Config, file: Config) -> (Config, Vec<asmguard_proto::RestartNeeded>) {
    let mut out = file;
    let mut changed = Vec::new();
    macro_rules! keep {
        ($name:literal, $($f:ident).+) => {
            debug_assert!(RESTART_ONLY.contains(&$name));
            if out.$($f).+ != running.$($f).+ {
                changed.push(asmguard_proto::RestartNeeded {
                    key: $name.into(),
                    in_force: format!("{:?}", running.$($f).+),
                    in_file: format!("{:?}", out.$($f).+),
                });
                out.$($f).+ = running.$($f).+.clone();
            }
        };
    }
    keep!("socket.path", socket.path);
    keep!("daemon.runtime_dir", daemon.runtime_dir);
    keep!("metrics.listen", metrics.listen);
    keep!("metrics.trace_all_disks", metrics.trace_all_disks);
    keep!("metrics.single_block_bytes", metrics.single_block_bytes);
    keep!("devices.label_watch_seconds", devices.label_watch_seconds);
    keep!("filter.mode", filter.mode);
    keep!("filter.require_protection", filter.require_protection);
    (out, changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(t: &str) -> Config {
        asmguard_config::parse(t, "test").unwrap()
    }

    #[test]
    fn a_reload_keeps_the_restart_only_keys_and_names_those_changed() {
        let running = Conf::new(parse("[socket]\npath = \"/run/a.sock\"\n"));
        let file = parse(
            "[socket]\npath = \"/run/b.sock\"\ntimeout_seconds = 7\n\
             [paths]\nmode = \"0600\"\n[metrics]\nlisten = \"127.0.0.1:1\"\n",
        );
        let now = running.reloaded(file);
        assert_eq!(now.cfg.socket.path, std::path::PathBuf::from("/run/a.sock"));
        assert_eq!(now.cfg.metrics.listen, running.cfg.metrics.listen);
        // every other key takes effect
        assert_eq!(now.cfg.socket.timeout_seconds, 7);
        assert_eq!(now.cfg.mode(), 0o600);
        assert_eq!(now.restart_needed.len(), 2, "{:?}", now.restart_needed);
        let w = &now.restart_needed[0];
        assert_eq!(
            (w.key.as_str(), w.in_force.as_str(), w.in_file.as_str()),
            ("socket.path", "\"/run/a.sock\"", "\"/run/b.sock\"")
        );
        assert_eq!(now.restart_needed[1].key, "metrics.listen");
        assert_eq!(now.restart_needed[1].in_file, "\"127.0.0.1:1\"");
        // the same file again: nothing waits
        let again = now.reloaded(parse(
            "[paths]\nmode = \"0600\"\n[socket]\npath = \"/run/a.sock\"\n",
        ));
        assert!(
            again.restart_needed.is_empty(),
            "{:?}",
            again.restart_needed
        );
    }

    #[test]
    fn every_restart_only_key_is_kept() {
        let running = Config::default();
        let file = parse(
            "[socket]\npath = \"/x.sock\"\n[daemon]\nruntime_dir = \"/x\"\n\
             [metrics]\nlisten = \"127.0.0.1:2\"\ntrace_all_disks = true\nsingle_block_bytes = 16384\n\
             [devices]\nlabel_watch_seconds = 9\n\
             [filter]\nmode = \"audit\"\nrequire_protection = true\n",
        );
        let (out, changed) = merge(&running, file);
        assert_eq!(out, running);
        let keys: Vec<&str> = changed.iter().map(|c| c.key.as_str()).collect();
        assert_eq!(keys, RESTART_ONLY);
    }
}
