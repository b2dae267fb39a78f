//! The subcommands: their list ([`Command`], clap's, the man page's source with
//! `cli.rs`), the ones that talk to the daemon and print its answers, and the
//! offline generators. A new socket operation's subcommand is a variant here and
//! its arm in [`run`].

use crate::cli;
use crate::client::call;
use crate::exit::{CliError, BAD_INPUT, FAILED};
use crate::size::human;
use asmguard_filter_types::PassthroughRule;
use asmguard_proto::{
    BpfLsm, ClaimsKept, ClaimsSlow, DiskInfo, FenceRefuses, FilterAction, FilterScope, LabelAction,
    LabelResult, LsdskResult, MapFds, Noticed, Op, OpenedBefore, Pins, Protection, ReclaimFence,
    StatusResult,
};
use clap::{CommandFactory, Parser, Subcommand};
use serde::de::DeserializeOwned;

fn decode<T: DeserializeOwned>(v: serde_json::Value) -> Result<T, CliError> {
    serde_json::from_value(v)
        .map_err(|e| CliError::new(FAILED, format!("unexpected answer from asmguardd: {e}")))
}

fn print_json(v: &serde_json::Value) {
    outln!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
}

fn label_text(r: &LabelResult) -> String {
    let mut s = match r.action {
        LabelAction::Unchanged => {
            format!("{}: already labelled {}: nothing to do", r.device, r.label)
        }
        LabelAction::Migrated => format!(
            "{}: labelled {} (ASM disk header kept; only the label bytes changed)",
            r.device, r.label
        ),
        LabelAction::Relabelled => format!("{}: relabelled {}", r.device, r.label),
        LabelAction::Unlabelled => format!("{}: label {} removed", r.device, r.label),
        LabelAction::Renamed => format!("{}: renamed to {}", r.device, r.label),
        LabelAction::Labelled => format!("{}: labelled {}", r.device, r.label),
    };
    if !r.erased.is_empty() {
        s.push_str(&format!(" (erased: {})", r.erased.join(", ")));
    }
    s
}

/// Sends `op` and prints the answer: as JSON, or as `text` makes it.
fn show<T: DeserializeOwned>(
    c: &Cli,
    op: Op,
    json: bool,
    text: fn(&T) -> String,
) -> Result<(), CliError> {
    let v = call(&c.global.socket, c.global.timeout, op)?;
    if json {
        print_json(&v);
    } else {
        out!("{}", text(&decode(v)?));
    }
    Ok(())
}

/// `items` joined with commas, or `none` when there are none.
/// One rule of `who may write`: `any process of user grid`, `rule db: user
/// grid AND unit db.service`, `oracle homes: uid 54331 AND executable ...`.
fn allow_rule_text(r: &asmguard_proto::AllowRule) -> String {
    use asmguard_proto::AllowRule as R;
    match r {
        R::Users { users } => format!("any process of user {}", users.join(", ")),
        R::Groups { groups } => format!("any process in group {}", groups.join(", ")),
        R::Executable { path } => format!("any process running {path}"),
        R::Rule {
            name,
            users,
            groups,
            executables,
            units,
            cgroups,
        } => {
            let mut who = Vec::new();
            if !users.is_empty() {
                who.push(format!("user {}", users.join(", ")));
            }
            if !groups.is_empty() {
                who.push(format!("group {}", groups.join(", ")));
            }
            let mut parts = Vec::new();
            if !who.is_empty() {
                parts.push(who.join(" or "));
            }
            for (what, v) in [
                ("executable", executables),
                ("unit", units),
                ("cgroup", cgroups),
            ] {
                if !v.is_empty() {
                    parts.push(format!("{what} {}", v.join(", ")));
                }
            }
            format!("rule {name}: {}", parts.join(" AND "))
        }
        R::OracleHomes { uid, executables } => format!(
            "oracle homes: uid {uid} AND executable {}",
            executables.join(", ")
        ),
        R::Daemon => "the daemon's own process (label and reclaim writes)".into(),
    }
}

/// The `oracle homes` row: `grid home /u01/app/19c/grid: oracle (uid
/// 54331), ...`, then the binaries replaced but still running.
fn homes_text(
    homes: &[asmguard_proto::OracleHome],
    retired: &[asmguard_proto::OracleBinary],
) -> String {
    let lines: Vec<String> = homes
        .iter()
        .map(ToString::to_string)
        .chain(
            retired
                .iter()
                .map(asmguard_proto::OracleBinary::retired_text),
        )
        .collect();
    joined_or(&lines, "none found")
}

/// Another tool's program on one of the filter's kernel functions: `NAME
/// (id N) on HOOK`.
fn other_program_text(p: &asmguard_proto::Program) -> String {
    match p.hook {
        Some(h) => format!("{} (id {}) on {h}", p.name, p.id),
        None => format!(
            "{} (id {}) on a security function (this kernel does not say which)",
            p.name, p.id
        ),
    }
}

fn joined_or(items: &[String], none: &str) -> String {
    if items.is_empty() {
        none.to_string()
    } else {
        items.join(", ")
    }
}

fn label_op(c: &Cli, op: Op, json: bool) -> Result<(), CliError> {
    show(c, op, json, |r: &LabelResult| {
        format!("{}\n", label_text(r))
    })
}

pub fn lsdsk_text(r: &LsdskResult) -> String {
    use std::fmt::Write;
    let mut rows = vec![[
        "Label".to_string(),
        "Filtering".into(),
        "Path".into(),
        "Size".into(),
        "Sector(L/P)".into(),
        "Header".into(),
        "Disk group".into(),
        "Link".into(),
        "Other paths".into(),
        "Serial/WWN".into(),
    ]];
    for d in &r.disks {
        let others: Vec<String> = d
            .paths
            .iter()
            .skip(1)
            .map(|p| format!("{}({})", p.name, p.role))
            .chain(d.nvme_paths.iter().map(|n| format!("{n}(nvme-path)")))
            .chain(d.loops_before.iter().map(|n| format!("{n}(loop-before)")))
            .chain(
                d.nvme_controllers
                    .iter()
                    .map(|n| format!("{n}(controller)")),
            )
            .collect();
        let label = if d.conflict {
            format!("{} CONFLICT", d.label)
        } else {
            d.label.clone()
        };
        let mode = if d.exposed {
            format!("{} exposed", d.filter_mode)
        } else {
            d.filter_mode.clone()
        };
        rows.push([
            label,
            mode,
            d.top.clone(),
            human(d.size_bytes),
            format!("{}/{}", d.logical_block_size, d.physical_block_size),
            d.header_status.clone(),
            d.disk_group.clone().unwrap_or_else(|| "-".into()),
            d.stable_link.to_string(),
            if others.is_empty() {
                "-".into()
            } else {
                others.join(",")
            },
            match (&d.serial, &d.wwn) {
                (None, None) => "-".into(),
                (s, w) => format!(
                    "{}/{}",
                    s.as_deref().unwrap_or("-"),
                    w.as_deref().unwrap_or("-")
                ),
            },
        ]);
    }
    let mut w = [0usize; 10];
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.len());
        }
    }
    let mut s = String::new();
    for r in &rows {
        let line: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<w$}", w = w[i]))
            .collect();
        let _ = writeln!(s, "{}", line.join("  ").trim_end());
    }
    if r.disks.is_empty() {
        let _ = writeln!(
            s,
            "(no labelled disks among {} devices looked at)",
            r.devices_scanned
        );
    }
    for c in &r.conflicts {
        match &c.kept {
            Some(k) => {
                let others: Vec<&str> = c
                    .devices
                    .iter()
                    .map(String::as_str)
                    .filter(|d| d != k)
                    .collect();
                let _ = writeln!(
                    s,
                    "CONFLICT: label {} is also on {}: {k} had it first and keeps it; the \
                     newcomer is not linked or presented until it is relabelled",
                    c.label,
                    others.join(" and ")
                );
            }
            None => {
                let _ = writeln!(
                    s,
                    "CONFLICT: label {} is on {}: neither is used until one is relabelled",
                    c.label,
                    c.devices.join(" and ")
                );
            }
        }
    }
    for u in &r.unreadable {
        let _ = writeln!(s, "unreadable: {u}");
    }
    for d in &r.disks {
        for p in &d.presented {
            let _ = writeln!(
                s,
                "presented: {} to container {} as {} (host uid {}, gid {}, mode {})",
                d.label, p.container, p.path, p.uid, p.gid, p.mode
            );
        }
    }
    for n in &r.not_presented {
        let _ = writeln!(s, "NOT PRESENTED: {}", not_presented_text(n));
    }
    for d in r.disks.iter().filter(|d| d.identified_by != "label") {
        let how = if d.identified_by == "udev_name" {
            "the name [devices.member_names] gives its LUN".to_string()
        } else {
            "the disk name in its ASM header".to_string()
        };
        let _ = writeln!(
            s,
            "NO LABEL: {} ({}) is managed by {how} (disk {} of disk group {}, {}): nothing is written to it",
            d.label,
            d.top,
            d.asm_disk_name.as_deref().unwrap_or("-"),
            d.disk_group.as_deref().unwrap_or("-"),
            d.header_status
        );
    }
    for u in &r.unmanaged {
        let seen = if u.label.is_empty() {
            "no label".to_string()
        } else {
            format!("LABEL={} to blkid and udev", u.label)
        };
        let _ = writeln!(
            s,
            "NOT MANAGED: {} carries an ASM label header ({seen}): {}",
            u.device, u.reason
        );
    }
    s
}

/// `container rac1: REASON`, or `DATA1 to container rac1: REASON`.
fn not_presented_text(n: &asmguard_proto::NotPresented) -> String {
    match &n.label {
        Some(l) => format!("{l} to container {}: {}", n.container, n.reason),
        None => format!("container {}: {}", n.container, n.reason),
    }
}

/// A disk's Filtering sentence (`lsdsk --json`'s `filtering`), from the
/// typed values the daemon sends: `enforce (lsm)`, `enforce (fmod_ret)`,
/// `audit (cgroup_device, open-time only)`, `off`, `off (filter disabled)`,
/// `UNPROTECTED (no filter backend)` or `off (no filter)`.
pub fn filtering(d: &DiskInfo) -> String {
    sentence(d.filter_scope, &d.filter_mode, d.filter_backend.as_str())
}

fn sentence(scope: FilterScope, mode: &str, backend: &str) -> String {
    match scope {
        FilterScope::NoFilter => "off (no filter)".into(),
        FilterScope::Disabled => "off (filter disabled)".into(),
        FilterScope::Unprotected => "UNPROTECTED (no filter backend)".into(),
        _ if mode == "off" => "off".into(),
        FilterScope::Full => format!("{mode} ({backend})"),
        FilterScope::OpenTimeOnly => format!("{mode} ({backend}, open-time only)"),
    }
}

fn list(c: &Cli, op: Op, json: bool) -> Result<(), CliError> {
    let mut v = call(&c.global.socket, c.global.timeout, op)?;
    let r: LsdskResult = decode(v.clone())?;
    if !json {
        out!("{}", lsdsk_text(&r));
        return Ok(());
    }
    // the answer as it came, each disk with its sentence beside the words
    if let Some(disks) = v.get_mut("disks").and_then(|d| d.as_array_mut()) {
        for (j, d) in disks.iter_mut().zip(&r.disks) {
            if let Some(o) = j.as_object_mut() {
                o.insert("filtering".into(), filtering(d).into());
            }
        }
    }
    print_json(&v);
    Ok(())
}

fn status(c: &Cli, json: bool) -> Result<(), CliError> {
    let v = call(&c.global.socket, c.global.timeout, Op::Status)?;
    let s: StatusResult = decode(v.clone())?;
    if json {
        print_json(&v);
        return unprotected(&s);
    }
    for (k, v) in status_rows(s.clone()) {
        outln!("{:<15} {v}", format!("{k}:"));
    }
    if let Some(h) = &s.bpf_lsm_hint {
        outln!("{:<15} {h}", "hint:");
    }
    unprotected(&s)
}

fn status_rows(s: StatusResult) -> Vec<(&'static str, String)> {
    let containers = container_rows(&s);
    let nodes = node_row(&s);
    let coverage = coverage_text(&s);
    let mut rows = vec![
        (
            "daemon",
            format!(
                "asmguardd {} (pid {}, up {} s, protocol {})",
                s.daemon_version, s.pid, s.uptime_seconds, s.protocol_version
            ),
        ),
        ("protection", protection_text(&s)),
    ];
    for e in &s.exposed {
        rows.push(("exposed", exposed_text(e)));
    }
    for w in &s.writers_before {
        rows.push(("writer", writer_text(w)));
    }
    for l in &s.loops_before {
        rows.push(("loop", l.to_string()));
    }
    rows.extend([
        ("kernel", s.kernel),
        ("bpf lsm", bpf_lsm_text(&s.bpf_lsm)),
        (
            "filter backend",
            format!("{} ({coverage})", s.filter_backend),
        ),
        (
            "filter",
            format!(
                "{} devices protected; programs: {}; {}",
                s.filter_devices,
                joined_or(
                    &s.filter_programs
                        .iter()
                        .map(|p| p.name.clone())
                        .collect::<Vec<_>>(),
                    "none"
                ),
                s.filter_reason
            ),
        ),
        (
            "other programs",
            if s.filter_other_programs.is_empty() {
                "none on the filter's kernel functions".into()
            } else {
                format!(
                    "{} (the first refusal on a function wins)",
                    s.filter_other_programs
                        .iter()
                        .map(other_program_text)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            },
        ),
        (
            "sg_io / nvme",
            passthrough_text(s.filter_passthrough).into(),
        ),
        ("pins", pins_text(s.filter_pins)),
        (
            "map fds",
            match s.map_fds {
                MapFds::Refused => "refused by the kernel (no other task gets an fd onto the \
                                    filter's maps or programs)"
                    .to_string(),
                MapFds::PeriodicCheck => "periodic check only (a map written through another \
                                          task's fd is put back within 2 s)"
                    .to_string(),
                MapFds::None => "none (no filter)".to_string(),
            },
        ),
        (
            "who may write",
            if s.allow_rules.is_empty() {
                "nobody (no rule)".to_string()
            } else {
                s.allow_rules
                    .iter()
                    .map(allow_rule_text)
                    .collect::<Vec<_>>()
                    .join("; ")
            },
        ),
        (
            "oracle homes",
            homes_text(&s.oracle_homes, &s.oracle_retired),
        ),
        (
            "rule notes",
            joined_or(
                &s.allow_notes
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>(),
                "none",
            ),
        ),
        ("reclaim fence", fence_text(&s.reclaim_fence)),
        (
            "filter mode",
            format!("{} (default)", s.default_filter_mode),
        ),
        ("exclusive claims", {
            let v = if s.claims.is_empty() {
                "none".to_string()
            } else {
                format!(
                    "{} disk(s), kernel consumers get EBUSY: {}; kept across restarts: {}",
                    s.claims.len(),
                    s.claims
                        .iter()
                        .map(claim_text)
                        .collect::<Vec<_>>()
                        .join(", "),
                    claims_kept_text(s.claims_kept)
                )
            };
            match &s.claims_slow {
                None => v,
                Some(slow) => format!("{v}; last slow: {}", claims_slow_text(slow)),
            }
        }),
        (
            "disks",
            format!(
                "{} labelled, {} label conflicts, {} devices looked at",
                s.disks, s.conflicts, s.devices_scanned
            ),
        ),
        ("events", s.events.to_string()),
        ("last full scan", format!("{} ms", s.last_scan_ms)),
        ("socket", s.socket),
        ("metrics", metrics_text(&s.metrics)),
        ("config", s.config),
    ]);
    if !s.restart_needed.is_empty() {
        rows.push((
            "restart needed",
            format!(
                "changed in the file, in force at the next start: {}",
                s.restart_needed
                    .iter()
                    .map(|k| format!("{} = {} -> {}", k.key, k.in_force, k.in_file))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        ));
    }
    // after "exclusive claims"
    let at = rows
        .iter()
        .position(|(k, _)| *k == "exclusive claims")
        .map_or(rows.len(), |i| i + 1);
    rows.splice(at..at, containers.into_iter().chain(nodes));
    rows
}

/// The `container nodes` row of `status`, where containers are configured:
/// how many device nodes are made for them, and why some have none.
fn node_row(s: &StatusResult) -> Option<(&'static str, String)> {
    if s.containers.is_empty() && s.container_nodes == 0 && s.not_presented.is_empty() {
        return None;
    }
    let mut v = format!("{} in /dev/asmguard/containers", s.container_nodes);
    if !s.not_presented.is_empty() {
        let why: Vec<String> = s.not_presented.iter().map(not_presented_text).collect();
        v.push_str(&format!("; not presented: {}", why.join("; ")));
    }
    Some(("container nodes", v))
}

/// The `containers` rows of `status`: whether the filter enforces container
/// rules, then one row per configured container.
fn container_rows(s: &StatusResult) -> Vec<(&'static str, String)> {
    if s.containers.is_empty() {
        return vec![("containers", "none configured".into())];
    }
    let mut rows = vec![(
        "containers",
        if s.containers_enforced {
            format!("{} configured, rules enforced", s.containers.len())
        } else {
            format!(
                "{} configured, rules NOT ENFORCED: this filter cannot read a task's cgroup \
                 (the 5.10 cgroup-device fallback knows callers by uid and gid only, or no filter)",
                s.containers.len()
            )
        },
    )];
    rows.extend(s.containers.iter().map(|c| ("container", c.summary())));
    rows
}

/// The endpoint and the tracer, in `status`'s `metrics` row: `http://ADDR/metrics
/// (serving) (latency: block tracepoints (...))`, as the daemon wrote it.
fn metrics_text(m: &asmguard_proto::MetricsEndpoint) -> String {
    use asmguard_proto::EndpointState;
    let at = m.address.as_deref().unwrap_or("");
    let served = match &m.state {
        EndpointState::NotYet => "not served yet".to_string(),
        EndpointState::Serving => format!("{at} (serving)"),
        EndpointState::Failing { error } => format!("{at} (failing: {error}; retrying)"),
        EndpointState::NotServed { error } => format!("{at} (not served: {error})"),
    };
    format!("{served} (latency: {})", m.tracer)
}

/// What the filter covers, in `status`'s `filter backend` row: `full`,
/// `degraded: open-time only`, or why there is no filter.
fn coverage_text(s: &StatusResult) -> String {
    match s.filter_coverage {
        _ if s.filter_backend == asmguard_filter_types::BackendName::None => {
            s.filter_reason.to_string()
        }
        FilterScope::Full => "full".into(),
        FilterScope::OpenTimeOnly => "degraded: open-time only".into(),
        FilterScope::Disabled | FilterScope::Unprotected | FilterScope::NoFilter => {
            s.filter_reason.to_string()
        }
    }
}

/// The rule SG_IO and NVMe passthrough get, in `status`'s `sg_io / nvme`
/// row.
fn passthrough_text(rule: Option<PassthroughRule>) -> &'static str {
    match rule {
        Some(PassthroughRule::ByClass) => {
            "by command class (read-class SCSI and NVMe admin commands pass; writes, \
             format, sanitize, vendor commands refused); a caller holding CAP_SYS_RAWIO \
             (SG_IO) or CAP_SYS_ADMIN (NVMe) gets none unless it runs a disk-query tool \
             as root (its command could be changed after this check)"
        }
        Some(PassthroughRule::ByClassInMemory) => {
            "by command class, read without faulting (read-class SCSI and NVMe admin \
             commands pass; writes, format, sanitize, vendor commands and a command \
             that is not in memory refused); a caller holding CAP_SYS_RAWIO (SG_IO) or \
             CAP_SYS_ADMIN (NVMe) gets none unless it runs a disk-query tool as root"
        }
        Some(PassthroughRule::AllOrNothing) => {
            "all-or-nothing (the kernel cannot read the CDB: every SG_IO and NVMe \
             passthrough refused)"
        }
        Some(PassthroughRule::OpenOnly) => {
            "not filtered (cgroup-device fallback sees opens only: write-opens refused, \
             ioctls on read-only opens pass)"
        }
        None => "not filtered (no filter)",
    }
}

/// The `bpf lsm` row of `status`: `yes (lsm=...)`, `no (lsm=...)` or
/// `unknown (securityfs not mounted)`.
fn bpf_lsm_text(b: &BpfLsm) -> String {
    match b.active {
        Some(true) => format!("yes (lsm={})", b.lsm.join(",")),
        Some(false) => format!("no (lsm={})", b.lsm.join(",")),
        None => "unknown (securityfs not mounted)".into(),
    }
}

/// The last slow taking of the exclusive claims, in `status`'s `exclusive
/// claims` row: `the exclusive claim of LABEL MAJ:MIN took N ms to take`.
/// A claim: `LABEL MAJ:MIN`.
fn claim_text(c: &asmguard_proto::Claim) -> String {
    format!("{} {}:{}", c.label, c.major, c.minor)
}

fn claims_slow_text(slow: &ClaimsSlow) -> String {
    format!(
        "the exclusive claim of {} took {} ms{}",
        slow.disks
            .iter()
            .map(claim_text)
            .collect::<Vec<_>>()
            .join(", "),
        slow.ms,
        if slow.all_taken {
            " to take"
        } else {
            ": not all taken"
        }
    )
}

/// An `exposed` row of `status`: `DATA1 mapped shared-writable by pid 1234
/// (dd) since before protection`.
fn exposed_text(o: &OpenedBefore) -> String {
    format!(
        "{} mapped shared-writable by pid {} ({}) since before protection",
        o.label, o.pid, o.comm
    )
}

/// A `writer` row of `status`: a descriptor open for writing since before
/// protection.
fn writer_text(o: &OpenedBefore) -> String {
    format!(
        "{} writer open since before protection: pid {} ({}) fd {} on {} \
         (its writes are refused)",
        o.label, o.pid, o.comm, o.fd, o.path
    )
}

/// The protection line of `status`.
fn protection_text(s: &StatusResult) -> String {
    match s.protection {
        Protection::Protected => "protected".into(),
        Protection::Degraded => "degraded: open-time only".into(),
        Protection::Off => "off (disabled by an administrator)".into(),
        Protection::Unprotected => format!("UNPROTECTED: {}", s.filter_reason),
    }
}

/// `status` exits with 7 when nothing protects the disks, or when a
/// protected disk is still written through a mapping made before protection.
fn unprotected(s: &StatusResult) -> Result<(), CliError> {
    if s.unprotected() {
        return Err(CliError::new(
            crate::exit::UNPROTECTED,
            format!("the managed disks are {}", protection_text(s)),
        ));
    }
    if s.exposed() {
        return Err(CliError::new(
            crate::exit::UNPROTECTED,
            format!(
                "exposed: {} (the kernel judges a mapping when it is made; \
                 end the process to close it)",
                s.exposed
                    .iter()
                    .map(exposed_text)
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        ));
    }
    Ok(())
}

fn filter(c: &Cli, a: &cli::FilterArgs) -> Result<(), CliError> {
    let v = call(
        &c.global.socket,
        c.global.timeout,
        Op::Filter(asmguard_proto::FilterArgs {
            action: a.action,
            label: a.label.clone(),
        }),
    )?;
    if a.json {
        print_json(&v);
        return Ok(());
    }
    let r: asmguard_proto::FilterResult = decode(v)?;
    let what = match r.action {
        FilterAction::Enable => "enforcing",
        FilterAction::Audit => "auditing (logging, allowing)",
        FilterAction::Disable => "off",
    };
    match (&a.label, r.action) {
        (None, FilterAction::Disable) => {
            outln!("filter disabled: programs detached and unpinned")
        }
        (None, _) => outln!(
            "filter {what} on all disks ({}): {}",
            r.backend,
            joined_or(&r.labels, "none yet")
        ),
        (Some(l), _) => outln!("filter {what} on {l} ({})", r.backend),
    }
    Ok(())
}

pub fn event_text(e: &asmguard_proto::FilterEventInfo) -> String {
    let secs = e.time_ms / 1000;
    let (h, m, s) = ((secs / 3600) % 24, (secs / 60) % 60, secs % 60);
    let t = format!("{h:02}:{m:02}:{s:02}Z");
    let d = &e.denial;
    let exe = if d.exe.is_empty() { "?" } else { &d.exe };
    match &e.noticed {
        // the daemon's own pins, found not to be its own at a start
        Some(Noticed::PinReplaced(pin)) => return format!("{t} PIN REPLACED {pin}"),
        // a loop device over a protected disk, set up before its protection
        Some(Noticed::LoopBefore { device }) => {
            return format!("{t} LOOP BEFORE PROTECTION: {device}")
        }
        Some(Noticed::LoopGone { device: l }) => {
            return format!(
                "{t} LOOP NO LONGER NAMED: {} over {} (backing file {}): detached, or the \
                 disk is no longer protected",
                l.name, l.label, l.backing
            )
        }
        // noticed by the daemon, not refused by the kernel
        Some(n @ (Noticed::Exposed | Noticed::ExposureEnded)) => {
            return format!(
                "{t} {} label={} device=b{} pid={} comm={} exe={exe} \
                 mmap-shared-write made before protection",
                if *n == Noticed::Exposed {
                    "EXPOSED"
                } else {
                    "EXPOSURE ENDED"
                },
                e.label,
                d.device,
                d.pid,
                d.comm,
            )
        }
        None => {}
    }
    format!(
        "{t} {} {} label={} device={}{} pid={} uid={} egid={} comm={} exe={exe} hook={}",
        match d.mode {
            asmguard_filter_types::Mode::Enforce => "DENIED ",
            asmguard_filter_types::Mode::Fenced => "DENIED (reclaim fence)",
            _ => "AUDITED",
        },
        d.operation,
        if e.label.is_empty() { "?" } else { &e.label },
        d.device_kind(),
        d.device,
        d.pid,
        d.uid,
        d.egid,
        d.comm,
        d.hook()
    )
}

fn events(c: &Cli, a: &cli::EventsArgs) -> Result<(), CliError> {
    let mut after = 0u64;
    loop {
        let v = call(
            &c.global.socket,
            c.global.timeout,
            Op::Events(asmguard_proto::EventsArgs { after }),
        )?;
        let r: asmguard_proto::EventsResult = decode(v)?;
        for e in &r.events {
            if a.json {
                outln!("{}", serde_json::to_string(e).unwrap_or_default());
            } else {
                outln!("{}", event_text(e));
            }
        }
        if crate::out::stopped() {
            return Ok(()); // a pager or head quit, or the disk is full
        }
        after = after.max(r.last_seq);
        if !a.follow {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
}

/// The command line: [`cli::Global`] options and one subcommand.
#[derive(Debug, Parser)]
#[command(
    name = "asmguardctl",
    version,
    about = "Label, list, protect and inspect Oracle ASM disks (asmguard control CLI)",
    long_about = "asmguardctl drives asmguardd over its unix socket. `inspect`, `udev-rules`, \
                  `man` and `completions` work offline, without the daemon.\n\n\
                  Changing labels needs root; reading (lsdsk, status, scan) needs root or the \
                  configured admin group.",
    after_long_help = cli::EXIT_CODES
)]
pub struct Cli {
    #[command(flatten)]
    pub global: cli::Global,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Label a disk: write ORCLDISK + LABEL into its first block (read back and compared).
    ///
    /// Refused when the disk holds data (any partition table, filesystem, LVM, RAID,
    /// swap, LUKS or unknown bytes: --force erases their signatures), an ASM disk
    /// header (--migrate keeps it and only sets the label), another label (--force, or
    /// use rename), or is in use (mounted, held by dm/md; or open for writing by
    /// another process, named by pid and command: --force labels it anyway). Labelling
    /// with the label it already has changes nothing.
    Label(cli::LabelArgs),
    /// Remove a label (an ASM disk header keeps ORCLDISK; elsewhere ORCLCLRD is left).
    Unlabel(cli::UnlabelArgs),
    /// Change a disk's label, touching only the label bytes.
    Rename(cli::RenameArgs),
    /// List the labelled disks: label, filtering, path(s), size, sector sizes, ASM
    /// header status, disk group; label conflicts; the device nodes made for
    /// containers (`presented:`) and why a container has none (`NOT PRESENTED:`).
    Lsdsk(cli::ViewArgs),
    /// Make the daemon re-read every device, then list like lsdsk.
    Scan(cli::JsonArg),
    /// Daemon version, kernel, BPF LSM, filter backend, disks, socket, metrics address.
    ///
    /// The filter backend is `lsm` (the BPF LSM), `fmod_ret` (the same programs on
    /// the kernel's security_* functions, where bpf is not an active LSM: full
    /// coverage too) or `cgroup_device` (open-time only), with the reason; `other
    /// programs` lists BPF programs of other tools attached to the same kernel
    /// functions (the first refusal on a function wins). Exit status 7 when
    /// unprotected.
    Status(cli::ViewArgs),
    /// Write filter: enforce (enable), log and allow (audit) or off (disable) on one
    /// disk, or on all disks when no label is given (root only).
    ///
    /// `filter disable` without a label removes the BPF programs and their pins
    /// altogether; `filter enable` (or `audit`) without a label puts them back.
    /// Runtime choices last until the next reboot; the configuration's
    /// `filter.mode` is the default.
    Filter(cli::FilterArgs),
    /// Writes the filter denied (or, in audit mode, logged): pid, uid, command,
    /// executable, device, label, hook and operation.
    Events(cli::EventsArgs),
    /// Give the free ASM allocation units of disks back to a thin-provisioned array
    /// (root only).
    ///
    /// Reads each disk's ASM allocation table, turns the allocation units it
    /// positively says are free into byte ranges (never AU 0, 1, 11, metadata AUs,
    /// or anything it cannot parse), aligns them to the device's discard
    /// granularity and discards them (BLKDISCARD), or writes zeros (--method
    /// zeroout, for arrays that detect zeros but take no UNMAP). Refused while
    /// the disk group may be mounted: a process on this host holding a path of
    /// the disk open for writing, or the ASM heartbeat block or mount stamp
    /// changing during the watch window (another RAC node). Progress goes to
    /// stderr; Ctrl-C stops cleanly and a rerun completes the job.
    Reclaim(cli::ReclaimArgs),
    /// I/O per disk and operation: IOPS, MB/s, average device time, await (queue +
    /// device time per I/O) and the share of I/Os in Oracle's wait histogram buckets
    /// (<128µs <256µs <512µs <1ms <2ms <4ms <8ms <16ms <32ms <=1s >1s), from the
    /// daemon's latency histograms.
    Iostat(cli::IostatArgs),
    /// Read a disk or image offline and show its label, ASM disk header and signatures.
    Inspect(cli::InspectArgs),
    /// Print the udev rules for the configured owner, group and mode.
    UdevRules(cli::UdevRulesArgs),
    /// Print (or --write) the asmguard configuration an ASMLib, AFD or udev-rules
    /// setup means, key by key with the line each came from and what has no equivalent.
    Import(crate::import::ImportArgs),
    /// ASMLib's oracleasm commands (createdisk, deletedisk, renamedisk, querydisk,
    /// listdisks, scandisks, discover, status, configure) with its output lines and
    /// exit status; also run as `oracleasm` through a symlink of that name.
    Oracleasm(crate::oracleasm::OracleasmArgs),
    /// Print the man page (roff) to standard output.
    Man,
    /// Print shell completions to standard output.
    Completions(cli::CompletionsArgs),
}

/// The command line, with `--socket` and `--timeout` hidden from the help of the
/// subcommands that never talk to the daemon (`import`): the help, the man page
/// and the completions use this.
pub fn cli_command() -> clap::Command {
    Cli::command().mut_subcommand("import", |s| {
        s.arg(
            clap::Arg::new("socket")
                .long("socket")
                .hide(true)
                .value_parser(clap::value_parser!(std::path::PathBuf))
                .env("ASMGUARD_SOCKET")
                .default_value(asmguard_proto::DEFAULT_SOCKET),
        )
        .arg(
            clap::Arg::new("timeout")
                .long("timeout")
                .hide(true)
                .value_parser(clap::value_parser!(u64))
                .default_value("120"),
        )
    })
}

/// Parses the process's arguments with [`cli_command`].
pub fn parse_args() -> Cli {
    use clap::FromArgMatches;
    let m = cli_command().get_matches();
    Cli::from_arg_matches(&m).unwrap_or_else(|e| e.exit())
}

/// `paths`: the system's roots, built once in `main`.
pub fn run(c: &Cli, paths: &asmguard_paths::Paths) -> Result<(), CliError> {
    use asmguard_proto::{LabelArgs, RenameArgs, UnlabelArgs};
    match &c.command {
        Command::Inspect(a) => crate::inspect::run(a),
        Command::Label(a) => {
            let device = std::path::absolute(&a.device).unwrap_or_else(|_| a.device.clone());
            label_op(
                c,
                Op::Label(LabelArgs {
                    label: a.label.clone(),
                    device: device.display().to_string(),
                    force: a.force,
                    migrate: a.migrate,
                }),
                a.json,
            )
        }
        Command::Unlabel(a) => label_op(
            c,
            Op::Unlabel(UnlabelArgs {
                label: a.label.clone(),
                force: a.force,
            }),
            a.json,
        ),
        Command::Rename(a) => label_op(
            c,
            Op::Rename(RenameArgs {
                old: a.old.clone(),
                new: a.new.clone(),
            }),
            a.json,
        ),
        Command::Lsdsk(a) if a.afd => {
            crate::oracleasm::afd_lsdsk(&c.global.socket, c.global.timeout)
        }
        Command::Status(a) if a.afd => {
            crate::oracleasm::afd_state(&c.global.socket, c.global.timeout, paths)
        }
        Command::Lsdsk(a) => list(c, Op::Lsdsk, a.json),
        Command::Scan(a) => list(c, Op::Scan, a.json),
        Command::Status(a) => status(c, a.json),
        Command::Filter(a) => filter(c, a),
        Command::Events(a) => events(c, a),
        Command::Reclaim(a) => crate::reclaim::run(&c.global, a),
        Command::Iostat(a) => crate::iostat::run(&c.global, a),
        Command::Import(a) => crate::import::run_on(a, paths),
        Command::Oracleasm(a) => crate::oracleasm::run(&c.global, a, paths),
        Command::UdevRules(a) => {
            let (cfg, _) = asmguard_config::load(a.config.as_deref())
                .map_err(|e| CliError::new(BAD_INPUT, e))?;
            out!("{}", asmguard_config::udev_rules(&cfg, paths));
            Ok(())
        }
        Command::Man => {
            let mut out = Vec::new();
            clap_mangen::Man::new(cli_command())
                .section("8")
                .render(&mut out)
                .map_err(|e| CliError::new(FAILED, e.to_string()))?;
            // Each subcommand's own section, so the one page says everything.
            let cmd = cli_command();
            for sub in cmd.get_subcommands() {
                let name = sub.get_name().to_string();
                if name == "help" {
                    continue;
                }
                out.extend_from_slice(
                    format!(".SH \"ASMGUARDCTL {}\"\n", name.to_uppercase()).as_bytes(),
                );
                let sub = sub.clone().bin_name(format!("asmguardctl {name}"));
                let m = clap_mangen::Man::new(sub);
                m.render_description_section(&mut out)
                    .map_err(|e| CliError::new(FAILED, e.to_string()))?;
                m.render_synopsis_section(&mut out)
                    .map_err(|e| CliError::new(FAILED, e.to_string()))?;
                m.render_options_section(&mut out)
                    .map_err(|e| CliError::new(FAILED, e.to_string()))?;
            }
            crate::out::stdout_bytes(&out);
            Ok(())
        }
        Command::Completions(a) => {
            let mut cmd = cli_command();
            let mut out = Vec::new();
            clap_complete::generate(a.shell, &mut cmd, "asmguardctl", &mut out);
            crate::out::stdout_bytes(&out);
            Ok(())
        }
    }
}

/// `status`'s pins line from its `filter_pins` word.
fn pins_text(p: Pins) -> String {
    match p {
        Pins::Guarded => "guarded (no other task may get the filter's maps, programs or links \
                      by id, write its maps or detach it)"
            .into(),
        Pins::Watched => "watched, not guarded (every 2 s the daemon compares each pin and \
                      map with what it wrote and puts back what another process changed)"
            .into(),
        Pins::None => "none (no filter)".into(),
    }
}

/// `status`'s exclusive claims' keeping.
fn claims_kept_text(k: ClaimsKept) -> &'static str {
    match k {
        ClaimsKept::FdStore => "systemd fd store",
        ClaimsKept::OnStart => "none (no NOTIFY_SOCKET: re-taken on start)",
    }
}

/// `status`'s reclaim fence line: the fenced disks and what the fence
/// refuses.
fn fence_text(f: &ReclaimFence) -> String {
    let Some(what) = f.refuses.filter(|_| !f.disks.is_empty()) else {
        return "none (no reclaim runs)".into();
    };
    let what = match what {
        FenceRefuses::AllWrites => {
            "every write-open, write, write-class ioctl and shared-writable mapping by any \
             process but asmguardd, allow rules included"
        }
        FenceRefuses::OpensButDaemon => {
            "write-opens by any process but asmguardd, allow rules included (cgroup-device \
             fallback: only opens are seen; a file opened for writing before the fence \
             still writes)"
        }
        FenceRefuses::OpensNotAllowed => {
            "write-opens by processes no allow rule names (cgroup-device fallback judging \
             by ids: asmguardd cannot be told from an allowed user, and a file opened for \
             writing before the fence still writes)"
        }
        FenceRefuses::Nothing => "nothing: no filter is loaded (other writers are not held off)",
    };
    format!("{}: a reclaim runs; refused: {what}", f.disks.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fence line names the fenced disks and what the backend refuses:
    /// all write-class operations in full, opens only under the fallback.
    #[test]
    fn fence_line_says_what_the_fence_covers() {
        let f = |refuses| ReclaimFence {
            disks: vec!["DATA1".into()],
            refuses: Some(refuses),
        };
        assert_eq!(
            fence_text(&ReclaimFence::default()),
            "none (no reclaim runs)"
        );
        let t = fence_text(&f(FenceRefuses::AllWrites));
        assert!(t.starts_with("DATA1: a reclaim runs"), "{t}");
        assert!(t.contains("write-class ioctl") && t.contains("allow rules included"));
        let t = fence_text(&f(FenceRefuses::OpensButDaemon));
        assert!(
            t.contains("only opens are seen") && !t.contains("ioctl"),
            "{t}"
        );
        let t = fence_text(&f(FenceRefuses::OpensNotAllowed));
        assert!(t.contains("no allow rule names"), "{t}");
        assert!(fence_text(&f(FenceRefuses::Nothing)).contains("nothing"));
    }

    /// A `status` answer with `extra`'s fields over a minimal one.
    fn status_with(extra: serde_json::Value) -> StatusResult {
        let mut v = serde_json::json!({"daemon_version":"0.1.0","protocol_version":1,
            "pid":1,"uptime_seconds":2,"kernel":"6.12.0",
            "bpf_lsm":{"active":true,"lsm":["capability","bpf"]},
            "filter_backend":"lsm","default_filter_mode":"enforce","disks":1,
            "conflicts":0,"devices_scanned":3,"socket":"s",
            "config":"c","events":{"source":"udev"},"last_scan_ms":4,"protection":"protected"});
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        serde_json::from_value(v).unwrap()
    }

    /// The text of one row of `status`.
    fn row(s: StatusResult, key: &str) -> String {
        let rows = status_rows(s);
        let r = rows.iter().find(|(k, _)| *k == key);
        r.unwrap_or_else(|| panic!("no row {key}: {rows:?}"))
            .1
            .clone()
    }

    /// `filter_coverage` and `filter_passthrough` are words on the wire; the
    /// `filter backend` and `sg_io / nvme` rows say them as they always did.
    #[test]
    fn coverage_and_passthrough_rows_from_their_words() {
        use serde_json::json;
        let s = |backend, cover, pt| {
            status_with(json!({"filter_backend":backend,"filter_coverage":cover,
                "filter_passthrough":pt,
                "filter_reason":{"none":{"why":"load_failed","error":"why"}}}))
        };
        let t = |backend, cover, pt| {
            let st = s(backend, cover, pt);
            (row(st.clone(), "filter backend"), row(st, "sg_io / nvme"))
        };
        let (b, p) = t("lsm", "full", json!("by_class"));
        assert_eq!(b, "lsm (full)");
        assert!(p.starts_with("by command class (read-class"), "{p}");
        let (b, p) = t("cgroup_device", "open_time_only", json!("open_only"));
        assert_eq!(b, "cgroup_device (degraded: open-time only)");
        assert!(p.starts_with("not filtered (cgroup-device fallback"), "{p}");
        let (_, p) = t("fmod_ret", "full", json!("by_class_in_memory"));
        assert!(p.contains("read without faulting"), "{p}");
        let (_, p) = t("lsm", "full", json!("all_or_nothing"));
        assert!(
            p.starts_with("all-or-nothing (the kernel cannot read"),
            "{p}"
        );
        let (b, p) = t("none", "unprotected", json!(null));
        assert_eq!(
            (b.as_str(), p.as_str()),
            ("none (no filter: why)", "not filtered (no filter)")
        );
        let (b, _) = t("none", "disabled", json!(null));
        assert_eq!(b, "none (no filter: why)");
    }

    /// `events` is the source; the row says it as the daemon's words did.
    #[test]
    fn events_row_from_its_source() {
        use serde_json::json;
        let r = |e| row(status_with(json!({ "events": e })), "events");
        assert_eq!(r(json!({"source":"udev"})), "udev");
        assert_eq!(r(json!({"source":"kernel"})), "kernel uevents (no udevd)");
        assert_eq!(
            r(json!({"source":"kernel","udev_failed":"EACCES"})),
            "kernel uevents (udevd runs, but its monitor failed: EACCES)"
        );
        assert_eq!(
            r(json!({"source":"none","reason":"EPERM"})),
            "none (EPERM): run `asmguardctl scan` after device changes"
        );
        // the hint is the argument; the sentence names it and both tools
        let h = status_with(json!({"bpf_lsm_hint":{"lsm_param":"lsm=yama,bpf"}}))
            .bpf_lsm_hint
            .unwrap()
            .to_string();
        assert!(
            h.starts_with(
                "this kernel has the BPF LSM but it is not active: boot with lsm=yama,bpf "
            ) && h.contains("grubby --update-kernel=ALL --args=\"lsm=yama,bpf\"")
                && h.contains("GRUB_CMDLINE_LINUX"),
            "{h}"
        );
        assert_eq!(status_with(json!({})).bpf_lsm_hint, None);
    }

    /// `metrics` is the endpoint's and the tracer's state; the row says them
    /// as the daemon's sentence did.
    #[test]
    fn metrics_row_from_its_state() {
        use serde_json::json;
        let r = |m| row(status_with(json!({ "metrics": m })), "metrics");
        let at = "http://127.0.0.1:9465/metrics";
        let on = json!({"state":"attached","attach":"tp_btf","stamps":{"by":"own","reason":"r"}});
        assert_eq!(
            r(json!({"address":at,"state":"serving","tracer":on})),
            format!("{at} (serving) (latency: block tracepoints (tp_btf, own stamps (r)))")
        );
        assert_eq!(
            r(json!({"address":at,"state":"failing","error":"EMFILE","tracer":on})),
            format!("{at} (failing: EMFILE; retrying) (latency: block tracepoints (tp_btf, own stamps (r)))")
        );
        let kernel = "kernel stamps (QUEUE_FLAG_STATS = 20 from the table for Linux 5.4-6.11, \
                      not verified: no probe read reached a queue with stats)";
        let k = json!({"state":"attached","attach":"raw_tp","stamps":{"by":"kernel","stats_bit":20,
            "bit_from":{"from":"table","lines":"5.4-6.11"}}});
        assert_eq!(
            r(json!({"address":at,"state":"serving","tracer":k})),
            format!("{at} (serving) (latency: block tracepoints (raw_tp, {kernel}))")
        );
        let off = json!({"state":"off","reason":"no BTF"});
        assert_eq!(
            r(
                json!({"address":"1.2.3.4:1","state":"not_served","error":"EADDRINUSE","tracer":off})
            ),
            "1.2.3.4:1 (not served: EADDRINUSE) (latency: off (no BTF))"
        );
        assert_eq!(
            r(json!({"state":"not_yet","tracer":off})),
            "not served yet (latency: off (no BTF))"
        );
    }

    /// `bpf_lsm` is whether and the list; the row says it as it did.
    #[test]
    fn bpf_lsm_row_from_its_facts() {
        let t = |v| row(status_with(serde_json::json!({ "bpf_lsm": v })), "bpf lsm");
        let lsm = ["lockdown", "capability", "bpf"];
        assert_eq!(
            t(serde_json::json!({"active":true,"lsm":lsm})),
            "yes (lsm=lockdown,capability,bpf)"
        );
        assert_eq!(
            t(serde_json::json!({"active":false,"lsm":["capability"]})),
            "no (lsm=capability)"
        );
        assert_eq!(
            t(serde_json::json!({"active":null})),
            "unknown (securityfs not mounted)"
        );
    }

    /// `filter_programs` and `filter_other_programs` are names, ids and
    /// hooks; the rows say them as they did (`NAME (id N) on HOOK`).
    #[test]
    fn program_rows_from_their_facts() {
        use serde_json::json;
        let st = status_with(json!({
            "filter_programs":[{"name":"ag_file_open","id":5,"hook":"file_open"},
                               {"name":"ag_file_permission","id":6,"hook":"file_permission"}],
            "filter_other_programs":[{"name":"other","id":7,"hook":"file_open"},
                                     {"name":"old","id":8,"hook":null}]}));
        let f = row(st.clone(), "filter");
        assert!(
            f.contains("; programs: ag_file_open, ag_file_permission;"),
            "{f}"
        );
        assert_eq!(
            row(st, "other programs"),
            "other (id 7) on file_open, old (id 8) on a security function (this kernel \
             does not say which) (the first refusal on a function wins)"
        );
        let none = status_with(json!({}));
        assert!(row(none.clone(), "filter").contains("programs: none;"));
        assert_eq!(
            row(none, "other programs"),
            "none on the filter's kernel functions"
        );
    }

    /// `allow_rules`, `allow_notes` and `oracle_homes` are facts; the rows say
    /// them as they did.
    #[test]
    fn rule_rows_from_their_facts() {
        use serde_json::json;
        let st = status_with(json!({
            "allow_rules":[{"kind":"users","users":["grid","oracle"]},
                           {"kind":"groups","groups":["asmadmin"]},
                           {"kind":"executable","path":"/bin/x"},
                           {"kind":"rule","name":"ohasd","users":["grid"],"groups":["dba"],
                            "executables":["/u01/bin/ohasd.bin"],"units":["oracle-ohasd.service"],"cgroups":[]},
                           {"kind":"oracle_homes","uid":54331,"executables":["/u01/bin/oracle","/u01/bin/ocssd.bin"]},
                           {"kind":"daemon"}],
            "allow_notes":[{"kind":"rule_users_alone","rule":"a"},
                           {"kind":"unresolved","problem":"rule c: no user x"}],
            "oracle_homes":[{"kind":"grid","path":"/u01","binaries":[
                {"path":"/u01/bin/oracle","uid":54331},{"path":"/u01/bin/crsd.bin","uid":0}]},
                {"kind":"database","path":"/u02","binaries":[]}],
            "oracle_retired":[{"path":"/u03/bin/oracle","uid":54321}]}));
        assert_eq!(
            row(st.clone(), "who may write"),
            "any process of user grid, oracle; any process in group asmadmin; any process \
             running /bin/x; rule ohasd: user grid or group dba AND executable \
             /u01/bin/ohasd.bin AND unit oracle-ohasd.service; oracle homes: uid 54331 AND \
             executable /u01/bin/oracle, /u01/bin/ocssd.bin; the daemon's own process (label \
             and reclaim writes)"
        );
        assert_eq!(
            row(st.clone(), "rule notes"),
            "rule a: users and groups alone: any process of them may write, rule c: no user x"
        );
        assert_eq!(
            row(st, "oracle homes"),
            "grid home /u01: oracle (uid 54331), crsd.bin (uid 0), database home /u02: no \
             binary allowed, replaced but still running (allowed until its processes exit): \
             /u03/bin/oracle (uid 54321)"
        );
        let none = status_with(json!({}));
        assert_eq!(row(none.clone(), "who may write"), "nobody (no rule)");
        assert_eq!(row(none.clone(), "rule notes"), "none");
        assert_eq!(row(none, "oracle homes"), "none found");
    }

    /// `restart_needed` is the key and both values; the row says them as it did.
    #[test]
    fn restart_row_from_its_facts() {
        let st = status_with(serde_json::json!({"restart_needed":[
            {"key":"metrics.listen","in_force":"\"127.0.0.1:9465\"","in_file":"\"0.0.0.0:9465\""},
            {"key":"filter.mode","in_force":"Enforce","in_file":"Audit"}]}));
        assert_eq!(
            row(st, "restart needed"),
            "changed in the file, in force at the next start: metrics.listen = \
             \"127.0.0.1:9465\" -> \"0.0.0.0:9465\"; filter.mode = Enforce -> Audit"
        );
        let rows = status_rows(status_with(serde_json::json!({})));
        assert!(
            !rows.iter().any(|(k, _)| *k == "restart needed"),
            "{rows:?}"
        );
    }

    /// `claims_slow` is the disks, the time and whether all were taken; the
    /// `exclusive claims` row says it as a sentence, and nothing when absent.
    #[test]
    fn slow_claims_row_from_its_facts() {
        use serde_json::json;
        let t = |slow| {
            row(
                status_with(
                    json!({"claims":[{"label":"DATA1","major":253,"minor":2}],"claims_slow":slow}),
                ),
                "exclusive claims",
            )
        };
        let d = |label, major, minor| json!({"label":label,"major":major,"minor":minor});
        let r = t(json!({"disks":[d("DATA1",253,2),d("DATA2",8,16)],"ms":600,"all_taken":true}));
        assert!(
            r.ends_with(
                "; last slow: the exclusive claim of DATA1 253:2, DATA2 8:16 took 600 ms to take"
            ),
            "{r}"
        );
        let r = t(json!({"disks":[d("DATA1",253,2)],"ms":5000,"all_taken":false}));
        assert!(r.ends_with("took 5000 ms: not all taken"), "{r}");
        assert!(!t(json!(null)).contains("last slow"));
    }

    /// `exposed`, `writers_before` and `loops_before` are facts; the rows
    /// say them as the sentences they were, and an exposure exits with 7.
    #[test]
    fn rows_of_what_predates_protection() {
        use serde_json::json;
        let o = |pid, comm, fd| {
            json!({"label":"DATA1","pid":pid,"comm":comm,"fd":fd,
            "path":"/dev/sdb","device":"8:16"})
        };
        let s = status_with(json!({
            "exposed":[o(12, "dd", 3)],
            "writers_before":[o(13, "sh", 5)],
            "loops_before":[{"label":"DATA1","name":"loop0","device":"7:0",
                             "backing":"/dev/sdb","read_only":true}]}));
        assert_eq!(
            row(s.clone(), "exposed"),
            "DATA1 mapped shared-writable by pid 12 (dd) since before protection"
        );
        assert_eq!(
            row(s.clone(), "writer"),
            "DATA1 writer open since before protection: pid 13 (sh) fd 5 on /dev/sdb \
             (its writes are refused)"
        );
        assert_eq!(
            row(s.clone(), "loop"),
            "loop0 over DATA1 (backing file /dev/sdb, read-only), set up before \
             protection: its writes are judged as the disk's"
        );
        let e = unprotected(&s).unwrap_err();
        assert!(
            format!("{e:?}").contains("exposed: DATA1 mapped shared-writable by pid 12 (dd)"),
            "{e:?}"
        );
    }

    #[test]
    fn import_help_offers_no_daemon_options_and_the_others_keep_them() {
        cli_command().debug_assert();
        let help = |name: &str| {
            let mut c = cli_command();
            c.build();
            c.find_subcommand_mut(name)
                .unwrap()
                .render_long_help()
                .to_string()
        };
        let (imp, ls) = (help("import"), help("lsdsk"));
        assert!(
            !imp.contains("--socket") && !imp.contains("--timeout"),
            "{imp}"
        );
        assert!(imp.contains("--allow-unprotected"), "{imp}");
        assert!(ls.contains("--socket") && ls.contains("--timeout"), "{ls}");
        // still parsed where given (an old script's habit), and ignored
        let c = cli_command().try_get_matches_from([
            "asmguardctl",
            "import",
            "udev",
            "f",
            "--socket",
            "/x",
        ]);
        assert!(c.is_ok(), "{c:?}");
        let m = cli_command()
            .try_get_matches_from(["asmguardctl", "--timeout", "7", "lsdsk"])
            .unwrap();
        use clap::FromArgMatches;
        assert_eq!(Cli::from_arg_matches(&m).unwrap().global.timeout, 7);
    }

    /// The Filtering sentence for every (scope, backend, mode) the daemon
    /// sends (its words are pinned in the daemon's filter service tests),
    /// written out: what a DBA reads, not recomputed.
    #[test]
    fn the_filtering_sentence_of_every_scope_and_mode() {
        use FilterScope::*;
        let rows: [(FilterScope, &str, &str, &str); 15] = [
            (Full, "lsm", "enforce", "enforce (lsm)"),
            (Full, "lsm", "audit", "audit (lsm)"),
            (Full, "lsm", "off", "off"),
            (Full, "fmod_ret", "enforce", "enforce (fmod_ret)"),
            (Full, "fmod_ret", "audit", "audit (fmod_ret)"),
            (Full, "fmod_ret", "off", "off"),
            (
                OpenTimeOnly,
                "cgroup_device",
                "enforce",
                "enforce (cgroup_device, open-time only)",
            ),
            (
                OpenTimeOnly,
                "cgroup_device",
                "audit",
                "audit (cgroup_device, open-time only)",
            ),
            (OpenTimeOnly, "cgroup_device", "off", "off"),
            (Disabled, "none", "off", "off (filter disabled)"),
            (Disabled, "none", "enforce", "off (filter disabled)"),
            (
                Unprotected,
                "none",
                "UNPROTECTED",
                "UNPROTECTED (no filter backend)",
            ),
            (
                Unprotected,
                "none",
                "enforce",
                "UNPROTECTED (no filter backend)",
            ),
            (NoFilter, "none", "off", "off (no filter)"),
            (NoFilter, "", "", "off (no filter)"),
        ];
        for (scope, backend, mode, want) in rows {
            assert_eq!(
                sentence(scope, mode, backend),
                want,
                "{scope:?} {backend} {mode}"
            );
        }
    }

    /// Each thing the daemon noticed has its own line, from its facts (the
    /// labs grep these words: LOOP BEFORE PROTECTION, PIN REPLACED,
    /// EXPOSED, EXPOSURE ENDED).
    #[test]
    fn event_lines_of_what_the_daemon_noticed() {
        let lo = asmguard_proto::LoopBefore {
            label: "LBDISK".into(),
            name: "loop3".into(),
            device: asmguard_proto::KernelDev::new(7, 3).unwrap(),
            backing: "/dev/sdb".into(),
            read_only: false,
        };
        let ev = |noticed| asmguard_proto::FilterEventInfo {
            seq: 1,
            time_ms: 3_723_000,
            denial: serde_json::from_value(serde_json::json!({
                "pid": 42, "uid": 0, "euid": 0, "egid": 0, "comm": "dd", "exe": "",
                "device": "8:16", "device_type": "block", "hook": "mmap_file",
                "op": 3, "mode": "audit"
            }))
            .unwrap(),
            label: "EXDISK".into(),
            container: String::new(),
            noticed,
        };
        assert_eq!(
            event_text(&ev(Some(Noticed::LoopBefore { device: lo.clone() }))),
            "01:02:03Z LOOP BEFORE PROTECTION: loop3 over LBDISK (backing file /dev/sdb), \
             set up before protection: its writes are judged as the disk's"
        );
        assert!(event_text(&ev(Some(Noticed::LoopGone { device: lo })))
            .starts_with("01:02:03Z LOOP NO LONGER NAMED: loop3 over LBDISK"));
        assert_eq!(
            event_text(&ev(Some(Noticed::PinReplaced(
                asmguard_proto::ReplacedPin {
                    pin: "ag_file_open".into(),
                    found: asmguard_proto::PinFound::OtherProgramType { program: 12 },
                }
            )))),
            "01:02:03Z PIN REPLACED ag_file_open: program id 12 is of another type or hook"
        );
        assert_eq!(
            event_text(&ev(Some(Noticed::Exposed))),
            "01:02:03Z EXPOSED label=EXDISK device=b8:16 pid=42 comm=dd exe=? \
             mmap-shared-write made before protection"
        );
        assert!(
            event_text(&ev(Some(Noticed::ExposureEnded))).contains("EXPOSURE ENDED label=EXDISK")
        );
        assert_eq!(
            event_text(&ev(None)),
            "01:02:03Z AUDITED mmap-shared-write label=EXDISK device=b8:16 pid=42 uid=0 \
             egid=0 comm=dd exe=? hook=mmap_file"
        );
    }
}
