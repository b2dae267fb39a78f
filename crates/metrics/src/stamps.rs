//! Which requests the kernel stamps at issue, so the tracer can use the kernel's
//! stamps instead of its own (the cheap path: one program, one map lookup).
//!
//! The kernel stamps `rq->io_start_time_ns` at issue on every queue with
//! `QUEUE_FLAG_STATS` set (writeback throttling, io.latency and io.cost set it;
//! wbt is on by default for most disks). The BPF program needs the flag's bit
//! number, which CO-RE cannot relocate:
//!
//! - newer kernels (6.12 and later) declare it in an anonymous enum: read from the
//!   kernel's BTF ([`StatsBitFrom::Btf`]);
//! - older ones `#define` it: the [`TABLE`] below gives the value per kernel
//!   line ([`StatsBitFrom::Table`]); the values were read from the kernels' own
//!   headers (Debian's `linux-headers-*-common` of 5.10.262 and 6.1.192).
//!
//! Whatever the source, the bit is verified at load with a probe read
//! ([`crate::IoLat::load_opts`]): if a request of a queue with that bit set
//! completes without a kernel stamp, the bit is wrong for this kernel and the
//! tracer reloads with its own stamps.

/// How requests are stamped at issue ([`TracerStamps`]) and where the
/// QUEUE_FLAG_STATS bit number came from ([`StatsBitFrom`]): the protocol's
/// types (`status`'s `metrics.tracer.stamps`), worded by their one
/// `Display` there.
pub use asmguard_proto::{StatsBitFrom, TracerStamps};

/// One row of [`TABLE`]: the kernel lines where QUEUE_FLAG_STATS is a
/// `#define` of `bit`.
#[derive(Clone, Copy, Debug)]
pub struct TableRow {
    /// First line (major, minor).
    pub first: (u32, u32),
    /// Last line.
    pub last: (u32, u32),
    /// QUEUE_FLAG_STATS.
    pub bit: u32,
    /// The lines, as shown to users.
    pub name: &'static str,
}

/// QUEUE_FLAG_STATS where it is a `#define`. Read from the headers of 5.10
/// and 6.1; assumed for the other lines of the range (where a header was not
/// at hand), which the probe read at load checks: a wrong guess costs the
/// cheap path, never a sample.
pub const TABLE: &[TableRow] = &[TableRow {
    first: (5, 4),
    last: (6, 11),
    bit: 20,
    name: "5.4-6.11",
}];

/// The table's bit for kernel `major.minor`, with the line it was found for.
pub fn table_bit(major: u32, minor: u32) -> Option<(u32, &'static str)> {
    TABLE
        .iter()
        .find(|r| (major, minor) >= r.first && (major, minor) <= r.last)
        .map(|r| (r.bit, r.name))
}

/// `major.minor` of a kernel release string (`6.1.0-44-cloud-amd64`).
pub fn release_line(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.trim().split(['.', '-']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// The value of `QUEUE_FLAG_STATS` in the running kernel's BTF (an anonymous
/// enum, so CO-RE cannot relocate it in the BPF program).
pub fn btf_bit() -> Option<u32> {
    btf_queue_flag("QUEUE_FLAG_STATS")
}

/// The value of any other `QUEUE_FLAG_*` enum member in the BTF (tests use a
/// flag that is set on a queue without stats as a deliberately wrong bit).
pub fn btf_queue_flag(name: &str) -> Option<u32> {
    use libbpf_rs::btf::types::Enum;
    let btf = libbpf_rs::btf::Btf::from_vmlinux().ok()?;
    let value = btf.type_by_kind::<Enum<'_>>().find_map(|e| {
        e.iter()
            .find(|m| m.name.is_some_and(|n| n == name))
            .map(|m| m.value)
    })?;
    u32::try_from(value).ok().filter(|&v| v < 64)
}

/// QUEUE_FLAG_STATS of the running kernel: from the BTF, else from the table
/// (the release read from the caller's `paths`).
pub fn stats_bit(paths: &asmguard_paths::Paths) -> Option<(u32, StatsBitFrom)> {
    if let Some(bit) = btf_bit() {
        return Some((bit, StatsBitFrom::Btf));
    }
    let release = std::fs::read_to_string(paths.osrelease()).ok()?;
    let (major, minor) = release_line(&release)?;
    table_bit(major, minor).map(|(bit, line)| {
        (
            bit,
            StatsBitFrom::Table {
                lines: line.to_string(),
            },
        )
    })
}

/// Whole request-based disks to probe, best first: those with a blk-mq queue
/// (bio-based ones such as dm never reach the request tracepoints), a size,
/// and, for SCSI, a running device (a read of a failed path could block).
/// `paths`: the caller's roots.
pub fn probe_candidates(paths: &asmguard_paths::Paths) -> Vec<(String, std::path::PathBuf)> {
    let Ok(dir) = std::fs::read_dir(paths.sys.join("block")) else {
        return Vec::new();
    };
    let mut out: Vec<(String, std::path::PathBuf)> = dir
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let sys = e.path();
            if !sys.join("mq").is_dir() {
                return None;
            }
            let size: u64 = std::fs::read_to_string(sys.join("size"))
                .ok()?
                .trim()
                .parse()
                .ok()?;
            if size < 8 {
                return None;
            }
            if let Ok(state) = std::fs::read_to_string(sys.join("device/state")) {
                if state.trim() != "running" && state.trim() != "live" {
                    return None;
                }
            }
            let node = paths.dev.join(&name);
            node.exists().then_some((name, node))
        })
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_covers_the_define_kernels_and_nothing_else() {
        assert_eq!(table_bit(5, 10), Some((20, "5.4-6.11")));
        assert_eq!(table_bit(6, 1), Some((20, "5.4-6.11")));
        assert_eq!(table_bit(6, 11), Some((20, "5.4-6.11")));
        assert_eq!(table_bit(6, 12), None);
        assert_eq!(table_bit(7, 3), None);
        assert_eq!(table_bit(4, 19), None);
        assert_eq!(table_bit(5, 3), None);
    }

    #[test]
    fn release_lines() {
        assert_eq!(release_line("6.1.0-44-cloud-amd64\n"), Some((6, 1)));
        assert_eq!(release_line("5.10.0-46-cloud-amd64"), Some((5, 10)));
        assert_eq!(release_line("7.3.4+deb14-cloud-amd64"), Some((7, 3)));
        assert_eq!(release_line("garbage"), None);
    }

    #[test]
    fn the_running_kernel_has_a_bit_from_btf_or_table() {
        let release = std::fs::read_to_string(asmguard_paths::Paths::default().osrelease())
            .unwrap_or_default();
        let Some(line) = release_line(&release) else {
            return;
        };
        let has_btf = std::path::Path::new("/sys/kernel/btf/vmlinux").exists();
        match stats_bit(&asmguard_paths::Paths::default()) {
            Some((bit, source)) => {
                assert!(bit < 64);
                if line >= (6, 12) && has_btf {
                    assert_eq!(source, StatsBitFrom::Btf, "{release}");
                }
            }
            None => assert!(
                line < (5, 4) || (line >= (6, 12) && !has_btf),
                "no QUEUE_FLAG_STATS for {release}"
            ),
        }
    }
}
