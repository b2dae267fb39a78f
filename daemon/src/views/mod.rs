//! The answers that show the daemon's state: `lsdsk` (the stored model's
//! disks, their container nodes, conflicts and unmanaged disks), `status`
//! (the daemon, the filter, claims, containers and the configuration in
//! force). Each is a function of what was applied (`crate::apply::Applied`)
//! and of the filter's status; nothing here changes state.

use crate::daemon::*;

pub mod service;

/// The configured containers as last resolved, each with the host
/// users whose subordinate id ranges its maps reach among its problems.
fn container_views(s: &Applied, site: &Site) -> Vec<asmguard_proto::ContainerStatus> {
    s.world
        .containers
        .each
        .iter()
        .map(|r| {
            let mut v = r.view.clone();
            if r.found.pid.is_some() {
                v.problems.extend(asmguard_containers::subid::host_warnings(
                    &r.found,
                    &site.paths.etc,
                ));
            }
            v
        })
        .collect()
}

/// `lsdsk`: the disks as last applied, their container nodes, conflicts
/// and unmanaged disks.
pub fn lsdsk(s: &Applied, site: &Site) -> LsdskResult {
    let m = &s.world.model;
    let shown = &s.presented;
    let mut disks = model::lsdsk_rows(&m.disks, &site.paths);
    let exposed = &s.world.exposed;
    for d in &mut disks {
        d.exposed = exposed.contains_key(&d.label);
        d.loops_before = s
            .world
            .loops
            .get(&d.label)
            .map(|v| v.iter().map(|l| l.name.clone()).collect())
            .unwrap_or_default();
        d.presented = shown
            .of_label(&d.label)
            .map(crate::apply::present::Node::info)
            .collect();
    }
    LsdskResult {
        not_presented: shown
            .problems
            .iter()
            .map(crate::apply::present::Problem::info)
            .collect(),
        oracle_homes: s
            .world
            .rules
            .as_ref()
            .map(|r| r.homes.clone())
            .unwrap_or_default(),
        oracle_retired: s
            .world
            .rules
            .as_ref()
            .map(|r| r.retired.clone())
            .unwrap_or_default(),
        disks,
        conflicts: m
            .conflicts
            .iter()
            .map(|(l, v)| Conflict {
                label: l.clone(),
                devices: v.clone(),
                kept: m.kept.get(l).cloned(),
            })
            .collect(),
        devices_scanned: m.devices_scanned,
        unreadable: m.unreadable.clone(),
        unmanaged: m
            .unmanaged
            .iter()
            .map(|u| asmguard_proto::UnmanagedDisk {
                device: u.device.clone(),
                label: u.label.clone().unwrap_or_default(),
                reason: u.why.clone(),
            })
            .collect(),
    }
}

/// `status`: the daemon (`site`, its last scan), the filter, claims,
/// containers and the configuration in force.
pub fn status(
    s: &Applied,
    site: &Site,
    filter: &FilterService,
    metrics: &MetricsService,
    scans: &Scans,
) -> StatusResult {
    let containers = container_views(s, site);
    let bpf_lsm = match std::fs::read_to_string(site.paths.securityfs().join("lsm")) {
        Ok(l) => {
            let lsm: Vec<String> = l.trim().split(',').map(str::to_string).collect();
            asmguard_proto::BpfLsm {
                active: Some(lsm.iter().any(|x| x == "bpf")),
                lsm,
            }
        }
        Err(_) => asmguard_proto::BpfLsm::default(),
    };
    let fst = filter.status();
    let rules = s.world.rules.clone().unwrap_or_default();
    let protection = fst.protection();
    let shown = &s.presented;
    let conf = &s.world.conf;
    StatusResult {
        daemon_version: env!("CARGO_PKG_VERSION").to_string(),
        protocol_version: asmguard_proto::VERSION,
        pid: std::process::id(),
        uptime_seconds: site.started.elapsed().as_secs(),
        kernel: std::fs::read_to_string(site.paths.osrelease())
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into()),
        bpf_lsm,
        filter_backend: fst.backend(),
        filter_coverage: crate::apply::filter::service::scope_of(fst.cover),
        filter_reason: fst.reason,
        filter_passthrough: fst.passthrough,
        filter_programs: fst.programs,
        filter_other_programs: filter.other_programs(),
        filter_program_runs: filter.program_runs(),
        filter_devices: fst.devices,
        filter_majors: fst.majors,
        allow_rules: rules.lines.clone(),
        allow_notes: rules.notes.clone(),
        reclaim_fence: crate::apply::fence::status(
            &s.world.fenced,
            fst.cover,
            filter.containers_enforced(),
        ),
        oracle_homes: rules.homes.clone(),
        oracle_retired: rules.retired.clone(),
        exposed: crate::world::exposed::opened(&s.world.exposed),
        writers_before: crate::world::exposed::opened(&s.world.writers),
        loops_before: crate::world::exposed::loops(&s.world.loops),
        filter_pins: fst.pins,
        map_fds: fst.map_fds,
        protection,
        // how to get full coverage: only where it is missing (fmod_ret has it)
        bpf_lsm_hint: match protection {
            asmguard_proto::Protection::Degraded | asmguard_proto::Protection::Unprotected => {
                asmguard_guard::bpf_lsm_hint(&site.paths)
            }
            _ => None,
        },
        claims: s.claims.clone(),
        claims_kept: s.claims_kept,
        claims_slow: s.claims_slow.clone(),
        containers,
        containers_enforced: filter.containers_enforced(),
        container_nodes: shown.nodes.len(),
        not_presented: shown
            .problems
            .iter()
            .map(crate::apply::present::Problem::info)
            .collect(),
        default_filter_mode: conf.cfg.filter.mode,
        disks: s.world.model.usable(),
        conflicts: s.world.model.conflicts.len(),
        devices_scanned: s.world.model.devices_scanned,
        socket: site.socket.display().to_string(),
        metrics: metrics.endpoint(),
        config: site.cfg_source.clone(),
        events: site.monitor.clone(),
        last_scan_ms: scans.observed().last_scan_ms,
        restart_needed: conf.restart_needed.clone(),
    }
}

/// The filter's events after sequence number `a.after` (oldest first).
pub fn events(
    filter: &FilterService,
    a: &asmguard_proto::EventsArgs,
) -> asmguard_proto::EventsResult {
    let events = filter.events_after(a.after);
    let last_seq = events.last().map(|e| e.seq).unwrap_or(a.after);
    asmguard_proto::EventsResult { events, last_seq }
}

impl asmguard_proto::serve::Lsdsk for Daemon {
    fn lsdsk(&self, _: &str) -> Result<impl serde::Serialize, ErrorBody> {
        Ok(lsdsk(&self.applied(), &self.site))
    }
}

impl asmguard_proto::serve::Status for Daemon {
    fn status(&self, _: &str) -> Result<impl serde::Serialize, ErrorBody> {
        Ok(status(
            &self.applied(),
            &self.site,
            &self.filter,
            &self.metrics,
            &self.scans,
        ))
    }
}

impl asmguard_proto::serve::Events for Daemon {
    fn events(
        &self,
        a: &asmguard_proto::EventsArgs,
        _: &str,
    ) -> Result<impl serde::Serialize, ErrorBody> {
        Ok(events(&self.filter, a))
    }
}
