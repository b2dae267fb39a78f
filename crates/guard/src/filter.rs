//! The write filter: `bpf/guard.bpf.c` loaded, attached and pinned.
//!
//! [`Guard::open`] picks the backend (the BPF LSM programs when `bpf` is an
//! active LSM and they load and attach; otherwise the cgroup-device program on
//! the cgroup-v2 root, open-time only), and pins maps and links under
//! [`PIN_DIR`] (`maps/<name>`, `links/<program>`). Pins keep protection on when
//! the process dies (`kill -9`); the next [`Guard::open`] re-adopts them: it
//! reuses the pinned maps and keeps every pinned link, attaching only what is
//! missing, so there is never a moment without the filter. [`Guard::uninstall`]
//! detaches everything and removes the pins.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::os::fd::{AsFd, AsRawFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use libbpf_rs::{Link, MapCore, MapFlags, MapHandle, Object, ObjectBuilder, ProgramType};

use crate::{Error, KernelDev};

/// Where maps and links are pinned.
pub const PIN_DIR: &str = "/sys/fs/bpf/asmguard";

/// The compiled `bpf/guard.bpf.c` (CO-RE: relocated at load time).
static GUARD_OBJ: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/guard.bpf.o"));

const MAP_NAMES: [&str; 8] = [
    "ag_blk",
    "ag_chr",
    "ag_uids",
    "ag_gids",
    "ag_exes",
    "ag_events",
    "ag_stats",
    "ag_counts",
];
/// Programs whose hook may be missing from a kernel: loaded only when the
/// kernel BTF has `bpf_lsm_<hook>`.
const OPTIONAL_LSM: [(&str, &str); 2] = [
    ("ag_file_ioctl_compat", "bpf_lsm_file_ioctl_compat"),
    ("ag_uring_cmd", "bpf_lsm_uring_cmd"),
];
/// The cgroup-device program, and its variant for kernels whose cgroup-device
/// programs may not call the task helpers (5.10): identity from uid and gid alone.
const CGROUP_PROG: &str = "ag_cgroup_dev";
const CGROUP_PROG_IDS: &str = "ag_cgroup_dev_ids";
const CGROUP_PROGS: [&str; 2] = [CGROUP_PROG, CGROUP_PROG_IDS];

const NHOOKS: usize = 9;
const STAT_RB_DROPS: u32 = 2 * NHOOKS as u32;

/// Which kernel mechanism enforces the filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// BPF LSM programs: open, write, ioctl, mmap, io_uring passthrough.
    Lsm,
    /// A cgroup-device program on the cgroup-v2 root: write-opens only.
    CgroupDevice,
}

impl Backend {
    /// `lsm` or `cgroup_device` (the metric's label value).
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Lsm => "lsm",
            Backend::CgroupDevice => "cgroup_device",
        }
    }

    /// What it covers, for `status`.
    pub fn coverage(self) -> &'static str {
        match self {
            Backend::Lsm => "full",
            Backend::CgroupDevice => "degraded: open-time only",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the filter does on one disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mode {
    /// Nothing.
    Off,
    /// Log (event, counter) and allow.
    Audit,
    /// Log and deny with EPERM.
    Enforce,
}

impl Mode {
    fn code(self) -> u32 {
        match self {
            Mode::Off => 0,
            Mode::Audit => 1,
            Mode::Enforce => 2,
        }
    }
    fn from_code(c: u32) -> Mode {
        match c {
            1 => Mode::Audit,
            2 => Mode::Enforce,
            _ => Mode::Off,
        }
    }
    /// `off`, `audit`, `enforce`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Off => "off",
            Mode::Audit => "audit",
            Mode::Enforce => "enforce",
        }
    }
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" => Ok(Mode::Off),
            "audit" => Ok(Mode::Audit),
            "enforce" => Ok(Mode::Enforce),
            _ => Err(format!("{s:?} is not one of enforce, audit, off")),
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The hook that saw an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Hook {
    /// `lsm/file_open`: a write-open.
    FileOpen,
    /// `lsm/file_permission`: a write on an fd opened earlier.
    FilePermission,
    /// `lsm/file_ioctl`.
    FileIoctl,
    /// `lsm/file_ioctl_compat` (32-bit callers).
    FileIoctlCompat,
    /// `lsm/mmap_file`: a shared writable mapping.
    MmapFile,
    /// `lsm/file_mprotect`: a shared mapping made writable.
    FileMprotect,
    /// `lsm/uring_cmd`: io_uring passthrough.
    UringCmd,
    /// The cgroup-device fallback (write-open).
    CgroupDevice,
    /// A code this build does not know.
    Unknown(u32),
}

impl Hook {
    fn from_code(c: u32) -> Hook {
        match c {
            1 => Hook::FileOpen,
            2 => Hook::FilePermission,
            3 => Hook::FileIoctl,
            4 => Hook::FileIoctlCompat,
            5 => Hook::MmapFile,
            6 => Hook::FileMprotect,
            7 => Hook::UringCmd,
            8 => Hook::CgroupDevice,
            n => Hook::Unknown(n),
        }
    }
    /// The metric label value (`file_open`, `file_ioctl`, `cgroup_device` ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Hook::FileOpen => "file_open",
            Hook::FilePermission => "file_permission",
            Hook::FileIoctl => "file_ioctl",
            Hook::FileIoctlCompat => "file_ioctl_compat",
            Hook::MmapFile => "mmap_file",
            Hook::FileMprotect => "file_mprotect",
            Hook::UringCmd => "uring_cmd",
            Hook::CgroupDevice => "cgroup_device",
            Hook::Unknown(_) => "unknown",
        }
    }
}

impl fmt::Display for Hook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A device in the managed set: its kernel dev_t and whether it is a character
/// device (block and character devices can share numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DevKey {
    /// Kernel dev_t.
    pub dev: KernelDev,
    /// A character device (sg, bsg, NVMe generic) rather than a block device.
    pub chr: bool,
}

impl DevKey {
    /// A block device.
    pub fn block(dev: KernelDev) -> Self {
        DevKey { dev, chr: false }
    }
    /// A character device.
    pub fn char(dev: KernelDev) -> Self {
        DevKey { dev, chr: true }
    }
    /// The device special file at `path` (block or character).
    pub fn of_path(path: &Path) -> Result<Self, crate::DevtError> {
        let (dev, chr) = KernelDev::of_device(path)?;
        Ok(DevKey { dev, chr })
    }
}

impl fmt::Display for DevKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", if self.chr { "c" } else { "b" }, self.dev)
    }
}

/// An executable in the allow-list: its filesystem (kernel dev_t) and inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExeId {
    /// Kernel dev_t of the filesystem holding it.
    pub dev: KernelDev,
    /// Inode number.
    pub ino: u64,
}

impl ExeId {
    /// The executable at `path` (symlinks followed).
    pub fn of_path(path: &Path) -> Result<Self, crate::DevtError> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path).map_err(|source| crate::DevtError::Stat {
            path: path.display().to_string(),
            source,
        })?;
        Ok(ExeId {
            dev: KernelDev::from_user(meta.dev())?,
            ino: meta.ino(),
        })
    }
    fn key(self) -> [u8; 16] {
        let mut k = [0u8; 16];
        k[..8].copy_from_slice(&self.ino.to_ne_bytes());
        k[8..12].copy_from_slice(&self.dev.raw().to_ne_bytes());
        k
    }
}

/// One denied (or, in audit mode, logged) operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DenialEvent {
    /// Kernel monotonic time (ns).
    pub ts_ns: u64,
    /// Process id (thread group).
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Real uid.
    pub uid: u32,
    /// Effective uid.
    pub euid: u32,
    /// Filesystem uid.
    pub fsuid: u32,
    /// Effective gid.
    pub egid: u32,
    /// Command name (kernel `comm`: for display only, never for decisions).
    pub comm: String,
    /// The executable, resolved from `/proc/<pid>/exe` in userspace (best
    /// effort: empty when the process is gone).
    pub exe: String,
    /// The executable's filesystem and inode, as the kernel saw them.
    pub exe_id: ExeId,
    /// The device.
    pub dev: DevKey,
    /// The disk id given with [`Guard::set_disk`].
    pub disk_id: u32,
    /// The hook.
    pub hook: Hook,
    /// Hook-specific: f_mode (open), mask (write), ioctl cmd, prot (mmap,
    /// mprotect), uring cmd_op, access_type (cgroup device).
    pub op: u32,
    /// [`Mode::Enforce`] (denied) or [`Mode::Audit`] (logged, allowed).
    pub mode: Mode,
}

/// Size of `struct ag_event` (bpf/guard.h).
const EVENT_SIZE: usize = 88;

impl DenialEvent {
    /// Decodes a `struct ag_event` record (bpf/guard.h); `None` if short.
    pub fn parse(b: &[u8]) -> Option<DenialEvent> {
        if b.len() < EVENT_SIZE {
            return None;
        }
        let u64_at = |o: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[o..o + 8]);
            u64::from_ne_bytes(a)
        };
        let u32_at = |o: usize| {
            let mut a = [0u8; 4];
            a.copy_from_slice(&b[o..o + 4]);
            u32::from_ne_bytes(a)
        };
        let comm_raw = &b[72..88];
        let end = comm_raw.iter().position(|&c| c == 0).unwrap_or(16);
        let flags = u32_at(64);
        Some(DenialEvent {
            ts_ns: u64_at(0),
            exe_id: ExeId {
                ino: u64_at(8),
                dev: KernelDev::from_raw(u32_at(16)),
            },
            pid: u32_at(20),
            tid: u32_at(24),
            uid: u32_at(28),
            euid: u32_at(32),
            fsuid: u32_at(36),
            egid: u32_at(40),
            dev: DevKey {
                dev: KernelDev::from_raw(u32_at(44)),
                chr: flags & 1 != 0,
            },
            disk_id: u32_at(48),
            hook: Hook::from_code(u32_at(52)),
            op: u32_at(56),
            mode: Mode::from_code(u32_at(60)),
            comm: String::from_utf8_lossy(&comm_raw[..end]).into_owned(),
            exe: String::new(),
        })
    }

    /// A short name of the operation: the ioctl's name, `write-open`, `write`,
    /// `mmap-shared-write` ...
    pub fn operation(&self) -> String {
        match self.hook {
            Hook::FileOpen => "write-open".into(),
            Hook::FilePermission => "write".into(),
            Hook::FileIoctl | Hook::FileIoctlCompat => ioctl_name(self.op),
            Hook::MmapFile => "mmap-shared-write".into(),
            Hook::FileMprotect => "mprotect-shared-write".into(),
            Hook::UringCmd => format!("uring-cmd 0x{:x}", self.op),
            Hook::CgroupDevice => "write-open".into(),
            Hook::Unknown(_) => format!("op 0x{:x}", self.op),
        }
    }
}

/// The name of an ioctl the filter denies.
pub fn ioctl_name(cmd: u32) -> String {
    let ty = (cmd >> 8) & 0xff;
    let nr = cmd & 0xff;
    let name = match cmd {
        0x125d => "BLKROSET",
        0x125f => "BLKRRPART",
        0x1269 => "BLKPG",
        0x1277 => "BLKDISCARD",
        0x127d => "BLKSECDISCARD",
        0x127f => "BLKZEROOUT",
        0x2285 => "SG_IO",
        0x1 => "SCSI_IOCTL_SEND_COMMAND",
        _ => match (ty, nr) {
            (0x12, 131) => "BLKRESETZONE",
            (0x12, 134) => "BLKOPENZONE",
            (0x12, 135) => "BLKCLOSEZONE",
            (0x12, 136) => "BLKFINISHZONE",
            (0x4e, 0x41) => "NVME_IOCTL_ADMIN_CMD",
            (0x4e, 0x42) => "NVME_IOCTL_SUBMIT_IO",
            (0x4e, 0x43) => "NVME_IOCTL_IO_CMD",
            (0x4e, 0x44) => "NVME_IOCTL_RESET",
            (0x4e, 0x45) => "NVME_IOCTL_SUBSYS_RESET",
            (0x4e, 0x46) => "NVME_IOCTL_RESCAN",
            (0x4e, 0x47) => "NVME_IOCTL_ADMIN64_CMD",
            (0x4e, 0x48) => "NVME_IOCTL_IO64_CMD",
            (0x4e, 0x49) => "NVME_IOCTL_IO64_CMD_VEC",
            (0x70, 200) => "IOC_PR_REGISTER",
            (0x70, 201) => "IOC_PR_RESERVE",
            (0x70, 202) => "IOC_PR_RELEASE",
            (0x70, 203) => "IOC_PR_PREEMPT",
            (0x70, 204) => "IOC_PR_PREEMPT_ABORT",
            (0x70, 205) => "IOC_PR_CLEAR",
            _ => return format!("ioctl 0x{cmd:x}"),
        },
    };
    name.to_string()
}

/// Counters kept by the programs (since they were loaded).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Denials (enforce), by hook.
    pub denied: BTreeMap<Hook, u64>,
    /// Logged and allowed (audit), by hook.
    pub audited: BTreeMap<Hook, u64>,
    /// Events lost because the ring buffer was full.
    pub ringbuf_drops: u64,
}

impl Stats {
    /// All denials.
    pub fn denied_total(&self) -> u64 {
        self.denied.values().sum()
    }
}

/// How to open the guard.
#[derive(Debug, Clone)]
pub struct Options {
    /// Pin directory (default [`PIN_DIR`]).
    pub pin_dir: PathBuf,
    /// Force a backend instead of choosing (tests; `None`: choose).
    pub backend: Option<Backend>,
    /// The cgroup-v2 directory for the fallback (default: the cgroup2 mount
    /// found in /proc/mounts).
    pub cgroup: Option<PathBuf>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            pin_dir: PathBuf::from(PIN_DIR),
            backend: None,
            cgroup: None,
        }
    }
}

/// The loaded, attached and pinned filter.
pub struct Guard {
    backend: Backend,
    reason: String,
    adopted: bool,
    pin_dir: PathBuf,
    links: Vec<(String, Link)>,
    blk: MapHandle,
    chr: MapHandle,
    uids: MapHandle,
    gids: MapHandle,
    exes: MapHandle,
    events: MapHandle,
    stats: MapHandle,
    counts: MapHandle,
    // Last: the programs' fds (the links hold the programs attached anyway).
    _obj: Object,
}

impl fmt::Debug for Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guard")
            .field("backend", &self.backend)
            .field("reason", &self.reason)
            .field("adopted", &self.adopted)
            .field(
                "links",
                &self
                    .links
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

fn io_err(what: &'static str) -> impl FnOnce(std::io::Error) -> Error {
    move |e| Error::Io { what, source: e }
}

/// Whether `name` (NUL-terminated) is in the kernel BTF's strings (a cheap
/// test for a `bpf_lsm_<hook>` function).
fn kernel_btf_has(btf: &[u8], name: &str) -> bool {
    let mut needle = Vec::with_capacity(name.len() + 2);
    needle.push(0);
    needle.extend_from_slice(name.as_bytes());
    needle.push(0);
    btf.windows(needle.len()).any(|w| w == needle.as_slice())
}

/// The active LSM list (`/sys/kernel/security/lsm`), mounting securityfs if
/// needed.
pub fn active_lsms() -> Result<String, String> {
    let path = Path::new("/sys/kernel/security/lsm");
    if !path.exists() {
        mount_fs("securityfs", "/sys/kernel/security");
    }
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// How to turn the BPF LSM on, when the kernel has it built in but `bpf` is not
/// in its active LSM list; `None` when it is active or not built in. Built in:
/// `CONFIG_BPF_LSM=y` in `/boot/config-$(uname -r)`, or its hook functions
/// (`bpf_lsm_file_open`) in the kernel's BTF.
pub fn bpf_lsm_hint() -> Option<String> {
    let lsms = active_lsms().ok()?;
    bpf_lsm_hint_for(&lsms, bpf_lsm_built_in())
}

fn bpf_lsm_built_in() -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let config =
        std::fs::read_to_string(format!("/boot/config-{}", release.trim())).unwrap_or_default();
    if config.lines().any(|l| l.trim() == "CONFIG_BPF_LSM=y") {
        return true;
    }
    let btf = std::fs::read("/sys/kernel/btf/vmlinux").unwrap_or_default();
    kernel_btf_has(&btf, "bpf_lsm_file_open")
}

/// The hint for an active list `lsms` (as in `/sys/kernel/security/lsm`).
pub fn bpf_lsm_hint_for(lsms: &str, built_in: bool) -> Option<String> {
    let list: Vec<&str> = lsms.trim().split(',').filter(|l| !l.is_empty()).collect();
    if !built_in || list.contains(&"bpf") {
        return None;
    }
    // capability is always first and implicit: the lsm= list names the others.
    let mut want: Vec<&str> = list.into_iter().filter(|l| *l != "capability").collect();
    want.push("bpf");
    let arg = format!("lsm={}", want.join(","));
    Some(format!(
        "this kernel has the BPF LSM but it is not active: boot with {arg} \
         (RHEL/Oracle Linux: grubby --update-kernel=ALL --args=\"{arg}\"; \
         Debian/Ubuntu: add {arg} to GRUB_CMDLINE_LINUX in /etc/default/grub, run update-grub) \
         and reboot"
    ))
}

/// `mount -t FSTYPE FSTYPE TARGET`, best effort.
fn mount_fs(fstype: &str, target: &str) {
    let Ok(src) = std::ffi::CString::new(fstype) else {
        return;
    };
    let Ok(tgt) = std::ffi::CString::new(target) else {
        return;
    };
    // SAFETY: mount(2) with valid NUL-terminated strings and a null data pointer.
    unsafe {
        libc::mount(
            src.as_ptr(),
            tgt.as_ptr(),
            src.as_ptr(),
            0,
            std::ptr::null(),
        );
    }
}

/// Makes sure a bpffs is mounted at /sys/fs/bpf when the pin directory is
/// below it.
fn ensure_bpffs(pin_dir: &Path) {
    const BPF_FS_MAGIC: i64 = 0xcafe_4a11;
    if !pin_dir.starts_with("/sys/fs/bpf") {
        return;
    }
    let Ok(path) = std::ffi::CString::new("/sys/fs/bpf") else {
        return;
    };
    let mut st = std::mem::MaybeUninit::<libc::statfs>::zeroed();
    // SAFETY: statfs(2) writes into a buffer of the right type and size.
    let rc = unsafe { libc::statfs(path.as_ptr(), st.as_mut_ptr()) };
    // SAFETY: zero-initialised and, when rc == 0, filled by the kernel.
    #[allow(clippy::unnecessary_cast)] // f_type is not i64 on every target
    let magic = unsafe { st.assume_init() }.f_type as i64;
    if rc != 0 || magic != BPF_FS_MAGIC {
        mount_fs("bpf", "/sys/fs/bpf");
    }
}

/// The first cgroup-v2 mount point in /proc/mounts.
pub fn cgroup2_root() -> Result<PathBuf, Error> {
    let mounts = std::fs::read_to_string("/proc/mounts").map_err(io_err("reading /proc/mounts"))?;
    mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let _src = f.next()?;
            let dir = f.next()?;
            let ty = f.next()?;
            (ty == "cgroup2").then(|| PathBuf::from(dir.replace("\\040", " ")))
        })
        .min_by_key(|p| p.components().count())
        .ok_or(Error::NoCgroup2)
}

fn libbpf_to_stderr(_level: libbpf_rs::PrintLevel, msg: String) {
    eprint!("libbpf: {msg}");
}

/// The backend whose links are pinned in `pin_dir`, if any.
pub fn pinned_backend(pin_dir: &Path) -> Option<Backend> {
    let links = std::fs::read_dir(pin_dir.join("links")).ok()?;
    let names: Vec<String> = links
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    if names.iter().any(|n| CGROUP_PROGS.contains(&n.as_str())) {
        Some(Backend::CgroupDevice)
    } else if names.iter().any(|n| n.starts_with("ag_")) {
        Some(Backend::Lsm)
    } else {
        None
    }
}

/// Removes every pin (links first: detaching the programs) under `pin_dir`.
/// The filter is off once this returns. Not an error if nothing was pinned.
pub fn remove_pins(pin_dir: &Path) -> Result<(), Error> {
    // The managed set first: programs that stay attached a moment longer (or,
    // on a kernel that cannot detach them, until reboot) then find no device.
    for name in ["ag_blk", "ag_chr"] {
        if let Ok(map) = MapHandle::from_pinned_path(pin_dir.join("maps").join(name)) {
            let keys: Vec<Vec<u8>> = map.keys().collect();
            for k in keys {
                delete_quiet(&map, &k)?;
            }
        }
    }
    // Hold every link while the pins go: dropping a pin defers the release to
    // a kernel work item, closing the last fd releases synchronously. So the
    // programs are detached when this returns, not a moment later.
    let mut held = Vec::new();
    for sub in ["links", "maps"] {
        let dir = pin_dir.join(sub);
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io_err("reading the pin directory")(e)),
        };
        for e in entries.flatten() {
            let p = e.path();
            if sub == "links" {
                if let Ok(link) = Link::open(&p) {
                    held.push(link);
                }
            }
            std::fs::remove_file(&p).map_err(io_err("removing a pin"))?;
        }
        let _ = std::fs::remove_dir(&dir);
    }
    let _ = std::fs::remove_dir(pin_dir);
    let ids: Vec<u32> = held.iter().filter_map(link_id).collect();
    for link in held {
        // Cgroup links detach at once; for LSM (tracing) links the kernel has
        // no detach operation and the close below does it.
        let _ = link.detach();
        drop(link);
    }
    wait_links_gone(&ids, Duration::from_secs(5))
}

/// The kernel's id of a link, from its fd's `/proc/self/fdinfo` (`link_id:`).
fn link_id(link: &Link) -> Option<u32> {
    let fd = link.as_fd().as_raw_fd();
    std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("link_id:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Whether a link with this id still exists.
fn link_exists(id: u32) -> bool {
    // SAFETY: bpf_link_get_fd_by_id takes a plain id and returns a new fd we own
    // (closed right away) or a negative error.
    let fd = unsafe { libbpf_rs::libbpf_sys::bpf_link_get_fd_by_id(id) };
    if fd >= 0 {
        // SAFETY: fd was just returned to us and is closed once.
        unsafe { libc::close(fd) };
        true
    } else {
        // ENOENT: gone. Anything else (EPERM ...): cannot tell, assume gone.
        false
    }
}

/// Waits until none of the links `ids` exists any more. On some kernels (5.10)
/// the last reference to an unpinned link is the bpffs inode's, dropped after
/// an RCU grace period: the programs stay attached for a moment after the
/// pins are gone. `filter disable` and uninstall return once they are detached.
fn wait_links_gone(ids: &[u32], timeout: Duration) -> Result<(), Error> {
    if ids.is_empty() {
        return Ok(());
    }
    let t0 = Instant::now();
    loop {
        let left: Vec<u32> = ids.iter().copied().filter(|id| link_exists(*id)).collect();
        if left.is_empty() {
            return Ok(());
        }
        if t0.elapsed() > timeout {
            return Err(Error::Detach(format!(
                "the kernel keeps links {left:?} attached {} ms after their pins were \
                 removed; they are inert (the managed set is empty) and go at reboot",
                timeout.as_millis()
            )));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

impl Guard {
    /// Loads (or re-adopts) the filter with the default options.
    pub fn open_default() -> Result<Guard, Error> {
        Guard::open(&Options::default())
    }

    /// Loads the filter, or re-adopts the one pinned in `opts.pin_dir`.
    ///
    /// Backend choice: the pinned one if there are pins; else `opts.backend`
    /// if given; else the LSM programs when `bpf` is an active LSM and they
    /// load and attach, else the cgroup-device program ([`Guard::reason`] says
    /// why).
    pub fn open(opts: &Options) -> Result<Guard, Error> {
        ensure_bpffs(&opts.pin_dir);
        std::fs::create_dir_all(opts.pin_dir.join("maps"))
            .map_err(io_err("creating the pin directory"))?;
        std::fs::create_dir_all(opts.pin_dir.join("links"))
            .map_err(io_err("creating the pin directory"))?;

        if let Some(b) = pinned_backend(&opts.pin_dir) {
            let mut g = match b {
                Backend::CgroupDevice => {
                    let prog = if opts.pin_dir.join("links").join(CGROUP_PROG_IDS).exists() {
                        CGROUP_PROG_IDS
                    } else {
                        CGROUP_PROG
                    };
                    Guard::load_with(opts, b, prog, "re-adopted the pinned filter".into())?
                }
                Backend::Lsm => Guard::load(opts, b, "re-adopted the pinned filter".into())?,
            };
            g.adopted = true;
            return Ok(g);
        }
        match opts.backend {
            Some(Backend::Lsm) => {
                Guard::load(opts, Backend::Lsm, "requested".into()).inspect_err(|_| {
                    let _ = remove_links(&opts.pin_dir);
                })
            }
            Some(Backend::CgroupDevice) => {
                Guard::load(opts, Backend::CgroupDevice, "requested".into())
            }
            None => {
                let why = match active_lsms() {
                    Ok(l) if l.split(',').any(|x| x == "bpf") => {
                        // libbpf's own complaints (a verifier log, "try raising
                        // ulimit -l") would only confuse: the reason says it.
                        let prev = libbpf_rs::set_print(None);
                        let r =
                            Guard::load(opts, Backend::Lsm, format!("bpf is an active LSM ({l})"));
                        libbpf_rs::set_print(
                            prev.or(Some((libbpf_rs::PrintLevel::Warn, libbpf_to_stderr))),
                        );
                        match r {
                            Ok(g) => return Ok(g),
                            Err(e) => {
                                let _ = remove_links(&opts.pin_dir);
                                format!("the BPF LSM programs could not load or attach: {e}")
                            }
                        }
                    }
                    Ok(l) => format!("bpf is not an active LSM ({l})"),
                    Err(e) => e,
                };
                Guard::load(opts, Backend::CgroupDevice, why)
            }
        }
    }

    fn load(opts: &Options, backend: Backend, reason: String) -> Result<Guard, Error> {
        if backend == Backend::Lsm {
            return Guard::load_with(opts, backend, "", reason);
        }
        // The full cgroup-device program first; where the kernel refuses its
        // helpers (5.10 allows cgroup-device programs bpf_get_current_uid_gid
        // but not the task walk), the uid/gid variant.
        let prev = libbpf_rs::set_print(None);
        let full = Guard::load_with(opts, backend, CGROUP_PROG, reason.clone());
        libbpf_rs::set_print(prev.or(Some((libbpf_rs::PrintLevel::Warn, libbpf_to_stderr))));
        match full {
            Ok(g) => Ok(g),
            Err(e) => Guard::load_with(
                opts,
                backend,
                CGROUP_PROG_IDS,
                format!(
                    "{reason}; identity from uid and gid only (this kernel refuses the task \
                     helpers to cgroup-device programs: {e})"
                ),
            ),
        }
    }

    /// Loads `backend`; `cgroup_prog` names the cgroup-device program to use.
    fn load_with(
        opts: &Options,
        backend: Backend,
        cgroup_prog: &str,
        reason: String,
    ) -> Result<Guard, Error> {
        let btf = std::fs::read("/sys/kernel/btf/vmlinux").unwrap_or_default();
        let mut open = ObjectBuilder::default()
            .open_memory(GUARD_OBJ)
            .map_err(Error::bpf("opening the guard BPF object"))?;
        for mut prog in open.progs_mut() {
            let name = prog.name().to_string_lossy().into_owned();
            let load = match backend {
                Backend::CgroupDevice => name == cgroup_prog,
                Backend::Lsm => {
                    !CGROUP_PROGS.contains(&name.as_str())
                        && OPTIONAL_LSM
                            .iter()
                            .find(|(p, _)| *p == name)
                            .is_none_or(|(_, f)| kernel_btf_has(&btf, f))
                }
            };
            prog.set_autoload(load);
        }
        for mut map in open.maps_mut() {
            let name = map.name().to_string_lossy().into_owned();
            if MAP_NAMES.contains(&name.as_str()) {
                map.set_pin_path(opts.pin_dir.join("maps").join(&name))
                    .map_err(Error::bpf("setting a map pin path"))?;
            }
        }
        // libbpf reuses the pinned maps that exist and pins the ones it creates.
        let obj = open
            .load()
            .map_err(Error::bpf("loading the guard BPF programs"))?;

        let handle = |name: &str| -> Result<MapHandle, Error> {
            let map = obj
                .maps()
                .find(|m| m.name() == name)
                .ok_or(Error::MissingMap(name.to_string()))?;
            MapHandle::try_from(&map).map_err(Error::bpf("duplicating a map fd"))
        };
        let blk = handle("ag_blk")?;
        let chr = handle("ag_chr")?;
        let uids = handle("ag_uids")?;
        let gids = handle("ag_gids")?;
        let exes = handle("ag_exes")?;
        let events = handle("ag_events")?;
        let stats = handle("ag_stats")?;
        let counts = handle("ag_counts")?;

        let cgroup = match backend {
            Backend::CgroupDevice => {
                let dir = match &opts.cgroup {
                    Some(d) => d.clone(),
                    None => cgroup2_root()?,
                };
                Some(std::fs::File::open(&dir).map_err(io_err("opening the cgroup2 root"))?)
            }
            Backend::Lsm => None,
        };

        let mut links = Vec::new();
        for prog in obj.progs_mut() {
            if !prog.autoload() {
                continue;
            }
            let name = prog.name().to_string_lossy().into_owned();
            let pin = opts.pin_dir.join("links").join(&name);
            if pin.exists() {
                let link = Link::open(&pin).map_err(Error::bpf("opening a pinned link"))?;
                links.push((name, link));
                continue;
            }
            let mut link = match (&cgroup, prog.prog_type()) {
                (Some(cg), ProgramType::CgroupDevice) => prog
                    .attach_cgroup(cg.as_raw_fd())
                    .map_err(Error::bpf("attaching the cgroup device program"))?,
                _ => prog
                    .attach_lsm()
                    .map_err(Error::bpf("attaching an LSM program"))?,
            };
            link.pin(&pin).map_err(Error::bpf("pinning a link"))?;
            links.push((name, link));
        }
        Ok(Guard {
            backend,
            reason,
            adopted: false,
            pin_dir: opts.pin_dir.clone(),
            links,
            blk,
            chr,
            uids,
            gids,
            exes,
            events,
            stats,
            counts,
            _obj: obj,
        })
    }

    /// The backend in use.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Why this backend.
    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// Whether pinned programs were re-adopted (rather than attached now).
    pub fn adopted(&self) -> bool {
        self.adopted
    }

    /// The attached programs (their names, e.g. `ag_file_open`).
    pub fn programs(&self) -> Vec<String> {
        self.links.iter().map(|(n, _)| n.clone()).collect()
    }

    fn dev_map(&self, key: DevKey) -> &MapHandle {
        if key.chr {
            &self.chr
        } else {
            &self.blk
        }
    }

    /// Puts devices into the managed set (or changes their mode).
    pub fn set_disk(&self, devs: &[DevKey], mode: Mode, disk_id: u32) -> Result<(), Error> {
        let mut value = [0u8; 8];
        value[..4].copy_from_slice(&disk_id.to_ne_bytes());
        value[4..].copy_from_slice(&mode.code().to_ne_bytes());
        for d in devs {
            self.dev_map(*d)
                .update(&d.dev.raw().to_ne_bytes(), &value, MapFlags::ANY)
                .map_err(Error::bpf("updating the managed set"))?;
        }
        Ok(())
    }

    /// Removes devices from the managed set (absent ones are fine).
    pub fn remove_disk(&self, devs: &[DevKey]) -> Result<(), Error> {
        for d in devs {
            delete_quiet(self.dev_map(*d), &d.dev.raw().to_ne_bytes())?;
        }
        Ok(())
    }

    /// The managed set: device -> (mode, disk id).
    pub fn disks(&self) -> Result<BTreeMap<DevKey, (Mode, u32)>, Error> {
        let mut out = BTreeMap::new();
        for (map, chr) in [(&self.blk, false), (&self.chr, true)] {
            for key in map.keys() {
                let Some(raw) = read_u32(&key) else { continue };
                let Some(v) = map
                    .lookup(&key, MapFlags::ANY)
                    .map_err(Error::bpf("reading the managed set"))?
                else {
                    continue;
                };
                let (Some(id), Some(mode)) = (read_u32(&v[..4]), read_u32(&v[4..])) else {
                    continue;
                };
                out.insert(
                    DevKey {
                        dev: KernelDev::from_raw(raw),
                        chr,
                    },
                    (Mode::from_code(mode), id),
                );
            }
        }
        Ok(out)
    }

    /// Replaces the allow-list: effective/fs uids, effective/fs gids,
    /// executables. New entries go in before old ones leave.
    pub fn set_allow(&self, uids: &[u32], gids: &[u32], exes: &[ExeId]) -> Result<(), Error> {
        let uk: BTreeSet<Vec<u8>> = uids.iter().map(|u| u.to_ne_bytes().to_vec()).collect();
        let gk: BTreeSet<Vec<u8>> = gids.iter().map(|g| g.to_ne_bytes().to_vec()).collect();
        let ek: BTreeSet<Vec<u8>> = exes.iter().map(|e| e.key().to_vec()).collect();
        for (map, keys) in [(&self.uids, &uk), (&self.gids, &gk), (&self.exes, &ek)] {
            for k in keys {
                map.update(k, &[1u8], MapFlags::ANY)
                    .map_err(Error::bpf("updating the allow-list"))?;
            }
            let stale: Vec<Vec<u8>> = map.keys().filter(|k| !keys.contains(k)).collect();
            for k in stale {
                delete_quiet(map, &k)?;
            }
        }
        Ok(())
    }

    /// The allow-list as the kernel sees it: (uids, gids, executables).
    pub fn allow(&self) -> (Vec<u32>, Vec<u32>, Vec<ExeId>) {
        let ids = |m: &MapHandle| m.keys().filter_map(|k| read_u32(&k)).collect::<Vec<_>>();
        let exes = self
            .exes
            .keys()
            .filter(|k| k.len() >= 12)
            .map(|k| ExeId {
                ino: u64::from_ne_bytes(k[..8].try_into().unwrap_or_default()),
                dev: KernelDev::from_raw(read_u32(&k[8..12]).unwrap_or(0)),
            })
            .collect();
        (ids(&self.uids), ids(&self.gids), exes)
    }

    /// The kernel's exact counts per disk: (disk id, hook, mode) -> operations
    /// denied (mode enforce) or audited. Never misses one (unlike the events).
    pub fn disk_counts(&self) -> Result<BTreeMap<(u32, Hook, Mode), u64>, Error> {
        let mut out = BTreeMap::new();
        for k in self.counts.keys() {
            let (Some(disk), Some(idx)) = (read_u32(&k), k.get(4..).and_then(read_u32)) else {
                continue;
            };
            let Some(v) = self
                .counts
                .lookup(&k, MapFlags::ANY)
                .map_err(Error::bpf("reading the per-disk counters"))?
            else {
                continue;
            };
            let n = v
                .get(..8)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_ne_bytes)
                .unwrap_or(0);
            let (hook, mode) = if idx >= NHOOKS as u32 {
                (Hook::from_code(idx - NHOOKS as u32), Mode::Audit)
            } else {
                (Hook::from_code(idx), Mode::Enforce)
            };
            *out.entry((disk, hook, mode)).or_insert(0) += n;
        }
        Ok(out)
    }

    /// The programs' counters.
    pub fn stats(&self) -> Result<Stats, Error> {
        let mut s = Stats::default();
        let get = |i: u32| -> Result<u64, Error> {
            let v = self
                .stats
                .lookup(&i.to_ne_bytes(), MapFlags::ANY)
                .map_err(Error::bpf("reading the filter counters"))?
                .unwrap_or_default();
            Ok(v.get(..8)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_ne_bytes)
                .unwrap_or(0))
        };
        for code in 1..NHOOKS as u32 {
            let hook = Hook::from_code(code);
            let d = get(code)?;
            if d > 0 {
                s.denied.insert(hook, d);
            }
            let a = get(NHOOKS as u32 + code)?;
            if a > 0 {
                s.audited.insert(hook, a);
            }
        }
        s.ringbuf_drops = get(STAT_RB_DROPS)?;
        Ok(s)
    }

    /// A reader of the denial events (its own handle on the ring buffer; move
    /// it to a thread).
    pub fn event_reader(&self) -> Result<EventReader, Error> {
        EventReader::new(&self.events)
    }

    /// Detaches the programs and removes every pin: the filter is off.
    pub fn uninstall(mut self) -> Result<(), Error> {
        // Our own fds go first, so that remove_pins can wait for the last
        // reference (the pins') to go.
        for (_, link) in self.links.drain(..) {
            let _ = link.detach();
        }
        remove_pins(&self.pin_dir)
    }
}

/// Removes only the links (used when an LSM attempt fails half-way, before the
/// fallback attaches: the maps are kept for it).
fn remove_links(pin_dir: &Path) -> Result<(), Error> {
    let dir = pin_dir.join("links");
    if let Ok(entries) = std::fs::read_dir(&dir) {
        for e in entries.flatten() {
            std::fs::remove_file(e.path()).map_err(io_err("removing a link pin"))?;
        }
    }
    Ok(())
}

fn read_u32(b: &[u8]) -> Option<u32> {
    b.get(..4)
        .and_then(|x| x.try_into().ok())
        .map(u32::from_ne_bytes)
}

fn delete_quiet(map: &MapHandle, key: &[u8]) -> Result<(), Error> {
    match map.delete(key) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == libbpf_rs::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::bpf("deleting a map entry")(e)),
    }
}

/// Reads denial events from the ring buffer.
pub struct EventReader {
    rb: libbpf_rs::RingBuffer<'static>,
    queue: Arc<Mutex<VecDeque<DenialEvent>>>,
    _map: MapHandle,
}

impl fmt::Debug for EventReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventReader").finish_non_exhaustive()
    }
}

impl EventReader {
    fn new(events: &MapHandle) -> Result<EventReader, Error> {
        let map = MapHandle::try_from(events).map_err(Error::bpf("duplicating a map fd"))?;
        let queue = Arc::new(Mutex::new(VecDeque::new()));
        let q = Arc::clone(&queue);
        let mut builder = libbpf_rs::RingBufferBuilder::new();
        builder
            .add(&map, move |data: &[u8]| {
                if let Some(mut ev) = DenialEvent::parse(data) {
                    // Best effort: the caller has often exited (dd gives up
                    // at once); then the kernel's inode identifies the binary.
                    ev.exe = std::fs::read_link(format!("/proc/{}/exe", ev.pid))
                        .map(|p| p.display().to_string())
                        .unwrap_or_else(|_| {
                            if ev.exe_id.ino == 0 {
                                String::new()
                            } else {
                                format!("(exited: inode {} on {})", ev.exe_id.ino, ev.exe_id.dev)
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
    pub fn poll(&mut self, timeout: Duration) -> Result<Vec<DenialEvent>, Error> {
        self.rb
            .poll(timeout)
            .map_err(Error::bpf("polling the event ring buffer"))?;
        Ok(queue_drain(&self.queue))
    }
}

/// The reader's queue is a plain list of decoded events: a thread that panicked
/// while holding it cannot leave it inconsistent, so a poisoned lock is taken
/// over rather than dropping every later event.
fn queue_push(q: &Mutex<VecDeque<DenialEvent>>, ev: DenialEvent) {
    q.lock().unwrap_or_else(|p| p.into_inner()).push_back(ev);
}

fn queue_drain(q: &Mutex<VecDeque<DenialEvent>>) -> Vec<DenialEvent> {
    q.lock()
        .unwrap_or_else(|p| p.into_inner())
        .drain(..)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `struct ag_event`'s members, as the compiled object's BTF lays them out:
    /// name -> (byte offset, size of the whole struct). Independent of the
    /// parser's own offsets.
    fn ag_event_layout() -> (BTreeMap<String, usize>, usize) {
        use libbpf_rs::btf::types::{MemberAttr, Struct};
        use libbpf_rs::btf::{Btf, HasSize};
        let btf = Btf::from_raw("guard", GUARD_OBJ)
            .unwrap()
            .expect("the object has BTF");
        let st: Struct<'_> = btf
            .type_by_name("ag_event")
            .expect("struct ag_event in BTF");
        let members = st
            .iter()
            .map(|m| {
                let bits = match m.attr {
                    MemberAttr::Normal { offset } => offset,
                    MemberAttr::BitField { offset, .. } => offset,
                };
                (
                    m.name.unwrap().to_string_lossy().into_owned(),
                    bits as usize / 8,
                )
            })
            .collect();
        (members, st.size())
    }

    #[test]
    fn event_decoding_follows_the_c_layout() {
        let (at, size) = ag_event_layout();
        assert_eq!(size, EVENT_SIZE, "struct ag_event size");
        let mut b = vec![0u8; size];
        let mut put = |name: &str, v: u32| {
            let o = at[name];
            b[o..o + 4].copy_from_slice(&v.to_ne_bytes());
        };
        put("exe_dev", (8 << 20) | 1);
        put("pid", 42);
        put("tid", 43);
        put("uid", 1000);
        put("euid", 1001);
        put("fsuid", 1002);
        put("egid", 1003);
        put("dev", (7 << 20) | 3);
        put("disk_id", 5);
        put("hook", 3);
        put("op", 0x1277);
        put("mode", 2);
        put("flags", 1);
        let o = at["exe_ino"];
        b[o..o + 8].copy_from_slice(&1234u64.to_ne_bytes());
        let o = at["ts_ns"];
        b[o..o + 8].copy_from_slice(&99u64.to_ne_bytes());
        let o = at["comm"];
        b[o..o + 2].copy_from_slice(b"dd");
        let e = DenialEvent::parse(&b).unwrap();
        assert_eq!(e.ts_ns, 99);
        assert_eq!((e.pid, e.tid), (42, 43));
        assert_eq!((e.uid, e.euid, e.fsuid, e.egid), (1000, 1001, 1002, 1003));
        assert_eq!(e.dev.dev.to_string(), "7:3");
        assert!(e.dev.chr);
        assert_eq!(e.disk_id, 5);
        assert_eq!(e.hook, Hook::FileIoctl);
        assert_eq!(e.operation(), "BLKDISCARD");
        assert_eq!(e.mode, Mode::Enforce);
        assert_eq!(e.comm, "dd");
        assert_eq!(e.exe_id.ino, 1234);
        assert_eq!(e.exe_id.dev.to_string(), "8:1");
        assert!(DenialEvent::parse(&b[..size - 1]).is_none());
    }

    #[test]
    fn a_poisoned_event_queue_still_delivers() {
        let (at, size) = ag_event_layout();
        let mut b = vec![0u8; size];
        b[at["pid"]..at["pid"] + 4].copy_from_slice(&7u32.to_ne_bytes());
        let ev = DenialEvent::parse(&b).unwrap();
        let q = Arc::new(Mutex::new(VecDeque::new()));
        let q2 = Arc::clone(&q);
        let _ = std::thread::spawn(move || {
            let _g = q2.lock().unwrap();
            panic!("poison the queue");
        })
        .join();
        assert!(q.is_poisoned());
        queue_push(&q, ev.clone());
        queue_push(&q, ev);
        let got = queue_drain(&q);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].pid, 7);
        assert!(queue_drain(&q).is_empty());
    }

    #[test]
    fn ioctl_names() {
        assert_eq!(ioctl_name(0x2285), "SG_IO");
        assert_eq!(ioctl_name(0xc048_4e43), "NVME_IOCTL_IO_CMD");
        assert_eq!(ioctl_name(0x4010_70c8), "IOC_PR_REGISTER");
        assert_eq!(ioctl_name(0x1234), "ioctl 0x1234");
    }

    #[test]
    fn btf_string_search() {
        let btf = b"\0bpf_lsm_file_open\0bpf_lsm_file_ioctl\0";
        assert!(kernel_btf_has(btf, "bpf_lsm_file_ioctl"));
        assert!(!kernel_btf_has(btf, "bpf_lsm_file_ioctl_compat"));
        assert!(!kernel_btf_has(btf, "file_open"));
    }

    /// The object has every program in the right section and the maps with the
    /// layouts that filter.rs assumes (no privilege needed).
    #[test]
    fn guard_object_layout() {
        let open = ObjectBuilder::default().open_memory(GUARD_OBJ).unwrap();
        let progs: BTreeMap<String, (ProgramType, String)> = open
            .progs()
            .map(|p| {
                (
                    p.name().to_string_lossy().into_owned(),
                    (p.prog_type(), p.section().to_string_lossy().into_owned()),
                )
            })
            .collect();
        for (name, section) in [
            ("ag_file_open", "lsm/file_open"),
            ("ag_file_permission", "lsm/file_permission"),
            ("ag_file_ioctl", "lsm/file_ioctl"),
            ("ag_file_ioctl_compat", "lsm/file_ioctl_compat"),
            ("ag_mmap_file", "lsm/mmap_file"),
            ("ag_file_mprotect", "lsm/file_mprotect"),
            ("ag_uring_cmd", "lsm/uring_cmd"),
        ] {
            assert_eq!(
                progs.get(name),
                Some(&(ProgramType::Lsm, section.to_string())),
                "{name}"
            );
        }
        assert_eq!(progs[CGROUP_PROG].0, ProgramType::CgroupDevice);
        assert_eq!(progs[CGROUP_PROG_IDS].0, ProgramType::CgroupDevice);
        let maps: BTreeMap<String, (u32, u32)> = open
            .maps()
            .map(|m| {
                (
                    m.name().to_string_lossy().into_owned(),
                    (m.key_size(), m.value_size()),
                )
            })
            .collect();
        assert_eq!(maps["ag_blk"], (4, 8));
        assert_eq!(maps["ag_chr"], (4, 8));
        assert_eq!(maps["ag_exes"], (16, 1));
        assert_eq!(maps["ag_stats"], (4, 8));
        for m in MAP_NAMES {
            assert!(maps.contains_key(m), "{m}");
        }
    }

    #[test]
    fn bpf_lsm_hint_names_the_list_and_both_tools() {
        let h = bpf_lsm_hint_for("lockdown,capability,yama,apparmor", true).unwrap();
        assert!(h.contains("lsm=lockdown,yama,apparmor,bpf"), "{h}");
        assert!(h.contains("grubby --update-kernel=ALL --args=\"lsm=lockdown,yama,apparmor,bpf\""));
        assert!(h.contains("GRUB_CMDLINE_LINUX"));
        assert_eq!(bpf_lsm_hint_for("capability,yama,bpf", true), None);
        assert_eq!(bpf_lsm_hint_for("capability,yama", false), None);
    }
}
