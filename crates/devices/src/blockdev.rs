//! Opening a block device (or an image file) and reading/writing it with the alignment
//! `O_DIRECT` asks for: buffer, offset and length aligned to the logical block size
//! (512 and 4096 both). Every write is read back and compared.

use crate::writer::WriteOpen;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::devt::KernelDev;

/// What kind of thing was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceKind {
    BlockDevice,
    ImageFile,
}

/// Why a device could not be used. Each message names the path and what to do.
#[derive(Debug, thiserror::Error)]
pub enum DevError {
    #[error("{0}: no such file or device (check the path; `lsblk` lists block devices)")]
    NotFound(PathBuf),
    #[error("{0}: permission denied (run as root or as a member of the disk's group)")]
    PermissionDenied(PathBuf),
    #[error("{0}: is a {1}, not a block device or an image file")]
    WrongType(PathBuf, &'static str),
    #[error("{0}: too small ({1} bytes): an ASM disk needs at least {2} bytes")]
    TooSmall(PathBuf, u64, u64),
    #[error("{0}: is busy: {1} (unmount it or stop what holds it)")]
    Busy(PathBuf, String),
    #[error("{0}: the device is read-only (`blockdev --getro` says 1): make it writable (`blockdev --setrw`, or the array/hypervisor side) and retry")]
    ReadOnly(PathBuf),
    #[error("{path}: {what} failed: {source}")]
    Io {
        path: PathBuf,
        what: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("{path}: the write was not read back intact at byte {offset} (the device may be failing or was written concurrently)")]
    VerifyFailed { path: PathBuf, offset: u64 },
}

/// The smallest thing asmguard will look at: the label sector plus the probe's head.
pub const MIN_SIZE: u64 = 4096;

/// An opened device with its geometry.
#[derive(Debug)]
pub struct Device {
    file: File,
    pub path: PathBuf,
    pub kind: DeviceKind,
    pub size: u64,
    /// Logical block size (`BLKSSZGET`); 512 for image files.
    pub logical_block_size: u32,
    /// Physical block size (`BLKPBSZGET`); 512 for image files.
    pub physical_block_size: u32,
    /// The device number of a block device.
    pub rdev: Option<KernelDev>,
}

nix::ioctl_read_bad!(blksszget, 0x1268, libc::c_int);
nix::ioctl_read_bad!(blkpbszget, 0x127b, libc::c_uint);
nix::ioctl_read!(blkgetsize64, 0x12, 114, u64);
nix::ioctl_read_bad!(blkroget, 0x125e, libc::c_int);

fn io_err<'a>(path: &'a Path, what: &'static str) -> impl FnOnce(io::Error) -> DevError + 'a {
    move |source| match source.kind() {
        io::ErrorKind::NotFound => DevError::NotFound(path.to_path_buf()),
        io::ErrorKind::PermissionDenied => DevError::PermissionDenied(path.to_path_buf()),
        _ if source.raw_os_error() == Some(libc::EBUSY) => {
            DevError::Busy(path.to_path_buf(), "opened exclusively elsewhere".into())
        }
        _ => DevError::Io {
            path: path.to_path_buf(),
            what,
            source,
        },
    }
}

/// A buffer whose start is aligned to `align` (a power of two), without `unsafe`:
/// over-allocate and start at the first aligned byte.
pub struct AlignedBuf {
    raw: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    pub fn new(len: usize, align: usize) -> AlignedBuf {
        let raw = vec![0u8; len + align];
        let addr = raw.as_ptr() as usize;
        let start = (align - addr % align) % align;
        AlignedBuf { raw, start, len }
    }
    pub fn as_slice(&self) -> &[u8] {
        &self.raw[self.start..self.start + self.len]
    }
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.raw[self.start..self.start + self.len]
    }
}

impl Device {
    /// Open read-only (`O_DIRECT` for a block device, so no page-cache copy is read).
    pub fn open_read(path: &Path) -> Result<Device, DevError> {
        Self::open(path, None, false)
    }

    /// Open for writing: `O_RDWR | O_DIRECT | O_EXCL` for a block device (the kernel
    /// refuses `O_EXCL` while the device is mounted or held by dm/md).
    pub fn open_write(path: &Path) -> Result<Device, DevError> {
        Self::open_write_as(path, WriteOpen::default())
    }

    /// Open for writing as `how` says: with `held`, the caller itself holds the
    /// exclusive claim on this block device (asmguardd's claim on a managed
    /// disk), so the open goes without `O_EXCL`, which that claim would refuse,
    /// and stays exclusive of every other claimer all the same; the open is
    /// made by `how.writer` ([`crate::writer`]).
    pub fn open_write_as(path: &Path, how: WriteOpen) -> Result<Device, DevError> {
        Self::open(path, Some(how), false)
    }

    /// Open an image file or block device read-only without `O_DIRECT` (for files on
    /// filesystems without direct I/O, e.g. tmpfs).
    pub fn open_buffered(path: &Path) -> Result<Device, DevError> {
        Self::open(path, None, true)
    }

    /// `write`: how to open for writing (`None`: read-only).
    fn open(path: &Path, how: Option<WriteOpen>, buffered: bool) -> Result<Device, DevError> {
        let write = how.is_some();
        let held = how.is_some_and(|h| h.held);
        let meta = std::fs::metadata(path).map_err(io_err(path, "stat"))?;
        let ft = meta.file_type();
        let kind = if ft.is_block_device() {
            DeviceKind::BlockDevice
        } else if ft.is_file() {
            DeviceKind::ImageFile
        } else {
            let what = if ft.is_dir() {
                "directory"
            } else if ft.is_char_device() {
                "character device"
            } else if ft.is_fifo() {
                "fifo"
            } else if ft.is_socket() {
                "socket"
            } else {
                "special file"
            };
            return Err(DevError::WrongType(path.to_path_buf(), what));
        };
        let mut opts = OpenOptions::new();
        opts.read(true).write(write);
        let mut flags = libc::O_CLOEXEC;
        let direct = kind == DeviceKind::BlockDevice && !buffered;
        if direct {
            flags |= libc::O_DIRECT;
        }
        if write && kind == DeviceKind::BlockDevice && !held {
            flags |= libc::O_EXCL;
        }
        opts.custom_flags(flags);
        let opened = match how {
            Some(h) => h.writer.open(&opts, path),
            None => opts.open(path),
        };
        let file = opened.map_err(|e| {
            if e.raw_os_error() == Some(libc::EBUSY) {
                DevError::Busy(
                    path.to_path_buf(),
                    "mounted, or held by device-mapper, md or another exclusive opener".into(),
                )
            } else {
                io_err(path, "open")(e)
            }
        })?;
        let (size, logical, physical, rdev) = match kind {
            DeviceKind::ImageFile => (meta.len(), 512, 512, None),
            DeviceKind::BlockDevice => {
                let fd = file.as_raw_fd();
                let mut size = 0u64;
                let mut lbs: libc::c_int = 0;
                let mut pbs: libc::c_uint = 0;
                // SAFETY: fd is an open block device owned by `file`; each ioctl writes
                // one integer of the type given to the pointer we pass.
                unsafe {
                    blkgetsize64(fd, &mut size).map_err(|e| DevError::Io {
                        path: path.to_path_buf(),
                        what: "BLKGETSIZE64",
                        source: e.into(),
                    })?;
                    blksszget(fd, &mut lbs).map_err(|e| DevError::Io {
                        path: path.to_path_buf(),
                        what: "BLKSSZGET",
                        source: e.into(),
                    })?;
                    blkpbszget(fd, &mut pbs).map_err(|e| DevError::Io {
                        path: path.to_path_buf(),
                        what: "BLKPBSZGET",
                        source: e.into(),
                    })?;
                }
                if write {
                    let mut ro: libc::c_int = 0;
                    // SAFETY: as above; BLKROGET writes one int.
                    let got = unsafe { blkroget(fd, &mut ro) };
                    // A write to a read-only disk fails with EPERM, which says
                    // nothing useful: say what it is before trying.
                    if got.is_ok() && ro != 0 {
                        return Err(DevError::ReadOnly(path.to_path_buf()));
                    }
                }
                (
                    size,
                    lbs.max(512) as u32,
                    pbs.max(512),
                    KernelDev::from_dev_t(meta.rdev()).ok(),
                )
            }
        };
        Ok(Device {
            file,
            path: path.to_path_buf(),
            kind,
            size,
            logical_block_size: logical,
            physical_block_size: physical,
            rdev,
        })
    }

    /// Require at least `min` bytes.
    pub fn require_size(&self, min: u64) -> Result<(), DevError> {
        if self.size < min {
            return Err(DevError::TooSmall(self.path.clone(), self.size, min));
        }
        Ok(())
    }

    fn align(&self) -> u64 {
        self.logical_block_size.max(512) as u64
    }

    /// Read `len` bytes at `off` (clipped to the device), aligned internally.
    pub fn read_at(&self, off: u64, len: usize) -> Result<Vec<u8>, DevError> {
        if off >= self.size || len == 0 {
            return Ok(Vec::new());
        }
        let len = (len as u64).min(self.size - off) as usize;
        let a = self.align();
        let start = off / a * a;
        let end = (off + len as u64).div_ceil(a) * a;
        let end = end.min(self.size.div_ceil(a) * a);
        let n = (end - start) as usize;
        let mut buf = AlignedBuf::new(n, 4096);
        let mut done = 0usize;
        while done < n {
            let got = self
                .file
                .read_at(&mut buf.as_mut_slice()[done..], start + done as u64)
                .map_err(|source| DevError::Io {
                    path: self.path.clone(),
                    what: "read",
                    source,
                })?;
            if got == 0 {
                break;
            }
            done += got;
        }
        let skip = (off - start) as usize;
        let have = done.saturating_sub(skip).min(len);
        Ok(buf.as_slice()[skip..skip + have].to_vec())
    }

    /// Write `data` at `off`; both must be aligned to the logical block size. The data
    /// is synced and read back (with `O_DIRECT` on a block device) and compared.
    pub fn write_verified(&self, off: u64, data: &[u8]) -> Result<(), DevError> {
        let a = self.align();
        if off % a != 0 || data.len() as u64 % a != 0 || data.is_empty() {
            return Err(DevError::Io {
                path: self.path.clone(),
                what: "write",
                source: io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "write of {} bytes at {off} is not aligned to {a}",
                        data.len()
                    ),
                ),
            });
        }
        let mut buf = AlignedBuf::new(data.len(), 4096);
        buf.as_mut_slice().copy_from_slice(data);
        self.file
            .write_all_at(buf.as_slice(), off)
            .map_err(|source| DevError::Io {
                path: self.path.clone(),
                what: "write",
                source,
            })?;
        self.file.sync_all().map_err(|source| DevError::Io {
            path: self.path.clone(),
            what: "fsync",
            source,
        })?;
        let back = self.read_at(off, data.len())?;
        if let Some(i) = back.iter().zip(data).position(|(x, y)| x != y) {
            return Err(DevError::VerifyFailed {
                path: self.path.clone(),
                offset: off + i as u64,
            });
        }
        if back.len() != data.len() {
            return Err(DevError::VerifyFailed {
                path: self.path.clone(),
                offset: off + back.len() as u64,
            });
        }
        Ok(())
    }

    /// The label block: the first `max(512, logical block size)` bytes... and at least
    /// 4096 so a 4 KiB ASM metadata block is read whole.
    pub fn read_block0(&self) -> Result<Vec<u8>, DevError> {
        self.read_at(0, self.align().max(4096) as usize)
    }

    /// The head and tail the foreign-signature probe wants.
    pub fn read_probe_regions(&self) -> Result<(Vec<u8>, Vec<u8>), DevError> {
        let head = self.read_at(0, asmguard_format::probe::HEAD_LEN)?;
        let tlen = (asmguard_format::probe::TAIL_LEN as u64).min(self.size);
        let tail = self.read_at(self.size - tlen, tlen as usize)?;
        Ok((head, tail))
    }

    pub fn file(&self) -> &File {
        &self.file
    }
}
