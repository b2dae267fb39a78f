//! Exclusive claims on managed disks: the one defence against the kernel's own
//! consumers (device-mapper, md, mount, swap, bcache, zram, LIO) that take a disk
//! by an in-kernel open no file hook sees.
//!
//! Every one of those consumers claims the block device exclusively. While
//! asmguardd holds an `O_RDONLY | O_EXCL` file of a managed disk's top device (the
//! multipath device rather than its paths, which dm-multipath claims itself; a
//! labelled partition, whose claim also blocks claims of its parent disk), each of
//! them fails with EBUSY. ASM, the database and multipathd open disks without
//! `O_EXCL` and keep working; the daemon's own label writes open the disk it holds
//! without `O_EXCL` (see `holds`).
//!
//! A claim is taken after each scan for every disk whose filter mode is not `off`
//! or `audit`, and dropped when the disk is unlabelled or removed. Under systemd
//! (`NOTIFY_SOCKET` set) each claimed file is also handed to the service manager's
//! file-descriptor store (`FDSTORE=1`, `FDNAME=claim-MAJ-MIN`; the unit sets
//! `FileDescriptorStoreMax=`), so the claim outlives a restart or crash of the
//! daemon, and is taken back from `LISTEN_FDS`/`LISTEN_FDNAMES` on start.

use asmguard_devices::KernelDev;
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::os::fd::{AsFd, FromRawFd, RawFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Prefix of the names the claimed files carry in systemd's fd store.
const FD_NAME_PREFIX: &str = "claim-";

/// A disk that should be claimed: its top device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    pub label: String,
    /// The top device.
    pub dev: KernelDev,
    /// Its device node.
    pub path: PathBuf,
}

struct Held {
    label: String,
    file: File,
}

/// The claims the daemon holds, by the claimed device.
#[derive(Default)]
pub struct Claims {
    held: Mutex<BTreeMap<KernelDev, Held>>,
    /// Whether claimed files go to systemd's fd store (`NOTIFY_SOCKET` is set).
    store: bool,
}

/// The fd-store name of the claim on `dev` (`8:16` -> `claim-8-16`; systemd's
/// names may not contain `:`).
pub fn fd_name(dev: KernelDev) -> String {
    format!("{FD_NAME_PREFIX}{}-{}", dev.major(), dev.minor())
}

/// The device a fd-store name stands for, if it is one of ours.
pub fn dev_of_fd_name(name: &str) -> Option<KernelDev> {
    let rest = name.strip_prefix(FD_NAME_PREFIX)?;
    rest.replacen('-', ":", 1).parse().ok()
}

/// The notification that stores (or, with `remove`, drops) the file named `name`
/// in systemd's fd store.
pub fn store_states(name: &str, remove: bool) -> [sd_notify::NotifyState<'_>; 2] {
    let first = if remove {
        sd_notify::NotifyState::FdStoreRemove
    } else {
        sd_notify::NotifyState::FdStore
    };
    [first, sd_notify::NotifyState::FdName(name)]
}

/// Which of the passed file descriptors (fd, name) are claims of ours: (fd, device).
/// Other names (sockets a unit may pass) are left alone.
pub fn adoptable(passed: impl IntoIterator<Item = (RawFd, String)>) -> Vec<(RawFd, KernelDev)> {
    passed
        .into_iter()
        .filter_map(|(fd, n)| dev_of_fd_name(&n).map(|d| (fd, d)))
        .collect()
}

/// What to do to go from the devices held to the devices wanted: (take, release).
pub fn plan<'a>(
    held: impl IntoIterator<Item = &'a KernelDev>,
    wanted: &[Wanted],
) -> (Vec<Wanted>, Vec<KernelDev>) {
    let held: Vec<KernelDev> = held.into_iter().copied().collect();
    let take = wanted
        .iter()
        .filter(|w| !held.contains(&w.dev))
        .cloned()
        .collect();
    let release = held
        .into_iter()
        .filter(|h| !wanted.iter().any(|w| w.dev == *h))
        .collect();
    (take, release)
}

/// Whether `meta` is the block device `dev`.
fn is_block(meta: &std::fs::Metadata, dev: KernelDev) -> bool {
    meta.file_type().is_block_device() && KernelDev::from_dev_t(meta.rdev()).ok() == Some(dev)
}

/// Opens `path` read-only with an exclusive claim; checks it is the block device
/// `dev` (a node renamed under us is not claimed).
pub fn claim(path: &Path, dev: KernelDev) -> std::io::Result<File> {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_EXCL | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)?;
    let meta = f.metadata()?;
    if !is_block(&meta, dev) {
        return Err(std::io::Error::other(format!(
            "{} is not block device {dev}",
            path.display()
        )));
    }
    Ok(f)
}

impl Claims {
    /// No claims yet; `store`: hand claimed files to systemd's fd store.
    pub fn new(store: bool) -> Claims {
        Claims {
            held: Mutex::new(BTreeMap::new()),
            store,
        }
    }

    /// Under systemd: with the claims the service manager kept for us (from
    /// `LISTEN_FDS`/`LISTEN_FDNAMES`), so a restart never lets go of a disk.
    pub fn from_environment() -> Claims {
        let c = Claims::new(std::env::var_os("NOTIFY_SOCKET").is_some());
        let passed = match sd_notify::listen_fds_with_names() {
            Ok(p) => p.collect::<Vec<_>>(),
            Err(e) => {
                tracing::warn!("LISTEN_FDS: {e}: no claims taken over from the last run");
                return c;
            }
        };
        let mut held = c.lock();
        for (fd, devno) in adoptable(passed) {
            // SAFETY: systemd passed this fd to us (LISTEN_PID is our pid) and
            // nothing else in the process owns it; the File takes ownership.
            let f = unsafe { File::from_raw_fd(fd) };
            match f.metadata() {
                Ok(m) if is_block(&m, devno) => {
                    tracing::info!("claim on {devno}: taken over from the last run");
                    held.insert(
                        devno,
                        Held {
                            label: String::new(),
                            file: f,
                        },
                    );
                }
                _ => tracing::warn!("passed fd {fd} named for {devno} is not that device: closed"),
            }
        }
        drop(held);
        c
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<KernelDev, Held>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Does the daemon hold the claim on `dev`? (Then its own writes to that
    /// device open it without `O_EXCL`, which its claim would refuse.)
    pub fn holds(&self, dev: KernelDev) -> bool {
        self.lock().contains_key(&dev)
    }

    /// The claims held (for `status`).
    pub fn list(&self) -> Vec<asmguard_proto::Claim> {
        self.lock()
            .iter()
            .map(|(d, h)| asmguard_proto::Claim {
                label: h.label.clone(),
                major: d.major(),
                minor: d.minor(),
            })
            .collect()
    }

    /// Where the claims outlive a restart (for `status`).
    pub fn kept(&self) -> asmguard_proto::ClaimsKept {
        if self.store {
            asmguard_proto::ClaimsKept::FdStore
        } else {
            asmguard_proto::ClaimsKept::OnStart
        }
    }

    /// Takes the claims wanted and releases the others, leaving the devices in
    /// `frozen` (being labelled) as they are. A device that another
    /// exclusive holder has (mounted, in a dm table, a closing writer) cannot
    /// be claimed: the answer lists those with the error (the caller retries
    /// and logs).
    pub fn sync(&self, wanted: &[Wanted], frozen: &[KernelDev]) -> Vec<(Wanted, std::io::Error)> {
        let mut failed = Vec::new();
        let mut held = self.lock();
        let (take, release) = plan(held.keys(), wanted);
        let take: Vec<Wanted> = take
            .into_iter()
            .filter(|w| !frozen.contains(&w.dev))
            .collect();
        let release: Vec<KernelDev> = release
            .into_iter()
            .filter(|d| !frozen.contains(d))
            .collect();
        for devno in release {
            if let Some(h) = held.remove(&devno) {
                self.store_notify(devno, &h.file, true);
                tracing::info!("claim on {devno} ({}) released", h.label);
            }
        }
        for w in take {
            match claim(&w.path, w.dev) {
                Ok(file) => {
                    self.store_notify(w.dev, &file, false);
                    tracing::info!(
                        "claim on {} ({}, {}): taken (exclusive openers get EBUSY)",
                        w.dev,
                        w.path.display(),
                        w.label
                    );
                    held.insert(
                        w.dev,
                        Held {
                            label: w.label.clone(),
                            file,
                        },
                    );
                }
                Err(e) => failed.push((w, e)),
            }
        }
        for w in wanted {
            if let Some(h) = held.get_mut(&w.dev) {
                h.label.clone_from(&w.label);
            }
        }
        failed
    }

    fn store_notify(&self, devno: KernelDev, file: &File, remove: bool) {
        if !self.store {
            return;
        }
        let name = fd_name(devno);
        let states = store_states(&name, remove);
        let r = if remove {
            sd_notify::notify(&states)
        } else {
            sd_notify::notify_with_fds(&states, &[file.as_fd()])
        };
        if let Err(e) = r {
            tracing::warn!("fd store ({name}): {e}: the claim will not outlive a restart");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(devno: &str) -> KernelDev {
        devno.parse().unwrap()
    }

    fn w(label: &str, devno: &str) -> Wanted {
        Wanted {
            label: label.into(),
            dev: k(devno),
            path: PathBuf::from("/dev/null"),
        }
    }

    #[test]
    fn fd_names_round_trip_and_carry_no_colon() {
        assert_eq!(fd_name(k("8:16")), "claim-8-16");
        assert_eq!(dev_of_fd_name("claim-8-16"), Some(k("8:16")));
        assert_eq!(dev_of_fd_name("claim-253-0"), Some(k("253:0")));
        for bad in [
            "claim-8",
            "claim-x-1",
            "socket",
            "claim-8-16-2",
            "8-16",
            "",
            "claim-8-1048576",
        ] {
            assert_eq!(dev_of_fd_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn store_messages_are_what_systemd_expects() {
        let msg = |devno: &str, remove: bool| {
            let name = fd_name(k(devno));
            let [a, b] = store_states(&name, remove);
            format!("{a}\n{b}")
        };
        assert_eq!(msg("8:0", false), "FDSTORE=1\nFDNAME=claim-8-0");
        assert_eq!(msg("253:3", true), "FDSTOREREMOVE=1\nFDNAME=claim-253-3");
    }

    #[test]
    fn only_our_passed_fds_are_adopted() {
        let passed = vec![
            (3, "claim-8-0".to_string()),
            (4, "varlink".to_string()),
            (5, "claim-259-1".to_string()),
            (6, "unknown".to_string()),
        ];
        assert_eq!(adoptable(passed), vec![(3, k("8:0")), (5, k("259:1"))]);
    }

    #[test]
    fn plan_takes_the_new_and_releases_the_gone() {
        let held = [k("8:0"), k("8:16")];
        let (take, release) = plan(held.iter(), &[w("A", "8:16"), w("B", "253:0")]);
        assert_eq!(take, vec![w("B", "253:0")]);
        assert_eq!(release, vec![k("8:0")]);
        let (take, release) = plan(held.iter(), &[]);
        assert!(take.is_empty());
        assert_eq!(release.len(), 2);
    }

    #[test]
    fn a_claim_on_the_wrong_device_number_is_refused() {
        // /dev/null is a character device: never claimed, whatever number is asked
        let e = claim(Path::new("/dev/null"), k("1:3")).unwrap_err();
        assert!(e.to_string().contains("is not block device 1:3"), "{e}");
        let c = Claims::new(false);
        c.sync(&[w("A", "1:3")], &[]);
        assert!(!c.holds(k("1:3")));
    }
}
