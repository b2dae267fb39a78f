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
    lines_where(text, |line| {
        has_literal(line.split(" // ").next().unwrap_or(line))
    })
}

/// The workspace's root and its Rust sources (crates, daemon, ctl), sorted.
fn sources() -> (std::path::PathBuf, Vec<std::path::PathBuf>) {
    let ws = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    for top in ["crates", "daemon", "ctl"] {
        rust_files(&ws.join(top), &mut files);
    }
    files.sort();
    (ws, files)
}

/// The (line number, trimmed line) of every unmarked code line of `text`
/// that `hit` holds for (tests, comments and `// literal path:` lines aside).
fn lines_where(text: &str, hit: impl Fn(&str) -> bool) -> Vec<(usize, String)> {
    common::code_lines(text)
        .into_iter()
        .filter(|(_, line)| !line.contains("// literal path:"))
        .filter(|(_, line)| hit(line))
        .map(|(n, line)| (n, line.trim().to_string()))
        .collect()
}

#[test]
fn no_absolute_path_literal_outside_the_defaults() {
    let (ws, files) = sources();
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

/// The (line number, line) of every place `text` builds the system's roots
/// in code that is not a test.
fn roots_built(text: &str) -> Vec<(usize, String)> {
    lines_where(text, |l| {
        l.contains("Paths::default()") || l.contains("Path::new(\"/\")")
    })
}

/// The running system's roots (`Paths::default()`, `Path::new("/")`) are
/// built only where a program starts (`main.rs`, `src/bin/`, `examples/`)
/// and in tests:
/// every library function takes a `&Paths` (or the one root it needs) from
/// its caller. No library file is excepted any more (the list of those that
/// still built their own is empty and gone): a new one fails here.
#[test]
fn the_roots_are_built_once_in_main_and_passed_down() {
    let (ws, files) = sources();
    let mut bad = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&ws).unwrap_or(f);
        let r = rel.to_string_lossy();
        // where a program starts: a main, a binary, an example (a program of
        // its own, run by hand on this host)
        let entry = r.ends_with("/main.rs")
            || r.contains("/src/bin/")
            || r.contains("/examples/")
            || r == "crates/paths/src/lib.rs";
        if entry {
            continue;
        }
        let found = roots_built(&std::fs::read_to_string(f).unwrap());
        bad.extend(found.iter().map(|(n, l)| format!("{r}:{n}: {l}")));
    }
    assert!(
        bad.is_empty(),
        "the system's roots built outside a main (take a &Paths from the caller):\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_roots_check_finds_defaults_outside_tests() {
    let text = r#"
fn a() { let p = asmguard_paths::Paths::default(); }
fn b(p: &Paths) { p.sys.join("x"); }
fn c() { discover(Path::new("/")); }
#[cfg(test)]
fn t() { let p = Paths::default(); }
"#;
    let got: Vec<usize> = roots_built(text).into_iter().map(|(n, _)| n).collect();
    assert_eq!(got, vec![2, 4]);
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

/// A file compiled for tests only (`#![cfg(test)]` before its code, as a
/// crate's test-support module) builds no roots the running program uses;
/// the same line in a file without it is found.
#[test]
fn a_test_only_file_is_not_code() {
    let line = "    let p = asmguard_paths::Paths::default();";
    let test_only = format!("//! Test daemons.\n\n#![cfg(test)]\n\nfn f() {{\n{line}\n}}\n");
    assert!(roots_built(&test_only).is_empty());
    let code = format!("//! Daemons.\n\nfn f() {{\n{line}\n}}\n");
    assert_eq!(roots_built(&code).len(), 1);
}
