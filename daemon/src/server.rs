//! The control socket: newline-delimited JSON, one request per line, bounded size,
//! idle timeout, authorisation by SO_PEERCRED. No request can stop the daemon: every
//! operation runs in its own task and a panic there becomes an `internal` error.

use crate::state::Daemon;
use asmguard_proto::{
    parse_request, Access, ErrorBody, ErrorCode, Op, Request, Response, MAX_REQUEST_LEN,
};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Semaphore;

/// At most this many connections are served at once; more get a `busy` error.
const MAX_CONNECTIONS: usize = 512;

/// Bind the socket: its directory is made (0755) if missing, a stale socket file is
/// replaced, a live one (another daemon) is an error. Mode 0666: everyone may connect,
/// the daemon decides by SO_PEERCRED and answers refusals with a clear error.
pub fn bind(path: &Path) -> Result<UnixListener, String> {
    if let Some(dir) = path.parent() {
        if !dir.exists() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("{}: cannot create: {e}", dir.display()))?;
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755));
        }
    }
    if let Ok(m) = std::fs::symlink_metadata(path) {
        if !m.file_type().is_socket() {
            return Err(format!(
                "{}: exists and is not a socket: refusing to replace it",
                path.display()
            ));
        }
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(format!(
                "{}: another asmguardd is already listening there",
                path.display()
            ));
        }
        std::fs::remove_file(path)
            .map_err(|e| format!("{}: cannot remove the stale socket: {e}", path.display()))?;
    }
    let l =
        UnixListener::bind(path).map_err(|e| format!("{}: cannot listen: {e}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))
        .map_err(|e| format!("{}: cannot set its mode: {e}", path.display()))?;
    Ok(l)
}

pub async fn serve(listener: UnixListener, d: Arc<Daemon>) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                // EMFILE and friends: wait a little instead of spinning.
                tracing::warn!("accept: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let d = d.clone();
        match slots.clone().try_acquire_owned() {
            Ok(permit) => {
                tokio::spawn(async move {
                    connection(stream, d).await;
                    drop(permit);
                });
            }
            Err(_) => {
                tokio::spawn(async move {
                    let mut s = stream;
                    let r = Response::err(
                        0,
                        ErrorBody::new(
                            ErrorCode::Busy,
                            "too many connections to asmguardd; try again",
                        ),
                    );
                    let _ = tokio::time::timeout(
                        Duration::from_secs(2),
                        s.write_all(format!("{}\n", r.to_line()).as_bytes()),
                    )
                    .await;
                });
            }
        }
    }
}

/// Who is on the other end: ids and supplementary groups as the kernel recorded
/// them when the peer connected (never read back from /proc, where the pid may
/// be reused by then).
#[derive(Debug, Clone)]
struct Peer {
    uid: u32,
    gid: u32,
    pid: Option<i32>,
    groups: Vec<u32>,
}

/// The peer's supplementary groups (`SO_PEERGROUPS`, Linux 4.13+).
fn peer_groups(fd: std::os::fd::BorrowedFd<'_>) -> std::io::Result<Vec<u32>> {
    use std::os::fd::AsRawFd;
    let mut n = 64usize;
    loop {
        let mut buf = vec![0u32; n];
        let mut len = (n * std::mem::size_of::<u32>()) as libc::socklen_t;
        // SAFETY: buf has room for `len` bytes; getsockopt writes at most that
        // many and sets `len` to what it wrote (or, on ERANGE, to what it needs).
        let r = unsafe {
            libc::getsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_PEERGROUPS,
                buf.as_mut_ptr().cast(),
                &mut len,
            )
        };
        let got = len as usize / std::mem::size_of::<u32>();
        if r == 0 {
            buf.truncate(got);
            return Ok(buf);
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ERANGE) && got > n {
            n = got;
            continue;
        }
        return Err(e);
    }
}

fn authorise(d: &Daemon, peer: &Peer, op: &Op) -> Result<(), ErrorBody> {
    if peer.uid == 0 {
        return Ok(());
    }
    match op.access() {
        Access::Write => Err(ErrorBody::new(
            ErrorCode::PermissionDenied,
            format!(
                "permission denied: `{}` changes disks and needs root (you are uid {})",
                op.name(),
                peer.uid
            ),
        )),
        Access::Read => {
            let admin = d
                .admin_gid
                .is_some_and(|g| peer.gid == g || peer.groups.contains(&g));
            if admin {
                Ok(())
            } else {
                Err(ErrorBody::new(
                    ErrorCode::PermissionDenied,
                    format!(
                        "permission denied: `{}` needs root or membership of group {}{} (you are uid {})",
                        op.name(),
                        d.cfg.socket.admin_group,
                        if d.admin_gid.is_none() { ", which does not exist on this host" } else { "" },
                        peer.uid
                    ),
                ))
            }
        }
    }
}

enum Line {
    Data(Vec<u8>),
    TooLong,
    Eof,
}

/// Read one line of at most `MAX_REQUEST_LEN` bytes without ever buffering more.
async fn read_line<R: tokio::io::AsyncBufRead + Unpin>(r: &mut R) -> std::io::Result<Line> {
    let mut out = Vec::new();
    loop {
        let buf = r.fill_buf().await?;
        if buf.is_empty() {
            return Ok(if out.is_empty() {
                Line::Eof
            } else {
                Line::Data(out)
            });
        }
        if let Some(i) = buf.iter().position(|&b| b == b'\n') {
            if out.len() + i > MAX_REQUEST_LEN {
                r.consume(i + 1);
                return Ok(Line::TooLong);
            }
            out.extend_from_slice(&buf[..i]);
            r.consume(i + 1);
            return Ok(Line::Data(out));
        }
        let n = buf.len();
        if out.len() + n > MAX_REQUEST_LEN {
            return Ok(Line::TooLong);
        }
        out.extend_from_slice(buf);
        r.consume(n);
    }
}

async fn connection(stream: UnixStream, d: Arc<Daemon>) {
    let peer = match stream.peer_cred() {
        Ok(c) => Peer {
            uid: c.uid(),
            gid: c.gid(),
            pid: c.pid(),
            groups: {
                use std::os::fd::AsFd;
                peer_groups(stream.as_fd()).unwrap_or_else(|e| {
                    tracing::warn!("SO_PEERGROUPS: {e}: only the primary group counts");
                    Vec::new()
                })
            },
        },
        Err(e) => {
            tracing::warn!("SO_PEERCRED: {e}");
            return;
        }
    };
    let timeout = Duration::from_secs(d.cfg.socket.timeout_seconds);
    let (rd, mut wr) = stream.into_split();
    let mut rd = BufReader::with_capacity(16 * 1024, rd);
    loop {
        let line = match tokio::time::timeout(timeout, read_line(&mut rd)).await {
            Err(_) => {
                let r = Response::err(
                    0,
                    ErrorBody::new(
                        ErrorCode::BadRequest,
                        format!(
                            "no complete request within {} s: closing the connection",
                            timeout.as_secs()
                        ),
                    ),
                );
                let _ = send(&mut wr, &r).await;
                return;
            }
            Ok(Err(_)) | Ok(Ok(Line::Eof)) => return,
            Ok(Ok(Line::TooLong)) => {
                let r = Response::err(
                    0,
                    ErrorBody::new(ErrorCode::TooLarge, format!("request line longer than {MAX_REQUEST_LEN} bytes: closing the connection")),
                );
                let _ = send(&mut wr, &r).await;
                return;
            }
            Ok(Ok(Line::Data(l))) => l,
        };
        if line.iter().all(|b| b.is_ascii_whitespace()) {
            continue;
        }
        let resp = match parse_request(&line) {
            Err((id, e)) => Response::err(id, e),
            Ok(req) => match authorise(&d, &peer, &req.op) {
                Err(e) => {
                    tracing::info!(
                        "refused `{}` from uid {} pid {:?}",
                        req.op.name(),
                        peer.uid,
                        peer.pid
                    );
                    Response::err(req.id, e)
                }
                Ok(()) => {
                    // `reclaim` streams progress lines and watches the connection.
                    if let Op::Reclaim(a) = &req.op {
                        tracing::info!("uid {} pid {:?} asks: {:?}", peer.uid, peer.pid, req.op);
                        let a = a.clone();
                        if crate::reclaim::serve(d.clone(), req.id, a, &mut rd, &mut wr)
                            .await
                            .is_err()
                        {
                            return;
                        }
                        continue;
                    }
                    dispatch(d.clone(), req, peer.clone()).await
                }
            },
        };
        if send(&mut wr, &resp).await.is_err() {
            return;
        }
    }
}

async fn send(wr: &mut tokio::net::unix::OwnedWriteHalf, r: &Response) -> std::io::Result<()> {
    let mut line = r.to_line();
    line.push('\n');
    match tokio::time::timeout(Duration::from_secs(30), wr.write_all(line.as_bytes())).await {
        Ok(r) => r,
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "write timeout",
        )),
    }
}

fn to_value<T: serde::Serialize>(v: T) -> Result<serde_json::Value, ErrorBody> {
    serde_json::to_value(v)
        .map_err(|e| ErrorBody::new(ErrorCode::Internal, format!("encoding the result: {e}")))
}

async fn dispatch(d: Arc<Daemon>, req: Request, peer: Peer) -> Response {
    let id = req.id;
    let name = req.op.name();
    let audit = req.op.access() == Access::Write;
    if audit {
        tracing::info!("uid {} pid {:?} asks: {:?}", peer.uid, peer.pid, req.op);
    }
    let r = tokio::task::spawn_blocking(move || -> Result<serde_json::Value, ErrorBody> {
        match &req.op {
            Op::Ping => to_value(serde_json::json!({"daemon_version": env!("CARGO_PKG_VERSION")})),
            Op::Lsdsk => to_value(d.lsdsk()),
            Op::Scan => {
                d.full_scan().map_err(|e| {
                    ErrorBody::new(
                        ErrorCode::IoError,
                        format!("scan: reading /sys/class/block: {e}"),
                    )
                })?;
                to_value(d.lsdsk())
            }
            Op::Status => to_value(d.status()),
            Op::Label(a) => to_value(d.label(a)?),
            Op::Unlabel(a) => to_value(d.unlabel(a)?),
            Op::Rename(a) => to_value(d.rename(a)?),
            Op::Filter(a) => {
                let f = d.filter.get().ok_or_else(|| {
                    ErrorBody::new(ErrorCode::Internal, "the write filter is not started")
                })?;
                let action = crate::filter::action(&a.action).ok_or_else(|| {
                    ErrorBody::new(ErrorCode::BadRequest, "unknown filter action")
                })?;
                let labels = f.set_mode(a.label.as_deref(), action).map_err(|m| {
                    let code = if m.starts_with("no managed disk") {
                        ErrorCode::NotFound
                    } else {
                        ErrorCode::IoError
                    };
                    ErrorBody::new(code, m)
                })?;
                tracing::info!(
                    "filter {} {}: uid {} pid {:?}",
                    a.action,
                    a.label.as_deref().unwrap_or("(all disks)"),
                    peer.uid,
                    peer.pid
                );
                to_value(asmguard_proto::FilterResult {
                    action: a.action.clone(),
                    labels,
                    backend: f.status().backend,
                })
            }
            Op::Reclaim(_) => Err(ErrorBody::new(
                ErrorCode::Internal,
                "`reclaim` is served on its connection (crate::reclaim)",
            )),
            Op::Events(a) => {
                let f = d.filter.get().ok_or_else(|| {
                    ErrorBody::new(ErrorCode::Internal, "the write filter is not started")
                })?;
                let events: Vec<_> = f
                    .events_after(a.after)
                    .iter()
                    .map(crate::filter::info)
                    .collect();
                let last_seq = events.last().map(|e| e.seq).unwrap_or(a.after);
                to_value(asmguard_proto::EventsResult { events, last_seq })
            }
        }
    })
    .await;
    match r {
        Ok(Ok(v)) => Response::ok(id, v),
        Ok(Err(e)) => {
            if audit {
                tracing::warn!(
                    "uid {} pid {:?}: `{name}` refused: {}",
                    peer.uid,
                    peer.pid,
                    e.message
                );
            }
            Response::err(id, e)
        }
        Err(e) => {
            tracing::error!("`{name}` failed internally: {e}");
            Response::err(
                id,
                ErrorBody::new(
                    ErrorCode::Internal,
                    format!(
                        "`{name}` failed inside asmguardd (a bug; the daemon keeps running): {e}"
                    ),
                ),
            )
        }
    }
}

#[cfg(test)]
mod peer_tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn peer_groups_are_the_connecting_process_groups() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let mut got = peer_groups(a.as_fd()).unwrap();
        let mut want: Vec<u32> = nix::unistd::getgroups()
            .unwrap()
            .into_iter()
            .map(|g| g.as_raw())
            .collect();
        got.sort_unstable();
        want.sort_unstable();
        want.dedup();
        got.dedup();
        assert_eq!(got, want);
    }
}
