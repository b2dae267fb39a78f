//! The passthrough command rule and the refused ioctls each have one source:
//! the Rust tables (`asmguard_guard::guard::commands::READ_CLASS`,
//! `asmguard_guard::guard::ioctls::IOCTLS`). These tests run the C rules the
//! kernel uses (`bpf/passthrough.h`, `bpf/ioctls.h`, compiled alone into
//! `bpf/cmdclass.bpf.c`) with BPF_PROG_TEST_RUN for every input byte that
//! matters, and check that both say the same.
//!
//! Root is needed (loading a BPF program). Without root the test fails,
//! unless `ASMGUARD_HOST_TESTS=skip` is set (then it prints SKIPPED and passes).

use asmguard_guard::guard::commands::{read_class, CmdSet, CMDCLASS_OBJ, READ_CLASS};
use libbpf_rs::{Object, ObjectBuilder, ProgramInput};

/// `cmdclass.bpf.o` loaded (`None` without root, when skipping is allowed).
fn cmdclass() -> Option<Object> {
    // loading a BPF program needs root
    if !asmguard_testkit::require_root() {
        return None;
    }
    let obj = ObjectBuilder::default()
        .open_memory(CMDCLASS_OBJ)
        .expect("open cmdclass.bpf.o")
        .load()
        .expect("load cmdclass.bpf.o");
    Some(obj)
}

/// Runs `prog` of `obj` on a test packet that starts with `head` (XDP test
/// runs need at least an Ethernet header's worth of data).
fn run_on(obj: &mut Object, prog: &str, head: &[u8]) -> u32 {
    let p = obj
        .progs_mut()
        .find(|p| p.name() == prog)
        .unwrap_or_else(|| panic!("program {prog}"));
    let mut pkt = [0u8; 64];
    pkt[..head.len()].copy_from_slice(head);
    let input = ProgramInput {
        data_in: Some(&pkt),
        ..Default::default()
    };
    p.test_run(input).expect("BPF_PROG_TEST_RUN").return_value
}

#[test]
fn c_rule_agrees_with_the_rust_table() {
    let Some(mut obj) = cmdclass() else { return };
    let mut run = |set: u8, op: u8, sa: u8| run_on(&mut obj, "ag_cmd_class", &[set, op, sa]);
    let mut passed = 0;
    for (set, code) in [(CmdSet::Scsi, 1u8), (CmdSet::NvmeAdmin, 2u8)] {
        for op in 0..=255u8 {
            for sa in 0..=255u8 {
                let c = run(code, op, sa);
                assert!(c <= 1, "C rule returned {c}");
                assert_eq!(
                    c == 1,
                    read_class(set, op, sa),
                    "{set:?} opcode 0x{op:02x} service action 0x{sa:02x}: the C rule \
                     (bpf/passthrough.h) and READ_CLASS disagree"
                );
                passed += c;
            }
        }
    }
    // Every row of the table passes for some service action bytes: SCSI rows
    // without a service action for all 256, the READ CAPACITY(16) row for the
    // 8 bytes whose low 5 bits are 0x10, NVMe rows for all 256.
    let expect: u32 = READ_CLASS
        .iter()
        .map(|c| if c.service_action.is_some() { 8 } else { 256 })
        .sum();
    assert_eq!(passed, expect);
    // A set the rule does not know passes nothing.
    assert_eq!(run(3, 0x12, 0), 0);
}

/// The ioctls the C rule refuses (`write_ioctl()` in bpf/ioctls.h, run with
/// BPF_PROG_TEST_RUN) are exactly the ones the name table names
/// (`asmguard_guard::guard::ioctls::IOCTLS`): every type and number, in every
/// direction and with three sizes, and each exact command with another
/// direction and size.
#[test]
fn refused_ioctls_are_exactly_the_named_ones() {
    use asmguard_guard::guard::ioctls::{ioctl_name, Cmd, IOCTLS, LOOP_BINDS};
    let Some(mut obj) = cmdclass() else { return };
    let mut run = |cmd: u32| run_on(&mut obj, "ag_ioctl_write", &cmd.to_ne_bytes());
    // (the loop binds are named for events, judged by another rule)
    let loop_bind = |cmd: u32| LOOP_BINDS.iter().any(|(m, _)| *m == Cmd::Exact(cmd));
    let named = |cmd: u32| !ioctl_name(cmd).starts_with("ioctl 0x") && !loop_bind(cmd);
    let mut cmds = Vec::new();
    for dir in 0..4u32 {
        for size in [0u32, 8, 0x48] {
            for ty in 0..=255u32 {
                for nr in 0..=255u32 {
                    cmds.push(dir << 30 | size << 16 | ty << 8 | nr);
                }
            }
        }
    }
    for (m, _) in IOCTLS {
        if let Cmd::Exact(c) = m {
            cmds.extend([*c, *c | 0x4000_0000, *c | 0x0010_0000]);
        }
    }
    let mut refused = std::collections::BTreeSet::new();
    for cmd in cmds {
        let c = run(cmd);
        assert!(c <= 1, "C rule returned {c}");
        assert_eq!(
            c == 1,
            named(cmd),
            "ioctl 0x{cmd:08x} ({}): the C rule (bpf/ioctls.h) and IOCTLS disagree",
            ioctl_name(cmd)
        );
        if c == 1 {
            refused.insert(ioctl_name(cmd));
        }
    }
    // every row of the table is refused for some command
    assert_eq!(refused.len(), IOCTLS.len(), "{refused:?}");
}

/// The C rule (bpf/passthrough.h) never lets NVMe admin Format (0x80),
/// Sanitize (0x84), Namespace Management (0x0d), Namespace Attachment (0x15)
/// or Security Send (0x81), nor the SCSI ones of `DESTRUCTIVE`, through as
/// read class, whatever the service action byte: callers not allowed by a
/// rule are refused them on controller, generic and block nodes.
#[test]
fn destructive_commands_are_refused_by_the_c_rule() {
    use asmguard_guard::guard::commands::DESTRUCTIVE;
    let Some(mut obj) = cmdclass() else { return };
    for op in [0x80u8, 0x84, 0x0d, 0x15, 0x81] {
        assert!(
            DESTRUCTIVE
                .iter()
                .any(|(s, o, _)| *s == CmdSet::NvmeAdmin && *o == op),
            "NVMe admin 0x{op:02x} missing from DESTRUCTIVE"
        );
    }
    for (set, op, name) in DESTRUCTIVE {
        let code = *set as u8;
        for sa in 0..=255u8 {
            assert_eq!(
                run_on(&mut obj, "ag_cmd_class", &[code, *op, sa]),
                0,
                "{set:?} {name} (0x{op:02x}) passes the C rule as read class"
            );
        }
    }
}
