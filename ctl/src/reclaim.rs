//! `asmguardctl reclaim`: one request, progress lines on stderr while the daemon
//! works, then the result. Ctrl-C closes the connection, which cancels the job
//! in the daemon cleanly (its checkpoint stays: a rerun completes the job).

use crate::cli::{Global, ReclaimArgs};
use crate::exit::{CliError, BAD_INPUT, FAILED, REFUSED, UNREACHABLE};
use crate::size::human;
use asmguard_proto::{Op, ProgressLine, ReclaimResult, Request, Response};
use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

fn progress_text(p: &asmguard_proto::ReclaimProgress) -> String {
    if p.phase == "checking" {
        return format!(
            "{}: checking that the disk group is not mounted (watching the heartbeat for {:.1} s)",
            p.label, p.eta_seconds
        );
    }
    let limit = if p.rate_limit_bytes_per_sec > 0.0 {
        format!(" (limit {}/s)", human(p.rate_limit_bytes_per_sec as u64))
    } else {
        String::new()
    };
    let why = if p.rate_note.is_empty() {
        String::new()
    } else {
        format!("; rate {}", p.rate_note)
    };
    format!(
        "{}: {} of {} ({:.1}%), {}/s{limit}, ETA {:.0} s{why}",
        p.label,
        human(p.done_bytes),
        human(p.total_bytes),
        p.percent,
        human(p.rate_bytes_per_sec as u64),
        p.eta_seconds
    )
}

fn result_text(r: &ReclaimResult) -> String {
    let mut s = String::new();
    for d in &r.disks {
        let head = format!(
            "{} ({}, disk group {}): {} free AUs of {}",
            d.label,
            d.device,
            if d.disk_group.is_empty() {
                "?"
            } else {
                &d.disk_group
            },
            d.free_aus,
            human(d.ausize)
        );
        let head = if d.above_size {
            format!(
                "{} ({}, disk group {}): above the ASM size of {} AUs of {}",
                d.label,
                d.device,
                d.disk_group,
                d.dsksize_aus,
                human(d.ausize)
            )
        } else {
            head
        };
        if r.dry_run {
            s.push_str(&format!(
                "{head}: would hand back {} ({} bytes) in {} ranges by {}\n",
                human(d.planned_bytes),
                d.planned_bytes,
                d.ranges,
                d.method
            ));
        } else {
            s.push_str(&format!(
                "{head}: handed back {} ({} bytes) by {} in {:.1} s ({}/s){}{}\n",
                human(d.reclaimed_bytes),
                d.reclaimed_bytes,
                d.method,
                d.elapsed_seconds,
                human(d.rate_bytes_per_sec as u64),
                if d.resumed_from_bytes > 0 {
                    format!(", resumed after {}", human(d.resumed_from_bytes))
                } else {
                    String::new()
                },
                if d.cancelled { ", CANCELLED" } else { "" }
            ));
        }
        if let Some(st) = &d.stopped {
            s.push_str(&format!("  STOPPED: {}\n", st.message));
        }
        if d.at_blocks_valid < d.at_blocks_read {
            s.push_str(&format!(
                "  {} of {} allocation table blocks were not usable (their AUs were left alone): {}\n",
                d.at_blocks_read - d.at_blocks_valid,
                d.at_blocks_read,
                d.at_rejected.join("; ")
            ));
        }
    }
    if r.dry_run {
        s.push_str(&format!(
            "dry run: {} ({} bytes) would go back to the array; nothing was changed\n",
            human(r.planned_bytes),
            r.planned_bytes
        ));
    } else {
        s.push_str(&format!(
            "total: {} ({} bytes) handed back\n",
            human(r.reclaimed_bytes),
            r.reclaimed_bytes
        ));
    }
    s
}

pub fn run(c: &Global, a: &ReclaimArgs) -> Result<(), CliError> {
    if a.labels.is_empty() == a.diskgroup.is_none() {
        return Err(CliError::new(
            BAD_INPUT,
            "reclaim: give one or more labels, or --diskgroup NAME (not both)",
        ));
    }
    if !(a.latency_limit >= 0.0 && a.latency_limit.is_finite()) {
        return Err(CliError::new(
            BAD_INPUT,
            "reclaim: --latency-limit must be a multiple of 0 or more (0: a fixed rate)",
        ));
    }
    let rate = match a.rate {
        Some(r) if !(r > 0.0 && r.is_finite()) => {
            return Err(CliError::new(
                BAD_INPUT,
                "reclaim: --rate must be above 0 MiB/s",
            ))
        }
        Some(r) => (r * 1048576.0) as u64,
        None => 0,
    };
    let op = Op::Reclaim(asmguard_proto::ReclaimArgs {
        labels: a.labels.clone(),
        diskgroup: a.diskgroup.clone(),
        dry_run: a.dry_run,
        rate_bytes: rate,
        method: a.method,
        watch_seconds: a.watch,
        above_size: a.above_size,
        p99_multiple: a.latency_limit,
    });
    let shown = c.socket.display();
    let mut s = UnixStream::connect(&c.socket).map_err(|e| {
        CliError::new(
            UNREACHABLE,
            format!("asmguardd is not reachable at {shown}: {e} (is the service running? `systemctl status asmguard`)"),
        )
    })?;
    // Progress comes at least every second while discarding; the watch window is
    // quiet: wait that long on top of --timeout.
    let t = Duration::from_secs(c.timeout.max(1))
        + Duration::from_secs_f64(if a.above_size { 0.0 } else { a.watch });
    let _ = s.set_read_timeout(Some(t));
    let _ = s.set_write_timeout(Some(Duration::from_secs(c.timeout.max(1))));
    let req = Request {
        id: std::process::id() as u64,
        op,
    };
    let mut line = req.to_line();
    line.push('\n');
    let lost = |e: std::io::Error| CliError::new(UNREACHABLE, format!("asmguardd at {shown}: {e}"));
    s.write_all(line.as_bytes()).map_err(lost)?;
    let mut r = BufReader::new(s);
    let tty = std::io::stderr().is_terminal();
    let mut shown_progress = false;
    loop {
        let mut l = String::new();
        r.read_line(&mut l).map_err(lost)?;
        if l.is_empty() {
            return Err(CliError::new(
                UNREACHABLE,
                format!("asmguardd at {shown} closed the connection without answering"),
            ));
        }
        let v: serde_json::Value = serde_json::from_str(&l).map_err(|e| {
            CliError::new(
                UNREACHABLE,
                format!("asmguardd answered something that is not JSON: {e}"),
            )
        })?;
        if v.get("progress").is_some() {
            let p: ProgressLine = serde_json::from_value(v)
                .map_err(|e| CliError::new(FAILED, format!("bad progress line: {e}")))?;
            if a.json {
                errln!("{}", serde_json::to_string(&p.progress).unwrap_or_default());
            } else if tty {
                err!("\r\x1b[K{}", progress_text(&p.progress));
                shown_progress = true;
            } else {
                errln!("{}", progress_text(&p.progress));
            }
            continue;
        }
        if shown_progress {
            errln!();
        }
        let resp: Response = serde_json::from_value(v)
            .map_err(|e| CliError::new(UNREACHABLE, format!("not a response: {e}")))?;
        let v = resp.into_result()?;
        let res: ReclaimResult = serde_json::from_value(v.clone())
            .map_err(|e| CliError::new(FAILED, format!("unexpected answer: {e}")))?;
        if a.json {
            outln!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        } else {
            out!("{}", result_text(&res));
        }
        // The stop rule: the disk changed under the run (exit 4, what and when).
        let stops: Vec<&str> = res
            .disks
            .iter()
            .filter_map(|d| d.stopped.as_ref())
            .filter(|s| s.what != "not_started")
            .map(|s| s.message.as_str())
            .collect();
        if !stops.is_empty() {
            return Err(CliError::new(REFUSED, stops.join("; ")));
        }
        if res.disks.iter().any(|d| d.cancelled) {
            return Err(CliError::new(
                FAILED,
                "reclaim was cancelled; run it again to complete it",
            ));
        }
        return Ok(());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use asmguard_proto::{ReclaimDisk, ReclaimProgress, ReclaimStop};

    #[test]
    fn progress_names_the_limit_and_why_it_changed() {
        let mut p = ReclaimProgress {
            phase: "reclaiming".into(),
            label: "DATA1".into(),
            done_bytes: 1 << 30,
            total_bytes: 4 << 30,
            percent: 25.0,
            rate_bytes_per_sec: 30.0 * 1048576.0,
            eta_seconds: 100.0,
            rate_limit_bytes_per_sec: 0.0,
            rate_note: String::new(),
        };
        let t = progress_text(&p);
        assert!(!t.contains("limit") && !t.contains("; rate"), "{t}");
        p.rate_limit_bytes_per_sec = 16.0 * 1048576.0;
        p.rate_note = "halved: disk p99 64.000 ms above 4 x 1.000 ms before the run".into();
        let t = progress_text(&p);
        assert!(t.contains("(limit 16.00 MiB/s)"), "{t}");
        assert!(
            t.ends_with("; rate halved: disk p99 64.000 ms above 4 x 1.000 ms before the run"),
            "{t}"
        );
    }

    #[test]
    fn a_stopped_disk_says_so_and_above_size_names_the_size() {
        let v = serde_json::json!({
            "label": "DATA1", "device": "/dev/sdb", "disk_group": "DATA",
            "method": "discard", "ausize": 1048576, "dsksize_aus": 800,
            "free_aus": 200, "at_blocks_read": 0, "at_blocks_valid": 0,
            "planned_bytes": 209715200, "ranges": 2, "unaligned_bytes": 0,
            "reclaimed_bytes": 1048576, "resumed_from_bytes": 0, "cancelled": false,
            "scan_seconds": 0.0, "elapsed_seconds": 1.0, "rate_bytes_per_sec": 1.0,
            "discard_granularity": 4096, "discard_max_bytes": 1073741824,
            "above_size": true
        });
        let mut d: ReclaimDisk = serde_json::from_value(v).unwrap();
        d.stopped = Some(ReclaimStop {
            what: "disk_size".into(),
            message: "DATA1: the disk size changed from 800 to 1000 AUs at 12:03:04".into(),
            done_bytes: 1048576,
            seen_at: "12:03:04".into(),
        });
        let r = ReclaimResult {
            dry_run: false,
            disks: vec![d],
            planned_bytes: 209715200,
            reclaimed_bytes: 1048576,
        };
        let t = result_text(&r);
        assert!(
            t.contains("above the ASM size of 800 AUs of 1.00 MiB"),
            "{t}"
        );
        assert!(
            t.contains("  STOPPED: DATA1: the disk size changed from 800 to 1000 AUs"),
            "{t}"
        );
    }
}
