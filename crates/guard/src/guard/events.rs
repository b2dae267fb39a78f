//! Decoding the filter's records: an `ag_event` (bpf/guard.h) into the one
//! [`Denial`] shape the daemon and the protocol carry
//! (`asmguard_filter_types::denial`).
//!
//! Not here: reading the ring buffer ([`super::ring`]), labels (the daemon's
//! `filter` module).

use super::abi::{AgEvent, EV_CHR, EV_CMD};
use super::hooks::Hook;
use super::types::Mode;
use crate::KernelDev;
use asmguard_filter_types::denial::{Command, Denial, DeviceType, Operation};

/// Decodes a `struct ag_event` record (bpf/guard.h); `None` if short.
pub fn decode(b: &[u8]) -> Option<Denial> {
    AgEvent::read(b).map(denial)
}

/// The record's fields, decoded: device numbers, hook and mode codes,
/// the passthrough command in `flags`, `comm` up to its NUL (the
/// executable's path is the reader's to add).
pub fn denial(e: AgEvent) -> Denial {
    let end = e.comm.iter().position(|&c| c == 0).unwrap_or(e.comm.len());
    Denial {
        pid: e.pid,
        uid: e.uid,
        euid: e.euid,
        egid: e.egid,
        comm: String::from_utf8_lossy(&e.comm[..end]).into_owned(),
        exe: String::new(),
        device: KernelDev::from_raw(e.dev),
        device_type: if e.flags & EV_CHR != 0 {
            DeviceType::Char
        } else {
            DeviceType::Block
        },
        operation: Operation {
            hook: Hook::from_code(e.hook),
            code: e.op,
            command: (e.flags & EV_CMD != 0).then_some(Command {
                opcode: (e.flags >> 8) as u8,
                service_action: (e.flags >> 16) as u8,
            }),
        },
        mode: Mode::from_code(e.mode),
        ts_ns: e.ts_ns,
        tid: e.tid,
        fsuid: e.fsuid,
        exe_dev: KernelDev::from_raw(e.exe_dev),
        exe_ino: e.exe_ino,
        disk_id: e.disk_id,
        ctr_id: e.ctr_id,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guard::abi::EVENT_SIZE;
    use crate::guard::types::ExeId;

    #[test]
    fn event_decoding_follows_the_c_layout() {
        let (at, size) = crate::guard::abi::btf_layout("ag_event");
        assert_eq!(size, EVENT_SIZE, "struct ag_event size");
        let mut b = vec![0u8; size];
        let mut put = |name: &str, v: u32| {
            let o = at[name];
            b[o..o + 4].copy_from_slice(&v.to_ne_bytes());
        };
        put("exe_dev", (8 << 20) | 1);
        put("pid", 42);
        put("tid", 43);
        put("uid", 1000);
        put("euid", 1001);
        put("fsuid", 1002);
        put("egid", 1003);
        put("dev", (7 << 20) | 3);
        put("disk_id", 5);
        put("hook", 3);
        put("op", 0x1277);
        put("mode", 2);
        put("flags", 1);
        let o = at["exe_ino"];
        b[o..o + 8].copy_from_slice(&1234u64.to_ne_bytes());
        let o = at["ts_ns"];
        b[o..o + 8].copy_from_slice(&99u64.to_ne_bytes());
        let o = at["comm"];
        b[o..o + 2].copy_from_slice(b"dd");
        let e = decode(&b).unwrap();
        assert_eq!(e.ts_ns, 99);
        assert_eq!((e.pid, e.tid), (42, 43));
        assert_eq!((e.uid, e.euid, e.fsuid, e.egid), (1000, 1001, 1002, 1003));
        assert_eq!(e.device.to_string(), "7:3");
        assert_eq!(e.device_type, DeviceType::Char);
        assert_eq!(e.disk_id, 5);
        assert_eq!(e.hook(), Hook::FileIoctl);
        assert_eq!(e.operation.to_string(), "BLKDISCARD");
        assert_eq!(e.mode, Mode::Enforce);
        assert_eq!(e.comm, "dd");
        assert_eq!(e.exe_ino, 1234);
        assert_eq!(e.exe_dev.to_string(), "8:1");
        assert!(decode(&b[..size - 1]).is_none());
        // An SG_IO whose CDB the filter read: WRITE(10).
        let o = at["op"];
        b[o..o + 4].copy_from_slice(&0x2285u32.to_ne_bytes());
        let o = at["flags"];
        b[o..o + 4].copy_from_slice(&(EV_CMD | 0x2a << 8).to_ne_bytes());
        let e = decode(&b).unwrap();
        assert_eq!(e.device_type, DeviceType::Block);
        assert_eq!(
            e.operation.command,
            Some(Command {
                opcode: 0x2a,
                service_action: 0
            })
        );
        assert_eq!(e.operation.to_string(), "SG_IO opcode 0x2a");
    }

    #[test]
    fn exe_keys_round_trip() {
        let id = ExeId {
            dev: KernelDev::new(8, 1).unwrap(),
            ino: 77,
        };
        assert_eq!(ExeId::from_key(&id.key()), Some(id));
        assert_eq!(id.key().len(), 16);
    }
}
