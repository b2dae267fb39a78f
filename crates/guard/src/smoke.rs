//! The smoke filter (`bpf/smoke.bpf.c`): the smallest program that proves the
//! build pipeline and the BPF LSM on a real kernel -- it denies write-opens of
//! chosen block devices. Used by `asmguard-bpf-smoke` and the VM lab.
//!
//! Not here: the real write filter ([`crate::guard`]).

use std::mem::MaybeUninit;

use libbpf_rs::{Link, MapCore, MapFlags, OpenObject};

use crate::{Error, KernelDev};

/// Skeleton of `bpf/smoke.bpf.c`.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod skel {
    include!(concat!(env!("OUT_DIR"), "/smoke.skel.rs"));
}

use skel::{SmokeSkel, SmokeSkelBuilder};

/// Backing memory for a loaded BPF object. libbpf-rs skeletons borrow it for
/// their whole life, so it must outlive the [`SmokeFilter`] made from it.
#[derive(Debug)]
pub struct ObjectStorage(MaybeUninit<OpenObject>);

impl ObjectStorage {
    /// Fresh, uninitialised storage.
    pub fn new() -> Self {
        Self(MaybeUninit::uninit())
    }
}

impl Default for ObjectStorage {
    fn default() -> Self {
        Self::new()
    }
}

/// The loaded smoke LSM program (`lsm/file_open`) and its device map.
///
/// Dropping it detaches the program (the link is the last reference).
pub struct SmokeFilter<'obj> {
    // Declared before `skel`: fields drop in order, so the link goes first.
    link: Option<Link>,
    skel: SmokeSkel<'obj>,
}

impl std::fmt::Debug for SmokeFilter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmokeFilter")
            .field("attached", &self.link.is_some())
            .finish_non_exhaustive()
    }
}

impl<'obj> SmokeFilter<'obj> {
    /// Opens and loads (verifies) the program against the running kernel's BTF.
    /// Nothing is denied until [`SmokeFilter::attach`].
    pub fn load(storage: &'obj mut ObjectStorage) -> Result<Self, Error> {
        let open = asmguard_bpfload::open_skel(
            SmokeSkelBuilder::default(),
            &mut storage.0,
            "opening the smoke BPF object",
        )?;
        let skel = asmguard_bpfload::load_skel(open, "loading the smoke BPF program")?;
        Ok(Self { link: None, skel })
    }

    /// Adds a block device (by kernel dev_t) to the set whose write-opens are denied.
    pub fn protect(&mut self, dev: KernelDev) -> Result<(), Error> {
        self.skel
            .maps
            .smoke_devs
            .update(&dev.raw().to_ne_bytes(), &[1u8], MapFlags::ANY)
            .map_err(Error::bpf("adding a device to smoke_devs"))
    }

    /// Removes a block device from the denied set (not an error if absent).
    pub fn unprotect(&mut self, dev: KernelDev) -> Result<(), Error> {
        match self.skel.maps.smoke_devs.delete(&dev.raw().to_ne_bytes()) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == libbpf_rs::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::bpf("removing a device from smoke_devs")(e)),
        }
    }

    /// Attaches the program to the `file_open` LSM hook. Idempotent.
    pub fn attach(&mut self) -> Result<(), Error> {
        if self.link.is_none() {
            let link = self
                .skel
                .progs
                .smoke_file_open
                .attach_lsm()
                .map_err(Error::bpf("attaching lsm/file_open"))?;
            self.link = Some(link);
        }
        Ok(())
    }

    /// Detaches the program. Idempotent.
    pub fn detach(&mut self) {
        self.link = None;
    }

    /// Whether the program is attached.
    pub fn is_attached(&self) -> bool {
        self.link.is_some()
    }

    /// How many opens the program has denied since it was loaded.
    pub fn denied(&self) -> Result<u64, Error> {
        let value = self
            .skel
            .maps
            .bss
            .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
            .map_err(Error::bpf("reading the smoke counters"))?
            .unwrap_or_default();
        let mut raw = [0u8; 8];
        if let Some(bytes) = value.get(..8) {
            raw.copy_from_slice(bytes);
        }
        Ok(u64::from_ne_bytes(raw))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use libbpf_rs::skel::SkelBuilder;
    use libbpf_rs::{MapType, ProgramType};

    /// Opening (not loading) needs no privilege and no kernel BTF: it checks
    /// what build.rs produced, on any host.
    #[test]
    fn smoke_object_has_the_lsm_program_and_map() {
        let mut storage = ObjectStorage::new();
        let open = SmokeSkelBuilder::default()
            .open(&mut storage.0)
            .expect("open the smoke object");

        let prog = &open.progs.smoke_file_open;
        assert_eq!(prog.prog_type(), ProgramType::Lsm);
        assert_eq!(prog.section(), "lsm/file_open");

        let map = &open.maps.smoke_devs;
        assert_eq!(map.map_type(), MapType::Hash);
        assert_eq!(map.key_size(), 4, "key: kernel dev_t (u32)");
        assert_eq!(map.value_size(), 1);
        assert!(map.max_entries() >= 256);
    }
}
