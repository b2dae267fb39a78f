//! Answer lines on the control socket: one JSON document and a newline per
//! line, written with a time limit so that a client that stops reading never
//! holds a task (the server's answers and reclaim's progress lines).

use asmguard_proto::Response;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::unix::OwnedWriteHalf;

/// Writes `line` and a newline; gives up after `limit`.
pub async fn send_line(
    wr: &mut OwnedWriteHalf,
    line: &str,
    limit: Duration,
) -> std::io::Result<()> {
    let mut line = line.to_string();
    line.push('\n');
    match tokio::time::timeout(limit, wr.write_all(line.as_bytes())).await {
        Ok(r) => r,
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "write timeout",
        )),
    }
}

/// Sends one answer line; a client that does not read for 30 s is given up.
pub async fn send(wr: &mut OwnedWriteHalf, r: &Response) -> std::io::Result<()> {
    send_line(wr, &r.to_line(), Duration::from_secs(30)).await
}
