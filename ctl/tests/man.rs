//! The man page and completions come from the clap definitions and cover every
//! subcommand; the exit codes are documented in both the man page and --help.

use std::process::Command;

fn ctl(args: &[&str]) -> (i32, String, String) {
    asmguard_testkit::run_code(env!("CARGO_BIN_EXE_asmguardctl"), args)
}

const SUBCOMMANDS: [&str; 11] = [
    "label",
    "unlabel",
    "rename",
    "lsdsk",
    "scan",
    "status",
    "inspect",
    "udev-rules",
    "man",
    "completions",
    "help",
];

#[test]
fn man_page_covers_every_subcommand_and_renders() {
    let (code, page, err) = ctl(&["man"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        page.starts_with(".ie") || page.starts_with(".TH") || page.contains(".TH asmguardctl"),
        "{}",
        &page[..200.min(page.len())]
    );
    for s in SUBCOMMANDS {
        let s = s.replace('-', "\\-");
        assert!(
            page.contains(&format!("asmguardctl\\-{s}"))
                || page.contains(&format!("asmguardctl {s}")),
            "man page lacks {s}"
        );
    }
    for s in [
        "LABEL", "UNLABEL", "RENAME", "LSDSK", "SCAN", "STATUS", "INSPECT",
    ] {
        assert!(
            page.contains(&format!(".SH \"ASMGUARDCTL {s}\"")),
            "no section for {s}"
        );
    }
    assert!(
        page.contains("Exit codes") && page.contains("6 busy"),
        "exit codes not documented"
    );
    assert!(page.contains("\\-\\-migrate") && page.contains("\\-\\-force"));
    // It renders (groff via man -l), when man is installed.
    if Command::new("man").arg("--version").output().is_ok() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("asmguardctl.8");
        std::fs::write(&p, &page).unwrap();
        let o = Command::new("man")
            .arg("-l")
            .arg("-P")
            .arg("cat")
            .arg(&p)
            .env("MANWIDTH", "100")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(
            text.contains("ASMGUARDCTL LSDSK") && text.contains("asmguardctl label"),
            "{text}"
        );
    }
}

#[test]
fn completions_for_each_shell() {
    for sh in ["bash", "zsh", "fish"] {
        let (code, out, err) = ctl(&["completions", sh]);
        assert_eq!(code, 0, "{sh}: {err}");
        for s in ["label", "lsdsk", "udev-rules", "migrate"] {
            assert!(out.contains(s), "{sh} completion lacks {s}");
        }
    }
    let (code, _, err) = ctl(&["completions", "tcsh"]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn help_documents_exit_codes_and_usage_errors_exit_2() {
    let out =
        asmguard_testkit::run_ok(Command::new(env!("CARGO_BIN_EXE_asmguardctl")).arg("--help"));
    let out = out.split_whitespace().collect::<Vec<_>>().join(" ");
    asmguard_testkit::assert_contains_all(&out, &["Exit codes", "5 asmguardd not reachable"]);
    let (code, _, err) = ctl(&["label", "ONLYLABEL"]);
    assert_eq!(code, 2, "{err}");
    let (code, _, _) = ctl(&["frobnicate"]);
    assert_eq!(code, 2);
}

#[test]
fn udev_rules_follow_the_config() {
    let (_dir, p) = asmguard_testkit::config_file(
        "[paths]\nowner = \"oracle\"\ngroup = \"dba\"\nmode = \"0600\"\n",
    );
    let (code, out, err) = ctl(&["udev-rules", "--config", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(r#"OWNER="oracle", GROUP="dba", MODE="0600""#),
        "{out}"
    );
    assert!(out.contains(r#"ENV{ID_FS_TYPE}!="oracleasm""#));
    // the link is the label the daemon decided, never the label bytes alone
    assert!(out.contains(r#"SYMLINK+="asmguard/disks/$env{ASMGUARD_LABEL}""#));
    assert!(out.contains(r#"IMPORT{file}="/run/asmguard/links/%k""#));
    assert!(!out.contains("$env{ID_FS_LABEL_ENC}"), "{out}");
    assert!(out.contains(r#"ENV{DM_MULTIPATH_DEVICE_PATH}=="1", GOTO="asmguard_end""#));
    assert!(out.contains(r#"OPTIONS+="nowatch""#));
    std::fs::write(&p, "[paths]\nmode = \"0777\"\n").unwrap();
    let (code, _, err) = ctl(&["udev-rules", "--config", p.to_str().unwrap()]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("`paths.mode`"), "{err}");
}
