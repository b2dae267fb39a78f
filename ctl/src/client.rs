//! Talking to asmguardd: one request line, one response line.

use crate::exit::{CliError, UNREACHABLE};
use asmguard_proto::{Op, Request, Response};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

pub fn call(socket: &Path, timeout: u64, op: Op) -> Result<serde_json::Value, CliError> {
    let shown = socket.display();
    let mut s = UnixStream::connect(socket).map_err(|e| {
        let why = match e.kind() {
            std::io::ErrorKind::NotFound => "no socket there".to_string(),
            std::io::ErrorKind::ConnectionRefused => "nothing listens there".to_string(),
            std::io::ErrorKind::PermissionDenied => "permission denied on the socket".to_string(),
            _ => e.to_string(),
        };
        CliError::new(
            UNREACHABLE,
            format!("asmguardd is not reachable at {shown}: {why} (is the service running? `systemctl status asmguard`; --socket or ASMGUARD_SOCKET pick another socket)"),
        )
    })?;
    let t = Some(Duration::from_secs(timeout.max(1)));
    let _ = s.set_read_timeout(t);
    let _ = s.set_write_timeout(t);
    let req = Request {
        id: std::process::id() as u64,
        op,
    };
    let mut line = req.to_line();
    line.push('\n');
    let lost = |e: std::io::Error| {
        let what = if matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ) {
            format!("no answer within {timeout} s (--timeout sets the limit)")
        } else {
            e.to_string()
        };
        CliError::new(UNREACHABLE, format!("asmguardd at {shown}: {what}"))
    };
    // The daemon answers a peer it refuses at once and closes: the write may
    // then fail (EPIPE) while its answer waits to be read.
    let written = s.write_all(line.as_bytes());
    let mut r = BufReader::new(s);
    let mut resp = String::new();
    let read = r.read_line(&mut resp);
    if resp.is_empty() {
        written.map_err(lost)?;
        read.map_err(lost)?;
        return Err(CliError::new(
            UNREACHABLE,
            format!("asmguardd at {shown} closed the connection without answering"),
        ));
    }
    let resp: Response = serde_json::from_str(&resp).map_err(|e| {
        CliError::new(
            UNREACHABLE,
            format!("asmguardd at {shown} answered something that is not a response: {e}"),
        )
    })?;
    Ok(resp.into_result()?)
}
