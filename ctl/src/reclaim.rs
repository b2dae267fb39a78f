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
                eprintln!("{}", serde_json::to_string(&p.progress).unwrap_or_default());
            } else if tty {
                eprint!("\r\x1b[K{}", progress_text(&p.progress));
                shown_progress = true;
            } else {
                eprintln!("{}", progress_text(&p.progress));
            }
            continue;
        }
        if shown_progress {
            eprintln!();
        }
        let resp: Response = serde_json::from_value(v)
            .map_err(|e| CliError::new(UNREACHABLE, format!("not a response: {e}")))?;
        let v = resp.into_result()?;
        let res: ReclaimResult = serde_json::from_value(v.clone())
            .map_err(|e| CliError::new(FAILED, format!("unexpected answer: {e}")))?;
        if a.json {
            println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        } else {
            print!("{}", result_text(&res));
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
