//! What answers each socket operation: the daemon's [`Serve`] (one method
//! per row of `asmguard_proto`'s `ops!`, named in the row). The control
//! socket (`inputs::server`) only calls `Op::serve`; a new operation is its
//! row in the protocol, its method here, and its subcommand in `ctl`.
//!
//! `scan` and `reclaim` are served on their connection (a shared scan,
//! progress lines) before the dispatch; their methods here say so.

use crate::daemon::Daemon;
use asmguard_proto::{
    ErrorBody, ErrorCode, EventsArgs, FilterArgs, LabelArgs, ReclaimArgs, RenameArgs, Serve,
    UnlabelArgs,
};
use serde::Serialize;

/// The answer of an operation served on its connection, should it reach the
/// dispatch.
fn on_its_connection(name: &str) -> Result<(), ErrorBody> {
    Err(ErrorBody::new(
        ErrorCode::Internal,
        format!("`{name}` is served on its connection, not here (a bug)"),
    ))
}

impl Serve for Daemon {
    /// `uid U pid P`, for the journal.
    type Caller = str;

    fn ping(&self, _: &str) -> Result<impl Serialize, ErrorBody> {
        Ok(serde_json::json!({"daemon_version": env!("CARGO_PKG_VERSION")}))
    }

    fn lsdsk(&self, _: &str) -> Result<impl Serialize, ErrorBody> {
        Ok(crate::views::lsdsk(&self.applied(), &self.site))
    }

    fn scan(&self, _: &str) -> Result<impl Serialize, ErrorBody> {
        on_its_connection("scan")
    }

    fn status(&self, _: &str) -> Result<impl Serialize, ErrorBody> {
        Ok(crate::views::status(
            &self.applied(),
            &self.site,
            &self.filter,
            &self.metrics,
            &self.scans,
        ))
    }

    fn iostat(&self, _: &str) -> Result<impl Serialize, ErrorBody> {
        self.metrics.snapshot()
    }

    fn label(&self, a: &LabelArgs, _: &str) -> Result<impl Serialize, ErrorBody> {
        crate::ops::label(self, a)
    }

    fn unlabel(&self, a: &UnlabelArgs, _: &str) -> Result<impl Serialize, ErrorBody> {
        crate::ops::unlabel(self, a)
    }

    fn rename(&self, a: &RenameArgs, _: &str) -> Result<impl Serialize, ErrorBody> {
        crate::ops::rename(self, a)
    }

    fn filter(&self, a: &FilterArgs, who: &str) -> Result<impl Serialize, ErrorBody> {
        crate::ops::filter::mode(self, a, who)
    }

    fn events(&self, a: &EventsArgs, _: &str) -> Result<impl Serialize, ErrorBody> {
        Ok(crate::views::events(&self.filter, a))
    }

    fn reclaim(&self, _: &ReclaimArgs, _: &str) -> Result<impl Serialize, ErrorBody> {
        on_its_connection("reclaim")
    }
}
