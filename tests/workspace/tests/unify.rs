//! The release build and the test build agree on every shared dependency's
//! features (crates/workspace-hack): otherwise `cargo test --release` builds those
//! crates, and every asmguard crate above them, a second time, and relinks the
//! release binaries the labs ship while they may be copying them.

use std::collections::BTreeMap;
use std::process::Command;

/// Package name and version -> its features, as `cargo tree` resolves them for the
/// whole workspace, with or without the dev-dependencies.
fn features(with_dev: bool) -> BTreeMap<String, String> {
    let cargo = option_env!("CARGO").unwrap_or("cargo");
    let mut cmd = Command::new(cargo);
    cmd.current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .args(["tree", "--offline", "--workspace", "--prefix", "none"])
        .args(["-f", "{p}|{f}"]);
    if !with_dev {
        cmd.args(["-e", "no-dev"]);
    }
    let out = cmd.output().expect("running cargo tree");
    assert!(
        out.status.success(),
        "cargo tree: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        // (a package printed before is printed again as "... (*)" without features)
        .filter(|l| !l.trim_end().ends_with("(*)"))
        .filter_map(|l| {
            let (p, f) = l.split_once('|')?;
            // "name vX.Y.Z (path)" or "name vX.Y.Z (*)": name and version
            let p = p.split(" (").next().unwrap_or(p).trim().to_string();
            Some((p, f.trim().to_string()))
        })
        .collect()
}

#[test]
fn the_test_build_adds_no_feature_to_a_release_dependency() {
    let release = features(false);
    let test = features(true);
    assert!(
        release.len() > 50,
        "only {} packages in the tree",
        release.len()
    );
    let differ: Vec<String> = release
        .iter()
        .filter_map(|(p, f)| {
            let t = test.get(p)?;
            (t != f).then(|| format!("{p}: release [{f}], test [{t}]"))
        })
        .collect();
    assert!(
        differ.is_empty(),
        "features the test build adds (add them to crates/workspace-hack/Cargo.toml):\n{}",
        differ.join("\n")
    );
}
