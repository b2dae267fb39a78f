//! `asmguardctl oracleasm ...` (and `oracleasm ...` when asmguardctl is run under
//! that name, through a symlink `/usr/sbin/oracleasm`): ASMLib's `oracleasm`
//! commands, arguments, output lines and exit status (0 success, 1 failure)
//! where scripts and automation parse them (`listdisks`: one label per line;
//! `querydisk DEVICE`: `Device "..." is marked an ASM disk with the label "..."`;
//! `querydisk -p`: blkid-style lines), on top of asmguardd. A refusal carries
//! asmguard's own sentence on stderr (a disk holding data is never written).

use crate::cli::Global;
use crate::client::call;
use crate::exit::CliError;
use asmguard_proto::{
    DiskInfo, LabelArgs, LsdskResult, Op, RenameArgs, Role, StatusResult, UnlabelArgs,
};
use clap::{Args, Parser, Subcommand};
use std::path::{Path, PathBuf};

/// The exit status of every failure, as oracleasm's.
const FAIL: i32 = 1;

#[derive(Debug, Args)]
pub struct OracleasmArgs {
    #[command(subcommand)]
    pub cmd: Cmd,
}

/// `oracleasm` run by that name (argv[0]).
#[derive(Debug, Parser)]
#[command(
    name = "oracleasm",
    version,
    about = "ASMLib's oracleasm commands on asmguard (asmguardctl under the name oracleasm)"
)]
pub struct Standalone {
    /// asmguardd's socket.
    #[arg(long, env = "ASMGUARD_SOCKET", value_name = "PATH", default_value = asmguard_proto::DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// Seconds to wait for the daemon's answer.
    #[arg(long, value_name = "SECONDS", default_value_t = 120)]
    pub timeout: u64,
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Label DEVICE as LABEL (refused when it holds data, an ASM header or another label).
    Createdisk {
        #[arg(short, long)]
        verbose: bool,
        label: String,
        device: PathBuf,
    },
    /// Remove the label of LABEL (or of the disk DEVICE).
    Deletedisk {
        #[arg(short, long)]
        verbose: bool,
        disk: String,
    },
    /// Give the disk LABEL or DEVICE the label NEWLABEL.
    Renamedisk {
        /// Also for a disk-group member (ASMLib's force).
        #[arg(short, long)]
        force: bool,
        #[arg(short, long)]
        verbose: bool,
        /// ASMLib's manager argument (accepted, not used).
        #[arg(short = 'l', value_name = "MANAGER")]
        manager: Option<String>,
        disk: String,
        new_label: String,
    },
    /// Whether each LABEL or DEVICE is an ASM disk.
    Querydisk {
        /// The device numbers of the disk: `on device [major,minor]`.
        #[arg(short = 'd')]
        devices: bool,
        /// blkid-style lines for every path: `/dev/X: LABEL="L" TYPE="oracleasm"`.
        #[arg(short = 'p')]
        paths: bool,
        /// The ASM disk header's identity: status, disk group, disk name.
        #[arg(short = 'i')]
        identity: bool,
        #[arg(short, long)]
        verbose: bool,
        /// ASMLib's manager argument (accepted, not used).
        #[arg(short = 'l', value_name = "MANAGER")]
        manager: Option<String>,
        #[arg(required = true)]
        disks: Vec<String>,
    },
    /// The labels, one per line.
    Listdisks,
    /// Read every device again.
    Scandisks {
        #[arg(short, long)]
        verbose: bool,
    },
    /// The disks as ASM's discovery string `ORCL:*` finds them.
    Discover {
        /// Also each disk's device and paths.
        #[arg(short = 'l')]
        long: bool,
        /// Accepted as oracleasm-discover takes it (`ORCL:*`).
        pattern: Option<String>,
    },
    /// A checklist: daemon, write filter, each disk's links with owner and mode, paths.
    Status {
        /// AFD's `afd_state` view.
        #[arg(long)]
        afd: bool,
    },
    /// Print the settings as /etc/sysconfig/oracleasm's keys (from asmguard's configuration).
    Configure {
        /// The configuration to read.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// ASMLib's interactive setup: not here (edit the configuration, or `asmguardctl import oracleasm --write`).
        #[arg(short = 'i')]
        interactive: bool,
    },
    /// AFD's `afd_lsdsk` view: label, filtering, path.
    Lsdsk {
        #[arg(long)]
        afd: bool,
    },
}

struct Ctx<'a> {
    socket: &'a Path,
    timeout: u64,
}

impl Ctx<'_> {
    fn call(&self, op: Op) -> Result<serde_json::Value, CliError> {
        call(self.socket, self.timeout, op).map_err(|e| CliError::new(FAIL, e.message))
    }
    fn lsdsk(&self) -> Result<LsdskResult, CliError> {
        decode(self.call(Op::Lsdsk)?)
    }
}

fn decode<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> Result<T, CliError> {
    serde_json::from_value(v)
        .map_err(|e| CliError::new(FAIL, format!("unexpected answer from asmguardd: {e}")))
}

/// `major:minor` of a block device node.
fn devno(p: &Path) -> Option<String> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let m = std::fs::metadata(p).ok()?;
    if !m.file_type().is_block_device() {
        return None;
    }
    let r = m.rdev();
    Some(format!("{}:{}", libc::major(r), libc::minor(r)))
}

/// The disk (not a label conflict) reached by `dev`, a labelled device or a path of it.
fn disk_of_device<'a>(r: &'a LsdskResult, dev: &Path) -> Option<&'a DiskInfo> {
    let n = devno(dev)?;
    r.disks.iter().filter(|d| !d.conflict).find(|d| {
        d.paths
            .iter()
            .any(|p| p.devno == n && p.role != Role::Parent)
    })
}

fn is_device(s: &str) -> bool {
    s.starts_with('/')
}

/// The label `s` names: a label, or the label of the disk the device `s` reaches.
fn label_of(c: &Ctx, s: &str) -> Result<String, CliError> {
    if !is_device(s) {
        return Ok(s.to_ascii_uppercase());
    }
    let r = c.lsdsk()?;
    disk_of_device(&r, Path::new(s))
        .map(|d| d.label.clone())
        .ok_or_else(|| CliError::new(FAIL, format!("Device \"{s}\" is not marked as an ASM disk")))
}

/// Prints `steps` as `STEP: done` when `r` succeeded, else the first as failed
/// and asmguard's sentence on stderr.
fn steps(
    r: Result<serde_json::Value, CliError>,
    steps: &[&str],
    failed: &str,
) -> Result<(), CliError> {
    match r {
        Ok(_) => {
            for s in steps {
                outln!("{s}: done");
            }
            Ok(())
        }
        Err(e) => {
            outln!("{}: failed", steps[0]);
            outln!("{failed}");
            Err(e)
        }
    }
}

/// `paths`: the system's roots, built once in `main`.
pub fn run_standalone(a: &Standalone, paths: &asmguard_paths::Paths) -> Result<(), CliError> {
    run_cmd(&a.socket, a.timeout, &a.cmd, paths)
}

/// `paths`: the system's roots, built once in `main`.
pub fn run(cli: &Global, a: &OracleasmArgs, paths: &asmguard_paths::Paths) -> Result<(), CliError> {
    run_cmd(&cli.socket, cli.timeout, &a.cmd, paths)
}

fn run_cmd(
    socket: &Path,
    timeout: u64,
    cmd: &Cmd,
    paths: &asmguard_paths::Paths,
) -> Result<(), CliError> {
    let c = Ctx { socket, timeout };
    match cmd {
        Cmd::Createdisk { label, device, .. } => {
            let up = label.to_ascii_uppercase();
            // ASMLib's answer for a device that carries a label already.
            if let Ok(r) = c.lsdsk() {
                if let Some(d) = disk_of_device(&r, device) {
                    return Err(CliError::new(
                        FAIL,
                        format!(
                            "Device \"{}\" is already labeled for ASM disk \"{}\"",
                            device.display(),
                            d.label
                        ),
                    ));
                }
            }
            let dev = std::path::absolute(device).unwrap_or_else(|_| device.clone());
            let r = c.call(Op::Label(LabelArgs {
                label: up.clone(),
                device: dev.display().to_string(),
                force: false,
                migrate: false,
            }));
            steps(
                r,
                &["Writing disk header", "Instantiating disk"],
                &format!("Unable to create disk \"{up}\""),
            )
        }
        Cmd::Deletedisk { disk, .. } => {
            let label = label_of(&c, disk)?;
            let r = c.call(Op::Unlabel(UnlabelArgs {
                label: label.clone(),
                force: false,
            }));
            steps(
                r,
                &["Clearing disk header", "Dropping disk"],
                &format!("Unable to delete disk \"{label}\""),
            )
        }
        Cmd::Renamedisk {
            disk,
            new_label,
            force,
            ..
        } => {
            let old = label_of(&c, disk)?;
            let new = new_label.to_ascii_uppercase();
            if !force {
                let r = c.lsdsk()?;
                if let Some(d) = r.disks.iter().find(|d| d.label == old) {
                    if d.header_status.eq_ignore_ascii_case("member") {
                        return Err(CliError::new(
                            FAIL,
                            format!("Disk \"{old}\" is a member of disk group {}: renaming it needs -f (and the disk group dismounted)", d.disk_group.as_deref().unwrap_or("?")),
                        ));
                    }
                }
            }
            let r = c.call(Op::Rename(RenameArgs {
                old: old.clone(),
                new: new.clone(),
            }));
            steps(
                r,
                &[
                    "Writing disk header",
                    &format!("Instantiating disk \"{new}\""),
                ],
                &format!("Unable to rename disk \"{old}\""),
            )
        }
        Cmd::Querydisk {
            devices,
            paths,
            identity,
            disks,
            ..
        } => {
            let r = c.lsdsk()?;
            let mut failed = 0;
            for s in disks {
                let d = if is_device(s) {
                    disk_of_device(&r, Path::new(s))
                } else {
                    let up = s.to_ascii_uppercase();
                    r.disks.iter().find(|d| d.label == up && !d.conflict)
                };
                let Some(d) = d else {
                    failed += 1;
                    if is_device(s) {
                        outln!("Device \"{s}\" is not marked as an ASM disk");
                    } else {
                        outln!(
                            "Disk \"{}\" does not exist or is not instantiated",
                            s.to_ascii_uppercase()
                        );
                    }
                    continue;
                };
                let on = if *devices {
                    let top = d
                        .paths
                        .iter()
                        .find(|p| p.role != Role::Path && p.role != Role::Parent)
                        .or(d.paths.first());
                    top.map(|p| format!(" on device [{}]", p.devno.replace(':', ",")))
                        .unwrap_or_default()
                } else {
                    String::new()
                };
                if is_device(s) {
                    outln!(
                        "Device \"{s}\" is marked an ASM disk with the label \"{}\"{on}",
                        d.label
                    );
                } else {
                    outln!("Disk \"{}\" is a valid ASM disk{on}", d.label);
                }
                if *identity {
                    outln!(
                        "ASM header status: {}; disk group: {}; ASM disk name: {}",
                        d.header_status,
                        d.disk_group.as_deref().unwrap_or("-"),
                        d.asm_disk_name.as_deref().unwrap_or("-")
                    );
                }
                if *paths {
                    for p in d.paths.iter().filter(|p| p.role != Role::Parent) {
                        outln!("{}: LABEL=\"{}\" TYPE=\"oracleasm\"", p.dev, d.label);
                    }
                }
            }
            if failed > 0 {
                return Err(CliError::new(FAIL, String::new()));
            }
            Ok(())
        }
        Cmd::Listdisks => {
            let r = c.lsdsk()?;
            let mut labels: Vec<&str> = r
                .disks
                .iter()
                .filter(|d| !d.conflict)
                .map(|d| d.label.as_str())
                .collect();
            labels.sort();
            labels.dedup();
            for l in labels {
                outln!("{l}");
            }
            Ok(())
        }
        Cmd::Scandisks { .. } => {
            outln!("Reloading disk partitions: done");
            outln!("Cleaning any stale ASM disks...");
            outln!("Scanning system for ASM disks...");
            let before: Vec<String> = c
                .lsdsk()
                .map(|r| r.disks.into_iter().map(|d| d.label).collect())
                .unwrap_or_default();
            let r: LsdskResult = decode(c.call(Op::Scan)?)?;
            for d in r
                .disks
                .iter()
                .filter(|d| !d.conflict && !before.contains(&d.label))
            {
                outln!("Instantiating disk \"{}\"", d.label);
            }
            Ok(())
        }
        Cmd::Discover { long, .. } => {
            let r = c.lsdsk()?;
            outln!("Using asmguard (asmguardd at {})", c.socket.display());
            for d in r.disks.iter().filter(|d| !d.conflict) {
                let lb = d.logical_block_size.max(1) as u64;
                outln!(
                    "Discovered disk: ORCL:{} [{} blocks ({} bytes), maxio 512]",
                    d.label,
                    d.size_bytes / lb,
                    d.size_bytes
                );
                if *long {
                    let paths: Vec<String> = d
                        .paths
                        .iter()
                        .map(|p| format!("{}({})", p.dev, p.role))
                        .collect();
                    outln!("    device {}, paths {}", d.top, paths.join(" "));
                }
            }
            Ok(())
        }
        Cmd::Status { afd: true } => afd_state(socket, timeout, paths),
        Cmd::Status { afd: false } => status(&c, paths),
        Cmd::Lsdsk { .. } => afd_lsdsk(socket, timeout),
        Cmd::Configure {
            config,
            interactive,
        } => {
            if *interactive {
                return Err(CliError::new(
                    crate::exit::USAGE,
                    "configure -i: asmguard is configured in /etc/asmguard/asmguard.toml (`asmguardctl import oracleasm /etc/sysconfig/oracleasm --write` carries an ASMLib setup over)",
                ));
            }
            let (cfg, _) =
                asmguard_config::load(config.as_deref()).map_err(|e| CliError::new(FAIL, e))?;
            out!("{}", configure_text(&cfg));
            Ok(())
        }
    }
}

/// `asmcmd afd_lsdsk`'s columns: label, filtering (ENABLED/DISABLED), path.
pub fn afd_lsdsk(socket: &Path, timeout: u64) -> Result<(), CliError> {
    let c = Ctx { socket, timeout };
    let r = c.lsdsk()?;
    outln!("{:<24}{:<12}Path", "Label", "Filtering");
    outln!("{}", "=".repeat(72));
    for d in r.disks.iter().filter(|d| !d.conflict) {
        let f = if d.filter_mode == "enforce" {
            "ENABLED"
        } else {
            "DISABLED"
        };
        outln!("{:<24}{f:<12}{}", d.label, d.top);
    }
    Ok(())
}

/// `asmcmd afd_state`'s line: loaded, filtering ENABLED or DISABLED, host.
/// The host name is read under `paths` (the caller's roots).
pub fn afd_state(
    socket: &Path,
    timeout: u64,
    paths: &asmguard_paths::Paths,
) -> Result<(), CliError> {
    let c = Ctx { socket, timeout };
    let s: StatusResult = decode(c.call(Op::Status)?)?;
    let on = !s.unprotected() && s.default_filter_mode == asmguard_filter_types::Mode::Enforce;
    let host = std::fs::read_to_string(paths.proc.join("sys/kernel/hostname")).unwrap_or_default();
    outln!(
        "ASMCMD-9526: The AFD state is 'LOADED' and filtering is '{}' on host '{}'",
        if on { "ENABLED" } else { "DISABLED" },
        host.trim()
    );
    Ok(())
}

/// asmguard's configuration as /etc/sysconfig/oracleasm's keys.
pub fn configure_text(cfg: &asmguard_config::Config) -> String {
    let words = |pats: &[String]| {
        pats.iter()
            .map(|p| p.trim_end_matches('*').trim_end_matches('-').to_string())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let default_ex = asmguard_config::Config::default().devices.exclude;
    let extra_ex: Vec<String> = cfg
        .devices
        .exclude
        .iter()
        .filter(|p| !default_ex.contains(p))
        .cloned()
        .collect();
    format!(
        "ORACLEASM_ENABLED=true\nORACLEASM_UID={}\nORACLEASM_GID={}\nORACLEASM_SCANBOOT=true\n\
         ORACLEASM_SCANORDER=\"{}\"\nORACLEASM_SCANEXCLUDE=\"{}\"\nORACLEASM_ENABLE_IOFILTER={}\n",
        cfg.paths.owner,
        cfg.paths.group,
        words(&cfg.devices.scan_order),
        words(&extra_ex),
        cfg.filter.mode == asmguard_config::FilterMode::Enforce
    )
}

/// The links are looked for under `paths` (the caller's roots).
fn status(c: &Ctx, paths: &asmguard_paths::Paths) -> Result<(), CliError> {
    let mut ok = true;
    let mut check = |what: String, yes: bool, detail: String| {
        ok &= yes;
        let d = if detail.is_empty() {
            String::new()
        } else {
            format!(" ({detail})")
        };
        outln!("Checking if {what}: {}{d}", if yes { "yes" } else { "no" });
    };
    let s: Result<StatusResult, CliError> = c.call(Op::Status).and_then(decode);
    let s = match s {
        Ok(s) => s,
        Err(e) => {
            check("asmguardd is running".into(), false, e.message);
            return Err(CliError::new(FAIL, String::new()));
        }
    };
    check(
        "asmguardd is running".into(),
        true,
        format!("pid {}, {}", s.pid, s.daemon_version),
    );
    check(
        "the write filter protects the disks".into(),
        !s.unprotected(),
        format!("{}: {}", s.filter_backend, s.filter_reason),
    );
    let r = c.lsdsk()?;
    let cfg_path = s.config.split(" (").next().unwrap_or("").to_string();
    let cfg = asmguard_config::load(if cfg_path.is_empty() || !Path::new(&cfg_path).exists() {
        None
    } else {
        Some(Path::new(&cfg_path))
    })
    .map(|(c, _)| c)
    .unwrap_or_default();
    let owner = nix::unistd::User::from_name(&cfg.paths.owner)
        .ok()
        .flatten()
        .map(|u| u.uid.as_raw());
    let group = nix::unistd::Group::from_name(&cfg.paths.group)
        .ok()
        .flatten()
        .map(|g| g.gid.as_raw());
    let mode = cfg.mode();
    let mut dirs = vec!["asmguard/disks"];
    for (n, d) in asmguard_config::COMPAT_LINKS {
        if cfg.paths.compat.iter().any(|x| x == n) {
            dirs.push(d);
        }
    }
    for d in r.disks.iter().filter(|d| !d.conflict) {
        for dir in &dirs {
            let link = paths.dev.join(dir).join(&d.label);
            use std::os::unix::fs::MetadataExt;
            let (yes, detail) = match std::fs::metadata(&link) {
                Ok(m) => {
                    let good = Some(m.uid()) == owner
                        && Some(m.gid()) == group
                        && m.mode() & 0o7777 == mode;
                    (
                        good,
                        format!(
                            "uid {} gid {} mode {:04o}",
                            m.uid(),
                            m.gid(),
                            m.mode() & 0o7777
                        ),
                    )
                }
                Err(e) => (false, e.to_string()),
            };
            check(
                format!(
                    "{} is {}:{} mode {:04o}",
                    link.display(),
                    cfg.paths.owner,
                    cfg.paths.group,
                    mode
                ),
                yes,
                detail,
            );
        }
        let paths: Vec<String> = d
            .paths
            .iter()
            .map(|p| format!("{}({})", p.name, p.role))
            .collect();
        check(
            format!("disk {} is filtered on every path", d.label),
            d.filter_mode == "enforce",
            format!("preferred {}; paths {}", d.top, paths.join(" ")),
        );
    }
    if ok {
        Ok(())
    } else {
        Err(CliError::new(FAIL, String::new()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configure_prints_sysconfig_keys_that_import_reads_back() {
        let cfg = asmguard_config::parse(
            "[devices]\nexclude = [\"ram*\", \"zram*\", \"sr*\", \"fd*\", \"sd*\"]\nscan_order = [\"dm-*\", \"sd*\"]\n[paths]\nowner = \"oracle\"\ngroup = \"dba\"\n",
            "t",
        )
        .unwrap();
        let t = configure_text(&cfg);
        assert!(
            t.contains("ORACLEASM_UID=oracle\nORACLEASM_GID=dba\n"),
            "{t}"
        );
        assert!(
            t.contains("ORACLEASM_SCANORDER=\"dm sd\"\nORACLEASM_SCANEXCLUDE=\"sd\"\n"),
            "{t}"
        );
        assert!(t.contains("ORACLEASM_ENABLE_IOFILTER=true"), "{t}");
        let names = crate::import::Names {
            user: &|_| None,
            group: &|_| None,
        };
        let back = crate::import::oracleasm(&t, "t", &names).unwrap();
        let c = asmguard_config::parse(&back.config, "t").unwrap();
        assert_eq!(
            (c.paths.owner.as_str(), c.paths.group.as_str()),
            ("oracle", "dba")
        );
        assert_eq!(c.devices.exclude, cfg.devices.exclude);
        assert_eq!(c.rules().rank("dm-1"), 0);
    }

    #[test]
    fn argv0_oracleasm_parses_oracleasm_arguments() {
        let s = Standalone::try_parse_from([
            "oracleasm",
            "querydisk",
            "-p",
            "-d",
            "DATA1",
            "/dev/sdb1",
        ])
        .unwrap();
        match s.cmd {
            Cmd::Querydisk {
                paths,
                devices,
                disks,
                ..
            } => {
                assert!(paths && devices);
                assert_eq!(disks, vec!["DATA1", "/dev/sdb1"]);
            }
            c => panic!("{c:?}"),
        }
        assert!(Standalone::try_parse_from(["oracleasm", "createdisk", "DATA1"]).is_err());
        assert!(
            Standalone::try_parse_from(["oracleasm", "renamedisk", "-f", "/dev/sdb1", "NEW"])
                .is_ok()
        );
        assert!(Standalone::try_parse_from(["oracleasm", "discover", "-l", "ORCL:*"]).is_ok());
    }
}
