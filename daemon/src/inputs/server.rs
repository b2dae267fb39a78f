//! The control socket: newline-delimited JSON, one request per line, bounded size,
//! idle timeout, authorisation by SO_PEERCRED and by where the peer runs (the
//! host; a configured container, whose root and admin group are its own, as its
//! id maps give them; another container: never more than the host would allow,
//! never a state change). No request can stop the daemon: every operation runs
//! in its own task and a panic there becomes an `internal` error.

use crate::daemon::Daemon;
use crate::inputs::wire;
use asmguard_proto::{parse_request, Access, ErrorBody, ErrorCode, Op, Response, MAX_REQUEST_LEN};
use std::collections::HashMap;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Semaphore;

/// Connections root may hold at once (its own pool: nobody else can take them).
const ROOT_SLOTS: usize = 64;
/// Connections the admin group's users may hold at once, all together ...
const ADMIN_SLOTS: usize = 448;
/// ... and each of them.
const PER_UID_SLOTS: usize = 32;

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

/// Accepts connections. Peers are identified at once (SO_PEERCRED,
/// SO_PEERGROUPS): one that may do nothing (neither root nor in the admin group)
/// gets one `permission_denied` line and is closed, holding nothing. Root has its
/// own slots; the admin group's users share theirs, each uid bounded, so no user
/// can lock root or the others out.
pub async fn serve(listener: UnixListener, d: Arc<Daemon>) {
    let root_slots = Arc::new(Semaphore::new(ROOT_SLOTS));
    let admin_slots = Arc::new(Semaphore::new(ADMIN_SLOTS));
    let per_uid: Arc<std::sync::Mutex<HashMap<u32, usize>>> = Arc::default();
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
        // a few /proc reads (a peer in a container): off the runtime's workers
        let Some(peer) = tokio::task::block_in_place(|| peer_of(&stream, &d)) else {
            continue;
        };
        if !may_read(&d, &peer) {
            refuse_now(&stream, ErrorCode::PermissionDenied, not_served(&d, &peer));
            continue;
        }
        let permit = if peer.host_root() {
            root_slots.clone().try_acquire_owned().ok()
        } else {
            let mut m = per_uid.lock().unwrap_or_else(|p| p.into_inner());
            let n = m.entry(peer.uid).or_insert(0);
            if *n >= PER_UID_SLOTS {
                None
            } else {
                let p = admin_slots.clone().try_acquire_owned().ok();
                if p.is_some() {
                    *n += 1;
                }
                p
            }
        };
        let Some(permit) = permit else {
            let held = per_uid
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&peer.uid)
                .copied()
                .unwrap_or(0);
            let msg = busy_message(
                peer.host_root(),
                peer.uid,
                held,
                &d.applied().world.conf.cfg.socket.admin_group,
            );
            refuse_now(&stream, ErrorCode::Busy, msg);
            continue;
        };
        let d = d.clone();
        let per_uid = per_uid.clone();
        tokio::spawn(async move {
            let (uid, root) = (peer.uid, peer.host_root());
            connection(stream, d, peer).await;
            drop(permit);
            if !root {
                let mut m = per_uid.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(n) = m.get_mut(&uid) {
                    *n = n.saturating_sub(1);
                    if *n == 0 {
                        m.remove(&uid);
                    }
                }
            }
        });
    }
}

/// Why a connection was refused as busy: host root's own slots, this uid's own
/// limit, or the pool everyone else shares (then the uid may hold none). A
/// container's root, privileged or not, is in that pool: it cannot take the
/// host root's slots.
fn busy_message(root: bool, uid: u32, held: usize, admin_group: &str) -> String {
    if root {
        format!("all {ROOT_SLOTS} connections reserved for root are in use; try again")
    } else if held >= PER_UID_SLOTS {
        format!(
            "uid {uid} already holds {held} connections to asmguardd, the limit per user; \
             close some or try again"
        )
    } else {
        format!(
            "all {ADMIN_SLOTS} connections shared by the members of group {admin_group} are in use \
             (uid {uid} holds {held}); try again"
        )
    }
}

/// Answers with one error line, if the socket takes it right away (a fresh
/// connection's buffer is empty), and closes: no task, no waiting.
fn refuse_now(stream: &UnixStream, code: ErrorCode, msg: String) {
    let r = Response::err(0, ErrorBody::new(code, msg));
    let _ = stream.try_write(format!("{}\n", r.to_line()).as_bytes());
}

fn peer_of(stream: &UnixStream, d: &Daemon) -> Option<Peer> {
    use std::os::fd::AsFd;
    match stream.peer_cred() {
        Ok(c) => {
            let (place, sys_admin) = place_of(d, stream.as_fd(), c.pid());
            Some(Peer {
                sys_admin,
                uid: c.uid(),
                gid: c.gid(),
                pid: c.pid(),
                groups: peer_groups(stream.as_fd()).unwrap_or_else(|e| {
                    tracing::warn!("SO_PEERGROUPS: {e}: only the primary group counts");
                    Vec::new()
                }),
                place,
            })
        }
        Err(e) => {
            tracing::warn!("SO_PEERCRED: {e}");
            None
        }
    }
}

/// Where the peer runs and whether it holds `CAP_SYS_ADMIN` of the host, read
/// at accept time: its cgroup against the `[[container]]` sections; outside
/// them the host only when its pid, user and cgroup namespaces are all the
/// daemon's (a `--pid=host` container is not the host). The answer is kept only
/// if the process read is the peer: with `SO_PEERPIDFD` (Linux 6.5+) if the
/// process that connected is still alive after the reads (so its pid named it
/// throughout); without, a pidfd taken now must still be alive after the reads
/// and its process hold the other end of the connection (a reused pid's
/// process does not). A peer that cannot be verified is foreign, with no
/// capability.
fn place_of(d: &Daemon, fd: std::os::fd::BorrowedFd<'_>, pid: Option<i32>) -> (Place, bool) {
    let Some(pid) = pid.and_then(|p| u32::try_from(p).ok()).filter(|p| *p > 0) else {
        // not in the daemon's pid namespace or one below it
        return (Place::Foreign, false);
    };
    let (pidfd, opened) = match peer_pidfd(fd) {
        Some(Ok(f)) => (f, false),
        Some(Err(e)) => {
            tracing::debug!("SO_PEERPIDFD of pid {pid}: {e}");
            return (Place::Foreign, false);
        }
        None => match crate::inputs::peer::pidfd_open(pid) {
            Ok(f) => (f, true),
            Err(e) => {
                tracing::debug!("pidfd_open({pid}): {e}");
                return (Place::Foreign, false);
            }
        },
    };
    let root = d.site.cgroup_root.clone();
    // the sections in force (SIGHUP may have changed them)
    let cs = d.applied().world.conf.cfg.container.clone();
    let section = root
        .as_deref()
        .and_then(|r| asmguard_containers::container_of(&d.site.paths.proc, r, &cs, pid));
    let host = asmguard_containers::on_host(&d.site.paths.proc, pid);
    let sys_admin = host && asmguard_containers::has_sys_admin(&d.site.paths.proc, pid);
    let place = match section {
        Some(c) => container_place(d, root.as_deref(), c),
        None if host => Place::Host,
        None => Place::Foreign,
    };
    if exited(&pidfd) {
        return (Place::Foreign, false);
    }
    if opened {
        match crate::inputs::peer::holds_peer(&d.site.paths.proc, pid, fd) {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(
                    "socket peer pid {pid}: the process with that pid now does not hold the connection (it exited and the pid was reused): served as foreign"
                );
                return (Place::Foreign, false);
            }
            Err(e) => {
                tracing::warn!(
                    "socket peer pid {pid}: cannot tell whether it still holds the connection (this kernel has no SO_PEERPIDFD, and unix_diag answered: {e}; load the unix_diag module): served as foreign, no state changes"
                );
                return (Place::Foreign, false);
            }
        }
    }
    (place, sys_admin)
}

/// How long the accept loop waits for a container's /etc/group.
const CONTAINER_READ: Duration = Duration::from_millis(500);

/// A peer in the configured container `c`: the host ids of its root and of
/// its admin group, translated through the container's own maps (never the
/// peer's: a user namespace the peer made can map anything to its own id).
fn container_place(d: &Daemon, root: Option<&Path>, c: &asmguard_config::Container) -> Place {
    let group = c
        .admin_group
        .clone()
        .unwrap_or_else(|| d.applied().world.conf.cfg.socket.admin_group.clone());
    let (root_uid, admin_gid) = match root {
        Some(r) => {
            // as last resolved while its process is still in it; else found now
            let f = d
                .applied()
                .world
                .containers
                .found(&c.name)
                .cloned()
                .filter(|f| {
                    f.pid.is_some_and(|p| {
                        asmguard_containers::container_of(
                            &d.site.paths.proc,
                            r,
                            std::slice::from_ref(c),
                            p,
                        )
                        .is_some()
                    })
                })
                .unwrap_or_else(|| asmguard_containers::find(&d.site.paths.proc, r, c));
            let u = asmguard_containers::host_uid(&f, "0");
            // the container's /etc/group may never answer (FUSE): the accept
            // loop waits for it at most CONTAINER_READ, once per stall
            let g = asmguard_containers::host_gid_within(&f, &group, CONTAINER_READ);
            for e in [u.as_ref().err(), g.as_ref().err()].into_iter().flatten() {
                tracing::debug!("socket peer in container {}: {e}", c.name);
            }
            (u.ok(), g.ok())
        }
        None => (None, None),
    };
    Place::Container {
        name: c.name.clone(),
        admin: c.admin,
        admin_group: group,
        root_uid,
        admin_gid,
    }
}

/// The peer's pidfd (`SO_PEERPIDFD`); `None` where the kernel has none.
fn peer_pidfd(fd: std::os::fd::BorrowedFd<'_>) -> Option<std::io::Result<std::os::fd::OwnedFd>> {
    use std::os::fd::{AsRawFd, FromRawFd};
    let mut pidfd: libc::c_int = -1;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `pidfd` is a c_int and `len` its size; getsockopt writes at most
    // that many bytes.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERPIDFD,
            (&mut pidfd as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if r != 0 {
        let e = std::io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::ENOPROTOOPT) | Some(libc::EINVAL) => None,
            _ => Some(Err(e)),
        };
    }
    // SAFETY: the kernel gave us this new descriptor; nothing else owns it.
    Some(Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(pidfd) }))
}

/// Whether the process of `pidfd` has exited (a pidfd polls readable then).
fn exited(pidfd: &std::os::fd::OwnedFd) -> bool {
    use std::os::fd::AsFd;
    let mut fds = [nix::poll::PollFd::new(
        pidfd.as_fd(),
        nix::poll::PollFlags::POLLIN,
    )];
    match nix::poll::poll(&mut fds, nix::poll::PollTimeout::ZERO) {
        Ok(n) => n > 0,
        Err(_) => true,
    }
}

fn is_admin(d: &Daemon, peer: &Peer) -> bool {
    d.applied()
        .world
        .conf
        .admin_gid
        .is_some_and(|g| peer.in_group(g))
}

/// Whether the peer may read (and so is served at all): host root and the
/// admin group's members; in a configured container its root and the members
/// of its admin group (as the container maps them); in another container
/// whoever would be served on the host.
fn may_read(d: &Daemon, peer: &Peer) -> bool {
    match &peer.place {
        Place::Host | Place::Foreign => peer.uid == 0 || is_admin(d, peer),
        Place::Container {
            root_uid,
            admin_gid,
            ..
        } => *root_uid == Some(peer.uid) || admin_gid.is_some_and(|g| peer.in_group(g)),
    }
}

/// The refusal of a peer that may not even read.
fn not_served(d: &Daemon, peer: &Peer) -> String {
    match &peer.place {
        Place::Container {
            name, admin_group, ..
        } => format!(
            "permission denied: asmguardd serves container {name} only to its root and the members \
             of its group {admin_group} (you are host uid {}): it needs one of those",
            peer.uid
        ),
        Place::Host | Place::Foreign => format!(
            "permission denied: asmguardd serves root and members of group {}{} only \
             (you are uid {}): it needs root or membership of group {}",
            d.applied().world.conf.cfg.socket.admin_group,
            if d.applied().world.conf.admin_gid.is_none() {
                ", which does not exist on this host,"
            } else {
                ""
            },
            peer.uid,
            d.applied().world.conf.cfg.socket.admin_group
        ),
    }
}

/// Who is on the other end: ids and supplementary groups as the kernel recorded
/// them when the peer connected (never read back from /proc, where the pid may
/// be reused by then), and where it runs (read at accept time).
#[derive(Debug, Clone)]
struct Peer {
    uid: u32,
    gid: u32,
    pid: Option<i32>,
    groups: Vec<u32>,
    place: Place,
    /// `CAP_SYS_ADMIN` in the host's user namespace (effective set).
    sys_admin: bool,
}

impl Peer {
    /// Root of the host: uid 0 in the host's namespaces (never a container's
    /// root, privileged or not).
    fn host_root(&self) -> bool {
        self.uid == 0 && matches!(self.place, Place::Host)
    }

    /// The host's administrator: its root holding `CAP_SYS_ADMIN` (a root
    /// whose capabilities were dropped, `--cap-drop=all`, reads at most).
    fn host_admin(&self) -> bool {
        self.host_root() && self.sys_admin
    }

    fn in_group(&self, g: u32) -> bool {
        self.gid == g || self.groups.contains(&g)
    }

    /// ` (container rac1)` or ` (in a container)`, for the journal.
    fn whence(&self) -> String {
        match &self.place {
            Place::Host => String::new(),
            Place::Container { name, .. } => format!(" (container {name})"),
            Place::Foreign => " (in a container no [[container]] section names)".into(),
        }
    }
}

/// Where a peer runs.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Place {
    /// In the daemon's pid namespace and no configured container.
    Host,
    /// In a configured container (by its cgroup): the host ids of its root
    /// and of its admin group, when they resolve.
    Container {
        name: String,
        admin: bool,
        admin_group: String,
        root_uid: Option<u32>,
        admin_gid: Option<u32>,
    },
    /// Outside the daemon's pid namespace (or unidentifiable), in no
    /// configured container.
    Foreign,
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
    let denied = |m: String| Err(ErrorBody::new(ErrorCode::PermissionDenied, m));
    if peer.host_admin() {
        return Ok(());
    }
    let reads = may_read(d, peer);
    match (op.access(), &peer.place) {
        (Access::Read, _) if reads => Ok(()),
        (Access::Write, Place::Container { name, admin, .. }) => {
            if !admin {
                denied(format!(
                    "permission denied: `{}` from container {name}: the configuration does not \
                     grant it admin rights (admin = true in its [[container]] section)",
                    op.name()
                ))
            } else if reads {
                Ok(())
            } else {
                denied(not_served(d, peer))
            }
        }
        (Access::Write, Place::Foreign) => denied(format!(
            "permission denied: `{}` from a container (namespaces other than the host's) that no \
             [[container]] section of the configuration names (pid {}): state changes from \
             containers are refused (host uid {})",
            op.name(),
            peer.pid.map_or("unknown".into(), |p| p.to_string()),
            peer.uid
        )),
        (Access::Write, Place::Host) if peer.uid == 0 => denied(format!(
            "permission denied: `{}` changes disks and needs root with CAP_SYS_ADMIN (you are \
             uid 0 without it: run it with the host's full capabilities)",
            op.name()
        )),
        (Access::Write, Place::Host) => denied(format!(
            "permission denied: `{}` changes disks and needs root (you are uid {})",
            op.name(),
            peer.uid
        )),
        (Access::Read, Place::Container { .. }) => denied(not_served(d, peer)),
        (Access::Read, _) => denied(format!(
            "permission denied: `{}` needs root or membership of group {}{} (you are uid {})",
            op.name(),
            d.applied().world.conf.cfg.socket.admin_group,
            if d.applied().world.conf.admin_gid.is_none() {
                ", which does not exist on this host"
            } else {
                ""
            },
            peer.uid
        )),
    }
}

enum Line {
    Data(Vec<u8>),
    TooLong,
    Eof,
}

/// Read one line of at most `MAX_REQUEST_LEN` bytes, its newline included,
/// without ever buffering more.
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
            // `i` bytes and the newline.
            if out.len() + i + 1 > MAX_REQUEST_LEN {
                r.consume(i + 1);
                return Ok(Line::TooLong);
            }
            out.extend_from_slice(&buf[..i]);
            r.consume(i + 1);
            return Ok(Line::Data(out));
        }
        let n = buf.len();
        // Still no newline: with it, the line would be longer than the limit.
        if out.len() + n >= MAX_REQUEST_LEN {
            return Ok(Line::TooLong);
        }
        out.extend_from_slice(buf);
        r.consume(n);
    }
}

async fn connection(stream: UnixStream, d: Arc<Daemon>, peer: Peer) {
    let timeout = Duration::from_secs(d.applied().world.conf.cfg.socket.timeout_seconds);
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
                let _ = wire::send(&mut wr, &r).await;
                return;
            }
            Ok(Err(_)) | Ok(Ok(Line::Eof)) => return,
            Ok(Ok(Line::TooLong)) => {
                let r = Response::err(
                    0,
                    ErrorBody::new(ErrorCode::TooLarge, format!("request line longer than {MAX_REQUEST_LEN} bytes: closing the connection")),
                );
                let _ = wire::send(&mut wr, &r).await;
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
                        "refused `{}` from uid {} pid {}{}",
                        req.op.name(),
                        peer.uid,
                        pid_shown(peer.pid),
                        peer.whence()
                    );
                    Response::err(req.id, e)
                }
                Ok(()) => {
                    if req.op.access() == Access::Write {
                        tracing::info!(
                            "uid {} pid {}{} asks: {}",
                            peer.uid,
                            pid_shown(peer.pid),
                            peer.whence(),
                            serde_json::to_string(&req.op).unwrap_or_default()
                        );
                    }
                    match req.op {
                        // `reclaim` streams progress lines and watches the connection.
                        Op::Reclaim(a) => {
                            if crate::ops::reclaim::serve(d.clone(), req.id, a, &mut rd, &mut wr)
                                .await
                                .is_err()
                            {
                                return;
                            }
                            continue;
                        }
                        Op::Scan => scan(d.clone(), req.id).await,
                        op => dispatch(d.clone(), req.id, op, peer.clone()).await,
                    }
                }
            },
        };
        if wire::send(&mut wr, &resp).await.is_err() {
            return;
        }
    }
}

/// Who asked, for the journal: `uid U pid P`.
fn who(peer: &Peer) -> String {
    format!("uid {} pid {}", peer.uid, pid_shown(peer.pid))
}

/// A peer's pid for the journal (`?` where the kernel gave none).
fn pid_shown(pid: Option<i32>) -> String {
    pid.map_or_else(|| "?".into(), |p| p.to_string())
}

fn to_value<T: serde::Serialize>(v: T) -> Result<serde_json::Value, ErrorBody> {
    serde_json::to_value(v)
        .map_err(|e| ErrorBody::new(ErrorCode::Internal, format!("encoding the result: {e}")))
}

/// `scan`: a full scan that starts after the request arrived, shared by every
/// request that arrives while one is running or waiting (they wait here,
/// asynchronously; one blocking thread scans).
async fn scan(d: Arc<Daemon>, id: u64) -> Response {
    use std::sync::atomic::Ordering::SeqCst;
    let want = d.scans.started.load(SeqCst) + 1;
    let _gate = d.scans.gate.lock().await;
    if d.scans.done.load(SeqCst) < want {
        let d2 = d.clone();
        match tokio::task::spawn_blocking(move || d2.scans.full(&d2)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                return Response::err(
                    id,
                    ErrorBody::new(
                        ErrorCode::IoError,
                        format!("scan: reading /sys/class/block: {e}"),
                    ),
                )
            }
            Err(e) => {
                return Response::err(
                    id,
                    ErrorBody::new(ErrorCode::Internal, format!("scan: {e}")),
                )
            }
        }
    }
    match to_value(crate::views::lsdsk(&d.applied(), &d.site)) {
        Ok(v) => Response::ok(id, v),
        Err(e) => Response::err(id, e),
    }
}

/// Serves one operation on a blocking thread, one answer. `scan` and `reclaim`
/// are served on their connection (shared scans, progress lines) before this.
async fn dispatch(d: Arc<Daemon>, id: u64, op: Op, peer: Peer) -> Response {
    let name = op.name();
    let audit = op.access() == Access::Write;
    let peer_ids = (peer.uid, peer.pid);
    let r = tokio::task::spawn_blocking(move || -> Result<serde_json::Value, ErrorBody> {
        op.serve(&*d, &who(&peer))
    })
    .await;
    match r {
        Ok(Ok(v)) => Response::ok(id, v),
        Ok(Err(e)) => {
            if audit {
                tracing::warn!(
                    "uid {} pid {}: `{name}` refused: {}",
                    peer_ids.0,
                    pid_shown(peer_ids.1),
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
    use asmguard_proto::LabelArgs;
    use std::os::fd::AsFd;

    async fn line_of(len: usize) -> Line {
        let mut data = vec![b'x'; len - 1];
        data.push(b'\n');
        // A small buffer, so the line arrives in pieces as from a socket.
        let mut r = tokio::io::BufReader::with_capacity(4096, &data[..]);
        read_line(&mut r).await.unwrap()
    }

    fn peer(uid: u32, gid: u32, groups: &[u32], place: Place) -> Peer {
        Peer {
            uid,
            gid,
            pid: Some(4242),
            groups: groups.to_vec(),
            place,
            sys_admin: true,
        }
    }

    fn rac1(admin: bool) -> Place {
        rac1_ids(admin, Some(100000), Some(154329))
    }

    fn rac1_ids(admin: bool, root_uid: Option<u32>, admin_gid: Option<u32>) -> Place {
        Place::Container {
            name: "rac1".into(),
            admin,
            admin_group: "asmadmin".into(),
            root_uid,
            admin_gid,
        }
    }

    fn label_op() -> Op {
        Op::Label(LabelArgs {
            label: "DATA1".into(),
            device: "/dev/sdb".into(),
            force: false,
            migrate: false,
        })
    }

    #[test]
    fn container_peers_read_and_change_state_only_as_configured() {
        let mut cfg = asmguard_config::Config::default();
        cfg.socket.admin_group = "nogroup".into(); // gid 65534 on Debian
        let d = crate::daemon::testing::daemon(cfg);
        let host_admin = d.applied().world.conf.admin_gid;
        let ok = |p: &Peer, op: &Op| authorise(&d, p, op).is_ok();
        // the container's root and its asmadmin (host ids) may read
        let root = peer(100000, 100000, &[], rac1(false));
        let grid = peer(154331, 154321, &[154329], rac1(false));
        let intruder = peer(101001, 101001, &[], rac1(false));
        for p in [&root, &grid] {
            assert!(may_read(&d, p));
            assert!(ok(p, &Op::Lsdsk) && ok(p, &Op::Status) && ok(p, &Op::Iostat));
            let e = authorise(&d, p, &label_op()).unwrap_err();
            assert_eq!(
                e.message,
                "permission denied: `label` from container rac1: the configuration does not \
                 grant it admin rights (admin = true in its [[container]] section)"
            );
        }
        assert!(!may_read(&d, &intruder));
        assert!(!ok(&intruder, &Op::Lsdsk));
        assert!(not_served(&d, &intruder).contains("container rac1"));
        // admin = true: state changes too, for those two only
        let root = peer(100000, 100000, &[], rac1(true));
        let grid = peer(154331, 154321, &[154329], rac1(true));
        let intruder = peer(101001, 101001, &[], rac1(true));
        assert!(ok(&root, &label_op()) && ok(&grid, &label_op()));
        assert!(!ok(&intruder, &label_op()));
        // host uid 0 in a container is not the host's root: as a privileged
        // container's root, or in a container no section names
        let privileged = rac1_ids(false, Some(0), Some(0));
        let p = peer(0, 0, &[], privileged);
        assert!(!p.host_root() && ok(&p, &Op::Lsdsk) && !ok(&p, &label_op()));
        let p = peer(0, 0, &[], Place::Foreign);
        assert!(!p.host_root() && ok(&p, &Op::Lsdsk));
        let e = authorise(&d, &p, &label_op()).unwrap_err().message;
        assert!(e.contains("no [[container]] section"), "{e}");
        // a foreign peer reads only as it would on the host
        let p = peer(1001, 1001, &[], Place::Foreign);
        assert!(!may_read(&d, &p));
        if let Some(g) = host_admin {
            assert!(may_read(&d, &peer(1001, 1001, &[g], Place::Foreign)));
            // the host's admin gid means nothing inside a configured container
            assert!(!may_read(&d, &peer(1001, 1001, &[g], rac1(false))));
        }
        // the host's root may do everything
        let p = peer(0, 0, &[], Place::Host);
        assert!(p.host_root() && ok(&p, &label_op()));
        // ... with CAP_SYS_ADMIN: without it (capabilities dropped) it reads
        let p = Peer {
            sys_admin: false,
            ..p
        };
        assert!(ok(&p, &Op::Lsdsk) && ok(&p, &Op::Status));
        let e = authorise(&d, &p, &label_op()).unwrap_err();
        assert_eq!(e.code, ErrorCode::PermissionDenied);
        assert!(
            e.message.contains("needs root with CAP_SYS_ADMIN"),
            "{}",
            e.message
        );
        // nor does a capability count outside the host's namespaces
        let p = peer(0, 0, &[], Place::Foreign);
        assert!(!ok(&p, &label_op()));
        // a container whose ids could not be resolved serves nobody
        let unresolved = rac1_ids(true, None, None);
        assert!(!may_read(&d, &peer(100000, 100000, &[], unresolved)));
    }

    #[test]
    fn busy_names_the_limit_that_was_hit() {
        let full_pool = busy_message(false, 1001, 0, "asmadmin");
        assert!(
            full_pool.contains("shared by the members of group asmadmin"),
            "{full_pool}"
        );
        assert!(full_pool.contains("uid 1001 holds 0"), "{full_pool}");
        let own = busy_message(false, 1001, PER_UID_SLOTS, "asmadmin");
        assert!(own.contains("uid 1001 already holds 32"), "{own}");
        assert!(busy_message(true, 0, 0, "asmadmin").contains("reserved for root"));
        // a container's root is not the host's
        assert!(busy_message(false, 0, 0, "asmadmin").contains("uid 0 holds 0"));
    }

    #[tokio::test]
    async fn request_limit_counts_the_newline() {
        // 65,536 bytes with the newline is the documented maximum.
        assert!(
            matches!(line_of(MAX_REQUEST_LEN).await, Line::Data(l) if l.len() == MAX_REQUEST_LEN - 1)
        );
        assert!(matches!(line_of(MAX_REQUEST_LEN + 1).await, Line::TooLong));
        // The same at the edge of one buffer fill.
        let mut r =
            tokio::io::BufReader::with_capacity(MAX_REQUEST_LEN, &[b'y'; MAX_REQUEST_LEN + 1][..]);
        assert!(matches!(read_line(&mut r).await.unwrap(), Line::TooLong));
    }

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
