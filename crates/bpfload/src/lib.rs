//! The one way asmguard's crates open and load their BPF objects at run time
//! (the write filter in asmguard-guard, the latency tracer in
//! asmguard-metrics): an object embedded as bytes or a libbpf-rs skeleton,
//! opened, loaded (with libbpf's printing off where a refusal is expected and
//! handled), and every libbpf failure as one [`Error`]: what was being done
//! and libbpf's error. The build-time side is asmguard-bpf-build.
//!
//! `ASMGUARD_BPF_LOG=1` in the environment keeps libbpf's messages (the
//! verifier's log) on through the quiet loads ([`Quiet`]).
//!
//! Not here: which programs load and how they attach (each crate's own
//! tables), maps' meaning, pins.

use std::mem::MaybeUninit;

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapHandle, Object, ObjectBuilder, OpenObject};

/// libbpf refused to open, load or attach, or a map operation failed.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {source}")]
pub struct Error {
    /// What we were doing.
    pub what: &'static str,
    /// The libbpf error.
    #[source]
    pub source: libbpf_rs::Error,
}

impl Error {
    /// The kind of libbpf's error (`NotFound` for a missing map key ...).
    pub fn kind(&self) -> libbpf_rs::ErrorKind {
        self.source.kind()
    }
}

/// Names a libbpf failure: `.map_err(context("loading the programs"))`.
pub fn context(what: &'static str) -> impl FnOnce(libbpf_rs::Error) -> Error {
    move |source| Error { what, source }
}

/// libbpf's printing off while it lives (a load that may fail: the error
/// comes back as a value and goes into the caller's reason), then exactly as
/// it was: a nested one finds it off and leaves it off. With
/// `ASMGUARD_BPF_LOG` set, it leaves the printing alone.
pub struct Quiet(Option<(libbpf_rs::PrintLevel, libbpf_rs::PrintCallback)>);

impl Quiet {
    /// Turns libbpf's printing off until dropped.
    pub fn new() -> Quiet {
        if std::env::var_os("ASMGUARD_BPF_LOG").is_some() {
            return Quiet(None);
        }
        Quiet(libbpf_rs::set_print(None))
    }
}

impl Default for Quiet {
    fn default() -> Self {
        Quiet::new()
    }
}

impl Drop for Quiet {
    fn drop(&mut self) {
        if std::env::var_os("ASMGUARD_BPF_LOG").is_none() {
            libbpf_rs::set_print(self.0.take());
        }
    }
}

/// Opens an object compiled into the binary (`include_bytes!` of a
/// `.bpf.o`); nothing is loaded into the kernel yet.
pub fn open_object(bytes: &[u8], what: &'static str) -> Result<libbpf_rs::OpenObject, Error> {
    ObjectBuilder::default()
        .open_memory(bytes)
        .map_err(context(what))
}

/// Loads an opened object (its programs whose autoload is set, its maps).
pub fn load_object(open: libbpf_rs::OpenObject, what: &'static str) -> Result<Object, Error> {
    open.load().map_err(context(what))
}

/// [`load_object`] with libbpf's printing off ([`Quiet`]): for a load that
/// may be refused and has a fallback.
pub fn load_object_quiet(open: libbpf_rs::OpenObject, what: &'static str) -> Result<Object, Error> {
    let _quiet = Quiet::new();
    load_object(open, what)
}

/// Opens a libbpf-rs skeleton into `storage`.
pub fn open_skel<'obj, B: SkelBuilder<'obj>>(
    builder: B,
    storage: &'obj mut MaybeUninit<OpenObject>,
    what: &'static str,
) -> Result<B::Output, Error> {
    builder.open(storage).map_err(context(what))
}

/// Loads an opened skeleton.
pub fn load_skel<'obj, S: OpenSkel<'obj>>(open: S, what: &'static str) -> Result<S::Output, Error> {
    open.load().map_err(context(what))
}

/// [`load_skel`] with libbpf's printing off ([`Quiet`]).
pub fn load_skel_quiet<'obj, S: OpenSkel<'obj>>(
    open: S,
    what: &'static str,
) -> Result<S::Output, Error> {
    let _quiet = Quiet::new();
    load_skel(open, what)
}

/// An owned handle (a duplicated fd) on a loaded map, which outlives the
/// object.
pub fn map_handle<M>(map: &M, what: &'static str) -> Result<MapHandle, Error>
where
    for<'a> MapHandle: TryFrom<&'a M, Error = libbpf_rs::Error>,
{
    MapHandle::try_from(map).map_err(context(what))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_what_was_done_and_libbpfs_error() {
        let e = open_object(b"not an ELF object", "opening a test object").unwrap_err();
        assert_eq!(e.what, "opening a test object");
        let shown = e.to_string();
        assert!(shown.starts_with("opening a test object: "), "{shown}");
        let source = std::error::Error::source(&e).map(|s| s.to_string());
        assert_eq!(source, Some(e.source.to_string()));
    }

    #[test]
    fn quiet_restores_the_print_callback() {
        fn cb(_: libbpf_rs::PrintLevel, _: String) {}
        let before = libbpf_rs::set_print(Some((libbpf_rs::PrintLevel::Warn, cb)));
        {
            let _outer = Quiet::new();
            let _inner = Quiet::new();
        }
        let now = libbpf_rs::set_print(before);
        if std::env::var_os("ASMGUARD_BPF_LOG").is_none() {
            assert!(matches!(now, Some((libbpf_rs::PrintLevel::Warn, _))));
        }
    }
}
