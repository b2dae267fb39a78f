//! asmguardd's command line without devices: --help documents the exit codes,
//! --check-config validates (0) or names the bad key (3), unknown flags are usage (2).

fn run(args: &[&str]) -> (i32, String, String) {
    asmguard_testkit::run_code(env!("CARGO_BIN_EXE_asmguardd"), args)
}

#[test]
fn help_and_usage() {
    let out = asmguard_testkit::run_ok(
        std::process::Command::new(env!("CARGO_BIN_EXE_asmguardd")).arg("--help"),
    );
    asmguard_testkit::assert_contains_all(&out, &["--check-config", "Exit codes"]);
    assert_eq!(run(&["--frobnicate"]).0, 2);
}

#[test]
fn check_config() {
    let (_dir, p) = asmguard_testkit::config_file(
        "[devices]\nexclude = [\"sd*\"]\n[filter]\nmode = \"audit\"\n",
    );
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
