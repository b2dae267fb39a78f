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
//!
//! [paths]              # /dev/asmguard/disks/<LABEL> (made by udev)
//! owner = "grid"
//! group = "asmadmin"
//! mode = "0660"
//!
//! [socket]
//! path = "/run/asmguard/asmguard.sock"
//! admin_group = "asmadmin"             # may read (lsdsk, status, scan); root may write
//! timeout_seconds = 60                 # idle connections are closed after this
//!
//! [metrics]
//! listen = "127.0.0.1:9465"
//! trace_all_disks = false              # latency of every disk, not only labelled ones
//!
//! [filter]
//! mode = "enforce"                     # enforce | audit | off
//! allow_users = ["grid", "oracle"]
//! allow_groups = ["asmadmin", "asmdba", "oinstall"]   # effective, fs or supplementary gid
//! allow_executables = []               # absolute paths
//! require_protection = false           # true: refuse to start when no filter can load
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
}

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
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Paths {
    pub owner: String,
    pub group: String,
    pub mode: Mode,
}

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
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Filter {
    pub mode: String,
    pub allow_users: Vec<String>,
    pub allow_groups: Vec<String>,
    pub allow_executables: Vec<PathBuf>,
    /// Refuse to start when no filter backend can load (neither the BPF LSM nor
    /// the cgroup-device fallback), instead of running UNPROTECTED. Off by
    /// default: labels and the stable disk paths are what ASM needs to start,
    /// and an unprotected daemon says so loudly (status, exit code, metric, log).
    pub require_protection: bool,
}

impl Default for Devices {
    fn default() -> Self {
        let r = asmguard_devices::pattern::Rules::default();
        Devices {
            include: r.include,
            exclude: r.exclude,
            scan_order: r.scan_order,
            label_watch_seconds: 3,
        }
    }
}

impl Default for Paths {
    fn default() -> Self {
        Paths {
            owner: "grid".into(),
            group: "asmadmin".into(),
            mode: Mode::Text(ModeText(Some(0o660))),
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
        }
    }
}

impl Default for Filter {
    fn default() -> Self {
        Filter {
            mode: "enforce".into(),
            allow_users: vec!["grid".into(), "oracle".into()],
            allow_groups: vec!["asmadmin".into(), "asmdba".into(), "oinstall".into()],
            allow_executables: vec![],
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

fn validate(c: &Config, file: &str) -> Result<(), String> {
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
                "{:?} names no socket file: use a file path such as \"/run/asmguard/asmguard.sock\"",
                c.socket.path
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
    if !matches!(c.filter.mode.as_str(), "enforce" | "audit" | "off") {
        return Err(key_err(
            file,
            "filter.mode",
            format!("{:?} is not one of enforce, audit, off", c.filter.mode),
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
pub fn udev_rules(c: &Config) -> String {
    let (o, g, m) = (&c.paths.owner, &c.paths.group, c.mode());
    format!(
        r#"# asmguard: stable paths for labelled ASM disks (99-asmguard.rules).
# Generated by `asmguardctl udev-rules` for owner {o}, group {g}, mode {m:04o}.
#
# /dev/asmguard/disks/<LABEL> points at the disk's top device: the multipath device,
# never one of its sdX paths. The label is the one asmguardd manages the device under
# (ASMGUARD_LABEL in /run/asmguard/links/<kernel name>, written by the daemon before it
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
IMPORT{{file}}="/run/asmguard/links/%k"
ENV{{ASMGUARD_LABEL}}=="", GOTO="asmguard_end"
ENV{{ASMGUARD_LABEL}}=="-", GOTO="asmguard_end"
OPTIONS+="nowatch"
OWNER="{o}", GROUP="{g}", MODE="{m:04o}"
SYMLINK+="asmguard/disks/$env{{ASMGUARD_LABEL}}"
LABEL="asmguard_end"
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_udev_rules_are_the_default_ones() {
        let shipped = include_str!("../../../udev-rules/99-asmguard.rules");
        assert_eq!(shipped, udev_rules(&Config::default()));
        let c = parse(
            "[paths]\nowner = \"nobody\"\ngroup = \"nogroup\"\nmode = \"0640\"\n",
            "t",
        )
        .unwrap();
        let r = udev_rules(&c);
        assert!(
            r.contains(r#"OWNER="nobody", GROUP="nogroup", MODE="0640""#),
            "{r}"
        );
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
        assert_eq!(c.filter.mode, "audit");
        assert_eq!(parse("[paths]\nmode = 0o600\n", "t").unwrap().mode(), 0o600);
        let d = parse("[daemon]\nruntime_dir = \"/run/ag\"\n", "t").unwrap();
        assert_eq!(d.daemon.runtime_dir, Some(PathBuf::from("/run/ag")));
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
        ];
        for (text, key) in cases {
            let e = parse(text, "cfg.toml").unwrap_err();
            assert!(e.contains(&format!("`{key}`")), "{text:?} -> {e}");
            assert!(e.starts_with("cfg.toml"), "{e}");
            assert!(!e.contains('\n'), "one line: {e}");
        }
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
