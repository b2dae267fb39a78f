//! Holds the Rust sources to the rule of this crate: no absolute path literal
//! (`"/sys/..."`, `"/proc/..."`, ...) outside the defaults of [`Paths`]
//! (`crates/paths/src/lib.rs`) and the configuration's defaults
//! (`crates/config/src/lib.rs`). Tests (`tests/` directories, `tests.rs`
//! files, `#[cfg(test)]` items) use roots of their own and are not read;
//! comments are not code. A literal that is text rather than a place on this
//! host (another tool's setting being translated) says so on its line with
//! `// literal path: <why>`.
//!
//! [`Paths`]: asmguard_paths::Paths

mod common;

use common::rust_files;
use std::path::Path;

/// The top-level directories a literal may not start with.
const ROOTS: &[&str] = &[
    "sys", "dev", "proc", "run", "etc", "boot", "usr", "lib", "lib64", "sbin", "bin", "var", "tmp",
    "opt", "home", "srv", "mnt", "root",
];

/// The files allowed to spell the defaults, relative to the workspace.
const DEFAULTS: &[&str] = &["crates/paths/src/lib.rs", "crates/config/src/lib.rs"];

/// Whether `line` holds a string literal starting with an absolute path
/// below one of [`ROOTS`].
fn has_literal(line: &str) -> bool {
    line.match_indices("\"/").any(|(at, _)| {
        let rest = &line[at + 2..];
        ROOTS.iter().any(|r| {
            rest.strip_prefix(r)
                .is_some_and(|after| after.starts_with('/') || after.starts_with('"'))
        })
    })
}

/// The (line number, line) of every offending literal in a file's text.
fn offenders(text: &str) -> Vec<(usize, String)> {
    common::code_lines(text)
        .into_iter()
        .filter(|(_, line)| !line.contains("// literal path:"))
        .filter(|(_, line)| has_literal(line.split(" // ").next().unwrap_or(line)))
        .map(|(n, line)| (n, line.trim().to_string()))
        .collect()
}

#[test]
fn no_absolute_path_literal_outside_the_defaults() {
    let ws = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    for top in ["crates", "daemon", "ctl"] {
        rust_files(&ws.join(top), &mut files);
    }
    files.sort();
    assert!(
        files.len() > 50,
        "found only {} Rust files under {}",
        files.len(),
        ws.display()
    );
    let mut bad = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&ws).unwrap_or(f);
        if DEFAULTS.iter().any(|d| rel == Path::new(d)) {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        for (n, line) in offenders(&text) {
            bad.push(format!("{}:{n}: {line}", rel.display()));
        }
    }
    assert!(
        bad.is_empty(),
        "absolute path literals outside asmguard_paths::Paths and the configuration's \
         defaults (take the root from a Paths value):\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_check_finds_literals_in_code_and_skips_comments_tests_and_marked_text() {
    let text = r#"
fn a() { read("/proc/self/stat"); }
// a comment naming "/sys/block"
fn b() { let x = "/dev"; }
fn c() { g.strip_prefix("/dev/"); // literal path: text to translate
}
fn d() { let http = "/metrics"; let rel = "sys/block"; }

#[cfg(test)]
mod tests {
    fn t() { read("/sys/x"); }
}
fn e() { open("/run/x") }
#[cfg(test)]
const T: &str = "/etc/x";
"#;
    let got: Vec<usize> = offenders(text).into_iter().map(|(n, _)| n).collect();
    assert_eq!(got, vec![2, 4, 13]);
}
