//! The asmguard configuration, `/etc/asmguard/asmguard.toml`: every key optional, built-in defaults, and any
//! unknown key or bad value is an error that names the key.
//!
//! ```toml
//! [devices]            # like ASMLib's ORACLEASM_SCANORDER / ORACLEASM_SCANEXCLUDE
//! include = ["*"]                      # kernel names, or mapper/<dm name>; loop
//!                                      # devices only by a pattern starting with
//!                                      # loop (`"loop*"`): any user can make one
//! exclude = ["ram*", "zram*", "sr*", "fd*"]
//! scan_order = ["dm-*", "nvme*", "sd*", "vd*", "xvd*"]
//! label_watch_seconds = 3              # re-read every label sector this often (labels
//!                                      # another host wrote); 0: only on device events
//! manage_asm_members = false           # true: a disk with an ASM disk header (member,
//!                                      # candidate, former, provisioned) and no label is
//!                                      # managed without a write, under its ASM disk name
//!                                      # (DATA_0001) or the name member_names gives it
//! # [devices.member_names]             # LUN (ID_SERIAL / multipath WWID; partition N
//! #                                    # of it: "<ID_SERIAL>-partN") = name,
//! # "36000c29a1b2c3d4" = "ASM_DISK1"   # as `asmguardctl import udev` writes it
//!
//! [paths]              # /dev/asmguard/disks/<LABEL> (made by udev)
//! owner = "grid"
//! group = "asmadmin"
//! mode = "0660"
//! compat = []                          # "oracleasm": also /dev/oracleasm/disks/<LABEL>,
//!                                      # "oracleafd": also /dev/oracleafd/disks/<LABEL>
//!
//! [socket]
//! path = "/run/asmguard/asmguard.sock"
//! admin_group = "asmadmin"             # may read (lsdsk, status, scan); root may write
//! timeout_seconds = 60                 # idle connections are closed after this
//!
//! [metrics]
//! listen = "127.0.0.1:9465"
//! trace_all_disks = false              # latency of every disk, not only labelled ones
//! single_block_bytes = 8192            # I/Os up to this size: size="single" (the DB block
//!                                      # size), larger: size="multi"
//!
//! [filter]
//! mode = "enforce"                     # enforce | audit | off
//! allow_users = ["grid", "oracle"]
//! allow_groups = ["asmadmin", "asmdba", "oinstall"]   # effective, fs or supplementary gid
//! allow_executables = []               # absolute paths (any user running one may write:
//!                                      # borrowable, prefer a [[rule]])
//! oracle_homes = "auto"                # "auto" (/etc/oratab, /etc/oracle/olr.loc), "off",
//!                                      # or a list of homes: each home's own binaries
//!                                      # (bin/oracle; ocssd.bin, crsd.bin in a Grid home)
//!                                      # run by their owner may write
//! query_tools = [...]                  # disk-query tools (multipathd, scsi_id, smartctl,
//!                                      # sg_inq ...): read-class passthrough only
//! require_protection = false           # true: refuse to start when no filter can load
//!
//! [[rule]]             # zero or more: a task may write when every condition holds
//! name = "ohasd"                       # [A-Za-z0-9_.-]{1,64}, unique
//! users = ["grid"]                     # who (either a user or a group of these)
//! groups = []
//! executables = ["/u01/app/19c/grid/bin/oracle"]   # what (by file identity)
//! units = ["oracle-ohasd.service"]     # where: a systemd unit's cgroup, or
//! cgroups = []                         # cgroup-v2 path patterns (as [[container]])
//!
//! [daemon]
//! runtime_dir = "/run/asmguard"        # runtime state (filter modes, reclaim
//!                                      # checkpoints); default: the socket's directory
//!
//! [[container]]        # zero or more: a container whose processes may write
//! name = "rac1"                        # [A-Za-z0-9_.-]{1,64}, unique
//! cgroup = ["lxc.payload.rac1"]        # cgroup-v2 paths below the cgroup2 mount, `*`
//!                                      # within one component; a task whose cgroup or
//!                                      # an ancestor matches is in the container
//! allow_all = false                    # true: anything in the container may write
//! allow_users = ["grid"]               # as the container sees them (its /etc/passwd,
//! allow_groups = ["asmadmin"]          # /etc/group, its id maps), or numbers
//! present = ["DATA1"]                  # labels (or "*") made as nodes in
//!                                      # /dev/asmguard/containers/<name>/<LABEL>
//! owner = "grid"                       # the nodes' owner, group, mode as the container
//! group = "asmadmin"                   # sees them; default: [paths]
//! mode = "0660"
//! admin_group = "asmadmin"             # may lsdsk/status/iostat over the socket;
//!                                      # default: [socket] admin_group
//! admin = false                        # true: that group and the container's root
//!                                      # may also change state
//! ```

use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

pub const DEFAULT_PATH: &str = "/etc/asmguard/asmguard.toml";

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub devices: Devices,
    pub paths: Paths,
    pub socket: Socket,
    pub metrics: Metrics,
    pub filter: Filter,
    pub daemon: DaemonSection,
    /// `[[container]]`: containers (by cgroup) and the writers allowed in them.
    pub container: Vec<Container>,
    /// `[[rule]]`: allow rules, each a conjunction of its conditions.
    pub rule: Vec<Rule>,
}

/// One `[[rule]]`: a task may write when every condition given holds: who
/// (one of `users` or `groups`), what (`executables`), where (`units` or
/// `cgroups`). At least one condition.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Rule {
    pub name: String,
    pub users: Vec<String>,
    pub groups: Vec<String>,
    pub executables: Vec<PathBuf>,
    /// systemd units (`oracle-ohasd.service`): their cgroups, wherever the
    /// unit's slice puts them.
    pub units: Vec<String>,
    pub cgroups: Vec<String>,
}

impl Rule {
    /// The cgroup path patterns of `units` and `cgroups`: a unit is found at
    /// the top, or below one or two slices.
    pub fn place_patterns(&self) -> Vec<String> {
        let mut out = self.cgroups.clone();
        for u in &self.units {
            out.push(u.clone());
            out.push(format!("*.slice/{u}"));
            out.push(format!("*.slice/*.slice/{u}"));
        }
        out
    }
}

/// At most this many `[[rule]]`s (the filter holds 32 rules in all, with
/// the plain allow-list's, the Oracle homes' and the containers').
pub const MAX_CONFIG_RULES: usize = 16;

/// `[filter] oracle_homes`: "auto", "off" or a list of home directories.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum OracleHomes {
    Word(String),
    List(Vec<PathBuf>),
}

/// The disk-query tools allowed read-class passthrough by default (the
/// ones present are used): multipathd's path checkers and udev's WWID
/// reader, smartmontools, sg3_utils' query commands, nvme-cli.
pub const DEFAULT_QUERY_TOOLS: &[&str] = &[
    "/usr/sbin/multipathd",
    "/sbin/multipathd",
    "/usr/lib/udev/scsi_id",
    "/lib/udev/scsi_id",
    "/usr/sbin/smartctl",
    "/usr/sbin/smartd",
    "/usr/bin/sg_inq",
    "/usr/bin/sg_readcap",
    "/usr/bin/sg_vpd",
    "/usr/bin/sg_turs",
    "/usr/bin/sg_luns",
    "/usr/bin/sg_logs",
    "/usr/bin/sg_modes",
    "/usr/sbin/nvme",
];

/// One `[[container]]`: a container found by its cgroup-v2 path, the writers
/// allowed in it (users and groups as the container sees them), the labels
/// presented to it as device nodes, and its rights on the control socket.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Container {
    /// `[A-Za-z0-9_.-]{1,64}`, unique: the name in status, events and
    /// `/dev/asmguard/containers/<name>`.
    pub name: String,
    /// cgroup-v2 path patterns relative to the cgroup2 mount (no leading `/`);
    /// `*` matches within one path component. A task is in the container when
    /// its cgroup or any ancestor matches one.
    pub cgroup: Vec<String>,
    /// Anything in the container may write (`allow_users`/`allow_groups` empty).
    #[serde(default)]
    pub allow_all: bool,
    /// Users as the container sees them: names from its `/etc/passwd`, or numbers.
    #[serde(default)]
    pub allow_users: Vec<String>,
    /// Groups as the container sees them: names from its `/etc/group`, or numbers.
    #[serde(default)]
    pub allow_groups: Vec<String>,
    /// Labels (or `"*"`) made as device nodes in `/dev/asmguard/containers/<name>/`.
    #[serde(default)]
    pub present: Vec<String>,
    /// The nodes' owner as the container sees it; `None`: `[paths] owner`.
    #[serde(default)]
    pub owner: Option<String>,
    /// The nodes' group as the container sees it; `None`: `[paths] group`.
    #[serde(default)]
    pub group: Option<String>,
    /// The nodes' mode; `None`: `[paths] mode`.
    #[serde(default)]
    pub mode: Option<Mode>,
    /// Container group whose members may read over the socket; `None`: `[socket] admin_group`.
    #[serde(default)]
    pub admin_group: Option<String>,
    /// That group and the container's root may also change state.
    #[serde(default)]
    pub admin: bool,
}

/// `[daemon]`: where the daemon keeps its runtime state.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DaemonSection {
    /// The filter's runtime state (`filter.state`: per-disk modes, `filter
    /// disable`) and reclaim's checkpoints (`reclaim/<LABEL>.json`). Under /run
    /// they last until reboot. `None`: the socket's directory.
    pub runtime_dir: Option<PathBuf>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Devices {
    pub include: Vec<String>,
    pub exclude: Vec<String>,
    pub scan_order: Vec<String>,
    /// Every this many seconds each label sector is read again, spread over
    /// the interval: a label another host wrote on a shared disk fires no
    /// device event here. 0: off.
    pub label_watch_seconds: u64,
    /// Manage unlabelled disks with an ASM disk header by their ASM identity (no
    /// write): see `asmguard_devices::pattern::AsmMembers`.
    pub manage_asm_members: bool,
    /// LUN identity -> the name such a disk is managed under (else its header's
    /// disk name).
    pub member_names: std::collections::BTreeMap<String, String>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Paths {
    pub owner: String,
    pub group: String,
    pub mode: Mode,
    /// Compatibility links beside `/dev/asmguard/disks/<LABEL>`, made by the same
    /// udev rule (so the same node, owner, group and mode): `"oracleasm"` for
    /// ASMLib's `/dev/oracleasm/disks/<LABEL>`, `"oracleafd"` for AFD's
    /// `/dev/oracleafd/disks/<LABEL>`. ASM's `asm_diskstring` stays as it was.
    pub compat: Vec<String>,
}

/// The `[paths] compat` names and the directory each links in (below /dev).
pub const COMPAT_LINKS: [(&str, &str); 2] = [
    ("oracleasm", "oracleasm/disks"),
    ("oracleafd", "oracleafd/disks"),
];

/// A file mode: `"0660"` (string) or `0o660` (TOML octal integer).
#[derive(Debug, Clone, Copy, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum Mode {
    Text(ModeText),
    Number(u32),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModeText(pub Option<u32>);

impl<'de> Deserialize<'de> for ModeText {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        let ok = !s.is_empty() && s.len() <= 4 && s.chars().all(|c| ('0'..='7').contains(&c));
        Ok(ModeText(if ok {
            u32::from_str_radix(&s, 8).ok()
        } else {
            None
        }))
    }
}

impl Mode {
    pub fn value(&self) -> Option<u32> {
        match *self {
            Mode::Text(ModeText(v)) => v,
            Mode::Number(n) if n <= 0o7777 => Some(n),
            Mode::Number(_) => None,
        }
    }
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Socket {
    pub path: PathBuf,
    pub admin_group: String,
    pub timeout_seconds: u64,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Metrics {
    pub listen: String,
    /// Trace the I/O latency of every disk, not only the labelled ones.
    pub trace_all_disks: bool,
    /// The largest single-block I/O in bytes (the database block size): the
    /// `size="single"` latency histograms hold I/Os up to it, `multi` larger ones.
    pub single_block_bytes: u32,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Filter {
    /// What the filter does on a disk no `asmguardctl filter` command set.
    pub mode: FilterMode,
    pub allow_users: Vec<String>,
    pub allow_groups: Vec<String>,
    pub allow_executables: Vec<PathBuf>,
    /// Oracle homes whose own binaries, run by their owner, may write.
    pub oracle_homes: OracleHomes,
    /// Disk-query tools: read-class passthrough only, also as host root
    /// holding CAP_SYS_RAWIO.
    pub query_tools: Vec<PathBuf>,
    /// Refuse to start when no filter backend can load (neither the BPF LSM nor
    /// the cgroup-device fallback), instead of running UNPROTECTED. Off by
    /// default: labels and the stable disk paths are what ASM needs to start,
    /// and an unprotected daemon says so loudly (status, exit code, metric, log).
    pub require_protection: bool,
}

/// `[filter] mode`: `enforce` (deny), `audit` (log and allow) or `off`. Any
/// other word is refused when the file is read, with the key and these three.
/// The filter's own mode type (one for the configuration, the maps and the
/// metrics).
pub use asmguard_filter_types::Mode as FilterMode;

impl Default for Devices {
    fn default() -> Self {
        let r = asmguard_devices::pattern::Rules::default();
        Devices {
            include: r.include,
            exclude: r.exclude,
            scan_order: r.scan_order,
            label_watch_seconds: 3,
            manage_asm_members: false,
            member_names: Default::default(),
        }
    }
}

impl Default for Paths {
    fn default() -> Self {
        Paths {
            owner: "grid".into(),
            group: "asmadmin".into(),
            mode: Mode::Text(ModeText(Some(0o660))),
            compat: Vec::new(),
        }
    }
}

impl Default for Socket {
    fn default() -> Self {
        Socket {
            path: PathBuf::from(asmguard_proto::DEFAULT_SOCKET),
            admin_group: "asmadmin".into(),
            timeout_seconds: 60,
        }
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            listen: "127.0.0.1:9465".into(),
            trace_all_disks: false,
            single_block_bytes: 8192,
        }
    }
}

impl Default for Filter {
    fn default() -> Self {
        Filter {
            mode: FilterMode::Enforce,
            allow_users: vec!["grid".into(), "oracle".into()],
            allow_groups: vec!["asmadmin".into(), "asmdba".into(), "oinstall".into()],
            allow_executables: vec![],
            oracle_homes: OracleHomes::Word("auto".into()),
            query_tools: DEFAULT_QUERY_TOOLS.iter().map(PathBuf::from).collect(),
            require_protection: false,
        }
    }
}

impl Config {
    pub fn rules(&self) -> asmguard_devices::pattern::Rules {
        asmguard_devices::pattern::Rules {
            include: self.devices.include.clone(),
            exclude: self.devices.exclude.clone(),
            scan_order: self.devices.scan_order.clone(),
            asm_members: asmguard_devices::pattern::AsmMembers {
                enabled: self.devices.manage_asm_members,
                names: self.devices.member_names.clone(),
            },
        }
    }

    pub fn mode(&self) -> u32 {
        self.paths.mode.value().unwrap_or(0o660)
    }
}

fn valid_name(s: &str) -> bool {
    // POSIX-ish user/group names as useradd accepts them.
    let mut c = s.chars();
    matches!(c.next(), Some(f) if f.is_ascii_lowercase() || f == '_')
        && s.len() <= 32
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

fn valid_pattern(s: &str) -> bool {
    !s.is_empty()
        && !s.contains(char::is_whitespace)
        && !s.contains(char::is_control)
        && !s.starts_with('/')
}

/// One-line config error naming the file and the key.
fn key_err(file: &str, key: &str, msg: impl std::fmt::Display) -> String {
    format!("{file}: key `{key}`: {msg}")
}

/// Parse and validate config text. `file` names it in messages.
pub fn parse(text: &str, file: &str) -> Result<Config, String> {
    let cfg: Config = toml::from_str(text).map_err(|e| toml_error(text, file, &e))?;
    validate(&cfg, file)?;
    Ok(cfg)
}

/// `key`'s values are all valid `what` (user, group) names.
fn names<'a>(
    file: &str,
    key: &str,
    what: &str,
    values: impl IntoIterator<Item = &'a String>,
) -> Result<(), String> {
    match values.into_iter().find(|v| !valid_name(v)) {
        Some(v) => Err(key_err(file, key, format!("{v:?} is not a {what} name"))),
        None => Ok(()),
    }
}

/// A device node mode: octal, no special bits, no write for others.
fn check_mode(file: &str, key: &str, mode: &Mode) -> Result<(), String> {
    match mode.value() {
        Some(m) if m & 0o7000 == 0 && m & 0o002 == 0 => Ok(()),
        Some(m) => {
            // `mode = 660` is the decimal number 660 (octal 1224): TOML keeps
            // no radix, so say how to write what was meant.
            let hint = match *mode {
                Mode::Number(n) => format!(
                    "the number {n} is the mode {m:04o}; write the mode as a string, \"0660\" (or as 0o660)"
                ),
                Mode::Text(_) => format!(
                    "{m:04o} gives others write access or sets special bits: use e.g. \"0660\""
                ),
            };
            Err(key_err(file, key, hint))
        }
        None => Err(key_err(
            file,
            key,
            "is not an octal file mode such as \"0660\"",
        )),
    }
}

/// A user or group as a container sees it: a name or a number.
fn valid_name_or_id(s: &str) -> bool {
    valid_name(s) || (!s.is_empty() && s.len() <= 10 && s.parse::<u32>().is_ok())
}

/// `key`'s values are all user/group names or numbers.
fn names_or_ids<'a>(
    file: &str,
    key: &str,
    what: &str,
    values: impl IntoIterator<Item = &'a String>,
) -> Result<(), String> {
    match values.into_iter().find(|v| !valid_name_or_id(v)) {
        Some(v) => Err(key_err(
            file,
            key,
            format!("{v:?} is not a {what} name or number"),
        )),
        None => Ok(()),
    }
}

/// Why `p` is not a cgroup path pattern; `None` when it is one.
fn why_not_cgroup_pattern(p: &str) -> Option<&'static str> {
    if p.is_empty() {
        Some("is empty")
    } else if p.starts_with('/') {
        Some("starts with `/`: give the path below the cgroup2 mount, e.g. \"lxc.payload.rac1\"")
    } else if p.contains(char::is_control) {
        Some("contains a control character")
    } else if p.split('/').any(|c| c.is_empty()) {
        Some("has an empty path component (`//` or a trailing `/`)")
    } else if p.split('/').any(|c| c == "." || c == "..") {
        Some("has a `.` or `..` component")
    } else {
        None
    }
}

fn valid_container_name(s: &str) -> bool {
    (1..=64).contains(&s.len())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
        && s != "."
        && s != ".."
}

fn validate_containers(c: &Config, file: &str) -> Result<(), String> {
    for (i, ct) in c.container.iter().enumerate() {
        let key = |k: &str| format!("container[{i}].{k}");
        if !valid_container_name(&ct.name) {
            return Err(key_err(
                file,
                &key("name"),
                format!(
                    "{:?} is not a container name (1 to 64 of A-Z, a-z, 0-9, _ . -)",
                    ct.name
                ),
            ));
        }
        if let Some(j) = c.container[..i].iter().position(|o| o.name == ct.name) {
            return Err(key_err(
                file,
                &key("name"),
                format!("{:?} is also the name of container[{j}]", ct.name),
            ));
        }
        if ct.cgroup.is_empty() {
            return Err(key_err(
                file,
                &key("cgroup"),
                "is empty: give at least one cgroup path pattern, e.g. \"lxc.payload.rac1\"",
            ));
        }
        for p in &ct.cgroup {
            if let Some(why) = why_not_cgroup_pattern(p) {
                return Err(key_err(file, &key("cgroup"), format!("{p:?} {why}")));
            }
        }
        if ct.allow_all && !(ct.allow_users.is_empty() && ct.allow_groups.is_empty()) {
            return Err(key_err(
                file,
                &key("allow_all"),
                "is true with allow_users or allow_groups: give either allow_all or the users and groups",
            ));
        }
        names_or_ids(file, &key("allow_users"), "user", &ct.allow_users)?;
        names_or_ids(file, &key("allow_groups"), "group", &ct.allow_groups)?;
        for l in &ct.present {
            if l == "*" {
                continue;
            }
            match asmguard_format::label::Label::new(l) {
                Err(e) => return Err(key_err(file, &key("present"), e)),
                Ok(up) if up.as_str() != l => {
                    return Err(key_err(
                        file,
                        &key("present"),
                        format!("{l:?}: labels are upper-case, write {:?}", up.as_str()),
                    ))
                }
                Ok(_) => {}
            }
        }
        names_or_ids(file, &key("owner"), "user", &ct.owner)?;
        names_or_ids(file, &key("group"), "group", &ct.group)?;
        if let Some(m) = &ct.mode {
            check_mode(file, &key("mode"), m)?;
        }
        names_or_ids(file, &key("admin_group"), "group", &ct.admin_group)?;
    }
    Ok(())
}

fn validate_rules(c: &Config, file: &str) -> Result<(), String> {
    match &c.filter.oracle_homes {
        OracleHomes::Word(w) if w == "auto" || w == "off" => {}
        OracleHomes::Word(w) => {
            return Err(key_err(
                file,
                "filter.oracle_homes",
                format!("{w:?} is neither \"auto\", \"off\" nor a list of home directories"),
            ))
        }
        OracleHomes::List(l) => {
            if let Some(h) = l.iter().find(|h| !h.is_absolute()) {
                return Err(key_err(
                    file,
                    "filter.oracle_homes",
                    format!("{} is not an absolute path", h.display()),
                ));
            }
        }
    }
    if let Some(t) = c.filter.query_tools.iter().find(|t| !t.is_absolute()) {
        return Err(key_err(
            file,
            "filter.query_tools",
            format!("{} is not an absolute path", t.display()),
        ));
    }
    if c.rule.len() > MAX_CONFIG_RULES {
        return Err(key_err(
            file,
            "rule",
            format!("{} rules: at most {MAX_CONFIG_RULES}", c.rule.len()),
        ));
    }
    for (i, r) in c.rule.iter().enumerate() {
        let key = |k: &str| format!("rule[{i}].{k}");
        if !valid_container_name(&r.name) {
            return Err(key_err(
                file,
                &key("name"),
                format!(
                    "{:?} is not a rule name (1 to 64 of A-Z, a-z, 0-9, _ . -)",
                    r.name
                ),
            ));
        }
        if let Some(j) = c.rule[..i].iter().position(|o| o.name == r.name) {
            return Err(key_err(
                file,
                &key("name"),
                format!("{:?} is also the name of rule[{j}]", r.name),
            ));
        }
        if r.users.is_empty()
            && r.groups.is_empty()
            && r.executables.is_empty()
            && r.units.is_empty()
            && r.cgroups.is_empty()
        {
            return Err(key_err(
                file,
                &key("name"),
                "has no condition: give users, groups, executables, units or cgroups (a rule without one would allow every process)",
            ));
        }
        names_or_ids(file, &key("users"), "user", &r.users)?;
        names_or_ids(file, &key("groups"), "group", &r.groups)?;
        if let Some(x) = r.executables.iter().find(|x| !x.is_absolute()) {
            return Err(key_err(
                file,
                &key("executables"),
                format!("{} is not an absolute path", x.display()),
            ));
        }
        for u in &r.units {
            let ok = [".service", ".scope", ".slice"]
                .iter()
                .any(|s| u.ends_with(s))
                && !u.contains('/')
                && u.len() <= 256
                && !u.contains(char::is_control);
            if !ok {
                return Err(key_err(
                    file,
                    &key("units"),
                    format!("{u:?} is not a systemd unit name such as \"oracle-ohasd.service\""),
                ));
            }
        }
        for p in &r.cgroups {
            if let Some(why) = why_not_cgroup_pattern(p) {
                return Err(key_err(file, &key("cgroups"), format!("{p:?} {why}")));
            }
        }
    }
    Ok(())
}

fn validate(c: &Config, file: &str) -> Result<(), String> {
    validate_rules(c, file)?;
    if c.filter.mode == FilterMode::Fenced {
        return Err(key_err(
            file,
            "filter.mode",
            "`fenced` is the daemon's own mode for a disk while a reclaim runs on it: configure `enforce`, `audit` or `off`".to_string(),
        ));
    }
    for (key, list) in [
        ("devices.include", &c.devices.include),
        ("devices.exclude", &c.devices.exclude),
        ("devices.scan_order", &c.devices.scan_order),
    ] {
        if let Some(p) = list.iter().find(|p| !valid_pattern(p)) {
            return Err(key_err(
                file,
                key,
                format!("{p:?} is not a device name pattern (kernel names like \"sd*\" or \"mapper/mpath*\", no /dev/ prefix)"),
            ));
        }
    }
    if c.devices.include.is_empty() {
        return Err(key_err(
            file,
            "devices.include",
            "is empty: no device would ever be looked at",
        ));
    }
    names(file, "paths.owner", "user", [&c.paths.owner])?;
    names(file, "paths.group", "group", [&c.paths.group])?;
    check_mode(file, "paths.mode", &c.paths.mode)?;
    for (i, name) in c.paths.compat.iter().enumerate() {
        if !COMPAT_LINKS.iter().any(|(n, _)| n == name) {
            return Err(key_err(
                file,
                "paths.compat",
                format!("{name:?} is not one of \"oracleasm\", \"oracleafd\""),
            ));
        }
        if c.paths.compat[..i].contains(name) {
            return Err(key_err(
                file,
                "paths.compat",
                format!("{name:?} is listed twice"),
            ));
        }
    }
    if !c.socket.path.is_absolute() {
        return Err(key_err(
            file,
            "socket.path",
            format!("{} is not an absolute path", c.socket.path.display()),
        ));
    }
    if c.socket.path.file_name().is_none()
        || c.socket.path.as_os_str().as_encoded_bytes().ends_with(b"/")
        || c.socket.path.as_os_str().as_encoded_bytes().contains(&0)
    {
        return Err(key_err(
            file,
            "socket.path",
            format!(
                "{:?} names no socket file: use a file path such as {:?}",
                c.socket.path,
                asmguard_paths::DEFAULT_SOCKET
            ),
        ));
    }
    if c.socket.path.as_os_str().len() > 107 {
        return Err(key_err(
            file,
            "socket.path",
            "is longer than a unix socket path may be (107 bytes)",
        ));
    }
    if c.devices.label_watch_seconds > 3600 {
        return Err(key_err(
            file,
            "devices.label_watch_seconds",
            "must be between 0 (off) and 3600",
        ));
    }
    let mut seen = std::collections::BTreeMap::new();
    for (lun, name) in &c.devices.member_names {
        let key = format!("devices.member_names.{lun}");
        if lun.trim().is_empty() {
            return Err(key_err(
                file,
                "devices.member_names",
                "a LUN identity is empty",
            ));
        }
        let l = asmguard_format::label::Label::new(name).map_err(|e| key_err(file, &key, e))?;
        if l.as_str() != name {
            return Err(key_err(
                file,
                &key,
                format!("{name:?} is not upper case: write {:?}", l.as_str()),
            ));
        }
        if let Some(other) = seen.insert(name.clone(), lun.clone()) {
            return Err(key_err(
                file,
                &key,
                format!("{name} is already the name of {other}: names must be unique"),
            ));
        }
    }
    if !c.devices.member_names.is_empty() && !c.devices.manage_asm_members {
        return Err(key_err(
            file,
            "devices.member_names",
            "names disks only under `manage_asm_members = true`: set it, or remove the names",
        ));
    }
    if let Some(d) = &c.daemon.runtime_dir {
        if !d.is_absolute() {
            return Err(key_err(
                file,
                "daemon.runtime_dir",
                format!("{} is not an absolute path", d.display()),
            ));
        }
    }
    names(file, "socket.admin_group", "group", [&c.socket.admin_group])?;
    if c.socket.timeout_seconds == 0 || c.socket.timeout_seconds > 3600 {
        return Err(key_err(
            file,
            "socket.timeout_seconds",
            "must be between 1 and 3600",
        ));
    }
    if c.metrics.listen.parse::<SocketAddr>().is_err() {
        return Err(key_err(
            file,
            "metrics.listen",
            format!(
                "{:?} is not an address:port such as \"127.0.0.1:9465\"",
                c.metrics.listen
            ),
        ));
    }
    if !(512..=1 << 30).contains(&c.metrics.single_block_bytes) {
        return Err(key_err(
            file,
            "metrics.single_block_bytes",
            format!(
                "{} is not between 512 and 1073741824 (the database block size in bytes, e.g. 8192)",
                c.metrics.single_block_bytes
            ),
        ));
    }
    names(file, "filter.allow_users", "user", &c.filter.allow_users)?;
    names(file, "filter.allow_groups", "group", &c.filter.allow_groups)?;
    if let Some(x) = c.filter.allow_executables.iter().find(|x| !x.is_absolute()) {
        return Err(key_err(
            file,
            "filter.allow_executables",
            format!("{} is not an absolute path", x.display()),
        ));
    }
    validate_containers(c, file)
}

/// Turn a TOML error into one line: file, line, the key, what is wrong.
fn toml_error(text: &str, file: &str, e: &toml::de::Error) -> String {
    let msg = e.message().replace('\n', " ").trim().to_string();
    let Some(span) = e.span() else {
        return format!("{file}: {msg}");
    };
    let start = span.start.min(text.len());
    let line_no = text[..start].matches('\n').count() + 1;
    let line = text.lines().nth(line_no - 1).unwrap_or("").trim();
    // The section the line is in.
    let section = text[..start]
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('[') && l.ends_with(']'))
        .map(|l| l.trim_matches(|c| c == '[' || c == ']').trim().to_string());
    let key = if line.starts_with('[') {
        None
    } else {
        line.split('=')
            .next()
            .map(|k| k.trim().trim_matches('"').to_string())
            .filter(|k| !k.is_empty())
    };
    let full = match (section, key) {
        (Some(s), Some(k)) if !line.starts_with('[') => format!("{s}.{k}"),
        (None, Some(k)) => k,
        (Some(s), _) => s,
        (None, None) => String::new(),
    };
    if full.is_empty() {
        format!("{file}:{line_no}: {msg}")
    } else {
        format!("{file}:{line_no}: key `{full}`: {msg}")
    }
}

/// Load the config: `path` given explicitly must exist; the default path may be
/// missing (built-in defaults then).
pub fn load(path: Option<&Path>) -> Result<(Config, String), String> {
    let (p, explicit) = match path {
        Some(p) => (p.to_path_buf(), true),
        None => (PathBuf::from(DEFAULT_PATH), false),
    };
    let shown = p.display().to_string();
    match std::fs::read_to_string(&p) {
        Ok(t) => Ok((parse(&t, &shown)?, shown)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => Ok((
            Config::default(),
            format!("{shown} (absent: built-in defaults)"),
        )),
        Err(e) => Err(format!("{shown}: cannot read the configuration: {e}")),
    }
}

/// The udev rules for this configuration's owner, group and mode: what
/// `asmguardctl udev-rules` prints and `udev-rules/99-asmguard.rules` holds (defaults).
/// `paths` are the system's roots (the caller's): the rules name the
/// directory the daemon writes each device's answer to (`Paths::links_dir`).
pub fn udev_rules(c: &Config, paths: &asmguard_paths::Paths) -> String {
    let (o, g, m) = (&c.paths.owner, &c.paths.group, c.mode());
    let links = paths.links_dir();
    let links = links.display();
    let compat: String = COMPAT_LINKS
        .iter()
        .filter(|(n, _)| c.paths.compat.iter().any(|x| x == n))
        .map(|(n, dir)| {
            format!("# [paths] compat \"{n}\": the same disk as /dev/{dir}/<LABEL>.\nSYMLINK+=\"{dir}/$env{{ASMGUARD_LABEL}}\"\n")
        })
        .collect();
    format!(
        r#"# asmguard: stable paths for labelled ASM disks (99-asmguard.rules).
# Generated by `asmguardctl udev-rules` for owner {o}, group {g}, mode {m:04o}.
#
# /dev/asmguard/disks/<LABEL> points at the disk's top device: the multipath device,
# never one of its sdX paths. The label is the one asmguardd manages the device under
# (ASMGUARD_LABEL in {links}/<kernel name>, written by the daemon before it
# sends the change event), never the label bytes alone: a header forged on another disk
# cannot take a link. "-": a device with an ASM label header it manages under no label.
# No inotify watch on managed disks: every close after a write by ASM would make udev
# re-probe the disk; asmguardd sends a change event itself after each label change.
ACTION=="remove", GOTO="asmguard_end"
SUBSYSTEM!="block", GOTO="asmguard_end"
KERNEL=="ram*|zram*|sr*|fd*", GOTO="asmguard_end"
# A path below a multipath device: no link (the multipath device above gets it).
ENV{{DM_MULTIPATH_DEVICE_PATH}}=="1", GOTO="asmguard_end"
# A dm device that is not ready (no table yet, suspended): leave it alone.
KERNEL=="dm-*", ENV{{DM_UDEV_DISABLE_OTHER_RULES_FLAG}}=="1", GOTO="asmguard_end"
KERNEL=="dm-*", ENV{{DM_SUSPENDED}}=="1", GOTO="asmguard_end"
# blkid's probe, when no earlier rule ran it.
ENV{{ID_FS_TYPE}}=="", IMPORT{{builtin}}="blkid"
ENV{{ID_FS_TYPE}}!="oracleasm", GOTO="asmguard_end"
IMPORT{{file}}="{links}/%k"
ENV{{ASMGUARD_LABEL}}=="", GOTO="asmguard_end"
ENV{{ASMGUARD_LABEL}}=="-", GOTO="asmguard_end"
OPTIONS+="nowatch"
OWNER="{o}", GROUP="{g}", MODE="{m:04o}"
SYMLINK+="asmguard/disks/$env{{ASMGUARD_LABEL}}"
{compat}LABEL="asmguard_end"
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_udev_rules_are_the_default_ones() {
        let shipped = include_str!("../../../udev-rules/99-asmguard.rules");
        assert_eq!(
            shipped,
            udev_rules(&Config::default(), &asmguard_paths::Paths::default())
        );
        let c = parse(
            "[paths]\nowner = \"nobody\"\ngroup = \"nogroup\"\nmode = \"0640\"\n",
            "t",
        )
        .unwrap();
        let r = udev_rules(&c, &asmguard_paths::Paths::default());
        assert!(
            r.contains(r#"OWNER="nobody", GROUP="nogroup", MODE="0640""#),
            "{r}"
        );
        assert!(!r.contains("oracleasm/disks") && !r.contains("oracleafd/disks"));
    }

    #[test]
    fn compat_links_are_in_the_same_rule() {
        let c = parse("[paths]\ncompat = [\"oracleafd\", \"oracleasm\"]\n", "t").unwrap();
        let r = udev_rules(&c, &asmguard_paths::Paths::default());
        let own = r.find("OWNER=").unwrap();
        let ours = r
            .find(r#"SYMLINK+="asmguard/disks/$env{ASMGUARD_LABEL}""#)
            .unwrap();
        let asm = r
            .find(r#"SYMLINK+="oracleasm/disks/$env{ASMGUARD_LABEL}""#)
            .unwrap();
        let afd = r
            .find(r#"SYMLINK+="oracleafd/disks/$env{ASMGUARD_LABEL}""#)
            .unwrap();
        let end = r.find(r#"LABEL="asmguard_end""#).unwrap();
        assert!(own < ours && ours < asm && asm < afd && afd < end, "{r}");
        for (text, want) in [
            ("[paths]\ncompat = [\"asmlib\"]\n", "is not one of"),
            (
                "[paths]\ncompat = [\"oracleasm\", \"oracleasm\"]\n",
                "listed twice",
            ),
        ] {
            let e = parse(text, "cfg.toml").unwrap_err();
            assert!(e.contains("`paths.compat`") && e.contains(want), "{e}");
        }
    }

    #[test]
    fn shipped_example_is_the_defaults() {
        let text = include_str!("../../../daemon/asmguard.toml");
        assert_eq!(parse(text, "asmguard.toml").unwrap(), Config::default());
    }

    #[test]
    fn empty_is_defaults() {
        let c = parse("", "t").unwrap();
        assert_eq!(c, Config::default());
        assert_eq!(c.mode(), 0o660);
        assert_eq!(c.paths.owner, "grid");
        assert_eq!(c.socket.path, PathBuf::from("/run/asmguard/asmguard.sock"));
    }

    #[test]
    fn values_are_read() {
        let c = parse(
            "[devices]\ninclude = [\"loop7\"]\n[paths]\nmode = \"0640\"\nowner = \"nobody\"\n[filter]\nmode = \"audit\"\n",
            "t",
        )
        .unwrap();
        assert_eq!(c.devices.include, vec!["loop7"]);
        assert_eq!(c.mode(), 0o640);
        assert_eq!(c.filter.mode, FilterMode::Audit);
        assert_eq!(parse("[paths]\nmode = 0o600\n", "t").unwrap().mode(), 0o600);
        let d = parse("[daemon]\nruntime_dir = \"/run/ag\"\n", "t").unwrap();
        assert_eq!(d.daemon.runtime_dir, Some(PathBuf::from("/run/ag")));
    }

    #[test]
    fn rules_and_homes_parse() {
        let c = parse(
            "[filter]\noracle_homes = [\"/u01/app/19c/grid\"]\n\
             [[rule]]\nname = \"ohasd\"\nusers = [\"grid\"]\n\
             executables = [\"/u01/app/19c/grid/bin/oracle\"]\nunits = [\"oracle-ohasd.service\"]\n",
            "t.toml",
        )
        .unwrap();
        assert_eq!(
            c.filter.oracle_homes,
            OracleHomes::List(vec![PathBuf::from("/u01/app/19c/grid")])
        );
        assert_eq!(c.rule.len(), 1);
        assert_eq!(c.rule[0].users, vec!["grid"]);
        assert!(c.rule[0]
            .place_patterns()
            .contains(&"*.slice/oracle-ohasd.service".to_string()));
        let d = Config::default();
        assert_eq!(d.filter.oracle_homes, OracleHomes::Word("auto".into()));
        assert!(d
            .filter
            .query_tools
            .contains(&PathBuf::from("/usr/sbin/multipathd")));
    }

    #[test]
    fn asm_members_and_their_names() {
        let c = parse(
            "[devices]\nmanage_asm_members = true\n[devices.member_names]\n\"36000c29a\" = \"ASM_DISK1\"\n",
            "t.toml",
        )
        .unwrap();
        let r = c.rules();
        assert!(r.asm_members.enabled);
        assert_eq!(r.asm_members.names["36000c29a"], "ASM_DISK1");
        assert!(!Config::default().rules().asm_members.enabled);
        for (t, want) in [
            (
                "[devices]\nmanage_asm_members = true\n[devices.member_names]\n\"x\" = \"asm-disk1\"\n",
                "t.toml: key `devices.member_names.x`: label \"asm-disk1\" contains '-'",
            ),
            (
                "[devices]\nmanage_asm_members = true\n[devices.member_names]\n\"x\" = \"disk1\"\n",
                "is not upper case: write \"DISK1\"",
            ),
            (
                "[devices]\nmanage_asm_members = true\n[devices.member_names]\n\"x\" = \"D1\"\n\"y\" = \"D1\"\n",
                "D1 is already the name of x",
            ),
            (
                "[devices.member_names]\n\"x\" = \"D1\"\n",
                "only under `manage_asm_members = true`",
            ),
        ] {
            let e = parse(t, "t.toml").unwrap_err();
            assert!(e.contains(want), "{t:?} -> {e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn errors_name_the_key() {
        let cases = [
            ("[devices]\nincluded = [\"x\"]\n", "devices.included"),
            ("[paths]\nmode = \"0668\"\n", "paths.mode"),
            ("[paths]\nmode = \"0666\"\n", "paths.mode"),
            ("[paths]\nowner = \"Grid User\"\n", "paths.owner"),
            ("[socket]\npath = \"relative.sock\"\n", "socket.path"),
            ("[daemon]\nruntime_dir = \"run\"\n", "daemon.runtime_dir"),
            (
                "[devices]\nlabel_watch_seconds = 7200\n",
                "devices.label_watch_seconds",
            ),
            (
                "[socket]\ntimeout_seconds = \"ten\"\n",
                "socket.timeout_seconds",
            ),
            ("[metrics]\nlisten = \"localhost\"\n", "metrics.listen"),
            (
                "[metrics]\nsingle_block_bytes = 0\n",
                "metrics.single_block_bytes",
            ),
            ("[filter]\nmode = \"block\"\n", "filter.mode"),
            (
                "[filter]\nallow_executables = [\"sqlplus\"]\n",
                "filter.allow_executables",
            ),
            ("[devices]\ninclude = [\"/dev/sdb\"]\n", "devices.include"),
            ("[bogus]\nx = 1\n", "bogus"),
            // Accepted before:
            ("[socket]\npath = \"/\"\n", "socket.path"),
            ("[socket]\npath = \"/run/asmguard/\"\n", "socket.path"),
            ("[devices]\ninclude = [\"sd\\u0000b\"]\n", "devices.include"),
            ("debug = true\n", "debug"),
            ("[filter]\noracle_homes = \"yes\"\n", "filter.oracle_homes"),
            ("[filter]\noracle_homes = [\"u01\"]\n", "filter.oracle_homes"),
            ("[filter]\nquery_tools = [\"sg_inq\"]\n", "filter.query_tools"),
            ("[[rule]]\nname = \"a\"\n", "rule[0].name"),
            ("[[rule]]\nname = \"a b\"\nusers = [\"grid\"]\n", "rule[0].name"),
            (
                "[[rule]]\nname = \"a\"\nusers = [\"grid\"]\n[[rule]]\nname = \"a\"\nusers = [\"x\"]\n",
                "rule[1].name",
            ),
            ("[[rule]]\nname = \"a\"\nexecutables = [\"oracle\"]\n", "rule[0].executables"),
            ("[[rule]]\nname = \"a\"\nunits = [\"ohasd\"]\n", "rule[0].units"),
            ("[[rule]]\nname = \"a\"\ncgroups = [\"/x\"]\n", "rule[0].cgroups"),
            ("[[rule]]\nname = \"a\"\nuser = [\"grid\"]\n", "user"),
        ];
        for (text, key) in cases {
            let e = parse(text, "cfg.toml").unwrap_err();
            assert!(e.contains(&format!("`{key}`")), "{text:?} -> {e}");
            assert!(e.starts_with("cfg.toml"), "{e}");
            assert!(!e.contains('\n'), "one line: {e}");
        }
        // An unknown filter mode is refused at load, naming the allowed words
        // (it fell back to enforce before).
        let e = parse("[filter]\nmode = \"block\"\n", "cfg.toml").unwrap_err();
        assert!(e.starts_with("cfg.toml:2: key `filter.mode`"), "{e}");
        for w in ["`enforce`", "`audit`", "`off`", "block"] {
            assert!(e.contains(w), "{w}: {e}");
        }
        for (w, m) in [
            ("enforce", FilterMode::Enforce),
            ("audit", FilterMode::Audit),
            ("off", FilterMode::Off),
        ] {
            let c = parse(&format!("[filter]\nmode = \"{w}\"\n"), "t").unwrap();
            assert_eq!((c.filter.mode, c.filter.mode.as_str()), (m, w));
        }
        // `fenced` is the daemon's own mode for a disk being reclaimed: never
        // a configured one.
        let e = parse("[filter]\nmode = \"fenced\"\n", "cfg.toml").unwrap_err();
        assert!(e.contains("`filter.mode`") && e.contains("reclaim"), "{e}");
        // A decimal mode is not taken for the octal one: the message says how
        // to write it (it said "1224 gives others write access" before).
        let e = parse("[paths]\nmode = 660\n", "cfg.toml").unwrap_err();
        assert!(e.contains("write the mode as a string, \"0660\""), "{e}");
    }

    #[test]
    fn containers_are_read() {
        let c = parse(
            r#"
[[container]]
name = "rac1"
cgroup = ["lxc.payload.rac1"]
allow_users = ["grid", "54321"]
allow_groups = ["asmadmin"]
present = ["DATA1", "*"]
owner = "grid"
mode = "0640"
admin = true

[[container]]
name = "db.2_x-y"
cgroup = ["machine.slice/libpod-*.scope", "machine.slice/machine-db2.scope"]
allow_all = true
"#,
            "t",
        )
        .unwrap();
        assert_eq!(c.container.len(), 2);
        let r = &c.container[0];
        assert_eq!(r.name, "rac1");
        assert_eq!(r.cgroup, vec!["lxc.payload.rac1"]);
        assert_eq!(r.allow_users, vec!["grid", "54321"]);
        assert_eq!(r.present, vec!["DATA1", "*"]);
        assert_eq!(r.owner.as_deref(), Some("grid"));
        assert_eq!(r.group, None);
        assert_eq!(r.mode.and_then(|m| m.value()), Some(0o640));
        assert_eq!(r.admin_group, None);
        assert!(r.admin && !r.allow_all);
        assert!(c.container[1].allow_all && !c.container[1].admin);
        assert!(parse("", "t").unwrap().container.is_empty());
    }

    #[test]
    fn container_errors_name_the_key() {
        let base = "[[container]]\nname = \"a\"\ncgroup = [\"x\"]\n";
        let cases = [
            ("[[container]]\ncgroup = [\"x\"]\n", "name", "container"),
            ("[[container]]\nname = \"a\"\n", "cgroup", "container"),
            (
                "[[container]]\nname = \"a b\"\ncgroup = [\"x\"]\n",
                "container[0].name",
                "",
            ),
            (
                "[[container]]\nname = \"\"\ncgroup = [\"x\"]\n",
                "container[0].name",
                "",
            ),
            (
                "[[container]]\nname = \"a\"\ncgroup = []\n",
                "container[0].cgroup",
                "",
            ),
            (
                "[[container]]\nname = \"a\"\ncgroup = [\"/lxc.payload.a\"]\n",
                "container[0].cgroup",
                "",
            ),
            (
                "[[container]]\nname = \"a\"\ncgroup = [\"lxc/../x\"]\n",
                "container[0].cgroup",
                "",
            ),
            (
                "[[container]]\nname = \"a\"\ncgroup = [\"a//b\"]\n",
                "container[0].cgroup",
                "",
            ),
            (
                "[[container]]\nname = \"a\"\ncgroup = [\"\"]\n",
                "container[0].cgroup",
                "",
            ),
            (
                "allow_all = true\nallow_users = [\"grid\"]\n",
                "container[0].allow_all",
                "base",
            ),
            (
                "allow_all = true\nallow_groups = [\"dba\"]\n",
                "container[0].allow_all",
                "base",
            ),
            (
                "allow_users = [\"Grid User\"]\n",
                "container[0].allow_users",
                "base",
            ),
            (
                "allow_groups = [\"-1\"]\n",
                "container[0].allow_groups",
                "base",
            ),
            ("present = [\"data1\"]\n", "container[0].present", "base"),
            ("present = [\"1DATA\"]\n", "container[0].present", "base"),
            ("owner = \"Grid\"\n", "container[0].owner", "base"),
            ("group = \"\"\n", "container[0].group", "base"),
            ("mode = \"0666\"\n", "container[0].mode", "base"),
            ("mode = 660\n", "container[0].mode", "base"),
            (
                "admin_group = \"a b\"\n",
                "container[0].admin_group",
                "base",
            ),
            ("bogus = 1\n", "container.bogus", "base"),
            (
                "[[container]]\nname = \"a\"\ncgroup = [\"y\"]\n",
                "container[1].name",
                "base",
            ),
        ];
        for (text, key, how) in cases {
            let text = if how == "base" {
                format!("{base}{text}")
            } else {
                text.to_string()
            };
            let e = parse(&text, "cfg.toml").unwrap_err();
            let want = if how == "container" {
                // serde's missing-field error: the section and the field.
                assert!(e.contains(&format!("`{key}`")), "{text:?} -> {e}");
                continue;
            } else {
                format!("`{key}`")
            };
            assert!(e.contains(&want), "{text:?} -> {e}");
            assert!(e.starts_with("cfg.toml"), "{e}");
            assert!(!e.contains('\n'), "one line: {e}");
        }
    }
}
