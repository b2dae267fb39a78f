//! asmguardctl stays a small client: it talks to the daemon over the socket
//! (the `iostat` op sends the histograms as JSON), so it links neither the
//! metrics crate (BPF, the exporter, the Prometheus parser) nor an HTTP stack.

use std::collections::{BTreeMap, BTreeSet};

/// Package name -> names of its dependencies, from the workspace's Cargo.lock.
fn lock_graph() -> BTreeMap<String, Vec<String>> {
    let lock = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.lock"))
        .expect("reading Cargo.lock");
    let mut graph = BTreeMap::new();
    for pkg in lock.split("[[package]]").skip(1) {
        let mut name = None;
        let mut deps = Vec::new();
        let mut in_deps = false;
        for line in pkg.lines() {
            let line = line.trim();
            if let Some(n) = line.strip_prefix("name = ") {
                name = Some(n.trim_matches('"').to_string());
            } else if line == "dependencies = [" {
                in_deps = true;
            } else if in_deps && line == "]" {
                in_deps = false;
            } else if in_deps {
                // "name", or "name version" when several versions exist
                let d = line.trim_matches([',', '"']);
                deps.push(d.split(' ').next().unwrap_or(d).to_string());
            }
        }
        if let Some(n) = name {
            graph.entry(n).or_insert_with(Vec::new).extend(deps);
        }
    }
    graph
}

#[test]
fn asmguardctl_links_no_metrics_crate_http_or_prometheus() {
    let graph = lock_graph();
    let mut seen = BTreeSet::new();
    let mut todo = vec!["asmguardctl".to_string()];
    while let Some(p) = todo.pop() {
        if seen.insert(p.clone()) {
            todo.extend(graph.get(&p).cloned().unwrap_or_default());
        }
    }
    assert!(seen.contains("asmguard-iostat"), "{seen:?}");
    for banned in [
        "asmguard-metrics",
        "hyper",
        "tokio",
        "prometheus-client",
        "libbpf-rs",
    ] {
        assert!(!seen.contains(banned), "asmguardctl depends on {banned}");
    }
}
