//! Standard output and error that outlive their reader.
//!
//! `asmguardctl status | grep -q protected` is how scripts read the CLI, and
//! grep quits at its first match: the next write gets EPIPE, and Rust's
//! `println!` panics on it ("failed printing to stdout"). Every print of the
//! CLI goes through here instead: once the reader is gone the rest of the
//! output is dropped quietly and the command keeps its own exit code (a
//! `status` that found the disks unprotected still exits 7); a write that
//! fails for another reason (a full disk) is kept, and `main` reports it as
//! one line and exit 1. A failed write to standard error has nowhere to be
//! reported and is dropped.

use std::fmt;
use std::io::{ErrorKind, Write};
use std::sync::Mutex;

/// What ended the output: `None` while it flows.
static ENDED: Mutex<Option<Ended>> = Mutex::new(None);

/// Why standard output stopped taking text.
#[derive(Debug, Clone)]
pub enum Ended {
    /// The reader closed the pipe (grep -q, head, a pager that quit).
    ReaderGone,
    /// Any other write error, as the kernel said it.
    Failed(String),
}

fn ended() -> Option<Ended> {
    ENDED.lock().map(|e| e.clone()).unwrap_or(None)
}

/// Whether standard output takes no more text (a repeating command stops).
pub fn stopped() -> bool {
    ended().is_some()
}

/// The write error to report, if one other than a gone reader ended the output.
pub fn failure() -> Option<String> {
    match ended() {
        Some(Ended::Failed(e)) => Some(e),
        _ => None,
    }
}

/// Records how a write to standard output ended (the first end is kept).
fn note(e: &std::io::Error) {
    if let Ok(mut g) = ENDED.lock() {
        if g.is_none() {
            *g = Some(if e.kind() == ErrorKind::BrokenPipe {
                Ended::ReaderGone
            } else {
                Ended::Failed(e.to_string())
            });
        }
    }
}

/// Writes to standard output, flushed (so a failure is seen here, not lost
/// at exit); nothing once it has stopped.
pub fn stdout(args: fmt::Arguments) {
    write_out(|o| o.write_fmt(args));
}

/// Writes bytes to standard output, as [`stdout`].
pub fn stdout_bytes(b: &[u8]) {
    write_out(|o| o.write_all(b));
}

fn write_out(w: impl FnOnce(&mut std::io::StdoutLock<'static>) -> std::io::Result<()>) {
    if stopped() {
        return;
    }
    let mut o = std::io::stdout().lock();
    if let Err(e) = w(&mut o).and_then(|()| o.flush()) {
        note(&e);
    }
}

/// Writes to standard error; a failure is dropped (there is nowhere left to
/// say it).
pub fn stderr(args: fmt::Arguments) {
    let mut o = std::io::stderr().lock();
    let _ = o.write_fmt(args).and_then(|()| o.flush());
}

/// `print!` that survives its reader.
macro_rules! out {
    ($($t:tt)*) => { $crate::out::stdout(format_args!($($t)*)) };
}

/// `println!` that survives its reader.
macro_rules! outln {
    () => { $crate::out::stdout(format_args!("\n")) };
    ($($t:tt)*) => { $crate::out::stdout(format_args!("{}\n", format_args!($($t)*))) };
}

/// `eprint!` that never panics.
macro_rules! err {
    ($($t:tt)*) => { $crate::out::stderr(format_args!($($t)*)) };
}

/// `eprintln!` that never panics.
macro_rules! errln {
    () => { $crate::out::stderr(format_args!("\n")) };
    ($($t:tt)*) => { $crate::out::stderr(format_args!("{}\n", format_args!($($t)*))) };
}
