//! Labels written by another host. When another RAC node labels, renames or
//! unlabels a shared disk, no device event fires on this node: the kernel here
//! saw no write. So every `[devices] label_watch_seconds` the daemon reads the
//! label sector of each device a label can be on again (O_DIRECT, 4 KiB, the
//! reads spread evenly over the interval, one at a time), and refreshes the
//! devices whose label or ASM header now reads differently: the one
//! apply side then protects, relabels or releases the disk, and udev, sent
//! a change event, moves its link (`Input::Relink`).
//!
//! Which devices: those a scan reads (included, large enough, not suspended)
//! with no holder above them (a multipath device, not its paths; a partition
//! or a whole disk nobody stacks on). Cost: one 4 KiB read per such device per
//! interval, 250 reads/s per 1,000 disks at the default 4 s.

use crate::daemon::Daemon;
use crate::world::Input;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Starts the watch on a thread of its own (reads block; a read that hangs
/// is given up after the scan's read timeout). `interval` zero: no watch.
pub fn spawn(d: Arc<Daemon>, interval: Duration) {
    if interval.is_zero() {
        tracing::info!("label watch: off (labels written by other hosts need `asmguardctl scan`)");
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("label-watch".into())
        .spawn(move || run(&d, interval));
    if let Err(e) = spawned {
        tracing::error!("label watch: cannot start its thread: {e}: labels written by other hosts need `asmguardctl scan`");
    }
}

fn run(d: &Daemon, interval: Duration) {
    loop {
        let round = Instant::now();
        let names = d.scans.watched();
        if names.is_empty() {
            std::thread::sleep(interval);
            continue;
        }
        let step = interval / names.len() as u32;
        for (i, name) in names.iter().enumerate() {
            if let Some((changed, lost, replaced)) = d.scans.label_changed(d, name) {
                if let Some(l) = &lost {
                    d.labels_lost.count(l);
                }
                match (lost, replaced) {
                    (Some(l), _) => tracing::error!(
                        "label watch: {name} lost its label {l} to a write this daemon did not \
                         make (another host, or a writer the filter let through): {changed}; \
                         it is no longer managed under {l}"
                    ),
                    (None, Some((was, now))) => tracing::warn!(
                        "label watch: {name} now carries label {now}, not {was}: another \
                         host labelled or renamed it; it is managed as {now}"
                    ),
                    (None, None) => tracing::info!(
                        "label watch: the label sector of {name} changed ({changed}): re-reading it"
                    ),
                }
                d.scans.refresh(d, &BTreeSet::from([name.clone()]));
                d.submit(Input::Relink(name.clone()));
            }
            // the next read at its place in the round (never a burst after a slow one)
            let next = step * (i as u32 + 1);
            if let Some(wait) = next.checked_sub(round.elapsed()) {
                std::thread::sleep(wait);
            }
        }
    }
}
