//! A denial (or audited operation) as the daemon keeps it: the kernel's
//! record becomes the protocol's [`FilterEventInfo`] once, when it is read
//! ([`received`]), with its sequence number, time, label and container; the
//! daemon's own notes are built in that shape too ([`noted`]); each becomes
//! one journal line ([`log_event`]). The history, `events` and the journal
//! read that one value.

use asmguard_guard::{DenialEvent, Hook, HookOperation, KernelDev, Mode};
use asmguard_proto::{DeviceType, FilterEventInfo, Noticed};
use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the epoch now (0 before it).
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The kernel's record `ev`, numbered `seq`, about the disk `label` (empty
/// when the device left the managed set meanwhile), its task in the
/// configured `container` (empty: none).
pub fn received(ev: &DenialEvent, seq: u64, label: String, container: String) -> FilterEventInfo {
    FilterEventInfo {
        seq,
        time_ms: now_ms(),
        pid: ev.pid,
        uid: ev.uid,
        euid: ev.euid,
        egid: ev.egid,
        comm: ev.comm.clone(),
        exe: ev.exe.clone(),
        device: ev.dev.dev.to_string(),
        device_type: if ev.dev.chr {
            DeviceType::Char
        } else {
            DeviceType::Block
        },
        label,
        hook: ev.hook,
        operation: ev.operation(),
        mode: ev.mode,
        container,
        noticed: None,
    }
}

/// What the daemon noticed itself rather than the kernel refused: `noticed`
/// (an exposure, a loop device, a replaced pin) about process `pid`
/// (`comm`, `exe`) and block device `device` of `label` (empty and 0:0 for
/// one about the daemon itself), seen at `hook`.
pub struct Noted<'a> {
    pub label: &'a str,
    pub pid: u32,
    pub comm: &'a str,
    pub exe: String,
    pub device: KernelDev,
    pub hook: Hook,
    pub mode: Mode,
    pub noticed: Noticed,
}

/// [`Noted`] as an event numbered `seq`.
pub fn noted(n: Noted<'_>, seq: u64) -> FilterEventInfo {
    FilterEventInfo {
        seq,
        time_ms: now_ms(),
        pid: n.pid,
        uid: 0,
        euid: 0,
        egid: 0,
        comm: n.comm.into(),
        exe: n.exe,
        device: n.device.to_string(),
        device_type: DeviceType::Block,
        label: n.label.into(),
        hook: n.hook,
        operation: n.hook.operation(0),
        mode: n.mode,
        container: String::new(),
        noticed: Some(n.noticed),
    }
}

/// One journal line per denial (or audited operation) the kernel reported.
pub fn log_event(e: &FilterEventInfo) {
    let verb = match e.mode {
        Mode::Enforce => "write denied",
        Mode::Fenced => "write denied by the reclaim's fence (a reclaim runs on the disk)",
        _ => "write audited (allowed)",
    };
    tracing::warn!(
        "{verb}: pid={} uid={} euid={} egid={} comm={:?} exe={:?} device={}{} label={} hook={} operation={}{}",
        e.pid,
        e.uid,
        e.euid,
        e.egid,
        e.comm,
        if e.exe.is_empty() { "?" } else { &e.exe },
        if e.device_type == DeviceType::Char {
            "c"
        } else {
            "b"
        },
        e.device,
        if e.label.is_empty() { "?" } else { &e.label },
        e.hook,
        e.operation,
        if e.container.is_empty() {
            String::new()
        } else {
            format!(" container={}", e.container)
        }
    );
}
