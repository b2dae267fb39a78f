//! Holds the project's shell scripts to one rule: where a script runs under
//! `set -o pipefail`, a builtin's output is never piped into a reader that
//! quits early (`printf '%s' "$OUT" | grep -q ...`, `echo "$x" | grep -q`).
//! Bash writes a builtin's output a line at a time: when grep has matched
//! and quit before the last line is written, printf dies of SIGPIPE and the
//! pipe fails although the text matched, a FAIL that comes and goes with the
//! machine's load (it did, in the pair lab). `grep -q PATTERN <<<"$OUT"`
//! reads the same text with no pipe.

use std::path::{Path, PathBuf};

/// The shell scripts below `dir` (`.sh` files, `.ci/run`), but build output
/// and the labs' work directories.
fn scripts(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        let name = e.file_name();
        let name = name.to_string_lossy().into_owned();
        if p.is_dir() {
            if !matches!(name.as_str(), "target" | "work" | "cache" | ".git" | "fuzz") {
                scripts(&p, out);
            }
        } else if name.ends_with(".sh") {
            out.push(p);
        }
    }
}

/// Whether `line` pipes a builtin's output of a variable into a grep that
/// quits at its first match.
fn early_quit_pipe(line: &str) -> bool {
    if line.trim_start().starts_with('#') {
        return false;
    }
    let code = line.split(" #").next().unwrap_or(line);
    code.split('|').collect::<Vec<_>>().windows(2).any(|w| {
        let (left, right) = (w[0].trim(), w[1].trim_start());
        let builtin = left.ends_with('"')
            && ["printf '%s' \"$", "echo \"$"]
                .iter()
                .any(|b| left.rsplit(';').next().unwrap_or(left).trim().contains(b));
        let quits = right
            .strip_prefix("grep -")
            .and_then(|r| r.split_whitespace().next())
            .is_some_and(|flags| flags.contains('q') || flags.contains('m'));
        builtin && quits
    })
}

#[test]
fn no_builtin_output_piped_to_an_early_quitting_grep_under_pipefail() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    scripts(&root.join("scripts"), &mut files);
    scripts(&root.join("tests"), &mut files);
    files.push(root.join(".ci/run"));
    // the pair lab's parts are sourced by pair.sh, which sets pipefail
    let pair_parts = root.join("tests/system/pair");
    let mut read = 0;
    let mut offenders = Vec::new();
    for f in &files {
        let Ok(text) = std::fs::read_to_string(f) else {
            continue;
        };
        read += 1;
        if !text.contains("pipefail") && !f.starts_with(&pair_parts) {
            continue;
        }
        for (n, line) in text.lines().enumerate() {
            if early_quit_pipe(line) {
                let rel = f.strip_prefix(&root).unwrap_or(f);
                offenders.push(format!("{}:{}: {}", rel.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(read > 20, "the scripts were found ({read})");
    assert!(
        offenders.is_empty(),
        "use `grep -q PATTERN <<<\"$VAR\"` instead:\n{}",
        offenders.join("\n")
    );
}

#[test]
fn the_rule_sees_the_pattern_and_not_its_cure() {
    assert!(early_quit_pipe(
        r#"	if [ "$RC" = 0 ] && printf '%s' "$OUT" | grep -q "1 label conflicts"; then"#
    ));
    assert!(early_quit_pipe(r#"echo "$lint" | grep -Eq '^E:'"#));
    assert!(!early_quit_pipe(r#"grep -q "1 label conflicts" <<<"$OUT""#));
    assert!(!early_quit_pipe(
        r#"[ "$(printf '%s' "$OUT" | tail -n 1)" -ge 1 ]"#
    ));
    assert!(!early_quit_pipe(r#"printf '%s' "$OUT" | grep -c x"#));
    assert!(!early_quit_pipe(
        r#"# never `printf '%s' "$OUT" | grep -q`"#
    ));
}
