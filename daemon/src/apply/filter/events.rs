//! A denial (or audited operation) as the daemon keeps it: the kernel's
//! record with its label, sequence number and time ([`FilterEvent`]), the one
//! journal line it becomes ([`log_event`]) and its protocol view ([`info`]).

use asmguard_guard::{DenialEvent, Mode};
use asmguard_proto::FilterEventInfo;

/// A denial (or audited operation) with the label it concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterEvent {
    /// Sequence number (1, 2, ... for the daemon's life): `events --follow`
    /// asks for the events after the last one it printed.
    pub seq: u64,
    /// Wall-clock time the daemon received it (ms since the epoch).
    pub time_ms: u64,
    /// The label of the disk (empty when the device left the managed set meanwhile).
    pub label: String,
    /// The configured container the task was in (empty: none).
    pub container: String,
    /// The kernel's record.
    pub event: DenialEvent,
    /// Set on an event the daemon noticed itself (`exposed`, `exposure
    /// ended`): `event` then holds the process and device only.
    pub note: String,
}

/// One journal line per denial (or audited operation).
pub fn log_event(e: &FilterEvent) {
    let ev = &e.event;
    let verb = match ev.mode {
        Mode::Enforce => "write denied",
        Mode::Fenced => "write denied by the reclaim's fence (a reclaim runs on the disk)",
        _ => "write audited (allowed)",
    };
    tracing::warn!(
        "{verb}: pid={} uid={} euid={} egid={} comm={:?} exe={:?} device={} label={} hook={} operation={}{}",
        ev.pid,
        ev.uid,
        ev.euid,
        ev.egid,
        ev.comm,
        if ev.exe.is_empty() { "?" } else { &ev.exe },
        ev.dev,
        if e.label.is_empty() { "?" } else { &e.label },
        ev.hook,
        ev.operation(),
        if e.container.is_empty() {
            String::new()
        } else {
            format!(" container={}", e.container)
        }
    );
}

/// The protocol's view of an event.
pub fn info(e: &FilterEvent) -> FilterEventInfo {
    let ev = &e.event;
    FilterEventInfo {
        seq: e.seq,
        time_ms: e.time_ms,
        pid: ev.pid,
        uid: ev.uid,
        euid: ev.euid,
        egid: ev.egid,
        comm: ev.comm.clone(),
        exe: ev.exe.clone(),
        device: ev.dev.dev.to_string(),
        device_type: if ev.dev.chr { "char" } else { "block" }.into(),
        label: e.label.clone(),
        hook: ev.hook,
        operation: ev.operation(),
        mode: ev.mode,
        container: e.container.clone(),
        note: e.note.clone(),
    }
}
