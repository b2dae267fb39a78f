//! A denial (or audited operation) as the daemon keeps it: the kernel's
//! record becomes the protocol's [`FilterEventInfo`] once, when it is read
//! ([`received`]), with its sequence number, time, label and container; the
//! daemon's own notes are built in that shape too ([`noted`]); each becomes
//! one journal line ([`log_event`]). The history, `events` and the journal
//! read that one value.

use asmguard_guard::{Denial, DeviceType, Hook, KernelDev, Mode, Operation};
use asmguard_proto::{FilterEventInfo, Noticed};
use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the epoch now (0 before it).
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The kernel's record `denial`, numbered `seq`, about the disk `label` (empty
/// when the device left the managed set meanwhile), its task in the
/// configured `container` (empty: none).
pub fn received(denial: Denial, seq: u64, label: String, container: String) -> FilterEventInfo {
    FilterEventInfo {
        seq,
        time_ms: now_ms(),
        denial,
        label,
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
        denial: Denial {
            pid: n.pid,
            uid: 0,
            euid: 0,
            egid: 0,
            comm: n.comm.into(),
            exe: n.exe,
            device: n.device,
            device_type: DeviceType::Block,
            operation: Operation {
                hook: n.hook,
                code: 0,
                command: None,
            },
            mode: n.mode,
            ts_ns: 0,
            tid: 0,
            fsuid: 0,
            exe_dev: KernelDev::default(),
            exe_ino: 0,
            disk_id: 0,
            ctr_id: 0,
        },
        label: n.label.into(),
        container: String::new(),
        noticed: Some(n.noticed),
    }
}

/// One journal line per denial (or audited operation) the kernel reported.
pub fn log_event(e: &FilterEventInfo) {
    tracing::warn!("{}", journal_line(e));
}

/// The journal's line of `e`.
fn journal_line(e: &FilterEventInfo) -> String {
    let d = &e.denial;
    let verb = match d.mode {
        Mode::Enforce => "write denied",
        Mode::Fenced => "write denied by the reclaim's fence (a reclaim runs on the disk)",
        _ => "write audited (allowed)",
    };
    format!(
        "{verb}: pid={} uid={} euid={} egid={} comm={:?} exe={:?} device={}{} label={} hook={} operation={}{}",
        d.pid,
        d.uid,
        d.euid,
        d.egid,
        d.comm,
        if d.exe.is_empty() { "?" } else { &d.exe },
        d.device_kind(),
        d.device,
        if e.label.is_empty() { "?" } else { &e.label },
        d.hook(),
        d.operation,
        if e.container.is_empty() {
            String::new()
        } else {
            format!(" container={}", e.container)
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel's record becomes the event the wire carries, and its
    /// journal line reads as it always has.
    #[test]
    fn a_denial_keeps_its_journal_line() {
        let denial = Denial {
            pid: 42,
            uid: 1000,
            euid: 1001,
            egid: 1003,
            comm: "sg_raw".into(),
            exe: "/usr/bin/sg_raw".into(),
            device: KernelDev::new(21, 1).unwrap(),
            device_type: DeviceType::Char,
            operation: Operation {
                hook: Hook::FileIoctl,
                code: 0x2285,
                command: Some(asmguard_guard::Command {
                    opcode: 0x2a,
                    service_action: 0,
                }),
            },
            mode: Mode::Enforce,
            ts_ns: 1,
            tid: 43,
            fsuid: 1002,
            exe_dev: KernelDev::default(),
            exe_ino: 0,
            disk_id: 5,
            ctr_id: 0,
        };
        let e = received(denial.clone(), 7, "DATA1".into(), "rac1".into());
        assert_eq!((e.seq, &e.denial), (7, &denial));
        assert_eq!(
            journal_line(&e),
            "write denied: pid=42 uid=1000 euid=1001 egid=1003 comm=\"sg_raw\" \
             exe=\"/usr/bin/sg_raw\" device=c21:1 label=DATA1 hook=file_ioctl \
             operation=SG_IO opcode 0x2a container=rac1"
        );
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["device"], "21:1");
        assert_eq!(v["device_type"], "char");
        assert_eq!(v["operation"], "SG_IO opcode 0x2a");
        assert_eq!(v["hook"], "file_ioctl");
        assert_eq!(v["mode"], "enforce");
    }
}
