//! The Grafana dashboard and the Prometheus alert rules query only what the
//! exporter emits: every metric name in every expression (and template query)
//! appears in a live scrape, and every label it filters or groups by is a label
//! the exporter sets (or, for alerts, one Prometheus adds to every target).
//! The alert rules also pass `promtool check rules` and their unit tests
//! (`promtool test rules`).

use std::collections::BTreeSet;
use std::sync::Arc;

use asmguard_metrics::{
    DiskInfo, Error, HistSource, IoErrorKind, KernelDev, Metrics, Op, OpHist, RawEntry, SizeClass,
};
use serde_json::Value;

mod common;

#[derive(Debug)]
struct OneDisk;
impl HistSource for OneDisk {
    fn read(&self) -> Result<Vec<RawEntry>, Error> {
        Ok(Op::ALL
            .into_iter()
            .map(|op| {
                let mut hist = OpHist::default();
                hist.lat[10] = 1;
                hist.queue[0] = 1;
                hist.bytes = 4096;
                RawEntry {
                    dev: KernelDev::new(7, 0).unwrap().raw(),
                    op,
                    hist,
                }
            })
            .collect())
    }
    // every I/O single-block: the `size` label is emitted
    fn read_sized(&self) -> Result<Vec<(RawEntry, Option<SizeClass>)>, Error> {
        Ok(self
            .read()?
            .into_iter()
            .map(|e| (e, Some(SizeClass::Single)))
            .collect())
    }
    // one medium error: asmguard_io_errors_total is emitted
    fn errors(&self) -> Result<Vec<(u32, IoErrorKind, u64)>, Error> {
        Ok(vec![(
            KernelDev::new(7, 0).unwrap().raw(),
            IoErrorKind::Medium,
            1,
        )])
    }
}

/// A live scrape of an exporter with every family populated.
fn scrape_everything() -> String {
    let m = Metrics::with_source(Arc::new(OneDisk), &asmguard_paths::Paths::default().sys);
    common::populate_every_family(
        &m,
        KernelDev::new(7, 0).unwrap(),
        "loop0".into(),
        vec!["/dev/loop0".into()],
        asmguard_filter_types::BackendName::Lsm,
    );
    // the disk traced on a path of its own: the per-path family is emitted too
    m.set_disk(
        KernelDev::new(7, 0).unwrap(),
        DiskInfo {
            path: "loop0".into(),
            device: "loop0".into(),
            label: "DATA1".into(),
            paths: vec!["/dev/loop0".into()],
            logical_sector: 512,
            physical_sector: 4096,
            diskgroup: "DATA".into(),
        },
    );
    common::scrape_over_http(m)
}

/// Sample names and label names of a scrape.
fn emitted(scrape: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut names = BTreeSet::new();
    let mut labels = BTreeSet::new();
    for line in scrape
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let end = line.find(['{', ' ']).unwrap();
        names.insert(line[..end].to_string());
        if line[end..].starts_with('{') {
            let inner = &line[end + 1..line.rfind('}').unwrap()];
            for part in inner.split("\",") {
                labels.insert(part.split('=').next().unwrap().trim().to_string());
            }
        }
    }
    (names, labels)
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// Identifiers of an expression that start with `asmguard_`.
fn metric_names(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(i) = rest.find("asmguard_") {
        let before = rest[..i].chars().last();
        let tail = &rest[i..];
        let len = tail.find(|c| !is_ident(c)).unwrap_or(tail.len());
        if !before.is_some_and(is_ident) {
            out.push(tail[..len].to_string());
        }
        rest = &tail[len..];
    }
    out
}

/// Label names an expression matches on (`{a="x", b=~"y"}`) or groups by
/// (`by (a, b)`, `without (...)`); `le` of histogram_quantile included.
fn label_names(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut s = expr;
    while let Some(open) = s.find('{') {
        let close = open + s[open..].find('}').expect("unbalanced braces");
        for m in s[open + 1..close].split(',') {
            let name: String = m.trim().chars().take_while(|&c| is_ident(c)).collect();
            if !name.is_empty() {
                out.push(name);
            }
        }
        s = &s[close + 1..];
    }
    for kw in ["by (", "without ("] {
        let mut s = expr;
        while let Some(i) = s.find(kw) {
            let from = i + kw.len();
            let close = from + s[from..].find(')').expect("unbalanced parentheses");
            out.extend(s[from..close].split(',').map(|l| l.trim().to_string()));
            s = &s[close..];
        }
    }
    out
}

/// Every PromQL string of the dashboard: targets' `expr` and query variables.
fn queries(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("expr", Value::String(s)) | ("definition", Value::String(s)) => {
                        out.push(s.clone())
                    }
                    ("query", Value::String(s)) if s.contains("asmguard_") => out.push(s.clone()),
                    _ => queries(v, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|v| queries(v, out)),
        _ => {}
    }
}

fn dashboard() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../dashboards/asmguard.json"
    );
    let text = std::fs::read_to_string(path).expect("dashboards/asmguard.json");
    serde_json::from_str(&text).expect("the dashboard is valid JSON")
}

#[test]
fn dashboard_queries_only_emitted_metrics_and_labels() {
    let (names, labels) = emitted(&scrape_everything());
    assert!(
        names.contains("asmguard_io_latency_seconds_bucket"),
        "{names:?}"
    );
    let mut exprs = Vec::new();
    queries(&dashboard(), &mut exprs);
    assert!(exprs.len() >= 10, "only {} queries found", exprs.len());
    let mut used = BTreeSet::new();
    for e in &exprs {
        assert_eq!(e.matches('(').count(), e.matches(')').count(), "{e}");
        assert_eq!(e.matches('{').count(), e.matches('}').count(), "{e}");
        let found = metric_names(e);
        assert!(!found.is_empty(), "no asmguard metric in {e}");
        for n in found {
            assert!(
                names.contains(&n),
                "{e}: {n} is not emitted by the exporter"
            );
            used.insert(n);
        }
        for l in label_names(e) {
            // `label_values(metric, label)` is not a selector: skip it
            if e.starts_with("label_values(") {
                continue;
            }
            assert!(labels.contains(&l), "{e}: label {l} is not emitted");
        }
    }
    // the issue's panels: latency (heatmap and quantiles), IOPS, throughput,
    // denials, discards
    uses_all(
        &used,
        "the dashboard does not use ",
        &[
            "asmguard_io_latency_seconds_bucket",
            "asmguard_io_latency_seconds_count",
            "asmguard_io_bytes_total",
            "asmguard_writes_denied_total",
            "asmguard_discard_bytes_total",
            "asmguard_path_io_latency_seconds_bucket",
            "asmguard_io_errors_total",
        ],
    );
}

/// Every target expression of the panel titled `title`.
fn panel_exprs<'a>(panels: &'a [Value], title: &str) -> Vec<&'a str> {
    let p = panels
        .iter()
        .find(|p| p["title"] == title)
        .unwrap_or_else(|| panic!("no panel {title:?}"));
    p["targets"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["expr"].as_str())
        .collect()
}

/// Issue 42's panels, read like a DBA: the single-block read latency (AWR's
/// 'db file sequential read'), each path's p99, I/O errors, await, and the
/// disk group in the inventory.
#[test]
fn dashboard_reads_like_a_dba() {
    let d = dashboard();
    let panels = d["panels"].as_array().expect("panels");
    let single = panel_exprs(
        panels,
        "Single-block read latency (db file sequential read)",
    );
    assert!(single
        .iter()
        .any(|e| e.starts_with("histogram_quantile(0.99,")));
    for e in &single {
        assert!(
            e.contains(r#"op="read""#) && e.contains(r#"size="single""#),
            "{e}"
        );
    }
    let path = panel_exprs(panels, "p99 latency per path");
    assert!(path.iter().any(|e| {
        e.starts_with("histogram_quantile(0.99,")
            && e.contains("asmguard_path_io_latency_seconds_bucket")
            && label_names(e).contains(&"path".to_string())
    }));
    let errors = panel_exprs(panels, "I/O errors per path and kind");
    assert!(errors.iter().any(|e| e.contains("asmguard_io_errors_total")
        && ["path", "kind"]
            .iter()
            .all(|l| label_names(e).contains(&l.to_string()))));
    let await_ = panel_exprs(panels, "Average await (queue + device) per disk and op");
    assert!(await_
        .iter()
        .any(|e| e.contains("asmguard_io_queue_seconds_sum")
            && e.contains("asmguard_io_latency_seconds_sum")
            && e.contains("asmguard_io_latency_seconds_count")));
    let inventory = panel_exprs(panels, "Managed disks");
    assert!(inventory
        .iter()
        .any(|e| e.contains("asmguard_disk_info")
            && label_names(e).contains(&"diskgroup".to_string())));
}

#[test]
fn dashboard_has_the_required_panels() {
    let d = dashboard();
    let panels = d["panels"].as_array().expect("panels");
    let mut ids = BTreeSet::new();
    for p in panels {
        assert!(
            ids.insert(p["id"].as_u64().expect("numeric id")),
            "duplicate id"
        );
        assert!(p["title"].as_str().is_some_and(|t| !t.is_empty()));
        for t in p["targets"].as_array().into_iter().flatten() {
            assert!(t["refId"].as_str().is_some());
        }
    }
    let heatmap = panels
        .iter()
        .find(|p| p["type"] == "heatmap")
        .expect("a heatmap panel");
    assert_eq!(heatmap["targets"][0]["format"], "heatmap");
    assert!(heatmap["targets"][0]["expr"]
        .as_str()
        .unwrap()
        .contains("by (le)"));
    let quantiles: Vec<&str> = panels
        .iter()
        .flat_map(|p| p["targets"].as_array().into_iter().flatten())
        .filter_map(|t| t["expr"].as_str())
        .filter(|e| e.starts_with("histogram_quantile("))
        .collect();
    for q in ["histogram_quantile(0.5,", "histogram_quantile(0.99,"] {
        assert!(quantiles.iter().any(|e| e.starts_with(q)), "no {q}");
    }
    for e in &quantiles {
        assert!(e.contains("_bucket") && e.contains(" le)"), "{e}");
    }
    assert!(d["uid"].as_str().is_some() && d["schemaVersion"].as_u64().is_some());
}

#[test]
fn name_extraction_finds_names_and_labels() {
    let e = r#"histogram_quantile(0.99, sum by (label, le) (rate(asmguard_io_latency_seconds_bucket{op="read",label=~"$label"}[5m]))) / notasmguard_x"#;
    assert_eq!(metric_names(e), vec!["asmguard_io_latency_seconds_bucket"]);
    let l = label_names(e);
    for want in ["op", "label", "le"] {
        assert!(l.contains(&want.to_string()), "{l:?}");
    }
}

fn dashboards_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../dashboards")
}

/// `(alert name, expr)` of every rule of the alert file. The file is plain
/// YAML written by hand: `expr:` holds the expression on its line, or after
/// `>-` on the more indented lines that follow.
fn alert_rules() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(dashboards_dir().join("asmguard-alerts.yml"))
        .expect("dashboards/asmguard-alerts.yml");
    let lines: Vec<&str> = text.lines().collect();
    let indent = |l: &str| l.len() - l.trim_start().len();
    let mut out = Vec::new();
    let mut name = None;
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim_start();
        if let Some(n) = t.strip_prefix("- alert:") {
            name = Some(n.trim().to_string());
        } else if let Some(e) = t.strip_prefix("expr:") {
            let e = e.trim();
            let expr = if e == ">-" || e == ">" {
                lines[i + 1..]
                    .iter()
                    .take_while(|m| indent(m) > indent(l))
                    .map(|m| m.trim())
                    .collect::<Vec<_>>()
                    .join(" ")
            } else {
                e.to_string()
            };
            out.push((name.take().expect("expr before its alert name"), expr));
        }
    }
    out
}

/// Asserts `used` holds every one of `musts` (`why` + the one missing).
fn uses_all(used: &BTreeSet<String>, why: &str, musts: &[&str]) {
    for must in musts {
        assert!(used.contains(*must), "{why}{must}");
    }
}

/// promtool (Debian package prometheus, installed by scripts/deps.sh).
fn promtool(args: &[&str]) {
    asmguard_testkit::run_ok(
        std::process::Command::new("promtool")
            .args(args)
            .current_dir(dashboards_dir()),
    );
}

#[test]
fn alert_rules_pass_promtool_and_their_unit_tests() {
    promtool(&["check", "rules", "asmguard-alerts.yml"]);
    promtool(&["test", "rules", "asmguard-alerts.test.yml"]);
}

#[test]
fn alert_rules_query_only_emitted_metrics_and_labels() {
    let (names, mut labels) = emitted(&scrape_everything());
    // target labels Prometheus adds to every scraped series
    labels.extend(["instance".to_string(), "job".to_string()]);
    let rules = alert_rules();
    let mut used = BTreeSet::new();
    for (alert, e) in &rules {
        let found = metric_names(e);
        assert!(!found.is_empty(), "{alert}: no asmguard metric in {e}");
        for n in found {
            assert!(names.contains(&n), "{alert}: {n} is not emitted");
            used.insert(n);
        }
        for l in label_names(e) {
            assert!(labels.contains(&l), "{alert}: label {l} is not emitted");
        }
    }
    // the issue's alerts: protection off or degraded, denied writes, per-disk p99
    uses_all(
        &used,
        "no alert uses ",
        &[
            "asmguard_protected",
            "asmguard_backend_info",
            "asmguard_filter_mode",
            "asmguard_writes_denied_total",
            "asmguard_io_latency_seconds_bucket",
            "asmguard_path_io_latency_seconds_bucket",
            "asmguard_io_errors_total",
        ],
    );
    let p99 = rules
        .iter()
        .find(|(_, e)| e.starts_with("histogram_quantile(0.99,"))
        .expect("a p99 latency alert");
    for by in ["device", "le"] {
        assert!(label_names(&p99.1).contains(&by.to_string()), "{p99:?}");
    }
}

#[test]
fn alert_rule_extraction_reads_one_line_and_folded_exprs() {
    let rules = alert_rules();
    assert!(rules.len() >= 5, "{rules:?}");
    assert!(rules
        .iter()
        .any(|(n, e)| n == "AsmguardProtectionOff" && e == "asmguard_protected == 0"));
    let (_, p99) = rules
        .iter()
        .find(|(n, _)| n == "AsmguardDiskLatencyHigh")
        .expect("latency alert");
    assert!(p99.contains("[5m]))) > 0.02"), "{p99}");
}
