//! Holds the Rust sources to a second rule beside `literals.rs`: no import
//! circle between the modules of a crate. A module may use its parent's items
//! and its children's (that is how Rust nests them), but two modules neither
//! of which contains the other never reach each other both ways, directly or
//! through others: every crate reads from the leaves up. Code only: tests
//! (`#[cfg(test)]` items, `tests.rs`, `tests/`) and comments are not read.

mod common;

use common::{code_lines, rust_files};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

type Module = Vec<String>;

/// The module path of `file` in the crate whose sources are in `src`
/// (`lib.rs`/`main.rs`: the root, `a/mod.rs` and `a.rs`: `a`).
fn module_of(src: &Path, file: &Path) -> Module {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut m: Module = rel
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    if matches!(m.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        m.pop();
    }
    m
}

/// The identifiers of a path written after `at` in `s` (`a::b::{c, d::e}`
/// gives `a::b::c` and `a::b::d::e`).
fn paths_after(s: &str) -> Vec<Vec<String>> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut base = Vec::new();
    let mut rest = s;
    loop {
        let end = rest.find(|c| !ident(c)).unwrap_or(rest.len());
        if end == 0 {
            break;
        }
        base.push(rest[..end].to_string());
        rest = &rest[end..];
        match rest.strip_prefix("::") {
            Some(r) => rest = r,
            None => return vec![base],
        }
        if let Some(group) = rest.strip_prefix('{') {
            let inner = group.split('}').next().unwrap_or("");
            return inner
                .split(',')
                .flat_map(|part| paths_after(part.trim()))
                .map(|p| base.iter().cloned().chain(p).collect())
                .collect();
        }
    }
    vec![base]
}

/// What module `m` (in `file`) refers to: `crate::...` and `super::...`
/// paths, resolved to module paths (possibly naming items inside modules).
fn references(m: &Module, text: &str) -> Vec<Module> {
    let mut out = Vec::new();
    for (_, line) in code_lines(text) {
        let line = line.split(" // ").next().unwrap_or(line);
        for (at, _) in line.match_indices("crate::") {
            if at > 0 && line[..at].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
                continue; // `asmguard_crate::`, not `crate::`
            }
            out.extend(paths_after(&line[at + "crate::".len()..]));
        }
        let mut i = 0;
        while let Some(at) = line[i..].find("super::") {
            let start = i + at;
            if start > 0 && line[..start].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
            {
                i = start + 7;
                continue;
            }
            let mut ups = 0;
            let mut rest = &line[start..];
            while let Some(r) = rest.strip_prefix("super::") {
                ups += 1;
                rest = r;
            }
            // `a.rs` and `a/mod.rs` are both module `a`: `super` is its parent
            let keep = m.len().saturating_sub(ups);
            for p in paths_after(rest) {
                out.push(m[..keep].iter().cloned().chain(p).collect());
            }
            i = start + 7 * ups;
        }
    }
    out
}

/// The longest module of `modules` that `path` starts with.
fn resolve<'a>(modules: &'a BTreeSet<Module>, path: &[String]) -> Option<&'a Module> {
    (0..=path.len())
        .rev()
        .find_map(|k| modules.get(&path[..k].to_vec()))
}

/// The circles (strongly connected sets of two or more modules) of `edges`.
fn circles(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    // Tarjan's algorithm, iterative enough for a crate's few dozen modules.
    struct S<'a> {
        edges: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'a Module, usize>,
        low: BTreeMap<&'a Module, usize>,
        stack: Vec<&'a Module>,
        on: BTreeSet<&'a Module>,
        out: Vec<Vec<Module>>,
    }
    fn visit<'a>(s: &mut S<'a>, v: &'a Module) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on.insert(v);
        for w in &s.edges[v] {
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(w);
                comp.push(w.clone());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                s.out.push(comp);
            }
        }
    }
    let mut s = S {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out
}

/// The module graph of one crate (`src`: its sources), without the edges
/// between a module and the modules it contains.
fn graph(src: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut texts = BTreeMap::new();
    for f in &files {
        texts.insert(module_of(src, f), std::fs::read_to_string(f).unwrap());
    }
    let modules: BTreeSet<Module> = texts.keys().cloned().collect();
    let mut edges = BTreeMap::new();
    for (m, text) in &texts {
        let mut to = BTreeSet::new();
        for r in references(m, text) {
            if let Some(t) = resolve(&modules, &r) {
                let nested = t.starts_with(m) || m.starts_with(t);
                if !nested {
                    to.insert(t.clone());
                }
            }
        }
        edges.insert(m.clone(), to);
    }
    edges
}

fn show(m: &Module) -> String {
    if m.is_empty() {
        "crate".into()
    } else {
        m.join("::")
    }
}

#[test]
fn no_crate_has_an_import_circle() {
    let ws = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut srcs = vec![ws.join("daemon/src"), ws.join("ctl/src")];
    for e in std::fs::read_dir(ws.join("crates")).unwrap().flatten() {
        if e.path().join("src").is_dir() {
            srcs.push(e.path().join("src"));
        }
    }
    assert!(srcs.len() > 10, "found only {} crates", srcs.len());
    let mut bad = Vec::new();
    for src in &srcs {
        let edges = graph(src);
        for c in circles(&edges) {
            let set: BTreeSet<&Module> = c.iter().collect();
            let shown: Vec<String> = c
                .iter()
                .map(|m| {
                    let to: Vec<String> = edges[m]
                        .iter()
                        .filter(|t| set.contains(t))
                        .map(show)
                        .collect();
                    format!("{} -> {}", show(m), to.join(", "))
                })
                .collect();
            let rel = src.strip_prefix(&ws).unwrap_or(src);
            bad.push(format!("{}: {}", rel.display(), shown.join("; ")));
        }
    }
    assert!(
        bad.is_empty(),
        "import circles (move what both sides need to a module of its own, or to \
         the side that is the leaf):\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_check_finds_a_circle_through_crate_and_super_paths() {
    let t = tempfile_dir();
    let src = t.join("src");
    std::fs::create_dir_all(src.join("a")).unwrap();
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\n").unwrap();
    std::fs::write(src.join("a/mod.rs"), "mod c;\nuse crate::b::{x, y::z};\n").unwrap();
    std::fs::write(src.join("a/c.rs"), "use super::super::b;\n").unwrap();
    // b reaches a only from a test and a comment: no circle
    std::fs::write(
        src.join("b.rs"),
        "// use crate::a;\n#[cfg(test)]\nmod tests {\n    use crate::a::c;\n}\n",
    )
    .unwrap();
    assert!(circles(&graph(&src)).is_empty());
    // ... and through code: b to a's child c, which reaches b back
    std::fs::write(src.join("b.rs"), "fn f() { crate::a::c::g(); }\n").unwrap();
    let found = circles(&graph(&src));
    assert_eq!(found.len(), 1, "{found:?}");
    let mut names: Vec<String> = found[0].iter().map(show).collect();
    names.sort();
    assert_eq!(names, ["a::c", "b"]);
    // a module and the one it contains are no circle
    std::fs::write(src.join("a/c.rs"), "use super::x;\n").unwrap();
    std::fs::write(src.join("b.rs"), "\n").unwrap();
    std::fs::write(src.join("a/mod.rs"), "mod c;\nuse c::g;\n").unwrap();
    assert!(circles(&graph(&src)).is_empty());
    std::fs::remove_dir_all(&t).unwrap();
}

/// A fresh directory under the target's temporary directory.
fn tempfile_dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("asmguard-circles-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}
