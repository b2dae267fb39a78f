//! What the source rules (`literals.rs`, `circles.rs`) share: the workspace's
//! Rust files and the lines of a file that are code outside its tests.

use std::path::{Path, PathBuf};

/// The `.rs` files below `dir`, but `tests` directories, `tests.rs` files
/// and build output.
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        let name = e.file_name();
        let name = name.to_string_lossy();
        if p.is_dir() {
            if name != "tests" && name != "target" && !name.starts_with('.') {
                rust_files(&p, out);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" {
            out.push(p);
        }
    }
}

/// The (line number, line) of every line of `text` that is code: not a
/// comment line, not inside a `#[cfg(test)]` item (to the closing brace at
/// the item's indentation, rustfmt's layout, or its one line); none in a
/// file that is compiled for tests only (`#![cfg(test)]` before its code).
pub fn code_lines(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    let test_only = lines
        .iter()
        .map(|l| l.trim())
        .find(|l| !l.is_empty() && !l.starts_with("//"))
        .is_some_and(|l| l == "#![cfg(test)]");
    if test_only {
        return out;
    }
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let t = line.trim_start();
        if t.starts_with("#[cfg(test)]") {
            let indent = &line[..line.len() - t.len()];
            let close = format!("{indent}}}");
            let mut j = i + 1;
            if lines.get(j).is_some_and(|l| l.trim_end().ends_with('{')) {
                while j < lines.len() && lines[j].trim_end() != close {
                    j += 1;
                }
            }
            i = j + 1;
            continue;
        }
        if !t.starts_with("//") {
            out.push((i + 1, line));
        }
        i += 1;
    }
    out
}
