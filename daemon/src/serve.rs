//! The socket operations with no module of their own: `ping`, `iostat`
//! (the tracer's snapshot) and `scan` (served on its connection: a shared
//! scan, before the dispatch). Every other operation's `serve` trait
//! (`asmguard_proto::serve`, one per row of `ops!`) is implemented where its
//! work is: `label`, `unlabel`, `rename` in `crate::ops`, `filter` in
//! `crate::ops::filter`, `reclaim` in `crate::ops::reclaim`, `lsdsk`,
//! `status`, `events` in `crate::views`. The control socket
//! (`inputs::server`) only calls `Op::serve`; a new operation is its row in
//! the protocol, its impl beside its work, and its subcommand in `ctl`.

use crate::daemon::Daemon;
use asmguard_proto::{serve, ErrorBody, ErrorCode};
use serde::Serialize;

/// The answer of an operation served on its connection, should it reach the
/// dispatch.
pub fn on_its_connection(name: &str) -> Result<(), ErrorBody> {
    Err(ErrorBody::new(
        ErrorCode::Internal,
        format!("`{name}` is served on its connection, not here (a bug)"),
    ))
}

impl serve::Ping for Daemon {
    fn ping(&self, _: &str) -> Result<impl Serialize, ErrorBody> {
        Ok(serde_json::json!({"daemon_version": env!("CARGO_PKG_VERSION")}))
    }
}

impl serve::Scan for Daemon {
    fn scan(&self, _: &str) -> Result<impl Serialize, ErrorBody> {
        on_its_connection("scan")
    }
}

impl serve::Iostat for Daemon {
    fn iostat(&self, _: &str) -> Result<impl Serialize, ErrorBody> {
        self.metrics.snapshot()
    }
}

#[cfg(test)]
mod tests {
    /// The daemon serves every row of the protocol (a row without its
    /// impl would not compile here).
    #[test]
    fn the_daemon_serves_every_operation() {
        fn serves_all<S: asmguard_proto::Serve>() {}
        serves_all::<crate::daemon::Daemon>();
    }
}
