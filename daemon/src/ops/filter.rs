//! `asmguardctl filter enable|audit|disable [LABEL]`: sent as an
//! `Input::Mode`; the World refuses a label no disk carries (one check, where
//! the change is made), else the answer is what the apply side achieved.

use crate::daemon::Daemon;
use crate::world::Input;
use asmguard_proto::{ErrorBody, ErrorCode, FilterArgs, FilterResult};

/// Sets a disk's filter mode, or every disk's, or turns the filter off;
/// `who` asked (for the journal). A label no disk carries is refused
/// (`not_found`) and changes nothing; programs that cannot be installed
/// or pins that cannot be removed answer `io_error`.
pub fn mode(d: &Daemon, a: &FilterArgs, who: &str) -> Result<FilterResult, ErrorBody> {
    let done = d
        .try_submit(Input::Mode {
            label: a.label.clone(),
            action: a.action,
        })
        .map_err(|e| ErrorBody::new(ErrorCode::NotFound, e.to_string()))?;
    let labels = match &a.label {
        Some(l) => vec![l.clone()],
        None => crate::world::tops(&done.world.model).into_keys().collect(),
    };
    if let Some(e) = &done.last_error {
        return Err(ErrorBody::new(ErrorCode::IoError, e.clone()));
    }
    tracing::info!(
        "filter {} {}: {who}",
        a.action,
        a.label.as_deref().unwrap_or("(all disks)")
    );
    Ok(FilterResult {
        action: a.action,
        labels,
        backend: d.filter.status().backend(),
    })
}

impl asmguard_proto::serve::Filter for Daemon {
    fn filter(&self, a: &FilterArgs, who: &str) -> Result<impl serde::Serialize, ErrorBody> {
        mode(self, a, who)
    }
}
