//! [`EventReader`]: the `ag_events` ring buffer, read on its own map handle
//! (so it can move to a thread), records decoded by [`super::events`] and the
//! executable's path added from `/proc` (best effort).
//!
//! Not here: counting (the kernel counts in `ag_stats`, see
//! [`super::Guard::stats`]), recent-event history (the daemon's service).

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use libbpf_rs::MapHandle;

use super::events::decode;
use crate::Error;
use asmguard_filter_types::denial::Denial;

/// Reads denial events from the ring buffer.
pub struct EventReader {
    rb: libbpf_rs::RingBuffer<'static>,
    queue: Arc<Mutex<VecDeque<Denial>>>,
    _map: MapHandle,
}

impl fmt::Debug for EventReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventReader").finish_non_exhaustive()
    }
}

impl EventReader {
    /// A reader of `events`; a denying process's executable is read in the
    /// procfs `proc` (the caller's `Paths::proc`).
    pub(crate) fn new(proc: &std::path::Path, events: &MapHandle) -> Result<EventReader, Error> {
        let proc = proc.to_path_buf();
        let map = MapHandle::try_from(events).map_err(Error::bpf("duplicating a map fd"))?;
        let queue = Arc::new(Mutex::new(VecDeque::new()));
        let q = Arc::clone(&queue);
        let mut builder = libbpf_rs::RingBufferBuilder::new();
        builder
            .add(&map, move |data: &[u8]| {
                if let Some(mut ev) = decode(data) {
                    // Best effort: the caller has often exited (dd gives up
                    // at once); then the kernel's inode identifies the binary.
                    ev.exe = std::fs::read_link(proc.join(ev.pid.to_string()).join("exe"))
                        .map(|p| p.display().to_string())
                        .unwrap_or_else(|_| {
                            if ev.exe_ino == 0 {
                                String::new()
                            } else {
                                format!("(exited: inode {} on {})", ev.exe_ino, ev.exe_dev)
                            }
                        });
                    queue_push(&q, ev);
                }
                0
            })
            .map_err(Error::bpf("opening the event ring buffer"))?;
        let rb = builder
            .build()
            .map_err(Error::bpf("opening the event ring buffer"))?;
        Ok(EventReader {
            rb,
            queue,
            _map: map,
        })
    }

    /// Waits up to `timeout` for events and returns those that arrived (maybe none).
    pub fn poll(&mut self, timeout: Duration) -> Result<Vec<Denial>, Error> {
        self.rb
            .poll(timeout)
            .map_err(Error::bpf("polling the event ring buffer"))?;
        Ok(queue_drain(&self.queue))
    }
}

/// The reader's queue is a plain list of decoded events (nothing panics while
/// holding it; were one to, the list would still be whole: its lock is taken
/// over rather than dropping every later event).
fn queue_push(q: &Mutex<VecDeque<Denial>>, ev: Denial) {
    q.lock().unwrap_or_else(|p| p.into_inner()).push_back(ev);
}

fn queue_drain(q: &Mutex<VecDeque<Denial>>) -> Vec<Denial> {
    q.lock()
        .unwrap_or_else(|p| p.into_inner())
        .drain(..)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Events come out in the order the ring gave them, once each.
    #[test]
    fn the_queue_delivers_in_order_once() {
        let (at, size) = crate::guard::abi::btf_layout("ag_event");
        let q = Mutex::new(VecDeque::new());
        for pid in [7u32, 8, 9] {
            let mut b = vec![0u8; size];
            b[at["pid"]..at["pid"] + 4].copy_from_slice(&pid.to_ne_bytes());
            queue_push(&q, decode(&b).unwrap());
        }
        let got: Vec<u32> = queue_drain(&q).iter().map(|e| e.pid).collect();
        assert_eq!(got, [7, 8, 9]);
        assert!(queue_drain(&q).is_empty());
    }
}
