//! `asmguardctl iostat`: two snapshots of the daemon's latency histograms (its
//! `iostat` op) an interval apart, shown per disk and operation in the layout
//! of Oracle's wait-event histogram.

use crate::cli::{Global, IostatArgs};
use crate::exit::{CliError, BAD_INPUT, FAILED};
use asmguard_iostat::Snapshot;
use std::time::{Duration, Instant};

pub fn run(c: &Global, a: &IostatArgs) -> Result<(), CliError> {
    if !a.interval.is_finite() || a.interval <= 0.0 || a.interval > 86400.0 {
        return Err(CliError::new(
            BAD_INPUT,
            format!(
                "--interval {} is not a number of seconds between 0 and 86400",
                a.interval
            ),
        ));
    }
    let read = || -> Result<(Snapshot, Instant), CliError> {
        let v = crate::client::call(&c.socket, c.timeout, asmguard_proto::Op::Iostat)?;
        let at = Instant::now();
        let snap = serde_json::from_value(v).map_err(|e| {
            CliError::new(
                FAILED,
                format!("the daemon's iostat answer is unreadable: {e}"),
            )
        })?;
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
        let report =
            asmguard_iostat::iostat(&prev, &cur, at - prev_at, a.label.as_deref(), a.paths);
        if a.json {
            outln!("{}", report.to_json());
        } else {
            out!("{}", report.to_text());
            if a.count != 1 {
                outln!();
            }
        }
        n += 1;
        if (a.count != 0 && n >= a.count) || crate::out::stopped() {
            return Ok(());
        }
        (prev, prev_at) = (cur, at);
    }
}
