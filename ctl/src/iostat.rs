//! `asmguardctl iostat`: two scrapes of the daemon's metrics endpoint an interval
//! apart, shown per disk and operation in the layout of Oracle's wait-event histogram.

use crate::cli::{Cli, IostatArgs};
use crate::exit::{CliError, BAD_INPUT, FAILED, UNREACHABLE};
use asmguard_metrics::{http, Snapshot};
use std::time::{Duration, Instant};

/// The endpoint `status` reports: its first word when it is an http URL.
fn endpoint(c: &Cli) -> Result<String, CliError> {
    let v = crate::client::call(&c.socket, c.timeout, asmguard_proto::Op::Status)?;
    let addr = v["metrics_address"].as_str().unwrap_or_default();
    match addr.split_whitespace().next() {
        Some(u) if u.starts_with("http://") => Ok(u.to_string()),
        _ => Err(CliError::new(
            UNREACHABLE,
            format!("the daemon serves no metrics endpoint ({addr}): check [metrics] listen in the configuration"),
        )),
    }
}

pub fn run(c: &Cli, a: &IostatArgs) -> Result<(), CliError> {
    if !a.interval.is_finite() || a.interval <= 0.0 || a.interval > 86400.0 {
        return Err(CliError::new(
            BAD_INPUT,
            format!(
                "--interval {} is not a number of seconds between 0 and 86400",
                a.interval
            ),
        ));
    }
    let url = match &a.url {
        Some(u) => u.clone(),
        None => endpoint(c)?,
    };
    let read = || -> Result<(Snapshot, Instant), CliError> {
        let text = http::scrape_blocking(&url, false)
            .map_err(|e| CliError::new(UNREACHABLE, format!("{url}: {e}")))?;
        let at = Instant::now();
        let snap = Snapshot::from_prometheus_text(&text)
            .map_err(|e| CliError::new(FAILED, format!("{url}: unreadable metrics: {e}")))?;
        Ok((snap, at))
    };
    let (mut prev, mut prev_at) = read()?;
    if let Some(l) = &a.label {
        if !prev.entries.iter().any(|e| &e.label == l) {
            return Err(CliError::new(
                BAD_INPUT,
                format!("no traced disk has the label {l} (asmguardctl lsdsk lists the labels)"),
            ));
        }
    }
    let mut n = 0u64;
    loop {
        std::thread::sleep(Duration::from_secs_f64(a.interval));
        let (cur, at) = read()?;
        let report = asmguard_metrics::iostat(&prev, &cur, at - prev_at, a.label.as_deref());
        if a.json {
            println!("{}", report.to_json());
        } else {
            print!("{}", report.to_text());
            if a.count != 1 {
                println!();
            }
        }
        n += 1;
        if a.count != 0 && n >= a.count {
            return Ok(());
        }
        (prev, prev_at) = (cur, at);
    }
}
