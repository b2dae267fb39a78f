//! Device numbers, the one type for the whole workspace: [`KernelDev`], a
//! block or character device number in the kernel's internal encoding
//! (`major << 20 | minor`, what BPF programs see in `inode->i_rdev`, what the
//! block tracepoints report and what asmguard's maps are keyed by), written
//! and parsed as `MAJ:MIN`, converted from and to the userspace `dev_t` that
//! `stat(2)` returns, and read from sysfs `dev` files.
//!
//! Values that do not fit the kernel's 12-bit major / 20-bit minor split are
//! refused with an error, never masked: a masked minor would name another
//! device (`8:1048576` is not `8:0`).
//!
//! Not for: what a device is or where it sits (`asmguard_devices::sysfs`).
//!
//! Here, in the filter's leaf crate, so that the decoded denial
//! ([`crate::denial::Denial`]) and the protocol carry the type itself:
//! serialised as `MAJ:MIN`.

use std::fmt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;
use std::str::FromStr;

const MINORBITS: u32 = 20;

/// A device number in the kernel's internal encoding (`major << 20 | minor`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct KernelDev(u32);

/// Why a device number could not be formed.
#[derive(Debug, thiserror::Error)]
pub enum DevtError {
    /// Major or minor does not fit the kernel's 12/20-bit split.
    #[error("device {major}:{minor} does not fit the kernel's dev_t (major at most 4095, minor at most 1048575)")]
    OutOfRange {
        /// Major number.
        major: u64,
        /// Minor number.
        minor: u64,
    },
    /// The text is not `MAJ:MIN` with two decimal numbers.
    #[error(
        "{text:?} is not a device number: expected MAJOR:MINOR (two decimal numbers, as in 8:16)"
    )]
    Syntax {
        /// The text given.
        text: String,
    },
    /// A sysfs `dev` file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A sysfs `dev` file holds no valid device number.
    #[error("{path}: {source}")]
    BadFile {
        /// The file.
        path: String,
        /// What was wrong with its text.
        #[source]
        source: Box<DevtError>,
    },
    /// The path could not be stat'ed.
    #[error("cannot stat {path}: {source}")]
    Stat {
        /// The path.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The path is not a device of the kind asked for.
    #[error("{path} is not a {what}")]
    NotDevice {
        /// The path.
        path: String,
        /// `block device`, or `block or character device`.
        what: &'static str,
    },
}

impl KernelDev {
    /// The largest major number (12 bits).
    pub const MAX_MAJOR: u32 = (1 << (32 - MINORBITS)) - 1;
    /// The largest minor number (20 bits).
    pub const MAX_MINOR: u32 = (1 << MINORBITS) - 1;

    /// From a major and a minor number; refuses values that do not fit.
    pub fn new(major: u32, minor: u32) -> Result<Self, DevtError> {
        Self::checked(major.into(), minor.into())
    }

    fn checked(major: u64, minor: u64) -> Result<Self, DevtError> {
        if major > u64::from(Self::MAX_MAJOR) || minor > u64::from(Self::MAX_MINOR) {
            return Err(DevtError::OutOfRange { major, minor });
        }
        Ok(Self(((major as u32) << MINORBITS) | minor as u32))
    }

    /// From a userspace `dev_t` (Linux/glibc's 64-bit encoding, as `stat(2)`'s
    /// `st_rdev` and `MetadataExt::rdev` return it).
    pub fn from_dev_t(dev: u64) -> Result<Self, DevtError> {
        let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
        let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
        Self::checked(major, minor)
    }

    /// The userspace `dev_t` (glibc's `makedev`).
    pub fn to_dev_t(self) -> u64 {
        let (major, minor) = (u64::from(self.major()), u64::from(self.minor()));
        ((major & 0xffff_f000) << 32)
            | ((major & 0xfff) << 8)
            | ((minor & 0xffff_ff00) << 12)
            | (minor & 0xff)
    }

    /// From the raw kernel encoding (as found in BPF maps and events).
    pub const fn from_raw(raw: u32) -> Self {
        Self(raw)
    }

    /// The raw kernel encoding.
    pub fn raw(self) -> u32 {
        self.0
    }

    /// The major number.
    pub fn major(self) -> u32 {
        self.0 >> MINORBITS
    }

    /// The minor number.
    pub fn minor(self) -> u32 {
        self.0 & Self::MAX_MINOR
    }

    /// Parses a sysfs `dev` file (`/sys/class/block/sdb/dev`: `8:16\n`).
    pub fn read_sysfs(path: &Path) -> Result<Self, DevtError> {
        let text = std::fs::read_to_string(path).map_err(|source| DevtError::Read {
            path: path.display().to_string(),
            source,
        })?;
        text.trim().parse().map_err(|e| DevtError::BadFile {
            path: path.display().to_string(),
            source: Box::new(e),
        })
    }

    /// The device number of the block device special file at `path`.
    pub fn of_block_device(path: &Path) -> Result<Self, DevtError> {
        match Self::of_device(path)? {
            (d, false) => Ok(d),
            (_, true) => Err(DevtError::NotDevice {
                path: path.display().to_string(),
                what: "block device",
            }),
        }
    }

    /// The device number of the block or character device special file at
    /// `path`, and whether it is a character device.
    pub fn of_device(path: &Path) -> Result<(Self, bool), DevtError> {
        let meta = std::fs::metadata(path).map_err(|source| DevtError::Stat {
            path: path.display().to_string(),
            source,
        })?;
        let ft = meta.file_type();
        if !ft.is_block_device() && !ft.is_char_device() {
            return Err(DevtError::NotDevice {
                path: path.display().to_string(),
                what: if ft.is_dir() || ft.is_file() {
                    "block device"
                } else {
                    "block or character device"
                },
            });
        }
        Ok((Self::from_dev_t(meta.rdev())?, ft.is_char_device()))
    }
}

impl fmt::Display for KernelDev {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.major(), self.minor())
    }
}

/// `"MAJ:MIN"` on the wire (`events`' `device`, a loop device's number).
impl serde::Serialize for KernelDev {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for KernelDev {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl FromStr for KernelDev {
    type Err = DevtError;

    /// `MAJ:MIN`, two decimal numbers (no sign, no spaces).
    fn from_str(s: &str) -> Result<Self, DevtError> {
        let syntax = || DevtError::Syntax { text: s.into() };
        let (ma, mi) = s.split_once(':').ok_or_else(syntax)?;
        let num = |t: &str| -> Result<u64, DevtError> {
            if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
                return Err(syntax());
            }
            // More digits than u64 holds is out of range too.
            Ok(t.parse().unwrap_or(u64::MAX))
        };
        Self::checked(num(ma)?, num(mi)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// glibc's makedev(), written out independently of `to_dev_t`.
    fn makedev(major: u64, minor: u64) -> u64 {
        ((major & 0xffff_f000) << 32)
            | ((major & 0xfff) << 8)
            | ((minor & 0xffff_ff00) << 12)
            | (minor & 0xff)
    }

    #[test]
    fn kernel_encoding_and_text() {
        let d = KernelDev::new(7, 3).unwrap();
        assert_eq!(d.raw(), (7 << 20) | 3);
        assert_eq!((d.major(), d.minor()), (7, 3));
        assert_eq!(d.to_string(), "7:3");
        assert_eq!("253:0".parse::<KernelDev>().unwrap().raw(), 0x0fd0_0000);
        // the classic 16-bit encoding of 8:16 (sdb) is 0x0810
        assert_eq!(
            KernelDev::from_dev_t(0x0810).unwrap(),
            KernelDev::new(8, 16).unwrap()
        );
        for (ma, mi) in [(7, 0), (259, 70000), (4095, 0xfffff)] {
            let d = KernelDev::from_dev_t(makedev(ma, mi)).unwrap();
            assert_eq!((d.major(), d.minor()), (ma as u32, mi as u32));
        }
    }

    #[test]
    fn out_of_range_is_refused_not_masked() {
        // Masking 8:1048576 to 20 bits gives 8:0 (sda): it must be an error.
        for (ma, mi) in [(8u64, 1u64 << 20), (4096, 0), (0, u64::from(u32::MAX))] {
            let e = format!("{ma}:{mi}").parse::<KernelDev>().unwrap_err();
            assert!(matches!(e, DevtError::OutOfRange { .. }), "{e}");
            assert!(e.to_string().contains(&format!("{ma}:{mi}")), "{e}");
        }
        assert!(KernelDev::new(4096, 0).is_err());
        assert!(KernelDev::new(8, 1 << 20).is_err());
        assert!(KernelDev::from_dev_t(makedev(5000, 1)).is_err());
        assert!(KernelDev::from_dev_t(makedev(8, 1 << 20)).is_err());
        assert!("8:99999999999999999999999".parse::<KernelDev>().is_err());
    }

    #[test]
    fn bad_text_is_a_syntax_error() {
        for t in [
            "", "8", "8:", ":16", "8:16:1", "a:1", "8:-1", "+8:16", " 8:16", "8:0x10",
        ] {
            assert!(
                matches!(t.parse::<KernelDev>(), Err(DevtError::Syntax { .. })),
                "{t:?}"
            );
        }
    }

    #[test]
    fn sysfs_dev_files() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("dev");
        std::fs::write(&f, "259:524288\n").unwrap();
        assert_eq!(
            KernelDev::read_sysfs(&f).unwrap(),
            KernelDev::new(259, 1 << 19).unwrap()
        );
        std::fs::write(&f, "8:1048576\n").unwrap();
        let e = KernelDev::read_sysfs(&f).unwrap_err();
        assert!(e.to_string().contains("does not fit"), "{e}");
        assert!(matches!(
            KernelDev::read_sysfs(&dir.path().join("none")),
            Err(DevtError::Read { .. })
        ));
    }

    #[test]
    fn stat_errors() {
        assert!(matches!(
            KernelDev::of_block_device(Path::new("/nonexistent/asmguard")),
            Err(DevtError::Stat { .. })
        ));
        assert!(matches!(
            KernelDev::of_block_device(Path::new("/")),
            Err(DevtError::NotDevice { .. })
        ));
        assert!(matches!(
            KernelDev::of_block_device(Path::new("/dev/null")),
            Err(DevtError::NotDevice { .. })
        ));
        let (null, chr) = KernelDev::of_device(Path::new("/dev/null")).unwrap();
        assert!(chr);
        assert_eq!(null.to_string(), "1:3");
    }

    proptest! {
        #[test]
        fn text_round_trip(ma in 0u32..=4095, mi in 0u32..=0xfffff) {
            let d = KernelDev::new(ma, mi).unwrap();
            prop_assert_eq!(d.to_string().parse::<KernelDev>().unwrap(), d);
            prop_assert_eq!(d.to_string(), format!("{ma}:{mi}"));
        }

        #[test]
        fn dev_t_round_trip(ma in 0u32..=4095, mi in 0u32..=0xfffff) {
            let d = KernelDev::new(ma, mi).unwrap();
            prop_assert_eq!(d.to_dev_t(), makedev(ma.into(), mi.into()));
            prop_assert_eq!(KernelDev::from_dev_t(d.to_dev_t()).unwrap(), d);
            prop_assert_eq!(KernelDev::from_raw(d.raw()), d);
        }

        #[test]
        fn out_of_range_minors_never_parse(ma in 0u32..=4095, mi in (1u64 << 20)..u64::from(u32::MAX)) {
            let e = format!("{ma}:{mi}").parse::<KernelDev>();
            prop_assert!(
                matches!(e, Err(DevtError::OutOfRange { .. })),
                "not refused"
            );
        }
    }
}
