//! Where asmguardctl's output goes when its reader is gone or the file is
//! full: `asmguardctl status | grep -q protected` is how scripts read it, and
//! grep quits at its first match. The command must neither panic (Rust's
//! `println!` does on a broken pipe: "failed printing to stdout") nor change
//! its exit code because a reader left early; a write that fails for any
//! other reason (a full disk) is one line on stderr and exit 1.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn ctl() -> Command {
    Command::new(env!("CARGO_BIN_EXE_asmguardctl"))
}

/// An 8 MiB image labelled by the format code (so `inspect` has a lot to say).
fn image(dir: &Path) -> PathBuf {
    use std::os::unix::fs::FileExt;
    let p = dir.join("disk.img");
    let f = std::fs::File::create(&p).unwrap();
    f.set_len(8 << 20).unwrap();
    let mut d = asmguard_format::synth::SynthDisk::new(8);
    d.label = Some(asmguard_format::label::Label::new("OUT1").unwrap());
    for (off, blk) in d.metadata().unwrap() {
        f.write_all_at(&blk, off).unwrap();
    }
    p
}

/// Runs `cmd` with its standard output on a pipe nobody reads (the read end
/// closed before the command starts): its exit code and standard error.
fn into_closed_pipe(cmd: &mut Command) -> (Option<i32>, String) {
    let (r, w): (OwnedFd, OwnedFd) = nix::unistd::pipe().unwrap();
    drop(r);
    let out = cmd
        .stdout(Stdio::from(w))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_reader_that_quits_early_is_no_error() {
    let dir = tempfile::tempdir().unwrap();
    let img = image(dir.path());
    let cases: Vec<Vec<String>> = vec![
        vec!["inspect".into(), img.display().to_string()],
        vec!["inspect".into(), "--json".into(), img.display().to_string()],
        vec!["udev-rules".into()],
        vec!["completions".into(), "bash".into()],
        vec!["man".into()],
    ];
    for args in cases {
        let (code, err) = into_closed_pipe(ctl().args(&args));
        assert_eq!(
            code,
            Some(0),
            "asmguardctl {args:?} into a closed pipe exited {code:?}: {err}"
        );
        assert!(
            err.is_empty(),
            "asmguardctl {args:?} into a closed pipe said something: {err}"
        );
    }
}

#[test]
fn a_full_disk_is_one_line_and_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let img = image(dir.path());
    for args in [
        vec!["inspect".to_string(), img.display().to_string()],
        vec!["completions".into(), "bash".into()],
        vec!["man".into()],
    ] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap(); // literal path: the kernel's always-full device
        let out = ctl()
            .args(&args)
            .stdout(Stdio::from(full))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(1),
            "asmguardctl {args:?} > /dev/full: {err}"
        );
        assert!(
            !err.contains("panicked"),
            "asmguardctl {args:?} > /dev/full panicked: {err}"
        );
        assert_eq!(
            err.lines().count(),
            1,
            "asmguardctl {args:?} > /dev/full: {err}"
        );
        assert!(
            err.starts_with("asmguardctl: cannot write the output: "),
            "asmguardctl {args:?} > /dev/full: {err}"
        );
    }
}

/// Every print of the CLI goes through `out.rs` (`out!`, `outln!`, `err!`,
/// `errln!`): a `println!` anywhere else would panic again on the first
/// reader that quits early.
#[test]
fn every_print_goes_through_the_output_module() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = Vec::new();
    for e in std::fs::read_dir(&src).unwrap().flatten() {
        let p = e.path();
        if p.file_name().is_some_and(|n| n == "out.rs") || p.extension().is_none_or(|x| x != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap();
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or(line);
            if [
                "println!(",
                "print!(",
                "eprintln!(",
                "eprint!(",
                "stdout()",
                "stderr().lock",
            ]
            .iter()
            .any(|m| code.contains(m))
            {
                found.push(format!("{}:{}: {}", p.display(), i + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "prints outside ctl/src/out.rs:\n{}",
        found.join("\n")
    );
}
