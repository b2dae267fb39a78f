//! asmguardd's command line without devices: --help documents the exit codes,
//! --check-config validates (0) or names the bad key (3), unknown flags are usage (2).

use std::process::Command;

fn run(args: &[&str]) -> (i32, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_asmguardd"))
        .args(args)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn help_and_usage() {
    let (code, out, _) = run(&["--help"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("--check-config") && out.contains("Exit codes"),
        "{out}"
    );
    assert_eq!(run(&["--frobnicate"]).0, 2);
}

#[test]
fn check_config() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("asmguard.toml");
    std::fs::write(
        &p,
        "[devices]\nexclude = [\"sd*\"]\n[filter]\nmode = \"audit\"\n",
    )
    .unwrap();
    let (code, out, err) = run(&["--check-config", "--config", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("valid"));
    std::fs::write(&p, "[filter]\nallow_users = [\"Oracle DBA\"]\n").unwrap();
    let (code, _, err) = run(&["--check-config", "--config", p.to_str().unwrap()]);
    assert_eq!(code, 3);
    assert!(
        err.contains("`filter.allow_users`") && err.lines().count() == 1,
        "{err}"
    );
}
